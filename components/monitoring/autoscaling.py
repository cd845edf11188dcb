"""Replica autoscaling by ``autoscaling.signal``: an HPA on per-pod GPU utilization (through
prometheus-adapter), or one KEDA ScaledObject on queue depth, KV-cache usage, or queue depth and
GPU utilization together, plus a cron trigger per ``autoscaling.schedule`` floor and, with
``autoscaling.seasonal``, yesterday's and last week's demand one start-up ahead. KEDA owns the HPA
whenever a queue, KV-cache, schedule or seasonal trigger is used, so exactly one HPA ever owns the
vLLM replicas."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from deepseek_eks import promql
from deepseek_eks.settings import ScalingSignal
from deepseek_eks.settings.model import SEASONAL_PERIODS_S, ScheduleEntry
from deepseek_eks.settings.schedule import ScheduledFloor
from deepseek_eks.sizing.startup import IMAGE_PULL_S, NODE_READY_S

from ..helm import helm_release
from ..manifests import custom_resource
from ..versions import KEDA
from .availability import MAX_UNAVAILABLE, METRICS_PATH_REPLICAS, spread_over_nodes

HPA_NAME = "vllm"
KEDA_HPA_NAME = "keda-hpa-vllm"
KEDA_NAMESPACE = "keda"
# Pod labels of the KEDA chart's operator and metrics server (kedacore/charts v2.20.2: `app:
# <operator.name>`, `<operator.name>-metrics-apiserver`, operator.name keda-operator; the PDB
# templates select on them). Facts: reference/upstream/metrics-path-facts.json charts.keda.
KEDA_OPERATOR_LABELS = {"app": "keda-operator"}
KEDA_METRICS_SERVER_LABELS = {"app": "keda-operator-metrics-apiserver"}
# How often KEDA reads the triggers (and so notices the first queued request of a service at zero).
POLLING_INTERVAL_S = 15
# How often the HPA controller reconciles (kube-controller-manager
# --horizontal-pod-autoscaler-sync-period, default 15 s; reference/upstream/hpa-keda-controllers.json).
HPA_SYNC_PERIOD_S = 15
# The HPA API's longest stabilization window.
MAX_STABILIZATION_S = 3600
# Node launch, GPU registration and image pull come before the container's own start-up (the
# plan's startup_breakdown stages, each from a published figure).
# Karpenter's node and its whole SOCI pull, whatever the stack runs: the slower compute mode's, and
# without the pre-pull's overlap, since a window too long only holds a replica a little longer.
NODE_AND_IMAGE_S = NODE_READY_S["karpenter"] + IMAGE_PULL_S["karpenter"]

# ---- a metrics gap never scales in (facts: reference/upstream/metrics-path-facts.json)
#
# KEDA's prometheus scaler reads an empty result, or NaN, as 0 unless ignoreNullValues is false
# (keda v2.20.2 pkg/scalers/prometheus_scaler.go: `default=true`; ExecutePromQuery returns 0, or
# with false the error "target may be lost, the result is empty"). A 0 would let the HPA scale in
# once its stabilization window passed. The promql queries are empty exactly when vLLM pods exist
# but none reports (promql.zero_without_targets), so with "false" a gap is an error.
IGNORE_NULL_VALUES = "false"
# While a trigger errors, KEDA reports the error to the HPA (scale_handler.go GetScaledObjectMetrics)
# and the HPA keeps the current count (kubernetes v1.34.12 horizontal.go computeReplicasForMetrics:
# no scale when every metric is invalid, no scale down while any is). After failureThreshold
# consecutive failures KEDA stands in with the fallback instead (pkg/fallback/fallback.go):
# currentReplicasIfHigher gives max(current replicas, fallback.replicas), so it never scales in.
FALLBACK_BEHAVIOR = "currentReplicasIfHigher"
# The threshold does not decide safety (below it the error already holds the count); it decides
# when the ScaledObject reports Fallback and KEDA stands in for the error. 3 consecutive failed
# reads is KEDA's documented example (keda-docs 2.20 reference/scaledobject-spec.md): a read or two
# that met a Prometheus replica as it went away stay plain errors, and a success resets the count.
FALLBACK_FAILURE_THRESHOLD = 3


def fallback_replicas(min_replicas: int) -> int:
    """``fallback.replicas``: the floor the fallback holds, never below one.

    With currentReplicasIfHigher the fallback is max(current, this), so anything up to
    ``minReplicas`` means "hold what runs", what the HPA itself does when its only metric fails.
    Not 0: with ``minReplicas`` 0 KEDA's executor would then take an error for inactivity and
    scale to zero after the cooldown (keda v2.20.2 executor/scale_scaledobjects.go RequestScale:
    only ``fallback.replicas != 0`` keeps an erroring target where it is). Not ``maxReplicas``:
    pods that exist but report nothing are a gap too (a first replica loading its weights serves
    no /metrics), and every start from zero would then launch the whole GPU fleet."""
    return max(min_replicas, 1)


def scheduled_floors(entries: Iterable[ScheduleEntry] | None) -> tuple[ScheduledFloor, ...]:
    """``autoscaling.schedule`` entries (None: no schedule) as the floors the ScaledObject renders."""
    return tuple(ScheduledFloor(e.start, e.end, e.timezone, e.replicas) for e in entries or ())


def uses_keda(
    signal: ScalingSignal, schedule: tuple[ScheduledFloor, ...] = (), seasonal: bool = False
) -> bool:
    """Whether KEDA owns the HPA: any signal but GPU utilization, any schedule, or the seasonal
    triggers."""
    return signal is not ScalingSignal.GPU_UTILIZATION or bool(schedule) or seasonal


def hpa_name(signal: ScalingSignal, schedule: tuple[ScheduledFloor, ...] = (), seasonal: bool = False) -> str:
    """Name of the HPA that scales vLLM: ours, or the one KEDA creates for the ScaledObject."""
    return KEDA_HPA_NAME if uses_keda(signal, schedule, seasonal) else HPA_NAME


def seasonal_lead_s(startup_seconds: int) -> int:
    """How far ahead the seasonal triggers look, so that a replica asked for when the floor reads
    yesterday's rise is ready when today's comes: a replica's start-up on a new node (the plan's
    ``startup_seconds``) plus how late the floor can act on a rise, up to one step of the subquery
    (a rise shows at its next whole minute, promql.SEASONAL_STEP_S) and one HPA sync before the
    Deployment is scaled (HPA_SYNC_PERIOD_S); in whole minutes, the subquery's step."""
    step = promql.SEASONAL_STEP_S
    return math.ceil((startup_seconds + step + HPA_SYNC_PERIOD_S) / step) * step


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
    target_kv_cache_usage: float = 0.85
    target_concurrency: float = 1.0  # requests running or waiting per replica (concurrency_target)
    schedule: tuple[ScheduledFloor, ...] = field(default_factory=tuple)
    # autoscaling.seasonal: how far ahead (seconds, seasonal_lead_s) the seasonal triggers read
    # yesterday's and last week's demand; None without them.
    seasonal_lead_s: int | None = None

    @property
    def keda(self) -> bool:
        """Whether KEDA owns the HPA (uses_keda)."""
        return uses_keda(self.signal, self.schedule, self.seasonal_lead_s is not None)


