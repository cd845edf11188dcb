"""Fit the replica model's efficiencies to published measurements, and report its error out of sample.

``python -m sizing.fit`` searches the efficiencies (GEMM and attention bandwidth, compute) and the
host term (per-step overhead, per-sequence cost up to ``PER_SEQUENCE_BOUND_S``) that minimise the
absolute log error of the model's output tokens/s over the points of
``sizing/data/measurements.json`` whose split is ``fit``, and writes them to
``sizing/data/efficiency.json``. The all-reduce latency is not fitted: it is the cited figure of
each interconnect (``performance.allreduce_latency_s``).
``python -m sizing.bench [--json]`` prints the error on the held-out points (never used to fit,
chosen by source before fitting) beside the in-sample error, each labelled (a report, not a test).
A user's load-test calibration is fitted the same way (``fit_points``) and overrides the bundle.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .catalog import cuda_memory_table, model_catalog
from .memory import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    GIB,
    Quantization,
    budget_bytes_per_gpu,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)
from .performance import (
    PER_SEQUENCE_BOUND_S,
    Efficiencies,
    Hardware,
    PerformanceError,
    SchedulerLimits,
    allreduce_bus_efficiency,
    allreduce_latency_s,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    gpu_specs,
    interconnect_gb_s,
    kernel_class,
    read_data,
    steady_state,
    step_seconds,
)

EFFICIENCY_FILE = Path(__file__).parent / "data" / "efficiency.json"
# Memory a vLLM engine keeps beyond weights and KV (activations, CUDA graphs) for points whose
# KV cache the source does not state; the planner's own overhead model is per instance type.
POINT_OVERHEAD_BYTES = 2 * GIB
BANDWIDTH_GRID = tuple(x / 100 for x in range(30, 101, 5))
COMPUTE_GRID = tuple(x / 100 for x in range(5, 91, 5))
OVERHEAD_GRID = tuple(x / 1000 for x in (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30))
# Extra latency per all-reduce beyond the interconnect's cited figure: not fitted (0).
ALLREDUCE_GRID = (0.0,)
ATTENTION_BANDWIDTH_GRID = tuple(x / 100 for x in range(20, 101, 5))
PER_SEQUENCE_GRID = tuple(x * 1e-6 for x in (0, 2, 5, 10, 15, 20) if x * 1e-6 <= PER_SEQUENCE_BOUND_S)


@dataclass(frozen=True)
class Point:
    """One measurement: the setup, the load and the replica's output tokens/s."""

    id: str
    hardware: Hardware
    limits: SchedulerLimits
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    measured: float
    source: str
    # "fit" (the fit uses it) or "held_out" (never used to fit: the out-of-sample error).
    split: str = "fit"
    # A decode step at batch ``concurrency`` (the source's TPOT), not a closed loop's rate.
    decode_step: bool = False
    # Requests' lengths drawn exponentially around the means (a load test's --lengths exponential).
    exponential_lengths: bool = False


def _cuda_mib(gpu: str) -> int:
    table = cuda_memory_table()
    # A40 (measurement only) has the L40S's 48 GB of GDDR6: the same CUDA total is assumed.
    return int(table.get(gpu, table["L40S"])["cuda_total_mib"])


