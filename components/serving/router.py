"""llm-d's router for ``routing.kind llm-d``, in its standalone form: the Gateway API Inference
Extension endpoint picker (EPP) with its Envoy proxy in one pod, behind an ordinary Service, no
Gateway implementation. Pinned at the release read in reference/upstream/llm-d (README.md,
router-facts.json): kubernetes-sigs/gateway-api-inference-extension v1.5.0 (df9f8909).

Rendered here as manifests rather than as the standalone chart: the chart has no value for a pod
or container securityContext (charts/epplib/templates/_deployment.yaml), so its pod would be
refused by the ``restricted`` Pod Security level the service's namespace enforces. Every object
below follows the chart's template it names, hardened; the manifests are pure (no resources)."""

from __future__ import annotations

from typing import Any

import yaml

from deepseek_eks import promql
from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.planner import VLLM_PORT

from ..monitoring.autoscaling import POLLING_INTERVAL_S
from ..monitoring.prometheus_names import PROMETHEUS_SELECTOR
from ..versions import EPP_IMAGE, LLM_D_ROUTER_CHART, LLM_D_ROUTER_RELEASE, ROUTER_PROXY_IMAGE
from .vllm import checkov_annotations, container_security_context, pod_security_context, selector_labels

# The standalone chart the manifests follow, and its images (components/versions.py; the chart's
# OCI version is the release tag: hack/push-chart.sh, and llm-d.ai's router recipe installs it so).
ROUTER_CHART = LLM_D_ROUTER_CHART
ROUTER_CHART_VERSION = LLM_D_ROUTER_RELEASE
PROXY_IMAGE = ROUTER_PROXY_IMAGE
# The EPP's ext-proc gRPC port (pkg/epp/server/options.go DefaultGrpcPort, the chart's extProcPort)
# and the proxy's client listener (the chart's envoy.yaml listener "vllm", on the Service through
# extraServicePorts); the EPP's gRPC health and metrics ports (options.go NewOptions); the
# proxy's readiness listener (envoy.yaml "envoy-proxy-ready", health_check filter on /ready).
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
PROXY_PORT = 8081
PROXY_READY_PORT = 19001
PROXY_READY_PATH = "/ready"
PROXY_ADMIN_PORT = 19000  # loopback only: nothing outside the pod reads it
INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
POOL_NAME = "vllm"
EPP_NAME = "vllm-epp"
# The router's own objects: the Deployment, Service, ServiceAccount and policies are named
# vllm-router, its pods labelled so (never vLLM's app label, which the vLLM Service selects).
ROUTER = "vllm-router"
ROUTER_PORT_NAME = "http"
METRICS_PORT_NAME = "metrics"
PLUGINS_FILE = "default-plugins.yaml"
ENVOY_FILE = "envoy.yaml"
CONFIG_MOUNT = "/config"
ENVOY_MOUNT = "/etc/envoy"
# The header the EPP names the picked pod in, read by the proxy's ORIGINAL_DST cluster
# (envoy.yaml original_destination_cluster, original_dst_lb_config.http_header_name).
DESTINATION_HEADER = "x-gateway-destination-endpoint"
# The EPP's health service the chart probes with one replica (_deployment.yaml livenessProbe).
EPP_HEALTH_SERVICE = "inference-extension"
# The CRDs the EPP's controllers watch (config/crd/kustomization.yaml at v1.5.0; the EPP reconciles
# InferencePool, InferenceObjective and InferenceModelRewrite, so all three must be installed even
# though only a pool is created). Files copied verbatim into crds/ beside this module.
CRD_FILES = (
    "inference.networking.k8s.io_inferencepools.yaml",
    "inference.networking.x-k8s.io_inferenceobjectives.yaml",
    "inference.networking.x-k8s.io_inferencemodelrewrites.yaml",
)
# A request the router cannot place before its TTL gets a 503 (admission.go QueueOutcomeEvictedTTL
# -> error.go ServiceUnavailable): the proxy adds Retry-After, as nothing at v1.5.0 does.
QUEUE_TIMEOUT_STATUS = 503


def router_labels() -> dict[str, str]:
    """The router pods' selector labels (never vLLM's, which the vLLM Service selects)."""
    return {"app.kubernetes.io/name": ROUTER}


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


