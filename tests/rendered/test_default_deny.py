"""Every namespace the product creates is closed both ways, and its workloads keep exactly the
flows they need (issue 23 item 5).

The rendered NetworkPolicies are evaluated (``tests/netpol.py``) for the monitoring stack's pods,
modelled from the pinned charts: the ports come from the charts' own ``values.yaml``
(``reference/upstream/helm-charts``), Prometheus' labels from prometheus-operator
(``serving-facts.json``), and where the API server and its callbacks sit on EKS from
``network-policy-facts.json`` (the service CIDR defaults; the control plane's interfaces in the
cluster's subnets). Pod addresses are taken from the rendered subnets.
"""

from __future__ import annotations

import ipaddress
import re
from functools import cache
from typing import Any

import pytest

from deepseek_eks.components.versions import DCGM_EXPORTER, KUBE_PROMETHEUS_STACK, PROMETHEUS_ADAPTER
from tests.netpol import Host, Pod
from tests.rendered.test_network_policies import (
    CASES,
    COREDNS,
    HUGGING_FACE_ADDRESS,
    INTERNET_ADDRESS,
    NODE_LOCAL_DNS,
    PROMETHEUS,
    S3_ADDRESS,
    host_in,
    stack,
)
from tests.upstream import helm_chart_defaults, network_policy_facts, serving_facts

KPS = helm_chart_defaults("kube-prometheus-stack", KUBE_PROMETHEUS_STACK.version).values
ADAPTER = helm_chart_defaults("prometheus-adapter", PROMETHEUS_ADAPTER.version).values
DCGM = helm_chart_defaults("dcgm-exporter", DCGM_EXPORTER.version).values
KSM = helm_chart_defaults("kube-state-metrics", "8.4.0").values
NODE_EXPORTER = helm_chart_defaults("prometheus-node-exporter", "4.56.1").values
GRAFANA = helm_chart_defaults("grafana", "12.11.1").values

PROMETHEUS_PORT = KPS["prometheus"]["service"]["port"]
OPERATOR_WEBHOOK_PORT = KPS["prometheusOperator"]["tls"]["internalPort"]
ADAPTER_PORT = ADAPTER["listenPort"]
DCGM_PORT = DCGM["service"]["port"]
KSM_PORT = KSM["service"]["port"]
NODE_EXPORTER_PORT = NODE_EXPORTER["service"]["port"]
GRAFANA_PORT = GRAFANA["service"]["targetPort"]
KUBELET_PORT = 10250  # the kubelet's HTTPS port (kube-prometheus-stack's kubelet ServiceMonitor)

# The monitoring stack's pods. Only Prometheus' labels matter to the policies (the others are
# admitted as pods of their namespace), so the others carry their charts' usual name label.
GRAFANA_POD = Pod("monitoring", {"app.kubernetes.io/name": "grafana"}, {"grafana": GRAFANA_PORT})
OPERATOR = Pod("monitoring", {"app": "kube-prometheus-stack-operator"}, {"https": OPERATOR_WEBHOOK_PORT})
ADAPTER_POD = Pod("monitoring", {"app.kubernetes.io/name": "prometheus-adapter"}, {"https": ADAPTER_PORT})
KSM_POD = Pod("monitoring", {"app.kubernetes.io/name": "kube-state-metrics"}, {"http": KSM_PORT})
DCGM_POD = Pod("node-monitoring", {"app.kubernetes.io/name": "dcgm-exporter"}, {"metrics": DCGM_PORT})
KEDA_OPERATOR = Pod("keda", {"app": "keda-operator"})
STRANGER = Pod("default", {"app": "curl"})
MONITORING_PODS = (PROMETHEUS, GRAFANA_POD, OPERATOR, ADAPTER_POD, KSM_POD)


@cache
def namespaces(case: str) -> list[str]:
    """The Namespace objects the render creates, and the namespaces its charts create (every
    release namespace but kube-system, which EKS owns)."""
    rendered = stack(case).rendered
    created = [o["metadata"]["name"] for o in rendered.objects() if o["kind"] == "Namespace"]
    charts = {r["namespace"] for r in rendered.helm.values()} - {"kube-system", *created}
    return [*created, *sorted(charts)]


def is_default_deny(policy: dict[str, Any]) -> bool:
    spec = policy["spec"]
    return (
        spec.get("podSelector") in ({}, None)
        and set(spec.get("policyTypes") or []) == {"Ingress", "Egress"}
        and not spec.get("ingress")
        and not spec.get("egress")
    )


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_namespace_the_render_creates_is_closed_both_ways(case: str) -> None:
    found = namespaces(case)
    assert {"monitoring", "node-monitoring"} <= set(found), found
    if case.startswith("r1"):
        assert {"keda", "lws-system"} <= set(found), found  # the KEDA and LWS charts' own
    for ns in found:
        policies = [p for p in stack(case).cluster.policies if p["metadata"]["namespace"] == ns]
        assert any(is_default_deny(p) for p in policies), ns


