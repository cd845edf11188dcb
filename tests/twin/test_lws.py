"""The 671B path's replica group, made by the real programs: the LeaderWorkerSet controller and its
webhooks (twin/lws.py), kube-controller-manager's StatefulSet and EndpointSlice controllers, and
answered by the real CoreDNS (twin/coredns.py), from the r1 stack's render.

The twin plays only the scheduler and the kubelet: it binds each pod to a node of a zone and
reports it running and not ready, the state a group is in while vLLM loads its weights and the
workers dial their leader. Every assertion reads what the programs wrote.

A second namespace runs the same LeaderWorkerSet with LWS's default subdomain policy ("Shared")
beside our client Service: the mistake components/serving/multinode.py LWS_SUBDOMAIN_POLICY exists to
avoid, shown failing with the same checks.

Skips without the programs (``twin/build.sh lws coredns kube-controller-manager``); under
DEEPSEEK_EKS_REQUIRE_LWS=1 (CI, once it has built them) fails instead.
"""

from __future__ import annotations

import copy
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import TIER0
from deepseek_eks.twin.check import load_render
from deepseek_eks.twin.coredns import Dns, running_coredns
from deepseek_eks.twin.lws import (
    ZONE_KEY,
    Group,
    controller_manager,
    label_selector_selects,
    run_group,
    running_lws,
    selects,
    sliced_for,
)
from deepseek_eks.twin.server import running_twin
from tests.twin.conftest import render_stack, require_binaries

REQUIRED_BY = "DEEPSEEK_EKS_REQUIRE_LWS"
PROGRAMS = (*TIER0, "kube-controller-manager", "lws", "coredns")
# A name in the container's shell command: $LWS_X, ${LWS_X}, or Kubernetes' $(LWS_X).
LWS_VARIABLE = re.compile(r"\$[({]?(LWS_[A-Z_]+)")
SHARED_NAMESPACE = "deepseek-shared-probe"


class Run:
    """The r1 render's group, the same group under the Shared policy, and the DNS that answers."""

    def __init__(self, render: list[dict[str, Any]], ours: Group, shared: Group, dns: Dns) -> None:
        self.render, self.ours, self.shared, self.dns = render, ours, shared, dns

    @property
    def lws(self) -> dict[str, Any]:
        return next(o for o in self.render if o["kind"] == "LeaderWorkerSet")


def _in_namespace(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    moved = copy.deepcopy(objects)
    for obj in moved:
        obj["metadata"]["namespace"] = namespace
    return moved


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    require_binaries(
        missing_binaries(PROGRAMS), "the LeaderWorkerSet twin's programs",
        "run `twin/build.sh lws coredns kube-controller-manager`", REQUIRED_BY,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="twin-lws-") as tmp:
        folder = Path(tmp)
        rendered = render_stack("r1", "karpenter", folder)
        render = load_render(rendered)[0]
        lws = next(o for o in render if o["kind"] == "LeaderWorkerSet")
        namespace = lws["metadata"]["namespace"]
        # What the group's pods and Services need from the render: its ServiceAccounts and Services.
        needed = [
            o for o in render
            if o["kind"] in ("ServiceAccount", "Service") and o["metadata"].get("namespace") == namespace
        ]  # fmt: skip
        shared_lws = _in_namespace([lws], SHARED_NAMESPACE)[0]
        shared_lws["spec"]["networkConfig"] = {"subdomainPolicy": "Shared"}
        with (
            running_twin() as api,
            running_lws(api, folder, rendered) as lws_program,
            controller_manager(api, folder) as kcm,
            running_coredns(api, folder) as dns,
        ):
            programs = [lws_program, kcm]
            ours = run_group(api, lws, needed, programs)
            shared = run_group(
                api, shared_lws, _in_namespace(needed, SHARED_NAMESPACE), programs, zone="us-east-1b"
            )
            yield Run(render, ours, shared, dns)


def _kept(rendered: Any, stored: Any) -> bool:
    """Every value the render set is in ``stored`` (which may add defaults beside them)."""
    if isinstance(rendered, dict):
        return isinstance(stored, dict) and all(
            k in stored and _kept(v, stored[k]) for k, v in rendered.items()
        )
    return bool(rendered == stored)


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for c in pod["spec"]["containers"] for e in c.get("env") or []}


def _leader_address(pod: dict[str, Any]) -> str:
    return _env(pod)["LWS_LEADER_ADDRESS"]


def test_the_lws_webhooks_admit_the_render_and_keep_its_settings(run: Run) -> None:
    """The real validating webhook admitted the LeaderWorkerSet; the mutating one's defaults left
    every setting the render chose as it was."""
    stored = run.ours.lws["spec"]
    for key in ("networkConfig", "startupPolicy", "rolloutStrategy"):
        assert _kept(run.lws["spec"][key], stored[key]), (key, stored[key])
    template = run.lws["spec"]["leaderWorkerTemplate"]
    for key in ("size", "restartPolicy"):
        assert stored["leaderWorkerTemplate"][key] == template[key], key


def test_workers_reach_their_leader_by_the_name_lws_gives_them(run: Run) -> None:
    """Every pod of the group is given the leader's address, and cluster DNS (the real CoreDNS,
    from the EndpointSlices the real controller wrote) answers it with the leader's IP while the
    leader is not yet ready, which is when the workers dial it (Ray joins before vLLM serves)."""
    group = run.ours
    leader = group.leader
    assert group.workers, "the LWS pod controller made no worker"
    ready = {c["type"]: c["status"] for c in leader["status"]["conditions"]}
    assert ready["Ready"] == "False"
    for pod in (leader, *group.workers):
        address = _leader_address(pod)
        assert run.dns.pod_lookup(address, group.namespace) == [leader["status"]["podIP"]], pod["metadata"][
            "name"
        ]


