"""The policy pack's rules as pure functions over (type token, inputs), so they run in unit tests
and over the offline render without the policy server; ``policy/__main__.py`` wraps them for
``pulumi preview --policy-pack policy``.

A resource rule answers the violations of one resource; a stack rule sees every resource (type,
inputs, URN and which resources fed each input) and answers (URN, message) pairs. Messages name the
offending field and the fix. No Pulumi code: besides the standard library, the rules use only
settings/cidrs.py (the one definition of a world-open CIDR set), so the pack and ``python -m policy
check`` start without loading the SDK, the providers or the component.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eks.settings import cidrs as _CIDRS

Props = Mapping[str, Any]

# The facts of reference/upstream/platform-facts.json the rules need, shipped inside the pack (a
# wheel has no reference/ folder); a test keeps the copy equal to the snapshot.
PLATFORM_FACTS = Path(__file__).resolve().parent / "facts.json"

GPU_RESOURCE = "nvidia.com/gpu"
KARPENTER_NODECLASS_GROUP = "karpenter.k8s.aws"
AUTO_MODE_NODECLASS_GROUP = "eks.amazonaws.com"
EBS_PROVISIONERS = ("ebs.csi.aws.com", "ebs.csi.eks.amazonaws.com", "kubernetes.io/aws-ebs")

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

# Allow statements may use "Resource": "*" only where components/platform/iam_policies.py documents it:
# read actions (Describe/List/Get), which take no resource-level permissions, and the load
# balancer controller's listener and rule calls (see load_balancer_controller_policy there).
READ_VERBS = ("Describe", "List", "Get")
STAR_RESOURCE_EXCEPTIONS = frozenset(
    {
        "elasticloadbalancing:CreateListener",
        "elasticloadbalancing:CreateRule",
        "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:DeleteRule",
        "elasticloadbalancing:AddListenerCertificates",
        "elasticloadbalancing:ModifyListener",
        "elasticloadbalancing:ModifyRule",
        "elasticloadbalancing:RemoveListenerCertificates",
        "elasticloadbalancing:SetRulePriorities",
    }
)
POLICY_DOCUMENT_INPUTS = {
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/policy:Policy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
    "aws:s3/bucketPolicy:BucketPolicy": "policy",
    "aws:sqs/queuePolicy:QueuePolicy": "policy",
}
# Actions that return the data itself, not metadata about it: on "Resource": "*" they read every
# object, secret, key or parameter the account holds, so the Describe/List/Get exception never
# covers them (names as in the AWS Service Authorization Reference; compared case-insensitively,
# as IAM compares actions).
DATA_READ_ACTIONS = frozenset(
    action.lower()
    for action in (
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:GetObjectAttributes",
        "secretsmanager:GetSecretValue",
        "secretsmanager:BatchGetSecretValue",
        "kms:Decrypt",
        "kms:ReEncryptFrom",
        "ssm:GetParameter",
        "ssm:GetParameters",
        "ssm:GetParametersByPath",
        "ssm:GetParameterHistory",
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:Scan",
        "sqs:ReceiveMessage",
        "logs:GetLogEvents",
        "logs:FilterLogEvents",
    )
)
TYPED_DATA_SERVICES = frozenset({"secretsmanager", "ssm", "kms", "dynamodb"})
POLICY_ARN_INPUTS = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "policyArn",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment": "policyArn",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment": "policyArn",
    "aws:iam/policyAttachment:PolicyAttachment": "policyArn",
    "aws:iam/role:Role": "managedPolicyArns",
    "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive": "policyArns",
    "aws:iam/userPolicyAttachmentsExclusive:UserPolicyAttachmentsExclusive": "policyArns",
    "aws:iam/groupPolicyAttachmentsExclusive:GroupPolicyAttachmentsExclusive": "policyArns",
}

# Words that make a key or variable name hold secret material (after splitting camelCase, snake
# and kebab case); "existingSecret"-style keys name a Secret instead of holding one.
SECRET_WORDS = frozenset({"password", "passwd", "secret", "token", "credential", "credentials"})
SECRET_KEY_PREFIXES = frozenset({"api", "access", "private", "secret"})
SECRET_FLAGS = ("--api-key", "--hf-token")


@dataclass(frozen=True)
class Resource:
    """What a stack rule sees of one resource."""

    type: str
    props: Props
    urn: str = ""
    name: str = ""
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    parent: str = ""
    """The URN of the resource's parent ("" for none, or when the caller does not know it): how a
    stack rule tells an object rendered by a Helm chart (a child of its Chart) from one written by
    hand."""


ResourceCheck = Callable[[str, Props], list[str]]
StackCheck = Callable[[list[Resource]], list[tuple[str, str]]]


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    check: ResourceCheck


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: StackCheck


# --- helpers ----------------------------------------------------------------------------------


def kind_of(token: str) -> tuple[str, str] | None:
    """(group, kind) of a ``kubernetes:<group>/<version>:<Kind>`` token (core group is "")."""
    if not token.startswith("kubernetes:"):
        return None
    _, api, kind = token.split(":", 2)
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    return ("" if group == "core" else group), kind


def _is(token: str, group: str, kind: str) -> bool:
    return kind_of(token) == (group, kind)


def _get(props: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(props, Mapping):
            return None
        props = props.get(key)
    return props


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def open_to_world(cidrs: Iterable[Any]) -> str | None:
    """Why ``cidrs`` admit the whole internet, or None. Open means their union crosses the line of
    settings/cidrs.py (``describe_world_open``, the one definition the settings use too), so
    ``0.0.0.0/1`` plus ``128.0.0.0/1`` is as open as ``0.0.0.0/0``, and so is a set of large blocks
    that misses only part of the space; a string that is no CIDR is named too, since it cannot be
    judged."""
    listed = [str(c) for c in cidrs]
    _, bad = _CIDRS.parse(listed)
    if bad:
        return f"{', '.join(bad)} is not a CIDR"
    described: str | None = _CIDRS.describe_world_open(listed)
    return described


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.\-]+", spaced) if w]


def holds_secret(name: str) -> bool:
    """True when a key or variable called ``name`` would hold secret material."""
    words = _words(name)
    if not words or words[0] == "existing":
        return False
    last = words[-1]
    return last in SECRET_WORDS or (last == "key" and len(words) > 1 and words[-2] in SECRET_KEY_PREFIXES)


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, key, value) of every mapping entry under ``value``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            yield here, key, item
            yield from _walk(item, here)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def containers(props: Props) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, container) of every container and init container in a Kubernetes object."""
    for path, key, value in _walk(props):
        if key in ("containers", "initContainers", "ephemeralContainers") and isinstance(value, list):
            for index, container in enumerate(value):
                if isinstance(container, Mapping):
                    yield f"{path}[{index}]", container


def _annotations(props: Props) -> Mapping[str, Any]:
    return _get(props, "metadata", "annotations") or {}


def _obj_name(props: Props) -> str:
    meta = props.get("metadata") or {}
    scope = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{scope}{meta.get('name', '?')}"


# --- 1. endpoints -----------------------------------------------------------------------------


def exposed_endpoint(token: str, props: Props) -> str | None:
    """Why this object puts an endpoint on the internet, or None."""
    annotations = _annotations(props)
    if _is(token, "networking.k8s.io", "Ingress") and annotations.get(INGRESS_SCHEME) == INTERNET_FACING:
        return f"Ingress {_obj_name(props)} is internet-facing"
    if _is(token, "", "Service") and _get(props, "spec", "type") == "LoadBalancer":
        scheme = annotations.get(SERVICE_SCHEME)
        # Without the scheme annotation the legacy in-tree controller makes a public NLB/ELB.
        internal = scheme == "internal" or str(annotations.get(SERVICE_INTERNAL, "")).lower() == "true"
        if not internal:
            return f"LoadBalancer Service {_obj_name(props)} is internet-facing"
    return None


