"""Sizing engine, exact values. Expected numbers are computed here from the published facts
(layers, heads, parameters, GPU MiB, prices) with the arithmetic written out, not copied from
the engine's output."""

from __future__ import annotations

import gzip
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.sizing import (
    Infeasible,
    PlanRequest,
    Quantization,
    SizingPlan,
    instance_catalog,
    model_catalog,
    plan,
)
from deepseek_eks.sizing.memory import (
    GIB,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    valid_tensor_parallel,
    weight_bytes,
)
from deepseek_eks.sizing.nodes import kube_reserved_millicores, pod_room
from tests.upstream import (
    cold_start_facts,
    cuda_gpu_memory_gib,
    karpenter_image_pull_s,
    model_configs,
    vllm_quantization_check,
)
from tests.upstream_platform import eni_limited_pods, platform_facts

MIB = 1024**2


def cuda_budget(gpu: str, utilization: float = 0.9) -> int:
    """vLLM's budget: ceil(CUDA total x utilization) (vllm/v1/worker/utils.py request_memory), from
    the observed CUDA total in MiB as the sizing data records it (floor of GiB x 1024)."""
    return math.ceil(math.floor(cuda_gpu_memory_gib()[gpu] * 1024) * MIB * utilization)


def runtime_overhead(repo: str, tp: int, batched_tokens: int) -> int:
    """The overhead from its measurements: A10G/Llama-8B TP1 left 20.1 - 14.99 - 4.17 GiB
    (awslabs/ai-on-eks) at 2048 batched tokens and 256 sequences over a 128256 vocabulary; shapes
    from vLLM's profiling run; 0.20 GiB of collectives when TP > 1 (vllm-project/vllm#14447)."""
    cfg = model_configs()[repo]
    fixed = (20.1 - 14.99 - 4.17) * GIB - 2048 * (4096 + 2 * 14336) * 2 - 256 * 128256 * 4
    activations = batched_tokens * (cfg["hidden_size"] + 2 * math.ceil(cfg["intermediate_size"] / tp)) * 2
    logits = 256 * math.ceil(cfg["vocab_size"] / tp) * 4
    return math.ceil(fixed) + activations + logits + (math.ceil(0.2 * GIB) if tp > 1 else 0)


# KV-cache bytes per token at 16 bits, from reference/models.json (2 x layers x KV heads x
# head_dim x 2 bytes; r1-671b: layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes).
PUBLISHED_KV_BYTES = {
    "r1-distill-qwen-1.5b": 28672,
    "r1-distill-qwen-7b": 57344,
    "r1-distill-llama-8b": 131072,
    "r1-distill-qwen-14b": 196608,
    "r1-distill-qwen-32b": 262144,
    "r1-distill-llama-70b": 327680,
    "r1-671b": 70272,
}


def feasible(result: SizingPlan | Infeasible) -> SizingPlan:
    assert isinstance(result, SizingPlan), getattr(result, "reasons", result)
    return result


@pytest.mark.parametrize(("variant", "expected"), PUBLISHED_KV_BYTES.items())
def test_kv_bytes_per_token_match_published_figures(variant: str, expected: int) -> None:
    assert kv_bytes_per_token(model_catalog()[variant]) == expected


def test_kv_bytes_split_across_tensor_parallel_ranks() -> None:
    llama70 = model_catalog()["r1-distill-llama-70b"]  # 80 layers, 8 KV heads, head_dim 128
    assert kv_bytes_per_token_per_gpu(llama70, tp=4, pp=1) == 80 * 2 * 2 * 128 * 2
    # TP 8 over 8 KV heads: one head per rank; vLLM cannot go below one (replication).
    assert kv_bytes_per_token_per_gpu(llama70, tp=8, pp=1) == 80 * 2 * 1 * 128 * 2
    r1 = model_catalog()["r1-671b"]  # MLA latent is replicated on every TP rank
    assert kv_bytes_per_token_per_gpu(r1, tp=8, pp=1) == 70272
    assert kv_bytes_per_token_per_gpu(r1, tp=8, pp=2) == 31 * 576 * 2  # ceil(61 / 2) layers


def test_bf16_weights_match_the_published_checkpoint_sizes() -> None:
    # Hub file sizes: 3.55 GB (1.5B) and 15.23 GB (7B) = parameters x 2 bytes.
    assert weight_bytes(model_catalog()["r1-distill-qwen-1.5b"], Quantization.BF16) == 3_554_176_000
    assert weight_bytes(model_catalog()["r1-distill-qwen-7b"], Quantization.AUTO) == 15_231_233_024


def test_quantized_weights_keep_embeddings_in_16_bits() -> None:
    m = model_catalog()["r1-distill-llama-70b"]
    embed = 2 * 128256 * 8192  # input embedding + untied lm_head
    linear = 70_553_706_496 - embed
    assert weight_bytes(m, Quantization.FP8) == math.ceil(linear * (1 + 4 / 16384) + embed * 2)
    assert weight_bytes(m, Quantization.AWQ_INT4) == math.ceil(linear * (0.5 + 2.5 / 128) + embed * 2)


def test_tensor_parallel_must_divide_heads() -> None:
    qwen7 = model_catalog()["r1-distill-qwen-7b"]  # 28 heads, 4 KV heads
    assert [tp for tp in (1, 2, 4, 8) if valid_tensor_parallel(qwen7, tp)] == [1, 2, 4]
    qwen15 = model_catalog()["r1-distill-qwen-1.5b"]  # 12 heads, 2 KV heads
    assert [tp for tp in (1, 2, 4, 8) if valid_tensor_parallel(qwen15, tp)] == [1, 2, 4]


