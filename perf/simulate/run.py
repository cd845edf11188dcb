"""Simulate a stack: render it offline, read its autoscaler and limits, run a trace through it,
and summarize SLO attainment, GPU-hours and cost; ``compare`` does so for every scaling signal,
both published guides' autoscalers, a fixed-fleet frontier and a clairvoyant oracle on one trace, all
with the same pod start-up times."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deepseek_eks.automation.stackfile import PROJECT_ROOT, read_stack
from deepseek_eks.settings import PROJECT, parse_settings
from deepseek_eks.sizing.capacity import highest_rate, service_model
from deepseek_eks.sizing.startup import IMAGE_PULL_S, NODE_READY_S, STARTUP_MARGIN, stage_mode

from ..stats import percentile
from .engine import Outcome, SimConfig, Simulation, StartupTimes
from .history import DemandHistory
from .replica import ReplicaModel, ThroughputCurve, plan_limits, published_curve
from .router import RouterSpec
from .stack import (
    AutoscalerSpec,
    StackFacts,
    autoscaler_from_objects,
    guides,
    stack_facts,
)
from .traffic import LengthProfile, Request, TraceError, generate, profile_lengths, rate_function, read_csv

SIGNALS = ("gpu-utilization", "queue-depth", "combined", "kv-cache", "concurrency")
# t=0 of every trace: Monday 2026-01-05 00:00 UTC (cron schedules are read against this clock).
CLOCK_ORIGIN_S = 1767571200.0
ORACLE = "oracle"
# The oracle held to the stack's autoscaling.minReplicas (compare adds it where that is above 1):
# the plain oracle may drop to one replica, so against it a stack's availability floor counts as
# the autoscaler's cost (prod's floor of 2 alone is about 1.28x the oracle on its bursty trace).
ORACLE_AT_MIN_REPLICAS = "oracle at minReplicas"
FIXED = "fixed:"
# The goal a run is judged by: the TTFT SLO met for at least 99 % of requests.
ATTAINMENT_GOAL = 0.99

# A plan without ``startup_breakdown`` (an older plan.json): the planner's own node and image
# figures (sizing/startup.py NODE_READY_S, IMAGE_PULL_S: one source, each cited there).


@dataclass(frozen=True)
class StackInputs:
    """One rendered stack, as the simulator reads it."""

    stack: str
    label: str
    plan: Mapping[str, Any]
    autoscaler: AutoscalerSpec
    facts: StackFacts
    compute_mode: str
    min_replicas: int
    max_replicas: int
    ttft_slo_s: float
    queue_slo_s: float


def load_stack(
    stack: str,
    overrides: Mapping[str, str] | None = None,
    project_dir: Path = PROJECT_ROOT,
    label: str | None = None,
) -> StackInputs:
    """Render ``stack`` (with ``--set`` overrides) offline and read what the simulator needs."""
    from deepseek_eks.automation.render import render

    config = read_stack(stack, project_dir).with_overrides(dict(overrides or {}), PROJECT)
    settings = parse_settings(config.values, config.secret_keys, stack)
    rendered = render(config)
    objects = rendered.objects()
    label = label or settings.autoscaling.signal.value
    return StackInputs(
        stack=stack,
        label=label,
        plan=rendered.plan,
        autoscaler=autoscaler_from_objects(objects, label),
        facts=stack_facts(objects, rendered.helm),
        compute_mode=settings.compute_mode.value,
        min_replicas=settings.autoscaling.min_replicas,
        max_replicas=settings.autoscaling.max_replicas,
        ttft_slo_s=settings.observability.ttft_slo_seconds,
        queue_slo_s=settings.observability.queue_time_slo_seconds,
    )


def startup_times(plan: Mapping[str, Any], compute_mode: str) -> StartupTimes:
    """Pod start stages from the plan's ``startup_breakdown`` (node, image, weights, engine) when
    the plan carries one, else from the figures above and the plan's startup budget."""
    stages = plan.get("startup_breakdown")
    if stages:
        return StartupTimes(
            node_s=float(stages["node"]),
            image_s=float(stages["image"]),
            weights_s=float(stages["weights"]) + float(stages["engine"]),
        )
    mode = stage_mode(compute_mode)
    return StartupTimes(
        node_s=float(NODE_READY_S[mode]),
        image_s=float(IMAGE_PULL_S[mode]),
        # The plan's startup budget is the expected load time times the probe's safety margin.
        weights_s=float(plan.get("startup_probe_seconds", plan["startup_seconds"])) / STARTUP_MARGIN,
    )


