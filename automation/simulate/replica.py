"""What one vLLM replica delivers: aggregate output tokens/s as a function of how many sequences
it decodes at once (continuous batching), bounded by the plan's ``max_num_seqs`` and KV cache.

The curve is interpolated linearly between measured points and held flat past the last one
(no extrapolated gains). Points come from a calibration the user measured
(``python -m automation loadtest`` JSON, or any JSON with ``points``) or from the published
figures bundled below, each with its source. A stack with neither is refused: an unsourced
curve would make every figure the simulator prints unfounded.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


@dataclass(frozen=True)
class PublishedFigure:
    variant: str
    gpu_model: str
    gpus: int
    quantizations: tuple[str, ...]
    curve: ThroughputCurve


# Published decode throughput, as (concurrent requests, output tokens/s of the replica).
PUBLISHED: tuple[PublishedFigure, ...] = (
    PublishedFigure(
        "r1-distill-llama-70b",
        "L40S",
        4,
        ("bf16",),
        ThroughputCurve(
            ((1, 20.0), (4, 55.0), (64, 453.0)),
            "DeepSeek-R1-Distill-Llama-70B on 4x L40S: ~20 tok/s at 1, ~55 at 4, 453 at 64 concurrent "
            "(huggingface.co/deepseek-ai/DeepSeek-R1/discussions/32, vendor comment; indicative)",
        ),
    ),
    PublishedFigure(
        "r1-671b",
        "H100",
        8,
        ("awq-int4",),
        ThroughputCurve(
            ((1, 33.0), (15, 250.0), (100, 620.0)),
            "DeepSeek-R1 671B AWQ on 8x H100, vLLM 0.7.3 TP8, 1024 in / 256 out: 33 tok/s single user, "
            "~250 at 15, ~620 plateau at ~100 concurrent (github.com/dzhsurf/"
            "deepseek-v3-r1-deploy-and-benchmarks README)",
        ),
    ),
)


def published_curve(plan: Mapping[str, Any]) -> ThroughputCurve:
    """The bundled curve for the plan's (plan.json fields) variant, GPU model, GPU count and
    quantization."""
    variant, gpu, gpus, quant = (
        plan["variant"],
        plan["gpu_model"],
        plan["gpus_per_replica"],
        plan["quantization"],
    )
    for fig in PUBLISHED:
        if (fig.variant, fig.gpu_model, fig.gpus) == (variant, gpu, gpus) and quant in fig.quantizations:
            return fig.curve
    known = "; ".join(
        f"{f.variant} on {f.gpus}x {f.gpu_model} ({'/'.join(f.quantizations)})" for f in PUBLISHED
    )
    raise NoThroughputData(
        f"no published throughput figures for {variant} ({quant}) on {gpus}x {gpu}; bundled: {known}. "
        "Measure the deployed stack with "
        "`python -m automation loadtest --concurrency ... --out out.json` and pass "
        "`--calibration out.json`."
    )


def load_calibration(path: Path) -> ThroughputCurve:
    """A curve from JSON: ``{"points": [{"concurrency": n, "output_tokens_per_s": t}, ...]}``
    (a load-test report carries them) or a list of load-test reports."""
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CalibrationError(f"--calibration {path}: {e}") from None
    reports = data if isinstance(data, list) else [data]
    points: dict[int, float] = {}
    for report in reports:
        for p in report.get("points", []) if isinstance(report, dict) else []:
            try:
                points[int(p["concurrency"])] = float(p["output_tokens_per_s"])
            except (KeyError, TypeError, ValueError):
                raise CalibrationError(
                    f"--calibration {path}: each point needs concurrency and output_tokens_per_s"
                ) from None
    if not points:
        raise CalibrationError(f"--calibration {path}: no points (expected a load-test JSON report)")
    return ThroughputCurve(tuple(sorted(points.items())), f"measured: {path.name}")


@dataclass(frozen=True)
class ReplicaModel:
    """One replica's serving limits, all from the plan except the curve."""

    curve: ThroughputCurve
    max_num_seqs: int
    kv_cache_tokens: int
    max_model_len: int

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], curve: ThroughputCurve) -> ReplicaModel:
        return cls(curve, int(plan["max_num_seqs"]), int(plan["kv_cache_tokens"]), int(plan["max_model_len"]))

    def saturated_tokens_per_s(self) -> float:
        return self.curve.aggregate(self.max_num_seqs)
