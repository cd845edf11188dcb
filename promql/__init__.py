"""Metric names and PromQL builders: the one place adapter rules, KEDA triggers, alerts and
dashboards take their queries from, so a metric rename is a one-line change.

Pure: no Pulumi import. Every query built here is executed by real Prometheus (``promtool test
rules``) in tests/promql over series shaped like dcgm-exporter and vLLM output.

Label conventions (see the project's reference metrics notes):
- vLLM series carry ``model_name`` (the served model name) and, after the PodMonitor scrape,
  the target labels ``namespace``, ``pod``, ``container``.
- dcgm-exporter is scraped with ``honorLabels: false`` (the chart's and Prometheus' default, and
  what ``overrideHonorLabels`` enforces), so the GPU's *workload* pod arrives as
  ``exported_pod`` / ``exported_namespace`` / ``exported_container``, while ``pod`` /
  ``namespace`` name the exporter itself. The adapter rule maps ``exported_*`` to resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# vLLM (V1 engine, names current since 0.10.2; vllm:gpu_cache_usage_perc is gone in 0.12).
VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_RUNNING = "vllm:num_requests_running"
VLLM_KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"  # 0..1
VLLM_TTFT = "vllm:time_to_first_token_seconds"  # histogram
VLLM_ITL = "vllm:inter_token_latency_seconds"  # histogram
VLLM_QUEUE_TIME = "vllm:request_queue_time_seconds"  # histogram
VLLM_E2E_LATENCY = "vllm:e2e_request_latency_seconds"  # histogram
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"  # counter
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"  # counter
VLLM_PROMPT_TOKENS_CACHED = (
    "vllm:prompt_tokens_cached_total"  # counter: prompt tokens the prefix cache served
)
VLLM_PREEMPTIONS = "vllm:num_preemptions_total"  # counter

# llm-d's router (the Gateway API Inference Extension endpoint picker, v1.5.0 pkg/epp/metrics/metrics.go;
# facts: reference/upstream/llm-d/router-facts.json). No Namespace: the name is <subsystem>_<name>.
ROUTER_QUEUE = "inference_extension_flow_control_queue_size"  # gauge: requests held in its queue
ROUTER_RUNNING = "inference_objective_running_requests"  # gauge: requests it has in flight
ROUTER_INFO = "inference_extension_info"  # set to 1 at start-up (cmd/epp/runner/runner.go)
# Time from enqueue to outcome, by ``outcome`` (types/outcomes.go: "EvictedTTL" when the queue
# timeout passed, which the client gets as 503), and how saturated the pool is (0-1).
ROUTER_QUEUE_DURATION = "inference_extension_flow_control_request_queue_duration_seconds"
ROUTER_SATURATION = "inference_extension_flow_control_pool_saturation"
ROUTER_TIMED_OUT = "EvictedTTL"

# dcgm-exporter default counters.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent, 0..100
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
DCGM_GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # 0..1
DCGM_TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"  # 0..1
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"  # last XID error code, 0 when none

# kube-state-metrics (bundled with kube-prometheus-stack).
KSM_HPA_CURRENT = "kube_horizontalpodautoscaler_status_current_replicas"
KSM_HPA_MAX = "kube_horizontalpodautoscaler_spec_max_replicas"
# 0 while KEDA holds the target at zero: the HPA controller sets desiredReplicas 0 when the target
# has no replica and minReplicas is not 0 ("ScalingDisabled", k8s.io/kubernetes v1.34.12
# pkg/controller/podautoscaler/horizontal.go, reference/upstream/metrics-path-facts.json).
KSM_HPA_DESIRED = "kube_horizontalpodautoscaler_status_desired_replicas"

# NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), column
# "Resolution Bucket (Immediate Action)": the codes whose action is a GPU reset or a restart of its
# machine, and those whose action is an application restart. Vendored with each code's action in
# reference/upstream/nvidia-xid-catalog.json, which the tests read.
XID_RESET_ACTIONS = ("RESET_GPU", "RESTART_BM", "RESTART_VM")
XID_RESET_CODES = (46, 62, 64, 79, 95, 109, 110, 119, 120, 136, 140, 143, 151, 155, 156, 158)
XID_APP_ACTIONS = ("RESTART_APP",)
XID_APP_CODES = (
    8, 11, 13, 25, 31, 32, 39, 40, 41, 60, 68, 69, 70, 71, 72, 75, 76, 77, 80, 82, 83, 84, 85, 86,
    88, 89, 94, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 126, 127, 128, 129, 130, 131, 132,
    133, 134, 135, 139,
)  # fmt: skip
XID_WINDOW = "10m"
"""How long an XID alert fires after the GPU's last XID changed (the gauge never resets)."""