def test_kube_reserved_cpu_follows_the_eks_formula() -> None:
    assert kube_reserved_millicores(4) == 60 + 10 + 5 + 5
    assert kube_reserved_millicores(48) == 80 + 44 * 2.5


def test_pod_room_on_g6_xlarge() -> None:
    g6 = instance_catalog().instances["g6.xlarge"]  # 4 vCPU, 16384 MiB
    room = pod_room(g6)
    assert room.millicores == 4000 - 80 - 1000
    # kube-reserved memory counts Karpenter's ENI-limited pods (snapshot), not kubelet's 110.
    facts = platform_facts()["karpenter"]["kube_reserved_memory_mib"]
    reserved = facts["base"] + facts["per_pod"] * eni_limited_pods("g6.xlarge")
    assert room.memory_mib == math.floor(16384 * 0.925) - reserved - 100 - 2048


def test_llama70b_on_g6e_uses_tp4_on_g6e_12xlarge_with_enough_kv() -> None:
    p = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",))))
    assert p.instance_type == "g6e.12xlarge"  # 4x L40S; 2x L40S (89 GiB) cannot hold 131 GiB
    assert p.tensor_parallel_size == 4
    assert p.pipeline_parallel_size == 1
    # The budget is CUDA's 44.34 GiB of an L40S, never EC2's 45776 MiB.
    usable = cuda_budget("L40S") - runtime_overhead("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 4, 2048)
    weights_per_gpu = 70_553_706_496 * 2 / 4
    expected_tokens = math.floor(usable - weights_per_gpu) // (80 * 2 * 2 * 128 * 2)
    assert abs(p.kv_cache_tokens - expected_tokens) <= 1
    at_ec2_figure = (45776 * MIB * 0.9 - (cuda_budget("L40S") - usable) - weights_per_gpu) // (
        80 * 2 * 2 * 128 * 2
    )
    assert p.kv_cache_tokens < at_ec2_figure - 1000  # EC2's figure would promise ~3,600 tokens more
    assert p.kv_cache_tokens >= 32768
    # g6e.24xlarge has the same 4 GPUs (more CPU/RAM): same vLLM args, so it joins the pool.
    assert p.instance_types == ["g6e.12xlarge", "g6e.24xlarge"]
    assert p.replica_hourly_usd == pytest.approx(10.49264, abs=1e-4)


def test_llama70b_never_lands_on_four_a10g() -> None:
    """4x A10G = 89.4 GiB cannot hold 131 GiB of bf16 weights (a setup some guides recommend)."""
    p = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g5",))))
    assert "g5.12xlarge" not in p.instance_types
    assert "g5.24xlarge" not in p.instance_types
    assert p.instance_type == "g5.48xlarge"
    assert p.tensor_parallel_size == 8


def test_llama70b_on_g4dn_is_infeasible_with_reasons_and_suggestions() -> None:
    result = plan(PlanRequest("r1-distill-llama-70b", ("g4dn",)))
    assert isinstance(result, Infeasible)
    # T4 serves bf16 checkpoints in float16 now; 131 GiB of weights over 8x 14.57 GiB do not fit.
    per_gpu = 70_553_706_496 * 2 / 8 / GIB  # bf16 weights over 8 GPUs
    assert result.reasons[0].startswith(f"g4dn: g4dn.metal (8x T4): {per_gpu:.1f} GiB of weights")
    text = "\n".join(result.suggestions)
    assert "set model.quantization=awq-int4: fits g4dn.12xlarge" in text
    assert "add g6e to gpu.instanceFamilies: fits g6e.12xlarge" in text


def test_fp8_runs_weight_only_on_ampere_for_dense_models_and_natively_on_ada() -> None:
    # vLLM 0.33.0 falls back to the FP8 Marlin kernel below compute capability 8.9 (from 7.5).
    on_a10g = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g5",), quantization=Quantization.FP8)))
    assert on_a10g.instance_type == "g5.xlarge"
    assert any("Marlin" in w for w in on_a10g.warnings)
    moe = plan(PlanRequest("r1-671b", ("p4de",)))  # the MoE is only planned on FP8 tensor cores
    assert isinstance(moe, Infeasible) and moe.reasons[0].startswith("p4de: A100 has no native FP8 kernels")
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), quantization=Quantization.FP8)))
    assert not any("Marlin" in w for w in p.warnings)
    # With FP8 tensor cores: the online scheme laid out as llm-compressor's FP8_DYNAMIC checkpoints,
    # which the published distill evaluations measured; on the Marlin fallback, one it accepts.
    shorthands = vllm_quantization_check()["online_fp8"]["shorthands"]
    native = shorthands[_quantization_flag(p)]
    assert native.get("layout") == "llm-compressor FP8_DYNAMIC"
    assert shorthands[_quantization_flag(on_a10g)]["runs_on_marlin_weight_only"]
    # One node pool, one set of arguments: an FP8-core type and a Marlin one never share a pool.
    mixed = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g5", "g6"), quantization=Quantization.FP8)))
    pool_gpus = {instance_catalog().instances[t].gpu_model for t in mixed.instance_types}
    assert not {"A10G", "L4"} <= pool_gpus


def _quantization_flag(p: SizingPlan) -> str | None:
    args = p.vllm_args
    return args[args.index("--quantization") + 1] if "--quantization" in args else None


