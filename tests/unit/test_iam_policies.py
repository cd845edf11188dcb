"""Hand-written IAM policies: the least-privilege rule book, and the scoping of each document."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from deepseek_eks.components.platform.iam_policies import (
    assert_least_privilege,
    interruption_queue_policy,
    karpenter_controller_policy,
    load_balancer_controller_policy,
    pod_identity_trust_policy,
    service_trust_policy,
)
from tests.upstream import karpenter_cloudformation
from tests.upstream_platform import load_balancer_controller_iam_policy

ACCOUNT = "123456789012"
REGION = "us-east-1"
CLUSTER = "deepseek-dev"
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/deepseek-dev-karpenter-node"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:deepseek-dev-karpenter"


def karpenter(partition: str = "aws", region: str = REGION) -> dict[str, Any]:
    return karpenter_controller_policy(
        partition=partition,
        region=region,
        account_id=ACCOUNT,
        cluster_name=CLUSTER,
        node_role_arn=f"arn:{partition}:iam::{ACCOUNT}:role/deepseek-dev-karpenter-node",
        queue_arn=f"arn:{partition}:sqs:{region}:{ACCOUNT}:deepseek-dev-karpenter",
    )


ALL_POLICIES = {
    "pod_identity_trust": lambda: pod_identity_trust_policy(
        cluster_arn=f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/{CLUSTER}",
        namespace="deepseek",
        service_account="vllm",
    ),
    "ec2_trust": lambda: service_trust_policy("ec2.amazonaws.com"),
    "karpenter": karpenter,
    "karpenter_gov": lambda: karpenter("aws-us-gov", "us-gov-west-1"),
    "karpenter_cn": lambda: karpenter("aws-cn", "cn-north-1"),
    "interruption_queue": lambda: interruption_queue_policy(queue_arn=QUEUE),
    "load_balancer_controller": lambda: load_balancer_controller_policy(
        partition="aws", cluster_name=CLUSTER
    ),
}


def statement(policy: dict[str, Any], sid: str) -> dict[str, Any]:
    matches = [s for s in policy["Statement"] if s["Sid"] == sid]
    assert len(matches) == 1, f"{len(matches)} statements with Sid {sid!r}"
    return matches[0]


def with_action(policy: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in policy["Statement"] if action in s["Action"]]


def strings(value: Any) -> Iterator[str]:
    """Every string anywhere in a JSON-like value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def resources(s: dict[str, Any]) -> list[str]:
    r = s["Resource"]
    return r if isinstance(r, list) else [r]


# --- every builder ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_POLICIES))
def test_every_policy_passes_the_rule_book(name: str) -> None:
    policy = ALL_POLICIES[name]()
    assert assert_least_privilege(policy) == []


@pytest.mark.parametrize("name", sorted(ALL_POLICIES))
def test_every_policy_round_trips_through_json(name: str) -> None:
    policy = ALL_POLICIES[name]()
    assert json.loads(json.dumps(policy)) == policy
    assert policy["Version"] == "2012-10-17"