def point_from_json(p: dict, efficiencies: Efficiencies) -> Point:
    """A measurement of ``measurements.json`` with the hardware and engine limits it ran on."""
    model = model_catalog()[p["variant"]]
    q = Quantization(p["quantization"]).resolve(model)
    tp, pp = int(p["tp"]), int(p.get("pp", 1))
    gpu = gpu_specs()[p["gpu"]]
    link = interconnect_gb_s(p["family"]) if tp > 1 else 0.0
    hw = Hardware(
        model,
        q,
        gpu,
        tp,
        pp,
        link,
        efficiencies,
        allreduce_latency_s(p["family"], tp),
        bool(p["async_scheduling"]),
        link_efficiency=allreduce_bus_efficiency(p["family"], tp),
    )
    cuda = _cuda_mib(p["gpu"])
    free = budget_bytes_per_gpu(cuda, DEFAULT_GPU_MEMORY_UTILIZATION) - weight_bytes_per_gpu(model, q, tp, pp)
    kv_tokens = max(0, free - POINT_OVERHEAD_BYTES) // kv_bytes_per_token_per_gpu(model, tp, pp)
    base = p["gpu"].split("-")[0]
    limits = SchedulerLimits(
        # The source's --max-num-seqs, else vLLM's default for the GPU (the points ran defaults).
        int(p.get("max_num_seqs", default_max_num_seqs(cuda, base))),
        default_max_num_batched_tokens(cuda, base),
        int(min(kv_tokens, 10**9)),
    )
    return Point(
        p["id"],
        hw,
        limits,
        int(p["concurrency"]),
        int(p["prompt_tokens"]),
        int(p["output_tokens"]),
        float(p["output_tokens_per_second"]),
        p["source"],
        p.get("split", "fit"),
        p.get("metric") == "decode_step",
    )


def bundled_points(efficiencies: Efficiencies) -> list[Point]:
    """The vetted points of measurements.json (fit and held-out); excluded ones are left out."""
    points = read_data("measurements.json")["points"]
    return [point_from_json(p, efficiencies) for p in points if "excluded" not in p]


def predicted(point: Point, eff: Efficiencies) -> float:
    """The model's output tokens/s for ``point``: a closed loop's steady state, or for a decode
    step point, the batch over one decode step at the sequences' mean context."""
    hw = point.hardware.with_efficiencies(eff)
    if point.decode_step:
        n = point.concurrency
        context = n * (point.prompt_tokens + point.output_tokens / 2)
        return n / step_seconds(hw, n, context, context, n)
    state = steady_state(
        hw,
        point.limits,
        point.concurrency,
        point.prompt_tokens,
        point.output_tokens,
        exponential_lengths=point.exponential_lengths,
    )
    return state.output_tokens_per_second


def _loss(points: Sequence[Point], eff: Efficiencies) -> float:
    return sum(abs(math.log(predicted(p, eff) / p.measured)) for p in points)


def _eff(v: Sequence[float], source: str) -> Efficiencies:
    return Efficiencies(v[0], v[1], v[2], v[3], source, v[4], v[5])


def fit_points(points: Sequence[Point], source: str, start: Efficiencies | None = None) -> Efficiencies:
    """The grid efficiencies with the least absolute log error over ``points`` (coordinate descent
    from the coarse grid's best, so a handful of points still gives a stable answer)."""
    if not points:
        raise PerformanceError("no measurements to fit")
    grids = (
        BANDWIDTH_GRID,
        COMPUTE_GRID,
        OVERHEAD_GRID,
        ALLREDUCE_GRID,
        PER_SEQUENCE_GRID,
        ATTENTION_BANDWIDTH_GRID,
    )
    best = start or Efficiencies(0.7, 0.5, 0.004, 0.0, source)
    values = [
        best.bandwidth,
        best.compute,
        best.step_overhead_s,
        best.allreduce_latency_s,
        best.per_sequence_s,
        best.attention_bandwidth or best.bandwidth,
    ]
    best_loss = _loss(points, _eff(values, source))
    # Bandwidth efficiency and the fixed host cost trade against each other on single streams
    # (both set a step's floor): search them jointly first, so coordinate descent does not stop
    # in the valley its starting point lies in.
    for bw in BANDWIDTH_GRID:
        for overhead in OVERHEAD_GRID:
            trial = [bw, values[1], overhead, *values[3:]]
            loss = _loss(points, _eff(trial, source))
            if loss < best_loss - 1e-12:
                best_loss, values = loss, trial
    for _ in range(4):
        improved = False
        for i, grid in enumerate(grids):
            for v in grid:
                trial = list(values)
                trial[i] = v
                loss = _loss(points, _eff(trial, source))
                if loss < best_loss - 1e-12:
                    best_loss, values, improved = loss, trial, True
        if not improved:
            break
    return _eff(values, source)