# The custom metric the adapter serves per vLLM pod, and what the HPA targets.
ADAPTER_GPU_METRIC = "vllm_gpu_utilization_percent"


@dataclass(frozen=True)
class Scope:
    """Which vLLM deployment a query is about."""

    namespace: str
    """Namespace of the vLLM pods."""
    model_name: str
    """vLLM's ``model_name`` label: the served model name."""
    container: str = "vllm"
    """Container name of the vLLM server (dcgm-exporter's ``exported_container``)."""


def vllm_selector(scope: Scope) -> str:
    return f'namespace="{scope.namespace}",model_name="{scope.model_name}"'


def gpu_selector(scope: Scope) -> str:
    """GPUs held by the vLLM containers (workload labels renamed by honorLabels: false)."""
    return f'exported_namespace="{scope.namespace}",exported_container="{scope.container}"'


# ---- autoscaling -------------------------------------------------------------------------------


def vllm_targets(scope: Scope) -> str:
    """Prometheus' ``up`` series of the vLLM pods it scrapes: one per pod the PodMonitor found,
    1 or 0 (prometheus-operator labels a PodMonitor target with its namespace and container;
    Prometheus writes ``up`` on every scrape, failed or not: reference/upstream/metrics-path-facts.json
    ``prometheus_operator``)."""
    return f'up{{namespace="{scope.namespace}",container="{scope.container}"}}'


def zero_without_targets(scope: Scope) -> str:
    """0 while Prometheus has no vLLM target at all (no pod: scaled to zero, or none placed yet),
    and nothing otherwise. A KEDA query ends with ``or`` this, so that it reads 0 only when there
    is truly nothing to measure; pods that exist but report nothing (a replica still loading, a
    failing scrape, a Prometheus that lost its targets) leave the result empty, which KEDA, with
    ``ignoreNullValues: "false"``, reports as an error instead of a 0 that would scale in."""
    return f"(vector(0) unless on() {vllm_targets(scope)})"


def queue_depth(scope: Scope) -> str:
    """All requests waiting in this deployment's queues, one element; 0 with no vLLM pod, empty
    when pods exist but none reports (see :func:`zero_without_targets`)."""
    return f"sum({VLLM_WAITING}{{{vllm_selector(scope)}}}) or {zero_without_targets(scope)}"


def gpu_utilization_total(scope: Scope) -> str:
    """Sum over vLLM pods of each pod's mean GPU utilization (percent). KEDA divides by the
    per-replica target, so a target of 50 keeps the average pod near 50 %. 0 with no vLLM pod,
    empty when pods exist but no GPU series does."""
    per_pod = f"avg by (exported_namespace, exported_pod) ({DCGM_GPU_UTIL}{{{gpu_selector(scope)}}})"
    return f"sum({per_pod}) or {zero_without_targets(scope)}"


def kv_cache_usage_total(scope: Scope) -> str:
    """Sum over vLLM pods of each pod's KV-cache usage (0-1; the mean over a pod's engines). KEDA
    divides by the per-replica target (e.g. 0.85), so the average pod stays below it. 0 with no
    vLLM pod, empty when pods exist but none reports."""
    per_pod = f"avg by (namespace, pod) ({VLLM_KV_CACHE_USAGE}{{{vllm_selector(scope)}}})"
    return f"sum({per_pod}) or {zero_without_targets(scope)}"


