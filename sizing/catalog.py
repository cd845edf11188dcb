"""Model and GPU-instance catalogs: the facts the sizing engine reasons from.

Both catalogs are loaded from the project's own data files in ``sizing/data/``; each file names
its sources and their dates. Nothing here imports Pulumi.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Literal, get_args


class Attention(StrEnum):
    """How a model's attention stores its KV cache."""

    GQA = "gqa"  # grouped-query attention: K and V per KV head
    MLA = "mla"  # multi-head latent attention (DeepSeek-V3/R1): one compressed latent per token


@dataclass(frozen=True)
class ModelSpec:
    """Architecture facts of one DeepSeek-R1 variant (see sizing/data/models.json for sources)."""

    variant: str
    hf_repo: str
    attention: Attention
    moe: bool
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    parameters: int
    checkpoint_dtype: str
    model_type: str = ""
    intermediate_size: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    moe_intermediate_size: int = 0
    n_routed_experts: int = 0
    first_k_dense_replace: int = 0
    mtp_parameters: int = 0
    checkpoint_bytes: int | None = None
    sources: tuple[str, ...] = ()

    @property
    def embedding_parameters(self) -> int:
        """Input embedding plus (untied) output head: kept in 16-bit by every quantization here."""
        heads = 1 if self.tie_word_embeddings else 2
        return heads * self.vocab_size * self.hidden_size


@dataclass(frozen=True)
class GpuArch:
    """What a GPU model can do natively, by CUDA compute capability.

    Source: NVIDIA, "CUDA GPUs - Compute Capability", https://developer.nvidia.com/cuda-gpus
    (T4 7.5, A10G 8.6, A100 8.0, L4 8.9, L40S 8.9, H100/H200 9.0, B200 10.0). bf16 tensor cores
    arrive with compute capability 8.0 (Ampere); FP8 tensor cores with 8.9 (Ada) and 9.0 (Hopper).
    vLLM's AWQ kernels need 7.5 or newer.
    """

    name: str
    compute_capability: float

    @property
    def bf16(self) -> bool:
        return self.compute_capability >= 8.0

    @property
    def fp8(self) -> bool:
        return self.compute_capability >= 8.9

    @property
    def awq(self) -> bool:
        return self.compute_capability >= 7.5

    @property
    def fp8_marlin(self) -> bool:
        """Weight-only FP8 through vLLM's Marlin kernel on GPUs without FP8 tensor cores: vLLM 0.33.0
        ``is_fp8_marlin_supported`` (quantization/utils/marlin_utils_fp8.py) needs capability 7.5,
        and ``MarlinFP8ScaledMMLinearKernel`` is the last CUDA entry of ``_POSSIBLE_FP8_KERNELS``
        (model_executor/kernels/linear/__init__.py), chosen when no FP8 tensor-core kernel fits."""
        return self.compute_capability >= 7.5


GPU_ARCHS: dict[str, GpuArch] = {
    a.name: a
    for a in (
        GpuArch("T4", 7.5),
        GpuArch("A10G", 8.6),
        GpuArch("A100", 8.0),
        GpuArch("L4", 8.9),
        GpuArch("L40S", 8.9),
        GpuArch("H100", 9.0),
        GpuArch("H200", 9.0),
        GpuArch("B200", 10.0),
    )
}


@dataclass(frozen=True)
class InstanceType:
    """One EC2 GPU instance size (see sizing/data/gpu_instances.json for sources and dates)."""

    name: str
    family: str
    gpu_model: str
    gpu_count: int
    gpu_memory_mib: int
    vcpu: int
    memory_mib: int
    efa_supported: bool
    # The default network card's bandwidth (EC2 NetworkCards[].BaselineBandwidthInGbps and
    # PeakBandwidthInGbps): "up to" sizes hold the baseline and burst to the peak on network I/O
    # credits for a limited time (EC2 user guide, "Amazon EC2 instance network bandwidth").
    network_baseline_gbps: float
    network_peak_gbps: float
    instance_storage_gb: int
    offered_in_region: dict[str, bool] = field(default_factory=dict)
    on_demand_usd_per_hour: dict[str, float | None] = field(default_factory=dict)
    # What CUDA reports (sizing/data/gpu_memory.json); ``gpu_memory_mib`` is the EC2 API figure.
    cuda_memory_mib: int = 0

    @property
    def gpu_memory_gib(self) -> float:
        return self.gpu_memory_mib / 1024

    @property
    def cuda_memory_gib(self) -> float:
        return self.cuda_memory_mib / 1024

    @property
    def arch(self) -> GpuArch:
        return GPU_ARCHS[self.gpu_model]

    def with_gpu_memory_mib(self, mib: int) -> InstanceType:
        """The same type with another EC2 memory figure (CUDA's figure is kept: it is measured)."""
        return replace(self, gpu_memory_mib=mib)

    def with_cuda_memory_mib(self, mib: int) -> InstanceType:
        return replace(self, cuda_memory_mib=mib)


