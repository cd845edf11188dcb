"""``twin capacity``: the render's NodePools driven by the real Karpenter.

On the twin (etcd + kube-apiserver) this starts the real kube-scheduler, kwok (which makes
Karpenter's fake nodes Ready and their pods Running, no kubelets) and Karpenter's kwok provider
(sigs.k8s.io/karpenter v1.14.1, leader election off, no webhooks in that version), with Karpenter's
own CRDs (reference/upstream/karpenter-kwok/crds), an instance-type file generated from the GPU
catalog (instance_types.py) and the render's NodePools, their node class reference rewritten to a
KWOKNodeClass of the same name. Then it creates the vLLM pod template of the render as Pods, one
replica at a time, and reads what Karpenter decided (its NodeClaims):

- floor: with an on-demand floor pool, the first replicas up to its limit go to it, on-demand,
  although spot is cheaper in the main pool (weights);
- types: every GPU NodeClaim is of an instance type the plan allows (plan.json instance_types);
- limits: each pool stops at its ``nvidia.com/gpu`` limit; one replica past every limit stays
  Pending with no NodeClaim;
- taints: a pod without the GPU toleration gets a node of the general pool, never a GPU node,
  even while the GPU nodes have room for it;
- daemonsets: each DaemonSet of the render (the vLLM image pre-pull), created before any replica as
  a deployment does, has one pod bound on every node that runs a replica and none elsewhere, placed
  by the real DaemonSet controller and scheduler beside vLLM on nodes Karpenter sized.

What it does not prove: AWS (launches, capacity, spot interruptions, prices), the EC2NodeClass,
Karpenter's AWS provider (its instance-type data, its overhead and ephemeral-storage arithmetic:
kwok reserves only 100m CPU and 10Mi per node), disruption and consolidation over time.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from .binaries import require_binaries
from .check import load_render, pods_of, subject, wait_established
from .instance_types import AUTO_MODE, CAPACITY_TYPE, GPU_RESOURCE, UPSTREAM, ZONE, facts, instance_types_file
from .lws import LWS_CONTROLLERS, group_index_label, keeps_group_in_one_domain, running_lws
from .lws import REWRITES as LWS_REWRITES
from .programs import Program, kubeconfig
from .server import Api, TwinError, _stop, _tail, free_port, running_twin

PROGRAMS = ("kube-controller-manager", "kube-scheduler", "kwok", "karpenter-kwok")
NODEPOOL_LABEL = "karpenter.sh/nodepool"
EC2_NODE_CLASS_GROUP = "karpenter.k8s.aws"  # Karpenter mode; EKS Auto Mode's pools use eks.amazonaws.com
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
PROBE_NAMESPACE = "capacity-probe"
SETTLE_S = 20.0  # no NodeClaim or binding change for this long: Karpenter has decided (batches: 2 s)
STEP_TIMEOUT_S = 180.0
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
INSTANCE_TYPES_ERROR = "failed constructing instance types"  # sigs.k8s.io/karpenter v1.14.1 kwok/main.go


@dataclass(frozen=True)
class Pool:
    """What a rendered NodePool promises: its weight, GPU limit and whether it is tainted."""

    name: str
    weight: int
    gpu_limit: int | None
    capacity_types: tuple[str, ...]
    tainted: bool


@dataclass
class CapacityReport:
    """What Karpenter did with one render: findings (fail) and what was observed (say)."""

    stack: str
    findings: list[str] = field(default_factory=list)
    observed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


def pools_of(nodepools: list[dict[str, Any]]) -> dict[str, Pool]:
    """The rendered NodePools, by name."""
    out = {}
    for pool in nodepools:
        spec = pool["spec"]
        template = spec["template"]["spec"]
        limit = (spec.get("limits") or {}).get(GPU_RESOURCE)
        types: tuple[str, ...] = ()
        for requirement in template.get("requirements", []):
            if requirement["key"] == CAPACITY_TYPE:
                types = tuple(requirement["values"])
        out[pool["metadata"]["name"]] = Pool(
            pool["metadata"]["name"],
            int(spec.get("weight", 0)),
            None if limit is None else int(limit),
            types,
            bool(template.get("taints")),
        )
    return out


def kwok_nodepools(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The render's NodePools with ``nodeClassRef`` pointing at a KWOKNodeClass of the same name,
    and those node classes (facts.json ``node_class``)."""
    node_class = facts()["node_class"]
    pools, names = [], set()
    for obj in objects:
        if obj.get("kind") != "NodePool":
            continue
        pool = copy.deepcopy(obj)
        ref = pool["spec"]["template"]["spec"]["nodeClassRef"]
        names.add(ref["name"])
        pool["spec"]["template"]["spec"]["nodeClassRef"] = {
            "group": node_class["group"],
            "kind": node_class["kind"],
            "name": ref["name"],
        }
        pools.append(pool)
    api_version = f"{node_class['group']}/{node_class['version']}"
    classes = [
        {"apiVersion": api_version, "kind": node_class["kind"], "metadata": {"name": n}}
        for n in sorted(names)
    ]
    return pools, classes


