"""The seams, judged by the real EKS network-policy controller instead of a model of it.

Each stack's rendered NetworkPolicies, its namespaces, the charts' pods and Services (from their
sources, ``reference/upstream/chart-workloads.json``) and the program's own pods go to the twin's
real kube-apiserver, which assigns the ClusterIPs; the pods get addresses through their status, as
a kubelet would report them. The released controller
(aws/amazon-network-policy-controller-k8s v1.1.10, ``twin/build.sh network-policy-controller``)
then writes the PolicyEndpoints the EKS agent enforces, and every flow of the one required-flows
table between pods and Services is judged on them as the agent judges it: at the client's
interface, before DNAT, on the ClusterIP (``automation/twin/policy_endpoints.py``).

Not judged here: flows from or to hosts (the control plane's interfaces, load-balancer subnets:
their addresses come from the AWS network, which the twin does not have; tests/rendered/test_seams.py
covers them). The load-test Job's flow to vLLM is judged with the policies `loadtest --as-job`
prints beside it, which exist only while a load test runs.

About 15 s per stack. Skips without the binaries; fails instead under DEEPSEEK_EKS_REQUIRE_SEAMS=1.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation.twin import missing_binaries
from deepseek_eks.automation.twin.binaries import TIER0
from deepseek_eks.automation.twin.policy_endpoints import CONTROLLER, admits, controller, install_crds, settle
from deepseek_eks.automation.twin.server import Api, TwinError, running_twin
from deepseek_eks.components.required_flows import Flow, required_flows
from tests.netpol import Pod
from tests.rendered.test_network_policies import Stack, stack
from tests.rendered.test_seams import STRANGER, chart_namespaces, loadtest_job, loadtest_pod
from tests.twin.conftest import require_binaries
from tests.upstream import chart_workloads

CASES = ["prod", "r1", "dev-queue-depth", "dev"]
HOST_IP = "192.168.0.10"


def require_controller() -> None:
    absent = missing_binaries((*TIER0, CONTROLLER))
    build = "run `twin/build.sh etcd kube-apiserver network-policy-controller`"
    require_binaries(
        absent, "the twin and the EKS network-policy controller", build, "DEEPSEEK_EKS_REQUIRE_SEAMS"
    )


@dataclass
class Placed:
    """What the twin holds for one stack: each pod's address by role, each Service as served."""

    pods: dict[str, tuple[Pod, str]]  # role -> (pod, its IP)
    services: dict[str, dict[str, Any]]  # chart service key or "vllm" -> the served Service


def _pod_object(name: str, pod: Pod) -> dict[str, Any]:
    ports = [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in pod.named_ports.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": pod.namespace, "labels": dict(pod.labels)},
        "spec": {
            # Scheduled: the controller caches only pods with a node (v1.1.10
            # pkg/config/runtime_config.go podCacheFieldSelector: spec.nodeName != "").
            "nodeName": "twin-node",
            # A stand-in that Pod Security "restricted" (the service's namespace) admits.
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65535,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "ports": ports,
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def _must(
    api: Api, method: str, path: str, body: Any, content_type: str = "application/json"
) -> dict[str, Any]:
    reply = api.call(method, path, body, content_type)
    if not reply.ok:
        raise TwinError(f"{method} {path} refused ({reply.status}): {reply.message}")
    return reply.body


def _roles(s: Stack) -> dict[str, Pod]:
    """Every pod a flow of the table can start or end at, by the table's names."""
    roles: dict[str, Pod] = {
        "vllm": s.server,
        "stranger": STRANGER,
        "loadtest": loadtest_pod(s.server.namespace),
    }
    namespaces = chart_namespaces(s)
    for key, spec in chart_workloads()["pods"].items():
        if spec["chart"] in namespaces:
            roles[key] = Pod(namespaces[spec["chart"]], spec["labels"], spec["container_ports"])
    return roles


def _services(s: Stack) -> dict[str, dict[str, Any]]:
    namespaces = chart_namespaces(s)
    out = {}
    for key, spec in chart_workloads()["services"].items():
        if spec["chart"] not in namespaces:
            continue
        ports = [
            {"name": f"p{i}", "port": p["port"], "targetPort": p["targetPort"], "protocol": "TCP"}
            for i, p in enumerate(spec["ports"])
        ]
        out[key] = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": spec["name"], "namespace": namespaces[spec["chart"]]},
            "spec": {"selector": spec["selector"], "ports": ports},
        }
    (vllm,) = [o for o in s.rendered.objects() if o["kind"] == "Service" and o["metadata"]["name"] == "vllm"]
    out["vllm"] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm", "namespace": vllm["metadata"]["namespace"]},
        "spec": {"selector": vllm["spec"]["selector"], "ports": copy.deepcopy(vllm["spec"]["ports"])},
    }
    return out


