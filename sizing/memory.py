"""The GPU memory model: weight bytes, KV-cache bytes per token, usable memory per GPU.

Every constant says where it comes from. Figures are bytes unless the name says GiB.
"""

from __future__ import annotations

import math
from enum import StrEnum

from .catalog import Attention, ModelSpec

GIB = 1024**3

# vLLM's default --gpu-memory-utilization (vllm/engine/arg_utils.py, 0.9): the share of each GPU
# vLLM may take for weights, activations and KV cache together.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.90

# 16-bit activations and KV cache: two bytes per element (bf16, or fp16 on GPUs without bf16).
ACTIVATION_BYTES = 2

# AWQ int4 (group size 128): 4-bit weights plus one fp16 scale and one packed 4-bit zero point per
# group of 128 weights = 0.5 + (2 + 0.5) / 128 bytes per parameter (AutoAWQ / vLLM AWQ format).
AWQ_BYTES_PER_PARAM = 0.5 + 2.5 / 128

# FP8 block scales: one fp32 scale per 128x128 weight block (DeepSeek-V3 README_WEIGHTS.md,
# weight_block_size [128, 128]); per-tensor scales of online FP8 are smaller, so this is an upper bound.
FP8_BYTES_PER_PARAM = 1 + 4 / (128 * 128)


class KvCacheDtype(StrEnum):
    """vLLM ``--kv-cache-dtype``: ``auto`` stores the KV cache in the model's 16-bit dtype; ``fp8``
    in FP8 E4M3, one byte per element (vllm 0.33.0 vllm/config/cache.py ``CacheConfig.cache_dtype``:
    "fp8 (=fp8_e4m3)"). vLLM warns that FP8 "may cause accuracy drop without a proper scaling
    factor" (the same file, ``_validate_cache_dtype``): a 16-bit checkpoint carries no KV scales, so
    vLLM uses 1.0 (vllm/model_executor/layers/quantization/kv_cache.py
    ``BaseKVCacheMethod.process_weights_after_loading``). Planned only on GPUs with FP8 tensor
    cores (``GpuArch.fp8``)."""

    AUTO = "auto"
    FP8 = "fp8"

    @property
    def element_bytes(self) -> int:
        return 1 if self is KvCacheDtype.FP8 else ACTIVATION_BYTES


class Quantization(StrEnum):
    """Weight format vLLM serves. ``auto`` resolves per variant (see ``resolve``)."""

    AUTO = "auto"
    BF16 = "bf16"
    FP8 = "fp8"
    AWQ_INT4 = "awq-int4"

    def resolve(self, model: ModelSpec) -> Quantization:
        """``auto`` is the checkpoint's own format: FP8 for r1-671b, bf16 for the distills."""
        if self is not Quantization.AUTO:
            return self
        return Quantization.FP8 if model.checkpoint_dtype == "fp8" else Quantization.BF16


def weight_bytes(model: ModelSpec, quantization: Quantization) -> int:
    """Bytes of weights resident on the GPUs (all ranks together).

    Embeddings and the output head stay 16-bit under FP8 and AWQ (vLLM quantizes linear layers
    only). The MTP module of r1-671b is not loaded unless speculative decoding is on, so it is not
    counted here (it is counted in ``download_bytes``).
    """
    q = quantization.resolve(model)
    embed = model.embedding_parameters
    router = router_parameters(model)
    linear = model.parameters - embed - router
    return math.ceil(linear * _bytes_per_param(q) + (embed + router) * ACTIVATION_BYTES)


def _bytes_per_param(q: Quantization) -> float:
    return {
        Quantization.BF16: 2.0,
        Quantization.FP8: FP8_BYTES_PER_PARAM,
        Quantization.AWQ_INT4: AWQ_BYTES_PER_PARAM,
    }[q]


def router_parameters(model: ModelSpec) -> int:
    """The MoE router (``gate``) of every MoE layer: hidden x routed experts. vLLM builds it as a
    ``GateLinear`` with no quantization and no TP sharding (vllm/model_executor/models/deepseek_v2.py,
    ``DeepseekV2MoE.__init__``), so every rank holds all of it in 16 bits."""
    moe_layers = model.num_hidden_layers - model.first_k_dense_replace if model.moe else 0
    return moe_layers * model.hidden_size * model.n_routed_experts


def mla_replicated_parameters(model: ModelSpec) -> int:
    """MLA's fused q_a/kv_a projection (hidden -> q_lora_rank + kv_lora_rank + qk_rope_head_dim) of
    every layer, a ``ReplicatedLinear`` held whole by every TP rank
    (vllm/model_executor/models/deepseek_v2.py, ``DeepSeekV2FusedQkvAProjLinear``)."""
    if model.attention is not Attention.MLA:
        return 0
    width = model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim
    return model.num_hidden_layers * model.hidden_size * width


