"""The discrete-event simulation: requests arrive, the load balancer routes each to a ready
replica by the rendered algorithm (ALB default round robin; least outstanding requests when the
render sets it; no ready replica: HTTP 503, rejected), each replica
runs vLLM 0.33.0's scheduler step by step (continuous batching up to ``max_num_seqs``, chunked
prefill within ``max_num_batched_tokens``, KV blocks of 16 tokens allocated as sequences grow,
preemption by recompute when the cache is full), each step lasting what the replica model says
(``ReplicaModel.step_seconds``); the autoscaler reads scraped metrics and resizes the Deployment;
new pods wait for a node, pull the image and load weights; removed pods drain. Deterministic: the
only randomness is in the trace, which comes from a seed.

Modelling choices (stated, not hidden):
- The scheduler follows vllm/v1/core/sched/scheduler.py ``Scheduler.schedule`` (0.33.0): running
  requests first (a decode takes one token, an unfinished prefill a chunk of the remaining budget);
  when the KV blocks for them run out the last admitted request is preempted (``_preempt_request``:
  its blocks freed, recomputed from scratch, back at the head of the queue); waiting requests are
  admitted only in a step without preemption, while ``max_num_seqs`` and the budget allow and their
  first chunk's blocks fit (reference/upstream/vllm-scheduler/scheduler-facts.json). The first
  token comes at the end of the step that completes the prompt's prefill.
- Aggregation: steps that only decode repeat with the same batch until the next sequence finishes
  (or the cache would fill), so they run as one event whose duration is the sum of the steps' times
  (context growing by one token per sequence per step); an arrival cuts such a run short at the next
  step boundary. KV blocks are counted from the token total plus half a partial block per sequence.
- GPU utilization (DCGM_FI_DEV_GPU_UTIL) is a point sample taken at each dcgm-exporter
  collection (``-c``/DCGM_EXPORTER_INTERVAL, default 30000 ms: NVIDIA/dcgm-exporter
  pkg/cmd/app.go): NVML's utilization over its own sub-second sample period, so 100 when the
  engine has a running sequence at that instant and 0 otherwise; a pod loading weights reports
  0; Prometheus scrapes the last collected value and the adapter rule / KEDA query read it as an
  instant vector (no rate or range window: promql.gpu_utilization_adapter_rule,
  promql.gpu_utilization_total). Facts: reference/upstream/hpa-keda-controllers.json "dcgm".
- vLLM's ``vllm:kv_cache_usage_perc`` is sampled at each vLLM scrape as the KV blocks the running
  sequences hold now (prompt + generated so far) over the cache's blocks.
- Prefix caching and llm-d's router (``SimConfig.router``): perf/simulate/router.py. A
  request whose trace entry names shared prefixes reuses the longest one its replica has cached
  (skipping that prefill); with the router, requests wait in its queue while the pool is saturated
  or has no ready replica, are sent where its scorers point, and get 503 past the queue's TTL.
- Scale-down removes pods in the ReplicaSet controller's order (pkg/controller/replicaset,
  ``getPodsToDelete``: unscheduled, then pending, then not ready, then the most recently ready).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

# kv_blocks is the preemption model the planner sizes --max-num-seqs with (one function for both).
from deepseek_eks.sizing.performance import BLOCK_SIZE, kv_blocks

from .history import DemandHistory
from .hpa import (
    SYNC_PERIOD_S,
    Behavior,
    HorizontalController,
    KedaActivation,
    PodSample,
    external_average_value_replicas,
)
from .hpa import pods_metric_replicas as pods_proposal
from .replica import ReplicaModel
from .router import USAGE_LIMIT, EndpointIndex, EndpointView, PrefixCache, RouterSpec, pick, saturation
from .stack import (
    CONCURRENCY_TOTAL,
    CRON,
    GPU_PER_POD,
    KV_TOTAL,
    LEAST_OUTSTANDING,
    QUEUE_TOTAL,
    RANDOM,
    ROUND_ROBIN,
    ROUTER_DEMAND,
    SEASONAL,
    AutoscalerSpec,
    MetricSpec,
)
from .traffic import Request

TIMELINE_STEP_S = 60.0
# Longest run of identical decode steps simulated as one event (bounds the context-growth error).
MAX_DECODE_RUN = 512


# The signals' values as functions of a replica's state, shared with the twin's vLLM/DCGM stand-in
# (twin/standin.py), so that both report a signal the same way.
def kv_cache_usage(tokens: int, seqs: int, kv_cache_tokens: int) -> float:
    """``vllm:kv_cache_usage_perc``: the share of the cache's blocks those sequences hold."""
    return min(1.0, kv_blocks(tokens, seqs) / max(1, kv_cache_tokens // BLOCK_SIZE))


def gpu_utilization_sample(running_sequences: int) -> float:
    """``DCGM_FI_DEV_GPU_UTIL`` as NVML samples it at one instant: 100 while the engine has a
    running sequence (a kernel executing), else 0."""
    return 100.0 if running_sequences else 0.0


@dataclass(frozen=True)
class StartupTimes:
    """Seconds from a pod's creation to ready, by stage."""

    node_s: float  # a new GPU node: launch, join, GPU registered (only when no idle node)
    image_s: float  # first pull of the vLLM image on a node
    weights_s: float  # weight download/load, compile and warm-up (from the plan)


@dataclass(frozen=True)
class SimConfig:
    autoscaler: AutoscalerSpec
    replica: ReplicaModel
    startup: StartupTimes
    vllm_scrape_s: float
    gpu_scrape_s: float
    termination_grace_s: float
    consolidate_after_s: float
    replica_hourly_usd: float
    gpus_per_replica: int
    gpu_collect_s: float = 30.0  # dcgm-exporter's own collection interval
    initial_replicas: int | None = None  # default: the autoscaler's floor, ready at t=0
    fixed_replicas: int | None = None  # no autoscaling (queueing checks)
    routing: str = ROUND_ROBIN  # the load balancer's algorithm, from the render
    router: RouterSpec | None = None  # llm-d's router in front of the replicas (replaces routing)
    # A replica plan instead of the autoscaler: (time, replicas) steps, applied at each time (the
    # clairvoyant oracle); initial replicas are the first step's.
    replica_plan: tuple[tuple[float, int], ...] | None = None
    clock_origin_s: float = 0.0  # epoch seconds of t=0 (cron schedules are wall-clock)
    # autoscaling.warmSpareNodes: GPU nodes placeholder pods hold, up with the vLLM image pulled and
    # never consolidated; a new replica takes one at once and the node autoscaler launches its
    # replacement (components/platform/warm_spare.py). They cost node time like any other node.
    warm_spare_nodes: int = 0
    # What Prometheus holds from before t=0 for the seasonal triggers (autoscaling.seasonal); the
    # run adds its own minutes to a copy. None: a new service, no history (the triggers read 0).
    demand_history: DemandHistory | None = None

    @classmethod
    def fixed_fleet(cls, replica: ReplicaModel, replicas: int, **overrides: Any) -> SimConfig:
        """``replicas`` replicas ready from t=0 that never scale, with no start-up and no price
        unless ``overrides`` set them: for measuring replicas (queueing, preemption, routing),
        not an autoscaler."""
        values: dict[str, Any] = {
            "autoscaler": AutoscalerSpec(
                "fixed", "HorizontalPodAutoscaler", replicas, replicas, Behavior.from_spec(None), ()
            ),
            "replica": replica,
            "startup": StartupTimes(0.0, 0.0, 0.0),
            "vllm_scrape_s": 15.0,
            "gpu_scrape_s": 15.0,
            "termination_grace_s": 30.0,
            "consolidate_after_s": 0.0,
            "replica_hourly_usd": 0.0,
            "gpus_per_replica": 1,
            "fixed_replicas": replicas,
        }
        values.update(overrides)
        return cls(**values)


class _Req:
    __slots__ = (
        "admit",
        "arrival",
        "cached",
        "chain",
        "epoch",
        "finish",
        "first",
        "gen0",
        "j",
        "output",
        "pre_done",
        "pre_target",
        "preempted",
        "prompt",
        "status",
    )

    def __init__(self, r: Request) -> None:
        self.arrival = r.arrival_s
        self.prompt = r.prompt_tokens
        self.output = r.output_tokens
        self.pre_target = r.prompt_tokens  # tokens to (re)compute before decoding
        self.chain = r.prefix  # shared-prefix segments (key, cumulative tokens)
        self.cached = 0  # prompt tokens served from the replica's prefix cache
        self.pre_done = 0
        self.gen0 = 0  # output tokens generated before the current prefill (preemption)
        self.j = 0  # the pod's step count when this request's prefill completed
        self.epoch = 0  # bumped on preemption: stale finish entries are skipped
        self.preempted = False  # preempted at least once (Outcome.preempted_requests)
        self.admit = -1.0
        self.first = -1.0
        self.finish = -1.0
        self.status = "new"  # held (router queue), queued, running, done, rejected, timed_out, cut


class _Node:
    __slots__ = ("has_image", "pod", "ready", "released", "requested", "spare", "version")

    def __init__(self, now: float, spare: bool = False) -> None:
        self.requested = now
        self.ready = False
        self.has_image = False
        self.pod: _Pod | None = None
        self.released = -1.0
        self.version = 0
        self.spare = spare  # held by a warm spare placeholder: never consolidated while idle


class _Pod:
    __slots__ = (
        "active",
        "busy",
        "busy_at_collect",
        "cache",
        "chain_held",
        "chunks",
        "created",
        "dec_base",
        "dec_cached",
        "finishes",
        "id",
        "index",
        "kv_sample",
        "last",
        "n_dec",
        "node",
        "pre_cached",
        "prefilling",
        "ready_at",
        "running",
        "running_sample",
        "state",
        "step_dt",
        "step_end",
        "step_k",
        "step_start",
        "steps",
        "util_collected",
        "util_sample",
        "version",
        "waiting",
        "waiting_sample",
    )

    def __init__(self, pid: int, now: float) -> None:
        self.id = pid
        self.created = now
        self.state = "scheduling"  # scheduling, pulling, loading, ready, draining, gone
        self.node: _Node | None = None
        self.ready_at = -1.0
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []  # vLLM's RUNNING queue, admission order
        self.prefilling: list[_Req] = []  # the running requests still in prefill
        self.finishes: list[tuple[int, int, int, _Req]] = []  # (step, seq, epoch, request)
        self.n_dec = 0  # decoding sequences
        self.dec_base = 0  # decode KV tokens = dec_base + n_dec * steps
        self.dec_cached = 0  # cached prefix tokens the decoding sequences attend over
        self.cache = PrefixCache()  # vLLM's automatic prefix caching
        self.chain_held = 0  # decode KV tokens that are prompt segments (cached, shared)
        self.index = EndpointIndex()  # the router's approximate view of that cache
        self.pre_cached = 0  # KV tokens of the prefills in progress
        self.steps = 0  # engine steps done
        self.active = False  # a step (or a run of decode steps) is in flight
        self.chunks: list[tuple[_Req, int]] = []  # prefill chunks of the step in flight
        self.step_k = 0
        self.step_dt = 0.0
        self.step_start = 0.0
        self.step_end = 0.0
        self.last = now
        self.version = 0
        self.busy = 0.0
        self.busy_at_collect = 0.0
        self.util_collected: float | None = None  # dcgm-exporter's last value
        self.util_sample: float | None = None  # what Prometheus last scraped
        self.waiting_sample: int | None = None
        self.running_sample: int | None = None  # vllm:num_requests_running at the last scrape
        self.kv_sample: float | None = None  # vllm:kv_cache_usage_perc at the last scrape


@dataclass
class Outcome:
    """Everything one run measured."""

    label: str
    duration_s: float
    requests: int = 0
    completed: int = 0
    rejected: int = 0  # 503s: no ready replica behind the load balancer, or the router's queue TTL
    timed_out: int = 0  # of those, the router's: held past defaultRequestTTL (or its queue full)
    cut: int = 0
    in_flight: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0  # of the requests admitted to a replica
    cached_prompt_tokens: int = 0  # of those, served from the replica's prefix cache
    # vLLM's preemption by recompute (the KV cache ran out under the running batch): how often, and
    # how many requests it hit at least once. A request readmitted into a still-full cache is often
    # preempted again, so the first exceeds the second.
    preemptions: int = 0
    preempted_requests: int = 0
    ttft: list[float] = field(default_factory=list)
    served_arrivals: list[float] = field(default_factory=list)  # arrival time of each ttft entry
    queue_wait: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    node_seconds: float = 0.0
    busy_seconds: float = 0.0
    # (t, desired replicas, ready replicas, waiting requests, arrivals/s over the last step)
    timeline: list[tuple[float, int, int, int, float]] = field(default_factory=list)
    # (t, desired replicas, ready replicas) at every change, to the event: what the twin loop's
    # phases are read from (the timeline's steps are too coarse for a scale-up's links)
    fleet: list[tuple[float, int, int]] = field(default_factory=list)
    # requests running + waiting at each step as Prometheus has them (the seasonal triggers' input;
    # a later run's history, run.demand_history), before-0 history included
    demand: DemandHistory = field(default_factory=DemandHistory)


(
    _ARRIVAL,
    _FINISH,
    _NODE_READY,
    _PULLED,
    _LOADED,
    _DRAIN_END,
    _RELEASE,
    _SYNC,
    _POLL,
    _SCRAPE_V,
    _SCRAPE_G,
    _COLLECT_G,
    _TICK,
    _PLAN,
    _SPARE_PULLED,
    _TTL,
) = range(16)


class Simulation:
    """One run of one autoscaler over one trace."""

    def __init__(self, config: SimConfig, trace: list[Request], duration_s: float, label: str) -> None:
        self.c = config
        self.trace = trace
        self.duration = duration_s
        self.out = Outcome(label, duration_s)
        if config.demand_history is not None:
            self.out.demand = config.demand_history.copy()
        self.events: list[tuple[float, int, int, object, int]] = []
        self.seq = itertools.count()
        self.pods: list[_Pod] = []
        self.nodes: list[_Node] = []
        self.pod_ids = itertools.count()
        self.reqs: list[_Req] = []
        self.now = 0.0
        spec = config.autoscaler
        self.hpa = HorizontalController(spec.min_replicas, spec.max_replicas, spec.behavior)
        self.keda = (
            KedaActivation(spec.keda_min_replicas, spec.polling_interval_s, spec.cooldown_s)
            if spec.is_keda
            else None
        )
        self.arrivals_this_tick = 0
        self.routed = 0  # round-robin cursor
        self.rng = random.Random(0)  # the random router's only randomness, fixed
        self.held: deque[_Req] = deque()  # llm-d's router queue (flow control)
        self.held_sample = 0  # its size at the last scrape

    # ---- event plumbing -------------------------------------------------------------------

    def _at(self, t: float, kind: int, obj: object = None, version: int = 0) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, obj, version))

    def run(self) -> Outcome:
        c = self.c
        initial = c.fixed_replicas if c.fixed_replicas is not None else c.initial_replicas
        if c.replica_plan:
            initial = c.replica_plan[0][1]
        if initial is None:
            initial = c.autoscaler.floor
        for _ in range(initial):
            pod = self._new_pod()
            node = _Node(0.0)
            node.ready = node.has_image = True
            node.pod = pod
            pod.node = node
            self.nodes.append(node)
            pod.state = "ready"
            pod.ready_at = 0.0
        self._fleet_changed()
        for _ in range(c.warm_spare_nodes):
            node = _Node(0.0, spare=True)
            node.ready = node.has_image = True
            self.nodes.append(node)
        for i, r in enumerate(self.trace):
            if r.arrival_s < self.duration:
                self._at(r.arrival_s, _ARRIVAL, i)
        if c.replica_plan:
            for t, n in c.replica_plan[1:]:
                self._at(t, _PLAN, None, n)
        elif c.fixed_replicas is None:
            self._at(SYNC_PERIOD_S, _SYNC)
            if self.keda:
                self._at(c.autoscaler.polling_interval_s, _POLL)
        self._at(c.vllm_scrape_s, _SCRAPE_V)
        self._at(c.gpu_scrape_s, _SCRAPE_G)
        self._at(c.gpu_collect_s, _COLLECT_G)
        self._at(TIMELINE_STEP_S, _TICK)
        handlers = {
            _ARRIVAL: self._arrival,
            _FINISH: self._finish,
            _NODE_READY: self._node_ready,
            _PULLED: self._pulled,
            _LOADED: self._loaded,
            _DRAIN_END: self._drain_end,
            _RELEASE: self._release,
            _SYNC: self._sync,
            _POLL: self._poll,
            _SCRAPE_V: self._scrape_vllm,
            _SCRAPE_G: self._scrape_gpu,
            _COLLECT_G: self._collect_gpu,
            _TICK: self._tick,
            _PLAN: self._plan_step,
            _SPARE_PULLED: self._spare_pulled,
            _TTL: self._ttl,
        }
        events = self.events
        while events and events[0][0] <= self.duration:
            t, _, kind, obj, version = heapq.heappop(events)
            self.now = t
            handlers[kind](obj, version)
        self.now = self.duration
        return self._finish_accounting()

    # ---- requests -------------------------------------------------------------------------

    def _arrival(self, index: object, _v: int) -> None:
        req = _Req(self.trace[index])  # type: ignore[call-overload]
        self.reqs.append(req)
        self.arrivals_this_tick += 1
        router = self.c.router
        if router is not None:
            if len(self.held) >= router.max_requests:
                req.status = "timed_out"
                return
            req.status = "held"
            self.held.append(req)
            self._at(self.now + router.request_ttl_s, _TTL, req)
            self._dispatch()
            return
        best = self._route()
        if best is None:
            req.status = "rejected"
            return
        req.status = "queued"
        best.waiting.append(req)
        self._admit(best)

    def _dispatch(self) -> None:
        """llm-d's router: while the pool is below its usage limit, send the queue's head where the
        scorers point (perf/simulate/router.py)."""
        router = self.c.router
        assert router is not None
        while self.held:
            ready = [p for p in self.pods if p.state == "ready"]
            views = [EndpointView(len(p.waiting), self._kv_usage(p)) for p in ready]
            if saturation(views) >= USAGE_LIMIT:
                return
            req = self.held.popleft()
            indexes = [p.index for p in ready]
            pod = ready[pick(router, views, indexes, req.chain, req.prompt, self.rng)]
            if req.chain:
                pod.index.record(req.chain)
            req.status = "queued"
            pod.waiting.append(req)
            self._admit(pod)

    def _ttl(self, req_obj: object, _v: int) -> None:
        """The router's defaultRequestTTL: a request still held gets 503."""
        req: _Req = req_obj  # type: ignore[assignment]
        if req.status == "held":
            self.held.remove(req)
            req.status = "timed_out"

    def _route(self) -> _Pod | None:
        """The ready replica the load balancer picks, by the rendered algorithm."""
        ready = [p for p in self.pods if p.state == "ready"]
        if not ready:
            return None
        if self.c.routing == LEAST_OUTSTANDING:
            return min(ready, key=lambda p: len(p.waiting) + len(p.running))
        if self.c.routing == RANDOM:
            return self.rng.choice(ready)
        self.routed += 1
        return ready[self.routed % len(ready)]

    def _advance(self, pod: _Pod) -> None:
        """Count the pod's busy time up to now (a step in flight is busy until it ends)."""
        if pod.active:
            t = min(self.now, pod.step_end)
            if t > pod.last:
                pod.busy += t - pod.last
                pod.last = t
        else:
            pod.last = self.now

    def _admit(self, pod: _Pod) -> None:
        """A request joined ``pod.waiting``: start a step if the engine is idle, else end a run
        of decode steps at the next step boundary so the scheduler sees it."""
        if not pod.active:
            self._schedule_step(pod)
            return
        if pod.step_k > 1:
            done = int((self.now - pod.step_start) / pod.step_dt) + 1
            if done < pod.step_k:
                pod.step_k = done
                pod.step_end = pod.step_start + done * pod.step_dt
                pod.version += 1
                self._at(pod.step_end, _FINISH, pod, pod.version)

    def _kv_blocks(self, tokens: int, seqs: int) -> int:
        return kv_blocks(tokens, seqs)

    def _preempt(self, pod: _Pod) -> None:
        """vLLM ``_preempt_request``: the last running request frees its blocks and goes back to
        the head of the queue, to be recomputed (prompt plus what it generated so far)."""
        req = pod.running.pop()
        self.out.preemptions += 1
        if not req.preempted:
            req.preempted = True
            self.out.preempted_requests += 1
        if req in pod.prefilling:
            pod.prefilling.remove(req)
            pod.pre_cached -= req.pre_done
        else:
            pod.n_dec -= 1
            pod.dec_base -= req.pre_target - req.j
            pod.dec_cached -= req.cached
            if req.chain:
                pod.chain_held -= req.prompt - req.cached
            req.gen0 += 1 + pod.steps - req.j
            req.epoch += 1
        req.pre_target = req.prompt - req.cached + req.gen0
        req.pre_done = 0
        req.status = "queued"
        pod.waiting.appendleft(req)

    def _schedule_step(self, pod: _Pod) -> None:
        """One pass of vLLM's ``Scheduler.schedule`` and the step (or run of steps) it starts."""
        model = self.c.replica
        total_blocks = model.kv_cache_tokens // BLOCK_SIZE
        budget = model.max_num_batched_tokens
        preempted = False
        while pod.running:
            # Running requests first: each decode one token, each prefill its next chunk.
            tokens = pod.dec_base + pod.n_dec * (pod.steps + 1) + pod.pre_cached
            left = budget - pod.n_dec
            for req in pod.prefilling:
                chunk = min(req.pre_target - req.pre_done, max(0, left))
                tokens += chunk
                left -= chunk
            if self._kv_blocks(tokens, len(pod.running)) <= total_blocks or len(pod.running) == 1:
                break
            self._preempt(pod)
            preempted = True
        left = budget - pod.n_dec
        chunks: list[tuple[_Req, int]] = []
        # Each decode attends to its whole sequence, the token it feeds included.
        context = pod.dec_base + pod.n_dec * (pod.steps + 1) + pod.dec_cached
        pairs = float(context)
        for req in pod.prefilling:
            chunk = min(req.pre_target - req.pre_done, left)
            if chunk <= 0:
                break
            chunks.append((req, chunk))
            left -= chunk
            context += req.cached + req.pre_done + chunk
            pairs += chunk * (req.cached + req.pre_done + chunk / 2)
        tokens_after = pod.dec_base + pod.n_dec * (pod.steps + 1) + pod.pre_cached + sum(c for _, c in chunks)
        blocked = False
        if not preempted:
            while pod.waiting and len(pod.running) < model.max_num_seqs and left > 0:
                req = pod.waiting[0]
                if req.admit < 0 and req.chain:
                    # vLLM looks the prompt up in its prefix cache when it first schedules it.
                    req.cached = pod.cache.match(req.chain, req.prompt)
                    req.pre_target = req.prompt - req.cached
                chunk = min(req.pre_target, left)
                if self._kv_blocks(tokens_after + chunk, len(pod.running) + 1) > total_blocks:
                    blocked = True
                    break
                pod.waiting.popleft()
                if req.admit < 0:
                    req.admit = self.now
                    self.out.prompt_tokens += req.prompt
                    self.out.cached_prompt_tokens += req.cached
                req.status = "running"
                pod.running.append(req)
                pod.prefilling.append(req)
                chunks.append((req, chunk))
                left -= chunk
                tokens_after += chunk
                context += req.cached + chunk
                pairs += chunk * (req.cached + chunk / 2)
        if not pod.running:
            pod.active = False
            return
        k = 1
        if not chunks and pod.finishes:
            # Decode only, and nothing can be admitted before a sequence finishes (the queue is
            # empty, at max_num_seqs, or blocked on blocks): repeat until the next finish or until
            # the cache would need a preemption.
            k = max(1, pod.finishes[0][0] - pod.steps)
            if pod.waiting and not blocked and len(pod.running) < model.max_num_seqs:
                k = 1
            room = (total_blocks - len(pod.running) // 2) * BLOCK_SIZE - tokens_after
            k = max(1, min(k, MAX_DECODE_RUN, 1 + room // max(1, pod.n_dec)))
        seqs = len(pod.running)
        tokens = pod.n_dec + sum(c for _, c in chunks)
        mid = (k - 1) / 2 * pod.n_dec
        dt = model.step_seconds(seqs, tokens, context + mid, pairs + mid)
        pod.chunks = chunks
        pod.step_k = k
        pod.step_dt = dt
        pod.step_start = self.now
        pod.step_end = self.now + k * dt
        pod.active = True
        pod.last = self.now
        pod.version += 1
        self._at(pod.step_end, _FINISH, pod, pod.version)

    def _finish(self, pod_obj: object, version: int) -> None:
        """A step (or run of decode steps) ended: tokens are out, prefills advance, finished
        requests leave, and the scheduler runs again."""
        pod: _Pod = pod_obj  # type: ignore[assignment]
        if version != pod.version or pod.state == "gone":
            return
        self._advance(pod)
        pod.active = False
        pod.steps += pod.step_k
        for req, chunk in pod.chunks:
            req.pre_done += chunk
            pod.pre_cached += chunk
            if req.pre_done < req.pre_target:
                continue
            pod.prefilling.remove(req)
            pod.pre_cached -= req.pre_target
            if req.first < 0:
                req.first = self.now
                if req.chain:
                    # The cache's room: the KV cache less the blocks running sequences hold that
                    # are not cached prompt segments (their generated tokens, prefills under way).
                    held = pod.dec_base + pod.n_dec * pod.steps + pod.pre_cached - pod.chain_held
                    pod.cache.insert(req.chain, self.c.replica.kv_cache_tokens - held)
            req.j = pod.steps
            pod.n_dec += 1
            pod.dec_base += req.pre_target - req.j
            pod.dec_cached += req.cached
            if req.chain:
                pod.chain_held += req.prompt - req.cached
            heapq.heappush(pod.finishes, (req.j + req.output - req.gen0 - 1, next(self.seq), req.epoch, req))
        pod.chunks = []
        while pod.finishes and pod.finishes[0][0] <= pod.steps:
            _, _, epoch, req = heapq.heappop(pod.finishes)
            if epoch != req.epoch or req.status != "running":
                continue
            pod.running.remove(req)
            pod.n_dec -= 1
            pod.dec_base -= req.pre_target - req.j
            pod.dec_cached -= req.cached
            if req.chain:
                pod.chain_held -= req.prompt - req.cached
            req.finish = self.now
            req.status = "done"
            self.out.output_tokens += req.output
        if pod.state == "draining" and not pod.running and not pod.waiting:
            self._terminate(pod)
        else:
            self._schedule_step(pod)
        if self.held:
            self._dispatch()

    # ---- pods and nodes -------------------------------------------------------------------

    def _new_pod(self) -> _Pod:
        pod = _Pod(next(self.pod_ids), self.now)
        self.pods.append(pod)
        return pod

    def _create_pod(self) -> None:
        pod = self._new_pod()
        idle = [n for n in self.nodes if n.pod is None and n.released < 0]
        if idle:
            node = max(idle, key=lambda n: (n.ready, n.has_image))
            node.version += 1
            if node.spare:  # the placeholder is preempted and goes pending: a node for it
                node.spare = False
                spare = _Node(self.now, spare=True)
                self.nodes.append(spare)
                self._at(self.now + self.c.startup.node_s, _NODE_READY, spare)
        else:
            node = _Node(self.now)
            self.nodes.append(node)
            self._at(self.now + self.c.startup.node_s, _NODE_READY, node)
        node.pod = pod
        pod.node = node
        if node.ready:
            self._start_on_node(pod)

    def _start_on_node(self, pod: _Pod) -> None:
        assert pod.node is not None
        if pod.node.has_image:
            self._pulled(pod, 0)
        else:
            pod.state = "pulling"
            self._at(self.now + self.c.startup.image_s, _PULLED, pod)

    def _node_ready(self, node_obj: object, _v: int) -> None:
        node: _Node = node_obj  # type: ignore[assignment]
        node.ready = True
        if node.pod is None and node.spare:  # the placeholder's idle vLLM container pulls the image
            self._at(self.now + self.c.startup.image_s, _SPARE_PULLED, node)
        if node.pod is None:
            self._idle(node)
        else:
            self._start_on_node(node.pod)

    def _pulled(self, pod_obj: object, _v: int) -> None:
        pod: _Pod = pod_obj  # type: ignore[assignment]
        if pod.state == "gone":
            return
        assert pod.node is not None
        pod.node.has_image = True
        pod.state = "loading"
        pod.last = self.now
        pod.busy_at_collect = pod.busy
        self._at(self.now + self.c.startup.weights_s, _LOADED, pod)

    def _loaded(self, pod_obj: object, _v: int) -> None:
        pod: _Pod = pod_obj  # type: ignore[assignment]
        if pod.state != "loading":
            return
        pod.state = "ready"
        pod.ready_at = self.now
        pod.last = self.now
        self._fleet_changed()
        if self.held:
            self._dispatch()

    def _spare_pulled(self, node_obj: object, _v: int) -> None:
        node: _Node = node_obj  # type: ignore[assignment]
        node.has_image = True

    def _idle(self, node: _Node) -> None:
        node.pod = None
        node.version += 1
        if node.ready:
            self._at(self.now + self.c.consolidate_after_s, _RELEASE, node, node.version)

    def _release(self, node_obj: object, version: int) -> None:
        node: _Node = node_obj  # type: ignore[assignment]
        if node.version == version and node.pod is None and node.released < 0 and not node.spare:
            node.released = self.now

    def _delete_pod(self, pod: _Pod) -> None:
        if pod.state == "ready":
            pod.state = "draining"
            self._at(self.now + self.c.termination_grace_s, _DRAIN_END, pod)
            if not pod.running and not pod.waiting:
                self._terminate(pod)
            return
        pod.state = "gone"
        self.out.busy_seconds += pod.busy
        if pod.node is not None:
            self._idle(pod.node)

    def _terminate(self, pod: _Pod) -> None:
        self._advance(pod)
        pod.state = "gone"
        pod.version += 1
        self.out.busy_seconds += pod.busy
        if pod.node is not None:
            self._idle(pod.node)

    def _drain_end(self, pod_obj: object, _v: int) -> None:
        pod: _Pod = pod_obj  # type: ignore[assignment]
        if pod.state != "draining":
            return
        for req in pod.running:
            req.status = "cut"
        for req in pod.waiting:
            req.status = "cut"
        pod.running.clear()
        pod.prefilling.clear()
        pod.finishes.clear()
        pod.waiting.clear()
        self._terminate(pod)

    def _deletion_rank(self, pod: _Pod) -> tuple[int, float]:
        order = {"scheduling": 0, "pulling": 1, "loading": 2, "ready": 3}[pod.state]
        if pod.state == "scheduling" and pod.node is not None and pod.node.ready:
            order = 1
        return (order, -(pod.ready_at if pod.state == "ready" else pod.created))

    def _live(self) -> list[_Pod]:
        return [p for p in self.pods if p.state in ("scheduling", "pulling", "loading", "ready")]

    def _scale_to(self, desired: int) -> None:
        live = self._live()
        for _ in range(desired - len(live)):
            self._create_pod()
        if desired < len(live):
            for pod in sorted(live, key=self._deletion_rank)[: len(live) - desired]:
                self._delete_pod(pod)
        self.pods = [p for p in self.pods if p.state != "gone"]
        self._fleet_changed()

    def _fleet_changed(self) -> None:
        """Record the fleet if it changed: the Deployment's replicas and the Ready pods."""
        fleet = (len(self._live()), sum(1 for p in self.pods if p.state == "ready"))
        if not self.out.fleet or self.out.fleet[-1][1:] != fleet:
            self.out.fleet.append((self.now, *fleet))

    # ---- metrics and the autoscaler -------------------------------------------------------

    def _scrape_vllm(self, _o: object, _v: int) -> None:
        for pod in self.pods:
            serving = pod.state in ("ready", "draining")
            pod.waiting_sample = len(pod.waiting) if serving else None
            pod.running_sample = len(pod.running) if serving else None
            pod.kv_sample = self._kv_usage(pod) if serving else None
        self.held_sample = len(self.held)
        self._at(self.now + self.c.vllm_scrape_s, _SCRAPE_V)

    def _kv_usage(self, pod: _Pod) -> float:
        """Share of the KV cache's blocks the running sequences hold now (vLLM reports the block
        pool's used share): prompts and prefill chunks computed so far, plus the tokens each decode
        has generated, counting the steps already done of a run of decode steps in flight."""
        steps = pod.steps
        if pod.active and pod.step_k > 1 and pod.step_dt > 0:
            steps += min(pod.step_k, int((self.now - pod.step_start) / pod.step_dt))
        tokens = pod.dec_base + pod.n_dec * steps + pod.pre_cached
        return kv_cache_usage(tokens, len(pod.running), self.c.replica.kv_cache_tokens)

    def _collect_gpu(self, _o: object, _v: int) -> None:
        # dcgm-exporter samples each GPU every collection interval; a pod whose container started
        # since the last collection has no value yet (the HPA counts it as missing).
        # The value is NVML's point sample: busy at this instant or not.
        for pod in self.pods:
            if pod.state in ("loading", "ready", "draining"):
                pod.util_collected = gpu_utilization_sample(len(pod.running))
            else:
                pod.util_collected = None
        self._at(self.now + self.c.gpu_collect_s, _COLLECT_G)

    def _scrape_gpu(self, _o: object, _v: int) -> None:
        for pod in self.pods:
            running = pod.state in ("loading", "ready", "draining")
            pod.util_sample = pod.util_collected if running else None
        self._at(self.now + self.c.gpu_scrape_s, _SCRAPE_G)

    def _metric_value(self, metric: MetricSpec) -> float:
        """What the trigger's query returns now (KEDA reads it once per poll or HPA sync)."""
        if metric.measures == QUEUE_TOTAL:
            return float(sum(p.waiting_sample or 0 for p in self.pods))
        if metric.measures == KV_TOTAL:
            return sum(p.kv_sample or 0.0 for p in self.pods)
        if metric.measures == ROUTER_DEMAND:
            in_flight = sum((p.running_sample or 0) + (p.waiting_sample or 0) for p in self.pods)
            return float(self.held_sample + in_flight)
        if metric.measures == CONCURRENCY_TOTAL:
            return self._concurrency()
        if metric.measures == SEASONAL:
            assert metric.window is not None
            period, lead = metric.window
            return self.out.demand.peak(self.now - period, self.now - period + lead)
        if metric.measures == CRON:
            assert metric.schedule is not None
            active = metric.schedule.active(self.c.clock_origin_s + self.now)
            return float(metric.schedule.replicas) if active else 0.0
        return sum(p.util_sample or 0.0 for p in self.pods)

    def _concurrency(self) -> float:
        """Requests running or waiting over the pods, as last scraped (promql.concurrency_total)."""
        return float(sum((p.running_sample or 0) + (p.waiting_sample or 0) for p in self.pods))

    def _proposal(self, metric: MetricSpec, current: int) -> int | None:
        behavior = self.c.autoscaler.behavior
        if metric.measures == GPU_PER_POD:
            samples = [
                PodSample(
                    "Pending" if p.state in ("scheduling", "pulling") else "Running",
                    p.state == "draining",
                    p.util_sample,
                )
                for p in self.pods
            ]
            return pods_proposal(current, samples, metric.target, behavior)
        return external_average_value_replicas(current, self._metric_value(metric), metric.target, behavior)

    def _sync(self, _o: object, _v: int) -> None:
        current = len(self._live())
        spec = self.c.autoscaler
        proposals = [self._proposal(m, current) for m in spec.metrics]
        desired = self.hpa.reconcile(self.now, current, proposals)
        if desired != current:
            self._scale_to(desired)
        self._at(self.now + SYNC_PERIOD_S, _SYNC)

    def _poll(self, _o: object, _v: int) -> None:
        assert self.keda is not None
        spec = self.c.autoscaler
        active = any(self._metric_value(m) > m.activation for m in spec.metrics if m.measures != GPU_PER_POD)
        current = len(self._live())
        desired = self.keda.poll(self.now, current, active)
        if desired != current:
            self._scale_to(desired)
        self._at(self.now + spec.polling_interval_s, _POLL)

    def _plan_step(self, _o: object, replicas: int) -> None:
        """The next step of a replica plan (the oracle): scale the Deployment to it."""
        if replicas != len(self._live()):
            self._scale_to(replicas)

    def _tick(self, _o: object, _v: int) -> None:
        ready = sum(1 for p in self.pods if p.state == "ready")
        queue = sum(len(p.waiting) for p in self.pods)
        rps = self.arrivals_this_tick / TIMELINE_STEP_S
        self.arrivals_this_tick = 0
        self.out.timeline.append((self.now, len(self._live()), ready, queue, rps))
        self.out.demand.record(self.now, self._concurrency())
        self._at(self.now + TIMELINE_STEP_S, _TICK)

    # ---- results --------------------------------------------------------------------------

    def _finish_accounting(self) -> Outcome:
        out = self.out
        end = self.duration
        for pod in self.pods:
            if pod.state != "gone":
                self._advance(pod)
                out.busy_seconds += pod.busy
        for node in self.nodes:
            out.node_seconds += (node.released if node.released >= 0 else end) - node.requested
        out.requests = len(self.reqs)
        for req in self.reqs:
            if req.status == "done":
                out.completed += 1
                out.ttft.append(req.first - req.arrival)
                out.served_arrivals.append(req.arrival)
                out.queue_wait.append(req.admit - req.arrival)
                out.e2e.append(req.finish - req.arrival)
            elif req.status == "rejected":
                out.rejected += 1
            elif req.status == "timed_out":
                out.rejected += 1
                out.timed_out += 1
            elif req.status == "cut":
                out.cut += 1
            else:
                out.in_flight += 1
        return out
