"""Fit the replica model's efficiencies to published measurements, and report its error on them.

``python -m sizing.fit`` searches the five efficiencies (bandwidth, compute, per-step overhead,
all-reduce latency, per-sequence host cost) that minimise the absolute log error of the model's
output tokens/s (robust to one outlying source) over ``sizing/data/measurements.json`` and writes
them to ``sizing/data/efficiency.json``. ``python -m sizing.bench [--json]`` prints the model's
error on every point (a report, not a test). A user's load-test calibration is fitted the same
way (``fit_points``) and overrides the bundle.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
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
    Efficiencies,
    Hardware,
    PerformanceError,
    SchedulerLimits,
    default_max_num_batched_tokens,
    gpu_specs,
    interconnect_gb_s,
    kernel_class,
    read_data,
    steady_state,
)

EFFICIENCY_FILE = Path(__file__).parent / "data" / "efficiency.json"
# Memory a vLLM engine keeps beyond weights and KV (activations, CUDA graphs) for points whose
# KV cache the source does not state; the planner's own overhead model is per instance type.
POINT_OVERHEAD_BYTES = 2 * GIB
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default below 70 GiB (EngineArgs.get_batch_defaults)

BANDWIDTH_GRID = tuple(x / 100 for x in range(30, 101, 5))
COMPUTE_GRID = tuple(x / 100 for x in range(5, 91, 5))
OVERHEAD_GRID = tuple(x / 1000 for x in (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30))
ALLREDUCE_GRID = tuple(x * 1e-6 for x in (0, 5, 10, 20, 40, 60, 80))
PER_SEQUENCE_GRID = tuple(x * 1e-6 for x in (0, 25, 50, 100, 150, 200, 300, 400, 600))


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
    hw = Hardware(model, q, gpu, tp, pp, link, efficiencies)
    cuda = _cuda_mib(p["gpu"])
    free = budget_bytes_per_gpu(cuda, DEFAULT_GPU_MEMORY_UTILIZATION) - weight_bytes_per_gpu(model, q, tp, pp)
    kv_tokens = max(0, free - POINT_OVERHEAD_BYTES) // kv_bytes_per_token_per_gpu(model, tp, pp)
    base = p["gpu"].split("-")[0]
    limits = SchedulerLimits(
        int(p.get("max_num_seqs", DEFAULT_MAX_NUM_SEQS)),
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
    )


def bundled_points(efficiencies: Efficiencies) -> list[Point]:
    return [point_from_json(p, efficiencies) for p in read_data("measurements.json")["points"]]


def predicted(point: Point, eff: Efficiencies) -> float:
    hw = point.hardware.with_efficiencies(eff)
    state = steady_state(hw, point.limits, point.concurrency, point.prompt_tokens, point.output_tokens)
    return state.output_tokens_per_second


def _loss(points: Sequence[Point], eff: Efficiencies) -> float:
    return sum(abs(math.log(predicted(p, eff) / p.measured)) for p in points)


def _eff(v: Sequence[float], source: str) -> Efficiencies:
    return Efficiencies(v[0], v[1], v[2], v[3], source, v[4])


def fit_points(points: Sequence[Point], source: str, start: Efficiencies | None = None) -> Efficiencies:
    """The grid efficiencies with the least absolute log error over ``points`` (coordinate descent
    from the coarse grid's best, so a handful of points still gives a stable answer)."""
    if not points:
        raise PerformanceError("no measurements to fit")
    grids = (BANDWIDTH_GRID, COMPUTE_GRID, OVERHEAD_GRID, ALLREDUCE_GRID, PER_SEQUENCE_GRID)
    best = start or Efficiencies(0.7, 0.5, 0.004, 2e-5, source)
    values = [
        best.bandwidth,
        best.compute,
        best.step_overhead_s,
        best.allreduce_latency_s,
        best.per_sequence_s,
    ]
    best_loss = _loss(points, _eff(values, source))
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
                "source": p.source,
            }
        )
    return rows


def fit_main(argv: list[str] | None = None) -> int:
    """``python -m sizing.fit [--check]``: fit and write sizing/data/efficiency.json."""
    ap = argparse.ArgumentParser(prog="python -m sizing.fit", description=__doc__)
    ap.add_argument("--dry-run", action="store_true", help="print the fit, do not write it")
    args = ap.parse_args(argv)
    start = Efficiencies(0.7, 0.5, 0.004, 2e-5, "start")
    points = bundled_points(start)
    source = (
        f"fit to the {len(points)} points of sizing/data/measurements.json by python -m sizing.fit "
        "(least absolute log error of output tokens/s), dense and MoE models separately"
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
            "points": len(own),
        }
    text = json.dumps(doc, indent=2) + "\n"
    if not args.dry_run:
        EFFICIENCY_FILE.write_text(text)
    sys.stdout.write(text)
    return 0


def bench_main(argv: list[str] | None = None) -> int:
    """``python -m sizing.bench [--json]``: the model's error on every bundled measurement."""
    ap = argparse.ArgumentParser(prog="python -m sizing.bench", description=bench_main.__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from .performance import fitted_efficiencies

    rows = []
    for p in bundled_points(fitted_efficiencies()):
        eff = fitted_efficiencies(kernel_class(p.hardware.model))
        rows += report([p], eff)
    errors = [abs(r["error_percent"]) for r in rows]
    summary = {
        "efficiencies": {k: fitted_efficiencies(k).__dict__ for k in ("dense", "moe")},
        "points": rows,
        "mean_abs_error_percent": round(sum(errors) / len(errors), 1),
        "max_abs_error_percent": max(errors),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{'point':<22}{'conc':>6}{'measured':>10}{'model':>10}{'error':>8}")
    for r in rows:
        print(
            f"{r['id']:<22}{r['concurrency']:>6}{r['measured_output_tokens_per_second']:>10.1f}"
            f"{r['model_output_tokens_per_second']:>10.1f}{r['error_percent']:>7.1f}%"
        )
    print(f"mean |error| {summary['mean_abs_error_percent']} %, max {summary['max_abs_error_percent']} %")
    return 0


if __name__ == "__main__":
    sys.exit(fit_main())
