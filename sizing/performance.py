"""The replica performance model: how long one vLLM engine step takes on a plan's GPUs, and what a
replica delivers in steady state for a given concurrency and request lengths.

One step (vLLM 0.33.0 V1 scheduler: decodes and chunked-prefill tokens share one forward pass) is
the sum of its operators, each a roofline over its own bytes and FLOPs (the kernels run one after
another in the step's CUDA graph, so their times add; none is assumed to hide another):

    t = host + gemm + attention + all-reduce
    gemm      = max(weight bytes / (bandwidth x eff_bw), 2 x active params x tokens / (peak x eff_c))
    attention = max(KV bytes read / (bandwidth x eff_kv), attention FLOPs / (peak x eff_c))
    all-reduce (TP > 1) = 2 x layers x (latency of the link + ring bytes / (link bandwidth x share))
    host      = fixed per step + per sequence (bounded: ``PER_SEQUENCE_BOUND_S``)

- weight bytes: what each GPU holds (for the MoE model, the share of routed experts the step's
  tokens touch); KV bytes: the cached context of every scheduled token;
- attention FLOPs: QK^T and AV, 4 x layers x heads x head_dim per (token, context) pair;
- the all-reduce latency is per interconnect, cited (``allreduce_latency_s``): vLLM's custom
  all-reduce on NVLink/NVSwitch, NCCL over PCIe beyond two GPUs; so is the share of the link the
  payload moves at (``allreduce_bus_efficiency``: NCCL's ring over PCIe reaches ~57 % of it);
- pipeline parallel: the batch flows through PP stages one after another, each stage holding 1/PP of
  the layers, plus an activation hand-off between nodes per stage boundary.

Datasheet figures come from ``sizing/data/gpu_specs.json`` (each with its source); the efficiencies
and the host term are fitted to the published points marked ``fit`` in
``sizing/data/measurements.json`` (``python -m sizing.fit``, stored in ``sizing/data/efficiency.json``);
``python -m sizing.bench`` reports the error on the held-out points beside it. Pure functions: both
``python -m sizing throughput`` and the autoscaling simulator use them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from .catalog import Attention, InstanceType, ModelSpec, gpu_memory_key
from .memory import (
    ACTIVATION_BYTES,
    KvCacheDtype,
    Quantization,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)

# vLLM 0.33.0 defaults (reference/upstream/vllm-scheduler/scheduler-facts.json):
# CacheConfig.DEFAULT_BLOCK_SIZE (vllm/config/cache.py).
BLOCK_SIZE = 16

# Request lengths the plan's throughput figures are quoted at: DeepSeek-R1 emitted ~1,162 completion
# tokens on a sample reasoning prompt (Microsoft Azure HPC blog, "Performance analysis of DeepSeek
# R1 AI inference using vLLM on ND-H100-v5"); prompts are a chat turn with context, assumed 500.
# The simulator's default traffic imports them (perf/simulate/traffic.py).
PLAN_PROMPT_TOKENS = 500
PLAN_OUTPUT_TOKENS = 1162

# How requests' lengths are drawn around their means: all the same, or exponentially (the
# simulator's default traffic, perf/simulate/traffic.py ``LengthProfile``). A load test point's
# ``length_distribution`` (absent: fixed, as every report before 2026-12-06 ran) and the load
# tester's --lengths choices (perf/loadtest/runner.py) take these names.
LENGTH_DISTRIBUTIONS = ("fixed", "exponential")


def length_distribution(exponential_lengths: bool) -> str:
    """The name of the draw, as ``LENGTH_DISTRIBUTIONS`` spells it."""
    return LENGTH_DISTRIBUTIONS[1] if exponential_lengths else LENGTH_DISTRIBUTIONS[0]


def resident_tokens(prompt_tokens: float, output_tokens: float, exponential_lengths: bool) -> float:
    """Tokens a running sequence holds on average in a full batch: with every request as long,
    its prompt and half its output (a closed loop spreads its streams over their lifetime); with
    lengths drawn exponentially around those means, its prompt and a whole mean output (a
    sequence seen running is length-biased and its generated part, seen at a random moment, is
    again exponential with the mean output: ``preemption_probability``)."""
    return prompt_tokens + (output_tokens if exponential_lengths else output_tokens / 2)


# A request's path outside the engine step before its first token: HTTP, the OpenAI server's
# tokenization and the scheduler's admission. InferenceBench's H100 sweep (vLLM 0.21.0,
# Llama-3.1-8B, https://yobitelcomm.github.io/bench/recipes/concurrency-sweep/) measured TTFT p50
# 13.98 ms at concurrency 1 with a decode step (TPOT p50) of 6.48 ms: the ~7.5 ms beyond one
# short-prompt forward pass is this path.
SERVER_PATH_S = 0.0075

# All-reduce latency per call, by interconnect (the payload's transfer time is added on top):
# - NVLink/NVSwitch: vLLM's custom all-reduce runs where the GPUs are fully connected
#   (vllm 0.33.0 vllm/distributed/device_communicators/custom_all_reduce.py:509
#   ``should_custom_ar``); NCCL's NVLS on 2x H100 measured ~6 us for small messages with CUDA
#   graphs (NVIDIA/nccl#1259, all_reduce_perf, 2024-04-22).
# - PCIe, more than two GPUs: vLLM disables its custom all-reduce (custom_all_reduce.py:267-270,
#   "not supported on more than two PCIe-only GPUs") and NCCL runs it: 19.4-24.2 us for 4-32 KB
#   inside a CUDA graph on 4 PCIe GPUs (haohervchb/sglang-V100 pull request #2, table "NCCL (PXB)").
# - PCIe, two GPUs: the custom all-reduce runs (custom_all_reduce.py:509, world_size == 2): the
#   same table's one-shot push, 7.2 us at 16 KB.
ALLREDUCE_LATENCY_NVLINK_S = 6e-6
ALLREDUCE_LATENCY_PCIE_NCCL_S = 22e-6
ALLREDUCE_LATENCY_PCIE_TWO_GPUS_S = 7.2e-6

# The payload's transfer time over PCIe when NCCL runs the all-reduce (more than two GPUs): NCCL's
# ring does not move data at the link's line rate. The same table (4 ranks, fp16, PCIe Gen3 x16
# behind one switch) grows from 24.2 us at 32 KB to 83.5 us at 384 KB: 352 KiB more in 59.3 us, of
# which a ring moves 2(n-1)/n = 1.5x per GPU, i.e. 9.1 GB/s of the link's 16 GB/s per direction.
# That share of the link is applied to the instance's own PCIe link (Gen4: 32 GB/s). NVLink
# (vLLM's custom all-reduce) and two PCIe GPUs keep the link figure.
PCIE_NCCL_TABLE = ((32 * 1024, 24.2e-6), (384 * 1024, 83.5e-6))
PCIE_NCCL_TABLE_LINK_GB_S = 16.0
PCIE_NCCL_TABLE_RANKS = 4


def pcie_nccl_bus_efficiency() -> float:
    """The share of its PCIe link NCCL's ring all-reduce reached in the cited table (about 0.57)."""
    (s0, t0), (s1, t1) = PCIE_NCCL_TABLE
    n = PCIE_NCCL_TABLE_RANKS
    bus_bytes_per_s = 2.0 * (n - 1) / n * (s1 - s0) / (t1 - t0)
    return bus_bytes_per_s / (PCIE_NCCL_TABLE_LINK_GB_S * 1e9)