def concurrency_total(scope: Scope) -> str:
    """All requests the deployment's vLLM pods are running or holding in their queues: the load
    they carry (Little's law: arrival rate x time in the server), one element; 0 with no vLLM
    pod, empty when pods exist but none reports. KEDA divides by the per-replica target, a share
    of max_num_seqs. One selector over both names, so a pod missing either series still counts
    what it has (``sum(a) + sum(b)`` would be empty, an error for KEDA)."""
    names = f'__name__=~"{VLLM_RUNNING}|{VLLM_WAITING}"'
    return f"sum({{{names},{vllm_selector(scope)}}}) or {zero_without_targets(scope)}"


# The step of the seasonal subquery: vLLM is scraped more often than this, and a start-up is
# minutes, so a minute's resolution keeps a peak of a minute or more.
SEASONAL_STEP_S = 60
SEASONAL_STEP = f"{SEASONAL_STEP_S // 60}m"


def seasonal_demand(scope: Scope, period_s: int, lead_s: int, at_router: bool = False) -> str:
    """The most requests the deployment ran or queued at any minute of the window that began one
    ``period_s`` ago and lasted ``lead_s`` (a start-up): what this time yesterday (or last week)
    asked for up to the moment a replica started now would be ready. KEDA divides it by the
    per-replica concurrency target, so the service holds, ahead of time, what the same hours
    needed then. 0 when Prometheus holds nothing from then (a service younger than the period,
    or data past retention): no history keeps no floor, and is no error.

    ``at_router``: counted in front of vLLM, the router's queue and in-flight requests
    (``router_demand``), for a service that may scale to zero: while no replica ran, the demand
    waited at the router, and vLLM's gauges had no series to read."""
    if not 0 < lead_s < period_s:
        raise ValueError(
            f"the seasonal lead ({lead_s} s) must be positive and shorter than its period ({period_s} s)"
        )
    if at_router:
        demand = f'sum({{__name__=~"{ROUTER_QUEUE}|{ROUTER_RUNNING}",namespace="{scope.namespace}"}})'
    else:
        demand = f'sum({{__name__=~"{VLLM_RUNNING}|{VLLM_WAITING}",{vllm_selector(scope)}}})'
    # The offset ends the window lead_s past the same moment one period ago (Prometheus evaluates
    # a subquery over [t - offset - range, t - offset]).
    return f"max_over_time({demand}[{lead_s}s:{SEASONAL_STEP}] offset {period_s - lead_s}s) or vector(0)"


_SEASONAL_WINDOW = re.compile(r"\[(\d+)s:" + SEASONAL_STEP + r"\] offset (\d+)s\)")


def seasonal_window(query: str) -> tuple[int, int] | None:
    """``(period_s, lead_s)`` of a query :func:`seasonal_demand` built, or None for any other: how
    a reader of the rendered trigger (the simulator) learns the window without our settings."""
    found = _SEASONAL_WINDOW.search(query)
    if found is None:
        return None
    lead, offset = int(found[1]), int(found[2])
    return offset + lead, lead


def router_demand(namespace: str) -> str:
    """Requests the router holds in its queue plus those it has in flight, one element: the load
    on the service measured in front of vLLM, so it has a value while no replica runs (the
    router-queue signal). Both gauges appear only once a request has passed (their series are made
    on first use), so the router's info series, set when it starts, stands in as 0; empty while
    Prometheus has no router to read, which KEDA (``ignoreNullValues: "false"``) takes as an error
    that holds the replicas rather than a 0 that would scale them in."""
    names = f'__name__=~"{ROUTER_QUEUE}|{ROUTER_RUNNING}"'
    selector = f'namespace="{namespace}"'
    return f"sum({{{names},{selector}}}) or on() (0 * sum({ROUTER_INFO}{{{selector}}}))"


