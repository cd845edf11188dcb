"""Metrics: kube-prometheus-stack, NVIDIA dcgm-exporter on GPU nodes, vLLM scraping, the
prometheus-adapter rule behind the GPU-utilization HPA, alerts and Grafana dashboards.
Every query comes from the ``promql`` module."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from deepseek_eks import promql

from ..helm import helm_release
from ..manifests import custom_resource
from ..network_policies import (
    ClusterCidrs,
    monitoring_policies,
    network_policy_resources,
    node_monitoring_policies,
)
from ..platform.capacity import GpuPlacement
from ..serving import router
from ..versions import DCGM_EXPORTER, KUBE_PROMETHEUS_STACK, PROMETHEUS_ADAPTER
from .availability import MAX_UNAVAILABLE, METRICS_PATH_REPLICAS, spread_over_nodes
from .prometheus_names import PROMETHEUS_FULLNAME, PROMETHEUS_OBJECT, PROMETHEUS_PORT, prometheus_url

GRAFANA_SECRET = "grafana-admin"
# kube-state-metrics collectors left out: each would make its ClusterRole list and watch that
# resource in every namespace (see kube_prometheus_stack_values).
KSM_EXCLUDED_COLLECTORS = ("secrets", "configmaps")
DASHBOARD_LABEL = "grafana_dashboard"
ADAPTER_RELEASE = "prometheus-adapter"
# The adapter's pod selector labels (prometheus-adapter 5.3.0 templates/_helpers.tpl
# k8s-prometheus-adapter.selectorLabels: the chart name and the release name).
ADAPTER_LABELS = {
    "app.kubernetes.io/name": "prometheus-adapter",
    "app.kubernetes.io/instance": ADAPTER_RELEASE,
}

# Prometheus runs two replicas rather than one held in place with a budget or do-not-disrupt:
# - One replica that may not be evicted (a PodDisruptionBudget of minAvailable 1, or
#   karpenter.sh/do-not-disrupt) only blocks voluntary disruption: it pins its general node
#   (no consolidation, a drain that waits forever) and still goes with the node on a spot
#   interruption or a failure, and its successor waits for a new node and for its EBS volume
#   to move (the volume is zonal), minutes without any scaling decision.
# - Two replicas cost a second pod (500m CPU and 2 GiB requested: a quarter of an m7i.large,
#   about $0.025 an hour at its $0.1008 in us-east-1, sizing/data/stack_prices.json) and a second
#   gp3 volume of observability.prometheusStorageGib (each replica has its own claim), against
#   dollars an hour for every GPU node a wrong scaling decision keeps or drops.
#   prometheusSpec.podAntiAffinity "hard" puts them on different nodes, and the chart's
#   PodDisruptionBudget (minAvailable 1) lets a drain take one at a time.
# - What KEDA and the adapter see: both reach Prometheus through the kps-prometheus Service,
#   which selects every replica (chart-workloads.json services.prometheus), so each connection
#   lands on either. Both replicas scrape every target on their own, so they hold the same
#   series, sampled a scrape interval apart at most; the triggers read instant gauges, which
#   agree to that drift. A replica back from a restart keeps its volume and answers from its
#   own history, and while it has not yet scraped a vLLM pod the query is empty, an error that
#   holds the count (autoscaling.IGNORE_NULL_VALUES), never a 0.
PROMETHEUS_REPLICAS = METRICS_PATH_REPLICAS


@dataclass(frozen=True)
class ObservabilityOptions:
    retention: str
    storage_gib: int
    storage_class: str
    grafana: bool
    alertmanager: bool


def kube_prometheus_stack_values(
    opts: ObservabilityOptions, namespace: str, host_namespace: str
) -> dict[str, Any]:
    """Values for kube-prometheus-stack installed in ``namespace``: every ServiceMonitor,
    PodMonitor and PrometheusRule in the cluster is selected (the chart otherwise selects only its
    own release's); node-exporter, which needs the host's PID and network namespaces, goes to
    ``host_namespace`` so that ``namespace`` can enforce Pod Security ``baseline``."""
    open_selectors = {
        f"{kind}SelectorNilUsesHelmValues": False
        for kind in ("serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig")
    }
    # RBAC of this chart (kube-prometheus-stack 88.5.3; facts in chart-rbac-facts.json):
    # - prometheus-operator's ClusterRole (templates/prometheus-operator/clusterrole.yaml) grants
    #   every verb on Secrets, ConfigMaps and StatefulSets in every namespace: it reads the Secrets
    #   that monitors in any namespace reference (basic auth, TLS) and writes the configuration
    #   Secret of each Prometheus. No value narrows it: the template is unconditional once the
    #   operator is on, and prometheusOperator.namespaces only limits what it watches, not what its
    #   role allows. It cannot be dropped either: the operator is what runs Prometheus here.
    # - Prometheus' ClusterRole (templates/prometheus/clusterrole.yaml): get/list/watch on nodes,
    #   services, endpoints, pods and ingresses (service discovery in every namespace, since the
    #   selectors above are open), no Secrets; nothing to narrow without losing the vLLM, KEDA and
    #   dcgm-exporter monitors of other namespaces.
    # - The admission webhook's patch Job: get/update on the operator's two webhook
    #   configurations, and Secrets of the monitoring namespace only (job-patch/role.yaml).
    # - Grafana and kube-state-metrics: narrowed below (rbac.namespaced, collectorsExclude).
    return {
        "fullnameOverride": PROMETHEUS_FULLNAME,
        "prometheus": {
            "prometheusSpec": {
                **open_selectors,
                "retention": opts.retention,
                "replicas": PROMETHEUS_REPLICAS,
                "podAntiAffinity": "hard",  # required anti-affinity on kubernetes.io/hostname
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": opts.storage_class,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{opts.storage_gib}Gi"}},
                        }
                    }
                },
            },
            # The chart's budget for the Prometheus pods (kube-prometheus-stack 88.5.3
            # templates/prometheus/podDisruptionBudget.yaml; off by default).
            "podDisruptionBudget": {"enabled": True, "minAvailable": PROMETHEUS_REPLICAS - MAX_UNAVAILABLE},
        },
        "alertmanager": {"enabled": opts.alertmanager},
        "grafana": {
            "enabled": opts.grafana,
            "admin": {
                "existingSecret": GRAFANA_SECRET,
                "userKey": "admin-user",
                "passwordKey": "admin-password",
            },
            # Namespaced RBAC: grafana 12.11.1's templates/role.yaml then grants the sidecars
            # get/list/watch on ConfigMaps and Secrets in its own namespace only, and
            # templates/clusterrole.yaml renders no ClusterRole (no cluster-wide Secret read).
            # The dashboards sidecar must then watch only that namespace: kube-prometheus-stack
            # sets searchNamespace ALL, which the sidecar could not list with a Role.
            "rbac": {"namespaced": True},
            "sidecar": {
                "dashboards": {"enabled": True, "label": DASHBOARD_LABEL, "searchNamespace": [namespace]}
            },
        },
        # kube-state-metrics 8.4.0 templates/role.yaml grants list/watch on each resource of its
        # collectors, cluster-wide: by default that includes every Secret and ConfigMap of the
        # cluster (their full contents come with a list). `collectorsExclude` removes them from the
        # collectors and so from the ClusterRole; no dashboard, alert or query here reads
        # kube_secret_* or kube_configmap_* (kube-prometheus-stack 88.5.3's rules do not either).
        "kube-state-metrics": {"collectorsExclude": list(KSM_EXCLUDED_COLLECTORS)},
        # kube-prometheus-stack 88.5.3 values.yaml: prometheus-node-exporter.namespaceOverride.
        "prometheus-node-exporter": {"namespaceOverride": host_namespace},
        # No prometheus-node-exporter tolerations: the sub-chart's default (values.yaml of
        # prometheus-node-exporter 4.56.1) tolerates every NoSchedule taint, the GPU nodes' and the
        # system nodes' CriticalAddonsOnly alike; a list of ours would replace it, not add to it.
    }


# The chart's metrics ConfigMap (templates/metrics-configmap.yaml of chart 4.8.2: always rendered,
# key ``metrics``) mounted as a directory at a path the image does not have, and the exporter
# pointed at the file in it with ``-f`` (pkg/cmd/app.go: the collectors flag). The chart's default
# instead mounts the key with subPath over /etc/dcgm-exporter/default-counters.csv, a file the
# image ships, which runc refuses on SELinux-enforcing nodes such as EKS Auto Mode's
# (NVIDIA/dcgm-exporter#613; facts in reference/upstream/dcgm-exporter-4.8.2-image.json).
DCGM_COUNTERS_DIR = "/etc/dcgm-exporter-counters"
DCGM_COUNTERS_FILE = "counters.csv"


def dcgm_counters_mount() -> dict[str, Any]:
    """dcgm-exporter values that give it the chart's counters list without mounting over a file."""
    volume = "exporter-metrics-volume"
    return {
        "arguments": ["-f", f"{DCGM_COUNTERS_DIR}/{DCGM_COUNTERS_FILE}"],
        "extraConfigMapVolumes": [
            {
                "name": volume,
                "configMap": {
                    "name": "exporter-metrics-config-map",
                    "items": [{"key": "metrics", "path": DCGM_COUNTERS_FILE}],
                },
            }
        ],
        "extraVolumeMounts": [{"name": volume, "mountPath": DCGM_COUNTERS_DIR, "readOnly": True}],
    }


def dcgm_exporter_values(placement: GpuPlacement) -> dict[str, Any]:
    """dcgm-exporter on every NVIDIA GPU node of the cluster, not only this service's: it is a
    shared add-on, and the other services' GPU metrics (dashboards, the gpu-utilization HPA) come
    from it too. ``honorLabels: false`` on purpose: the GPU's workload pod then arrives as
    exported_pod/exported_namespace, which is what promql and the adapter use, and it stays true
    even where Prometheus sets overrideHonorLabels."""
    return {
        "nodeSelector": dict(placement.any_gpu_node_selector),
        "tolerations": [dict(t) for t in placement.tolerations],
        **dcgm_counters_mount(),
        "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": False},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        # dcgm-exporter 4.8.2 RBAC: a Role that may get its own metrics ConfigMap by name
        # (templates/role.yaml), and a ClusterRole reading every pod (templates/clusterrole.yaml)
        # only when pod labels or UIDs go into the metrics. Off (the chart's defaults, stated):
        # the workload pod arrives as exported_pod/exported_namespace from the kubelet's pod
        # resources API, without reading the API server.
        "kubernetes": {"enablePodLabels": False, "enablePodUID": False},
    }


