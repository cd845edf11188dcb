"""Calibrate the runtime-overhead model from a real vLLM log.

vLLM 0.33.0 logs, per worker, ``Model loading took X GiB memory`` (vllm/v1/worker/gpu_model_runner.py)
and ``Available KV cache memory: X GiB`` (vllm/v1/worker/gpu_worker.py). With the GPU's CUDA total
and the utilization, the rest of the budget is the runtime overhead that replica really had:
``ceil(cuda_total x utilization) - weights - KV cache``. ``python -m sizing calibrate`` writes it to
a calibration file; the planner then uses it instead of the model for that variant, GPU and TP x PP.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from .catalog import VARIANTS, cuda_memory_table

GIB = 1024**3
BUNDLED = "data/calibration.json"

_LOADING = re.compile(r"Model loading took ([0-9.]+) GiB")
_KV = re.compile(r"Available KV cache memory: ([0-9.]+) GiB")
_ARGS = re.compile(r"non-default args: (\{.*\})")


class CalibrationError(ValueError):
    """A log or calibration file the calibration cannot use."""


@dataclass(frozen=True)
class Calibration:
    """One measured replica: its key and the overhead per GPU it showed."""

    variant: str
    gpu_model: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpu_memory_utilization: float
    cuda_total_gib: float
    model_loading_gib: float
    available_kv_cache_gib: float
    overhead_gib: float
    log: str

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.variant, self.gpu_model, self.tensor_parallel_size, self.pipeline_parallel_size)


def _non_default_args(text: str) -> dict:
    """The ``non-default args: {...}`` dict vLLM's CLI logs at start, when present."""
    match = _ARGS.search(text)
    if not match:
        return {}
    try:
        parsed = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def measure(
    log_text: str,
    *,
    variant: str,
    gpu_model: str,
    log_name: str,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    gpu_memory_utilization: float | None = None,
) -> Calibration:
    """Read one vLLM start-up log. Flags given here win over the log's ``non-default args``."""
    table = cuda_memory_table()
    if gpu_model not in table:
        raise CalibrationError(f"--gpu-model {gpu_model!r} is not a known GPU; known: {', '.join(table)}")
    if variant not in VARIANTS:
        raise CalibrationError(f"--variant {variant!r} is unknown; known: {', '.join(VARIANTS)}")
    loading = [float(x) for x in _LOADING.findall(log_text)]
    kv = [float(x) for x in _KV.findall(log_text)]
    if not loading or not kv:
        lines = (("'Model loading took X GiB'", loading), ("'Available KV cache memory: X GiB'", kv))
        missing = [name for name, found in lines if not found]
        raise CalibrationError(
            f"{log_name}: no {' or '.join(missing)} line; pass a vLLM start-up log (INFO level)"
        )
    logged = _non_default_args(log_text)
    tp = tensor_parallel_size or int(logged.get("tensor_parallel_size", 1))
    pp = pipeline_parallel_size or int(logged.get("pipeline_parallel_size", 1))
    util = gpu_memory_utilization or float(logged.get("gpu_memory_utilization", 0.9))
    total_gib = table[gpu_model]["cuda_total_mib"] / 1024
    # The most loaded rank: the most weights and the least KV cache of any worker line.
    overhead = total_gib * util - max(loading) - min(kv)
    if overhead < 0:
        raise CalibrationError(
            f"{log_name}: weights {max(loading)} GiB + KV cache {min(kv)} GiB exceed {util} x "
            f"{total_gib:.2f} GiB of a {gpu_model}: is --gpu-model or --gpu-memory-utilization wrong?"
        )
    return Calibration(
        variant=variant,
        gpu_model=gpu_model,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpu_memory_utilization=util,
        cuda_total_gib=round(total_gib, 3),
        model_loading_gib=max(loading),
        available_kv_cache_gib=min(kv),
        overhead_gib=round(overhead, 3),
        log=log_name,
    )


def _bundled_path() -> Path:
    return Path(str(resources.files(__package__ or "sizing").joinpath(BUNDLED)))


def _is_load_test_report(data: object) -> bool:
    """``python -m automation loadtest``'s report (or a list of them): ``points``, no ``entries``."""
    reports = data if isinstance(data, list) else [data]
    return any(isinstance(r, dict) and "points" in r and "entries" not in r for r in reports)


@cache
def load(path: str | None = None) -> dict[tuple[str, str, int, int], Calibration]:
    """The calibrations of ``path`` (default: the bundled ``sizing/data/calibration.json``)."""
    file = Path(path) if path else _bundled_path()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if _is_load_test_report(data):
            raise CalibrationError(
                f"calibration file {file} is a load-test report (throughput points), not a runtime-overhead "
                "calibration: give it to python -m automation simulate --calibration or python -m sizing "
                "capacity --load-test. A runtime-overhead calibration comes from python -m sizing calibrate "
                "(a vLLM start-up log)"
            )
        entries = [Calibration(**e) for e in data["entries"]]
    except FileNotFoundError as e:
        raise CalibrationError(f"calibration file {file} does not exist") from e
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CalibrationError(f"calibration file {file} is not a calibration file: {e}") from e
    return {c.key: c for c in entries}


def write(calibration: Calibration, path: str | None = None) -> Path:
    """Add ``calibration`` to the file at ``path`` (replacing one with the same key)."""
    file = Path(path) if path else _bundled_path()
    entries = dict(load(str(file))) if file.exists() else {}
    entries[calibration.key] = calibration
    about = (
        "Runtime overhead measured from real vLLM logs by `python -m sizing calibrate` (see README, Sizing)."
    )
    body = {"about": about, "entries": [asdict(c) for _, c in sorted(entries.items())]}
    file.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    load.cache_clear()
    return file


def overhead_bytes(path: str | None, variant: str, gpu_model: str, tp: int, pp: int) -> int | None:
    """Measured overhead per GPU for this replica shape, or None when it was never calibrated."""
    found = load(path).get((variant, gpu_model, tp, pp))
    return None if found is None else int(found.overhead_gib * GIB)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sizing calibrate",
        description="Measure vLLM's runtime overhead from its start-up log and store it for the planner.",
    )
    p.add_argument("--log", required=True, help="a vLLM start-up log (INFO level) of one replica")
    p.add_argument("--variant", required=True, choices=VARIANTS)
    p.add_argument("--gpu-model", required=True, help=f"one of: {', '.join(cuda_memory_table())}")
    p.add_argument(
        "--tensor-parallel-size", type=int, help="default: from the log's non-default args, else 1"
    )
    p.add_argument(
        "--pipeline-parallel-size", type=int, help="default: from the log's non-default args, else 1"
    )
    p.add_argument("--gpu-memory-utilization", type=float, help="default: from the log, else 0.9")
    p.add_argument(
        "--out", help="calibration file to update (default: the bundled sizing/data/calibration.json)"
    )
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        text = Path(args.log).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"error: --log {args.log}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        calibration = measure(
            text,
            variant=args.variant,
            gpu_model=args.gpu_model,
            log_name=Path(args.log).name,
            tensor_parallel_size=args.tensor_parallel_size,
            pipeline_parallel_size=args.pipeline_parallel_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
        )
        file = write(calibration, args.out)
    except CalibrationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"{calibration.variant} on {calibration.gpu_model} TP {calibration.tensor_parallel_size} "
        f"PP {calibration.pipeline_parallel_size}: runtime overhead {calibration.overhead_gib:.2f} GiB "
        f"per GPU -> {file}"
    )
    return 0
