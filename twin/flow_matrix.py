"""The flow matrix: every flow of the one required-flows table, judged on the PolicyEndpoints the real
EKS network-policy controller writes for a render.

One twin run per render: the render's namespaces (labelled as rendered), the charts' pods and
Services (from their sources, ``reference/upstream/chart-workloads.json``), the program's own vLLM
pod, a stranger and the load-test Job's pod go to the twin's kube-apiserver, which assigns the
ClusterIPs; the pods get addresses through their status, as a kubelet reports them. The released
controller (``policy_endpoints.py``) resolves the rendered NetworkPolicies into PolicyEndpoints, and
each flow is judged on them as the EKS agent judges it: at the client's interface, before DNAT, on
the ClusterIP for a Service (``policy_endpoints.admits``). The load test's flows are judged after
the policies ``loadtest --as-job`` prints beside its Job are added (they exist only while a load
test runs); every other flow before, so it holds whether a load test runs or not.

Hosts (the control plane's interfaces, the load balancer, the ``kubernetes`` Service, the
Internet) are judged on the ipBlock rules the controller copies into the PolicyEndpoints, over
every address the host may have, taken from what the render says the cluster's networks are
(``cluster_networks``): a required flow must be admitted from (to) each of them, a forbidden one
from (to) none. Pods are placed at addresses of the subnets the render's nodes use, so an ipBlock
naming the VPC sees them as it would on EKS (the VPC CNI gives a pod an address of its node's
subnet). What differs from a real cluster is listed by ``address_rewrites``.
"""

from __future__ import annotations

import copy
import fnmatch
import ipaddress
import json
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from deepseek_eks.components.platform.warm_spare import WARM_SPARE  # placeholders that talk to nothing
from deepseek_eks.components.required_flows import Flow, FlowEnd, required_flows
from deepseek_eks.components.serving.router import ROUTER
from deepseek_eks.perf.loadtest.job import JOB_LABELS
from deepseek_eks.perf.loadtest.job import network_policies as loadtest_network_policies
from deepseek_eks.testing.mocks import resource_id

from .policy_endpoints import _by_policy, _port_matches, admits, controller, install_crds, settle
from .server import Api, TwinError, running_twin

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
UPSTREAM = PROJECT_ROOT / "reference" / "upstream"
SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
EKS_COMPONENT = "eks:index:Cluster"  # pulumi-eks' Cluster component
EKS_CLUSTER = "aws:eks/cluster:Cluster"
# The AWS Load Balancer Controller (and EKS Auto Mode's, which follows it) places an ALB or NLB in
# the subnets tagged for its scheme unless the object names subnets itself (EKS User Guide,
# networking/network-reqs.adoc, the subnet tags table; aws-load-balancer-controller
# docs/deploy/subnet_discovery.md). ELB creates the load balancer's network interfaces in those
# subnets, at addresses it picks, and its nodes connect to ip targets from them (Elastic Load
# Balancing, Application Load Balancers, "Subnets for your load balancer").
LB_SUBNET_TAG = {"internal": "kubernetes.io/role/internal-elb", "internet-facing": "kubernetes.io/role/elb"}
LB_SUBNET_ANNOTATIONS = (
    "alb.ingress.kubernetes.io/subnets",
    "service.beta.kubernetes.io/aws-load-balancer-subnets",
)
LB_SCHEME_ANNOTATIONS = (
    "alb.ingress.kubernetes.io/scheme",
    "service.beta.kubernetes.io/aws-load-balancer-scheme",
)
# IANA IPv4 Special-Purpose Address Registry (RFC 6890 and its updates): none of these is a public
# Internet address; every other IPv4 address may be one.
NOT_PUBLIC = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
# Where the twin's API server allocates ClusterIPs (server.py's --service-cluster-ip-range), when it
# does not say itself.
TWIN_SERVICE_CIDR = "10.96.0.0/16"


@dataclass(frozen=True)
class FlowVerdict:
    """One flow of the table as the PolicyEndpoints judge it."""

    id: str
    source: str
    target: str
    port: int
    required: bool
    admitted: bool
    detail: str

    @property
    def ok(self) -> bool:
        """Required and admitted, or forbidden and dropped."""
        return self.admitted == self.required

    def as_json(self) -> dict[str, Any]:
        """The loop's ``flows`` entry (plus ``id`` and ``detail``)."""
        return {
            "id": self.id,
            "from": self.source,
            "to": self.target,
            "port": self.port,
            "required": self.required,
            "admitted": self.admitted,
            "detail": self.detail,
        }


