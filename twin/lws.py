"""The real LeaderWorkerSet controller beside the twin: the manager of ``sigs.k8s.io/lws`` (its
LeaderWorkerSet and pod controllers) and its admission webhooks, registered with the twin's
kube-apiserver as the pinned chart registers them, so a 671B replica's StatefulSets, pods, env,
affinities and headless Services are made by the program that makes them on EKS, not by a model.

What differs from a cluster (``REWRITES``): the twin builds v0.9.0, the newest release the module
proxy serves, where the chart pins v0.10.0 (reference/upstream/lws-twin.json lists the diff on the
paths we run); the webhooks are called by URL on 127.0.0.1 with the twin's serving certificate
instead of through the chart's Service and the manager's own certificate rotation; the manager
reaches the API server through a kubeconfig holding a token of the chart's ServiceAccount instead
of in-cluster config (the chart's RBAC, as ``helm template`` renders it for the stack, is applied
and is what authorizes it: chart_release.py); and the DisaggregatedSet kind, which the manager
always watches and the render never uses, gets a schema-less CRD.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from .binaries import require_binaries
from .chart_release import account_kubeconfig, chart_release, install_accounts_and_rbac
from .check import wait_established
from .crds import crd_objects
from .programs import Program, kubeconfig, wait_for
from .server import LOOPBACK, Api, TwinError, _stop, free_port

FACTS = PROJECT_ROOT / "reference" / "upstream" / "lws-twin.json"
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_RELEASE = "lws"  # the render's Helm release of the LWS chart (helm/lws.yaml)
READY_TIMEOUT_S = 120.0  # a cold Go manager on a busy 2-core machine, its caches synced
REWRITES = (
    "LeaderWorkerSet controller v0.9.0 (the chart pins v0.10.0; the module proxy serves no v0.10.0)",
    "LWS webhooks called by URL on 127.0.0.1 with the twin's certificate, not the chart's Service",
    "LWS manager with a token of the chart's ServiceAccount in a kubeconfig, not in-cluster config",
    "a schema-less DisaggregatedSet CRD, which the manager watches and the render never uses",
)


def facts() -> dict[str, Any]:
    return json.loads(FACTS.read_text())


def group_index_label() -> str:
    """The label every pod of a group carries its group's index in (lws-twin.json)."""
    return str(facts()["exclusive_topology_annotation"]["group_index_label"])


def set_label(which: str) -> str:
    """A label every pod of a LeaderWorkerSet carries (lws-twin.json ``labels``): ``set_name``
    (the set's name) or ``worker_index`` (0 for a group's leader)."""
    return str(facts()["labels"][which])


def keeps_group_in_one_domain(lws: dict[str, Any]) -> bool:
    """Whether ``lws`` asks for exclusive placement (one group per topology domain), under which
    the controller makes a group's workers only once its leader has a node (lws-twin.json)."""
    key = facts()["exclusive_topology_annotation"]["key"]
    return key in (lws["metadata"].get("annotations") or {})


def lws_crds() -> list[dict[str, Any]]:
    """The LeaderWorkerSet CRD from the vendored schema with the upstream CRD's subresources (the
    controller writes ``/status``; HPA and KEDA scale it through ``/scale``), and the
    DisaggregatedSet kind the manager watches, without a schema."""
    known = facts()
    lws = next(c for c in crd_objects() if c["spec"]["group"] == LWS_GROUP)
    for version in lws["spec"]["versions"]:
        version["subresources"] = known["subresources"]
    stub = known["disaggregatedset_crd"]
    names = {"plural": stub["plural"], "singular": stub["kind"].lower(), "kind": stub["kind"]}
    open_schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    disaggregated = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{stub['plural']}.{stub['group']}"},
        "spec": {
            "group": stub["group"],
            "names": names,
            "scope": "Namespaced",
            "versions": [
                {
                    "name": stub["version"],
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": open_schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
    return [lws, disaggregated]


def webhook_configurations(base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The chart's Mutating- and ValidatingWebhookConfiguration (names, paths, rules, selectors
    and failure policies from lws-twin.json), each webhook called at ``base_url`` + its path."""
    bundle = base64.b64encode(ca_pem).decode()
    known = facts()
    hooks: dict[str, list[dict[str, Any]]] = {kind: [] for kind in known["configurations"]}
    for hook in known["webhooks"]:
        entry = {
            "name": hook["name"],
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": base_url + hook["path"], "caBundle": bundle},
            "rules": hook["rules"],
            "failurePolicy": hook["failurePolicy"],
            "sideEffects": hook["sideEffects"],
        }
        if "objectSelector" in hook:
            entry["objectSelector"] = hook["objectSelector"]
        hooks[hook["configuration"]].append(entry)
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": hooks[kind],
        }
        for kind, name in known["configurations"].items()
    ]


def manager_configuration(cert_dir: Path, webhook_port: int, health_port: int) -> dict[str, Any]:
    """The manager's Configuration (config.lws.x-k8s.io/v1alpha1, sigs.k8s.io/lws
    api/config/v1alpha1): one replica without leader election, its webhook server on the twin's
    address with the twin's certificate, no metrics server."""
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": LOOPBACK, "port": webhook_port, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}"},
        "metrics": {"bindAddress": "0"},
    }


