"""What vLLM 0.33.0 accepts and how much memory it takes, checked against the facts it was read
from: the model configs (reference/upstream/model-configs.json), CUDA's memory per GPU
(reference/upstream/cuda/) and vLLM's source (reference/upstream/vllm-0.33.0/FACTS.md)."""

from __future__ import annotations

import math

import pytest

from deepseek_eks.sizing import Infeasible, PlanRequest, Quantization, SizingPlan, plan
from deepseek_eks.sizing.catalog import instance_catalog, model_catalog
from deepseek_eks.sizing.memory import (
    FP8_BYTES_PER_PARAM,
    GIB,
    load_peak_bytes_per_gpu,
    tensor_parallel_refusal,
    weight_bytes,
    weight_bytes_per_gpu,
)
from deepseek_eks.sizing.overhead import runtime_overhead
from deepseek_eks.sizing.planner import Rejection, evaluate
from tests.upstream import cuda_gpu_memory_gib, model_configs

MIB = 1024**2


def feasible(result: SizingPlan | Infeasible) -> SizingPlan:
    assert isinstance(result, SizingPlan), getattr(result, "reasons", result)
    return result


def config(variant: str) -> dict:
    return model_configs()[model_catalog()[variant].hf_repo]


@pytest.mark.parametrize(
    ("instance", "gpu"),
    [("g4dn.xlarge", "T4"), ("g5.xlarge", "A10G"), ("g6.xlarge", "L4"), ("g6e.xlarge", "L40S"),
     ("p4d.24xlarge", "A100-40GB"), ("p4de.24xlarge", "A100-80GB"), ("p5.4xlarge", "H100"),
     ("p5en.48xlarge", "H200"), ("p6-b200.48xlarge", "B200")],
)  # fmt: skip
def test_each_gpu_budgets_what_cuda_exposes_not_the_ec2_figure(instance: str, gpu: str) -> None:
    i = instance_catalog().instances[instance]
    assert i.cuda_memory_mib == math.floor(cuda_gpu_memory_gib()[gpu] * 1024)
    assert i.cuda_memory_mib < i.gpu_memory_mib  # CUDA always sees less than EC2 advertises


def test_the_issue_figures_hold_for_t4_h100_and_h200() -> None:
    cuda = cuda_gpu_memory_gib()
    assert cuda["T4"] == pytest.approx(14.6, abs=0.05)
    assert cuda["H100"] == pytest.approx(79.1, abs=0.05)
    assert cuda["H200"] == pytest.approx(139.7, abs=0.05)


