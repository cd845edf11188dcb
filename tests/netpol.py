"""A small evaluator of Kubernetes NetworkPolicy (``networking.k8s.io/v1``), for tests.

It decides whether one connection is allowed by the policies of a cluster, following the
Kubernetes documentation (kubernetes.io/docs/concepts/services-networking/network-policies/):

- a pod is isolated for ingress (egress) only if some policy in its namespace selects it and has
  ``Ingress`` (``Egress``) in ``policyTypes``; ``policyTypes`` defaults to ``Ingress``, plus
  ``Egress`` when the policy has an ``egress`` section;
- policies are additive: a connection is allowed if any rule of any selecting policy allows it;
  a connection between two pods needs the source's egress and the destination's ingress;
- in a rule, missing or empty ``from``/``to`` means every peer, missing or empty ``ports`` every
  port; a port may be a number or a container port name, with ``endPort`` and a protocol that
  defaults to TCP;
- a peer with ``podSelector`` alone means pods of the policy's namespace; ``namespaceSelector``
  alone, every pod of the matching namespaces; both in one peer, pods matching both (AND);
  ``ipBlock`` is a CIDR with optional ``except`` CIDRs.

Which addresses an ``ipBlock`` matches for traffic between pods is left to the implementation by
the documentation ("ipBlock ... should be cluster-external IPs"). A ``Host`` endpoint (a node, a
load balancer, an address outside the cluster) matches only ``ipBlock``. A ``Pod`` matches pod and
namespace selectors and, when it is given an ``ip``, also an ``ipBlock`` holding that address: with
the VPC CNI a pod's address is a VPC address of its node's subnet, and the conservative reading is
that a CIDR rule naming that subnet admits the pod (a test of what is refused must assume so).
Label selectors support ``matchLabels`` and
``matchExpressions`` (In, NotIn, Exists, DoesNotExist).

A connection to a ``Service`` is judged as the EKS network-policy agent judges it
(``reference/upstream/network-policy-controller.json``, aws/amazon-network-policy-controller-k8s
v1.1.7 ``pkg/resolvers/endpoints.go``): the source's egress sees the ClusterIP and the Service port,
before kube-proxy's DNAT, so an ``ipBlock`` must hold the ClusterIP and a pod-selector peer admits it
only when its podSelector matches the Service's own ``spec.selector`` (in a namespace the peer
selects), its ports translated from target ports to Service ports; a headless Service adds no
address, so its clients are judged on the pods' own. Each backend pod's ingress then sees the
source and the target port, after DNAT, as for any pod.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deepseek_eks.twin.flow_matrix import selector_matches  # one LabelSelector matcher for both

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server


@dataclass(frozen=True)
class Pod:
    """A pod: where it runs, its labels, and its named container ports (for named policy ports)."""

    namespace: str
    labels: Mapping[str, str]
    named_ports: Mapping[str, int] = field(default_factory=dict)
    ip: str | None = None
    """The pod's address, when a test places it in a subnet (then ``ipBlock`` rules see it)."""


@dataclass(frozen=True)
class Host:
    """Anything that is not a pod: a node address, a load balancer, the Internet."""

    ip: str


Endpoint = Pod | Host


@dataclass(frozen=True)
class ServicePort:
    """One port of a Service: what clients dial, and the backend port (a number or a port name)."""

    port: int
    target_port: int | str
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    """A Service: ``cluster_ip`` None for a headless one; ``backends``, the pods its selector
    picks (a Service without a selector lists hosts, like ``kubernetes``'s endpoints)."""

    namespace: str
    name: str
    selector: Mapping[str, str]
    cluster_ip: str | None
    ports: tuple[ServicePort, ...]
    backends: tuple[Endpoint, ...]

    def port(self, number: int, protocol: str) -> ServicePort:
        return next(p for p in self.ports if p.port == number and p.protocol == protocol)

    def target_on(self, backend: Endpoint, sp: ServicePort) -> int | None:
        """The backend's port for ``sp``: a named target is looked up in the pod's ports."""
        if isinstance(sp.target_port, int):
            return sp.target_port
        return backend.named_ports.get(sp.target_port) if isinstance(backend, Pod) else None


def policy_types(spec: Mapping[str, Any]) -> list[str]:
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return ["Ingress", "Egress"] if "egress" in spec else ["Ingress"]


