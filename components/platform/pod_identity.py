"""IAM roles for Kubernetes service accounts through EKS Pod Identity, one helper for all."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from .iam_policies import eks_cluster_arn, pod_identity_trust_policy


@dataclass(frozen=True)
class ServiceAccountRef:
    """The only principal allowed to use the role."""

    cluster_name: str
    namespace: pulumi.Input[str]
    name: str
    region: str
    """The cluster's region (part of the cluster ARN the trust policy names)."""


def pod_identity_role(
    resource_name: str,
    *,
    parent: pulumi.Resource,
    service_account: ServiceAccountRef,
    policy: pulumi.Input[str] | None = None,
    managed_policy_arn: pulumi.Input[str] | None = None,
    associate: bool = True,
    depends_on: list[pulumi.Resource] | None = None,
) -> aws.iam.Role:
    """A role only ``service_account`` of its cluster can assume through EKS Pod Identity, with an
    inline ``policy`` (JSON) and/or a managed policy, associated with that service account
    (``associate=False`` when an EKS add-on associates the role itself)."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    partition = aws.get_partition_output(opts=invoke).partition
    account_id = aws.get_caller_identity_output(opts=invoke).account_id
    sa = service_account
    trust = pulumi.Output.all(partition, account_id, sa.namespace).apply(
        lambda v: json.dumps(
            pod_identity_trust_policy(
                cluster_arn=eks_cluster_arn(
                    partition=v[0], region=sa.region, account_id=v[1], cluster_name=sa.cluster_name
                ),
                namespace=v[2],
                service_account=sa.name,
            )
        )
    )
    role = aws.iam.Role(resource_name, assume_role_policy=trust, opts=pulumi.ResourceOptions(parent=parent))
    if policy is not None:
        aws.iam.RolePolicy(
            resource_name, role=role.id, policy=policy, opts=pulumi.ResourceOptions(parent=parent)
        )
    if managed_policy_arn is not None:
        aws.iam.RolePolicyAttachment(
            resource_name,
            role=role.name,
            policy_arn=managed_policy_arn,
            opts=pulumi.ResourceOptions(parent=parent),
        )
    if associate:
        aws.eks.PodIdentityAssociation(
            resource_name,
            cluster_name=sa.cluster_name,
            namespace=sa.namespace,
            service_account=sa.name,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or []),
        )
    return role
