"""deepseek-eks: a private, autoscaled DeepSeek-R1 vLLM service on Amazon EKS, as one Pulumi
component (``DeepSeekService``) and the sizing engine that plans it (``plan``).

The subpackages are the checkout's top-level folders (components/, settings/, sizing/, promql/):
in a checkout ``deepseek_eks/<name>`` is a symlink to ``../<name>``; a wheel holds them inside
this package (pyproject.toml, README "Use it in your own program").
"""

from .components import BuildResult, DeepSeekService, DeepSeekServiceArgs, SizingError, size
from .components.service import (
    AssumeRoleArgs,
    AwsArgs,
    ControlPlaneArgs,
    EndpointArgs,
    GpuArgs,
    ModelArgs,
    NetworkArgs,
    ObservabilityArgs,
    ScalingArgs,
    WeightsArgs,
)
from .settings import Settings, SettingsError, parse_settings
from .sizing import Infeasible, PlanRequest, SizingPlan, plan

__all__ = [
    "AssumeRoleArgs",
    "AwsArgs",
    "BuildResult",
    "ControlPlaneArgs",
    "DeepSeekService",
    "DeepSeekServiceArgs",
    "EndpointArgs",
    "GpuArgs",
    "Infeasible",
    "ModelArgs",
    "NetworkArgs",
    "ObservabilityArgs",
    "PlanRequest",
    "ScalingArgs",
    "Settings",
    "SettingsError",
    "SizingError",
    "SizingPlan",
    "WeightsArgs",
    "parse_settings",
    "plan",
    "size",
]