def ephemeral_storage(objects: list[dict[str, Any]], gpu_class: str) -> dict[str, str]:
    """Per GPU instance type, the node's ephemeral storage under the GPU node class: with
    ``instanceStorePolicy: RAID0`` the instance store in decimal G (reference/upstream/
    platform-facts.json karpenter.instance_store_ephemeral_storage), else the root volume."""
    from deepseek_eks.sizing.catalog import instance_catalog

    auto_mode = next(
        (
            o
            for o in objects
            if o.get("kind") == "NodePool"
            and o["spec"]["template"]["spec"]["nodeClassRef"]["group"] == AUTO_MODE
        ),
        None,
    )
    if auto_mode is not None:
        return auto_mode_ephemeral_storage(objects, gpu_class)
    node_class = next(
        (o for o in objects if o.get("kind") == "EC2NodeClass" and o["metadata"]["name"] == gpu_class), None
    )
    spec = (node_class or {}).get("spec", {})
    root = next((m["ebs"]["volumeSize"] for m in spec.get("blockDeviceMappings", []) if "ebs" in m), "20Gi")
    raid0 = spec.get("instanceStorePolicy") == "RAID0"
    return {
        name: f"{i.instance_storage_gb}G" if raid0 and i.instance_storage_gb else root
        for name, i in instance_catalog().instances.items()
    }


def auto_mode_ephemeral_storage(objects: list[dict[str, Any]], gpu_class: str) -> dict[str, str]:
    """Per GPU instance type, a node's data volume under an EKS Auto Mode node class: the rendered
    NodeClass's ``ephemeralStorage.size``, or for Auto Mode's built-in ``default`` class the
    NodeClass schema's default (reference/schemas/eks.amazonaws.com_v1_NodeClass.json)."""
    from deepseek_eks.sizing.catalog import instance_catalog

    node_class = next(
        (o for o in objects if o.get("kind") == "NodeClass" and o["metadata"]["name"] == gpu_class), None
    )
    size = ((node_class or {}).get("spec") or {}).get("ephemeralStorage", {}).get("size")
    if size is None:
        schema = json.loads(
            (PROJECT_ROOT / "reference" / "schemas" / "eks.amazonaws.com_v1_NodeClass.json").read_text()
        )
        size = schema["properties"]["spec"]["properties"]["ephemeralStorage"]["default"]["size"]
    return {name: str(size) for name in instance_catalog().instances}


