"""The policy pack's rules as pure functions over (type token, inputs), so they run in unit tests
and over the offline render without the policy server; ``policy/__main__.py`` wraps them for
``pulumi preview --policy-pack policy``.

A resource rule answers the violations of one resource; a stack rule sees every resource (type,
inputs, URN and which resources fed each input) and answers (URN, message) pairs. Messages name the
offending field and the fix. Standard library only: the pack must import wherever pulumi-policy
does.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

Props = Mapping[str, Any]

PLATFORM_FACTS = Path(__file__).resolve().parent.parent / "reference" / "upstream" / "platform-facts.json"


def _load_cidrs() -> ModuleType:
    """settings/cidrs.py, the one definition of a world-open CIDR set, loaded by its path: importing
    it as ``settings.cidrs`` would run settings/__init__.py, which pulls in the sizing engine and,
    through the ``deepseek_eks`` package, Pulumi; the pack must import no Pulumi code but
    pulumi_policy. The file sits beside this package both in a checkout (``settings/``) and in the
    wheel (``deepseek_eks/settings/``)."""
    path = Path(__file__).resolve().parent.parent / "settings" / "cidrs.py"
    spec = importlib.util.spec_from_file_location("_deepseek_eks_policy_cidrs", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with the pack
        raise ImportError(f"the policy pack needs {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CIDRS = _load_cidrs()

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
INTERNET_FACING = "internet-facing"

# Allow statements may use "Resource": "*" only where components/iam_policies.py documents it:
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
ADMIN_MANAGED_POLICIES = ("/AdministratorAccess", "/PowerUserAccess", "/IAMFullAccess")

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
    """Why ``cidrs`` admit the whole internet, or None. Open means their union covers half an
    address family or more (settings/cidrs.py), so ``0.0.0.0/1`` plus ``128.0.0.0/1`` is as open as
    ``0.0.0.0/0``; a string that is no CIDR is named too, since it cannot be judged."""
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
    why = exposed_endpoint(token, props)
    if why is None:
        return []
    if _is(token, "networking.k8s.io", "Ingress"):
        setting, raw = INGRESS_INBOUND_CIDRS, _annotations(props).get(INGRESS_INBOUND_CIDRS)
        cidrs = [c for c in str(raw or "").split(",") if c.strip()]
    else:
        setting, cidrs = (
            "spec.loadBalancerSourceRanges",
            _list(_get(props, "spec", "loadBalancerSourceRanges")),
        )
    if not cidrs:
        return [f"{why} without allowed CIDRs: set {setting} to the client CIDRs (endpoint.allowedCidrs)"]
    if world := open_to_world(cidrs):
        return [f"{why} and {setting} admits the whole internet ({world})"]
    return []


def cluster_endpoint_private_or_limited(token: str, props: Props) -> list[str]:
    if token == "eks:index:Cluster":
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


def unpinned_image(image: str) -> str | None:
    """Why an image reference is not pinned, or None (a digest or a tag other than latest)."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag"
    if last.rsplit(":", 1)[1].lower() == "latest":
        return "uses the mutable tag latest"
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
            if key == "tag" and isinstance(value, str) and value.lower() == "latest":
                problems.append(f"values.{path} is 'latest': pin the image tag")
    return problems


# --- 4. GPU NodePools ---------------------------------------------------------------------------


def _platform_fact(*path: str) -> Any:
    return _get(json.loads(PLATFORM_FACTS.read_text()), *path)


