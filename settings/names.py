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
  (IANA special-purpose registry, RFC 6890, as Python's ``ipaddress`` classifies it);
- Kubernetes label values (the stack name labels every object): at most 63 characters of
  ``[-A-Za-z0-9_.]``, beginning and ending with a letter or digit (k8s.io/apimachinery v0.34.12
  ``pkg/util/validation/validation.go``: ``IsValidLabelValue``, ``LabelValueMaxLength``);
- S3 general purpose bucket names (an ``s3://`` model repository): the "Bucket naming rules"
  page of the Amazon S3 user guide;
- the partition: this program renders the standard ``aws`` partition's names only, so a region of
  another partition is refused (see ``partition_problem``).
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
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", re.ASCII)
LABEL_VALUE_MAX = 63
S3_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", re.ASCII)
S3_BUCKET_NAME_LENGTH = (3, 63)
S3_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
S3_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3")
# The one partition whose names (ARNs, service endpoint names, managed policy ARNs) the program renders.
SUPPORTED_PARTITION = "aws"


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


def label_value_problem(value: str) -> str | None:
    """Why the Kubernetes API server would refuse ``value`` as a label value, or None."""
    if len(value) > LABEL_VALUE_MAX:
        return f"is {len(value)} characters; a Kubernetes label value holds at most {LABEL_VALUE_MAX}"
    if not LABEL_VALUE.fullmatch(value):
        return (
            "is not a valid Kubernetes label value (letters, digits, '-', '_' and '.', beginning "
            "and ending with a letter or digit)"
        )
    return None


def stack_name_problems(stack: str, karpenter: bool) -> list[str]:
    """Problems of the names derived from the stack name: the EKS cluster and queue names, and
    the ``deepseek-eks/stack`` label every Kubernetes object carries (components/labels.py)."""
    out = derived_name_problems(stack_cluster_name(stack), karpenter)
    if why := label_value_problem(stack):
        out.append(f"the stack name, as the label every Kubernetes object carries, {why}")
    return out


def bucket_name_problem(bucket: str) -> str | None:
    """Why S3 would refuse ``bucket`` as a general purpose bucket name, or None."""
    low, high = S3_BUCKET_NAME_LENGTH
    if not low <= len(bucket) <= high:
        return f"is {len(bucket)} characters; S3 bucket names have {low} to {high}"
    if not S3_BUCKET_NAME.fullmatch(bucket):
        return (
            "may hold only lowercase letters, digits, '.' and '-', beginning and ending with a "
            "letter or digit"
        )
    if ".." in bucket:
        return "may not contain two adjacent periods"
    if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", bucket):
        return "may not be formatted as an IP address"
    if bucket.startswith(S3_BUCKET_RESERVED_PREFIXES):
        return f"may not start with a reserved prefix ({', '.join(S3_BUCKET_RESERVED_PREFIXES)})"
    if bucket.endswith(S3_BUCKET_RESERVED_SUFFIXES):
        return f"may not end with a reserved suffix ({', '.join(S3_BUCKET_RESERVED_SUFFIXES)})"
    return None


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
def partition_of_region() -> dict[str, str]:
    """Every region botocore's endpoint data lists for EKS, with its partition, as snapshotted in
    the package (``sizing/data/eks_regions.json``; botocore is only a command-line dependency)."""
    from importlib import resources

    data = json.loads(resources.files("deepseek_eks.sizing").joinpath("data/eks_regions.json").read_text())
    return {region: part for part, regions in data["regions_by_partition"].items() for region in regions}


def region_problem(region: str) -> str | None:
    """Why ``region`` is not an AWS region with EKS that this program can deploy to, or None."""
    partition = partition_of_region().get(region)
    if partition is None:
        return "is not an AWS region where EKS is offered (botocore's endpoint data lists none by that name)"
    if partition != SUPPORTED_PARTITION:
        # Refused rather than rendered wrong: other partitions name things differently, e.g. the
        # S3 gateway endpoint service is cn.com.amazonaws.<region>.s3 in aws-cn (aws/aws-cdk#16139,
        # "fix vpc endpoint incorrect issue in China region") and every ARN starts
        # arn:<partition>:, while components/platform/network.py and cluster.py render aws names.
        return (
            f"is in the {partition} partition; this program renders the standard aws partition's "
            "names only (ARNs such as arn:aws:eks::aws:cluster-access-policy/..., the S3 gateway "
            "endpoint service com.amazonaws.<region>.s3), which do not exist there: deploy to a "
            "region of the aws partition, such as us-east-1"
        )
    return None


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
