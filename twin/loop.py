"""``twin loop``: the autoscaling loop the product exists for, run whole on the twin.

load rises -> a metric rises -> the HPA (or KEDA) asks for replicas -> the scheduler places them ->
Karpenter adds GPU nodes -> the replicas warm up -> load falls -> the fleet shrinks. Every link is a
real program except the GPUs and vLLM itself:

- the real kube-apiserver (with ``--enable-aggregator-routing``: it calls the metrics APIs at their
  endpoint addresses, as nothing here implements ClusterIPs), kube-controller-manager (its real
  HPA, Deployment and ReplicaSet controllers), kube-scheduler, kwok (which plays the kubelets) and
  Karpenter's kwok provider (twin/capacity.py); for the 671B path, the LeaderWorkerSet controller
  and its webhooks with the StatefulSet controller (twin/lws.py), which make each group KEDA asks for;
- Prometheus (Debian's), prometheus-adapter and KEDA's operator and metrics server, each in a
  network namespace of its own on a bridge the loop owns, configured as the render configures them
  (twin/prometheus.py, metrics_programs.py, netns.py);
- the EKS network-policy controller, whose PolicyEndpoints judge every flow of the one
  required-flows table (twin/flow_matrix.py);
- a stand-in for each vLLM pod's and dcgm-exporter's metrics, driven by the replica model for the
  load the scenario sends (twin/standin.py).

Time is compressed by ``COMPRESSION`` through the controllers' own settings (the HPA's sync period
flag; the rendered behavior windows, KEDA's polling interval and Karpenter's consolidation delay
divided; the plan's start-up played by kwok's stage delays), every rewrite listed in the report.
The simulator's prediction for the same scenario is reported beside the real timeline, never
judged (the pass conditions are the plan's and the render's own numbers).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.automation.stackfile import read_stack
from deepseek_eks.components.serving.router import PLUGINS_FILE, ROUTER
from deepseek_eks.sizing.startup import node_launches_in_turn

from .binaries import TIER0, BinariesMissing, require_binaries
from .capacity import (
    INSTANCE_TYPE_LABEL,
    NODEPOOL_LABEL,
    PROGRAMS,
    Capacity,
    CapacityReport,
    controllers,
    ephemeral_storage,
    install_crds,
    kwok_nodepools,
    pools_of,
)
from .check import _rank, _unmasked, load_render
from .compression import compress_objects, duration_s, kwok_loop_stages, scaled, with_launch_taint
from .instance_types import AUTO_MODE, GPU_RESOURCE, instance_types_file
from .lws import LWS_CONTROLLERS, LWS_GROUP, group_index_label, running_lws, set_label
from .lws import REWRITES as LWS_REWRITES
from .server import Api, free_port, running_twin

COMPRESSION = 30  # one twin second stands for this many seconds on a cluster
TICK_S = 1.0
# The HPA controller's sync period (kube-controller-manager --horizontal-pod-autoscaler-sync-period,
# default 15 s: k8s.io/kubernetes v1.34 pkg/controller/podautoscaler/config/v1alpha1/defaults.go),
# compressed (the flag is a duration with no lower bound: cmd/kube-controller-manager/app/options/
# hpacontroller.go Validate checks the number of workers only).
HPA_SYNC_PERIOD_S = 15 / COMPRESSION
# How often Prometheus's scrape manager takes the targets discovery found (prometheus v0.314.0
# cmd/prometheus/main.go --scrape.discovery-reload-interval, default 5 s), before compression.
PROMETHEUS_DISCOVERY_RELOAD_S = 5.0
# Karpenter's provisioning batch: it waits for pods to stop arriving for the idle duration, at most
# the max duration, before it decides (defaults 1 s and 10 s: sigs.k8s.io/karpenter v1.14.1
# pkg/operator/options/options.go BATCH_IDLE_DURATION, BATCH_MAX_DURATION), compressed.
KARPENTER_BATCH_S = {"BATCH_IDLE_DURATION": 1.0 / COMPRESSION, "BATCH_MAX_DURATION": 10.0 / COMPRESSION}
# What runs in kube-controller-manager: the workload controllers the loop needs, the HPA, and the
# node lifecycle (capacity.NODE_CONTROLLERS); names as `kube-controller-manager --controllers` takes them.
LOOP_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "horizontal-pod-autoscaler-controller",
    "node-lifecycle-controller",
    "garbage-collector-controller",
    "disruption-controller",
    "serviceaccount-controller",
)
# Kinds the loop applies from the render (in check.py's dependency order). Left out, each with its
# reason: NetworkPolicy (judged by the flow matrix on the network-policy controller's output, not
# enforced here: no node agent), Ingress/IngressClass (no load-balancer controller: the scenario's
# load goes to the stand-in), PodMonitor/PrometheusRule (the Prometheus config is generated from
# them: prometheus.py), NodePool (rewritten for kwok first), DaemonSet (the image pre-pull: kwok
# pulls no image, and where its pods land is twin capacity's check).
APPLIED_KINDS = {
    "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
    "ConfigMap", "Secret", "PriorityClass", "StorageClass", "Service", "Deployment",
    "PodDisruptionBudget", "HorizontalPodAutoscaler", "ScaledObject", "LeaderWorkerSet",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}  # fmt: skip
# What an autoscaler in a render may scale: vLLM's Deployment, or the 671B path's LeaderWorkerSet,
# made into groups by the real LWS controller.
SCALED_KINDS = ("Deployment", "LeaderWorkerSet")
LOOP_TIMEOUT_S = 600.0  # the whole scenario, however the controllers behave
SCENARIOS = ("step", "wake")


class LoopInputError(ValueError):
    """The stack or scenario cannot be run by the loop (exit 2: the fix is named)."""


@dataclass(frozen=True)
class Sample:
    """One tick of the timeline (``timeline`` in the twin loop's JSON)."""

    t: float
    desired_replicas: int
    ready_replicas: int
    nodes: int
    node_types: list[str]
    load_rps: float

    def as_json(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 1),
            "desired_replicas": self.desired_replicas,
            "ready_replicas": self.ready_replicas,
            "nodes": self.nodes,
            "node_types": self.node_types,
            "load_rps": round(self.load_rps, 4),
        }


