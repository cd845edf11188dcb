"""The twin loop's own arithmetic, without the twin: how it compresses the render's controller
timings and the plan's start-up, and what it refuses. The loop itself: tests/twin/test_loop.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.automation.stackfile import read_stack
from deepseek_eks.twin.check import load_render
from deepseek_eks.twin.compression import (
    LAUNCH_ENDS,
    LAUNCH_TAINT,
    READY_AT,
    compress_objects,
    kwok_loop_stages,
)
from deepseek_eks.twin.loop import (
    LoopInputError,
    LoopReport,
    Scaled,
    _phases,
    prepare,
    release_rounds,
    run_loop,
)
from deepseek_eks.twin.lws import group_index_label, set_label


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
    """The stages' structure; tests/twin/test_kwok_launch.py runs them in the real kwok."""
    stages, rewrites = kwok_loop_stages(tmp_path, 5.0, 29.2)
    by_name = {
        yaml.safe_load(p.read_text())["metadata"]["name"]: yaml.safe_load(p.read_text()) for p in stages
    }
    assert "delay" not in by_name["pod-delete"]["spec"]  # deletions stay immediate
    # Each timed stage waits for the time its stamping stage wrote, the delay after kwok first saw
    # the resource; the stamp selects only what has no stamp yet (written once).
    for timed, stamp, annotation, millis in (
        ("node-initialize", "node-launch", LAUNCH_ENDS, 5000),
        ("pod-ready", "pod-start", READY_AT, 29200),
    ):
        key = f'.metadata.annotations["{annotation}"]'
        spec = by_name[timed]["spec"]
        assert spec["delay"] == {"durationFrom": {"jq": {"expression": key}}}
        assert {"key": key, "operator": "Exists"} in spec["selector"]["matchExpressions"]
        writes = by_name[stamp]["spec"]
        assert {"key": key, "operator": "DoesNotExist"} in writes["selector"]["matchExpressions"]
        assert "delay" not in writes and writes["resourceRef"] == spec["resourceRef"]
        assert f'dateModify "{millis}ms"' in writes["next"]["patches"][0]["template"]
    # The node's stamp is written from its creation, before Karpenter registers it.
    node_stamp = by_name["node-launch"]["spec"]["selector"]["matchExpressions"]
    assert not any(LAUNCH_TAINT["key"] in e["key"] for e in node_stamp)
    # The launch ends once Karpenter has registered the node with the launch taint, with the Ready
    # status and the taint lifted (kwok runs patches in order; statusTemplate is ignored beside them).
    initialize = by_name["node-initialize"]["spec"]
    keys = [e["key"] for e in initialize["selector"]["matchExpressions"]]
    assert any(LAUNCH_TAINT["key"] in k for k in keys)
    patches = initialize["next"]["patches"]
    assert "statusTemplate" not in initialize["next"]
    assert patches[0]["subresource"] == "status" and "conditions:" in patches[0]["template"]
    assert patches[1]["type"] == "json" and "op: remove" in patches[1]["template"]
    assert len(rewrites) == 3


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


@pytest.fixture(scope="module")
def r1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(render(read_stack("r1")), tmp_path_factory.mktemp("render") / "r1")


def test_the_671b_path_plays_one_launch_a_node(r1: Path, tmp_path: Path) -> None:
    """r1's plan counts two node launches in turn for a replica; kwok plays one launch a node and
    leaves the sequence to the LWS controller and Karpenter, so the stages add up to the plan's
    start-up only through the programs; every NodePool gets the launch taint."""
    report = LoopReport("r1", "step", "", 30)
    ready = prepare("r1", "step", r1, 30, tmp_path, report)
    plan = json.loads((r1 / "plan.json").read_text())
    assert ready.runs_lws and ready.workload["kind"] == "LeaderWorkerSet"
    node_stage = plan["startup_breakdown"]["node"] / 30
    assert plan["nodes_per_replica"] == 2
    launch = next(yaml.safe_load(p.read_text()) for p in ready.stages if p.name.endswith("node-launch.yaml"))
    assert f'dateModify "{int(node_stage / 2 * 1000)}ms"' in launch["spec"]["next"]["patches"][0]["template"]
    assert report.planned["start_up_s"] == pytest.approx(sum(plan["startup_breakdown"].values()) / 30)
    assert any("one node launch of the plan's 2" in r for r in report.rewrites)
    for pool in ready.nodepools:
        assert LAUNCH_TAINT in pool["spec"]["template"]["spec"]["startupTaints"]


