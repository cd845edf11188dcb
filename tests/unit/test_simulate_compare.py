"""The fair-comparison parts of the simulator (issue 22, "Fair comparisons"): the seed guides at
their published settings, routing and DCGM sampling as upstream behaves, the clairvoyant oracle
and the fixed-fleet frontier, and scheduled floors evaluated the way KEDA's cron scaler does.
Expected values come from reference/upstream snapshots or are worked out by hand."""

from __future__ import annotations

import datetime as dt
import functools
import json
import zoneinfo
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.perf.simulate.engine import SimConfig, Simulation
from deepseek_eks.perf.simulate.hpa import Behavior
from deepseek_eks.perf.simulate.run import (
    ATTAINMENT_GOAL,
    ORACLE,
    ORACLE_AT_MIN_REPLICAS,
    REACTIVE_BASELINE,
    TraceSpec,
    build_trace,
    frontier,
    load_stack,
    oracle,
    oracle_plan,
    output_tokens_per_step,
    planning_rates,
    reactive_baseline,
    reactive_plan,
    simulate,
)
from deepseek_eks.perf.simulate.stack import (
    GPU_PER_POD,
    LEAST_OUTSTANDING,
    RANDOM,
    ROUND_ROBIN,
    AutoscalerSpec,
    MetricSpec,
    guides,
    routing,
)
from deepseek_eks.perf.simulate.traffic import LengthProfile, Request
from deepseek_eks.settings.schedule import Cron, CronError, ScheduledFloor
from tests.unit.test_simulate_engine import fixed_config

ROOT = Path(__file__).parents[2]
# The prod-step runs the module shares take two to three minutes each beside another test process.
pytestmark = pytest.mark.timeout(600)

GUIDES = json.loads((ROOT / "reference/upstream/seed-guides/guides.json").read_text())
UPSTREAM = json.loads((ROOT / "reference/upstream/hpa-keda-controllers.json").read_text())


# ---- the seed guides ---------------------------------------------------------------------------


def test_guides_run_at_their_published_settings() -> None:
    keda, hpa = guides()
    published = GUIDES["guide:keda-queue"]
    assert keda.label == "guide:keda-queue" and keda.is_keda
    assert (keda.keda_min_replicas, keda.max_replicas) == (
        published["minReplicaCount"],
        published["maxReplicaCount"],
    )
    assert keda.cooldown_s == published["cooldownPeriod"]
    assert [(m.target) for m in keda.metrics] == [published["trigger"]["threshold"]]
    assert keda.behavior.legacy  # no behavior given: KEDA's HPA has none (hpa.go)
    published = GUIDES["guide:hpa-gpu"]
    assert hpa.label == "guide:hpa-gpu" and not hpa.is_keda
    assert (hpa.min_replicas, hpa.max_replicas) == (published["minReplicas"], published["maxReplicas"])
    assert [(m.measures, m.target) for m in hpa.metrics] == [
        (GPU_PER_POD, published["metric"]["averageValue_percent"])
    ]
    assert hpa.behavior == Behavior.from_spec(published["behavior"])


# ---- routing -----------------------------------------------------------------------------------


def _ingress(attributes: str) -> dict:
    annotations = {"alb.ingress.kubernetes.io/target-group-attributes": attributes}
    return {"kind": "Ingress", "metadata": {"annotations": annotations}}


def test_routing_is_read_from_the_rendered_target_group() -> None:
    alb = UPSTREAM["alb"]
    assert alb["default"] == "round_robin"
    assert routing([_ingress("deregistration_delay.timeout_seconds=330")]) == ROUND_ROBIN
    key = alb["target_group_attribute"]
    chosen = routing([_ingress(f"deregistration_delay.timeout_seconds=30,{key}=least_outstanding_requests")])
    assert chosen == LEAST_OUTSTANDING
    assert routing([{"kind": "Service", "spec": {"type": "LoadBalancer"}}]) == RANDOM


