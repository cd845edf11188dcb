"""Every PromQL string in promql/ executed by real Prometheus (``promtool test rules``) over series
shaped exactly like dcgm-exporter (ServiceMonitor, ``honorLabels: false``) and vLLM (PodMonitor)
scrapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deepseek_eks import promql
from deepseek_eks.promql import (
    DCGM_GPU_UTIL,
    DCGM_XID,
    KSM_HPA_CURRENT,
    KSM_HPA_DESIRED,
    KSM_HPA_MAX,
    VLLM_ITL,
    VLLM_KV_CACHE_USAGE,
    VLLM_QUEUE_TIME,
    VLLM_RUNNING,
    VLLM_TTFT,
    VLLM_WAITING,
    Alert,
    Scope,
    Slo,
    alerts,
    all_queries,
    concurrency_total,
    expand_adapter_query,
    gpu_utilization_adapter_rule,
    gpu_utilization_total,
    kv_cache_usage_total,
    p95,
    queue_depth,
    seasonal_demand,
    vllm_selector,
)
from tests.promql.promtool import (
    check_query_parses,
    dcgm_labels,
    dcgm_series,
    labels,
    require_promtool,
    run_rule_test,
    series,
    vllm_histogram,
    vllm_labels,
    vllm_series,
    xid_series,
)
from tests.upstream import vllm_metric_names

SCOPE = Scope(namespace="deepseek", model_name="r1-distill-qwen-7b")
SLO = Slo()
HPA = "keda-hpa-vllm"
INF = float("inf")

# Node IPs: each node runs one dcgm-exporter pod (DaemonSet).
NODE_A, NODE_B, NODE_C = "10.42.1.5", "10.42.1.6", "10.42.1.7"
EXPORTER = {NODE_A: "dcgm-exporter-abcde", NODE_B: "dcgm-exporter-fghij", NODE_C: "dcgm-exporter-klmno"}


def gpu(
    node: str, index: int, values: str, workload: tuple[str, str, str] | None, metric: str = DCGM_GPU_UTIL
):
    return dcgm_series(
        metric, values, gpu=index, node_ip=node, exporter_pod=EXPORTER[node], workload=workload
    )


def gpu_fleet() -> list[dict]:
    """GPU utilization of: vllm-a (2 GPUs, 40 and 60: mean 50), vllm-b (1 GPU, 90), a vLLM pod of
    the same name in another namespace, an idle GPU (no exported_* labels), a non-vLLM pod in the
    same namespace and a non-vLLM sidecar of vllm-b holding its own GPU."""
    return [
        gpu(NODE_A, 0, "40x10", ("deepseek", "vllm-a", "vllm")),
        gpu(NODE_A, 1, "60x10", ("deepseek", "vllm-a", "vllm")),
        gpu(NODE_B, 0, "90x10", ("deepseek", "vllm-b", "vllm")),
        gpu(NODE_B, 1, "0x10", None),
        gpu(NODE_B, 2, "100x10", ("deepseek", "vllm-b", "profiler")),
        gpu(NODE_C, 0, "10x10", ("research", "vllm-a", "vllm")),
        gpu(NODE_C, 1, "100x10", ("deepseek", "embedder-0", "embedder")),
    ]


def unrelated_series() -> list[dict]:
    """Something to scrape that no query under test selects (keeps a test file non-empty)."""
    return [series("up", {"job": "apiserver", "instance": "10.0.0.1:443"}, "1x10")]


# ---- 1. adapter rule ---------------------------------------------------------------------------


def test_adapter_query_is_the_mean_gpu_utilization_of_each_requested_pod(tmp_path: Path) -> None:
    require_promtool()
    rule = gpu_utilization_adapter_rule(SCOPE)
    query = expand_adapter_query(rule, "deepseek", ["vllm-a", "vllm-b"])
    assert query == (
        'avg by (exported_pod) (DCGM_FI_DEV_GPU_UTIL{exported_namespace="deepseek",'
        'exported_pod=~"vllm-a|vllm-b",exported_container="vllm"})'
    )
    fleet = gpu_fleet()
    # The discovery query finds every vLLM GPU series with a workload pod, in any namespace.
    discovered = [s["series"] for s in fleet if re.search(r'exported_container="vllm"', s["series"])]
    run_rule_test(
        tmp_path,
        [{"name": "adapter", "rules": [{"record": "test:adapter", "expr": query}]}],
        [
            {
                "interval": "1m",
                "input_series": fleet,
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": '{exported_pod="vllm-a"}', "value": 50},
                            {"labels": '{exported_pod="vllm-b"}', "value": 90},
                        ],
                    },
                    {
                        "expr": "test:adapter",
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": 'test:adapter{exported_pod="vllm-a"}', "value": 50},
                            {"labels": 'test:adapter{exported_pod="vllm-b"}', "value": 90},
                        ],
                    },
                    {
                        "expr": rule.series_query,
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": s, "value": float(v)}
                            for s, v in zip(discovered, (40, 60, 90, 10), strict=True)
                        ],
                    },
                ],
            }
        ],
    )


def test_the_adapter_rule_one_service_installs_serves_another_services_namespace(tmp_path: Path) -> None:
    """Only the service with the shared add-ons installs prometheus-adapter; another service's HPA
    (namespace "research") asks that same rule for its pods and must get their GPU utilization."""
    require_promtool()
    installed = gpu_utilization_adapter_rule(SCOPE)
    other = Scope(namespace="research", model_name="r1-distill-llama-70b")
    assert gpu_utilization_adapter_rule(other) == installed  # nothing in the rule is one service's
    query = expand_adapter_query(installed, other.namespace, ["vllm-a"])
    run_rule_test(
        tmp_path,
        [],
        [
            {
                "interval": "1m",
                "input_series": gpu_fleet(),
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": "5m",
                        "exp_samples": [{"labels": '{exported_pod="vllm-a"}', "value": 10}],
                    }
                ],
            }
        ],
    )


# ---- 2. KEDA queries ---------------------------------------------------------------------------


def _keda_query_test(tmp_path: Path, query: str, series_: list, total: float) -> None:
    """``query`` gives ``total`` over ``series_`` and 0 over series of other workloads."""
    require_promtool()
    run_rule_test(
        tmp_path,
        [{"name": "keda", "rules": [{"record": "test:keda_query", "expr": query}]}],
        [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {"expr": query, "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": value}]}
                ],
            }
            for inputs, value in ((series_, total), (unrelated_series(), 0))
        ],
    )


def _deployment_and_strangers(metric: str, ours: tuple[str, str], theirs: tuple[str, str]) -> list:
    """Two pods of this deployment, one of another model, one of the same name elsewhere."""
    return [
        vllm_series(metric, ours[0], pod="vllm-a", pod_ip="10.42.2.9"),
        vllm_series(metric, ours[1], pod="vllm-b", pod_ip="10.42.2.10"),
        vllm_series(metric, theirs[0], pod="other-0", pod_ip="10.42.2.11", model_name="other-model"),
        vllm_series(metric, theirs[1], pod="vllm-a", pod_ip="10.42.3.9", namespace="research"),
    ]


def test_queue_depth_sums_waiting_requests_of_the_deployment_and_is_0_without_series(tmp_path: Path) -> None:
    busy = _deployment_and_strangers(VLLM_WAITING, ("3x10", "4x10"), ("100x10", "50x10"))
    _keda_query_test(tmp_path, queue_depth(SCOPE), busy, 7)


def test_gpu_utilization_total_sums_per_pod_means_and_is_0_without_series(tmp_path: Path) -> None:
    _keda_query_test(tmp_path, gpu_utilization_total(SCOPE), gpu_fleet(), 140)


def test_kv_cache_usage_total_sums_per_pod_usage_and_is_0_without_series(tmp_path: Path) -> None:
    busy = _deployment_and_strangers(VLLM_KV_CACHE_USAGE, ("0.5x10", "0.25x10"), ("0.9x10", "0.9x10"))
    _keda_query_test(tmp_path, kv_cache_usage_total(SCOPE), busy, 0.75)


def test_concurrency_total_adds_running_and_waiting_of_the_deployment_and_is_0_without_series(
    tmp_path: Path,
) -> None:
    running = _deployment_and_strangers(VLLM_RUNNING, ("12x10", "9x10"), ("30x10", "30x10"))
    waiting = _deployment_and_strangers(VLLM_WAITING, ("2x10", "0x10"), ("40x10", "40x10"))
    _keda_query_test(tmp_path, concurrency_total(SCOPE), running + waiting, 23)


def test_concurrency_total_counts_running_requests_when_none_wait(tmp_path: Path) -> None:
    # A replica that has no vllm:num_requests_waiting series yet (or one that dropped it) must not
    # make the sum empty: KEDA would read 0 and scale the running load away.
    running = _deployment_and_strangers(VLLM_RUNNING, ("5x10", "6x10"), ("30x10", "30x10"))
    strangers_waiting = _deployment_and_strangers(VLLM_WAITING, ("0x10", "0x10"), ("4x10", "4x10"))[2:]
    _keda_query_test(tmp_path, concurrency_total(SCOPE), running + strangers_waiting, 11)


def test_seasonal_demand_holds_yesterdays_peak_one_lead_ahead_and_is_0_without_history(
    tmp_path: Path,
) -> None:
    """Yesterday from minute 30 to 34 one pod ran 12 requests and, at minutes 31-32, queued 3 more;
    other models and namespaces ran far more. With a 10-minute lead, today's query holds that
    demand from minute 20 (a replica asked for then is ready at 30) until the busy minutes are
    over, and is 0 before and after; before a day of history it is 0, not empty (KEDA would
    take an empty result as an error)."""
    require_promtool()
    day, lead = 86_400, 600
    query = seasonal_demand(SCOPE, day, lead)
    running = _deployment_and_strangers(VLLM_RUNNING, ("0x29 12x4 0x1500", "0x1534"), ("90x1534", "90x1534"))
    waiting = _deployment_and_strangers(VLLM_WAITING, ("0x30 3x1 0x1502", "0x1534"), ("40x1534", "40x1534"))
    minute = 60
    expected = {  # eval minute (a day is 1440) -> value
        1440 + 19: 0,  # the window [19, 29] ends before the busy minutes
        1440 + 20: 12,  # [20, 30]: minute 30 already counts, a lead ahead of it
        1440 + 25: 15,  # [25, 35]: running and waiting at minutes 31-32
        1440 + 33: 12,  # [33, 43]: the queue is gone, minutes 33-34 still ran 12
        1440 + 36: 0,  # [36, 46]: the busy minutes are over
        600: 0,  # no history a day back
    }
    run_rule_test(
        tmp_path,
        [{"name": "keda", "rules": [{"record": "test:seasonal", "expr": query}]}],
        [
            {
                "interval": "1m",
                "input_series": running + waiting,
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": f"{at * minute}s",
                        "exp_samples": [{"labels": "{}", "value": value}],
                    }
                    for at, value in expected.items()
                ],
            }
        ],
    )


def test_seasonal_demand_refuses_a_lead_as_long_as_its_period() -> None:
    with pytest.raises(ValueError, match=r"shorter than its period \(86400 s\)"):
        seasonal_demand(SCOPE, 86_400, 86_400)


KEDA_QUERIES = {
    "queue-depth": queue_depth,
    "gpu-utilization": gpu_utilization_total,
    "kv-cache": kv_cache_usage_total,
    "concurrency": concurrency_total,
}
_TARGET_A = {"pod": "vllm-a", "pod_ip": "10.42.2.9", "engine": None}
_TARGET_B = {"pod": "vllm-b", "pod_ip": "10.42.2.10", "engine": None}


def _expect(tmp_path: Path, query: str, inputs: list, samples: list[dict]) -> None:
    require_promtool()
    run_rule_test(
        tmp_path,
        [{"name": "keda", "rules": [{"record": "test:keda_query", "expr": query}]}],
        [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [{"expr": query, "eval_time": "5m", "exp_samples": samples}],
            }
        ],
    )


@pytest.mark.parametrize("signal", sorted(KEDA_QUERIES))
def test_a_keda_query_is_empty_when_vllm_pods_exist_but_report_nothing(tmp_path: Path, signal: str) -> None:
    # Prometheus has the pods as targets (up 0: a replica still loading its weights; up 1: a
    # scrape that answers without the series) but no vllm:* or GPU series: a gap. The result must
    # be empty, which KEDA with ignoreNullValues "false" reports as an error that holds the
    # replica count, never 0, which would scale in (reference/upstream/metrics-path-facts.json).
    targets = [series("up", vllm_labels(**_TARGET_A), "0x10"), series("up", vllm_labels(**_TARGET_B), "1x10")]
    _expect(tmp_path, KEDA_QUERIES[signal](SCOPE), targets, [])


@pytest.mark.parametrize("signal", sorted(KEDA_QUERIES))
def test_a_keda_query_is_0_when_no_vllm_pod_is_a_target(tmp_path: Path, signal: str) -> None:
    # Zero replicas: nothing to measure, and 0 is the truth. Targets of another namespace or of
    # another container do not count as ours.
    others = [
        series("up", vllm_labels(namespace="research", **_TARGET_A), "1x10"),
        series("up", vllm_labels(container="sidecar", **_TARGET_B), "1x10"),
    ]
    _expect(tmp_path, KEDA_QUERIES[signal](SCOPE), others, [{"labels": "{}", "value": 0}])


def test_a_keda_query_with_targets_and_series_is_the_one_measured_element(tmp_path: Path) -> None:
    # The guard adds nothing when the series exist: KEDA refuses more than one element.
    targets = [series("up", vllm_labels(**_TARGET_A), "1x10"), series("up", vllm_labels(**_TARGET_B), "1x10")]
    waiting = [
        vllm_series(VLLM_WAITING, "3x10", pod="vllm-a", pod_ip="10.42.2.9"),
        vllm_series(VLLM_WAITING, "0x10", pod="vllm-b", pod_ip="10.42.2.10"),
    ]
    _expect(tmp_path, queue_depth(SCOPE), targets + waiting, [{"labels": "{}", "value": 3}])


# ---- 3. alerts ---------------------------------------------------------------------------------

ALERTS = {a.name: a for a in alerts(SCOPE, SLO, hpa_name=HPA)}
FIRE_AT = "25m"  # past every alert's `for`; histogram/gauge series run for 30 minutes
SEL = vllm_selector(SCOPE)

ITL_BUCKETS = (0.05, 0.1, 0.2, 0.5, 1)
TTFT_BUCKETS = (0.5, 1, 2.5, 5, 10, 20)
QUEUE_BUCKETS = (1, 5, 10, 30, 60, 120)

VLLM_A = {"pod": "vllm-a", "pod_ip": "10.42.2.9"}
VLLM_B = {"pod": "vllm-b", "pod_ip": "10.42.2.10"}
OTHER_NS = {"pod": "vllm-a", "pod_ip": "10.42.3.9", "namespace": "research"}
OTHER_MODEL = {"pod": "other-0", "pod_ip": "10.42.2.11", "model_name": "other-model"}

GPU_A0 = {
    "gpu": 0,
    "node_ip": NODE_A,
    "exporter_pod": EXPORTER[NODE_A],
    "workload": ("deepseek", "vllm-a", "vllm"),
}
GPU_A1 = {
    "gpu": 1,
    "node_ip": NODE_A,
    "exporter_pod": EXPORTER[NODE_A],
    "workload": ("deepseek", "vllm-a", "vllm"),
}

KSM = {
    "container": "kube-state-metrics",
    "endpoint": "http",
    "instance": "10.42.0.7:8080",
    "job": "kube-state-metrics",
    "pod": "kube-prometheus-stack-kube-state-metrics-6d8f9-qwert",
    "service": "kube-prometheus-stack-kube-state-metrics",
    # kube-prometheus-stack scrapes kube-state-metrics with honorLabels: true, so the object's
    # namespace wins over the exporter's.
    "namespace": "deepseek",
    "horizontalpodautoscaler": HPA,
}


def histogram(name: str, buckets: tuple[float, ...], per_minute: dict[float, int], *pods: dict) -> list[dict]:
    return [s for pod in pods for s in vllm_histogram(name, buckets, per_minute, **pod)]


# name -> (bad series, expected firing alerts (labels, annotations), good series, good-value check)
# A good-value check ``(expr, value)`` proves the quiet case is quiet because the value is below
# the threshold, not because the selector matched nothing (promtool 2.42 compares floats exactly,
# hence the round() around histogram quantiles).
ALERT_CASES: dict[str, dict] = {
    "VllmKvCacheNearlyFull": {
        "bad": [
            vllm_series(VLLM_KV_CACHE_USAGE, "0.97x30", **VLLM_A),
            vllm_series(VLLM_KV_CACHE_USAGE, "0.5x30", **VLLM_B),
        ],
        "fires": [
            {
                "exp_labels": {"severity": "warning", "namespace": "deepseek", "pod": "vllm-a"},
                "exp_annotations": {
                    "summary": "vLLM KV cache above 97% on vllm-a: requests are being preempted"
                },
            }
        ],
        "good": [
            vllm_series(VLLM_KV_CACHE_USAGE, "0.5x30", **VLLM_A),
            vllm_series(VLLM_KV_CACHE_USAGE, "0.5x30", **VLLM_B),
            vllm_series(VLLM_KV_CACHE_USAGE, "0.99x30", **OTHER_MODEL),
            vllm_series(VLLM_KV_CACHE_USAGE, "0.99x30", **OTHER_NS),
        ],
        "good_value": (f"max by (namespace, pod) ({VLLM_KV_CACHE_USAGE}{{{SEL}}})", None),
    },
    "VllmRequestsWaitingTooLong": {
        # 90 % of requests wait 30-60 s: p95 = 30 + 30 * (19 - 2) / 18
        "bad": histogram(VLLM_QUEUE_TIME, QUEUE_BUCKETS, {1: 2, 60: 18}, VLLM_A, VLLM_B),
        "fires": [
            {
                "exp_labels": {"severity": "warning"},
                "exp_annotations": {
                    "summary": "p95 queue time 58.33s: add replicas or raise autoscaling.maxReplicas"
                },
            }
        ],
        "good": histogram(VLLM_QUEUE_TIME, QUEUE_BUCKETS, {1: 20}, VLLM_A, VLLM_B)
        + histogram(VLLM_QUEUE_TIME, QUEUE_BUCKETS, {120: 20}, OTHER_MODEL, OTHER_NS),
        "good_value": (f"round({p95(VLLM_QUEUE_TIME, SEL)}, 0.0001)", 0.95),
    },
    "VllmTimeToFirstTokenHigh": {
        # p95 = 5 + 5 * (19 - 2) / 18
        "bad": histogram(VLLM_TTFT, TTFT_BUCKETS, {1: 2, 10: 18}, VLLM_A, VLLM_B),
        "fires": [
            {
                "exp_labels": {"severity": "warning"},
                "exp_annotations": {"summary": "p95 time to first token 9.722s is above the SLO"},
            }
        ],
        "good": histogram(VLLM_TTFT, TTFT_BUCKETS, {0.5: 20}, VLLM_A, VLLM_B)
        + histogram(VLLM_TTFT, TTFT_BUCKETS, {20: 20}, OTHER_MODEL, OTHER_NS),
        "good_value": (f"round({p95(VLLM_TTFT, SEL)}, 0.0001)", 0.475),
    },
    "VllmInterTokenLatencyHigh": {
        # p95 = 0.2 + 0.3 * (19 - 2) / 18
        "bad": histogram(VLLM_ITL, ITL_BUCKETS, {0.1: 2, 0.5: 18}, VLLM_A, VLLM_B),
        "fires": [
            {
                "exp_labels": {"severity": "warning"},
                "exp_annotations": {"summary": "p95 inter-token latency 483.3ms is above the SLO"},
            }
        ],
        "good": histogram(VLLM_ITL, ITL_BUCKETS, {0.05: 20}, VLLM_A, VLLM_B)
        + histogram(VLLM_ITL, ITL_BUCKETS, {1: 20}, OTHER_MODEL, OTHER_NS),
        "good_value": (f"round({p95(VLLM_ITL, SEL)}, 0.0001)", 0.0475),
    },
    "GpuXidError": {
        # GPU 0's last XID goes from 0 to 79 at minute 20: the exporter's err_code 0 series ends
        # (stale) and an err_code 79 one starts. Fires for the window after the change.
        "bad": [
            xid_series(0, "No Error", "0x19 stale", **GPU_A0),
            xid_series(79, "GPU has fallen off the bus", "_x20 79x10", **GPU_A0),
            xid_series(0, "No Error", "0x30", **GPU_A1),
        ],
        "fire_at": "25m",
        "fires": [
            {
                "exp_labels": {
                    "severity": "critical",
                    "Hostname": "ip-10-42-1-5.ec2.internal",
                    "gpu": "0",
                    "exported_pod": "vllm-a",
                    "err_code": "79",
                    "err_msg": "GPU has fallen off the bus",
                },
                "exp_annotations": {
                    "summary": "GPU 0 on ip-10-42-1-5.ec2.internal (pod vllm-a) reported XID 79 (GPU has "
                    "fallen off the bus): NVIDIA's immediate action is a GPU reset or a restart of the "
                    "machine; drain the node so that it is replaced"
                },
            }
        ],
        # An XID 79 the gauge has held all along (from before this window, an earlier pod) and a
        # change to an application-level XID: nothing for this alert.
        "good": [
            xid_series(79, "GPU has fallen off the bus", "79x30", **GPU_A0),
            xid_series(0, "No Error", "0x19 stale", **GPU_A1),
            xid_series(31, "GPU memory page fault", "_x20 31x10", **GPU_A1),
        ],
        "good_value": (f"max({DCGM_XID}{{exported_namespace='deepseek',exported_container='vllm'}})", 79),
    },
    "GpuXidApplicationError": {
        "bad": [
            xid_series(0, "No Error", "0x19 stale", **GPU_A1),
            xid_series(13, "Graphics Engine Exception", "_x20 13x10", **GPU_A1),
        ],
        "fire_at": "25m",
        "fires": [
            {
                "exp_labels": {
                    "severity": "warning",
                    "Hostname": "ip-10-42-1-5.ec2.internal",
                    "gpu": "1",
                    "exported_pod": "vllm-a",
                    "err_code": "13",
                    "err_msg": "Graphics Engine Exception",
                },
                "exp_annotations": {
                    "summary": "GPU 1 on ip-10-42-1-5.ec2.internal (pod vllm-a) reported XID 13 (Graphics "
                    "Engine Exception): NVIDIA's immediate action is to restart the application; check "
                    "that the vLLM container restarted"
                },
            }
        ],
        "good": [
            xid_series(13, "Graphics Engine Exception", "13x30", **GPU_A1),
            xid_series(0, "No Error", "0x19 stale", **GPU_A0),
            xid_series(79, "GPU has fallen off the bus", "_x20 79x10", **GPU_A0),
        ],
        "good_value": (f"max({DCGM_XID}{{exported_namespace='deepseek',exported_container='vllm'}})", 79),
    },
    "VllmReplicasAtMax": {
        # At max with p95 time to first token 9.72 s over the 5 s SLO.
        "bad": [
            series(KSM_HPA_CURRENT, KSM, "3x30"),
            series(KSM_HPA_MAX, KSM, "3x30"),
            *histogram(VLLM_TTFT, TTFT_BUCKETS, {1: 2, 10: 18}, VLLM_A, VLLM_B),
        ],
        "fires": [
            {
                "exp_labels": {"severity": "warning", **KSM},
                "exp_annotations": {
                    "summary": "vLLM has run at autoscaling.maxReplicas for 15 minutes with p95 queue time "
                    "or time to first token above the SLO: raise autoscaling.maxReplicas"
                },
            }
        ],
        # At max too, but serving within the SLOs: the normal state of a busy stack.
        "good": [
            series(KSM_HPA_CURRENT, KSM, "3x30"),
            series(KSM_HPA_MAX, KSM, "3x30"),
            *histogram(VLLM_TTFT, TTFT_BUCKETS, {0.5: 20}, VLLM_A, VLLM_B),
            *histogram(VLLM_QUEUE_TIME, QUEUE_BUCKETS, {1: 20}, VLLM_A, VLLM_B),
        ],
        "good_value": (f"{KSM_HPA_CURRENT} - on() {KSM_HPA_MAX}", 0),
    },
    "VllmNoTargetsUp": {
        "bad": [
            series("up", vllm_labels(engine=None, **VLLM_A), "0x30"),
            series("up", vllm_labels(engine=None, **VLLM_B), "0x30"),
            series(KSM_HPA_DESIRED, KSM, "2x30"),
        ],
        "fires": [
            {
                "exp_labels": {"severity": "critical"},
                "exp_annotations": {
                    "summary": "No vLLM pod is being scraped: the endpoint is down or metrics are lost"
                },
            }
        ],
        # One of two targets up is enough.
        "good": [
            series("up", vllm_labels(engine=None, **VLLM_A), "1x30"),
            series("up", vllm_labels(engine=None, **VLLM_B), "0x30"),
            series(KSM_HPA_DESIRED, KSM, "2x30"),
        ],
        "good_value": ('sum(up{namespace="deepseek",container="vllm"})', 1),
    },
}


def _minutes(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([mh])", duration)
    assert m, duration
    return int(m[1]) * (60 if m[2] == "h" else 1)


def rule_group(items: list[Alert]) -> dict:
    return {
        "name": "vllm",
        "rules": [
            {
                "alert": a.name,
                "expr": a.expr,
                "for": a.for_,
                "labels": {"severity": a.severity},
                "annotations": {"summary": a.summary},
            }
            for a in items
        ],
    }


def test_every_alert_has_a_case() -> None:
    assert set(ALERT_CASES) == set(ALERTS)


@pytest.mark.parametrize("name", list(ALERT_CASES))
def test_alert_fires_on_bad_series_and_stays_silent_on_good(tmp_path: Path, name: str) -> None:
    require_promtool()
    alert, case = ALERTS[name], ALERT_CASES[name]
    for_minutes = _minutes(alert.for_)
    bad_checks = [{"eval_time": case.get("fire_at", FIRE_AT), "alertname": name, "exp_alerts": case["fires"]}]
    if for_minutes > 1:
        # Bad from the first sample, yet not firing before `for` has passed.
        bad_checks.insert(0, {"eval_time": f"{for_minutes - 1}m", "alertname": name, "exp_alerts": []})
    good_expr, good_value = case["good_value"]
    good_value_test = {"expr": good_expr, "eval_time": FIRE_AT}
    if good_value is None:  # a per-pod value: check every pod of the scope reports 0.5
        good_value_test["exp_samples"] = [
            {"labels": f'{{namespace="deepseek",pod="{p}"}}', "value": 0.5} for p in ("vllm-a", "vllm-b")
        ]
    else:
        good_value_test["exp_samples"] = [{"labels": "{}", "value": good_value}]
    tests = [
        {"interval": "1m", "input_series": case["bad"], "alert_rule_test": bad_checks},
        {
            "interval": "1m",
            "input_series": case["good"],
            "alert_rule_test": [{"eval_time": FIRE_AT, "alertname": name, "exp_alerts": []}],
            "promql_expr_test": [good_value_test],
        },
    ]
    if name == "VllmNoTargetsUp":
        # No vLLM target at all (e.g. the PodMonitor selects nothing): fires through absent().
        tests.append(
            {
                "interval": "1m",
                "input_series": unrelated_series(),
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": name, "exp_alerts": []},
                    {
                        "eval_time": "9m",
                        "alertname": name,
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "namespace": "deepseek",
                                    "container": "vllm",
                                },
                                "exp_annotations": case["fires"][0]["exp_annotations"],
                            }
                        ],
                    },
                ],
            }
        )
    run_rule_test(tmp_path, [rule_group(list(ALERTS.values()))], tests)


# ---- 4. everything parses ----------------------------------------------------------------------

QUERIES = all_queries(SCOPE, SLO, HPA)


def _query_id(index: int, query: str) -> str:
    return f"{index:02d}-" + re.sub(r"[^A-Za-z0-9]+", "_", query).strip("_")[:48]


@pytest.mark.parametrize("query", QUERIES, ids=[_query_id(i, q) for i, q in enumerate(QUERIES)])
def test_query_parses(tmp_path: Path, query: str) -> None:
    require_promtool()
    check_query_parses(tmp_path, query)


def test_series_builders_match_the_scrape_shapes() -> None:
    """The builders spell the label sets the brief names (a guard against drift in the helper)."""
    dcgm = labels(DCGM_GPU_UTIL, dcgm_labels(workload=("deepseek", "vllm-7d9f8-xyz", "vllm")))
    assert re.fullmatch(r'.*UUID="GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}".*', dcgm)
    assert re.sub(r'UUID="[^"]*"', 'UUID="GPU-..."', dcgm) == (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-...",'
        'pci_bus_id="00000000:00:1E.0",device="nvidia0",modelName="NVIDIA L4",'
        'Hostname="ip-10-42-1-5.ec2.internal",DCGM_FI_DRIVER_VERSION="570.133.20",'
        'container="dcgm-exporter",namespace="monitoring",pod="dcgm-exporter-abcde",'
        'service="dcgm-exporter",endpoint="metrics",job="dcgm-exporter",instance="10.42.1.5:9400",'
        'exported_container="vllm",exported_namespace="deepseek",exported_pod="vllm-7d9f8-xyz"}'
    )
    assert "exported_" not in labels(DCGM_GPU_UTIL, dcgm_labels(workload=None))
    assert labels(VLLM_WAITING, vllm_labels()) == (
        'vllm:num_requests_waiting{model_name="r1-distill-qwen-7b",engine="0",namespace="deepseek",'
        'pod="vllm-7d9f8-xyz",container="vllm",endpoint="http",job="deepseek/vllm",instance="10.42.2.9:8000"}'
    )
    hist = vllm_histogram(VLLM_ITL, ITL_BUCKETS, {0.1: 2, 0.5: 3}, steps=10)
    assert [s["series"].split("le=")[-1] for s in hist[:-2]] == [
        '"0.05"}',
        '"0.1"}',
        '"0.2"}',
        '"0.5"}',
        '"1.0"}',
        '"+Inf"}',
    ]
    assert [s["values"] for s in hist] == [
        "0+0x10",
        "0+2x10",
        "0+2x10",
        "0+5x10",
        "0+5x10",
        "0+5x10",
        "0+1.2x10",
        "0+5x10",
    ]


def test_the_autoscaling_triggers_read_metrics_vllm_exports() -> None:
    # vllm:kv_cache_usage_perc (and the queue's vllm:num_requests_waiting) are names the vLLM 0.33.0
    # wheel registers (reference/upstream/vllm-0.33.0/metric-names.txt, read from its source,
    # v1/metrics/loggers.py); the pre-0.12 vllm:gpu_cache_usage_perc is not.
    names = vllm_metric_names("0.33.0")
    for query in (kv_cache_usage_total(SCOPE), queue_depth(SCOPE), concurrency_total(SCOPE)):
        used = set(re.findall(r"vllm:[a-z_]+", query))
        assert used and used <= names, query
    assert "vllm:gpu_cache_usage_perc" not in names


# ---- the router-queue signal: the llm-d router's own gauges (reference/upstream/llm-d) ----------


def _router(metric: str, values: str, namespace: str = "deepseek", **labels: str) -> dict:
    """A series the router's metrics endpoint exports, as Prometheus labels it (target namespace)."""
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return {"series": f'{metric}{{namespace="{namespace}",pod="vllm-epp-0"{extra}}}', "values": values}


