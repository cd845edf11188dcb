"""``build()``: the one program. ``__main__.py``, the tests, the offline render and the Automation
API all call it; there is no second copy of what the stack creates."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from settings import Settings
from sizing import Infeasible, SizingPlan, plan
from sizing.cli import summary_lines

from .labels import common_labels
from .namespaces import Namespaces, NamespacesArgs, NamespaceSpec
from .secrets import ApiSecrets, ApiSecretsArgs

INFERENCE_NAMESPACE = "deepseek"
MONITORING_NAMESPACE = "monitoring"


class SizingError(ValueError):
    """The settings are valid but no allowed instance type can serve them."""

    def __init__(self, result: Infeasible):
        self.result = result
        super().__init__("\n".join(summary_lines(result)))


def size(settings: Settings) -> SizingPlan:
    """The sizing plan of these settings, or ``SizingError`` saying why none exists."""
    result = plan(settings.plan_request())
    if isinstance(result, Infeasible):
        raise SizingError(result)
    return result


@dataclass
class BuildResult:
    """What ``build`` made: the plan, the top-level components and the stack outputs."""

    plan: SizingPlan
    outputs: dict[str, object] = field(default_factory=dict)
    components: dict[str, pulumi.ComponentResource] = field(default_factory=dict)


def build(settings: Settings, sizing_plan: SizingPlan | None = None) -> BuildResult:
    """Create every resource of the stack described by ``settings`` and export its outputs."""
    sizing_plan = sizing_plan or size(settings)
    labels = common_labels(settings)

    # Until the cluster layer provides its kubeconfig, the provider uses the ambient context.
    kubernetes = k8s.Provider("k8s", enable_server_side_apply=True)
    k8s_opts = pulumi.ResourceOptions(providers={"kubernetes": kubernetes})

    namespaces = Namespaces(
        "namespaces",
        NamespacesArgs(
            namespaces=[
                NamespaceSpec(INFERENCE_NAMESPACE, "restricted"),
                NamespaceSpec(
                    MONITORING_NAMESPACE,
                    "privileged",
                    reason="node-exporter and dcgm-exporter read host PID/network and GPU devices",
                ),
            ],
            labels=labels,
        ),
        opts=k8s_opts,
    )
    secrets = ApiSecrets(
        "api-secrets",
        ApiSecretsArgs(
            namespace=namespaces.names[INFERENCE_NAMESPACE],
            labels=labels,
            hf_token=settings.hf_token,  # type: ignore[arg-type]
            api_key=settings.api_key,  # type: ignore[arg-type]
        ),
        opts=k8s_opts,
    )

    d = sizing_plan.to_dict()
    outputs: dict[str, object] = {
        "plan": d,
        "computeMode": settings.compute_mode.value,
        "variant": d["variant"],
        "instanceType": d["instance_type"],
        "instanceTypes": d["instance_types"],
        "gpusPerReplica": d["gpus_per_replica"],
        "hourlyUsdAtMin": d["hourly_usd_at_min"],
        "hourlyUsdAtMax": d["hourly_usd_at_max"],
        "inferenceNamespace": namespaces.names[INFERENCE_NAMESPACE],
        "monitoringNamespace": namespaces.names[MONITORING_NAMESPACE],
    }
    for name, value in outputs.items():
        pulumi.export(name, value)
    return BuildResult(
        plan=sizing_plan,
        outputs=outputs,
        components={"namespaces": namespaces, "secrets": secrets},
    )
