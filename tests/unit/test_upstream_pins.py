"""Pins and node facts checked against what upstream released (reference/upstream)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deepseek_eks.components import versions
from deepseek_eks.guardrails import pins as pin_inventory
from deepseek_eks.guardrails.manifest_gate import schema_dir
from deepseek_eks.settings.model import SUPPORTED_KUBERNETES_VERSIONS
from deepseek_eks.sizing import instance_catalog
from deepseek_eks.sizing.nodes import ENI_LIMITS, eni_limited_pods, kube_reserved_memory_mib
from tests.upstream import eks_ami_release_tags
from tests.upstream_platform import al2023_images, eks_chart_versions, platform_facts
from tests.upstream_platform import eni_limited_pods as upstream_eni_limited_pods

ALIAS = re.compile(r"al2023@(v\d{8})")


def pinned_ami_releases() -> set[str]:
    """Every al2023@vYYYYMMDD the versions module holds, whatever the constant is called."""
    found = set()
    for value in vars(versions).values():
        if isinstance(value, str):
            found.update(ALIAS.findall(value))
    return found


def test_versions_pin_at_least_one_ami_release() -> None:
    assert pinned_ami_releases()


@pytest.mark.parametrize("release", sorted(pinned_ami_releases()))
def test_pinned_ami_release_exists_and_covers_every_supported_kubernetes(release: str) -> None:
    assert release in eks_ami_release_tags()
    images = al2023_images()[release]
    for minor in SUPPORTED_KUBERNETES_VERSIONS:
        # GPU nodes resolve the NVIDIA variant, the general pool the standard one (x86_64 only).
        assert minor in images["x86_64-nvidia"], (release, minor)
        assert minor in images["x86_64-standard"], (release, minor)


def test_the_eks_chart_pin_comes_from_eks_charts() -> None:
    # Its version against the released chart (eks-charts-versions.json) is checked by the pins
    # inventory below, with the controller's IAM policy snapshot.
    assert versions.AWS_LOAD_BALANCER_CONTROLLER.repository == "https://aws.github.io/eks-charts"
    assert versions.AWS_LOAD_BALANCER_CONTROLLER.chart in eks_chart_versions()


@pytest.mark.parametrize("name", sorted(instance_catalog().instances))
def test_eni_limited_pods_match_karpenters_vpc_limits(name: str) -> None:
    assert name in ENI_LIMITS
    assert eni_limited_pods(name) == upstream_eni_limited_pods(name)


def test_kube_reserved_memory_is_karpenters_formula_over_eni_limited_pods() -> None:
    facts = platform_facts()["karpenter"]["kube_reserved_memory_mib"]
    for name in ("g6.xlarge", "g6e.12xlarge", "p5.48xlarge"):
        expected = facts["base"] + facts["per_pod"] * upstream_eni_limited_pods(name)
        assert kube_reserved_memory_mib(name) == expected
    # Not kubelet's default of 110 pods: a 12xlarge reserves for hundreds of pods.
    assert kube_reserved_memory_mib("g6e.12xlarge") > facts["base"] + facts["per_pod"] * 110


def test_unknown_instance_type_names_the_table_to_extend() -> None:
    with pytest.raises(ValueError, match="ENI_LIMITS"):
        eni_limited_pods("g7.xlarge")


# --- pin hygiene: `python -m automation pins` (guardrails/pins.py) ------------------------------


def test_every_pin_moves_with_its_reference_data() -> None:
    pins = pin_inventory.collect_pins(schema_dir())
    assert pin_inventory.check_pins(pins) == []
    assert not [p for p in pins if p.unchecked]
    listed = {(p.kind, p.name) for p in pins}
    charts = [v for v in vars(versions).values() if isinstance(v, versions.ChartPin)]
    assert {("chart", c.chart.rsplit("/", 1)[-1]) for c in charts} <= listed
    assert {("image", versions.VLLM_IMAGE.rsplit(":", 1)[0]), ("ami", "al2023")} <= listed
    schema_files = {s["file"] for s in json.loads((schema_dir() / "index.json").read_text())["schemas"]}
    assert {p.reference.removeprefix("schemas/") for p in pins if p.kind == "crd-schema"} == schema_files


def fake_schema_index(tmp_path: Path) -> Path:
    """A schema index shaped like the real one, at the releases the charts pin today."""
    entries = [
        ("karpenter.sh", "NodePool", "aws/karpenter-provider-aws", versions.KARPENTER.version),
        ("keda.sh", "ScaledObject", "kedacore/keda", versions.KEDA.version),
        (
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            "kubernetes-sigs/lws",
            versions.LEADER_WORKER_SET.version,
        ),
    ]
    schemas = [
        {
            "file": f"{g}_v1_{k}.json",
            "group": g,
            "version": "v1",
            "kind": k,
            "upstream": {"repo": r, "tag": f"v{v}"},
        }
        for g, k, r, v in entries
    ]
    (tmp_path / "index.json").write_text(json.dumps({"schemas": schemas}))
    return tmp_path


@pytest.mark.parametrize(
    ("attribute", "moved", "expected"),
    [
        (
            "VLLM_IMAGE",
            "vllm/vllm-openai:v0.34.0",
            "reference/upstream/vllm-0.34.0/serve-flags.json is missing",
        ),
        ("KARPENTER", "1.15.0", "CRD schemas of aws/karpenter-provider-aws are v1.14.1"),
        ("KEDA", "2.21.0", "CRD schemas of kedacore/keda are v2.20.2"),
        ("LEADER_WORKER_SET", "0.11.0", "CRD schemas of kubernetes-sigs/lws are v0.10.0"),
        ("AWS_LOAD_BALANCER_CONTROLLER", "3.6.0", "eks-charts-versions.json has 3.5.0"),
        # A chart with no other reference data still needs the default values its values are
        # checked against (tests/rendered/test_helm_values.py).
        (
            "NVIDIA_DEVICE_PLUGIN",
            "0.19.0",
            "reference/upstream/helm-charts/nvidia-device-plugin-0.19.0/values.yaml is missing",
        ),
        (
            "KUBE_PROMETHEUS_STACK",
            "89.0.0",
            "reference/upstream/helm-charts/kube-prometheus-stack-89.0.0/values.yaml is missing",
        ),
        ("AL2023_AMI_RELEASE", "v20990101", "v20990101 is not an awslabs/amazon-eks-ami release tag"),
    ],
)
def test_a_pin_moved_without_its_reference_data_fails(
    attribute: str, moved: str, expected: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    index = fake_schema_index(tmp_path)
    assert pin_inventory.check_pins(pin_inventory.collect_pins(index)) == []
    current = getattr(versions, attribute)
    value = (
        current.__class__(current.chart, current.repository, moved)
        if isinstance(current, versions.ChartPin)
        else moved
    )
    monkeypatch.setattr(versions, attribute, value)
    problems = pin_inventory.check_pins(pin_inventory.collect_pins(index))
    assert len(problems) == 1 and expected in problems[0], problems


def test_every_chart_pin_has_an_upstream_release_row() -> None:
    """A chart pin is a release someone read upstream: its values snapshot has a row naming the
    repository, the tag (or release branch) and the commit it was read at, and the Chart.yaml read
    there carries the pinned version (LWS's tag says 0.1.0 and is released as its tag: the row's
    ``source_version`` says so)."""
    charts = [pin for pin in vars(versions).values() if isinstance(pin, versions.ChartPin)]
    assert len(charts) >= 8
    for pin in charts:
        name = pin.chart.rsplit("/", 1)[-1]
        row = pin_inventory.helm_chart_source(name, pin.version)
        assert row is not None, f"{name} {pin.version} has no row in helm-charts/index.json"
        assert {"repo", "ref", "commit", "path"} <= row.keys() and re.fullmatch("[0-9a-f]{40}", row["commit"])
        folder = pin_inventory.helm_chart_snapshot(name, pin.version)
        chart = yaml.safe_load((folder / "Chart.yaml").read_text())
        assert (chart["name"], str(chart["version"])) == (name, row.get("source_version", pin.version))


def test_the_pins_command_lists_and_passes() -> None:
    env = {**os.environ, "DEEPSEEK_EKS_CRD_SCHEMAS": str(schema_dir())}
    proc = subprocess.run(
        [sys.executable, "-m", "automation", "pins"], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split() == ["KIND", "NAME", "VERSION", "SOURCE", "REFERENCE"]
    assert any(r.split()[:3] == ["chart", "karpenter", versions.KARPENTER.version] for r in rows)
