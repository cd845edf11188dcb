"""How the pods every scaling decision goes through survive the nodes they run on.

Prometheus, prometheus-adapter (custom.metrics.k8s.io, the gpu-utilization HPA's metric) and KEDA
(its operator, which runs the scalers, and its metrics server, external.metrics.k8s.io) run on the
general nodes, which Karpenter consolidates (``WhenEmptyOrUnderutilized``, spot allowed:
components/platform/nodepools.py general_node_pool; EKS Auto Mode's general-purpose pool is a
Karpenter NodePool too). One replica of any of them, lost, stops every scaling decision. So each runs
:data:`METRICS_PATH_REPLICAS` replicas, on different nodes, with a PodDisruptionBudget that lets a
drain take one at a time: a consolidation waits for the evicted replica's successor, and a lost
node takes one replica, never both.

No ``karpenter.sh/do-not-disrupt`` on these pods: with a second replica and a budget a voluntary
disruption costs nothing, while the annotation would pin the general nodes forever (it blocks
consolidation and drift, v1.14 disruption docs, reference/upstream/platform-facts.json) and does
nothing against the node losses (spot interruption, failure) that a second replica covers.

Chart keys and defaults: reference/upstream/metrics-path-facts.json ``charts``.
"""

from __future__ import annotations

from typing import Any

METRICS_PATH_REPLICAS = 2
"""Replicas of each metrics-path component: one to lose, one to serve."""

MAX_UNAVAILABLE = 1
"""The budget of each: a drain evicts one replica and waits for it to be replaced."""

HOSTNAME = "kubernetes.io/hostname"


def spread_over_nodes(match_labels: dict[str, str]) -> list[dict[str, Any]]:
    """A pod topology spread that puts the replicas selected by ``match_labels`` on different
    nodes (``DoNotSchedule``: Karpenter launches a node rather than stack them). Tainted nodes the
    pod does not tolerate (GPU and system nodes) are not counted as places to spread to
    (``nodeTaintsPolicy: Honor``; nil would be Ignore, k8s.io/api v0.34.12 core/v1 types.go), so a
    rolling update's surge pod may share a node with an old replica instead of waiting for a
    third node."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME,
            "whenUnsatisfiable": "DoNotSchedule",
            "nodeTaintsPolicy": "Honor",
            "labelSelector": {"matchLabels": dict(match_labels)},
        }
    ]
