"""A load test's measured points, and the replica model refitted to them.

``python -m automation loadtest --out FILE`` (or ``vllm bench serve`` read back with
``--from-vllm-bench``) writes a report whose ``points`` are closed-loop measurements of one replica:
concurrency, output tokens/s and the mean prompt and output tokens of the completed requests. This
module reads them and refits the replica model's efficiencies (``sizing/fit.py``) to them on the
plan's own hardware, each point at its own lengths. Every command that answers with the replica model
can then answer with the user's measurement: ``python -m automation simulate --calibration`` and
``python -m sizing capacity --load-test``.

Not to be confused with ``python -m sizing --calibration``: that file is the runtime memory
overhead read from a vLLM start-up log (``sizing/calibration.py``), and each reader names the other
when handed the wrong one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .catalog import instance_catalog
from .fit import Point, fit_points
from .performance import (
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    Hardware,
    PerformanceError,
    SchedulerLimits,
    hardware,
)

# How a point's request lengths were drawn (its ``length_distribution``; absent: fixed, as every
# report before 2026-12-06 ran): the load tester's --lengths choices (perf/loadtest/runner.py).
LENGTH_DISTRIBUTIONS = ("fixed", "exponential")


class LoadTestReportError(ValueError):
    """A file given as a load-test report is not one, or one of its points is unusable."""


@dataclass(frozen=True)
class Measurement:
    """One measured point of a load test: the mean requests in flight, the output tokens/s, and
    the mean prompt and output tokens of its completed requests (``lengths_stated`` False where
    the report carries none and the planning lengths stand in for them)."""

    concurrency: int
    output_tokens_per_s: float
    prompt_tokens: float
    output_tokens: float
    lengths_stated: bool
    source: str
    # The point's requests had lengths drawn exponentially around those means (the report's
    # ``length_distribution``), not all the same.
    exponential_lengths: bool = False
    # The served model the load test asked for (the report's ``config.model``: a stack serves
    # under its model.variant), where the report says.
    model: str | None = None
    # The replica's --max-num-seqs and EC2 instance type while it was measured (the report's
    # ``config.max_num_seqs`` and ``config.instance_type``), where the report says.
    max_num_seqs: int | None = None
    instance_type: str | None = None


def _mean_tokens(point: Mapping[str, Any], key: str) -> float | None:
    value = point.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < math.inf):
        raise ValueError(f"{key} must be a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class _Setup:
    """What a report says of the replica it measured (each None where it does not say)."""

    model: str | None = None
    max_num_seqs: int | None = None
    instance_type: str | None = None


def _measurement(point: Any, where: str, path: Path, setup: _Setup) -> Measurement:
    try:
        concurrency, rate = int(point["concurrency"]), float(point["output_tokens_per_s"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise LoadTestReportError(f"{where}: each point needs concurrency and output_tokens_per_s") from None
    raw = point["concurrency"]
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != concurrency or concurrency < 1:
        raise LoadTestReportError(
            f"{where}: a point's concurrency must be a whole number of streams, at least 1, got {raw!r}"
        )
    if not (math.isfinite(rate) and rate > 0):
        raise LoadTestReportError(
            f"{where}: point at concurrency {concurrency}: "
            f"output_tokens_per_s {point['output_tokens_per_s']!r}: "
            "a point must measure a positive output rate (no request completed?); rerun the load test "
            "and check its errors"
        )
    try:
        prompt, output = _mean_tokens(point, "prompt_tokens"), _mean_tokens(point, "output_tokens")
    except ValueError as error:
        raise LoadTestReportError(f"{where}: point at concurrency {concurrency}: {error}") from None
    distribution = point.get("length_distribution", LENGTH_DISTRIBUTIONS[0])
    if distribution not in LENGTH_DISTRIBUTIONS:
        raise LoadTestReportError(
            f"{where}: point at concurrency {concurrency}: length_distribution {distribution!r} is not "
            f"one of {', '.join(LENGTH_DISTRIBUTIONS)}"
        )
    if (prompt is None) != (output is None):
        raise LoadTestReportError(
            f"{where}: point at concurrency {concurrency} has only one of prompt_tokens and "
            "output_tokens; give both (the mean lengths of its requests) or neither"
        )
    return Measurement(
        concurrency,
        rate,
        prompt if prompt is not None else PLAN_PROMPT_TOKENS,
        output if output is not None else PLAN_OUTPUT_TOKENS,
        prompt is not None,
        str(point.get("source") or path.name),
        distribution == "exponential",
        setup.model,
        setup.max_num_seqs,
        setup.instance_type,
    )


def read_load_test(path: Path, flag: str) -> tuple[Measurement, ...]:
    """Every point of a load-test report at ``path`` (one report, or a JSON list of them), each
    with its lengths; a point without lengths (a report written before 2026-12-06) is taken at the
    planning lengths and marked so. ``flag`` is the option that named the file, for the messages.
    Raises LoadTestReportError naming the file and what is wrong with it, including when it is the
    other kind of calibration (``python -m sizing calibrate``'s runtime overhead)."""
    where = f"{flag} {path}"
    try:
        data: Any = json.loads(path.read_text())
    except OSError as error:
        raise LoadTestReportError(f"{where}: {error.strerror or error}") from None
    except ValueError as error:
        raise LoadTestReportError(f"{where}: not JSON ({error})") from None
    reports = data if isinstance(data, list) else [data]
    if any(isinstance(r, dict) and "entries" in r and "points" not in r for r in reports):
        raise LoadTestReportError(
            f"{where} is a runtime-overhead calibration (written by python -m sizing calibrate from a "
            "vLLM log), not a load-test report: give it to python -m sizing --calibration. A load-test "
            "report comes from python -m automation loadtest --out FILE"
        )
    measured = tuple(
        _measurement(point, where, path, _setup(report, where))
        for report in reports
        if isinstance(report, dict)
        for point in report.get("points", [])
    )
    if not measured:
        raise LoadTestReportError(
            f"{where}: no points (expected a load-test report: python -m automation loadtest --out FILE)"
        )
    return measured


def _setup(report: Mapping[str, Any], where: str) -> _Setup:
    """The served model, --max-num-seqs and instance type a report's ``config`` records."""
    config = report.get("config")
    if not isinstance(config, Mapping):
        return _Setup()
    model, seqs, instance = config.get("model"), config.get("max_num_seqs"), config.get("instance_type")
    if seqs is not None and (isinstance(seqs, bool) or not isinstance(seqs, int) or seqs < 1):
        raise LoadTestReportError(f"{where}: config.max_num_seqs must be a positive integer, got {seqs!r}")
    if instance is not None and not (isinstance(instance, str) and instance):
        raise LoadTestReportError(
            f"{where}: config.instance_type must be an EC2 instance type, got {instance!r}"
        )
    return _Setup(model if isinstance(model, str) and model else None, seqs, instance)


def _lengthless_warning(measurements: Sequence[Measurement], flag: str, path: Path) -> str | None:
    """The warning for points that state no lengths (taken at the planning lengths), or None
    when all do."""
    unstated = unstated_lengths(measurements)
    if not unstated:
        return None
    return (
        f"warning: {flag} {path}: the points at concurrency {', '.join(map(str, unstated))} state no "
        f"request lengths (a report from before 2026-12-06); the refit takes them at "
        f"{PLAN_PROMPT_TOKENS} in / {PLAN_OUTPUT_TOKENS} out. Rerun python -m automation loadtest "
        "(or --from-vllm-bench) to record the lengths measured."
    )


def unstated_lengths(measurements: Sequence[Measurement]) -> list[int]:
    """The concurrencies of the points that state no lengths (taken at the planning lengths):
    what the commands warn about."""
    return [m.concurrency for m in measurements if not m.lengths_stated]


def _same_replica(hw: Hardware, instance_type: str | None) -> bool:
    """Whether ``hw``'s replica on ``instance_type`` is the same hardware to the replica model:
    the same GPUs (model and memory) and interconnect, with room for its tensor-parallel GPUs, as
    g6e.12xlarge and g6e.24xlarge for a TP-4 replica (they differ in CPUs and memory only)."""
    instance = instance_catalog().instances.get(instance_type or "")
    if instance is None or instance.gpu_count < hw.tensor_parallel:
        return False
    try:
        other = hardware(
            hw.model,
            hw.quantization,
            instance,
            hw.tensor_parallel,
            hw.pipeline_parallel,
            hw.efficiencies,
            hw.kv_cache_dtype,
        )
    except PerformanceError:
        return False
    return other == hw


def _assumed_setup(
    hw: Hardware, measurements: Sequence[Measurement], instance_type: str, limits: SchedulerLimits
) -> list[str]:
    """What the refit assumes about the measured replica: the instance type and --max-num-seqs a
    report does not record, taken as ``instance_type``'s and ``limits``'s (the plan's or the
    command's); and another size of ``hw``'s GPUs and interconnect, taken as the same replica,
    which it is only to the replica model; and a recorded --max-num-seqs other than ``limits``'s, a
    hint that the replica measured was deployed with other settings. One note each."""
    notes = []
    if any(m.instance_type is None for m in measurements):
        notes.append(
            f"the load test does not say which instance type it ran on: taken as {instance_type} "
            "(record it with python -m automation loadtest --instance-type)"
        )
    if any(m.max_num_seqs is None for m in measurements):
        notes.append(
            f"the load test does not say the replica's --max-num-seqs: taken as {limits.max_num_seqs} "
            "(record it with python -m automation loadtest --max-num-seqs)"
        )
    caps = {m.max_num_seqs for m in measurements if m.max_num_seqs is not None}
    if others := sorted(caps - {limits.max_num_seqs}):
        notes.append(
            f"the load test's replica ran with --max-num-seqs {', '.join(map(str, others))} and the one "
            f"answered for has {limits.max_num_seqs}: its points are refitted under what they ran with. "
            "Right for a replica capped for the test; a replica deployed with other settings "
            "(model.kvCacheDtype, model.maxModelLen, model.minFullLengthSequences) is another replica, "
            "whose speed this is not"
        )
    recorded = {m.instance_type for m in measurements if m.instance_type is not None}
    sizes = sorted(recorded - {instance_type})
    if sizes:
        notes.append(
            f"the load test ran on {', '.join(sizes)}: taken as {instance_type}'s replica "
            f"({hw.gpus}x {hw.gpu.name}, the same interconnect); their vCPUs and memory differ, which "
            "the replica model does not see (tokenization and the API server run on the CPUs)"
        )
    return notes


def refit(
    hw: Hardware,
    limits: SchedulerLimits,
    measurements: Sequence[Measurement],
    source: str,
    instance_type: str | None = None,
) -> Hardware:
    """``hw`` with efficiencies refitted to the measured points, each at the mean lengths its
    requests had and their distribution, under the scheduler limits the replica ran with: the
    report's --max-num-seqs where it records one, else ``limits``'s (the plan's). The fit starts
    from the bundled efficiencies, so few points move only what they measure.

    Refuses points whose report names another served model than ``hw``'s variant, or another
    instance type than ``instance_type`` (the type ``hw`` is on, where the caller knows it): their
    speed is another model's or another machine's."""
    variant = hw.model.variant
    others = sorted({m.model for m in measurements if m.model is not None and m.model != variant})
    if others:
        raise LoadTestReportError(
            f"the load test measured {', '.join(others)} (its report's config.model), not "
            f"{variant}: the refit would take that model's speed for this one's. Load test a "
            f"replica serving {variant}"
        )
    if instance_type is not None:
        machines = sorted(
            {
                m.instance_type
                for m in measurements
                if m.instance_type not in (None, instance_type) and not _same_replica(hw, m.instance_type)
            }
        )
        if machines:
            raise LoadTestReportError(
                f"the load test ran on {', '.join(machines)} (its report's config.instance_type), not "
                f"{instance_type}, whose replica has other GPUs or another interconnect: the refit would "
                f"take that machine's speed for this one's. Load test a replica on {instance_type} (or "
                "a type with the same GPUs and interconnect), or size for the type it ran on"
            )
    points = [
        Point(
            f"c{m.concurrency}",
            hw,
            limits if m.max_num_seqs is None else replace(limits, max_num_seqs=m.max_num_seqs),
            m.concurrency,
            max(1, round(m.prompt_tokens)),
            max(1, round(m.output_tokens)),
            m.output_tokens_per_s,
            m.source,
            exponential_lengths=m.exponential_lengths,
        )
        for m in measurements
    ]
    return hw.with_efficiencies(fit_points(points, f"calibrated to {source}", hw.efficiencies))


@dataclass(frozen=True)
class Refitted:
    """A replica refitted to a load-test report, and what the command that asked must tell the
    user about it."""

    hardware: Hardware
    # Lines for stderr, each with its "warning: " or "note: " prefix and the report named: points
    # taken at the planning lengths, and settings of the measured replica taken as the plan's.
    messages: tuple[str, ...]


def refit_report(
    hw: Hardware,
    limits: SchedulerLimits,
    measurements: Sequence[Measurement],
    flag: str,
    path: Path,
    instance_type: str,
) -> Refitted:
    """``hw`` (on ``instance_type``, under ``limits``) refitted to the points of the report at
    ``path`` (given with ``flag``), as every command that takes a load test does it:
    ``python -m sizing capacity|throughput --load-test``, ``python -m automation capacity
    --load-test`` and ``simulate --calibration``. Raises LoadTestReportError naming the report when
    the refit refuses it (another model, another machine)."""
    where = f"{flag} {path}"
    try:
        refitted = refit(hw, limits, measurements, f"measured: {path.name}", instance_type)
    except LoadTestReportError as error:
        raise LoadTestReportError(f"{where}: {error}") from None
    warning = _lengthless_warning(measurements, flag, path)
    notes = [f"note: {where}: {note}" for note in _assumed_setup(hw, measurements, instance_type, limits)]
    return Refitted(refitted, tuple([warning] if warning else []) + tuple(notes))
