"""Tier 2 of issue 24: the real Karpenter (its kwok provider, v1.14.1) on each stack's Karpenter-mode
NodePools (every stack file), against the real kube-apiserver, kube-scheduler and node lifecycle controller.

Each plan's replicas get NodeClaims of the types the plan allows, the on-demand floor pool is
filled first (weight), each pool stops at its GPU limit (one replica past them stays Pending) and a
pod without the GPU toleration goes to the general pool; the render's image pre-pull DaemonSet has a
pod on every replica's node. With the weights inverted the floor
replicas go to the cheaper spot pool, and the check says so.

Without the binaries these tests skip with the build command; with DEEPSEEK_EKS_REQUIRE_CAPACITY=1
(set by .ci/run once its bounded slot built them) they fail instead. About 60-80 s per stack."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
import yaml

from deepseek_eks.automation.stackfile import stack_names
from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import TIER0
from deepseek_eks.twin.capacity import PROGRAMS, check_capacity
from deepseek_eks.twin.server import TwinError
from tests.twin.conftest import render_stack, require_binaries

BUILD = "twin/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok karpenter-kwok lws"


def require_capacity() -> None:
    """Skip (or, under DEEPSEEK_EKS_REQUIRE_CAPACITY=1, fail) without Tier 2's binaries (the LWS
    controller included: it makes r1's groups)."""
    absent = missing_binaries((*TIER0, *PROGRAMS, "lws"))
    require_binaries(absent, "Tier 2 binaries", f"run `{BUILD}`", "DEEPSEEK_EKS_REQUIRE_CAPACITY")


@pytest.mark.parametrize("stack", stack_names())
def test_karpenter_places_each_plans_replicas_as_the_plan_says(tmp_path: Path, stack: str) -> None:
    """dev and prod (spot and on-demand: a floor pool) and r1 (on-demand only, two-node
    LeaderWorkerSet replicas, so no floor)."""
    require_capacity()
    render = render_stack(stack, "karpenter", tmp_path)
    report = check_capacity(render, keep=tmp_path / "logs")
    assert report.findings == []
    observed = "\n".join(report.observed)
    plan = json.loads((render / "plan.json").read_text())
    capacity_types = plan["capacity_types"]
    if plan["nodes_per_replica"] > 1:
        # The real LWS controller made the groups: each placed one has its zone, a zone of its own
        # (a shared or split zone is a finding above), and the refused one is its leader alone.
        zones = [line for line in report.observed if line.startswith("group ")]
        assert len(zones) == plan["max_replicas"] + 1  # the GPU limit admits a surge group
        assert sum("-> Pending" in line for line in report.observed) == 1
    assert ("-> gpu-inference-floor" in observed) == ({"spot", "on-demand"} <= set(capacity_types))
    assert "-> Pending" in observed and "no-gpu-toleration -> general" in observed
    # The image pre-pull DaemonSet, placed by the real DaemonSet controller and scheduler, is on
    # every node a replica runs on (a toleration or selector that missed them is a finding above).
    (prepull,) = [line for line in report.observed if line.startswith("DaemonSet/vllm-image-prepull:")]
    assert " 0 of " not in prepull


def test_a_main_pool_weighted_above_the_floor_takes_the_floor_replicas(tmp_path: Path) -> None:
    """The check fails when the render does: with the weights inverted (the spot-and-on-demand pool
    above the floor), Karpenter takes the cheaper spot offering for the first replicas. (Removing
    the floor's weight alone is not enough: Karpenter orders equal weights by name, descending,
    sigs.k8s.io/karpenter v1.14.1 pkg/utils/nodepool/nodepool.go OrderByWeight, and
    gpu-inference-floor sorts after gpu-inference.)"""
    require_capacity()
    render = render_stack("prod", "karpenter", tmp_path)
    for name, weight in (("gpu-inference-floor", 1), ("gpu-inference", 100)):
        path = render / "kubernetes" / f"nodepool-cluster-{name}.yaml"
        pool = yaml.safe_load(path.read_text())
        pool["spec"]["weight"] = weight
        path.write_text(yaml.safe_dump(pool))
    report = check_capacity(render)
    assert any("expected the on-demand floor pool gpu-inference-floor" in f for f in report.findings)


def test_the_real_provider_parses_the_generated_file_and_a_broken_one_is_named(tmp_path: Path) -> None:
    """The placements above prove the provider read our file; a file it cannot unmarshal (a
    string where its Go type wants a number) is reported as such, not as missing capacity."""
    require_capacity()

    def broken(path: Path, *args: object) -> None:
        path.write_text(json.dumps([{"name": "g6e.12xlarge", "offerings": [{"Price": "cheap"}]}]))

    with (
        mock.patch("deepseek_eks.twin.capacity.instance_types_file", broken),
        pytest.raises(TwinError, match=r"Karpenter refused the instance-type file: .*could not parse JSON"),
    ):
        check_capacity(render_stack("dev", "karpenter", tmp_path))
