"""The routing what-if: the stack's traffic with and without llm-d's router (``routing.kind
llm-d``), and with the ``router-queue`` signal, from its minReplicas and from zero.

The what-if renders the stack as it is and puts the router in front in the simulator
(perf/simulate/router.py), so every stack gets it, r1 too (which refuses the router today);
the ``router-queue`` ScaledObject is derived from the stack's rendered concurrency one (one
trigger on the router's queued plus in-flight requests, the concurrency signal's per-replica
threshold, activation 0, the same polling, cooldown and HPA behavior), which a test holds equal to
the ScaledObject the program renders for ``routing.kind llm-d`` with ``router-queue``. Every run
sees the same trace: the stack's, with prompts that share prefixes
(perf/simulate/prefixes.py: synthetic, fitted to a published reuse share) when the trace
has none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from ..stats import percentile
from .engine import Outcome, SimConfig, Simulation
from .hpa import Behavior
from .prefixes import PUBLISHED_REUSE_SOURCE, reuse_share, shared_prefix_trace
from .replica import ReplicaModel, ThroughputCurve, published_curve
from .router import RouterSpec
from .run import (
    CLOCK_ORIGIN_S,
    StackInputs,
    Summary,
    TraceSpec,
    build_trace,
    load_stack,
    simulate,
    startup_times,
    summarize,
)
from .stack import CONCURRENCY_TOTAL, ROUTER_DEMAND, AutoscalerSpec, MetricSpec
from .traffic import SHARED_PREFIX, LengthProfile, Request, generate

ROUND_ROBIN_LABEL = "load balancer"
LLM_D_LABEL = "llm-d"


@dataclass(frozen=True)
class RoutingRow:
    """One run of the what-if."""

    label: str
    routing: str
    autoscaler: str
    requests: int
    completed: int
    rejected_503: int
    timed_out_in_router_queue: int
    p50_ttft_s: float
    p90_ttft_s: float
    p99_ttft_s: float
    ttft_slo_attainment: float
    output_tokens_per_s: float
    prefix_cache_hit_rate: float  # prompt tokens served from a replica's prefix cache
    gpu_hours: float
    cost_usd: float
    peak_replicas: int

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def row(routing: str, summary: Summary, out: Outcome) -> RoutingRow:
    """A run's what-if figures: its summary's, with the percentiles and shares routing changes."""
    return RoutingRow(
        label=summary.label,
        routing=routing,
        autoscaler=summary.autoscaler,
        requests=summary.requests,
        completed=summary.completed,
        rejected_503=summary.rejected,
        timed_out_in_router_queue=out.timed_out,
        p50_ttft_s=summary.p50_ttft_s,
        p90_ttft_s=percentile(out.ttft, 90),
        p99_ttft_s=percentile(out.ttft, 99),
        ttft_slo_attainment=summary.ttft_slo_attainment,
        output_tokens_per_s=out.output_tokens / out.duration_s,
        prefix_cache_hit_rate=out.cached_prompt_tokens / out.prompt_tokens if out.prompt_tokens else 0.0,
        gpu_hours=summary.gpu_hours,
        cost_usd=summary.cost_usd,
        peak_replicas=summary.peak_replicas,
    )


def with_shared_prefixes(
    trace: list[Request], seed: int, lengths: LengthProfile, max_model_len: int
) -> list[Request]:
    """The trace as is when its prompts already share prefixes, else its arrivals and output
    lengths as turns of the synthetic conversations."""
    if any(r.prefix for r in trace):
        return trace
    return shared_prefix_trace(trace, seed, lengths, max_model_len)


def router_queue_autoscaler(concurrency: AutoscalerSpec, min_replicas: int) -> AutoscalerSpec:
    """The router-queue ScaledObject, from the stack's rendered concurrency one (module docstring);
    its seasonal triggers (autoscaling.seasonal) are kept, as the program renders them beside any
    signal. The what-if runs no earlier days, so they read 0 in every row alike."""
    target = next(m.target for m in concurrency.metrics if m.measures == CONCURRENCY_TOTAL)
    seasonal = tuple(m for m in concurrency.metrics if m.window)
    return replace(
        concurrency,
        label=f"router-queue (minReplicas {min_replicas})",
        metrics=(MetricSpec(ROUTER_DEMAND, target, 0.0), *seasonal),
        keda_min_replicas=min_replicas,
        min_replicas=max(min_replicas, 1),
    )


@dataclass(frozen=True)
class WhatIf:
    trace: str
    reuse_share: float
    request_ttl_s: float
    max_requests: int
    rows: tuple[RoutingRow, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "prefix_reuse_share": round(self.reuse_share, 4),
            "prefix_reuse_fitted_to": PUBLISHED_REUSE_SOURCE,
            "router_request_ttl_s": self.request_ttl_s,
            "router_max_requests": self.max_requests,
            "runs": [r.as_dict() for r in self.rows],
        }


def _run(
    inputs: StackInputs,
    trace: list[Request],
    duration: float,
    curve: ThroughputCurve,
    label: str,
    autoscaler: AutoscalerSpec | None = None,
    router: RouterSpec | None = None,
) -> RoutingRow:
    run = simulate(inputs, trace, duration, curve, autoscaler, label=label, router=router)
    routing = LLM_D_LABEL if router else f"{ROUND_ROBIN_LABEL} ({inputs.facts.routing})"
    return row(routing, run.summary, run.outcome)


def whatif(
    stack: str,
    trace_spec: TraceSpec,
    overrides: Mapping[str, str] | None = None,
    project_dir: Path = PROJECT_ROOT,
    curve: ThroughputCurve | None = None,
) -> WhatIf:
    """The stack's own autoscaler behind its load balancer, behind llm-d's router with its load
    scorers only and with all three, then the router-queue signal from the stack's minReplicas and
    from zero, on one trace."""
    overrides = dict(overrides or {})
    own = load_stack(stack, overrides, project_dir)
    concurrency = load_stack(stack, {**overrides, "autoscaling.signal": "concurrency"}, project_dir)
    curve = curve or published_curve(own.plan)
    trace, duration, _ = build_trace(trace_spec, own, curve)
    lengths = trace_spec.lengths
    trace = with_shared_prefixes(trace, trace_spec.seed, lengths, int(own.plan["max_model_len"]))
    router = RouterSpec.from_plan(own.plan, own.max_replicas)
    # The router's load scorers alone (no prefix-cache scorer): how much is load-aware picking.
    load_weights = tuple((n, w) for n, w in router.weights if n != "prefix-cache-scorer")
    load_only = replace(router, weights=load_weights)
    rows = [
        _run(own, trace, duration, curve, f"{own.label}, {ROUND_ROBIN_LABEL}"),
        _run(own, trace, duration, curve, f"{own.label}, {LLM_D_LABEL} load scorers only", router=load_only),
        _run(own, trace, duration, curve, f"{own.label}, {LLM_D_LABEL}", router=router),
    ]
    floors = sorted({max(own.min_replicas, 1), 0}, reverse=True)
    for floor in floors:
        spec = router_queue_autoscaler(concurrency.autoscaler, floor)
        rows.append(_run(own, trace, duration, curve, f"{spec.label}, {LLM_D_LABEL}", spec, router))
    described = str(trace_spec.csv) if trace_spec.csv else f"{trace_spec.profile}, {trace_spec.hours:g} h"
    if trace_spec.profile != SHARED_PREFIX or trace_spec.csv:
        described += ", prompts rebuilt as shared-prefix conversations (synthetic)"
    return WhatIf(described, reuse_share(trace), router.request_ttl_s, router.max_requests, tuple(rows))


# ---- the plan's what-if: a fixed fleet at saturation ---------------------------------------------

PLAN_WHATIF_MINUTES = 15.0
PLAN_WHATIF_SEED = 1


def fleet_config(
    plan: Mapping[str, Any], compute_mode: str, replicas: int, router: RouterSpec | None
) -> SimConfig:
    """A fixed fleet of ``replicas`` (no autoscaler) for a plan alone, without a render: the
    plan's replica model and start-up; the scrape intervals do not matter to a fixed fleet."""
    curve = published_curve(plan)
    fixed = AutoscalerSpec(
        "fixed", "HorizontalPodAutoscaler", replicas, replicas, Behavior.from_spec(None), ()
    )
    return SimConfig(
        autoscaler=fixed,
        replica=ReplicaModel.from_plan(plan, curve),
        startup=startup_times(plan, compute_mode),
        vllm_scrape_s=15.0,
        gpu_scrape_s=15.0,
        termination_grace_s=30.0,
        consolidate_after_s=0.0,
        replica_hourly_usd=float(plan["replica_hourly_usd"]),
        gpus_per_replica=int(plan["gpus_per_replica"]),
        fixed_replicas=replicas,
        router=router,
        clock_origin_s=CLOCK_ORIGIN_S,
    )


