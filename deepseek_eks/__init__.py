"""deepseek-eks: a private, autoscaled DeepSeek-R1 vLLM service on Amazon EKS, as one Pulumi
component (``DeepSeekService``) and the sizing engine that plans it (``plan``).

The subpackages are the checkout's top-level folders (components/, settings/, sizing/, promql/,
automation/, perf/, guardrails/, twin/, policy/), mapped to ``deepseek_eks.<name>`` by setup.py:
an editable install (``make venv``) imports them from the checkout, a wheel holds them inside this
package. ``testing`` is the offline testing kit for programs that use the component.

The names below load on first use (PEP 562), so ``deepseek_eks.sizing`` and the policy pack
(``deepseek_eks.policy``) import without Pulumi and the component.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .components import BuildResult, DeepSeekService, DeepSeekServiceArgs, SizingError, size
    from .components.service import ServiceError
    from .components.service_args import (
        AssumeRoleArgs,
        AwsArgs,
        ControlPlaneArgs,
        EndpointArgs,
        ExistingClusterArgs,
        GpuArgs,
        ImageArgs,
        ModelArgs,
        NetworkArgs,
        ObservabilityArgs,
        RoutingArgs,
        ScalingArgs,
        ScheduleArgs,
        WeightsArgs,
    )
    from .settings import Problem, Settings, SettingsError, parse_settings
    from .sizing import Infeasible, PlanError, PlanRequest, SizingPlan, plan

__version__ = "0.1.0"
"""The distribution's version (pyproject.toml reads it from here; provider/schema.json carries it)."""

# Each public name -> the module it comes from.
_SOURCES = {
    **dict.fromkeys(
        ("BuildResult", "DeepSeekService", "DeepSeekServiceArgs", "SizingError", "size"), "components"
    ),
    **dict.fromkeys(
        (
            "AssumeRoleArgs",
            "AwsArgs",
            "ControlPlaneArgs",
            "EndpointArgs",
            "ExistingClusterArgs",
            "GpuArgs",
            "ImageArgs",
            "ModelArgs",
            "NetworkArgs",
            "ObservabilityArgs",
            "RoutingArgs",
            "ScalingArgs",
            "ScheduleArgs",
            "WeightsArgs",
        ),
        "components.service_args",
    ),
    "ServiceError": "components.service",
    **dict.fromkeys(("Problem", "Settings", "SettingsError", "parse_settings"), "settings"),
    **dict.fromkeys(("Infeasible", "PlanError", "PlanRequest", "SizingPlan", "plan"), "sizing"),
}


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_SOURCES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})


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
    "ImageArgs",
    "Infeasible",
    "ModelArgs",
    "NetworkArgs",
    "ObservabilityArgs",
    "PlanError",
    "PlanRequest",
    "Problem",
    "RoutingArgs",
    "ScalingArgs",
    "ScheduleArgs",
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