def sim_config(
    inputs: StackInputs,
    curve: ThroughputCurve,
    autoscaler: AutoscalerSpec | None = None,
    fixed_replicas: int | None = None,
    replica_plan: tuple[tuple[float, int], ...] | None = None,
    router: RouterSpec | None = None,
    history: DemandHistory | None = None,
) -> SimConfig:
    plan = inputs.plan
    startup = startup_times(plan, inputs.compute_mode)
    return SimConfig(
        fixed_replicas=fixed_replicas,
        replica_plan=replica_plan,
        routing=inputs.facts.routing,
        router=router,
        clock_origin_s=CLOCK_ORIGIN_S,
        autoscaler=autoscaler or inputs.autoscaler,
        replica=ReplicaModel.from_plan(plan, curve),
        startup=startup,
        vllm_scrape_s=inputs.facts.vllm_scrape_s,
        gpu_scrape_s=inputs.facts.gpu_scrape_s,
        gpu_collect_s=inputs.facts.gpu_collect_s,
        termination_grace_s=inputs.facts.termination_grace_s,
        consolidate_after_s=inputs.facts.consolidate_after_s,
        replica_hourly_usd=float(plan["replica_hourly_usd"]),
        gpus_per_replica=int(plan["gpus_per_replica"]),
        warm_spare_nodes=int(plan.get("warm_spare_nodes", 0)),
        demand_history=history,
    )


@dataclass(frozen=True)
class Summary:
    """The figures one run is judged by."""

    label: str
    autoscaler: str
    requests: int
    completed: int
    rejected: int
    cut: int
    in_flight: int
    p50_ttft_s: float
    p95_ttft_s: float
    p95_queue_wait_s: float
    ttft_slo_attainment: float  # share of finished or refused requests whose TTFT met the SLO
    queue_slo_attainment: float
    mean_replicas: float
    peak_replicas: int
    gpu_hours: float
    gpu_utilization: float  # busy share of provisioned GPU time
    cost_usd: float
    usd_per_million_output_tokens: float
    output_tokens: int
    # Requests vLLM preempted at least once (the running batch outgrew the KV cache), and the
    # preemptions in all: a max_num_seqs too large for the cache shows here.
    preempted_requests: int = 0
    preemptions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def _controller(label: str, config: SimConfig) -> str:
    """What sets the replica count of a run: a fixed fleet or a replica plan (the oracle's, the
    reactive baseline's) run no autoscaler, whatever the stack renders."""
    if config.fixed_replicas is not None:
        n = config.fixed_replicas
        return f"{label}: a fixed fleet of {n} replica{'' if n == 1 else 's'}, no autoscaler"
    if config.replica_plan:
        counts = [n for _, n in config.replica_plan]
        span = f"{min(counts)}-{max(counts)} replicas"
        return f"{label}: a replica plan of {len(counts)} changes, {span}, no autoscaler"
    return config.autoscaler.describe()


def summarize(out: Outcome, config: SimConfig, ttft_slo_s: float, queue_slo_s: float) -> Summary:
    judged = out.completed + out.rejected + out.cut
    ttft_ok = sum(1 for x in out.ttft if x <= ttft_slo_s)
    queue_ok = sum(1 for x in out.queue_wait if x <= queue_slo_s)
    replica_hours = out.node_seconds / 3600
    cost = replica_hours * config.replica_hourly_usd
    return Summary(
        label=out.label,
        autoscaler=_controller(out.label, config),
        requests=out.requests,
        completed=out.completed,
        rejected=out.rejected,
        cut=out.cut,
        in_flight=out.in_flight,
        p50_ttft_s=percentile(out.ttft, 50),
        p95_ttft_s=percentile(out.ttft, 95),
        p95_queue_wait_s=percentile(out.queue_wait, 95),
        ttft_slo_attainment=ttft_ok / judged if judged else math.nan,
        queue_slo_attainment=queue_ok / judged if judged else math.nan,
        mean_replicas=out.node_seconds / out.duration_s,
        peak_replicas=max((row[1] for row in out.timeline), default=0),
        gpu_hours=replica_hours * config.gpus_per_replica,
        gpu_utilization=out.busy_seconds / out.node_seconds if out.node_seconds else 0.0,
        cost_usd=cost,
        usd_per_million_output_tokens=cost / out.output_tokens * 1e6 if out.output_tokens else math.inf,
        output_tokens=out.output_tokens,
        preempted_requests=out.preempted_requests,
        preemptions=out.preemptions,
    )