@dataclass(frozen=True)
class InstanceCatalog:
    """The GPU instance types sizing may choose from, with their price sources."""

    instances: dict[str, InstanceType]
    price_sources: dict[str, dict[str, str]]
    hardware_source: str

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({i.family for i in self.instances.values()}))

    def in_families(self, families: tuple[str, ...] | list[str]) -> list[InstanceType]:
        wanted = set(families)
        return [i for i in self.instances.values() if i.family in wanted]

    def replace_instances(self, instances: dict[str, InstanceType]) -> InstanceCatalog:
        return replace(self, instances=instances)


def _read_data(name: str) -> dict:
    text = resources.files(__package__ or "sizing").joinpath("data", name).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def model_catalog() -> dict[str, ModelSpec]:
    """All seven variants, keyed by the ``model.variant`` setting value."""
    data = _read_data("models.json")["models"]
    catalog = {}
    for variant, m in data.items():
        catalog[variant] = ModelSpec(
            variant=variant,
            hf_repo=m["hf_repo"],
            attention=Attention(m["attention"]),
            moe=m["moe"],
            num_hidden_layers=m["num_hidden_layers"],
            hidden_size=m["hidden_size"],
            num_attention_heads=m["num_attention_heads"],
            num_key_value_heads=m["num_key_value_heads"],
            head_dim=m["head_dim"],
            vocab_size=m["vocab_size"],
            tie_word_embeddings=m["tie_word_embeddings"],
            max_position_embeddings=m["max_position_embeddings"],
            parameters=m["parameters"],
            checkpoint_dtype=m["checkpoint_dtype"],
            model_type=m["model_type"],
            intermediate_size=m["intermediate_size"],
            kv_lora_rank=m.get("kv_lora_rank", 0),
            qk_rope_head_dim=m.get("qk_rope_head_dim", 0),
            q_lora_rank=m.get("q_lora_rank", 0),
            moe_intermediate_size=m.get("moe_intermediate_size", 0),
            n_routed_experts=m.get("n_routed_experts", 0),
            first_k_dense_replace=m.get("first_k_dense_replace", 0),
            mtp_parameters=m.get("mtp_parameters", 0),
            checkpoint_bytes=m.get("checkpoint_bytes"),
            sources=tuple(m["sources"]),
        )
    return catalog


def gpu_memory_key(gpu_model: str, ec2_gpu_memory_mib: int) -> str:
    """Key of ``gpu_memory.json``: the GPU model, with its size where one model comes in two
    (A100 40 GB on p4d, 80 GB on p4de)."""
    if gpu_model == "A100":
        return f"A100-{round(ec2_gpu_memory_mib / 1024)}GB"
    return gpu_model


@cache
def cuda_memory_table() -> dict[str, dict]:
    """``gpu_memory.json``: the memory CUDA exposes per GPU model, each with its source."""
    table: dict[str, dict] = _read_data("gpu_memory.json")["gpus"]
    return table


@cache
def instance_catalog() -> InstanceCatalog:
    """The bundled EC2 GPU instance catalog, each type with the memory CUDA exposes on its GPUs."""
    data = _read_data("gpu_instances.json")
    cuda = cuda_memory_table()
    instances = {}
    for name, fields in data["instances"].items():
        key = gpu_memory_key(fields["gpu_model"], fields["gpu_memory_mib"])
        instances[name] = InstanceType(name=name, cuda_memory_mib=cuda[key]["cuda_total_mib"], **fields)
    hw = data["hardware_source"]
    return InstanceCatalog(
        instances=instances,
        price_sources=data["price_sources"],
        hardware_source=f"{hw['source']} ({hw['as_of']})",
    )


# The variants and GPU families, each written once as a Literal: a type checker reads the
# component's arguments from these (components/arg_types.py), and the tuples are their values.
VariantName = Literal[
    "r1-distill-qwen-1.5b",
    "r1-distill-qwen-7b",
    "r1-distill-llama-8b",
    "r1-distill-qwen-14b",
    "r1-distill-qwen-32b",
    "r1-distill-llama-70b",
    "r1-671b",
]
VARIANTS: tuple[str, ...] = get_args(VariantName)

GpuFamilyName = Literal["g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200"]
GPU_FAMILIES: tuple[str, ...] = get_args(GpuFamilyName)


def unknown_family_message(name: str) -> str:
    """Why ``name`` is not a GPU family, with the real names it was probably meant to be
    (``g4`` -> ``g4dn``, ``p4`` -> ``p4d or p4de``)."""
    import difflib

    near = [f for f in GPU_FAMILIES if f.startswith(name)] or difflib.get_close_matches(
        name, GPU_FAMILIES, n=3
    )
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return f"{name!r} is not an EC2 GPU instance family{hint} (allowed: {', '.join(GPU_FAMILIES)})"