def failures(verdicts: Iterable[FlowVerdict]) -> list[FlowVerdict]:
    """The verdicts that break the table: required and dropped, or forbidden and admitted."""
    return [v for v in verdicts if not v.ok]


@dataclass(frozen=True)
class Member:
    """A pod a flow starts or ends at: its namespace, labels and named container ports."""

    namespace: str
    labels: Mapping[str, str]
    named_ports: Mapping[str, int] = field(default_factory=dict)


STRANGER = Member("default", {"app": "curl"}, {"http": 8080})


@dataclass(frozen=True)
class Candidates:
    """The addresses a host may have: ``networks`` (each address of each), and how they were found."""

    networks: tuple[IPNetwork, ...]
    source: str
    known: bool = True
    """False: the render does not say; ``networks`` are the CIDRs the rendered policies assume."""
    shown: str | None = None
    """How the detail names ``networks`` (default: each CIDR)."""


@dataclass(frozen=True)
class ClusterNetworks:
    """What the render says the cluster's networks are (``aws.json``)."""

    vpc: tuple[str, ...]
    cluster_subnets: tuple[str, ...]  # where EKS puts the control plane's interfaces
    node_subnets: tuple[str, ...]  # where the nodes (and so the pods) take addresses
    lb_subnets: tuple[str, ...]  # where the load balancer takes its addresses
    service_cidrs: tuple[str, ...]  # the cluster's service CIDR, or each one EKS may choose
    notes: tuple[str, ...]
    node_source: str = "the subnets a rendered NodeClass selects"


@dataclass(frozen=True)
class Render:
    """One stack's render folder, read."""

    folder: Path
    objects: tuple[dict[str, Any], ...]
    helm: Mapping[str, dict[str, Any]]  # release -> its render file
    aws: tuple[dict[str, Any], ...]

    @property
    def policies(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == "NetworkPolicy"]

    @property
    def namespace_labels(self) -> dict[str, dict[str, str]]:
        return {
            o["metadata"]["name"]: dict(o["metadata"].get("labels") or {})
            for o in self.objects
            if o.get("kind") == "Namespace"
        }


def load_render(folder: Path) -> Render:
    """``kubernetes/*.yaml``, ``helm/*.yaml`` and ``aws.json`` of a render folder."""
    kubernetes = folder / "kubernetes"
    if not kubernetes.is_dir():
        raise ValueError(
            f"{folder} is not a stack's render: expected {kubernetes}/*.yaml; render one with "
            "`python -m automation render --stack STACK` and pass build/rendered/STACK"
        )
    objects = tuple(yaml.safe_load(p.read_text()) for p in sorted(kubernetes.glob("*.yaml")))
    helm = {p.stem: yaml.safe_load(p.read_text()) or {} for p in sorted((folder / "helm").glob("*.yaml"))}
    aws_file = folder / "aws.json"
    aws = tuple(json.loads(aws_file.read_text())) if aws_file.exists() else ()
    return Render(folder, objects, helm, aws)


@cache
def chart_workloads() -> dict[str, Any]:
    """The pinned charts' pods and Services that the required flows start from or reach
    (``reference/upstream/chart-workloads.json``), each with its source."""
    data: dict[str, Any] = json.loads((UPSTREAM / "chart-workloads.json").read_text())
    return data


@cache
def eks_default_service_cidrs() -> tuple[str, ...]:
    """The blocks EKS takes a cluster's service CIDR from when none is given
    (``reference/upstream/network-policy-facts.json``, from the EKS API reference)."""
    facts = json.loads((UPSTREAM / "network-policy-facts.json").read_text())
    return tuple(facts["service_ipv4_cidr_defaults"]["value"])