# The host's per-sequence work per step (scheduling, sampling, detokenizing) is bounded: vLLM V1
# keeps a persistent batch and updates it incrementally (vllm/v1/worker/gpu_input_batch.py), so a
# sequence costs microseconds, not the fraction of a millisecond a free fit chose when GEMM and
# attention were assumed to overlap (0.3 ms, which alone exceeded whole published steps at ~100
# sequences). The fit may not go above this bound.
PER_SEQUENCE_BOUND_S = 20e-6

# Async scheduling: vLLM's scheduler runs one step ahead, preparing step N+1 on the host while the
# GPU executes step N (vllm-project/vllm pull request #19970, "Implement Async Scheduling",
# 2025-06-23: "overlapping scheduling with model execution"). It became the default when nothing
# incompatible is set (vllm-project/vllm#27614, in the plan of vllm-project/vllm#27679 opened
# 2025-10-28; pull request #31998 of 2026-01-08 extended the default to speculative decoding). vLLM 0.33.0
# (vllm/config/vllm.py ``VllmConfig.__post_init__``, the ``async_scheduling is None`` branch)
# enables it unless pipeline parallelism (``v1_async_sched_incompat``), a pooling model or an
# executor without support (the uni- and multiprocess executors have it) rules it out.


def async_scheduling_default(pipeline_parallel: int) -> bool:
    """Whether vLLM 0.33.0 runs a replica with async scheduling by default: yes, except with
    pipeline parallelism."""
    return pipeline_parallel <= 1


class PerformanceError(ValueError):
    """No performance figures for the requested hardware or model."""