def _fp8_checkpoints() -> list[tuple[str, str, str]]:
    """(variant, repository name or former name, quant_method) of every catalogued FP8 checkpoint:
    the formats as their model cards state them (sources in the file)."""
    data = Path(__file__).resolve().parents[2] / "sizing" / "data" / "checkpoints.json"
    table = json.loads(data.read_text())["checkpoints"]
    return [
        (variant, name, entry["quant_method"])
        for variant, entries in table.items()
        for kind, entry in entries.items()
        if kind == "fp8"
        for name in (entry["repository"], *entry.get("aliases", ()))
    ]


@pytest.mark.parametrize(("variant", "repository", "quant_method"), _fp8_checkpoints())
def test_a_prequantized_fp8_checkpoint_starts_on_what_vllm_reads_from_it(
    variant: str, repository: str, quant_method: str
) -> None:
    check = vllm_quantization_check()
    p = feasible(plan(PlanRequest(variant, ("g6e",), quantization=Quantization.FP8, repository=repository)))
    flag = _quantization_flag(p)
    # vLLM 0.33.0 refuses to start when the flag differs from the checkpoint's quant_method and no
    # override method claims it; with no flag it reads the checkpoint's own method.
    assert check["mismatch_raises"] and check["no_flag_uses_checkpoint_method"]
    assert flag is None or flag == quant_method or flag in check["overrides"], flag
    assert not any("model.repository" in w for w in p.warnings)
    # Its files are the FP8 weights, not the 16-bit ones vLLM quantizes online; nothing is buffered
    # at 16 bits while loading.
    sixteen_bit = feasible(plan(PlanRequest(variant, ("g6e",), quantization=Quantization.BF16)))
    assert p.checkpoint_gib < 0.6 * sixteen_bit.checkpoint_gib
    assert p.chosen.load_peak_per_gpu == p.chosen.weights_per_gpu
    # auto is the served checkpoint's own format.
    auto = feasible(plan(PlanRequest(variant, ("g6e",), repository=repository)))
    assert auto.quantization is Quantization.FP8 and auto.vllm_args == p.vllm_args


def test_an_uncatalogued_repository_under_fp8_is_quantized_online_and_the_plan_says_so() -> None:
    fp8 = Quantization.FP8
    request = PlanRequest("r1-distill-qwen-7b", ("g6",), quantization=fp8, repository="acme/r1-7b")
    own = feasible(plan(request))
    assert _quantization_flag(own) == "fp8_per_channel"  # L4 has FP8 tensor cores
    (warning,) = [w for w in own.warnings if "model.repository" in w]
    assert "acme/r1-7b" in warning and "refuses to start" in warning
    default = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), quantization=Quantization.FP8)))
    assert not any("model.repository" in w for w in default.warnings)


def test_r1_671b_spans_two_p5_nodes_but_one_p5en() -> None:
    on_p5 = feasible(plan(PlanRequest("r1-671b", ("p5",))))
    assert (on_p5.instance_type, on_p5.nodes_per_replica) == ("p5.48xlarge", 2)
    assert (on_p5.tensor_parallel_size, on_p5.pipeline_parallel_size, on_p5.gpus_per_replica) == (8, 2, 16)
    assert on_p5.replica_hourly_usd == pytest.approx(2 * 55.04)
    assert "--distributed-executor-backend" in on_p5.vllm_args
    on_p5en = feasible(plan(PlanRequest("r1-671b", ("p5en",))))
    assert (on_p5en.instance_type, on_p5en.nodes_per_replica, on_p5en.tensor_parallel_size) == (
        "p5en.48xlarge",
        1,
        8,
    )
    assert on_p5en.quantization is Quantization.FP8  # auto = the checkpoint's FP8


def test_distills_never_span_nodes() -> None:
    # 16 full 128K contexts need 2.1M tokens; one p5.48xlarge holds ~1.4M for the 70B distill.
    request = PlanRequest("r1-distill-llama-70b", ("p5",), max_model_len=131072, min_full_length_sequences=16)
    result = plan(request)
    assert isinstance(result, Infeasible)  # a second node would fit it, but distills stay single-node
    assert "p5.48xlarge (8x H100): weights fit but the KV cache holds" in result.reasons[0]


def test_invalid_tp_gpu_count_is_explained() -> None:
    result = plan(PlanRequest("r1-distill-qwen-1.5b", ("p5",)))
    p = feasible(result)
    assert p.instance_type == "p5.4xlarge"  # 1x H100; the 8-GPU size cannot split 12 heads
    rejected = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), max_model_len=131072,
                                      min_full_length_sequences=16))  # fmt: skip
    assert isinstance(rejected, Infeasible)  # beyond 4x L4; the 8x L4 size cannot split 28 heads
    assert (
        "not a tensor-parallel size vLLM accepts: 28 attention heads do not split over 8 GPUs"
        in (rejected.reasons[0])
    )


def test_p5e_is_never_chosen_without_on_demand_capacity() -> None:
    east = plan(PlanRequest("r1-671b", ("p5e",), region="us-east-1"))
    west = plan(PlanRequest("r1-671b", ("p5e",), region="us-west-2"))
    assert isinstance(east, Infeasible) and "not offered in us-east-1" in east.reasons[0]
    assert isinstance(west, Infeasible) and "Capacity Blocks only" in west.reasons[0]