def chart_namespaces(helm: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each rendered chart's namespace, by chart name (an OCI chart reference ends with it)."""
    return {str(r["chart"]).rsplit("/", 1)[-1]: str(r["namespace"]) for r in helm.values()}


def loadtest_member(namespace: str) -> Member:
    """The pod of `loadtest --as-job`'s Job (its template carries the Job's labels)."""
    return Member(namespace, dict(JOB_LABELS))


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector``; an empty selector matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {op!r}")
    return True


# ---- the render's networks -------------------------------------------------------------------


def _subnets(render: Render) -> dict[str, dict[str, Any]]:
    """The rendered subnets by the id the offline render gave them (``mocks.resource_id``)."""
    return {resource_id(SUBNET, r["name"]): r["inputs"] for r in render.aws if r["type"] == SUBNET}


def _term_selects(term: Mapping[str, Any], subnet_id: str, subnet: Mapping[str, Any]) -> bool:
    # subnetSelectorTerms: a term is an id or tags, its conditions ANDed, tag values with "*"
    # wildcards; terms are ORed (aws/karpenter-provider-aws v1.14.1
    # website/content/en/v1.14/concepts/nodeclasses.md, "spec.subnetSelectorTerms").
    if "id" in term:
        return bool(term["id"] == subnet_id)
    tags = subnet.get("tags") or {}
    wanted = term.get("tags") or {}
    return bool(wanted) and all(
        k in tags and fnmatch.fnmatchcase(str(tags[k]), str(v)) for k, v in wanted.items()
    )


def cluster_networks(render: Render) -> ClusterNetworks:
    """The VPC, the cluster's subnets, the nodes' subnets, the load balancer's subnets and the
    service CIDR, as far as ``aws.json`` and the Kubernetes objects say."""
    subnets = _subnets(render)
    vpc = tuple(
        r["inputs"]["cidrBlock"] for r in render.aws if r["type"] == VPC and "cidrBlock" in r["inputs"]
    )
    notes: list[str] = []
    cluster_ids: list[str] = []
    private_ids: list[str] = []
    service_cidr: str | None = None
    for r in render.aws:
        inputs = r["inputs"]
        if r["type"] == EKS_COMPONENT:
            # pulumi-eks nodejs/eks/cluster.ts createCore: the EKS cluster's vpcConfig.subnetIds are
            # subnetIds, else publicSubnetIds and privateSubnetIds together.
            cluster_ids += inputs.get("subnetIds") or [
                *(inputs.get("publicSubnetIds") or []),
                *(inputs.get("privateSubnetIds") or []),
            ]
            service_cidr = inputs.get("kubernetesServiceIpAddressRange") or service_cidr
            private_ids += inputs.get("privateSubnetIds") or []
        elif r["type"] == EKS_CLUSTER:
            cluster_ids += (inputs.get("vpcConfig") or {}).get("subnetIds") or []
            service_cidr = (inputs.get("kubernetesNetworkConfig") or {}).get(
                "serviceIpv4Cidr"
            ) or service_cidr
    cluster_subnets = tuple(subnets[i]["cidrBlock"] for i in cluster_ids if i in subnets)
    if cluster_ids and len(cluster_subnets) < len(cluster_ids):
        notes.append("some of the cluster's subnets are not in the render (given by id)")
    # Nodes: the subnets a rendered NodeClass selects; without one (EKS Auto Mode's built-in
    # NodeClass) the cluster's private subnets, else all of them: an assumption (address_rewrites).
    # Pods take addresses of their node's subnet (the VPC CNI's secondary addresses).
    terms = [
        t
        for o in render.objects
        if o.get("kind") in ("EC2NodeClass", "NodeClass")
        for t in (o.get("spec") or {}).get("subnetSelectorTerms") or []
    ]
    private = tuple(subnets[i]["cidrBlock"] for i in private_ids if i in subnets)
    node_subnets = tuple(
        s["cidrBlock"] for i, s in subnets.items() if any(_term_selects(t, i, s) for t in terms)
    )
    node_source = "the subnets a rendered NodeClass selects"
    if not node_subnets:
        node_subnets = private or cluster_subnets
        node_source = "no rendered NodeClass names subnets: nodes assumed in the cluster's private subnets"
    lb_subnets = _lb_subnets(render, subnets)
    if service_cidr:
        service_cidrs: tuple[str, ...] = (service_cidr,)
    else:
        service_cidrs = eks_default_service_cidrs()
        notes.append(
            "the render sets no service CIDR, so EKS takes one of "
            + ", ".join(service_cidrs)
            + ": both judged"
        )
    return ClusterNetworks(
        vpc, cluster_subnets, node_subnets, lb_subnets, service_cidrs, tuple(notes), node_source
    )


def _lb_subnets(render: Render, subnets: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    fronts = [
        o
        for o in render.objects
        if o.get("kind") == "Ingress"
        or (o.get("kind") == "Service" and o["spec"].get("type") == "LoadBalancer")
    ]
    out: list[str] = []
    for front in fronts:
        annotations = front["metadata"].get("annotations") or {}
        named = next((annotations[a] for a in LB_SUBNET_ANNOTATIONS if a in annotations), None)
        if named:
            wanted = {n.strip() for n in named.split(",")}
            out += [
                s["cidrBlock"]
                for i, s in subnets.items()
                if i in wanted or s.get("tags", {}).get("Name") in wanted
            ]
            continue
        # The scheme defaults to internal (aws-load-balancer-controller docs, guide/ingress and
        # guide/service annotations: alb.ingress.kubernetes.io/scheme and
        # service.beta.kubernetes.io/aws-load-balancer-scheme, default internal).
        scheme = next((annotations[a] for a in LB_SCHEME_ANNOTATIONS if a in annotations), "internal")
        tag = LB_SUBNET_TAG.get(scheme)
        out += [s["cidrBlock"] for s in subnets.values() if tag in (s.get("tags") or {})]
    return tuple(dict.fromkeys(out))


# ---- address sets ----------------------------------------------------------------------------


def _minus(nets: Iterable[IPNetwork], hole: IPNetwork) -> list[IPNetwork]:
    """``nets`` without the addresses of ``hole`` (CIDRs nest or are disjoint)."""
    out: list[IPNetwork] = []
    for net in nets:
        if net.version != hole.version or not net.overlaps(hole):
            out.append(net)
        elif not net.subnet_of(hole):  # type: ignore[arg-type]  # same version, checked above
            out += list(net.address_exclude(hole))  # type: ignore[arg-type]
    return out


def _admitted_networks(
    endpoints: list[dict[str, Any]], pod_ip: str, port: int, protocol: str, direction: str
) -> list[IPNetwork] | None:
    """The addresses the agent lets ``pod_ip`` reach (egress) or be reached from (ingress) on
    ``port``: None when no PolicyEndpoint isolates the pod in that direction (every address)."""
    isolation = "Egress" if direction == "egress" else "Ingress"
    selecting = [
        p for p in _by_policy(endpoints).values() if isolation in p["isolation"] and pod_ip in p["pods"]
    ]
    if not selecting:
        return None
    out: list[IPNetwork] = []
    for policy in selecting:
        for rule in policy[direction]:
            if "cidr" not in rule or not _port_matches(rule.get("ports"), port, protocol):
                continue
            nets: list[IPNetwork] = [ipaddress.ip_network(rule["cidr"], strict=False)]
            for hole in rule.get("except") or []:
                nets = _minus(nets, ipaddress.ip_network(hole, strict=False))
            out += nets
    return out


def _uncovered(candidate: IPNetwork, admitted: Sequence[IPNetwork]) -> list[IPNetwork]:
    left = [candidate]
    for net in admitted:
        left = _minus(left, net)
    return left


def _judge_host(
    endpoints: list[dict[str, Any]],
    pod_ip: str,
    host: Candidates,
    flow: Flow,
    direction: str,
) -> tuple[bool, str]:
    admitted = _admitted_networks(endpoints, pod_ip, flow.port, flow.protocol, direction)
    where = f"{'egress from' if direction == 'egress' else 'ingress at'} {pod_ip}"
    nets = host.shown or ", ".join(map(str, host.networks)) or "none"
    prefix = f"{host.source} [{nets}]"
    if not host.known:
        prefix = f"host address not known from the render; judged on the rendered ipBlock model: {prefix}"
    if admitted is None:
        return True, f"{prefix}: {where} is not isolated"
    if flow.required:
        if not host.networks:
            return False, f"{prefix}: no address to admit"
        missing = [left for net in host.networks for left in _uncovered(net, admitted)]
        if missing:
            return False, f"{prefix}: {where} on {flow.port} leaves out {', '.join(map(str, missing[:4]))}"
        return True, f"{prefix}: {where} on {flow.port} admits every address"
    touched = [n for n in host.networks if any(n.version == a.version and n.overlaps(a) for a in admitted)]
    if touched:
        return (
            True,
            f"{prefix}: {where} on {flow.port} admits addresses of {', '.join(map(str, touched[:4]))}",
        )
    return False, f"{prefix}: {where} on {flow.port} admits none"


def _public_ipv4() -> tuple[IPNetwork, ...]:
    nets: list[IPNetwork] = [ipaddress.ip_network("0.0.0.0/0")]
    for hole in NOT_PUBLIC:
        nets = _minus(nets, ipaddress.ip_network(hole))
    return tuple(nets)


# ---- the twin ---------------------------------------------------------------------------------


@dataclass
class Placed:
    """What the twin holds: each role's pod and address, each Service as served."""

    pods: dict[str, tuple[Member, str]]
    services: dict[str, dict[str, Any]]  # chart service key or "vllm" -> the served Service
    kubernetes_cluster_ip: str  # the `kubernetes` Service's, as the twin's API server allocated it
    service_range: str  # the twin's service CIDR, that ClusterIP's range


def _templates(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    if obj.get("kind") in ("Deployment", "Job", "StatefulSet"):
        return [obj["spec"]["template"]]
    if obj.get("kind") == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"], lwt["workerTemplate"]]
    return []


def rendered_member(render: Render, app: str, port_name: str) -> Member | None:
    """The rendered pod labelled ``app.kubernetes.io/name: app`` with a container port named
    ``port_name`` (the vLLM Deployment's, the LeaderWorkerSet leader's, the router's), or None."""
    for obj in render.objects:
        if obj["metadata"]["name"] == WARM_SPARE:
            continue
        for template in _templates(obj):
            labels = dict(template["metadata"].get("labels") or {})
            ports = {
                p["name"]: p["containerPort"]
                for c in template["spec"]["containers"]
                for p in c.get("ports", [])
                if "name" in p
            }
            if labels.get("app.kubernetes.io/name") == app and port_name in ports:
                return Member(obj["metadata"]["namespace"], labels, ports)
    return None


def vllm_server(render: Render) -> Member:
    """The vLLM pod that serves HTTP (the Deployment's, or the LeaderWorkerSet leader's)."""
    server = rendered_member(render, "vllm", "http")
    if server is None:
        raise ValueError(f"{render.folder}: no vLLM pod serving http in the render")
    return server


def render_routing(render: Render) -> str:
    """The render's routing.kind, read from what it renders: llm-d when the router's pod is there."""
    return "none" if rendered_member(render, ROUTER, "http") is None else "llm-d"


def roles(render: Render) -> dict[str, Member]:
    """Every pod a flow of the table can start or end at, by the table's names."""
    server = vllm_server(render)
    out = {"vllm": server, "stranger": STRANGER, "loadtest": loadtest_member(server.namespace)}
    if (router := rendered_member(render, ROUTER, "http")) is not None:
        out[ROUTER] = router
    namespaces = chart_namespaces(render.helm)
    for key, spec in chart_workloads()["pods"].items():
        if spec["chart"] in namespaces:
            out[key] = Member(namespaces[spec["chart"]], spec["labels"], spec["container_ports"])
    return out


def services(render: Render) -> dict[str, dict[str, Any]]:
    """The charts' Services of the table and the rendered vLLM Service, as objects to create."""
    namespaces = chart_namespaces(render.helm)
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
    (vllm,) = [o for o in render.objects if o.get("kind") == "Service" and o["metadata"]["name"] == "vllm"]
    out["vllm"] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm", "namespace": vllm["metadata"]["namespace"]},
        "spec": {"selector": vllm["spec"]["selector"], "ports": copy.deepcopy(vllm["spec"]["ports"])},
    }
    return out


def _pod_object(name: str, pod: Member, host_ip: str) -> dict[str, Any]:
    ports = [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in pod.named_ports.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": pod.namespace, "labels": dict(pod.labels)},
        "spec": {
            # Scheduled: the controller caches only pods with a node (v1.1.10
            # pkg/config/runtime_config.go podCacheFieldSelector: spec.nodeName != "").
            "nodeName": f"twin-node-{host_ip.replace('.', '-')}",
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


def pod_network(networks: ClusterNetworks) -> IPNetwork:
    """Where the twin's pods take addresses: the render's first node subnet (else its VPC)."""
    for cidr in (*networks.node_subnets, *networks.vpc):
        return ipaddress.ip_network(cidr)
    return ipaddress.ip_network("10.0.0.0/16")  # no network in the render (an existing cluster)


def place(api: Api, render: Render, members: Mapping[str, Member], networks: ClusterNetworks) -> Placed:
    """Namespaces (labelled as rendered), a default service account each, the pods with their
    addresses, the Services (ClusterIPs from the API server)."""
    labels = render.namespace_labels
    wanted = {p.namespace for p in members.values()} | {p["metadata"]["namespace"] for p in render.policies}
    for name in sorted(wanted):
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels.get(name, {})},
        }
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": name},
        }
        for obj in (namespace, account):  # `default` exists already: apply
            reply = api.apply(obj, dry_run=False)
            if not reply.ok:
                raise TwinError(f"{obj['kind']} {name} refused: {reply.message}")
    subnet = pod_network(networks)
    host_ip = str(subnet[5])  # the node's own address, in the same subnet
    pods = {}
    for i, (role, pod) in enumerate(sorted(members.items())):
        ip = str(subnet[10 + i])
        name = role.replace("_", "-")
        _must(api, "POST", f"/api/v1/namespaces/{pod.namespace}/pods", _pod_object(name, pod, host_ip))
        status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": host_ip}}
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{name}/status"
        _must(api, "PATCH", path, status, "application/merge-patch+json")
        pods[role] = (pod, ip)
    served = {}
    for key, svc in services(render).items():
        ns = svc["metadata"]["namespace"]
        served[key] = _must(api, "POST", f"/api/v1/namespaces/{ns}/services", svc)
    kubernetes = _must(api, "GET", "/api/v1/namespaces/default/services/kubernetes", None)
    # The range it came from, as the API server states it (the default ServiceCIDR object,
    # networking.k8s.io/v1 since Kubernetes 1.33); else the flag server.py starts it with.
    reply = api.call("GET", "/apis/networking.k8s.io/v1/servicecidrs/kubernetes")
    ranges = reply.body.get("spec", {}).get("cidrs", []) if reply.ok else []
    service_range = next((c for c in ranges if ":" not in c), TWIN_SERVICE_CIDR)
    api.discover()
    return Placed(pods, served, kubernetes["spec"]["clusterIP"], service_range)


def _apply_policies(api: Api, policies: Iterable[dict[str, Any]]) -> None:
    for policy in policies:
        reply = api.apply(policy, dry_run=False)
        if not reply.ok:
            raise TwinError(f"NetworkPolicy {policy['metadata']['name']} refused: {reply.message}")


def with_overrides(
    policies: Sequence[dict[str, Any]], overrides: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``policies`` with each override replacing the one of its namespace/name (or added)."""
    key = lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])  # noqa: E731
    replaced = {key(o): o for o in overrides}
    out = [replaced.pop(key(p), p) for p in policies]
    return [*out, *replaced.values()]


@contextmanager
def _folder(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-flows-") as temp:
        yield Path(temp)


# ---- judging ----------------------------------------------------------------------------------


def _target_port(svc: Mapping[str, Any], port: int, backend: Member) -> int | None:
    for p in svc["spec"]["ports"]:
        if p["port"] == port:
            target = p.get("targetPort", port)
            return target if isinstance(target, int) else backend.named_ports.get(target)
    return None


def _selects(svc: Mapping[str, Any], pod: Member) -> bool:
    return pod.namespace == svc["metadata"]["namespace"] and selector_matches(
        {"matchLabels": svc["spec"]["selector"]}, pod.labels
    )


def _between_pods(flow: Flow, placed: Placed, endpoints: list[dict[str, Any]]) -> tuple[bool, str] | None:
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
        return out and into, f"egress {src_ip} -> {dest[1]}:{flow.port} {out}, ingress {into}"
    svc = placed.services.get(flow.dest.name)
    if svc is None:
        return None
    cluster_ip = svc["spec"]["clusterIP"]
    out = admits(endpoints, src_ip, cluster_ip, flow.port, flow.protocol, "egress")
    backends = [(pod, ip) for pod, ip in placed.pods.values() if _selects(svc, pod)]
    if not backends:
        raise TwinError(f"Service {svc['metadata']['name']} selects no placed pod")
    into = all(
        (target := _target_port(svc, flow.port, pod)) is not None
        and admits(endpoints, ip, src_ip, target, flow.protocol, "ingress")
        for pod, ip in backends
    )
    return out and into, f"egress to ClusterIP {cluster_ip}:{flow.port} {out}, ingress at the backends {into}"


def _rendered_blocks(
    policies: Iterable[Mapping[str, Any]],
    pod: Member,
    flow: Flow,
    direction: str,
) -> tuple[IPNetwork, ...]:
    """The ipBlock CIDRs the rendered policies selecting ``pod`` name on the flow's port: what the
    render assumes a host's addresses are, when the render cannot say (a policy selects pods of
    its own namespace)."""
    key, peers = ("egress", "to") if direction == "egress" else ("ingress", "from")
    out: list[IPNetwork] = []
    for policy in policies:
        if policy["metadata"]["namespace"] != pod.namespace:
            continue
        if not selector_matches(policy["spec"].get("podSelector"), pod.labels):
            continue
        for rule in policy["spec"].get(key) or []:
            if not _port_matches(rule.get("ports"), flow.port, flow.protocol):
                continue
            out += [
                ipaddress.ip_network(p["ipBlock"]["cidr"], strict=False)
                for p in rule.get(peers) or []
                if "ipBlock" in p
            ]
    return tuple(dict.fromkeys(out))


def host_candidates(
    name: str, networks: ClusterNetworks, placed: Placed, fallback: tuple[IPNetwork, ...]
) -> Candidates:
    """Every address the host ``name`` of the table may have on this render's cluster."""
    nets = lambda cidrs: tuple(ipaddress.ip_network(c) for c in cidrs)  # noqa: E731
    if name == "control-plane":
        # EKS creates 2-4 network interfaces in the subnets given at creation, at addresses it picks
        # (EKS User Guide networking/network-reqs.adoc): every address of those subnets.
        if networks.cluster_subnets:
            return Candidates(
                nets(networks.cluster_subnets), "the control plane's interfaces, in the cluster's subnets"
            )
        return Candidates(fallback, "the control plane's interfaces", known=False)
    if name == "kubernetes-api":
        # The `kubernetes` Service's ClusterIP is the same index of the service CIDR the twin's own
        # API server gave it (read from the twin), and its endpoints are the control plane's
        # interfaces (port 443 on EKS, network-policy-facts.json api_server_port).
        index = int(ipaddress.ip_address(placed.kubernetes_cluster_ip)) - int(
            ipaddress.ip_network(placed.service_range).network_address
        )
        cluster_ips = tuple(
            ipaddress.ip_network(f"{ipaddress.ip_network(c)[index]}/32") for c in networks.service_cidrs
        )
        plane = host_candidates("control-plane", networks, placed, fallback)
        source = (
            "the kubernetes Service's ClusterIP ("
            + " or ".join(networks.service_cidrs)
            + ") and the control plane's interfaces"
        )
        return Candidates(cluster_ips + plane.networks, source, plane.known)
    if name == "load-balancer-subnets":
        if networks.lb_subnets:
            return Candidates(
                nets(networks.lb_subnets), "the load balancer's addresses, in the subnets it is placed in"
            )
        return Candidates(fallback, "the load balancer's addresses", known=False)
    if name == "internet":
        return Candidates(
            _public_ipv4(),
            "every public IPv4 address",
            shown="0.0.0.0/0 less the IANA special-purpose blocks",
        )
    raise ValueError(f"unknown host {name!r} in the required-flows table")


def _with_host(
    flow: Flow, render: Render, networks: ClusterNetworks, placed: Placed, endpoints: list[dict[str, Any]]
) -> tuple[bool, str] | None:
    host_end, pod_end, direction = (
        (flow.source, flow.dest, "ingress")
        if flow.source.kind == "host"
        else (flow.dest, flow.source, "egress")
    )
    if pod_end.kind != "pod":
        return None  # the table has no host <-> Service flow
    placed_pod = placed.pods.get(pod_end.name)
    if placed_pod is None:
        return None
    pod, ip = placed_pod
    fallback = _rendered_blocks(render.policies, pod, flow, direction)
    host = host_candidates(host_end.name, networks, placed, fallback)
    admitted, why = _judge_host(endpoints, ip, host, flow, direction)
    if networks.notes and host_end.name == "kubernetes-api":
        why += "; " + "; ".join(networks.notes)
    return admitted, why


def _end(end: FlowEnd, namespace: Mapping[str, str]) -> str:
    return (
        f"{end.kind}:{end.name}"
        if end.name not in namespace
        else f"{end.kind}:{namespace[end.name]}/{end.name}"
    )


def flow_matrix(
    render: Path, *, policy_overrides: Sequence[dict[str, Any]] = (), keep: Path | None = None
) -> list[FlowVerdict]:
    """Every flow of the required-flows table that ``render``'s stack runs both ends of, judged on
    the PolicyEndpoints the real controller writes for its NetworkPolicies (one twin run).

    ``policy_overrides`` replace the rendered NetworkPolicy of the same namespace/name (or are
    added); ``keep``: a folder that keeps the controller's log and the PolicyEndpoints. Raises
    ``BinariesMissing`` without the twin's binaries, ``TwinError`` when the twin fails."""
    view = load_render(render)
    networks = cluster_networks(view)
    members = roles(view)
    policies = with_overrides(view.policies, policy_overrides)
    job_policies = loadtest_network_policies(members["vllm"].namespace)
    others = tuple(o for o in view.objects if o.get("kind") != "NetworkPolicy")
    view = Render(view.folder, (*others, *policies), view.helm, view.aws)
    with running_twin() as api, _folder(keep) as folder:
        install_crds(api)
        placed = place(api, view, members, networks)
        with controller(api, folder) as program:
            _apply_policies(api, policies)
            without_job = settle(api, program, policies)
            _apply_policies(api, job_policies)
            with_job = settle(api, program, [*policies, *job_policies])
    if keep is not None:  # what the verdicts were judged on, for a reader (and a test) to look at
        dump = {"without-loadtest": without_job, "with-loadtest": with_job}
        (keep / "policyendpoints.json").write_text(json.dumps(dump, indent=1, sort_keys=True) + "\n")
        addresses = {
            "pods": {role: ip for role, (_, ip) in placed.pods.items()},
            "services": {key: svc["spec"]["clusterIP"] for key, svc in placed.services.items()},
        }
        (keep / "placed.json").write_text(json.dumps(addresses, indent=1, sort_keys=True) + "\n")
    where = {role: member.namespace for role, member in members.items()}
    routing = render_routing(view)
    out = []
    for flow in required_flows():
        if not flow.applies_to(routing):
            continue
        loadtest = "loadtest" in (flow.source.name, flow.dest.name)
        endpoints = with_job if loadtest else without_job
        if "host" in (flow.source.kind, flow.dest.kind):
            found = _with_host(flow, view, networks, placed, endpoints)
        else:
            found = _between_pods(flow, placed, endpoints)
        if found is None:
            continue
        admitted, detail = found
        out.append(
            FlowVerdict(
                flow.id,
                _end(flow.source, where),
                _end(flow.dest, where),
                flow.port,
                flow.required,
                admitted,
                detail,
            )
        )
    return out


def address_rewrites(render: Path) -> list[str]:
    """Where the twin's addresses differ from the cluster the render describes, for the loop's output."""
    networks = cluster_networks(load_render(render))
    subnet = pod_network(networks)
    return [
        f"pods placed at {subnet[10]} and up (the render's node subnet {subnet}), as a kubelet reports "
        f"them; on EKS the VPC CNI picks each pod's address in its node's subnet ({networks.node_source})",
        f"ClusterIPs from the twin's {TWIN_SERVICE_CIDR}; the cluster's service CIDR is "
        + " or ".join(networks.service_cidrs),
    ]
