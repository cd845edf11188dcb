"""Each policy rule (policy/rules/) with passing and failing resource args; the pack's wrapping
through pulumi-policy's own validate entry points (the policy server is not started)."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from deepseek_eks.policy import rules
from deepseek_eks.policy.rules import Resource, base, exposure, iam, nodes, pins, secrets, storage, workloads
from tests.package_tree import package_tree

ROOT = Path(__file__).resolve().parents[2]
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SERVICE = "kubernetes:core/v1:Service"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
RELEASE = "kubernetes:helm.sh/v3:Release"
FACTS = json.loads((ROOT / "reference" / "upstream" / "platform-facts.json").read_text())


def ingress(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "vllm", "namespace": "deepseek", "annotations": annotations}, "spec": {}}


def pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "vllm", "namespace": "deepseek"},
        "spec": {"template": {"spec": {"containers": list(containers)}}},
    }


# --- endpoints


def test_an_internal_ingress_passes_and_an_internet_facing_one_needs_limited_cidrs() -> None:
    check = exposure.endpoint_not_open_to_world
    assert check(INGRESS, ingress(**{exposure.INGRESS_SCHEME: "internal"})) == []
    assert check(INGRESS, ingress()) == []  # the controller's default scheme is internal
    facing = {exposure.INGRESS_SCHEME: "internet-facing"}
    assert check(INGRESS, ingress(**facing, **{exposure.INGRESS_INBOUND_CIDRS: "203.0.113.0/24"})) == []
    [missing] = check(INGRESS, ingress(**facing))
    assert "without allowed CIDRs" in missing and exposure.INGRESS_INBOUND_CIDRS in missing
    [world] = check(
        INGRESS, ingress(**facing, **{exposure.INGRESS_INBOUND_CIDRS: "203.0.113.0/24,0.0.0.0/0"})
    )
    assert "admits the whole internet (203.0.113.0/24, 0.0.0.0/0 together admit 100% of IPv4's" in world
    [v6] = check(INGRESS, ingress(**facing, **{exposure.INGRESS_INBOUND_CIDRS: "::/0"}))
    assert "::/0" in v6


@pytest.mark.parametrize(
    "cidrs",
    [
        "0.0.0.0/1,128.0.0.0/1",  # two halves: every IPv4 address, no /0 among them
        "0.0.0.0/2,64.0.0.0/2,128.0.0.0/2",  # three quarters
        "::/1,8000::/1",
        "203.0.113.0/24,not-a-cidr",
    ],
)
def test_a_union_of_cidrs_covering_the_internet_is_open_like_a_slash_zero(cidrs: str) -> None:
    facing = {exposure.INGRESS_SCHEME: "internet-facing", exposure.INGRESS_INBOUND_CIDRS: cidrs}
    [world] = exposure.endpoint_not_open_to_world(INGRESS, ingress(**facing))
    assert "admits the whole internet" in world
    cluster = exposure.cluster_endpoint_private_or_limited(
        "eks:index:Cluster", {"publicAccessCidrs": cidrs.split(",")}
    )
    assert "opens the EKS API endpoint to the internet" in cluster[0]


def test_a_set_under_the_line_is_not_world_open_and_a_quarter_of_the_internet_is() -> None:
    """The line is 1/16 of the public address space (settings/cidrs.py): 0.0.0.0/5 is 3.2 % of it,
    a quarter of IPv4 with two non-public /8s in it is 28 %."""
    facing = {
        exposure.INGRESS_SCHEME: "internet-facing",
        exposure.INGRESS_INBOUND_CIDRS: "0.0.0.0/5,10.0.0.0/8",
    }
    assert exposure.endpoint_not_open_to_world(INGRESS, ingress(**facing)) == []
    facing[exposure.INGRESS_INBOUND_CIDRS] = "0.0.0.0/2,10.0.0.0/8"
    assert exposure.endpoint_not_open_to_world(INGRESS, ingress(**facing))


def test_a_load_balancer_service_is_public_unless_marked_internal() -> None:
    check = exposure.endpoint_not_open_to_world
    lb = {"metadata": {"name": "x"}, "spec": {"type": "LoadBalancer"}}
    assert "loadBalancerSourceRanges" in check(SERVICE, lb)[0]
    internal = {**lb, "metadata": {"name": "x", "annotations": {exposure.SERVICE_SCHEME: "internal"}}}
    assert check(SERVICE, internal) == []
    limited = {**lb, "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["198.51.100.0/24"]}}
    assert check(SERVICE, limited) == []
    assert check(SERVICE, {"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}) == []


def test_the_cluster_api_endpoint_must_be_private_or_cidr_limited() -> None:
    check = exposure.cluster_endpoint_private_or_limited
    assert check("eks:index:Cluster", {"endpointPublicAccess": False}) == []
    assert (
        check("eks:index:Cluster", {"endpointPublicAccess": True, "publicAccessCidrs": ["192.0.2.0/24"]})
        == []
    )
    # public is the default
    assert "public to everyone" in check("eks:index:Cluster", {"version": "1.34"})[0]
    # The component as an analyzer sees it under the real engine (no inputs): its child is judged.
    assert check("eks:index:Cluster", {}) == []
    assert "0.0.0.0/0" in check("eks:index:Cluster", {"publicAccessCidrs": ["0.0.0.0/0"]})[0]
    assert check("aws:eks/cluster:Cluster", {"vpcConfig": {"endpointPublicAccess": False}}) == []
    assert "vpcConfig.publicAccessCidrs" in check("aws:eks/cluster:Cluster", {"vpcConfig": {}})[0]


# --- IMDSv2


def test_imdsv2_with_hop_limit_one_on_node_classes_and_launch_templates() -> None:
    check = nodes.imdsv2_hop_limit_one
    good = {"httpTokens": "required", "httpPutResponseHopLimit": 1}
    assert check(NODECLASS, {"spec": {"metadataOptions": good}}) == []
    assert (
        check(
            "aws:ec2/launchTemplate:LaunchTemplate",
            {"metadataOptions": {**good, "httpPutResponseHopLimit": 1.0}},
        )
        == []
    )
    hop2 = check(NODECLASS, {"spec": {"metadataOptions": {**good, "httpPutResponseHopLimit": 2}}})
    assert hop2 == [
        "spec.metadataOptions.httpPutResponseHopLimit is 2: set 1 so pods cannot reach node credentials"
    ]
    optional = check(
        "aws:ec2/launchTemplate:LaunchTemplate", {"metadataOptions": {**good, "httpTokens": "optional"}}
    )
    assert optional == ["metadataOptions.httpTokens is 'optional': set 'required' (IMDSv2 only)"]
    assert len(check(NODECLASS, {"spec": {}})) == 2
    assert "launch template" in check("aws:eks/nodeGroup:NodeGroup", {"clusterName": "c"})[0]
    assert check("aws:eks/nodeGroup:NodeGroup", {"launchTemplate": {"id": "lt-1", "version": "1"}}) == []


# --- pins


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("vllm/vllm-openai:v0.33.0", None),
        ("registry:5000/team/app:1.2", None),
        ("nginx@sha256:" + "a" * 64, None),
        ("vllm/vllm-openai:latest", "uses the mutable tag latest"),
        ("vllm/vllm-openai", "has no tag"),
        ("registry:5000/team/app", "has no tag"),
    ],
)
def test_image_references(image: str, why: str | None) -> None:
    assert pins.unpinned_image(image) == why


def test_pinned_versions_covers_containers_ami_aliases_and_charts() -> None:
    check = pins.pinned_versions
    assert check(DEPLOYMENT, pod({"name": "a", "image": "busybox:1.37"})) == []
    [latest] = check(DEPLOYMENT, pod({"name": "a", "image": "busybox:latest"}))
    assert "spec.template.spec.containers[0].image 'busybox:latest' uses the mutable tag latest" in latest
    lws = {
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"initContainers": [{"image": "x"}]}}}}
    }
    assert "has no tag" in check("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", lws)[0]
    assert check(NODECLASS, {"spec": {"amiSelectorTerms": [{"alias": "al2023@v20260714"}]}}) == []
    assert (
        "al2023@latest" in check(NODECLASS, {"spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}})[0]
    )
    assert check(RELEASE, {"chart": "karpenter", "version": "1.14.1"}) == []
    assert "no pinned version" in check(RELEASE, {"chart": "karpenter"})[0]
    tagged = check(RELEASE, {"chart": "x", "version": "1", "values": {"image": {"tag": "latest"}}})
    assert tagged == ["values.image.tag is 'latest': pin the image tag"]


# --- GPU NodePools


def gpu_pool(expire: str = "Never", group: str = "karpenter.k8s.aws", **disruption: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "gpu"},
        "spec": {
            "limits": {"nvidia.com/gpu": "8"},
            "disruption": disruption or {"consolidationPolicy": "WhenEmpty"},
            "template": {
                "spec": {
                    "expireAfter": expire,
                    "nodeClassRef": {"group": group, "kind": "X", "name": "gpu"},
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]}
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                }
            },
        },
    }


def test_gpu_nodepools_cap_gpus_and_never_expire_or_consolidate_serving_nodes() -> None:
    check = nodes.gpu_nodepool_guarded
    assert check(NODEPOOL, gpu_pool()) == []
    never = FACTS["karpenter"]["expiration"]["never"]
    assert never == "Never"
    [expiring] = check(NODEPOOL, gpu_pool(expire="720h"))
    assert "expires its nodes (spec.template.spec.expireAfter '720h')" in expiring
    # Auto Mode caps node lifetime (upstream fact): its cap is the longest allowed there.
    auto_cap = FACTS["eks"]["auto_mode_max_node_lifetime"]["value"]
    assert check(NODEPOOL, gpu_pool(expire=auto_cap, group="eks.amazonaws.com")) == []
    assert check(NODEPOOL, gpu_pool(expire=auto_cap)) != []  # not on Karpenter, where Never exists
    [consolidating] = check(NODEPOOL, gpu_pool(consolidationPolicy="WhenEmptyOrUnderutilized"))
    assert "may consolidate nodes that run serving replicas" in consolidating
    blocked = gpu_pool(
        consolidationPolicy="WhenEmptyOrUnderutilized", budgets=[{"nodes": "0", "reasons": ["Underutilized"]}]
    )
    assert check(NODEPOOL, blocked) == []
    unlimited = gpu_pool()
    unlimited["spec"]["limits"] = {"cpu": "100"}
    assert "has no spec.limits['nvidia.com/gpu']" in check(NODEPOOL, unlimited)[0]
    cpu_pool = {"metadata": {"name": "general"}, "spec": {"template": {"spec": {"expireAfter": "720h"}}}}
    assert check(NODEPOOL, cpu_pool) == []


# --- encryption


def test_volumes_are_encrypted() -> None:
    check = storage.encrypted_volumes
    sc = "kubernetes:storage.k8s.io/v1:StorageClass"
    assert (
        check(
            sc,
            {
                "metadata": {"name": "gp3"},
                "provisioner": "ebs.csi.aws.com",
                "parameters": {"encrypted": "true"},
            },
        )
        == []
    )
    assert "unencrypted EBS" in check(sc, {"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"})[0]
    assert check(NODECLASS, {"spec": {"blockDeviceMappings": [{"ebs": {"encrypted": True}}]}}) == []
    assert check(NODECLASS, {"spec": {"blockDeviceMappings": [{"ebs": {"encrypted": False}}]}}) == [
        "spec.blockDeviceMappings[0].ebs.encrypted is not true: encrypt the volume"
    ]
    lt = "aws:ec2/launchTemplate:LaunchTemplate"
    assert check(lt, {"blockDeviceMappings": [{"ebs": {"encrypted": "true"}}]}) == []
    assert check(lt, {"blockDeviceMappings": [{"ebs": {"volumeSize": 40}}]}) != []
    assert check("aws:ebs/volume:Volume", {"encrypted": False}) != []


BUCKET_URN = "urn:pulumi:s::p::aws:s3/bucket:Bucket::weights"
TLS_ONLY = json.dumps(
    {
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ]
    }
)


def bucket_stack(encryption: bool = True, policy: str | None = TLS_ONLY) -> list[Resource]:
    deps = {"bucket": (BUCKET_URN,)}
    stack = [Resource("aws:s3/bucket:Bucket", {}, BUCKET_URN, "weights")]
    if encryption:
        sse = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
        stack.append(Resource(sse, {"bucket": "weights-1"}, "u2", "sse", deps))
    if policy is not None:
        stack.append(Resource("aws:s3/bucketPolicy:BucketPolicy", {"policy": policy}, "u3", "p", deps))
    return stack


def test_buckets_need_encryption_and_a_tls_only_policy() -> None:
    check = storage.buckets_encrypted_tls_only
    assert check(bucket_stack()) == []
    assert check(bucket_stack(encryption=False)) == [
        (BUCKET_URN, "bucket weights has no server-side encryption configuration")
    ]
    [(urn, message)] = check(bucket_stack(policy=json.dumps({"Statement": []})))
    assert urn == BUCKET_URN and "denying requests without TLS" in message
    assert len(check(bucket_stack(encryption=False, policy=None))) == 2


# --- IAM


def doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def test_iam_wildcards_only_within_the_documented_exceptions() -> None:
    check = iam.no_wildcard_iam
    rp = "aws:iam/rolePolicy:RolePolicy"
    reads = {
        "Sid": "R",
        "Effect": "Allow",
        "Action": ["ec2:DescribeInstances", "pricing:GetProducts"],
        "Resource": "*",
    }
    listeners = {
        "Sid": "L",
        "Effect": "Allow",
        "Action": ["elasticloadbalancing:CreateListener"],
        "Resource": "*",
    }
    scoped = {
        "Sid": "S",
        "Effect": "Allow",
        "Action": "ec2:RunInstances",
        "Resource": "arn:aws:ec2:*:*:instance/*",
    }
    assert check(rp, {"policy": doc(reads, listeners, scoped)}) == []
    assert check(rp, {"policy": doc({"Effect": "Deny", "Action": "s3:*", "Resource": "*"})}) == []
    [star_action] = check(
        rp, {"policy": doc({"Sid": "A", "Effect": "Allow", "Action": "ec2:*", "Resource": "arn:x"})}
    )
    assert star_action == "policy: statement A: wildcard action(s) ec2:*"
    [star_resource] = check(
        rp,
        {"policy": doc({"Sid": "B", "Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "*"})},
    )
    assert 'statement B: "Resource": "*" for ec2:TerminateInstances' in star_resource
    role = {
        "inlinePolicies": [{"name": "x", "policy": doc({"Effect": "Allow", "Action": "*", "Resource": "*"})}]
    }
    # the wildcard action, "Resource": "*", and iam:PassRole (which "*" matches) on every role
    assert len(check("aws:iam/role:Role", role)) == 3
    admin = check(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
    )
    assert "grants wildcard access" in admin[0]


def test_the_documented_listener_exception_matches_the_components_policy() -> None:
    from deepseek_eks.components.platform.iam_policies import load_balancer_controller_policy

    policy = load_balancer_controller_policy(partition="aws", cluster_name="c")
    star = {a for s in policy["Statement"] if s.get("Resource") == "*" for a in base.as_list(s["Action"])}
    non_reads = {a for a in star if not a.split(":", 1)[1].startswith(iam.READ_VERBS)}
    assert non_reads == iam.STAR_RESOURCE_EXCEPTIONS


# --- secrets


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("VLLM_API_KEY", True),
        ("adminPassword", True),
        ("clientSecret", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("existingSecret", False),
        ("passwordKey", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("HF_HOME", False),
        ("CACHE_KEY", False),
    ],
)
def test_secret_looking_names(name: str, secret: bool) -> None:
    assert secrets.holds_secret(name) is secret


def test_no_plaintext_secrets_in_env_args_configmaps_or_helm_values() -> None:
    check = secrets.no_plaintext_secrets
    from_secret = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    assert (
        check(DEPLOYMENT, pod({"image": "x:1", "env": [from_secret, {"name": "HF_HOME", "value": "/m"}]}))
        == []
    )
    [env] = check(DEPLOYMENT, pod({"image": "x:1", "env": [{"name": "HF_TOKEN", "value": "hf_abc"}]}))
    assert "env HF_TOKEN holds a literal value" in env and "hf_abc" not in env
    [arg] = check(DEPLOYMENT, pod({"image": "x:1", "args": ["serve", "--api-key", "k"]}))
    assert "passes --api-key on the command line" in arg
    cm = {"metadata": {"name": "c", "namespace": "n"}, "data": {"db-password": "x", "config.yaml": "a: 1"}}
    assert check("kubernetes:core/v1:ConfigMap", cm) == [
        "ConfigMap n/c data.db-password looks like a secret: use a Secret"
    ]
    ok_values = {"grafana": {"admin": {"existingSecret": "grafana-admin", "passwordKey": "admin-password"}}}
    assert check(RELEASE, {"chart": "x", "values": ok_values}) == []
    assert check(RELEASE, {"chart": "x", "values": {"grafana": {"adminPassword": "hunter2"}}}) == [
        "values.grafana.adminPassword is a literal secret: reference an existing Secret instead"
    ]


# --- API key


def exposed(cidrs: str = "203.0.113.0/24") -> Resource:
    props = ingress(**{exposure.INGRESS_SCHEME: "internet-facing", exposure.INGRESS_INBOUND_CIDRS: cidrs})
    return Resource(INGRESS, props, "urn:ingress", "ingress")


def test_the_api_key_is_required_once_the_endpoint_is_internet_facing() -> None:
    check = exposure.api_key_when_exposed
    keyless = Resource(
        DEPLOYMENT, pod({"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}), "urn:vllm", "vllm"
    )
    keyed_env = {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "vllm-api-key", "key": "api-key"}},
    }
    keyed = Resource(
        DEPLOYMENT, pod({"name": "vllm", "image": "vllm/vllm-openai:v0.33.0", "env": [keyed_env]}), "urn:vllm"
    )
    internal = Resource(INGRESS, ingress(**{exposure.INGRESS_SCHEME: "internal"}), "urn:ingress")
    assert check([internal, keyless]) == []
    assert check([exposed(), keyed]) == []
    [(urn, message)] = check([exposed(), keyless])
    assert urn == "urn:vllm" and "takes requests without an API key" in message


# --- the pack


class _Args:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def test_the_pack_wraps_every_rule_as_a_mandatory_policy_and_reports_through_it() -> None:
    from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

    pack = runpy.run_path(str(ROOT / "policy" / "__main__.py"), run_name="policy_pack_under_test")
    policies = pack["policies"]()
    assert [p.name for p in policies] == [r.name for r in (*rules.RESOURCE_RULES, *rules.STACK_RULES)]
    assert all(p.enforcement_level == EnforcementLevel.MANDATORY for p in policies)
    by_name = {p.name: p for p in policies}

    reported: list[tuple[str, str | None]] = []
    endpoint = by_name["endpoint-not-open-to-world"]
    assert isinstance(endpoint, ResourceValidationPolicy)
    world = ingress(
        **{exposure.INGRESS_SCHEME: "internet-facing", exposure.INGRESS_INBOUND_CIDRS: "0.0.0.0/0"}
    )
    endpoint.validate(_Args(resource_type=INGRESS, props=world), lambda m, u=None: reported.append((m, u)))
    assert len(reported) == 1 and "admits the whole internet" in reported[0][0]

    reported.clear()
    buckets = by_name["s3-encrypted-tls-only"]
    assert isinstance(buckets, StackValidationPolicy)
    bucket = _Args(
        resource_type="aws:s3/bucket:Bucket",
        props={},
        urn=BUCKET_URN,
        name="weights",
        property_dependencies={},
        parent=None,
    )
    buckets.validate(_Args(resources=[bucket]), lambda m, u=None: reported.append((m, u)))
    assert {u for _, u in reported} == {BUCKET_URN} and len(reported) == 2


def test_the_pack_manifest_needs_no_repository_virtualenv() -> None:
    """The pack runs wherever it is installed: no ``virtualenv`` option pointing at ../.venv."""
    import yaml

    from deepseek_eks import policy

    manifest = yaml.safe_load((policy.pack_dir() / "PulumiPolicy.yaml").read_text())
    assert manifest["runtime"] == {"name": "python"}


def wheel_layout(root: Path) -> Path:
    """The package as the wheel installs it (setuptools' build_py, which reads the same mapping the
    wheel packs), with no .venv, no reference/ folder and no checkout around it; returns its pack
    folder, deepseek_eks/policy. The runner then imports the rules from there (PYTHONPATH)."""
    site = package_tree(root / "site-packages")
    return site / "deepseek_eks" / "policy"


@pytest.mark.parametrize("layout", ["checkout", "wheel"])
def test_the_pack_boots_under_pulumis_policy_runner_and_reports_a_violation(
    layout: str, tmp_path: Path
) -> None:
    """What `pulumi preview --policy-pack DIR` starts: pulumi's own runner
    (sdk/python/lib/pulumi/policy/__main__.py runs the pack folder's __main__.py), which serves the
    analyzer on a port it prints; Analyze is called as the engine calls it. From the checkout and
    from a copy laid out as the wheel installs it, far from the repository."""
    from deepseek_eks import policy

    pack = policy.pack_dir() if layout == "checkout" else wheel_layout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if layout == "wheel":  # the copy's deepseek_eks, not the checkout's editable install
        env["PYTHONPATH"] = str(pack.parent.parent)
    server = subprocess.Popen(
        [sys.executable, "-m", "pulumi.policy", "127.0.0.1:0", str(pack)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=pack,
        env=env,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line, server.stderr.read().decode() if server.stderr else ""
        port = int(line)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            analyzer = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "deepseek-eks-guardrails"
            assert [p.name for p in info.policies] == [
                r.name for r in (*rules.RESOURCE_RULES, *rules.STACK_RULES)
            ]
            props = struct_pb2.Struct()
            props.update(
                ingress(
                    **{
                        exposure.INGRESS_SCHEME: "internet-facing",
                        exposure.INGRESS_INBOUND_CIDRS: "0.0.0.0/1,128.0.0.0/1",
                    }
                )
            )
            request = analyzer_pb2.AnalyzeRequest(type=INGRESS, properties=props, urn="urn:x", name="vllm")
            diagnostics = analyzer.Analyze(request, timeout=30).diagnostics
            assert [(d.policyName, d.enforcementLevel) for d in diagnostics] == [
                ("endpoint-not-open-to-world", analyzer_pb2.MANDATORY)
            ]
            message = diagnostics[0].message
            assert "whole internet (0.0.0.0/1, 128.0.0.0/1 together admit 100% of IPv4's public" in message
            pool = struct_pb2.Struct()
            pool.update(gpu_pool(expire="720h"))
            request = analyzer_pb2.AnalyzeRequest(type=NODEPOOL, properties=pool, urn="urn:p", name="gpu")
            assert [d.policyName for d in analyzer.Analyze(request, timeout=30).diagnostics] == [
                "gpu-nodepool-guarded"
            ]
    finally:
        server.kill()
        server.wait(timeout=30)


def test_the_packs_copy_of_the_platform_facts_equals_the_snapshot() -> None:
    from deepseek_eks import policy

    copy = json.loads((policy.pack_dir() / "facts.json").read_text())
    assert copy["karpenter"]["expiration"] == FACTS["karpenter"]["expiration"]
    assert copy["eks"]["auto_mode_max_node_lifetime"] == FACTS["eks"]["auto_mode_max_node_lifetime"]
    managed = json.loads((ROOT / "reference" / "upstream" / "aws-managed-policies.json").read_text())
    assert copy["aws_managed_policies"]["too_broad"] == managed["too_broad"]
    pss = json.loads((ROOT / "reference" / "upstream" / "pod-security-standards.json").read_text())
    assert copy["pod_security_baseline"]["capabilities"] == pss["baseline"]["capabilities"]
    assert set(copy) == {"about", "karpenter", "eks", "aws_managed_policies", "pod_security_baseline"}


def test_the_rules_and_the_check_command_import_no_pulumi_code() -> None:
    """Only the pack's __main__.py imports pulumi_policy; the rules and the CLI load neither Pulumi's
    SDK and providers nor the component (settings/cidrs.py is all they take from the package)."""
    probe = (
        "import sys, deepseek_eks.policy.rules, deepseek_eks.policy.cli; "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pulumi', 'pulumi_policy', 'pulumi_aws', 'pulumi_kubernetes', 'pulumi_eks') "
        "or m.startswith(('deepseek_eks.components', 'deepseek_eks.automation'))); "
        "print(loaded)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "[]"


# --- issue 23 item 10: the broadened rules

ALB_FACTS = json.loads((ROOT / "reference" / "upstream" / "alb-ingress-facts.json").read_text())
VLLM_ENTRYPOINTS = json.loads((ROOT / "reference" / "upstream" / "vllm-entrypoints.json").read_text())
CLASS = "kubernetes:networking.k8s.io/v1:IngressClass"


def test_the_ingress_rules_read_the_controllers_own_annotation_and_field_names() -> None:
    facts = ALB_FACTS["ingress_annotations"]
    assert (facts["scheme"], facts["inbound_cidrs"]) == (
        exposure.INGRESS_SCHEME,
        exposure.INGRESS_INBOUND_CIDRS,
    )
    assert (
        facts["certificate_arn"],
        facts["listen_ports"],
        facts["ssl_redirect"],
    ) == (exposure.INGRESS_CERTIFICATE, exposure.INGRESS_LISTEN_PORTS, exposure.INGRESS_SSL_REDIRECT)
    params = ALB_FACTS["ingress_class_params"]
    assert set(exposure.CLASS_PARAMS_GROUPS) == {p["api_group"] for p in params.values()}
    assert set(exposure.CLASS_PARAMS_CERTIFICATES) == {
        p["certificates"].split(":")[0].split(".")[1] for p in params.values()
    }
    assert ALB_FACTS["ingress_class"]["default_class_annotation"] == exposure.DEFAULT_CLASS_ANNOTATION


def facing_ingress(urn: str = "urn:ingress", cls: str | None = None, **annotations: str) -> Resource:
    props = ingress(
        **{exposure.INGRESS_SCHEME: "internet-facing", exposure.INGRESS_INBOUND_CIDRS: "203.0.113.0/24"}
    )
    props["metadata"]["annotations"].update(annotations)
    if cls:
        props["spec"]["ingressClassName"] = cls
    return Resource(INGRESS, props, urn, "ingress")


def test_an_internet_facing_ingress_must_serve_https_and_redirect_plain_http() -> None:
    check = exposure.endpoint_tls_when_exposed
    cert = {exposure.INGRESS_CERTIFICATE: "arn:aws:acm:us-east-1:111122223333:certificate/x"}
    # Without listen-ports the controller listens on HTTPS:443 once a certificate is set (upstream default).
    assert ALB_FACTS["ingress_annotations"]["listen_ports_default"]["with_certificate"] == [{"HTTPS": 443}]
    assert check([facing_ingress(**cert)]) == []
    [(urn, plain)] = check([facing_ingress()])
    assert urn == "urn:ingress" and "serves plain HTTP only: set endpoint.certificateArn" in plain
    both = json.dumps([{"HTTP": 80}, {"HTTPS": 443}])
    [(_, mixed)] = check([facing_ingress(**cert, **{exposure.INGRESS_LISTEN_PORTS: both})])
    assert "also serves plain HTTP on port 80" in mixed and exposure.INGRESS_SSL_REDIRECT in mixed
    redirect = {exposure.INGRESS_LISTEN_PORTS: both, exposure.INGRESS_SSL_REDIRECT: "443"}
    assert check([facing_ingress(**cert, **redirect)]) == []
    internal = Resource(INGRESS, ingress(**{exposure.INGRESS_SCHEME: "internal"}), "urn:i")
    assert check([internal]) == []
    nlb = {
        "metadata": {"name": "x"},
        "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["192.0.2.0/24"]},
    }
    [(_, service)] = check([Resource(SERVICE, nlb, "urn:svc")])
    assert exposure.SERVICE_SSL_CERT in service
    nlb["metadata"]["annotations"] = {
        exposure.SERVICE_SSL_CERT: "arn:aws:acm:us-east-1:111122223333:certificate/x"
    }
    assert check([Resource(SERVICE, nlb, "urn:svc")]) == []


def class_with_params(group: str, **spec: Any) -> list[Resource]:
    cls = {
        "metadata": {"name": "public"},
        "spec": {
            "controller": "x",
            "parameters": {"apiGroup": group, "kind": "IngressClassParams", "name": "p"},
        },
    }
    params = {"metadata": {"name": "p"}, "spec": spec}
    return [
        Resource(CLASS, cls, "urn:class"),
        Resource(f"kubernetes:{group}/v1:IngressClassParams", params, "urn:params"),
    ]


@pytest.mark.parametrize("group", ["eks.amazonaws.com", "elbv2.k8s.aws"])
def test_an_ingress_class_params_scheme_makes_its_ingresses_internet_facing(group: str) -> None:
    keyless = Resource(DEPLOYMENT, pod({"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}), "urn:vllm")
    plain = Resource(INGRESS, {**ingress(), "spec": {"ingressClassName": "public"}}, "urn:ingress", "ingress")
    public = class_with_params(group, scheme="internet-facing")
    # The Ingress alone says nothing of its scheme: the resource rule cannot see the exposure.
    assert exposure.endpoint_not_open_to_world(INGRESS, plain.props) == []
    stack = [*public, plain, keyless]
    assert "takes requests without an API key" in exposure.api_key_when_exposed(stack)[0][1]
    assert "class public's IngressClassParams" in exposure.endpoint_tls_when_exposed(stack)[0][1]
    [(urn, no_cidrs)] = exposure.class_endpoint_not_open_to_world(stack)
    assert urn == "urn:ingress" and "without allowed CIDRs" in no_cidrs
    halves = class_with_params(group, scheme="internet-facing", inboundCIDRs=["0.0.0.0/1", "128.0.0.0/1"])
    [(_, world)] = exposure.class_endpoint_not_open_to_world([*halves, plain])
    assert "IngressClassParams spec.inboundCIDRs admits the whole internet" in world
    limited = class_with_params(group, scheme="internet-facing", inboundCIDRs=["198.51.100.0/24"])
    assert exposure.class_endpoint_not_open_to_world([*limited, plain]) == []
    # The class's scheme wins over the annotation (ingress_class.md spec.scheme).
    overridden = Resource(
        INGRESS,
        {**ingress(**{exposure.INGRESS_SCHEME: "internet-facing"}), "spec": {"ingressClassName": "public"}},
        "urn:x",
    )
    assert exposure.exposures([*class_with_params(group, scheme="internal"), overridden]) == []
    # A default class applies to an Ingress that names none.
    default = class_with_params(group, scheme="internet-facing")
    default[0].props["metadata"]["annotations"] = {exposure.DEFAULT_CLASS_ANNOTATION: "true"}
    assert [
        e.resource.urn for e in exposure.exposures([*default, Resource(INGRESS, ingress(), "urn:d")])
    ] == ["urn:d"]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (
            [VLLM_ENTRYPOINTS["console_script"]["name"]],
            [VLLM_ENTRYPOINTS["console_script"]["serve_subcommand"], "m"],
        ),
        (["/usr/local/bin/vllm", "serve"], ["deepseek-ai/DeepSeek-R1"]),
        (VLLM_ENTRYPOINTS["module"]["invocation"].split(), ["--model", "m"]),
        (["python3"], ["-m", VLLM_ENTRYPOINTS["module"]["name"], "--port", "8000"]),
        (["sh", "-c"], [f"exec {VLLM_ENTRYPOINTS['console_script']['name']} serve /models/r1 --port 8000"]),
    ],
)
def test_vllm_is_recognised_by_its_entrypoint_in_any_image(command: list[str], args: list[str]) -> None:
    server = {"name": "server", "image": "ghcr.io/acme/inference:1.0", "command": command, "args": args}
    assert exposure.serves_vllm(server)
    [(urn, _)] = exposure.api_key_when_exposed([exposed(), Resource(DEPLOYMENT, pod(server), "urn:d")])
    assert urn == "urn:d"


def test_other_commands_are_not_vllm() -> None:
    assert not exposure.serves_vllm({"image": "busybox:1.37", "command": ["sh", "-c", "echo vllm; serve"]})
    assert not exposure.serves_vllm(
        {"image": "python:3.12", "command": ["python", "-m", "vllm.scripts.stage"]}
    )


@pytest.mark.parametrize("tag", ["latest", "main", "nightly", "stable", "edge", "dev", "Latest"])
def test_every_mutable_tag_is_refused_in_images_and_chart_values(tag: str) -> None:
    assert pins.unpinned_image(f"vllm/vllm-openai:{tag}") == f"uses the mutable tag {tag}"
    [problem] = pins.pinned_versions(
        RELEASE, {"chart": "x", "version": "1", "values": {"image": {"tag": tag}}}
    )
    assert f"values.image.tag is {tag!r}" in problem
    assert pins.unpinned_image(f"vllm/vllm-openai:{tag}@sha256:" + "b" * 64) is None


def gpu_requirement_pool(*requirements: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"template": {"spec": {"expireAfter": "720h", "requirements": list(requirements)}}},
    }


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
        {"key": "eks.amazonaws.com/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "Exists"},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7i", "p5"]},
        {"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["g6e"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g"]},
    ],
)
def test_a_gpu_nodepool_is_recognised_by_any_gpu_requirement(requirement: dict[str, Any]) -> None:
    pool = gpu_requirement_pool(requirement)
    assert nodes.is_gpu_nodepool(pool)
    problems = nodes.gpu_nodepool_guarded(NODEPOOL, pool)
    assert any("has no spec.limits['nvidia.com/gpu']" in p for p in problems)


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7g", "c7gn"]},  # Graviton
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["p5"]},
    ],
)
def test_cpu_nodepools_are_not_gpu_nodepools(requirement: dict[str, Any]) -> None:
    assert nodes.gpu_nodepool_guarded(NODEPOOL, gpu_requirement_pool(requirement)) == []


def test_every_gpu_family_the_sizer_plans_for_is_recognised() -> None:
    instances = json.loads((ROOT / "sizing" / "data" / "gpu_instances.json").read_text())["instances"]
    names = list(instances) if isinstance(instances, dict) else [i["instance_type"] for i in instances]
    assert names
    for name in names:
        requirement = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [name]}
        assert nodes.is_gpu_nodepool(gpu_requirement_pool(requirement)), name


PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ALL_BLOCKED = dict.fromkeys(storage.PUBLIC_ACCESS_FLAGS, True)


def private_bucket(*extra: Resource, block: dict[str, Any] | None = None) -> list[Resource]:
    deps = {"bucket": (BUCKET_URN,)}
    return [
        Resource("aws:s3/bucket:Bucket", {}, BUCKET_URN, "weights"),
        Resource(
            PAB, {"bucket": "weights-1", **(ALL_BLOCKED if block is None else block)}, "urn:pab", "pab", deps
        ),
        *(Resource(r.type, r.props, r.urn, r.name, deps) for r in extra),
    ]


def test_buckets_block_public_access_with_all_four_flags() -> None:
    check = storage.buckets_not_public
    # The four inputs of aws:s3/bucketPublicAccessBlock as pulumi-aws 7.51.1 declares them.
    import pulumi_aws.s3 as s3

    declared = {name for name in dir(s3.BucketPublicAccessBlockArgs) if not name.startswith("_")}
    snake = {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), f) for f in storage.PUBLIC_ACCESS_FLAGS}
    assert snake <= declared
    assert check(private_bucket()) == []
    [(urn, missing)] = check([Resource("aws:s3/bucket:Bucket", {}, BUCKET_URN, "weights")])
    assert urn == BUCKET_URN and "has no BucketPublicAccessBlock" in missing
    [(_, off)] = check(private_bucket(block={**ALL_BLOCKED, "restrictPublicBuckets": False}))
    assert "leaves restrictPublicBuckets off" in off


def test_public_acls_and_policies_for_everyone_make_a_bucket_public() -> None:
    check = storage.buckets_not_public
    acl = Resource("aws:s3/bucketAcl:BucketAcl", {"bucket": "weights-1", "acl": "public-read"}, "urn:acl")
    [(urn, public)] = check(private_bucket(acl))
    assert urn == "urn:acl" and "public through acl public-read" in public
    grant = {
        "grants": [
            {
                "grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/global/AllUsers"},
                "permission": "READ",
            }
        ]
    }
    assert check(
        private_bucket(Resource("aws:s3/bucketAcl:BucketAcl", {"accessControlPolicy": grant}, "urn:g"))
    )
    assert check(private_bucket(Resource("aws:s3/bucketAcl:BucketAcl", {"acl": "private"}, "urn:p"))) == []
    everyone = doc(
        {
            "Sid": "Open",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::w/*",
        }
    )
    policy = Resource("aws:s3/bucketPolicy:BucketPolicy", {"policy": everyone}, "urn:policy")
    [(urn, open_policy)] = check(private_bucket(policy))
    assert urn == "urn:policy" and "statement Open" in open_policy
    aws_star = everyone.replace('"Principal": "*"', '"Principal": {"AWS": "*"}')
    assert check(private_bucket(Resource("aws:s3/bucketPolicy:BucketPolicy", {"policy": aws_star}, "urn:p2")))
    conditioned = json.loads(everyone)
    conditioned["Statement"][0]["Condition"] = {"StringEquals": {"aws:SourceVpce": "vpce-1"}}
    limited = Resource("aws:s3/bucketPolicy:BucketPolicy", {"policy": json.dumps(conditioned)}, "urn:p3")
    assert check(private_bucket(limited)) == []
    # The TLS-only Deny for everyone is not a grant.
    assert (
        check(private_bucket(Resource("aws:s3/bucketPolicy:BucketPolicy", {"policy": TLS_ONLY}, "urn:t")))
        == []
    )


@pytest.mark.parametrize(
    "action",
    ["s3:GetObject", "secretsmanager:GetSecretValue", "kms:Decrypt", "ssm:GetParameter", "S3:getobject"],
)
def test_data_reading_actions_on_every_resource_are_refused(action: str) -> None:
    policy = {"policy": doc({"Sid": "D", "Effect": "Allow", "Action": action, "Resource": "*"})}
    [problem] = iam.no_wildcard_iam("aws:iam/rolePolicy:RolePolicy", policy)
    assert f'"Resource": "*" for {action}' in problem
    named = {"policy": doc({"Effect": "Allow", "Action": action, "Resource": "arn:aws:s3:::weights/*"})}
    assert iam.no_wildcard_iam("aws:iam/rolePolicy:RolePolicy", named) == []


@pytest.mark.parametrize(
    ("arn", "wild"),
    [
        ("arn:aws:s3:::*", True),
        ("arn:aws:s3:::weights*", True),
        ("arn:aws:s3:::*/*", True),
        ("arn:aws:sqs:us-east-1:111122223333:*", True),
        ("arn:aws:secretsmanager:us-east-1:111122223333:secret:*", True),  # resource type, then every name
        ("arn:aws:ssm:us-east-1:111122223333:parameter/*", True),
        ("arn:aws:kms:us-east-1:111122223333:key/*", True),
        ("arn:aws:secretsmanager:us-east-1:111122223333:secret:prod/api-*", False),
        ("arn:aws:ssm:us-east-1::parameter/aws/service/*", False),
        ("arn:aws:s3:::weights/*", False),
        ("arn:aws:s3:::weights/models/r1*", False),
        ("arn:aws:ec2:*:*:instance/*", False),
        ("arn:aws:iam::*:role/aws-service-role/*", False),
    ],
)
def test_wildcard_arns(arn: str, wild: bool) -> None:
    assert iam.wildcard_arn(arn) is wild
    policy = {"policy": doc({"Sid": "W", "Effect": "Allow", "Action": "s3:PutObject", "Resource": arn})}
    problems = iam.no_wildcard_iam("aws:iam/policy:Policy", policy)
    assert bool(problems) is wild
    if wild:
        expected = f"policy: statement W: wildcard ARN(s) {arn} match resources by pattern"
        assert problems == [f"{expected}: name each bucket, queue or key"]


@pytest.mark.parametrize(
    ("token", "props"),
    [
        (
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
        ),
        (
            "aws:iam/userPolicyAttachment:UserPolicyAttachment",
            {"policyArn": "arn:aws:iam::aws:policy/AmazonS3FullAccess"},
        ),
        (
            "aws:iam/policyAttachment:PolicyAttachment",
            {"policyArn": "arn:aws:iam::aws:policy/job-function/AdministratorAccess-Amplify"},
        ),
        (
            "aws:iam/role:Role",
            {
                "managedPolicyArns": [
                    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
                    "arn:aws-cn:iam::aws:policy/IAMFullAccess",
                ]
            },
        ),
        (
            "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive",
            {"policyArns": ["arn:aws:iam::aws:policy/PowerUserAccess"]},
        ),
    ],
)
def test_administrator_and_full_access_managed_policies_are_refused(
    token: str, props: dict[str, Any]
) -> None:
    [problem] = iam.no_wildcard_iam(token, props)
    assert "grants wildcard access" in problem


def test_narrow_managed_policies_pass() -> None:
    for arn in (
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonEBSCSIDriverPolicy",
    ):
        props = {"policyArn": f"arn:aws:iam::aws:policy/{arn}"}
        assert iam.no_wildcard_iam("aws:iam/rolePolicyAttachment:RolePolicyAttachment", props) == []


@pytest.mark.parametrize(
    ("token", "props"),
    [
        (
            "aws:ec2/securityGroup:SecurityGroup",
            {"ingress": [{"fromPort": 443, "toPort": 443, "protocol": "tcp", "cidrBlocks": ["0.0.0.0/0"]}]},
        ),
        (
            "aws:ec2/securityGroup:SecurityGroup",
            {"ingress": [{"protocol": "-1", "ipv6CidrBlocks": ["::/0"]}]},
        ),
        (
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            {"type": "ingress", "cidrBlocks": ["0.0.0.0/1", "128.0.0.0/1"]},
        ),
        (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp"},
        ),
        (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            {"cidrIpv6": "::/0", "ipProtocol": "-1"},
        ),
    ],
)
def test_security_group_ingress_from_the_whole_internet_is_refused(token: str, props: dict[str, Any]) -> None:
    [problem] = exposure.no_world_open_ingress(token, props)
    assert "admits the whole internet" in problem


def test_limited_security_group_ingress_and_egress_pass() -> None:
    check = exposure.no_world_open_ingress
    assert (
        check(
            "aws:ec2/securityGroup:SecurityGroup",
            {"ingress": [{"cidrBlocks": ["10.0.0.0/16"]}], "egress": [{"cidrBlocks": ["0.0.0.0/0"]}]},
        )
        == []
    )
    assert (
        check("aws:ec2/securityGroupRule:SecurityGroupRule", {"type": "egress", "cidrBlocks": ["0.0.0.0/0"]})
        == []
    )
    assert (
        check(
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", {"referencedSecurityGroupId": "sg-1"}
        )
        == []
    )


def host_pod(kind_props: dict[str, Any], namespace: str = "deepseek", app: str = "vllm") -> dict[str, Any]:
    return {
        "metadata": {"name": app, "namespace": namespace},
        "spec": {"template": {"metadata": {"labels": {workloads.APP_NAME_LABEL: app}}, "spec": kind_props}},
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"hostNetwork": True, "containers": [{"name": "c"}]},
        {"hostPID": True, "containers": [{"name": "c"}]},
        {"hostIPC": True, "containers": [{"name": "c"}]},
        {"containers": [{"name": "c"}], "volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        {"containers": [{"name": "c", "securityContext": {"privileged": True}}]},
        {
            "containers": [{"name": "c"}],
            "initContainers": [{"name": "i", "securityContext": {"privileged": True}}],
        },
    ],
)
@pytest.mark.parametrize(
    "token",
    [
        "kubernetes:apps/v1:Deployment",
        "kubernetes:apps/v1:DaemonSet",
        "kubernetes:apps/v1:StatefulSet",
        "kubernetes:batch/v1:Job",
    ],
)
def test_pods_that_reach_into_the_node_are_refused(token: str, spec: dict[str, Any]) -> None:
    [problem] = workloads.no_host_access(token, host_pod(spec))
    assert problem.startswith("deepseek/vllm spec.template.spec has ") and "allow-listed" in problem


def test_host_access_in_lws_cronjob_and_bare_pods_is_found() -> None:
    spec = {"hostNetwork": True, "containers": [{"name": "c"}]}
    lws = {
        "metadata": {"name": "r1", "namespace": "deepseek"},
        "spec": {
            "leaderWorkerTemplate": {"leaderTemplate": {"spec": spec}, "workerTemplate": {"spec": spec}}
        },
    }
    assert len(workloads.no_host_access("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", lws)) == 2
    cron = {"metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}
    assert (
        "spec.jobTemplate.spec.template.spec"
        in workloads.no_host_access("kubernetes:batch/v1:CronJob", cron)[0]
    )
    assert workloads.no_host_access("kubernetes:core/v1:Pod", {"metadata": {"name": "p"}, "spec": spec})
    assert (
        workloads.no_host_access(
            DEPLOYMENT, host_pod({"containers": [{"name": "c", "securityContext": {"privileged": False}}]})
        )
        == []
    )


def test_only_the_allow_listed_exporters_may_reach_into_the_node() -> None:
    spec = {
        "hostNetwork": True,
        "hostPID": True,
        "containers": [{"name": "c"}],
        "volumes": [{"name": "proc", "hostPath": {"path": "/proc"}}],
    }
    for namespace, app in workloads.HOST_ACCESS_ALLOWED:
        assert workloads.no_host_access("kubernetes:apps/v1:DaemonSet", host_pod(spec, namespace, app)) == []
        # The same name elsewhere is not the exporter the list means.
        assert workloads.no_host_access("kubernetes:apps/v1:DaemonSet", host_pod(spec, "deepseek", app)) != []


def test_the_host_access_allow_list_names_charts_the_project_installs() -> None:
    """Each allow-listed app is a chart of the snapshot (its Chart.yaml name, which its pods carry
    as app.kubernetes.io/name), installed into that namespace by an example stack's render."""
    import yaml

    charts = {}
    for chart_yaml in (ROOT / "reference" / "upstream" / "helm-charts").glob("*/Chart.yaml"):
        chart = yaml.safe_load(chart_yaml.read_text())
        charts[chart["name"]] = [d["name"] for d in chart.get("dependencies") or []]
    from deepseek_eks.automation.render import construct
    from deepseek_eks.automation.stackfile import read_stack, stack_names

    installed = set()
    for stack in stack_names():
        for r in construct(read_stack(stack)).mocks.resources:
            if r.type == RELEASE:
                chart = str(r.inputs.get("chart")).rsplit("/", 1)[-1]
                values = r.inputs.get("values") or {}
                installed.add((r.inputs.get("namespace"), chart))
                for name in charts.get(chart, []):  # a sub-chart may be moved by namespaceOverride
                    override = (values.get(name) or {}).get("namespaceOverride")
                    installed.add((override or r.inputs.get("namespace"), name))
    assert set(workloads.HOST_ACCESS_ALLOWED) <= installed
    assert all(app in charts for _, app in workloads.HOST_ACCESS_ALLOWED)


def test_a_vllm_image_running_another_command_serves_nothing() -> None:
    """A container command replaces the image's ENTRYPOINT (vllm-entrypoints.json): the weights
    stager and a Ray worker in the vllm image are no vLLM servers; args alone keep the entrypoint."""
    assert "replaces the image's ENTRYPOINT" in VLLM_ENTRYPOINTS["kubernetes_command"]["rule"]
    image = "vllm/vllm-openai:v0.33.0"
    stager = {"image": image, "command": ["python3", "/scripts/stage_weights.py"], "args": ["--stream"]}
    worker = {"image": image, "command": ["/bin/sh", "-c", 'exec ray start --address="$LEADER:6379" --block']}
    assert not exposure.serves_vllm(stager) and not exposure.serves_vllm(worker)
    assert exposure.serves_vllm({"image": image, "args": ["deepseek-ai/DeepSeek-R1", "--port", "8000"]})
    leader = {
        "image": image,
        "command": ["/bin/sh", "-c", "ray start --head && vllm serve /models/r1 --port 8000"],
    }
    assert exposure.serves_vllm(leader)


def test_narrow_ingress_rules_of_one_group_and_port_that_add_up_to_the_internet_are_refused() -> None:
    check = exposure.world_open_ingress_sets
    vpc_rule = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
    deps = {"securityGroupId": ("urn:sg",)}
    port = {"ipProtocol": "tcp", "fromPort": 443, "toPort": 443}
    low = Resource(vpc_rule, {**port, "cidrIpv4": "0.0.0.0/1"}, "urn:low", "low", deps)
    high = Resource(vpc_rule, {**port, "cidrIpv4": "128.0.0.0/1"}, "urn:high", "high", deps)
    # Each alone is half of IPv4, which the resource rule already refuses. Two /5s are each under
    # the line (1/16 of the public space: 3.2 % and 3.6 % of it) and together over it (6.8 %).
    found = check([low, high])
    assert [urn for urn, _ in found] == ["urn:low", "urn:high"]
    assert "ingress rules low, high of security group urn:sg (tcp 443-443) together admit" in found[0][1]
    pieces = [
        Resource(vpc_rule, {**port, "cidrIpv4": f"{a}.0.0.0/5"}, f"urn:{a}", str(a), deps) for a in (8, 16)
    ]
    assert all(exposure.no_world_open_ingress(r.type, r.props) == [] for r in pieces)
    assert len(check(pieces)) == 2
    other_port = Resource(
        vpc_rule, {**port, "fromPort": 22, "toPort": 22, "cidrIpv4": "16.0.0.0/5"}, "urn:o", "o", deps
    )
    assert check([pieces[0], other_port]) == []  # one piece on each port
    other_group = Resource(
        vpc_rule, {**port, "cidrIpv4": "16.0.0.0/5"}, "urn:g", "g", {"securityGroupId": ("urn:sg2",)}
    )
    assert check([pieces[0], other_group]) == []  # one piece in each group
    sg_rule = "aws:ec2/securityGroupRule:SecurityGroupRule"
    legacy = [
        Resource(
            sg_rule,
            {
                "type": "ingress",
                "protocol": "tcp",
                "fromPort": 443,
                "toPort": 443,
                "securityGroupId": "sg-1",
                "cidrBlocks": [c],
            },
            f"urn:{i}",
        )
        for i, c in enumerate(["0.0.0.0/2", "64.0.0.0/2"])
    ]
    assert len(check(legacy)) == 2
