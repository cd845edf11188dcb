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

from deepseek_eks.settings import ComputeMode
from deepseek_eks.sizing import SizingPlan, instance_catalog

from ..versions import AL2023_AMI_ALIAS

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NODE_ROLE_LABEL = "deepseek-eks/node-role"
GPU_NODE_ROLE = "gpu-inference"
"""Value of NODE_ROLE_LABEL on every GPU node, whichever GPU pool launched it."""
GPU_NODE_POOL = "gpu-inference"
"""The GPU pool every plan has (spot and/or on-demand, as the settings allow)."""
GPU_FLOOR_NODE_POOL = "gpu-inference-floor"
"""The on-demand pool for the minimum replicas, rendered when spot is allowed too."""
# Karpenter tries NodePools in descending weight (1-100; none counts as 0) and skips a pool whose
# limits are reached (Karpenter v1.14 docs, concepts/scheduling.md "Weighted NodePools").
FLOOR_POOL_WEIGHT = 100

# Annotations for serving pods: Karpenter never consolidates or drifts a node voluntarily while
# such a pod runs on it (v1.14 docs, concepts/disruption.md "Pod-Level Controls"), *unless* the
# node's NodePool sets terminationGracePeriod: then drift may take the node anyway and the pod is
# deleted before the period ends, PDB or not ("Controls / TerminationGracePeriod"; see
# GPU_TERMINATION_GRACE_PERIOD). Expiry and interruption apply regardless (hence expireAfter Never
# on Karpenter's GPU pools). components/serving/vllm.py puts these on the vLLM pod template.
# Facts: reference/upstream/platform-facts.json karpenter.termination_grace_period.
SERVING_POD_ANNOTATIONS = {"karpenter.sh/do-not-disrupt": "true"}

# Replicas a rollout adds before it takes an old one away (components/serving/vllm.py rolling_update): the
# GPU limits leave room for them, or a rollout at maxReplicas would wait for GPUs forever.
ROLLOUT_MAX_SURGE = 1

# terminationGracePeriod of the GPU NodePools. Karpenter mode: none, so a node serving a replica
# (do-not-disrupt) is never drifted; it moves to the new AMI when the replica does (a rollout
# surges a new one on a new node, then the old node is empty and consolidated) or when it scales
# in. EKS Auto Mode expires every node within 21 days whatever the pool says, and a drain blocked
# by do-not-disrupt would keep an expired node forever; a bounded period there is the lesser evil,
# at the price that drift, too, may then delete a serving pod (after the pod's own grace period).
GPU_TERMINATION_GRACE_PERIOD: dict[ComputeMode, str | None] = {
    ComputeMode.KARPENTER: None,
    ComputeMode.AUTO_MODE: "2h",
}

# Karpenter mode: GPU nodes never expire (expiry is forceful, see gpu_node_pool). EKS Auto Mode
# replaces every node after at most 21 days whatever the NodePool says (EKS User Guide, "Automate
# cluster infrastructure with EKS Auto Mode": maximum node lifetime 21 days, which you can reduce),
# so its GPU pools state that maximum rather than a value Auto Mode would not honour.
GPU_EXPIRE_AFTER = {ComputeMode.KARPENTER: "Never", ComputeMode.AUTO_MODE: "504h"}

# Karpenter's capacity type for EC2 capacity reservations and Capacity Blocks (reservedCapacity
# feature gate, on by default in the 1.14 chart).
RESERVED_CAPACITY_TYPE = "reserved"

# EKS Auto Mode's built-in NodeClass gives each node an 80 GiB data volume (NodeClass schema
# default); a plan that needs more disk gets its own NodeClass.
AUTO_MODE_DEFAULT_EPHEMERAL_GIB = 80
# Root volume beyond the plan's ephemeral storage: OS, kubelet and logs.
ROOT_VOLUME_OS_GIB = 20


def label_prefix(mode: ComputeMode) -> str:
    """Prefix of the instance labels the capacity provider of ``mode`` sets on nodes."""
    return "eks.amazonaws.com" if mode is ComputeMode.AUTO_MODE else "karpenter.k8s.aws"


