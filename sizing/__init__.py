"""Pure sizing engine: which GPUs, how many, which vLLM flags and what it costs. No Pulumi here."""

from .catalog import (
    GPU_FAMILIES,
    VARIANTS,
    InstanceCatalog,
    InstanceType,
    ModelSpec,
    instance_catalog,
    model_catalog,
)
from .memory import KvCacheDtype, Quantization
from .planner import Infeasible, PlanError, PlanRequest, SizingPlan, WeightsSource, evaluate, plan, suggest

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