@dataclass(frozen=True)
class TraceSpec:
    """Where the requests come from."""

    profile: str = "bursty"
    hours: float = 24.0
    rate_rps: float | None = None  # default: the rate whose peak fits maxReplicas (default_rate)
    csv: Path | None = None
    seed: int = 1
    lengths: LengthProfile = field(default_factory=LengthProfile)
    # The mean rate of the earlier days the seasonal triggers read (demand_history); default: the
    # run's own, a day like yesterday. Lower than yesterday's: a quiet day (a holiday), where the
    # seasonal floor holds what yesterday needed.
    history_rate_rps: float | None = None


def default_rate(
    inputs: StackInputs,
    curve: ThroughputCurve,
    profile: str,
    lengths: LengthProfile,
    seed: int,
    duration_s: float,
) -> float:
    """The mean rate whose busiest moment the stack's ``maxReplicas`` serve within its TTFT SLO
    for 99 % of requests (capacity planning's M/M/c model, ``deepseek_eks.sizing.capacity``): the
    load the stack's own ceiling was set for, so the simulation judges the signal, not the
    bounds."""
    replica = ReplicaModel.from_plan(inputs.plan, curve)
    assert replica.hardware is not None  # from_plan always carries hardware (fitted or calibrated)
    prefill, service, slots = service_model(
        replica.hardware, plan_limits(inputs.plan), lengths.prompt_tokens, lengths.output_tokens
    )
    # Sized at the goal's quantile: a ceiling that serves its peak only at p95 cannot meet the SLO
    # for 99 % of the day's requests when the peak holds most of them (the step trace). Each
    # replica is its own queue: the load balancer routes round robin (stack_facts' routing), so
    # a replica's slots are never shared with another's waiting requests.
    one = highest_rate(1, inputs.ttft_slo_s, prefill, service, slots, ATTAINMENT_GOAL)
    peak = inputs.max_replicas * one
    if peak <= 0:
        raise TraceError(
            f"stack {inputs.stack}: one idle replica already misses observability.ttftSloSeconds "
            f"{inputs.ttft_slo_s:g} s at these lengths; pass --rate or raise the SLO"
        )
    shape = rate_function(profile, 1.0, seed, duration_s)
    # The same 30 s grid generate() thins against, so "the peak" is the one the trace draws from.
    peak_ratio = max(shape(i * 30.0) for i in range(int(duration_s / 30) + 1))
    return peak / peak_ratio


# servable_rate's search: the share of the default rate it tries down to, and how many halvings.
SERVABLE_FLOOR = 0.5
SERVABLE_STEPS = 6


