"""Turn a variant and the allowed GPU families into a sizing plan, or say why none exists.

The rules, in order:
- a replica uses every GPU of a node, or (packing) 1, 2 or 4 of them with ``gpu_count / TP``
  replicas sharing the node, each pod requesting its share of the node's CPU and memory; the TP
  size must be one vLLM accepts for the model;
- pipeline parallelism across nodes only for MoE models (r1-671b) when one node cannot hold them,
  and only on EFA-capable types;
- a type is feasible when its GPUs hold the weights and a KV cache of
  ``max_model_len x min_full_length_sequences`` tokens within ``gpu_memory_utilization``;
- the plan takes the feasible type cheapest for ``max_replicas`` replicas (whole nodes), then per
  replica (a packed replica costs its GPU share); the node pool admits every feasible type that runs
  the same vLLM arguments (same TP, PP and dtype) with the same packing, cheapest first;
- the plan's throughput figures come from the replica model (sizing/performance.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from . import calibration, startup
from .catalog import (
    GPU_FAMILIES,
    InstanceCatalog,
    InstanceType,
    ModelSpec,
    gpu_memory_key,
    instance_catalog,
    model_catalog,
    unknown_family_message,
)
from .checkpoints import known_checkpoint, pinned_revision, prequantized_format
from .fit import setup_disagreement
from .memory import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    GIB,
    KvCacheDtype,
    Quantization,
    budget_bytes_per_gpu,
    download_bytes,
    is_online_quantization,
    kv_bytes_per_token_per_gpu,
    largest_checkpoint_tensor_bytes,
    load_peak_bytes_per_gpu,
    tensor_parallel_refusal,
    weight_bytes,
    weight_bytes_per_gpu,
)
from .nodes import PodRoom, pod_room
from .overhead import runtime_overhead
from .performance import (
    PLAN_EXPONENTIAL_LENGTHS,
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    PREEMPTION_TARGET,
    Hardware,
    SchedulerLimits,
    SteadyState,
    allreduce_bus_efficiency,
    default_cuda_graph_count,
    default_max_num_batched_tokens,
    hardware,
    interconnect_gb_s,
    length_distribution,
    planning_roofline,
    planning_state,
    preemption_probability,
)

VLLM_PORT = 8000

# Unpacked size of the vLLM OpenAI server image: 28.6 GB for v0.12 (vllm-project/vllm#27154),
# rounded up; it lands on the node's disk next to the downloaded weights.
VLLM_IMAGE_GIB = 30
# Scratch on the node disk beyond image and weights: logs, torch.compile and Triton caches.
SCRATCH_GIB = 10

# A vLLM pod below this much CPU or RAM starves tokenization and weight loading.
MIN_POD_MILLICORES = 2000
MIN_POD_MEMORY_MIB = 8 * 1024

# Tensor-parallel sizes tried below a node's GPU count (replicas packed onto one node).
PACKED_TP_SIZES = (1, 2, 4)

# Pipeline stages tried for multi-node models; 4 x 8-GPU nodes already exceeds any R1 need.
MAX_PIPELINE_STAGES = 4

MAX_NUM_SEQS_CEILING = 256  # vLLM's own default on the smaller GPUs; runtime overhead is sized at it

PRICE_FALLBACK_REGION = "us-east-1"


class WeightsSource(StrEnum):
    """Where vLLM loads the model from (docs/weights.md "Weights sources compared" compares them)."""

    HUGGINGFACE = "huggingface"
    # Run:ai streamer from the project's bucket, or from your own (model.repository s3://...)
    S3 = "s3"
    S3_MOUNTPOINT = "s3-mountpoint"  # that bucket mounted read-only by the Mountpoint CSI driver
    EBS_SNAPSHOT = "ebs-snapshot"  # a volume per pod from a snapshot `automation bake-weights` made


STAGED_SOURCES = frozenset({WeightsSource.S3, WeightsSource.S3_MOUNTPOINT})
"""The sources read from an S3 bucket (the project's, where the stager copies the weights, unless
model.repository is an s3:// prefix of yours)."""


# The plain strings (``sizing --weights-source`` choices); the settings model uses the enum itself.
WEIGHTS_SOURCES = tuple(s.value for s in WeightsSource)

# Slowest published single-stream decode rate among the variants: ~20 tok/s for the 70B distill
# on 4x L40S (huggingface.co/deepseek-ai/DeepSeek-R1/discussions/32; 8B on A10G ~29 tok/s,
# 671B on 8x H100 ~33 tok/s). A replica being removed gets this long to finish a full-length
# reasoning stream, capped by the ALB's longest deregistration delay (3600 s).
MIN_DECODE_TOKENS_PER_S = 20
DRAIN_MARGIN_S = 30
MAX_DRAIN_S = 3600

# The snapshot volume (weights.source ebs-snapshot): gp3 at its documented maximum of 1000 MiB/s
# below 16,000 IOPS, which needs 4,000 IOPS (throughput at most 0.25 MiB/s per IOPS; EBS user
# guide, "General Purpose SSD volumes", gp3), so the disk is never slower than the loader; ext4
# metadata and reserved blocks take ~7 % of the filesystem: 10 % plus a little headroom.
SNAPSHOT_VOLUME_THROUGHPUT_MIBPS = 1000
SNAPSHOT_VOLUME_IOPS = 4000
# EBS fast snapshot restore: $0.75 per DSU-hour, per snapshot per Availability Zone, US East
# (N. Virginia) (https://aws.amazon.com/ebs/pricing/, "Fast snapshot restore", read 2026-12).
FAST_SNAPSHOT_RESTORE_USD_PER_ZONE_HOUR = 0.75


def planned_max_num_seqs(
    kv_cache_tokens: int,
    min_full_length_sequences: int = 1,
    prompt_tokens: int = PLAN_PROMPT_TOKENS,
    output_tokens: int = PLAN_OUTPUT_TOKENS,
) -> int:
    """The plan's ``--max-num-seqs``: the largest batch whose chance of preemption stays under
    PREEMPTION_TARGET when lengths follow the simulator's draw with the planning means
    (``preemption_probability``, the simulator's own preemption rule), within MAX_NUM_SEQS_CEILING,
    never below the full-length sequences the cache must hold."""
    lo, hi = 0, MAX_NUM_SEQS_CEILING  # lo: largest batch known under the target
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if preemption_probability(mid, kv_cache_tokens, prompt_tokens, output_tokens) < PREEMPTION_TARGET:
            lo = mid
        else:
            hi = mid - 1
    return max(min_full_length_sequences, lo, 1)


# vLLM 0.33.0's online FP8 shorthands (vllm/config/quantization.py ``_ONLINE_SHORTHANDS``):
# fp8_per_channel scales each output channel of a weight and each token of an activation, the layout
# of llm-compressor's FP8_DYNAMIC recipe that the published distill evaluations measured
# (vllm/model_executor/layers/quantization/online/fp8.py ``Fp8PtpcOnlineLinearMethod``); it refuses
# the weight-only Marlin kernel that GPUs without FP8 tensor cores fall back to, so those run
# fp8_per_tensor (one scale per weight), which Marlin serves.
ONLINE_FP8_NATIVE = "fp8_per_channel"
ONLINE_FP8_WEIGHT_ONLY = "fp8_per_tensor"


def online_fp8_flag(fp8_tensor_cores: bool) -> str:
    """``--quantization`` for vLLM's online FP8 of a 16-bit checkpoint on a GPU with or without FP8
    tensor cores."""
    return ONLINE_FP8_NATIVE if fp8_tensor_cores else ONLINE_FP8_WEIGHT_ONLY


def served_quantization(quantization: Quantization, model: ModelSpec, repository: str | None) -> Quantization:
    """``auto`` is the served checkpoint's own format: a catalogued pre-quantized repository's, else
    the variant's (``Quantization.resolve``)."""
    held = prequantized_format(model.variant, repository)
    if quantization is Quantization.AUTO and held:
        return Quantization(held)
    return quantization.resolve(model)


def is_prequantized(model: ModelSpec, quantization: Quantization, repository: str | None) -> bool:
    """Whether ``repository`` is a catalogued checkpoint already quantized as ``quantization``
    (sizing/data/checkpoints.json)."""
    return prequantized_format(model.variant, repository) == quantization.resolve(model).value


class PlanError(ValueError):
    """A request the sizing engine cannot turn into any plan (unknown variant or family)."""


@dataclass(frozen=True)
class PlanRequest:
    """Everything sizing needs; mirrors the stack settings of the same names."""

    variant: str
    families: tuple[str, ...]
    quantization: Quantization = Quantization.AUTO
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    max_model_len: int = 32768
    min_full_length_sequences: int = 1
    capacity_types: tuple[str, ...] = ("spot", "on-demand")
    region: str = "us-east-1"
    # A plain string ("s3") is accepted and stored as its member.
    weights_source: WeightsSource = WeightsSource.HUGGINGFACE
    # computeMode: auto-mode pulls the image with SOCI parallel pull; karpenter (the default here,
    # the slower figure) pulls it whole.
    compute_mode: str = "karpenter"
    # weights.fastSnapshotRestore: volumes from the baked snapshot are fully initialised at creation.
    fast_snapshot_restore: bool = False
    zones: int = 3  # Availability Zones the GPU nodes use (fast snapshot restore is billed per zone)
    warm_spare_nodes: int = 0  # autoscaling.warmSpareNodes: GPU nodes held by placeholder pods
    repository: str | None = None
    min_replicas: int = 1
    max_replicas: int = 3
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    # Measured runtime overheads (``python -m sizing calibrate``); None: the bundled file.
    calibration_file: str | None = None
    drain_seconds: int | None = None  # endpoint.drainSeconds; None: long enough for a full stream

    def __post_init__(self) -> None:
        try:
            source = WeightsSource(self.weights_source)
        except ValueError:
            raise PlanError(
                f"weights source {self.weights_source!r}: expected one of {', '.join(WEIGHTS_SOURCES)}"
            ) from None
        object.__setattr__(self, "weights_source", source)
        try:
            kv_dtype = KvCacheDtype(self.kv_cache_dtype)
        except ValueError:
            raise PlanError(
                f"kv cache dtype {self.kv_cache_dtype!r}: expected one of "
                f"{', '.join(k.value for k in KvCacheDtype)}"
            ) from None
        object.__setattr__(self, "kv_cache_dtype", kv_dtype)

    @property
    def required_kv_tokens(self) -> int:
        return self.max_model_len * self.min_full_length_sequences


@dataclass(frozen=True)
class Fit:
    """An instance type that can run one replica."""

    instance: InstanceType
    tensor_parallel: int
    pipeline_parallel: int
    dtype: str
    weights_per_gpu: int
    kv_bytes_per_gpu: int
    kv_tokens: int
    node_usd_per_hour: float
    overhead_per_gpu: int = 0
    load_peak_per_gpu: int = 0
    overhead_calibrated: bool = False
    # Replicas sharing one node when a replica uses fewer GPUs than the node has (packing).
    replicas_per_node: int = 1
    # --quantization for vLLM's online FP8 of a 16-bit checkpoint on this GPU, else None.
    quantization_flag: str | None = None

    @property
    def nodes(self) -> int:
        return self.pipeline_parallel

    @property
    def replica_usd_per_hour(self) -> float:
        """A replica's share of its nodes: the GPUs it takes out of the node's."""
        return self.node_usd_per_hour * self.nodes / self.replicas_per_node

    def nodes_for(self, replicas: int) -> int:
        """Nodes that ``replicas`` replicas occupy, packed ``replicas_per_node`` to a node."""
        return math.ceil(replicas / self.replicas_per_node) * self.nodes

    def hourly_usd_for(self, replicas: int) -> float:
        """What the nodes of ``replicas`` replicas cost an hour (whole nodes, however packed)."""
        return self.node_usd_per_hour * self.nodes_for(replicas)

    @property
    def room(self) -> PodRoom:
        """CPU and memory one replica's pod may request: its share of what the node leaves."""
        room = pod_room(self.instance)
        k = self.replicas_per_node
        return PodRoom(room.millicores // k, room.memory_mib // k)

    @property
    def args_key(self) -> tuple[int, int, str, str | None]:
        """Types with the same key run the same vLLM arguments."""
        return (self.tensor_parallel, self.pipeline_parallel, self.dtype, self.quantization_flag)


@dataclass(frozen=True)
class Rejection:
    instance: InstanceType
    reason: str


# plan.json fields computed inline in ``SizingPlan.to_dict`` (the others are documented by the
# property or setting they come from); docs/reference/plan-json.md is generated from both.
PLAN_FIELD_DOCS: dict[str, str] = {
    "feasible": "True: a plan (an infeasible answer has reasons and suggestions instead).",
    "warm_spare_node_hourly_usd": "What one warm spare GPU node (autoscaling.warmSpareNodes) costs per "
    "hour, at the cheapest feasible type's On-Demand price.",
    "dtype": "The weights' compute dtype vLLM runs (bfloat16, or float16 where the GPU has no bf16).",
    "instance_type": "The cheapest feasible instance type (the plan's choice).",
    "instance_types": "Every feasible type the node pool admits, cheapest first (same vLLM arguments).",
    "gpu_model": "The chosen type's GPU (catalog name, e.g. L4, L40S, H100).",
    "gpu_memory_gib_per_gpu": "The GPU's memory as its datasheet states it.",
    "gpu_cuda_memory_gib_per_gpu": "What CUDA reports as total memory per GPU (vLLM's budget base).",
    "runtime_overhead_gib_per_gpu": "Memory per GPU vLLM needs beside weights and KV cache "
    "(activations, CUDA graphs, NCCL), the largest over the pool's types.",
    "runtime_overhead_source": "calibrated (from your vLLM log) or model (the built-in estimate).",
    "load_peak_gib_per_gpu": "Peak memory per GPU while loading (online FP8 quantization holds two "
    "16-bit layers at once; distributed streaming stages twice the largest tensor).",
    "gpus_per_replica": "GPUs one replica uses (tensor × pipeline parallel).",
    "tensor_parallel_size": "vLLM --tensor-parallel-size.",
    "pipeline_parallel_size": "vLLM --pipeline-parallel-size (above 1 only for r1-671b across nodes).",
    "nodes_per_replica": "Nodes one replica spans (a LeaderWorkerSet when above 1).",
    "efa_required": "Whether the replica needs EFA (always false: the pinned image has no EFA transport).",
    "gpu_memory_utilization": "vLLM --gpu-memory-utilization (the share of CUDA memory it may use).",
    "max_num_seqs": "vLLM --max-num-seqs: sequences one replica decodes at once.",
    "kv_cache_dtype": "vLLM --kv-cache-dtype: auto (the model's 16-bit dtype) or fp8 (one byte an "
    "element, GPUs with FP8 tensor cores only).",
    "weights_gib": "The model's weights at the plan's quantization.",
    "weights_per_gpu_gib": "The weights each GPU holds (its tensor/pipeline share).",
    "kv_cache_gib": "KV cache per replica, on the smallest type of the pool.",
    "vllm_args": "The vLLM command-line arguments (--model is replaced by the staged weights' location "
    "when the weights source is not Hugging Face).",
    "cpu_request": "CPU request of a vLLM pod (fits every type of the pool after reservations).",
    "memory_request": "Memory request of a vLLM pod (fits every type of the pool after reservations).",
    "capacity_types": "on-demand and/or spot, as gpu.capacityTypes allows.",
    "region": "The AWS region prices and zones are read for.",
    "min_replicas": "autoscaling.minReplicas (replicas kept when idle; 0 scales to zero).",
    "replica_hourly_usd": "One replica's hourly price (its GPU share of a packed node).",
    "replicas_per_node": "Replicas packed on one node of the chosen type (1 unless a replica uses "
    "fewer GPUs than the node has).",
    "hourly_usd_at_min": "GPU nodes' hourly price at autoscaling.minReplicas.",
    "hourly_usd_at_max": "GPU nodes' hourly price at autoscaling.maxReplicas.",
    "price_source": "Where the prices come from (the bundled price table and its date, or a refresh).",
    "output_tokens_per_second": "Output tokens/s of one replica at saturation (max_num_seqs sequences of "
    "throughput_basis' lengths), from the replica model.",
    "requests_per_second": "Requests/s one replica completes at saturation.",
    "ttft_s": "Predicted time to first token at saturation.",
    "itl_s": "Predicted inter-token latency at saturation.",
    "throughput_basis": "What the throughput fields assume: concurrency, mean prompt and output tokens, "
    "their distribution (lengths: exponential, as the simulator draws them, or fixed), whether the "
    "KV cache preempts, and the model.",
    "warnings": "What the plan warns about (each names the setting and the fix).",
}


@dataclass(frozen=True)
class SizingPlan:
    """A feasible plan. ``to_dict`` is the ``plan.json`` / ``sizing --json`` contract."""

    request: PlanRequest
    model: ModelSpec
    quantization: Quantization
    fits: tuple[Fit, ...]  # the node pool's types, cheapest first; fits[0] is the choice
    room: PodRoom
    price_source: str
    warnings: tuple[str, ...] = ()

    feasible = True

    @property
    def chosen(self) -> Fit:
        return self.fits[0]

    @property
    def instance_type(self) -> str:
        return self.chosen.instance.name

    @property
    def instance_types(self) -> list[str]:
        return [f.instance.name for f in self.fits]

    @property
    def tensor_parallel_size(self) -> int:
        return self.chosen.tensor_parallel

    @property
    def pipeline_parallel_size(self) -> int:
        return self.chosen.pipeline_parallel

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def nodes_per_replica(self) -> int:
        return self.chosen.nodes

    @property
    def kv_cache_tokens(self) -> int:
        """Guaranteed on every type of the pool, not only the cheapest."""
        return min(f.kv_tokens for f in self.fits)

    @property
    def kv_cache_bytes(self) -> int:
        return min(f.kv_bytes_per_gpu for f in self.fits) * self.gpus_per_replica

    @property
    def max_num_seqs(self) -> int:
        return planned_max_num_seqs(self.kv_cache_tokens, self.request.min_full_length_sequences)

    @property
    def hardware(self) -> Hardware:
        """The replica model's view of the chosen type's GPUs."""
        fit = self.chosen
        return hardware(
            self.model,
            self.quantization,
            fit.instance,
            fit.tensor_parallel,
            fit.pipeline_parallel,
            kv_cache_dtype=self.request.kv_cache_dtype,
        )

    @property
    def scheduler_limits(self) -> SchedulerLimits:
        """vLLM's limits for the plan: its max-num-seqs and KV cache, vLLM's default token budget."""
        inst = self.chosen.instance
        return SchedulerLimits(
            self.max_num_seqs,
            default_max_num_batched_tokens(inst.cuda_memory_mib, inst.gpu_model),
            self.kv_cache_tokens,
        )

    @property
    def saturation(self) -> SteadyState:
        """One replica at ``max_num_seqs`` sequences of the plan's workload (replica model,
        ``planning_state``: lengths drawn exponentially around the planning lengths)."""
        return planning_state(self.hardware, self.scheduler_limits, self.max_num_seqs)

    @property
    def usd_per_million_output_tokens(self) -> float:
        """The replica's hourly price over what it emits in an hour at saturation."""
        return self.usd_per_million(self.saturation.output_tokens_per_second)

    def usd_per_million(self, output_tokens_per_second: float) -> float:
        """The replica's hourly price over ``output_tokens_per_second`` for an hour, per million."""
        return self.replica_hourly_usd / (output_tokens_per_second * 3600) * 1e6

    @property
    def roofline_usd_per_million_output_tokens(self) -> float:
        """The replica's hourly price over what the HBM roofline emits in an hour at the KV-limited
        batch, for the same instance, variant, quantization and workload (the planning lengths,
        drawn as the batch and the saturation figures take them; datasheet bandwidth and peak, no
        efficiency or host time; derivation in docs/sizing-performance.md): the floor
        usd_per_million_output_tokens is judged against."""
        top = planning_roofline(self.hardware, self.kv_cache_tokens)
        return self.usd_per_million(top.output_tokens_per_second)

    @property
    def repository(self) -> str | None:
        """The user's repository, else the known pre-quantized one, else the variant's own."""
        if self.request.repository:
            return self.request.repository
        if self.quantization is Quantization.AWQ_INT4:
            return known_checkpoint(self.model.variant, self.quantization.value)  # None: user must name one
        return self.model.hf_repo

    @property
    def cpu_request(self) -> str:
        return f"{self.room.millicores // 100 * 100}m"

    @property
    def memory_request(self) -> str:
        return f"{self.room.memory_mib // 1024}Gi"

    @property
    def checkpoint_prequantized(self) -> bool:
        """Whether the served repository already holds the planned quantization (a catalogued
        pre-quantized checkpoint): vLLM then reads the checkpoint's own quantization config."""
        return is_prequantized(self.model, self.quantization, self.repository)

    @property
    def checkpoint_gib(self) -> float:
        """Size of the checkpoint files (what staging to S3 copies)."""
        return download_bytes(self.model, self.quantization, self.checkpoint_prequantized) / GIB

    @property
    def weights_download_gib(self) -> float:
        """What each serving replica downloads to its node disk: only Hugging Face downloads do;
        the other sources read from S3 (streamer, Mountpoint) or a volume of their own."""
        if self.request.weights_source != "huggingface":
            return 0.0
        return self.checkpoint_gib

    @property
    def weights_volume_gib(self) -> int:
        """Size of the baked weights volume (and of each volume restored from its snapshot)."""
        return math.ceil(self.checkpoint_gib * 1.1) + 5

    @property
    def fast_snapshot_restore_hourly_usd(self) -> float:
        """What fast snapshot restore on the weights snapshot costs per hour, in every zone."""
        if self.request.weights_source != "ebs-snapshot" or not self.request.fast_snapshot_restore:
            return 0.0
        return FAST_SNAPSHOT_RESTORE_USD_PER_ZONE_HOUR * self.request.zones

    @property
    def warm_spare_extra_nodes(self) -> int:
        """The GPU nodes the placeholders add at minReplicas: each is shaped like one replica, so
        they pack as replicas do (two 4-GPU placeholders share an 8-GPU node, and one may take a
        free slot beside a replica), and never beyond the pool's limit, sized for maxReplicas."""
        lo, hi = self.request.min_replicas, self.request.max_replicas
        spares = self.request.warm_spare_nodes
        return self.chosen.nodes_for(min(lo + spares, hi)) - self.chosen.nodes_for(lo) if spares else 0

    @property
    def warm_spare_hourly_usd(self) -> float:
        """What the placeholders' nodes add at minReplicas (``warm_spare_extra_nodes``), at the
        cheapest feasible type's price."""
        return round(self.chosen.node_usd_per_hour * self.warm_spare_extra_nodes, 4)

    @property
    def ephemeral_storage_gib(self) -> int:
        """Node disk: the image once, and each packed replica's weights and scratch."""
        per_replica = self.weights_download_gib * 1.1 + SCRATCH_GIB
        return math.ceil(VLLM_IMAGE_GIB + self.chosen.replicas_per_node * per_replica)

    @property
    def replica_hourly_usd(self) -> float:
        return round(self.chosen.replica_usd_per_hour, 4)

    @property
    def weights_load_seconds(self) -> float:
        """Seconds from container start until the weights are in GPU memory, by weights source."""
        weights_gib = weight_bytes(self.model, self.quantization) / GIB
        source = self.request.weights_source
        if source == "s3":
            return self.streamed_weights_seconds(weights_gib)
        if source == "s3-mountpoint":
            return weights_gib / startup.DEFAULT_LOADER_GIB_PER_S
        if source == "ebs-snapshot":
            fsr = self.request.fast_snapshot_restore
            rate = startup.DEFAULT_LOADER_GIB_PER_S if fsr else startup.SNAPSHOT_INIT_GIB_PER_S
            return self.checkpoint_gib / rate
        download = self.weights_download_gib / startup.HF_DOWNLOAD_GIB_PER_S
        return download + weights_gib / startup.DISK_LOAD_GIB_PER_S

    @property
    def distributed_streaming(self) -> bool:
        """Whether the GPUs of a replica divide the streamed checkpoint between them (vLLM's
        runai_streamer ``distributed`` option; rates and sources: sizing/startup.py S3_STREAM_GIB_PER_S): with
        S3 weights, on one node, more than one GPU, and room on each GPU for the staging buffers
        beside the weights while loading."""
        fit = self.chosen
        if self.request.weights_source != "s3" or fit.nodes > 1 or fit.tensor_parallel < 2:
            return False
        peak = fit.load_peak_per_gpu + self.streaming_staging_bytes
        return peak <= fit.instance.cuda_memory_mib * 1024**2

    @property
    def streaming_staging_bytes(self) -> int:
        """Distributed streaming's staging buffers on each GPU: twice the largest tensor."""
        return startup.DISTRIBUTED_STREAMING_STAGING_TENSORS * largest_checkpoint_tensor_bytes(self.model)

    @property
    def load_peak_per_gpu(self) -> int:
        """Peak memory per GPU while loading: the chosen fit's, plus distributed streaming's staging
        buffers where it is on."""
        staging = self.streaming_staging_bytes if self.distributed_streaming else 0
        return self.chosen.load_peak_per_gpu + staging

    def streamed_weights_seconds(self, weights_gib: float) -> float:
        """Seconds to stream ``weights_gib`` from S3 into a replica's GPUs on one node: one
        streaming process per GPU at the cited per-process rate, within the node's network, and,
        with distributed streaming, the broadcast of each GPU's share to the others."""
        fit = self.chosen
        ranks = fit.tensor_parallel  # processes on one node (pipeline stages are on other nodes)
        link_gib_s = None
        if self.distributed_streaming:
            family = fit.instance.family
            link_gib_s = interconnect_gb_s(family) * 1e9 * allreduce_bus_efficiency(family, ranks) / GIB
        return startup.streamed_weights_seconds(
            weights_gib, ranks=ranks, network_peak_gbps=fit.instance.network_peak_gbps, link_gib_s=link_gib_s
        )

    @property
    def compile_cache(self) -> bool:
        """Whether replicas keep vLLM's compile caches in the project's weights bucket: with
        weights staged there (weights.source s3, no s3:// model.repository of yours) and one node
        per replica (components/serving/vllm.py with_compile_cache)."""
        r = self.request
        own_bucket = (r.repository or "").startswith("s3://")
        return r.weights_source == "s3" and not own_bucket and self.nodes_per_replica == 1

    @property
    def cuda_graph_capture_seconds(self) -> float:
        """CUDA graph capture at start-up: vLLM's default graphs for the plan's ``--max-num-seqs``,
        each over the layers of one pipeline stage, at the per-graph, per-layer time cited in
        sizing/startup.py (``CAPTURE_S_PER_GRAPH_LAYER``)."""
        graphs = default_cuda_graph_count(
            self.max_num_seqs,
            self.scheduler_limits.max_num_batched_tokens,
            self.chosen.instance.arch.compute_capability,
        )
        layers = math.ceil(self.model.num_hidden_layers / self.pipeline_parallel_size)
        return graphs * layers * startup.CAPTURE_S_PER_GRAPH_LAYER

    def engine_seconds(self, *, cached: bool) -> int:
        """The engine stage: torch.compile (the cached figure where the compile cache is restored),
        CUDA graph capture and the rest of start-up to the first answer (sizing/startup.py)."""
        return startup.engine_seconds(cached=cached, capture_seconds=self.cuda_graph_capture_seconds)

    @property
    def startup_breakdown(self) -> dict[str, int]:
        """Estimated seconds of each cold-start stage of a replica on a new node: GPU node ready,
        image pulled, weights loaded, engine compiled and warmed up (rates: sizing/startup.py). The image
        stage is what the replica still waits for: with ``image_prepull`` the pull starts while the
        GPUs register. The engine's torch.compile is the cached figure where ``compile_cache``
        holds: only the service's very first replica on a GPU model compiles from scratch.

        A replica on several nodes waits for two node launches, one after the other: LWS creates
        a group's worker StatefulSet only once its leader is bound to a node where the group is
        kept to one zone (kubernetes-sigs/lws v0.10.0 pkg/controllers/pod_controller.go: "if
        exclusive placement is enabled but leader pod is not scheduled, don't create the worker
        sts"; components/serving/multinode.py LWS_EXCLUSIVE_TOPOLOGY), and no node is launched for a
        worker that does not exist yet (tests/twin/test_lws.py runs that controller)."""
        engine = self.engine_seconds(cached=self.compile_cache)
        node = startup.NODE_READY_S[self._stage_mode]
        return {
            "node": node * startup.node_launches_in_turn(self.nodes_per_replica),
            "image": self._image_wait_seconds,
            "weights": math.ceil(self.weights_load_seconds),
            "engine": engine,
        }

    @property
    def _image_wait_seconds(self) -> int:
        """What is left of the image pull once a node's GPUs are registered (IMAGE_PULL_HIDDEN_S)."""
        return startup.image_wait_seconds(self._stage_mode)

    @property
    def group_wait_seconds(self) -> int:
        """How long a multi-node replica's leader, once started, waits for its workers to start:
        their nodes, launched only once the leader is bound (``startup_breakdown``), and their image.
        0 for a single-node replica."""
        if self.nodes_per_replica == 1:
            return 0
        return startup.node_and_image_seconds(self._stage_mode)

    @property
    def image_prepull(self) -> bool:
        """Whether the service's GPU nodes run the image pre-pull DaemonSet, which pulls the vLLM
        image from the moment a node is Ready, while its GPUs register (Karpenter mode,
        components/platform/image_prepull.py); the image stage counts only the rest of the pull."""
        return startup.IMAGE_PULL_HIDDEN_S[self._stage_mode] > 0

    @property
    def _stage_mode(self) -> str:
        """The compute mode whose cold-start figures apply: Karpenter's for any other value."""
        return startup.stage_mode(self.request.compute_mode)

    @property
    def startup_seconds(self) -> int:
        """A replica's start-up on a new node: the sum of its stages (``startup_breakdown``)."""
        return sum(self.startup_breakdown.values())

    @property
    def warm_node_startup_breakdown(self) -> dict[str, int]:
        """The same stages for a replica that preempts a warm spare placeholder
        (autoscaling.warmSpareNodes): the node is up and the placeholder's idle container of the
        vLLM image has pulled it (components/platform/warm_spare.py); weights and engine remain. A
        replica on several nodes (a LeaderWorkerSet group in a zone of its own) is not warmed by
        single-node placeholders in no particular zone: the same stages as on new nodes (the
        component refuses warm spares there)."""
        if self.nodes_per_replica > 1:
            return dict(self.startup_breakdown)
        return {**self.startup_breakdown, "node": 0, "image": 0}

    @property
    def warm_node_startup_seconds(self) -> int:
        """A replica's start-up on a warm spare node: the sum of ``warm_node_startup_breakdown``."""
        return sum(self.warm_node_startup_breakdown.values())

    @property
    def startup_probe_seconds(self) -> int:
        """How long a replica may take from container start to healthy (the startup probe): the
        weights and the uncached engine stage (the first replica compiles) with a margin, and for a
        multi-node replica first its workers' start (``group_wait_seconds``), which its leader waits
        for inside the probe's window."""
        return startup.startup_probe_seconds(
            group_wait_s=self.group_wait_seconds,
            weights_s=self.startup_breakdown["weights"],
            uncached_engine_s=self.engine_seconds(cached=False),
        )

    @property
    def rollout_seconds(self) -> int:
        """How long Pulumi waits for a new replica: a GPU node and the image pull before the (leader's)
        container starts, then its startup budget, plus slack for scheduling retries."""
        return startup.rollout_seconds(self._stage_mode, startup_probe_s=self.startup_probe_seconds)

    @property
    def drain_seconds(self) -> int:
        """Grace a terminating replica gets to finish a full-length stream (vLLM's
        ``--shutdown-timeout``), unless the stack sets its own."""
        if self.request.drain_seconds:
            return self.request.drain_seconds
        full_stream = math.ceil(self.request.max_model_len / MIN_DECODE_TOKENS_PER_S) + DRAIN_MARGIN_S
        return min(MAX_DRAIN_S, full_stream)

    @property
    def vllm_args(self) -> list[str]:
        fit = self.chosen
        args = [
            "--model", self.repository or "<set model.repository to an AWQ checkpoint>",
            "--served-model-name", self.model.variant,
            "--tensor-parallel-size", str(fit.tensor_parallel),
            "--pipeline-parallel-size", str(fit.pipeline_parallel),
            "--max-model-len", str(self.request.max_model_len),
            "--gpu-memory-utilization", f"{self.request.gpu_memory_utilization:.2f}",
            "--max-num-seqs", str(self.max_num_seqs),
            "--dtype", fit.dtype,
        ]  # fmt: skip
        if fit.quantization_flag:
            # Never for a pre-quantized checkpoint: a flag that differs from its quant_method makes
            # vLLM refuse to start (vllm/config/model.py ``ModelConfig._verify_quantization``).
            args += ["--quantization", fit.quantization_flag]
        if self.request.kv_cache_dtype is KvCacheDtype.FP8:
            args += ["--kv-cache-dtype", "fp8"]
        if self.request.weights_source == "s3":
            args += ["--load-format", "runai_streamer"]
        if self.distributed_streaming:
            args += ["--model-loader-extra-config", json.dumps({"distributed": True})]
        revision = pinned_revision(self.model.variant, self.repository or "")
        if revision and self.request.weights_source == "huggingface":
            # vLLM downloads from the Hub itself: the weights and tokenizer at the catalog's commit
            # (a staged copy is that commit already, under a prefix named after it).
            args += ["--revision", revision, "--tokenizer-revision", revision]
        if fit.nodes > 1:
            args += ["--distributed-executor-backend", "ray"]
        args += ["--reasoning-parser", "deepseek_r1", "--port", str(VLLM_PORT)]
        # vLLM's default 0 aborts every in-flight request on SIGTERM; N drains them for N seconds.
        args += ["--shutdown-timeout", str(self.drain_seconds)]
        return args

    def to_dict(self) -> dict:
        r = self.request
        return {
            "feasible": True,
            "variant": self.model.variant,
            "repository": self.repository,
            "quantization": self.quantization.value,
            "kv_cache_dtype": r.kv_cache_dtype.value,
            "dtype": self.chosen.dtype,
            "instance_type": self.instance_type,
            "instance_types": self.instance_types,
            "gpu_model": self.chosen.instance.gpu_model,
            "gpu_memory_gib_per_gpu": round(self.chosen.instance.gpu_memory_gib, 2),
            "gpu_cuda_memory_gib_per_gpu": round(self.chosen.instance.cuda_memory_gib, 2),
            "runtime_overhead_gib_per_gpu": round(max(f.overhead_per_gpu for f in self.fits) / GIB, 2),
            "runtime_overhead_source": "calibrated" if self.chosen.overhead_calibrated else "model",
            "load_peak_gib_per_gpu": round(self.load_peak_per_gpu / GIB, 2),
            "gpus_per_replica": self.gpus_per_replica,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "nodes_per_replica": self.nodes_per_replica,
            # The pinned vLLM image has no EFA transport (libfabric, aws-ofi-nccl): none is requested.
            "efa_required": False,
            "gpu_memory_utilization": r.gpu_memory_utilization,
            "max_model_len": r.max_model_len,
            "min_full_length_sequences": r.min_full_length_sequences,
            "max_num_seqs": self.max_num_seqs,
            "weights_gib": round(weight_bytes(self.model, self.quantization) / GIB, 2),
            "weights_per_gpu_gib": round(self.chosen.weights_per_gpu / GIB, 2),
            "weights_download_gib": round(self.weights_download_gib, 2),
            "checkpoint_gib": round(self.checkpoint_gib, 2),
            "kv_cache_gib": round(self.kv_cache_bytes / GIB, 2),
            "kv_cache_tokens": self.kv_cache_tokens,
            "vllm_args": self.vllm_args,
            "cpu_request": self.cpu_request,
            "memory_request": self.memory_request,
            "ephemeral_storage_gib": self.ephemeral_storage_gib,
            "startup_seconds": self.startup_seconds,
            "startup_probe_seconds": self.startup_probe_seconds,
            "startup_breakdown": self.startup_breakdown,
            "weights_volume_gib": self.weights_volume_gib if r.weights_source == "ebs-snapshot" else None,
            "fast_snapshot_restore_hourly_usd": self.fast_snapshot_restore_hourly_usd,
            "compile_cache": self.compile_cache,
            "image_prepull": self.image_prepull,
            "warm_spare_nodes": r.warm_spare_nodes,
            "warm_spare_hourly_usd": self.warm_spare_hourly_usd,
            "warm_spare_node_hourly_usd": round(self.chosen.node_usd_per_hour, 4),
            "warm_node_startup_seconds": self.warm_node_startup_seconds,
            "warm_node_startup_breakdown": self.warm_node_startup_breakdown,
            "rollout_seconds": self.rollout_seconds,
            "drain_seconds": self.drain_seconds,
            "capacity_types": list(r.capacity_types),
            "region": r.region,
            "min_replicas": r.min_replicas,
            "max_replicas": r.max_replicas,
            "replica_hourly_usd": self.replica_hourly_usd,
            "replicas_per_node": self.chosen.replicas_per_node,
            "hourly_usd_at_min": round(self.chosen.hourly_usd_for(r.min_replicas), 4),
            "hourly_usd_at_max": round(self.chosen.hourly_usd_for(r.max_replicas), 4),
            "price_source": self.price_source,
            **self._throughput_fields(),
            "warnings": list(self.warnings),
        }

    def _throughput_fields(self) -> dict:
        sat = self.saturation
        return {
            "output_tokens_per_second": round(sat.output_tokens_per_second, 1),
            "requests_per_second": round(sat.requests_per_second, 4),
            "usd_per_million_output_tokens": round(self.usd_per_million_output_tokens, 3),
            "roofline_usd_per_million_output_tokens": round(self.roofline_usd_per_million_output_tokens, 3),
            "ttft_s": round(sat.ttft_s, 3),
            "itl_s": round(sat.itl_s, 4),
            "throughput_basis": {
                "concurrency": sat.concurrency,
                "prompt_tokens": PLAN_PROMPT_TOKENS,
                "output_tokens": PLAN_OUTPUT_TOKENS,
                "lengths": length_distribution(PLAN_EXPONENTIAL_LENGTHS),
                "preempted": sat.preempted,
                "model": "sizing/performance.py planning_state at max_num_seqs",
            },
        }


@dataclass(frozen=True)
class Infeasible:
    """No allowed instance type can serve the request; says why and what would."""

    request: PlanRequest
    reasons: tuple[str, ...]
    suggestions: tuple[str, ...] = field(default=())

    feasible = False

    def to_dict(self) -> dict:
        return {
            "feasible": False,
            "variant": self.request.variant,
            "reasons": list(self.reasons),
            "suggestions": list(self.suggestions),
        }


def _price(instance: InstanceType, region: str) -> float | None:
    prices = instance.on_demand_usd_per_hour
    return prices[region] if region in prices else prices.get(PRICE_FALLBACK_REGION)


def _gib(b: float) -> str:
    return f"{b / GIB:.1f} GiB"


def evaluate(
    model: ModelSpec,
    quantization: Quantization,
    instance: InstanceType,
    request: PlanRequest,
    tensor_parallel: int | None = None,
) -> Fit | Rejection:
    """Can one replica of ``model`` run on ``instance``, on ``tensor_parallel`` of its GPUs (default
    all)? A Fit with its numbers, or why not."""
    q = quantization.resolve(model)
    arch = instance.arch
    gpus = f"{tensor_parallel or instance.gpu_count}x {instance.gpu_model}"
    if instance.offered_in_region.get(request.region, True) is False:
        return Rejection(instance, f"{instance.name} is not offered in {request.region}")
    price = _price(instance, request.region)
    if price is None:
        return Rejection(instance, f"{instance.name} has no On-Demand capacity (Capacity Blocks only)")
    cc = arch.compute_capability
    if q is Quantization.FP8 and not arch.fp8 and (model.moe or not arch.fp8_marlin):
        # Dense models fall back to weight-only FP8 Marlin (see GpuArch.fp8_marlin); the MoE path
        # is only planned on FP8 tensor cores.
        return Rejection(instance, f"{arch.name} has no native FP8 kernels (compute capability {cc} < 8.9)")
    if request.kv_cache_dtype is KvCacheDtype.FP8 and not arch.fp8:
        return Rejection(
            instance,
            f"{arch.name} has no native FP8 (compute capability {cc} < 8.9) for model.kvCacheDtype fp8",
        )
    if q is Quantization.AWQ_INT4 and not arch.awq:
        return Rejection(instance, f"{arch.name} cannot run AWQ kernels (compute capability {cc} < 7.5)")
    tp = tensor_parallel or instance.gpu_count
    packed = instance.gpu_count // tp
    refusal = tensor_parallel_refusal(model, tp, q)
    if refusal:
        what = f"has {tp} GPUs" if packed == 1 else f"on {tp} of its GPUs"
        return Rejection(
            instance, f"{instance.name} {what}, not a tensor-parallel size vLLM accepts: {refusal}"
        )
    node_room = pod_room(instance)
    room = PodRoom(node_room.millicores // packed, node_room.memory_mib // packed)
    if room.millicores < MIN_POD_MILLICORES or room.memory_mib < MIN_POD_MEMORY_MIB:
        share = "" if packed == 1 else f" ({packed} replicas per node)"
        return Rejection(instance, f"{instance.name} leaves too little CPU/RAM for the vLLM pod{share}")
    budget = budget_bytes_per_gpu(instance.cuda_memory_mib, request.gpu_memory_utilization)
    exposed = instance.cuda_memory_mib * 1024**2
    prequantized = is_prequantized(model, q, request.repository)
    online = is_online_quantization(model, q, prequantized)
    multi_node = model.moe and instance.efa_supported and packed == 1
    stages = range(1, MAX_PIPELINE_STAGES + 1) if multi_node else (1,)
    reason = ""
    for pp in stages:
        weights = weight_bytes_per_gpu(model, q, tp, pp)
        load_peak = load_peak_bytes_per_gpu(model, q, tp, pp, prequantized)
        measured = calibration.overhead_bytes(
            request.calibration_file,
            model.variant,
            gpu_memory_key(instance.gpu_model, instance.gpu_memory_mib),
            tp,
            pp,
        )
        overhead = runtime_overhead(model, instance, tp, pp, MAX_NUM_SEQS_CEILING, measured).total
        free = budget - weights - overhead
        where = f"{instance.name} ({gpus}{f' x {pp} nodes' if pp > 1 else ''})"
        if load_peak > max(exposed, weights):  # only online quantization peaks above the weights
            reason = (
                f"{where}: loading peaks at {_gib(load_peak)} per GPU (16-bit layers quantized to FP8 while "
                f"loading), more than the {_gib(exposed)} CUDA exposes"
            )
            continue
        if free <= 0:
            reason = (
                f"{where}: {_gib(weights)} of weights and {_gib(overhead)} of runtime overhead per GPU "
                f"exceed the {_gib(budget)} vLLM may use of each {instance.cuda_memory_gib:.1f} GiB GPU"
            )
            continue
        tokens = free // kv_bytes_per_token_per_gpu(model, tp, pp, request.kv_cache_dtype)
        if tokens < request.required_kv_tokens:
            reason = (
                f"{where}: weights fit but the KV cache holds {tokens:,} tokens, "
                f"{request.required_kv_tokens:,} needed"
            )
            continue
        # vLLM's --dtype auto serves a bf16 checkpoint in float16 where the GPU has no bf16
        # (vllm/config/model.py ``_resolve_auto_dtype``); the plan states it explicitly.
        dtype = "bfloat16" if arch.bf16 else "float16"
        flag = online_fp8_flag(arch.fp8) if online else None
        return Fit(
            instance,
            tp,
            pp,
            dtype,
            weights,
            free,
            tokens,
            price,
            overhead,
            load_peak,
            measured is not None,
            packed,
            flag,
        )
    return Rejection(instance, reason)


def _price_source(catalog: InstanceCatalog, region: str, capacity_types: tuple[str, ...]) -> str:
    if region in catalog.price_sources:
        src = catalog.price_sources[region]
        text = f"On-Demand Linux {region}, {src['source']}, as of {src['as_of']}"
    else:
        src = catalog.price_sources[PRICE_FALLBACK_REGION]
        text = (
            f"no bundled prices for {region}; On-Demand Linux {PRICE_FALLBACK_REGION} shown "
            f"({src['source']}, as of {src['as_of']})"
        )
    if "spot" in capacity_types:
        text += "; spot prices vary and are usually lower: On-Demand is the ceiling"
    return text


def _resolve(request: PlanRequest, catalog: InstanceCatalog) -> ModelSpec:
    models = model_catalog()
    if request.variant not in models:
        raise PlanError(f"unknown variant {request.variant!r}; known: {', '.join(models)}")
    if not request.families:
        raise PlanError(f"no GPU families given; known: {', '.join(catalog.families)}")
    unknown = [f for f in request.families if f not in catalog.families]
    if unknown:
        raise PlanError("; ".join(unknown_family_message(f) for f in unknown))
    model = models[request.variant]
    if not 1 <= request.max_model_len <= model.max_position_embeddings:
        raise PlanError(
            f"max-model-len {request.max_model_len} is outside 1..{model.max_position_embeddings} "
            f"(max_position_embeddings of {model.variant}); set model.maxModelLen within it"
        )
    problems = []
    if request.min_full_length_sequences < 1:
        problems.append(f"min-full-length-sequences {request.min_full_length_sequences} must be at least 1")
    if request.min_replicas < 0 or request.max_replicas < max(1, request.min_replicas):
        problems.append(
            f"replicas {request.min_replicas}..{request.max_replicas}: need 0 <= min <= max and max >= 1"
        )
    if not 0 < request.gpu_memory_utilization <= 1:
        problems.append(f"gpu-memory-utilization {request.gpu_memory_utilization} must be in (0, 1]")
    if problems:
        raise PlanError("; ".join(problems))
    return model


def _fits(
    model: ModelSpec, q: Quantization, request: PlanRequest, catalog: InstanceCatalog
) -> tuple[list[Fit], list[Rejection]]:
    fits: list[Fit] = []
    rejections: list[Rejection] = []
    for instance in catalog.in_families(request.families):
        outcome = evaluate(model, q, instance, request)
        # Packing: a replica on 1, 2 or 4 of a multi-GPU node's GPUs, several replicas per node.
        smaller = [t for t in PACKED_TP_SIZES if t < instance.gpu_count and instance.gpu_count % t == 0]
        tries = [evaluate(model, q, instance, request, t) for t in smaller]
        packed = [f for f in tries if isinstance(f, Fit)]
        if isinstance(outcome, Fit):
            fits.append(outcome)
        elif not packed:
            # The whole node's reason, and why fewer of its GPUs would not serve either.
            fewer = [r.reason for r in tries if isinstance(r, Rejection)][-1:]
            rejections.append(Rejection(instance, "; ".join([outcome.reason, *fewer])))
        fits += packed
    # Cheapest for the replicas it may run: a packed node is cheaper only when enough replicas
    # share it (at maxReplicas); then per replica.
    fits.sort(
        key=lambda f: (
            f.hourly_usd_for(request.max_replicas),
            f.replica_usd_per_hour,
            f.instance.name,
        )
    )
    return fits, rejections


def _family_reason(family: str, rejections: list[Rejection]) -> str:
    """The most telling rejection of a family: that of its type with the most GPU memory."""
    own = [r for r in rejections if r.instance.family == family]
    if not own:
        return f"{family}: no instance types in the catalog"
    best = max(own, key=lambda r: (r.instance.gpu_count * r.instance.gpu_memory_mib, r.instance.name))
    return f"{family}: {best.reason}"


def _engine_text(fit: Fit) -> str:
    """The vLLM arguments that keep two fits out of one node pool, as a reader compares them."""
    flag = f", --quantization {fit.quantization_flag}" if fit.quantization_flag else ""
    return f"TP {fit.tensor_parallel} PP {fit.pipeline_parallel}, {fit.dtype}{flag}"


def families_left_out(
    request: PlanRequest,
    fits: list[Fit],
    rejections: list[Rejection],
    pool: tuple[Fit, ...],
    usd_per_million: Callable[[Fit], float],
) -> list[str]:
    """A warning for each family of ``gpu.instanceFamilies`` whose types the node pool never
    launches, so that an allowed family is never dropped without a word: either none of its types
    serves the variant, or its cheapest fit needs other vLLM arguments or another pod size than the
    pool's (one Deployment runs one set of arguments and one pod size) and costs more at
    ``maxReplicas`` than the type the plan chose (``fits`` are sorted cheapest first). Its price
    per million output tokens (``usd_per_million``) is given beside the pool's: a type dearer by
    the hour can be cheaper by the token, which matters to a busy service."""
    chosen = pool[0]
    pooled = {f.instance.family for f in pool}
    warnings = []
    for family in dict.fromkeys(request.families):
        if family in pooled:
            continue
        own = [f for f in fits if f.instance.family == family]
        if not own:
            why = _family_reason(family, rejections).removeprefix(f"{family}: ")
            warnings.append(
                f"gpu.instanceFamilies lists {family}, but none of its types serves "
                f"{request.variant}: {why}; the node pool never launches it"
            )
            continue
        best = own[0]
        differences = []
        if best.args_key != chosen.args_key:
            differences.append(f"runs {_engine_text(best)} where the pool runs {_engine_text(chosen)}")
        if best.replicas_per_node != chosen.replicas_per_node:
            differences.append(
                f"packs {best.replicas_per_node} replicas per node where the pool packs "
                f"{chosen.replicas_per_node}, so its pod would have another size"
            )
        at_max = request.max_replicas
        by_token = f"${usd_per_million(best):,.2f} per million output tokens"
        by_token += f" against ${usd_per_million(chosen):,.2f}"
        warnings.append(
            f"gpu.instanceFamilies lists {family}, but the node pool never launches it: its cheapest "
            f"fit, {best.instance.name}, {' and '.join(differences)}, and one Deployment runs one set "
            f"of vLLM arguments and one pod size; the plan chose {chosen.instance.name}, "
            f"${chosen.hourly_usd_for(at_max):,.2f}/h at autoscaling.maxReplicas "
            f"{at_max} against ${best.hourly_usd_for(at_max):,.2f}/h ({by_token} "
            f"at saturation). Remove {family} from gpu.instanceFamilies, or list it alone to plan on it"
        )
    return warnings


def plan(request: PlanRequest, catalog: InstanceCatalog | None = None) -> SizingPlan | Infeasible:
    """Size one replica of ``request.variant`` on the allowed families."""
    catalog = catalog or instance_catalog()
    model = _resolve(request, catalog)
    q = served_quantization(request.quantization, model, request.repository)
    fits, rejections = _fits(model, q, request, catalog)
    if not fits:
        reasons = tuple(_family_reason(f, rejections) for f in request.families)
        return Infeasible(request, reasons, tuple(suggest(request, catalog)))
    chosen = fits[0]
    # The node pool runs one set of vLLM arguments and one packing (a pool type that packed a
    # different number of replicas per node would give the pod other CPU/RAM requests).
    pool = tuple(
        f for f in fits if f.args_key == chosen.args_key and f.replicas_per_node == chosen.replicas_per_node
    )
    rooms = [f.room for f in pool]
    room = PodRoom(min(r.millicores for r in rooms), min(r.memory_mib for r in rooms))
    warnings = []
    prequantized = is_prequantized(model, q, request.repository)
    if request.weights_source == "huggingface" and download_bytes(model, q, prequantized) > 200 * GIB:
        warnings.append(
            "weights over 200 GiB download slowly from Hugging Face: weights.source s3 starts faster"
        )
    if q is Quantization.AWQ_INT4 and not request.repository and not known_checkpoint(model.variant, q.value):
        warnings.append("awq-int4 needs a pre-quantized AWQ checkpoint: set model.repository")
    if chosen.quantization_flag and request.repository:
        warnings.append(
            f"model.repository {request.repository} is loaded as a 16-bit checkpoint that vLLM "
            f"quantizes to FP8 while loading (--quantization {chosen.quantization_flag}); if it is "
            "already quantized (its config.json has a quantization_config), vLLM refuses to start on "
            "that flag: name a 16-bit checkpoint, or a catalogued FP8 one (docs/sizing.md, FP8 weights)"
        )
    warnings += _precision_warnings(model, q, chosen)
    setup = (model.variant, chosen.instance.gpu_model, chosen.tensor_parallel, chosen.pipeline_parallel)
    unsure = setup_disagreement(*setup, q.value)
    if unsure:
        warnings.append(unsure)
    price_source = _price_source(catalog, request.region, request.capacity_types)

    def usd_per_million(fit: Fit) -> float:
        alone = SizingPlan(request, model, q, (fit,), fit.room, price_source, ())
        return alone.usd_per_million_output_tokens

    warnings += families_left_out(request, fits, rejections, pool, usd_per_million)
    if chosen.nodes > 1:
        warnings.append(
            f"one replica spans {chosen.nodes} nodes and NCCL between them runs over TCP sockets, not "
            "EFA: the vllm/vllm-openai image has no libfabric or aws-ofi-nccl, so no EFA device is "
            "requested; a single-node type (e.g. p5en for r1-671b) avoids inter-node traffic"
        )
    if request.region not in catalog.price_sources:
        warnings.append(f"no bundled prices for {request.region}: costs use {PRICE_FALLBACK_REGION}")
    sized = SizingPlan(
        request=request,
        model=model,
        quantization=q,
        fits=pool,
        room=room,
        price_source=price_source,
        warnings=tuple(warnings),
    )
    served = sized.repository
    if request.weights_source == "huggingface" and served and not pinned_revision(model.variant, served):
        # Each pod downloads at its own start: without a pinned commit a moved main branch would
        # give replicas of one deployment different weights (sizing/data/revisions.json).
        unpinned = (
            f"{served} has no pinned commit in the model catalog: every vLLM pod downloads its main "
            "branch when it starts, so replicas can load different revisions if it moves; weights.source "
            "s3 stages one commit for all of them"
        )
        sized = replace(sized, warnings=(*sized.warnings, unpinned))
    notices = [
        w
        for w in (single_replica_warning(sized), floor_scale_down_warning(sized), ceiling_cost_warning(sized))
        if w
    ]
    return replace(sized, warnings=(*sized.warnings, *notices)) if notices else sized


def floor_scale_down_warning(p: SizingPlan) -> str | None:
    """The on-demand floor (components/platform/nodepools.py gpu_pool_specs) holds when replicas launch; on
    scale-down a ReplicaSet ranks the pods it deletes by state, pod-deletion-cost, co-location
    and age, never by the node's capacity type (kubernetes/kubernetes pkg/controller/
    controller_utils.go ActivePodsWithRanks.Less). A single-node replica's pod therefore sets its
    own deletion cost from its node (components/serving/vllm.py with_deletion_cost), so a Deployment
    removes spot pods first. A LeaderWorkerSet's leaders are a StatefulSet, which scales down from
    the highest ordinal whatever the pods' costs (Kubernetes docs, StatefulSet "Deployment and
    Scaling Guarantees"): a multi-node floor still holds at launch only. Facts:
    reference/upstream/serving-facts.json replicaset_scale_down_order."""
    request = p.request
    types = request.capacity_types
    if request.min_replicas < 1 or "spot" not in types or "on-demand" not in types:
        return None
    if p.nodes_per_replica == 1:
        return None
    return (
        f"gpu.capacityTypes allows spot and on-demand: the first {request.min_replicas} "
        "replica(s) launch on on-demand, but a LeaderWorkerSet scales down by group index "
        "(highest first), not capacity type, so a scale-down may remove an on-demand replica and "
        "keep a spot one until the next scale-up; set gpu.capacityTypes to [on-demand] where a "
        "spot interruption of the floor is not acceptable"
    )


# A fleet ceiling this expensive is legal but worth a second look before a scaling bug, a load
# test or a low target reaches it: $1,000 an hour is about $730,000 a month, several times the
# largest shipped stack's ceiling (r1, 671B on two p5 nodes a replica).
CEILING_WARNING_USD_PER_HOUR = 1000.0


def ceiling_cost_warning(p: SizingPlan) -> str | None:
    """What the GPU nodes cost at autoscaling.maxReplicas, when that is extreme."""
    hourly = p.chosen.hourly_usd_for(p.request.max_replicas)
    if hourly < CEILING_WARNING_USD_PER_HOUR:
        return None
    return (
        f"autoscaling.maxReplicas = {p.request.max_replicas}: at that ceiling the GPU nodes cost about "
        f"${hourly:,.0f}/h (${hourly * 24 * 30:,.0f} per 30 days, On-Demand prices), and the "
        "autoscaler may reach it under a load spike, a load test or a low target; lower "
        "autoscaling.maxReplicas to the most replicas you mean to pay for"
    )


def single_replica_warning(p: SizingPlan) -> str | None:
    """What a service at one replica loses when its node goes: a whole cold start. Nothing surges
    a replacement replica ahead of a node's loss (expiry, interruption, failure), and a
    PodDisruptionBudget cannot keep one pod (components/platform/nodepools.py gpu_node_pool says what
    each mechanism guarantees); only a rollout starts the new replica first."""
    if p.request.min_replicas > 1:
        return None
    stages = p.startup_breakdown
    outage = sum(stages.values())
    parts = " + ".join(f"{name} {seconds} s" for name, seconds in stages.items())
    return (
        f"autoscaling.minReplicas = {p.request.min_replicas}: whenever one replica is all there is, "
        "losing its node (EKS Auto Mode replaces every node within 21 days, a spot interruption "
        "gives 2 minutes, a node or GPU can fail) stops the service for a cold start of about "
        f"{outage} s ({parts}); a PodDisruptionBudget cannot prevent it; set "
        "autoscaling.minReplicas to 2 or more to keep one replica serving"
    )


# Model families whose float16 serving vLLM 0.33.0 allows: it refuses float16 only for
# gemma2/gemma3/gemma3_text/glm4 (vllm/config/model.py ``_FLOAT16_NOT_SUPPORTED_MODELS``). The
# risk of each family, with where it was reported.
FP16_RISK = {
    # Qwen2 models were trained in bf16; in float16 their activations overflow to inf/NaN and the
    # output turns into "!!!!" (QwenLM/Qwen3#761, #868; vllm-project/vllm#14126 for Qwen2.5 in vLLM).
    "qwen2": "Qwen2 activations are known to overflow float16 (inf/NaN, output of only '!')",
    # No float16 overflow report was found for Llama 3; it was trained in bf16 all the same.
    "llama": "Llama 3 was trained in bf16 and float16 has a smaller range (no overflow reported)",
    # vllm-project/vllm#16579: DeepSeek-R1 (MoE) in float16 overflows.
    "deepseek_v3": "DeepSeek-R1 MoE overflows float16",
}


def _precision_warnings(model: ModelSpec, q: Quantization, fit: Fit) -> list[str]:
    out = []
    gpu = fit.instance.gpu_model
    if fit.dtype == "float16":
        risk = FP16_RISK.get(model.model_type, "the model was trained in bf16")
        out.append(
            f"{gpu} has no bf16: vLLM serves {model.variant} in float16 ({model.model_type}); {risk}. "
            "Check outputs for NaN or gibberish, or choose a GPU with bf16 (g5, g6, g6e, p4d and newer)"
        )
    if q is Quantization.FP8 and not fit.instance.arch.fp8:
        out.append(
            f"{gpu} has no FP8 tensor cores: vLLM runs FP8 weight-only through its Marlin kernel "
            "(half the weight memory, 16-bit compute)"
        )
    return out


def _describe(fit: Fit) -> str:
    i = fit.instance
    nodes = f" x {fit.nodes} nodes" if fit.nodes > 1 else ""
    packed = (
        f", {fit.replicas_per_node} replicas of TP {fit.tensor_parallel} per node"
        if fit.replicas_per_node > 1
        else ""
    )
    price = f"${fit.replica_usd_per_hour:.2f}/h per replica"
    return f"{i.name} ({i.gpu_count}x {i.gpu_model}{nodes}{packed}, {price})"


def _with(request: PlanRequest, **changes) -> PlanRequest:
    fields = {**request.__dict__, **changes}
    return PlanRequest(**fields)


def suggest(request: PlanRequest, catalog: InstanceCatalog | None = None) -> list[str]:
    """Changes that would make an infeasible request feasible, cheapest option of each kind."""
    catalog = catalog or instance_catalog()
    model = _resolve(request, catalog)
    current = served_quantization(request.quantization, model, request.repository)
    out: list[str] = []

    for q in (Quantization.FP8, Quantization.AWQ_INT4, Quantization.BF16):
        if q is current:
            continue
        fits, _ = _fits(model, q, _with(request, quantization=q), catalog)
        if fits:
            needs_repo = q is Quantization.AWQ_INT4 and not known_checkpoint(model.variant, q.value)
            note = " (needs model.repository set to an AWQ checkpoint)" if needs_repo else ""
            out.append(f"set model.quantization={q.value}: fits {_describe(fits[0])}{note}")

    if request.kv_cache_dtype is not KvCacheDtype.AUTO:
        fits, _ = _fits(model, current, _with(request, kv_cache_dtype=KvCacheDtype.AUTO), catalog)
        if fits:
            out.append(f"set model.kvCacheDtype=auto: fits {_describe(fits[0])}")

    others = [f for f in GPU_FAMILIES if f not in request.families and f in catalog.families]
    family_fits = []
    for family in others:
        fits, _ = _fits(model, current, _with(request, families=(family,)), catalog)
        if fits:
            family_fits.append((fits[0].replica_usd_per_hour, family, fits[0]))
    for _, family, fit in sorted(family_fits)[:3]:
        out.append(f"add {family} to gpu.instanceFamilies: fits {_describe(fit)}")

    best_len = 0
    lo, hi = 1, request.max_model_len // 1024 - 1  # multiples of 1024 below the current value
    while lo <= hi:
        mid = (lo + hi) // 2
        fits, _ = _fits(model, current, _with(request, max_model_len=mid * 1024), catalog)
        if fits:
            best_len, lo = mid * 1024, mid + 1
        else:
            hi = mid - 1
    if best_len:
        fits, _ = _fits(model, current, _with(request, max_model_len=best_len), catalog)
        out.append(f"lower model.maxModelLen to {best_len}: fits {_describe(fits[0])}")
    if request.min_full_length_sequences > 1:
        fits, _ = _fits(model, current, _with(request, min_full_length_sequences=1), catalog)
        if fits:
            out.append(f"lower model.minFullLengthSequences to 1: fits {_describe(fits[0])}")
    return out
