"""examples/: the Python program that adds two services to an existing cluster renders offline with
no VPC and no cluster, and nothing collides; the YAML program uses only what the schema offers."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest
import yaml

from deepseek_eks.automation.render import HELM_TOKENS, _file_name, _helm_release, kubernetes_manifest
from deepseek_eks.testing.mocks import Recorded, RecordingMocks
from tests.examples import COMPUTE_MODES, run_existing_cluster_example
from tests.upstream import karpenter_well_known_aws_labels

ROOT = Path(__file__).resolve().parents[2]
YAML_EXAMPLE = ROOT / "examples" / "yaml-existing-cluster" / "Pulumi.yaml"
SCHEMA = json.loads((ROOT / "provider" / "schema.json").read_text())
# What creating a network or a cluster registers (components/platform/network.py, cluster.py).
CLUSTER_OR_NETWORK = ("aws:ec2/vpc:", "aws:ec2/subnet:", "aws:ec2/natGateway:", "eks:", "aws:eks/cluster:")


class Example(NamedTuple):
    mocks: RecordingMocks
    resources: list[Recorded]
    compute_mode: str


@pytest.fixture(scope="module", params=COMPUTE_MODES)
def two_services(request: pytest.FixtureRequest) -> Example:
    """The example on an Auto Mode cluster (its stack file) and on a cluster running Karpenter."""
    mocks = run_existing_cluster_example(request.param)
    return Example(mocks, mocks.resources, request.param)


def test_no_vpc_and_no_cluster_are_created(two_services) -> None:
    mocks = two_services.mocks
    made = [r.type for r in mocks.resources]
    assert not [t for t in made if t.startswith(CLUSTER_OR_NETWORK)]
    assert made.count("deepseek-eks:index:DeepSeekService") == 2
    assert "deepseek-eks:index:Cluster" not in made


def test_urns_are_unique(two_services) -> None:
    regs = two_services.resources
    repeated = [u for u, n in Counter(r.urn for r in regs).items() if n > 1]
    assert not repeated


def _objects(mocks: RecordingMocks) -> list[dict[str, Any]]:
    return [
        kubernetes_manifest(r)
        for r in mocks.resources
        if r.type.startswith("kubernetes:") and r.type not in HELM_TOKENS and r.custom
    ]


def test_kubernetes_objects_and_releases_do_not_collide(two_services) -> None:
    mocks = two_services.mocks
    files = Counter(_file_name(m) for m in _objects(mocks))
    assert [f for f, n in files.items() if n > 1] == []
    releases: list[Recorded] = [r for r in mocks.resources if r.type in HELM_TOKENS]
    names = Counter(_helm_release(r)[0] for r in releases)
    assert [n for n, count in names.items() if count > 1] == []


def test_each_service_has_its_namespace_and_gpu_pools(two_services) -> None:
    mocks = two_services.mocks
    objects = _objects(mocks)
    deployments = {
        (m["metadata"]["namespace"], m["metadata"]["name"]) for m in objects if m["kind"] == "Deployment"
    }
    assert {ns for ns, _ in deployments} == {"team-a", "team-b"}
    pools = {m["metadata"]["name"]: m for m in objects if m["kind"] == "NodePool"}
    assert {"team-a-gpu-inference", "team-b-gpu-inference"} <= set(pools)
    role = "deepseek-eks/node-role"
    for team in ("team-a", "team-b"):
        deployment = next(
            m for m in objects if m["kind"] == "Deployment" and m["metadata"]["namespace"] == team
        )
        selector = deployment["spec"]["template"]["spec"]["nodeSelector"][role]
        assert selector == pools[f"{team}-gpu-inference"]["spec"]["template"]["metadata"]["labels"][role]
    # The 7B and the 70B need different instance shapes: each pool keeps its own.
    types = {
        name: next(
            r["values"]
            for r in pool["spec"]["template"]["spec"]["requirements"]
            if r["key"] == "node.kubernetes.io/instance-type"
        )
        for name, pool in pools.items()
        if name.endswith("gpu-inference")
    }
    assert not set(types["team-a-gpu-inference"]) & set(types["team-b-gpu-inference"])


def _releases(mocks: RecordingMocks) -> dict[str, dict[str, Any]]:
    return dict(_helm_release(r) for r in mocks.resources if r.type in HELM_TOKENS)


def test_cluster_wide_addons_come_once(two_services) -> None:
    mocks = two_services.mocks
    kinds = Counter(m["kind"] for m in _objects(mocks))
    assert kinds["StorageClass"] == 1
    releases = Counter(_helm_release(r)[0] for r in mocks.resources if r.type in HELM_TOKENS)
    assert releases["kube-prometheus-stack"] == releases["dcgm-exporter"] == 1
    if two_services.compute_mode == "auto-mode":
        assert kinds["IngressClass"] == 1  # Auto Mode's ALB needs one; Karpenter's LBC brings its own
    else:
        assert releases["nvidia-device-plugin"] == 1 and kinds["EC2NodeClass"] == 2


def test_one_dcgm_exporter_covers_every_services_gpu_nodes(two_services) -> None:
    """dcgm-exporter is installed once (team A) and must run on team B's GPU nodes too, or team B
    has no GPU metrics: it selects by the GPU-manufacturer label the capacity provider puts on every
    GPU node, not by one service's node-role label."""
    mocks = two_services.mocks
    selector = _releases(mocks)["dcgm-exporter"]["values"]["nodeSelector"]
    ((key, value),) = selector.items()
    assert value == "nvidia"
    domain, label = key.split("/")
    # Karpenter's own list; Auto Mode names the same label under its domain (nodepools.py).
    if well_known := karpenter_well_known_aws_labels():
        assert f"karpenter.k8s.aws/{label}" in well_known
    auto_mode = two_services.compute_mode == "auto-mode"
    assert domain == ("eks.amazonaws.com" if auto_mode else "karpenter.k8s.aws")
    pools = [m for m in _objects(mocks) if m["kind"] == "NodePool"]
    assert {p["metadata"]["name"].split("-gpu")[0] for p in pools} == {"team-a", "team-b"}
    tolerations = _releases(mocks)["dcgm-exporter"]["values"]["tolerations"]
    for pool in pools:
        for taint in pool["spec"]["template"]["spec"]["taints"]:
            assert any(t["key"] == taint["key"] and t["operator"] == "Exists" for t in tolerations)


