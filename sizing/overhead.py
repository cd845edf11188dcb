"""Memory vLLM needs on each GPU, inside the ``--gpu-memory-utilization`` budget, besides the
weights and the KV cache: what it profiles as activation peak, non-torch memory and CUDA graphs.

vLLM 0.33.0 sizes the KV cache as ``ceil(cuda_total x utilization) - weights - profiled peak
activations - non-torch memory - CUDA graph estimate`` (vllm/v1/worker/gpu_worker.py,
``determine_available_memory``; CUDA graphs counted inside the budget since v0.21.0, same file).
The model below has one term per driver, each from a measurement or from vLLM's own shapes; a
user's own vLLM log overrides it for that GPU and parallelism (see ``sizing.calibration``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .catalog import InstanceType, ModelSpec

GIB = 1024**3

# Default --max-num-batched-tokens of `vllm serve` (UsageContext.OPENAI_API_SERVER) by GPU memory:
# 16384 from 160 GiB, 8192 from 70 GiB except A100, else 2048 (vllm/engine/arg_utils.py,
# EngineArgs.get_batch_defaults in 0.33.0). The profiling run
# pushes one batch of that many tokens through the model.
BATCHED_TOKENS_BY_MEMORY = ((160 * GIB, 16384), (70 * GIB, 8192))
DEFAULT_BATCHED_TOKENS = 2048

# The profiling run's activations: per token the hidden state plus the MLP's fused gate/up output
# of this rank, 16-bit (vllm/model_executor/layers/linear.py MergedColumnParallelLinear).
ACTIVATION_BYTES = 2
# The sampler's dummy run holds one fp32 logits row per sequence over this rank's vocabulary
# (vllm/v1/worker/gpu_model_runner.py ``_dummy_sampler_run``; ParallelLMHead shards the vocab).
LOGITS_BYTES = 4

# Measured: DeepSeek-R1-Distill-Llama-8B on one A10G at --gpu-memory-utilization 0.9 reported
# 14.99 GiB of weights and 4.17 GiB of KV cache out of a 20.1 GiB budget: 0.94 GiB of runtime
# overhead at TP 1, with vLLM's defaults (256 sequences, 2048 batched tokens, CUDA graphs on)
# (awslabs/ai-on-eks, ray-vllm-deepseek.md). What the two shape terms do not explain there is the
# fixed part: CUDA graph pool, cuBLAS workspaces, allocator slack.
MEASURED_SINGLE_GPU = {"budget_gib": 20.1, "weights_gib": 14.99, "kv_gib": 4.17}
MEASURED_SINGLE_GPU_SHAPE = {"hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 128256,
                             "max_num_seqs": 256, "batched_tokens": 2048}  # fmt: skip

# Measured: at TP > 1 vLLM reported "non_torch_memory takes 0.20GiB" per rank (NCCL and custom
# all-reduce buffers live outside the torch allocator) (vllm-project/vllm#14447, worker.py log of
# an 8-rank run). Added per GPU whenever ranks talk to each other (TP or PP > 1).
MEASURED_COLLECTIVES_GIB = 0.20


def batched_tokens(instance: InstanceType) -> int:
    """vLLM's default --max-num-batched-tokens on this GPU (what the profiling run uses)."""
    total = instance.cuda_memory_mib * 1024**2
    for floor, tokens in BATCHED_TOKENS_BY_MEMORY:
        if total >= floor and not (tokens == 8192 and instance.gpu_model == "A100"):
            return tokens
    return DEFAULT_BATCHED_TOKENS


def activation_bytes(hidden: int, intermediate_per_rank: int, tokens: int) -> int:
    return tokens * (hidden + 2 * intermediate_per_rank) * ACTIVATION_BYTES


def logits_bytes(vocab_per_rank: int, max_num_seqs: int) -> int:
    return max_num_seqs * vocab_per_rank * LOGITS_BYTES


def _fixed_bytes() -> float:
    m, s = MEASURED_SINGLE_GPU, MEASURED_SINGLE_GPU_SHAPE
    measured = (m["budget_gib"] - m["weights_gib"] - m["kv_gib"]) * GIB
    shapes = activation_bytes(s["hidden_size"], s["intermediate_size"], s["batched_tokens"]) + logits_bytes(
        s["vocab_size"], s["max_num_seqs"]
    )
    return measured - shapes


@dataclass(frozen=True)
class Overhead:
    """Runtime overhead per GPU, by term (bytes)."""

    fixed: int
    activations: int
    logits: int
    collectives: int
    calibrated: int | None = None  # from the user's own vLLM log, replaces the model when set

    @property
    def total(self) -> int:
        if self.calibrated is not None:
            return self.calibrated
        return self.fixed + self.activations + self.logits + self.collectives


def runtime_overhead(
    model: ModelSpec,
    instance: InstanceType,
    tp: int,
    pp: int,
    max_num_seqs: int,
    calibrated: int | None = None,
) -> Overhead:
    """Overhead on the most loaded GPU of a TP x PP replica of ``model`` on ``instance``."""
    intermediate = max(model.intermediate_size, model.moe_intermediate_size)
    return Overhead(
        fixed=math.ceil(_fixed_bytes()),
        activations=activation_bytes(
            model.hidden_size, math.ceil(intermediate / tp), batched_tokens(instance)
        ),
        logits=logits_bytes(math.ceil(model.vocab_size / tp), max_num_seqs),
        collectives=math.ceil(MEASURED_COLLECTIVES_GIB * GIB) if tp * pp > 1 else 0,
        calibrated=calibrated,
    )