def read_data(name: str) -> dict:
    """A JSON file of sizing/data/."""
    text = resources.files(__package__ or "sizing").joinpath("data", name).read_text(encoding="utf-8")
    data: dict = json.loads(text)
    return data


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU model (dense peaks)."""

    name: str
    memory_gb_s: float
    fp16_tflops: float
    bf16_tflops: float | None
    fp8_tflops: float | None
    source: str


@dataclass(frozen=True)
class Efficiencies:
    """Fractions of the datasheet peaks a vLLM step reaches, and its fixed costs (fitted)."""

    bandwidth: float
    compute: float
    step_overhead_s: float
    allreduce_latency_s: float
    source: str = "fit"
    # Host work that grows with the batch (scheduling, sampling, detokenizing each sequence),
    # at most PER_SEQUENCE_BOUND_S.
    per_sequence_s: float = 0.0
    # Fraction of HBM bandwidth the paged-attention kernels reach reading KV (scattered 16-token
    # blocks, not one streamed matrix); 0: the GEMMs' ``bandwidth``.
    attention_bandwidth: float = 0.0


@cache
def gpu_specs() -> dict[str, GpuSpec]:
    """``gpu_specs.json``'s GPUs, keyed as ``gpu_memory_key`` names them (A100-40GB, A100-80GB)."""
    out = {}
    for name, g in read_data("gpu_specs.json")["gpus"].items():
        out[name] = GpuSpec(
            name, g["memory_gb_s"], g["fp16_tflops"], g["bf16_tflops"], g["fp8_tflops"], g["source"]
        )
    return out


@cache
def interconnect_gb_s(family: str) -> float:
    """GPU-to-GPU bandwidth per direction inside one instance of ``family``."""
    links = read_data("gpu_specs.json")["interconnects"]
    if family not in links:
        raise PerformanceError(f"no interconnect figure for instance family {family!r}")
    return float(links[family]["gb_s"])


@cache
def allreduce_latency_s(family: str, tensor_parallel: int) -> float:
    """Latency of one all-reduce among ``tensor_parallel`` GPUs of one ``family`` instance: the
    cited figure for its interconnect kind (NVLink/NVSwitch, or PCIe with NCCL or, for two GPUs,
    vLLM's custom all-reduce)."""
    if tensor_parallel <= 1:
        return 0.0
    links = read_data("gpu_specs.json")["interconnects"]
    if family not in links:
        raise PerformanceError(f"no interconnect figure for instance family {family!r}")
    if "nvlink" in links[family]["kind"].lower():
        return ALLREDUCE_LATENCY_NVLINK_S
    return ALLREDUCE_LATENCY_PCIE_TWO_GPUS_S if tensor_parallel == 2 else ALLREDUCE_LATENCY_PCIE_NCCL_S


@cache
def allreduce_bus_efficiency(family: str, tensor_parallel: int) -> float:
    """Share of the link's bandwidth an all-reduce's payload moves at among ``tensor_parallel``
    GPUs of one ``family`` instance: NCCL over PCIe beyond two GPUs reaches the cited table's share
    (``pcie_nccl_bus_efficiency``); NVLink/NVSwitch and two PCIe GPUs (vLLM's custom all-reduce)
    the link figure."""
    if tensor_parallel <= 2:
        return 1.0
    links = read_data("gpu_specs.json")["interconnects"]
    if family not in links:
        raise PerformanceError(f"no interconnect figure for instance family {family!r}")
    if "nvlink" in links[family]["kind"].lower():
        return 1.0
    return pcie_nccl_bus_efficiency()


@cache
def between_nodes_gb_s() -> float:
    return float(read_data("gpu_specs.json")["between_nodes"]["gb_s"])


def kernel_class(model: ModelSpec) -> str:
    """Efficiencies are fitted per kernel family: dense GEMMs, or fused MoE expert GEMMs."""
    return "moe" if model.moe else "dense"


@cache
def fitted_efficiencies(kind: str = "dense") -> Efficiencies:
    """The efficiencies ``python -m sizing.fit`` wrote (sizing/data/efficiency.json) for ``kind``."""
    data = read_data("efficiency.json")
    e = data[kind]
    return Efficiencies(
        e["bandwidth"],
        e["compute"],
        e["step_overhead_s"],
        e["allreduce_latency_s"],
        data["source"],
        e.get("per_sequence_s", 0.0),
        e.get("attention_bandwidth", 0.0),
    )


@cache
def _model_extras() -> dict[str, dict]:
    extras: dict[str, dict] = read_data("gpu_specs.json")["models"]
    return extras


def active_parameters(model: ModelSpec) -> int:
    """Parameters one token passes through: all of a dense model; 37B of r1-671b (cited in
    gpu_specs.json ``models``)."""
    extra = _model_extras().get(model.variant)
    return int(extra["active_parameters"]) if extra else model.parameters


