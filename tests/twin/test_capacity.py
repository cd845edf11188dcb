"""Tier 2 inputs (issue 24): the kwok provider's instance-type file generated from the GPU catalog,
the NodePools rewritten to its node class, and the refusals of ``twin capacity``; no binaries
needed. The facts are the upstream snapshot's (reference/upstream/karpenter-kwok)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from deepseek_eks.components.versions import KARPENTER
from deepseek_eks.sizing.catalog import instance_catalog
from deepseek_eks.twin import pinned_version
from deepseek_eks.twin.capacity import (
    Capacity,
    CapacityReport,
    ephemeral_storage,
    kwok_nodepools,
    run_scenario,
)
from deepseek_eks.twin.check import load_render
from deepseek_eks.twin.instance_types import aws_labels, instance_types_file
from tests.twin.conftest import render_stack
from tests.upstream import UPSTREAM

KWOK = UPSTREAM / "karpenter-kwok"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]


def kwok_facts() -> dict[str, Any]:
    return json.loads((KWOK / "facts.json").read_text())


def shape(value: Any) -> Any:
    """The JSON structure of ``value``: keys and value types, lists by their first element."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path = tmp_path_factory.mktemp("kwok") / "instance_types.json"
    instance_types_file(path, "us-east-1", ZONES)
    entries: list[dict[str, Any]] = json.loads(path.read_text())
    return entries


def test_the_provider_is_the_karpenter_the_project_pins() -> None:
    assert pinned_version("karpenter-kwok") == f"v{KARPENTER.version}"


def test_the_generated_file_has_the_upstream_example_shape(generated: list[dict[str, Any]]) -> None:
    """Every entry, offering and requirement is spelled as the provider's embedded default file
    (kwok/cloudprovider/instance_types.json): Go field names in offerings, string quantities."""
    example = json.loads((KWOK / "instance_types.example.json").read_text())[0]
    file_format = kwok_facts()["instance_type_file"]
    assert list(example) == file_format["top_level_keys"]
    assert list(example["offerings"][0]) == file_format["offering_keys"]
    for entry in generated:
        assert set(entry) == set(example), entry["name"]
        for offering in entry["offerings"]:
            assert shape(offering) == shape(example["offerings"][0]), entry["name"]
        assert {type(v) for v in entry["resources"].values()} == {str}
        assert entry["architecture"] == example["architecture"]
        assert entry["operatingSystems"] == example["operatingSystems"]


def test_every_offering_names_its_zone_and_capacity_type(generated: list[dict[str, Any]]) -> None:
    for entry in generated:
        seen = set()
        for offering in entry["offerings"]:
            fixed = {r["key"]: r["values"] for r in offering["Requirements"] if r["operator"] == "In"}
            seen.add((fixed["topology.kubernetes.io/zone"][0], fixed["karpenter.sh/capacity-type"][0]))
        assert seen == {(z, c) for z in ZONES for c in ("spot", "on-demand")}, entry["name"]


def test_spot_is_priced_by_the_upstream_generators_ratio(generated: list[dict[str, Any]]) -> None:
    ratio = kwok_facts()["spot_price_ratio"]["value"]
    g6e = next(e for e in generated if e["name"] == "g6e.12xlarge")
    prices = {
        next(r["values"][0] for r in o["Requirements"] if r["key"] == "karpenter.sh/capacity-type"): o[
            "Price"
        ]
        for o in g6e["offerings"]
    }
    on_demand = instance_catalog().instances["g6e.12xlarge"].on_demand_usd_per_hour["us-east-1"]
    assert prices == {"on-demand": on_demand, "spot": pytest.approx(on_demand * ratio)}


def test_gpu_labels_are_the_ones_karpenters_aws_provider_documents() -> None:
    """The labels each offering carries (so NodePool requirements on them match as on AWS) equal
    those Karpenter v1.14's instance-type reference lists for the same type."""
    documented = kwok_facts()["aws_instance_type_labels"]["labels"]
    catalog = instance_catalog().instances
    assert set(documented) <= set(catalog)
    for name, labels in documented.items():
        ours = aws_labels(catalog[name])
        assert ours == {k: v for k, v in labels.items() if k in ours}, name
        # Every label a GPU NodePool here selects on is among them.
        assert {"instance-family", "instance-gpu-count", "instance-gpu-memory"} <= {
            k.split("/")[1] for k in ours
        }


def test_gpu_types_carry_the_catalogs_gpus_as_a_resource(generated: list[dict[str, Any]]) -> None:
    catalog = instance_catalog().instances
    gpu = {e["name"]: e for e in generated if "nvidia.com/gpu" in e["resources"]}
    offered = {n for n, i in catalog.items() if i.offered_in_region.get("us-east-1")}
    priced = {n for n in offered if catalog[n].on_demand_usd_per_hour.get("us-east-1") is not None}
    assert set(gpu) == priced and priced < set(catalog)  # p5e: no On-Demand price, never offered here
    for name, entry in gpu.items():
        assert entry["resources"]["nvidia.com/gpu"] == str(catalog[name].gpu_count)
        assert entry["resources"]["cpu"] == str(catalog[name].vcpu)


def test_raid0_node_storage_is_the_instance_store_in_decimal_gigabytes(tmp_path: Path) -> None:
    """platform-facts.json: with instanceStorePolicy RAID0 Karpenter's AWS provider counts the
    instance store, in decimal G, as the node's ephemeral storage."""
    platform = json.loads((UPSTREAM / "platform-facts.json").read_text())["karpenter"]
    unit = platform["instance_store_ephemeral_storage"]["capacity_unit"]
    objects, _ = load_render(render_stack("prod", "karpenter", tmp_path))
    assert any(o.get("spec", {}).get("instanceStorePolicy") == "RAID0" for o in objects)
    storage = ephemeral_storage(objects, "gpu-inference")
    assert (
        storage["g6e.12xlarge"] == f"{instance_catalog().instances['g6e.12xlarge'].instance_storage_gb}{unit}"
    )


