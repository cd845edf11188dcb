"""IAM roles for Kubernetes service accounts through EKS Pod Identity, one helper for all."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from .iam_policies import pod_identity_trust_policy


@dataclass(frozen=True)
class ServiceAccountRef:
    """The only principal allowed to use the role."""

    cluster_name: str
    namespace: pulumi.Input[str]
    name: str


def pod_identity_role(
    resource_name: str,
    *,
    parent: pulumi.Resource,
    policy: pulumi.Input[str] | None = None,
    managed_policy_arn: pulumi.Input[str] | None = None,
    service_account: ServiceAccountRef | None = None,
    depends_on: list[pulumi.Resource] | None = None,
) -> aws.iam.Role:
    """A role trusted by EKS Pod Identity, with an inline ``policy`` (JSON) and/or a managed
    policy, associated with ``service_account`` (leave it out when an EKS add-on associates the
    role itself)."""
    role = aws.iam.Role(
        resource_name,
        assume_role_policy=json.dumps(pod_identity_trust_policy()),
        opts=pulumi.ResourceOptions(parent=parent),
    )
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
    if service_account is not None:
        aws.eks.PodIdentityAssociation(
            resource_name,
            cluster_name=service_account.cluster_name,
            namespace=service_account.namespace,
            service_account=service_account.name,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or []),
        )
    return role