def concurrency_target(share: float, max_num_seqs: int) -> float:
    """The concurrency trigger's per-replica threshold: ``autoscaling.targetConcurrencyShare`` of
    the plan's ``max_num_seqs`` (the most sequences vLLM runs at once), two decimals (KEDA parses
    the threshold as a float)."""
    return round(share * max_num_seqs, 2)


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


def _prometheus_trigger(spec: ScalingSpec, name: str, query: str, threshold: str) -> dict[str, Any]:
    """A KEDA prometheus trigger whose empty result is an error, not 0 (IGNORE_NULL_VALUES)."""
    return {
        "type": "prometheus",
        "name": name,
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": spec.prometheus_url,
            "query": query,
            "threshold": threshold,
            "ignoreNullValues": IGNORE_NULL_VALUES,
        },
    }


def fallback(spec: ScalingSpec) -> dict[str, Any]:
    """``spec.fallback``: what KEDA feeds the HPA once a trigger has failed
    FALLBACK_FAILURE_THRESHOLD times in a row: never fewer replicas than run now."""
    return {
        "failureThreshold": FALLBACK_FAILURE_THRESHOLD,
        "replicas": fallback_replicas(spec.min_replicas),
        "behavior": FALLBACK_BEHAVIOR,
    }


def cron_trigger(index: int, floor: ScheduledFloor) -> dict[str, Any]:
    """KEDA's cron scaler (keda 2.20.2 pkg/scalers/cron_scaler.go: metadata start, end, timezone,
    desiredReplicas): ``replicas`` between ``start`` and ``end``."""
    return {
        "type": "cron",
        "name": f"schedule-{index}",
        "metadata": {
            "timezone": floor.timezone,
            "start": floor.start,
            "end": floor.end,
            "desiredReplicas": str(floor.replicas),
        },
    }