def test_nodepools_point_at_the_kwok_node_class_and_keep_the_rest(tmp_path: Path) -> None:
    objects, _ = load_render(render_stack("prod", "karpenter", tmp_path))
    pools, classes = kwok_nodepools(objects)
    crd = yaml.safe_load((KWOK / "crds" / "karpenter.kwok.sh_kwoknodeclasses.yaml").read_text())
    served = [v["name"] for v in crd["spec"]["versions"] if v["served"]]
    assert {c["apiVersion"] for c in classes} == {f"{crd['spec']['group']}/{v}" for v in served}
    assert {c["kind"] for c in classes} == {crd["spec"]["names"]["kind"]}
    rendered = {o["metadata"]["name"]: o for o in objects if o["kind"] == "NodePool"}
    assert {p["metadata"]["name"] for p in pools} == set(rendered) and len(pools) == 3
    for pool in pools:
        ref = pool["spec"]["template"]["spec"].pop("nodeClassRef")
        before = json.loads(json.dumps(rendered[pool["metadata"]["name"]]))
        assert ref["name"] == before["spec"]["template"]["spec"].pop("nodeClassRef")["name"]
        assert (ref["group"], ref["kind"]) == (crd["spec"]["group"], crd["spec"]["names"]["kind"])
        assert ref["name"] in {c["metadata"]["name"] for c in classes}
        assert pool == before


def test_capacity_refuses_an_auto_mode_render_naming_the_setting(tmp_path: Path) -> None:
    render = render_stack("dev", "auto-mode", tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "automation", "twin", "capacity", "--render", str(render)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "deepseek-eks:computeMode=karpenter" in result.stderr and "eks.amazonaws.com" in result.stderr


def test_a_gpu_pool_without_a_gpu_limit_is_a_finding(tmp_path: Path) -> None:
    """Nothing would stop Karpenter past the plan's maximum: reported before any pod is created."""
    render = render_stack("prod", "karpenter", tmp_path)
    objects, _ = load_render(render)
    pools, _ = kwok_nodepools(objects)
    main = next(p for p in pools if p["metadata"]["name"] == "gpu-inference")
    del main["spec"]["limits"]
    report = CapacityReport("prod")

    class Offline(Capacity):
        def create(self, obj: dict[str, Any]) -> None:
            """Nothing runs: the check must decide from the render alone."""

    target = "deepseek_eks.twin.capacity"
    with (
        mock.patch(f"{target}.kwok_nodepools", return_value=(pools, [])),
        mock.patch(f"{target}._wait_pools_ready"),
    ):
        run_scenario(Offline(mock.Mock(), {}, report), render)
    maximum = json.loads((render / "plan.json").read_text())["max_replicas"]
    assert len(report.findings) == 1
    assert all(s in report.findings[0] for s in ("NodePool/gpu-inference:", "nvidia.com/gpu", f"({maximum})"))


class _Placed:
    """A stand-in Capacity for the group-zone probe: pods with their group labels, and placements."""

    def __init__(self, groups: dict[str, tuple[str, list[str]]]) -> None:
        # group -> (zone, pod names); the label is LWS's own (reference/upstream/lws-twin.json).
        label = json.loads((UPSTREAM / "lws-twin.json").read_text())["exclusive_topology_annotation"]
        self._pods = [
            {"metadata": {"name": pod, "labels": {label["group_index_label"]: group}}}
            for group, (_, pods) in groups.items()
            for pod in pods
        ]
        self._where = {pod: {"zone": zone} for _, (zone, pods) in groups.items() for pod in pods}
        self.report = CapacityReport("r1")

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return self._pods

    def placement(self, namespace: str) -> dict[str, dict[str, str]]:
        return self._where


def test_the_group_zone_probe_finds_groups_that_share_or_split_a_zone() -> None:
    """What the real controllers must keep (tests/twin/test_capacity_karpenter.py runs them): one
    zone a group, one group a zone."""
    from deepseek_eks.twin.capacity import _group_zone_probe

    apart = _Placed(
        {"0": ("us-east-1a", ["vllm-0", "vllm-0-1"]), "1": ("us-east-1b", ["vllm-1", "vllm-1-1"])}
    )
    _group_zone_probe(apart, "deepseek")  # type: ignore[arg-type]
    assert apart.report.findings == []
    assert apart.report.observed == ["group 0: zone us-east-1a", "group 1: zone us-east-1b"]
    shared = _Placed({"0": ("us-east-1a", ["vllm-0"]), "1": ("us-east-1a", ["vllm-1"])})
    _group_zone_probe(shared, "deepseek")  # type: ignore[arg-type]
    assert shared.report.findings == ["several groups share zone(s) ['us-east-1a']"]
    split = _Placed({"0": ("us-east-1a", ["vllm-0"])})
    split._where["vllm-0-1"] = {"zone": "us-east-1b"}
    split._pods.append(
        {"metadata": {"name": "vllm-0-1", "labels": dict(split._pods[0]["metadata"]["labels"])}}
    )
    _group_zone_probe(split, "deepseek")  # type: ignore[arg-type]
    assert split.report.findings == ["group 0 spans zones ['us-east-1a', 'us-east-1b']"]