@pytest.mark.parametrize("name", sorted(ALL_POLICIES))
def test_every_statement_is_well_formed(name: str) -> None:
    for s in ALL_POLICIES[name]()["Statement"]:
        assert s["Effect"] in ("Allow", "Deny")
        assert isinstance(s["Action"], list) and s["Action"], s["Sid"]
        assert s["Action"] == sorted(s["Action"]), f"{s['Sid']}: actions not sorted"
        assert len(set(s["Action"])) == len(s["Action"]), f"{s['Sid']}: duplicate actions"
        assert all(re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", a) for a in s["Action"]), s["Action"]


@pytest.mark.parametrize("name", sorted(ALL_POLICIES))
def test_resource_star_only_for_reads_or_documented_exceptions(name: str) -> None:
    """'*' only for reads, pricing, or the LBC listener/rule calls the module documents."""
    listener_calls = {
        "elasticloadbalancing:AddListenerCertificates",
        "elasticloadbalancing:CreateListener",
        "elasticloadbalancing:CreateRule",
        "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:DeleteRule",
        "elasticloadbalancing:ModifyListener",
        "elasticloadbalancing:ModifyRule",
        "elasticloadbalancing:RemoveListenerCertificates",
        "elasticloadbalancing:SetRulePriorities",
    }
    for s in ALL_POLICIES[name]()["Statement"]:
        if s.get("Resource") != "*":
            continue
        for action in s["Action"]:
            verb = action.split(":", 1)[1]
            assert verb.startswith(("Describe", "List", "Get")) or action in listener_calls, (
                f"{s['Sid']}: {action} on Resource '*'"
            )


# --- the rule book catches what it should -----------------------------------------------------


def doc(*statements: dict[str, Any], version: str = "2012-10-17") -> dict[str, Any]:
    return {"Version": version, "Statement": list(statements)}


GOOD = {"Sid": "Read", "Effect": "Allow", "Action": ["ec2:DescribeVpcs"], "Resource": "*"}


def test_rule_book_accepts_a_good_policy() -> None:
    assert assert_least_privilege(doc(GOOD)) == []


def test_rule_book_catches_a_service_wildcard() -> None:
    bad = {**GOOD, "Sid": "Everything", "Action": ["ec2:*"]}
    assert assert_least_privilege(doc(bad)) == ["statement 'Everything': wildcard action 'ec2:*'"]


def test_rule_book_catches_a_bare_star_action() -> None:
    bad = {**GOOD, "Sid": "Admin", "Action": "*"}
    assert assert_least_privilege(doc(bad)) == ["statement 'Admin': wildcard action '*'"]


def test_rule_book_catches_a_partial_wildcard_action() -> None:
    bad = {**GOOD, "Sid": "Reads", "Action": ["ec2:Describe*"]}
    assert assert_least_privilege(doc(bad)) == ["statement 'Reads': wildcard action 'ec2:Describe*'"]


def test_rule_book_catches_a_missing_resource() -> None:
    bad = {k: v for k, v in GOOD.items() if k != "Resource"}
    assert assert_least_privilege(doc(bad)) == ["statement 'Read': missing Resource (or NotResource)"]


def test_rule_book_accepts_not_resource_in_place_of_resource() -> None:
    deny = {
        "Sid": "DenyOthers",
        "Effect": "Deny",
        "Action": ["s3:GetObject"],
        "NotResource": "arn:aws:s3:::b/*",
    }
    assert assert_least_privilege(doc(GOOD, deny)) == []


def test_rule_book_catches_duplicate_sids() -> None:
    assert assert_least_privilege(doc(GOOD, dict(GOOD))) == ["duplicate Sid 'Read' (2 statements)"]


def test_rule_book_catches_missing_sid_effect_and_action() -> None:
    assert assert_least_privilege(doc({"Resource": "*"})) == [
        "statement #0: missing Sid",
        "statement #0: missing Effect",
        "statement #0: missing Action",
    ]


def test_rule_book_catches_not_action() -> None:
    bad = {"Sid": "Broad", "Effect": "Allow", "NotAction": ["iam:PassRole"], "Resource": "*"}
    assert assert_least_privilege(doc(bad)) == [
        "statement 'Broad': NotAction is not allowed",
        "statement 'Broad': missing Action",
    ]


def test_rule_book_catches_a_wrong_version() -> None:
    assert assert_least_privilege(doc(GOOD, version="2008-10-17")) == [
        "Version must be '2012-10-17', got '2008-10-17'"
    ]


def test_rule_book_catches_a_non_serialisable_document() -> None:
    bad = {**GOOD, "Condition": {"StringEquals": {"aws:RequestedRegion": {REGION}}}}
    problems = assert_least_privilege(doc(bad))
    assert len(problems) == 1
    assert problems[0].startswith("policy is not JSON-serialisable: ")


def test_rule_book_catches_an_empty_statement_list() -> None:
    assert assert_least_privilege(doc()) == ["Statement must be a non-empty list"]


def test_rule_book_catches_a_non_alphanumeric_sid() -> None:
    bad = {**GOOD, "Sid": "read-vpcs"}
    assert assert_least_privilege(doc(bad)) == [
        "statement 'read-vpcs': Sid must be ASCII letters and digits only"
    ]


def test_trust_statements_need_no_resource_and_must_not_have_one() -> None:
    trust = ALL_POLICIES["pod_identity_trust"]()
    assert "Resource" not in trust["Statement"][0]
    with_resource = doc({**trust["Statement"][0], "Resource": "*"})
    assert assert_least_privilege(with_resource) == [
        "statement 'EksPodIdentityAssumeRole': a trust statement must not have Resource"
    ]


# --- trust policies ---------------------------------------------------------------------------


def test_pod_identity_trust_has_both_sts_actions() -> None:
    (s,) = ALL_POLICIES["pod_identity_trust"]()["Statement"]
    assert s["Effect"] == "Allow"
    assert s["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert s["Action"] == ["sts:AssumeRole", "sts:TagSession"]


def test_service_trust_names_the_service() -> None:
    (s,) = service_trust_policy("ec2.amazonaws.com")["Statement"]
    assert s["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert s["Action"] == ["sts:AssumeRole"]


def test_service_trust_rejects_a_wildcard_service() -> None:
    with pytest.raises(ValueError, match="service"):
        service_trust_policy("*")


# --- Karpenter --------------------------------------------------------------------------------


def test_karpenter_pass_role_is_exactly_the_node_role_to_ec2() -> None:
    policy = karpenter()
    (s,) = with_action(policy, "iam:PassRole")
    assert s["Action"] == ["iam:PassRole"]
    assert s["Resource"] == NODE_ROLE
    assert s["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}


def test_karpenter_sqs_is_exactly_the_queue() -> None:
    (s,) = with_action(karpenter(), "sqs:ReceiveMessage")
    assert s["Action"] == ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]
    assert s["Resource"] == QUEUE


def test_karpenter_describe_cluster_is_exactly_this_cluster() -> None:
    (s,) = with_action(karpenter(), "eks:DescribeCluster")
    assert s["Resource"] == f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"


def test_karpenter_reads_are_held_to_the_region() -> None:
    s = statement(karpenter(), "AllowRegionalReadActions")
    assert s["Resource"] == "*"
    assert s["Condition"] == {"StringEquals": {"aws:RequestedRegion": REGION}}
    assert "ec2:DescribeSpotPriceHistory" in s["Action"]
    assert all(a.startswith("ec2:Describe") for a in s["Action"])


def test_karpenter_launches_only_tagged_for_this_cluster() -> None:
    policy = karpenter()
    owned = {f"aws:RequestTag/kubernetes.io/cluster/{CLUSTER}": "owned"}
    for sid in ("AllowScopedEC2InstanceActionsWithTags", "AllowScopedResourceCreationTagging"):
        s = statement(policy, sid)
        assert owned.items() <= s["Condition"]["StringEquals"].items(), sid
        assert s["Condition"]["StringLike"] == {"aws:RequestTag/karpenter.sh/nodepool": "*"}, sid
        assert all(r.startswith(f"arn:aws:ec2:{REGION}:{ACCOUNT}:") for r in resources(s)), sid
    tagging = statement(policy, "AllowScopedResourceCreationTagging")
    assert tagging["Condition"]["StringEquals"]["ec2:CreateAction"] == [
        "CreateFleet",
        "CreateLaunchTemplate",
        "RunInstances",
    ]


def test_karpenter_creates_tags_only_from_its_own_create_calls_or_on_its_instances() -> None:
    policy = karpenter()
    create_tags = with_action(policy, "ec2:CreateTags")
    assert {s["Sid"] for s in create_tags} == {
        "AllowScopedResourceCreationTagging",
        "AllowScopedResourceTagging",
    }
    after_launch = statement(policy, "AllowScopedResourceTagging")
    assert after_launch["Resource"] == f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*"
    assert after_launch["Condition"]["StringEquals"] == {
        f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"
    }
    assert sorted(after_launch["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"]) == [
        "Name",
        "eks:eks-cluster-name",
        "karpenter.sh/nodeclaim",
    ]


def test_karpenter_deletes_only_what_the_cluster_owns() -> None:
    (s,) = with_action(karpenter(), "ec2:TerminateInstances")
    assert s["Action"] == ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"]
    assert s["Condition"]["StringEquals"] == {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"}
    assert s["Condition"]["StringLike"] == {"aws:ResourceTag/karpenter.sh/nodepool": "*"}


def test_karpenter_instance_profiles_are_conditioned_on_cluster_and_region() -> None:
    policy = karpenter()
    profiles = f"arn:aws:iam::{ACCOUNT}:instance-profile/*"
    writes = [
        "iam:AddRoleToInstanceProfile",
        "iam:CreateInstanceProfile",
        "iam:DeleteInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:TagInstanceProfile",
    ]
    for action in writes:
        (s,) = with_action(policy, action)
        assert s["Resource"] == profiles, action
        equals = s["Condition"]["StringEquals"]
        assert any(
            k.endswith(f"/kubernetes.io/cluster/{CLUSTER}") and v == "owned" for k, v in equals.items()
        )
        assert REGION in [v for k, v in equals.items() if k.endswith("/topology.kubernetes.io/region")]
    create = statement(policy, "AllowScopedInstanceProfileCreationActions")
    assert create["Condition"]["StringEquals"]["aws:RequestTag/topology.kubernetes.io/region"] == REGION
    reads = statement(policy, "AllowInstanceProfileReadActions")
    assert reads["Action"] == ["iam:GetInstanceProfile", "iam:ListInstanceProfiles"]
    assert reads["Resource"] == profiles


def test_karpenter_ssm_and_pricing() -> None:
    policy = karpenter()
    (ssm,) = with_action(policy, "ssm:GetParameter")
    assert ssm["Resource"] == f"arn:aws:ssm:{REGION}::parameter/aws/service/*"
    (pricing,) = with_action(policy, "pricing:GetProducts")
    assert pricing["Resource"] == "*"


def test_karpenter_partition_is_threaded_through_every_arn() -> None:
    policy = karpenter("aws-us-gov", "us-gov-west-1")
    arns = [s for s in strings(policy) if s.startswith("arn:")]
    assert len(arns) > 20
    assert all(a.startswith("arn:aws-us-gov:") for a in arns), [
        a for a in arns if not a.startswith("arn:aws-us-gov:")
    ]
    assert "us-east-1" not in json.dumps(policy)


def test_karpenter_china_passes_role_to_either_ec2_name() -> None:
    (s,) = with_action(karpenter("aws-cn", "cn-north-1"), "iam:PassRole")
    assert s["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("node_role_arn", f"arn:aws-us-gov:iam::{ACCOUNT}:role/node"),
        ("node_role_arn", f"arn:aws:iam::{ACCOUNT}:instance-profile/node"),
        ("queue_arn", f"arn:aws:sqs:us-west-2:{ACCOUNT}:q"),
        ("cluster_name", "*"),
        ("region", ""),
    ],
)
def test_karpenter_rejects_inconsistent_or_wildcard_arguments(field: str, value: str) -> None:
    args = {
        "partition": "aws",
        "region": REGION,
        "account_id": ACCOUNT,
        "cluster_name": CLUSTER,
        "node_role_arn": NODE_ROLE,
        "queue_arn": QUEUE,
        field: value,
    }
    with pytest.raises(ValueError, match=field):
        karpenter_controller_policy(**args)


# --- interruption queue -----------------------------------------------------------------------


def test_queue_policy_allows_eventbridge_to_send() -> None:
    policy = interruption_queue_policy(queue_arn=QUEUE)
    allows = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert len(allows) == 1
    (allow,) = allows
    assert allow["Action"] == ["sqs:SendMessage"]
    assert allow["Resource"] == QUEUE
    assert "events.amazonaws.com" in allow["Principal"]["Service"]


def test_queue_policy_denies_without_tls() -> None:
    policy = interruption_queue_policy(queue_arn=QUEUE)
    (deny,) = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert deny["Principal"] == {"AWS": "*"}
    assert deny["Resource"] == QUEUE
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert {"sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage"} <= set(deny["Action"])


# --- AWS Load Balancer Controller -------------------------------------------------------------


def lbc(partition: str = "aws") -> dict[str, Any]:
    return load_balancer_controller_policy(partition=partition, cluster_name=CLUSTER)


def test_lbc_has_no_waf_or_shield() -> None:
    for s in lbc()["Statement"]:
        text = json.dumps(s).lower()
        assert "waf" not in text, s["Sid"]
        assert "shield" not in text, s["Sid"]
        assert "elasticloadbalancing:SetWebAcl" not in s["Action"]


def test_lbc_service_linked_role_only_for_elb() -> None:
    (s,) = with_action(lbc(), "iam:CreateServiceLinkedRole")
    assert s["Action"] == ["iam:CreateServiceLinkedRole"]
    assert s["Condition"] == {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}


def test_lbc_creations_require_the_cluster_tag_on_the_request() -> None:
    policy = lbc()
    for action in ("elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"):
        (s,) = with_action(policy, action)
        assert s["Condition"] == {"StringEquals": {"aws:RequestTag/elbv2.k8s.aws/cluster": CLUSTER}}, action
    sg_tag_on_create = statement(policy, "AllowTagSecurityGroupOnCreate")
    assert sg_tag_on_create["Condition"] == {
        "StringEquals": {
            "ec2:CreateAction": "CreateSecurityGroup",
            "aws:RequestTag/elbv2.k8s.aws/cluster": CLUSTER,
        }
    }


def test_lbc_changes_and_deletions_require_the_cluster_tag_on_the_resource() -> None:
    policy = lbc()
    for action in (
        "ec2:DeleteSecurityGroup",
        "elasticloadbalancing:DeleteLoadBalancer",
        "elasticloadbalancing:DeleteTargetGroup",
        "elasticloadbalancing:ModifyLoadBalancerAttributes",
        "elasticloadbalancing:SetSecurityGroups",
    ):
        (s,) = with_action(policy, action)
        assert s["Condition"]["StringEquals"]["aws:ResourceTag/elbv2.k8s.aws/cluster"] == CLUSTER, action


def test_lbc_node_security_group_rules_only_on_this_clusters_groups() -> None:
    s = statement(lbc(), "AllowBackendRulesOnClusterSecurityGroups")
    assert s["Action"] == ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"]
    assert s["Condition"] == {
        "StringEquals": {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": ["owned", "shared"]}
    }


def test_lbc_partition_is_threaded_through_every_arn() -> None:
    arns = [s for s in strings(lbc("aws-us-gov")) if s.startswith("arn:")]
    assert arns
    assert all(a.startswith("arn:aws-us-gov:") for a in arns)


# --- against the upstream policies (reference/upstream) -----------------------------------------


def action_resources(policy: dict[str, Any]) -> dict[str, set[str]]:
    """``action -> {resource patterns}`` over every Allow statement of a policy."""
    out: dict[str, set[str]] = {}
    for s in policy["Statement"]:
        if s["Effect"] != "Allow":
            continue
        acts = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
        res = [s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"]
        for action in acts:
            out.setdefault(action, set()).update(res)
    return out


def karpenter_cloudformation_policy() -> dict[str, Any]:
    """Every statement of the controller's managed policies in Karpenter's official CloudFormation."""
    statements: list[dict[str, Any]] = []
    for resource in karpenter_cloudformation()["Resources"].values():
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            statements += json.loads(resource["Properties"]["PolicyDocument"])["Statement"]
    return {"Statement": statements}


def test_karpenter_holds_every_action_of_the_official_cloudformation_and_no_other() -> None:
    upstream = action_resources(karpenter_cloudformation_policy())
    ours = action_resources(karpenter())
    assert set(upstream) - set(ours) == set()
    assert set(ours) - set(upstream) == set()


def test_karpenter_grants_resource_star_only_where_the_cloudformation_does() -> None:
    upstream = action_resources(karpenter_cloudformation_policy())
    for action, patterns in action_resources(karpenter()).items():
        if "*" in patterns:
            assert "*" in upstream[action], action


def test_karpenter_zonal_shift_read_is_held_to_this_cluster() -> None:
    (s,) = with_action(karpenter(), "arc-zonal-shift:GetManagedResource")
    cluster = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"
    assert s["Condition"] == {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster}}


# WAF and Shield integration are off in the chart values (enableWaf, enableWafv2, enableShield).
LBC_TURNED_OFF = re.compile(r"^(waf|waf-regional|wafv2|shield):|^elasticloadbalancing:SetWebAcl$")


def test_lbc_holds_every_action_of_its_official_policy_but_waf_and_shield() -> None:
    upstream = action_resources(load_balancer_controller_iam_policy())
    ours = action_resources(lbc())
    assert {a for a in upstream if not LBC_TURNED_OFF.match(a)} - set(ours) == set()
    assert set(ours) - set(upstream) == set()
    for action, patterns in ours.items():
        if "*" in patterns:
            assert "*" in upstream[action], action