def replica_pods(workload: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """One replica of ``workload`` as Pods: its pod template, or an LWS group (leader + workers)."""
    size = int(((workload.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size", 1))
    out = []
    for pod in pods_of(workload):
        copies = size - 1 if pod["metadata"]["name"].endswith("-worker") else 1
        for n in range(copies):
            replica = copy.deepcopy(pod)
            replica["metadata"]["name"] = f"{pod['metadata']['name']}-{index}-{n}"
            out.append(replica)
    return out


# The node lifecycle controller lifts the not-ready taint the API server puts on every new Node
# (TaintNodesByCondition) once kwok reports it Ready; without it no pod ever binds.
NODE_CONTROLLERS = ("node-lifecycle-controller",)
# The capacity scenario also runs the render's DaemonSets.
CAPACITY_CONTROLLERS = (*NODE_CONTROLLERS, "daemonset-controller")


def refused_replica_pods(workload: dict[str, Any]) -> int:
    """The pods one replica that finds no node leaves Pending: all of a Deployment's replica; of a
    LeaderWorkerSet group kept to one zone, its leader only, since LWS makes the workers once the
    leader has a node (lws v0.10.0 pkg/controllers/pod_controller.go; tests/twin/test_lws.py)."""
    if workload["kind"] == "LeaderWorkerSet" and keeps_group_in_one_domain(workload):
        return 1
    return len(replica_pods(workload, 0))


def kwok_stages() -> list[Path]:
    """kwok's own "fast" node and pod lifecycle, vendored (README there): kwok with no stage exits."""
    return sorted((UPSTREAM / "kwok-v0.8.0-stages").glob("*.yaml"))


@contextlib.contextmanager
def controllers(
    api: Api,
    folder: Path,
    instance_types: Path,
    *,
    kcm_controllers: Sequence[str] = NODE_CONTROLLERS,
    kcm_flags: Sequence[str] = (),
    stages: Sequence[Path] | None = None,
    karpenter_env: dict[str, str] | None = None,
) -> Iterator[dict[str, Program]]:
    """kube-controller-manager (running ``kcm_controllers`` with ``kcm_flags``), kube-scheduler,
    kwok (with ``stages``, else its vendored fast lifecycle) and Karpenter's kwok provider against
    ``api`` (Karpenter's CRDs must be installed first: it sets up its indexes once, at start), with
    ``karpenter_env`` over the environment set here; yields them by name."""
    binaries = require_binaries(PROGRAMS)
    config = kubeconfig(api, folder)
    annotation = "=".join(next(iter(facts()["node"]["annotation"].items())))
    stages = kwok_stages() if stages is None else list(stages)
    env = (
        os.environ
        | {
            "KUBECONFIG": str(config),
            "INSTANCE_TYPES_FILE_PATH": str(instance_types),
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(free_port()),
            "HEALTH_PROBE_PORT": str(free_port()),
            "BATCH_MAX_DURATION": "2s",  # decide quickly; the defaults (10 s / 1 s) only batch more pods
            "BATCH_IDLE_DURATION": "1s",
            "LOG_LEVEL": "debug",
        }
        | (karpenter_env or {})
    )
    commands = {
        "kube-controller-manager": [
            str(binaries["kube-controller-manager"]), f"--kubeconfig={config}", "--leader-elect=false",
            f"--controllers={','.join(kcm_controllers)}", "--secure-port=0", *kcm_flags,
        ],
        "kube-scheduler": [
            str(binaries["kube-scheduler"]), f"--kubeconfig={config}", "--leader-elect=false",
            f"--secure-port={free_port()}", "--bind-address=127.0.0.1",
            f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
        ],
        "kwok": [
            str(binaries["kwok"]), f"--kubeconfig={config}",
            f"--manage-nodes-with-annotation-selector={annotation}",
            *(f"--config={stage}" for stage in stages),
        ],
        "karpenter": [str(binaries["karpenter-kwok"])],
    }  # fmt: skip
    started: dict[str, Program] = {}
    try:
        for name, command in commands.items():
            log = folder / f"{name}.log"
            handle = log.open("wb")
            process = subprocess.Popen(
                command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
            handle.close()
            started[name] = Program(process, log)
        yield started
    finally:
        for program in reversed(started.values()):
            _stop(program.process)


class Capacity:
    """One render on a running twin with Karpenter beside it: create pods, read decisions."""

    def __init__(self, api: Api, programs: dict[str, Program], report: CapacityReport) -> None:
        self.api, self.programs, self.report = api, programs, report

    def alive(self) -> None:
        """Raise ``TwinError`` with its log tail when a program beside the twin has exited."""
        for name, program in self.programs.items():
            if program.process.poll() is not None:
                code = program.process.returncode
                raise TwinError(f"{name} exited with {code}:\n{_tail(program.log)}")
        # The provider logs a file it cannot parse and runs on with no instance types at all
        # (kwok/main.go), which would look like "no capacity": say what it said instead.
        karpenter = self.programs.get("karpenter")
        lines = karpenter.log.read_text(errors="replace").splitlines() if karpenter else []
        refused = [line for line in lines if INSTANCE_TYPES_ERROR in line]
        if refused:
            raise TwinError(f"Karpenter refused the instance-type file: {refused[0]}")

    def nodeclaims(self) -> list[dict[str, Any]]:
        return list(self.api.call("GET", NODECLAIMS).body.get("items") or [])

    def pods(self, namespace: str, *, daemonsets: bool = False) -> list[dict[str, Any]]:
        """The pods of ``namespace``: those a DaemonSet owns with ``daemonsets``, else the others."""
        items = self.api.call("GET", f"/api/v1/namespaces/{namespace}/pods").body.get("items") or []
        return [p for p in items if _owned_by_daemonset(p) is daemonsets]

    def create(self, obj: dict[str, Any]) -> None:
        reply = self.api.apply(obj, dry_run=False)
        if not reply.ok:
            raise TwinError(f"{subject(obj)} was refused ({reply.status}): {reply.message}")

    def settle(self, namespaces: list[str], bound_at_least: int) -> None:
        """Wait until Karpenter and the scheduler stop changing anything (``SETTLE_S`` unchanged)
        with at least ``bound_at_least`` pods bound in ``namespaces``."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            self.alive()
            claims = sorted(c["metadata"]["name"] for c in self.nodeclaims())
            bound = sorted(
                p["metadata"]["name"] for ns in namespaces for p in self.pods(ns) if p["spec"].get("nodeName")
            )
            state = (claims, bound)
            if state != last:
                last, since = state, time.monotonic()
            elif len(bound) >= bound_at_least and time.monotonic() - since >= SETTLE_S:
                return
            time.sleep(1)
        why = [
            f"{p['metadata']['name']}: {c.get('reason')}: {c.get('message')}"
            for ns in namespaces
            for p in self.pods(ns)
            for c in (p.get("status") or {}).get("conditions") or []
            if c["type"] == "PodScheduled" and c["status"] != "True"
        ]
        raise TwinError(
            f"Karpenter did not settle within {STEP_TIMEOUT_S:.0f} s with {bound_at_least} pod(s) bound "
            f"(now {len(last[1]) if last else 0}); unscheduled: {'; '.join(why) or 'none'}; node taints: "
            f"{[n['spec'].get('taints') for n in self._nodes()]}; "
            f"karpenter log:\n{_tail(self.programs['karpenter'].log, 5)}"
        )

    def placement(self, namespace: str, *, daemonsets: bool = False) -> dict[str, dict[str, str]]:
        """Each pod of ``namespace`` (see ``pods``) -> its node and the node's pool, type and
        capacity type ('' while Pending)."""
        nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in self._nodes()}
        out = {}
        for pod in self.pods(namespace, daemonsets=daemonsets):
            node = pod["spec"].get("nodeName", "")
            labels = nodes.get(node, {})
            out[pod["metadata"]["name"]] = {
                "node": node,
                "pool": labels.get(NODEPOOL_LABEL, ""),
                "type": labels.get(INSTANCE_TYPE_LABEL, ""),
                "capacity": labels.get(CAPACITY_TYPE, ""),
                "zone": labels.get(ZONE, ""),
            }
        return out

    def _nodes(self) -> list[dict[str, Any]]:
        return list(self.api.call("GET", "/api/v1/nodes").body.get("items") or [])


def _owned_by_daemonset(pod: dict[str, Any]) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in pod["metadata"].get("ownerReferences") or [])


def _gpus(pod: dict[str, Any]) -> int:
    containers = pod["spec"].get("containers", [])
    return sum(int((c.get("resources") or {}).get("requests", {}).get(GPU_RESOURCE, 0)) for c in containers)


def install_crd_files(api: Api, folder: Path) -> None:
    """Every CRD manifest of ``folder`` (``*.yaml``, as upstream ships them), each served before
    the next; then the kinds are discovered."""
    for path in sorted(folder.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        reply = api.apply(crd, dry_run=False)
        if not reply.ok:
            raise TwinError(f"{path.name} was refused ({reply.status}): {reply.message}")
        wait_established(api, crd["metadata"]["name"])
    api.discover()


def install_crds(api: Api) -> None:
    """Karpenter's CRDs and the kwok node class's, as the kwok provider's chart ships them."""
    install_crd_files(api, UPSTREAM / "crds")


def _prerequisites(capacity: Capacity, objects: list[dict[str, Any]]) -> None:
    """Namespaces (with their ``default`` account: no controller-manager here), service accounts and
    priority classes the pods need."""
    for obj in objects:
        if obj.get("kind") in ("Namespace", "ServiceAccount", "PriorityClass"):
            capacity.create(obj)
        if obj.get("kind") == "Namespace":
            meta = {"name": "default", "namespace": obj["metadata"]["name"]}
            capacity.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
    probe_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROBE_NAMESPACE}}
    capacity.create(probe_ns)
    meta = {"name": "default", "namespace": PROBE_NAMESPACE}
    capacity.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})


def _wait_pools_ready(capacity: Capacity, names: list[str]) -> None:
    """Karpenter validates each NodePool and marks it Ready; a pool it refuses is a finding."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = {}
        for name in names:
            status = (
                capacity.api.call("GET", f"/apis/karpenter.sh/v1/nodepools/{name}").body.get("status") or {}
            )
            states[name] = {c["type"]: c for c in status.get("conditions") or []}
        if all(s.get("Ready", {}).get("status") == "True" for s in states.values()):
            return
        time.sleep(1)
    for name, conditions in states.items():
        ready = conditions.get("Ready", {})
        if ready.get("status") != "True":
            capacity.report.findings.append(
                f"NodePool/{name}: Karpenter did not make it Ready: "
                f"{ready.get('reason')}: {ready.get('message')}"
            )


def run_scenario(capacity: Capacity, render: Path) -> None:
    """The floor, types, limits and taints checks of the module docstring, on one render."""
    report = capacity.report
    objects, _ = load_render(render)
    plan = json.loads((render / "plan.json").read_text())
    allowed = set(plan["instance_types"])
    nodepools, classes = kwok_nodepools(objects)
    pools = pools_of(nodepools)
    _prerequisites(capacity, objects)
    for obj in classes + nodepools:
        capacity.create(obj)
    _wait_pools_ready(capacity, sorted(pools))
    if report.findings:
        return
    workload = next(o for o in objects if o.get("kind") in WORKLOAD_KINDS and any(map(_gpus, pods_of(o))))
    namespace = workload["metadata"]["namespace"]
    # As a deployment has them before its replicas: Karpenter counts their requests on new nodes.
    daemonsets = [o for o in objects if o.get("kind") == "DaemonSet"]
    for daemonset in daemonsets:
        capacity.create(daemonset)
    gpu_pools = sorted((p for p in pools.values() if p.tainted), key=lambda p: -p.weight)
    per_replica = sum(map(_gpus, replica_pods(workload, 0)))
    unlimited = [p.name for p in gpu_pools if p.gpu_limit is None]
    if unlimited:
        report.findings += [
            f"NodePool/{name}: no {GPU_RESOURCE} limit, so nothing stops Karpenter past the plan's "
            f"max_replicas ({plan['max_replicas']})"
            for name in unlimited
        ]
        return
    # The replicas each pool's GPU limit admits, heaviest pool first (Karpenter's order).
    admits = {p.name: int(p.gpu_limit or 0) // per_replica for p in gpu_pools}
    created = 0

    def grow(replicas: int) -> None:
        nonlocal created
        if workload["kind"] == "LeaderWorkerSet":
            # The real LWS controller makes the groups (check_capacity runs it): scale the set.
            scaled = copy.deepcopy(workload)
            scaled["spec"]["replicas"] = created + replicas
            capacity.create(scaled)
        else:
            for index in range(created, created + replicas):
                for pod in replica_pods(workload, index):
                    capacity.create(pod)
        created += replicas

    # The floor is the plan's on-demand-only pool beside one that admits spot (what its weight
    # must make Karpenter fill first), read from the capacity types, not from the weight under test.
    with_spot = any("spot" in p.capacity_types for p in gpu_pools)
    floor = next((p for p in gpu_pools if "spot" not in p.capacity_types), None) if with_spot else None
    if floor is not None:
        # Weights: as many replicas as the floor admits must all land there, on-demand.
        grow(admits[floor.name])
        capacity.settle([namespace], created * len(replica_pods(workload, 0)))
        for pod, where in sorted(capacity.placement(namespace).items()):
            report.observed.append(f"{pod} -> {where['pool']} {where['type']} {where['capacity']}")
            if where["pool"] != floor.name or where["capacity"] != "on-demand":
                report.findings.append(
                    f"{pod}: expected the on-demand floor pool {floor.name} (weight {floor.weight}) "
                    f"while it has room, got {where['pool'] or 'no node'} ({where['capacity'] or '-'})"
                )
    # Limits: one replica past every pool's limit.
    total = sum(admits.values())
    grow(total + 1 - created)
    pods_per_replica = len(replica_pods(workload, 0))
    capacity.settle([namespace], total * pods_per_replica)
    placement = capacity.placement(namespace)
    per_pool: dict[str, int] = {}
    for pod, where in sorted(placement.items()):
        report.observed.append(f"{pod} -> {where['pool'] or 'Pending'} {where['type']} {where['capacity']}")
        if where["pool"]:
            per_pool[where["pool"]] = per_pool.get(where["pool"], 0) + 1
            if where["type"] not in allowed:
                report.findings.append(
                    f"{pod}: instance type {where['type']} is not in the plan's {sorted(allowed)}"
                )
            if not pools[where["pool"]].tainted:
                report.findings.append(f"{pod}: a GPU pod on a node of the untainted pool {where['pool']}")
    for pool in gpu_pools:
        got = per_pool.get(pool.name, 0) // pods_per_replica
        report.observed.append(f"pool {pool.name}: {got} replica(s), its limit admits {admits[pool.name]}")
        if got != admits[pool.name]:
            report.findings.append(
                f"NodePool/{pool.name}: {got} replica(s) launched, its limit {GPU_RESOURCE}={pool.gpu_limit} "
                f"admits {admits[pool.name]} of {per_replica} GPUs"
            )
    pending = sum(1 for w in placement.values() if not w["pool"])
    refused = refused_replica_pods(workload)
    if pending != refused:
        report.findings.append(
            f"{pending} pod(s) Pending after {total + 1} replicas, expected exactly one replica "
            f"({refused} pod(s)) refused by the limits"
        )
    if workload["kind"] == "LeaderWorkerSet" and keeps_group_in_one_domain(workload):
        _group_zone_probe(capacity, namespace)
    _taint_probe(capacity, pools)
    _daemonset_probe(capacity, daemonsets, namespace)


def _group_zone_probe(capacity: Capacity, namespace: str) -> None:
    """Exclusive placement on the zone, as the real LWS webhook and controller apply it and
    Karpenter and the scheduler honour it: each placed group's pods in one zone, no two groups in
    the same zone (what components/serving/multinode.py zone_refusal counts on)."""
    label = group_index_label()
    where = capacity.placement(namespace)
    zones: dict[str, set[str]] = {}
    for pod in capacity.pods(namespace):
        group = (pod["metadata"].get("labels") or {}).get(label)
        zone = where.get(pod["metadata"]["name"], {}).get("zone")
        if group is not None and zone:
            zones.setdefault(group, set()).add(zone)
    for group, found in sorted(zones.items()):
        capacity.report.observed.append(f"group {group}: zone {', '.join(sorted(found))}")
        if len(found) != 1:
            capacity.report.findings.append(f"group {group} spans zones {sorted(found)}")
    placed = [next(iter(found)) for found in zones.values() if len(found) == 1]
    shared = sorted({z for z in placed if placed.count(z) > 1})
    if shared:
        capacity.report.findings.append(f"several groups share zone(s) {shared}")


def _daemonset_probe(capacity: Capacity, daemonsets: list[dict[str, Any]], namespace: str) -> None:
    """Each DaemonSet has one pod on every node that runs a replica pod, and none elsewhere."""
    replica_nodes = {w["node"] for w in capacity.placement(namespace).values() if w["node"]}
    for daemonset in daemonsets:
        name = daemonset["metadata"]["name"]
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            capacity.alive()
            on = _daemonset_nodes(capacity, daemonset)
            if set(on) >= replica_nodes or time.monotonic() > deadline:
                break
            time.sleep(1)
        capacity.report.observed.append(
            f"DaemonSet/{name}: {len(on)} pod(s) bound, on {len(set(on) & replica_nodes)} of the "
            f"{len(replica_nodes)} replica node(s)"
        )
        missing = sorted(replica_nodes - set(on))
        if missing:
            capacity.report.findings.append(
                f"DaemonSet/{name}: no pod bound on replica node(s) {missing} within {STEP_TIMEOUT_S:.0f} s"
            )
        elsewhere = sorted(set(on) - replica_nodes)
        if elsewhere:
            capacity.report.findings.append(
                f"DaemonSet/{name}: pods on node(s) without a replica: {elsewhere}"
            )
        doubled = sorted({n for n in on if on.count(n) > 1})
        if doubled:
            capacity.report.findings.append(f"DaemonSet/{name}: more than one pod on {doubled}")


def _daemonset_nodes(capacity: Capacity, daemonset: dict[str, Any]) -> list[str]:
    """The nodes the pods of ``daemonset`` are bound to, one entry per bound pod."""
    selector = daemonset["spec"]["selector"]["matchLabels"].items()
    pods = capacity.pods(daemonset["metadata"]["namespace"], daemonsets=True)
    return sorted(
        p["spec"]["nodeName"]
        for p in pods
        if p["spec"].get("nodeName") and selector <= (p["metadata"].get("labels") or {}).items()
    )


def _taint_probe(capacity: Capacity, pools: dict[str, Pool]) -> None:
    """A pod without the GPU toleration, small enough to fit beside vLLM on a GPU node."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-gpu-toleration", "namespace": PROBE_NAMESPACE},
        "spec": {
            "containers": [
                {"name": "probe", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
            ]
        },
    }  # fmt: skip
    capacity.create(probe)
    capacity.settle([PROBE_NAMESPACE], 1)
    where = capacity.placement(PROBE_NAMESPACE)["no-gpu-toleration"]
    capacity.report.observed.append(
        f"no-gpu-toleration -> {where['pool']} {where['type']} {where['capacity']}"
    )
    if not where["pool"] or pools[where["pool"]].tainted:
        capacity.report.findings.append(
            f"a pod without the GPU toleration went to {where['pool'] or 'no node'}, not an untainted pool"
        )


