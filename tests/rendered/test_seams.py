"""The seams a real EKS cluster enforces: every flow of the one required-flows table
(``components/required_flows.json``) is admitted by the rendered NetworkPolicies as the EKS
network-policy agent judges it, and every forbidden one is refused.

A flow to a Service is judged before DNAT, on its ClusterIP (``tests/netpol.py``, modelled on
aws/amazon-network-policy-controller-k8s v1.1.7, ``reference/upstream/network-policy-controller.json``).
The charts' pods and Services come from their sources (``reference/upstream/chart-workloads.json``);
the program's own pods from the render; namespaces from the render's Helm releases; ClusterIPs from
both EKS default service CIDRs (``network-policy-facts.json``)."""

from __future__ import annotations

import contextlib
import io
import ipaddress
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
import yaml

from deepseek_eks.components.required_flows import Flow, FlowEnd, required_flows
from deepseek_eks.components.serving.router import ROUTER
from deepseek_eks.perf.loadtest import cli as loadtest_cli
from tests.netpol import Cluster, Endpoint, Host, Pod, Service, ServicePort, selector_matches
from tests.rendered.test_network_policies import CASES, INTERNET_ADDRESS, Stack, host_in, stack
from tests.upstream import chart_workloads, network_policy_facts

# dev, prod and r1 as shipped, and dev on KEDA signals; then every other case of the policy tests.
SEAM_CASE_NAMES = ["dev", "prod", "r1", "dev-queue-depth", "dev-concurrency", "dev-llm-d", "prod-llm-d"]
ALL_CASES = [*SEAM_CASE_NAMES, *(c for c in CASES if c not in SEAM_CASE_NAMES)]
STRANGER = Pod("default", {"app": "curl"}, {"http": 8080})


def chart_namespaces(s: Stack) -> dict[str, str]:
    """Each rendered chart's namespace, by chart name (an OCI chart reference ends with it)."""
    return {r["chart"].rsplit("/", 1)[-1]: r["namespace"] for r in s.rendered.helm.values()}


def chart_pod(s: Stack, name: str) -> Pod | None:
    spec = chart_workloads()["pods"].get(name)
    if spec is None:
        return None
    namespace = chart_namespaces(s).get(spec["chart"])
    return None if namespace is None else Pod(namespace, spec["labels"], spec["container_ports"])


@cache
def service_cidrs() -> tuple[str, ...]:
    return tuple(network_policy_facts()["service_ipv4_cidr_defaults"]["value"])


def chart_services(s: Stack, name: str) -> list[Service]:
    """The chart's Service, once per EKS default service CIDR (the ClusterIP is in one of them)."""
    spec = chart_workloads()["services"].get(name)
    if spec is None:
        return []
    namespace = chart_namespaces(s).get(spec["chart"])
    if namespace is None:
        return []
    backends = tuple(
        pod
        for key, p in chart_workloads()["pods"].items()
        if p["chart"] == spec["chart"]
        and (pod := chart_pod(s, key)) is not None
        and pod.namespace == namespace
        and selector_matches({"matchLabels": spec["selector"]}, pod.labels)
    )
    assert backends, f"no pod of {spec['chart']} is selected by its Service {spec['name']}"
    ports = tuple(ServicePort(p["port"], p["targetPort"]) for p in spec["ports"])
    return [
        Service(namespace, spec["name"], spec["selector"], str(ipaddress.ip_network(c)[200]), ports, backends)
        for c in service_cidrs()
    ]


def vllm_services(s: Stack) -> list[Service]:
    """The rendered vLLM Service (once per EKS default service CIDR), its backends the rendered
    pods its selector picks."""
    (svc,) = [o for o in s.rendered.objects() if o["kind"] == "Service" and o["metadata"]["name"] == "vllm"]
    selector = svc["spec"]["selector"]
    backends = tuple(
        w.pod
        for w in s.workloads
        if w.pod.namespace == svc["metadata"]["namespace"]
        and selector_matches({"matchLabels": selector}, w.pod.labels)
    )
    assert backends, "the vLLM Service selects no rendered pod"
    ports = tuple(
        ServicePort(p["port"], p["targetPort"], p.get("protocol", "TCP")) for p in svc["spec"]["ports"]
    )
    return [
        Service(
            svc["metadata"]["namespace"], "vllm", selector, str(ipaddress.ip_network(c)[100]), ports, backends
        )
        for c in service_cidrs()
    ]


@cache
def loadtest_job(namespace: str) -> tuple[dict[str, Any], ...]:
    """What `loadtest --as-job` prints (the docs' example), parsed."""
    argv = ["--url", f"http://vllm.{namespace}.svc.cluster.local", "--model", "r1-distill-qwen-7b"]
    argv += [
        "--arrivals",
        "closed",
        "--concurrency",
        "8",
        "--requests",
        "100",
        "--namespace",
        namespace,
        "--as-job",
    ]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert loadtest_cli.main(argv) == 0
    return tuple(yaml.safe_load_all(out.getvalue()))


def loadtest_pod(namespace: str) -> Pod:
    (job,) = [d for d in loadtest_job(namespace) if d["kind"] == "Job"]
    template = job["spec"]["template"]
    return Pod(job["metadata"]["namespace"], template["metadata"]["labels"])


def with_loadtest(s: Stack) -> Cluster:
    """The render's policies plus the ones `--as-job` prints beside its Job."""
    extra = [d for d in loadtest_job(s.server.namespace) if d["kind"] == "NetworkPolicy"]
    return Cluster([*s.cluster.policies, *extra], s.cluster.namespace_labels)