def seasonal_triggers(spec: ScalingSpec) -> list[dict[str, Any]]:
    """``autoscaling.seasonal``: per period of SEASONAL_PERIODS_S, the demand one period ago over
    the next start-up (promql.seasonal_demand; with router-queue, counted at the router, since a
    service at zero replicas has no vLLM to count it), at the concurrency signal's per-replica target.
    The HPA takes the largest of its metrics, so each is a floor under the signal: it adds replicas
    ahead of hours that were busy then, and holds them even when today is quieter (a Saturday after
    a busy Friday, a holiday); above the floor the live signal rules."""
    if spec.seasonal_lead_s is None:
        return []
    return [
        _prometheus_trigger(
            spec,
            f"seasonal-{name}",
            promql.seasonal_demand(
                spec.scope, period, spec.seasonal_lead_s, at_router=spec.signal is ScalingSignal.ROUTER_QUEUE
            ),
            f"{spec.target_concurrency:g}",
        )
        for name, period in SEASONAL_PERIODS_S.items()
    ]


def scaled_object(spec: ScalingSpec) -> dict[str, Any]:
    """One KEDA ScaledObject (so one HPA): the signal's triggers (queue depth; queue depth and GPU
    for ``combined``; KV-cache usage; concurrency and KV-cache usage for ``concurrency``; GPU alone
    when only a schedule puts KEDA in charge) and one
    cron trigger per schedule floor. Trigger metadata values are strings, as KEDA's schema
    requires."""
    triggers: list[dict[str, Any]] = []
    if spec.signal in (ScalingSignal.QUEUE_DEPTH, ScalingSignal.COMBINED):
        queue = _prometheus_trigger(
            spec, "queue-depth", promql.queue_depth(spec.scope), str(spec.queue_depth_per_replica)
        )
        # From zero replicas, one waiting request is enough to start one.
        queue["metadata"]["activationThreshold"] = "0"
        triggers.append(queue)
    if spec.signal in (ScalingSignal.COMBINED, ScalingSignal.GPU_UTILIZATION):
        triggers.append(
            _prometheus_trigger(
                spec,
                "gpu-utilization",
                promql.gpu_utilization_total(spec.scope),
                str(spec.target_gpu_utilization),
            )
        )
    if spec.signal is ScalingSignal.CONCURRENCY:
        triggers.append(
            _prometheus_trigger(
                spec, "concurrency", promql.concurrency_total(spec.scope), f"{spec.target_concurrency:g}"
            )
        )
    if spec.signal is ScalingSignal.ROUTER_QUEUE:
        # Queued plus in-flight requests at the router, a replica's share of the plan's batch each;
        # from zero, one queued request activates the target (KEDA scales 0 -> 1 on activation).
        demand = _prometheus_trigger(
            spec, "router-queue", promql.router_demand(spec.namespace), f"{spec.target_concurrency:g}"
        )
        demand["metadata"]["activationThreshold"] = "0"
        triggers.append(demand)
    if spec.signal in (ScalingSignal.KV_CACHE, ScalingSignal.CONCURRENCY):
        # With concurrency too: where long outputs fill the KV cache before max_num_seqs sequences
        # run, the cache is the replica's capacity (docs/autoscaling-simulation.md).
        triggers.append(
            _prometheus_trigger(
                spec, "kv-cache", promql.kv_cache_usage_total(spec.scope), f"{spec.target_kv_cache_usage:g}"
            )
        )
    triggers += [cron_trigger(i, floor) for i, floor in enumerate(spec.schedule)]
    triggers += seasonal_triggers(spec)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": HPA_NAME, "namespace": spec.namespace, "labels": spec.labels},
        "spec": {
            "scaleTargetRef": spec.target.as_ref(),
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "pollingInterval": POLLING_INTERVAL_S,
            "cooldownPeriod": 600,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "name": KEDA_HPA_NAME,
                    "behavior": behavior(spec.startup_seconds),
                }
            },
            "triggers": triggers,
            # Every signal renders a prometheus trigger: KEDA refuses a fallback whose triggers
            # are all cpu or memory (apis/keda/v1alpha1 CheckFallbackValid).
            "fallback": fallback(spec),
        },
    }


