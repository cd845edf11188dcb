"""The policy pack's least-privilege checks, function by function: IAM patterns (``?`` wildcards,
iam:PassRole on any role, broad AWS managed policies, open trust policies), policy conditions
that narrow nothing, the TLS-only Deny, RBAC, container privileges, and how a Helm chart's objects
are told from hand-written ones. The hostile corpus is tests/policy_probes.py."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.policy.rules import Resource, base, iam, rbac, storage, workloads
from tests.policy_probes import HALVES, NEAR_WORLD, TLS_DENY

ROOT = Path(__file__).resolve().parents[2]

# --- IAM


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("iam:PassRole", "iam:PassRole", True),
        ("IAM:passrole", "iam:PassRole", True),  # IAM compares actions case-insensitively
        ("iam:Pass?ole", "iam:PassRole", True),
        ("iam:Pass*", "iam:PassRole", True),
        ("*", "iam:PassRole", True),
        ("iam:Pass?", "iam:PassRole", False),  # ? is one character
        ("s3:Get?bject", "s3:GetObject", True),
        ("iam:PassRole.", "iam:PassRoleX", False),  # a dot is no regex
    ],
)
def test_iam_patterns_match_as_iam_does(pattern: str, value: str, matches: bool) -> None:
    assert iam.iam_matches(pattern, value) is matches


@pytest.mark.parametrize(
    ("resource", "any_role"),
    [
        ("*", True),
        ("?*", True),
        ("arn:aws:iam::123456789012:role/*", True),
        ("arn:aws:iam::*:role/?*", True),
        ("arn:aws:iam::123456789012:role/service-role/*", True),
        ("arn:aws:iam::123456789012:*", True),
        ("arn:aws:*:*:*:*", True),
        ("arn:aws:iam::123456789012:role/app", False),
        ("arn:aws:iam::123456789012:role/KarpenterNodeRole-*", False),  # a prefix the holder owns
        ("arn:aws:s3:::bucket/*", False),
    ],
)
def test_pass_role_on_any_role(resource: str, any_role: bool) -> None:
    assert iam.passes_any_role(resource) is any_role


def test_pass_role_on_any_role_is_refused_with_its_reason_and_one_role_is_not() -> None:
    doc = {
        "Statement": [
            {"Sid": "P", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::1:role/*"}
        ]
    }
    [problem] = iam.wildcard_problems(doc)
    assert problem == (
        "statement P: iam:PassRole on arn:aws:iam::1:role/* lets the holder hand any role of the account, an "
        "administrator's too, to a service it controls: name the role's ARN"
    )
    one = {
        "Statement": [{"Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::1:role/app"}]
    }
    assert iam.wildcard_problems(one) == []


def test_question_mark_actions_are_wildcards_and_never_read_verbs_on_star() -> None:
    doc = {"Statement": [{"Sid": "Q", "Effect": "Allow", "Action": "s3:Get?bject", "Resource": "*"}]}
    problems = iam.wildcard_problems(doc)
    assert "statement Q: wildcard action(s) s3:Get?bject" in problems
    assert 'statement Q: "Resource": "*" for s3:Get?bject (not a documented exception)' in problems
    # a pattern that could read data is no "read verb", though it starts with Get
    assert not iam._star_resource_allowed(["s3:Get*"])
    assert iam._star_resource_allowed(["ec2:DescribeInstances"])


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::aws:policy/job-function/SystemAdministrator",
        "arn:aws:iam::aws:policy/job-function/NetworkAdministrator",
        "arn:aws:iam::aws:policy/job-function/DatabaseAdministrator",
        "arn:aws:iam::aws:policy/job-function/DataScientist",
        "arn:aws:iam::aws:policy/AdministratorAccess",
        "arn:aws-us-gov:iam::aws:policy/AdministratorAccess",
        "arn:aws-cn:iam::aws:policy/PowerUserAccess",
        "arn:aws:iam::aws:policy/IAMFullAccess",
        "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess",
        "arn:aws:iam::aws:policy/AdministratorAccess-Amplify",
        "arn:aws:iam::aws:policy/AmazonEC2FullAccess",
    ],
)
def test_broad_managed_policies_are_refused_under_their_real_paths(arn: str) -> None:
    assert iam.too_broad_managed_policy(arn)
    [problem] = iam.no_wildcard_iam("aws:iam/rolePolicyAttachment:RolePolicyAttachment", {"policyArn": arn})
    assert arn in problem and "attach a least-privilege policy" in problem


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
        "arn:aws:iam::aws:policy/job-function/ViewOnlyAccess",
        "arn:aws:iam::123456789012:policy/app-least-privilege",
    ],
)
def test_narrow_managed_policies_pass(arn: str) -> None:
    assert iam.too_broad_managed_policy(arn) is None


def test_the_vendored_managed_policies_name_their_source_and_real_arn() -> None:
    vendored = json.loads((ROOT / "reference" / "upstream" / "aws-managed-policies.json").read_text())
    assert "access_policies_job-functions" in vendored["sources"]["job_functions"]
    by_name = {p["name"]: p["arn"] for p in vendored["too_broad"]}
    assert by_name["SystemAdministrator"] == "arn:aws:iam::aws:policy/job-function/SystemAdministrator"
    assert all(arn.endswith(f"/{name}") for name, arn in by_name.items())


def test_an_open_trust_policy_is_refused_and_an_organizations_is_not() -> None:
    def role(condition: dict[str, Any] | None) -> dict[str, Any]:
        statement = {"Sid": "T", "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
        return {
            "assumeRolePolicy": json.dumps(
                {"Statement": [{**statement, **({"Condition": condition} if condition else {})}]}
            )
        }

    [problem] = iam.no_wildcard_iam("aws:iam/role:Role", role(None))
    assert problem.startswith(
        'assumeRolePolicy: statement T: lets everyone (Principal "*") assume the role with no condition'
    )
    assert (
        iam.no_wildcard_iam("aws:iam/role:Role", role({"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}}))
        == []
    )
    service = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ]
    }
    assert iam.no_wildcard_iam("aws:iam/role:Role", {"assumeRolePolicy": json.dumps(service)}) == []


# --- conditions


@pytest.mark.parametrize(
    ("condition", "narrows"),
    [
        ({"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}}, True),
        ({"StringEquals": {"aws:SourceVpce": ["vpce-0abc", "vpce-0def"]}}, True),
        ({"IpAddress": {"aws:SourceIp": "198.51.100.0/24"}}, True),
        ({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/*"}}, True),
        ({"StringLike": {"aws:SourceArn": "arn:aws:s3:::my-bucket*"}}, True),
        ({"ForAnyValue:StringEquals": {"aws:PrincipalOrgPaths": "o-abc/r-1/ou-2/"}}, True),
        # with one narrowing test, ANDed no-op tests do not widen it
        (
            {"Bool": {"aws:SecureTransport": "true"}, "StringEquals": {"aws:SourceAccount": "123456789012"}},
            True,
        ),
        (None, False),
        ({}, False),
        ({"Bool": {"aws:SecureTransport": "true"}}, False),
        ({"StringLike": {"aws:SourceVpce": "*"}}, False),
        ({"StringLike": {"aws:SourceVpce": "vpce-*"}}, False),
        ({"StringLike": {"aws:PrincipalOrgID": "o-*"}}, False),
        ({"StringEquals": {"aws:SourceVpce": ["vpce-0abc", "*"]}}, False),  # values are ORed
        ({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}, False),
        ({"IpAddress": {"aws:SourceIp": HALVES}}, False),
        ({"IpAddress": {"aws:SourceIp": NEAR_WORLD}}, False),
        ({"IpAddress": {"aws:SourceIp": "not-a-cidr"}}, False),
        ({"StringEqualsIfExists": {"aws:SourceVpce": "vpce-0abc"}}, False),  # absent key passes
        ({"ForAllValues:StringEquals": {"aws:PrincipalOrgPaths": "o-abc/"}}, False),  # empty set passes
        ({"StringNotEquals": {"aws:PrincipalAccount": "123456789012"}}, False),  # everyone else
        ({"NotIpAddress": {"aws:SourceIp": "198.51.100.0/24"}}, False),
        ({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/reader"}}, False),  # any account's role
        ({"StringEquals": {"aws:UserAgent": "my-app"}}, False),  # the caller says so itself
        ({"StringEquals": {"aws:Referer": "https://example.com"}}, False),
        ({"StringLike": {"aws:SourceVpce": ""}}, False),
    ],
)
def test_which_conditions_narrow_who_may_call(condition: Any, narrows: bool) -> None:
    assert iam.narrows_who(condition) is narrows


DENY = {**TLS_DENY, "Sid": "TLS"}


@pytest.mark.parametrize(
    ("changes", "flaw"),
    [
        ({}, ""),
        ({"Condition": {"Bool": {"aws:SecureTransport": ["false"]}}}, ""),
        ({"Condition": {"Bool": {"aws:securetransport": False}}}, ""),  # keys are case-insensitive
        ({"Condition": {"BoolIfExists": {"aws:SecureTransport": "false"}}}, ""),
        ({"Principal": {"AWS": "*"}}, ""),
        ({"Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:DeleteObject"]}, ""),
        ({"Condition": {"Bool": {"aws:SecureTransport": "no"}}}, "compares aws:SecureTransport to 'no'"),
        ({"Condition": {"Bool": {"aws:SecureTransport": "true"}}}, "compares aws:SecureTransport to 'true'"),
        ({"Condition": {"Bool": {"aws:SecureTransport": "False "}}}, "to 'False ': only false matches"),
        ({"Condition": {"Bool": {"aws:SecureTransport": "FALSE"}}}, ""),
        (
            {"Condition": {"StringEquals": {"aws:SecureTransport": "false"}}},
            "with StringEquals, which never matches",
        ),
        ({"Condition": {"Null": {"aws:SecureTransport": "true"}}}, "with Null, which never matches"),
        (
            {
                "Condition": {
                    "Bool": {"aws:SecureTransport": "false"},
                    "IpAddress": {"aws:SourceIp": "10.0.0.0/8"},
                }
            },
            "also requires IpAddress aws:SourceIp",
        ),
        ({"Principal": {"AWS": "arn:aws:iam::1:root"}}, 'denies only some principals: set Principal "*"'),
        ({"Action": "s3:PutObject"}, "does not deny s3:GetObject"),
    ],
)
def test_a_tls_only_deny_must_deny_every_plain_request(changes: dict[str, Any], flaw: str) -> None:
    found = storage.insecure_transport_flaw({**DENY, **changes})
    assert found == flaw if flaw == "" else flaw in str(found)


def test_a_statement_not_about_tls_is_no_tls_deny() -> None:
    assert (
        storage.insecure_transport_flaw(
            {"Effect": "Allow", "Condition": {"Bool": {"aws:SecureTransport": "true"}}}
        )
        is None
    )
    assert (
        storage.insecure_transport_flaw({**DENY, "Condition": {"StringEquals": {"aws:SourceVpce": "vpce-1"}}})
        is None
    )


def test_a_bucket_whose_tls_deny_never_matches_is_told_why() -> None:
    bucket = Resource(
        "aws:s3/bucket:Bucket",
        {"bucket": "b", "serverSideEncryptionConfiguration": {"rule": {}}},
        "urn:b",
        "b",
    )
    deny = {**DENY, "Condition": {"Bool": {"aws:SecureTransport": "no"}}}
    holder = Resource(
        "aws:s3/bucketPolicy:BucketPolicy",
        {"bucket": "b", "policy": json.dumps({"Statement": [deny]})},
        "urn:p",
        "p",
    )
    [(urn, message)] = storage.buckets_encrypted_tls_only([bucket, holder])
    assert urn == "urn:b"
    assert message == (
        "bucket b has no policy denying requests without TLS (aws:SecureTransport false): its policy's "
        "statement TLS compares aws:SecureTransport to 'no': only false matches a request without TLS"
    )


def test_a_public_statement_names_the_condition_that_does_not_narrow() -> None:
    statement = {
        "Sid": "Read",
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Condition": {"StringLike": {"aws:SourceVpce": "*"}},
    }
    assert storage.public_statements({"Statement": [statement]}) == [
        "Read (its condition StringLike aws:SourceVpce ['*'] does not narrow who: it admits any caller)"
    ]


# --- RBAC


@pytest.mark.parametrize(
    ("kind", "rule", "problem"),
    [
        ("ClusterRole", {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}, "every verb"),
        ("Role", {"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, "every resource (*)"),
        (
            "ClusterRole",
            {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]},
            "every resource (*/scale)",
        ),
        ("ClusterRole", {"nonResourceURLs": ["*"], "verbs": ["get"]}, "every non-resource URL"),
        (
            "ClusterRole",
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            "get Secrets in every namespace",
        ),
        (
            "ClusterRole",
            {"apiGroups": ["*"], "resources": ["secrets"], "verbs": ["watch"]},
            "watch Secrets in every namespace",
        ),
        (
            "ClusterRole",
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]},
            "* Secrets in every namespace",
        ),
        (
            "Role",
            {
                "apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["roles"],
                "verbs": ["escalate", "bind"],
            },
            "escalate, bind (grants itself more)",
        ),
        ("ClusterRole", {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}, "impersonate"),
        (
            "Role",
            {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
            "pods/exec (runs commands",
        ),
        ("Role", {"apiGroups": [""], "resources": ["pods/attach"], "verbs": ["get"]}, "pods/attach"),
        ("ClusterRole", {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}, "nodes/proxy"),
        (
            "ClusterRole",
            {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
            "a token for any service account",
        ),
    ],
)
def test_rbac_rules_beyond_least_privilege(kind: str, rule: dict[str, Any], problem: str) -> None:
    assert any(problem in p for p in rbac.rbac_rule_problems(kind, rule)), rbac.rbac_rule_problems(kind, rule)


@pytest.mark.parametrize(
    ("kind", "rule"),
    [
        (
            "Role",
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        ),  # one namespace
        (
            "ClusterRole",
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["x"]},
        ),
        ("ClusterRole", {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}),
        ("ClusterRole", {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}),
        ("Role", {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}),
        (
            "ClusterRole",
            {"apiGroups": ["apps"], "resources": ["secrets"], "verbs": ["get"]},
        ),  # no such resource there
        ("ClusterRole", {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
    ],
)
def test_narrow_rbac_rules_pass(kind: str, rule: dict[str, Any]) -> None:
    assert rbac.rbac_rule_problems(kind, rule) == []


def test_bindings_of_cluster_admin_or_to_everyone_are_refused() -> None:
    def binding(role: str, *subjects: dict[str, str]) -> dict[str, Any]:
        return {"roleRef": {"kind": "ClusterRole", "name": role}, "subjects": list(subjects)}

    sa = {"kind": "ServiceAccount", "name": "app", "namespace": "apps"}
    assert rbac.rbac_binding_problems(binding("view", sa)) == []
    assert rbac.rbac_binding_problems(binding("cluster-admin", sa)) == ["binds cluster-admin"]
    assert rbac.rbac_binding_problems(binding("view", {"kind": "Group", "name": "system:authenticated"})) == [
        "binds view to Group system:authenticated"
    ]
    assert rbac.rbac_binding_problems(binding("edit", {"kind": "User", "name": "system:anonymous"})) == [
        "binds edit to User system:anonymous"
    ]
    assert rbac.rbac_binding_problems(binding("view", {"kind": "Group", "name": "system:masters"})) == []


def test_a_grant_covers_subsets_of_its_rules_only() -> None:
    allowed = {"apiGroups": ("",), "resources": ("secrets",), "verbs": ("get", "list", "update", "watch")}
    assert rbac._within({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}, allowed)
    assert not rbac._within({"apiGroups": [""], "resources": ["secrets"], "verbs": ["delete"]}, allowed)
    assert not rbac._within({"apiGroups": ["*"], "resources": ["secrets"], "verbs": ["get"]}, allowed)
    assert not rbac._within(
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get"]}, allowed
    )
    group = {"apiGroups": ("monitoring.coreos.com",), "resources": ("*",), "verbs": ("*",)}
    assert rbac._within(
        {"apiGroups": ["monitoring.coreos.com"], "resources": ["prometheuses"], "verbs": ["*"]}, group
    )
    assert not rbac._within({"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}, group)


def test_every_grant_states_a_reason_and_names_one_object() -> None:
    for grant in rbac.CHART_ROLE_GRANTS:
        assert grant.rules and len(grant.reason) > 40 and grant.kind in ("Role", "ClusterRole")
    for capability in workloads.CHART_CAPABILITY_GRANTS:
        assert capability.capabilities and len(capability.reason) > 40
    keys = [(g.chart, g.kind, g.name) for g in rbac.CHART_ROLE_GRANTS]
    assert len(keys) == len(set(keys))


# --- containers


@pytest.mark.parametrize(
    ("context", "pod", "problem"),
    [
        ({"capabilities": {"add": ["SYS_ADMIN"]}}, {}, "adds capabilities SYS_ADMIN"),
        ({"capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}, {}, "adds capabilities NET_ADMIN"),
        ({"capabilities": {"add": ["ALL"]}}, {}, "adds capabilities ALL"),
        ({"capabilities": {"add": ["cap_bpf"]}}, {}, "adds capabilities BPF"),
        ({"allowPrivilegeEscalation": True}, {}, "allowPrivilegeEscalation true"),
        ({"allowPrivilegeEscalation": "true"}, {}, "allowPrivilegeEscalation true"),
        ({"seccompProfile": {"type": "Unconfined"}}, {}, "an Unconfined seccomp profile (container)"),
        (
            {},
            {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
            "an Unconfined seccomp profile (pod)",
        ),
        ({"procMount": "Unmasked"}, {}, "an Unmasked /proc"),
    ],
)
def test_containers_beyond_baseline(context: dict[str, Any], pod: dict[str, Any], problem: str) -> None:
    assert problem in workloads.container_problems(pod, {"name": "c", "securityContext": context})


def test_baseline_capabilities_and_restricted_settings_pass() -> None:
    context = {
        "capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL"]},
        "allowPrivilegeEscalation": False,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert workloads.container_problems({}, {"name": "c", "securityContext": context}) == []
    assert workloads.baseline_capabilities() >= {"NET_BIND_SERVICE", "CHOWN", "SETUID"}
    assert not workloads.baseline_capabilities() & {"SYS_ADMIN", "NET_ADMIN", "ALL", "NET_RAW"}


# --- Helm charts


@pytest.mark.parametrize(
    ("chart", "name"),
    [
        ("keda", "keda"),
        ("kedacore/keda", "keda"),
        ("oci://public.ecr.aws/karpenter/karpenter", "karpenter"),
        ("https://example.com/charts/kube-prometheus-stack-88.5.3.tgz", "kube-prometheus-stack"),
        ("./charts/lws/", "lws"),
        ("/tmp/charts/keda-2.20.2", "keda"),  # an unpacked chart folder named with its version
        ("nvidia-device-plugin-v0.18.0.tgz", "nvidia-device-plugin"),
        ("k8s-device-plugin", "k8s-device-plugin"),
    ],
)
def test_chart_names(chart: str, name: str) -> None:
    assert base.chart_name({"chart": chart}) == name


def test_an_objects_chart_is_its_nearest_helm_chart_ancestor() -> None:
    chart = Resource("kubernetes:helm.sh/v4:Chart", {"chart": "oci://x/lws"}, "urn:chart", "lws")
    component = Resource("my:index:Wrapper", {}, "urn:wrapper", "w")
    inner = Resource(
        "kubernetes:helm.sh/v4:Chart", {"chart": "keda"}, "urn:inner", "keda", parent="urn:wrapper"
    )
    role = Resource(
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", {}, "urn:role", "r", parent="urn:chart"
    )
    nested = Resource(
        "kubernetes:rbac.authorization.k8s.io/v1:Role", {}, "urn:nested", "n", parent="urn:inner"
    )
    loose = Resource(
        "kubernetes:rbac.authorization.k8s.io/v1:Role", {}, "urn:loose", "l", parent="urn:wrapper"
    )
    charts = base.charts_of([chart, component, inner, role, nested, loose])
    assert charts == {"urn:role": "lws", "urn:nested": "keda"}


def test_release_values_are_judged_by_the_host_and_container_rules() -> None:
    release = "kubernetes:helm.sh/v3:Release"
    values = {"exporter": {"hostNetwork": True, "securityContext": {"privileged": True}}}
    [host] = workloads.no_host_access(release, {"chart": "x", "namespace": "apps", "values": values})
    assert (
        "values.exporter.hostNetwork true" in host
        and "values.exporter.securityContext.privileged true" in host
    )
    exporter = {"chart": "dcgm-exporter", "namespace": "node-monitoring", "values": {"hostPID": True}}
    assert workloads.no_host_access(release, exporter) == []  # an allow-listed exporter
    caps = {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}
    dcgm = Resource(release, {"chart": "dcgm-exporter", "values": caps}, "urn:d", "d")
    other = Resource(release, {"chart": "other", "values": caps}, "urn:o", "o")
    found = workloads.container_least_privilege([dcgm, other])
    assert [urn for urn, _ in found] == ["urn:o"]
    escalating = Resource(
        release,
        {"chart": "dcgm-exporter", "values": {**caps, "allowPrivilegeEscalation": True}},
        "urn:e",
        "e",
    )
    assert [urn for urn, _ in workloads.container_least_privilege([escalating])] == ["urn:e"]


# --- the pack and the CLI carry the parent


class _Args:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def test_the_pack_hands_each_resources_parent_to_the_stack_rules() -> None:
    pack = runpy.run_path(str(ROOT / "policy" / "__main__.py"), run_name="policy_pack_under_test")
    [rbac] = [p for p in pack["policies"]() if p.name == "rbac-least-privilege"]
    role = {
        "metadata": {"name": "lws-manager-role"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "update", "watch"]}],
    }
    chart = _Args(
        resource_type="kubernetes:helm.sh/v4:Chart",
        props={"chart": "oci://registry.k8s.io/lws/charts/lws"},
        urn="urn:chart",
        name="lws",
        property_dependencies={},
        parent=None,
    )

    def run(parent: Any) -> list[str]:
        child = _Args(
            resource_type="kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            props=role,
            urn="urn:role",
            name="lws:lws-manager-role",
            property_dependencies={},
            parent=parent,
        )
        reported: list[str] = []
        rbac.validate(_Args(resources=[chart, child]), lambda m, u=None: reported.append(m))
        return reported

    assert run(chart) == []
    assert len(run(None)) == 1


def test_the_check_command_reads_parents() -> None:
    role = {
        "metadata": {"name": "lws-manager-role"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
    }
    document = [
        {
            "type": "kubernetes:helm.sh/v4:Chart",
            "name": "lws",
            "urn": "urn:chart",
            "props": {"chart": "lws", "version": "0.10.0"},
        },
        {
            "type": "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            "name": "r",
            "urn": "urn:r",
            "props": role,
            "parent": "urn:chart",
        },
    ]

    def check(doc: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "policy", "check", "-"],
            input=json.dumps(doc),
            capture_output=True,
            text=True,
            cwd=ROOT,
        )

    assert check(document).returncode == 0
    orphan = [document[0], {k: v for k, v in document[1].items() if k != "parent"}]
    result = check(orphan)
    assert (
        result.returncode == 1
        and "rbac-least-privilege\turn:r\tClusterRole lws-manager-role rules[0]" in result.stdout
    )
    bad = check([{**document[1], "parent": 7}])
    assert bad.returncode == 2 and "item 0.parent must be a string" in bad.stderr