def routed_expert_parameters(model: ModelSpec) -> int:
    """Parameters of all routed experts (gate, up, down projections of every MoE layer)."""
    if not model.moe:
        return 0
    layers = model.num_hidden_layers - model.first_k_dense_replace
    return layers * model.n_routed_experts * 3 * model.hidden_size * model.moe_intermediate_size


def touched_expert_fraction(model: ModelSpec, tokens: int) -> float:
    """Expected share of routed experts a step of ``tokens`` tokens reads, each token choosing
    ``experts_per_token`` of ``n_routed_experts`` (uniform routing assumed)."""
    if not model.moe or tokens <= 0:
        return 0.0
    k = int(_model_extras()[model.variant]["experts_per_token"])
    return 1.0 - (1.0 - k / model.n_routed_experts) ** tokens


@dataclass(frozen=True)
class Hardware:
    """One replica's model and GPUs: everything a step's duration depends on, except the batch."""

    model: ModelSpec
    quantization: Quantization
    gpu: GpuSpec
    tensor_parallel: int
    pipeline_parallel: int
    link_gb_s: float
    efficiencies: Efficiencies
    # Seconds per all-reduce on this instance's link (``allreduce_latency_s``).
    link_latency_s: float = 0.0
    # The engine schedules step N+1 on the host while the GPU runs step N (``ASYNC_SCHEDULING``):
    # the host term then overlaps the GPU's instead of adding to it.
    async_scheduling: bool = True
    # vLLM --kv-cache-dtype: the bytes every cached token costs to hold and to read.
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    # Share of ``link_gb_s`` an all-reduce's payload moves at (``allreduce_bus_efficiency``).
    link_efficiency: float = 1.0

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def peak_tflops(self) -> float:
        """Dense tensor peak the quantization's kernels use: FP8 tensor cores for FP8 weights where
        the GPU has them; the 16-bit path for bf16, AWQ (W4A16) and weight-only FP8 (Marlin)."""
        g = self.gpu
        if self.quantization is Quantization.FP8 and g.fp8_tflops:
            return g.fp8_tflops
        return g.bf16_tflops or g.fp16_tflops

    def with_efficiencies(self, eff: Efficiencies) -> Hardware:
        return replace(self, efficiencies=eff)


def hardware(
    model: ModelSpec,
    quantization: Quantization,
    instance: InstanceType,
    tensor_parallel: int,
    pipeline_parallel: int = 1,
    efficiencies: Efficiencies | None = None,
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO,
) -> Hardware:
    """The ``Hardware`` of a replica of ``model`` on ``tensor_parallel`` GPUs of ``instance``, as
    the pinned vLLM runs it (async scheduling unless pipeline parallel: ``async_scheduling_default``)."""
    key = gpu_memory_key(instance.gpu_model, instance.gpu_memory_mib)
    specs = gpu_specs()
    if key not in specs:
        raise PerformanceError(f"no datasheet figures for GPU {key} (sizing/data/gpu_specs.json)")
    link = interconnect_gb_s(instance.family) if tensor_parallel > 1 else 0.0
    return Hardware(
        model,
        quantization.resolve(model),
        specs[key],
        tensor_parallel,
        pipeline_parallel,
        link,
        efficiencies or fitted_efficiencies(kernel_class(model)),
        allreduce_latency_s(instance.family, tensor_parallel),
        async_scheduling_default(pipeline_parallel),
        kv_cache_dtype,
        allreduce_bus_efficiency(instance.family, tensor_parallel),
    )