def test_shorter_context_is_suggested_at_the_largest_value_that_fits() -> None:
    # g5.48xlarge holds floor((A10G budget - overhead - 131.4 GiB / 8) / 40960 B) tokens for 70B.
    usable = cuda_budget("A10G") - runtime_overhead("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 8, 2048)
    tokens = math.floor(usable - 70_553_706_496 * 2 / 8) // (80 * 2 * 1 * 128 * 2)
    result = plan(PlanRequest("r1-distill-llama-70b", ("g5",), max_model_len=131072))
    assert isinstance(result, Infeasible)
    expected = tokens // 1024 * 1024
    assert f"lower model.maxModelLen to {expected}: fits g5.48xlarge" in "\n".join(result.suggestions)


def test_costs_scale_with_replicas_and_name_their_source() -> None:
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), min_replicas=2, max_replicas=5)))
    d = p.to_dict()
    assert d["instance_type"] == "g6.xlarge"
    assert d["replica_hourly_usd"] == 0.8048
    assert d["hourly_usd_at_min"] == pytest.approx(2 * 0.8048)
    assert d["hourly_usd_at_max"] == pytest.approx(5 * 0.8048)
    assert "2026-07-20" in d["price_source"]


def test_requests_fit_every_type_in_the_pool() -> None:
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6", "g5"))))
    millicores = int(p.cpu_request.removesuffix("m"))
    mib = int(p.memory_request.removesuffix("Gi")) * 1024
    for name in p.instance_types:
        room = pod_room(instance_catalog().instances[name])
        assert millicores <= room.millicores and mib <= room.memory_mib


def test_ephemeral_storage_covers_image_and_weights() -> None:
    hf = feasible(plan(PlanRequest("r1-distill-llama-8b", ("g6e",))))
    s3 = feasible(plan(PlanRequest("r1-distill-llama-8b", ("g6e",), weights_source="s3")))
    weights_gib = 16_060_522_496 / GIB
    assert hf.ephemeral_storage_gib == math.ceil(30 + weights_gib * 1.1 + 10)
    assert s3.ephemeral_storage_gib == 40  # image and scratch only: weights stream from S3
    assert s3.vllm_args[s3.vllm_args.index("--load-format") + 1] == "runai_streamer"


def test_plan_json_carries_every_design_field() -> None:
    d = feasible(plan(PlanRequest("r1-distill-qwen-14b", ("g6e",)))).to_dict()
    design_fields = {
        "feasible", "variant", "repository", "quantization", "instance_type", "instance_types",
        "gpus_per_replica", "tensor_parallel_size", "pipeline_parallel_size", "nodes_per_replica",
        "gpu_memory_utilization", "max_model_len", "weights_gib", "kv_cache_gib", "kv_cache_tokens",
        "vllm_args", "cpu_request", "memory_request", "ephemeral_storage_gib", "replica_hourly_usd",
        "hourly_usd_at_min", "hourly_usd_at_max", "price_source",
    }  # fmt: skip
    assert design_fields <= set(d)
    args = d["vllm_args"]
    assert args[args.index("--tensor-parallel-size") + 1] == str(d["tensor_parallel_size"])
    assert args[args.index("--max-model-len") + 1] == "32768"
    assert args[args.index("--model") + 1] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"


def test_awq_on_t4_serves_in_float16() -> None:
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g4dn",), quantization=Quantization.AWQ_INT4,
                                  repository="someone/r1-qwen-7b-awq")))  # fmt: skip
    assert p.vllm_args[p.vllm_args.index("--dtype") + 1] == "float16"
    assert p.repository == "someone/r1-qwen-7b-awq"


def vllm_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, blackwell: bool = False) -> list[int]:
    """vLLM 0.33.0's default CUDA-graph capture sizes, built from the rule as read from its source
    (cold-start-facts.json cuda_graph_capture.v0_33_0_rule), no speculative decoding."""
    rule = cold_start_facts()["cuda_graph_capture"]["v0_33_0_rule"]
    platform = rule["default_max_graph_size_data_center_blackwell" if blackwell else "default_max_graph_size"]
    ceiling = min(
        max_num_seqs * rule["decode_query_len_without_speculation"] * rule["ceiling_factor"], platform
    )
    sizes = [s for s in rule["small_sizes"] if s <= ceiling]
    sizes += list(range(8, min(ceiling + 1, rule["step_8_below"]), 8))
    sizes += list(range(rule["step_16_from"], ceiling + 1, 16))
    assert rule["also_captured_when_within_ceiling"] == ["max_num_batched_tokens", "max_num_seqs"]
    sizes += [n for n in (max_num_batched_tokens, max_num_seqs) if n <= ceiling]
    return sorted({s for s in sizes if s <= max_num_batched_tokens})


def engine_s(p: SizingPlan, cached: bool) -> int:
    """torch.compile (the EKS guide's cached or slowest uncached run), then CUDA graph capture at
    the time per graph per layer of vllm#19824 (60 s over 67 graphs of 80 layers) for vLLM 0.33.0's
    default graphs (a piecewise one per capture size, a full one per decode size of at most
    max-num-seqs, FULL_AND_PIECEWISE) over the model's layers, then what vllm#20264 took besides."""
    facts = cold_start_facts()
    fast = facts["eks_guide_fast_model_loading"]
    compile_s = fast["compile_cached_new_node_s"] if cached else fast["compile_uncached_s_max"]
    capture = facts["cuda_graph_capture"]
    fit = capture["fit"]
    assert capture["v0_33_0_rule"]["cudagraph_mode_default"] == "FULL_AND_PIECEWISE"
    sizes = vllm_capture_sizes(p.max_num_seqs, p.scheduler_limits.max_num_batched_tokens)
    graphs = len(sizes) + len([s for s in sizes if s <= p.max_num_seqs])
    layers = model_configs()[p.model.hf_repo]["num_hidden_layers"]
    capture_s = fit["capture_s"] / (fit["graphs"] * fit["num_hidden_layers"]) * graphs * layers
    return compile_s + math.ceil(capture_s) + facts["engine_rest_s"]["value"]