@dataclass
class Cluster:
    """The NetworkPolicies of a cluster and the labels of its namespaces."""

    policies: list[Mapping[str, Any]]
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def labels_of_namespace(self, name: str) -> dict[str, str]:
        return {**self.namespace_labels.get(name, {}), NAMESPACE_NAME_LABEL: name}

    def _selecting(self, pod: Pod, direction: str) -> list[Mapping[str, Any]]:
        return [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and selector_matches(p["spec"].get("podSelector"), pod.labels)
            and direction in policy_types(p["spec"])
        ]

    def _peer_matches(self, peer: Mapping[str, Any], policy_namespace: str, other: Endpoint) -> bool:
        if "ipBlock" in peer:
            if other.ip is None:
                return False
            block = peer["ipBlock"]
            address = ipaddress.ip_address(other.ip)
            net = ipaddress.ip_network(block["cidr"], strict=False)
            if address.version != net.version or address not in net:
                return False
            return not any(
                address in ipaddress.ip_network(e, strict=False)
                for e in block.get("except") or []
                if ipaddress.ip_network(e, strict=False).version == address.version
            )
        if not isinstance(other, Pod):
            return False
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self.labels_of_namespace(other.namespace)):
                return False
        elif other.namespace != policy_namespace:
            return False  # podSelector alone: the policy's own namespace
        return "podSelector" not in peer or selector_matches(peer["podSelector"], other.labels)

    @staticmethod
    def _port_matches(
        rule_ports: Iterable[Mapping[str, Any]] | None, dest: Endpoint, port: int, protocol: str
    ) -> bool:
        ports = list(rule_ports or [])
        if not ports:
            return True
        for p in ports:
            if p.get("protocol", "TCP") != protocol:
                continue
            want = p.get("port")
            if want is None:
                return True  # every port of that protocol
            if isinstance(want, str):
                if isinstance(dest, Pod) and dest.named_ports.get(want) == port:
                    return True
                continue
            if want <= port <= p.get("endPort", want):
                return True
        return False

    def _direction_allows(
        self, pod: Pod, direction: str, other: Endpoint, dest: Endpoint, port: int, protocol: str
    ) -> bool:
        selecting = self._selecting(pod, direction)
        if not selecting:
            return True  # not isolated in this direction
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for policy in selecting:
            ns = policy["metadata"]["namespace"]
            for rule in policy["spec"].get(key) or []:
                peers = rule.get(peers_key) or []
                if peers and not any(self._peer_matches(peer, ns, other) for peer in peers):
                    continue
                if self._port_matches(rule.get("ports"), dest, port, protocol):
                    return True
        return False

    def allows(self, source: Endpoint, dest: Endpoint, port: int, protocol: str = "TCP") -> bool:
        """Whether ``source`` may open a connection to ``dest`` on ``port``."""
        if isinstance(source, Pod) and not self._direction_allows(
            source, "Egress", dest, dest, port, protocol
        ):
            return False
        return not isinstance(dest, Pod) or self._direction_allows(
            dest, "Ingress", source, dest, port, protocol
        )

    # Services, judged as the EKS agent does (see the module docstring).

    def _service_ports_admitted(
        self, rule_ports: Iterable[Mapping[str, Any]] | None, service: Service, protocol: str
    ) -> set[int] | None:
        """The Service ports a pod-selector peer's ``ports`` admit on its ClusterIP (None: every
        port): each policy port is a backend port, found as a Service targetPort of the same type
        or through a backend pod's container ports (service_utils.go LookupServiceListenPort,
        LookupListenPortFromPodSpec)."""
        ports = list(rule_ports or [])
        if not ports:
            return None
        admitted: set[int] = set()
        for p in ports:
            if p.get("protocol", "TCP") != protocol:
                continue
            want = p.get("port")
            if want is None:
                return None
            for sp in service.ports:
                if sp.protocol != protocol:
                    continue
                if sp.target_port == want and type(sp.target_port) is type(want):
                    admitted.add(sp.port)
                    continue
                for pod in (b for b in service.backends if isinstance(b, Pod)):
                    number = want if isinstance(want, int) else pod.named_ports.get(want)
                    names = {n for n, v in pod.named_ports.items() if v == number}
                    if number is not None and (sp.target_port == number or sp.target_port in names):
                        admitted.add(sp.port)
        return admitted

    def _egress_admits_service(self, pod: Pod, service: Service, sp: ServicePort) -> bool:
        assert service.cluster_ip is not None
        selecting = self._selecting(pod, "Egress")
        if not selecting:
            return True
        address = Host(service.cluster_ip)
        for policy in selecting:
            ns = policy["metadata"]["namespace"]
            for rule in policy["spec"].get("egress") or []:
                peers = rule.get("to") or []
                if not peers:  # every destination, on the rule's ports as dialled
                    if self._port_matches(rule.get("ports"), address, sp.port, sp.protocol):
                        return True
                    continue
                for peer in peers:
                    if "ipBlock" in peer:
                        if self._peer_matches(peer, ns, address) and self._port_matches(
                            rule.get("ports"), address, sp.port, sp.protocol
                        ):
                            return True
                        continue
                    if "namespaceSelector" in peer:
                        labels = self.labels_of_namespace(service.namespace)
                        if not selector_matches(peer["namespaceSelector"], labels):
                            continue
                    elif service.namespace != ns:
                        continue
                    # The controller's test: the peer's podSelector against the Service's selector.
                    if not selector_matches(peer.get("podSelector"), service.selector):
                        continue
                    admitted = self._service_ports_admitted(rule.get("ports"), service, sp.protocol)
                    if admitted is None or sp.port in admitted:
                        return True
        return False

    def allows_service(self, source: Endpoint, service: Service, port: int, protocol: str = "TCP") -> bool:
        """Whether ``source`` may connect to ``service`` on its port ``port``: the source's egress
        before DNAT (the ClusterIP), then every backend's ingress on its target port after it."""
        sp = service.port(port, protocol)
        if service.cluster_ip is None:  # headless: clients dial the pods themselves
            return all(
                self.allows(source, b, t, protocol)
                for b in service.backends
                if (t := service.target_on(b, sp)) is not None
            )
        if isinstance(source, Pod) and not self._egress_admits_service(source, service, sp):
            return False
        targets = [(b, service.target_on(b, sp)) for b in service.backends]
        return all(
            t is not None
            and (not isinstance(b, Pod) or self._direction_allows(b, "Ingress", source, b, t, protocol))
            for b, t in targets
        )
