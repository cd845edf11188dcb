"""IAM policy documents for the controllers this project runs, as plain dicts.

Why hand-written: the upstream projects (Karpenter, the AWS Load Balancer Controller) publish
policies meant to fit every installation; they carry features this project turns off (WAF and
Shield integration in the load balancer controller) and some statements wider than needed. Here
each statement is written from the AWS API calls the controller actually makes, so every
permission is visible in review and can be tested.

Why least privilege: a controller's credentials are reachable from a pod, and the inference
workload shares the cluster with them. So no action is a wildcard (no ``*``, no ``ec2:*``);
``"Resource": "*"`` appears only for actions that do not support resource-level permissions
(``Describe*``/``List*``/``Get*`` reads, ``pricing:GetProducts``) and for the load balancer
controller's listener and rule calls (see :func:`load_balancer_controller_policy`); everything
else that creates, changes or deletes is limited by ARN (partition, and region where the
controller is regional), by a ``Condition`` on the tags the controller sets on what it creates,
or by both; and ``iam:PassRole`` names exactly one role.

The module is pure Python (standard library only) so that the documents can be unit-tested
without Pulumi and rendered into ``json.dumps`` wherever a resource needs them.
:func:`assert_least_privilege` is the rule book the tests apply to every document.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

VERSION = "2012-10-17"

Policy = dict[str, Any]
Statement = dict[str, Any]

# Tags the controllers put on what they create, and which the conditions below rely on.
_NODEPOOL_TAG = "karpenter.sh/nodepool"
_NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
_REGION_TAG = "topology.kubernetes.io/region"
_EKS_CLUSTER_NAME_TAG = "eks:eks-cluster-name"
_ELBV2_CLUSTER_TAG = "elbv2.k8s.aws/cluster"


def _statement(
    sid: str,
    actions: list[str],
    resource: str | list[str],
    *,
    effect: str = "Allow",
    condition: dict[str, dict[str, Any]] | None = None,
    principal: str | dict[str, Any] | None = None,
) -> Statement:
    statement: Statement = {"Sid": sid, "Effect": effect}
    if principal is not None:
        statement["Principal"] = principal
    statement["Action"] = sorted(set(actions))
    statement["Resource"] = resource
    if condition:
        statement["Condition"] = condition
    return statement


def _document(*statements: Statement) -> Policy:
    return {"Version": VERSION, "Statement": list(statements)}


def _plain(name: str, value: str) -> str:
    """An argument that is spliced into an ARN or a condition key: no wildcards, not empty."""
    if not isinstance(value, str) or not value or any(c in value for c in "*?"):
        raise ValueError(f"{name} must be a non-empty string without wildcards, got {value!r}")
    return value


# --- trust policies ---------------------------------------------------------------------------


# The session tags EKS Pod Identity sets when it assumes a role (EKS User Guide, pod-id-role:
# eks-cluster-arn, kubernetes-namespace, kubernetes-service-account, ...), conditioned on in the
# trust policy as aws:RequestTag/<tag> (facts in reference/upstream/eks-iam-facts.json). The
# cluster ARN carries the account, so it also pins the source account.
POD_IDENTITY_CLUSTER_TAG = "eks-cluster-arn"
POD_IDENTITY_NAMESPACE_TAG = "kubernetes-namespace"
POD_IDENTITY_SERVICE_ACCOUNT_TAG = "kubernetes-service-account"


def eks_cluster_arn(*, partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """ARN of an EKS cluster (the value of Pod Identity's ``eks-cluster-arn`` session tag)."""
    for name, value in (("partition", partition), ("region", region), ("account_id", account_id)):
        _plain(name, value)
    return f"arn:{partition}:eks:{region}:{account_id}:cluster/{_plain('cluster_name', cluster_name)}"


def pod_identity_trust_policy(*, cluster_arn: str, namespace: str, service_account: str) -> Policy:
    """Trust policy of a role assumed through EKS Pod Identity for one service account of one
    cluster: the session tags the service sets must name that cluster, namespace and account."""
    return _document(
        {
            "Sid": "EksPodIdentityAssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": sorted(["sts:AssumeRole", "sts:TagSession"]),
            "Condition": {
                "StringEquals": {
                    f"aws:RequestTag/{POD_IDENTITY_CLUSTER_TAG}": _plain("cluster_arn", cluster_arn),
                    f"aws:RequestTag/{POD_IDENTITY_NAMESPACE_TAG}": _plain("namespace", namespace),
                    f"aws:RequestTag/{POD_IDENTITY_SERVICE_ACCOUNT_TAG}": _plain(
                        "service_account", service_account
                    ),
                }
            },
        }
    )


def service_trust_policy(service: str) -> Policy:
    """Trust policy of a role assumed by an AWS service principal, e.g. ``ec2.amazonaws.com``."""
    _plain("service", service)
    return _document(
        {
            "Sid": "ServiceAssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": service},
            "Action": ["sts:AssumeRole"],
        }
    )