def _stage_time(
    hw: Hardware, tokens: int, context_tokens: float, attention_tokens: float, layers_share: float
) -> float:
    """Seconds one pipeline stage (``layers_share`` of the layers) needs for a forward pass of
    ``tokens`` new tokens that read ``context_tokens`` cached tokens' KV and attend over
    ``attention_tokens`` (token, context) pairs in all: weight GEMMs, attention and all-reduces,
    each its own roofline, added."""
    m, e, tp, pp = hw.model, hw.efficiencies, hw.tensor_parallel, hw.pipeline_parallel
    bandwidth = hw.gpu.memory_gb_s * 1e9 * e.bandwidth
    peak = hw.peak_tflops * 1e12 * e.compute
    weights = weight_bytes_per_gpu(m, hw.quantization, tp, pp) * pp * layers_share
    if m.moe:
        # Routed experts a step does not touch are not read.
        routed = weights * routed_expert_parameters(m) / m.parameters
        weights -= routed * (1.0 - touched_expert_fraction(m, tokens))
    linear_flops = 2.0 * active_parameters(m) * layers_share * tokens / tp
    gemm_s = max(weights / bandwidth, linear_flops / peak)
    layers = m.num_hidden_layers * layers_share
    kv = kv_bytes_per_token_per_gpu(m, tp, pp, hw.kv_cache_dtype) * pp * layers_share * context_tokens
    if m.attention is Attention.MLA:
        attn_width = m.num_attention_heads * (m.kv_lora_rank + m.qk_rope_head_dim)
    else:
        attn_width = m.num_attention_heads * m.head_dim
    attention_flops = 4.0 * layers * attn_width * attention_tokens / tp
    kv_bandwidth = hw.gpu.memory_gb_s * 1e9 * (e.attention_bandwidth or e.bandwidth)
    attention_s = max(kv / kv_bandwidth, attention_flops / peak)
    comm_s = 0.0
    if tp > 1:
        # Two all-reduces per layer (after attention and after the MLP), ring: 2(tp-1)/tp of the
        # activation bytes cross each GPU's link, at the share of it the collective reaches
        # (``link_efficiency``: NCCL over PCIe), after the link's latency.
        size = tokens * m.hidden_size * ACTIVATION_BYTES
        per = 2.0 * (tp - 1) / tp * size / (hw.link_gb_s * 1e9 * hw.link_efficiency)
        per += hw.link_latency_s + e.allreduce_latency_s
        comm_s = 2.0 * layers * per
    return gemm_s + attention_s + comm_s


def step_seconds(
    hw: Hardware,
    tokens: int,
    context_tokens: float,
    attention_tokens: float | None = None,
    seqs: int | None = None,
) -> float:
    """Seconds of one engine step scheduling ``tokens`` tokens (one per decoding sequence, plus the
    prefill chunks) that read ``context_tokens`` cached tokens' KV in all. ``attention_tokens``:
    the (token, context) pairs attention computes; for decodes it equals the context, for a prefill
    chunk of c tokens after d cached ones it is c x (d + c/2). Default: the context. ``seqs``: the
    sequences in the step (default: one per token)."""
    pp = hw.pipeline_parallel
    if tokens <= 0:
        return 0.0
    pairs = context_tokens if attention_tokens is None else attention_tokens
    e = hw.efficiencies
    host = e.step_overhead_s + e.per_sequence_s * (tokens if seqs is None else seqs)
    if pp == 1:
        gpu = _stage_time(hw, tokens, context_tokens, pairs, 1.0)
    else:
        # The batch passes the stages in turn (vLLM splits it into PP micro-batches, which overlap
        # but do not add bandwidth: every stage still reads its weights once per micro-batch).
        micro = max(1, math.ceil(tokens / pp))
        stage = _stage_time(hw, micro, context_tokens / pp, pairs / pp, 1.0 / pp)
        handoff = micro * hw.model.hidden_size * ACTIVATION_BYTES / (between_nodes_gb_s() * 1e9)
        gpu = pp * stage + (pp - 1) * handoff
    # With async scheduling the host prepares the next step while the GPU runs this one: the
    # longer of the two sets the pace. Without it (vLLM V0, V1 before async became the default,
    # pipeline parallel in 0.33.0) they run one after the other.
    return max(host, gpu) if hw.async_scheduling else host + gpu