def plan_whatif(
    plan: Mapping[str, Any], compute_mode: str, replicas: int, ttft_slo_s: float, max_replicas: int
) -> dict[str, Any]:
    """``routing_whatif`` of ``python -m automation plan``: ``replicas`` fixed replicas at the
    request rate that saturates them (their saturated output tokens/s over the mean output), for
    PLAN_WHATIF_MINUTES of steady shared-prefix traffic at the planning lengths, behind round robin
    and behind llm-d's router. Where the published comparisons were measured (at saturation)."""
    lengths = LengthProfile()
    config = fleet_config(plan, compute_mode, replicas, None)
    rate = replicas * config.replica.saturated_tokens_per_s() / lengths.output_tokens
    duration = PLAN_WHATIF_MINUTES * 60
    arrivals = generate("steady", rate, duration, PLAN_WHATIF_SEED, lengths, int(plan["max_model_len"]))
    trace = shared_prefix_trace(arrivals, PLAN_WHATIF_SEED, lengths, int(plan["max_model_len"]))
    router = RouterSpec.from_plan(plan, max_replicas)
    out: dict[str, Any] = {
        "replicas": replicas,
        "rate_rps": round(rate, 4),
        "minutes": PLAN_WHATIF_MINUTES,
        "trace": "steady shared-prefix (synthetic), planning lengths, seed 1",
        "source": "python -m automation simulate --compare --profile shared-prefix (routing_whatif)",
    }
    for key, spec in (("round_robin", None), ("llm_d", router)):
        cfg = fleet_config(plan, compute_mode, replicas, spec)
        result = Simulation(cfg, trace, duration, key).run()
        r = row(key, summarize(result, cfg, ttft_slo_s, ttft_slo_s), result)
        out[key] = {
            "p90_ttft_s": round(r.p90_ttft_s, 3),
            "output_tokens_per_s": round(r.output_tokens_per_s, 1),
            "prefix_cache_hit_rate": round(r.prefix_cache_hit_rate, 4),
            "gpu_hours": round(r.gpu_hours, 3),
        }
    return out


