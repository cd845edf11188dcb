"""The EKS control plane (pulumi-eks), its access entries and the Kubernetes provider."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# Control-plane logs worth their CloudWatch cost for a security review; controllerManager and
# scheduler logs are verbose and rarely read.
CONTROL_PLANE_LOGS = ["api", "audit", "authenticator"]


@dataclass
class ClusterArgs:
    """Inputs of ``Cluster``."""

    cluster_name: str
    """EKS cluster name (also used in discovery tags)."""
    kubernetes_version: str
    """Kubernetes minor version, e.g. "1.34"."""
    auto_mode: bool
    """EKS Auto Mode (built-in system and general-purpose pools) instead of self-managed nodes."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster."""
    private_subnet_ids: pulumi.Input[list[str]]
    """Subnets for the control-plane ENIs and nodes."""
    public_subnet_ids: pulumi.Input[list[str]]
    """Subnets for internet-facing load balancers."""
    public_access_cidrs: Sequence[pulumi.Input[str]] = field(default_factory=list)
    """CIDRs allowed to reach the public API endpoint; empty disables the public endpoint."""
    admin_role_arns: Sequence[pulumi.Input[str]] = field(default_factory=list)
    """Extra IAM roles given cluster-admin through access entries."""
    private_access_cidrs: Sequence[pulumi.Input[str]] = field(default_factory=list)
    """CIDRs admitted on 443 to the private endpoint (through the cluster security group)."""
    private_access_security_group_ids: Sequence[pulumi.Input[str]] = field(default_factory=list)
    """Security groups admitted on 443 to the private endpoint."""
    tags: dict[str, str] = field(default_factory=dict)
    """Tags of the cluster."""
    secrets_kms_key_arn: pulumi.Input[str] | None = None
    """Customer-managed KMS key for envelope encryption of Kubernetes Secrets (None: EKS's default
    encryption of etcd only)."""


def kms_key_policy(account_id: str, partition: str) -> dict[str, Any]:
    """AWS KMS's default key policy: the account's root, so that IAM policies decide who uses the
    key (AWS KMS Developer Guide, key-policy-default: "Allows access to the AWS account and
    enables IAM policies"). EKS then uses it through the grant it creates for the cluster (as in
    pulumi/pulumi-eks examples/encryption-provider/index.ts at 7bf0c1b1: a key with the default
    policy and no change to the cluster role), and S3 for the weights roles' kms:Decrypt /
    kms:GenerateDataKey (their IAM policies)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EnableIamPolicies",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }


def project_kms_key(
    name: str,
    cluster_name: str,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    *,
    outlives_the_stack: bool = False,
) -> aws.kms.Key:
    """The key ``cluster.createKmsKey`` makes: symmetric, rotated automatically every year
    (AWS KMS Developer Guide, rotate-keys: EnableKeyRotation, 365 days by default), 30 days'
    deletion window, with the alias ``alias/<cluster name>``.

    ``outlives_the_stack``: something kept on destroy is encrypted with it (the weights bucket,
    ``weights.retainBucket``): the key and its alias are kept too. Destroying them would schedule
    the key's deletion, and after the 30-day window the kept objects could never be read again
    (AWS KMS Developer Guide, deleting-keys)."""
    if outlives_the_stack:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
    invoke = pulumi.InvokeOutputOptions(parent=opts.parent)
    account = aws.get_caller_identity_output(opts=invoke).account_id
    partition = aws.get_partition_output(opts=invoke).partition
    key = aws.kms.Key(
        name,
        description=f"deepseek-eks {cluster_name}: Kubernetes Secrets and model weights",
        enable_key_rotation=True,
        deletion_window_in_days=30,
        policy=pulumi.Output.all(account, partition).apply(lambda v: json.dumps(kms_key_policy(v[0], v[1]))),
        tags=tags,
        opts=opts,
    )
    aws.kms.Alias(name, name=f"alias/{cluster_name}", target_key_id=key.key_id, opts=opts)
    return key


class Cluster(pulumi.ComponentResource):
    """An EKS cluster with API authentication (access entries only), a private endpoint and a
    public one only for the listed CIDRs, control-plane audit logging, and a Kubernetes provider
    for everything installed into it."""

    cluster_name: pulumi.Output[str]
    """The EKS cluster's name, once it exists."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (secret)."""
    auto_mode_node_role_name: pulumi.Output[str]
    """Auto Mode's node IAM role name (empty string in Karpenter mode)."""
    provider: k8s.Provider
    """Kubernetes provider for this cluster; pass it to every in-cluster component."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Cluster", name, None, opts)
        access_entries = {
            f"admin-{i}": eks.AccessEntryArgs(
                principal_arn=arn,
                access_policies={
                    "admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=CLUSTER_ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )
                },
            )
            for i, arn in enumerate(args.admin_role_arns)
        }
        cluster = eks.Cluster(
            f"{name}-eks",
            name=args.cluster_name,
            version=args.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            node_associate_public_ip_address=False,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries or None,
            endpoint_private_access=True,
            endpoint_public_access=bool(args.public_access_cidrs),
            public_access_cidrs=args.public_access_cidrs or None,
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            skip_default_node_group=True,
            skip_default_security_groups=True,  # nodes use the EKS-managed cluster security group
            create_oidc_provider=False,  # workloads get AWS access through EKS Pod Identity
            auto_mode=eks.AutoModeOptionsArgs(enabled=True) if args.auto_mode else None,
            # Karpenter mode installs CoreDNS itself, once the system node group can run it.
            coredns_addon_options=None if args.auto_mode else eks.CoreDnsAddonOptionsArgs(enabled=False),
            # The VPC CNI enforces NetworkPolicies only when asked to (Auto Mode: see capacity).
            vpc_cni_options=None if args.auto_mode else eks.VpcCniOptionsArgs(enable_network_policy=True),
            tags=args.tags,
            # EKS envelope-encrypts Secrets with this key (EKS User Guide, enable-kms: it can be
            # added to an existing cluster, never removed or changed); None leaves it off.
            encryption_config_key_arn=args.secrets_kms_key_arn,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.eks = cluster
        self._admit_private_access(name, args, cluster)
        self.cluster_name = cluster.kubeconfig_json.apply(lambda _: args.cluster_name)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.auto_mode_node_role_name = cluster.auto_mode_node_role_name
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {
                "clusterSecurityGroupId": cluster.cluster_security_group_id,
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "autoModeNodeRoleName": self.auto_mode_node_role_name,
            }
        )

    def _admit_private_access(self, name: str, args: ClusterArgs, cluster: eks.Cluster) -> None:
        """443 from the deployer's networks to the private endpoint. The security group EKS creates
        for a cluster admits inbound traffic only from itself (EKS User Guide, sec-group-reqs;
        reference/upstream/endpoint-access-facts.json), so without these rules nothing outside the
        cluster, a runner in the same VPC included, reaches the private API."""
        sources = [(f"cidr-{i}", cidr, None) for i, cidr in enumerate(args.private_access_cidrs)] + [
            (f"sg-{i}", None, sg) for i, sg in enumerate(args.private_access_security_group_ids)
        ]
        for suffix, cidr, group in sources:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-access-{suffix}",
                security_group_id=cluster.cluster_security_group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                cidr_ipv4=cidr,
                referenced_security_group_id=group,
                description="Kubernetes API (private endpoint) for the deployer",
                opts=pulumi.ResourceOptions(parent=self),
            )
