"""Replica autoscaling by ``autoscaling.signal``: an HPA on per-pod GPU utilization (through
prometheus-adapter), or one KEDA ScaledObject on queue depth, or on queue depth and GPU
utilization together. Exactly one HPA ever owns the vLLM replicas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from deepseek_eks import promql
from deepseek_eks.settings import ScalingSignal
from deepseek_eks.sizing.planner import IMAGE_PULL_S, NODE_READY_S

from .helm import helm_release
from .manifests import custom_resource
from .versions import KEDA

HPA_NAME = "vllm"
KEDA_HPA_NAME = "keda-hpa-vllm"
KEDA_NAMESPACE = "keda"
# The HPA API's longest stabilization window.
MAX_STABILIZATION_S = 3600
# Node launch, GPU registration and image pull come before the container's own start-up (the
# plan's startup_breakdown stages, each from a published figure).
NODE_AND_IMAGE_S = NODE_READY_S + IMAGE_PULL_S


def hpa_name(signal: ScalingSignal) -> str:
    """Name of the HPA that scales vLLM: ours, or the one KEDA creates for the ScaledObject."""
    return HPA_NAME if signal is ScalingSignal.GPU_UTILIZATION else KEDA_HPA_NAME


def behavior(startup_seconds: int) -> dict[str, Any]:
    """Scale up at once (two pods or doubling per minute); scale down one pod per five minutes,
    and only after load stayed low for longer than a new replica takes to come up, so a short
    lull never throws away a replica that took many minutes to load."""
    window = min(MAX_STABILIZATION_S, startup_seconds + NODE_AND_IMAGE_S)
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 2, "periodSeconds": 60},
                {"type": "Percent", "value": 100, "periodSeconds": 60},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": window,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}],
        },
    }


@dataclass(frozen=True)
class ScaleTarget:
    """The workload the autoscaler resizes."""

    api_version: str
    kind: str
    name: str

    def as_ref(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}


@dataclass(frozen=True)
class ScalingSpec:
    """Everything the autoscaling manifests need."""

    signal: ScalingSignal
    namespace: str
    target: ScaleTarget
    min_replicas: int
    max_replicas: int
    target_gpu_utilization: int
    queue_depth_per_replica: int
    startup_seconds: int
    scope: promql.Scope
    prometheus_url: str
    labels: dict[str, str]


def gpu_hpa(spec: ScalingSpec) -> dict[str, Any]:
    """autoscaling/v2 HPA on the adapter's Pods metric: mean GPU utilization per pod in percent
    (0-100, the unit of DCGM_FI_DEV_GPU_UTIL), targeted as an average value."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": HPA_NAME, "namespace": spec.namespace, "labels": spec.labels},
        "spec": {
            "scaleTargetRef": spec.target.as_ref(),
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": promql.ADAPTER_GPU_METRIC},
                        "target": {"type": "AverageValue", "averageValue": str(spec.target_gpu_utilization)},
                    },
                }
            ],
            "behavior": behavior(spec.startup_seconds),
        },
    }


def scaled_object(spec: ScalingSpec) -> dict[str, Any]:
    """One KEDA ScaledObject (so one HPA) with the queue-depth trigger, plus the GPU trigger for
    ``combined``. Trigger metadata values are strings, as KEDA's schema requires."""
    triggers = [
        {
            "type": "prometheus",
            "name": "queue-depth",
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": spec.prometheus_url,
                "query": promql.queue_depth(spec.scope),
                "threshold": str(spec.queue_depth_per_replica),
                # From zero replicas, one waiting request is enough to start one.
                "activationThreshold": "0",
            },
        }
    ]
    if spec.signal is ScalingSignal.COMBINED:
        triggers.append(
            {
                "type": "prometheus",
                "name": "gpu-utilization",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": spec.prometheus_url,
                    "query": promql.gpu_utilization_total(spec.scope),
                    "threshold": str(spec.target_gpu_utilization),
                },
            }
        )
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": HPA_NAME, "namespace": spec.namespace, "labels": spec.labels},
        "spec": {
            "scaleTargetRef": spec.target.as_ref(),
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "pollingInterval": 15,
            "cooldownPeriod": 600,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "name": KEDA_HPA_NAME,
                    "behavior": behavior(spec.startup_seconds),
                }
            },
            "triggers": triggers,
        },
    }


@dataclass
class AutoscalingArgs:
    """Inputs of ``Autoscaling``."""

    spec: ScalingSpec
    """Signal, bounds, targets and the queries' scope."""
    depends_on: list[pulumi.Resource]
    """The workload and the metrics pipeline."""
    install_keda: bool = True
    """Install KEDA (cluster-wide; one service per cluster does) for a ScaledObject signal."""


class Autoscaling(pulumi.ComponentResource):
    """The HPA (gpu-utilization) or KEDA and its ScaledObject (queue-depth, combined)."""

    hpa_name: str
    """Name of the HPA that ends up scaling vLLM."""

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Autoscaling", name, None, opts)
        spec = args.spec
        after = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        if spec.signal is ScalingSignal.GPU_UTILIZATION:
            hpa = gpu_hpa(spec)
            k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa", metadata=hpa["metadata"], spec=hpa["spec"], opts=after
            )
        else:
            keda: list[pulumi.Resource] = []
            if args.install_keda:
                keda.append(
                    helm_release(
                        f"{name}-keda",
                        "keda",
                        KEDA,
                        KEDA_NAMESPACE,
                        {"crds": {"install": True}},
                        pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
                        create_namespace=True,
                    )
                )
            custom_resource(
                f"{name}-scaledobject",
                scaled_object(spec),
                pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *keda]),
            )
        self.hpa_name = hpa_name(spec.signal)
        self.register_outputs({"hpaName": self.hpa_name})