def any_gpu_node_selector(mode: ComputeMode) -> dict[str, str]:
    """Every NVIDIA GPU node the capacity provider of ``mode`` launches, whichever NodePool (and
    so whichever service) asked for it: for the cluster-wide GPU DaemonSets (dcgm-exporter, the
    device plugin). ``instance-gpu-manufacturer`` is one of Karpenter's well-known instance labels
    (karpenter.sh_v1_NodePool CRD v1.14: the allowed keys of the restricted karpenter.k8s.aws
    domain); EKS Auto Mode sets the same label under eks.amazonaws.com (EKS User Guide, "Create a
    Node Pool for EKS Auto Mode", supported labels)."""
    return {f"{label_prefix(mode)}/instance-gpu-manufacturer": "nvidia"}


def gpu_limit(plan: SizingPlan, max_replicas: int) -> int:
    """GPUs the pool may hold at once: the nodes of every replica at the autoscaler's maximum,
    plus the replica a rollout surges (ROLLOUT_MAX_SURGE). Karpenter counts whole nodes' GPUs, so
    packed replicas (several per node) count their nodes, not their own GPUs."""
    fit = plan.chosen
    return fit.nodes_for(max_replicas + ROLLOUT_MAX_SURGE) * fit.instance.gpu_count


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
    gpu_counts = sorted({str(catalog[t].gpu_count) for t in types}, key=int)
    prefix = label_prefix(mode)
    return [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(types)},
        {"key": f"{prefix}/instance-family", "operator": "In", "values": families},
        # The node's GPUs: the replica's own, or several replicas' when they are packed onto it.
        {"key": f"{prefix}/instance-gpu-count", "operator": "In", "values": gpu_counts},
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


@dataclass(frozen=True)
class GpuPoolSpec:
    """One GPU NodePool: which capacity it may buy and how much of it."""

    name: str
    """NodePool name."""
    capacity_types: tuple[str, ...]
    """Values of karpenter.sh/capacity-type the pool admits."""
    gpus: int
    """The pool's nvidia.com/gpu limit."""
    weight: int | None = None
    """Karpenter tries higher weights first; None is the lowest (0)."""


def has_on_demand_floor(capacity_types: Sequence[str], min_replicas: int) -> bool:
    """Whether the minimum replicas get an on-demand pool of their own (spot allowed beside it)."""
    return "spot" in capacity_types and "on-demand" in capacity_types and min_replicas > 0


def gpu_pool_specs(
    plan: SizingPlan,
    capacity_types: Sequence[str],
    *,
    min_replicas: int,
    max_replicas: int,
    reserved: bool = False,
) -> list[GpuPoolSpec]:
    """The GPU pools of a plan.

    With spot allowed next to on-demand, Karpenter picks the cheapest offering and so launches
    the floor replicas on spot too, where one interruption takes a one-replica service down for
    a whole cold start. Then a second pool, weighted above the first, admits on-demand only and
    holds ``min_replicas`` replicas' GPUs plus a rollout's surge; Karpenter fills it first and falls back to
    the spot-and-on-demand pool once its limit is reached (or on-demand is short). The main pool
    keeps the full ``max_replicas`` limit so spot can still take every replica if on-demand
    runs out. ``reserved`` adds Karpenter's ``reserved`` capacity type (capacity reservations
    selected by the node class) to every pool that admits on-demand: reservations are used first.
    """

    def with_reserved(types: Sequence[str]) -> tuple[str, ...]:
        extra = (RESERVED_CAPACITY_TYPE,) if reserved and "on-demand" in types else ()
        return (*extra, *types)

    main = GpuPoolSpec(GPU_NODE_POOL, with_reserved(capacity_types), gpu_limit(plan, max_replicas))
    if not has_on_demand_floor(capacity_types, min_replicas):
        return [main]
    floor = GpuPoolSpec(
        GPU_FLOOR_NODE_POOL,
        with_reserved(["on-demand"]),
        gpu_limit(plan, min_replicas),
        weight=FLOOR_POOL_WEIGHT,
    )
    return [floor, main]