def hosts(s: Stack, name: str) -> list[Host]:
    if name == "control-plane":  # its interfaces sit in the cluster's subnets
        return [host_in(c, 7) for c in s.pod_subnets]
    if name == "kubernetes-api":  # the Service's ClusterIP (first address) and its endpoints
        return [Host(str(ipaddress.ip_network(c)[1])) for c in service_cidrs()] + hosts(s, "control-plane")
    if name == "load-balancer-subnets":
        return [host_in(c, 10) for c in s.alb_subnets]
    if name == "internet":
        return [Host(INTERNET_ADDRESS)]
    raise AssertionError(f"unknown host {name}")


def endpoints(s: Stack, end: FlowEnd) -> list[Endpoint | Service]:
    if end.kind == "host":
        return list(hosts(s, end.name))
    if end.kind == "service":
        return vllm_services(s) if end.name == "vllm" else list(chart_services(s, end.name))
    if end.name == "loadtest":
        return [loadtest_pod(s.server.namespace)]
    if end.name == "vllm":
        return [s.server]
    if end.name == ROUTER:
        return [w.pod for w in s.workloads if w.pod.labels.get("app.kubernetes.io/name") == ROUTER]
    if end.name == "stranger":
        return [STRANGER]
    pod = chart_pod(s, end.name)
    return [] if pod is None else [pod]


@dataclass(frozen=True)
class Judged:
    flow: Flow
    admitted: bool  # required: every pair connects; forbidden: some pair does
    refused: tuple[str, ...]  # the (source, destination) pairs the policies refuse


def label(end: Endpoint | Service) -> str:
    if isinstance(end, Service):
        return f"Service {end.namespace}/{end.name} at {end.cluster_ip}"
    if isinstance(end, Pod):
        name = end.labels.get("app.kubernetes.io/name") or end.labels.get("app", "?")
        return f"pod {end.namespace}/{name}"
    return f"host {end.ip}"


def connects(cluster: Cluster, source: Endpoint, dest: Endpoint | Service, flow: Flow) -> bool:
    if isinstance(dest, Service):
        return cluster.allows_service(source, dest, flow.port, flow.protocol)
    return cluster.allows(source, dest, flow.port, flow.protocol)


@cache
def judged(case: str) -> tuple[Judged, ...]:
    """Each flow whose two ends this stack runs: admitted only if every source reaches every
    destination address it may be given."""
    s = stack(case)
    out = []
    routing = "llm-d" if endpoints(s, FlowEnd("pod", ROUTER)) else "none"
    for flow in required_flows():
        if not flow.applies_to(routing):
            continue
        sources, dests = endpoints(s, flow.source), endpoints(s, flow.dest)
        if not sources or not dests:
            continue
        # The Job's policies exist only while a load test runs: they judge its flows alone.
        cluster = with_loadtest(s) if "loadtest" in (flow.source.name, flow.dest.name) else s.cluster
        refused = tuple(
            f"{label(src)} -> {label(dst)}"
            for src in sources
            for dst in dests
            if isinstance(src, Pod | Host) and not connects(cluster, src, dst, flow)
        )
        admitted = not refused if flow.required else len(refused) < len(sources) * len(dests)
        out.append(Judged(flow, admitted, refused))
    return tuple(out)


@pytest.mark.parametrize("case", ALL_CASES)
def test_every_required_flow_is_admitted_and_every_forbidden_one_refused(case: str) -> None:
    wrong = []
    for j in judged(case):
        if j.flow.required and not j.admitted:
            wrong.append(f"{j.flow.id} ({j.flow.reason}) is dropped: " + "; ".join(j.refused[:3]))
        if not j.flow.required and j.admitted:
            wrong.append(f"{j.flow.id} ({j.flow.reason}) is admitted")
    assert not wrong, "\n".join(wrong)


def test_the_flows_each_signal_depends_on_are_judged() -> None:
    """Not vacuous: the KEDA and adapter paths are judged where their charts are rendered."""
    ids = {case: {j.flow.id for j in judged(case)} for case in SEAM_CASE_NAMES}
    for case in ("prod", "r1", "dev-queue-depth", "dev-concurrency"):
        assert {"keda-queries-prometheus", "keda-metrics-server-calls-operator"} <= ids[case], case
    for case in ("dev", "prod"):
        assert "adapter-queries-prometheus" in ids[case], case
    for case in SEAM_CASE_NAMES:
        front = "load-balancer-reaches-router" if case.endswith("llm-d") else "load-balancer-reaches-vllm"
        assert {"grafana-queries-prometheus", front} <= ids[case], case
    for case in ("dev-llm-d", "prod-llm-d"):
        assert {"router-reaches-vllm", "prometheus-scrapes-router", "router-watches-the-api"} <= ids[case]
        assert "load-balancer-does-not-bypass-the-router" in ids[case]
        assert "load-balancer-reaches-vllm" not in ids[case]
        assert "strangers-do-not-query-prometheus" in ids[case], case


def test_the_load_test_job_alone_opens_nothing_else() -> None:
    """Its policies admit the Job's own pod, not a stranger in the namespace, and vLLM still
    refuses a stranger on 8000."""
    s = stack("dev")
    cluster = with_loadtest(s)
    stray = Pod(s.server.namespace, {"app": "debug"})
    for service in vllm_services(s):
        assert not cluster.allows_service(stray, service, 80)
        assert cluster.allows_service(loadtest_pod(s.server.namespace), service, 80)
    assert not cluster.allows(stray, s.server, 8000)


def test_every_flow_of_the_table_is_judged_by_some_stack() -> None:
    judged_ids = {j.flow.id for case in SEAM_CASE_NAMES for j in judged(case)}
    assert judged_ids == {f.id for f in required_flows()}