def test_vllm_default_capture_sizes() -> None:
    from deepseek_eks.sizing.performance import default_cuda_graph_capture_sizes, default_cuda_graph_count

    for seqs, tokens in [(1, 2048), (3, 2048), (35, 8192), (40, 2048), (100, 2048), (300, 8192), (1024, 8192),
                         (1024, 300), (200, 64)]:  # fmt: skip
        expected = vllm_capture_sizes(seqs, tokens)
        assert default_cuda_graph_capture_sizes(seqs, tokens, 9.0) == expected, (seqs, tokens)
        assert default_cuda_graph_count(seqs, tokens, 9.0) == len(expected) + len(
            [s for s in expected if s <= seqs]
        )
    # Data-center Blackwell (compute capability 10.0) raises the platform ceiling.
    assert default_cuda_graph_capture_sizes(1024, 16384, 10.0) == vllm_capture_sizes(
        1024, 16384, blackwell=True
    )
    assert max(default_cuda_graph_capture_sizes(1024, 16384, 9.0)) == 512
    # vLLM 0.9.1, where the capture figure was measured, captured 67 sizes: 1, 2, 4, every 8 to 512.
    june_2025 = [1, 2, 4, *range(8, 513, 8)]
    assert len(june_2025) == cold_start_facts()["cuda_graph_capture"]["graphs_in_june_2025"]["value"]


def test_capture_time_per_graph_and_layer_holds_out() -> None:
    """Fitted on vllm#19824 (70B, 80 layers), the per-graph, per-layer time predicts vllm#20264's
    3B model (28 layers, the same 67 graphs) within 30 % (21 s against 17 s): capture scales with
    graphs x layers, not with model size alone."""
    from deepseek_eks.sizing.startup import CAPTURE_S_PER_GRAPH_LAYER

    capture = cold_start_facts()["cuda_graph_capture"]
    held = capture["held_out"]
    predicted = CAPTURE_S_PER_GRAPH_LAYER * held["graphs"] * held["num_hidden_layers"]
    assert abs(predicted - held["capture_s"]) / held["capture_s"] < 0.3


def test_the_uncached_compile_figure_holds_on_a_node_of_few_vcpus() -> None:
    """The uncached torch.compile figure is the EKS guide's, measured on a p5 (192 vCPUs). vLLM
    0.33.0 compiles on one thread whatever the node has (it sets TORCHINDUCTOR_COMPILE_THREADS=1
    on import: cold-start-facts.json), so a 4-vCPU g6.xlarge's first replica is charged the same
    compile and start-up, beside the capture its own graphs take."""
    fact = cold_start_facts()["vllm_0_33_0_compile_cache"]["compile_threads"]
    assert fact["file"] == "vllm/env_override.py"
    assert fact["quote"] == 'os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"'
    few = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",))))
    many = feasible(plan(PlanRequest("r1-distill-llama-70b", ("p5",))))
    assert few.chosen.instance.vcpu <= 4 < 100 < many.chosen.instance.vcpu
    for p in (few, many):
        assert p.engine_seconds(cached=False) == engine_s(p, cached=False)
    assert few.engine_seconds(cached=False) - math.ceil(few.cuda_graph_capture_seconds) == (
        many.engine_seconds(cached=False) - math.ceil(many.cuda_graph_capture_seconds)
    )


def test_startup_budget_follows_the_weight_source() -> None:
    hf = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",))))
    s3 = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",), weights_source="s3")))
    weights_gib = 70_553_706_496 * 2 / GIB
    # HF: download at 0.046 GiB/s, then load from disk at 0.25 GiB/s, + the uncached engine, x1.5.
    assert hf.startup_probe_seconds == math.ceil(
        (math.ceil(weights_gib / 0.046 + weights_gib / 0.25) + engine_s(hf, cached=False)) * 1.5
    )
    # S3: the Run:ai streamer at the EKS guide's rate (10.4 GB in 5.02 s) per GPU, the four GPUs of
    # the g6e.12xlarge each streaming a quarter (distributed streaming) within its 100 Gbps.
    streamer_gib_s = streamer_rate_gib_s()
    assert s3.chosen.tensor_parallel == 4 and s3.distributed_streaming
    network_gib_s = ec2_network_card(s3.instance_type)["PeakBandwidthInGbps"] * 1e9 / 8 / GIB
    assert 4 * streamer_gib_s < network_gib_s
    assert s3.startup_breakdown["weights"] == math.ceil(weights_gib / (4 * streamer_gib_s))
    # The probe still waits for an uncached engine: the service's first replica compiles.
    assert s3.startup_probe_seconds == max(
        300, math.ceil((math.ceil(weights_gib / (4 * streamer_gib_s)) + engine_s(s3, cached=False)) * 1.5)
    )
    small = feasible(plan(PlanRequest("r1-distill-qwen-1.5b", ("g6",), weights_source="s3")))
    assert small.startup_probe_seconds == 300  # the floor


