"""The load balancer forwards only paths vLLM guards with the API key.

vLLM 0.33.0 checks the bearer token only under its guarded prefixes
(``reference/upstream/vllm-0.33.0/auth-prefixes.json``); every other route answers without it.
So every path the Ingress routes must lie under a guarded prefix, and none of the unguarded
routes may match an Ingress path (Kubernetes ``Prefix`` matching: whole path elements).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from deepseek_eks.automation.render import Rendered, render
from tests.conftest import stack_config
from tests.upstream import vllm_auth_prefixes

STACKS = ("dev", "prod", "r1")


@cache
def rendered(stack: str) -> Rendered:
    return render(stack_config(stack))


def ingress(stack: str) -> dict[str, Any]:
    (obj,) = [o for o in rendered(stack).objects() if o["kind"] == "Ingress"]
    return obj


def routed_paths(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for rule in obj["spec"]["rules"] for p in rule["http"]["paths"]]


def prefix_matches(prefix: str, path: str) -> bool:
    """Kubernetes ``pathType: Prefix``: element-wise prefix of the '/'-split path."""
    want = [e for e in prefix.split("/") if e]
    have = [e for e in path.split("/") if e]
    return have[: len(want)] == want


def under(path: str, guarded: str) -> bool:
    """vLLM's own test is ``startswith``; a routed prefix inside a guarded one is always checked."""
    return path.startswith(guarded)


@pytest.mark.parametrize("stack", STACKS)
def test_every_routed_path_is_under_a_guarded_prefix(stack: str) -> None:
    guarded = vllm_auth_prefixes()["guarded_prefixes"]
    obj = ingress(stack)
    assert "defaultBackend" not in obj["spec"]  # unmatched paths get the ALB's 404
    paths = routed_paths(obj)
    assert paths
    for path in paths:
        assert path["pathType"] in ("Prefix", "Exact")
        assert any(under(path["path"], g) for g in guarded), path["path"]


@pytest.mark.parametrize("stack", STACKS)
def test_unguarded_routes_are_not_reachable_through_the_load_balancer(stack: str) -> None:
    paths = routed_paths(ingress(stack))
    for route in vllm_auth_prefixes()["unguarded_routes_seen"]:
        for path in paths:
            assert not prefix_matches(path["path"], route), (route, path["path"])
    # ... while the OpenAI-compatible API is
    assert any(prefix_matches(p["path"], "/v1/chat/completions") for p in paths)


@pytest.mark.parametrize("stack", STACKS)
def test_health_checks_and_metrics_need_no_route(stack: str) -> None:
    """The ALB checks /health on each pod IP (target-type ip), and Prometheus scrapes /metrics on
    the pod: neither goes through the Ingress, and neither needs the key."""
    ann = ingress(stack)["metadata"]["annotations"]
    assert ann["alb.ingress.kubernetes.io/target-type"] == "ip"
    unguarded = vllm_auth_prefixes()["unguarded_routes_seen"]
    assert ann["alb.ingress.kubernetes.io/healthcheck-path"] in unguarded
    (monitor,) = [
        o for o in rendered(stack).objects() if o["kind"] == "PodMonitor" and o["metadata"]["name"] == "vllm"
    ]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] in unguarded and "authorization" not in endpoint