def test_a_pod_nobody_planned_for_is_isolated_in_every_namespace(case: str) -> None:
    cluster = stack(case).cluster
    for ns in namespaces(case):
        stray = Pod(ns, {"app": "debug"}, {"http": 8080})
        assert not cluster.allows(STRANGER, stray, 8080), ns
        assert not cluster.allows(stray, Host(INTERNET_ADDRESS), 443), ns
        assert not cluster.allows(stray, Host(S3_ADDRESS), 443), ns


def api_server_addresses(case: str) -> list[Host]:
    """The ``kubernetes`` Service's ClusterIP (either EKS default) and its endpoints: the
    control plane's interfaces, in the cluster's (node) subnets."""
    facts = network_policy_facts()
    cluster_ips = [
        Host(str(ipaddress.ip_network(c)[1])) for c in facts["service_ipv4_cidr_defaults"]["value"]
    ]
    return [*cluster_ips, *(host_in(c, 7) for c in stack(case).pod_subnets)]


def test_prometheus_scrapes_vllm_dcgm_the_nodes_and_its_neighbours(case: str) -> None:
    s = stack(case)
    node = host_in(s.pod_subnets[0], 20)  # node-exporter and the kubelet answer on the node
    for dest, port in (
        (s.server, 8000),
        (DCGM_POD, DCGM_PORT),
        (node, NODE_EXPORTER_PORT),
        (node, KUBELET_PORT),
        (KSM_POD, KSM_PORT),
        (GRAFANA_POD, GRAFANA_PORT),
        (COREDNS, 9153),
    ):
        assert s.cluster.allows(PROMETHEUS, dest, port), (dest, port)


def test_the_monitoring_stack_talks_to_the_api_dns_and_itself_and_nothing_else(case: str) -> None:
    s = stack(case)
    for pod in MONITORING_PODS:
        for api in api_server_addresses(case):
            assert s.cluster.allows(pod, api, 443), (pod, api)
        assert s.cluster.allows(pod, COREDNS, 53, "UDP") and s.cluster.allows(
            pod, Host(NODE_LOCAL_DNS), 53, "TCP"
        )
        for outside in (Host(INTERNET_ADDRESS), Host(S3_ADDRESS), Host(HUGGING_FACE_ADDRESS)):
            assert not s.cluster.allows(pod, outside, 443), (pod, outside)
    for client in (GRAFANA_POD, ADAPTER_POD, KEDA_OPERATOR):
        assert s.cluster.allows(client, PROMETHEUS, PROMETHEUS_PORT), client
    # Only Prometheus reaches into other namespaces.
    for pod in (GRAFANA_POD, OPERATOR, ADAPTER_POD, KSM_POD):
        assert not s.cluster.allows(pod, s.server, 8000), pod
        assert not s.cluster.allows(pod, Pod("default", {"app": "web"}, {"http": 8080}), 8080), pod
        assert not s.cluster.allows(pod, DCGM_POD, DCGM_PORT), pod


def test_the_api_server_reaches_the_operator_webhook_and_the_metrics_api(case: str) -> None:
    s = stack(case)
    for api in (host_in(c, 7) for c in s.pod_subnets):
        assert s.cluster.allows(api, OPERATOR, OPERATOR_WEBHOOK_PORT)
        assert s.cluster.allows(api, ADAPTER_POD, ADAPTER_PORT)
        assert not s.cluster.allows(api, GRAFANA_POD, GRAFANA_PORT)


def test_nobody_outside_the_stack_reaches_prometheus_grafana_or_the_exporters(case: str) -> None:
    s = stack(case)
    vllm = s.server
    for source in (STRANGER, vllm, Host(INTERNET_ADDRESS)):
        assert not s.cluster.allows(source, PROMETHEUS, PROMETHEUS_PORT), source
        assert not s.cluster.allows(source, GRAFANA_POD, GRAFANA_PORT), source
        assert not s.cluster.allows(source, DCGM_POD, DCGM_PORT), source
    assert not s.cluster.allows(GRAFANA_POD, DCGM_POD, DCGM_PORT)
    assert not s.cluster.allows(DCGM_POD, Host(INTERNET_ADDRESS), 443)


def test_node_exporter_runs_on_the_host_network() -> None:
    """Why no pod rule can confine it and Prometheus scrapes it at node addresses."""
    assert NODE_EXPORTER["hostNetwork"] is True and DCGM["hostNetwork"] is False


def model_source(pod_template: dict[str, Any]) -> str:
    """What vLLM is told to load: ``--model X`` in its arguments or its shell command line."""
    container = pod_template["spec"]["containers"][0]
    line = " ".join([*container.get("command", []), *container.get("args", [])])
    found = re.search(r"--model[=\s]+'?([^\s']+)", line)
    assert found, line
    return found[1]


