"""The closed sets of ``DeepSeekService``'s arguments, typed: ``compute_mode="automode"`` is an error in
mypy or pyright, not only when the program runs.

Each set is defined once, in the settings model (``settings/model.py``: the ``ComputeMode`` ...
``WeightsSource`` enums, ``Variant`` from ``sizing.VARIANTS``, ``Quantization``, ``KvCacheDtype``,
``GPU_FAMILIES``, ``SUPPORTED_KUBERNETES_VERSIONS``). A type checker needs the values written out,
so each set is repeated here as a ``Literal`` (the variants and GPU families are Literals at their
source, ``sizing/catalog.py``) and ``CLOSED_SETS`` pairs it with its definition;
``tests/package/test_arg_types.py`` fails when the two differ.

What a type checker reads and what runs differ on purpose. A type checker reads ``<Set>Arg``: the
``Literal`` of the plain strings (what YAML and TypeScript users write too), or the settings'
enum member (``ComputeMode.KARPENTER``). At runtime ``<Set>Arg`` is ``str``, because Pulumi's
analyzer, which infers the multi-language schema from these annotations when the provider loads,
has no ``Literal`` support (pulumi ``provider/experimental/analyzer.py`` ``analyze_property``: a
``Literal`` reaches ``issubclass(arg, Enum)`` and raises ``TypeError``), and a settings enum there
would make ``construct`` hand the component enum members instead of the strings other languages
send. The schema gets each set as an enum type all the same, from the settings model
(``deepseek_eks/schema.py``), so every language sees the same closed set.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Literal, TypeAlias

from deepseek_eks.settings.model import (
    SUPPORTED_KUBERNETES_VERSIONS,
    CapacityType,
    ComputeMode,
    EndpointAuth,
    EndpointScheme,
    LoadBalancerKind,
    RoutingKind,
    ScalingSignal,
    Variant,
    WeightsSource,
)
from deepseek_eks.sizing import GPU_FAMILIES, KvCacheDtype, Quantization
from deepseek_eks.sizing.catalog import GpuFamilyName as GpuFamilyValue
from deepseek_eks.sizing.catalog import VariantName as VariantValue

ComputeModeValue = Literal["auto-mode", "karpenter"]
QuantizationValue = Literal["auto", "bf16", "fp8", "awq-int4"]
KvCacheDtypeValue = Literal["auto", "fp8"]
CapacityTypeValue = Literal["on-demand", "spot"]
ScalingSignalValue = Literal[
    "gpu-utilization", "queue-depth", "combined", "kv-cache", "concurrency", "router-queue"
]
RoutingKindValue = Literal["none", "llm-d"]
EndpointSchemeValue = Literal["internal", "internet-facing"]
EndpointAuthValue = Literal["api-key", "none"]
LoadBalancerValue = Literal["alb", "nlb"]
WeightsSourceValue = Literal["huggingface", "s3", "s3-mountpoint", "ebs-snapshot"]
KubernetesVersionValue = Literal["1.32", "1.33", "1.34"]

# Each Literal, the argument it types (group, field; "" for a top-level one) and the set it repeats.
CLOSED_SETS: dict[tuple[str, str], tuple[object, tuple[str, ...]]] = {
    ("", "compute_mode"): (ComputeModeValue, tuple(m.value for m in ComputeMode)),
    ("", "kubernetes_version"): (KubernetesVersionValue, tuple(SUPPORTED_KUBERNETES_VERSIONS)),
    ("model", "variant"): (VariantValue, tuple(m.value for m in Variant)),
    ("model", "quantization"): (QuantizationValue, tuple(m.value for m in Quantization)),
    ("model", "kv_cache_dtype"): (KvCacheDtypeValue, tuple(m.value for m in KvCacheDtype)),
    ("gpu", "instance_families"): (GpuFamilyValue, tuple(GPU_FAMILIES)),
    ("gpu", "capacity_types"): (CapacityTypeValue, tuple(m.value for m in CapacityType)),
    ("autoscaling", "signal"): (ScalingSignalValue, tuple(m.value for m in ScalingSignal)),
    ("routing", "kind"): (RoutingKindValue, tuple(m.value for m in RoutingKind)),
    ("endpoint", "scheme"): (EndpointSchemeValue, tuple(m.value for m in EndpointScheme)),
    ("endpoint", "auth"): (EndpointAuthValue, tuple(m.value for m in EndpointAuth)),
    ("endpoint", "load_balancer"): (LoadBalancerValue, tuple(m.value for m in LoadBalancerKind)),
    ("weights", "source"): (WeightsSourceValue, tuple(m.value for m in WeightsSource)),
}


def allowed(group: str, name: str) -> tuple[str, ...] | None:
    """The values the argument ``group.name`` (``""`` for a top-level one) takes, from the settings
    model; None when it is not a closed set."""
    entry = CLOSED_SETS.get((group, name))
    return entry[1] if entry else None


def plain(value: object) -> object:
    """An enum member as the string it stands for (``ComputeMode.KARPENTER`` -> ``"karpenter"``)."""
    return value.value if isinstance(value, Enum) else value


if TYPE_CHECKING:
    ComputeModeArg: TypeAlias = ComputeModeValue | ComputeMode
    VariantArg: TypeAlias = VariantValue | Variant
    QuantizationArg: TypeAlias = QuantizationValue | Quantization
    KvCacheDtypeArg: TypeAlias = KvCacheDtypeValue | KvCacheDtype
    GpuFamilyArg: TypeAlias = GpuFamilyValue
    CapacityTypeArg: TypeAlias = CapacityTypeValue | CapacityType
    ScalingSignalArg: TypeAlias = ScalingSignalValue | ScalingSignal
    RoutingKindArg: TypeAlias = RoutingKindValue | RoutingKind
    EndpointSchemeArg: TypeAlias = EndpointSchemeValue | EndpointScheme
    EndpointAuthArg: TypeAlias = EndpointAuthValue | EndpointAuth
    LoadBalancerArg: TypeAlias = LoadBalancerValue | LoadBalancerKind
    WeightsSourceArg: TypeAlias = WeightsSourceValue | WeightsSource
    KubernetesVersionArg: TypeAlias = KubernetesVersionValue
else:
    # What Pulumi's analyzer reads (module docstring): a plain string; the schema's enum comes
    # from the settings model.
    ComputeModeArg = VariantArg = QuantizationArg = GpuFamilyArg = CapacityTypeArg = str
    ScalingSignalArg = EndpointSchemeArg = EndpointAuthArg = LoadBalancerArg = str
    WeightsSourceArg = KubernetesVersionArg = RoutingKindArg = KvCacheDtypeArg = str