def test_a_kind_the_loop_cannot_scale_is_refused(r1: Path, tmp_path: Path) -> None:
    """An autoscaler aimed at a kind the loop does not read is refused with the kinds it does."""
    for path in (r1 / "kubernetes").glob("*.yaml"):
        text = path.read_text()
        if "kind: ScaledObject" in text:
            path.write_text(text.replace("kind: LeaderWorkerSet", "kind: StatefulSet", 1))
    try:
        with pytest.raises(LoopInputError, match="Deployments and LeaderWorkerSets only"):
            prepare("r1", "step", r1, 30, tmp_path, LoopReport("r1", "step", "", 30))
    finally:
        for path in (r1 / "kubernetes").glob("*.yaml"):
            text = path.read_text()
            if "kind: ScaledObject" in text:
                path.write_text(text.replace("kind: StatefulSet", "kind: LeaderWorkerSet", 1))


def _pod(name: str, group: str, worker: str) -> dict:
    """A Ready pod of LWS ``vllm``'s group ``group`` with worker index ``worker``."""
    labels = {set_label("set_name"): "vllm", group_index_label(): group, set_label("worker_index"): worker}
    return {"metadata": {"name": name, "labels": labels}}


def test_a_group_serves_once_every_pod_of_it_is_ready() -> None:
    """A LeaderWorkerSet replica serves once its leader and its workers are all Ready (how the LWS
    controller counts readyReplicas); its workers then work for the leader; a Deployment's Ready
    pods each serve."""
    lws = {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "deepseek"},
        "spec": {"leaderWorkerTemplate": {"size": 2}},
    }
    scaled = Scaled.of(lws)
    assert scaled.pod_selector == f"{set_label('set_name')}=vllm" and scaled.group_size == 2
    whole = [_pod("vllm-0", "0", "0"), _pod("vllm-0-1", "0", "1")]
    half = [_pod("vllm-1", "1", "0")]  # its worker not Ready yet
    serving, followers = scaled.serving(whole + half)
    assert [p["metadata"]["name"] for p in serving] == ["vllm-0"]
    pairs = [(w["metadata"]["name"], lead["metadata"]["name"]) for w, lead in followers]
    assert pairs == [("vllm-0-1", "vllm-0")]
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "deepseek"},
        "spec": {"selector": {"matchLabels": {"app": "vllm"}}},
    }
    pods = [_pod("a", "", ""), _pod("b", "", "")]
    assert Scaled.of(deployment).serving(pods) == (pods, [])


def _pool(*budgets: dict) -> dict:
    return {"spec": {"disruption": {"budgets": list(budgets)}} if budgets else {}}


def test_nodes_are_released_in_rounds_of_the_disruption_budget() -> None:
    """Karpenter deletes at most what a pool's budgets allow a round (sigs.k8s.io/karpenter v1.14.1
    GetAllowedDisruptions: a count, or a share of the pool's nodes rounded up; unset, 10 %), so a
    two-node group under r1's budget of one node takes two rounds."""
    assert release_rounds([_pool({"nodes": "1"})], 2, 4) == 2
    assert release_rounds([_pool({"nodes": "2"})], 2, 4) == 1
    assert release_rounds([_pool()], 2, 4) == 2  # 10 % of 4, rounded up: one a round
    assert release_rounds([_pool()], 4, 30) == 2  # 10 % of 30: three a round
    assert release_rounds([_pool({"nodes": "50%"})], 3, 5) == 1  # 2.5, rounded up to 3
    # A budget for drift alone does not hold back empty nodes.
    assert release_rounds([_pool({"nodes": "1", "reasons": ["Drifted"]}, {"nodes": "5"})], 2, 4) == 1
    assert release_rounds([_pool({"nodes": "1"})], 0, 1) == 1


def test_phases_read_a_record_of_changes_as_the_state_in_force() -> None:
    """The simulator's fleet lists changes only: a phase starting between two changes reads the
    state then in force, and the first change after it that satisfies the phase."""
    changes = [(0.0, 1, 1), (100.0, 2, 1), (300.0, 2, 2), (900.0, 1, 1)]
    ticks = [
        (float(t), *next((d, r) for at, d, r in reversed(changes) if at <= t)) for t in range(0, 1000, 30)
    ]
    phases = [
        ("asked_s", 50.0, lambda d, r: d >= 2),
        ("scale_up_s", 50.0, lambda d, r: r >= 2),
        ("already_asked", 150.0, lambda d, r: d >= 2),
        ("scale_down_s", 400.0, lambda d, r: d <= 1),
    ]
    out = _phases("test", ticks, changes, phases, 120.0)["phases"]
    assert {name: p["simulator"] for name, p in out.items()} == {
        "asked_s": 50, "scale_up_s": 250, "already_asked": 0, "scale_down_s": 500,
    }  # fmt: skip
    # The twin's ticks see each change at the next tick.
    assert {name: p["twin"] for name, p in out.items()} == {
        "asked_s": 70, "scale_up_s": 250, "already_asked": 0, "scale_down_s": 500,
    }  # fmt: skip