@dataclass(frozen=True)
class Assertion:
    name: str
    ok: bool
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class LoopReport:
    """What one loop run saw, and its verdicts."""

    stack: str
    scenario: str
    autoscaler: str
    compression: int
    timeline: list[Sample] = field(default_factory=list)
    flows: list[dict[str, Any]] = field(default_factory=list)
    assertions: list[Assertion] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    simulator: dict[str, Any] = field(default_factory=dict)
    # minReplicas, maxReplicas and what the plan says the scenario's peak load needs
    replicas: dict[str, int] = field(default_factory=dict)
    # The plan's start-up as the twin plays it (compressed seconds): one node launch, the launches a
    # replica waits for in turn, the pod's own start; and the nodes a replica spans.
    planned: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(a.ok for a in self.assertions)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.assertions.append(Assertion(name, ok, detail))

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "scenario": self.scenario,
            "autoscaler": self.autoscaler,
            "time_compression": {
                "factor": self.compression,
                "meaning": f"one twin second stands for {self.compression} s on a cluster; every "
                "rewrite that achieves it is listed under rewrites",
            },
            "timings_s": {k: round(v, 1) for k, v in self.timings.items()},
            "replicas": self.replicas,
            "planned": {k: round(v, 1) for k, v in self.planned.items()},
            "timeline": [s.as_json() for s in self.timeline],
            "flows": self.flows,
            "assertions": [a.as_json() for a in self.assertions],
            "rewrites": self.rewrites,
            "simulator": self.simulator,
            "ok": self.ok,
        }


# -- the scenario -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scaled:
    """The workload the autoscaler scales, as the loop reads it: a Deployment, whose replicas are
    pods, or a LeaderWorkerSet (the 671B path), whose replicas are groups of ``group_size`` pods.
    Both keep the replicas asked for in ``spec.replicas`` and those ready in
    ``status.readyReplicas``; for a LeaderWorkerSet the real LWS controller counts a group ready once
    its leader and its worker StatefulSet are (reference/upstream/lws-twin.json ``status``)."""

    kind: str
    namespace: str
    name: str
    pod_selector: str  # a label selector for every pod of the workload, workers included
    group_size: int

    @classmethod
    def of(cls, workload: dict[str, Any]) -> Scaled:
        namespace, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
        if workload["kind"] == "LeaderWorkerSet":
            size = int(workload["spec"]["leaderWorkerTemplate"].get("size", 1))
            return cls("LeaderWorkerSet", namespace, name, f"{set_label('set_name')}={name}", size)
        labels = workload["spec"]["selector"]["matchLabels"]
        return cls("Deployment", namespace, name, ",".join(f"{k}={v}" for k, v in labels.items()), 1)

    @property
    def path(self) -> str:
        if self.kind == "LeaderWorkerSet":
            return f"/apis/{LWS_GROUP}/v1/namespaces/{self.namespace}/leaderworkersets/{self.name}"
        return f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.name}"

    def serving(
        self, ready: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, Any]]]]:
        """Of the ``ready`` pods, those that serve (a Deployment's pods; the leaders of groups
        whose every pod is Ready, the condition LWS counts a group ready on), and each worker of
        such a group with its leader: its GPUs work for the leader's replica."""
        if self.kind != "LeaderWorkerSet":
            return ready, []
        groups: dict[str, list[dict[str, Any]]] = {}
        for pod in ready:
            groups.setdefault(pod["metadata"]["labels"].get(group_index_label(), ""), []).append(pod)
        leaders, followers = [], []
        for members in groups.values():
            leader = next(
                (p for p in members if p["metadata"]["labels"].get(set_label("worker_index")) == "0"), None
            )
            if leader is None or len(members) < self.group_size:
                continue
            leaders.append(leader)
            followers += [(p, leader) for p in members if p is not leader]
        return leaders, followers


@dataclass
class Observed:
    """What the loop reads from the API server each tick."""

    desired: int
    ready: int
    gpu_nodes: list[dict[str, Any]]
    ready_pods: list[dict[str, Any]]  # serving: a Deployment's Ready pods, the leaders of Ready groups
    loading_pods: list[dict[str, Any]]  # on a node, not serving yet: they hold GPUs, serve nothing
    # the workers of Ready groups, each with its leader: their GPUs work for the leader's replica
    followers: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)


class Loop:
    """One render on a running twin with every program beside it: drive the load, read the fleet."""

    def __init__(
        self,
        api: Api,
        capacity: Capacity,
        report: LoopReport,
        workload: dict[str, Any],
        pools: dict[str, Any],
        nodepools: list[dict[str, Any]],
    ) -> None:
        self.api, self.capacity, self.report = api, capacity, report
        self.nodepools = [p for p in nodepools if p["spec"]["template"]["spec"].get("taints")]  # GPU pools
        self.workload = workload
        self.scaled = Scaled.of(workload)
        self.pools = pools
        self.start = time.monotonic()
        self.load = 0.0
        self.on_tick: Callable[[float, Observed], None] = lambda load, seen: None

    def now(self) -> float:
        return time.monotonic() - self.start

    def observe(self) -> Observed:
        scaled = self.api.call("GET", self.scaled.path).body
        desired = int((scaled.get("spec") or {}).get("replicas") or 0)
        ready = int((scaled.get("status") or {}).get("readyReplicas") or 0)
        gpu_pools = {name for name, pool in self.pools.items() if pool.tainted}
        nodes = [
            n
            for n in self.api.call("GET", "/api/v1/nodes").body.get("items") or []
            if n["metadata"].get("labels", {}).get(NODEPOOL_LABEL) in gpu_pools
        ]
        pods = (
            self.api.call(
                "GET",
                f"/api/v1/namespaces/{self.scaled.namespace}/pods",
                params={"labelSelector": self.scaled.pod_selector},
            ).body.get("items")
            or []
        )
        ready_pods = [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]
        serving, followers = self.scaled.serving(ready_pods)
        busy = serving + [worker for worker, _ in followers]
        loading = [
            p
            for p in pods
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp") and p not in busy
        ]
        return Observed(desired, ready, nodes, serving, loading, followers)

    def tick(self) -> Observed:
        self.capacity.alive()
        seen = self.observe()
        self.on_tick(self.load, seen)
        types = sorted(n["metadata"]["labels"].get(INSTANCE_TYPE_LABEL, "") for n in seen.gpu_nodes)
        self.report.timeline.append(
            Sample(self.now(), seen.desired, seen.ready, len(seen.gpu_nodes), types, self.load)
        )
        return seen

    def autoscaler_reads_every_metric(self) -> bool:
        """Whether the HorizontalPodAutoscaler on the workload (the render's, or the one KEDA made
        for its ScaledObject) has a value for each of its metrics. The HPA controller keeps a status
        per metric spec, left empty for one it could not get, and may call scaling active while
        some are invalid (k8s.io/kubernetes v1.34 pkg/controller/podautoscaler/horizontal.go
        computeReplicasForMetrics), so both are read."""
        hpas = (
            self.api.call(
                "GET", f"/apis/autoscaling/v2/namespaces/{self.scaled.namespace}/horizontalpodautoscalers"
            ).body.get("items")
            or []
        )
        for hpa in hpas:
            target = hpa["spec"]["scaleTargetRef"]
            if (target.get("kind"), target.get("name")) != (self.scaled.kind, self.scaled.name):
                continue
            status = hpa.get("status") or {}
            active = any(
                c["type"] == "ScalingActive" and c["status"] == "True" for c in status.get("conditions") or []
            )
            current = status.get("currentMetrics") or []
            specs = hpa["spec"].get("metrics") or []
            return active and len(current) == len(specs) and all(m.get("type") for m in current)
        return False

    def run_until(self, done: Callable[[Observed], bool], timeout_s: float) -> tuple[bool, float]:
        """Tick until ``done`` holds or ``timeout_s`` passes; (whether it held, when)."""
        deadline = time.monotonic() + timeout_s
        while True:
            seen = self.tick()
            if done(seen):
                return True, self.now()
            if time.monotonic() >= deadline:
                return False, self.now()
            time.sleep(TICK_S)


