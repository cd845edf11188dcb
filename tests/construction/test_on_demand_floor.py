"""The on-demand floor keeps its replicas on scale-down (issue 19 item 7).

A ReplicaSet deletes the pods it ranks first by kubernetes/kubernetes
``pkg/controller/controller_utils.go`` ActivePodsWithRanks.Less, whose criteria, in order, are
snapshotted in ``reference/upstream/serving-facts.json`` (``replicaset_scale_down_order``): the
deletion cost comes right after the pods' state and readiness, before co-location and age, and it is
an annotation of the pod. Each vLLM pod of a Deployment beside spot therefore gives itself a cost
from its node's capacity type (``components/serving/scripts/deletion_cost.py``, an init container). The
tests check the rendered objects, run the script against a stand-in API, and replay scale-downs
with the upstream ranking.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components.serving.scripts import deletion_cost
from tests.conftest import stack_config
from tests.netpol import Cluster, Host, Pod
from tests.upstream import network_policy_facts, serving_facts

ORDER = serving_facts()["replicaset_scale_down_order"]


def _objects(rendered: Rendered, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendered.objects() if o["kind"] == kind]


def _vllm_pod_spec(rendered: Rendered) -> dict[str, Any]:
    (deployment,) = [o for o in _objects(rendered, "Deployment") if o["metadata"]["name"] == "vllm"]
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def floor() -> Rendered:
    """dev: EKS Auto Mode, spot and on-demand, one replica minimum (the floor pool exists)."""
    return render(stack_config("dev"))


def test_the_floor_pool_exists_in_the_case_under_test(floor: Rendered) -> None:
    assert any(o["metadata"]["name"].endswith("floor") for o in _objects(floor, "NodePool"))


def _deletion_cost_containers(spec: dict) -> list[dict]:
    """The pod's init containers that run the deletion-cost script."""
    return [c for c in spec.get("initContainers", []) if c["command"][-1].endswith("deletion_cost.py")]


def test_each_vllm_pod_sets_its_deletion_cost_from_an_init_container_with_its_own_token(
    floor: Rendered,
) -> None:
    spec = _vllm_pod_spec(floor)
    (init,) = _deletion_cost_containers(spec)
    assert spec["initContainers"][0] is init  # first: the cost is set before anything else runs
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in init["env"]}
    assert env == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "NODE_NAME": "spec.nodeName",
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    token_mounts = [
        m for m in init["volumeMounts"] if "serviceAccountToken" in str(volumes[m["name"]].get("projected"))
    ]
    assert [m["mountPath"] for m in token_mounts] == [deletion_cost.TOKEN_DIR]
    # The pod gets no automatic token, and vLLM's own container mounts none of the init's volumes.
    assert spec["automountServiceAccountToken"] is False
    init_only = {m["name"] for m in init["volumeMounts"]}
    for container in spec["containers"]:
        assert not init_only & {m["name"] for m in container.get("volumeMounts", [])}
    # The script it runs is the one in the ConfigMap, byte for byte.
    script = next(v for v in spec["volumes"] if v["name"] in init_only and "configMap" in v)
    (config_map,) = [
        o for o in _objects(floor, "ConfigMap") if o["metadata"]["name"] == script["configMap"]["name"]
    ]
    assert config_map["data"]["deletion_cost.py"] == Path(deletion_cost.__file__).read_text(encoding="utf-8")


def test_its_rights_are_reading_nodes_and_patching_pods_of_its_namespace(floor: Rendered) -> None:
    (role,) = _objects(floor, "Role")
    (cluster_role,) = _objects(floor, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    assert cluster_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    spec = _vllm_pod_spec(floor)
    for kind, target in (("RoleBinding", role), ("ClusterRoleBinding", cluster_role)):
        (binding,) = _objects(floor, kind)
        assert binding["roleRef"]["name"] == target["metadata"]["name"]
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": spec["serviceAccountName"],
                "namespace": role["metadata"]["namespace"],
            }
        ]


def test_the_pod_may_call_the_api_and_still_nothing_else_new() -> None:
    """With local weights vLLM has no HTTPS of its own, so 443 to the API is the init's rule."""
    objects = render(stack_config("dev", weights__source="s3-mountpoint")).objects()
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod = Pod(deployment["metadata"]["namespace"], deployment["spec"]["template"]["metadata"]["labels"])
    cluster = Cluster(policies)
    for cidr in network_policy_facts()["service_ipv4_cidr_defaults"]["value"]:
        service_ip = Host(str(ipaddress.ip_network(cidr)[1]))  # the kubernetes Service's ClusterIP
        assert cluster.allows(pod, service_ip, 443)
        assert not cluster.allows(pod, service_ip, 80)
    assert not cluster.allows(pod, Host("203.0.113.9"), 443)  # still no Internet


@pytest.mark.parametrize(
    "overrides",
    # minReplicas 0 (no floor) needs routing.kind llm-d and the router-queue signal.
    [
        {"gpu__capacityTypes": "on-demand"},
        {"routing__kind": "llm-d", "autoscaling__signal": "router-queue", "autoscaling__minReplicas": "0"},
    ],
    ids=["on-demand-only", "scaled-to-zero"],
)
def test_no_init_container_or_rights_without_a_floor_beside_spot(overrides: dict[str, str]) -> None:
    rendered = render(stack_config("dev", **overrides))
    # (The compile cache's restore and save containers run with S3 weights: not the cost's.)
    assert not _deletion_cost_containers(_vllm_pod_spec(rendered))
    # (llm-d's router, where rendered, has its own Role: not a deletion-cost right.)
    roles = [r for r in _objects(rendered, "Role") if r["metadata"]["name"] != "vllm-router"]
    assert not roles and not _objects(rendered, "ClusterRole")


