"""``python -m sizing calibrate``: a vLLM log's own figures replace the overhead model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
from deepseek_eks.sizing.calibration import CalibrationError, measure
from tests.upstream import cuda_gpu_memory_gib

GIB = 1024**3

# Shaped like vLLM 0.33.0's INFO lines (format strings of vllm/v1/worker/gpu_model_runner.py and
# vllm/v1/worker/gpu_worker.py); the figures are this test's own.
LOG = "\n".join(
    [
        "INFO 12-01 10:00:00 [startup.py:96] non-default args: {'model': "
        "'deepseek-ai/DeepSeek-R1-Distill-Llama-8B', 'max_model_len': 32768, 'gpu_memory_utilization': 0.9}",
        "(EngineCore pid=1) INFO 12-01 10:00:40 [gpu_model_runner.py:5089] "
        "Model loading took 14.99 GiB memory and 35.123456 seconds",
        "(EngineCore pid=1) INFO 12-01 10:01:10 [gpu_worker.py:773] Available KV cache memory: 4.10 GiB",
    ]
)


def test_measure_reads_weights_kv_and_args_from_the_log() -> None:
    c = measure(LOG, variant="r1-distill-llama-8b", gpu_model="A10G", log_name="vllm.log")
    budget_gib = math.floor(cuda_gpu_memory_gib()["A10G"] * 1024) / 1024 * 0.9
    assert (c.tensor_parallel_size, c.pipeline_parallel_size, c.gpu_memory_utilization) == (1, 1, 0.9)
    assert c.overhead_gib == pytest.approx(budget_gib - 14.99 - 4.10, abs=1e-3)


def test_a_log_without_the_lines_is_refused() -> None:
    with pytest.raises(CalibrationError, match="Available KV cache memory"):
        measure(LOG.splitlines()[1], variant="r1-distill-llama-8b", gpu_model="A10G", log_name="x.log")
    with pytest.raises(CalibrationError, match="not a known GPU"):
        measure(LOG, variant="r1-distill-llama-8b", gpu_model="A10", log_name="x.log")


def test_calibrate_command_writes_a_file_the_planner_uses(tmp_path: Path) -> None:
    log, out = tmp_path / "vllm.log", tmp_path / "calibration.json"
    log.write_text(LOG)
    cmd = [sys.executable, "-m", "sizing", "calibrate", "--log", str(log), "--variant", "r1-distill-llama-8b",
           "--gpu-model", "A10G", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(out.read_text())["entries"][0]
    assert (entry["variant"], entry["gpu_model"], entry["tensor_parallel_size"]) == (
        "r1-distill-llama-8b",
        "A10G",
        1,
    )

    modelled = plan(PlanRequest("r1-distill-llama-8b", ("g5",), max_model_len=8192))
    measured = plan(
        PlanRequest("r1-distill-llama-8b", ("g5",), max_model_len=8192, calibration_file=str(out))
    )
    assert isinstance(modelled, SizingPlan) and isinstance(measured, SizingPlan)
    assert measured.to_dict()["runtime_overhead_source"] == "calibrated"
    assert measured.chosen.overhead_per_gpu == int(entry["overhead_gib"] * GIB)
    per_token = 32 * 2 * 8 * 128 * 2  # Llama-8B: 32 layers x K,V x 8 KV heads x 128 x 2 bytes
    shift = (modelled.chosen.overhead_per_gpu - measured.chosen.overhead_per_gpu) / per_token
    assert measured.kv_cache_tokens - modelled.kv_cache_tokens == pytest.approx(shift, abs=1)


def test_calibrate_command_reports_a_missing_log_with_exit_2(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "sizing", "calibrate", "--log", str(tmp_path / "none.log"), "--variant",
           "r1-distill-llama-8b", "--gpu-model", "A10G", "--out", str(tmp_path / "c.json")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--log" in proc.stderr


def test_tensor_parallel_logs_take_the_most_loaded_rank() -> None:
    ranks = "\n".join(
        f"(Worker_TP{r} pid={r}) INFO [gpu_worker.py:773] Available KV cache memory: {kv} GiB"
        for r, kv in enumerate((21.5, 21.2, 21.5, 21.4))
    )
    log = (
        "INFO [startup.py:96] non-default args: {'tensor_parallel_size': 4, 'gpu_memory_utilization': 0.92}\n"
        "(Worker_TP0 pid=0) INFO [gpu_model_runner.py:5089] "
        "Model loading took 16.43 GiB memory and 60.0 seconds\n"
        f"{ranks}\n"
    )
    c = measure(log, variant="r1-distill-llama-70b", gpu_model="L40S", log_name="tp4.log")
    assert (c.tensor_parallel_size, c.gpu_memory_utilization, c.available_kv_cache_gib) == (4, 0.92, 21.2)
    total_gib = math.floor(cuda_gpu_memory_gib()["L40S"] * 1024) / 1024
    assert c.overhead_gib == pytest.approx(total_gib * 0.92 - 16.43 - 21.2, abs=1e-3)
