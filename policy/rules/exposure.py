"""Who can reach the service: internet-facing load balancers and the EKS API list allowed CIDRs, none
world-open (also when an IngressClassParams makes an Ingress internet-facing), serve HTTPS with plain
HTTP only as a redirect, and require vLLM's API key; no security group admits the whole internet,
alone or as a set of standalone rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import (
    Props,
    Resource,
    annotations_of,
    as_list,
    containers,
    get_in,
    is_kind,
    kind_of,
    object_name,
    open_to_world,
    policy_document,
)

# AWS Load Balancer Controller annotations (kubernetes-sigs/aws-load-balancer-controller
# docs/guide/ingress/annotations.md and docs/guide/service/annotations.md): an Ingress is internal
# unless scheme says internet-facing; inbound-cidrs limits who may connect.
INGRESS_SCHEME = "alb.ingress.kubernetes.io/scheme"
INGRESS_INBOUND_CIDRS = "alb.ingress.kubernetes.io/inbound-cidrs"
SERVICE_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
SERVICE_INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"
SERVICE_SSL_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
INTERNET_FACING = "internet-facing"
# TLS on an ALB (reference/upstream/alb-ingress-facts.json): listen-ports defaults to HTTP:80, or
# HTTPS:443 when a certificate is set; ssl-redirect turns every HTTP listener into a redirect.
INGRESS_LISTEN_PORTS = "alb.ingress.kubernetes.io/listen-ports"
INGRESS_CERTIFICATE = "alb.ingress.kubernetes.io/certificate-arn"
INGRESS_SSL_REDIRECT = "alb.ingress.kubernetes.io/ssl-redirect"
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
# IngressClassParams of the AWS Load Balancer Controller (elbv2.k8s.aws) and of EKS Auto Mode
# (eks.amazonaws.com): a scheme, inboundCIDRs or certificate set there overrides the Ingress's
# annotations (alb-ingress-facts.json). The two spell the certificate list differently.
CLASS_PARAMS_GROUPS = ("elbv2.k8s.aws", "eks.amazonaws.com")
CLASS_PARAMS_CERTIFICATES = ("certificateARNs", "certificateArn")


def exposed_endpoint(token: str, props: Props) -> str | None:
    """Why this object puts an endpoint on the internet, or None."""
    annotations = annotations_of(props)
    if is_kind(token, "networking.k8s.io", "Ingress") and annotations.get(INGRESS_SCHEME) == INTERNET_FACING:
        return f"Ingress {object_name(props)} is internet-facing"
    if is_kind(token, "", "Service") and get_in(props, "spec", "type") == "LoadBalancer":
        scheme = annotations.get(SERVICE_SCHEME)
        # Without the scheme annotation the legacy in-tree controller makes a public NLB/ELB.
        internal = scheme == "internal" or str(annotations.get(SERVICE_INTERNAL, "")).lower() == "true"
        if not internal:
            return f"LoadBalancer Service {object_name(props)} is internet-facing"
    return None


def endpoint_not_open_to_world(token: str, props: Props) -> list[str]:
    if is_kind(token, "networking.k8s.io", "Ingress"):
        setting, raw = INGRESS_INBOUND_CIDRS, annotations_of(props).get(INGRESS_INBOUND_CIDRS)
        cidrs = [c for c in str(raw or "").split(",") if c.strip()]
    elif is_kind(token, "", "Service") and get_in(props, "spec", "type") == "LoadBalancer":
        setting, cidrs = (
            "spec.loadBalancerSourceRanges",
            as_list(get_in(props, "spec", "loadBalancerSourceRanges")),
        )
    else:
        return []
    why = exposed_endpoint(token, props)
    if why is None:
        # An internal load balancer is reached from every network routed to the VPC (peerings,
        # VPNs, Transit Gateway): allowed CIDRs open to the world open it to all of them.
        world = open_to_world(cidrs) if cidrs else None
        kind = "Ingress" if is_kind(token, "networking.k8s.io", "Ingress") else "LoadBalancer Service"
        return (
            [f"internal {kind} {object_name(props)}'s {setting} admits the whole internet ({world})"]
            if world
            else []
        )
    if not cidrs:
        return [f"{why} without allowed CIDRs: set {setting} to the client CIDRs (endpoint.allowedCidrs)"]
    if world := open_to_world(cidrs):
        return [f"{why} and {setting} admits the whole internet ({world})"]
    return []


def cluster_endpoint_private_or_limited(token: str, props: Props) -> list[str]:
    if token == "eks:index:Cluster":
        if not props:
            # Under the real engine an analyzer sees pulumi-eks's Cluster as its (Node.js) provider
            # registers it, with no inputs (@pulumi/pulumi sdk/nodejs/resource.ts keeps a
            # component's args only when remote); nothing to judge here, so its aws:eks/cluster:
            # Cluster child, which carries vpcConfig, is checked instead.
            return []
        public, cidrs, where = props.get("endpointPublicAccess"), props.get("publicAccessCidrs"), ""
    elif token == "aws:eks/cluster:Cluster":
        vpc = props.get("vpcConfig") or {}
        public, cidrs, where = vpc.get("endpointPublicAccess"), vpc.get("publicAccessCidrs"), "vpcConfig."
    else:
        return []
    # Both default to a public endpoint (pulumi-eks ClusterOptions.endpointPublicAccess, and
    # terraform-provider-aws eks/cluster.go endpoint_public_access Default true).
    if public is False:
        return []
    cidrs = as_list(cidrs)
    if not cidrs:
        return [
            f"the EKS API endpoint is public to everyone: set {where}endpointPublicAccess false or "
            f"{where}publicAccessCidrs (cluster.publicAccessCidrs)"
        ]
    if world := open_to_world(cidrs):
        return [f"{where}publicAccessCidrs opens the EKS API endpoint to the internet ({world})"]
    return []


@dataclass(frozen=True)
class Exposure:
    """An internet-facing load balancer, seen with the IngressClassParams its class refers to."""

    resource: Resource
    why: str
    params: Mapping[str, Any]
    """The ``spec`` of the Ingress's IngressClassParams ({} for a Service or a class without)."""


