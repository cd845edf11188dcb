"""Pure sizing engine: which GPUs, how many, which vLLM flags and what it costs. No Pulumi here.

The names below are imported as ``deepseek_eks.sizing.<module>``, not relatively: ``python -m
sizing`` from a checkout runs this file under the folder's name too, and must then re-export the
package's own objects instead of loading the engine's modules a second time (sizing/__main__.py).
"""

from deepseek_eks.sizing.catalog import (
    GPU_FAMILIES,
    VARIANTS,
    InstanceCatalog,
    InstanceType,
    ModelSpec,
    instance_catalog,
    model_catalog,
)
from deepseek_eks.sizing.memory import KvCacheDtype, Quantization
from deepseek_eks.sizing.planner import (
    Infeasible,
    PlanError,
    PlanRequest,
    SizingPlan,
    WeightsSource,
    evaluate,
    plan,
    suggest,
)

__all__ = [
    "GPU_FAMILIES",
    "VARIANTS",
    "Infeasible",
    "InstanceCatalog",
    "InstanceType",
    "KvCacheDtype",
    "ModelSpec",
    "PlanError",
    "PlanRequest",
    "Quantization",
    "SizingPlan",
    "WeightsSource",
    "evaluate",
    "instance_catalog",
    "model_catalog",
    "plan",
    "suggest",
]
