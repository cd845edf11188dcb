"""llm-d's router for ``routing.kind llm-d``, in its standalone form: the Gateway API Inference
Extension endpoint picker (EPP) with its Envoy proxy in one pod, behind an ordinary Service, no
Gateway implementation. Pinned at the release read in reference/upstream/llm-d (README.md,
router-facts.json): kubernetes-sigs/gateway-api-inference-extension v1.5.0 (df9f8909).

Only the InferencePool is built here so far; the router's Deployment, Service, RBAC and network
policies are not, and the program refuses ``routing.kind llm-d`` until they are
(components/service.py ``UNRENDERED_ROUTING``)."""

from __future__ import annotations

from typing import Any

from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.planner import VLLM_PORT

from ..monitoring.autoscaling import POLLING_INTERVAL_S
from .vllm import selector_labels

# The standalone chart and its images (config/charts/standalone/values.yaml at v1.5.0; the chart's
# OCI version is the release tag: hack/push-chart.sh, and llm-d.ai's router recipe installs it so).
ROUTER_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/standalone"
ROUTER_CHART_VERSION = "v1.5.0"
EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
PROXY_IMAGE = "docker.io/envoyproxy/envoy:distroless-v1.33.2"
# The EPP's ext-proc gRPC port (pkg/epp/server/options.go DefaultGrpcPort, the chart's extProcPort)
# and the proxy's client listener (the chart's envoy.yaml listener "vllm", on the Service through
# extraServicePorts).
EPP_GRPC_PORT = 9002
PROXY_PORT = 8081
INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
POOL_NAME = "vllm"
EPP_NAME = "vllm-epp"


def inference_pool(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The InferencePool the standalone chart renders (charts/standalone/templates/inferencepool.yaml):
    the vLLM pods by their selector labels, on vLLM's port, and the EPP that picks among them."""
    return {
        "apiVersion": INFERENCE_POOL_API,
        "kind": "InferencePool",
        "metadata": {"name": POOL_NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "targetPorts": [{"number": VLLM_PORT}],
            "selector": {"matchLabels": selector_labels()},
            "endpointPickerRef": {"name": EPP_NAME, "port": {"number": EPP_GRPC_PORT}},
        },
    }


# The chart's scoring profile with the latency predictor off (charts/epplib/templates/_config.yaml):
# load (queue, KV cache) and prefix-cache affinity, prefix weighted highest.
SCORER_WEIGHTS = {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3}
FLOW_CONTROL_GATE = "flowControl"  # pkg/epp/flowcontrol/config.go FeatureGate


def cold_request_wait_seconds(sizing_plan: SizingPlan) -> int:
    """The longest a request that finds no replica waits in the router's queue: KEDA's next read
    of the queue, then a replica started on a new node within the plan's rollout budget (node,
    image, the startup probe's budget and scheduling slack). Past it the router answers 503."""
    return POLLING_INTERVAL_S + sizing_plan.rollout_seconds


def endpoint_picker_config(sizing_plan: SizingPlan, max_replicas: int) -> dict[str, Any]:
    """The EPP's EndpointPickerConfig (apix/config/v1alpha1, fields by their json tags): the chart's
    scoring profile, and the flow-control queue the router-queue signal reads, bounded to what the
    fleet at maxReplicas runs at once and timed out at the cold-start wait, so a request never
    hangs (without defaultRequestTTL it would wait until its client gave up)."""
    return {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "featureGates": [FLOW_CONTROL_GATE],
        "plugins": [
            *({"type": name} for name in SCORER_WEIGHTS),
            {"type": "metrics-data-source", "parameters": {"scheme": "http", "path": "/metrics"}},
            {"type": "core-metrics-extractor"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [{"pluginRef": name, "weight": weight} for name, weight in SCORER_WEIGHTS.items()],
            }
        ],
        "flowControl": {
            "maxRequests": str(max_replicas * sizing_plan.max_num_seqs),
            "defaultRequestTTL": f"{cold_request_wait_seconds(sizing_plan)}s",
        },
    }