# --- the YAML program, checked against the committed schema ---------------------------------------

_INTERPOLATION = re.compile(r"^\$\{([^}]+)\}$")
# A sample value of each project config type (the Pulumi project schema's simpleConfigType).
_SAMPLE = {"string": "x", "integer": 1, "boolean": True}
PROJECT_SCHEMA = ROOT / "reference" / "upstream" / "pulumi-project" / "project.json"


def _json_schema() -> dict[str, Any]:
    """The component's inputs as a JSON Schema: Pulumi schema types are JSON Schema types, and
    ``#/types/<token>`` refs point into ``definitions``; unknown properties are refused."""

    def convert(spec: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in spec:
            return {"$ref": "#/definitions/" + spec["$ref"].removeprefix("#/types/")}
        out: dict[str, Any] = {"type": spec["type"]}
        if "enum" in spec:  # an enum type: its values only
            out["enum"] = [e["value"] for e in spec["enum"]]
        if spec["type"] == "array":
            out["items"] = convert(spec["items"])
        if spec["type"] == "object" and "properties" in spec:
            out["properties"] = {k: convert(v) for k, v in spec["properties"].items()}
            out["additionalProperties"] = False
            out["required"] = spec.get("required", [])
        return out

    service = SCHEMA["resources"]["deepseek-eks:index:DeepSeekService"]
    return {
        "type": "object",
        "properties": {k: convert(v) for k, v in service["inputProperties"].items()},
        "required": service.get("requiredInputs", []),
        "additionalProperties": False,
        "definitions": {token: convert(t) for token, t in SCHEMA["types"].items()},
    }


def _resolve(value: Any, config: dict[str, Any]) -> Any:
    """A config reference (``${vpcId}``) stands for a value of the type its declaration gives."""
    if isinstance(value, str) and (m := _INTERPOLATION.match(value)) and m[1] in config:
        declared = config[m[1]]
        if declared["type"] == "array":
            return [_SAMPLE[declared["items"]["type"]]]
        return _SAMPLE[declared["type"]]
    if isinstance(value, dict):
        return {k: _resolve(v, config) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, config) for v in value]
    return value


def test_yaml_program_uses_the_component_through_the_schema() -> None:
    program = yaml.safe_load(YAML_EXAMPLE.read_text())
    services = [r for r in program["resources"].values() if r["type"] == "deepseek-eks:index:DeepSeekService"]
    assert len(services) == 2
    schema = _json_schema()
    for service in services:
        jsonschema.validate(_resolve(service["properties"], program.get("config", {})), schema)
    outputs = SCHEMA["resources"]["deepseek-eks:index:DeepSeekService"]["properties"]
    for expression in program["outputs"].values():
        assert expression.removeprefix("${").removesuffix("}").split(".", 1)[1] in outputs


def test_the_schema_check_refuses_a_misspelt_property() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"model": {"varient": "r1-671b"}}, _json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"autoscaling": {"maxReplicas": "three"}}, _json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"autoscaling": {"signal": "vibes"}}, _json_schema())


def test_every_service_scrapes_and_alerts_on_its_own_vllm(two_services) -> None:
    mocks = two_services.mocks
    objects = _objects(mocks)
    for kind in ("PodMonitor", "PrometheusRule"):
        assert {m["metadata"]["namespace"] for m in objects if m["kind"] == kind} == {"team-a", "team-b"}


