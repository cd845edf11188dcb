"""The loop's kwok stages, run by the real kwok against the real kube-apiserver: a node's launch and a
pod's start take the delay the loop asks for, counted from when kwok first sees them, however often
they are updated meanwhile (Karpenter registering a node, a controller labelling a pod); a node
turns schedulable no sooner than its registration (the launch taint on it).

kwok starts a resource's delay again on every update it sees (kwok v0.8.0
pkg/kwok/controllers/node_controller.go ``addStageJob``), so these fail with a fixed
``durationMilliseconds`` delay: the node then turns Ready a delay after its last update.
Without kwok's binary they skip; under DEEPSEEK_EKS_REQUIRE_CAPACITY=1 (CI) they fail."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import binary_path
from deepseek_eks.twin.compression import LAUNCH_TAINT, kwok_loop_stages
from deepseek_eks.twin.instance_types import facts
from deepseek_eks.twin.programs import kubeconfig
from deepseek_eks.twin.server import Api, _stop, _tail
from tests.twin.conftest import require_binaries

DELAY_S = 2.0
# kwok's reaction (a watch event, a queue, a patch) on this machine's two cores: well under the
# update spacing below, so a delay counted from the last update (1.5 s later) cannot pass.
SLACK_S = 0.8


@pytest.fixture(scope="module")
def kwok(twin: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """kwok with the loop's stages beside the module's twin, once it has launched a first node."""
    require_binaries(
        missing_binaries(("kwok",)), "kwok", "run `twin/build.sh kwok`", "DEEPSEEK_EKS_REQUIRE_CAPACITY"
    )
    folder = tmp_path_factory.mktemp("kwok")
    stages, _ = kwok_loop_stages(folder, DELAY_S, DELAY_S)
    # kwok manages the nodes Karpenter's kwok provider annotates (facts.json, the provider's source).
    annotation = "=".join(next(iter(facts()["node"]["annotation"].items())))
    log = folder / "kwok.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [
                str(binary_path("kwok")), f"--kubeconfig={kubeconfig(twin, folder)}",
                f"--manage-nodes-with-annotation-selector={annotation}",
                *(f"--config={stage}" for stage in stages),
            ],
            stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        # Only once kwok watches does a node's creation count as kwok's first sight of it.
        path, start = _node(twin, "kwok-is-watching")
        _when(twin, path, _launched, start, {0.0: _register(twin, path)}, limit_s=60)
        yield twin
    finally:
        _stop(process)
        print(_tail(log))


def _merge(api: Api, path: str, patch: dict[str, Any]) -> None:
    reply = api.call("PATCH", path, patch, content_type="application/merge-patch+json")
    assert reply.ok, reply.message


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _when(
    api: Api,
    path: str,
    done: Callable[[dict[str, Any]], bool],
    start: float,
    actions: dict[float, Callable[[], None]],
    limit_s: float = 4 * DELAY_S + 5,
) -> float:
    """Seconds after ``start`` until the object at ``path`` satisfies ``done``, running each of
    ``actions`` (seconds after ``start`` -> callable) when its time comes."""
    pending = dict(sorted(actions.items()))
    while time.monotonic() - start < limit_s:
        for at in [a for a in pending if time.monotonic() - start >= a]:
            pending.pop(at)()
        if done(api.call("GET", path).body):
            return time.monotonic() - start
        time.sleep(0.05)
    pytest.fail(f"{path} not done after {limit_s:.0f} s")


def _node(api: Api, name: str) -> tuple[str, float]:
    annotations = dict(facts()["node"]["annotation"])
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}
    start = time.monotonic()
    reply = api.call("POST", "/api/v1/nodes", body)
    assert reply.ok, reply.message
    return f"/api/v1/nodes/{name}", start


def _launched(node: dict[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return _ready(node) and all(t["key"] != LAUNCH_TAINT["key"] for t in taints)


def _register(api: Api, path: str) -> Callable[[], None]:
    """What Karpenter's registration does that matters here: the launch taint put on."""
    return lambda: _merge(api, path, {"spec": {"taints": [dict(LAUNCH_TAINT)]}})


def _label(api: Api, path: str, value: str) -> Callable[[], None]:
    return lambda: _merge(api, path, {"metadata": {"labels": {"twin-test/update": value}}})


def test_a_node_launch_counts_from_its_creation_not_its_last_update(kwok: Api) -> None:
    path, start = _node(kwok, "launch-early-registration")
    actions = {0.5: _register(kwok, path), 1.0: _label(kwok, path, "a"), 1.5: _label(kwok, path, "b")}
    took = _when(kwok, path, _launched, start, actions)
    assert DELAY_S - 0.1 <= took <= DELAY_S + SLACK_S, f"launched after {took:.2f} s, asked {DELAY_S} s"


def test_a_node_is_not_schedulable_before_its_registration(kwok: Api) -> None:
    path, start = _node(kwok, "launch-late-registration")
    registered = DELAY_S + 0.8
    took = _when(kwok, path, _launched, start, {registered: _register(kwok, path)})
    assert registered <= took <= registered + SLACK_S, (
        f"launched after {took:.2f} s, registered at {registered} s"
    )


def test_a_pod_start_counts_from_its_binding_not_its_last_update(kwok: Api) -> None:
    node_path, start = _node(kwok, "launch-for-a-pod")
    _when(kwok, node_path, _launched, start, {0.1: _register(kwok, node_path)})
    namespace = "default"
    # No service-account controller runs here; the ServiceAccount admission plugin needs the account.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    kwok.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "starts", "namespace": namespace},
        "spec": {
            "nodeName": "launch-for-a-pod",
            "containers": [{"name": "c", "image": "registry.invalid/c:1"}],
        },
    }
    start = time.monotonic()
    reply = kwok.call("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    assert reply.ok, reply.message
    path = f"/api/v1/namespaces/{namespace}/pods/starts"
    took = _when(kwok, path, _ready, start, {1.0: _label(kwok, path, "a"), 1.5: _label(kwok, path, "b")})
    assert DELAY_S - 0.1 <= took <= DELAY_S + SLACK_S, f"Ready after {took:.2f} s, asked {DELAY_S} s"
