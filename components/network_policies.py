"""NetworkPolicies of the monitoring namespaces: each is closed both ways by default, then opened
for what its workloads need, port by port, from the charts' own values.

Where the peers sit on EKS (reference/upstream/network-policy-facts.json):

- The API server calls webhooks and aggregated API servers from network interfaces EKS places in
  the cluster's subnets; no label selects them, so they are admitted by the VPC's CIDR (which
  also holds the pods: the port, not the peer, is what is narrow there).
- Pods reach the API through the ``kubernetes`` Service (its ClusterIP, in the EKS service CIDR,
  one of two defaults) and its endpoints (those interfaces, in the VPC): egress 443 names both,
  never the Internet.
- DNS goes to any address on 53: EKS Auto Mode answers it on the node (see egress.py egress_rules).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .egress import HTTPS_PORT, egress_rules
from .monitoring.prometheus_names import PROMETHEUS_PORT, PROMETHEUS_SELECTOR

# Amazon EKS API Reference, KubernetesNetworkConfigRequest.serviceIpv4Cidr: without one, EKS
# takes the service CIDR from either block (the clusters this project creates set none).
EKS_SERVICE_CIDRS = ("10.100.0.0/16", "172.20.0.0/16")
# Ports read from the pinned charts' values (tests check them against reference/upstream):
OPERATOR_WEBHOOK_PORT = 10250  # kube-prometheus-stack 88.5.3 prometheusOperator.tls.internalPort
ADAPTER_PORT = 6443  # prometheus-adapter 5.3.0 listenPort (the aggregated metrics API)
DCGM_EXPORTER_PORT = 9400  # dcgm-exporter 4.8.2 service.port
NODE_EXPORTER_PORT = 9100  # prometheus-node-exporter 4.56.1 service.port (hostNetwork: true)
KUBELET_PORT = 10250  # the kubelet's metrics and cAdvisor, scraped on the node's address
KEDA_WEBHOOK_PORT = 9443  # keda 2.20.2 webhooks.port ("Default is 9443")
KEDA_METRICS_API_PORT = 6443  # keda 2.20.2 service.portHttpsTarget (the metrics server container)
LWS_WEBHOOK_PORT = 9443  # lws 0.10.0 service.port (the controller's webhook service)

DEFAULT_DENY = "default-deny"


@dataclass(frozen=True)
class ClusterCidrs:
    """The addresses the policies name for the cluster's network: every CIDR block of the VPC (its
    primary and its associated blocks, where the nodes, pods and the control plane's interfaces may
    sit) and the service CIDR the ``kubernetes`` Service's ClusterIP is in (an existing cluster's
    ``kubernetesNetworkConfig.serviceIpv4Cidr``; for a cluster this project creates, which sets
    none, either EKS default)."""

    vpc: tuple[str, ...]
    services: tuple[str, ...] = EKS_SERVICE_CIDRS

    @staticmethod
    def of(vpc: Sequence[str], services: Sequence[str] | None = None) -> ClusterCidrs:
        """From lists (as Outputs resolve); duplicates dropped, order kept; no services: the defaults."""
        return ClusterCidrs(tuple(dict.fromkeys(vpc)), tuple(dict.fromkeys(services or EKS_SERVICE_CIDRS)))

    def vpc_peers(self) -> list[dict[str, Any]]:
        return [{"ipBlock": {"cidr": c}} for c in self.vpc]


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"port": p, "protocol": "TCP"} for p in ports]


def _policy(
    name: str, namespace: str, labels: dict[str, str], pods: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    types = [t for t, key in (("Ingress", "ingress"), ("Egress", "egress")) if key in spec]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"podSelector": pods, "policyTypes": types or ["Ingress", "Egress"], **spec},
    }


def default_deny(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """Every pod of ``namespace`` isolated both ways; other policies add what is allowed
    (Kubernetes NetworkPolicy documentation, "Default deny all ingress and all egress traffic")."""
    return _policy(DEFAULT_DENY, namespace, labels, {}, ingress=[], egress=[])


def api_server_rule(cidrs: ClusterCidrs) -> dict[str, Any]:
    """Egress to the Kubernetes API on 443: its ClusterIP and its endpoints, nothing else."""
    return {
        "to": [*cidrs.vpc_peers(), *({"ipBlock": {"cidr": c}} for c in cidrs.services)],
        "ports": _tcp(HTTPS_PORT),
    }


def with_api_egress(policy: dict[str, Any], cidrs: ClusterCidrs | None) -> dict[str, Any]:
    """``policy`` whose pods may also call the Kubernetes API (None: unchanged)."""
    if cidrs is None:
        return policy
    spec = policy["spec"]
    return {**policy, "spec": {**spec, "egress": [*spec["egress"], api_server_rule(cidrs)]}}


def prometheus_peer(monitoring_namespace: str) -> dict[str, Any]:
    """This stack's Prometheus in the monitoring namespace: its pods, and (for egress, as the EKS
    agent judges it before DNAT) its Service's ClusterIP, whose selector is the same one."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": monitoring_namespace}},
        "podSelector": {"matchLabels": dict(PROMETHEUS_SELECTOR)},
    }


