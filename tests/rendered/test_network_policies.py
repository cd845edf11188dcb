"""Every pod of every stack can make the connections it needs, and nothing else reaches vLLM.

The rendered NetworkPolicies are evaluated (``tests/netpol.py``, Kubernetes semantics) for the
flows a serving pod needs on a real cluster, with the addresses taken from upstream facts
(``reference/upstream/serving-facts.json``) and from the rendered AWS network, never from the
policy itself: DNS to whichever resolver the pod is given (a CoreDNS pod under Karpenter, the node
under EKS Auto Mode), the EKS Pod Identity agent for pods whose service account has an
association, HTTPS to S3 and Hugging Face, and port 8000 from the load balancer and Prometheus.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components.platform.warm_spare import WARM_SPARE
from tests.conftest import stack_config
from tests.netpol import Cluster, Host, Pod
from tests.upstream import chart_workloads, serving_facts

# Every example stack, both weights sources, and an internet-facing endpoint.
CASES = {
    "dev": ("dev", ()),
    "dev-huggingface": ("dev", (("weights__source", "huggingface"),)),
    "dev-internet-facing": (
        "dev",
        (
            ("endpoint__scheme", "internet-facing"),
            ("endpoint__allowedCidrs", "198.51.100.0/24"),
            ("endpoint__certificateArn", "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234"),
        ),
    ),
    "prod": ("prod", ()),
    "prod-s3": ("prod", (("weights__source", "s3"),)),
    "r1": ("r1", ()),  # weights from S3, a two-node LeaderWorkerSet
    "r1-huggingface": ("r1", (("weights__source", "huggingface"),)),
    "dev-s3-mountpoint": ("dev", (("weights__source", "s3-mountpoint"),)),
    "r1-ebs-snapshot": (
        "r1",
        (("weights__source", "ebs-snapshot"), ("weights__snapshotId", "snap-0123456789abcdef0")),
    ),
    "dev-warm-spare": ("dev", (("autoscaling__warmSpareNodes", "1"),)),
    # A KEDA signal on dev: KEDA then runs beside the adapter (the seams of both are judged).
    "dev-queue-depth": ("dev", (("autoscaling__signal", "queue-depth"),)),
    "dev-concurrency": ("dev", (("autoscaling__signal", "concurrency"),)),
    "dev-nlb": ("dev", (("endpoint__loadBalancer", "nlb"), ("endpoint__auth", "none"))),
    # llm-d's router in front of vLLM: the load balancer reaches the router, the router vLLM.
    "dev-llm-d": (
        "dev",
        (
            ("routing__kind", "llm-d"),
            ("autoscaling__signal", "router-queue"),
            ("autoscaling__minReplicas", "0"),
        ),
    ),
    "prod-llm-d": ("prod", (("routing__kind", "llm-d"),)),
    "dev-llm-d-nlb": (
        "dev",
        (("routing__kind", "llm-d"), ("endpoint__loadBalancer", "nlb"), ("endpoint__auth", "none")),
    ),
    "r1-nlb-peered": (
        "r1",
        (
            ("endpoint__loadBalancer", "nlb"),
            ("endpoint__auth", "none"),
            ("endpoint__allowedCidrs", "198.51.100.0/24"),
        ),
    ),
}
# The load balancer controller places an ALB or NLB in the subnets tagged for its scheme (AWS Load
# Balancer Controller docs, subnet auto-discovery).
ALB_SUBNET_TAG = {"internal": "kubernetes.io/role/internal-elb", "internet-facing": "kubernetes.io/role/elb"}
NODE_SUBNET_TAG = (
    "karpenter.sh/discovery"  # Karpenter's subnetSelectorTerms (components/platform/karpenter.py)
)
S3_ADDRESS = "52.216.8.16"  # an s3.us-east-1.amazonaws.com address
HUGGING_FACE_ADDRESS = "18.160.10.25"  # a CloudFront address serving huggingface.co
INTERNET_ADDRESS = "203.0.113.9"
PROMETHEUS = Pod("monitoring", chart_workloads()["pods"]["prometheus"]["labels"])
COREDNS = Pod("kube-system", {"k8s-app": "kube-dns"}, {"dns": 53})
NODE_LOCAL_DNS = "169.254.20.10"  # a link-local node resolver (NodeLocal DNSCache's default)


@dataclass(frozen=True)
class Workload:
    """A pod template the stack renders, with its service account."""

    kind: str
    pod: Pod
    service_account: str


@dataclass(frozen=True)
class Stack:
    rendered: Rendered
    cluster: Cluster
    workloads: list[Workload]
    associations: frozenset[tuple[str, str]]  # (namespace, service account)
    alb_subnets: list[str]
    other_subnets: list[str]
    pod_subnets: list[str]

    def has_association(self, workload: Workload) -> bool:
        return (workload.pod.namespace, workload.service_account) in self.associations

    @property
    def vllm(self) -> list[Workload]:
        return [w for w in self.workloads if w.pod.labels.get("app.kubernetes.io/name") == "vllm"]

    @property
    def router(self) -> Pod | None:
        """llm-d's router pod, when the stack routes through it (routing.kind llm-d)."""
        pods = [w.pod for w in self.workloads if w.pod.labels.get("app.kubernetes.io/name") == "vllm-router"]
        return pods[0] if pods else None

    @property
    def server(self) -> Pod:
        """The pod that serves HTTP (the Deployment's, or the LeaderWorkerSet leader's)."""
        return next(w.pod for w in self.vllm if "http" in w.pod.named_ports)


