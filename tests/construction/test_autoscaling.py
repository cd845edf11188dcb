"""Observability and autoscaling under the mock engine: for each signal exactly the described
objects, one HPA owner, and every query taken from the promql module."""

from __future__ import annotations

import json
import math

import pytest

from deepseek_eks import promql
from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components.monitoring.autoscaling import behavior
from tests.conftest import stack_config
from tests.upstream import karpenter_image_pull_s

SCOPE = promql.Scope(namespace="deepseek", model_name="r1-distill-qwen-7b")


def kinds(rendered: Rendered, kind: str) -> list[dict]:
    return [o for o in rendered.objects() if o["kind"] == kind]


@pytest.fixture(scope="module")
def by_signal() -> dict[str, Rendered]:
    """dev on each signal alone: without the seasonal floor dev sets, whose triggers have their own
    tests (tests/rendered/test_autoscaling_triggers.py)."""
    signals = ("gpu-utilization", "queue-depth", "combined")
    return {
        signal: render(stack_config("dev", autoscaling__signal=signal, autoscaling__seasonal="false"))
        for signal in signals
    }


def test_gpu_utilization_is_one_hpa_on_the_adapter_metric_and_no_keda(by_signal) -> None:
    rendered = by_signal["gpu-utilization"]
    (hpa,) = kinds(rendered, "HorizontalPodAutoscaler")
    assert kinds(rendered, "ScaledObject") == [] and "keda" not in rendered.helm
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 2)
    metric = spec["metrics"][0]["pods"]
    assert metric["metric"]["name"] == promql.ADAPTER_GPU_METRIC
    assert metric["target"] == {"type": "AverageValue", "averageValue": "50"}  # percent, as DCGM reports
    down = spec["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] > rendered.plan["startup_seconds"]
    assert spec["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 0


@pytest.mark.parametrize("signal", ["queue-depth", "combined"])
def test_queue_signals_are_one_scaled_object_and_no_hpa_of_ours(by_signal, signal: str) -> None:
    rendered = by_signal[signal]
    assert kinds(rendered, "HorizontalPodAutoscaler") == []
    (scaled,) = kinds(rendered, "ScaledObject")
    assert rendered.helm["keda"]["version"] == "2.20.2"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == "vllm"
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["name"] == "keda-hpa-vllm"
    triggers = {t["name"]: t for t in spec["triggers"]}
    queue = triggers["queue-depth"]["metadata"]
    assert queue["query"] == promql.queue_depth(SCOPE)
    assert queue["threshold"] == "5" and isinstance(queue["threshold"], str)
    assert queue["serverAddress"] == "http://kps-prometheus.monitoring.svc:9090"
    if signal == "combined":
        assert set(triggers) == {"queue-depth", "gpu-utilization"}
        assert triggers["gpu-utilization"]["metadata"]["query"] == promql.gpu_utilization_total(SCOPE)
        assert triggers["gpu-utilization"]["metadata"]["threshold"] == "50"
    else:
        assert set(triggers) == {"queue-depth"}
        assert spec["minReplicaCount"] == 1


def test_adapter_serves_only_custom_metrics_with_the_promql_rule(by_signal) -> None:
    values = by_signal["gpu-utilization"].helm["prometheus-adapter"]["values"]
    assert values["rules"]["default"] is False
    assert values["rules"]["external"] == []  # external.metrics.k8s.io belongs to KEDA
    assert "resource" not in values["rules"]
    assert values["rules"]["custom"] == [promql.gpu_utilization_adapter_rule(SCOPE).as_values()]


def test_prometheus_selects_every_monitor_and_rule(by_signal) -> None:
    spec = by_signal["gpu-utilization"].helm["kube-prometheus-stack"]["values"]["prometheus"][
        "prometheusSpec"
    ]
    for kind in ("serviceMonitor", "podMonitor", "rule"):
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
    assert spec["retention"] == "15d"
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "gp3-encrypted"
    assert claim["resources"]["requests"]["storage"] == "50Gi"


def test_dcgm_exporter_runs_on_gpu_nodes_with_the_honor_labels_promql_expects(by_signal) -> None:
    release = by_signal["gpu-utilization"].helm["dcgm-exporter"]
    assert release["version"] == "4.8.2"
    values = release["values"]
    # Every NVIDIA node of the cluster (dev is Auto Mode), not only this service's pool: dcgm-exporter
    # is shared by every service in the cluster (tests/package/test_examples.py).
    assert values["nodeSelector"] == {"eks.amazonaws.com/instance-gpu-manufacturer": "nvidia"}
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert values["serviceMonitor"]["honorLabels"] is False  # workload pod arrives as exported_pod
    assert "exported_pod" in promql.gpu_utilization_adapter_rule(SCOPE).overrides


def test_vllm_pod_monitor_scrapes_the_api_port(by_signal) -> None:
    (monitor,) = kinds(by_signal["gpu-utilization"], "PodMonitor")
    assert monitor["metadata"]["namespace"] == "deepseek"
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]


def test_alerts_are_the_promql_alerts_with_the_right_hpa(by_signal) -> None:
    for signal, hpa in (("gpu-utilization", "vllm"), ("combined", "keda-hpa-vllm")):
        (rule,) = kinds(by_signal[signal], "PrometheusRule")
        rules = rule["spec"]["groups"][0]["rules"]
        expected = promql.alerts(SCOPE, promql.Slo(), hpa)
        assert [r["alert"] for r in rules] == [a.name for a in expected]
        assert [r["expr"] for r in rules] == [a.expr for a in expected]
    names = {r["alert"] for r in rules}
    assert {"VllmKvCacheNearlyFull", "GpuXidError", "VllmReplicasAtMax", "VllmNoTargetsUp"} <= names
    assert "gpu_cache_usage_perc" not in json.dumps(rules)  # removed in vLLM 0.12


def test_dashboards_are_provisioned_from_the_same_queries(by_signal) -> None:
    maps = {m["metadata"]["name"]: m for m in kinds(by_signal["gpu-utilization"], "ConfigMap")}
    vllm = json.loads(maps["deepseek-vllm-dashboard"]["data"]["deepseek-vllm.json"])
    gpu = json.loads(maps["deepseek-gpu-dashboard"]["data"]["deepseek-gpu.json"])
    assert maps["deepseek-vllm-dashboard"]["metadata"]["labels"]["grafana_dashboard"] == "1"
    # In Grafana variables, not this service's namespace and model (tests/package/test_shared_dashboards.py).
    assert [p["targets"][0]["expr"] for p in vllm["panels"]] == list(
        promql.vllm_panels(promql.DASHBOARD_SCOPE).values()
    )
    assert [p["targets"][0]["expr"] for p in gpu["panels"]] == list(
        promql.gpu_panels(promql.DASHBOARD_SCOPE).values()
    )


def test_grafana_password_is_a_masked_secret(by_signal) -> None:
    (secret,) = [
        s for s in kinds(by_signal["gpu-utilization"], "Secret") if s["metadata"]["name"] == "grafana-admin"
    ]
    assert secret["stringData"] == {"admin-user": "[secret]", "admin-password": "[secret]"}
    assert by_signal["gpu-utilization"].outputs["grafanaAdminPassword"] == "[secret]"


def test_multi_node_replicas_scale_the_leader_worker_set() -> None:
    rendered = render(stack_config("r1"))
    (scaled,) = kinds(rendered, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "vllm",
    }


def test_scale_down_window_is_capped_by_the_hpa_api() -> None:
    # The container's 300 s plus a Karpenter GPU node (30-90 s launch + ~60 s GPU registration) and
    # the ~12 GB image pulled with SOCI parallel mode on AL2023 at the blueprint's measured rate.
    image_s = math.ceil(karpenter_image_pull_s())
    assert behavior(300)["scaleDown"]["stabilizationWindowSeconds"] == 300 + (90 + 60) + image_s
    assert behavior(10_000)["scaleDown"]["stabilizationWindowSeconds"] == 3600