def gpu_node_pool(
    *,
    spec: GpuPoolSpec,
    plan: SizingPlan,
    mode: ComputeMode,
    node_class: NodeClassRef,
    labels: dict[str, str],
) -> dict[str, Any]:
    """A GPU NodePool for vLLM replicas.

    What each mechanism guarantees (Karpenter v1.14 docs, concepts/disruption.md):

    - Expiry is forceful (no budgets, PDBs or do-not-disrupt, no replacement first), so
      ``expireAfter`` is ``Never`` in Karpenter mode; Auto Mode expires nodes within 21 days
      regardless (GPU_EXPIRE_AFTER): a one-replica service then restarts cold.
    - Drift and consolidation are graceful and skip a node running a do-not-disrupt pod, unless
      the pool sets ``terminationGracePeriod`` (GPU_TERMINATION_GRACE_PERIOD: Auto Mode only).
      Only empty GPU nodes are consolidated, one node at a time.
    - Neither surges a *replica*: Karpenter pre-spins a node, but the pod starts there only after
      the old one is evicted. Only a rollout (maxSurge 1, maxUnavailable 0) starts the new replica
      first.
    - Spot interruption gives two minutes' notice: not enough for a cold start.
    """
    pool_spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {NODE_ROLE_LABEL: GPU_NODE_ROLE}},
            "spec": {
                "nodeClassRef": node_class.as_dict(),
                "requirements": gpu_requirements(plan, mode, spec.capacity_types),
                "taints": [GPU_TAINT],
                "expireAfter": GPU_EXPIRE_AFTER[mode],
            },
        },
        "limits": {"nvidia.com/gpu": str(spec.gpus)},
        "disruption": {
            # Only empty GPU nodes are consolidated: a node serving a replica is never chosen
            # to save money mid-stream (the pods' do-not-disrupt annotation says the same).
            # One node at a time for drift.
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "10m",
            "budgets": [{"nodes": "1"}],
        },
    }
    grace = GPU_TERMINATION_GRACE_PERIOD[mode]
    if grace:
        pool_spec["template"]["spec"]["terminationGracePeriod"] = grace
    if spec.weight is not None:
        pool_spec["weight"] = spec.weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": pool_spec,
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


# Tags that change with the model: spec.tags is part of the EC2NodeClass's static hash, so any
# change there drifts every node Karpenter launched from it (reference/upstream/platform-facts.json
# karpenter.ec2nodeclass_tags_drift). A variant change must not roll the fleet (the old pods keep
# serving until the new ones are ready), so the nodes do not carry it; the stack tag still does.
MODEL_TAGS = ("variant",)


def node_tags(tags: dict[str, str]) -> dict[str, str]:
    """The tags a node class gives its instances: the stack's, less those that change with the model."""
    return {k: v for k, v in tags.items() if k not in MODEL_TAGS}


# SOCI parallel pull/unpack on Karpenter's GPU nodes: nodeadm's FastImagePull feature gate (off by
# default; awslabs/amazon-eks-ami nodeadm/internal/api, and nodeadm/internal/containerd/config.go
# UseSOCISnapshotter: on nodes of at least 4 vCPUs and 7 GiB) makes containerd pull through the SOCI
# snapshotter in parallel mode, which the AL2023 images ship from v20250821 (the pinned release is
# later; aws-samples/karpenter-blueprints blueprints/soci-snapshotter at 48a21049, whose AL2023
# EC2NodeClass passes this NodeConfig as a MIME part of spec.userData, which Karpenter merges with its
# own). Facts: reference/upstream/cold-start-facts.json karpenter_soci.
SOCI_NODE_CONFIG = "\n".join(
    [
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="//"',
        "",
        "--//",
        "Content-Type: application/node.eks.aws",
        "",
        "apiVersion: node.eks.aws/v1alpha1",
        "kind: NodeConfig",
        "spec:",
        "  featureGates:",
        "    FastImagePull: true",
        "",
        "--//--",
        "",
    ]
)