@dataclass(frozen=True)
class AdapterRule:
    """A prometheus-adapter custom-metrics rule (``rules.custom[]`` in the chart)."""

    series_query: str
    overrides: dict[str, str]
    name_matches: str
    name_as: str
    metrics_query: str

    def as_values(self) -> dict:
        return {
            "seriesQuery": self.series_query,
            "resources": {"overrides": {label: {"resource": r} for label, r in self.overrides.items()}},
            "name": {"matches": self.name_matches, "as": self.name_as},
            "metricsQuery": self.metrics_query,
        }


def gpu_utilization_adapter_rule(scope: Scope) -> AdapterRule:
    """Per-pod GPU utilization (0-100, mean over the pod's GPUs) as a Pods metric for the HPA."""
    return AdapterRule(
        series_query=f'{DCGM_GPU_UTIL}{{exported_namespace!="",exported_pod!="",exported_container="{scope.container}"}}',
        overrides={"exported_namespace": "namespace", "exported_pod": "pod"},
        name_matches=f"^{DCGM_GPU_UTIL}$",
        name_as=ADAPTER_GPU_METRIC,
        metrics_query=(
            f"avg by (<<.GroupBy>>) "
            f'({DCGM_GPU_UTIL}{{<<.LabelMatchers>>,exported_container="{scope.container}"}})'
        ),
    )


def expand_adapter_query(rule: AdapterRule, namespace: str, pods: list[str]) -> str:
    """The query prometheus-adapter sends for a Pods metric of ``pods`` in ``namespace``.

    The adapter fills ``<<.LabelMatchers>>`` with the series labels mapped to the namespace and
    pod resources (an equality for the namespace, a regex alternation of the pod names) and
    ``<<.GroupBy>>`` with the pod label.
    """
    label_for = {resource: label for label, resource in rule.overrides.items()}
    matchers = f'{label_for["namespace"]}="{namespace}",{label_for["pod"]}=~"{"|".join(pods)}"'
    return rule.metrics_query.replace("<<.LabelMatchers>>", matchers).replace(
        "<<.GroupBy>>", label_for["pod"]
    )


# ---- alerts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slo:
    """Alert thresholds (stack settings ``observability.*``)."""

    ttft_p95_seconds: float = 5.0
    itl_p95_seconds: float = 0.15
    queue_time_p95_seconds: float = 30.0
    kv_cache_usage: float = 0.95


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str

    def as_rule(self) -> dict[str, object]:
        """The alert as a rule of a PrometheusRule group."""
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary},
        }


def p95(histogram: str, selector: str, window: str = "5m") -> str:
    return f"histogram_quantile(0.95, sum by (le) (rate({histogram}_bucket{{{selector}}}[{window}])))"


def xid_changed(scope: Scope, codes: tuple[int, ...], window: str = XID_WINDOW) -> str:
    """The vLLM GPUs whose last XID changed within ``window`` to one of ``codes``.

    DCGM_FI_DEV_XID_ERRORS holds the GPU's last XID until dcgm-exporter restarts
    (NVIDIA/dcgm-exporter#500), so "> 0" would fire for as long, and for every later pod on that
    GPU. The exporter puts the code in an ``err_code`` label too, so each new XID is a new series:
    the change is measured on the per-GPU value (``Hostname``, ``gpu``), with the exporter pod, the
    workload pod and the code aggregated away. A GPU whose series appears with an old XID (a new
    pod on it, an exporter restart) has no change and stays quiet; a change back to 0 (exporter
    restart) is in no class."""
    sel = gpu_selector(scope)
    matching = "|".join(str(code) for code in codes)
    current = (
        f"max by (Hostname, gpu, exported_pod, err_code, err_msg) "
        f'({DCGM_XID}{{{sel},err_code=~"{matching}"}})'
    )
    per_gpu = f"max by (Hostname, gpu) ({DCGM_XID}{{{sel}}})"
    # A change shows in a subquery that holds the minute before it and the minute of it. Prometheus 3
    # (what the pinned chart runs) leaves a range's start out (promql/engine.go at v0.314.0), so the
    # range is a step longer than the alert's time: it fires for ``window`` after the change.
    minutes = int(window.removesuffix("m")) + 1
    return f"{current} and on (Hostname, gpu) (changes(({per_gpu})[{minutes}m:1m]) > 0)"