def test_a_leader_worker_set_gets_none() -> None:
    """LWS reads no deletion cost (its leaders are a StatefulSet): the plan warns instead."""
    rendered = render(stack_config("r1", gpu__capacityTypes="spot,on-demand"))
    assert not _objects(rendered, "Role")
    (lws,) = _objects(rendered, "LeaderWorkerSet")
    assert "initContainers" not in lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    assert any("LeaderWorkerSet scales down by group index" in w for w in rendered.plan["warnings"])


# --- the script, against a stand-in API ---------------------------------------------------------


def fake_api(node_labels: dict[str, str]) -> tuple[deletion_cost.Request, list[tuple[str, str, Any]]]:
    calls: list[tuple[str, str, Any]] = []

    def request(method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        calls.append((method, path, body))
        return {"metadata": {"labels": node_labels}} if method == "GET" else {}

    return request, calls


def test_the_script_uses_the_annotation_and_label_upstream_defines(floor: Rendered) -> None:
    assert ORDER["deletion_cost_is_a_pod_annotation"] == deletion_cost.DELETION_COST
    # The capacity types the floor pool admits are the ones the script keeps, spot never.
    (pool,) = [o for o in _objects(floor, "NodePool") if o["metadata"]["name"].endswith("floor")]
    (requirement,) = [
        r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == deletion_cost.CAPACITY_TYPE
    ]
    assert set(requirement["values"]) <= set(deletion_cost.KEPT_CAPACITY_TYPES)
    assert "spot" not in deletion_cost.KEPT_CAPACITY_TYPES


@pytest.mark.parametrize("capacity", ["on-demand", "reserved"])
def test_an_on_demand_or_reserved_pod_gets_a_cost(capacity: str) -> None:
    request, calls = fake_api({deletion_cost.CAPACITY_TYPE: capacity})
    cost = deletion_cost.set_cost(request, namespace="deepseek", pod="vllm-abc", node="i-1")
    assert cost is not None and int(cost) > 0
    assert calls == [
        ("GET", "/api/v1/nodes/i-1", None),
        (
            "PATCH",
            "/api/v1/namespaces/deepseek/pods/vllm-abc",
            {"metadata": {"annotations": {ORDER["deletion_cost_is_a_pod_annotation"]: cost}}},
        ),
    ]


@pytest.mark.parametrize("labels", [{deletion_cost.CAPACITY_TYPE: "spot"}, {}])
def test_a_spot_or_unlabelled_pod_keeps_the_default(labels: dict[str, str]) -> None:
    request, calls = fake_api(labels)
    assert deletion_cost.set_cost(request, namespace="deepseek", pod="p", node="n") is None
    assert [c[0] for c in calls] == ["GET"]


def test_the_script_never_blocks_the_pod(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in ("KUBERNETES_SERVICE_HOST", "POD_NAME"):
        monkeypatch.delenv(key, raising=False)
    assert deletion_cost.main() == 0
    assert "not set" in capsys.readouterr().err


# --- scale-downs replayed with the ReplicaSet's ranking -----------------------------------------


@dataclass(frozen=True)
class RunningPod:
    """A running, ready, assigned pod: the first three criteria tie, the rest decide."""

    on_demand: bool
    cost: int
    same_node_pods: int
    ready_since: int
    restarts: int
    created: int


def deletion_key(pod: RunningPod) -> tuple[int, ...]:
    """Smaller is deleted first, criterion by criterion as ActivePodsWithRanks.Less orders them."""
    keys: dict[str, Callable[[RunningPod], int]] = {
        "lower controller.kubernetes.io/pod-deletion-cost first": lambda p: p.cost,
        "more ready pods of the set on the same node first": lambda p: -p.same_node_pods,
        "ready for less time first (logarithmic buckets)": lambda p: -p.ready_since,
        "more restarts first": lambda p: -p.restarts,
        "newer first": lambda p: -p.created,
    }
    tied = ("unassigned first", "Pending < Unknown < Running", "not ready first")
    assert ORDER["criteria"][: len(tied)] == list(tied)
    return tuple(keys[c](pod) for c in ORDER["criteria"][len(tied) :])


def scale_down(pods: list[RunningPod], to: int) -> list[RunningPod]:
    return sorted(pods, key=deletion_key)[len(pods) - to :]


def random_pods(rng: random.Random, costed: bool) -> list[RunningPod]:
    pods = []
    for _ in range(rng.randint(2, 6)):
        on_demand = rng.random() < 0.5
        cost = int(deletion_cost.KEPT_COST) if costed and on_demand else 0
        pods.append(RunningPod(on_demand, cost, 1, rng.randint(0, 9), rng.randint(0, 3), rng.randint(0, 9)))
    return pods


def test_a_scale_down_never_removes_an_on_demand_pod_while_a_spot_one_remains() -> None:
    rng = random.Random(23)
    for pods in itertools.islice((random_pods(rng, costed=True) for _ in itertools.count()), 2000):
        for to in range(1, len(pods)):
            kept = scale_down(pods, to)
            on_demand = sum(p.on_demand for p in pods)
            assert sum(p.on_demand for p in kept) == min(on_demand, to), (pods, to)


def test_without_the_cost_a_scale_down_does_remove_on_demand_pods() -> None:
    """The replay is not vacuous: the same ranking without costs keeps spot over on-demand."""
    rng = random.Random(23)
    lost = 0
    for pods in itertools.islice((random_pods(rng, costed=False) for _ in itertools.count()), 2000):
        for to in range(1, len(pods)):
            kept = scale_down(pods, to)
            lost += sum(p.on_demand for p in kept) < min(sum(p.on_demand for p in pods), to)
    assert lost > 0