def test_router_demand_adds_queued_and_in_flight_requests_of_its_namespace(tmp_path: Path) -> None:
    queue = promql.ROUTER_QUEUE
    inputs = [
        _router(promql.ROUTER_INFO, "1x10", commit="abc", build_ref="v1.5.0"),
        _router(queue, "3x10", inference_pool="vllm", fairness_id="default", priority="0", model_name="m"),
        _router(promql.ROUTER_RUNNING, "5x10", model_name="m"),
        _router(promql.ROUTER_RUNNING, "40x10", namespace="research", model_name="m"),
    ]
    _expect(tmp_path, promql.router_demand("deepseek"), inputs, [{"labels": "{}", "value": 8}])


def test_router_demand_is_0_before_the_first_request_and_empty_without_a_router(tmp_path: Path) -> None:
    """Before any request the gauges have no series (made on first use), but the router is up: 0,
    so KEDA may scale to zero. With no router scraped at all: empty, an error that holds."""
    info = [_router(promql.ROUTER_INFO, "1x10", commit="abc", build_ref="v1.5.0")]
    _expect(tmp_path, promql.router_demand("deepseek"), info, [{"labels": "{}", "value": 0}])
    elsewhere = [_router(promql.ROUTER_INFO, "1x10", namespace="research", commit="abc", build_ref="v1.5.0")]
    (tmp_path / "none").mkdir()
    _expect(tmp_path / "none", promql.router_demand("deepseek"), elsewhere, [])


