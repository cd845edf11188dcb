"""What one vLLM replica delivers. The simulator steps each replica through vLLM's scheduler
(perf/simulate/engine.py) and asks this module how long each step takes.

A step's duration comes from the replica model of ``sizing/performance.py`` (bytes over HBM
bandwidth, FLOPs over tensor peak, all-reduce over the GPU link, efficiencies fitted to published
measurements), for every variant x GPU the planner accepts. A user's load test
(``--calibration``: ``python -m automation loadtest`` JSON) overrides the bundled fit: the
efficiencies are refitted to the measured points on the plan's own hardware. A bare
``ThroughputCurve`` (no hardware) still defines a step time, ``n / aggregate(n)``, for tests and
for curves with no plan behind them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from deepseek_eks.sizing.catalog import instance_catalog, model_catalog
from deepseek_eks.sizing.measured import (
    LoadTestReportError,
    Measurement,
    read_load_test,
    refit,
    refit_report,
    unstated_lengths,
)
from deepseek_eks.sizing.memory import KvCacheDtype, Quantization
from deepseek_eks.sizing.performance import (
    PLAN_EXPONENTIAL_LENGTHS,
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    Hardware,
    PerformanceError,
    SchedulerLimits,
    default_max_num_batched_tokens,
    hardware,
    planning_state,
    step_seconds,
)


class CalibrationError(ValueError):
    """No usable throughput figures for a stack."""


class NoThroughputData(CalibrationError):
    """No throughput figures exist for the stack's plan: nothing is wrong with the input, the
    simulation cannot run until one is measured (``--calibration``)."""


@dataclass(frozen=True)
class ThroughputCurve:
    """(concurrency, aggregate output tokens/s) points, concurrency ascending, from ``source``."""

    points: tuple[tuple[int, float], ...]
    source: str
    # The replica model behind the points, when they come from it (``published_curve``).
    hardware: Hardware | None = None
    # A load test's points as measured, each with its lengths (``load_calibration``): what the
    # efficiencies are refitted to. ``points`` is their mean per concurrency.
    measurements: tuple[Measurement, ...] = ()

    def __post_init__(self) -> None:
        if not self.points or self.points[0][0] < 1:
            raise CalibrationError(f"{self.source}: points must start at concurrency >= 1")
        xs = [c for c, _ in self.points]
        if xs != sorted(set(xs)) or any(t <= 0 for _, t in self.points):
            raise CalibrationError(f"{self.source}: concurrencies must be distinct and rates positive")

    def aggregate(self, concurrency: int) -> float:
        """Output tokens/s of the whole batch at ``concurrency`` running sequences."""
        if concurrency <= 0:
            return 0.0
        pts = self.points
        if concurrency <= pts[0][0]:
            # Below the first point each sequence runs at that point's per-sequence rate.
            return pts[0][1] / pts[0][0] * concurrency
        if concurrency >= pts[-1][0]:
            return pts[-1][1]
        i = bisect.bisect_left([c for c, _ in pts], concurrency)
        (c0, t0), (c1, t1) = pts[i - 1], pts[i]
        return t0 + (t1 - t0) * (concurrency - c0) / (c1 - c0)

    def per_sequence(self, concurrency: int) -> float:
        return self.aggregate(concurrency) / concurrency if concurrency > 0 else 0.0


def plan_hardware(plan: Mapping[str, Any]) -> Hardware:
    """The replica model's hardware for a plan (plan.json fields)."""
    model = model_catalog()[plan["variant"]]
    instance = instance_catalog().instances[plan["instance_type"]]
    return hardware(
        model,
        Quantization(plan["quantization"]),
        instance,
        int(plan["tensor_parallel_size"]),
        int(plan["pipeline_parallel_size"]),
        kv_cache_dtype=KvCacheDtype(plan.get("kv_cache_dtype", "auto")),
    )


def plan_limits(plan: Mapping[str, Any]) -> SchedulerLimits:
    """vLLM's scheduler limits for a plan: its max-num-seqs and KV cache, and vLLM's default
    max-num-batched-tokens for the GPU (the plan does not set one)."""
    instance = instance_catalog().instances[plan["instance_type"]]
    return SchedulerLimits(
        int(plan["max_num_seqs"]),
        default_max_num_batched_tokens(instance.cuda_memory_mib, instance.gpu_model),
        int(plan["kv_cache_tokens"]),
    )