def test_aws_resources_take_the_services_name(two_services) -> None:
    mocks = two_services.mocks
    aws = [r for r in mocks.resources if r.type.startswith("aws:")]
    assert aws and all(r.name.startswith("team-b-") for r in aws)  # team B's S3 weights
    associations = [
        r.inputs for r in aws if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    ]
    assert {(a["clusterName"], a["namespace"]) for a in associations} == {("platform", "team-b")}


def test_two_services_in_one_cluster_pass_every_policy_rule(two_services) -> None:
    from deepseek_eks.policy.rules import violations
    from tests.rendered.test_policy_pack import policy_view

    resources = policy_view(two_services.mocks.resources)
    assert [r for r in resources if r.type == "kubernetes:karpenter.sh/v1:NodePool"]
    assert violations(resources) == []


def test_every_object_of_both_services_passes_the_manifest_gate(two_services) -> None:
    """kubernetes-validate --strict and the upstream CRD schemas, as for the example stacks."""
    from deepseek_eks.guardrails.manifest_gate import check, schema_dir
    from deepseek_eks.settings import Settings

    crd_dir = schema_dir()
    version = Settings().kubernetes_version  # the example leaves kubernetesVersion at its default
    assert [p for obj in _objects(two_services.mocks) for p in check(obj, version, crd_dir)] == []


def _project_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(PROJECT_SCHEMA.read_text()))


def test_the_yaml_program_is_a_valid_pulumi_project_with_its_packages_block() -> None:
    """The CLI validates Pulumi.yaml against its project schema before the YAML runtime runs it
    (pulumi sdk v3.206.0, the one pulumi-yaml v1.25.0 builds with: workspace/loaders.go
    LoadProjectBytes -> ValidateProject); ``packages`` maps a package to its source (a path to
    the provider folder here), as pulumi-yaml v1.25.0 reads it (server.go: proj.GetPackageSpecs)."""
    program = yaml.safe_load(YAML_EXAMPLE.read_text())
    validator = _project_validator()
    assert [e.message for e in validator.iter_errors(program)] == []
    assert program["packages"] == {"deepseek-eks": "../../provider"}
    assert (YAML_EXAMPLE.parent / program["packages"]["deepseek-eks"] / "PulumiPlugin.yaml").is_file()
    # The check bites: config types as the YAML runtime's own docs once spelt them, and a
    # package entry that is neither a source nor a {source, version, parameters} object.
    assert not validator.is_valid({**program, "config": {"vpcId": {"type": "String"}}})
    assert not validator.is_valid({**program, "packages": {"deepseek-eks": {"path": "../../provider"}}})


def test_the_yaml_program_passes_another_resources_output_to_the_service() -> None:
    program = yaml.safe_load(YAML_EXAMPLE.read_text())
    team_b = program["resources"]["team-b"]["properties"]
    source, _, field = team_b["apiKey"].removeprefix("${").removesuffix("}").partition(".")
    assert program["resources"][source]["type"] == "random:index/randomPassword:RandomPassword"
    assert field == "result"
    api_key = SCHEMA["resources"]["deepseek-eks:index:DeepSeekService"]["inputProperties"]["apiKey"]
    assert not api_key.get("plain") and api_key.get("secret")


def test_policies_name_every_vpc_block_and_the_clusters_own_service_cidr(two_services) -> None:
    """On your VPC and cluster (issue 31 §1) the policies read the VPC's associated CIDR blocks
    (EC2 DescribeVpcs CidrBlockAssociationSet) and the cluster's service CIDR (EKS DescribeCluster
    kubernetesNetworkConfig), as the mocks answer them like AWS, instead of the primary block and
    EKS's defaults."""
    from deepseek_eks.components.network_policies import EKS_SERVICE_CIDRS
    from deepseek_eks.testing.mocks import EXISTING_SERVICE_CIDR, INVOKES

    vpc = INVOKES["aws:ec2/getVpc:getVpc"](type("Args", (), {"args": {"id": "vpc-x"}})(), "us-east-1")
    blocks = {a["cidrBlock"] for a in vpc["cidrBlockAssociations"]}
    assert len(blocks) == 2  # a secondary block beside the primary: the case that matters
    policies = [o for o in _objects(two_services.mocks) if o["kind"] == "NetworkPolicy"]
    named = {
        peer["ipBlock"]["cidr"]
        for p in policies
        for rule in p["spec"].get("egress", []) + p["spec"].get("ingress", [])
        for peer in rule.get("to", []) + rule.get("from", [])
        if "ipBlock" in peer
    }
    assert blocks <= named and EXISTING_SERVICE_CIDR in named
    assert not set(EKS_SERVICE_CIDRS) & named  # the cluster says which one it uses