def _install(api: Api, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        reply = api.apply(obj, dry_run=False)
        if not reply.ok:
            raise TwinError(
                f"{obj['kind']} {obj['metadata']['name']} was refused ({reply.status}): {reply.message}"
            )


def _probe_lws() -> dict[str, Any]:
    """A one-pod LeaderWorkerSet: what a dry-run create sends through both LWS webhooks."""
    pod = {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}
    return {
        "apiVersion": f"{LWS_GROUP}/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "twin-webhook-probe", "namespace": "default"},
        "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": pod}}},
    }


@contextlib.contextmanager
def running_lws(api: Api, folder: Path, render: Path) -> Iterator[Program]:
    """The LWS manager against ``api`` (a twin on 127.0.0.1), its CRDs installed and its webhooks
    registered and answering, authorized by the RBAC of ``render``'s LWS release (its
    ServiceAccount's token); on leaving, the webhooks are removed before the manager stops, so the
    twin goes on creating pods without it."""
    binary = require_binaries(("lws",))["lws"]
    certificates = api.certificates
    if certificates is None:
        raise TwinError("this Api was not made by running_twin: no certificate for the LWS webhooks")
    release = chart_release(render, LWS_RELEASE)
    (manager,) = release.deployments()
    install_accounts_and_rbac(api, release, [manager])
    account = manager["spec"]["template"]["spec"].get("serviceAccountName") or "default"
    server = str(api.http.base_url).rstrip("/")
    config_path = account_kubeconfig(api, server, release.namespace, account, folder / "lws-kubeconfig")
    for crd in lws_crds():
        _install(api, [crd])
        wait_established(api, crd["metadata"]["name"])
    api.discover()
    cert_dir = folder / "lws-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    # controller-runtime's webhook server reads tls.crt / tls.key from its certDir; the twin's
    # serving certificate names 127.0.0.1 and is signed by the CA the API server trusts.
    shutil.copyfile(certificates.serving_cert, cert_dir / "tls.crt")
    shutil.copyfile(certificates.serving_key, cert_dir / "tls.key")
    webhook_port, health_port = free_port(), free_port()
    config = folder / "lws-config.yaml"
    config.write_text(yaml.safe_dump(manager_configuration(cert_dir, webhook_port, health_port)))
    env = os.environ | {"KUBECONFIG": str(config_path)}
    program = Program.start([str(binary), f"--config={config}", "--zap-log-level=2"], folder / "lws.log", env)
    hooks = webhook_configurations(f"https://{LOOPBACK}:{webhook_port}", certificates.ca.read_bytes())
    try:
        _install(api, hooks)
        # A dry-run create of a LeaderWorkerSet passes both LWS webhooks once they serve.
        wait_for(
            "answer from the LWS webhooks",
            lambda: api.apply(_probe_lws(), dry_run=True).ok,
            [program],
            READY_TIMEOUT_S,
        )
        yield program
    finally:
        for hook in hooks:
            api.call(
                "DELETE",
                f"/apis/admissionregistration.k8s.io/v1/{hook['kind'].lower()}s/{hook['metadata']['name']}",
            )
        _stop(program.process)


# --- One replica group, made by the real controllers --------------------------------------------

