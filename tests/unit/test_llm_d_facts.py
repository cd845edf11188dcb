"""The llm-d router facts (reference/upstream/llm-d/router-facts.json) against the upstream files
vendored beside them (GIE v1.5.0: charts, CRDs, and excerpts of the Go source quoted with their origin
in gie-v1.5.0/source-excerpts.json), and the vendored InferencePool schema against the pool the
standalone chart renders: each fact is read back from its source here, never from our constants."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from deepseek_eks.guardrails.manifest_gate import check, schema_dir

ROOT = Path(__file__).parents[2]
LLM_D = ROOT / "reference/upstream/llm-d"
GIE = LLM_D / "gie-v1.5.0"
FACTS = json.loads((LLM_D / "router-facts.json").read_text())
SOURCE = json.loads((GIE / "source-excerpts.json").read_text())


def _excerpts(file: str) -> str:
    """The lines of one upstream Go file the facts rest on, as quoted in source-excerpts.json."""
    return "\n".join(SOURCE[file]["excerpts"]) + "\n"


def _go_metric_names() -> set[str]:
    """``<Subsystem>_<Name>`` of every prometheus collector in metrics.go (no Namespace is set)."""
    return set(SOURCE["metrics.go"]["registered_metric_names"])


def test_the_router_metrics_are_the_ones_its_source_registers() -> None:
    source = _excerpts("metrics.go")
    assert SOURCE["metrics.go"]["namespace_set"] is False
    names = _go_metric_names()
    metrics = FACTS["router_metrics"]
    for key in (
        "queue",
        "queue_bytes",
        "pool_saturation",
        "in_flight",
        "pool_average_queue",
        "prefix_hit_ratio",
    ):
        assert metrics[key]["name"] in names, key
    assert "Current number of requests actively held in the Flow Control queue." in source
    labels = 'append([]string{"fairness_id", "priority", "inference_pool"}, modelLabels...)'
    assert (
        labels in source and 'modelLabels             = []string{"model_name", "target_model_name"}' in source
    )


def test_the_pins_are_the_charts_own_values() -> None:
    values = yaml.safe_load((GIE / "charts/standalone/values.yaml").read_text())["inferenceExtension"]
    image = values["image"]
    assert f"{image['registry']}/{image['repository']}:{image['tag']}" == FACTS["images"]["epp"]["image"]
    assert image["tag"] == FACTS["release"]["tag"] == FACTS["standalone_chart"]["version"]
    assert values["sidecar"]["image"] == FACTS["images"]["envoy_sidecar"]["image"]
    assert values["extraServicePorts"][0]["port"] == FACTS["ports"]["proxy_http"]["port"]
    assert values["extProcPort"] == FACTS["ports"]["ext_proc_grpc"]["port"]
    crd = yaml.safe_load((GIE / "inference.networking.k8s.io_inferencepools.yaml").read_text())
    assert crd["metadata"]["annotations"]["inference.networking.k8s.io/bundle-version"] == "v1.5.0"


def test_scoring_is_the_charts_plugin_profile() -> None:
    config = (GIE / "charts/epplib/templates/_config.yaml").read_text()
    for plugin, weight in FACTS["scoring"]["weights"].items():
        assert re.search(rf"- pluginRef: {plugin}\n\s+weight: {weight}\n", config), plugin
    options = _excerpts("options.go")
    read = FACTS["model_server_metrics_read"]["defaults"]
    vllm_metrics = set((ROOT / "reference/upstream/vllm-0.33.0/metric-names.txt").read_text().split())
    for name in (read["queued"], read["running"], read["kv_cache"]):
        assert f'"{name}"' in options
        assert name in vllm_metrics, f"{name}: not a metric of the pinned vLLM"
    for port in ("MetricsPort:                      9090", "GRPCHealthPort:                   9003"):
        assert port in options


def test_the_queue_holds_requests_while_no_pod_is_ready() -> None:
    """The property scale-from-zero rests on, read from the flow-control source."""
    detector = _excerpts("saturation-detector.go")
    assert re.search(r"if len\(candidates\) == 0 \{\n\s+return 1\.0\n", detector)
    processor = _excerpts("flowcontrol-processor.go")
    assert "if saturation >= usageLimit {" in processor and "return false" in processor
    assert 'const FeatureGate = "flowControl"' in _excerpts("flowcontrol-config.go")
    admission = _excerpts("admission.go")
    assert re.search(
        r"QueueOutcomeEvictedTTL:\n\s+return errcommon.Error\{Code: errcommon.ServiceUnavailable", admission
    )
    assert "ServiceUnavailable" in _excerpts("error.go")
    # Nothing upstream sets Retry-After: the proxy must, or the 503 is without it.
    assert SOURCE["retry_after_anywhere"] is False
    assert not any("retry-after" in p.read_text().lower() for p in GIE.rglob("*.yaml"))


def _pool(**spec: object) -> dict:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "vllm", "namespace": "deepseek"},
        "spec": spec,
    }


def test_the_vendored_pool_schema_takes_the_charts_pool_and_refuses_a_broken_one() -> None:
    # What charts/standalone/templates/inferencepool.yaml renders, with our vLLM's labels and port.
    good = _pool(
        targetPorts=[{"number": 8000}],
        selector={"matchLabels": {"app.kubernetes.io/name": "vllm"}},
        endpointPickerRef={"name": "vllm-epp", "port": {"number": 9002}},
    )
    assert check(good, "1.34", schema_dir()) == []
    missing = _pool(targetPorts=[{"number": 8000}], selector={"matchLabels": {"app": "vllm"}})
    assert any("endpointPickerRef" in p for p in check(missing, "1.34", schema_dir()))
    assert check(_pool(**good["spec"], surprise=1), "1.34", schema_dir())  # unknown fields refused


def test_only_the_info_gauge_exists_before_the_first_request() -> None:
    """Why promql.router_demand falls back on the info series: the queue and in-flight gauges get
    their series on first use, the info series at start-up."""
    source = _excerpts("metrics.go")
    labels = "fairnessID, priority, inferencePool, modelName, targetModelName"
    assert f"flowControlQueueSize.WithLabelValues({labels}).Inc()" in source
    assert "runningRequests.WithLabelValues(modelName).Inc()" in source
    assert "inferenceExtensionInfo.WithLabelValues(commitSha, buildRef).Set(1)" in source
    assert "metrics.RecordInferenceExtensionInfo(version.CommitSHA, version.BuildRef)" in _excerpts(
        "runner.go"
    )
    assert FACTS["router_metrics"]["info"]["name"] in _go_metric_names()


def test_the_release_bundle_has_the_crds_the_picker_reconciles() -> None:
    bundle = yaml.safe_load((GIE / "crd-kustomization.yaml").read_text())["resources"]
    rbac = (GIE / "charts/standalone/templates/rbac.yaml").read_text()
    for plural in ("inferenceobjectives", "inferencemodelrewrites"):
        crd = yaml.safe_load((GIE / f"inference.networking.x-k8s.io_{plural}.yaml").read_text())
        assert crd["spec"]["names"]["plural"] == plural
        assert f"bases/inference.networking.x-k8s.io_{plural}.yaml" in bundle
        assert plural in rbac  # the chart grants the picker get/watch/list on them