def _typed(type_name: str, **fields: Any) -> dict[str, Any]:
    return {"@type": f"type.googleapis.com/{type_name}", **fields}


HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER_FILTER = {
    "name": "envoy.filters.http.router",
    "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router", suppress_envoy_headers=True),
}


def _socket(address: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": address, "port_value": port}}


def _static_cluster(name: str, port: int, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STATIC",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _socket("127.0.0.1", port)}}]}],
        },
        **fields,
    }


def _ready_listener() -> dict[str, Any]:
    """The readiness listener: the health_check filter answers /ready itself (the chart's
    envoy-proxy-ready listener), anything else 404."""
    return {
        "name": "ready",
        "address": _socket("0.0.0.0", PROXY_READY_PORT),
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": _typed(
                            HCM,
                            stat_prefix="ready",
                            route_config={
                                "name": "ready",
                                "virtual_hosts": [
                                    {
                                        "name": "ready",
                                        "domains": ["*"],
                                        "routes": [
                                            {"match": {"prefix": "/"}, "direct_response": {"status": 404}}
                                        ],
                                    }
                                ],
                            },
                            http_filters=[
                                {
                                    "name": "envoy.filters.http.health_check",
                                    "typed_config": _typed(
                                        "envoy.extensions.filters.http.health_check.v3.HealthCheck",
                                        pass_through_mode=False,
                                        headers=[
                                            {"name": ":path", "string_match": {"exact": PROXY_READY_PATH}}
                                        ],
                                    ),
                                },
                                ROUTER_FILTER,
                            ],
                        ),
                    }
                ]
            }
        ],
    }


def _client_listener(sizing_plan: SizingPlan) -> dict[str, Any]:
    """The client listener: ext-proc to the picker, then the ORIGINAL_DST cluster; stream timeouts
    from the plan's drain budget; Retry-After on a 503 (see ``envoy_config``)."""
    stream_s = f"{max(sizing_plan.drain_seconds, 1)}s"
    retry_after = str(cold_request_wait_seconds(sizing_plan))
    return {
        "name": "vllm",
        "address": _socket("0.0.0.0", PROXY_PORT),
        "per_connection_buffer_limit_bytes": 32768,
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": _typed(
                            HCM,
                            stat_prefix="vllm",
                            stream_idle_timeout=stream_s,
                            route_config={
                                "name": "vllm",
                                "virtual_hosts": [
                                    {
                                        "name": "vllm",
                                        "domains": ["*"],
                                        "routes": [
                                            {
                                                "match": {"prefix": "/"},
                                                "route": {
                                                    "cluster": "original_destination_cluster",
                                                    "timeout": stream_s,
                                                    "idle_timeout": stream_s,
                                                },
                                            }
                                        ],
                                    }
                                ],
                            },
                            http_filters=[
                                {
                                    "name": "envoy.filters.http.ext_proc",
                                    "typed_config": _typed(
                                        "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
                                        grpc_service={
                                            "envoy_grpc": {
                                                "cluster_name": "ext_proc",
                                                "authority": f"localhost:{EPP_GRPC_PORT}",
                                            },
                                            "timeout": "10s",
                                        },
                                        processing_mode={
                                            "request_header_mode": "SEND",
                                            "response_header_mode": "SEND",
                                            "request_body_mode": "FULL_DUPLEX_STREAMED",
                                            "response_body_mode": "FULL_DUPLEX_STREAMED",
                                            "request_trailer_mode": "SEND",
                                            "response_trailer_mode": "SEND",
                                        },
                                        # The chart's: a queued request's headers wait for the
                                        # EPP's answer as long as the queue may hold it.
                                        message_timeout=f"{int(retry_after) + 60}s",
                                    ),
                                },
                                ROUTER_FILTER,
                            ],
                            use_remote_address=True,
                            normalize_path=True,
                            merge_slashes=True,
                            common_http_protocol_options={
                                "headers_with_underscores_action": "REJECT_REQUEST"
                            },
                            path_with_escaped_slashes_action="UNESCAPE_AND_REDIRECT",
                            local_reply_config={
                                "mappers": [
                                    {
                                        "filter": {
                                            "status_code_filter": {
                                                "comparison": {
                                                    "op": "EQ",
                                                    "value": {
                                                        "default_value": QUEUE_TIMEOUT_STATUS,
                                                        "runtime_key": "router.retry_after_status",
                                                    },
                                                }
                                            }
                                        },
                                        "headers_to_add": [
                                            {
                                                "header": {"key": "retry-after", "value": retry_after},
                                                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
                                            }
                                        ],
                                    }
                                ]
                            },
                        ),
                    }
                ]
            }
        ],
    }


