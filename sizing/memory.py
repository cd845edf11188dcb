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

# Memory vLLM needs per GPU inside that budget besides weights and KV cache: CUDA context,
# cuBLAS/NCCL workspaces, the activation peak of the profiling run and CUDA-graph pools.
# Observed: DeepSeek-R1-Distill-Llama-8B on one A10G at 0.9 utilization reported 14.99 GiB of
# weights and 4.17 GiB of KV cache out of 20.1 GiB, leaving ~1.0 GiB (awslabs/ai-on-eks,
# ray-vllm-deepseek.md). We budget twice that so TP>1 (NCCL buffers) and larger batches still fit.
RUNTIME_OVERHEAD_GIB_PER_GPU = 2.0

# 16-bit activations and KV cache: two bytes per element (bf16, or fp16 on GPUs without bf16).
ACTIVATION_BYTES = 2

# AWQ int4 (group size 128): 4-bit weights plus one fp16 scale and one packed 4-bit zero point per
# group of 128 weights = 0.5 + (2 + 0.5) / 128 bytes per parameter (AutoAWQ / vLLM AWQ format).
AWQ_BYTES_PER_PARAM = 0.5 + 2.5 / 128

# FP8 block scales: one fp32 scale per 128x128 weight block (DeepSeek-V3 README_WEIGHTS.md,
# weight_block_size [128, 128]); per-tensor scales of online FP8 are smaller, so this is an upper bound.
FP8_BYTES_PER_PARAM = 1 + 4 / (128 * 128)


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
    linear = model.parameters - embed
    per_param = {
        Quantization.BF16: 2.0,
        Quantization.FP8: FP8_BYTES_PER_PARAM,
        Quantization.AWQ_INT4: AWQ_BYTES_PER_PARAM,
    }[q]
    return math.ceil(linear * per_param + embed * ACTIVATION_BYTES)


def download_bytes(model: ModelSpec, quantization: Quantization) -> int:
    """Bytes of checkpoint files a replica downloads before loading.

    FP8 on a distill is vLLM's online quantization of the bf16 checkpoint, so the bf16 files are
    what is downloaded; AWQ is a pre-quantized checkpoint of about the in-memory size.
    """
    q = quantization.resolve(model)
    if model.checkpoint_dtype == "fp8" and q is Quantization.FP8 and model.checkpoint_bytes:
        return model.checkpoint_bytes
    if q is Quantization.AWQ_INT4:
        return weight_bytes(model, q)
    return (model.parameters + model.mtp_parameters) * 2


def kv_bytes_per_token_per_gpu(model: ModelSpec, tp: int, pp: int) -> int:
    """KV-cache bytes one token costs on each GPU of a TP x PP group (worst pipeline stage).

    GQA: K and V for each KV head on this rank; when TP exceeds the KV-head count vLLM replicates
    heads, so a rank always holds at least one. MLA: vLLM caches one latent of
    kv_lora_rank + qk_rope_head_dim per token per layer, replicated on every TP rank.
    """
    layers = math.ceil(model.num_hidden_layers / pp)
    if model.attention is Attention.MLA:
        return layers * (model.kv_lora_rank + model.qk_rope_head_dim) * ACTIVATION_BYTES
    heads_per_rank = max(1, model.num_key_value_heads // tp)
    return layers * 2 * heads_per_rank * model.head_dim * ACTIVATION_BYTES


def kv_bytes_per_token(model: ModelSpec) -> int:
    """KV-cache bytes per token for the whole model on one GPU (the catalog's published figure)."""
    return kv_bytes_per_token_per_gpu(model, tp=1, pp=1)


def weight_bytes_per_gpu(model: ModelSpec, quantization: Quantization, tp: int, pp: int) -> int:
    """Weights on the most loaded GPU: the worst pipeline stage, embeddings counted on it."""
    total = weight_bytes(model, quantization)
    embed = model.embedding_parameters * ACTIVATION_BYTES
    layer_share = math.ceil(model.num_hidden_layers / pp) / model.num_hidden_layers
    return math.ceil(((total - embed) * layer_share + embed) / tp)


def usable_bytes_per_gpu(gpu_memory_mib: int, gpu_memory_utilization: float) -> int:
    """Memory vLLM can give to weights and KV cache on one GPU."""
    budget = gpu_memory_mib * 1024 * 1024 * gpu_memory_utilization
    return math.floor(budget - RUNTIME_OVERHEAD_GIB_PER_GPU * GIB)


def valid_tensor_parallel(model: ModelSpec, tp: int) -> bool:
    """vLLM shards attention heads evenly: TP must divide the attention-head count, and KV heads
    must either split evenly across ranks or be replicated a whole number of times."""
    if tp < 1 or model.num_attention_heads % tp:
        return False
    if model.attention is Attention.MLA:
        return True
    kv = model.num_key_value_heads
    return kv % tp == 0 or tp % kv == 0