def place(api: Api, s: Stack, policies: list[dict[str, Any]]) -> Placed:
    """Namespaces (labelled as rendered), a default service account each, the pods with their
    addresses, the Services (ClusterIPs from the API server) and the policies."""
    roles = _roles(s)
    namespaces = {p.namespace for p in roles.values()} | {p["metadata"]["namespace"] for p in policies}
    for name in sorted(namespaces):
        labels = s.cluster.namespace_labels.get(name, {})
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": name},
        }
        for obj in (namespace, account):  # `default` exists already
            reply = api.apply(obj, dry_run=False)
            if not reply.ok:
                raise TwinError(f"{obj['kind']} {name} refused: {reply.message}")
    pods = {}
    for i, (role, pod) in enumerate(sorted(roles.items())):
        ip = f"10.0.{i // 200}.{10 + i % 200}"
        name = role.replace("_", "-")
        _must(api, "POST", f"/api/v1/namespaces/{pod.namespace}/pods", _pod_object(name, pod))
        status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": HOST_IP}}
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{name}/status"
        _must(api, "PATCH", path, status, "application/merge-patch+json")
        pods[role] = (pod, ip)
    services = {}
    for key, svc in _services(s).items():
        ns = svc["metadata"]["namespace"]
        services[key] = _must(api, "POST", f"/api/v1/namespaces/{ns}/services", svc)
    api.discover()
    for policy in policies:
        reply = api.apply(policy, dry_run=False)
        if not reply.ok:
            raise TwinError(f"NetworkPolicy {policy['metadata']['name']} refused: {reply.message}")
    return Placed(pods, services)


@contextmanager
def resolved(s: Stack, policies: list[dict[str, Any]]) -> Iterator[tuple[Api, Placed, list[dict[str, Any]]]]:
    """A twin holding ``s`` with ``policies``, and the PolicyEndpoints the controller wrote."""
    with running_twin() as api, tempfile.TemporaryDirectory(prefix="deepseek-eks-npc-") as temp:
        install_crds(api)
        placed = place(api, s, policies)
        with controller(api, Path(temp)) as program:
            yield api, placed, settle(api, program, policies)


def _target_port(svc: dict[str, Any], port: int, backend: Pod) -> int | None:
    for p in svc["spec"]["ports"]:
        if p["port"] == port:
            target = p.get("targetPort", port)
            return target if isinstance(target, int) else backend.named_ports.get(target)
    return None


def _selects(svc: dict[str, Any], pod: Pod) -> bool:
    namespace = svc["metadata"]["namespace"]
    selector = svc["spec"]["selector"]
    return pod.namespace == namespace and all(pod.labels.get(k) == v for k, v in selector.items())


def verdict(flow: Flow, placed: Placed, endpoints: list[dict[str, Any]]) -> tuple[bool, str] | None:
    """(admitted, why) for a flow between pods or to a Service; None when it is not judged here
    (a host end, the load test, or an end this stack does not run)."""
    if "host" in (flow.source.kind, flow.dest.kind):
        return None
    source = placed.pods.get(flow.source.name)
    if source is None:
        return None
    src_ip = source[1]
    if flow.dest.kind == "pod":
        dest = placed.pods.get(flow.dest.name)
        if dest is None:
            return None
        out = admits(endpoints, src_ip, dest[1], flow.port, flow.protocol, "egress")
        into = admits(endpoints, dest[1], src_ip, flow.port, flow.protocol, "ingress")
        return out and into, f"egress {out}, ingress {into}"
    svc = placed.services.get(flow.dest.name)
    if svc is None:
        return None
    cluster_ip = svc["spec"]["clusterIP"]
    out = admits(endpoints, src_ip, cluster_ip, flow.port, flow.protocol, "egress")
    backends = [(pod, ip) for pod, ip in placed.pods.values() if _selects(svc, pod)]
    assert backends, f"Service {svc['metadata']['name']} selects no placed pod"
    into = all(
        (target := _target_port(svc, flow.port, pod)) is not None
        and admits(endpoints, ip, src_ip, target, flow.protocol, "ingress")
        for pod, ip in backends
    )
    return out and into, f"egress to ClusterIP {cluster_ip}:{flow.port} {out}, ingress at the backends {into}"