def test_a_seasonal_floor_at_the_router_counts_what_waited_while_no_replica_ran(tmp_path: Path) -> None:
    """router-queue lets the service sleep at zero replicas; yesterday's morning then waited at the
    router, with no vLLM pod to count it. Counted at the router, the floor asks for the first
    replica a lead ahead of that morning; counted at vLLM it would read 0 and never wake it."""
    require_promtool()
    day, lead = 86_400, 600
    queued = _router(
        promql.ROUTER_QUEUE,
        "0x29 6x4 0x1500",
        inference_pool="vllm",
        fairness_id="default",
        priority="0",
        model_name="m",
    )
    in_flight = _router(promql.ROUTER_RUNNING, "0x33 2x1 0x1500", model_name="m")
    elsewhere = _router(
        promql.ROUTER_QUEUE,
        "50x1534",
        namespace="research",
        inference_pool="vllm",
        fairness_id="default",
        priority="0",
        model_name="m",
    )
    at_router = seasonal_demand(SCOPE, day, lead, at_router=True)
    at_vllm = seasonal_demand(SCOPE, day, lead)
    minute = 60
    expected = {1440 + 19: 0, 1440 + 20: 6, 1440 + 36: 0, 600: 0}
    run_rule_test(
        tmp_path,
        [{"name": "keda", "rules": [{"record": "test:seasonal", "expr": at_router}]}],
        [
            {
                "interval": "1m",
                "input_series": [queued, in_flight, elsewhere],
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": f"{at * minute}s",
                        "exp_samples": [{"labels": "{}", "value": value}],
                    }
                    for query, values in ((at_router, expected), (at_vllm, dict.fromkeys(expected, 0)))
                    for at, value in values.items()
                ],
            }
        ],
    )


