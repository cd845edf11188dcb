"""What routing.kind llm-d and autoscaling.signal router-queue render so far, checked against
upstream data (reference/upstream/llm-d, the vendored InferencePool and ScaledObject schemas), not
against our own constants: the InferencePool, and the ScaledObject that wakes the service from zero
on the router's queue with a per-replica target from the sizing plan."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from deepseek_eks import promql
from deepseek_eks.automation.manifest_gate import check, schema_dir
from deepseek_eks.components.monitoring.autoscaling import (
    ScaleTarget,
    ScalingSpec,
    concurrency_target,
    scaled_object,
)
from deepseek_eks.components.serving import router
from deepseek_eks.settings import ScalingSignal
from deepseek_eks.sizing import PlanRequest, plan
from deepseek_eks.sizing.planner import VLLM_PORT

ROOT = Path(__file__).parents[2]
LLM_D = ROOT / "reference/upstream/llm-d"
FACTS = json.loads((LLM_D / "router-facts.json").read_text())
VALUES = yaml.safe_load((LLM_D / "gie-v1.5.0/charts/standalone/values.yaml").read_text())[
    "inferenceExtension"
]


def test_the_router_pins_are_the_releases_read_upstream() -> None:
    assert FACTS["standalone_chart"]["oci"] == router.ROUTER_CHART
    assert FACTS["standalone_chart"]["version"] == router.ROUTER_CHART_VERSION
    assert FACTS["images"]["epp"]["image"] == router.EPP_IMAGE
    assert VALUES["sidecar"]["image"] == router.PROXY_IMAGE
    assert VALUES["extProcPort"] == router.EPP_GRPC_PORT
    assert VALUES["extraServicePorts"][0]["port"] == router.PROXY_PORT


def test_the_inference_pool_is_valid_and_selects_the_vllm_pods() -> None:
    pool = router.inference_pool("deepseek", {"app.kubernetes.io/part-of": "deepseek-eks"})
    assert check(pool, "1.34", schema_dir()) == []
    assert pool["spec"]["targetPorts"] == [{"number": VLLM_PORT}]
    assert pool["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "vllm"}


def _spec(min_replicas: int, target: float) -> ScalingSpec:
    return ScalingSpec(
        signal=ScalingSignal.ROUTER_QUEUE,
        namespace="deepseek",
        target=ScaleTarget("apps/v1", "Deployment", "vllm"),
        min_replicas=min_replicas,
        max_replicas=3,
        target_gpu_utilization=50,
        queue_depth_per_replica=5,
        startup_seconds=300,
        scope=promql.Scope("deepseek", "r1-distill-qwen-7b"),
        prometheus_url="http://kps-prometheus.monitoring.svc:9090",
        labels={},
        target_concurrency=target,
    )


def test_router_queue_is_one_scaled_object_that_activates_from_zero() -> None:
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), min_replicas=0, max_replicas=3))
    target = concurrency_target(0.7, sized.max_num_seqs)
    scaled = scaled_object(_spec(0, target))
    assert check(scaled, "1.34", schema_dir()) == []  # the vendored KEDA v2.20.2 schema
    spec = scaled["spec"]
    assert spec["minReplicaCount"] == 0
    (trigger,) = spec["triggers"]
    metadata = trigger["metadata"]
    assert trigger["name"] == "router-queue" and metadata["activationThreshold"] == "0"
    # The per-replica target is the plan's batch share, not a hand-tuned number.
    assert float(metadata["threshold"]) == target == round(0.7 * sized.max_num_seqs, 2)
    # The query reads the router's own queue and in-flight gauges, by the names its source registers.
    metrics = FACTS["router_metrics"]
    assert metrics["queue"]["name"] in metadata["query"] and metrics["in_flight"]["name"] in metadata["query"]
    assert "inference_extension_info" in metadata["query"] and "vllm:" not in metadata["query"]
    assert metadata["ignoreNullValues"] == "false"
    assert spec["fallback"]["replicas"] == 1  # an error never scales a minReplicas-0 target to zero


def _json_tags(go_type: str) -> set[str]:
    """The json tags of one struct of the EndpointPickerConfig types (endpointpickerconfig_types.go,
    as gie-v1.5.0/source-excerpts.json quotes them)."""
    excerpts = json.loads((LLM_D / "gie-v1.5.0/source-excerpts.json").read_text())
    return set(excerpts["endpointpickerconfig_types.go"]["json_tags"][go_type])


def test_the_picker_config_uses_upstream_fields_the_charts_scoring_and_a_bounded_timed_queue() -> None:
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), min_replicas=0, max_replicas=3))
    config = router.endpoint_picker_config(sized, max_replicas=3)
    assert set(config) - {"apiVersion", "kind"} <= _json_tags("EndpointPickerConfig")
    assert set(config["flowControl"]) <= _json_tags("FlowControlConfig")
    assert config["featureGates"] == [FACTS["flow_control"]["feature_gate"]]
    profile = {p["pluginRef"]: p["weight"] for p in config["schedulingProfiles"][0]["plugins"]}
    assert profile == FACTS["scoring"]["weights"]  # the chart's own profile: prefix cache 3, load 2 + 2
    # Without a TTL a queued request waits until its client leaves (upstream default): ours is the
    # cold start the plan budgets, and the queue holds at most what the fleet at maxReplicas runs.
    wait = router.cold_request_wait_seconds(sized)
    assert config["flowControl"]["defaultRequestTTL"] == f"{wait}s"
    stages = sized.startup_breakdown
    assert wait > stages["node"] + stages["image"] + stages["weights"] + stages["engine"]
    assert config["flowControl"]["maxRequests"] == str(3 * sized.max_num_seqs)