def servable_rate(inputs: StackInputs, curve: ThroughputCurve, spec: TraceSpec) -> tuple[float, float]:
    """The mean rate to judge signals at on ``spec``'s trace, and its share of ``default_rate``:
    the default when a fixed fleet of ``maxReplicas`` meets the attainment goal there; otherwise
    the highest rate it meets the goal at, by bisection between SERVABLE_FLOOR and 1 of the
    default. The M/M/c model behind ``default_rate`` is a planning model: where the replica
    model's batches serve the peak a little slower than it assumes (a peak that lasts for hours,
    the step trace's), no autoscaler bounded by ``maxReplicas`` could meet the goal, and the
    benchmark would judge the bound instead of the signal."""
    if spec.csv is not None or spec.rate_rps is not None:
        raise ValueError(
            "servable_rate searches a built-in profile's default rate: give no --rate or --trace"
        )
    lengths = profile_lengths(spec.profile, spec.lengths)
    duration = spec.hours * 3600
    default = default_rate(inputs, curve, spec.profile, lengths, spec.seed, duration)

    def met(share: float) -> bool:
        requests, length, _ = build_trace(replace(spec, rate_rps=default * share), inputs, curve)
        run = simulate(inputs, requests, length, curve, fixed_replicas=inputs.max_replicas)
        return run.summary.ttft_slo_attainment >= ATTAINMENT_GOAL

    if met(1.0):
        return default, 1.0
    low, high = SERVABLE_FLOOR, 1.0
    for _ in range(SERVABLE_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if met(middle) else (low, middle)
    return default * low, low


def build_trace(
    spec: TraceSpec, inputs: StackInputs, curve: ThroughputCurve
) -> tuple[list[Request], float, float]:
    """Requests, duration and mean rate for ``spec``."""
    max_len = int(inputs.plan["max_model_len"])
    if spec.csv is not None:
        requests, duration = read_csv(spec.csv, spec.seed, spec.lengths, max_len)
        return requests, duration, len(requests) / duration
    lengths = profile_lengths(spec.profile, spec.lengths)
    duration = spec.hours * 3600
    rate = (
        spec.rate_rps
        if spec.rate_rps is not None
        else default_rate(inputs, curve, spec.profile, lengths, spec.seed, duration)
    )
    return generate(spec.profile, rate, duration, spec.seed, lengths, max_len), duration, rate


@dataclass(frozen=True)
class Run:
    summary: Summary
    outcome: Outcome


def simulate(
    inputs: StackInputs,
    trace: list[Request],
    duration_s: float,
    curve: ThroughputCurve | None = None,
    autoscaler: AutoscalerSpec | None = None,
    *,
    fixed_replicas: int | None = None,
    replica_plan: tuple[tuple[float, int], ...] | None = None,
    label: str | None = None,
    router: RouterSpec | None = None,
    history: DemandHistory | None = None,
) -> Run:
    """One stack (or an alternative autoscaler, a fixed fleet or a replica plan for it) over one
    trace; behind llm-d's ``router`` instead of the rendered load balancer when one is given; with
    the earlier days' demand its seasonal triggers read (``demand_history``) when given."""
    curve = curve or published_curve(inputs.plan)
    config = sim_config(inputs, curve, autoscaler, fixed_replicas, replica_plan, router, history)
    label = label or (autoscaler.label if autoscaler else inputs.label)
    outcome = Simulation(config, trace, duration_s, label).run()
    return Run(summarize(outcome, config, inputs.ttft_slo_s, inputs.queue_slo_s), outcome)


# Each earlier day is drawn with its own seed (this stride times the days back), so yesterday's
# bursts and arrivals are not today's: a seasonal floor is judged on what recurs, the day's shape.
HISTORY_SEED_STRIDE = 1000


def demand_history(
    inputs: StackInputs,
    spec: TraceSpec,
    rate_rps: float,
    curve: ThroughputCurve,
    autoscaler: AutoscalerSpec | None = None,
) -> DemandHistory | None:
    """What Prometheus would hold from the days the seasonal triggers of ``autoscaler`` (default:
    the stack's) read back to, or None when it has none: for each period, a day of the same
    profile and mean rate (``spec.history_rate_rps`` where given, else ``rate_rps``, the run's),
    drawn with another seed, served by the same autoscaler without its seasonal triggers, its
    demand moved that period into the past. A trace file has no earlier days (None: the triggers
    read 0, as for a new service)."""
    autoscaler = autoscaler or inputs.autoscaler
    periods = sorted({m.window[0] for m in autoscaler.metrics if m.window}, reverse=True)
    if not periods or spec.csv is not None:
        return None
    base = replace(autoscaler, metrics=tuple(m for m in autoscaler.metrics if not m.window))
    lead_s = max(m.window[1] for m in autoscaler.metrics if m.window)
    samples: list[tuple[float, float]] = []
    for period in periods:
        # The day back, and the start-up past its end that today's last minutes look ahead to.
        earlier = replace(
            spec,
            seed=spec.seed + HISTORY_SEED_STRIDE * max(1, period // 86_400),
            rate_rps=spec.history_rate_rps if spec.history_rate_rps is not None else rate_rps,
            hours=spec.hours + lead_s / 3600,
        )
        requests, duration, _ = build_trace(earlier, inputs, curve)
        run = simulate(inputs, requests, duration, curve, base, label=f"{inputs.label}, {period} s back")
        samples += [(t, v) for t, v in run.outcome.demand.shifted(-period) if t < 0]
    return DemandHistory(samples)


def cold_start_s(inputs: StackInputs) -> float:
    """A replica's start on a new node: node, image pull, weights and engine."""
    t = startup_times(inputs.plan, inputs.compute_mode)
    return t.node_s + t.image_s + t.weights_s


ORACLE_WINDOW_S = 300.0  # work is planned over 5-minute windows
ORACLE_STEP_S = 60.0
ORACLE_LOADS = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)
# Releasing a replica the minute it is not needed drains long requests and asks for it again
# soon after; on long outputs (prod's reasoning trace, seed 1) holding it for an hour met the
# goal for two thirds of the GPU-hours, so the oracle tries both.
ORACLE_HOLDS_S = (0.0, 3600.0)


def output_tokens_per_step(
    trace: list[Request], duration_s: float, sequence_tokens_per_s: float | None = None
) -> list[float]:
    """Output tokens to decode in each ORACLE_STEP_S step: a request's tokens spread over its
    decode time at ``sequence_tokens_per_s`` (one sequence's share of a saturated replica), or
    counted at arrival when that is None."""
    steps = max(1, math.ceil(duration_s / ORACLE_STEP_S))
    tokens = [0.0] * steps
    for r in trace:
        start = r.arrival_s
        end = start + (r.output_tokens / sequence_tokens_per_s if sequence_tokens_per_s else 0.0)
        first, last = int(start // ORACLE_STEP_S), int(end // ORACLE_STEP_S)
        if last >= steps:
            last = steps - 1
        share = r.output_tokens / (last - first + 1) if last >= first else r.output_tokens
        for i in range(min(first, steps - 1), last + 1):
            tokens[i] += share
    return tokens


def _needs(tokens: list[float], tokens_per_s: float, load: float, floor: int, *, ahead: bool) -> list[int]:
    """Per step, the replicas that decode the output tokens of the ORACLE_WINDOW_S window
    starting there (``ahead``) or ending there, each at ``load`` of its saturated rate
    (``tokens_per_s``); never below ``floor``."""
    span = max(1, round(ORACLE_WINDOW_S / ORACLE_STEP_S))
    needs = []
    for i in range(len(tokens)):
        window = tokens[i : i + span] if ahead else tokens[max(0, i - span + 1) : i + 1]
        rate = sum(window) / (len(window) * ORACLE_STEP_S)
        needs.append(max(floor, math.ceil(rate / (tokens_per_s * load))))
    return needs


def _as_plan(needs: list[int], lead_s: float, hold_s: float) -> tuple[tuple[float, int], ...]:
    """(time, replicas) changes: each step's need asked for ``lead_s`` before it and kept for
    ``hold_s`` after it."""
    ahead, behind = (max(0, math.ceil(s / ORACLE_STEP_S)) for s in (lead_s, hold_s))
    plan: list[tuple[float, int]] = []
    for i in range(len(needs)):
        n = max(needs[max(0, i - behind) : i + ahead + 1])
        if not plan or plan[-1][1] != n:
            plan.append((i * ORACLE_STEP_S, n))
    return tuple(plan)


def oracle_plan(
    tokens: list[float], tokens_per_s: float, lead_s: float, load: float, floor: int = 1, hold_s: float = 0.0
) -> tuple[tuple[float, int], ...]:
    """Replicas over time for a clairvoyant controller: for each minute, enough replicas that the
    output tokens to decode in the coming window (``tokens``, per step, as
    ``output_tokens_per_step`` counts them) keep each at ``load`` of its saturated rate
    (``tokens_per_s``), requested ``lead_s`` (a full cold start) before they are needed and
    released ``hold_s`` after they are not; never below ``floor``."""
    return _as_plan(_needs(tokens, tokens_per_s, load, floor, ahead=True), lead_s, hold_s)


def reactive_plan(
    tokens: list[float], tokens_per_s: float, load: float, hold_s: float, floor: int = 1
) -> tuple[tuple[float, int], ...]:
    """Replicas over time for a controller that measures the load perfectly but cannot see ahead:
    for each minute, enough replicas that the output tokens decoded over the past window (that
    minute included) keep each at ``load`` of its saturated rate, asked for at that minute (so
    ready a cold start later), kept for ``hold_s`` after the need falls (a scale-down
    stabilization window), never below ``floor``. It knows nothing later than the current minute:
    no metric scrape, sampling or polling delay, none of a real signal's noise."""
    return _as_plan(_needs(tokens, tokens_per_s, load, floor, ahead=False), 0.0, hold_s)


def planning_rates(
    inputs: StackInputs, trace: list[Request], duration_s: float, curve: ThroughputCurve
) -> tuple[float, list[float]]:
    """A replica's saturated output tokens/s, and the trace's output tokens per step, each
    request's spread over its decode at one sequence's share of that rate."""
    replica = ReplicaModel.from_plan(inputs.plan, curve)
    saturated = replica.saturated_tokens_per_s()
    return saturated, output_tokens_per_step(trace, duration_s, saturated / replica.max_num_seqs)


def oracle(
    inputs: StackInputs,
    trace: list[Request],
    duration_s: float,
    curve: ThroughputCurve,
    fleets: Sequence[Run] = (),
    floor: int = 1,
    label: str = ORACLE,
) -> Run:
    """The clairvoyant oracle: of the plans for each planning load and hold, and of the fixed
    ``fleets`` (knowing the trace it could pick one), the fewest GPU-hours that meets the
    attainment goal, else the best attainment. It knows the trace, not how requests will fall on
    replicas, and has the same cold start and routing as every other run. Its plans never go
    below ``floor`` replicas (1 for the plain oracle; ``ORACLE_AT_MIN_REPLICAS`` passes the
    stack's minReplicas, and only fleets that large)."""
    saturated, tokens = planning_rates(inputs, trace, duration_s, curve)
    lead = cold_start_s(inputs)
    best: Run | None = None
    for hold in ORACLE_HOLDS_S:
        for load in ORACLE_LOADS:
            plan = oracle_plan(tokens, saturated, lead, load, floor=floor, hold_s=hold)
            run = simulate(inputs, trace, duration_s, curve, replica_plan=plan, label=label)
            if best is None or _better_for_oracle(run.summary, best.summary):
                best = run
    assert best is not None
    for fleet in fleets:
        if _better_for_oracle(fleet.summary, best.summary):
            chosen = replace(fleet.summary, label=label, autoscaler=f"{label}: {fleet.summary.autoscaler}")
            best = Run(chosen, fleet.outcome)
    return best


def _better_for_oracle(a: Summary, b: Summary) -> bool:
    a_ok, b_ok = a.ttft_slo_attainment >= ATTAINMENT_GOAL, b.ttft_slo_attainment >= ATTAINMENT_GOAL
    if a_ok != b_ok:
        return a_ok
    if a_ok:
        return a.gpu_hours < b.gpu_hours
    return a.ttft_slo_attainment > b.ttft_slo_attainment


def beats(a: Summary, b: Summary) -> bool:
    """The first ranking: ``a`` beats ``b`` when it meets the SLO for more requests at no more GPU-hours,
    or for as many at fewer (same trace, so attainment ranks requests)."""
    more = a.ttft_slo_attainment > b.ttft_slo_attainment and a.gpu_hours <= b.gpu_hours
    cheaper = a.ttft_slo_attainment >= b.ttft_slo_attainment and a.gpu_hours < b.gpu_hours
    return more or cheaper


def beats_goal_first(a: Summary, b: Summary, attainment: float = ATTAINMENT_GOAL) -> bool:
    """``beats`` as the oracle ranks runs (goal first, the project's ranking since 2026-12-04): a
    run at the ``attainment`` goal beats one short of it, and of two at the goal the one with
    fewer GPU-hours wins (``beats`` makes a guide at exactly 100 % unbeatable by anything below
    it, however cheap); short of the goal, as ``beats``."""
    if a.ttft_slo_attainment >= attainment:
        return b.ttft_slo_attainment < attainment or a.gpu_hours < b.gpu_hours
    return beats(a, b)


ORACLE_GPU_HOURS_BUDGET = 1.3  # the goal: at most 1.3 x the oracle's GPU-hours


@dataclass(frozen=True)
class Goal:
    """What a default autoscaler must reach on a trace: the TTFT SLO for at least ``attainment``
    of requests at no more than ``budget`` times the oracle's GPU-hours, and beat both guides."""

    attainment: float = ATTAINMENT_GOAL
    budget: float = ORACLE_GPU_HOURS_BUDGET


# The goal: 99 % at 1.3x on every trace but the synthetic 4x bursts, where no reaction can see a
# burst coming: 97 % at 1.5x there.
GOALS_BY_TRACE = {"bursty": Goal(0.97, 1.5)}


def goal_for(trace: str) -> Goal:
    """The goal on a built-in trace (GOALS_BY_TRACE, else the default)."""
    return GOALS_BY_TRACE.get(trace, Goal())


def goal_misses(
    run: Summary,
    oracle_run: Summary,
    guide_runs: Sequence[Summary],
    beating: Callable[[Summary, Summary], bool] = beats,
    goal: Goal = Goal(),
) -> list[str]:
    """Why ``run`` misses ``goal`` on this trace (empty when it meets it): the TTFT SLO for at
    least its attainment, at most its budget over the oracle's GPU-hours, and beating every guide
    (by ``beats`` unless ``beating`` says otherwise)."""
    misses = []
    if run.ttft_slo_attainment < goal.attainment:
        misses.append(f"SLO met for {run.ttft_slo_attainment:.1%} < {goal.attainment:.0%}")
    ratio = run.gpu_hours / oracle_run.gpu_hours if oracle_run.gpu_hours else math.inf
    if ratio > goal.budget:
        misses.append(f"{ratio:.2f}x the oracle's GPU-hours > {goal.budget}x")
    misses += [f"does not beat {g.label}" for g in guide_runs if not beating(run, g)]
    return misses


FRONTIER_MAX = 16


def frontier(
    inputs: StackInputs, trace: list[Request], duration_s: float, curve: ThroughputCurve
) -> list[Run]:
    """Fixed fleets of 1, 2, ... replicas (no autoscaler) up to the first that meets the
    attainment goal (at most FRONTIER_MAX): what each fleet size buys."""
    runs = []
    for n in range(1, FRONTIER_MAX + 1):
        run = simulate(inputs, trace, duration_s, curve, fixed_replicas=n, label=f"{FIXED}{n}")
        runs.append(run)
        if run.summary.ttft_slo_attainment >= ATTAINMENT_GOAL:
            break
    return runs


REACTIVE_BASELINE = "reactive baseline"
# The scale-down holds and planning loads the reactive baseline tries: a 10-minute hold is about a
# real signal's stabilization plus cooldown, an hour rides out the gaps between bursts.
REACTIVE_HOLDS_S = (600.0, 3600.0)
REACTIVE_LOADS = (0.9, 0.7, 0.5)


@dataclass(frozen=True)
class ReactiveBaseline:
    """The cheapest run of ``reactive_plan`` at the attainment goal, and the setting that ran it."""

    run: Run
    load: float
    hold_s: float
    floor: int

    @property
    def setting(self) -> str:
        return f"load {self.load:g}, hold {self.hold_s / 60:g} min, floor {self.floor}"


def reactive_baseline(
    inputs: StackInputs, trace: list[Request], duration_s: float, curve: ThroughputCurve
) -> ReactiveBaseline:
    """A baseline of plans that react to the load: of ``reactive_plan``'s runs over
    REACTIVE_LOADS, REACTIVE_HOLDS_S and floors from the stack's ``minReplicas`` up, the fewest
    GPU-hours that meets the attainment goal (a high enough floor is a fixed fleet, so one does,
    up to FRONTIER_MAX replicas). It is the cheapest of this small family, not a bound on what
    reacting can do: a real signal may beat it (one that follows concurrency sees load before the
    plans' 5-minute token window does), so the benchmark reports it beside the signals and never
    as a limit. It has the same cold start and routing as every other run, and is labelled
    REACTIVE_BASELINE."""
    saturated, tokens = planning_rates(inputs, trace, duration_s, curve)
    best: ReactiveBaseline | None = None
    for hold in REACTIVE_HOLDS_S:
        for load in REACTIVE_LOADS:
            for floor in range(max(1, inputs.min_replicas), FRONTIER_MAX + 1):
                plan = reactive_plan(tokens, saturated, load, hold, floor)
                run = simulate(inputs, trace, duration_s, curve, replica_plan=plan, label=REACTIVE_BASELINE)
                if best is None or _better_for_oracle(run.summary, best.run.summary):
                    best = ReactiveBaseline(run, load, hold, floor)
                if run.summary.ttft_slo_attainment >= ATTAINMENT_GOAL:
                    break  # a higher floor only costs more
    assert best is not None
    return best


def compare(
    stack: str,
    trace_spec: TraceSpec,
    overrides: Mapping[str, str] | None = None,
    project_dir: Path = PROJECT_ROOT,
    curve: ThroughputCurve | None = None,
    own: StackInputs | None = None,
) -> tuple[list[Run], float, ThroughputCurve]:
    """The stack's own autoscaler, then every other scaling signal of the project (rendered with
    ``--set autoscaling.signal``), both published guides, the fixed-fleet frontier and the oracle
    (then, where the stack's minReplicas is above 1, the oracle held to it), on one trace, in the
    order of the JSON's ``runs[]``. ``own`` is the stack as loaded with these overrides, where the
    caller has it already. Returns the runs, the trace's mean request rate and the throughput curve
    used."""
    overrides = dict(overrides or {})
    own = own or load_stack(stack, overrides, project_dir)
    others = [
        load_stack(stack, {**overrides, "autoscaling.signal": s}, project_dir, s)
        for s in SIGNALS
        if s != own.label
    ]
    own = replace(own, label=f"{stack}: {own.label}")
    curve = curve or published_curve(own.plan)
    trace, duration, rate = build_trace(trace_spec, own, curve)
    runs = [
        simulate(r, trace, duration, curve, history=demand_history(r, trace_spec, rate, curve))
        for r in [own, *others]
    ]
    runs += [simulate(own, trace, duration, curve, g) for g in guides()]
    fleets = frontier(own, trace, duration, curve)
    runs += fleets
    runs.append(oracle(own, trace, duration, curve, fleets))
    floor = int(own.plan["min_replicas"])
    if floor > 1:
        # After the oracle, which keeps its place in runs[]; the fleets come 1, 2, ... replicas.
        runs.append(oracle(own, trace, duration, curve, fleets[floor - 1 :], floor, ORACLE_AT_MIN_REPLICAS))
    return runs, rate, curve


COLUMNS = (
    ("autoscaler", "label", "{}"),
    ("p95 TTFT s", "p95_ttft_s", "{:.1f}"),
    ("p95 wait s", "p95_queue_wait_s", "{:.1f}"),
    ("TTFT SLO", "ttft_slo_attainment", "{:.1%}"),
    ("rejected", "rejected", "{}"),
    ("cut", "cut", "{}"),
    ("mean rep", "mean_replicas", "{:.2f}"),
    ("peak", "peak_replicas", "{}"),
    ("GPU util", "gpu_utilization", "{:.0%}"),
    ("GPU-h", "gpu_hours", "{:.0f}"),
    ("cost $", "cost_usd", "{:,.0f}"),
    ("$/M out tok", "usd_per_million_output_tokens", "{:.2f}"),
)


def preemption_lines(summaries: list[Summary]) -> list[str]:
    """A line for each run whose replicas preempted requests (vLLM recomputes them: each costs a
    re-prefill and stalls that stream), none where nothing was preempted."""
    return [
        f"preempted: {s.label}: {s.preempted_requests} of {s.requests} requests "
        f"({s.preempted_requests / s.requests:.2%}), {s.preemptions} "
        f"preemption{'' if s.preemptions == 1 else 's'} in all"
        for s in summaries
        if s.preempted_requests and s.requests
    ]


def table(summaries: list[Summary]) -> str:
    """One aligned text table, a row per run."""
    rows = [[h for h, _, _ in COLUMNS]]
    for s in summaries:
        rows.append([fmt.format(getattr(s, key)) for _, key, fmt in COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


LATENCY_WINDOW_S = 600.0


def p95_ttft_over_time(outcome: Outcome, window_s: float = LATENCY_WINDOW_S) -> list[tuple[float, float]]:
    """(window start, p95 TTFT of the completed requests that arrived in it), windows in order."""
    buckets: dict[int, list[float]] = {}
    for arrival, ttft in zip(outcome.served_arrivals, outcome.ttft, strict=True):
        buckets.setdefault(int(arrival // window_s), []).append(ttft)
    return [(k * window_s, percentile(v, 95)) for k, v in sorted(buckets.items())]


def plot(runs: list[Run], path: Path) -> bool:
    """Arrivals, ready replicas, waiting requests and p95 TTFT over time per run; False when
    matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax_rate, ax_rep, ax_queue, ax_ttft) = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
    first = runs[0].outcome.timeline
    ax_rate.plot([t / 3600 for t, *_ in first], [row[4] for row in first], color="grey")
    ax_rate.set_ylabel("arrivals req/s")
    for run in runs:
        hours = [t / 3600 for t, *_ in run.outcome.timeline]
        ax_rep.step(hours, [row[2] for row in run.outcome.timeline], where="post", label=run.summary.label)
        ax_queue.plot(hours, [row[3] for row in run.outcome.timeline], label=run.summary.label)
        latency = p95_ttft_over_time(run.outcome)
        ax_ttft.step([t / 3600 for t, _ in latency], [v for _, v in latency], where="post")
    ax_rep.set_ylabel("ready replicas")
    ax_queue.set_ylabel("waiting requests")
    ax_ttft.set_ylabel(f"p95 TTFT s ({LATENCY_WINDOW_S / 60:.0f} min)")
    ax_ttft.set_yscale("log")
    ax_ttft.set_xlabel("hours")
    ax_rep.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