# The kube-controller-manager controller beside the LWS manager wherever it runs: the StatefulSets
# LWS writes become pods.
LWS_CONTROLLERS = ("statefulset-controller",)
# What a group needs besides, to be read as a cluster reads it: Services become the EndpointSlices
# that cluster DNS and kube-proxy read.
GROUP_CONTROLLERS = (*LWS_CONTROLLERS, "endpointslice-controller")
STEP_TIMEOUT_S = 60.0
ZONE_KEY = "topology.kubernetes.io/zone"
# Pod addresses the twin hands out as it plays the kubelet: distinct across groups and namespaces.
_POD_ADDRESSES = (f"10.0.{n // 250}.{n % 250 + 2}" for n in itertools.count())


@dataclass(frozen=True)
class Group:
    """What the real controllers made of one LeaderWorkerSet in one namespace (as read back)."""

    namespace: str
    lws: dict[str, Any]
    pods: dict[str, dict[str, Any]]
    services: dict[str, dict[str, Any]]
    slices: list[dict[str, Any]]
    scale: dict[str, Any]
    nodes: dict[str, dict[str, Any]]
    made_while_leader_unbound: list[str] | None

    @property
    def leader(self) -> dict[str, Any]:
        return self.pods[leader_name(self.lws)]

    @property
    def workers(self) -> list[dict[str, Any]]:
        leader = leader_name(self.lws)
        return [p for name, p in sorted(self.pods.items()) if name != leader]


def leader_name(lws: dict[str, Any]) -> str:
    """The first group's leader pod: the leader StatefulSet's pod ``<lws>-0``."""
    return f"{lws['metadata']['name']}-0"


@contextlib.contextmanager
def controller_manager(
    api: Api, folder: Path, controllers: Sequence[str] = GROUP_CONTROLLERS
) -> Iterator[Program]:
    """kube-controller-manager running ``controllers`` against ``api``."""
    binary = require_binaries(("kube-controller-manager",))["kube-controller-manager"]
    config = kubeconfig(api, folder)
    command = [
        str(binary), f"--kubeconfig={config}", "--leader-elect=false",
        f"--controllers={','.join(controllers)}", "--secure-port=0",
    ]  # fmt: skip
    program = Program.start(command, folder / "kube-controller-manager.log")
    try:
        yield program
    finally:
        _stop(program.process)


def _pod(api: Api, namespace: str, name: str) -> dict[str, Any] | None:
    reply = api.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return reply.body if reply.ok else None