def test_only_pods_that_download_get_https(case: str) -> None:
    """vLLM reading weights from a local volume (Mountpoint, an EBS snapshot) needs no 443; the
    stager and vLLM downloading from Hugging Face or streaming from S3 do."""
    s = stack(case)
    templates = {}
    for obj in s.rendered.objects():
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "vllm":
            templates["vllm"] = obj["spec"]["template"]
        if obj["kind"] == "LeaderWorkerSet":
            templates["vllm"] = obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    local = model_source(templates["vllm"]).startswith("/")
    assert s.cluster.allows(s.server, Host(S3_ADDRESS), 443) is not local
    assert s.cluster.allows(s.server, Host(HUGGING_FACE_ADDRESS), 443) is not local
    for stager in (w.pod for w in s.workloads if w.kind == "Job"):
        assert s.cluster.allows(stager, Host(S3_ADDRESS), 443)


def test_local_weights_cases_exist() -> None:
    """The previous test is not vacuous: some cases serve from a local volume, some download."""
    sources = {c: stack(c).cluster.allows(stack(c).server, Host(S3_ADDRESS), 443) for c in CASES}
    assert not sources["dev-s3-mountpoint"] and not sources["r1-ebs-snapshot"]
    assert sources["dev"] and sources["r1"]


LBC = helm_chart_defaults("aws-load-balancer-controller", "3.5.0")
KARPENTER = helm_chart_defaults("karpenter", "1.14.1").values
# aws-load-balancer-controller 3.5.0 values.yaml: "The TCP port the Webhook server binds to.
# (default 9443)" (webhookBindPort left empty).
LBC_WEBHOOK_PORT = 9443


def test_webhooks_in_kube_system_stay_reachable_from_the_api_server(case: str) -> None:
    """The load balancer controller's webhook (Karpenter 1.14's chart has none) lives in
    kube-system, which the program does not close: the API server still reaches it."""
    s = stack(case)
    assert "(default 9443)" in (LBC.folder / "values.yaml").read_text()
    assert "webhook" not in KARPENTER
    assert not any(p["metadata"]["namespace"] == "kube-system" for p in s.cluster.policies)
    controller = Pod("kube-system", {"app.kubernetes.io/name": "aws-load-balancer-controller"})
    for api in (host_in(c, 7) for c in s.pod_subnets):
        assert s.cluster.allows(api, controller, LBC_WEBHOOK_PORT)


def test_no_monitoring_pod_holds_a_pod_identity_association(case: str) -> None:
    """Why the monitoring namespaces open no egress to the Pod Identity agent: nothing there
    uses it. A chart that gains an association must get the agent's rule too."""
    s = stack(case)
    owned = {"monitoring", "node-monitoring"}
    assert not {ns for ns, _ in s.associations} & owned
    agent = serving_facts()["eks_pod_identity_agent"]
    for pod in (*MONITORING_PODS, DCGM_POD):
        assert not s.cluster.allows(pod, Host(agent["ipv4"]), agent["port"])


KEDA = helm_chart_defaults("keda", "2.20.2")
LWS = helm_chart_defaults("lws", "0.10.0").values
KEDA_METRICS_API_PORT = KEDA.values["service"]["portHttpsTarget"]
KEDA_WEBHOOK_PORT = 9443  # keda 2.20.2 values.yaml webhooks.port: "Default is 9443" (left empty)
LWS_WEBHOOK_PORT = LWS["service"]["port"]


def test_keda_and_lws_get_their_api_calls_and_queries_and_nothing_else() -> None:
    s = stack("r1")
    assert "Default is 9443" in (KEDA.folder / "values.yaml").read_text()
    keda_operator = Pod("keda", {"app": "keda-operator"})
    keda_metrics = Pod("keda", {"app": "keda-operator-metrics-apiserver"})
    lws_controller = Pod("lws-system", {"control-plane": "controller-manager"})
    for api in (host_in(c, 7) for c in s.pod_subnets):
        assert s.cluster.allows(api, keda_operator, KEDA_WEBHOOK_PORT)
        assert s.cluster.allows(api, keda_metrics, KEDA_METRICS_API_PORT)
        assert s.cluster.allows(api, lws_controller, LWS_WEBHOOK_PORT)
        assert not s.cluster.allows(api, lws_controller, 8080)
    for pod in (keda_operator, keda_metrics, lws_controller):
        for address in api_server_addresses("r1"):
            assert s.cluster.allows(pod, address, 443)
        assert not s.cluster.allows(pod, Host(INTERNET_ADDRESS), 443)
        assert not s.cluster.allows(pod, s.server, 8000)
        assert not s.cluster.allows(STRANGER, pod, 8080)
        assert s.cluster.allows(PROMETHEUS, pod, 8080)  # their metrics
    assert s.cluster.allows(keda_metrics, keda_operator, 9666)  # within the namespace (gRPC)
    assert s.cluster.allows(keda_operator, PROMETHEUS, PROMETHEUS_PORT)  # its Prometheus triggers
    assert not s.cluster.allows(lws_controller, PROMETHEUS, PROMETHEUS_PORT)
