"""The vLLM/DCGM stand-in (twin/standin.py): what it serves for a load, judged against
each stack's own render (plan.json, the rendered queries), never against the stand-in's constants.
Pure Python, no programs: it renders dev and prod offline once per module."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.twin.standin import PodRef, StandIn
from tests.conftest import stack_config
from tests.twin.conftest import ManualClock

STACKS = ("dev", "prod")
A = PodRef("deepseek", "vllm-a", "node-a")
B = PodRef("deepseek", "vllm-b", "node-b")


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("renders")
    return {stack: write(render(stack_config(stack)), out / stack) for stack in STACKS}


def _plan(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "plan.json").read_text())


def _objects(folder: Path) -> list[dict[str, Any]]:
    paths = sorted((folder / "kubernetes").glob("*.yaml"))
    return [o for p in paths for o in yaml.safe_load_all(p.read_text()) if o]


@pytest.mark.parametrize("stack", STACKS)
def test_zero_load_runs_nothing(renders: dict[str, Path], stack: str) -> None:
    standin = StandIn.from_render(renders[stack])
    standin.set_state(0.0, [A, B])
    for values in standin.values().values():
        assert values["vllm:num_requests_running"] == 0
        assert values["vllm:num_requests_waiting"] == 0
        assert values["vllm:kv_cache_usage_perc"] == 0
        assert values["DCGM_FI_DEV_GPU_UTIL"] == pytest.approx(0, abs=1e-9)


@pytest.mark.parametrize("stack", STACKS)
def test_overload_on_one_pod_queues(renders: dict[str, Path], stack: str) -> None:
    # Above what one replica completes at saturation (the plan's own figure), the batch is full
    # and the excess waits: it grows by what arrives beyond that rate, for as long as it lasts.
    plan = _plan(renders[stack])
    clock = ManualClock()
    standin = StandIn.from_render(renders[stack], clock=clock)
    mu = plan["requests_per_second"]
    standin.set_state(1.5 * mu, [A])
    full = standin.values()[A.name]
    assert full["vllm:num_requests_running"] <= plan["max_num_seqs"]
    assert full["DCGM_FI_DEV_GPU_UTIL"] == 100
    clock.now = 100.0
    values = standin.values()[A.name]
    assert values["vllm:num_requests_running"] == full["vllm:num_requests_running"]
    waited = values["vllm:num_requests_waiting"] - full["vllm:num_requests_waiting"]
    assert waited == pytest.approx(0.5 * mu * 100, rel=1e-3)
    # Below it, the queue drains at the difference, and once it has nothing waits.
    standin.set_state(0.5 * mu, [A])
    clock.now += 0.5 * waited / (0.5 * mu)
    assert standin.values()[A.name]["vllm:num_requests_waiting"] == pytest.approx(waited / 2, rel=1e-3)
    clock.now += 0.5 * waited / (0.5 * mu) + 1.0
    assert standin.values()[A.name]["vllm:num_requests_waiting"] == 0


def test_a_step_builds_up_as_requests_arrive(renders: dict[str, Path]) -> None:
    """From an idle pod, a step of load fills the batch as requests arrive, not at once: at first
    nearly every arrival is still running; the count then settles where completions match the
    arrivals (the replica model's concurrency for that rate)."""
    plan = _plan(renders["dev"])
    clock = ManualClock()
    standin = StandIn.from_render(renders["dev"], clock=clock)
    standin.set_state(0.0, [A])
    rate = 0.5 * plan["requests_per_second"]
    standin.set_state(rate, [A])
    assert standin.values()[A.name]["vllm:num_requests_running"] == 0
    # One request alone takes the plan's output at its token interval; a second is a small share.
    clock.now = 1.0
    early = standin.values()[A.name]["vllm:num_requests_running"]
    assert early == pytest.approx(rate * 1.0, rel=0.05)
    # The settled count: what a pod that had that load from the start runs.
    settled_alone = StandIn.from_render(renders["dev"], clock=ManualClock())
    settled_alone.set_state(rate, [A])
    settled = settled_alone.values()[A.name]["vllm:num_requests_running"]
    assert 0 < settled < plan["max_num_seqs"]
    clock.now = 60.0
    midway = standin.values()[A.name]["vllm:num_requests_running"]
    assert early < midway < settled
    clock.now = 3600.0
    assert standin.values()[A.name]["vllm:num_requests_running"] == pytest.approx(settled, rel=1e-3)


@pytest.mark.parametrize("stack", STACKS)
def test_planned_load_needs_the_plans_replicas(renders: dict[str, Path], stack: str) -> None:
    plan = _plan(renders[stack])
    standin = StandIn.from_render(renders[stack])
    # The planned load is the plan's per-replica throughput at saturation (it rounds it).
    assert round(standin.planned_rps(), 4) == plan["requests_per_second"]
    # The plan's ceiling at that rate needs the ceiling; one replica's worth needs the floor.
    assert standin.replicas_needed(plan["max_replicas"] * standin.planned_rps()) == plan["max_replicas"]
    assert standin.replicas_needed(standin.planned_rps()) == max(1, plan["min_replicas"])
    # Never below the rendered autoscaler's floor; a little more than k replicas' worth needs k + 1.
    assert standin.replicas_needed(0.0) == plan["min_replicas"]
    for k in range(plan["min_replicas"], plan["max_replicas"] + 1):
        assert standin.replicas_needed(k * standin.planned_rps()) == k
        assert standin.replicas_needed(k * standin.planned_rps() * 1.01) == k + 1


@pytest.mark.parametrize("stack", STACKS)
def test_two_pods_split_the_load(renders: dict[str, Path], stack: str) -> None:
    plan = _plan(renders[stack])
    clock = ManualClock()
    standin = StandIn.from_render(renders[stack], clock=clock)
    load = 0.2 * plan["requests_per_second"]
    standin.set_state(load, [A])
    alone = standin.values()[A.name]["vllm:num_requests_running"]
    # B joins empty; the round robin sends each half the load, and both settle on the same count.
    standin.set_state(load, [A, B])
    joined = standin.values()
    assert joined[B.name]["vllm:num_requests_running"] == 0
    assert joined[A.name]["vllm:num_requests_running"] == pytest.approx(alone)
    clock.now = 3600.0
    split = standin.values()
    assert split[A.name]["vllm:num_requests_running"] == pytest.approx(
        split[B.name]["vllm:num_requests_running"], rel=1e-3
    )
    # The batch's step time grows a little with its size, so half the load runs a little under
    # half the sequences (Little's law over the model's service time).
    assert split[A.name]["vllm:num_requests_running"] == pytest.approx(alone / 2, rel=0.05)
    assert split[A.name]["vllm:num_requests_running"] < alone


@pytest.mark.parametrize("stack", STACKS)
def test_series_carry_the_labels_the_rendered_queries_select(renders: dict[str, Path], stack: str) -> None:
    folder = renders[stack]
    plan = _plan(folder)
    standin = StandIn.from_render(folder)
    standin.set_state(plan["requests_per_second"], [A], loading=[B])
    vllm = standin.vllm_metrics(A.namespace, A.name)
    assert vllm is not None
    # vLLM labels its series with the served model name; the rendered rules select on it.
    rule = next(o for o in _objects(folder) if o["kind"] == "PrometheusRule")
    exprs = " ".join(r["expr"] for g in rule["spec"]["groups"] for r in g["rules"])
    names = set(re.findall(r'model_name="([^"]+)"', exprs))
    (name,) = names
    for metric in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert f'{metric}{{engine="0",model_name="{name}"}}' in vllm
    # dcgm-exporter: one series per GPU of the pod, mapped to it; a loading pod's GPUs read 0.
    dcgm = standin.dcgm_metrics(A.node)
    assert dcgm is not None
    series = [line for line in dcgm.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(series) == plan["gpus_per_replica"]
    assert all('namespace="deepseek",pod="vllm-a"' in s and 'container="vllm"' in s for s in series)
    loading = standin.dcgm_metrics(B.node)
    assert loading is not None and all(
        line.endswith(" 0.0") for line in loading.splitlines() if line.startswith("DCGM")
    )
    assert standin.vllm_metrics(B.namespace, B.name) is None  # not ready: not a vLLM target
    groups = standin.targets("192.0.2.1:1")
    jobs = sorted(g["labels"]["job"] for g in groups)
    monitor = next(o for o in _objects(folder) if o["kind"] == "PodMonitor")["metadata"]
    assert jobs == ["dcgm-exporter", "dcgm-exporter", f"{monitor['namespace']}/{monitor['name']}"]


def test_serves_over_http(renders: dict[str, Path]) -> None:
    standin = StandIn.from_render(renders["dev"])
    standin.set_state(0.1, [A])
    with standin.serving("127.0.0.1", 0) as base:
        with urllib.request.urlopen(f"{base}/vllm/deepseek/vllm-a/metrics", timeout=5) as reply:
            assert b"vllm:num_requests_running{" in reply.read()
        with urllib.request.urlopen(f"{base}/dcgm/node-a/metrics", timeout=5) as reply:
            assert b"DCGM_FI_DEV_GPU_UTIL{" in reply.read()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/vllm/deepseek/vllm-b/metrics", timeout=5)
        assert missing.value.code == 404


def test_a_backlog_outlives_the_burst_and_drains_at_the_served_rate(renders: dict[str, Path]) -> None:
    """Overload queues up in scenario seconds; when the load stops, the queue drains at what the
    ready pods complete, not at once (a real vLLM keeps its waiting requests); then the batch runs
    down, and the pod is empty in the end."""
    clock = ManualClock()
    stand_in = StandIn.from_render(renders["dev"], compression=30.0, clock=clock)
    pod = PodRef("deepseek", "vllm-0", "node-0")
    mu = stand_in.planned_rps()
    stand_in.set_state(2 * mu, [pod])
    batch = stand_in.values()["vllm-0"]["vllm:num_requests_running"]
    assert stand_in.values()["vllm-0"]["vllm:num_requests_waiting"] == 0
    clock.now = 10.0  # 300 scenario seconds at twice what one pod serves: mu x 300 requests queued
    stand_in.set_state(0.0, [pod])
    waiting = stand_in.values()["vllm-0"]["vllm:num_requests_waiting"]
    assert waiting == pytest.approx(mu * 300, rel=1e-6)
    # With no arrivals: the queue at mu (300 s), then the batch runs down to its last request.
    drain = stand_in.drain_seconds()
    assert drain > 300 / 30
    clock.now = 15.0  # 150 s at mu with no arrivals: half of it served
    assert stand_in.values()["vllm-0"]["vllm:num_requests_waiting"] == pytest.approx(mu * 150, rel=1e-6)
    clock.now = 20.0 + 1 / 30
    values = stand_in.values()["vllm-0"]
    assert values["vllm:num_requests_waiting"] == 0.0
    assert 0 < values["vllm:num_requests_running"] < batch
    assert values["DCGM_FI_DEV_GPU_UTIL"] == 100
    clock.now = 10.0 + drain  # drain_seconds counts from when it was asked
    assert stand_in.values()["vllm-0"]["vllm:num_requests_running"] == pytest.approx(1.0, rel=0.05)
    clock.now = 1000.0
    assert stand_in.values()["vllm-0"] == {
        "vllm:num_requests_running": 0.0,
        "vllm:num_requests_waiting": 0.0,
        "vllm:kv_cache_usage_perc": 0.0,
        "DCGM_FI_DEV_GPU_UTIL": 0.0,
    }


def test_a_queue_stays_in_the_pod_that_took_it(renders: dict[str, Path]) -> None:
    """A pod that turns ready after the burst starts empty and fills from its share; the first pod
    still holds its own queue (the simulator routes the same way: perf/simulate/engine.py,
    per-pod queues)."""
    clock = ManualClock()
    stand_in = StandIn.from_render(renders["dev"], compression=30.0, clock=clock)
    mu = stand_in.planned_rps()
    stand_in.set_state(2 * mu, [A])
    clock.now = 10.0
    stand_in.set_state(2 * mu, [A, B])  # B is ready now; A holds 300 mu
    clock.now = 11.0  # 30 s at mu each: A's queue neither grows nor drains, B fills from empty
    stand_in.set_state(2 * mu, [A, B])
    values = stand_in.values()
    assert values[A.name]["vllm:num_requests_waiting"] == pytest.approx(mu * 300, rel=1e-6)
    assert values[B.name]["vllm:num_requests_waiting"] == 0.0
    assert 0 < values[B.name]["vllm:num_requests_running"] < mu * 30


def test_a_two_node_group_reports_each_nodes_gpus_under_its_own_pod(tmp_path: Path) -> None:
    """r1: one replica is a leader and a worker, each on its own p5 node with the GPUs its pod
    template asks for. While the group serves, dcgm-exporter maps each node's GPUs to the pod on it,
    the worker's working for the leader's batch; only the leader serves vLLM's metrics."""
    folder = write(render(stack_config("r1")), tmp_path / "r1")
    lws = next(o for o in _objects(folder) if o["kind"] == "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    per_pod = {
        role: sum(
            int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
            for c in template[role]["spec"]["containers"]
        )
        for role in ("leaderTemplate", "workerTemplate")
    }
    leader, worker = PodRef("deepseek", "vllm-0", "node-a"), PodRef("deepseek", "vllm-0-1", "node-b")
    standin = StandIn.from_render(folder, clock=lambda: 0.0)
    standin.set_state(_plan(folder)["requests_per_second"], [leader], [], {worker: leader})
    for pod, role in ((leader, "leaderTemplate"), (worker, "workerTemplate")):
        dcgm = standin.dcgm_metrics(pod.node)
        assert dcgm is not None
        series = [line for line in dcgm.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
        assert len(series) == per_pod[role] > 0
        assert all(f'pod="{pod.name}"' in s for s in series)
    busy = standin.values()
    assert busy[worker.name]["DCGM_FI_DEV_GPU_UTIL"] == busy[leader.name]["DCGM_FI_DEV_GPU_UTIL"] > 0
    assert standin.vllm_metrics(worker.namespace, worker.name) is None
    assert standin.vllm_metrics(leader.namespace, leader.name) is not None
    # The same worker while its group is still loading: its GPUs are held and idle.
    standin.set_state(0.5, [], [leader, worker])
    assert standin.values()[worker.name]["DCGM_FI_DEV_GPU_UTIL"] == pytest.approx(0, abs=1e-9)