def check_capacity(render: Path, keep: Path | None = None) -> CapacityReport:
    """Start the twin and Karpenter, run the scenario on ``render`` (one stack's render directory,
    Karpenter mode), stop everything. ``keep``: copy the programs' logs there."""
    objects, _ = load_render(render)
    groups = {
        o["spec"]["template"]["spec"]["nodeClassRef"]["group"] for o in objects if o.get("kind") == "NodePool"
    }
    if groups != {EC2_NODE_CLASS_GROUP}:
        found = ", ".join(sorted(groups)) or "no NodePool"
        raise ValueError(
            f"{render} is not a Karpenter-mode render (NodePools of {found}; twin capacity needs Karpenter's "
            f"{EC2_NODE_CLASS_GROUP}): render it with `python -m automation render --stack STACK "
            "--set deepseek-eks:computeMode=karpenter`"
        )
    plan = json.loads((render / "plan.json").read_text())
    zones = sorted(
        {
            r["inputs"]["availabilityZone"]
            for r in json.loads((render / "aws.json").read_text())
            if r.get("type") == "aws:ec2/subnet:Subnet"
        }
    )
    report = CapacityReport(render.name)
    runs_lws = any(o.get("kind") == "LeaderWorkerSet" for o in objects)
    require_binaries((*PROGRAMS, "lws") if runs_lws else PROGRAMS)
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-capacity-") as temp:
        folder = Path(temp)
        gpu_class = next(
            o["spec"]["template"]["spec"]["nodeClassRef"]["name"]
            for o in objects
            if o.get("kind") == "NodePool" and o["spec"]["template"]["spec"].get("taints")
        )
        types = folder / "instance_types.json"
        instance_types_file(types, plan["region"], zones, ephemeral_storage(objects, gpu_class))
        # LeaderWorkerSets are made into pods by the real LWS controller, from StatefulSets.
        kcm = (*CAPACITY_CONTROLLERS, *LWS_CONTROLLERS) if runs_lws else CAPACITY_CONTROLLERS
        try:
            with running_twin() as api:
                install_crds(api)
                with (
                    controllers(api, folder, types, kcm_controllers=kcm) as programs,
                    running_lws(api, folder, render) if runs_lws else contextlib.nullcontext() as lws,
                ):
                    if lws is not None:
                        programs["lws"] = lws
                        report.observed += [f"twin: {rewrite}" for rewrite in LWS_REWRITES]
                    run_scenario(Capacity(api, programs, report), render)
        finally:
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for log in folder.glob("*.log"):
                    (keep / log.name).write_bytes(log.read_bytes())
    return report