def vllm_not_scraped(scope: Scope, hpa_name: str) -> str:
    """No vLLM pod is scraped, although the autoscaler wants replicas: ``up`` is 0 for every target
    or there is none, unless the HPA (ours or KEDA's) reports 0 desired replicas, an intended
    scale to zero (``minReplicas 0``). Without the HPA series (kube-state-metrics gone) it fires."""
    targets = vllm_targets(scope)
    desired = f'{KSM_HPA_DESIRED}{{namespace="{scope.namespace}",horizontalpodautoscaler="{hpa_name}"}}'
    return f"(sum({targets}) == 0 or absent({targets})) unless on () ({desired} == 0)"


def replicas_at_max_over_slo(scope: Scope, slo: Slo, hpa_name: str) -> str:
    """At ``maxReplicas`` while the p95 queue time or time to first token is over its SLO: more
    replicas would help and the autoscaler may not add them. At max alone is the normal state of
    a busy stack (the autoscaling simulator keeps dev at its maximum nearly all day, within the
    SLO), not something to act on."""
    hpa = f'namespace="{scope.namespace}",horizontalpodautoscaler="{hpa_name}"'
    sel = vllm_selector(scope)
    over_slo = (
        f"{p95(VLLM_QUEUE_TIME, sel)} > {slo.queue_time_p95_seconds}"
        f" or {p95(VLLM_TTFT, sel)} > {slo.ttft_p95_seconds}"
    )
    return f"({KSM_HPA_CURRENT}{{{hpa}}} >= {KSM_HPA_MAX}{{{hpa}}}) and on () ({over_slo})"


def alerts(scope: Scope, slo: Slo, hpa_name: str) -> list[Alert]:
    sel = vllm_selector(scope)
    return [
        Alert(
            "VllmKvCacheNearlyFull",
            f"max by (namespace, pod) ({VLLM_KV_CACHE_USAGE}{{{sel}}}) > {slo.kv_cache_usage}",
            "10m",
            "warning",
            "vLLM KV cache above {{ $value | humanizePercentage }} on {{ $labels.pod }}: "
            "requests are being preempted",
        ),
        Alert(
            "VllmRequestsWaitingTooLong",
            f"{p95(VLLM_QUEUE_TIME, sel)} > {slo.queue_time_p95_seconds}",
            "10m",
            "warning",
            "p95 queue time {{ $value | humanizeDuration }}: add replicas or raise autoscaling.maxReplicas",
        ),
        Alert(
            "VllmTimeToFirstTokenHigh",
            f"{p95(VLLM_TTFT, sel)} > {slo.ttft_p95_seconds}",
            "10m",
            "warning",
            "p95 time to first token {{ $value | humanizeDuration }} is above the SLO",
        ),
        Alert(
            "VllmInterTokenLatencyHigh",
            f"{p95(VLLM_ITL, sel)} > {slo.itl_p95_seconds}",
            "10m",
            "warning",
            "p95 inter-token latency {{ $value | humanizeDuration }} is above the SLO",
        ),
        Alert(
            "GpuXidError",
            xid_changed(scope, XID_RESET_CODES),
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} (pod {{ $labels.exported_pod }}) reported "
            "XID {{ $labels.err_code }} ({{ $labels.err_msg }}): NVIDIA's immediate action is a GPU "
            "reset or a restart of the machine; drain the node so that it is replaced",
        ),
        Alert(
            "GpuXidApplicationError",
            xid_changed(scope, XID_APP_CODES),
            "0m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} (pod {{ $labels.exported_pod }}) reported "
            "XID {{ $labels.err_code }} ({{ $labels.err_msg }}): NVIDIA's immediate action is to "
            "restart the application; check that the vLLM container restarted",
        ),
        Alert(
            "VllmReplicasAtMax",
            replicas_at_max_over_slo(scope, slo, hpa_name),
            "15m",
            "warning",
            "vLLM has run at autoscaling.maxReplicas for 15 minutes with p95 queue time or time to "
            "first token above the SLO: raise autoscaling.maxReplicas",
        ),
        Alert(
            "VllmNoTargetsUp",
            vllm_not_scraped(scope, hpa_name),
            "5m",
            "critical",
            "No vLLM pod is being scraped: the endpoint is down or metrics are lost",
        ),
    ]