def _class_params(resources: list[Resource]) -> tuple[dict[str, Mapping[str, Any]], str | None]:
    """IngressClass name -> the spec of the IngressClassParams it names, and the default class."""
    params = {
        (group, str(get_in(r.props, "metadata", "name"))): get_in(r.props, "spec") or {}
        for r in resources
        if (found := kind_of(r.type)) and found[1] == "IngressClassParams"
        for group in [found[0]]
        if group in CLASS_PARAMS_GROUPS
    }
    by_class: dict[str, Mapping[str, Any]] = {}
    default = None
    for r in resources:
        if not is_kind(r.type, "networking.k8s.io", "IngressClass"):
            continue
        name = str(get_in(r.props, "metadata", "name"))
        ref = get_in(r.props, "spec", "parameters") or {}
        by_class[name] = params.get((str(ref.get("apiGroup")), str(ref.get("name"))), {})
        if str(annotations_of(r.props).get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true":
            default = name
    return by_class, default


def exposures(resources: list[Resource]) -> list[Exposure]:
    """Every internet-facing load balancer of the stack: a LoadBalancer Service or an Ingress whose
    scheme (from its IngressClassParams, else its annotation) is internet-facing."""
    by_class, default = _class_params(resources)
    found = []
    for r in resources:
        if is_kind(r.type, "networking.k8s.io", "Ingress"):
            name = get_in(r.props, "spec", "ingressClassName") or annotations_of(r.props).get(
                INGRESS_CLASS_ANNOTATION, default
            )
            params = by_class.get(str(name), {})
            if params.get("scheme") == INTERNET_FACING:
                by_params = (
                    f"Ingress {object_name(r.props)} is internet-facing "
                    f"(its class {name}'s IngressClassParams)"
                )
                found.append(Exposure(r, by_params, params))
            elif not params.get("scheme") and (why := exposed_endpoint(r.type, r.props)):
                found.append(Exposure(r, why, params))
        elif service := exposed_endpoint(r.type, r.props):
            found.append(Exposure(r, service, {}))
    return found


def _listeners(exposure: Exposure) -> tuple[list[tuple[str, str]], bool]:
    """(protocol, port) of each ALB listener an Ingress asks for, and whether it has a certificate."""
    annotations = annotations_of(exposure.resource.props)
    certified = bool(annotations.get(INGRESS_CERTIFICATE)) or any(
        exposure.params.get(key) for key in CLASS_PARAMS_CERTIFICATES
    )
    raw = annotations.get(INGRESS_LISTEN_PORTS)
    if not raw:
        return ([("HTTPS", "443")] if certified else [("HTTP", "80")]), certified
    parsed = policy_document(f'{{"ports": {raw}}}')
    ports = as_list(get_in(parsed, "ports")) if parsed else []
    return [
        (str(k).upper(), str(v)) for entry in ports if isinstance(entry, Mapping) for k, v in entry.items()
    ], (certified)


def endpoint_tls_when_exposed(resources: list[Resource]) -> list[tuple[str, str]]:
    """An internet-facing endpoint serves HTTPS only: plain HTTP would carry the API key and every
    prompt in clear text across the internet."""
    problems = []
    for exposure in exposures(resources):
        resource, fix = exposure.resource, "set endpoint.certificateArn (an ACM certificate)"
        if is_kind(resource.type, "", "Service"):
            if not annotations_of(resource.props).get(SERVICE_SSL_CERT):
                problems.append((resource.urn, f"{exposure.why} without TLS ({SERVICE_SSL_CERT}): {fix}"))
            continue
        listeners, _ = _listeners(exposure)
        plain = [port for protocol, port in listeners if protocol == "HTTP"]
        if not any(protocol == "HTTPS" for protocol, _ in listeners):
            problems.append((resource.urn, f"{exposure.why} and serves plain HTTP only: {fix}"))
        elif plain and not annotations_of(resource.props).get(INGRESS_SSL_REDIRECT):
            problems.append(
                (
                    resource.urn,
                    f"{exposure.why} and also serves plain HTTP on port {', '.join(plain)}: set "
                    f"{INGRESS_SSL_REDIRECT} to the HTTPS port, or drop the HTTP listener",
                )
            )
    return problems


def class_endpoint_not_open_to_world(resources: list[Resource]) -> list[tuple[str, str]]:
    """An Ingress made internet-facing by its IngressClassParams (which the resource rule cannot
    see) limits its clients: the params' inboundCIDRs, else the Ingress's annotation."""
    problems = []
    for exposure in exposures(resources):
        if exposure.params.get("scheme") != INTERNET_FACING:
            continue
        if "inboundCIDRs" in exposure.params:
            setting, cidrs = "IngressClassParams spec.inboundCIDRs", as_list(exposure.params["inboundCIDRs"])
        else:
            raw = str(annotations_of(exposure.resource.props).get(INGRESS_INBOUND_CIDRS) or "")
            setting, cidrs = INGRESS_INBOUND_CIDRS, [c for c in raw.split(",") if c.strip()]
        if not cidrs:
            problems.append((exposure.resource.urn, f"{exposure.why} without allowed CIDRs: set {setting}"))
        elif world := open_to_world(cidrs):
            problems.append(
                (exposure.resource.urn, f"{exposure.why} and {setting} admits the whole internet ({world})")
            )
    return problems


# How a container starts vLLM's OpenAI-compatible server (reference/upstream/vllm-entrypoints.json):
# the ``vllm`` console script's ``serve`` subcommand, or ``python -m vllm.entrypoints.openai.api_server``,
# either possibly inside a shell line; the vllm-openai image's own ENTRYPOINT is one of them. A
# container ``command`` replaces the image's ENTRYPOINT (Kubernetes), so a vllm image running
# another command (a weights stager, a Ray worker) serves nothing.
VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
VLLM_SCRIPT, VLLM_SERVE = "vllm", "serve"


def _starts_vllm(line: list[str]) -> bool:
    words = [w.strip("'\"") for part in line for w in str(part).split()]
    for index, word in enumerate(words):
        if word == VLLM_SERVER_MODULE:
            return True
        if word.rsplit("/", 1)[-1] == VLLM_SCRIPT and words[index + 1 : index + 2] == [VLLM_SERVE]:
            return True
    return False


def serves_vllm(container: Mapping[str, Any]) -> bool:
    """True when a container runs the vLLM server: its command line starts it, or it keeps the
    entrypoint of a vllm image."""
    command, args = as_list(container.get("command")), as_list(container.get("args"))
    if command:
        return _starts_vllm([*command, *args])
    image = str(container.get("image") or "").rsplit("/", 1)[-1]
    return image.startswith("vllm") or _starts_vllm(args)


def _requires_key(container: Mapping[str, Any]) -> bool:
    for env in as_list(container.get("env")):
        if get_in(env, "name") == "VLLM_API_KEY" and get_in(env, "valueFrom", "secretKeyRef"):
            return True
    return False


def api_key_when_exposed(resources: list[Resource]) -> list[tuple[str, str]]:
    """When an endpoint leaves the private network (internet-facing load balancer), every vLLM
    server must require the API key, read from a Secret (vLLM's VLLM_API_KEY, see
    reference/upstream/vllm-0.33.0/FACTS.md)."""
    exposed = exposures(resources)
    if not exposed:
        return []
    problems = []
    for resource in resources:
        for path, container in containers(resource.props):
            if serves_vllm(container) and not _requires_key(container):
                problems.append(
                    (
                        resource.urn,
                        f"{exposed[0].why} but vLLM in {object_name(resource.props)} ({path}) takes requests "
                        "without an API key: set the apiKey secret (VLLM_API_KEY from a Secret)",
                    )
                )
    return problems


def _ingress_cidrs(token: str, props: Props) -> list[tuple[str, list[Any]]]:
    """(where, CIDRs) of each ingress permission of a security group or rule resource."""
    if token == "aws:ec2/securityGroup:SecurityGroup":
        return [
            (
                f"ingress[{index}]",
                [*as_list(get_in(rule, "cidrBlocks")), *as_list(get_in(rule, "ipv6CidrBlocks"))],
            )
            for index, rule in enumerate(as_list(props.get("ingress")))
        ]
    if token == "aws:ec2/securityGroupRule:SecurityGroupRule" and props.get("type") == "ingress":
        return [("cidrBlocks", [*as_list(props.get("cidrBlocks")), *as_list(props.get("ipv6CidrBlocks"))])]
    if token == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        return [("cidrIpv4/cidrIpv6", [c for c in (props.get("cidrIpv4"), props.get("cidrIpv6")) if c])]
    return []


def no_world_open_ingress(token: str, props: Props) -> list[str]:
    return [
        f"{where} admits the whole internet ({world}): allow only the clients' CIDRs or a security group"
        for where, cidrs in _ingress_cidrs(token, props)
        if cidrs and (world := open_to_world(cidrs))
    ]


STANDALONE_INGRESS_RULES = (
    "aws:ec2/securityGroupRule:SecurityGroupRule",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
)


def _group_of(rule: Resource) -> str:
    """The security group a standalone rule belongs to: the URN it depends on, else its ID."""
    deps = rule.property_dependencies.get("securityGroupId", ())
    return deps[0] if deps else str(rule.props.get("securityGroupId"))


def _port_range(props: Props) -> tuple[str, str, str]:
    protocol = str(props.get("protocol", props.get("ipProtocol")))
    return protocol, str(props.get("fromPort")), str(props.get("toPort"))


def world_open_ingress_sets(resources: list[Resource]) -> list[tuple[str, str]]:
    """Standalone ingress rules of one security group and port range whose CIDRs, each narrow,
    together admit the whole internet (two /1 rules are one /0)."""
    groups: dict[tuple[str, tuple[str, str, str]], list[Resource]] = {}
    for rule in (r for r in resources if r.type in STANDALONE_INGRESS_RULES):
        if _ingress_cidrs(rule.type, rule.props):
            groups.setdefault((_group_of(rule), _port_range(rule.props)), []).append(rule)
    problems: list[tuple[str, str]] = []
    for (group, (protocol, low, high)), members in groups.items():
        cidrs = [c for m in members for _, found in _ingress_cidrs(m.type, m.props) for c in found]
        if len(members) > 1 and (world := open_to_world(cidrs)):
            names = ", ".join(m.name or m.urn for m in members)
            problems.extend(
                (
                    m.urn,
                    f"ingress rules {names} of security group {group} ({protocol} {low}-{high}) "
                    f"together admit the whole internet ({world})",
                )
                for m in members
            )
    return problems