@pytest.mark.parametrize("mode", ["auto-mode", "karpenter"])
@pytest.mark.parametrize("source", ["huggingface", "s3", "s3-mountpoint", "ebs-snapshot"])
def test_startup_breakdown_has_every_stage_for_every_source(source: str, mode: str) -> None:
    p = feasible(
        plan(PlanRequest("r1-distill-llama-70b", ("g6e",), weights_source=source, compute_mode=mode))
    )
    stages = p.startup_breakdown
    assert list(stages) == ["node", "image", "weights", "engine"]
    facts = cold_start_facts()
    guide = facts["eks_guide_load_serve_model"]
    if mode == "auto-mode":
        # No pre-pull is counted (or run) there: the guide's node figure ends at Scheduled.
        assert not p.image_prepull
        # The EKS guide's Auto Mode run: the GPU node in 30 s, the image with SOCI at 8.8 GB per
        # 48.4 s, here for the ~12 GB vllm/vllm-openai image.
        soci_gb_s = guide["image_size_bytes"] / 1e9 / guide["image_pull_s"]
        assert stages["node"] == guide["node_provisioned_s"]
        assert stages["image"] == pytest.approx(
            facts["vllm_openai_image_compressed_gb"]["gb"] / soci_gb_s, abs=1.5
        )
    else:
        # Karpenter's 30-90 s launch plus up to ~60 s for GPU registration; the image with SOCI
        # parallel pull on AL2023 at the blueprint's measured rate, for the ~12 GB image, started by
        # the pre-pull DaemonSet when the node is Ready: the replica, scheduled once the GPUs are
        # registered, waits only for what the pull takes beyond that minute.
        registration_s = facts["karpenter_gpu_registration"]["gpu_registration_s"]
        assert stages["node"] == 90 + registration_s
        pull_s = karpenter_image_pull_s()
        assert pull_s < facts["standard_pull"]["upper_s"]
        assert stages["image"] == pytest.approx(max(0.0, pull_s - registration_s), abs=1.5)
        assert p.image_prepull
    # Only streamed weights in the project's bucket keep a compile cache there.
    assert stages["engine"] == engine_s(p, cached=source == "s3")
    assert p.to_dict()["compile_cache"] is (source == "s3")
    # The start-up on a new node is the sum of the stages (DESIGN.md, Clarifications 2026-12-04).
    assert p.startup_seconds == sum(stages.values()) == p.to_dict()["startup_seconds"]
    # The probe covers the container's own stages, uncached; Pulumi's wait covers all of them.
    assert p.startup_probe_seconds == max(
        300, math.ceil((stages["weights"] + engine_s(p, cached=False)) * 1.5)
    )
    assert p.rollout_seconds > p.startup_seconds
    assert p.to_dict()["startup_breakdown"] == stages


@pytest.mark.parametrize("mode", ["auto-mode", "karpenter"])
def test_a_replica_on_two_nodes_waits_for_two_launches_in_turn(mode: str) -> None:
    """LWS makes a group's workers only once its leader has a node (the group kept in one zone:
    tests/twin/test_lws.py, with the real controller), so a two-node replica's node stage is two
    launches, and its leader's startup probe also waits for the workers' launch and image."""
    two = feasible(plan(PlanRequest("r1-671b", ("p5",), weights_source="s3", compute_mode=mode)))
    one = feasible(plan(PlanRequest("r1-671b", ("p5en",), weights_source="s3", compute_mode=mode)))
    assert (two.nodes_per_replica, one.nodes_per_replica) == (2, 1)
    launch = one.startup_breakdown["node"]
    stages = two.startup_breakdown
    assert stages["node"] == 2 * launch
    assert two.startup_seconds == sum(stages.values())
    # The leader's container starts after the first launch and its image; inside its probe window
    # come the workers' launch and image, then the weights and the engine (uncached: no compile
    # cache for a multi-node replica).
    assert not two.compile_cache
    inside = launch + stages["image"] + stages["weights"] + stages["engine"]
    assert two.startup_probe_seconds == max(300, math.ceil(inside * 1.5))
    assert two.rollout_seconds == launch + stages["image"] + two.startup_probe_seconds + 300
    assert one.startup_probe_seconds == max(
        300, math.ceil((one.startup_breakdown["weights"] + engine_s(one, cached=False)) * 1.5)
    )


def streamer_rate_gib_s() -> float:
    """One Run:ai streaming process's rate from S3: the EKS guide's 10.4 GB in 5.02 s."""
    guide = cold_start_facts()["eks_guide_load_serve_model"]
    return float(guide["checkpoint_bytes"] / guide["streamer_load_s"] / GIB)


@cache
def ec2_instance_types() -> dict[str, Any]:
    """EC2 DescribeInstanceTypes as moto 5.2.5 ships it (the catalog's hardware source)."""
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


def ec2_network_card(instance_type: str) -> dict[str, Any]:
    info = ec2_instance_types()[instance_type]["NetworkInfo"]
    card: dict[str, Any] = info["NetworkCards"][info.get("DefaultNetworkCardIndex", 0)]
    return card


def test_the_catalog_network_bandwidth_is_ec2s_default_card() -> None:
    for name, instance in instance_catalog().instances.items():
        card = ec2_network_card(name)
        assert instance.network_baseline_gbps == card["BaselineBandwidthInGbps"], name
        assert instance.network_peak_gbps == card["PeakBandwidthInGbps"], name


