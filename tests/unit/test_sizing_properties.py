"""Properties of the sizing maths that must hold for every variant, family set and context."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sizing import (
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
from sizing.memory import kv_bytes_per_token_per_gpu, usable_bytes_per_gpu
from sizing.planner import Fit

CATALOG = instance_catalog()
INSTANCES = sorted(CATALOG.instances)

variants = st.sampled_from(VARIANTS)
quantizations = st.sampled_from(list(Quantization))
context = st.sampled_from([2048, 8192, 16384, 32768, 65536, 131072])
families = st.lists(st.sampled_from(GPU_FAMILIES), min_size=1, max_size=4, unique=True).map(tuple)


@settings(max_examples=300, deadline=None)
@given(variants, quantizations, st.sampled_from(INSTANCES), context, st.integers(1, 64 * 1024))
def test_more_gpu_memory_never_makes_a_fit_infeasible(variant, quantization, name, max_len, extra_mib):
    model = model_catalog()[variant]
    instance = CATALOG.instances[name]
    request = PlanRequest(variant, (instance.family,), quantization, max_model_len=min(max_len, 131072))
    before = evaluate(model, quantization, instance, request)
    after = evaluate(
        model, quantization, instance.with_gpu_memory_mib(instance.gpu_memory_mib + extra_mib), request
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
    model = model_catalog()[variant]
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
        usable = usable_bytes_per_gpu(fit.instance.gpu_memory_mib, request.gpu_memory_utilization)
        assert fit.weights_per_gpu + result.kv_cache_tokens * per_token <= usable
        assert result.kv_cache_tokens >= request.required_kv_tokens


@settings(max_examples=100, deadline=None)
@given(variants, families, st.sampled_from([2048, 8192, 32768]), st.sampled_from([65536, 131072]))
def test_a_shorter_context_never_loses_feasibility(variant, fams, short, long):
    at_long = plan(PlanRequest(variant, fams, max_model_len=long))
    at_short = plan(PlanRequest(variant, fams, max_model_len=short))
    if at_long.feasible:
        assert at_short.feasible