def router_alerts(namespace: str) -> list[Alert]:
    """llm-d's router (routing.kind llm-d): down, or answering 503 to requests its queue held past
    the timeout."""
    sel = f'namespace="{namespace}"'
    return [
        Alert(
            "LlmdRouterDown",
            f"absent({ROUTER_INFO}{{{sel}}})",
            "5m",
            "critical",
            "llm-d's router serves no metrics: requests through the load balancer are failing",
        ),
        Alert(
            "LlmdRouterQueueTimeouts",
            f'sum(increase({ROUTER_QUEUE_DURATION}_count{{{sel},outcome="{ROUTER_TIMED_OUT}"}}[10m])) > 0',
            "0m",
            "warning",
            "{{ $value | humanize }} request(s) got 503 after waiting in the router's queue past its "
            "timeout in 10 minutes: replicas at autoscaling.maxReplicas, or not starting",
        ),
    ]


# ---- dashboards --------------------------------------------------------------------------------


def vllm_panels(scope: Scope) -> dict[str, str]:
    """Panel title -> query of the vLLM dashboard."""
    sel = vllm_selector(scope)
    return {
        "Time to first token (p95, s)": p95(VLLM_TTFT, sel),
        "Inter-token latency (p95, s)": p95(VLLM_ITL, sel),
        "End-to-end latency (p95, s)": p95(VLLM_E2E_LATENCY, sel),
        "Generated tokens/s": f"sum(rate({VLLM_GENERATION_TOKENS}{{{sel}}}[1m]))",
        "Prompt tokens/s": f"sum(rate({VLLM_PROMPT_TOKENS}{{{sel}}}[1m]))",
        "Requests waiting": f"sum by (pod) ({VLLM_WAITING}{{{sel}}})",
        "Requests running": f"sum by (pod) ({VLLM_RUNNING}{{{sel}}})",
        "KV cache usage (0-1)": f"max by (pod) ({VLLM_KV_CACHE_USAGE}{{{sel}}})",
    }


def gpu_panels(scope: Scope) -> dict[str, str]:
    """Panel title -> query of the GPU dashboard (vLLM's GPUs)."""
    sel = gpu_selector(scope)
    return {
        "GPU utilization (%)": f"avg by (exported_pod, gpu) ({DCGM_GPU_UTIL}{{{sel}}})",
        "GPU memory used (MiB)": f"sum by (exported_pod) ({DCGM_FB_USED}{{{sel}}})",
        "GPU memory free (MiB)": f"sum by (exported_pod) ({DCGM_FB_FREE}{{{sel}}})",
        "Power (W)": f"sum by (exported_pod) ({DCGM_POWER}{{{sel}}})",
        "Graphics engine active (0-1)": f"avg by (exported_pod) ({DCGM_GR_ENGINE_ACTIVE}{{{sel}}})",
        "Tensor cores active (0-1)": f"avg by (exported_pod) ({DCGM_TENSOR_ACTIVE}{{{sel}}})",
    }