def adapter_values(scope: promql.Scope, namespace: str) -> dict[str, Any]:
    """prometheus-adapter serving custom.metrics.k8s.io only: no default rules, no resource
    metrics, and no external metrics (KEDA owns external.metrics.k8s.io). Two replicas on
    different nodes with a budget of one (availability.py): the gpu-utilization HPA's metric
    survives a drain or a lost node."""
    # RBAC of prometheus-adapter 5.3.0 (templates/*cluster-role*.yaml): `rules.external: []` renders
    # no external-metrics ClusterRole, and no `rules.resource` none for resource metrics (pods,
    # nodes, nodes/stats). What stays cannot be narrowed by a value: the resource-reader
    # ClusterRole (get/list/watch on namespaces, pods, services and ConfigMaps in every namespace,
    # to map series to objects; no Secrets) and the server-resources one (custom.metrics.k8s.io,
    # the read-only API the adapter itself serves), both unconditional under rbac.create.
    return {
        "replicas": METRICS_PATH_REPLICAS,
        # The chart's defaults leave minAvailable unset and maxUnavailable 1 (templates/pdb.yaml
        # writes each that is set; policy/v1 refuses both), so only maxUnavailable is given.
        "podDisruptionBudget": {"enabled": True, "maxUnavailable": MAX_UNAVAILABLE},
        "topologySpreadConstraints": spread_over_nodes(ADAPTER_LABELS),
        "prometheus": {
            "url": f"http://{PROMETHEUS_OBJECT}.{namespace}.svc",
            "port": PROMETHEUS_PORT,
        },
        "rules": {
            "default": False,
            "custom": [promql.gpu_utilization_adapter_rule(scope).as_values()],
            "external": [],
        },
    }