def controller_policies(
    namespace: str,
    *,
    name: str,
    cidrs: ClusterCidrs,
    labels: dict[str, str],
    callback_ports: tuple[int, ...],
    monitoring_namespace: str,
    egress_to: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """A namespace of controllers: closed by default; its pods watch the API (DNS and 443 to
    it), talk among themselves, are called by the API server on ``callback_ports`` (webhooks,
    aggregated APIs) and scraped by Prometheus; ``egress_to`` adds what they call elsewhere. None
    holds a Pod Identity association or downloads anything, so nothing else goes out."""
    own: dict[str, Any] = {"podSelector": {}}
    ingress: list[dict[str, Any]] = [
        {"from": [own]},
        {"from": cidrs.vpc_peers(), "ports": _tcp(*callback_ports)},
    ]
    if monitoring_namespace != namespace:  # there, Prometheus is one of its own pods
        ingress.append({"from": [prometheus_peer(monitoring_namespace)]})
    egress = [
        *egress_rules(pod_identity=False, https=False),
        api_server_rule(cidrs),
        {"to": [own]},
        *(egress_to or []),
    ]
    return [
        default_deny(namespace, labels),
        _policy(name, namespace, labels, {}, ingress=ingress, egress=egress),
    ]


def monitoring_policies(
    namespace: str, *, cidrs: ClusterCidrs, labels: dict[str, str], metrics_clients: list[str]
) -> list[dict[str, Any]]:
    """Prometheus, Grafana, prometheus-operator, kube-state-metrics and prometheus-adapter.

    All of them watch the API; they talk among themselves (Grafana and the adapter query
    Prometheus, Prometheus scrapes the others); the API server calls the operator's admission
    webhook and the adapter's metrics API; Prometheus alone reaches out, to scrape pods of every
    namespace and the nodes' kubelet and node-exporter; ``metrics_clients`` (KEDA's namespace,
    whose Prometheus trigger queries it) may query Prometheus. Nothing goes to the Internet:
    Grafana fetches no plugins, Alertmanager is off unless set."""
    prometheus = {"matchLabels": dict(PROMETHEUS_SELECTOR)}
    clients = [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": n}}} for n in metrics_clients
    ]
    policies = [
        *chart_policies(
            "monitoring-stack", namespace, cidrs=cidrs, labels=labels, monitoring_namespace=namespace
        ),
        _policy(
            "prometheus-scrape",
            namespace,
            labels,
            prometheus,
            egress=[
                {"to": [{"namespaceSelector": {}}]},
                {"to": cidrs.vpc_peers(), "ports": _tcp(KUBELET_PORT, NODE_EXPORTER_PORT)},
            ],
        ),
    ]
    if clients:
        policies.append(
            _policy(
                "prometheus-queries",
                namespace,
                labels,
                prometheus,
                ingress=[{"from": clients, "ports": _tcp(PROMETHEUS_PORT)}],
            )
        )
    return policies


# Who the API server calls in each controller namespace (webhooks, aggregated APIs), and whether
# its pods query Prometheus (KEDA's Prometheus triggers).
CONTROLLER_NAMESPACES: dict[str, tuple[tuple[int, ...], bool]] = {
    "monitoring-stack": ((OPERATOR_WEBHOOK_PORT, ADAPTER_PORT), False),
    "keda": ((KEDA_WEBHOOK_PORT, KEDA_METRICS_API_PORT), True),
    "lws": ((LWS_WEBHOOK_PORT,), False),
}


def chart_policies(
    chart: str, namespace: str, *, cidrs: ClusterCidrs, labels: dict[str, str], monitoring_namespace: str
) -> list[dict[str, Any]]:
    """The controller namespace of ``chart`` (a key of CONTROLLER_NAMESPACES): KEDA's operator,
    metrics API server and webhooks query Prometheus and nothing else outside; the
    LeaderWorkerSet controller calls only the API."""
    ports, queries = CONTROLLER_NAMESPACES[chart]
    return controller_policies(
        namespace,
        name=chart,
        cidrs=cidrs,
        labels=labels,
        callback_ports=ports,
        monitoring_namespace=monitoring_namespace,
        egress_to=[{"to": [prometheus_peer(monitoring_namespace)], "ports": _tcp(PROMETHEUS_PORT)}]
        if queries
        else [],
    )


def node_monitoring_policies(
    namespace: str, *, monitoring_namespace: str, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """dcgm-exporter (a pod) and node-exporter (on the host's network, which NetworkPolicy does
    not confine): Prometheus alone scrapes them; they call nothing (dcgm-exporter maps GPUs to
    pods through the kubelet's local pod-resources socket)."""
    return [
        default_deny(namespace, labels),
        _policy(
            "prometheus-scrapes",
            namespace,
            labels,
            {},
            ingress=[
                {
                    "from": [prometheus_peer(monitoring_namespace)],
                    "ports": _tcp(DCGM_EXPORTER_PORT, NODE_EXPORTER_PORT),
                }
            ],
        ),
    ]


PolicyBuilder = Callable[[ClusterCidrs], list[dict[str, Any]]]
"""The policies of some namespaces, given the cluster's network."""


def _nth(build: PolicyBuilder, index: int, cidrs: ClusterCidrs) -> dict[str, Any]:
    return build(cidrs)[index]


def network_policy_resources(
    name: str, build: PolicyBuilder, cidrs: pulumi.Input[ClusterCidrs], opts: pulumi.ResourceOptions
) -> list[k8s.networking.v1.NetworkPolicy]:
    """One NetworkPolicy resource per policy ``build`` makes, named after its namespace and name;
    which policies exist does not depend on the CIDRs, only their peers do."""
    resolved = pulumi.Output.from_input(cidrs)
    resources = []
    for i, shape in enumerate(build(ClusterCidrs(("0.0.0.0/32",)))):
        manifest = resolved.apply(partial(_nth, build, i))
        meta = shape["metadata"]
        resources.append(
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{meta['namespace']}-{meta['name']}",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=opts,
            )
        )
    return resources
