"""Properties of the replica model over random loads: physics bounds and vLLM's limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eks.sizing.catalog import gpu_memory_key, instance_catalog, model_catalog
from deepseek_eks.sizing.memory import Quantization, weight_bytes_per_gpu
from deepseek_eks.sizing.performance import SchedulerLimits, hardware, steady_state

SPECS = json.loads((Path(__file__).resolve().parents[2] / "sizing/data/gpu_specs.json").read_text())
DENSE = [v for v, m in model_catalog().items() if not m.moe and m.parameters < 20e9]
SINGLE_GPU = ["g5.xlarge", "g6.xlarge", "g6e.xlarge", "p5.4xlarge"]


@settings(max_examples=60, deadline=None)
@given(
    variant=st.sampled_from(DENSE),
    instance=st.sampled_from(SINGLE_GPU),
    concurrency=st.integers(1, 512),
    prompt=st.integers(1, 4000),
    output=st.integers(1, 4000),
    max_num_seqs=st.integers(1, 256),
)
def test_steady_state_respects_bandwidth_and_vllm_limits(
    variant: str, instance: str, concurrency: int, prompt: int, output: int, max_num_seqs: int
) -> None:
    model = model_catalog()[variant]
    inst = instance_catalog().instances[instance]
    hw = hardware(model, Quantization.BF16, inst, 1)
    limits = SchedulerLimits(max_num_seqs, 2048, 200_000)
    state = steady_state(hw, limits, concurrency, prompt, output)
    assert 1 <= state.running <= min(concurrency, max_num_seqs)
    # Each step reads every weight byte once for all running sequences: per-sequence decode can
    # never beat datasheet bandwidth / weight bytes.
    bandwidth = SPECS["gpus"][gpu_memory_key(inst.gpu_model, inst.gpu_memory_mib)]["memory_gb_s"] * 1e9
    per_stream_bound = bandwidth / weight_bytes_per_gpu(model, Quantization.BF16, 1, 1)
    assert state.output_tokens_per_second <= state.running * per_stream_bound
    assert state.ttft_s > 0 and state.itl_s > 0
    assert state.requests_per_second * output == pytest.approx(state.output_tokens_per_second)