def report(points: Iterable[Point], eff: Efficiencies) -> list[dict]:
    rows = []
    for p in points:
        got = predicted(p, eff)
        rows.append(
            {
                "id": p.id,
                "concurrency": p.concurrency,
                "measured_output_tokens_per_second": p.measured,
                "model_output_tokens_per_second": round(got, 1),
                "error_percent": round(100 * (got / p.measured - 1), 1),
                "split": p.split,
                "source": p.source,
            }
        )
    return rows


def fit_main(argv: list[str] | None = None) -> int:
    """``python -m sizing.fit [--check]``: fit and write sizing/data/efficiency.json."""
    ap = argparse.ArgumentParser(prog="python -m sizing.fit", description=__doc__)
    ap.add_argument("--dry-run", action="store_true", help="print the fit, do not write it")
    args = ap.parse_args(argv)
    start = Efficiencies(0.7, 0.5, 0.004, 0.0, "start")
    points = [p for p in bundled_points(start) if p.split == "fit"]
    source = (
        f"fit to the {len(points)} points marked fit in sizing/data/measurements.json by python -m "
        "sizing.fit (least absolute log error of output tokens/s), dense and MoE models separately; "
        "held-out points never used"
    )
    doc: dict = {"source": source}
    for kind in ("dense", "moe"):
        own = [p for p in points if kernel_class(p.hardware.model) == kind]
        eff = fit_points(own, source, start)
        doc[kind] = {
            "bandwidth": eff.bandwidth,
            "compute": eff.compute,
            "step_overhead_s": eff.step_overhead_s,
            "allreduce_latency_s": round(eff.allreduce_latency_s, 7),
            "per_sequence_s": round(eff.per_sequence_s, 7),
            "attention_bandwidth": eff.attention_bandwidth,
            "points": len(own),
        }
    text = json.dumps(doc, indent=2) + "\n"
    if not args.dry_run:
        EFFICIENCY_FILE.write_text(text)
    sys.stdout.write(text)
    return 0


# The accuracy the replica model is judged by on points it was not fitted to: median |error| at
# most 20 %, worst at most 50 % of output tokens/s.
GOAL_MEDIAN_PERCENT = 20.0
GOAL_WORST_PERCENT = 50.0


def goal_verdict(held_out: dict) -> dict:
    """Whether the held-out error summary meets the goal, with the thresholds."""
    met = bool(
        held_out.get("points")
        and held_out["median_abs_error_percent"] <= GOAL_MEDIAN_PERCENT
        and held_out["worst_abs_error_percent"] <= GOAL_WORST_PERCENT
    )
    return {"median_max_percent": GOAL_MEDIAN_PERCENT, "worst_max_percent": GOAL_WORST_PERCENT, "met": met}


def error_summary(rows: Sequence[dict]) -> dict:
    """Median and worst |error| of ``rows`` and how many are within +-15 %."""
    errors = sorted(abs(r["error_percent"]) for r in rows)
    if not errors:
        return {"points": 0}
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
    return {
        "points": len(errors),
        "median_abs_error_percent": round(median, 1),
        "worst_abs_error_percent": errors[-1],
        "within_15_percent": sum(e <= 15 for e in errors),
    }


def bundled_rows(keep: Callable[[dict], bool] = lambda point: True) -> list[dict]:
    """``report`` rows of the vetted points of measurements.json that ``keep`` accepts (given
    each point's record), each predicted with the efficiencies fitted for its kernel class."""
    from .performance import fitted_efficiencies

    rows = []
    for record in read_data("measurements.json")["points"]:
        if "excluded" in record or not keep(record):
            continue
        point = point_from_json(record, fitted_efficiencies())
        rows += report([point], fitted_efficiencies(kernel_class(point.hardware.model)))
    return rows


# A plan's replica figures are the model's. Where a held-out measurement of the very setup a plan
# chose disagrees with it by more than this share, the plan says so (sizing/planner.py).
SETUP_DISAGREEMENT = 0.25


