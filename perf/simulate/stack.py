"""What the simulator needs from one stack, read from its offline render: the autoscaler exactly
as rendered (HPA or KEDA ScaledObject), the scrape intervals of the metrics it reads, the pod's
termination grace, the GPU NodePool's consolidation delay, and the sizing plan."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eks import promql
from deepseek_eks.settings.schedule import CronError, ScheduledFloor

from .hpa import AutoscalerSpecError, Behavior

# Prometheus' own default scrape interval (prometheus/prometheus config/config.go,
# DefaultGlobalConfig ScrapeInterval 1m) when a monitor names none.
PROMETHEUS_DEFAULT_SCRAPE_S = 60.0
# KEDA ScaledObject defaults (keda-docs reference/scaledobject-spec.md).
KEDA_DEFAULT_POLLING_S = 30.0
KEDA_DEFAULT_COOLDOWN_S = 300.0
KEDA_DEFAULT_MAX = 100
# dcgm-exporter collects every 30000 ms unless -c / DCGM_EXPORTER_INTERVAL says otherwise
# (NVIDIA/dcgm-exporter pkg/cmd/app.go, CLICollectInterval).
DCGM_DEFAULT_COLLECT_S = 30.0

GPU_PER_POD = "gpu-utilization per pod"
GPU_TOTAL = "gpu-utilization total"
QUEUE_TOTAL = "queue-depth total"
KV_TOTAL = "kv-cache total"
CONCURRENCY_TOTAL = "concurrency total"  # requests running + waiting, summed over the pods
ROUTER_DEMAND = "router demand"  # llm-d's router: requests in its queue + in flight (router-queue)
# autoscaling.seasonal: the most requests running + waiting one period ago over the next start-up
SEASONAL = "seasonal demand"
# How the load balancer picks a ready replica (see ``routing``).
ROUND_ROBIN = "round_robin"
LEAST_OUTSTANDING = "least_outstanding_requests"
RANDOM = "random"
CRON = "schedule"
# KEDA's cron scaler targets AverageValue 1 (cron_scaler.go GetMetricSpecForScaling).
CRON_TARGET = 1.0

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_s(text: str | int | float) -> float:
    """``15s``, ``10m``, ``1h30m`` (Kubernetes and Prometheus duration strings) in seconds."""
    if isinstance(text, int | float):
        return float(text)
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        raise AutoscalerSpecError(f"cannot read duration {text!r}")
    h, mi, s = (int(g or 0) for g in m.groups())
    return float(h * 3600 + mi * 60 + s)


@dataclass(frozen=True)
class MetricSpec:
    """One autoscaler metric: what it measures, its AverageValue target and KEDA activation."""

    measures: str  # GPU_PER_POD, GPU_TOTAL, QUEUE_TOTAL, KV_TOTAL, CONCURRENCY_TOTAL, ROUTER_DEMAND,
    # SEASONAL or CRON
    target: float
    activation: float = 0.0
    schedule: ScheduledFloor | None = None  # CRON only
    window: tuple[int, int] | None = None  # SEASONAL only: (period_s, lead_s) read from the query


@dataclass(frozen=True)
class AutoscalerSpec:
    """An HPA, or a ScaledObject with the HPA KEDA derives from it."""

    label: str
    kind: str  # "HorizontalPodAutoscaler" or "ScaledObject"
    min_replicas: int  # of the HPA (KEDA: max(minReplicaCount, 1))
    max_replicas: int
    behavior: Behavior
    metrics: tuple[MetricSpec, ...]
    keda_min_replicas: int = 0
    polling_interval_s: float = KEDA_DEFAULT_POLLING_S
    cooldown_s: float = KEDA_DEFAULT_COOLDOWN_S

    @property
    def is_keda(self) -> bool:
        return self.kind == "ScaledObject"

    @property
    def floor(self) -> int:
        """The fewest replicas this autoscaler ever keeps."""
        return self.keda_min_replicas if self.is_keda else self.min_replicas

    def describe(self) -> str:
        parts = [
            f"{m.schedule.replicas} replicas {m.schedule.start} to {m.schedule.end} {m.schedule.timezone}"
            if m.schedule
            else f"{m.measures} {m.window[0] // 86400} d back, {m.window[1]} s ahead, target {m.target:g}"
            if m.window
            else f"{m.measures} target {m.target:g}"
            for m in self.metrics
        ]
        return f"{self.label}: {self.kind} {', '.join(parts)}; replicas {self.floor}-{self.max_replicas}"


def _hpa_metric(metric: Mapping[str, Any]) -> MetricSpec:
    if metric.get("type") != "Pods":
        raise AutoscalerSpecError(f"the simulator models Pods metrics of an HPA, not {metric.get('type')!r}")
    pods = metric["pods"]
    name = pods["metric"]["name"]
    target = pods["target"]
    if name not in (promql.ADAPTER_GPU_METRIC, promql.DCGM_GPU_UTIL) or target.get("type") != "AverageValue":
        raise AutoscalerSpecError(f"cannot model HPA metric {name!r} with target {target}")
    return MetricSpec(GPU_PER_POD, float(target["averageValue"]))


def from_hpa(obj: Mapping[str, Any], label: str) -> AutoscalerSpec:
    """An autoscaling/v2 HorizontalPodAutoscaler manifest."""
    spec = obj["spec"]
    return AutoscalerSpec(
        label=label,
        kind="HorizontalPodAutoscaler",
        min_replicas=int(spec.get("minReplicas", 1)),
        max_replicas=int(spec["maxReplicas"]),
        behavior=Behavior.from_spec(spec.get("behavior")),
        metrics=tuple(_hpa_metric(m) for m in spec["metrics"]),
    )


def _cron_trigger(trigger: Mapping[str, Any]) -> MetricSpec:
    meta = trigger.get("metadata", {})
    try:
        floor = ScheduledFloor(
            meta["start"], meta["end"], meta.get("timezone", "UTC"), int(meta["desiredReplicas"])
        )
    except (KeyError, ValueError, CronError) as e:
        raise AutoscalerSpecError(f"cannot read cron trigger {trigger.get('name')!r}: {e}") from None
    return MetricSpec(CRON, CRON_TARGET, schedule=floor)


def _trigger(trigger: Mapping[str, Any]) -> MetricSpec:
    if trigger.get("type") == "cron":
        return _cron_trigger(trigger)
    meta = trigger.get("metadata", {})
    query = meta.get("query", "")
    if trigger.get("type") != "prometheus" or trigger.get("metricType", "AverageValue") != "AverageValue":
        raise AutoscalerSpecError(
            f"cannot model trigger {trigger.get('name')!r}: prometheus AverageValue only"
        )
    window = promql.seasonal_window(query)
    if window is not None:
        threshold = float(meta["threshold"])
        return MetricSpec(SEASONAL, threshold, float(meta.get("activationThreshold", 0)), window=window)
    if promql.ROUTER_QUEUE in query:
        measures = ROUTER_DEMAND
    elif promql.VLLM_RUNNING in query and promql.VLLM_WAITING in query:
        measures = CONCURRENCY_TOTAL
    elif promql.VLLM_WAITING in query:
        measures = QUEUE_TOTAL
    elif promql.VLLM_KV_CACHE_USAGE in query:
        measures = KV_TOTAL
    elif promql.DCGM_GPU_UTIL in query:
        measures = GPU_TOTAL
    else:
        raise AutoscalerSpecError(f"cannot model the query of trigger {trigger.get('name')!r}: {query}")
    return MetricSpec(measures, float(meta["threshold"]), float(meta.get("activationThreshold", 0)))


def from_scaled_object(obj: Mapping[str, Any], label: str) -> AutoscalerSpec:
    """A keda.sh/v1alpha1 ScaledObject manifest, with its documented defaults."""
    spec = obj["spec"]
    keda_min = int(spec.get("minReplicaCount", 0))
    hpa_config = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {})
    return AutoscalerSpec(
        label=label,
        kind="ScaledObject",
        min_replicas=max(keda_min, 1),
        max_replicas=int(spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)),
        behavior=Behavior.from_spec(hpa_config.get("behavior")),
        metrics=tuple(_trigger(t) for t in spec["triggers"]),
        keda_min_replicas=keda_min,
        polling_interval_s=float(spec.get("pollingInterval", KEDA_DEFAULT_POLLING_S)),
        cooldown_s=float(spec.get("cooldownPeriod", KEDA_DEFAULT_COOLDOWN_S)),
    )


def autoscaler_from_objects(objects: Sequence[Mapping[str, Any]], label: str) -> AutoscalerSpec:
    """The one autoscaler among a stack's rendered Kubernetes objects."""
    found = [o for o in objects if o["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]
    if len(found) != 1:
        raise AutoscalerSpecError(f"expected one HPA or ScaledObject in the render, found {len(found)}")
    obj = found[0]
    return (
        from_hpa(obj, label) if obj["kind"] == "HorizontalPodAutoscaler" else from_scaled_object(obj, label)
    )


# ---- the published guides' autoscalers (reference/upstream/seed-guides/guides.json) --------------


GUIDE_HPA_GPU = "guide:hpa-gpu"
GUIDE_KEDA_QUEUE = "guide:keda-queue"


def reference_gpu_hpa() -> dict[str, Any]:
    """``guide:hpa-gpu``: DCGM GPU utilization per pod at 50 % (AverageValue), 1-5 replicas,
    scale-up window 30 s with +2 pods per 60 s, scale-down window 60 s with 50 % per 60 s
    (selectPolicy Min), as the published guide gives it."""
    return {
        "kind": "HorizontalPodAutoscaler",
        "spec": {
            "minReplicas": 1,
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": promql.DCGM_GPU_UTIL},
                        "target": {"type": "AverageValue", "averageValue": "50"},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": 30,
                    "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
                },
                "scaleDown": {
                    "stabilizationWindowSeconds": 60,
                    "selectPolicy": "Min",
                    "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}],
                },
            },
        },
    }