def replicated_bytes(model: ModelSpec, quantization: Quantization) -> int:
    """Bytes every TP rank holds whole (not divided by TP)."""
    q = quantization.resolve(model)
    return math.ceil(
        mla_replicated_parameters(model) * _bytes_per_param(q) + router_parameters(model) * ACTIVATION_BYTES
    )


def download_bytes(model: ModelSpec, quantization: Quantization, prequantized: bool = False) -> int:
    """Bytes of checkpoint files a replica downloads before loading.

    FP8 on a distill is vLLM's online quantization of the bf16 checkpoint, so the bf16 files are
    what is downloaded, unless the repository is a pre-quantized FP8 checkpoint (``prequantized``);
    AWQ and pre-quantized FP8 checkpoints are about their in-memory size.
    """
    q = quantization.resolve(model)
    if model.checkpoint_dtype == "fp8" and q is Quantization.FP8 and model.checkpoint_bytes:
        return model.checkpoint_bytes
    if q is Quantization.AWQ_INT4 or (q is Quantization.FP8 and prequantized):
        return weight_bytes(model, q)
    return (model.parameters + model.mtp_parameters) * 2


def kv_bytes_per_token_per_gpu(
    model: ModelSpec, tp: int, pp: int, kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
) -> int:
    """KV-cache bytes one token costs on each GPU of a TP x PP group (worst pipeline stage).

    GQA: K and V for each KV head on this rank; when TP exceeds the KV-head count vLLM replicates
    heads, so a rank always holds at least one. MLA: vLLM caches one latent of
    kv_lora_rank + qk_rope_head_dim per token per layer, replicated on every TP rank. Each element
    takes ``kv_cache_dtype``'s bytes.
    """
    layers = math.ceil(model.num_hidden_layers / pp)
    element = kv_cache_dtype.element_bytes
    if model.attention is Attention.MLA:
        return layers * (model.kv_lora_rank + model.qk_rope_head_dim) * element
    heads_per_rank = max(1, model.num_key_value_heads // tp)
    return layers * 2 * heads_per_rank * model.head_dim * element


def kv_bytes_per_token(model: ModelSpec) -> int:
    """KV-cache bytes per token for the whole model on one GPU (the catalog's published figure)."""
    return kv_bytes_per_token_per_gpu(model, tp=1, pp=1)


def weight_bytes_per_gpu(model: ModelSpec, quantization: Quantization, tp: int, pp: int) -> int:
    """Weights on the most loaded GPU: the worst pipeline stage, embeddings counted on it, sharded
    tensors divided by TP and replicated ones (MLA's fused projection, the MoE router) whole."""
    total = weight_bytes(model, quantization)
    embed = model.embedding_parameters * ACTIVATION_BYTES
    replicated = replicated_bytes(model, quantization)
    layer_share = math.ceil(model.num_hidden_layers / pp) / model.num_hidden_layers
    sharded = (total - embed - replicated) * layer_share + embed
    return math.ceil(sharded / tp + replicated * layer_share)


def largest_linear_bytes_per_gpu(model: ModelSpec, tp: int) -> int:
    """16-bit bytes of the biggest TP-sharded linear layer on one rank: the fused gate/up projection
    (2 x intermediate x hidden) or the fused QKV projection, whichever is larger."""
    intermediate = max(model.intermediate_size, model.moe_intermediate_size)
    gate_up = 2 * intermediate * model.hidden_size
    kv_heads = max(model.num_key_value_heads, tp)  # replicated up to one head per rank
    qkv = (model.num_attention_heads + 2 * kv_heads) * model.head_dim * model.hidden_size
    return math.ceil(max(gate_up, qkv) / tp) * ACTIVATION_BYTES


def largest_checkpoint_tensor_bytes(model: ModelSpec) -> int:
    """Bytes of the checkpoint's biggest single tensor, counted at 16 bits (an upper bound for an
    FP8 checkpoint): the embedding (or LM head, vocab x hidden) or an MLP projection (intermediate x
    hidden; checkpoints keep gate, up and down as separate tensors)."""
    intermediate = max(model.intermediate_size, model.moe_intermediate_size)
    return max(model.vocab_size, intermediate) * model.hidden_size * ACTIVATION_BYTES


# Online FP8 layers in flight at once while loading. vLLM 0.33.0 creates an online-FP8 layer's
# weight on the meta device, materializes it in the checkpoint's 16-bit dtype when its first shard
# arrives and quantizes it once all of its shards are in
# (vllm/model_executor/layers/quantization/online/fp8.py ``OnlineLinearBase.create_weights``;
# vllm/model_executor/model_loader/reload/layerwise.py ``make_online_process_loader``). A checkpoint
# whose tensors are not ordered by layer keeps more than one layer open; vLLM warns from the second
# one on, so two is the budgeted worst case.
ONLINE_QUANT_LAYERS_IN_FLIGHT = 2


def is_online_quantization(model: ModelSpec, quantization: Quantization, prequantized: bool = False) -> bool:
    """FP8 of a 16-bit checkpoint: vLLM quantizes it while loading. Not for the model's own FP8
    checkpoint, nor for a repository that is already quantized (``prequantized``)."""
    fp8 = quantization.resolve(model) is Quantization.FP8
    return fp8 and model.checkpoint_dtype != "fp8" and not prequantized


def load_peak_bytes_per_gpu(
    model: ModelSpec, quantization: Quantization, tp: int, pp: int, prequantized: bool = False
) -> int:
    """Peak weight memory of one GPU while vLLM loads the model: the final weights plus, for online
    FP8, the 16-bit copies of the layers being quantized."""
    final = weight_bytes_per_gpu(model, quantization, tp, pp)
    if not is_online_quantization(model, quantization, prequantized):
        return final
    return final + ONLINE_QUANT_LAYERS_IN_FLIGHT * largest_linear_bytes_per_gpu(model, tp)


def budget_bytes_per_gpu(cuda_memory_mib: int, gpu_memory_utilization: float) -> int:
    """What vLLM may use on one GPU: ceil(CUDA total x utilization)
    (vllm/v1/worker/utils.py ``request_memory``, vLLM 0.33.0). CUDA's total, not EC2's figure."""
    return math.ceil(cuda_memory_mib * 1024 * 1024 * gpu_memory_utilization)


# AutoAWQ checkpoints: 4-bit weights packed 8 per int32, one scale per group of 128 input features.
AWQ_GROUP_SIZE = 128
AWQ_PACK_FACTOR = 8
# VocabParallelEmbedding pads the vocabulary to a multiple of 64 before splitting it over ranks
# (vllm/model_executor/layers/vocab_parallel_embedding.py, DEFAULT_VOCAB_PADDING_SIZE, pad_vocab_size).
VOCAB_PADDING = 64


def tensor_parallel_refusal(
    model: ModelSpec, tp: int, quantization: Quantization = Quantization.AUTO
) -> str | None:
    """Why vLLM 0.33.0 refuses ``model`` at tensor-parallel size ``tp``, or None when it accepts it.

    - attention heads must split evenly (vllm/config/model.py ``verify_with_parallel_config``);
    - KV heads split evenly, or are replicated when TP is a multiple of them
      (vllm/model_executor/layers/linear.py ``QKVParallelLinear``: ``divide(tp, kv_heads)``);
    - every column-parallel output splits evenly: the MLP's intermediate size (and the MoE experts')
      (``MergedColumnParallelLinear``: ``divide(output_size, tp)``), the padded vocabulary;
    - AWQ: each rank's input slice of a row-parallel layer (down_proj: intermediate / TP, o_proj:
      heads x head_dim / TP) must be whole groups of 128, and each rank's output slice whole packs
      of 8 (vllm/model_executor/layers/quantization/auto_awq.py ``AutoAWQLinearMethod.create_weights``;
      the Marlin path refuses the same group split, quantization/utils/marlin_utils.py
      ``check_marlin_supports_layer``).
    """
    if tp < 1:
        return "tensor-parallel size must be at least 1"
    heads = model.num_attention_heads
    if heads % tp:
        return f"{heads} attention heads do not split over {tp} GPUs"
    kv = model.num_key_value_heads
    if model.attention is Attention.GQA and kv % tp and tp % kv:
        return f"{kv} KV heads neither split over nor replicate onto {tp} GPUs"
    for name, size in (("intermediate size", model.intermediate_size),
                       ("MoE intermediate size", model.moe_intermediate_size)):  # fmt: skip
        if size and size % tp:
            return f"{name} {size} does not split over {tp} GPUs"
    padded_vocab = -(-model.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    if padded_vocab % tp:
        return f"padded vocabulary {padded_vocab} does not split over {tp} GPUs"
    if quantization.resolve(model) is Quantization.AWQ_INT4:
        for name, size in (("intermediate size", model.intermediate_size),
                           ("attention width", heads * model.head_dim)):  # fmt: skip
            if (size // tp) % AWQ_GROUP_SIZE:
                return (
                    f"AWQ: {name} {size} / TP {tp} = {size // tp} is not a multiple of the "
                    f"group size {AWQ_GROUP_SIZE}"
                )
            if (size // tp) % AWQ_PACK_FACTOR:
                return f"AWQ: {name} {size} / TP {tp} is not a multiple of the pack factor {AWQ_PACK_FACTOR}"
    return None


def valid_tensor_parallel(model: ModelSpec, tp: int, quantization: Quantization = Quantization.AUTO) -> bool:
    """Whether vLLM accepts ``model`` at tensor-parallel size ``tp`` (see ``tensor_parallel_refusal``)."""
    return tensor_parallel_refusal(model, tp, quantization) is None
