"""Properties of the sizing maths that must hold for every variant, family set and context."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eks.sizing import (
    GPU_FAMILIES,
    VARIANTS,
    PlanRequest,
    Quantization,
    SizingPlan,
    evaluate,
    instance_catalog,
    model_catalog,
    plan,
)
from deepseek_eks.sizing.catalog import InstanceType
from deepseek_eks.sizing.memory import kv_bytes_per_token_per_gpu, load_peak_bytes_per_gpu
from deepseek_eks.sizing.planner import Fit, Rejection
from tests.upstream import cuda_gpu_memory_gib, model_configs

CATALOG = instance_catalog()
INSTANCES = sorted(CATALOG.instances)

variants = st.sampled_from(VARIANTS)
quantizations = st.sampled_from(list(Quantization))
context = st.sampled_from([2048, 8192, 16384, 32768, 65536, 131072])
families = st.lists(st.sampled_from(GPU_FAMILIES), min_size=1, max_size=4, unique=True).map(tuple)


def before_and_after(
    variant: str,
    quantization: Quantization,
    name: str,
    max_len: int,
    change: Callable[[InstanceType], InstanceType],
) -> tuple[Fit | Rejection, Fit | Rejection]:
    """``evaluate`` on one instance type as catalogued and after ``change``."""
    model = model_catalog()[variant]
    instance = CATALOG.instances[name]
    request = PlanRequest(variant, (instance.family,), quantization, max_model_len=min(max_len, 131072))
    return evaluate(model, quantization, instance, request), evaluate(
        model, quantization, change(instance), request
    )


@settings(max_examples=300, deadline=None)
@given(variants, quantizations, st.sampled_from(INSTANCES), context, st.integers(1, 64 * 1024))
def test_more_gpu_memory_never_makes_a_fit_infeasible(variant, quantization, name, max_len, extra_mib):
    before, after = before_and_after(
        variant, quantization, name, max_len, lambda i: i.with_cuda_memory_mib(i.cuda_memory_mib + extra_mib)
    )
    if isinstance(before, Fit):
        assert isinstance(after, Fit)
        # KV capacity grows with memory (never shrinks) at the same parallelism.
        if after.pipeline_parallel == before.pipeline_parallel:
            assert after.kv_tokens >= before.kv_tokens
        assert after.replica_usd_per_hour <= before.replica_usd_per_hour


@settings(max_examples=200, deadline=None)
@given(variants, quantizations, families, context)
def test_chosen_type_is_never_dearer_than_a_feasible_alternative(variant, quantization, fams, max_len):
    request = PlanRequest(variant, fams, quantization, max_model_len=min(max_len, 131072))
    result = plan(request)
    if not isinstance(result, SizingPlan):
        return
    model = result.model
    for instance in CATALOG.in_families(fams):
        alternative = evaluate(model, quantization, instance, request)
        if isinstance(alternative, Fit):
            assert alternative.replica_usd_per_hour >= result.chosen.replica_usd_per_hour


@settings(max_examples=200, deadline=None)
@given(variants, quantizations, families, context, st.integers(1, 4))
def test_no_plan_overcommits_gpu_memory(variant, quantization, fams, max_len, sequences):
    """Weights plus the KV cache the plan promises fit in what vLLM may use on every pool type."""
    request = PlanRequest(variant, fams, quantization, max_model_len=min(max_len, 131072),
                          min_full_length_sequences=sequences)  # fmt: skip
    result = plan(request)
    if not isinstance(result, SizingPlan):
        return
    model = model_catalog()[variant]
    for fit in result.fits:
        per_token = kv_bytes_per_token_per_gpu(model, fit.tensor_parallel, fit.pipeline_parallel)
        # What CUDA exposes on this GPU, from the observed logs (never the EC2 API's figure).
        exposed = cuda_exposed_bytes(fit.instance.gpu_model, fit.instance.gpu_memory_mib)
        budget = math.ceil(exposed * request.gpu_memory_utilization)
        steady = fit.weights_per_gpu + fit.overhead_per_gpu + result.kv_cache_tokens * per_token
        assert steady <= budget
        load = load_peak_bytes_per_gpu(model, quantization, fit.tensor_parallel, fit.pipeline_parallel)
        assert load <= exposed
        assert result.kv_cache_tokens >= request.required_kv_tokens


@settings(max_examples=100, deadline=None)
@given(variants, families, st.sampled_from([2048, 8192, 32768]), st.sampled_from([65536, 131072]))
def test_a_shorter_context_never_loses_feasibility(variant, fams, short, long):
    at_long = plan(PlanRequest(variant, fams, max_model_len=long))
    at_short = plan(PlanRequest(variant, fams, max_model_len=short))
    if at_long.feasible:
        assert at_short.feasible


def cuda_exposed_bytes(gpu_model: str, ec2_mib: int) -> int:
    key = f"A100-{round(ec2_mib / 1024)}GB" if gpu_model == "A100" else gpu_model
    return math.floor(cuda_gpu_memory_gib()[key] * 1024) * 1024**2


def vllm_refuses(cfg: dict, tp: int, quantization: str) -> bool:
    """vLLM 0.33.0's acceptance of a tensor-parallel size, written from its source (see
    reference/upstream/vllm-0.33.0/FACTS.md, "Tensor parallelism") over the config.json facts:
    heads split evenly (config/model.py); KV heads split or replicate (layers/linear.py
    QKVParallelLinear); column-parallel sizes split (MergedColumnParallelLinear); AWQ row-parallel
    input slices are whole 128-groups (quantization/auto_awq.py)."""
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    if heads % tp:
        return True
    if "kv_lora_rank" not in cfg and kv % tp and tp % kv:
        return True
    if cfg["intermediate_size"] % tp or cfg.get("moe_intermediate_size", 0) % tp:
        return True
    if quantization == "awq-int4":
        width = heads * cfg["head_dim"]
        return bool((cfg["intermediate_size"] // tp) % 128 or (width // tp) % 128)
    return False


@settings(max_examples=300, deadline=None)
@given(variants, quantizations, families, context)
def test_every_chosen_tensor_parallel_size_is_one_vllm_accepts(variant, quantization, fams, max_len):
    result = plan(PlanRequest(variant, fams, quantization, max_model_len=min(max_len, 131072)))
    cfg = model_configs()[model_catalog()[variant].hf_repo]
    for fit in result.fits if isinstance(result, SizingPlan) else ():
        assert not vllm_refuses(cfg, fit.tensor_parallel, result.quantization.value), (variant, fit)


@settings(max_examples=200, deadline=None)
@given(variants, quantizations, st.sampled_from(INSTANCES), context, st.integers(-8 * 1024, 64 * 1024))
def test_the_ec2_memory_figure_never_moves_the_budget(variant, quantization, name, max_len, delta_mib):
    """Only CUDA's figure is a budget: EC2's GpuInfo memory may say anything."""
    before, after = before_and_after(
        variant, quantization, name, max_len, lambda i: i.with_gpu_memory_mib(i.gpu_memory_mib + delta_mib)
    )
    assert type(before) is type(after)
    if isinstance(before, Fit) and isinstance(after, Fit):
        assert (before.kv_tokens, before.kv_bytes_per_gpu) == (after.kv_tokens, after.kv_bytes_per_gpu)
