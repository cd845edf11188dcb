"""What a GPU node leaves for the vLLM pod after the system and DaemonSets take their share."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .catalog import InstanceType

# Karpenter's default VM_MEMORY_OVERHEAD_PERCENT (7.5 %): the gap between the memory EC2
# advertises and what the kernel reports as node capacity (Karpenter settings documentation).
VM_MEMORY_OVERHEAD = 0.075

# kube-reserved memory is 255 MiB + 11 MiB per pod, where Karpenter counts the pods the VPC CNI can
# address on the instance (ENI-limited), not kubelet's maxPods: AL2023 keeps DefaultFamily's
# UsesENILimitedMemoryOverhead (aws/karpenter-provider-aws v1.14.1
# pkg/providers/instancetype/types.go: kubeReservedResources, ENILimitedPods;
# pkg/providers/amifamily/resolver.go). Auto Mode caps max pods at 110 after the same count (EKS
# User Guide, "Create a Node Class"), so the ENI-limited count reserves at least as much there.
KUBE_RESERVED_MEMORY_BASE_MIB = 255
KUBE_RESERVED_MEMORY_PER_POD_MIB = 11

# Network interfaces of the default network card and IPv4 addresses per interface, per instance
# type, as Karpenter v1.14.1 knows them (pkg/providers/instancetype/zz_generated.vpclimits.go).
ENI_LIMITS: dict[str, tuple[int, int]] = {
    "g4dn.12xlarge": (8, 30),
    "g4dn.16xlarge": (4, 15),
    "g4dn.2xlarge": (3, 10),
    "g4dn.4xlarge": (3, 10),
    "g4dn.8xlarge": (4, 15),
    "g4dn.metal": (15, 50),
    "g4dn.xlarge": (3, 10),
    "g5.12xlarge": (15, 50),
    "g5.16xlarge": (8, 30),
    "g5.24xlarge": (15, 50),
    "g5.2xlarge": (4, 15),
    "g5.48xlarge": (7, 50),
    "g5.4xlarge": (8, 30),
    "g5.8xlarge": (8, 30),
    "g5.xlarge": (4, 15),
    "g6.12xlarge": (8, 30),
    "g6.16xlarge": (15, 50),
    "g6.24xlarge": (15, 50),
    "g6.2xlarge": (4, 15),
    "g6.48xlarge": (15, 50),
    "g6.4xlarge": (8, 30),
    "g6.8xlarge": (8, 30),
    "g6.xlarge": (4, 15),
    "g6e.12xlarge": (10, 30),
    "g6e.16xlarge": (15, 50),
    "g6e.24xlarge": (10, 50),
    "g6e.2xlarge": (4, 15),
    "g6e.48xlarge": (10, 50),
    "g6e.4xlarge": (8, 30),
    "g6e.8xlarge": (8, 30),
    "g6e.xlarge": (4, 15),
    "p4d.24xlarge": (15, 50),
    "p4de.24xlarge": (15, 50),
    "p5.48xlarge": (2, 50),
    "p5.4xlarge": (4, 30),
    "p5e.48xlarge": (2, 50),
    "p5en.48xlarge": (4, 50),
    "p6-b200.48xlarge": (4, 50),
}

# kubelet's default hard eviction threshold memory.available < 100Mi.
EVICTION_HARD_MEMORY_MIB = 100

# What our own GPU-node DaemonSets request together: VPC CNI, kube-proxy, Pod Identity agent,
# EBS CSI node, NVIDIA device plugin, DCGM exporter and node-exporter. Each requests 10-250m and
# 50-512 MiB in their charts; this rounds their sum up so a new small agent still fits, such as
# the image pre-pull's idle container in Karpenter mode (10m, 16 MiB: components/platform/image_prepull.py).
DAEMONSET_RESERVE_MILLICORES = 1000
DAEMONSET_RESERVE_MIB = 2048


def eni_limited_pods(instance_type: str) -> int:
    """Pods the VPC CNI can address on one node: ENIs x (addresses per ENI - 1) + 2."""
    try:
        enis, addresses = ENI_LIMITS[instance_type]
    except KeyError:
        raise ValueError(f"no ENI limits for {instance_type}: add it to sizing.nodes.ENI_LIMITS") from None
    return enis * (addresses - 1) + 2


def kube_reserved_memory_mib(instance_type: str) -> int:
    """kube-reserved memory Karpenter and the AL2023 AMI set on this instance type."""
    return KUBE_RESERVED_MEMORY_BASE_MIB + KUBE_RESERVED_MEMORY_PER_POD_MIB * eni_limited_pods(instance_type)


def kube_reserved_millicores(vcpu: int) -> int:
    """EKS AMI / Karpenter kube-reserved CPU: 6 % of the first core, 1 % of the second,
    0.5 % of cores three and four, 0.25 % of every further core."""
    steps = ((1, 60), (1, 10), (2, 5))
    reserved, left = 0.0, vcpu
    for cores, millis in steps:
        take = min(cores, left)
        reserved += take * millis
        left -= take
    reserved += left * 2.5
    return math.ceil(reserved)


@dataclass(frozen=True)
class PodRoom:
    """CPU and memory a single vLLM pod can request on one node."""

    millicores: int
    memory_mib: int


def pod_room(instance: InstanceType) -> PodRoom:
    """Allocatable minus the DaemonSet reserve for one instance type."""
    allocatable_cpu = instance.vcpu * 1000 - kube_reserved_millicores(instance.vcpu)
    capacity_mib = math.floor(instance.memory_mib * (1 - VM_MEMORY_OVERHEAD))
    allocatable_mib = capacity_mib - kube_reserved_memory_mib(instance.name) - EVICTION_HARD_MEMORY_MIB
    return PodRoom(
        millicores=allocatable_cpu - DAEMONSET_RESERVE_MILLICORES,
        memory_mib=allocatable_mib - DAEMONSET_RESERVE_MIB,
    )