def envoy_config(sizing_plan: SizingPlan) -> dict[str, Any]:
    """The proxy's bootstrap, after the chart's envoy.yaml (charts/standalone/values.yaml
    inferenceExtension.sidecar.configMap): a readiness listener answering /ready itself; the client
    listener, which hands each request to the EPP over ext-proc (headers and bodies streamed both
    ways, as the chart sets) and forwards it to the pod the EPP names in
    ``x-gateway-destination-endpoint`` through an ORIGINAL_DST cluster; the EPP over plaintext
    HTTP/2 on loopback (the chart's cluster uses TLS; the EPP's ``--secure-serving`` defaults to
    true and is turned off in ``epp_args`` because both ends share the pod's loopback).

    Two departures from the chart, on purpose: the route and stream timeouts follow the plan's
    longest request and drain (``drain_seconds``) instead of a day, and a 503 the proxy returns
    (the EPP's queue timeout, sent as an ext-proc immediate response, which Envoy's HTTP connection
    manager emits as a local reply) carries ``Retry-After`` set to the cold-start wait, through the
    connection manager's ``local_reply_config`` (Envoy docs, "Local reply modification")."""
    http2 = {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            explicit_http_config={"http2_protocol_options": {}},
        )
    }
    return {
        "admin": {"address": _socket("127.0.0.1", PROXY_ADMIN_PORT)},
        "static_resources": {
            "listeners": [_ready_listener(), _client_listener(sizing_plan)],
            "clusters": [
                {
                    "name": "original_destination_cluster",
                    "type": "ORIGINAL_DST",
                    "connect_timeout": "10s",
                    "lb_policy": "CLUSTER_PROVIDED",
                    "original_dst_lb_config": {
                        "use_http_header": True,
                        "http_header_name": DESTINATION_HEADER,
                    },
                },
                _static_cluster(
                    "ext_proc",
                    EPP_GRPC_PORT,
                    connect_timeout="10s",
                    typed_extension_protocol_options=http2,
                ),
            ],
        },
    }


def epp_args(namespace: str) -> list[str]:
    """The EPP's flags as the chart's _deployment.yaml gives them with its own pool, plus three
    settings of ours: plaintext ext-proc on the pod's loopback (``--secure-serving=false``: the
    proxy is the only client, in the same pod), tracing off, and an unauthenticated /metrics on a
    port the network policy opens to Prometheus only (``--metrics-endpoint-auth=false``, which the
    chart sets when monitoring.prometheus.auth.enabled is false)."""
    return [
        "--pool-name",
        POOL_NAME,
        "--pool-namespace",
        namespace,
        "--pool-group",
        INFERENCE_POOL_API.split("/")[0],
        "--zap-encoder",
        "json",
        "--config-file",
        f"{CONFIG_MOUNT}/{PLUGINS_FILE}",
        "--secure-serving=false",
        "--tracing=false",
        "--metrics-endpoint-auth=false",
    ]


# Checks the router's pods fail on purpose, each with its reason (checkov reads these annotations).
ROUTER_CHECKOV_SKIPS = {
    "CKV_K8S_43": "pinned by release tag (GIE v1.5.0's chart values); no registry was reachable to "
    "resolve a digest",
    # The proxy's image is on Docker Hub, which counts a tag check as a pull (as for vLLM's image,
    # serving/vllm.py CHECKOV_SKIPS).
    "CKV_K8S_15": "IfNotPresent on purpose: the pinned tags are releases, and Always would make every "
    "router start ask Docker Hub for the proxy's tag, a pull against the NAT address's limit",
    # The EPP watches its InferencePool and the pool's pods through the API server
    # (pkg/epp/controller), so its service account's token is mounted.
    "CKV_K8S_38": "the endpoint picker watches pods and its InferencePool through the Kubernetes API",
}


def _config_volume(name: str, key: str) -> dict[str, Any]:
    return {"name": name, "configMap": {"name": ROUTER, "items": [{"key": key, "path": key}]}}