def reference_keda_waiting() -> dict[str, Any]:
    """``guide:keda-queue``: KEDA on ``sum(vllm:num_requests_waiting)`` with threshold 5, 1-8
    replicas, cooldownPeriod 600; no pollingInterval (KEDA's 30 s default) and no HPA behavior
    (so KEDA's HPA takes the Kubernetes legacy path)."""
    return {
        "kind": "ScaledObject",
        "spec": {
            "minReplicaCount": 1,
            "maxReplicaCount": 8,
            "cooldownPeriod": 600,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {"query": f"sum({promql.VLLM_WAITING})", "threshold": "5"},
                }
            ],
        },
    }


def guides() -> tuple[AutoscalerSpec, AutoscalerSpec]:
    """Both published guides' autoscalers, labelled as ``--compare`` reports them."""
    return (
        from_scaled_object(reference_keda_waiting(), GUIDE_KEDA_QUEUE),
        from_hpa(reference_gpu_hpa(), GUIDE_HPA_GPU),
    )


# ---- the rest of the stack -------------------------------------------------------------------


@dataclass(frozen=True)
class StackFacts:
    """Rendered facts other than the autoscaler."""

    vllm_scrape_s: float
    gpu_scrape_s: float
    termination_grace_s: float
    consolidate_after_s: float
    gpu_collect_s: float = DCGM_DEFAULT_COLLECT_S
    routing: str = ROUND_ROBIN