def ec2_node_class(
    *,
    name: str,
    role: Any,
    cluster_name: str,
    subnet_ids: Any,
    disk_gib: int,
    tags: dict[str, str],
    instance_store_raid0: bool = False,
    capacity_reservation_ids: Sequence[str] = (),
    security_group_ids: Sequence[Any] = (),
    fast_image_pull: bool = False,
) -> dict[str, Any]:
    """Karpenter EC2NodeClass: pinned AL2023 AMI release, IMDSv2 only with hop limit 1 (pods
    cannot borrow the node's role), an encrypted gp3 root volume.

    ``instance_store_raid0``: the instance's local NVMe disks become one RAID0 that kubelet and
    containerd use for images and ephemeral storage, and Karpenter counts it as the node's
    ephemeral-storage (v1.14 docs, concepts/nodeclasses.md ``spec.instanceStorePolicy``); the
    root volume then holds the OS only (see :func:`node_disk_gib`).
    ``capacity_reservation_ids``: On-Demand Capacity Reservations or Capacity Blocks Karpenter
    may launch into, as capacity type ``reserved`` (``spec.capacityReservationSelectorTerms``).
    ``security_group_ids``: the nodes' security groups; by default the EKS-managed cluster
    security group, which the control plane and every node of a cluster this project creates share.
    ``fast_image_pull``: containerd pulls images with SOCI parallel pull/unpack (``SOCI_NODE_CONFIG``).
    """
    spec: dict[str, Any] = {
        "role": role,
        "amiSelectorTerms": [{"alias": AL2023_AMI_ALIAS}],
        "subnetSelectorTerms": subnet_selector(subnet_ids),
        "securityGroupSelectorTerms": [{"id": g} for g in security_group_ids]
        or [{"tags": {"aws:eks:cluster-name": cluster_name}}],
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
        "tags": node_tags(tags),
    }
    if instance_store_raid0:
        spec["instanceStorePolicy"] = "RAID0"
    if fast_image_pull:
        spec["userData"] = SOCI_NODE_CONFIG
    if capacity_reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": r} for r in capacity_reservation_ids]
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def auto_mode_node_class(
    *, name: str, role: Any, cluster_name: str, subnet_ids: Any, disk_gib: int
) -> dict[str, Any]:
    """Auto Mode NodeClass, only needed when the plan's disk exceeds the built-in 80 GiB.

    No ``tags``: the AWS-managed policies of the Auto Mode cluster role do not allow user-defined
    tags on what Auto Mode launches, and a NodeClass asking for them launches no node (EKS User
    Guide, "Amazon EKS Auto Mode cluster IAM role", custom AWS tags). Auto Mode formats local
    NVMe itself (RAID0 of several disks; EKS User Guide, "Learn about Amazon EKS Auto Mode managed
    instances"), so there is no instance-store setting here.
    """
    return {
        "apiVersion": "eks.amazonaws.com/v1",
        "kind": "NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": role,
            "subnetSelectorTerms": subnet_selector(subnet_ids),
            "securityGroupSelectorTerms": [{"tags": {"aws:eks:cluster-name": cluster_name}}],
            "ephemeralStorage": {"size": f"{disk_gib}Gi", "iops": 3000, "throughput": 125},
        },
    }


def subnet_selector(subnet_ids: Any) -> Any:
    """Select the private subnets by id (works for the VPC we create and for yours alike)."""
    if isinstance(subnet_ids, list):
        return [{"id": s} for s in subnet_ids]
    return subnet_ids.apply(lambda ids: [{"id": s} for s in ids])


# With RAID0, Karpenter sets a node's ephemeral-storage to the instance store's TotalSizeInGB in
# decimal G, then keeps a 10 % nodefs eviction threshold and 1 GiB kube-reserved from it
# (aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go: ephemeralStorage,
# evictionThreshold, kubeReservedResources).
EPHEMERAL_EVICTION_FRACTION = 0.10
EPHEMERAL_KUBE_RESERVED_GIB = 1
GB_PER_GIB = 1024**3 / 1000**3


def instance_store_allocatable_gib(instance_storage_gb: int) -> float:
    """Ephemeral storage a pod can request on a node whose RAID0 of local NVMe holds it all."""
    capacity_gib = instance_storage_gb / GB_PER_GIB
    return capacity_gib * (1 - EPHEMERAL_EVICTION_FRACTION) - EPHEMERAL_KUBE_RESERVED_GIB


def instance_store_holds(plan: SizingPlan) -> bool:
    """Whether the local NVMe of every instance type of the plan holds the pod's ephemeral storage."""
    catalog = instance_catalog().instances
    return all(
        instance_store_allocatable_gib(catalog[t].instance_storage_gb) >= plan.ephemeral_storage_gib
        for t in plan.instance_types
    )


def node_disk_gib(plan: SizingPlan, *, instance_store_raid0: bool = False) -> int:
    """Root volume of a GPU node: the OS, plus image and weights unless the RAID0 of local NVMe
    holds those."""
    if instance_store_raid0:
        return ROOT_VOLUME_OS_GIB
    return plan.ephemeral_storage_gib + ROOT_VOLUME_OS_GIB


def needs_auto_mode_node_class(plan: SizingPlan) -> bool:
    return plan.ephemeral_storage_gib > AUTO_MODE_DEFAULT_EPHEMERAL_GIB
