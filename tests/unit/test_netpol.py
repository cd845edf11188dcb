"""The NetworkPolicy evaluator follows the Kubernetes documentation's semantics
(kubernetes.io/docs/concepts/services-networking/network-policies/), on the documentation's own
examples: default isolation, additive policies, AND vs OR peers, ipBlock except, ports."""

from __future__ import annotations

from typing import Any

from tests.netpol import Cluster, Host, Pod, Service, ServicePort

DB = Pod("default", {"role": "db"}, {"postgres": 6379})
FRONTEND = Pod("default", {"role": "frontend"})
OTHER_NS_FRONTEND = Pod("other", {"role": "frontend"})
PROJECT_CLIENT = Pod("myproject", {"app": "client"})


def policy(spec: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": namespace}, "spec": spec}


# The documentation's "test-network-policy" example.
DOCS_EXAMPLE = policy(
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {
                "from": [
                    {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                    {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                    {"podSelector": {"matchLabels": {"role": "frontend"}}},
                ],
                "ports": [{"protocol": "TCP", "port": 6379}],
            }
        ],
        "egress": [
            {"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}], "ports": [{"protocol": "TCP", "port": 5978}]}
        ],
    }
)
NAMESPACES = {"myproject": {"project": "myproject"}}


def test_the_documentation_example() -> None:
    cluster = Cluster([DOCS_EXAMPLE], NAMESPACES)
    assert cluster.allows(Host("172.17.0.5"), DB, 6379)
    assert not cluster.allows(Host("172.17.1.5"), DB, 6379)  # except
    assert not cluster.allows(Host("172.17.0.5"), DB, 5432)  # port
    assert cluster.allows(PROJECT_CLIENT, DB, 6379)  # any pod of a selected namespace
    assert cluster.allows(FRONTEND, DB, 6379)  # podSelector alone: the policy's namespace
    assert not cluster.allows(OTHER_NS_FRONTEND, DB, 6379)
    assert cluster.allows(DB, Host("10.0.0.7"), 5978)
    assert not cluster.allows(DB, Host("10.0.0.7"), 53, "UDP")  # egress isolated
    assert cluster.allows(FRONTEND, Host("8.8.8.8"), 53, "UDP")  # frontend is not selected


def test_namespace_and_pod_selector_in_one_peer_is_and() -> None:
    both = policy(
        {
            "podSelector": {},
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"project": "myproject"}},
                            "podSelector": {"matchLabels": {"role": "client"}},
                        }
                    ]
                }
            ],
        }
    )
    cluster = Cluster([both], NAMESPACES)
    assert cluster.allows(Pod("myproject", {"role": "client"}), DB, 1)
    assert not cluster.allows(PROJECT_CLIENT, DB, 1)
    assert not cluster.allows(Pod("default", {"role": "client"}), DB, 1)
    assert not cluster.allows(Host("10.0.0.1"), DB, 1)


def test_isolation_needs_a_policy_type_and_policies_add_up() -> None:
    ingress_only = policy({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]})
    assert "Egress" not in ingress_only["spec"]
    cluster = Cluster([ingress_only])
    assert cluster.allows(DB, Host("1.1.1.1"), 443)  # no Egress type: egress not isolated
    assert cluster.allows(Host("1.1.1.1"), DB, 80) and not cluster.allows(Host("1.1.1.1"), DB, 81)
    deny_all = policy({"podSelector": {}, "policyTypes": ["Ingress"]})
    assert not Cluster([deny_all]).allows(FRONTEND, DB, 80)
    assert Cluster([deny_all, ingress_only]).allows(FRONTEND, DB, 80)


def test_ports_by_name_range_and_protocol() -> None:
    ports = policy(
        {
            "podSelector": {},
            "ingress": [
                {"ports": [{"port": "postgres"}, {"port": 32000, "endPort": 32768, "protocol": "UDP"}]}
            ],
        }
    )
    cluster = Cluster([ports])
    assert cluster.allows(FRONTEND, DB, 6379)  # the named container port
    assert not cluster.allows(FRONTEND, FRONTEND, 6379)  # that pod has no such name
    assert cluster.allows(Host("10.0.0.1"), DB, 32500, "UDP")
    assert not cluster.allows(Host("10.0.0.1"), DB, 32500, "TCP")


def test_a_pod_source_needs_its_egress_and_the_destinations_ingress() -> None:
    no_egress = policy({"podSelector": {"matchLabels": {"role": "frontend"}}, "policyTypes": ["Egress"]})
    assert not Cluster([no_egress]).allows(FRONTEND, DB, 6379)
    assert Cluster([no_egress]).allows(Host("10.0.0.1"), FRONTEND, 80)


def test_ipv6_addresses_match_only_ipv6_blocks() -> None:
    v6 = policy(
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "fd00:ec2::23/128"}}]}],
        }
    )
    cluster = Cluster([v6])
    assert cluster.allows(DB, Host("fd00:ec2::23"), 80)
    assert not cluster.allows(DB, Host("169.254.170.23"), 80)