def router_panels(namespace: str) -> dict[str, str]:
    """Panel title -> query of the router dashboard."""
    sel = f'namespace="{namespace}"'
    return {
        "Requests queued at the router": f"sum({ROUTER_QUEUE}{{{sel}}})",
        "Requests in flight through the router": f"sum({ROUTER_RUNNING}{{{sel}}})",
        "Pool saturation (0-1)": f"max({ROUTER_SATURATION}{{{sel}}})",
        "Time in the router's queue (p95, s)": p95(ROUTER_QUEUE_DURATION, sel),
        "Queue timeouts (503) per minute": (
            f'sum(rate({ROUTER_QUEUE_DURATION}_count{{{sel},outcome="{ROUTER_TIMED_OUT}"}}[5m])) * 60'
        ),
    }


@dataclass(frozen=True)
class DashboardVariable:
    """A Grafana query variable: the values ``source_label`` takes on the series ``selector``
    selects (``selector`` may name an earlier variable)."""

    name: str
    label: str
    selector: str
    source_label: str

    def grafana_query(self) -> str:
        """Grafana's Prometheus variable query."""
        return f"label_values({self.selector}, {self.source_label})"

    def promql(self) -> str:
        """The same in PromQL: one element per value offered (tests run it in Prometheus)."""
        return f"count by ({self.source_label}) ({self.selector})"


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    variables: tuple[DashboardVariable, ...]
    panels: dict[str, str]
    """Panel title -> query, in terms of the variables."""


DASHBOARD_SCOPE = Scope(namespace="$namespace", model_name="$model_name")
"""The dashboards' scope: Grafana variables, not one service's namespace and model. The dashboards
are cluster-wide (the service with the shared add-ons installs them once) and serve every
DeepSeekService on the cluster: pick its namespace and served model at the top."""


def dashboards(router: bool = False) -> list[Dashboard]:
    """The Grafana dashboards, each with its variables; ``router``: llm-d's too."""
    scope = DASHBOARD_SCOPE
    namespace = "Namespace"
    routed = [
        Dashboard(
            "deepseek-router",
            "DeepSeek llm-d router",
            (DashboardVariable("namespace", namespace, ROUTER_INFO, "namespace"),),
            router_panels(scope.namespace),
        )
    ]
    boards = [
        Dashboard(
            "deepseek-vllm",
            "DeepSeek vLLM",
            (
                DashboardVariable("namespace", namespace, VLLM_RUNNING, "namespace"),
                DashboardVariable(
                    "model_name", "Model", f'{VLLM_RUNNING}{{namespace="$namespace"}}', "model_name"
                ),
            ),
            vllm_panels(scope),
        ),
        Dashboard(
            "deepseek-gpu",
            "DeepSeek GPUs",
            (
                DashboardVariable(
                    "namespace",
                    namespace,
                    f'{DCGM_GPU_UTIL}{{exported_container="{scope.container}"}}',
                    "exported_namespace",
                ),
            ),
            gpu_panels(scope),
        ),
    ]
    return boards + (routed if router else [])


# A start-up of four minutes: the seasonal queries' shape, whatever a stack's plan gives.
SEASONAL_PARSE_LEAD_S = 240


def all_queries(scope: Scope, slo: Slo, hpa_name: str) -> list[str]:
    """Every PromQL string the project renders (for the parse-everything test)."""
    queries = [
        queue_depth(scope),
        gpu_utilization_total(scope),
        kv_cache_usage_total(scope),
        concurrency_total(scope),
        *(seasonal_demand(scope, period, SEASONAL_PARSE_LEAD_S) for period in (86_400, 7 * 86_400)),
    ]
    rule = gpu_utilization_adapter_rule(scope)
    queries += [rule.series_query, expand_adapter_query(rule, scope.namespace, ["vllm-0"])]
    queries += [a.expr for a in alerts(scope, slo, hpa_name)]
    queries += [router_demand(scope.namespace), *(a.expr for a in router_alerts(scope.namespace))]
    queries += list(vllm_panels(scope).values()) + list(gpu_panels(scope).values())
    for board in dashboards(router=True):
        queries += [v.promql() for v in board.variables] + list(board.panels.values())
    return queries
