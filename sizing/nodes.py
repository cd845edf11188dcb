"""What a GPU node leaves for the vLLM pod after the system and DaemonSets take their share."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .catalog import InstanceType

# Karpenter's default VM_MEMORY_OVERHEAD_PERCENT (7.5 %): the gap between the memory EC2
# advertises and what the kernel reports as node capacity (Karpenter settings documentation).
VM_MEMORY_OVERHEAD = 0.075

# Pods per node used for kube-reserved memory. Karpenter and Auto Mode cap maxPods at 110 on
# these sizes (kubelet default); kube-reserved memory is 255 MiB + 11 MiB per pod (EKS AMI formula).
MAX_PODS = 110
KUBE_RESERVED_MEMORY_MIB = 255 + 11 * MAX_PODS

# kubelet's default hard eviction threshold memory.available < 100Mi.
EVICTION_HARD_MEMORY_MIB = 100

# What our own GPU-node DaemonSets request together: VPC CNI, kube-proxy, Pod Identity agent,
# EBS CSI node, NVIDIA device plugin, DCGM exporter and node-exporter. Each requests 10-250m and
# 50-512 MiB in their charts; this rounds their sum up so a new small agent still fits.
DAEMONSET_RESERVE_MILLICORES = 1000
DAEMONSET_RESERVE_MIB = 2048


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
    allocatable_mib = capacity_mib - KUBE_RESERVED_MEMORY_MIB - EVICTION_HARD_MEMORY_MIB
    return PodRoom(
        millicores=allocatable_cpu - DAEMONSET_RESERVE_MILLICORES,
        memory_mib=allocatable_mib - DAEMONSET_RESERVE_MIB,
    )