def test_the_render_reads_only_the_variables_lws_sets(run: Run) -> None:
    """Each LWS_* variable the leader's and the workers' commands read is in the env the real pod
    webhook gave that pod."""
    template = run.lws["spec"]["leaderWorkerTemplate"]
    for role, pods in (("leaderTemplate", [run.ours.leader]), ("workerTemplate", run.ours.workers)):
        container = template[role]["spec"]["containers"][0]
        text = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
        read = set(LWS_VARIABLE.findall(text))
        assert role == "leaderTemplate" or read, f"the {role} reads no LWS variable"
        for pod in pods:
            missing = read - set(_env(pod))
            assert not missing, f"{pod['metadata']['name']} lacks {sorted(missing)}"


def test_workers_are_kept_in_their_leaders_zone_and_groups_apart(run: Run) -> None:
    """The exclusive-topology annotation makes the pod controller pin each worker to its leader's
    zone, and the pod webhook keep other groups out of it: one replica per zone, what
    ``zone_refusal`` counts on."""
    group = run.ours
    leader_zone = group.nodes[group.leader["spec"]["nodeName"]]["metadata"]["labels"][ZONE_KEY]
    for worker in group.workers:
        assert worker["spec"]["nodeSelector"][ZONE_KEY] == leader_zone
    own_key = group.leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"]
    apart = group.leader["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    zone_terms = [t for t in apart if t["topologyKey"] == ZONE_KEY]
    assert zone_terms, "no anti-affinity between groups on the zone"
    excluded = [
        e for t in zone_terms for e in t["labelSelector"]["matchExpressions"] if e["operator"] == "NotIn"
    ]
    assert any(own_key in e["values"] for e in excluded)


def test_a_groups_workers_wait_for_their_leaders_node(run: Run) -> None:
    """While the leader has no node, the pod controller makes no worker, so no node is launched
    for one: a group's nodes come up one launch after the other, as sizing/planner.py
    ``startup_breakdown`` counts them for a multi-node replica."""
    group = run.ours
    name = group.lws["metadata"]["name"]
    leader = group.leader["metadata"]["name"]
    assert group.made_while_leader_unbound == [f"Pod/{leader}", f"StatefulSet/{name}"]
    assert group.workers, "the workers came once the leader was bound"


def test_the_client_service_keeps_its_name_and_sends_to_leaders_only(run: Run) -> None:
    """The render's Service (what the load balancer, the router and the load test use) keeps its
    name and cluster IP beside the controller's headless Services, and its EndpointSlice lists the
    leader, the pod vLLM serves on, and no worker."""
    group = run.ours
    client = next(
        o
        for o in run.render
        if o["kind"] == "Service" and o["metadata"]["name"] == group.lws["metadata"]["name"]
    )
    served = group.services[client["metadata"]["name"]]
    assert served["spec"]["clusterIP"] not in (None, "", "None")
    assert not served["metadata"].get("ownerReferences"), "the LWS controller took the client Service's name"
    listed = {e["targetRef"]["name"] for e in sliced_for(client["metadata"]["name"], group.slices)}
    assert listed == {group.leader["metadata"]["name"]}


def test_autoscalers_count_groups_and_average_over_leaders(run: Run) -> None:
    """HPA and KEDA read the LeaderWorkerSet's /scale: its replicas are groups, not pods, and its
    selector picks one pod a group (the leader), so a per-replica target is per group."""
    group = run.ours
    scaler = next(o for o in run.render if o["kind"] in ("ScaledObject", "HorizontalPodAutoscaler"))
    target = scaler["spec"]["scaleTargetRef"]
    assert (target.get("kind"), target["name"]) == ("LeaderWorkerSet", group.lws["metadata"]["name"])
    assert group.scale["status"]["replicas"] == group.lws["spec"]["replicas"] == 1
    picked = [p for p in group.pods.values() if label_selector_selects(group.scale["status"]["selector"], p)]
    assert [p["metadata"]["name"] for p in picked] == [group.leader["metadata"]["name"]]


def test_the_shared_subdomain_would_strand_the_workers(run: Run) -> None:
    """Under LWS's default policy the controller would name the group's headless Service after the
    LeaderWorkerSet, but our client Service holds that name, so it makes none; the leader's name
    then lives only in the client Service, which publishes no pod that is not ready. The workers'
    lookup fails until the leader is ready, and the leader waits for its workers: the checks
    above, on this group, fail."""
    group = run.shared
    name = group.lws["metadata"]["name"]
    assert group.leader["spec"]["subdomain"] == name
    assert group.services[name]["spec"]["clusterIP"] != "None"
    assert not any(s["spec"].get("clusterIP") == "None" for s in group.services.values())
    for pod in (group.leader, *group.workers):
        assert run.dns.pod_lookup(_leader_address(pod), group.namespace) is None
    # Its client Service does list the leader, with the hostname, but not ready.
    endpoints = sliced_for(name, group.slices)
    assert [(e.get("hostname"), e["conditions"]["ready"]) for e in endpoints] == [
        (group.leader["spec"]["hostname"], False)
    ]
    assert selects(group.services[name]["spec"]["selector"], group.leader)