def _proxy_container(image: str, grace_seconds: int, hardened: dict[str, Any]) -> dict[str, Any]:
    """Envoy, as the chart's sidecar runs it, with its configuration read-only from the ConfigMap."""
    return {
        "name": "proxy",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["envoy"],
        # --disable-hot-restart: Kubernetes replaces the container, it is never hot-restarted, so
        # Envoy needs no shared-memory region for it (Envoy command-line options docs).
        "args": [
            "--service-node",
            ROUTER,
            "--log-level",
            "warn",
            "--disable-hot-restart",
            "--drain-strategy",
            "immediate",
            "--drain-time-s",
            str(grace_seconds),
            "-c",
            f"{ENVOY_MOUNT}/{ENVOY_FILE}",
        ],
        "ports": [
            {"name": ROUTER_PORT_NAME, "containerPort": PROXY_PORT, "protocol": "TCP"},
            {"name": "ready", "containerPort": PROXY_READY_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {
            "httpGet": {"path": PROXY_READY_PATH, "port": PROXY_READY_PORT},
            "periodSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": PROXY_READY_PATH, "port": PROXY_READY_PORT},
            "periodSeconds": 10,
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "512Mi"},
            "limits": {"cpu": "2", "memory": "1Gi"},
        },
        "securityContext": hardened,
        "volumeMounts": [{"name": "envoy", "mountPath": ENVOY_MOUNT, "readOnly": True}],
    }


def _epp_container(namespace: str, hardened: dict[str, Any]) -> dict[str, Any]:
    """The endpoint picker, probed on its gRPC health service as the chart does."""
    return {
        "name": "epp",
        "image": EPP_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": epp_args(namespace),
        "ports": [
            {"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {
                "name": METRICS_PORT_NAME,
                "containerPort": EPP_METRICS_PORT,
                "protocol": "TCP",
            },
        ],
        "livenessProbe": {
            "grpc": {"port": EPP_HEALTH_PORT, "service": EPP_HEALTH_SERVICE},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "readinessProbe": {
            "grpc": {"port": EPP_HEALTH_PORT, "service": EPP_HEALTH_SERVICE},
            "periodSeconds": 2,
        },
        "env": [
            {
                "name": "NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
            },
        ],
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "4", "memory": "2Gi"},
        },
        "securityContext": hardened,
        "volumeMounts": [{"name": "plugins", "mountPath": CONFIG_MOUNT, "readOnly": True}],
    }


def deployment(
    namespace: str,
    labels: dict[str, str],
    config_hash: str,
    grace_seconds: int,
    proxy_image: str = PROXY_IMAGE,
) -> dict[str, Any]:
    """One router pod (the chart's single replica and Recreate strategy: the prefix-cache scorer
    keeps its index in memory, so two pickers would split it), the proxy and the EPP in it,
    hardened to the restricted Pod Security level. ``config_hash`` rolls the pod when its
    configuration changes; ``grace_seconds`` lets streams in flight finish (the chart: the
    longest grace period of the pool's pods). ``proxy_image``: the proxy's image as pulled
    (``image.registry`` applied: it is on Docker Hub)."""
    pod_labels = {**labels, **router_labels()}
    hardened = container_security_context()
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": ROUTER,
            "namespace": namespace,
            "labels": pod_labels,
            "annotations": checkov_annotations(ROUTER_CHECKOV_SKIPS),
        },
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": router_labels()},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        "deepseek-eks/router-config": config_hash,
                    },
                },
                "spec": {
                    "serviceAccountName": ROUTER,
                    "automountServiceAccountToken": True,
                    "terminationGracePeriodSeconds": grace_seconds,
                    "securityContext": pod_security_context(),
                    "containers": [
                        _proxy_container(proxy_image, grace_seconds, hardened),
                        _epp_container(namespace, hardened),
                    ],
                    "volumes": [_config_volume("envoy", ENVOY_FILE), _config_volume("plugins", PLUGINS_FILE)],
                },
            },
        },
    }