def _templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] in ("Deployment", "Job"):
        return [obj["spec"]["template"]]
    if obj["kind"] == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"], lwt["workerTemplate"]]
    return []


def _workloads(rendered: Rendered) -> list[Workload]:
    found = []
    for obj in rendered.objects():
        if obj["metadata"]["name"] == WARM_SPARE:
            continue  # placeholders talk to nothing (tests/construction: their policy is closed)
        for template in _templates(obj):
            spec = template["spec"]
            ports = {p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
            pod = Pod(obj["metadata"]["namespace"], dict(template["metadata"]["labels"]), ports)
            found.append(Workload(obj["kind"], pod, spec["serviceAccountName"]))
    return found


@cache
def stack(case: str) -> Stack:
    name, overrides = CASES[case]
    rendered = render(stack_config(name, **dict(overrides)))
    objects = rendered.objects()
    namespaces = {
        o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in objects if o["kind"] == "Namespace"
    }
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    associations = frozenset(
        (r["inputs"]["namespace"], r["inputs"]["serviceAccount"])
        for r in rendered.aws
        if r["type"] == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    )
    front = next(
        o
        for o in objects
        if o["kind"] == "Ingress" or (o["kind"] == "Service" and o["spec"]["type"] == "LoadBalancer")
    )
    annotations = front["metadata"]["annotations"]
    scheme = (
        annotations.get("alb.ingress.kubernetes.io/scheme")
        or annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"]
    )
    # With Mountpoint's pod-level credentials the driver's Mountpoint pod (namespace mount-s3) calls
    # the Pod Identity agent with vLLM's token (mountpoint-s3-csi-driver v2.7.0
    # pkg/driver/node/credentialprovider/provider_pod.go), not vLLM's own pod.
    mounted = {
        (o["spec"]["claimRef"]["namespace"], "vllm")
        for o in objects
        if o["kind"] == "PersistentVolume"
        and o["spec"]["csi"]["volumeAttributes"].get("authenticationSource") == "pod"
    }
    associations = associations - mounted
    subnets = [r["inputs"] for r in rendered.aws if r["type"] == "aws:ec2/subnet:Subnet"]
    alb = [s["cidrBlock"] for s in subnets if ALB_SUBNET_TAG[scheme] in s["tags"]]
    others = [s["cidrBlock"] for s in subnets if ALB_SUBNET_TAG[scheme] not in s["tags"]]
    # Nodes (and so pods: the VPC CNI gives pods addresses of their node's subnet) are in the
    # subnets Karpenter discovers, the cluster's private subnets under either compute mode.
    pods = [s["cidrBlock"] for s in subnets if NODE_SUBNET_TAG in s["tags"]]
    cluster = Cluster(policies, namespaces)
    return Stack(rendered, cluster, _workloads(rendered), associations, alb, others, pods)


def host_in(cidr: str, offset: int = 10) -> Host:
    return Host(str(ipaddress.ip_network(cidr)[offset]))


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> Stack:
    return stack(request.param)


def test_every_case_renders_the_pods_and_policies_it_is_about(case: Stack) -> None:
    assert case.vllm and case.cluster.policies and case.alb_subnets and case.other_subnets
    assert any(p["metadata"]["namespace"] == case.server.namespace for p in case.cluster.policies)


def test_every_pod_resolves_names_through_any_resolver(case: Stack) -> None:
    """Karpenter mode: a CoreDNS pod; EKS Auto Mode: the node itself (containers-roadmap#2546,
    #2552) — an address in a node subnet or a link-local one. No policy may assume either."""
    assert serving_facts()["dns_on_eks_auto_mode"]["coredns_pods_in_kube_system"] is False
    nodes = [host_in(cidr) for cidr in [*case.alb_subnets, *case.other_subnets]]  # nodes' subnets among them
    resolvers = [COREDNS, Host(NODE_LOCAL_DNS), *nodes]
    for workload in case.workloads:
        for resolver in resolvers:
            for protocol in ("UDP", "TCP"):
                assert case.cluster.allows(workload.pod, resolver, 53, protocol), (
                    workload,
                    resolver,
                    protocol,
                )


def test_pods_with_a_pod_identity_association_and_only_those_reach_the_agent(case: Stack) -> None:
    """The project's VPCs and clusters are IPv4, so pods call the agent's IPv4 address."""
    agent = serving_facts()["eks_pod_identity_agent"]
    for workload in case.workloads:
        allowed = case.cluster.allows(workload.pod, Host(agent["ipv4"]), agent["port"], agent["protocol"])
        assert allowed == case.has_association(workload), workload


def test_s3_weights_mean_associations_for_vllm_and_the_stager() -> None:
    """The previous test is not vacuous: S3 stacks do give these pods associations."""
    s3 = stack("r1")
    assert {w.kind for w in s3.workloads if s3.has_association(w)} == {"LeaderWorkerSet", "Job"}
    hub = stack("dev-huggingface")
    assert not any(hub.has_association(w) for w in hub.workloads)


def test_pods_reach_s3_and_hugging_face_over_https_at_most(case: Stack) -> None:
    """Which pods get 443 at all (those that download): tests/rendered/test_default_deny.py."""
    for workload in case.workloads:
        for address in (S3_ADDRESS, HUGGING_FACE_ADDRESS):
            downloads = case.cluster.allows(workload.pod, Host(address), 443)
            assert downloads or workload.kind != "Job", (workload, address)
        # ... and never over anything else
        assert not case.cluster.allows(workload.pod, Host(S3_ADDRESS), 80)
        assert not case.cluster.allows(workload.pod, Host(INTERNET_ADDRESS), 22)


def test_port_8000_admits_the_load_balancer_and_prometheus(case: Stack) -> None:
    """The load balancer's targets are vLLM's pods, or with routing.kind llm-d the router's: then
    the load balancer reaches the router's proxy and readiness ports (not its picker's gRPC), and
    vLLM admits the router instead of the load balancer."""
    router = case.router
    for cidr in case.alb_subnets:
        for offset in (4, 100):
            balancer = host_in(cidr, offset)
            if router is None:
                assert case.cluster.allows(balancer, case.server, 8000), cidr
            else:
                assert not case.cluster.allows(balancer, case.server, 8000), cidr
                for port in (router.named_ports["http"], router.named_ports["ready"]):
                    assert case.cluster.allows(balancer, router, port), (cidr, port)
                assert not case.cluster.allows(balancer, router, router.named_ports["grpc"]), cidr
            assert not case.cluster.allows(balancer, case.server, 6379)
    assert case.cluster.allows(PROMETHEUS, case.server, 8000)
    if router is not None:
        assert case.cluster.allows(router, case.server, 8000)
        assert case.cluster.allows(PROMETHEUS, router, router.named_ports["metrics"])


def test_nothing_else_reaches_port_8000(case: Stack) -> None:
    intruders = [
        *(host_in(cidr) for cidr in case.other_subnets),  # VPC addresses outside the ALB's subnets
        Host(INTERNET_ADDRESS),
        Pod("default", {"app": "curl"}),
        Pod("kube-system", {"k8s-app": "kube-dns"}),
        Pod(case.server.namespace, {"app": "curl"}),  # another pod of the same namespace
        Pod("monitoring", {"app.kubernetes.io/name": "grafana"}, {}),
    ]
    stagers = [w.pod for w in case.workloads if w.kind == "Job"]
    prometheus_elsewhere = Pod("default", PROMETHEUS.labels)  # Prometheus' labels, wrong namespace
    for source in [*intruders, *stagers, prometheus_elsewhere]:
        assert not case.cluster.allows(source, case.server, 8000), source


def test_no_other_pod_reaches_port_8000_from_its_address_in_a_pod_subnet(case: Stack) -> None:
    """The load balancer's subnets are not pod subnets, so a CIDR rule for the load balancer
    admits no pod: a pod of another namespace, or of vLLM's, at an address where pods live."""
    assert case.pod_subnets
    assert not set(case.pod_subnets) & set(case.alb_subnets)
    for cidr in case.pod_subnets:
        for offset in (10, 1000):
            for intruder in (
                Pod("default", {"app": "curl"}, ip=host_in(cidr, offset).ip),
                Pod(case.server.namespace, {"app": "curl"}, ip=host_in(cidr, offset).ip),
            ):
                assert not case.cluster.allows(intruder, case.server, 8000), (cidr, intruder)
    prometheus_at_an_address = Pod(
        PROMETHEUS.namespace, PROMETHEUS.labels, ip=host_in(case.pod_subnets[0]).ip
    )
    assert case.cluster.allows(prometheus_at_an_address, case.server, 8000)


def test_any_other_pod_of_the_service_namespace_is_denied_both_ways(case: Stack) -> None:
    """Default deny in the namespace the service owns: a pod no workload policy selects (started
    by hand, say) can neither be reached nor reach out; the workloads keep what they need
    (the tests above)."""
    stranger = Pod(
        case.server.namespace, {"app": "debug"}, {"http": 8080}, ip=host_in(case.pod_subnets[0]).ip
    )
    for source in (PROMETHEUS, *(host_in(c) for c in case.alb_subnets), Pod("default", {"app": "curl"})):
        assert not case.cluster.allows(source, stranger, 8080), source
    for dest, port, protocol in (
        (Host(S3_ADDRESS), 443, "TCP"),
        (Host(INTERNET_ADDRESS), 80, "TCP"),
        (COREDNS, 53, "UDP"),
        (case.server, 8000, "TCP"),
    ):
        assert not case.cluster.allows(stranger, dest, port, protocol), dest
    # ...while vLLM itself still resolves names (HTTPS where it downloads: test_default_deny.py).
    assert case.cluster.allows(case.server, COREDNS, 53, "UDP")


def test_the_nodes_of_a_multi_node_replica_reach_each_other() -> None:
    r1 = stack("r1")
    leader, worker = (w.pod for w in r1.vllm)
    for port in (6379, 29500, 45000):  # Ray GCS, a torch rendezvous port, an NCCL socket port
        assert r1.cluster.allows(worker, leader, port) and r1.cluster.allows(leader, worker, port)
