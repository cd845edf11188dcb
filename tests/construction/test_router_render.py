"""What routing.kind llm-d and autoscaling.signal router-queue render so far, checked against
upstream data (reference/upstream/llm-d, the vendored InferencePool and ScaledObject schemas), not
against our own constants: the InferencePool, and the ScaledObject that wakes the service from zero
on the router's queue with a per-replica target from the sizing plan."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from deepseek_eks import promql
from deepseek_eks.components.monitoring.autoscaling import (
    ScaleTarget,
    ScalingSpec,
    concurrency_target,
    scaled_object,
)
from deepseek_eks.components.serving import router
from deepseek_eks.guardrails.manifest_gate import check, schema_dir
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


SOURCE = json.loads((LLM_D / "gie-v1.5.0/source-excerpts.json").read_text())
CHART_ENVOY = yaml.safe_load(VALUES["sidecar"]["configMap"]["data"]["envoy.yaml"])


def _plan():
    return plan(PlanRequest(variant="r1-distill-qwen-7b", families=("g6",)))


def _listener(config: dict, port: int) -> dict:
    (found,) = [
        lst for lst in config["static_resources"]["listeners"]
        if lst["address"]["socket_address"]["port_value"] == port
    ]  # fmt: skip
    return found


def _hcm(listener: dict) -> dict:
    return listener["filter_chains"][0]["filters"][0]["typed_config"]


def test_every_flag_given_to_the_picker_is_one_its_release_defines() -> None:
    defined = set(SOURCE["epp_flags"]["options_go"]) | {"zap-encoder"}  # zap: controller-runtime's
    given = {a[2:].split("=")[0] for a in router.epp_args("deepseek") if a.startswith("--")}
    assert given <= defined, given - defined
    # ext-proc in plaintext on the pod's loopback: the release's default is TLS.
    assert "SecureServing:                    true," in SOURCE["epp_flags"]["defaults"]["SecureServing"]
    assert "--secure-serving=false" in router.epp_args("deepseek")


def test_the_proxy_keeps_the_charts_listener_routing_and_ext_proc_settings() -> None:
    ours = router.envoy_config(_plan())
    chart_client, our_client = _listener(CHART_ENVOY, router.PROXY_PORT), _listener(ours, router.PROXY_PORT)
    chart_filters = {f["name"]: f for f in _hcm(chart_client)["http_filters"]}
    our_filters = {f["name"]: f for f in _hcm(our_client)["http_filters"]}
    assert list(our_filters) == list(chart_filters)  # ext_proc, then the router filter
    ext = "envoy.filters.http.ext_proc"
    assert (
        our_filters[ext]["typed_config"]["processing_mode"]
        == chart_filters[ext]["typed_config"]["processing_mode"]
    )
    assert our_filters[ext]["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] == "ext_proc"
    chart_clusters = {c["name"]: c for c in CHART_ENVOY["static_resources"]["clusters"]}
    our_clusters = {c["name"]: c for c in ours["static_resources"]["clusters"]}
    original = "original_destination_cluster"
    assert (
        our_clusters[original]["original_dst_lb_config"] == chart_clusters[original]["original_dst_lb_config"]
    )
    assert our_clusters[original]["type"] == chart_clusters[original]["type"] == "ORIGINAL_DST"

    # The picker's ext-proc address is the chart's (loopback, its gRPC port).
    def address(cluster: dict) -> dict:
        return cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]

    assert address(our_clusters["ext_proc"]) == address(chart_clusters["ext_proc"])
    # The readiness listener answers /ready itself, as the chart's does.
    ready = {f["name"]: f for f in _hcm(_listener(ours, router.PROXY_READY_PORT))["http_filters"]}
    chart_ready = {
        f["name"]: f for f in _hcm(_listener(CHART_ENVOY, router.PROXY_READY_PORT))["http_filters"]
    }
    health = "envoy.filters.http.health_check"
    assert ready[health]["typed_config"]["headers"] == chart_ready[health]["typed_config"]["headers"]


def test_a_queue_timeout_carries_retry_after_the_cold_start_wait() -> None:
    sizing = _plan()
    hcm = _hcm(_listener(router.envoy_config(sizing), router.PROXY_PORT))
    (mapper,) = hcm["local_reply_config"]["mappers"]
    comparison = mapper["filter"]["status_code_filter"]["comparison"]
    assert (comparison["op"], comparison["value"]["default_value"]) == ("EQ", 503)
    (header,) = mapper["headers_to_add"]
    assert header["header"] == {"key": "retry-after", "value": str(router.cold_request_wait_seconds(sizing))}
    # The picker's own timeout is the same wait (the EndpointPickerConfig's defaultRequestTTL).
    ttl = router.endpoint_picker_config(sizing, 2)["flowControl"]["defaultRequestTTL"]
    assert ttl == f"{router.cold_request_wait_seconds(sizing)}s"


def test_the_router_pod_is_restricted_and_its_probes_use_the_releases_ports() -> None:
    deployment = router.deployment("deepseek", {}, "hash", 120)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in pod["containers"]:
        ctx = container["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"] == {"drop": ["ALL"]}
        assert ctx["readOnlyRootFilesystem"] is True
    epp = next(c for c in pod["containers"] if c["name"] == "epp")
    ports = {p["name"]: p["containerPort"] for p in epp["ports"]}
    options = "\n".join(SOURCE["options.go"]["excerpts"])
    assert f"MetricsPort:                      {ports['metrics']}," in options
    assert f"GRPCHealthPort:                   {ports['grpc-health']}," in options
    assert epp["readinessProbe"]["grpc"]["port"] == ports["grpc-health"]


def test_the_crds_installed_are_the_releases_own() -> None:
    from deepseek_eks.components.serving.routing import crd_manifests

    installed = {c["metadata"]["name"]: c for c in crd_manifests()}
    for name in router.CRD_FILES:
        upstream = yaml.safe_load((LLM_D / "gie-v1.5.0" / name).read_text())
        assert installed[upstream["metadata"]["name"]] == upstream


def test_the_router_role_grants_read_only_what_the_chart_grants() -> None:
    _, role, binding = router.rbac("deepseek", {})
    charts = LLM_D / "gie-v1.5.0/charts"
    chart_rbac = (charts / "epplib/templates/_rbac.yaml").read_text() + (
        charts / "standalone/templates/rbac.yaml"
    ).read_text()
    for rule in role["rules"]:
        assert set(rule["verbs"]) == {"get", "list", "watch"}
        for resource in rule["resources"]:
            assert resource in chart_rbac, resource
    assert binding["subjects"][0]["name"] == router.ROUTER


def test_the_router_alerts_read_metrics_its_release_registers() -> None:
    registered = set(SOURCE["metrics.go"]["registered_metric_names"])
    for alert in promql.router_alerts("deepseek"):
        names = {n for n in registered if n in alert.expr}
        assert names, alert.name
    timeout = "\n".join(SOURCE["outcomes.go"]["excerpts"])
    assert f'return "{promql.ROUTER_TIMED_OUT}"' in timeout
