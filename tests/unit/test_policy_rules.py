"""Each policy rule (policy/rules.py) with passing and failing resource args; the pack's wrapping
through pulumi-policy's own validate entry points (the policy server is not started)."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from policy import rules
from policy.rules import Resource

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
    check = rules.endpoint_not_open_to_world
    assert check(INGRESS, ingress(**{rules.INGRESS_SCHEME: "internal"})) == []
    assert check(INGRESS, ingress()) == []  # the controller's default scheme is internal
    facing = {rules.INGRESS_SCHEME: "internet-facing"}
    assert check(INGRESS, ingress(**facing, **{rules.INGRESS_INBOUND_CIDRS: "203.0.113.0/24"})) == []
    [missing] = check(INGRESS, ingress(**facing))
    assert "without allowed CIDRs" in missing and rules.INGRESS_INBOUND_CIDRS in missing
    [world] = check(INGRESS, ingress(**facing, **{rules.INGRESS_INBOUND_CIDRS: "203.0.113.0/24,0.0.0.0/0"}))
    assert "admits the whole internet (203.0.113.0/24, 0.0.0.0/0 together admit 100% of IPv4)" in world
    [v6] = check(INGRESS, ingress(**facing, **{rules.INGRESS_INBOUND_CIDRS: "::/0"}))
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
    facing = {rules.INGRESS_SCHEME: "internet-facing", rules.INGRESS_INBOUND_CIDRS: cidrs}
    [world] = rules.endpoint_not_open_to_world(INGRESS, ingress(**facing))
    assert "admits the whole internet" in world
    cluster = rules.cluster_endpoint_private_or_limited(
        "eks:index:Cluster", {"publicAccessCidrs": cidrs.split(",")}
    )
    assert "opens the EKS API endpoint to the internet" in cluster[0]


def test_a_quarter_of_the_internet_is_not_world_open() -> None:
    facing = {rules.INGRESS_SCHEME: "internet-facing", rules.INGRESS_INBOUND_CIDRS: "0.0.0.0/2,10.0.0.0/8"}
    assert rules.endpoint_not_open_to_world(INGRESS, ingress(**facing)) == []


def test_a_load_balancer_service_is_public_unless_marked_internal() -> None:
    check = rules.endpoint_not_open_to_world
    lb = {"metadata": {"name": "x"}, "spec": {"type": "LoadBalancer"}}
    assert "loadBalancerSourceRanges" in check(SERVICE, lb)[0]
    internal = {**lb, "metadata": {"name": "x", "annotations": {rules.SERVICE_SCHEME: "internal"}}}
    assert check(SERVICE, internal) == []
    limited = {**lb, "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["198.51.100.0/24"]}}
    assert check(SERVICE, limited) == []
    assert check(SERVICE, {"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}) == []


def test_the_cluster_api_endpoint_must_be_private_or_cidr_limited() -> None:
    check = rules.cluster_endpoint_private_or_limited
    assert check("eks:index:Cluster", {"endpointPublicAccess": False}) == []
    assert (
        check("eks:index:Cluster", {"endpointPublicAccess": True, "publicAccessCidrs": ["192.0.2.0/24"]})
        == []
    )
    assert "public to everyone" in check("eks:index:Cluster", {})[0]  # public is the default
    assert "0.0.0.0/0" in check("eks:index:Cluster", {"publicAccessCidrs": ["0.0.0.0/0"]})[0]
    assert check("aws:eks/cluster:Cluster", {"vpcConfig": {"endpointPublicAccess": False}}) == []
    assert "vpcConfig.publicAccessCidrs" in check("aws:eks/cluster:Cluster", {"vpcConfig": {}})[0]


# --- IMDSv2


def test_imdsv2_with_hop_limit_one_on_node_classes_and_launch_templates() -> None:
    check = rules.imdsv2_hop_limit_one
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
    assert rules.unpinned_image(image) == why


def test_pinned_versions_covers_containers_ami_aliases_and_charts() -> None:
    check = rules.pinned_versions
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
    check = rules.gpu_nodepool_guarded
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
    check = rules.encrypted_volumes
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
            {"Effect": "Deny", "Action": "s3:*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
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
    check = rules.buckets_encrypted_tls_only
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
    check = rules.no_wildcard_iam
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
    assert len(check("aws:iam/role:Role", role)) == 2
    admin = check(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
    )
    assert "grants wildcard access" in admin[0]


def test_the_documented_listener_exception_matches_the_components_policy() -> None:
    from deepseek_eks.components.iam_policies import load_balancer_controller_policy

    policy = load_balancer_controller_policy(partition="aws", cluster_name="c")
    star = {a for s in policy["Statement"] if s.get("Resource") == "*" for a in rules._list(s["Action"])}
    non_reads = {a for a in star if not a.split(":", 1)[1].startswith(rules.READ_VERBS)}
    assert non_reads == rules.STAR_RESOURCE_EXCEPTIONS


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
    assert rules.holds_secret(name) is secret


def test_no_plaintext_secrets_in_env_args_configmaps_or_helm_values() -> None:
    check = rules.no_plaintext_secrets
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
    props = ingress(**{rules.INGRESS_SCHEME: "internet-facing", rules.INGRESS_INBOUND_CIDRS: cidrs})
    return Resource(INGRESS, props, "urn:ingress", "ingress")


def test_the_api_key_is_required_once_the_endpoint_is_internet_facing() -> None:
    check = rules.api_key_when_exposed
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
    internal = Resource(INGRESS, ingress(**{rules.INGRESS_SCHEME: "internal"}), "urn:ingress")
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
    world = ingress(**{rules.INGRESS_SCHEME: "internet-facing", rules.INGRESS_INBOUND_CIDRS: "0.0.0.0/0"})
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
    )
    buckets.validate(_Args(resources=[bucket]), lambda m, u=None: reported.append((m, u)))
    assert {u for _, u in reported} == {BUCKET_URN} and len(reported) == 2


def test_the_pack_manifest_runs_python_from_the_repository_venv() -> None:
    import yaml

    manifest = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    assert manifest["runtime"]["name"] == "python"
    assert (ROOT / "policy" / manifest["runtime"]["options"]["virtualenv"]).resolve() == (
        ROOT / ".venv"
    ).resolve()


def test_the_pack_boots_under_pulumis_policy_runner_and_reports_a_violation() -> None:
    """What `pulumi preview --policy-pack policy` starts: pulumi's own runner
    (sdk/python/lib/pulumi/policy/__main__.py runs the pack folder's __main__.py), which serves the
    analyzer on a port it prints; Analyze is called as the engine calls it."""
    server = subprocess.Popen(
        [sys.executable, "-m", "pulumi.policy", "127.0.0.1:0", str(ROOT / "policy")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT / "policy",
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            analyzer = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "deepseek-eks-guardrails"
            assert [p.name for p in info.policies] == [
                r.name for r in (*rules.RESOURCE_RULES, *rules.STACK_RULES)
            ]
            props = struct_pb2.Struct()
            props.update(
                ingress(**{rules.INGRESS_SCHEME: "internet-facing", rules.INGRESS_INBOUND_CIDRS: "0.0.0.0/0"})
            )
            request = analyzer_pb2.AnalyzeRequest(type=INGRESS, properties=props, urn="urn:x", name="vllm")
            diagnostics = analyzer.Analyze(request, timeout=30).diagnostics
            assert [(d.policyName, d.enforcementLevel) for d in diagnostics] == [
                ("endpoint-not-open-to-world", analyzer_pb2.MANDATORY)
            ]
            message = diagnostics[0].message
            assert "admits the whole internet (0.0.0.0/0 together admit 100% of IPv4)" in message
    finally:
        server.kill()
        server.wait(timeout=30)