def place_pod(api: Api, pod: dict[str, Any], node: str, address: str) -> None:
    """Play the scheduler and kubelet for ``pod``: bind it to ``node``, then report it running at
    ``address`` and not ready (vLLM loading its weights: the state in which workers dial their
    leader)."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"kind": "Node", "name": node},
    }
    reply = api.call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)
    if not reply.ok:
        raise TwinError(f"binding pod {name} to {node} was refused ({reply.status}): {reply.message}")
    status = {
        "status": {
            "phase": "Running",
            "podIP": address,
            "podIPs": [{"ip": address}],
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}],
        }
    }
    reply = api.call(
        "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", status, "application/merge-patch+json"
    )
    if not reply.ok:
        raise TwinError(f"the status of pod {name} was refused ({reply.status}): {reply.message}")


def node_object(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {ZONE_KEY: zone}}}


def _items(api: Api, path: str) -> list[dict[str, Any]]:
    return list(api.call("GET", path).body.get("items") or [])


def sliced_for(service: str, slices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The endpoints of ``service``'s EndpointSlices (their ``kubernetes.io/service-name`` label)."""
    return [
        endpoint
        for found in slices
        if (found["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service
        for endpoint in found.get("endpoints") or []
    ]


def _read_back(
    api: Api, namespace: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The namespace's pods and Services by name, and its EndpointSlices."""
    pods = {p["metadata"]["name"]: p for p in _items(api, f"/api/v1/namespaces/{namespace}/pods")}
    services = {s["metadata"]["name"]: s for s in _items(api, f"/api/v1/namespaces/{namespace}/services")}
    slices = _items(api, f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices")
    return pods, services, slices


def _endpoints_written(api: Api, namespace: str) -> bool:
    """Every Service with a selector has EndpointSlices listing each pod it selects."""
    pods, services, slices = _read_back(api, namespace)
    for name, service in services.items():
        selector = service["spec"].get("selector")
        wanted = {n for n, pod in pods.items() if selector and selects(selector, pod)}
        listed = {(e.get("targetRef") or {}).get("name") for e in sliced_for(name, slices)}
        if not wanted <= listed:
            return False
    return True


def _unbound_leader_seen(api: Api, lws: dict[str, Any]) -> list[str]:
    """The group's StatefulSets and pods (``Kind/name``) once the LWS pod controller has handled
    its unbound leader: under ``UniquePerReplica`` it first makes the group's headless Service
    (named after the leader), then goes on to the worker StatefulSet or stops for want of a node;
    so once that Service is there, what exists is what the controller makes before any node is
    chosen."""
    namespace, leader = lws["metadata"]["namespace"], leader_name(lws)
    path = f"/api/v1/namespaces/{namespace}/services/{leader}"
    wait_for(f"headless Service {leader}", lambda: api.call("GET", path).ok, [], STEP_TIMEOUT_S)
    # The worker StatefulSet, were it made, comes in the same reconcile, just after the Service.
    time.sleep(1.0)
    kinds = {
        "StatefulSet": f"/apis/apps/v1/namespaces/{namespace}/statefulsets",
        "Pod": f"/api/v1/namespaces/{namespace}/pods",
    }
    return sorted(
        f"{kind}/{o['metadata']['name']}" for kind, path in kinds.items() for o in _items(api, path)
    )


def _place_group(
    api: Api, lws: dict[str, Any], zone: str, programs: Sequence[Program]
) -> tuple[dict[str, dict[str, Any]], list[str] | None]:
    """Place the first group's leader on a node of ``zone`` and each worker, once the pod
    controller has made it, on a node of the zone its node selector names. Returns the nodes,
    and the StatefulSets and pods there were while the leader was unbound (None under another subdomain policy
    than ``UniquePerReplica``, which gives no moment to read them at)."""
    namespace = lws["metadata"]["namespace"]
    size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
    nodes: dict[str, dict[str, Any]] = {}
    unbound: list[str] | None = None
    for index in range(size):
        name = leader_name(lws) if index == 0 else f"{leader_name(lws)}-{index}"
        pod = wait_for(f"pod {name}", lambda name=name: _pod(api, namespace, name), programs, STEP_TIMEOUT_S)
        policy = (lws["spec"].get("networkConfig") or {}).get("subdomainPolicy")
        if index == 0 and policy == "UniquePerReplica":
            unbound = _unbound_leader_seen(api, lws)
        node = node_object(
            f"{namespace}-node-{index}", (pod["spec"].get("nodeSelector") or {}).get(ZONE_KEY, zone)
        )
        _install(api, [node])
        nodes[node["metadata"]["name"]] = node
        place_pod(api, pod, node["metadata"]["name"], next(_POD_ADDRESSES))
    return nodes, unbound


def run_group(
    api: Api,
    lws: dict[str, Any],
    prerequisites: Sequence[dict[str, Any]],
    programs: Sequence[Program],
    zone: str = "us-east-1a",
) -> Group:
    """Create ``prerequisites`` and ``lws``, then take its first group as far as the controllers
    go without GPUs: its pods placed (``_place_group``) and the EndpointSlices of every Service in
    the namespace written. Returns what the controllers made, as read back."""
    namespace = lws["metadata"]["namespace"]
    _install(
        api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, *prerequisites, lws]
    )
    nodes, unbound = _place_group(api, lws, zone, programs)
    wait_for(
        "EndpointSlices for every Service",
        lambda: _endpoints_written(api, namespace),
        programs,
        STEP_TIMEOUT_S,
    )
    pods, services, slices = _read_back(api, namespace)
    base = f"/apis/{LWS_GROUP}/v1/namespaces/{namespace}/leaderworkersets/{lws['metadata']['name']}"
    return Group(
        namespace=namespace,
        lws=api.call("GET", base).body,
        pods=pods,
        services=services,
        slices=slices,
        scale=api.call("GET", f"{base}/scale").body,
        nodes=nodes,
        made_while_leader_unbound=unbound,
    )


# --- Selectors ---------------------------------------------------------------------------------------


def selects(selector: dict[str, str], pod: dict[str, Any]) -> bool:
    """A Service's equality selector against a pod's labels."""
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def label_selector_selects(selector: str, pod: dict[str, Any]) -> bool:
    """A ``k=v,k2=v2`` label selector string (a Scale's ``status.selector``) against a pod."""
    pairs = dict(part.split("=", 1) for part in selector.split(",") if part)
    return selects(pairs, pod)