def _config(replicas: int, routing_: str, **overrides: object) -> SimConfig:
    """One sequence per replica at 10 tok/s, no start-up time, routed by ``routing_``."""
    return fixed_config(1, 10.0, replicas, routing=routing_, **overrides)


def test_round_robin_ignores_load_and_least_outstanding_does_not() -> None:
    # One long request, then short ones every 10 s: round robin alternates replicas, so every
    # second short request queues behind the long one; least outstanding sends them all to the
    # idle replica.
    trace = [Request(0.0, 10, 1000)] + [Request(10.0 * i, 10, 10) for i in range(1, 7)]
    rr = Simulation(_config(2, ROUND_ROBIN), trace, 200.0, "rr").run()
    lor = Simulation(_config(2, LEAST_OUTSTANDING), trace, 200.0, "lor").run()
    assert max(lor.queue_wait) == 0.0
    # The requests of t=20, 40 and 60 land behind the long one, which ends at t=100 (1000 tokens
    # at 10 tok/s); each short one then takes 1 s (10 tokens): admitted at 100, 101, 102.
    waits = sorted(w for w in rr.queue_wait if w > 0)
    assert waits == [pytest.approx(102 - 60), pytest.approx(101 - 40), pytest.approx(100 - 20)]


# ---- DCGM utilization is a point sample ---------------------------------------------------------


def test_gpu_utilization_is_a_point_sample_at_each_collection() -> None:
    # A 1-token request every 30 s, just after each collection: busy 0.1 s of every 30 s.
    # A duty cycle over the interval would report ~0.3 %; NVML's point sample at the collection
    # instant (reference/upstream "dcgm") sees an idle GPU: 0.
    trace = [Request(30.0 * i + 0.5, 1, 1) for i in range(10)]
    sim = Simulation(_config(1, ROUND_ROBIN, gpu_collect_s=30.0), trace, 300.0, "x")
    sim.run()
    assert "point sample" in UPSTREAM["dcgm"]["fact"]
    assert sim.pods[0].util_collected == 0.0
    # A long request running over a collection instant reads 100.
    sim = Simulation(_config(1, ROUND_ROBIN, gpu_collect_s=30.0), [Request(1.0, 1, 500)], 45.0, "y")
    sim.run()
    assert sim.pods[0].util_collected == 100.0


# ---- oracle and frontier -----------------------------------------------------------------------


def test_oracle_plan_provisions_a_cold_start_ahead() -> None:
    # 60 output tokens/s arrive from t=3600 to 7200; a replica saturates at 10 tok/s; at load 1.0
    # that needs 6 replicas, requested 600 s (the cold start) before 3600, released after 7200.
    trace = [Request(3600.0 + i, 10, 60) for i in range(3600)]
    plan = oracle_plan(output_tokens_per_step(trace, 10800.0), tokens_per_s=10.0, lead_s=600.0, load=1.0)
    assert plan[0] == (0.0, 1)
    up = next(t for t, n in plan if n == 6)
    assert 3600.0 - 600.0 - 300.0 <= up <= 3600.0 - 600.0  # the 5-minute window looks ahead too
    assert plan[-1][1] == 1 and plan[-1][0] >= 7200.0 - 300.0


def test_oracle_plan_holds_replicas_when_asked() -> None:
    # The same hour of load with an hour's hold: the last 6 stays until an hour after the need
    # for it ends (7200 + 3600), then falls step by step as the window empties.
    trace = [Request(3600.0 + i, 10, 60) for i in range(3600)]
    tokens = output_tokens_per_step(trace, 14400.0)
    plan = oracle_plan(tokens, tokens_per_s=10.0, lead_s=600.0, load=1.0, hold_s=3600.0)
    down = [t for t, n in plan if n < 6 and t > 3600.0]
    assert down and down[0] > 7200.0 + 3600.0 - 300.0
    assert plan[-1][1] == 1