def keda_values() -> dict[str, Any]:
    """KEDA chart values: its CRDs, and two replicas of the operator (the scalers and the metrics
    service run on the elected leader, the other waits to take over: keda v2.20.2
    GrpcServer.NeedLeaderElection) and of the metrics server (external.metrics.k8s.io), each on
    its own node with a budget of one (components/monitoring/availability.py). The admission
    webhooks stay at one: they check ScaledObjects when they are written, not scaling."""
    return {
        "crds": {"install": True},
        "operator": {"replicaCount": METRICS_PATH_REPLICAS},
        "metricsServer": {"replicaCount": METRICS_PATH_REPLICAS},
        # keda/values.yaml documents minAvailable/maxUnavailable under these only as comments; the
        # chart's templates/manager/poddisruptionbudget.yaml and metrics-server/poddisruptionbudget.yaml
        # read them (vendored in reference/upstream/helm-charts/keda-2.20.2/templates).
        "podDisruptionBudget": {
            "operator": {"maxUnavailable": MAX_UNAVAILABLE},
            "metricServer": {"maxUnavailable": MAX_UNAVAILABLE},
        },
        "topologySpreadConstraints": {
            "operator": spread_over_nodes(KEDA_OPERATOR_LABELS),
            "metricsServer": spread_over_nodes(KEDA_METRICS_SERVER_LABELS),
        },
        **keda_rbac_values(),
    }


# The resource KEDA must resize besides Deployments and StatefulSets (whose scale the chart always
# grants): a multi-node replica is a LeaderWorkerSet, which has a scale subresource. RBAC names
# resources by their plural, which the chart's template takes from `kind` as written.
KEDA_SCALED_REF_KINDS = ({"apiGroup": "leaderworkerset.x-k8s.io", "kind": "leaderworkersets"},)


def keda_rbac_values() -> dict[str, Any]:
    """What narrows the KEDA chart's RBAC (kedacore/charts v2.20.2, keda/values.yaml and
    templates/manager/clusterrole.yaml, minimal-rbac.yaml; facts in
    reference/upstream/chart-rbac-facts.json).

    By default the operator's ClusterRole grants ``list``/``watch`` on every Secret in the cluster
    (for TriggerAuthentications that read Secrets of their own namespace) and, through the default
    ``rbac.scaledRefKinds`` of ``apiGroup: "*"``, ``kind: "*"``, ``get`` on every resource of every
    API group, Secrets included, plus get/list/patch/update/watch on every ``*/scale``.

    - ``permissions.operator.restrict.secret: true`` drops the Secret rule from the ClusterRole and
      sets KEDA_RESTRICT_SECRET_ACCESS on the operator: it reads Secrets of its own namespace only
      (the chart's ``<operator>-certs`` Role there, which also holds its webhook certificates;
      keda v2.20.2 cmd/operator/main.go already watches Secrets of that namespace alone). Nothing
      here reads a Secret through KEDA: the ScaledObject's triggers are Prometheus queries and cron
      schedules without ``authenticationRef``, and no TriggerAuthentication is rendered
      (tests/rendered/test_chart_rbac.py checks both).
    - ``permissions.metricServer.restrict.secret: true``: the same restriction for the metrics
      server (templates/metrics-server/deployment.yaml; it has no Secret rule of its own).
    - ``rbac.scaledRefKinds``: the one custom kind this project scales, instead of ``*``.

    What stays: read on pods, services, configmaps, HPAs, Deployments; scale of Deployments and
    StatefulSets cluster-wide (the chart grants it unconditionally: KEDA is one per cluster and
    scales any namespace's workloads); writes on HPAs and Jobs it owns; the webhook's and metrics
    server's read rules (templates/webhooks/clusterrole.yaml, metrics-server/clusterrole.yaml)."""
    return {
        "permissions": {
            "operator": {"restrict": {"secret": True}},
            "metricServer": {"restrict": {"secret": True}},
        },
        "rbac": {"scaledRefKinds": [dict(kind) for kind in KEDA_SCALED_REF_KINDS]},
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
    keda: bool
    """Whether KEDA owns that HPA (a ScaledObject)."""

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Autoscaling", name, None, opts)
        spec = args.spec
        after = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        if not spec.keda:
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
                        keda_values(),
                        pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
                        create_namespace=True,
                    )
                )
            custom_resource(
                f"{name}-scaledobject",
                scaled_object(spec),
                pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *keda]),
            )
        self.keda = spec.keda
        self.hpa_name = KEDA_HPA_NAME if spec.keda else HPA_NAME
        self.register_outputs({"hpaName": self.hpa_name})