def endpoint_not_open_to_world(token: str, props: Props) -> list[str]:
    if _is(token, "networking.k8s.io", "Ingress"):
        setting, raw = INGRESS_INBOUND_CIDRS, _annotations(props).get(INGRESS_INBOUND_CIDRS)
        cidrs = [c for c in str(raw or "").split(",") if c.strip()]
    elif _is(token, "", "Service") and _get(props, "spec", "type") == "LoadBalancer":
        setting, cidrs = (
            "spec.loadBalancerSourceRanges",
            _list(_get(props, "spec", "loadBalancerSourceRanges")),
        )
    else:
        return []
    why = exposed_endpoint(token, props)
    if why is None:
        # An internal load balancer is reached from every network routed to the VPC (peerings,
        # VPNs, Transit Gateway): allowed CIDRs open to the world open it to all of them.
        world = open_to_world(cidrs) if cidrs else None
        kind = "Ingress" if _is(token, "networking.k8s.io", "Ingress") else "LoadBalancer Service"
        return (
            [f"internal {kind} {_obj_name(props)}'s {setting} admits the whole internet ({world})"]
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
    cidrs = _list(cidrs)
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
        (group, str(_get(r.props, "metadata", "name"))): _get(r.props, "spec") or {}
        for r in resources
        if (found := kind_of(r.type)) and found[1] == "IngressClassParams"
        for group in [found[0]]
        if group in CLASS_PARAMS_GROUPS
    }
    by_class: dict[str, Mapping[str, Any]] = {}
    default = None
    for r in resources:
        if not _is(r.type, "networking.k8s.io", "IngressClass"):
            continue
        name = str(_get(r.props, "metadata", "name"))
        ref = _get(r.props, "spec", "parameters") or {}
        by_class[name] = params.get((str(ref.get("apiGroup")), str(ref.get("name"))), {})
        if str(_annotations(r.props).get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true":
            default = name
    return by_class, default


def exposures(resources: list[Resource]) -> list[Exposure]:
    """Every internet-facing load balancer of the stack: a LoadBalancer Service or an Ingress whose
    scheme (from its IngressClassParams, else its annotation) is internet-facing."""
    by_class, default = _class_params(resources)
    found = []
    for r in resources:
        if _is(r.type, "networking.k8s.io", "Ingress"):
            name = _get(r.props, "spec", "ingressClassName") or _annotations(r.props).get(
                INGRESS_CLASS_ANNOTATION, default
            )
            params = by_class.get(str(name), {})
            if params.get("scheme") == INTERNET_FACING:
                by_params = (
                    f"Ingress {_obj_name(r.props)} is internet-facing (its class {name}'s IngressClassParams)"
                )
                found.append(Exposure(r, by_params, params))
            elif not params.get("scheme") and (why := exposed_endpoint(r.type, r.props)):
                found.append(Exposure(r, why, params))
        elif service := exposed_endpoint(r.type, r.props):
            found.append(Exposure(r, service, {}))
    return found


def _listeners(exposure: Exposure) -> tuple[list[tuple[str, str]], bool]:
    """(protocol, port) of each ALB listener an Ingress asks for, and whether it has a certificate."""
    annotations = _annotations(exposure.resource.props)
    certified = bool(annotations.get(INGRESS_CERTIFICATE)) or any(
        exposure.params.get(key) for key in CLASS_PARAMS_CERTIFICATES
    )
    raw = annotations.get(INGRESS_LISTEN_PORTS)
    if not raw:
        return ([("HTTPS", "443")] if certified else [("HTTP", "80")]), certified
    parsed = _document(f'{{"ports": {raw}}}')
    ports = _list(_get(parsed, "ports")) if parsed else []
    return [
        (str(k).upper(), str(v)) for entry in ports if isinstance(entry, Mapping) for k, v in entry.items()
    ], (certified)


def endpoint_tls_when_exposed(resources: list[Resource]) -> list[tuple[str, str]]:
    """An internet-facing endpoint serves HTTPS only: plain HTTP would carry the API key and every
    prompt in clear text across the internet."""
    problems = []
    for exposure in exposures(resources):
        resource, fix = exposure.resource, "set endpoint.certificateArn (an ACM certificate)"
        if _is(resource.type, "", "Service"):
            if not _annotations(resource.props).get(SERVICE_SSL_CERT):
                problems.append((resource.urn, f"{exposure.why} without TLS ({SERVICE_SSL_CERT}): {fix}"))
            continue
        listeners, _ = _listeners(exposure)
        plain = [port for protocol, port in listeners if protocol == "HTTP"]
        if not any(protocol == "HTTPS" for protocol, _ in listeners):
            problems.append((resource.urn, f"{exposure.why} and serves plain HTTP only: {fix}"))
        elif plain and not _annotations(resource.props).get(INGRESS_SSL_REDIRECT):
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
            setting, cidrs = "IngressClassParams spec.inboundCIDRs", _list(exposure.params["inboundCIDRs"])
        else:
            raw = str(_annotations(exposure.resource.props).get(INGRESS_INBOUND_CIDRS) or "")
            setting, cidrs = INGRESS_INBOUND_CIDRS, [c for c in raw.split(",") if c.strip()]
        if not cidrs:
            problems.append((exposure.resource.urn, f"{exposure.why} without allowed CIDRs: set {setting}"))
        elif world := open_to_world(cidrs):
            problems.append(
                (exposure.resource.urn, f"{exposure.why} and {setting} admits the whole internet ({world})")
            )
    return problems


# --- 2. IMDSv2 ---------------------------------------------------------------------------------


def _imds(options: Any, where: str) -> list[str]:
    tokens = _get(options, "httpTokens")
    hops = _get(options, "httpPutResponseHopLimit")
    problems = []
    if tokens != "required":
        problems.append(f"{where}.httpTokens is {tokens!r}: set 'required' (IMDSv2 only)")
    if hops is None or float(hops) != 1:
        problems.append(
            f"{where}.httpPutResponseHopLimit is {hops!r}: set 1 so pods cannot reach node credentials"
        )
    return problems


def imdsv2_hop_limit_one(token: str, props: Props) -> list[str]:
    if _is(token, KARPENTER_NODECLASS_GROUP, "EC2NodeClass"):
        return _imds(_get(props, "spec", "metadataOptions"), "spec.metadataOptions")
    if token == "aws:ec2/launchTemplate:LaunchTemplate":
        return _imds(props.get("metadataOptions"), "metadataOptions")
    if token == "aws:eks/nodeGroup:NodeGroup" and not props.get("launchTemplate"):
        return [
            "a managed node group without launchTemplate leaves IMDS at EKS's defaults: give it a "
            "launch template with metadataOptions httpTokens 'required' and hop limit 1"
        ]
    return []


# --- 3. pins -----------------------------------------------------------------------------------


# Tags that name a moving target instead of a release: ``latest`` (what a reference without a tag
# pulls) and the branch or channel names that registries republish on every build.
MUTABLE_TAGS = frozenset({"latest", "main", "master", "nightly", "stable", "edge", "dev"})


def unpinned_image(image: str) -> str | None:
    """Why an image reference is not pinned, or None (a digest, or a tag that names a release)."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag"
    tag = last.rsplit(":", 1)[1]
    if tag.lower() in MUTABLE_TAGS:
        return f"uses the mutable tag {tag}"
    return None


def pinned_versions(token: str, props: Props) -> list[str]:
    problems = []
    for path, container in containers(props):
        image = str(container.get("image") or "")
        if why := unpinned_image(image):
            problems.append(f"{path}.image {image!r} {why}: pin a version tag or digest")
    if _is(token, KARPENTER_NODECLASS_GROUP, "EC2NodeClass"):
        for index, term in enumerate(_list(_get(props, "spec", "amiSelectorTerms"))):
            alias = str(_get(term, "alias") or "")
            if alias.endswith("@latest"):
                problems.append(
                    f"spec.amiSelectorTerms[{index}].alias {alias!r} follows every AMI release: pin it"
                )
    if kind_of(token) is not None and token.startswith("kubernetes:helm.sh/"):
        chart, version = str(props.get("chart") or ""), props.get("version")
        local = chart.startswith((".", "/"))
        if not local and (not version or str(version).lower() == "latest"):
            problems.append(f"Helm chart {chart!r} has no pinned version: set version")
        for path, key, value in _walk(props.get("values") or {}):
            if key == "tag" and isinstance(value, str) and value.lower() in MUTABLE_TAGS:
                problems.append(f"values.{path} is {value!r}: pin the image tag")
    return problems


# --- 4. GPU NodePools ---------------------------------------------------------------------------


def _platform_fact(*path: str) -> Any:
    return _get(json.loads(PLATFORM_FACTS.read_text()), *path)


# Node labels a NodePool requirement may select GPUs by: Karpenter's well-known labels on AWS
# (karpenter.k8s.aws/instance-gpu-count, -name, -manufacturer, -memory; instance-family,
# instance-category) and EKS Auto Mode's eks.amazonaws.com/ equivalents, besides the Kubernetes
# instance-type label. Families g* and p* are EC2's accelerated-computing GPU families
# (g4dn, g5, g5g, g6, g6e, gr6, p4d, p5...; no other family starts with g or p).
GPU_LABEL_PREFIXES = ("karpenter.k8s.aws/instance-gpu-", "eks.amazonaws.com/instance-gpu-")
FAMILY_LABELS = ("karpenter.k8s.aws/instance-family", "eks.amazonaws.com/instance-family")
CATEGORY_LABELS = ("karpenter.k8s.aws/instance-category", "eks.amazonaws.com/instance-category")
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
GPU_FAMILY = re.compile(r"^(g|gr|p)\d", re.IGNORECASE)
GPU_CATEGORIES = frozenset({"g", "p"})


def _selects_gpus(requirement: Any) -> bool:
    """True when one NodePool requirement admits only, or explicitly, GPU instances."""
    key = str(_get(requirement, "key") or "")
    operator = str(_get(requirement, "operator") or "")
    values = [str(v) for v in _list(_get(requirement, "values"))]
    if key.startswith(GPU_LABEL_PREFIXES):
        # In/Exists/Gt ask for GPUs; Lt, NotIn and DoesNotExist keep them out (or leave them unasked).
        return operator in ("Exists", "Gt") or (operator == "In" and any(v != "0" for v in values))
    if operator != "In":
        return False
    if key in FAMILY_LABELS:
        return any(GPU_FAMILY.match(v) for v in values)
    if key in INSTANCE_TYPE_LABELS:
        return any(GPU_FAMILY.match(v.split(".", 1)[0]) for v in values)
    if key in CATEGORY_LABELS:
        return any(v.lower() in GPU_CATEGORIES for v in values)
    return False


def is_gpu_nodepool(props: Props) -> bool:
    """A NodePool that buys GPU nodes: any requirement selecting GPUs, an nvidia.com/gpu taint, or
    nvidia.com/gpu among its limits."""
    spec = _get(props, "spec", "template", "spec") or {}
    taints = [str(_get(t, "key") or "") for t in _list(spec.get("taints"))]
    return (
        any(_selects_gpus(r) for r in _list(spec.get("requirements")))
        or GPU_RESOURCE in taints
        or GPU_RESOURCE in (_get(props, "spec", "limits") or {})
    )


def _consolidation_blocked(disruption: Mapping[str, Any]) -> bool:
    if disruption.get("consolidationPolicy") == "WhenEmpty":
        return True
    for budget in _list(disruption.get("budgets")):
        reasons = _list(_get(budget, "reasons"))
        if (
            str(_get(budget, "nodes")) == "0"
            and not _get(budget, "schedule")
            and (not reasons or "Underutilized" in reasons)
        ):
            return True
    return False


def gpu_nodepool_guarded(token: str, props: Props) -> list[str]:
    if not _is(token, "karpenter.sh", "NodePool") or not is_gpu_nodepool(props):
        return []
    name = _obj_name(props)
    problems = []
    if GPU_RESOURCE not in (_get(props, "spec", "limits") or {}):
        problems.append(f"GPU NodePool {name} has no spec.limits[{GPU_RESOURCE!r}]: cap the GPUs it may buy")
    expire = _get(props, "spec", "template", "spec", "expireAfter")
    group = _get(props, "spec", "template", "spec", "nodeClassRef", "group")
    # Expiry is forceful: neither budgets nor karpenter.sh/do-not-disrupt hold it back
    # (platform-facts karpenter.expiration), so a serving replica would be evicted mid-stream.
    # EKS Auto Mode caps node lifetime (platform-facts eks.auto_mode_max_node_lifetime): there
    # the cap itself is the longest allowed.
    allowed = {str(_platform_fact("karpenter", "expiration", "never"))}
    if group == AUTO_MODE_NODECLASS_GROUP:
        allowed.add(str(_platform_fact("eks", "auto_mode_max_node_lifetime", "value")))
    if str(expire) not in allowed:
        problems.append(
            f"GPU NodePool {name} expires its nodes (spec.template.spec.expireAfter {expire!r}) under "
            f"serving replicas: set {' or '.join(sorted(allowed))}"
        )
    if not _consolidation_blocked(_get(props, "spec", "disruption") or {}):
        problems.append(
            f"GPU NodePool {name} may consolidate nodes that run serving replicas: set "
            "spec.disruption.consolidationPolicy WhenEmpty (or a nodes: '0' budget for Underutilized)"
        )
    return problems


# --- 5. encryption -----------------------------------------------------------------------------


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def encrypted_volumes(token: str, props: Props) -> list[str]:
    if _is(token, "storage.k8s.io", "StorageClass") and props.get("provisioner") in EBS_PROVISIONERS:
        if not _truthy(_get(props, "parameters", "encrypted")):
            name = _obj_name(props)
            return [f"StorageClass {name} makes unencrypted EBS volumes: set parameters.encrypted 'true'"]
        return []
    if _is(token, KARPENTER_NODECLASS_GROUP, "EC2NodeClass"):
        mappings, where = _list(_get(props, "spec", "blockDeviceMappings")), "spec.blockDeviceMappings"
    elif token == "aws:ec2/launchTemplate:LaunchTemplate":
        mappings, where = _list(props.get("blockDeviceMappings")), "blockDeviceMappings"
    elif token == "aws:ebs/volume:Volume":
        return [] if _truthy(props.get("encrypted")) else ["EBS volume is not encrypted: set encrypted true"]
    else:
        return []
    return [
        f"{where}[{i}].ebs.encrypted is not true: encrypt the volume"
        for i, mapping in enumerate(mappings)
        if _get(mapping, "ebs") is not None and not _truthy(_get(mapping, "ebs", "encrypted"))
    ]


def _document(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    try:
        parsed = json.loads(str(value))
    except ValueError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


# --- policy conditions ----------------------------------------------------------------------------
#
# How IAM evaluates a Condition block (IAM User Guide, "IAM JSON policy elements: Condition
# operators" and "Conditions with multiple context keys or values"): operators, and keys under one
# operator, are ANDed, the values of one key ORed; a key absent from the request makes a plain
# operator false but an ``...IfExists`` operator true, and ``ForAllValues:`` true; a ``Not``
# operator matches everything but its values. So a statement is narrowed to some callers only by a
# positive test of a key that says who calls or from where, with values that do not match anyone.

# Global condition keys that say who makes a request, or from which network or resource (IAM User
# Guide, "AWS global condition context keys": properties of the principal, of the network, of the
# resource and of the request's source). Others (aws:SecureTransport, aws:UserAgent, aws:Referer,
# aws:CurrentTime...) let any caller through.
IDENTITY_CONDITION_KEYS = frozenset(
    key.lower()
    for key in (
        "aws:SourceIp",
        "aws:VpcSourceIp",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "aws:PrincipalAccount",
        "aws:PrincipalArn",
        "aws:PrincipalOrgID",
        "aws:PrincipalOrgPaths",
        "aws:PrincipalServiceName",
        "aws:SourceAccount",
        "aws:SourceArn",
        "aws:SourceOrgID",
        "aws:SourceOrgPaths",
        "aws:SourceOwner",
        "aws:userid",
        "aws:username",
    )
)
POSITIVE_OPERATORS = frozenset(
    {"stringequals", "stringequalsignorecase", "stringlike", "arnequals", "arnlike", "ipaddress"}
)
LIKE_OPERATORS = frozenset({"stringlike", "arnlike"})
# Prefixes every ID of a kind shares: ``vpce-*`` is any VPC endpoint of any account, ``o-*`` any
# organization.
GENERIC_ID_PREFIXES = frozenset({"", "vpce", "vpc", "o", "arn", "arn:aws"})
SECURE_TRANSPORT = "aws:securetransport"


def condition_elements(condition: Any) -> list[tuple[str, str, list[Any]]]:
    """(operator, key, values) of every test in a Condition block."""
    if not isinstance(condition, Mapping):
        return []
    return [
        (str(operator), str(key), _list(values))
        for operator, tests in condition.items()
        if isinstance(tests, Mapping)
        for key, values in tests.items()
    ]


def _operator(operator: str) -> tuple[str, str, bool]:
    """(set qualifier, base operator, IfExists) of ``ForAnyValue:StringLikeIfExists`` and the like,
    lower case."""
    qualifier, _, base = operator.lower().rpartition(":")
    exists = base.endswith("ifexists")
    return qualifier, base.removesuffix("ifexists"), exists


def _narrow_value(value: Any, like: bool) -> bool:
    """True when one condition value names particular callers: not a pattern matching everything
    and, for the Like operators, not a pattern that only repeats what every ID of a kind starts
    with (``vpce-*``, ``arn:aws:iam::*:role/x`` names any account's role)."""
    text = str(value)
    if not text or matches_everything(text):
        return False
    if not like:
        return True
    literal = re.split(r"[*?]", text, maxsplit=1)[0]
    if literal.startswith("arn:"):
        parts = literal.split(":")
        # The account (or, for S3, the bucket name) must be spelled out before any wildcard.
        return len(parts) >= 6 and (parts[4] != "" or parts[5] != "")
    return literal.rstrip("-:") not in GENERIC_ID_PREFIXES


def narrowing_test(operator: str, key: str, values: list[Any]) -> bool:
    """Whether one condition test admits only some callers (see the section comment)."""
    qualifier, base, if_exists = _operator(operator)
    if key.lower() not in IDENTITY_CONDITION_KEYS or base not in POSITIVE_OPERATORS:
        return False
    if if_exists or qualifier == "forallvalues" or not values:
        return False
    if base == "ipaddress":
        cidrs = [str(v) for v in values]
        return not _CIDRS.parse(cidrs)[1] and open_to_world(cidrs) is None
    return all(_narrow_value(v, base in LIKE_OPERATORS) for v in values)


def narrows_who(condition: Any) -> bool:
    """True when a Condition block admits only some callers: one of its tests (they are ANDed)
    narrows them."""
    return any(narrowing_test(*element) for element in condition_elements(condition))


def _unnarrowed(statement: Mapping[str, Any]) -> str:
    """`` with no condition`` or `` (its condition <tests> does not narrow who)`` for a message."""
    elements = condition_elements(_get(statement, "Condition"))
    if not elements:
        return " with no condition"
    tests = "; ".join(f"{op} {key} {values}" for op, key, values in elements)
    return f" (its condition {tests} does not narrow who: it admits any caller)"


def _false(value: Any) -> bool:
    """A Bool condition value IAM reads as false: JSON false or the string "false" in any case
    ("False " with a space, "no" or "0" is no boolean and never matches)."""
    return value is False or (isinstance(value, str) and value.lower() == "false")


def insecure_transport_flaw(statement: Any) -> str | None:
    """Why a Deny statement on ``aws:SecureTransport`` does not refuse every request made without
    TLS, "" when it does, None when it is no such statement. It must deny everyone (Principal
    ``*``), at least ``s3:GetObject``, on ``Bool`` (or ``BoolIfExists``) ``aws:SecureTransport``
    ``false`` alone: any other value never matches (the key is a boolean) and any other test is
    ANDed with it, so requests without TLS that fail that test are let through."""
    if not isinstance(statement, Mapping) or statement.get("Effect") != "Deny":
        return None
    elements = condition_elements(statement.get("Condition"))
    tls = [(op, key, values) for op, key, values in elements if key.lower() == SECURE_TRANSPORT]
    if not tls:
        return None
    flaws = []
    for operator, _, values in tls:
        _, base, _ = _operator(operator)
        if base != "bool":
            flaws.append(
                f"tests aws:SecureTransport with {operator}, which never matches a request without TLS"
            )
        elif not values or not all(_false(v) for v in values):
            shown = ", ".join(repr(v) for v in values)
            flaws.append(f"compares aws:SecureTransport to {shown}: only false matches a request without TLS")
    if others := [f"{op} {key}" for op, key, _ in elements if key.lower() != SECURE_TRANSPORT]:
        flaws.append(f"also requires {', '.join(others)}, so requests without TLS that fail it are allowed")
    if "NotPrincipal" in statement or not _everyone(statement.get("Principal")):
        flaws.append('denies only some principals: set Principal "*"')
    actions = [str(a) for a in _list(statement.get("Action"))]
    not_actions = [str(a) for a in _list(statement.get("NotAction"))]
    covers_reads = (
        any(iam_matches(a, "s3:GetObject") for a in actions)
        if "Action" in statement
        else not any(iam_matches(a, "s3:GetObject") for a in not_actions)
    )
    if not covers_reads:
        flaws.append("does not deny s3:GetObject")
    return "; ".join(flaws)


def tls_only_problems(document: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """(whether a statement of the policy refuses requests without TLS, why each statement that
    tries to falls short)."""
    found, flaws = False, []
    for index, statement in enumerate(_list(document.get("Statement"))):
        flaw = insecure_transport_flaw(statement)
        if flaw == "":
            found = True
        elif flaw:
            flaws.append(f"statement {_get(statement, 'Sid') or f'#{index}'} {flaw}")
    return found, flaws


def _feeds(resource: Resource, bucket: Resource) -> bool:
    """``resource`` names ``bucket`` in its ``bucket`` input (by dependency, or by the bucket's name)."""
    if bucket.urn and bucket.urn in resource.property_dependencies.get("bucket", ()):
        return True
    name = bucket.props.get("bucket")
    return bool(name) and resource.props.get("bucket") == name


def buckets_encrypted_tls_only(resources: list[Resource]) -> list[tuple[str, str]]:
    problems = []
    for bucket in (r for r in resources if r.type in BUCKET_TYPES):
        related = [r for r in resources if r is not bucket and _feeds(r, bucket)]
        encrypted = bool(bucket.props.get("serverSideEncryptionConfiguration")) or any(
            r.type.endswith(
                (":BucketServerSideEncryptionConfiguration", ":BucketServerSideEncryptionConfigurationV2")
            )
            for r in related
        )
        tls_only, flaws = False, list[str]()
        for holder in [bucket, *(r for r in related if r.type == "aws:s3/bucketPolicy:BucketPolicy")]:
            document = _document(holder.props.get("policy")) if holder.props.get("policy") else None
            if document is not None:
                found, why = tls_only_problems(document)
                tls_only, flaws = tls_only or found, [*flaws, *why]
        label = bucket.name or bucket.urn
        if not encrypted:
            problems.append((bucket.urn, f"bucket {label} has no server-side encryption configuration"))
        if not tls_only:
            because = f": its policy's {'; '.join(flaws)}" if flaws else ""
            problems.append(
                (
                    bucket.urn,
                    f"bucket {label} has no policy denying requests without TLS (aws:SecureTransport false)"
                    + because,
                )
            )
    return problems


# --- 6. IAM ------------------------------------------------------------------------------------


WILDCARDS = "*?"
PASS_ROLE = "iam:PassRole"
# The actions that assume a role: a trust policy allowing one of them to everyone lets any AWS
# account in (sts:AssumeRole, AssumeRoleWithWebIdentity, AssumeRoleWithSAML; TagSession and
# SetSourceIdentity ride along with them).
ASSUME_ROLE_ACTIONS = ("sts:AssumeRole", "sts:AssumeRoleWithWebIdentity", "sts:AssumeRoleWithSAML")


def _wild(value: str) -> bool:
    return any(c in value for c in WILDCARDS)


def matches_everything(value: str) -> bool:
    """True for a pattern of wildcards alone with a ``*`` in it (``*``, ``**``, ``?*``): it matches
    every string, as ``"Resource": "*"`` does."""
    return bool(value) and "*" in value and set(value) <= set(WILDCARDS)


def iam_matches(pattern: str, value: str) -> bool:
    """Whether an IAM pattern matches ``value`` as IAM matches actions: ``*`` any run of
    characters, ``?`` any one character, letters compared case-insensitively (IAM User Guide,
    "IAM JSON policy elements: Action")."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL) is not None


def _star_resource_allowed(actions: list[str]) -> bool:
    return all(
        not any(iam_matches(a, data) for data in DATA_READ_ACTIONS)
        and (a in STAR_RESOURCE_EXCEPTIONS or a.split(":", 1)[-1].startswith(READ_VERBS))
        for a in actions
    )


def wildcard_arn(resource: str) -> bool:
    """True when an ARN's resource name (after the account field, up to the first ``/`` or ``:``)
    holds a wildcard: ``arn:aws:s3:::*`` or ``arn:aws:s3:::bucket*`` match every bucket, or every
    bucket sharing a prefix, where ``arn:aws:s3:::bucket/*`` names one bucket's objects and
    ``arn:aws:ec2:*:*:instance/*`` one resource type; for data services the name after the type
    (``secret:*``, ``parameter/*``) counts as well."""
    parts = resource.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        return False
    segments = re.split(r"[/:]", parts[5])
    if _wild(segments[0]):
        return True
    # Where the ARN names a resource type first (secret:, parameter/, key/, table/), a name that
    # opens with a wildcard matches every secret, parameter, key or table of the account.
    return parts[2] in TYPED_DATA_SERVICES and len(segments) > 1 and segments[1].startswith(("*", "?"))


def passes_any_role(resource: str) -> bool:
    """True when an ``iam:PassRole`` resource matches roles by pattern from the first character of
    their name: ``*``, ``arn:aws:iam::*:role/*``, ``role/?*``, ``role/service-role/*``. Passing any
    role of the account to a service the holder controls (an instance, a function, a pod) lends it
    that role's permissions, an administrator's included. A name with a literal prefix
    (``role/KarpenterNodeRole-*``) or an exact ARN is the holder's own choice and passes."""
    if matches_everything(resource):
        return True
    parts = resource.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        return False
    service, name = parts[2], parts[5]
    if service.lower() != "iam" and not _wild(service):
        return False
    if name[:1] in WILDCARDS or not name:
        return True
    kind, _, rest = name.partition("/")
    if kind.lower() != "role" and not _wild(kind):
        return False
    role = rest.rsplit("/", 1)[-1]
    return not role or role[0] in WILDCARDS


def _managed_policies() -> dict[str, Mapping[str, Any]]:
    """The AWS managed policies the pack refuses, by name (facts.json aws_managed_policies, from
    reference/upstream/aws-managed-policies.json)."""
    return {str(p["name"]): p for p in _list(_platform_fact("aws_managed_policies", "too_broad"))}


def too_broad_managed_policy(arn: str) -> str | None:
    """Why attaching the managed policy ``arn`` grants too much, or None: the AWS managed policies
    of facts.json (AdministratorAccess, PowerUserAccess, the job-function/SystemAdministrator,
    NetworkAdministrator, DatabaseAdministrator and DataScientist policies, IAMFullAccess,
    AmazonS3ReadOnlyAccess), and by name any ``AdministratorAccess*`` or ``*FullAccess`` policy:
    each grants a whole service or the whole account. Matched on the name after the last ``/``, so
    a job-function policy is caught under its real path (``policy/job-function/...``) and any other."""
    name = arn.rsplit("/", 1)[-1]
    if known := _managed_policies().get(name):
        return str(known["why"])
    if name.startswith("AdministratorAccess"):
        return "administrator access"
    if name.endswith("FullAccess"):
        return "every action of a service"
    return None


def wildcard_problems(document: Mapping[str, Any]) -> list[str]:
    """Wildcard actions (``*`` or ``?``), ``Resource: "*"`` outside the documented exceptions,
    wildcard ARNs and ``iam:PassRole`` on any role, in Allow statements (a Deny with a wildcard
    only narrows access)."""
    problems = []
    for index, statement in enumerate(_list(document.get("Statement"))):
        if _get(statement, "Effect") != "Allow":
            continue
        label = _get(statement, "Sid") or f"#{index}"
        if "NotAction" in statement or "NotResource" in statement:
            problems.append(f"statement {label}: NotAction/NotResource in an Allow grants everything else")
        actions = [str(a) for a in _list(_get(statement, "Action"))]
        if wild := [a for a in actions if _wild(a)]:
            problems.append(f"statement {label}: wildcard action(s) {', '.join(wild)}")
        resources = [str(r) for r in _list(_get(statement, "Resource"))]
        if any(matches_everything(r) for r in resources) and not _star_resource_allowed(actions):
            others = [a for a in actions if not _star_resource_allowed([a])]
            problems.append(
                f'statement {label}: "Resource": "*" for {", ".join(others)} (not a documented exception)'
            )
        if wild_arns := [r for r in resources if wildcard_arn(r)]:
            problems.append(
                f"statement {label}: wildcard ARN(s) {', '.join(wild_arns)} match resources by pattern: "
                "name each bucket, queue or key"
            )
        passes = [a for a in actions if iam_matches(a, PASS_ROLE)]
        if passes and (any_role := [r for r in resources if passes_any_role(r)]):
            problems.append(
                f"statement {label}: {', '.join(passes)} on {', '.join(any_role)} lets the holder hand any "
                "role of the account, an administrator's too, to a service it controls: name the role's ARN"
            )
    return problems


def open_trust_problems(document: Mapping[str, Any]) -> list[str]:
    """Allow statements of a role's trust policy that let everyone (Principal ``*``, or ``AWS``
    ``*``) assume it with no condition that narrows who: any AWS account could take the role."""
    return [
        f'statement {_get(statement, "Sid") or f"#{index}"}: lets everyone (Principal "*") assume the '
        f"role{_unnarrowed(statement)}: name the principals, or add aws:PrincipalOrgID/aws:PrincipalAccount"
        for index, statement in enumerate(_list(document.get("Statement")))
        if _get(statement, "Effect") == "Allow"
        and _everyone(_get(statement, "Principal"))
        and any(
            iam_matches(a, t) for a in map(str, _list(_get(statement, "Action"))) for t in ASSUME_ROLE_ACTIONS
        )
        and not narrows_who(_get(statement, "Condition"))
    ]


def no_wildcard_iam(token: str, props: Props) -> list[str]:
    documents: list[tuple[str, Any]] = []
    if token in POLICY_DOCUMENT_INPUTS:
        documents.append((POLICY_DOCUMENT_INPUTS[token], props.get(POLICY_DOCUMENT_INPUTS[token])))
    if token == "aws:iam/role:Role":
        for index, inline in enumerate(_list(props.get("inlinePolicies"))):
            documents.append((f"inlinePolicies[{index}].policy", _get(inline, "policy")))
    problems: list[str] = []
    if token in POLICY_ARN_INPUTS:
        where = POLICY_ARN_INPUTS[token]
        problems.extend(
            f"{where} {arn} grants wildcard access ({why}): attach a least-privilege policy"
            for arn in map(str, _list(props.get(where)))
            if (why := too_broad_managed_policy(arn))
        )
    for where, raw in documents:
        document = _document(raw)
        if document is not None:
            problems.extend(f"{where}: {p}" for p in wildcard_problems(document))
    if token == "aws:iam/role:Role" and (trust := _document(props.get("assumeRolePolicy"))) is not None:
        problems.extend(f"assumeRolePolicy: {p}" for p in open_trust_problems(trust))
    return problems


# --- 7. secrets --------------------------------------------------------------------------------


def no_plaintext_secrets(token: str, props: Props) -> list[str]:
    problems = []
    for path, container in containers(props):
        for env in _list(container.get("env")):
            name = str(_get(env, "name") or "")
            if holds_secret(name) and _get(env, "value"):
                problems.append(f"{path}.env {name} holds a literal value: use valueFrom.secretKeyRef")
        args = [str(a) for a in [*_list(container.get("command")), *_list(container.get("args"))]]
        for index, arg in enumerate(args):
            flag = arg.split("=", 1)[0]
            if flag in SECRET_FLAGS and ("=" in arg or index + 1 < len(args)):
                problems.append(
                    f"{path} passes {flag} on the command line: read it from a Secret-backed env var"
                )
    if _is(token, "", "ConfigMap"):
        for section in ("data", "binaryData"):
            for key, value in (props.get(section) or {}).items():
                if holds_secret(str(key)) and value:
                    problems.append(
                        f"ConfigMap {_obj_name(props)} {section}.{key} looks like a secret: use a Secret"
                    )
    if token.startswith("kubernetes:helm.sh/"):
        for path, key, value in _walk(props.get("values") or {}):
            if isinstance(value, str) and value and holds_secret(str(key)):
                problems.append(f"values.{path} is a literal secret: reference an existing Secret instead")
    return problems


# --- 8. API key --------------------------------------------------------------------------------


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
    command, args = _list(container.get("command")), _list(container.get("args"))
    if command:
        return _starts_vllm([*command, *args])
    image = str(container.get("image") or "").rsplit("/", 1)[-1]
    return image.startswith("vllm") or _starts_vllm(args)


def _requires_key(container: Mapping[str, Any]) -> bool:
    for env in _list(container.get("env")):
        if _get(env, "name") == "VLLM_API_KEY" and _get(env, "valueFrom", "secretKeyRef"):
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
                        f"{exposed[0].why} but vLLM in {_obj_name(resource.props)} ({path}) takes requests "
                        "without an API key: set the apiKey secret (VLLM_API_KEY from a Secret)",
                    )
                )
    return problems


# --- 9. public buckets ---------------------------------------------------------------------------

BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
BUCKET_ACL_TYPES = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
# The four switches of S3 Block Public Access (aws:s3/bucketPublicAccessBlock inputs); each left
# off lets one path to a public bucket open (ACLs set, ACLs honoured, policies set, policies honoured).
PUBLIC_ACCESS_FLAGS = ("blockPublicAcls", "ignorePublicAcls", "blockPublicPolicy", "restrictPublicBuckets")
# Canned ACLs that grant the AllUsers group (S3 User Guide, Canned ACL), and the grantee groups
# that mean everyone or every AWS account.
PUBLIC_CANNED_ACLS = frozenset({"public-read", "public-read-write"})
PUBLIC_GRANTEE_GROUPS = ("/global/AllUsers", "/global/AuthenticatedUsers")


def _everyone(principal: Any) -> bool:
    """Principal ``*``, or an ``AWS`` principal with a wildcard (``*``, ``arn:aws:iam::*:root``)."""
    if isinstance(principal, str):
        return _wild(principal)
    return isinstance(principal, Mapping) and any(_wild(str(p)) for p in _list(principal.get("AWS")))


def public_statements(document: Mapping[str, Any]) -> list[str]:
    """Labels of the Allow statements that grant anyone (Principal "*") with no condition that
    narrows who: none, or one whose tests admit any caller (``aws:SecureTransport``, ``IpAddress
    aws:SourceIp 0.0.0.0/0``, ``StringLike aws:SourceVpce *``, an ``...IfExists`` test)."""
    return [
        str(_get(statement, "Sid") or f"#{index}") + _unnarrowed(statement)
        for index, statement in enumerate(_list(document.get("Statement")))
        if _get(statement, "Effect") == "Allow"
        and _everyone(_get(statement, "Principal"))
        and not narrows_who(_get(statement, "Condition"))
    ]


def _public_acl(resource: Resource) -> str | None:
    acl = resource.props.get("acl")
    if acl in PUBLIC_CANNED_ACLS:
        return f"acl {acl}"
    for grant in _list(_get(resource.props, "accessControlPolicy", "grants")):
        uri = str(_get(grant, "grantee", "uri") or "")
        if uri.endswith(PUBLIC_GRANTEE_GROUPS):
            return f"a grant to {uri}"
    return None


def buckets_not_public(resources: list[Resource]) -> list[tuple[str, str]]:
    """Every bucket blocks public access with all four flags, and no ACL or policy makes it public."""
    problems = []
    for bucket in (r for r in resources if r.type in BUCKET_TYPES):
        related = [r for r in resources if r is not bucket and _feeds(r, bucket)]
        label = bucket.name or bucket.urn
        blocks = [r for r in related if r.type == PUBLIC_ACCESS_BLOCK]
        if not blocks:
            problems.append(
                (
                    bucket.urn,
                    f"bucket {label} has no BucketPublicAccessBlock: add one with all four flags true",
                )
            )
        elif off := [f for f in PUBLIC_ACCESS_FLAGS if not any(_truthy(b.props.get(f)) for b in blocks)]:
            problems.append(
                (bucket.urn, f"bucket {label}'s BucketPublicAccessBlock leaves {', '.join(off)} off")
            )
        for holder in [bucket, *(r for r in related if r.type in BUCKET_ACL_TYPES)]:
            if why := _public_acl(holder):
                problems.append((holder.urn, f"bucket {label} is public through {why}: make it private"))
        for holder in [bucket, *(r for r in related if r.type == BUCKET_POLICY)]:
            problems.extend(_public_policy(holder, f"bucket {label}'s policy"))
    # A policy for a bucket this stack does not create (named by a literal) makes that bucket public
    # just the same.
    attached = {r.urn for b in resources if b.type in BUCKET_TYPES for r in resources if _feeds(r, b)}
    for policy in (r for r in resources if r.type == BUCKET_POLICY and r.urn not in attached):
        problems.extend(_public_policy(policy, f"the policy of bucket {policy.props.get('bucket')}"))
    return problems


BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"


def _public_policy(holder: Resource, what: str) -> list[tuple[str, str]]:
    document = _document(holder.props.get("policy")) if holder.props.get("policy") else None
    if document is None or not (public := public_statements(document)):
        return []
    return [
        (
            holder.urn,
            f'{what} grants everyone (Principal "*") in statement {", ".join(public)}: name the '
            "principals, or narrow them with aws:PrincipalOrgID, aws:SourceVpce or aws:SourceIp",
        )
    ]


# --- 10. security-group ingress --------------------------------------------------------------------


def _ingress_cidrs(token: str, props: Props) -> list[tuple[str, list[Any]]]:
    """(where, CIDRs) of each ingress permission of a security group or rule resource."""
    if token == "aws:ec2/securityGroup:SecurityGroup":
        return [
            (f"ingress[{index}]", [*_list(_get(rule, "cidrBlocks")), *_list(_get(rule, "ipv6CidrBlocks"))])
            for index, rule in enumerate(_list(props.get("ingress")))
        ]
    if token == "aws:ec2/securityGroupRule:SecurityGroupRule" and props.get("type") == "ingress":
        return [("cidrBlocks", [*_list(props.get("cidrBlocks")), *_list(props.get("ipv6CidrBlocks"))])]
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


# --- 11. host access ---------------------------------------------------------------------------------

# The only pods that may reach into their node, each for the reason given, keyed by (namespace,
# app.kubernetes.io/name). These charts are installed by the project (components/monitoring/observability.py,
# components/platform/karpenter.py), and a chart names its pods after itself (Helm's ``<chart>.name`` helper,
# .Chart.Name in reference/upstream/helm-charts/<chart>/Chart.yaml) unless nameOverride is set.
HOST_ACCESS_ALLOWED: Mapping[tuple[str, str], str] = {
    # The exporters live in a namespace of their own at Pod Security privileged (components/build.py
    # NODE_MONITORING_NAMESPACE), so `monitoring` can run at baseline.
    ("node-monitoring", "prometheus-node-exporter"): "node metrics from the host's /proc, /sys and network",
    (
        "node-monitoring",
        "dcgm-exporter",
    ): "GPU metrics from the NVIDIA driver and the kubelet's pod-resources socket",
    (
        "kube-system",
        "nvidia-device-plugin",
    ): "registers the GPUs with the kubelet through its device-plugin socket",
}
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
APP_NAME_LABEL = "app.kubernetes.io/name"


def pod_specs(props: Props, path: str = "") -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(path, metadata, pod spec) of every pod template in an object: a Pod itself, a workload's
    template, a CronJob's job template, a LeaderWorkerSet's leader and worker templates."""
    spec = props.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
        yield f"{path}spec", props.get("metadata") or {}, spec
    for key, value in props.items():
        if isinstance(value, Mapping):
            yield from pod_specs(value, f"{path}{key}.")


def host_access(spec: Mapping[str, Any]) -> list[str]:
    """What in a pod spec reaches into its node: host namespaces, hostPath volumes, privileged."""
    found = [name for name in HOST_NAMESPACES if _truthy(spec.get(name))]
    found += [
        f"hostPath volume {_get(v, 'name')}"
        for v in _list(spec.get("volumes"))
        if _get(v, "hostPath") is not None
    ]
    for key in ("containers", "initContainers", "ephemeralContainers"):
        found += [
            f"privileged container {_get(c, 'name')}"
            for c in _list(spec.get(key))
            if _truthy(_get(c, "securityContext", "privileged"))
        ]
        # A hostPort listens on the node's own address, past the pod network and its policies.
        found += [
            f"hostPort {_get(port, 'hostPort')} on container {_get(c, 'name')}"
            for c in _list(spec.get(key))
            for port in _list(_get(c, "ports"))
            if str(_get(port, "hostPort") or 0) not in ("0", "0.0")
        ]
    return found


def host_access_values(values: Any) -> list[str]:
    """What a Helm release's values switch on that reaches into the node, in the Kubernetes field
    names charts pass through to their pods (``securityContext.privileged``, ``hostNetwork``...)."""
    found = []
    for path, key, value in _walk(values or {}):
        if key in (*HOST_NAMESPACES, "privileged") and _truthy(value):
            found.append(f"values.{path} true")
        elif key == "hostPath" and value:
            found.append(f"values.{path} (a hostPath volume)")
        elif key == "hostPort" and str(value) not in ("0", "0.0", "None", ""):
            found.append(f"values.{path} {value}")
    return found


def no_host_access(token: str, props: Props) -> list[str]:
    if token == HELM_RELEASE:
        # A v3 Release's objects are no Pulumi resources (the engine never sees them), so its values
        # are judged: the allow-listed exporters by (namespace, chart name).
        namespace, chart = str(props.get("namespace") or "default"), chart_name(props)
        if (namespace, chart) in HOST_ACCESS_ALLOWED or not (
            found := host_access_values(props.get("values"))
        ):
            return []
        return [
            f"Helm release {props.get('name') or chart} ({chart}) sets {', '.join(found)}: only the "
            "allow-listed exporters may reach into the node (policy/rules.py HOST_ACCESS_ALLOWED)"
        ]
    if kind_of(token) is None or token.startswith("kubernetes:helm.sh/"):
        return []
    namespace = str(_get(props, "metadata", "namespace") or "default")
    problems = []
    for path, metadata, spec in pod_specs(props):
        app = _get(metadata, "labels", APP_NAME_LABEL) or _get(props, "metadata", "labels", APP_NAME_LABEL)
        if (namespace, str(app)) in HOST_ACCESS_ALLOWED or not (found := host_access(spec)):
            continue
        problems.append(
            f"{_obj_name(props)} {path} has {', '.join(found)}: only the allow-listed exporters may reach "
            "into the node (policy/rules.py HOST_ACCESS_ALLOWED)"
        )
    return problems


# --- 12. Helm charts ---------------------------------------------------------------------------------

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# Charts whose rendered objects the engine registers as the chart's children (pulumi-kubernetes
# v4 Chart, and the SDKs' v3 Chart component): the rules see each object, and which chart made it
# by its parent. A v3 Release installs its objects itself, so only its values can be judged.
HELM_CHARTS = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")


def chart_name(props: Props) -> str:
    """The chart a Helm resource installs: ``keda`` for ``keda``, ``kedacore/keda``,
    ``oci://ghcr.io/kedacore/keda``, ``https://.../keda-2.20.2.tgz`` or ``./charts/keda``."""
    raw = str(props.get("chart") or props.get("path") or "").rstrip("/")
    last = raw.rsplit("/", 1)[-1].removesuffix(".tgz")
    return re.sub(r"-v?\d+\.\d+[\w.+-]*$", "", last)


def charts_of(resources: list[Resource]) -> dict[str, str]:
    """URN -> the chart that rendered it, for every descendant of a Helm Chart resource."""
    by_urn = {r.urn: r for r in resources if r.urn}
    found: dict[str, str] = {}
    for resource in resources:
        seen, parent = set(), by_urn.get(resource.parent)
        while parent is not None and parent.urn not in seen:
            if parent.type in HELM_CHARTS:
                found[resource.urn] = chart_name(parent.props)
                break
            seen.add(parent.urn)
            parent = by_urn.get(parent.parent)
    return found


# --- 13. RBAC ---------------------------------------------------------------------------------------

RBAC_GROUP = "rbac.authorization.k8s.io"
READ_VERBS_K8S = frozenset({"get", "list", "watch"})
# Verbs that let the holder grant itself more (Kubernetes docs, "Role Based Access Control Good
# Practices": escalate, bind, impersonate) and the subresources that run code in a pod or reach
# the kubelet's API (pods/exec, pods/attach; nodes/proxy, which the kubelet serves exec through) or
# mint any service account's token (serviceaccounts/token).
ESCALATING_VERBS = ("escalate", "bind", "impersonate")
EXEC_RESOURCES = ("pods/exec", "pods/attach", "nodes/proxy")
TOKEN_RESOURCE = "serviceaccounts/token"
# Subjects that mean every user or every workload of the cluster, and the built-in role that
# grants everything.
BROAD_GROUPS = ("system:authenticated", "system:unauthenticated", "system:serviceaccounts")
ANONYMOUS_USER = "system:anonymous"
CLUSTER_ADMIN = "cluster-admin"


def _strings(value: Any) -> list[str]:
    return [str(v) for v in _list(value)]


def rbac_rule_problems(kind: str, rule: Mapping[str, Any]) -> list[str]:
    """What one rule of a Role or ClusterRole grants beyond least privilege."""
    groups = _strings(rule.get("apiGroups")) or [""]
    resources = _strings(rule.get("resources"))
    verbs = [v.lower() for v in _strings(rule.get("verbs"))]
    names, urls = _strings(rule.get("resourceNames")), _strings(rule.get("nonResourceURLs"))
    problems = []
    if "*" in verbs:
        problems.append("every verb")
    if wild := [r for r in resources if r == "*" or r.startswith("*/")]:
        problems.append(f"every resource ({', '.join(wild)})")
    if "*" in urls:
        problems.append("every non-resource URL")
    if escalating := [v for v in ESCALATING_VERBS if v in verbs]:
        problems.append(f"{', '.join(escalating)} (grants itself more)")
    if exec_like := [r for r in resources if r in EXEC_RESOURCES]:
        problems.append(f"{', '.join(exec_like)} (runs commands in pods or on nodes)")
    if TOKEN_RESOURCE in resources and ({"create", "*"} & set(verbs)):
        problems.append(f"create {TOKEN_RESOURCE} (a token for any service account)")
    core = "" in groups or "*" in groups
    reads = sorted(READ_VERBS_K8S & set(verbs)) or (["*"] if "*" in verbs else [])
    if kind == "ClusterRole" and core and reads and not names and ({"secrets", "*"} & set(resources)):
        problems.append(f"{'/'.join(reads)} Secrets in every namespace")
    return problems


def rbac_binding_problems(props: Props) -> list[str]:
    """What a RoleBinding or ClusterRoleBinding hands out: cluster-admin, or any role to every
    user, every anonymous caller or every service account of the cluster."""
    problems = []
    role = str(_get(props, "roleRef", "name") or "")
    if role == CLUSTER_ADMIN:
        problems.append(f"binds {CLUSTER_ADMIN}")
    for subject in _list(props.get("subjects")):
        kind, name = str(_get(subject, "kind")), str(_get(subject, "name"))
        if (kind == "Group" and name in BROAD_GROUPS) or (kind == "User" and name == ANONYMOUS_USER):
            problems.append(f"binds {role} to {kind} {name}")
    return problems


@dataclass(frozen=True)
class ChartRoleGrant:
    """A Role or ClusterRole a known chart renders that grants what rbac-least-privilege refuses,
    allowed rule by rule: each refused rule of that object must fall within one of ``rules``
    (its API groups, resources, verbs and resource names each a subset)."""

    chart: str
    kind: str
    name: str
    rules: tuple[Mapping[str, tuple[str, ...]], ...]
    reason: str


# The charts this project installs (components/; their objects as rendered with the project's
# values are in tests/data/chart_objects.json, where a test runs the pack over them as a v4 Chart's
# children and requires every entry here to still be needed). Names are the ones the project's
# release names and values give (kube-prometheus-stack fullnameOverride kps). Only the objects and
# rules named here are allowed; anything else a chart renders is judged like any other object.
# KEDA (permissions.operator.restrict.secret, rbac.scaledRefKinds) and kube-state-metrics
# (collectorsExclude secrets) need none: the project's values narrow them (components/monitoring/).
CHART_ROLE_GRANTS: tuple[ChartRoleGrant, ...] = (
    ChartRoleGrant(
        "kube-prometheus-stack",
        "ClusterRole",
        "kps-operator",
        (
            {"apiGroups": ("monitoring.coreos.com",), "resources": ("*",), "verbs": ("*",)},
            {"apiGroups": ("apps",), "resources": ("statefulsets",), "verbs": ("*",)},
            {"apiGroups": ("",), "resources": ("configmaps", "secrets"), "verbs": ("*",)},
        ),
        "prometheus-operator creates and updates the StatefulSet, configuration Secrets and rule "
        "ConfigMaps of every Prometheus it runs, and manages all its own custom resources "
        "(kube-prometheus-stack 88.5.3 templates/prometheus-operator/clusterrole.yaml)",
    ),
    ChartRoleGrant(
        "prometheus-adapter",
        "ClusterRole",
        "prometheus-adapter-server-resources",
        ({"apiGroups": ("custom.metrics.k8s.io",), "resources": ("*",), "verbs": ("*",)},),
        "the custom metrics API the adapter serves (custom.metrics.k8s.io only), bound for the HPA "
        "to read the GPU-utilization metric it scales on (prometheus-adapter 5.3.0 "
        "templates/custom-metrics-cluster-role.yaml)",
    ),
    ChartRoleGrant(
        "lws",
        "ClusterRole",
        "lws-manager-role",
        ({"apiGroups": ("",), "resources": ("secrets",), "verbs": ("get", "list", "update", "watch")},),
        "the LeaderWorkerSet controller rotates the serving certificate of its own webhooks, kept "
        "in a Secret, and its cache watches Secrets (lws v0.10.0 config/rbac/role.yaml, generated "
        "by kubebuilder)",
    ),
)


def _within(rule: Mapping[str, Any], allowed: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether an RBAC rule grants no more than ``allowed``: each of its API groups, resources,
    verbs, resource names and URLs is listed there (a ``*`` there covers any resource of the API
    groups allowed, the way the chart's own rule spells it)."""
    for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
        have = set(_strings(rule.get(key)) or ([""] if key == "apiGroups" else []))
        listed = set(allowed.get(key, ("",) if key == "apiGroups" else ()))
        if not (have <= listed or (key == "resources" and "*" in listed)):
            return False
    return True


def _role_grant(chart: str, kind: str, name: str, rule: Mapping[str, Any]) -> ChartRoleGrant | None:
    for grant in CHART_ROLE_GRANTS:
        if (grant.chart, grant.kind, grant.name) == (chart, kind, name) and any(
            _within(rule, allowed) for allowed in grant.rules
        ):
            return grant
    return None


def rbac_least_privilege(resources: list[Resource]) -> list[tuple[str, str]]:
    """Roles and ClusterRoles grant no wildcard verb or resource, no escalate/bind/impersonate,
    no exec into pods, no token minting, no Secrets read cluster-wide; bindings hand out neither
    cluster-admin nor anything to every user or service account. The rules a known chart needs
    (CHART_ROLE_GRANTS) pass for that chart's object alone."""
    charts = charts_of(resources)
    problems = []
    for resource in resources:
        found = kind_of(resource.type)
        if found is None or found[0] != RBAC_GROUP:
            continue
        kind, name = found[1], str(_get(resource.props, "metadata", "name"))
        if kind in ("Role", "ClusterRole"):
            for index, rule in enumerate(_list(resource.props.get("rules"))):
                if not isinstance(rule, Mapping) or not (why := rbac_rule_problems(kind, rule)):
                    continue
                if _role_grant(charts.get(resource.urn, ""), kind, name, rule):
                    continue
                problems.append(
                    (
                        resource.urn,
                        f"{kind} {_obj_name(resource.props)} rules[{index}] grants {'; '.join(why)}: "
                        "name the resources and verbs it needs",
                    )
                )
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            problems.extend(
                (
                    resource.urn,
                    f"{kind} {_obj_name(resource.props)} {why}: bind a narrower role to named subjects",
                )
                for why in rbac_binding_problems(resource.props)
            )
    return problems


# --- 14. container privileges ----------------------------------------------------------------------


def baseline_capabilities() -> frozenset[str]:
    """The capabilities Pod Security's Baseline level lets a container add (facts.json
    pod_security_baseline, from the Kubernetes Pod Security Standards)."""
    return frozenset(_strings(_platform_fact("pod_security_baseline", "capabilities", "allowed")))


def _capability(name: Any) -> str:
    return str(name).upper().removeprefix("CAP_")


def container_problems(spec: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    """What one container (in its pod spec) runs with beyond Pod Security Baseline, privileged and
    host access aside (no-host-access judges those): added capabilities outside Baseline's list
    (``ALL``, ``SYS_ADMIN``, ``NET_ADMIN``...), ``allowPrivilegeEscalation: true``, an
    ``Unconfined`` seccomp profile, an ``Unmasked`` /proc."""
    context = container.get("securityContext") or {}
    problems = []
    allowed = baseline_capabilities()
    if extra := [
        c for c in map(_capability, _list(_get(context, "capabilities", "add"))) if c not in allowed
    ]:
        problems.append(f"adds capabilities {', '.join(extra)}")
    if _truthy(context.get("allowPrivilegeEscalation")):
        problems.append("allowPrivilegeEscalation true")
    for where, holder in (("pod", spec.get("securityContext") or {}), ("container", context)):
        if str(_get(holder, "seccompProfile", "type")) == "Unconfined":
            problems.append(f"an Unconfined seccomp profile ({where})")
    if str(context.get("procMount")) == "Unmasked":
        problems.append("an Unmasked /proc")
    return problems


@dataclass(frozen=True)
class ChartCapabilityGrant:
    """A container of a known chart allowed to add capabilities beyond Baseline: those in
    ``capabilities`` and no others."""

    chart: str
    kind: str
    name: str
    container: str
    capabilities: frozenset[str]
    reason: str


CHART_CAPABILITY_GRANTS: tuple[ChartCapabilityGrant, ...] = (
    ChartCapabilityGrant(
        "dcgm-exporter",
        "DaemonSet",
        "dcgm-exporter",
        "exporter",
        frozenset({"SYS_ADMIN"}),
        "DCGM's profiling metrics need CAP_SYS_ADMIN (dcgm-exporter 4.8.2 values.yaml: 'Required for "
        "profiling metrics (DCGM_FI_PROF_*)'), and the project reads two of them, "
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE and DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (promql/__init__.py); it "
        "runs in node-monitoring, the namespace at Pod Security privileged",
    ),
)


def _capability_grant(chart: str, kind: str, name: str, container: str, added: list[str]) -> bool:
    return any(
        (grant.chart, grant.kind, grant.name, grant.container) == (chart, kind, name, container)
        and set(added) <= grant.capabilities
        for grant in CHART_CAPABILITY_GRANTS
    )


def container_values_problems(values: Any) -> list[tuple[str, frozenset[str]]]:
    """The same in a Helm release's values (charts pass securityContext fields through): each as
    (what, the capabilities it adds beyond Baseline; none for the other findings)."""
    allowed = baseline_capabilities()
    found: list[tuple[str, frozenset[str]]] = []
    for path, key, value in _walk(values or {}):
        if key == "capabilities" and isinstance(value, Mapping):
            extra = [c for c in map(_capability, _list(value.get("add"))) if c not in allowed]
            if extra:
                found.append((f"values.{path}.add {', '.join(extra)}", frozenset(extra)))
        elif key == "allowPrivilegeEscalation" and _truthy(value):
            found.append((f"values.{path} true", frozenset()))
        elif key == "seccompProfile" and str(_get(value, "type")) == "Unconfined":
            found.append((f"values.{path} Unconfined", frozenset()))
        elif key == "procMount" and str(value) == "Unmasked":
            found.append((f"values.{path} Unmasked", frozenset()))
    return found


def _release_problems(release: Resource) -> list[tuple[str, str]]:
    found = container_values_problems(release.props.get("values"))
    chart = chart_name(release.props)
    added = frozenset().union(*(caps for _, caps in found)) if found else frozenset()
    if not found or (
        all(caps for _, caps in found)
        and any(g.chart == chart and added <= g.capabilities for g in CHART_CAPABILITY_GRANTS)
    ):
        return []
    what = ", ".join(message for message, _ in found)
    label = release.props.get("name") or chart
    return [(release.urn, f"Helm release {label} ({chart}) sets {what}: drop them (Pod Security Baseline)")]


def container_least_privilege(resources: list[Resource]) -> list[tuple[str, str]]:
    """No container adds capabilities beyond Pod Security Baseline, allows privilege escalation,
    runs unconfined by seccomp or sees an unmasked /proc; a Helm release's values switch none of
    these on. The containers a known chart needs (CHART_CAPABILITY_GRANTS) pass for that chart's
    object alone."""
    charts = charts_of(resources)
    problems = []
    for resource in resources:
        if resource.type == HELM_RELEASE:
            problems.extend(_release_problems(resource))
            continue
        found_kind = kind_of(resource.type)
        if found_kind is None or resource.type.startswith("kubernetes:helm.sh/"):
            continue
        chart, name = charts.get(resource.urn, ""), str(_get(resource.props, "metadata", "name"))
        for path, _, spec in pod_specs(resource.props):
            for key in ("containers", "initContainers", "ephemeralContainers"):
                for index, container in enumerate(_list(spec.get(key))):
                    if not isinstance(container, Mapping) or not (why := container_problems(spec, container)):
                        continue
                    added = [
                        c
                        for c in map(
                            _capability, _list(_get(container, "securityContext", "capabilities", "add"))
                        )
                        if c not in baseline_capabilities()
                    ]
                    if why == [f"adds capabilities {', '.join(added)}"] and _capability_grant(
                        chart, found_kind[1], name, str(container.get("name")), added
                    ):
                        continue
                    problems.append(
                        (
                            resource.urn,
                            f"{_obj_name(resource.props)} {path}.{key}[{index}] ({container.get('name')}) "
                            f"runs with {', '.join(why)}: drop them (Pod Security Baseline)",
                        )
                    )
    return problems


RESOURCE_RULES: tuple[ResourceRule, ...] = (
    ResourceRule(
        "endpoint-not-open-to-world",
        "An internet-facing load balancer lists allowed client CIDRs, none of them the whole internet.",
        endpoint_not_open_to_world,
    ),
    ResourceRule(
        "cluster-endpoint-private-or-limited",
        "The EKS API endpoint is private, or public only to listed CIDRs.",
        cluster_endpoint_private_or_limited,
    ),
    ResourceRule(
        "imdsv2-hop-limit-1",
        "Node classes and launch templates require IMDSv2 with a hop limit of 1.",
        imdsv2_hop_limit_one,
    ),
    ResourceRule(
        "pinned-versions",
        "Images, AMI aliases and Helm charts are pinned (no latest, no missing tag or version).",
        pinned_versions,
    ),
    ResourceRule(
        "gpu-nodepool-guarded",
        "GPU NodePools cap their GPUs and neither expire nor consolidate nodes under serving replicas.",
        gpu_nodepool_guarded,
    ),
    ResourceRule(
        "encrypted-volumes", "EBS volumes, node disks and StorageClasses are encrypted.", encrypted_volumes
    ),
    ResourceRule(
        "no-wildcard-iam",
        "IAM policies grant no wildcard actions, and Resource '*' only for documented read/listener calls.",
        no_wildcard_iam,
    ),
    ResourceRule(
        "no-plaintext-secrets",
        "Kubernetes objects and Helm values carry no literal secrets (env, args, ConfigMaps, values).",
        no_plaintext_secrets,
    ),
    ResourceRule(
        "no-world-open-ingress",
        "No security group admits the whole internet (0.0.0.0/0, ::/0, or a union of CIDRs as open).",
        no_world_open_ingress,
    ),
    ResourceRule(
        "no-host-access",
        "No pod is privileged or uses hostPath/hostNetwork/hostPID/hostIPC, but the allow-listed exporters.",
        no_host_access,
    ),
)

STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "s3-encrypted-tls-only",
        "Every S3 bucket has server-side encryption and a policy denying non-TLS requests.",
        buckets_encrypted_tls_only,
    ),
    StackRule(
        "api-key-when-exposed",
        "vLLM requires an API key (from a Secret) when its endpoint is internet-facing.",
        api_key_when_exposed,
    ),
    StackRule(
        "tls-when-exposed",
        "An internet-facing endpoint serves HTTPS (a certificate), and plain HTTP only as a redirect.",
        endpoint_tls_when_exposed,
    ),
    StackRule(
        "class-endpoint-not-open-to-world",
        "An Ingress made internet-facing by its IngressClassParams lists allowed CIDRs, none world-open.",
        class_endpoint_not_open_to_world,
    ),
    StackRule(
        "no-world-open-ingress-sets",
        "Standalone ingress rules of one security group and port range do not add up to the whole internet.",
        world_open_ingress_sets,
    ),
    StackRule(
        "rbac-least-privilege",
        "Roles grant no wildcard verb or resource, no escalate/bind/impersonate, exec or token minting, no "
        "cluster-wide Secrets read; bindings hand cluster-admin or anything to all users to no one.",
        rbac_least_privilege,
    ),
    StackRule(
        "container-least-privilege",
        "No container adds capabilities beyond Pod Security Baseline, allows privilege escalation, runs "
        "seccomp-unconfined or with an unmasked /proc.",
        container_least_privilege,
    ),
    StackRule(
        "s3-not-public",
        "Every S3 bucket blocks public access (all four flags) and no ACL or policy grants everyone.",
        buckets_not_public,
    ),
)


def violations(resources: list[Resource]) -> list[tuple[str, str, str]]:
    """(rule, URN or name, message) of every violation in ``resources``, all rules applied."""
    found: list[tuple[str, str, str]] = []
    for resource in resources:
        for rule in RESOURCE_RULES:
            found.extend(
                (rule.name, resource.urn or resource.name, m)
                for m in rule.check(resource.type, resource.props)
            )
    for stack_rule in STACK_RULES:
        found.extend((stack_rule.name, urn, m) for urn, m in stack_rule.check(resources))
    return found