def published_curve(plan: Mapping[str, Any]) -> ThroughputCurve:
    """The replica model's curve for the plan: steady-state output tokens/s at concurrency 1, 2,
    4, ... up to max_num_seqs on the plan's workload (``planning_state``: the planning lengths drawn
    exponentially, as the simulator draws them), with the model attached."""
    try:
        hw = plan_hardware(plan)
    except (KeyError, PerformanceError) as error:
        raise NoThroughputData(f"no replica model for the plan: {error}") from None
    limits = plan_limits(plan)
    levels = sorted({1, *(2**i for i in range(1, 11) if 2**i < limits.max_num_seqs), limits.max_num_seqs})
    points = tuple((c, planning_state(hw, limits, c).output_tokens_per_second) for c in levels)
    e = hw.efficiencies
    source = (
        f"replica model (sizing/performance.py): {plan['variant']} on {hw.gpus}x {hw.gpu.name}, "
        f"{PLAN_PROMPT_TOKENS} in / {PLAN_OUTPUT_TOKENS} out (exponential); "
        f"efficiencies bandwidth {e.bandwidth}, compute {e.compute}, "
        f"step overhead {e.step_overhead_s * 1000:g} ms ({e.source})"
    )
    return ThroughputCurve(points, source, hw)


def calibrated_hardware(plan: Mapping[str, Any], curve: ThroughputCurve) -> Hardware:
    """The plan's hardware with efficiencies refitted to a measured curve (the user's load test
    overrides the bundled fit), each point at the mean lengths its requests had; a curve with no
    measurements (points only) is taken on the plan's workload (``planning_state``)."""
    measured = curve.measurements or tuple(
        Measurement(
            c, t, PLAN_PROMPT_TOKENS, PLAN_OUTPUT_TOKENS, False, curve.source, PLAN_EXPONENTIAL_LENGTHS
        )
        for c, t in curve.points
    )
    try:
        return refit(plan_hardware(plan), plan_limits(plan), measured, curve.source, plan["instance_type"])
    except LoadTestReportError as error:
        raise CalibrationError(f"--calibration ({curve.source}): {error}") from None


def load_calibration(path: Path) -> ThroughputCurve:
    """A curve from a load-test report (``sizing/measured.py`` ``read_load_test``: one report or
    a list of them). Every point is kept, with its mean lengths, for the refit; the curve's points
    are their mean per concurrency. Reports written before 2026-12-06 state no lengths, and their
    points are taken at the planning lengths, which the curve's ``source`` says (and
    ``sizing.measured.unstated_lengths`` of its measurements)."""
    try:
        measured = read_load_test(path, "--calibration")
    except LoadTestReportError as error:
        raise CalibrationError(str(error)) from None
    by_concurrency: dict[int, list[float]] = {}
    for m in measured:
        by_concurrency.setdefault(m.concurrency, []).append(m.output_tokens_per_s)
    points = tuple((c, sum(rates) / len(rates)) for c, rates in sorted(by_concurrency.items()))
    assumed = unstated_lengths(measured)
    source = f"measured: {path.name}"
    if assumed:
        source += (
            f" ({len(assumed)} of {len(measured)} points state no lengths: taken at "
            f"{PLAN_PROMPT_TOKENS} in / {PLAN_OUTPUT_TOKENS} out)"
        )
    return ThroughputCurve(points, source, measurements=measured)


def calibrate(plan: Mapping[str, Any], path: Path) -> tuple[ThroughputCurve, tuple[str, ...]]:
    """The curve of the load-test report at ``path`` (``--calibration``) with the plan's hardware
    refitted to it once, as every command that takes a load test does (``refit_report``), and the
    lines to print on stderr about what the refit assumed."""
    curve = load_calibration(path)
    try:
        hw, limits = plan_hardware(plan), plan_limits(plan)
        refitted = refit_report(hw, limits, curve.measurements, "--calibration", path, plan["instance_type"])
    except LoadTestReportError as error:
        raise CalibrationError(str(error)) from None
    return replace(curve, hardware=refitted.hardware), refitted.messages


@dataclass(frozen=True)
class ReplicaModel:
    """One replica's serving limits (from the plan) and its step time."""

    curve: ThroughputCurve
    max_num_seqs: int
    kv_cache_tokens: int
    max_model_len: int
    hardware: Hardware | None = None
    max_num_batched_tokens: int = 2048

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], curve: ThroughputCurve) -> ReplicaModel:
        hw = curve.hardware or calibrated_hardware(plan, curve)
        return cls(
            curve,
            int(plan["max_num_seqs"]),
            int(plan["kv_cache_tokens"]),
            int(plan["max_model_len"]),
            hw,
            plan_limits(plan).max_num_batched_tokens,
        )

    def step_seconds(self, seqs: int, tokens: int, context_tokens: float, attention_tokens: float) -> float:
        """One engine step over ``seqs`` sequences scheduling ``tokens`` tokens that read
        ``context_tokens`` cached tokens and attend over ``attention_tokens`` pairs."""
        if self.hardware is not None:
            return step_seconds(self.hardware, tokens, context_tokens, attention_tokens, seqs)
        return 1.0 / self.curve.per_sequence(max(1, seqs))

    def saturated_tokens_per_s(self) -> float:
        """Output tokens/s at max_num_seqs on the plan's workload (``planning_state``)."""
        if self.hardware is None:
            return self.curve.aggregate(self.max_num_seqs)
        limits = SchedulerLimits(self.max_num_seqs, self.max_num_batched_tokens, self.kv_cache_tokens)
        return planning_state(self.hardware, limits, self.max_num_seqs).output_tokens_per_second