def test_the_simulator_reads_the_seasonal_window_as_the_cluster_s_prometheus_does(tmp_path: Path) -> None:
    """The simulator's history (perf/simulate/history.py) answers what the rendered query answers
    in the chart's Prometheus, minute by minute, at the edges too: Prometheus 3 leaves the window's
    start out, so one busy minute yesterday is read until, not including, the minute a lead after it."""
    from deepseek_eks.perf.simulate.history import DemandHistory
    from tests.promql.promtool import require_chart_promtool

    require_chart_promtool()
    day, lead, minute = 86_400, 600, 60
    query = seasonal_demand(SCOPE, day, lead)
    period, window = promql.seasonal_window(query)
    assert (period, window) == (day, lead)
    busy = {24: 30, 25: 7}  # yesterday's minutes 24 and 25
    values = " ".join(str(busy.get(m, 0)) for m in range(40))
    running = _deployment_and_strangers(VLLM_RUNNING, (values, "0x39"), ("90x39", "90x39"))
    history = DemandHistory((m * minute, busy.get(m, 0)) for m in range(40))
    at = range(1440 + 10, 1440 + 30)
    expected = {m: history.peak(m * minute - period, m * minute - period + window) for m in at}
    assert expected[1440 + 24] == 7 and expected[1440 + 25] == 0  # the edges the test is about
    run_rule_test(
        tmp_path,
        [{"name": "keda", "rules": [{"record": "test:seasonal", "expr": query}]}],
        [
            {
                "interval": "1m",
                "input_series": running,
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": f"{m * minute}s",
                        "exp_samples": [{"labels": "{}", "value": v}],
                    }
                    for m, v in expected.items()
                ],
            }
        ],
    )