def test_reactive_plan_asks_when_the_load_arrives_and_holds_after() -> None:
    # 60 output tokens/s arrive from t=3600 to 7200 (one request a second, minute 60 to 119),
    # counted at arrival; a replica saturates at 10 tok/s, load 1.0. Worked by hand: the past
    # 5-minute window ending at minute 60 holds 3,600 tokens, 12 tok/s, 2 replicas; each further
    # minute adds 12 tok/s up to 60 (6 replicas) at minute 64. From minute 120 the window loses a
    # minute of tokens a minute (5, 4, 3, 2, 1 replicas at minutes 120-124); the 10-minute hold
    # delays each step down by 10 minutes (minutes 130-134).
    trace = [Request(3600.0 + i, 10, 60) for i in range(3600)]
    tokens = output_tokens_per_step(trace, 10800.0)
    plan = reactive_plan(tokens, tokens_per_s=10.0, load=1.0, hold_s=600.0)
    up = [(60 * m, n) for m, n in ((60, 2), (61, 3), (62, 4), (63, 5), (64, 6))]
    down = [(60 * m, n) for m, n in ((130, 5), (131, 4), (132, 3), (133, 2), (134, 1))]
    assert list(plan) == [(0.0, 1), *up, *down]
    # The oracle, knowing the trace, asks a cold start ahead instead.
    assert oracle_plan(tokens, tokens_per_s=10.0, lead_s=600.0, load=1.0)[1][0] < 3600.0


def test_reactive_plan_does_not_see_ahead() -> None:
    # Two traces alike until minute 84 (t=5040): the plans agree on every minute before it, even
    # with each request's tokens spread over a long decode (1 tok/s).
    common = [Request(60.0 * i + 7.0, 10, 300) for i in range(84)]
    quiet = common + [Request(5040.0 + 60.0 * i, 10, 300) for i in range(10)]
    busy = common + [Request(5040.0 + i, 10, 300) for i in range(600)]
    plans = [
        reactive_plan(
            output_tokens_per_step(t, 7200.0, sequence_tokens_per_s=1.0), 10.0, load=1.0, hold_s=0.0
        )
        for t in (quiet, busy)
    ]
    before = [[(t, n) for t, n in plan if t < 5040.0] for plan in plans]
    assert before[0] == before[1]
    assert plans[0] != plans[1]  # the later minutes do differ


class ProdStep:
    """prod on a 12-hour step, with each run the tests compare made once and shared: the oracle,
    the stack's own autoscaler, the published guides and the fixed-fleet frontier each take tens
    of seconds, and several tests judge the same runs against each other."""

    def __init__(self) -> None:
        from deepseek_eks.perf.simulate.replica import published_curve

        self.inputs = load_stack("prod")
        self.curve = published_curve(self.inputs.plan)
        spec = TraceSpec(profile="step", hours=12, seed=5, lengths=LengthProfile(200, 300))
        self.trace, self.duration, _ = build_trace(spec, self.inputs, self.curve)

    @property
    def args(self) -> tuple:
        return self.inputs, self.trace, self.duration, self.curve

    @functools.cached_property
    def oracle(self) -> Any:
        return oracle(*self.args)

    @functools.cached_property
    def own(self) -> Any:
        return simulate(*self.args)

    @functools.cached_property
    def guides(self) -> list[Any]:
        return [simulate(*self.args, g) for g in guides()]

    @functools.cached_property
    def frontier(self) -> list[Any]:
        return frontier(*self.args)


@pytest.fixture(scope="module")
def prod_step() -> ProdStep:
    return ProdStep()


def test_oracle_uses_no_more_gpu_hours_than_any_run_at_equal_attainment(prod_step: ProdStep) -> None:
    best = prod_step.oracle
    assert best.summary.label == ORACLE
    # It runs a plan or a fixed fleet, never the stack's HPA or ScaledObject, and says so.
    assert best.summary.autoscaler.startswith(f"{ORACLE}: ")
    assert best.summary.autoscaler.endswith(", no autoscaler")
    others = [*prod_step.guides, *prod_step.frontier, prod_step.own]
    for run in others:
        if run.summary.ttft_slo_attainment >= best.summary.ttft_slo_attainment:
            assert best.summary.gpu_hours <= run.summary.gpu_hours, run.summary.label