# --- VPC flow logs ---------------------------------------------------------------------------


def flow_logs_policy(*, log_group_arn: str) -> Policy:
    """What the flow-logs service needs to write to one log group (the group exists already, so
    no logs:CreateLogGroup)."""
    _plain("log_group_arn", log_group_arn)
    return _document(
        _statement(
            "WriteFlowLogs",
            [
                "logs:CreateLogStream",
                "logs:DescribeLogGroups",
                "logs:DescribeLogStreams",
                "logs:PutLogEvents",
            ],
            [log_group_arn, f"{log_group_arn}:*"],
        )
    )


# --- Karpenter --------------------------------------------------------------------------------


def karpenter_controller_policy(
    *,
    partition: str,
    region: str,
    account_id: str,
    cluster_name: str,
    node_role_arn: str,
    queue_arn: str,
) -> Policy:
    """Karpenter v1.x controller policy, scoped to one cluster, one region, one node role and queue.

    It holds every action of Karpenter's official v1.14 CloudFormation (getting-started
    ``cloudformation.yaml`` in aws/karpenter-provider-aws) and no other.

    Everything Karpenter launches carries ``kubernetes.io/cluster/<cluster>=owned``,
    ``eks:eks-cluster-name=<cluster>`` and ``karpenter.sh/nodepool``; its instance profiles carry
    the cluster tag, ``topology.kubernetes.io/region`` and ``karpenter.k8s.aws/ec2nodeclass``.
    The conditions require those tags, so the controller can only create, tag and delete what is
    (or will be) marked as its own.
    """
    for name, value in (
        ("partition", partition),
        ("region", region),
        ("account_id", account_id),
        ("cluster_name", cluster_name),
    ):
        _plain(name, value)
    if not node_role_arn.startswith(f"arn:{partition}:iam::") or ":role/" not in node_role_arn:
        raise ValueError(f"node_role_arn must be an IAM role ARN in partition {partition!r}")
    if not queue_arn.startswith(f"arn:{partition}:sqs:{region}:"):
        raise ValueError(f"queue_arn must be an SQS queue ARN in {partition!r} / {region!r}")

    ec2 = f"arn:{partition}:ec2:{region}"
    cluster_tag = f"kubernetes.io/cluster/{cluster_name}"
    owned_request = {f"aws:RequestTag/{cluster_tag}": "owned"}
    owned_resource = {f"aws:ResourceTag/{cluster_tag}": "owned"}
    launched = [
        f"{ec2}:{account_id}:{kind}/*"
        for kind in (
            "fleet",
            "instance",
            "volume",
            "network-interface",
            "launch-template",
            "spot-instances-request",
        )
    ]
    instance_profiles = f"arn:{partition}:iam::{account_id}:instance-profile/*"

    return _document(
        _statement(
            "AllowRegionalReadActions",
            [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstances",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "*",
            condition={"StringEquals": {"aws:RequestedRegion": region}},
        ),
        # Images and snapshots are owned by whoever published them (no account in the ARN);
        # subnets, security groups and capacity reservations may be shared from another account.
        _statement(
            "AllowScopedEC2InstanceAccessActions",
            ["ec2:CreateFleet", "ec2:RunInstances"],
            [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
            ],
        ),
        _statement(
            "AllowScopedEC2InstanceActionsWithTags",
            ["ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:RunInstances"],
            launched,
            condition={
                "StringEquals": {**owned_request, f"aws:RequestTag/{_EKS_CLUSTER_NAME_TAG}": cluster_name},
                "StringLike": {f"aws:RequestTag/{_NODEPOOL_TAG}": "*"},
            },
        ),
        _statement(
            "AllowScopedEC2LaunchTemplateAccessActions",
            ["ec2:CreateFleet", "ec2:RunInstances"],
            f"{ec2}:{account_id}:launch-template/*",
            condition={
                "StringEquals": owned_resource,
                "StringLike": {f"aws:ResourceTag/{_NODEPOOL_TAG}": "*"},
            },
        ),
        _statement(
            "AllowScopedResourceCreationTagging",
            ["ec2:CreateTags"],
            launched,
            condition={
                "StringEquals": {
                    **owned_request,
                    f"aws:RequestTag/{_EKS_CLUSTER_NAME_TAG}": cluster_name,
                    "ec2:CreateAction": ["CreateFleet", "CreateLaunchTemplate", "RunInstances"],
                },
                "StringLike": {f"aws:RequestTag/{_NODEPOOL_TAG}": "*"},
            },
        ),
        # After launch Karpenter adds Name and karpenter.sh/nodeclaim (and eks:eks-cluster-name);
        # it may add no other key, and cannot re-point eks:eks-cluster-name at another cluster.
        _statement(
            "AllowScopedResourceTagging",
            ["ec2:CreateTags"],
            f"{ec2}:{account_id}:instance/*",
            condition={
                "StringEquals": owned_resource,
                "StringLike": {f"aws:ResourceTag/{_NODEPOOL_TAG}": "*"},
                "StringEqualsIfExists": {f"aws:RequestTag/{_EKS_CLUSTER_NAME_TAG}": cluster_name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": [_EKS_CLUSTER_NAME_TAG, "karpenter.sh/nodeclaim", "Name"]
                },
            },
        ),
        _statement(
            "AllowScopedDeletion",
            ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"],
            [f"{ec2}:{account_id}:instance/*", f"{ec2}:{account_id}:launch-template/*"],
            condition={
                "StringEquals": owned_resource,
                "StringLike": {f"aws:ResourceTag/{_NODEPOOL_TAG}": "*"},
            },
        ),
        _statement(
            "AllowPassingInstanceRole",
            ["iam:PassRole"],
            node_role_arn,
            condition={"StringEquals": {"iam:PassedToService": _ec2_service_principal(partition)}},
        ),
        _statement(
            "AllowScopedInstanceProfileCreationActions",
            ["iam:CreateInstanceProfile"],
            instance_profiles,
            condition={
                "StringEquals": {
                    **owned_request,
                    f"aws:RequestTag/{_EKS_CLUSTER_NAME_TAG}": cluster_name,
                    f"aws:RequestTag/{_REGION_TAG}": region,
                },
                "StringLike": {f"aws:RequestTag/{_NODECLASS_TAG}": "*"},
            },
        ),
        _statement(
            "AllowScopedInstanceProfileTagActions",
            ["iam:TagInstanceProfile"],
            instance_profiles,
            condition={
                "StringEquals": {
                    **owned_resource,
                    f"aws:ResourceTag/{_REGION_TAG}": region,
                    **owned_request,
                    f"aws:RequestTag/{_EKS_CLUSTER_NAME_TAG}": cluster_name,
                    f"aws:RequestTag/{_REGION_TAG}": region,
                },
                "StringLike": {
                    f"aws:ResourceTag/{_NODECLASS_TAG}": "*",
                    f"aws:RequestTag/{_NODECLASS_TAG}": "*",
                },
            },
        ),
        _statement(
            "AllowScopedInstanceProfileActions",
            [
                "iam:AddRoleToInstanceProfile",
                "iam:DeleteInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
            ],
            instance_profiles,
            condition={
                "StringEquals": {**owned_resource, f"aws:ResourceTag/{_REGION_TAG}": region},
                "StringLike": {f"aws:ResourceTag/{_NODECLASS_TAG}": "*"},
            },
        ),
        _statement(
            "AllowInstanceProfileReadActions",
            ["iam:GetInstanceProfile", "iam:ListInstanceProfiles"],
            instance_profiles,
        ),
        _statement(
            "AllowSSMReadActions",
            ["ssm:GetParameter"],
            f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
        ),
        _statement("AllowPricingReadActions", ["pricing:GetProducts"], "*"),
        _statement(
            "AllowInterruptionQueueActions",
            ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            queue_arn,
        ),
        _statement(
            "AllowAPIServerEndpointDiscovery",
            ["eks:DescribeCluster"],
            f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
        ),
        # Zonal shift status of this cluster (takes no resource ARN; the condition names it).
        _statement(
            "AllowZonalShiftStatusReadOnly",
            ["arc-zonal-shift:GetManagedResource"],
            "*",
            condition={
                "StringEquals": {
                    "arc-zonal-shift:ResourceIdentifier": (
                        f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"
                    )
                }
            },
        ),
    )


def _ec2_service_principal(partition: str) -> str | list[str]:
    """The value ``iam:PassedToService`` takes for EC2 (China regions use a second name)."""
    if partition == "aws-cn":
        return ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
    return "ec2.amazonaws.com"


def interruption_queue_policy(*, queue_arn: str) -> Policy:
    """Resource policy of Karpenter's interruption queue: EventBridge may send; TLS only for all."""
    return _document(
        _statement(
            "AllowEventDelivery",
            ["sqs:SendMessage"],
            queue_arn,
            principal={"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
        ),
        _statement(
            "DenyInsecureTransport",
            [
                "sqs:ChangeMessageVisibility",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "sqs:GetQueueUrl",
                "sqs:PurgeQueue",
                "sqs:ReceiveMessage",
                "sqs:SendMessage",
            ],
            queue_arn,
            effect="Deny",
            principal={"AWS": "*"},
            condition={"Bool": {"aws:SecureTransport": "false"}},
        ),
    )


# --- AWS Load Balancer Controller -------------------------------------------------------------


def load_balancer_controller_policy(*, partition: str, cluster_name: str) -> Policy:
    """AWS Load Balancer Controller v3.5 policy, with WAF and Shield integration off in the chart.

    Every action of the controller's own ``docs/install/iam_policy.json`` (v3.5.0) is here except
    the WAF, WAF Regional and Shield ones and ``elasticloadbalancing:SetWebAcl``.

    The controller tags every load balancer, target group, listener and security group it creates
    with ``elbv2.k8s.aws/cluster`` set to its cluster name (v3.5.0 ``pkg/deploy/tracking/provider.go``
    StackTags, ``pkg/networking/backend_sg_provider.go``); changes and deletions require that tag
    on the resource with this cluster's name, and creations require it on the request, so another
    cluster's controller in the same account cannot be steered into this one's resources. The
    cluster name is also needed because the controller opens the node security group to its own
    (backend) security group, and it picks that group on a node's ENI by the EKS tag
    ``kubernetes.io/cluster/<cluster>`` (``owned`` on the EKS cluster security group,
    ``owned``/``shared`` on node groups), so rule changes on groups
    it did not create are allowed only on groups carrying that tag.

    Listener and rule calls (create, delete, modify, certificates) stay on ``"*"`` as in the
    controller's own documentation: the certificate calls take no resource-level permissions, and
    listeners and rules only act on load balancers, whose creation, change and deletion are held
    to the cluster tag above. Scoping them to listener ARNs is a possible later tightening.
    """
    _plain("partition", partition)
    _plain("cluster_name", cluster_name)
    ec2 = f"arn:{partition}:ec2:*:*"
    elb = f"arn:{partition}:elasticloadbalancing:*:*"
    security_groups = f"{ec2}:security-group/*"
    load_balancers = [f"{elb}:loadbalancer/app/*/*", f"{elb}:loadbalancer/net/*/*"]
    target_groups = f"{elb}:targetgroup/*/*"
    listeners = [f"{elb}:listener/app/*/*/*", f"{elb}:listener/net/*/*/*"]
    listener_rules = [f"{elb}:listener-rule/app/*/*/*/*", f"{elb}:listener-rule/net/*/*/*/*"]
    request_tag = {f"aws:RequestTag/{_ELBV2_CLUSTER_TAG}": cluster_name}
    resource_tag = {f"aws:ResourceTag/{_ELBV2_CLUSTER_TAG}": cluster_name}
    cluster_tag_on_request = {"StringEquals": request_tag}
    cluster_tag_on_resource = {"StringEquals": resource_tag}
    # Tag changes on an existing resource of this cluster may not touch the cluster tag itself.
    retag_condition = {
        "Null": {f"aws:RequestTag/{_ELBV2_CLUSTER_TAG}": "true"},
        "StringEquals": resource_tag,
    }

    return _document(
        _statement(
            "AllowElbServiceLinkedRole",
            ["iam:CreateServiceLinkedRole"],
            f"arn:{partition}:iam::*:role/aws-service-role/elasticloadbalancing.amazonaws.com/*",
            condition={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
        ),
        _statement(
            "AllowReadActions",
            [
                "ec2:DescribeAccountAttributes",
                "ec2:DescribeAddresses",
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCoipPools",
                "ec2:DescribeInstances",
                "ec2:DescribeInternetGateways",
                "ec2:DescribeIpamPools",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeRouteTables",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeTags",
                "ec2:DescribeVpcPeeringConnections",
                "ec2:DescribeVpcs",
                "ec2:GetCoipPoolUsage",
                "ec2:GetSecurityGroupsForVpc",
                "elasticloadbalancing:DescribeCapacityReservation",
                "elasticloadbalancing:DescribeListenerAttributes",
                "elasticloadbalancing:DescribeListenerCertificates",
                "elasticloadbalancing:DescribeListeners",
                "elasticloadbalancing:DescribeLoadBalancerAttributes",
                "elasticloadbalancing:DescribeLoadBalancers",
                "elasticloadbalancing:DescribeRules",
                "elasticloadbalancing:DescribeSSLPolicies",
                "elasticloadbalancing:DescribeTags",
                "elasticloadbalancing:DescribeTargetGroupAttributes",
                "elasticloadbalancing:DescribeTargetGroups",
                "elasticloadbalancing:DescribeTargetHealth",
                "elasticloadbalancing:DescribeTrustStores",
            ],
            "*",
        ),
        _statement(
            "AllowCertificateAndAuthReads",
            [
                "acm:DescribeCertificate",
                "acm:ListCertificates",
                "cognito-idp:DescribeUserPoolClient",
                "iam:GetServerCertificate",
                "iam:ListServerCertificates",
            ],
            "*",
        ),
        _statement(
            "AllowCreateSecurityGroup",
            ["ec2:CreateSecurityGroup"],
            [security_groups, f"{ec2}:vpc/*"],
        ),
        _statement(
            "AllowTagSecurityGroupOnCreate",
            ["ec2:CreateTags"],
            security_groups,
            condition={"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup", **request_tag}},
        ),
        _statement(
            "AllowRetagOwnSecurityGroups",
            ["ec2:CreateTags", "ec2:DeleteTags"],
            security_groups,
            condition=retag_condition,
        ),
        _statement(
            "AllowManageOwnSecurityGroups",
            [
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:DeleteSecurityGroup",
                "ec2:RevokeSecurityGroupIngress",
            ],
            security_groups,
            condition=cluster_tag_on_resource,
        ),
        _statement(
            "AllowBackendRulesOnClusterSecurityGroups",
            ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
            security_groups,
            condition={
                "StringEquals": {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": ["owned", "shared"]}
            },
        ),
        _statement(
            "AllowCreateTaggedLoadBalancers",
            ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
            [*load_balancers, target_groups],
            condition=cluster_tag_on_request,
        ),
        _statement(
            "AllowListenerAndRuleLifecycle",
            [
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:CreateRule",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:DeleteRule",
            ],
            "*",
        ),
        _statement(
            "AllowTagOnCreate",
            ["elasticloadbalancing:AddTags"],
            [target_groups, *load_balancers],
            condition={
                "StringEquals": {
                    "elasticloadbalancing:CreateAction": ["CreateLoadBalancer", "CreateTargetGroup"],
                    **request_tag,
                },
            },
        ),
        _statement(
            "AllowRetagOwnLoadBalancers",
            ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            [target_groups, *load_balancers],
            condition=retag_condition,
        ),
        _statement(
            "AllowTagListenersAndRules",
            ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            [*listeners, *listener_rules],
        ),
        _statement(
            "AllowModifyOwnLoadBalancers",
            [
                "elasticloadbalancing:DeleteLoadBalancer",
                "elasticloadbalancing:DeleteTargetGroup",
                "elasticloadbalancing:ModifyCapacityReservation",
                "elasticloadbalancing:ModifyIpPools",
                "elasticloadbalancing:ModifyListenerAttributes",
                "elasticloadbalancing:ModifyLoadBalancerAttributes",
                "elasticloadbalancing:ModifyTargetGroup",
                "elasticloadbalancing:ModifyTargetGroupAttributes",
                "elasticloadbalancing:SetIpAddressType",
                "elasticloadbalancing:SetSecurityGroups",
                "elasticloadbalancing:SetSubnets",
            ],
            [*load_balancers, target_groups, *listeners],
            condition=cluster_tag_on_resource,
        ),
        _statement(
            "AllowTargetRegistration",
            ["elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:RegisterTargets"],
            target_groups,
        ),
        _statement(
            "AllowListenerAndRuleChanges",
            [
                "elasticloadbalancing:AddListenerCertificates",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:ModifyRule",
                "elasticloadbalancing:RemoveListenerCertificates",
                "elasticloadbalancing:SetRulePriorities",
            ],
            "*",
        ),
    )


# --- the rule book ----------------------------------------------------------------------------


# --- image pulls ------------------------------------------------------------------------------


def pull_through_cache_policy(*, partition: str, region: str, account: str, prefix: str | None) -> Policy:
    """What a node pulling through an ECR pull-through cache needs besides ECR pull access (Amazon
    ECR User Guide, "IAM permissions required to sync an upstream registry", snapshotted in
    reference/upstream/image-pulls.json): import the upstream image, and create its repository on
    the first pull. Scoped to the repositories under the rule's prefix."""
    repositories = f"{_plain('prefix', prefix)}/*" if prefix else "*"
    arn = (
        f"arn:{_plain('partition', partition)}:ecr:{_plain('region', region)}:{_plain('account', account)}"
        f":repository/{repositories}"
    )
    return _document(
        _statement("PullThroughCache", ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"], arn)
    )


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _is_trust_statement(statement: Statement) -> bool:
    """A role trust statement: a Principal and only sts: actions. IAM forbids Resource there."""
    actions = _as_list(statement.get("Action", []))
    return (
        ("Principal" in statement or "NotPrincipal" in statement)
        and bool(actions)
        and all(isinstance(a, str) and a.startswith("sts:") for a in actions)
    )


def assert_least_privilege(policy: dict) -> list[str]:
    """Problems with a policy document, worded for a test failure; empty when it is fine.

    Checked: Version is ``2012-10-17``; the document is JSON-serialisable; every statement has
    an alphanumeric ``Sid`` (unique in the document), ``Effect`` Allow or Deny, ``Action`` (never
    ``NotAction``), and ``Resource`` or ``NotResource`` — except role trust statements (a
    Principal with only ``sts:`` actions), where IAM forbids a Resource; no action contains
    ``*`` (which covers ``"*"`` and service wildcards such as ``"ec2:*"``).
    """
    problems: list[str] = []
    if not isinstance(policy, dict):
        return [f"policy must be a dict, got {type(policy).__name__}"]
    if policy.get("Version") != VERSION:
        problems.append(f"Version must be {VERSION!r}, got {policy.get('Version')!r}")
    try:
        json.dumps(policy)
    except (TypeError, ValueError) as exc:
        problems.append(f"policy is not JSON-serialisable: {exc}")

    statements = policy.get("Statement")
    if not isinstance(statements, list) or not statements:
        problems.append("Statement must be a non-empty list")
        return problems

    sids: list[str] = []
    for index, statement in enumerate(statements):
        if not isinstance(statement, dict):
            problems.append(f"statement #{index}: must be a dict")
            continue
        sid = statement.get("Sid")
        label = f"statement {sid!r}" if sid else f"statement #{index}"
        if not sid:
            problems.append(f"{label}: missing Sid")
        else:
            sids.append(sid)
            if not (isinstance(sid, str) and sid.isascii() and sid.isalnum()):
                problems.append(f"{label}: Sid must be ASCII letters and digits only")
        if "Effect" not in statement:
            problems.append(f"{label}: missing Effect")
        elif statement["Effect"] not in ("Allow", "Deny"):
            problems.append(f"{label}: Effect must be 'Allow' or 'Deny', got {statement['Effect']!r}")
        if "NotAction" in statement:
            problems.append(f"{label}: NotAction is not allowed")
        if not statement.get("Action"):
            problems.append(f"{label}: missing Action")
        for action in _as_list(statement.get("Action", [])):
            if not isinstance(action, str):
                problems.append(f"{label}: action {action!r} is not a string")
            elif "*" in action:
                problems.append(f"{label}: wildcard action {action!r}")
        has_resource = "Resource" in statement or "NotResource" in statement
        if _is_trust_statement(statement):
            if has_resource:
                problems.append(f"{label}: a trust statement must not have Resource")
        elif not has_resource:
            problems.append(f"{label}: missing Resource (or NotResource)")

    for sid, count in sorted(Counter(sids).items()):
        if count > 1:
            problems.append(f"duplicate Sid {sid!r} ({count} statements)")
    return problems