def is_gpu_nodepool(props: Props) -> bool:
    spec = _get(props, "spec", "template", "spec") or {}
    requirements = [str(_get(r, "key") or "") for r in _list(spec.get("requirements"))]
    taints = [str(_get(t, "key") or "") for t in _list(spec.get("taints"))]
    return (
        any("instance-gpu" in key for key in requirements)
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


def _denies_insecure_transport(policy: Mapping[str, Any]) -> bool:
    for statement in _list(policy.get("Statement")):
        condition = _get(statement, "Condition", "Bool") or {}
        if (
            _get(statement, "Effect") == "Deny"
            and str(condition.get("aws:SecureTransport")).lower() == "false"
        ):
            return True
    return False


def _feeds(resource: Resource, bucket: Resource) -> bool:
    """``resource`` names ``bucket`` in its ``bucket`` input (by dependency, or by the bucket's name)."""
    if bucket.urn and bucket.urn in resource.property_dependencies.get("bucket", ()):
        return True
    name = bucket.props.get("bucket")
    return bool(name) and resource.props.get("bucket") == name


def buckets_encrypted_tls_only(resources: list[Resource]) -> list[tuple[str, str]]:
    problems = []
    for bucket in (r for r in resources if r.type == "aws:s3/bucket:Bucket"):
        related = [r for r in resources if r is not bucket and _feeds(r, bucket)]
        encrypted = bool(bucket.props.get("serverSideEncryptionConfiguration")) or any(
            r.type.endswith(":BucketServerSideEncryptionConfiguration") for r in related
        )
        tls_only = any(
            r.type == "aws:s3/bucketPolicy:BucketPolicy"
            and (doc := _document(r.props.get("policy"))) is not None
            and _denies_insecure_transport(doc)
            for r in related
        )
        label = bucket.name or bucket.urn
        if not encrypted:
            problems.append((bucket.urn, f"bucket {label} has no server-side encryption configuration"))
        if not tls_only:
            problems.append(
                (
                    bucket.urn,
                    f"bucket {label} has no policy denying requests without TLS (aws:SecureTransport false)",
                )
            )
    return problems


# --- 6. IAM ------------------------------------------------------------------------------------


def _star_resource_allowed(actions: list[str]) -> bool:
    return all(a in STAR_RESOURCE_EXCEPTIONS or a.split(":", 1)[-1].startswith(READ_VERBS) for a in actions)


def wildcard_problems(document: Mapping[str, Any]) -> list[str]:
    """Wildcard actions, and ``Resource: "*"`` outside the documented exceptions, in Allow statements
    (a Deny with a wildcard only narrows access)."""
    problems = []
    for index, statement in enumerate(_list(document.get("Statement"))):
        if _get(statement, "Effect") != "Allow":
            continue
        label = _get(statement, "Sid") or f"#{index}"
        if "NotAction" in statement or "NotResource" in statement:
            problems.append(f"statement {label}: NotAction/NotResource in an Allow grants everything else")
        actions = [str(a) for a in _list(_get(statement, "Action"))]
        if wild := [a for a in actions if "*" in a]:
            problems.append(f"statement {label}: wildcard action(s) {', '.join(wild)}")
        if "*" in _list(_get(statement, "Resource")) and not _star_resource_allowed(actions):
            others = [a for a in actions if not _star_resource_allowed([a])]
            problems.append(
                f'statement {label}: "Resource": "*" for {", ".join(others)} (not a documented exception)'
            )
    return problems


def no_wildcard_iam(token: str, props: Props) -> list[str]:
    documents: list[tuple[str, Any]] = []
    if token in POLICY_DOCUMENT_INPUTS:
        documents.append((POLICY_DOCUMENT_INPUTS[token], props.get(POLICY_DOCUMENT_INPUTS[token])))
    if token == "aws:iam/role:Role":
        for index, inline in enumerate(_list(props.get("inlinePolicies"))):
            documents.append((f"inlinePolicies[{index}].policy", _get(inline, "policy")))
    if token == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
        arn = str(props.get("policyArn") or "")
        if arn.endswith(ADMIN_MANAGED_POLICIES):
            return [f"policyArn {arn} grants wildcard access: attach a least-privilege policy"]
    problems: list[str] = []
    for where, raw in documents:
        document = _document(raw)
        if document is not None:
            problems.extend(f"{where}: {p}" for p in wildcard_problems(document))
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


def _serves_vllm(container: Mapping[str, Any]) -> bool:
    image = str(container.get("image") or "").rsplit("/", 1)[-1]
    words = [str(a) for a in [*_list(container.get("command")), *_list(container.get("args"))]]
    return image.startswith("vllm") or (any(w.endswith("vllm") for w in words) and "serve" in words)


def _requires_key(container: Mapping[str, Any]) -> bool:
    for env in _list(container.get("env")):
        if _get(env, "name") == "VLLM_API_KEY" and _get(env, "valueFrom", "secretKeyRef"):
            return True
    return False


def api_key_when_exposed(resources: list[Resource]) -> list[tuple[str, str]]:
    """When an endpoint leaves the private network (internet-facing load balancer), every vLLM
    server must require the API key, read from a Secret (vLLM's VLLM_API_KEY, see
    reference/upstream/vllm-0.33.0/FACTS.md)."""
    exposures = [why for r in resources if (why := exposed_endpoint(r.type, r.props))]
    if not exposures:
        return []
    problems = []
    for resource in resources:
        for path, container in containers(resource.props):
            if _serves_vllm(container) and not _requires_key(container):
                problems.append(
                    (
                        resource.urn,
                        f"{exposures[0]} but vLLM in {_obj_name(resource.props)} ({path}) takes requests "
                        "without an API key: set the apiKey secret (VLLM_API_KEY from a Secret)",
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