# The simulator's preemption model (perf/simulate/engine.py ``Simulation._schedule_step``,
# after vLLM 0.33.0's ``Scheduler.schedule``): the running sequences are preempted while the KV
# blocks they hold, ``kv_blocks`` of their tokens, exceed the cache's blocks. The planner sizes
# ``--max-num-seqs`` with the same function (``preemption_probability``).
def kv_blocks(tokens: int, seqs: int) -> int:
    """KV blocks ``seqs`` running sequences holding ``tokens`` tokens use: the token total in
    blocks plus half a partial block per sequence."""
    return -(-tokens // BLOCK_SIZE) + seqs // 2


def _log_erlang_pdf(x: float, shape: int, scale: float) -> float:
    return (shape - 1) * math.log(x) - x / scale - shape * math.log(scale) - math.lgamma(shape)


def _erlang_survival(y: float, shape: int, scale: float) -> float:
    """P(Gamma(shape, scale) > y) for an integer shape: a Poisson tail, summed in log space."""
    if y <= 0:
        return 1.0
    lam = y / scale
    term = -lam  # log of lam^k e^-lam / k!, k = 0
    total = 0.0
    for k in range(shape):
        total += math.exp(term)
        term += math.log(lam) - math.log(k + 1)
    return min(1.0, total)


# --max-num-seqs: the largest batch whose chance of preemption, in the simulator's preemption model
# at the planning lengths (``preemption_probability``), stays under this (sizing/planner.py); and
# the chance above which ``steady_state`` says a batch of exponential lengths preempts.
PREEMPTION_TARGET = 0.01

# Grid of the numerical integration in ``preemption_probability`` (Simpson's rule, even).
_PREEMPTION_GRID = 400


@cache
def preemption_probability(
    batch: int, kv_cache_tokens: int, prompt_tokens: float, output_tokens: float
) -> float:
    """The chance that ``batch`` running sequences outgrow the KV cache, so that the simulator's
    scheduler (and vLLM's) preempts one, when lengths follow the simulator's default draw
    (perf/simulate/traffic.py ``LengthProfile``: prompt and output exponential with these
    means).

    A sequence running at a random instant holds its prompt and the output generated so far. The
    output of a sequence seen mid-stream is length-biased, and its age within it uniform, so for
    exponential outputs the generated-so-far is exponential with the same mean (memorylessness):
    each running sequence holds ``P + A`` tokens, P and A exponential with the two means, and the
    batch holds Gamma(batch, prompt) + Gamma(batch, output) tokens. Preemption: its ``kv_blocks``
    exceed the cache's blocks, i.e. its tokens exceed (blocks - batch // 2) x BLOCK_SIZE. The
    convolution is integrated numerically (Simpson); truncation at max-model-len is ignored (it
    only shortens sequences, so the figure errs high)."""
    if batch < 1:
        return 0.0
    limit = (kv_cache_tokens // BLOCK_SIZE - batch // 2) * BLOCK_SIZE
    if limit <= 0:
        return 1.0
    n = _PREEMPTION_GRID
    h = limit / n
    # P(S > limit) = P(G_p > limit) + integral over x in (0, limit) of f_p(x) P(G_o > limit - x).
    total = 0.0
    for i in range(1, n + 1):  # f_p(0) is 0 for batch >= 2 and the x = 0 term is small for batch 1
        x = i * h
        weight = 1 if i == n else (4 if i % 2 else 2)
        total += (
            weight
            * math.exp(_log_erlang_pdf(x, batch, prompt_tokens))
            * _erlang_survival(limit - x, batch, output_tokens)
        )
    if batch == 1:
        total += _erlang_survival(limit, 1, output_tokens) / prompt_tokens
    return min(1.0, _erlang_survival(limit, batch, prompt_tokens) + total * h / 3)


@dataclass(frozen=True)
class SchedulerLimits:
    """The vLLM engine limits the step model runs under."""

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    block_size: int = BLOCK_SIZE

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size


def default_max_num_batched_tokens(cuda_memory_mib: int, gpu_model: str) -> int:
    """vLLM 0.33.0's OpenAI-server default (vllm/engine/arg_utils.py
    ``EngineArgs.get_batch_defaults``): 16384 from 160 GiB of device memory, 8192 from 70 GiB except
    on A100, else 2048."""
    gib = cuda_memory_mib / 1024
    if gib >= 160:
        return 16384
    if gib >= 70 and gpu_model != "A100":
        return 8192
    return 2048


def default_cuda_graph_capture_sizes(
    max_num_seqs: int, max_num_batched_tokens: int, compute_capability: float
) -> list[int]:
    """The batch sizes vLLM 0.33.0 captures CUDA graphs for when none are configured
    (vllm/config/vllm.py ``VllmConfig._set_cudagraph_sizes``, performance mode "balanced", no
    speculative decoding so one token per decode request): 1, 2, 4, then every 8 below 256 and
    every 16 from 256, up to min(2 x max_num_seqs, 512; 1024 on data-center Blackwell, compute
    capability 10.x) and never above ``max_num_batched_tokens``, which is added itself where it falls
    within that ceiling, as is ``max_num_seqs``."""
    platform_ceiling = 1024 if math.floor(compute_capability) == 10 else 512
    ceiling = min(max_num_seqs * 2, platform_ceiling)
    sizes = {s for s in (1, 2, 4) if s <= ceiling}
    sizes |= set(range(8, min(ceiling + 1, 256), 8)) | set(range(256, ceiling + 1, 16))
    if max_num_batched_tokens <= ceiling:
        sizes.add(max_num_batched_tokens)
    if max_num_seqs <= ceiling:
        sizes.add(max_num_seqs)
    return sorted(s for s in sizes if s <= max_num_batched_tokens)


def default_cuda_graph_count(
    max_num_seqs: int, max_num_batched_tokens: int, compute_capability: float
) -> int:
    """How many CUDA graphs vLLM 0.33.0 captures by default: its default mode FULL_AND_PIECEWISE
    (vllm/config/compilation.py ``cudagraph_mode``) captures a piecewise graph at every capture size
    and a full graph for each decode-only batch of at most ``max_num_seqs`` requests
    (vllm/v1/cudagraph_dispatcher.py ``initialize_cudagraph_keys``). Where the attention backend
    cannot run full graphs vLLM captures fewer, so this is the most it captures."""
    sizes = default_cuda_graph_capture_sizes(max_num_seqs, max_num_batched_tokens, compute_capability)
    return len(sizes) + sum(1 for s in sizes if s <= max_num_seqs)


def default_max_num_seqs(cuda_memory_mib: int, gpu_model: str) -> int:
    """vLLM 0.33.0's OpenAI-server default ``--max-num-seqs`` (vllm/engine/arg_utils.py
    ``EngineArgs.get_batch_defaults``, lines 2973-3006 of the PyPI wheel
    vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl, sha256 4b6bdec4...): 1024 from 160 GiB of
    device memory (line 2981), 1024 from 70 GiB except on A100 (line 2995), else 256 (line 3005)."""
    gib = cuda_memory_mib / 1024
    if gib >= 160 or (gib >= 70 and gpu_model != "A100"):
        return 1024
    return 256


@dataclass(frozen=True)
class SteadyState:
    """One replica serving ``concurrency`` closed-loop streams of fixed lengths."""

    concurrency: int
    running: int
    output_tokens_per_second: float
    requests_per_second: float
    ttft_s: float
    itl_s: float
    kv_cache_tokens: int
    preempted: bool
    limited_by: str

    def to_dict(self) -> dict:
        return {
            "concurrency": self.concurrency,
            "running": self.running,
            "output_tokens_per_second": round(self.output_tokens_per_second, 2),
            "requests_per_second": round(self.requests_per_second, 4),
            "ttft_s": round(self.ttft_s, 4),
            "itl_s": round(self.itl_s, 5),
            "kv_cache_tokens": self.kv_cache_tokens,
            "preempted": self.preempted,
            "limited_by": self.limited_by,
        }


def _blocks(tokens: float, block_size: int) -> int:
    return math.ceil(tokens / block_size)


def steady_state(
    hw: Hardware,
    limits: SchedulerLimits,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    exponential_lengths: bool = False,
) -> SteadyState:
    """Throughput and latency of ``concurrency`` clients each sending a request of
    ``prompt_tokens`` in / ``output_tokens`` out as soon as the last one finished; with
    ``exponential_lengths``, requests whose lengths are drawn exponentially around those means
    (``python -m automation loadtest --lengths exponential``, the simulator's traffic).

    Running sequences: at most ``max_num_seqs``, and as many as the KV blocks hold at their mean
    length (prompt + half the output: in steady state the streams are spread over their lifetime;
    with exponential lengths prompt + a whole mean output, because a running sequence is
    length-biased and its generated part, seen at a random moment, is again exponential with the
    mean output, as ``preemption_probability`` reasons).
    Each request's prompt is prefilled in chunks of what the step budget
    (``max_num_batched_tokens``) leaves after the other sequences' decodes, as vLLM's scheduler
    does (the simulator steps the same way): a cycle in which every running sequence emits its
    ``output_tokens`` holds one chunk step per chunk of each of the ``running`` prompts (the
    others decode in it; the last chunk emits the request's first token) and plain decode steps
    for the rest. The mean time between a stream's tokens is the cycle over ``output_tokens``.
    Streams beyond the running ones wait (Little's law).
    """
    if concurrency < 1 or prompt_tokens < 1 or output_tokens < 1:
        raise PerformanceError("concurrency, prompt and output tokens must be at least 1")
    bs = limits.block_size
    # Tokens a running sequence holds on average, and those a prefill token attends to: half its
    # prompt when every prompt is as long; E[P^2] / 2E[P] = the mean prompt for exponential ones.
    resident = resident_tokens(prompt_tokens, output_tokens, exponential_lengths)
    prefill_attended = prompt_tokens if exponential_lengths else prompt_tokens / 2
    by_kv = limits.kv_blocks // _blocks(resident, bs)
    running = min(concurrency, limits.max_num_seqs, max(1, by_kv))
    limited_by = "concurrency"
    if running < concurrency:
        limited_by = "max_num_seqs" if running == limits.max_num_seqs else "kv_cache"
    # Preemption happens when the running sequences at their full length outgrow the cache; with
    # exponential lengths, when they do so at a random moment more often than the planner allows.
    preempted = (
        preemption_probability(running, limits.kv_cache_tokens, prompt_tokens, output_tokens)
        > PREEMPTION_TARGET
        if exponential_lengths
        else running * _blocks(prompt_tokens + output_tokens, bs) > limits.kv_blocks
    )
    context = running * resident
    decode = step_seconds(hw, running, context, context, running)
    # A new prompt is prefilled in chunks of what the step budget leaves after the decodes.
    chunk = min(prompt_tokens, max(1, limits.max_num_batched_tokens - (running - 1)))
    chunks = math.ceil(prompt_tokens / chunk)
    decode_context = (running - 1) * resident
    per_chunk = step_seconds(
        hw,
        running - 1 + chunk,
        decode_context + prompt_tokens,
        # Prefill tokens attend to their own prompt.
        decode_context + chunk * prefill_attended,
        running,
    )
    chunk_steps = running * chunks
    decode_steps = max(0.0, output_tokens - 1 - chunk_steps * (running - 1) / running)
    cycle = decode_steps * decode + chunk_steps * per_chunk
    itl = cycle / output_tokens
    output_rate = running / itl
    rps = output_rate / output_tokens
    wait = (concurrency - running) / rps if concurrency > running else 0.0
    ttft = SERVER_PATH_S + wait + chunks * per_chunk
    return SteadyState(
        concurrency, running, output_rate, rps, ttft, itl, limits.kv_cache_tokens, preempted, limited_by
    )


@dataclass(frozen=True)
class Roofline:
    """The most a replica could emit at the KV-limited batch: datasheet peaks, no efficiency,
    no host or all-reduce time."""

    batch: int
    step_s: float
    output_tokens_per_second: float


def roofline(
    hw: Hardware,
    kv_cache_tokens: int,
    prompt_tokens: int,
    output_tokens: int,
    exponential_lengths: bool = False,
) -> Roofline:
    """The HBM roofline of one replica at the KV-limited batch for these lengths.

    Batch: as many sequences as the KV cache holds at the tokens a running sequence holds on
    average (``resident_tokens``: prompt + half the output when every request is as long, prompt
    + a whole mean output when lengths are drawn exponentially around those means; no batch of
    that workload holds more sequences on average without outgrowing the cache). Step: every GPU
    reads its weights and the batch's KV once at the datasheet's HBM bandwidth (for PP, the
    stages in turn), or, where more, computes the step's FLOPs at the datasheet's dense peak.
    Each step emits one token per sequence."""
    resident = resident_tokens(prompt_tokens, output_tokens, exponential_lengths)
    batch = max(1, kv_cache_tokens // BLOCK_SIZE // _blocks(resident, BLOCK_SIZE))
    m, tp, pp = hw.model, hw.tensor_parallel, hw.pipeline_parallel
    tokens = batch * (1 + prompt_tokens / output_tokens)  # decodes plus the prefills they replace
    weights = float(weight_bytes_per_gpu(m, hw.quantization, tp, pp) * pp)
    if m.moe:
        routed = weights * routed_expert_parameters(m) / m.parameters
        weights -= routed * (1.0 - touched_expert_fraction(m, math.ceil(tokens)))
    context = batch * resident
    kv = kv_bytes_per_token_per_gpu(m, tp, pp, hw.kv_cache_dtype) * pp * context
    memory_s = (weights + kv) / (hw.gpu.memory_gb_s * 1e9)
    compute_s = 2.0 * active_parameters(m) * tokens / tp / (hw.peak_tflops * 1e12)
    step = max(memory_s, compute_s)
    return Roofline(batch, step, batch / step)


# The plan's workload: requests whose prompt and output are drawn exponentially around the
# planning lengths, as the simulator's default traffic draws them (perf/simulate/traffic.py
# ``LengthProfile``). The plan sizes its batch for it (``preemption_probability``), quotes its
# throughput and price on it (``planning_state``) and judges that price against its roofline
# (``planning_roofline``): one workload for the three.
PLAN_EXPONENTIAL_LENGTHS = True


def planning_state(hw: Hardware, limits: SchedulerLimits, concurrency: int) -> SteadyState:
    """The replica model at ``concurrency`` sequences of the plan's workload."""
    return steady_state(
        hw,
        limits,
        concurrency,
        PLAN_PROMPT_TOKENS,
        PLAN_OUTPUT_TOKENS,
        exponential_lengths=PLAN_EXPONENTIAL_LENGTHS,
    )


def planning_roofline(hw: Hardware, kv_cache_tokens: int) -> Roofline:
    """The HBM roofline of one replica on the plan's workload."""
    return roofline(
        hw,
        kv_cache_tokens,
        PLAN_PROMPT_TOKENS,
        PLAN_OUTPUT_TOKENS,
        exponential_lengths=PLAN_EXPONENTIAL_LENGTHS,
    )