def test_an_ip_block_admits_a_pod_at_an_address_inside_it() -> None:
    """With the VPC CNI a pod's address is in its node's subnet: a CIDR rule for that subnet is
    read as admitting the pod (the conservative reading); a pod without an address is not seen."""
    cluster = Cluster([DOCS_EXAMPLE], NAMESPACES)
    assert cluster.allows(Pod("elsewhere", {"app": "x"}, ip="172.17.0.9"), DB, 6379)
    assert not cluster.allows(Pod("elsewhere", {"app": "x"}, ip="172.17.1.9"), DB, 6379)  # except
    assert not cluster.allows(Pod("elsewhere", {"app": "x"}), DB, 6379)


# Services as the EKS network-policy agent judges them (reference/upstream/network-policy-controller.json).


SERVER = Pod("mon", {"app.kubernetes.io/name": "prometheus", "shard": "0", "managed": "op"}, {"web": 9090})
SERVICE = Service(
    "mon",
    "prom",
    {"app.kubernetes.io/name": "prometheus"},
    "10.100.0.50",
    (ServicePort(80, 9090), ServicePort(8080, "web")),
    (SERVER,),
)
CLIENT = Pod("client", {"app": "keda"})


def egress_to(peer: dict[str, Any], ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"to": [peer]}
    if ports is not None:
        rule["ports"] = ports
    return policy({"podSelector": {}, "policyTypes": ["Egress"], "egress": [rule]}, namespace="client")


def in_mon(pod_selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}},
        "podSelector": pod_selector,
    }


def test_a_peer_naming_a_pod_label_the_service_does_not_select_reaches_the_pod_but_not_the_service() -> None:
    """The seam that stopped KEDA: the peer matches the pod, not the Service's selector, so the
    controller never adds the ClusterIP and the agent drops the packet before DNAT."""
    cluster = Cluster(
        [egress_to(in_mon({"matchLabels": {"app.kubernetes.io/name": "prometheus", "managed": "op"}}))]
    )
    assert cluster.allows(CLIENT, SERVER, 9090)
    assert not cluster.allows_service(CLIENT, SERVICE, 80)


def test_a_peer_matching_the_service_selector_reaches_its_cluster_ip() -> None:
    cluster = Cluster([egress_to(in_mon({"matchLabels": {"app.kubernetes.io/name": "prometheus"}}))])
    assert cluster.allows_service(CLIENT, SERVICE, 80)
    assert Cluster([egress_to({"namespaceSelector": {}})]).allows_service(
        CLIENT, SERVICE, 80
    )  # no podSelector


def test_policy_ports_name_the_target_port_and_admit_the_service_port_before_dnat() -> None:
    peer = in_mon({"matchLabels": {"app.kubernetes.io/name": "prometheus"}})
    cluster = Cluster([egress_to(peer, [{"port": 9090, "protocol": "TCP"}])])
    assert cluster.allows_service(CLIENT, SERVICE, 80)  # 80 -> 9090
    assert cluster.allows_service(CLIENT, SERVICE, 8080)  # 8080 -> "web" = 9090 on the pod
    assert not Cluster([egress_to(peer, [{"port": 80, "protocol": "TCP"}])]).allows_service(
        CLIENT, SERVICE, 80
    )


def test_an_ip_block_must_hold_the_cluster_ip_not_only_the_pods() -> None:
    pods_only = Cluster([egress_to({"ipBlock": {"cidr": "10.0.0.0/16"}})])
    service_cidr = Cluster(
        [egress_to({"ipBlock": {"cidr": "10.100.0.0/16"}}, [{"port": 80, "protocol": "TCP"}])]
    )
    placed = Pod("mon", SERVER.labels, SERVER.named_ports, ip="10.0.3.4")
    assert pods_only.allows(CLIENT, placed, 9090)
    assert not pods_only.allows_service(CLIENT, SERVICE, 80)
    assert service_cidr.allows_service(CLIENT, SERVICE, 80)
    assert not service_cidr.allows_service(CLIENT, SERVICE, 8080)


def test_a_headless_service_is_judged_on_its_pods() -> None:
    headless = Service(
        "mon",
        "prom-operated",
        {"app.kubernetes.io/name": "prometheus"},
        None,
        (ServicePort(9090, "web"),),
        (SERVER,),
    )
    cluster = Cluster([egress_to(in_mon({"matchLabels": {"managed": "op"}}))])
    assert cluster.allows_service(CLIENT, headless, 9090)


def test_the_backends_ingress_is_judged_after_dnat() -> None:
    ingress_closed = policy({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}, namespace="mon")
    cluster = Cluster([egress_to(in_mon({})), ingress_closed])
    assert not cluster.allows_service(CLIENT, SERVICE, 80)