@pytest.mark.parametrize(
    ("variant", "tp", "refused"),
    [("r1-distill-qwen-14b", 8, True),  # 13824 / 8 = 1728 = 13.5 groups of 128
     ("r1-distill-qwen-14b", 4, False),  # 3456 = 27 groups
     ("r1-distill-qwen-1.5b", 4, True),  # 8960 / 4 = 2240 = 17.5 groups
     ("r1-distill-qwen-1.5b", 2, False),
     ("r1-distill-llama-70b", 8, False)],  # 28672 / 8 = 3584 = 28 groups
)  # fmt: skip
def test_awq_needs_whole_groups_per_rank(variant: str, tp: int, refused: bool) -> None:
    cfg = config(variant)
    assert ((cfg["intermediate_size"] // tp) % 128 != 0) is refused  # the fact, from the config
    reason = tensor_parallel_refusal(model_catalog()[variant], tp, Quantization.AWQ_INT4)
    assert (reason is not None) is refused
    assert tensor_parallel_refusal(model_catalog()[variant], tp, Quantization.BF16) is None


def test_qwen14b_awq_is_never_planned_at_tp8() -> None:
    request = PlanRequest("r1-distill-qwen-14b", ("p4d",), quantization=Quantization.AWQ_INT4)
    model = model_catalog()["r1-distill-qwen-14b"]
    p4d = instance_catalog().instances["p4d.24xlarge"]
    tp8 = evaluate(model, Quantization.AWQ_INT4, p4d, request)
    assert isinstance(tp8, Rejection)
    assert "AWQ: intermediate size 13824 / TP 8 = 1728 is not a multiple of the group size 128" in tp8.reason
    # Packing: fewer GPUs of the same node serve it (issue 22: refuse only for the true reason).
    result = plan(request)
    assert isinstance(result, SizingPlan) and result.tensor_parallel_size < 8


def test_kv_heads_replicate_when_tp_is_a_multiple_of_them() -> None:
    # 12 heads, 2 KV heads: TP 4 replicates each KV head twice.
    qwen15 = model_catalog()["r1-distill-qwen-1.5b"]
    assert tensor_parallel_refusal(qwen15, 4, Quantization.BF16) is None
    assert (
        tensor_parallel_refusal(qwen15, 3, Quantization.BF16)
        == "2 KV heads neither split over nor replicate onto 3 GPUs"
    )


def test_mla_projection_and_moe_router_are_counted_on_every_rank() -> None:
    cfg, r1 = config("r1-671b"), model_catalog()["r1-671b"]
    fused = cfg["num_hidden_layers"] * cfg["hidden_size"] * (cfg["q_lora_rank"] + cfg["kv_lora_rank"]
                                                              + cfg["qk_rope_head_dim"])  # fmt: skip
    router = (
        (cfg["num_hidden_layers"] - cfg["first_k_dense_replace"])
        * cfg["hidden_size"]
        * cfg["n_routed_experts"]
    )
    replicated = math.ceil(fused * FP8_BYTES_PER_PARAM + router * 2)
    embed = 2 * cfg["vocab_size"] * cfg["hidden_size"] * 2
    total = weight_bytes(r1, Quantization.FP8)
    expected = math.ceil((total - replicated) / 8 + replicated)
    assert weight_bytes_per_gpu(r1, Quantization.FP8, 8, 1) == expected
    assert embed < total  # embeddings are sharded (VocabParallelEmbedding), not replicated
    assert expected - total / 8 > 0.7 * GIB  # what counting them once used to miss per GPU


def test_online_fp8_loads_layer_by_layer_so_32b_fits_one_l40s() -> None:
    """vLLM 0.33.0 materializes each 16-bit layer only while quantizing it (FACTS.md, online FP8):
    the peak is the FP8 weights plus two 16-bit gate/up projections, not the 16-bit model."""
    cfg, qwen32 = config("r1-distill-qwen-32b"), model_catalog()["r1-distill-qwen-32b"]
    gate_up_16bit = 2 * cfg["intermediate_size"] * cfg["hidden_size"] * 2
    peak = load_peak_bytes_per_gpu(qwen32, Quantization.FP8, 1, 1)
    assert peak == weight_bytes_per_gpu(qwen32, Quantization.FP8, 1, 1) + 2 * gate_up_16bit
    assert peak < math.floor(cuda_gpu_memory_gib()["L40S"] * 1024) * MIB
    assert peak < qwen32.parameters * 2  # the whole 16-bit model never sits on the GPU
    p = feasible(plan(PlanRequest("r1-distill-qwen-32b", ("g6e",), quantization=Quantization.FP8,
                                  max_model_len=8192)))  # fmt: skip
    assert p.instance_type == "g6e.xlarge"


def test_a_gpu_smaller_than_the_load_peak_is_refused_for_the_peak() -> None:
    qwen14 = model_catalog()["r1-distill-qwen-14b"]
    l4 = instance_catalog().instances["g6.xlarge"]
    peak = load_peak_bytes_per_gpu(qwen14, Quantization.FP8, 1, 1)
    tight = l4.with_cuda_memory_mib(peak // MIB - 1)
    request = PlanRequest("r1-distill-qwen-14b", ("g6",), Quantization.FP8, max_model_len=1024)
    rejection = evaluate(qwen14, Quantization.FP8, tight, request)
    assert "loading peaks at" in getattr(rejection, "reason", "")


def test_overhead_reproduces_its_single_gpu_measurement_and_grows_with_tp() -> None:
    """Llama-8B on one A10G left 20.1 - 14.99 - 4.17 GiB (awslabs/ai-on-eks) with vLLM's defaults."""
    llama8, a10g = model_catalog()["r1-distill-llama-8b"], instance_catalog().instances["g5.xlarge"]
    single = runtime_overhead(llama8, a10g, 1, 1, 256).total
    assert single == pytest.approx((20.1 - 14.99 - 4.17) * GIB, abs=2)
    four = runtime_overhead(llama8, instance_catalog().instances["g5.12xlarge"], 4, 1, 256)
    assert four.collectives == math.ceil(0.20 * GIB)  # vllm-project/vllm#14447: non_torch 0.20 GiB at TP > 1
    assert four.logits == 256 * math.ceil(128256 / 4) * 4
    h100 = runtime_overhead(llama8, instance_catalog().instances["p5.4xlarge"], 1, 1, 256)
    assert h100.activations == 8192 * (4096 + 2 * 14336) * 2  # vLLM batches 8192 tokens on >= 70 GiB GPUs


def test_small_distill_runs_on_t4_in_float16_with_a_named_risk() -> None:
    p = feasible(plan(PlanRequest("r1-distill-qwen-1.5b", ("g4dn",))))
    assert (p.instance_type, p.chosen.dtype) == ("g4dn.xlarge", "float16")
    assert p.vllm_args[p.vllm_args.index("--dtype") + 1] == "float16"
    assert any("float16" in w and "qwen2" in w for w in p.warnings)
    on_l4 = feasible(plan(PlanRequest("r1-distill-qwen-1.5b", ("g6",)))).warnings
    assert not [w for w in on_l4 if "float16" in w]  # L4 has bf16 (the others are about replicas)


def test_known_awq_checkpoint_is_served_unless_the_user_names_one() -> None:
    p = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",), quantization=Quantization.AWQ_INT4)))
    assert p.repository == "casperhansen/deepseek-r1-distill-llama-70b-awq"
    assert p.vllm_args[p.vllm_args.index("--model") + 1] == p.repository
    assert not any("model.repository" in w for w in p.warnings)
    own = feasible(plan(PlanRequest("r1-distill-llama-70b", ("g6e",), quantization=Quantization.AWQ_INT4,
                                    repository="me/my-awq")))  # fmt: skip
    assert own.repository == "me/my-awq"
    unknown = feasible(plan(PlanRequest("r1-distill-qwen-7b", ("g6",), quantization=Quantization.AWQ_INT4)))
    assert unknown.repository is None and any("set model.repository" in w for w in unknown.warnings)
