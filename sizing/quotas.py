"""EC2 vCPU quotas for GPU instances: which Service Quotas code bounds a GPU family, and how many
vCPUs a plan needs from it. Shared by ``plan`` (the quota needed at maxReplicas) and
``preflight`` (the account's value against that need)."""

from __future__ import annotations

from dataclasses import dataclass

# Service Quotas names the EC2 vCPU quotas by instance class ("G and VT" covers every g* family,
# "P" every p* family) and purchase option; keys are (capacity type, first letter of the family).
QUOTAS: dict[tuple[str, str], tuple[str, str]] = {
    ("on-demand", "g"): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("on-demand", "p"): ("L-417A185B", "Running On-Demand P instances"),
    ("spot", "g"): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("spot", "p"): ("L-7212CCBC", "All P Spot Instance Requests"),
}
QUOTA_SERVICE_CODE = "ec2"


def quota_for(capacity_type: str, family: str) -> tuple[str, str] | None:
    """(quota code, quota name) bounding ``family`` bought as ``capacity_type``; None if unknown."""
    return QUOTAS.get((str(capacity_type), family[:1]))


@dataclass(frozen=True)
class QuotaNeed:
    """The vCPUs one quota must allow for every replica at once."""

    capacity_type: str
    quota_code: str | None
    quota_name: str | None
    vcpus: int

    def to_dict(self) -> dict[str, object]:
        return {
            "capacity_type": self.capacity_type,
            "quota_code": self.quota_code,
            "quota_name": self.quota_name,
            "vcpus": self.vcpus,
        }


def quota_needs(
    family: str, node_vcpu: int, nodes_per_replica: int, replicas: int, capacity_types: tuple[str, ...]
) -> list[QuotaNeed]:
    """One row per allowed capacity type: the autoscaler may place every replica on either, so
    each quota must hold them all (node vCPUs x nodes per replica x replicas)."""
    vcpus = node_vcpu * nodes_per_replica * replicas
    rows = []
    for capacity in dict.fromkeys(capacity_types):  # settings order, no repeats
        code, name = quota_for(capacity, family) or (None, None)
        rows.append(QuotaNeed(str(capacity), code, name, vcpus))
    return rows
