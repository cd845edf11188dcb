"""The NetworkPolicy evaluator follows the Kubernetes documentation's semantics
(kubernetes.io/docs/concepts/services-networking/network-policies/), on the documentation's own
examples: default isolation, additive policies, AND vs OR peers, ipBlock except, ports."""

from __future__ import annotations

from typing import Any

from tests.netpol import Cluster, Host, Pod

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