def test_a_replica_of_several_gpus_divides_the_streamed_checkpoint_between_them() -> None:
    """vLLM 0.33.0 streams every file to every GPU unless the runai_streamer's ``distributed``
    option is on; with it each GPU reads its share, so the node's NIC carries the checkpoint once."""
    facts = cold_start_facts()["runai_distributed_streaming"]
    p = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",), weights_source="s3")))
    assert p.chosen.tensor_parallel == 4
    args = p.vllm_args
    config = json.loads(args[args.index("--model-loader-extra-config") + 1])
    assert set(config) <= set(facts["allowed_extra_config_keys"]) and config["distributed"] is True
    assert facts["distributed_default"] is False  # so leaving it out streams the checkpoint 4 times
    # Staging buffers of twice the largest tensor (the 70B's embedding, from its config.json) sit
    # beside the weights on each GPU while loading.
    cfg = model_configs()["deepseek-ai/DeepSeek-R1-Distill-Llama-70B"]
    largest = max(cfg["vocab_size"], cfg["intermediate_size"]) * cfg["hidden_size"] * 2
    staging = facts["staging_largest_tensor_multiple"] * largest
    assert p.to_dict()["load_peak_gib_per_gpu"] == round((p.chosen.load_peak_per_gpu + staging) / GIB, 2)
    assert p.to_dict()["load_peak_gib_per_gpu"] < cuda_gpu_memory_gib()["L40S"]
    # Without it (one GPU, another source) nothing is added.
    for request in (
        PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source="s3"),
        PlanRequest("r1-distill-llama-70b", ("g6e",), weights_source="s3-mountpoint"),
        PlanRequest("r1-distill-llama-70b", ("g6e",)),
    ):
        other = feasible(plan(request))
        assert "--model-loader-extra-config" not in other.vllm_args and not other.distributed_streaming
        assert other.to_dict()["load_peak_gib_per_gpu"] == round(other.chosen.load_peak_per_gpu / GIB, 2)


def test_distributed_streaming_stays_off_where_its_staging_buffers_would_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No catalogued fit lacks the room, so a checkpoint whose largest tensor alone fills a GPU
    stands in: the option is left off, nothing is added to the load peak, and every GPU streams
    the whole checkpoint (the weights stage at one process's rate each)."""
    from deepseek_eks.sizing import planner

    p = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",), weights_source="s3")))
    assert p.distributed_streaming  # the room is there for the real tensors
    gpu_bytes = p.chosen.instance.cuda_memory_mib * 1024**2
    monkeypatch.setattr(planner, "largest_checkpoint_tensor_bytes", lambda model: gpu_bytes // 2)
    assert p.chosen.load_peak_per_gpu + gpu_bytes > gpu_bytes  # staging (2 x half a GPU) cannot fit
    assert not p.distributed_streaming
    assert "--model-loader-extra-config" not in p.vllm_args
    assert p.load_peak_per_gpu == p.chosen.load_peak_per_gpu
    weights_gib = p.to_dict()["weights_gib"]
    assert p.startup_breakdown["weights"] == math.ceil(weights_gib / streamer_rate_gib_s())


def test_streamed_weights_are_bounded_by_the_nodes_network() -> None:
    """One GPU on an "up to 10 Gigabit" g6.xlarge streams at the NIC's peak (a new instance has
    its burst credits), below the streamer's own rate."""
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source="s3")))
    assert p.instance_type == "g6.xlarge"
    card = ec2_network_card("g6.xlarge")
    assert card["BaselineBandwidthInGbps"] < card["PeakBandwidthInGbps"]
    network_gib_s = card["PeakBandwidthInGbps"] * 1e9 / 8 / GIB
    assert network_gib_s < streamer_rate_gib_s()
    weights_gib = p.to_dict()["weights_gib"]
    assert 0 <= p.startup_breakdown["weights"] - weights_gib / network_gib_s < 1  # whole seconds, up


def test_auto_mode_with_s3_weights_starts_in_minutes() -> None:
    """SOCI and the streamer take the image and weights stages from minutes to about a minute."""
    fast = feasible(
        plan(PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source="s3", compute_mode="auto-mode"))
    )
    slow = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",))))
    assert fast.startup_seconds < 300 < 600 < slow.startup_seconds


def test_the_compile_cache_takes_the_engine_stage_to_the_cached_figure_only_where_it_is_kept() -> None:
    """The cached torch.compile (16 s on a new node with artifacts from S3, EKS guide) replaces the
    uncached one (up to 80 s) in the engine stage where the pods keep the cache in the project's
    bucket; a bucket of yours (read in place) or a multi-node replica keeps none."""
    fast = cold_start_facts()["eks_guide_fast_model_loading"]
    saved = fast["compile_uncached_s_max"] - fast["compile_cached_new_node_s"]
    staged = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source="s3")))
    hub = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",))))
    yours = feasible(
        plan(PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source="s3", repository="s3://mine/qwen7b/"))
    )
    multi = feasible(plan(PlanRequest("r1-671b", ("p5",), weights_source="s3")))
    assert staged.compile_cache and not hub.compile_cache and not yours.compile_cache
    assert multi.nodes_per_replica > 1 and not multi.compile_cache
    assert hub.startup_breakdown["engine"] - staged.startup_breakdown["engine"] == saved
    assert yours.startup_breakdown["engine"] == hub.startup_breakdown["engine"]