@cache
def judged(case: str) -> tuple[tuple[Flow, bool, str], ...]:
    """Each flow this stack runs both ends of; the load test's with its Job's policies added (and
    the other flows without them: they must hold whether a load test runs or not)."""
    s = stack(case)
    job_policies = [d for d in loadtest_job(s.server.namespace) if d["kind"] == "NetworkPolicy"]
    out = []
    for policies, loadtest in (
        (list(s.cluster.policies), False),
        ([*s.cluster.policies, *job_policies], True),
    ):
        with resolved(s, policies) as (_, placed, endpoints):
            for flow in required_flows():
                if ("loadtest" in (flow.source.name, flow.dest.name)) != loadtest:
                    continue
                found = verdict(flow, placed, endpoints)
                if found is not None:
                    out.append((flow, *found))
    return tuple(out)


@pytest.mark.parametrize("case", CASES)
def test_the_real_controller_admits_every_required_flow_and_no_forbidden_one(case: str) -> None:
    require_controller()
    wrong = [
        f"{flow.id} ({flow.reason}): {'dropped' if flow.required else 'admitted'}; {why}"
        for flow, admitted, why in judged(case)
        if admitted != flow.required
    ]
    assert not wrong, "\n".join(wrong)


def test_the_signals_flows_are_among_those_judged() -> None:
    """Not vacuous: KEDA's and the adapter's queries to Prometheus' Service are judged."""
    require_controller()
    ids = {case: {flow.id for flow, _, _ in judged(case)} for case in CASES}
    for case in ("prod", "r1", "dev-queue-depth"):
        assert {"keda-queries-prometheus", "keda-metrics-server-calls-operator"} <= ids[case], case
    for case in ("dev", "prod"):
        assert "adapter-queries-prometheus" in ids[case], case
    for case in CASES:  # the in-cluster load test reaches the service (issue 32 §2)
        assert "loadtest-reaches-vllm" in ids[case], case


def test_the_controller_drops_a_service_whose_selector_the_peer_does_not_match() -> None:
    """The blocker of a real EKS cluster: a KEDA egress peer that also asks for a label the
    Prometheus Service's own selector lacks (managed-by, on the pods only) still admits the pods'
    addresses, but the controller leaves the ClusterIP out, and KEDA's queries, which go to the
    ClusterIP, are dropped. This is what the rendered policy must not do."""
    require_controller()
    s = stack("prod")
    policies = copy.deepcopy(list(s.cluster.policies))
    narrowed = 0
    for policy in policies:
        for rule in policy["spec"].get("egress") or []:
            for peer in rule.get("to") or []:
                labels = (peer.get("podSelector") or {}).get("matchLabels") or {}
                if labels.get("app.kubernetes.io/name") == "prometheus":
                    labels["app.kubernetes.io/managed-by"] = "prometheus-operator"
                    narrowed += 1
    assert narrowed, "no egress peer selects Prometheus' pods"
    (flow,) = [f for f in required_flows() if f.id == "keda-queries-prometheus"]
    with resolved(s, policies) as (_, placed, endpoints):
        found = verdict(flow, placed, endpoints)
        assert found is not None
        admitted, why = found
        assert not admitted, why
        assert "egress to ClusterIP" in why and "False" in why.split(",")[0]
        prometheus_ip = placed.pods["prometheus"][1]
        keda_ip = placed.pods["keda-operator"][1]
        assert admits(endpoints, keda_ip, prometheus_ip, 9090, "TCP", "egress")  # the pod address stays
