"""Input that AWS, EKS or Hugging Face would reject minutes into ``pulumi up``, refused offline.

The rules (snapshotted in ``reference/upstream/name-rules.json`` with their sources; the tests
check these functions against that file):
- EKS cluster names: 1-100 characters, ``^[0-9A-Za-z][A-Za-z0-9\\-_]*`` (botocore 1.44.8
  ``eks/2017-11-01/service-2.json`` shape ``ClusterName``);
- SQS queue names: at most 80 alphanumerics, hyphens and underscores (``sqs`` CreateQueue);
- Hugging Face repo ids: ``huggingface_hub`` 0.36.0 ``validate_repo_id``;
- AWS regions: the ones botocore's endpoint data lists for EKS, in any partition (snapshotted in
  ``sizing/data/eks_regions.json``);
- a VPC's range must be routable: not loopback, link-local, multicast, reserved or unspecified
  (IANA special-purpose registry, RFC 6890, as Python's ``ipaddress`` classifies it).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re

EKS_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9\-_]*")
EKS_CLUSTER_NAME_MAX = 100
SQS_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]+")
SQS_QUEUE_NAME_MAX = 80
# The suffix Karpenter's interruption queue gets after the cluster name (components/platform/karpenter.py).
KARPENTER_QUEUE_SUFFIX = "-karpenter"
HF_REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$", re.ASCII)


def stack_cluster_name(stack: str) -> str:
    """The EKS cluster name of the stack program: ``deepseek-<stack>``."""
    return f"deepseek-{stack}"


def _name_problem(
    name: str, pattern: re.Pattern[str], maximum: int, service: str, allowed: str
) -> str | None:
    if len(name) > maximum:
        return f"is {len(name)} characters; {service} allows at most {maximum}"
    return None if pattern.fullmatch(name) else f"may hold only {allowed}"


def cluster_name_problem(name: str) -> str | None:
    """Why EKS would refuse ``name`` as a cluster name, or None."""
    allowed = "letters, digits, '-' and '_', starting with a letter or digit"
    return _name_problem(name, EKS_CLUSTER_NAME, EKS_CLUSTER_NAME_MAX, "EKS", allowed)


def queue_name_problem(name: str) -> str | None:
    """Why SQS would refuse ``name`` as a queue name, or None."""
    return _name_problem(name, SQS_QUEUE_NAME, SQS_QUEUE_NAME_MAX, "SQS", "letters, digits, '-' and '_'")


def derived_name_problems(cluster: str, karpenter: bool) -> list[str]:
    """Problems of the AWS names derived from the stack (or service) name."""
    out = []
    if why := cluster_name_problem(cluster):
        out.append(f"the EKS cluster name {cluster!r} {why}")
    queue = f"{cluster}{KARPENTER_QUEUE_SUFFIX}"
    if karpenter and (why := queue_name_problem(queue)):
        out.append(f"Karpenter's interruption queue name {queue!r} {why}")
    return out


def hf_repo_id_problem(repo_id: str) -> str | None:
    """Why the Hugging Face Hub would refuse ``repo_id``, or None (owner/name is required here:
    a bare name resolves to no DeepSeek checkpoint)."""
    if repo_id.count("/") != 1:
        return "must be owner/name (one '/')"
    if not HF_REPO_ID.fullmatch(repo_id):
        return "owner and name take letters, digits, '-', '_' and '.', not at either end, name at most 96"
    if "--" in repo_id or ".." in repo_id:
        return "may not contain '--' or '..'"
    if repo_id.endswith(".git"):
        return "may not end in '.git'"
    return None


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region botocore's endpoint data lists for EKS, across partitions, as snapshotted in
    the package (``sizing/data/eks_regions.json``; botocore is only a command-line dependency)."""
    from importlib import resources

    data = json.loads(resources.files("deepseek_eks.sizing").joinpath("data/eks_regions.json").read_text())
    return frozenset(region for regions in data["regions_by_partition"].values() for region in regions)


def region_problem(region: str) -> str | None:
    """Why ``region`` is not an AWS region with EKS, or None."""
    if region in known_regions():
        return None
    return "is not an AWS region where EKS is offered (botocore's endpoint data lists none by that name)"


def vpc_range_problem(cidr: str) -> str | None:
    """Why ``cidr`` cannot be a VPC's range, or None."""
    network = ipaddress.ip_network(cidr, strict=False)
    kinds = {
        "loopback": network.is_loopback,
        "link-local": network.is_link_local,
        "multicast": network.is_multicast,
        "reserved": network.is_reserved,
        "unspecified (0.0.0.0/8)": network.subnet_of(ipaddress.IPv4Network("0.0.0.0/8")),  # type: ignore[arg-type]
    }
    bad = [kind for kind, hit in kinds.items() if hit]
    if bad:
        return f"is a {bad[0]} range, not routable in a VPC: use a private range such as 10.42.0.0/16"
    return None