def _window_s(autoscaler: dict[str, Any], direction: str) -> tuple[int, list[int]]:
    """The (compressed) stabilization window and policy periods of the applied autoscaler."""
    if autoscaler["kind"] == "ScaledObject":
        behavior = (
            (autoscaler["spec"].get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
        ).get("behavior") or {}
    else:
        behavior = autoscaler["spec"].get("behavior") or {}
    rules = behavior.get(direction) or {}
    # The HPA's defaults when unset: scale-down 300 s, scale-up 0 s (autoscaling/v2 API docs).
    window = int(rules.get("stabilizationWindowSeconds", 300 if direction == "scaleDown" else 0))
    return window, [int(p["periodSeconds"]) for p in rules.get("policies") or []]


def step_scenario(
    loop: Loop,
    report: LoopReport,
    plan: dict[str, Any],
    autoscaler: dict[str, Any],
    startup: dict[str, float],
    needed_at: Callable[[float], int],
    peak_rps: float,
    drain_s: Callable[[], float] = lambda: 0.0,
    scraped: Callable[[], bool] = lambda: True,
) -> None:
    """Baseline at ``minReplicas``; a load step the plan needs ``maxReplicas`` for; then no load.
    Asserts the rise, the limits and types, the shrink and the floor. ``scraped`` says whether
    Prometheus has scraped every target the floor serves."""
    floor, ceiling = int(plan["min_replicas"]), int(plan["max_replicas"])
    allowed = set(plan["instance_types"])
    tolerance = 30.0 + 4 * HPA_SYNC_PERIOD_S  # scrape, adapter relist or KEDA poll, a few HPA syncs
    start_budget = startup["node"] + startup["pod"] + tolerance

    # 1. The floor comes up with no load.
    ok, t_floor = loop.run_until(lambda s: s.ready >= floor, start_budget + 60)
    report.check(
        "floor-ready",
        ok,
        f"{floor} replica(s) Ready at t={t_floor:.0f} s with no load (budget {start_budget + 60:.0f} s)",
    )
    if not ok:
        return
    # The twin plays the plan's stages; a replica Ready sooner than they add up means a stage was
    # skipped (a pod on a node still launching, a group's workers made before their leader had a node).
    planned_s = startup["node"] + startup["pod"]
    report.check(
        "start-up-not-shorter-than-planned",
        t_floor >= planned_s - TICK_S,
        f"the first replica Ready at t={t_floor:.0f} s; the plan's start-up on a new node, as played, is "
        f"{planned_s:.0f} s",
    )
    # The autoscaler reads its metrics at the floor before the load steps up: the simulator it is
    # compared with starts in that steady state, and a new replica's series waits for a scrape and,
    # through prometheus-adapter, for its next relist; on a cluster the floor has served for long.
    # (KEDA's Prometheus trigger may read an empty result as 0, so the scrape is waited for too.)
    ok, t_metrics = loop.run_until(lambda s: scraped() and loop.autoscaler_reads_every_metric(), start_budget)
    report.timings["metrics_read_s"] = t_metrics - t_floor
    report.check(
        "metrics-read-at-the-floor",
        ok,
        f"Prometheus had scraped the floor's targets and the autoscaler had a value for each metric "
        f"{t_metrics - t_floor:.0f} s after the floor was Ready, with no load (budget {start_budget:.0f} s)",
    )
    if not ok:
        return
    # 2. The step.
    loop.load = peak_rps
    needed = min(ceiling, needed_at(peak_rps))
    t_step = loop.now()
    report.timings["step_at"] = t_step
    report.replicas = {"min": floor, "max": ceiling, "needed_at_peak": needed}
    up_window, up_periods = _window_s(autoscaler, "scaleUp")
    # Replicas the scale-up policies allow per period: at least one period per doubling.
    rounds = max(1, math.ceil(math.log2(max(needed, 1) / max(floor, 1)))) if needed > floor else 0
    up_budget = up_window + rounds * max(up_periods or [1]) + start_budget
    ok, t_up = loop.run_until(lambda s: s.ready >= needed, up_budget)
    report.timings["scale_up_s"] = t_up - t_step
    report.check(
        "scale-up",
        ok,
        f"load {peak_rps:.3f} req/s needs {needed} replica(s) by the plan; "
        f"{report.timeline[-1].ready_replicas} Ready {t_up - t_step:.0f} s after the step (budget "
        f"{up_budget:.0f} s: scale-up window {up_window} s, {rounds} policy period(s), start-up "
        f"{startup['node'] + startup['pod']:.0f} s, tolerance {tolerance:.0f} s)",
    )
    loop.run_until(lambda s: False, 5 * HPA_SYNC_PERIOD_S)  # hold: nothing past maxReplicas
    # 3. The fall.
    loop.load = 0.0
    t_fall = loop.now()
    report.timings["fall_at"] = t_fall
    high = max(s.desired_replicas for s in report.timeline)
    down_window, down_periods = _window_s(autoscaler, "scaleDown")
    steps_down = max(0, high - floor)
    # The queue the burst left behind keeps the queue and concurrency signals up until it drains,
    # and the batch then runs down over a request's service time (GPU utilization reads 100 while
    # one runs): the stand-in's drain_seconds counts both.
    drain = drain_s()
    report.timings["backlog_drain_s"] = drain
    down_budget = drain + down_window + steps_down * max(down_periods or [1]) + tolerance
    ok, t_down = loop.run_until(lambda s: s.desired <= floor and s.ready <= floor, down_budget)
    report.timings["scale_down_s"] = t_down - t_fall
    first_drop = next((s.t for s in report.timeline if s.t > t_fall and s.desired_replicas < high), None)
    report.check(
        "scale-down",
        ok,
        f"back to {floor} replica(s) {t_down - t_fall:.0f} s after the load fell (budget "
        f"{down_budget:.0f} s: backlog drain {drain:.0f} s, window {down_window} s, {steps_down} step(s) of "
        f"{max(down_periods or [1])} s, tolerance {tolerance:.0f} s)",
    )
    early = first_drop is not None and first_drop - t_fall < down_window - tolerance / 2
    report.check(
        "scale-down-waits-for-stabilization",
        not early,
        "first scale-in "
        + (f"{first_drop - t_fall:.0f} s" if first_drop is not None else "never")
        + f" after the load fell; the stabilization window is {down_window} s",
    )
    # Nodes left empty by the shrink go after the pools' (compressed) consolidation delay, plus
    # Karpenter's own pace: its disruption loop polls every 10 s and re-validates an empty node's
    # candidacy 15 s before deleting it (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/disruption:
    # controller.go pollingPeriod, consolidation.go commandValidationDelay), as many rounds as
    # the pools' disruption budgets need to release them (a group's two nodes under r1's budget
    # of one node: two rounds), tolerance on top.
    floor_nodes = math.ceil(
        floor * int(plan.get("nodes_per_replica", 1)) / int(plan.get("replicas_per_node", 1))
    )
    consolidate = max(
        (duration_s(p["spec"].get("disruption", {}).get("consolidateAfter", "Never")) or 0.0)
        for p in loop.nodepools
    )
    peak_nodes = max(s.nodes for s in report.timeline)
    rounds = release_rounds(loop.nodepools, peak_nodes - floor_nodes, peak_nodes)
    round_s = KARPENTER_POLL_S + KARPENTER_VALIDATION_S
    nodes_budget = consolidate + KARPENTER_POLL_S + rounds * round_s + tolerance
    t_empty = loop.now()
    ok, t_nodes = loop.run_until(lambda s: len(s.gpu_nodes) <= floor_nodes, nodes_budget)
    report.timings["nodes_release_s"] = t_nodes - t_empty
    report.check(
        "nodes-released",
        ok,
        f"GPU nodes back to {floor_nodes} {t_nodes - t_empty:.0f} s after the replicas shrank (budget "
        f"{nodes_budget:.0f} s: consolidateAfter {consolidate:.0f} s, Karpenter's polling and validation "
        f"in {rounds} round(s) of its disruption budgets, tolerance {tolerance:.0f} s)",
    )
    # 4. Invariants over the whole timeline.
    below = [s for s in report.timeline if s.t > t_floor and s.desired_replicas < floor]
    report.check(
        "never-below-minReplicas",
        not below,
        f"desired replicas never under {floor}"
        if not below
        else f"{len(below)} sample(s) under {floor}, first at t={below[0].t:.0f} s",
    )
    never_above_max(report, ceiling)
    seen_types = sorted({t for s in report.timeline for t in s.node_types})
    foreign = sorted(set(seen_types) - allowed)
    report.check(
        "node-types-planned",
        not foreign,
        f"GPU node types seen {seen_types}; the plan allows {sorted(allowed)}"
        + (f"; not planned: {foreign}" if foreign else ""),
    )


# Karpenter's disruption pace (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/disruption): the
# controller polls every 10 s (controller.go pollingPeriod) and validates a command 15 s before
# carrying it out (consolidation.go commandValidationDelay). Neither is a setting, so neither is
# compressed.
KARPENTER_POLL_S = 10.0
KARPENTER_VALIDATION_S = 15.0
# A NodePool's disruption budgets when it sets none (pkg/apis/v1/nodepool.go, the CRD default).
DEFAULT_BUDGETS = [{"nodes": "10%"}]


def release_rounds(nodepools: list[dict[str, Any]], empty: int, nodes: int) -> int:
    """Rounds of Karpenter's emptiness consolidation that release ``empty`` of ``nodes`` nodes: each
    round deletes at most what the strictest budget that applies to empty nodes allows (a count, or a
    share of ``nodes`` rounded up: pkg/apis/v1/nodepool.go GetAllowedDisruptions). A budget with a
    schedule is taken as active: the longer wait."""
    if empty <= 0:
        return 1
    allowed = empty
    for pool in nodepools:
        for budget in (pool["spec"].get("disruption") or {}).get("budgets") or DEFAULT_BUDGETS:
            if budget.get("reasons") and "Empty" not in budget["reasons"]:
                continue
            value = str(budget["nodes"])
            cap = math.ceil(nodes * float(value[:-1]) / 100) if value.endswith("%") else int(value)
            allowed = min(allowed, cap)
    return math.ceil(empty / allowed) if allowed > 0 else empty


def never_above_max(report: LoopReport, ceiling: int) -> None:
    above = [s for s in report.timeline if s.desired_replicas > ceiling]
    report.check(
        "never-above-maxReplicas",
        not above,
        f"desired replicas never over {ceiling}" if not above else f"{len(above)} sample(s) over {ceiling}",
    )


class RouterQueue(Protocol):
    """What the wake scenario sets: the requests the router holds queued and in flight."""

    router_queued: int
    router_running: int


def wake_scenario(
    loop: Loop,
    report: LoopReport,
    plan: dict[str, Any],
    autoscaler: dict[str, Any],
    startup: dict[str, float],
    router: RouterQueue,
    queue_ttl_s: float,
) -> None:
    """A service scaled to zero on the router's queue: at rest KEDA holds it at zero; one request
    waits in the router's queue; KEDA's activation starts a replica, which turns Ready before the
    router's queue timeout; the request is served; idle again, the service returns to zero."""
    ceiling = int(plan["max_replicas"])
    tolerance = 30.0 + 4 * HPA_SYNC_PERIOD_S
    start_budget = startup["node"] + startup["pod"] + tolerance
    spec = autoscaler["spec"]
    polling, cooldown = float(spec.get("pollingInterval", 30)), float(spec.get("cooldownPeriod", 300))
    report.replicas = {"min": 0, "max": ceiling, "needed_at_peak": 1}
    # 1. At rest: no demand at the router, so KEDA takes the Deployment to zero (after its
    # cooldownPeriod, counted from the last activity; a replica the Deployment started with may
    # come up first).
    ok, t_zero = loop.run_until(
        lambda s: s.desired == 0 and s.ready == 0, start_budget + cooldown + tolerance
    )
    report.check(
        "at-zero",
        ok,
        f"0 replicas at t={t_zero:.0f} s with no request "
        f"(budget {start_budget + cooldown + tolerance:.0f} s: "
        f"a first start-up, KEDA's cooldownPeriod {cooldown:.0f} s, tolerance {tolerance:.0f} s)",
    )
    if not ok:
        return
    # 2. One request: the router queues it (no ready pod: saturation 1.0 holds dispatch).
    router.router_queued = 1
    t_request = loop.now()
    report.timings["request_at"] = t_request
    ok, t_wake = loop.run_until(lambda s: s.desired >= 1, polling + tolerance)
    report.timings["activation_s"] = t_wake - t_request
    report.check(
        "wakes-on-a-queued-request",
        ok,
        f"desired replicas 0 -> {report.timeline[-1].desired_replicas} {t_wake - t_request:.0f} s after one "
        f"request was queued at the router (budget {polling + tolerance:.0f} s: KEDA's pollingInterval "
        f"{polling:.0f} s, tolerance {tolerance:.0f} s)",
    )
    if not ok:
        return
    ok, t_ready = loop.run_until(lambda s: s.ready >= 1, start_budget)
    waited = t_ready - t_request
    report.timings["cold_request_wait_s"] = waited
    report.check(
        "served-before-the-queue-timeout",
        ok and waited <= queue_ttl_s,
        f"a replica Ready {waited:.0f} s after the request "
        f"(start-up {startup['node'] + startup['pod']:.0f} s); the router's queue timeout is "
        f"{queue_ttl_s:.0f} s, past which the request gets 503 with Retry-After",
    )
    # 3. Served: the request leaves the queue and runs, then completes.
    router.router_queued, router.router_running = 0, 1
    loop.run_until(lambda s: False, 2 * HPA_SYNC_PERIOD_S)
    router.router_running = 0
    # 4. Idle again: back to zero after the cooldown.
    t_idle = loop.now()
    ok, t_back = loop.run_until(lambda s: s.desired == 0, cooldown + polling + tolerance)
    report.timings["back_to_zero_s"] = t_back - t_idle
    report.check(
        "back-to-zero",
        ok,
        f"0 replicas {t_back - t_idle:.0f} s after the request completed (budget "
        f"{cooldown + polling + tolerance:.0f} s: cooldownPeriod, pollingInterval, tolerance)",
    )
    never_above_max(report, ceiling)


def router_queue_ttl_s(objects: list[dict[str, Any]]) -> float | None:
    """The router's queue timeout (its EndpointPickerConfig's flowControl.defaultRequestTTL, in the
    rendered ConfigMap), or None without the router."""
    for obj in objects:
        if obj.get("kind") == "ConfigMap" and obj["metadata"]["name"] == ROUTER:
            config = yaml.safe_load(obj["data"][PLUGINS_FILE])
            return duration_s(config["flowControl"]["defaultRequestTTL"])
    return None


def pool_limits_check(report: LoopReport, peak_gpus: dict[str, int], pools: dict[str, Any]) -> None:
    """Each GPU pool stayed within its rendered ``nvidia.com/gpu`` limit at every tick."""
    over = {
        name: gpus
        for name, gpus in peak_gpus.items()
        if pools[name].gpu_limit is not None and gpus > pools[name].gpu_limit
    }
    detail = (
        ", ".join(f"{n}: peak {g} GPU(s) of limit {pools[n].gpu_limit}" for n, g in sorted(peak_gpus.items()))
        or "no GPU node launched"
    )
    report.check("nodepool-limits", not over, detail)


# -- one run ----------------------------------------------------------------------------------------


def _autoscaler(objects: list[dict[str, Any]]) -> dict[str, Any]:
    found = [o for o in objects if o.get("kind") in ("HorizontalPodAutoscaler", "ScaledObject")]
    if len(found) != 1:
        kinds = ", ".join(sorted(o["kind"] for o in found)) or "none"
        raise LoopInputError(f"the loop needs exactly one HPA or ScaledObject in the render, found {kinds}")
    return found[0]


def _describe(autoscaler: dict[str, Any]) -> str:
    if autoscaler["kind"] == "ScaledObject":
        triggers = ", ".join(t.get("name") or t["type"] for t in autoscaler["spec"].get("triggers") or [])
        return f"KEDA ScaledObject/{autoscaler['metadata']['name']} ({triggers})"
    metrics = ", ".join(
        (m.get("pods") or m.get("external") or m.get("object") or m.get("resource") or {})
        .get("metric", {})
        .get("name", m["type"])
        for m in autoscaler["spec"].get("metrics") or []
    )
    return f"HPA/{autoscaler['metadata']['name']} ({metrics})"


def run_loop(
    stack: str,
    scenario: str = "step",
    overrides: dict[str, str] | None = None,
    factor: int = COMPRESSION,
    keep: Path | None = None,
) -> LoopReport:
    """Render ``stack`` (with ``overrides``), run ``scenario`` on the twin, return the report.

    Raises ``LoopInputError`` for a stack or scenario the loop cannot run, ``BinariesMissing``
    (or the network's ``NetworkUnavailable``) when a program or capability is missing, and
    ``TwinError`` when a program fails."""
    if scenario not in SCENARIOS:
        raise LoopInputError(f"--scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}")
    config = read_stack(stack)
    if overrides:
        config = config.with_overrides(overrides)
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-loop-") as temp:
        folder = Path(temp)
        try:
            report = _run(config.stack, scenario, write(render(config), folder / "render"), factor, folder)
        finally:
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for log in folder.glob("*.log"):
                    (keep / log.name).write_bytes(log.read_bytes())
    if report.replicas and scenario == "step":
        needed, floor = report.replicas["needed_at_peak"], report.replicas["min"]
        report.simulator = simulator_beside(stack, overrides, report, needed, floor)
    elif scenario == "wake" and "request_at" in report.timings:
        report.simulator = simulator_beside_wake(stack, overrides, report)
    return report


@dataclass
class Prepared:
    """Everything the loop derives from the render before any program starts."""

    plan: dict[str, Any]
    autoscaler: dict[str, Any]  # as applied (compressed)
    objects: list[dict[str, Any]]  # compressed
    nodepools: list[dict[str, Any]]  # rewritten for kwok
    classes: list[dict[str, Any]]
    pools: dict[str, Any]
    workload: dict[str, Any]
    startup: dict[str, float]  # compressed seconds: node launch, then the pod's own start
    stages: list[Path]
    instance_types: Path
    metrics: tuple[str, ...]  # metrics_programs' `which`

    @property
    def runs_lws(self) -> bool:
        """Whether the scaled workload is a LeaderWorkerSet, made by the real LWS controller."""
        return bool(self.workload["kind"] == "LeaderWorkerSet")


def _node_class_rewrites(objects: list[dict[str, Any]], auto_mode: bool) -> list[str]:
    out = []
    for obj in (o for o in objects if o.get("kind") == "NodePool"):
        ref = obj["spec"]["template"]["spec"]["nodeClassRef"]
        why = (
            " (Auto Mode runs Karpenter inside: its pools are rehearsed by Karpenter's kwok provider, the "
            "instance types labelled under eks.amazonaws.com too)"
            if auto_mode
            else ""
        )
        out.append(
            f"NodePool/{obj['metadata']['name']} nodeClassRef {ref['group']}/{ref['kind']} {ref['name']} "
            f"-> KWOKNodeClass {ref['name']}{why}"
        )
    return out


def prepare(
    stack: str, scenario: str, render_dir: Path, factor: int, folder: Path, report: LoopReport
) -> Prepared:
    """Read the render, refuse what the loop cannot run, compress its timings (each rewrite listed
    in ``report``) and write the kwok stages and Karpenter's instance types into ``folder``."""
    objects, _ = load_render(render_dir)
    plan = json.loads((render_dir / "plan.json").read_text())
    autoscaler = _autoscaler(objects)
    keda = autoscaler["kind"] == "ScaledObject"
    if scenario == "wake" and not (keda and int(autoscaler["spec"].get("minReplicaCount", 1)) == 0):
        raise LoopInputError(
            f"--scenario wake needs a stack that scales from zero: autoscaling.minReplicas 0 with "
            f"autoscaling.signal router-queue (and routing.kind llm-d); {stack} has {_describe(autoscaler)} "
            f"with minReplicas {plan['min_replicas']}"
        )
    compressed, rewrites = compress_objects(objects, factor)
    report.rewrites += rewrites
    # A replica's start on a new node: the plan's stages (the plan contract: the start-up for a new node
    # is their sum); the node's launch played by kwok's node stage, the rest by its pod stage.
    breakdown = {k: float(v) for k, v in plan["startup_breakdown"].items()}
    startup = {
        "node": breakdown["node"] / factor,
        "pod": (sum(breakdown.values()) - breakdown["node"]) / factor,
    }
    # kwok plays one node launch; a replica on several nodes waits for more than one, in turn, and
    # that sequence is left to the programs that make it (the LWS controller and Karpenter).
    launches = node_launches_in_turn(int(plan.get("nodes_per_replica", 1)))
    stages, stage_rewrites = kwok_loop_stages(folder, startup["node"] / launches, startup["pod"])
    report.rewrites += stage_rewrites
    report.planned = {
        "start_up_s": startup["node"] + startup["pod"],
        "node_launch_s": startup["node"] / launches,
        "launches_in_turn": launches,
        "nodes_per_replica": int(plan.get("nodes_per_replica", 1)),
    }
    if launches > 1:
        report.rewrites.append(
            f"kwok's node-initialize plays one node launch of the plan's {launches} in turn for a "
            f"{plan['nodes_per_replica']}-node replica; the real LWS controller makes a group's workers "
            "once its leader has a node and Karpenter launches theirs, so the twin's start-up of a group "
            "is theirs, judged against the plan's"
        )
    report.rewrites.append(
        f"kube-controller-manager --horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD_S:g}s "
        "(default 15s)"
    )
    report.rewrites += [
        f"Karpenter {name} {seconds * 1000:.0f}ms (default {seconds * COMPRESSION:g}s)"
        for name, seconds in KARPENTER_BATCH_S.items()
    ]
    nodepools, classes = kwok_nodepools(compressed)
    nodepools = with_launch_taint(nodepools, report.rewrites)
    groups = {
        o["spec"]["template"]["spec"]["nodeClassRef"]["group"]
        for o in compressed
        if o.get("kind") == "NodePool"
    }
    auto_mode = AUTO_MODE in groups
    report.rewrites += _node_class_rewrites(compressed, auto_mode)
    zones = sorted(
        {
            r["inputs"]["availabilityZone"]
            for r in json.loads((render_dir / "aws.json").read_text())
            if r.get("type") == "aws:ec2/subnet:Subnet"
        }
    )
    gpu_class = next(
        o["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        for o in compressed
        if o.get("kind") == "NodePool" and o["spec"]["template"]["spec"].get("taints")
    )
    types = folder / "instance_types.json"
    instance_types_file(
        types, plan["region"], zones, ephemeral_storage(compressed, gpu_class), auto_mode=auto_mode
    )
    target = autoscaler["spec"]["scaleTargetRef"]
    kind = target.get("kind", "Deployment")
    if kind not in SCALED_KINDS:
        raise LoopInputError(
            f"{stack}'s {_describe(autoscaler)} scales a {kind}: the loop drives and reads "
            f"{' and '.join(k + 's' for k in SCALED_KINDS)} only"
        )
    workload = next(
        o for o in compressed if o.get("kind") == kind and o["metadata"]["name"] == target["name"]
    )
    applied_autoscaler = next(o for o in compressed if o.get("kind") == autoscaler["kind"])
    return Prepared(
        plan=plan,
        autoscaler=applied_autoscaler,
        objects=compressed,
        nodepools=nodepools,
        classes=classes,
        pools=pools_of(nodepools),
        workload=workload,
        startup=startup,
        stages=stages,
        instance_types=types,
        metrics=("keda",) if keda else ("prometheus-adapter",),
    )


def judge_flows(report: LoopReport, render_dir: Path) -> None:
    """Every flow of the required-flows table, judged on the real network-policy controller's
    PolicyEndpoints for this render (its own twin run, before the loop's)."""
    from . import flow_matrix

    verdicts = flow_matrix.flow_matrix(render_dir)
    report.flows = [v.as_json() for v in verdicts]
    failed = flow_matrix.failures(verdicts)
    said = "; ".join(f"{v.id}: {'dropped' if v.required else 'admitted'}" for v in failed)
    report.check("flows", not failed, f"{len(verdicts)} flow(s) judged" + (f"; {said}" if said else ""))


def _scheduled_pods(seen: Observed) -> tuple[list[Any], list[Any], dict[Any, Any]]:
    """The stand-in's view of the fleet: serving pods, loading pods, and each worker of a serving
    group with its leader."""
    from .standin import PodRef

    def ref(pod: dict[str, Any]) -> PodRef:
        return PodRef(pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"].get("nodeName", ""))

    followers = {ref(worker): ref(leader) for worker, leader in seen.followers}
    return [ref(p) for p in seen.ready_pods], [ref(p) for p in seen.loading_pods], followers


def _run(stack: str, scenario: str, render_dir: Path, factor: int, folder: Path) -> LoopReport:
    from . import metrics_programs, netns, policy_endpoints, prometheus, standin

    objects, _ = load_render(render_dir)
    report = LoopReport(stack, scenario, _describe(_autoscaler(objects)), factor)
    ready = prepare(stack, scenario, render_dir, factor, folder, report)
    extra: tuple[str, ...] = (
        ("keda-operator", "keda-metrics-apiserver") if "keda" in ready.metrics else ("prometheus-adapter",)
    )
    if ready.runs_lws:
        extra += ("lws",)
    require_binaries((*TIER0, *PROGRAMS, policy_endpoints.CONTROLLER, *extra))
    if not prometheus.PROMETHEUS.exists():
        raise BinariesMissing(f"{prometheus.PROMETHEUS} is missing: {prometheus.INSTALL_HINT}")
    netns.check_available()
    judge_flows(report, render_dir)

    with ExitStack() as scope:
        net = scope.enter_context(netns.bridge())
        api = scope.enter_context(
            running_twin(address=net.host_address, extra_flags=["--enable-aggregator-routing=true"])
        )
        install_crds(api)
        prom_ns = net.namespace("prometheus")
        stand_in = standin.StandIn.from_render(render_dir, compression=factor)
        port = free_port()
        scope.enter_context(stand_in.serving(net.host_address, port))
        report.rewrites += stand_in.address_rewrites()
        scrape_s = _scrape_interval_s(render_dir, factor)
        reload_s = PROMETHEUS_DISCOVERY_RELOAD_S / factor
        report.rewrites.append(
            f"Prometheus: one scrape and rule-evaluation interval, {scrape_s * 1000:.0f}ms (the render's "
            f"{scrape_s * factor:g}s, compressed); new targets taken every {reload_s * 1000:.0f}ms "
            f"(--scrape.discovery-reload-interval, default {PROMETHEUS_DISCOVERY_RELOAD_S:g}s)"
        )
        prom = scope.enter_context(
            prometheus.running_prometheus(
                render_dir, folder / "prometheus", f"{prom_ns.address}:9090", scrape_interval_s=scrape_s,
                discovery_reload_s=reload_s,
                command_prefix=prom_ns.prefix(),
            )
        )  # fmt: skip
        capacity = Capacity(api, {}, CapacityReport(stack))
        for obj in (o for o in ready.objects if o.get("kind") == "Namespace"):
            capacity.create(obj)
        adapter = _adapter_flags(render_dir, factor) if "prometheus-adapter" in ready.metrics else None
        started = scope.enter_context(
            metrics_programs.metrics_programs(
                api, net, render_dir, folder, ready.metrics, prometheus=prom_ns, adapter_flags=adapter
            )
        )
        report.rewrites += started.rewrites
        api.discover()
        kcm_flags = [f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD_S:g}s"]
        batch = {name: f"{seconds * 1000:.0f}ms" for name, seconds in KARPENTER_BATCH_S.items()}
        kcm = (*LOOP_CONTROLLERS, *LWS_CONTROLLERS) if ready.runs_lws else LOOP_CONTROLLERS
        programs = scope.enter_context(
            controllers(
                api, folder, ready.instance_types, kcm_controllers=kcm, kcm_flags=kcm_flags,
                stages=ready.stages, karpenter_env=batch,
            )
        )  # fmt: skip
        if ready.runs_lws:
            programs["lws"] = scope.enter_context(running_lws(api, folder, render_dir))
            report.rewrites += list(LWS_REWRITES)
        capacity.programs = {**programs, **started.programs}
        for obj in ready.classes + ready.nodepools:
            capacity.create(obj)
        # The router's Deployment is not run: its metrics come from the stand-in (see rewrites).
        applied = [
            o
            for o in ready.objects
            if o.get("kind") in APPLIED_KINDS
            and o.get("kind") != "Namespace"
            and not (o.get("kind") == "Deployment" and o["metadata"]["name"] == ROUTER)
        ]
        for obj in sorted(applied, key=_rank):
            capacity.create(_unmasked(obj))
        loop = Loop(api, capacity, report, ready.workload, ready.pools, ready.nodepools)
        peak_gpus: dict[str, int] = {}

        def on_tick(load: float, seen: Observed) -> None:
            serving, loading, followers = _scheduled_pods(seen)
            stand_in.set_state(load, serving, loading, followers)
            prom.set_targets(stand_in.targets(f"{net.host_address}:{port}"))
            for pool, gpus in _pool_gpus(seen.gpu_nodes).items():
                peak_gpus[pool] = max(peak_gpus.get(pool, 0), gpus)

        loop.on_tick = on_tick
        if scenario == "wake":
            ttl = router_queue_ttl_s(ready.objects)
            if ttl is None:
                raise LoopInputError(f"--scenario wake: {stack}'s render has no router (routing.kind llm-d)")
            report.rewrites.append(
                f"the router's queue timeout (defaultRequestTTL) {ttl:.0f} s is judged as "
                f"{ttl / factor:.0f} s"
            )
            wake_scenario(loop, report, ready.plan, ready.autoscaler, ready.startup, stand_in, ttl / factor)
            pool_limits_check(report, peak_gpus, ready.pools)
            return report
        peak = stand_in.planned_rps() * int(ready.plan["max_replicas"])
        step_scenario(
            loop, report, ready.plan, ready.autoscaler, ready.startup, stand_in.replicas_needed, peak,
            stand_in.drain_seconds, prom.scrapes_every_target,
        )  # fmt: skip
        pool_limits_check(report, peak_gpus, ready.pools)
    return report


def _adapter_flags(render_dir: Path, factor: int) -> dict[str, str]:
    """prometheus-adapter's series relist interval (which decides how soon a new pod's series
    becomes a custom metric) compressed like the controllers' timings."""
    from .metrics_programs import adapter_flag

    flag = "--metrics-relist-interval"
    # sigs.k8s.io/prometheus-adapter v0.12.0 cmd/adapter/adapter.go: default 10m when unset.
    value = duration_s(adapter_flag(render_dir, flag) or "10m") or 600.0
    return {flag: f"{scaled(value, factor, 1)}s"}


def _scrape_interval_s(render_dir: Path, factor: int) -> float:
    """The render's scrape interval (its vLLM PodMonitor and dcgm-exporter ServiceMonitor, read as
    the simulator reads them; the shorter when they differ: the twin's Prometheus has one job),
    compressed."""
    from deepseek_eks.perf.simulate.stack import stack_facts

    objects, _ = load_render(render_dir)
    helm = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((render_dir / "helm").glob("*.yaml"))}
    facts = stack_facts(objects, helm)
    return min(facts.vllm_scrape_s, facts.gpu_scrape_s) / factor


def _pool_gpus(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs per NodePool among ``nodes``."""
    out: dict[str, int] = {}
    for node in nodes:
        pool = node["metadata"]["labels"][NODEPOOL_LABEL]
        out[pool] = out.get(pool, 0) + int(
            (node.get("status") or {}).get("capacity", {}).get(GPU_RESOURCE, 0)
        )
    return out


# -- the simulator beside ---------------------------------------------------------------------------


def _first(
    samples: Sequence[tuple[float, int, int]], after: float, done: Callable[[int, int], bool]
) -> float | None:
    """When, after ``after``, (desired, ready) first satisfied ``done``; ``samples`` may be a
    record of changes only (the simulator's fleet), so the state in force at ``after`` counts."""
    before = [s for s in samples if s[0] < after]
    if before and done(*before[-1][1:]):
        return 0.0
    return next((t - after for t, desired, ready in samples if t >= after and done(desired, ready)), None)


Phase = tuple[str, float, Callable[[int, int], bool]]


def _phases(
    label: str,
    real: Sequence[tuple[float, int, int]],
    simulated: Sequence[tuple[float, int, int]],
    phases: Sequence[Phase],
    tolerance_s: float,
) -> dict[str, Any]:
    """For each (name, after, done) phase, how long the twin and the simulator took after
    ``after`` to satisfy ``done``, and the phases where they differ by more than ``tolerance_s``
    or a quarter (the twin reads its fleet once a tick: less is noise)."""
    out: dict[str, Any] = {"label": label, "phases": {}}
    differences = []
    for name, after, done in phases:
        twin_s, sim_s = _first(real, after, done), _first(simulated, after, done)
        out["phases"][name] = {
            "twin": None if twin_s is None else round(twin_s),
            "simulator": None if sim_s is None else round(sim_s),
        }
        if twin_s is None or sim_s is None or abs(twin_s - sim_s) > max(tolerance_s, 0.25 * twin_s):
            differences.append(f"{name}: twin {twin_s} s, simulator {sim_s} s")
    out["differences"] = differences
    return out


def simulator_beside_wake(stack: str, overrides: dict[str, str] | None, report: LoopReport) -> dict[str, Any]:
    """The simulator on the wake scenario (one request at a service at zero, behind llm-d's
    router, in cluster seconds): when it asks for a replica and when that replica is Ready, next
    to the real controllers'. Reported, never judged."""
    from deepseek_eks.perf.simulate.router import RouterSpec
    from deepseek_eks.perf.simulate.run import load_stack, simulate
    from deepseek_eks.perf.simulate.traffic import DEFAULT_OUTPUT_TOKENS, DEFAULT_PROMPT_TOKENS, Request

    factor = report.compression
    asked = report.timings["request_at"] * factor
    duration = report.timeline[-1].t * factor if report.timeline else asked
    inputs = load_stack(stack, overrides)
    trace = [Request(asked, DEFAULT_PROMPT_TOKENS, DEFAULT_OUTPUT_TOKENS)]
    router = RouterSpec.from_plan(inputs.plan, inputs.max_replicas)
    run = simulate(inputs, trace, max(duration, asked + 1), router=router)
    simulated = run.outcome.fleet
    real = [(s.t * factor, s.desired_replicas, s.ready_replicas) for s in report.timeline]
    phases: list[Phase] = [
        ("activation_s", asked, lambda d, r: d >= 1),
        ("ready_s", asked, lambda d, r: r >= 1),
    ]
    label = "simulator (perf/simulate), one request, cluster seconds"
    return _phases(label, real, simulated, phases, 4 * TICK_S * factor)


def simulator_beside(
    stack: str, overrides: dict[str, str] | None, report: LoopReport, needed: int, floor: int
) -> dict[str, Any]:
    """The simulator on the scenario the twin ran (the same load over the same phases, in
    cluster seconds): its scale-up and scale-down times next to the real controllers', and where
    they differ by more than the loop's tolerance. Reported, never judged."""
    from deepseek_eks.perf.simulate.run import load_stack, simulate
    from deepseek_eks.perf.simulate.traffic import LengthProfile, arrivals

    factor = report.compression
    steps = [(s.t * factor, s.load_rps) for s in report.timeline]
    if not steps or "step_at" not in report.timings:
        return {}
    duration = steps[-1][0]

    def rate(t: float) -> float:
        current = 0.0
        for at, load in steps:
            if at > t:
                break
            current = load
        return current

    inputs = load_stack(stack, overrides)
    trace = arrivals(rate, duration, 1, LengthProfile(), int(inputs.plan["max_model_len"]))
    run = simulate(inputs, trace, duration)
    simulated = run.outcome.fleet
    real = [(s.t * factor, s.desired_replicas, s.ready_replicas) for s in report.timeline]
    step_at, fall_at = report.timings["step_at"] * factor, report.timings["fall_at"] * factor
    # When the autoscaler first asked for the peak's replicas, then when they were Ready: a
    # difference in the rise shows whether the signal or the start-up took longer.
    phases: list[Phase] = [
        ("asked_s", step_at, lambda d, r: d >= needed),
        ("scale_up_s", step_at, lambda d, r: r >= needed),
        ("scale_down_s", fall_at, lambda d, r: d <= floor),
    ]
    label = "simulator (perf/simulate), same load, cluster seconds"
    # The twin reads its fleet once a tick: differences under four ticks (or a quarter) are noise.
    return _phases(label, real, simulated, phases, 4 * TICK_S * factor)
