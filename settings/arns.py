"""ARNs given in settings that AWS would reject for this stack's region or partition.

A key, certificate or role from another region or partition passes every format check and
fails minutes into ``pulumi up`` (or later: a bucket whose key EKS or S3 cannot use). The rules,
each from the service's documentation, are snapshotted in
``reference/upstream/settings-rules.json`` ("arn_region_rules"):
- EKS secrets encryption: the KMS key "must be symmetric and created in the same AWS Region as
  the cluster" (EKS API reference, ``Provider.keyArn``);
- ALB/NLB listeners: ACM certificates are regional; a load balancer uses one from its own
  region (ACM user guide, "Supported Regions");
- S3 default encryption (SSE-KMS): the key is in the bucket's region (S3 user guide, SSE-KMS);
- IAM is global, but a role is in one partition like everything else (``arn:<partition>:``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .names import SUPPORTED_PARTITION

# What each service's ARN names, for messages.
_THING = {"kms": "KMS key", "acm": "ACM certificate", "iam": "IAM role"}


@dataclass(frozen=True)
class Arn:
    """The fields of ``arn:partition:service:region:account:resource``."""

    partition: str
    service: str
    region: str
    account: str
    resource: str

    @classmethod
    def parse(cls, text: str) -> Arn | None:
        parts = text.split(":", 5)
        if len(parts) != 6 or parts[0] != "arn":
            return None
        return cls(*parts[1:])


def arn_problem(text: str, region: str, *, regional: bool) -> str | None:
    """Why the resource ``text`` names cannot be used by a stack in ``region``, or None.
    ``regional``: the resource must be in the stack's own region (KMS keys, ACM certificates)."""
    arn = Arn.parse(text)
    if arn is None:
        return None  # the format check of the setting itself reports it
    thing = _THING.get(arn.service, f"{arn.service} resource")
    a_thing = f"{'an' if thing[0] in 'AEIOU' else 'a'} {thing}"
    if arn.partition != SUPPORTED_PARTITION:
        return (
            f"is in the {arn.partition} partition, but the stack deploys to {region} in the "
            f"{SUPPORTED_PARTITION} partition, where that ARN names nothing: use {a_thing} of "
            f"the {SUPPORTED_PARTITION} partition (arn:{SUPPORTED_PARTITION}:...)"
        )
    if regional and arn.region != region:
        return (
            f"is in {arn.region}, but the stack deploys to {region} (aws:region), and AWS uses "
            f"{a_thing} only in its own region: create or import one in {region}, or set "
            f"aws:region to {arn.region}"
        )
    return None