def test_the_oracle_held_to_min_replicas_never_plans_below_it(prod_step: ProdStep) -> None:
    """prod keeps 2 replicas at least (its stack file says why): the oracle compare adds after the
    plain one holds that floor from the first minute, so it pays at least the floor's GPU-hours,
    which the plain oracle (free to drop to one) need not."""
    inputs, _, duration, _ = prod_step.args
    floor = int(inputs.plan["min_replicas"])
    assert floor == 2
    held = oracle(*prod_step.args, floor=floor, label=ORACLE_AT_MIN_REPLICAS).summary
    assert held.label == ORACLE_AT_MIN_REPLICAS and held.autoscaler.startswith(f"{ORACLE_AT_MIN_REPLICAS}: ")
    floor_gpu_hours = floor * int(inputs.plan["gpus_per_replica"]) * duration / 3600
    assert held.gpu_hours >= floor_gpu_hours
    assert prod_step.oracle.summary.gpu_hours < floor_gpu_hours


def test_reactive_baseline_meets_the_goal_no_cheaper_than_the_signals_that_do(prod_step: ProdStep) -> None:
    inputs, trace, duration, curve = prod_step.args
    bound = reactive_baseline(*prod_step.args)
    summary = bound.run.summary
    assert summary.label == REACTIVE_BASELINE
    assert summary.ttft_slo_attainment >= ATTAINMENT_GOAL
    assert bound.setting.startswith(f"load {bound.load:g}, hold {bound.hold_s / 60:g} min")
    # The published guides react to the same load later and with noise: any of them that meets
    # the goal costs at least this plan. It is the cheapest of a family of plans, not a bound on
    # every signal: with the operator step model the stack's own combined signal meets the goal
    # for 191.9 GPU-hours against its 192.0, so the stack's signal is only held to within 1 %.
    own = prod_step.own.summary
    meeting = [r.summary for r in prod_step.guides if r.summary.ttft_slo_attainment >= ATTAINMENT_GOAL]
    if own.ttft_slo_attainment >= ATTAINMENT_GOAL:
        assert summary.gpu_hours <= own.gpu_hours * 1.01, own.label
    assert meeting or own.ttft_slo_attainment >= ATTAINMENT_GOAL, "no signal meets the goal"
    for s in meeting:
        assert summary.gpu_hours <= s.gpu_hours, s.label
    # A 4x step outruns a cold start, so reacting alone needs a floor above minReplicas, and the
    # floor found is the lowest that meets the goal at that load and hold.
    assert bound.floor > max(1, inputs.min_replicas)
    saturated, tokens = planning_rates(inputs, trace, duration, curve)
    lower = reactive_plan(tokens, saturated, bound.load, bound.hold_s, bound.floor - 1)
    lower_run = simulate(inputs, trace, duration, curve, replica_plan=lower).summary
    assert lower_run.ttft_slo_attainment < ATTAINMENT_GOAL


def test_frontier_stops_at_the_first_fleet_meeting_the_goal(prod_step: ProdStep) -> None:
    runs = prod_step.frontier
    attainment = [r.summary.ttft_slo_attainment for r in runs]
    assert [r.summary.label for r in runs] == [f"fixed:{n}" for n in range(1, len(runs) + 1)]
    assert all(a < 0.99 for a in attainment[:-1])
    assert attainment[-1] >= 0.99 or len(runs) == 16
    gpu_hours = [r.summary.gpu_hours for r in runs]
    assert gpu_hours == sorted(gpu_hours)  # a bigger fleet costs more
    assert runs[0].summary.autoscaler == "fixed:1: a fixed fleet of 1 replica, no autoscaler"