def test_a_warm_spare_node_saves_the_node_and_image_stages_and_is_priced() -> None:
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source="s3", warm_spare_nodes=2)))
    d = p.to_dict()
    stages = d["startup_breakdown"]
    warm = d["warm_node_startup_breakdown"]
    assert warm == {**stages, "node": 0, "image": 0}
    assert d["warm_node_startup_seconds"] == stages["weights"] + stages["engine"] < d["startup_seconds"]
    node_price = p.chosen.node_usd_per_hour
    assert d["warm_spare_node_hourly_usd"] == pytest.approx(node_price, abs=1e-4)
    assert d["warm_spare_hourly_usd"] == pytest.approx(2 * node_price, abs=1e-4)


def test_weight_stage_follows_each_source_rate() -> None:
    weights_gib = 70_553_706_496 * 2 / GIB  # the 70B distill in bf16; the checkpoint is the same size

    def stage(source: str, **kw: bool) -> int:
        request = PlanRequest("r1-distill-llama-70b", ("g6e",), weights_source=source, **kw)
        return feasible(plan(request)).startup_breakdown["weights"]

    # vLLM's default loader: Llama-3-8B (~15 GB) in 48.0 s from local gp3 (NVIDIA Run:ai blog).
    loader_gib_s = 15e9 / 48 / GIB
    assert stage("s3-mountpoint") == math.ceil(weights_gib / loader_gib_s)
    # A snapshot volume without fast snapshot restore: the 100 MiB/s provisioned-rate floor.
    assert stage("ebs-snapshot") == math.ceil(weights_gib / (100 / 1024))
    assert stage("ebs-snapshot", fast_snapshot_restore=True) == math.ceil(weights_gib / loader_gib_s)
    assert stage("s3") < stage("s3-mountpoint") < stage("ebs-snapshot") < stage("huggingface")


@pytest.mark.parametrize("source", ["s3", "s3-mountpoint", "ebs-snapshot"])
def test_only_hugging_face_downloads_to_the_node(source: str) -> None:
    request = PlanRequest("r1-distill-qwen-7b", ("g6",), weights_source=source)
    assert feasible(plan(request)).weights_download_gib == 0
    assert feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))).weights_download_gib > 10


def test_drain_lets_a_full_length_stream_finish() -> None:
    p = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), max_model_len=16384)))
    assert p.drain_seconds == math.ceil(16384 / 20) + 30
    long = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), max_model_len=131072)))
    assert long.drain_seconds == 3600  # capped by the ALB's deregistration delay maximum


def test_huge_hugging_face_downloads_warn() -> None:
    assert any("weights.source s3" in w for w in feasible(plan(PlanRequest("r1-671b", ("p5en",)))).warnings)
    # Two on-demand replicas at the floor: no single-replica or spot-floor notice either.
    quiet = PlanRequest(
        "r1-671b", ("p5en",), weights_source="s3", min_replicas=2, capacity_types=("on-demand",)
    )
    assert not feasible(plan(quiet)).warnings


def _held_out_setups() -> dict[tuple[str, str, int, int, str], list[dict[str, Any]]]:
    """The held-out points of measurements.json by setup, each with its bench row (its error)."""
    from deepseek_eks.sizing.fit import bundled_rows

    records = json.loads((Path(__file__).resolve().parents[2] / "sizing/data/measurements.json").read_text())
    rows = {r["id"]: r for r in bundled_rows()}
    setups: dict[tuple[str, str, int, int, str], list[dict[str, Any]]] = {}
    for p in records["points"]:
        if p.get("split") == "held_out" and "excluded" not in p:
            key = (p["variant"], p["gpu"], int(p["tp"]), int(p.get("pp", 1)), p["quantization"])
            setups.setdefault(key, []).append(rows[p["id"]])
    return setups


def test_a_plan_on_a_setup_a_held_out_point_disagrees_with_says_so() -> None:
    """Where a held-out measurement of the setup a plan chose misses the model by over a quarter,
    the plan warns, naming the worst such point and the fix; where the setup's held-out points
    agree, or none exists, it says nothing."""
    from deepseek_eks.sizing.fit import setup_disagreement

    setups = _held_out_setups()
    far = {k: v for k, v in setups.items() if any(abs(r["error_percent"]) > 25 for r in v)}
    near = {k: v for k, v in setups.items() if k not in far}
    assert far and near  # the bundled data has both kinds
    for setup, rows in far.items():
        warning = setup_disagreement(*setup)
        assert warning is not None
        worst = max(rows, key=lambda r: abs(r["error_percent"]))
        assert worst["id"] in warning and "automation loadtest" in warning and "maxReplicas" in warning
        measured, model = worst["measured_output_tokens_per_second"], worst["model_output_tokens_per_second"]
        assert f"{abs(1 - measured / model) * 100:.0f}% {'below' if measured < model else 'above'}" in warning
    for setup in near:
        assert setup_disagreement(*setup) is None
    assert setup_disagreement("r1-distill-qwen-1.5b", "L4", 1, 1, "bf16") is None  # no point at all
    # The plan carries it for a request the planner sizes on such a setup, and not otherwise.
    (variant, gpu, tp, pp, quantization) = next(k for k in far if k[1] == "L40S")
    chosen = feasible(plan(PlanRequest(variant, ("g6e",), quantization=Quantization(quantization))))
    fit = chosen.fits[0]
    assert (fit.instance.gpu_model, fit.tensor_parallel, fit.pipeline_parallel) == (gpu, tp, pp)
    assert any(w.startswith("the replica model is unsure of") for w in chosen.warnings)
    quiet = feasible(plan(PlanRequest("r1-distill-qwen-1.5b", ("g6",))))
    assert not any(w.startswith("the replica model is unsure of") for w in quiet.warnings)
