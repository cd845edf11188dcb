"""The nodes GPUs run on: node classes and launch templates require IMDSv2 with a hop limit of 1, and
GPU NodePools cap their GPUs and neither expire nor consolidate nodes under serving replicas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import KARPENTER_NODECLASS_GROUP, Props, as_list, get_in, is_kind, object_name, platform_fact

GPU_RESOURCE = "nvidia.com/gpu"
AUTO_MODE_NODECLASS_GROUP = "eks.amazonaws.com"


def _imds(options: Any, where: str) -> list[str]:
    tokens = get_in(options, "httpTokens")
    hops = get_in(options, "httpPutResponseHopLimit")
    problems = []
    if tokens != "required":
        problems.append(f"{where}.httpTokens is {tokens!r}: set 'required' (IMDSv2 only)")
    if hops is None or float(hops) != 1:
        problems.append(
            f"{where}.httpPutResponseHopLimit is {hops!r}: set 1 so pods cannot reach node credentials"
        )
    return problems


def imdsv2_hop_limit_one(token: str, props: Props) -> list[str]:
    if is_kind(token, KARPENTER_NODECLASS_GROUP, "EC2NodeClass"):
        return _imds(get_in(props, "spec", "metadataOptions"), "spec.metadataOptions")
    if token == "aws:ec2/launchTemplate:LaunchTemplate":
        return _imds(props.get("metadataOptions"), "metadataOptions")
    if token == "aws:eks/nodeGroup:NodeGroup" and not props.get("launchTemplate"):
        return [
            "a managed node group without launchTemplate leaves IMDS at EKS's defaults: give it a "
            "launch template with metadataOptions httpTokens 'required' and hop limit 1"
        ]
    return []


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
    key = str(get_in(requirement, "key") or "")
    operator = str(get_in(requirement, "operator") or "")
    values = [str(v) for v in as_list(get_in(requirement, "values"))]
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
    spec = get_in(props, "spec", "template", "spec") or {}
    taints = [str(get_in(t, "key") or "") for t in as_list(spec.get("taints"))]
    return (
        any(_selects_gpus(r) for r in as_list(spec.get("requirements")))
        or GPU_RESOURCE in taints
        or GPU_RESOURCE in (get_in(props, "spec", "limits") or {})
    )


def _consolidation_blocked(disruption: Mapping[str, Any]) -> bool:
    if disruption.get("consolidationPolicy") == "WhenEmpty":
        return True
    for budget in as_list(disruption.get("budgets")):
        reasons = as_list(get_in(budget, "reasons"))
        if (
            str(get_in(budget, "nodes")) == "0"
            and not get_in(budget, "schedule")
            and (not reasons or "Underutilized" in reasons)
        ):
            return True
    return False


def gpu_nodepool_guarded(token: str, props: Props) -> list[str]:
    if not is_kind(token, "karpenter.sh", "NodePool") or not is_gpu_nodepool(props):
        return []
    name = object_name(props)
    problems = []
    if GPU_RESOURCE not in (get_in(props, "spec", "limits") or {}):
        problems.append(f"GPU NodePool {name} has no spec.limits[{GPU_RESOURCE!r}]: cap the GPUs it may buy")
    expire = get_in(props, "spec", "template", "spec", "expireAfter")
    group = get_in(props, "spec", "template", "spec", "nodeClassRef", "group")
    # Expiry is forceful: neither budgets nor karpenter.sh/do-not-disrupt hold it back
    # (platform-facts karpenter.expiration), so a serving replica would be evicted mid-stream.
    # EKS Auto Mode caps node lifetime (platform-facts eks.auto_mode_max_node_lifetime): there
    # the cap itself is the longest allowed.
    allowed = {str(platform_fact("karpenter", "expiration", "never"))}
    if group == AUTO_MODE_NODECLASS_GROUP:
        allowed.add(str(platform_fact("eks", "auto_mode_max_node_lifetime", "value")))
    if str(expire) not in allowed:
        problems.append(
            f"GPU NodePool {name} expires its nodes (spec.template.spec.expireAfter {expire!r}) under "
            f"serving replicas: set {' or '.join(sorted(allowed))}"
        )
    if not _consolidation_blocked(get_in(props, "spec", "disruption") or {}):
        problems.append(
            f"GPU NodePool {name} may consolidate nodes that run serving replicas: set "
            "spec.disruption.consolidationPolicy WhenEmpty (or a nodes: '0' budget for Underutilized)"
        )
    return problems