def _by_kind(objects: Sequence[Mapping[str, Any]], kind: str) -> Sequence[Mapping[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def stack_facts(objects: Sequence[Mapping[str, Any]], helm: Mapping[str, Mapping[str, Any]]) -> StackFacts:
    """Scrape intervals (the vLLM PodMonitor, the dcgm-exporter ServiceMonitor values), the vLLM
    pod's terminationGracePeriodSeconds and the GPU NodePool's consolidateAfter."""
    vllm_scrape = PROMETHEUS_DEFAULT_SCRAPE_S
    for monitor in _by_kind(objects, "PodMonitor"):
        for endpoint in monitor["spec"].get("podMetricsEndpoints", []):
            if "interval" in endpoint:
                vllm_scrape = duration_s(endpoint["interval"])
    gpu_scrape = PROMETHEUS_DEFAULT_SCRAPE_S
    gpu_collect = DCGM_DEFAULT_COLLECT_S
    dcgm = helm.get("dcgm-exporter")
    if dcgm:
        values = dcgm.get("values", {})
        interval = values.get("serviceMonitor", {}).get("interval")
        if interval:
            gpu_scrape = duration_s(interval)
        gpu_collect = _dcgm_collect_s(values)
    grace = 30.0  # the Pod API default
    for workload in [*_by_kind(objects, "Deployment"), *_by_kind(objects, "LeaderWorkerSet")]:
        pod = workload["spec"].get("template", {}).get("spec", {})
        if "leaderWorkerTemplate" in workload["spec"]:
            pod = workload["spec"]["leaderWorkerTemplate"].get("leaderTemplate", {}).get("spec", {})
        if any(c.get("name") == "vllm" for c in pod.get("containers", [])):
            grace = float(pod.get("terminationGracePeriodSeconds", grace))
    consolidate = 0.0
    for pool in _by_kind(objects, "NodePool"):
        template = pool["spec"].get("template", {}).get("spec", {})
        gpu_pool = "nvidia.com/gpu" in pool["spec"].get("limits", {}) or any(
            t.get("key") == "nvidia.com/gpu" for t in template.get("taints", [])
        )
        after = pool["spec"].get("disruption", {}).get("consolidateAfter")
        if gpu_pool and after and after != "Never":
            consolidate = duration_s(after)
    return StackFacts(vllm_scrape, gpu_scrape, grace, consolidate, gpu_collect, routing(objects))


ALB_TG_ATTRIBUTES = "alb.ingress.kubernetes.io/target-group-attributes"
ALGORITHM_KEY = "load_balancing.algorithm.type"
_ALB_ALGORITHMS = {
    "round_robin": ROUND_ROBIN,
    "least_outstanding_requests": LEAST_OUTSTANDING,
    "weighted_random": RANDOM,
}


def routing(objects: Sequence[Mapping[str, Any]]) -> str:
    """How the rendered load balancer picks a replica: an ALB Ingress by its target group's
    ``load_balancing.algorithm.type`` (default round_robin: ELB user guide, target groups,
    routing algorithm); an NLB Service hashes flows, which many clients spread like a random
    choice."""
    for ingress in _by_kind(objects, "Ingress"):
        attributes = ingress.get("metadata", {}).get("annotations", {}).get(ALB_TG_ATTRIBUTES, "")
        for pair in attributes.split(","):
            key, _, value = pair.strip().partition("=")
            if key == ALGORITHM_KEY:
                if value not in _ALB_ALGORITHMS:
                    raise AutoscalerSpecError(f"unknown ALB routing algorithm {value!r}")
                return _ALB_ALGORITHMS[value]
        return ROUND_ROBIN
    for service in _by_kind(objects, "Service"):
        if service.get("spec", {}).get("type") == "LoadBalancer":
            return RANDOM
    return ROUND_ROBIN


def _dcgm_collect_s(values: Mapping[str, Any]) -> float:
    """The collection interval the chart values give dcgm-exporter (``arguments`` or
    ``extraEnv``), in seconds."""
    args = [str(a) for a in values.get("arguments", [])]
    for i, arg in enumerate(args):
        for flag in ("-c", "--collect-interval"):
            if arg == flag and i + 1 < len(args):
                return int(args[i + 1]) / 1000
            if arg.startswith(flag + "="):
                return int(arg.split("=", 1)[1]) / 1000
    for env in values.get("extraEnv", []):
        if env.get("name") == "DCGM_EXPORTER_INTERVAL":
            return int(env["value"]) / 1000
    return DCGM_DEFAULT_COLLECT_S
