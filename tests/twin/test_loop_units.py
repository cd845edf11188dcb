"""The twin loop's own arithmetic, without the twin: how it compresses the render's controller
timings and the plan's start-up, and what it refuses. The loop itself: tests/twin/test_loop.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.automation.stackfile import read_stack
from deepseek_eks.twin.check import load_render
from deepseek_eks.twin.loop import (
    LoopInputError,
    compress_objects,
    kwok_loop_stages,
    run_loop,
)


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    folder = write(render(read_stack("prod")), tmp_path_factory.mktemp("render"))
    objects, _ = load_render(folder)
    return objects


def _one(objects: list[dict], kind: str) -> dict:
    (found,) = [o for o in objects if o.get("kind") == kind]
    return found


def test_scaled_object_timings_are_divided_and_listed(prod: list[dict]) -> None:
    compressed, rewrites = compress_objects(prod, 30)
    before, after = _one(prod, "ScaledObject")["spec"], _one(compressed, "ScaledObject")["spec"]
    down_before = before["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    down_after = after["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down_after["stabilizationWindowSeconds"] == round(down_before["stabilizationWindowSeconds"] / 30)
    for was, now in zip(down_before["policies"], down_after["policies"], strict=True):
        assert now["periodSeconds"] == max(1, round(was["periodSeconds"] / 30))
        assert now["value"] == was["value"]  # only time is compressed, never the step sizes
    assert after["pollingInterval"] == max(1, round(before["pollingInterval"] / 30))
    assert after["minReplicaCount"] == before["minReplicaCount"]
    assert after["triggers"] == before["triggers"]
    # Every change is said.
    assert any("stabilizationWindowSeconds" in r and "ScaledObject/" in r for r in rewrites)
    assert any("pollingInterval" in r for r in rewrites)
    # The render itself is untouched.
    assert before["pollingInterval"] == _one(prod, "ScaledObject")["spec"]["pollingInterval"]


def test_nodepool_consolidation_is_compressed(prod: list[dict]) -> None:
    compressed, rewrites = compress_objects(prod, 30)
    pools = {o["metadata"]["name"]: o for o in prod if o["kind"] == "NodePool"}
    for pool in (o for o in compressed if o["kind"] == "NodePool"):
        was = pools[pool["metadata"]["name"]]["spec"].get("disruption", {}).get("consolidateAfter")
        now = pool["spec"].get("disruption", {}).get("consolidateAfter")
        if was in (None, "Never"):
            assert now == was
        else:
            minutes = int(was.rstrip("m")) if was.endswith("m") else None
            if minutes is not None:
                assert now == f"{max(1, round(minutes * 60 / 30))}s"
                assert any(f"NodePool/{pool['metadata']['name']} consolidateAfter" in r for r in rewrites)


def test_kwok_stages_delay_nodes_and_pods(tmp_path: Path) -> None:
    stages, rewrites = kwok_loop_stages(tmp_path, 5.0, 29.2)
    by_name = {
        yaml.safe_load(p.read_text())["metadata"]["name"]: yaml.safe_load(p.read_text()) for p in stages
    }
    assert by_name["node-initialize"]["spec"]["delay"] == {"durationMilliseconds": 5000}
    assert by_name["pod-ready"]["spec"]["delay"] == {"durationMilliseconds": 29200}
    assert "delay" not in by_name["pod-delete"]["spec"]  # deletions stay immediate
    assert len(rewrites) == 2


def test_wake_needs_a_stack_that_scales_from_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """dev has minReplicas 1 and no router queue: the wake scenario is refused, naming the settings,
    before any program is needed."""
    monkeypatch.setattr("deepseek_eks.twin.loop.require_binaries", lambda programs: {})
    with pytest.raises(LoopInputError) as refused:
        run_loop("dev", "wake")
    message = str(refused.value)
    assert "autoscaling.minReplicas 0" in message and "router-queue" in message


def test_unknown_scenario_is_refused() -> None:
    with pytest.raises(LoopInputError, match="step, wake"):
        run_loop("dev", "sawtooth")


def test_the_671b_path_is_refused_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """r1 scales a LeaderWorkerSet, whose controller the twin does not run: a clear refusal (exit 2),
    not a crash half-way."""
    monkeypatch.setattr("deepseek_eks.twin.loop.require_binaries", lambda programs: {})
    with pytest.raises(LoopInputError, match="LeaderWorkerSet"):
        run_loop("r1")
