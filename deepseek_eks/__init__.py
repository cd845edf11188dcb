"""deepseek-eks: a private, autoscaled DeepSeek-R1 vLLM service on Amazon EKS, as one Pulumi
component (``DeepSeekService``) and the sizing engine that plans it (``plan``).

The subpackages are the checkout's top-level folders (components/, settings/, sizing/, promql/,
automation/): in a checkout ``deepseek_eks/<name>`` is a symlink to ``../<name>``; a wheel holds
them inside this package (pyproject.toml, README "Use it in your own program"). ``testing`` is the
offline testing kit for programs that use the component.
"""

__version__ = "0.1.0"
"""The distribution's version (pyproject.toml reads it from here; provider/schema.json carries it)."""

from .components import BuildResult, DeepSeekService, DeepSeekServiceArgs, SizingError, size  # noqa: E402
from .components.service import (  # noqa: E402
    AssumeRoleArgs,
    AwsArgs,
    ControlPlaneArgs,
    EndpointArgs,
    ExistingClusterArgs,
    GpuArgs,
    ModelArgs,
    NetworkArgs,
    ObservabilityArgs,
    ScalingArgs,
    ServiceError,
    WeightsArgs,
)
from .settings import Problem, Settings, SettingsError, parse_settings  # noqa: E402
from .sizing import Infeasible, PlanError, PlanRequest, SizingPlan, plan  # noqa: E402

__all__ = [
    "AssumeRoleArgs",
    "AwsArgs",
    "BuildResult",
    "ControlPlaneArgs",
    "DeepSeekService",
    "DeepSeekServiceArgs",
    "EndpointArgs",
    "ExistingClusterArgs",
    "GpuArgs",
    "Infeasible",
    "ModelArgs",
    "NetworkArgs",
    "ObservabilityArgs",
    "PlanError",
    "PlanRequest",
    "Problem",
    "ScalingArgs",
    "ServiceError",
    "Settings",
    "SettingsError",
    "SizingError",
    "SizingPlan",
    "WeightsArgs",
    "__version__",
    "parse_settings",
    "plan",
    "size",
]
