"""The rendered-manifest gate: every object of every stack in the repo passes real validators.

Built-in kinds: kubernetes-validate --strict at the stack's Kubernetes minor. Custom resources:
jsonschema against the upstream CRD schemas, made strict. An object with no schema fails.
"""

from __future__ import annotations

import copy
import json

import pytest

from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.automation.stackfile import read_stack, stack_names
from deepseek_eks.guardrails.manifest_gate import (
    DEFAULT_SCHEMA_DIR,
    CrdSchemasUnavailable,
    check,
    schema_dir,
    strictify,
)
from deepseek_eks.settings import parse_settings
from tests.conftest import feature_configs

STACKS = stack_names()
FEATURES = feature_configs()
# The repository's vendored reference/schemas (or $DEEPSEEK_EKS_CRD_SCHEMAS): always here, so
# every custom resource is checked on any clone.
CRD_DIR = schema_dir()


@pytest.fixture(scope="module")
def renders() -> dict[str, tuple[Rendered, str]]:
    out = {}
    configs = {stack: read_stack(stack) for stack in STACKS} | FEATURES
    for label, config in configs.items():
        version = parse_settings(config.values, config.secret_keys, config.stack).kubernetes_version
        out[label] = (render(config), version)
    return out


def test_every_stack_file_is_covered() -> None:
    assert {"dev", "prod"} <= set(STACKS)


@pytest.mark.parametrize("stack", [*STACKS, *FEATURES])
def test_every_object_passes_strict_validation(renders, stack: str) -> None:
    rendered, version = renders[stack]
    problems = [p for obj in rendered.objects() for p in check(obj, version, CRD_DIR)]
    assert problems == []
    assert rendered.objects(), "a stack that renders no objects proves nothing"


def test_gate_rejects_a_broken_builtin_object(renders) -> None:
    rendered, version = renders["dev"]
    namespace = copy.deepcopy(next(o for o in rendered.objects() if o["kind"] == "Namespace"))
    namespace["metadata"]["lables"] = {"typo": "yes"}
    problems = check(namespace, version, CRD_DIR)
    assert len(problems) == 1 and "'lables' was unexpected" in problems[0]


def test_gate_rejects_a_bad_name() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name", "namespace": "x"}}
    assert check(obj, "1.34", CRD_DIR) == [
        "ConfigMap/Bad_Name: metadata.name 'Bad_Name' is not a DNS-1123 subdomain"
    ]


def test_gate_rejects_a_wrong_type_in_a_deployment() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "deepseek"},
        "spec": {
            "replicas": "two",
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": {
                "metadata": {"labels": {"app": "vllm"}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]},
            },
        },
    }
    problems = check(deployment, "1.34", CRD_DIR)
    assert len(problems) == 1 and problems[0].startswith(
        "Deployment/vllm: spec.replicas: 'two' is not of type"
    )


def nodepool() -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["g6e.12xlarge"],
                        }
                    ],
                }
            },
            "limits": {"nvidia.com/gpu": "16"},
        },
    }


def test_valid_custom_resource_passes() -> None:
    assert check(nodepool(), "1.34", CRD_DIR) == []


def test_gate_rejects_broken_custom_resources() -> None:
    typo = nodepool()
    typo["spec"]["template"]["spec"]["nodeClassRefs"] = typo["spec"]["template"]["spec"].pop("nodeClassRef")
    problems = check(typo, "1.34", CRD_DIR)
    assert any("'nodeClassRefs' was unexpected" in p for p in problems)  # strict: unknown field
    assert any("'nodeClassRef' is a required property" in p for p in problems)
    bad_limit = nodepool()
    bad_limit["spec"]["limits"]["nvidia.com/gpu"] = "sixteen"
    assert any("limits.nvidia.com/gpu" in p for p in check(bad_limit, "1.34", CRD_DIR))
    namespaced = nodepool()
    namespaced["metadata"]["namespace"] = "deepseek"
    assert "NodePool/gpu: NodePool is cluster-scoped but sets metadata.namespace" in check(
        namespaced, "1.34", CRD_DIR
    )


def test_object_without_any_schema_fails() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert check(obj, "1.34", CRD_DIR) == [
        "Widget/w: no schema for example.com/v1 Widget: an unvalidated object fails the gate"
    ]


def test_custom_resources_without_schemas_are_not_silently_passed() -> None:
    with pytest.raises(CrdSchemasUnavailable):
        check(nodepool(), "1.34", None)


def test_the_schemas_are_vendored_with_their_sources() -> None:
    """Every schema file is in the repository's index with the upstream it was copied from, and
    every CRD kind the renders use is there: the gate needs nothing beside the checkout."""
    assert CRD_DIR == DEFAULT_SCHEMA_DIR
    index = json.loads((CRD_DIR / "index.json").read_text())["schemas"]
    assert {e["file"] for e in index} == {p.name for p in CRD_DIR.glob("*.json")} - {"index.json"}
    for entry in index:
        assert {"repo", "tag", "commit", "path"} <= set(entry["upstream"]), entry["file"]
    assert {e["group"] for e in index} >= {
        "karpenter.sh", "karpenter.k8s.aws", "eks.amazonaws.com", "keda.sh",
        "monitoring.coreos.com", "leaderworkerset.x-k8s.io", "snapshot.storage.k8s.io",
    }  # fmt: skip


def test_a_schema_folder_override_without_an_index_is_an_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DEEPSEEK_EKS_CRD_SCHEMAS", str(tmp_path))
    with pytest.raises(CrdSchemasUnavailable, match=r"DEEPSEEK_EKS_CRD_SCHEMAS=.*unset it"):
        schema_dir()


def test_strictify_only_closes_objects_with_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    strict = strictify(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["spec"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["free"]
    assert strict["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in schema  # the input is left alone


def test_volume_snapshot_schemas_are_checked() -> None:
    snapshot = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": "vllm-weights", "namespace": "deepseek"},
        "spec": {"source": {"volumeSnapshotContentName": "deepseek-vllm-weights"}},
    }
    assert check(snapshot, "1.34", CRD_DIR) == []
    broken = copy.deepcopy(snapshot)
    broken["spec"]["source"]["snapshotHandel"] = "snap-0123456789abcdef0"
    assert any("'snapshotHandel' was unexpected" in p for p in check(broken, "1.34", CRD_DIR))
    cluster_scoped = copy.deepcopy(snapshot) | {"kind": "VolumeSnapshotContent"}
    assert any("cluster-scoped" in p for p in check(cluster_scoped, "1.34", CRD_DIR))
