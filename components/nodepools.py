"""Node pool and node class manifests, built from the sizing plan (pure: no resources created).

Both capacity modes speak Karpenter's ``karpenter.sh/v1`` NodePool; they differ in the node
class they point at and in the prefix of the well-known instance labels:
``eks.amazonaws.com/instance-*`` under EKS Auto Mode, ``karpenter.k8s.aws/instance-*`` under
self-managed Karpenter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from settings import ComputeMode
from sizing import SizingPlan, instance_catalog

from .versions import AL2023_AMI_ALIAS

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NODE_ROLE_LABEL = "deepseek-eks/node-role"

# EKS Auto Mode's built-in NodeClass gives each node an 80 GiB data volume (NodeClass schema
# default); a plan that needs more disk gets its own NodeClass.
AUTO_MODE_DEFAULT_EPHEMERAL_GIB = 80
# Root volume beyond the plan's ephemeral storage: OS, kubelet and logs.
ROOT_VOLUME_OS_GIB = 20


def label_prefix(mode: ComputeMode) -> str:
    """Prefix of the instance labels the capacity provider of ``mode`` sets on nodes."""
    return "eks.amazonaws.com" if mode is ComputeMode.AUTO_MODE else "karpenter.k8s.aws"


def gpu_limit(plan: SizingPlan, max_replicas: int) -> int:
    """GPUs the pool may hold at once: every replica at the autoscaler's maximum."""
    return max_replicas * plan.gpus_per_replica


def gpu_requirements(
    plan: SizingPlan, mode: ComputeMode, capacity_types: Sequence[str]
) -> list[dict[str, Any]]:
    """NodePool requirements that admit exactly the plan's instance types.

    The instance-type list alone is the contract; family, GPU count and GPU memory floor repeat
    it in the provider's own labels so a type list edited by hand still cannot admit a GPU
    smaller than the plan needs.
    """
    catalog = instance_catalog().instances
    types = plan.instance_types
    families = sorted({catalog[t].family for t in types})
    min_gpu_mib = min(catalog[t].gpu_memory_mib for t in types)
    prefix = label_prefix(mode)
    return [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(types)},
        {"key": f"{prefix}/instance-family", "operator": "In", "values": families},
        {"key": f"{prefix}/instance-gpu-count", "operator": "In", "values": [str(plan.tensor_parallel_size)]},
        {"key": f"{prefix}/instance-gpu-memory", "operator": "Gt", "values": [str(min_gpu_mib - 1)]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]


@dataclass(frozen=True)
class NodeClassRef:
    group: str
    kind: str
    name: str

    def as_dict(self) -> dict[str, str]:
        return {"group": self.group, "kind": self.kind, "name": self.name}


def gpu_node_pool(
    *,
    name: str,
    plan: SizingPlan,
    mode: ComputeMode,
    capacity_types: Sequence[str],
    max_replicas: int,
    node_class: NodeClassRef,
    labels: dict[str, str],
) -> dict[str, Any]:
    """The GPU NodePool for vLLM replicas."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "template": {
                "metadata": {"labels": {NODE_ROLE_LABEL: "gpu-inference"}},
                "spec": {
                    "nodeClassRef": node_class.as_dict(),
                    "requirements": gpu_requirements(plan, mode, capacity_types),
                    "taints": [GPU_TAINT],
                    # Nodes are replaced monthly for patches; a drained node waits up to 2h
                    # for in-flight reasoning streams (the pods' own grace period) to finish.
                    "expireAfter": "720h",
                    "terminationGracePeriod": "2h",
                },
            },
            "limits": {"nvidia.com/gpu": str(gpu_limit(plan, max_replicas))},
            "disruption": {
                # Only empty GPU nodes are consolidated: a node serving a replica is never
                # chosen to save money mid-stream. One node at a time for drift and expiry.
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "10m",
                "budgets": [{"nodes": "1"}],
            },
        },
    }


def general_node_pool(*, name: str, node_class: NodeClassRef, labels: dict[str, str]) -> dict[str, Any]:
    """A small CPU pool for Prometheus, Grafana and other non-GPU workloads (Karpenter mode;
    Auto Mode has its built-in general-purpose pool)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "template": {
                "metadata": {"labels": {NODE_ROLE_LABEL: "general"}},
                "spec": {
                    "nodeClassRef": node_class.as_dict(),
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-category",
                            "operator": "In",
                            "values": ["c", "m", "r"],
                        },
                        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["33"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["spot", "on-demand"],
                        },
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "expireAfter": "720h",
                },
            },
            "limits": {"cpu": "64", "memory": "256Gi"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
        },
    }


def ec2_node_class(
    *,
    name: str,
    role: Any,
    cluster_name: str,
    subnet_ids: Any,
    disk_gib: int,
    tags: dict[str, str],
) -> dict[str, Any]:
    """Karpenter EC2NodeClass: pinned AL2023 AMI release, IMDSv2 only with hop limit 1 (pods
    cannot borrow the node's role), an encrypted gp3 root volume sized for image and weights."""
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": role,
            "amiSelectorTerms": [{"alias": AL2023_AMI_ALIAS}],
            "subnetSelectorTerms": subnet_selector(subnet_ids),
            # The EKS-managed cluster security group: control plane, system and GPU nodes share it.
            "securityGroupSelectorTerms": [{"tags": {"aws:eks:cluster-name": cluster_name}}],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {
                        "volumeSize": f"{disk_gib}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "associatePublicIPAddress": False,
            "tags": tags,
        },
    }


def auto_mode_node_class(
    *, name: str, role: Any, cluster_name: str, subnet_ids: Any, disk_gib: int, tags: dict[str, str]
) -> dict[str, Any]:
    """Auto Mode NodeClass, only needed when the plan's disk exceeds the built-in 80 GiB."""
    return {
        "apiVersion": "eks.amazonaws.com/v1",
        "kind": "NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": role,
            "subnetSelectorTerms": subnet_selector(subnet_ids),
            "securityGroupSelectorTerms": [{"tags": {"aws:eks:cluster-name": cluster_name}}],
            "ephemeralStorage": {"size": f"{disk_gib}Gi", "iops": 3000, "throughput": 125},
            "tags": tags,
        },
    }


def subnet_selector(subnet_ids: Any) -> Any:
    """Select the private subnets by id (works for the VPC we create and for yours alike)."""
    if isinstance(subnet_ids, list):
        return [{"id": s} for s in subnet_ids]
    return subnet_ids.apply(lambda ids: [{"id": s} for s in ids])


def node_disk_gib(plan: SizingPlan) -> int:
    return plan.ephemeral_storage_gib + ROOT_VOLUME_OS_GIB


def needs_auto_mode_node_class(plan: SizingPlan) -> bool:
    return plan.ephemeral_storage_gib > AUTO_MODE_DEFAULT_EPHEMERAL_GIB