def setup_disagreement(variant: str, gpu: str, tp: int, pp: int, quantization: str) -> str | None:
    """What a plan on this setup (variant, GPU, tensor and pipeline parallel sizes, weights) should
    know when a held-out point of it misses the model by more than ``SETUP_DISAGREEMENT``: the
    worst such point, as a plan warning naming the fix; None otherwise."""
    records = {r["id"]: r for r in read_data("measurements.json")["points"]}

    def same_setup(record: dict) -> bool:
        return (
            record.get("split") == "held_out"
            and (record["variant"], record["gpu"], int(record["tp"]), int(record.get("pp", 1)))
            == (variant, gpu, tp, pp)
            and record["quantization"] == quantization
        )

    missed = [r for r in bundled_rows(same_setup) if abs(r["error_percent"]) > 100 * SETUP_DISAGREEMENT]
    if not missed:
        return None
    worst = max(missed, key=lambda r: abs(r["error_percent"]))
    measured, model = worst["measured_output_tokens_per_second"], worst["model_output_tokens_per_second"]
    gap = abs(1 - measured / model) * 100
    direction, reading = ("below", "optimistic") if measured < model else ("above", "pessimistic")
    notes = [worst["id"]]
    if records[worst["id"]].get("lengths_assumed"):
        notes.append("lengths not stated by its source")
    if len(missed) > 1:
        notes.append(f"{len(missed) - 1} more point of this setup off by over {SETUP_DISAGREEMENT:.0%}")
    notes.append("python -m sizing.bench")
    return (
        f"the replica model is unsure of {variant} on {tp}x {gpu} ({quantization}): a published "
        f"measurement of this setup, held out of its fit, ran {gap:.0f}% {direction} it at "
        f"{worst['concurrency']} concurrent streams, {measured:g} against {model:g} output tokens/s "
        f"({'; '.join(notes)}). The plan's requests_per_second and price per token may be as "
        f"{reading}: measure one replica with `python -m automation loadtest` and size on it "
        "(`python -m automation capacity --load-test`) before relying on autoscaling.maxReplicas"
    )


def bench_main(argv: list[str] | None = None) -> int:
    """``python -m sizing.bench [--json]``: the model's error on the held-out points (never used
    to fit) and, labelled apart, on the points it was fitted to."""
    ap = argparse.ArgumentParser(prog="python -m sizing.bench", description=bench_main.__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from .performance import fitted_efficiencies

    rows = bundled_rows()
    held = [r for r in rows if r["split"] == "held_out"]
    fitted = [r for r in rows if r["split"] == "fit"]
    excluded = [p["id"] for p in read_data("measurements.json")["points"] if "excluded" in p]
    summary: dict = {
        "efficiencies": {k: fitted_efficiencies(k).__dict__ for k in ("dense", "moe")},
        "points": rows,
        "held_out": error_summary(held),
        "in_sample": error_summary(fitted),
        "excluded": excluded,
    }
    summary["goal"] = goal_verdict(summary["held_out"])
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{'point':<22}{'split':<10}{'conc':>6}{'measured':>10}{'model':>10}{'error':>8}")
    for r in held + fitted:
        print(
            f"{r['id']:<22}{r['split']:<10}{r['concurrency']:>6}"
            f"{r['measured_output_tokens_per_second']:>10.1f}"
            f"{r['model_output_tokens_per_second']:>10.1f}{r['error_percent']:>7.1f}%"
        )
    for label, key in (("held-out (out of sample)", "held_out"), ("in-sample (fitted to)", "in_sample")):
        s = summary[key]
        print(
            f"{label}: {s['points']} points, median |error| {s['median_abs_error_percent']} %, "
            f"worst {s['worst_abs_error_percent']} %, {s['within_15_percent']} within +-15 %"
        )
    goal = summary["goal"]
    print(
        f"goal (held-out median <= {goal['median_max_percent']:g} %, worst <= "
        f"{goal['worst_max_percent']:g} %): {'met' if goal['met'] else 'NOT met'}"
    )
    print(f"excluded (vetting, see measurements.json): {', '.join(excluded) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(fit_main())