def vllm_pod_monitor(scope: promql.Scope, labels: dict[str, str]) -> dict[str, Any]:
    """Scrape vLLM's /metrics on its API port (metrics need no API key)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": "vllm", "namespace": scope.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
            "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "15s"}],
        },
    }


def prometheus_rule(
    scope: promql.Scope, slo: promql.Slo, hpa_name: str, labels: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "vllm", "namespace": scope.namespace, "labels": labels},
        "spec": {
            "groups": [
                {
                    "name": "deepseek-vllm",
                    "rules": [a.as_rule() for a in promql.alerts(scope, slo, hpa_name)],
                }
            ]
        },
    }


def dashboard(board: promql.Dashboard) -> dict[str, Any]:
    """A Grafana dashboard of time-series panels, two per row, on the default Prometheus, with its
    variables (the service's namespace and served model) at the top."""
    return {
        "title": board.title,
        "uid": board.uid,
        "schemaVersion": 39,
        "templating": {
            "list": [
                {
                    "type": "query",
                    "name": v.name,
                    "label": v.label,
                    "query": v.grafana_query(),
                    "definition": v.grafana_query(),
                    "refresh": 2,  # on time-range change: a service added later shows up
                    "sort": 1,
                    "multi": False,
                    "includeAll": False,
                }
                for v in board.variables
            ]
        },
        "time": {"from": "now-3h", "to": "now"},
        "refresh": "30s",
        "panels": [
            {
                "id": i + 1,
                "type": "timeseries",
                "title": name,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "targets": [{"refId": "A", "expr": expr}],
            }
            for i, (name, expr) in enumerate(board.panels.items())
        ],
    }


@dataclass
class ObservabilityInputs:
    """Inputs of ``Observability``."""

    namespace: str
    """Namespace of Prometheus, Grafana and the adapter (Pod Security ``baseline``)."""
    host_namespace: str
    """Namespace of the exporters that need host access, node-exporter and dcgm-exporter (Pod
    Security ``privileged``)."""
    scope: promql.Scope
    """The vLLM deployment the monitors, rules and dashboards are about."""
    slo: promql.Slo
    """Alert thresholds."""
    hpa_name: str
    """Name of the HPA (ours or KEDA's) that scales vLLM, for the replicas-at-max alert."""
    options: ObservabilityOptions
    """Retention, storage, Grafana and Alertmanager switches."""
    placement: GpuPlacement
    """GPU node selector and tolerations (dcgm-exporter)."""
    labels: dict[str, str]
    """Labels on every object."""
    cluster_cidrs: pulumi.Input[ClusterCidrs]
    """The VPC's CIDR blocks (where the API server's interfaces and the nodes are) and the service
    CIDR (network policies)."""
    metrics_clients: list[str] = field(default_factory=list)
    """Namespaces whose pods query Prometheus (KEDA's, with a Prometheus trigger)."""
    grafana_admin_password: pulumi.Input[str] | None = None
    """Grafana admin password (a secret); generated when not given."""
    depends_on: list[pulumi.Resource] | None = None
    routed: bool = False
    """llm-d's router runs in front of vLLM (routing.kind llm-d): scrape it, alert on it, and add
    its dashboard."""
    shared: bool = True
    """Install the cluster's monitoring stack too (one service per cluster does); without it, only
    this service's PodMonitor and alert rules, picked up by the stack another service installed."""
    """Resources to wait for (namespaces, capacity)."""


class Observability(pulumi.ComponentResource):
    """Prometheus and friends, wired to the GPU and vLLM metrics the autoscaler needs."""

    prometheus_url: str
    """In-cluster Prometheus URL."""
    grafana_admin_password: pulumi.Output[str]
    """Grafana's admin password (secret)."""

    def __init__(self, name: str, args: ObservabilityInputs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Observability", name, None, opts)
        deps = list(args.depends_on or [])
        after = pulumi.ResourceOptions(parent=self, depends_on=deps)
        self.prometheus_url = prometheus_url(args.namespace)
        if not args.shared:
            self.grafana_admin_password = pulumi.Output.secret("")  # the stack's owner has it
            self._service_monitoring(name, args, after)
            self.register_outputs({"prometheusUrl": self.prometheus_url})
            return
        password: pulumi.Input[str]
        if args.grafana_admin_password is not None:
            password = args.grafana_admin_password
        else:
            password = random.RandomPassword(
                f"{name}-grafana-admin", length=32, special=False, opts=pulumi.ResourceOptions(parent=self)
            ).result
        self.grafana_admin_password = pulumi.Output.secret(password)
        admin = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata={"name": GRAFANA_SECRET, "namespace": args.namespace, "labels": args.labels},
            type="Opaque",
            string_data={"admin-user": "admin", "admin-password": self.grafana_admin_password},
            opts=after,
        )
        stack = helm_release(
            f"{name}-kube-prometheus-stack",
            "kube-prometheus-stack",
            KUBE_PROMETHEUS_STACK,
            args.namespace,
            kube_prometheus_stack_values(args.options, args.namespace, args.host_namespace),
            pulumi.ResourceOptions(parent=self, depends_on=[*deps, admin, *args.placement.depends_on]),
        )
        crds_ready = pulumi.ResourceOptions(parent=self, depends_on=[*deps, stack])
        self._network_policies(name, args, after)
        self._service_monitoring(name, args, crds_ready)
        helm_release(
            f"{name}-dcgm-exporter",
            "dcgm-exporter",
            DCGM_EXPORTER,
            args.host_namespace,
            dcgm_exporter_values(args.placement),
            crds_ready,
        )
        helm_release(
            f"{name}-prometheus-adapter",
            ADAPTER_RELEASE,
            PROMETHEUS_ADAPTER,
            args.namespace,
            adapter_values(args.scope, args.namespace),
            crds_ready,
        )
        if args.options.grafana:
            # Cluster-wide, like the rest of the shared add-ons: Grafana variables pick the service.
            for board in promql.dashboards(router=args.routed):
                uid = board.uid
                k8s.core.v1.ConfigMap(
                    f"{name}-{uid}",
                    metadata={
                        "name": f"{uid}-dashboard",
                        "namespace": args.namespace,
                        "labels": {**args.labels, DASHBOARD_LABEL: "1"},
                    },
                    data={f"{uid}.json": json.dumps(dashboard(board), indent=2, sort_keys=True)},
                    opts=after,
                )
        self.register_outputs({"prometheusUrl": self.prometheus_url})

    def _network_policies(self, name: str, args: ObservabilityInputs, opts: pulumi.ResourceOptions) -> None:
        """Both monitoring namespaces closed by default and opened for their workloads alone."""

        def build(cidrs: ClusterCidrs) -> list[dict[str, Any]]:
            return [
                *monitoring_policies(
                    args.namespace, cidrs=cidrs, labels=args.labels, metrics_clients=args.metrics_clients
                ),
                *node_monitoring_policies(
                    args.host_namespace, monitoring_namespace=args.namespace, labels=args.labels
                ),
            ]

        network_policy_resources(name, build, args.cluster_cidrs, opts)

    def _service_monitoring(self, name: str, args: ObservabilityInputs, opts: pulumi.ResourceOptions) -> None:
        """What belongs to this service alone: vLLM scraping and its alert rules, in its namespace;
        with the router, its scraping and alert rules too."""
        for kind, manifest in (
            ("podmonitor", vllm_pod_monitor(args.scope, args.labels)),
            ("rules", prometheus_rule(args.scope, args.slo, args.hpa_name, args.labels)),
        ):
            custom_resource(f"{name}-vllm-{kind}", manifest, opts)
        if args.routed:
            namespace = args.scope.namespace
            for kind, manifest in (
                ("podmonitor", router.pod_monitor(namespace, args.labels)),
                ("rules", router.prometheus_rule(namespace, args.labels)),
            ):
                custom_resource(f"{name}-router-{kind}", manifest, opts)