def config_map(
    namespace: str, labels: dict[str, str], sizing_plan: SizingPlan, max_replicas: int
) -> dict[str, Any]:
    """The EPP's plugins file and the proxy's bootstrap, as the chart's two ConfigMaps hold them."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ROUTER, "namespace": namespace, "labels": labels},
        "data": {
            PLUGINS_FILE: yaml.safe_dump(endpoint_picker_config(sizing_plan, max_replicas), sort_keys=False),
            ENVOY_FILE: yaml.safe_dump(envoy_config(sizing_plan), sort_keys=False),
        },
    }


def service(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The router's Service (charts/epplib/templates/_service.yaml with extraServicePorts): the
    proxy's client port for the load balancer, the EPP's metrics for Prometheus. The EPP's gRPC
    port is not on it: only the proxy in the same pod calls it, on loopback."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": ROUTER,
            "namespace": namespace,
            "labels": {**labels, **router_labels()},
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": router_labels(),
            "ports": [
                {
                    "name": ROUTER_PORT_NAME,
                    "port": PROXY_PORT,
                    "targetPort": ROUTER_PORT_NAME,
                    "protocol": "TCP",
                },
                {
                    "name": METRICS_PORT_NAME,
                    "port": EPP_METRICS_PORT,
                    "targetPort": METRICS_PORT_NAME,
                    "protocol": "TCP",
                },
            ],
        },
    }


def rbac(namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The EPP's ServiceAccount and namespaced read access (charts/epplib/templates/_rbac.yaml with
    the chart's own pool): its pool's pods, the InferencePool, and the InferenceObjectives and
    InferenceModelRewrites its controllers watch. No ClusterRole: the token and subject-access
    reviews the chart grants serve only an authenticated /metrics, which is off here."""
    meta = {"name": ROUTER, "namespace": namespace, "labels": labels}
    read = ["get", "list", "watch"]
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta,
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {
                    "apiGroups": ["inference.networking.k8s.io"],
                    "resources": ["inferencepools"],
                    "verbs": read,
                },
                {
                    "apiGroups": ["inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": read,
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROUTER},
            "subjects": [{"kind": "ServiceAccount", "name": ROUTER, "namespace": namespace}],
        },
    ]


def network_policy(
    namespace: str,
    labels: dict[str, str],
    *,
    load_balancer_cidrs: list[str],
    monitoring_namespace: str,
) -> dict[str, Any]:
    """Admit the load balancer's subnets to the proxy (requests and the readiness health check)
    and Prometheus to the EPP's metrics; let out DNS, the vLLM pods on their port (the proxy
    connects to the picked pod's IP directly, and the EPP scrapes each pod's /metrics there) and,
    through ``with_api_egress``, the API server. The EPP's gRPC port stays on loopback."""
    if not load_balancer_cidrs:
        raise ValueError(
            "router network_policy: no load balancer subnet CIDRs; the endpoint would be unreachable"
        )
    prometheus = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": monitoring_namespace}},
        "podSelector": {"matchLabels": dict(PROMETHEUS_SELECTOR)},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": ROUTER, "namespace": namespace, "labels": labels},
        "spec": {
            "podSelector": {"matchLabels": router_labels()},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [{"ipBlock": {"cidr": cidr}} for cidr in load_balancer_cidrs],
                    "ports": [
                        {"port": PROXY_PORT, "protocol": "TCP"},
                        {"port": PROXY_READY_PORT, "protocol": "TCP"},
                    ],
                },
                {"from": [prometheus], "ports": [{"port": EPP_METRICS_PORT, "protocol": "TCP"}]},
            ],
            "egress": [
                {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
                {
                    "to": [{"podSelector": {"matchLabels": selector_labels()}}],
                    "ports": [{"port": VLLM_PORT, "protocol": "TCP"}],
                },
            ],
        },
    }


def pod_monitor(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """Prometheus scrapes the EPP's /metrics (its queue and in-flight gauges, which the
    router-queue signal reads), unauthenticated on a port only Prometheus may reach."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": ROUTER, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": router_labels()},
            "podMetricsEndpoints": [{"port": METRICS_PORT_NAME, "path": "/metrics", "interval": "15s"}],
        },
    }


def prometheus_rule(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The router's alerts (promql.router_alerts): down, or answering 503 after its queue timeout."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": ROUTER, "namespace": namespace, "labels": labels},
        "spec": {
            "groups": [
                {
                    "name": "deepseek-router",
                    "rules": [a.as_rule() for a in promql.router_alerts(namespace)],
                }
            ]
        },
    }