# ---- scheduled floors (KEDA cron scaler) -------------------------------------------------------


def test_cron_fields_and_errors() -> None:
    cron = Cron.parse("*/15 8-18 * * MON-FRI")
    assert cron.minutes == frozenset({0, 15, 30, 45}) and cron.weekdays == frozenset(range(1, 6))
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    assert cron.matches(dt.datetime(2026, 1, 5, 8, 15, tzinfo=paris))  # a Monday
    assert not cron.matches(dt.datetime(2026, 1, 4, 8, 15, tzinfo=paris))  # a Sunday
    # Both day fields restricted: either matches (robfig/cron dayMatches).
    either = Cron.parse("0 0 1 * MON")
    assert either.matches(dt.datetime(2026, 1, 5, tzinfo=paris))  # Monday, 5th
    assert either.matches(dt.datetime(2026, 2, 1, tzinfo=paris))  # Sunday, 1st
    assert len(UPSTREAM["keda"]["cron_scaler"]["parser_fields"]) == 5
    for bad, why in [
        ("0 8 * *", "expected 5"),
        ("0 24 * * *", "hour"),
        ("0 8 * * FUNDAY", "day of week"),
        ("*/0 8 * * *", "step"),
        ("0 ? * * *", "'?'"),
    ]:
        with pytest.raises(CronError, match=why):
            Cron.parse(bad)
    with pytest.raises(CronError, match="time zone"):
        ScheduledFloor("0 8 * * *", "0 18 * * *", "Mars/Olympus", 2)
    with pytest.raises(CronError, match="same time"):
        ScheduledFloor("0 8 * * *", "0  8 * * *", "UTC", 2)


def test_schedule_is_active_when_the_next_end_comes_before_the_next_start() -> None:
    # KEDA: active when the next end fires before the next start (cron_scaler.go).
    assert "next end" in UPSTREAM["keda"]["cron_scaler"]["active"]
    floor = ScheduledFloor("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Paris", 3)
    paris = zoneinfo.ZoneInfo("Europe/Paris")

    def at(*args: int) -> float:
        return dt.datetime(*args, tzinfo=paris).timestamp()

    assert not floor.active(at(2026, 1, 5, 7, 59))
    assert floor.active(at(2026, 1, 5, 8, 0, 30))
    assert floor.active(at(2026, 1, 5, 17, 59))
    assert not floor.active(at(2026, 1, 5, 18, 0, 30))
    assert not floor.active(at(2026, 1, 10, 12, 0))  # Saturday
    overnight = ScheduledFloor("0 22 * * *", "0 6 * * *", "UTC", 1)
    assert overnight.active(dt.datetime(2026, 1, 6, 2, 0, tzinfo=dt.UTC).timestamp())
    assert not overnight.active(dt.datetime(2026, 1, 6, 12, 0, tzinfo=dt.UTC).timestamp())


def test_a_schedule_raises_the_floor_in_the_simulation() -> None:
    from deepseek_eks.perf.simulate.stack import CRON, CRON_TARGET

    floor = ScheduledFloor("0 1 * * *", "0 2 * * *", "UTC", 3)
    spec = AutoscalerSpec(
        "cron",
        "ScaledObject",
        1,
        5,
        Behavior.from_spec(None),
        (MetricSpec(CRON, CRON_TARGET, schedule=floor),),
        keda_min_replicas=1,
    )
    config = _config(1, ROUND_ROBIN, autoscaler=spec, fixed_replicas=None, clock_origin_s=1767571200.0)
    out = Simulation(config, [], 4 * 3600.0, "cron").run()
    desired = {int(t // 3600): n for t, n, *_ in out.timeline}
    # t=0 is 00:00 UTC: 1 replica before 01:00, 3 from 01:00 to 02:00, then the legacy path's
    # 300 s downscale window before it returns to 1.
    assert desired[0] == 1 and desired[1] == 3 and desired[3] == 1