def table(rows: Sequence[RoutingRow]) -> str:
    """The what-if as aligned text."""
    head = ("run", "p50 TTFT s", "p90 TTFT s", "TTFT SLO", "503", "out tok/s", "prefix hit", "GPU-h", "peak")
    lines = [head]
    for r in rows:
        lines.append(
            (
                r.label,
                f"{r.p50_ttft_s:.2f}",
                f"{r.p90_ttft_s:.2f}",
                f"{r.ttft_slo_attainment:.1%}",
                str(r.rejected_503),
                f"{r.output_tokens_per_s:.0f}",
                f"{r.prefix_cache_hit_rate:.1%}",
                f"{r.gpu_hours:.1f}",
                str(r.peak_replicas),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = []
    for n, line in enumerate(lines):
        text.append(
            "  ".join(
                [line[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True))]
            )
        )
        if n == 0:
            text.append("  ".join("-" * w for w in widths))
    return "\n".join(text)


def plan_field(settings: Any, plan: Mapping[str, Any]) -> dict[str, Any]:
    """``routing_whatif`` for ``python -m automation plan`` from its settings and plan: the fleet at
    maxReplicas (``plan_whatif``), or why there is none (no replica model for the plan)."""
    from .replica import CalibrationError

    auto = settings.autoscaling
    try:
        return plan_whatif(
            plan,
            settings.compute_mode.value,
            auto.max_replicas,
            settings.observability.ttft_slo_seconds,
            auto.max_replicas,
        )
    except CalibrationError as error:
        return {"unavailable": str(error)}


def plan_line(field: Mapping[str, Any]) -> str:
    """The plan's one line on the what-if."""
    if "unavailable" in field:
        return f"routing what-if unavailable: {field['unavailable']}"
    rr, llm = field["round_robin"], field["llm_d"]
    hits = f"{rr['prefix_cache_hit_rate']:.0%} vs {llm['prefix_cache_hit_rate']:.0%}"
    return (
        f"routing what-if {field['replicas']} replicas saturated ({field['rate_rps']:g} req/s of synthetic "
        f"shared-prefix chats, {field['minutes']:g} min): p90 TTFT {rr['p90_ttft_s']:g} s behind the load "
        f"balancer, {llm['p90_ttft_s']:g} s behind llm-d; {rr['output_tokens_per_s']:g} vs "
        f"{llm['output_tokens_per_s']:g} output tok/s; prefix-cache hits {hits} of prompt tokens; "
        f"same {rr['gpu_hours']:g} GPU-h "
        "(docs/autoscaling-simulation.md, routing)"
    )
