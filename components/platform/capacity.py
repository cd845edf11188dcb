"""GPU capacity under EKS Auto Mode, and the interface both capacity modes give downstream
components (observability, inference, autoscaling) so those never look at the mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from deepseek_eks.settings import ComputeMode
from deepseek_eks.sizing import SizingPlan

from ..manifests import custom_resource
from .nodepools import (
    GPU_FLOOR_NODE_POOL,
    GPU_NODE_POOL,
    GPU_NODE_ROLE,
    GPU_TOLERATION,
    NODE_ROLE_LABEL,
    NodeClassRef,
    any_gpu_node_selector,
    auto_mode_node_class,
    gpu_limit,
    gpu_node_pool,
    gpu_pool_specs,
    needs_auto_mode_node_class,
)

# Pulumi resource name of each GPU pool under its capacity component.
POOL_RESOURCE_SUFFIX = {GPU_NODE_POOL: "gpu-nodepool", GPU_FLOOR_NODE_POOL: "gpu-floor-nodepool"}
INGRESS_CLASS = "alb"
STORAGE_CLASS = "gp3-encrypted"
# The EBS CSI provisioner per compute mode: Auto Mode's built-in one, or the aws-ebs-csi-driver
# add-on Karpenter mode installs (EKS User Guide, ebs-csi.html: Auto Mode nodes mount only volumes
# of ebs.csi.eks.amazonaws.com).
EBS_CSI_DRIVERS = {"auto-mode": "ebs.csi.eks.amazonaws.com", "karpenter": "ebs.csi.aws.com"}


@dataclass(frozen=True)
class GpuPlacement:
    """How a pod lands on the GPU nodes and gets traffic, the same in both modes."""

    node_selector: dict[str, str]
    """Node selector of GPU pods: the label every GPU pool puts on its nodes."""
    tolerations: list[dict[str, str]]
    """Tolerations of GPU pods (the GPU nodes' taint)."""
    node_pool: str
    """Name of the main GPU NodePool (a floor pool may sit next to it, see nodepools.gpu_pool_specs)."""
    ingress_class: str
    """IngressClass that provisions an ALB."""
    storage_class: str
    """StorageClass of encrypted gp3 volumes (Prometheus storage)."""
    any_gpu_node_selector: dict[str, str] = field(default_factory=dict)
    """Every NVIDIA GPU node of the cluster, this service's or another's (dcgm-exporter)."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """Resources GPU workloads must wait for (node pool, device plugin)."""


def gpu_placement(
    depends_on: list[pulumi.Resource], mode: ComputeMode, pool_prefix: str = ""
) -> GpuPlacement:
    return GpuPlacement(
        node_selector={NODE_ROLE_LABEL: pool_prefix + GPU_NODE_ROLE},
        tolerations=[dict(GPU_TOLERATION)],
        node_pool=pool_prefix + GPU_NODE_POOL,
        ingress_class=INGRESS_CLASS,
        storage_class=STORAGE_CLASS,
        any_gpu_node_selector=any_gpu_node_selector(mode),
        depends_on=depends_on,
    )


def gp3_storage_class(
    name: str, provisioner: str, labels: dict[str, str], opts: pulumi.ResourceOptions
) -> None:
    """Encrypted gp3 volumes, bound where the pod lands (a volume cannot follow it across AZs)."""
    k8s.storage.v1.StorageClass(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=STORAGE_CLASS, labels=labels),
        provisioner=provisioner,
        parameters={"type": "gp3", "encrypted": "true"},
        volume_binding_mode="WaitForFirstConsumer",
        reclaim_policy="Delete",
        allow_volume_expansion=True,
        opts=opts,
    )


@dataclass
class CapacityArgs:
    """Inputs both capacity modes take."""

    plan: SizingPlan
    """The sizing plan: instance types, GPUs per replica, disk."""
    cluster_name: str
    """EKS cluster name (security-group discovery)."""
    private_subnet_ids: pulumi.Input[list[str]]
    """Subnets for nodes."""
    capacity_types: list[str]
    """spot and/or on-demand for the GPU pool."""
    min_replicas: int
    """Fewest vLLM replicas: sizes the on-demand floor pool when spot is allowed too."""
    max_replicas: int
    """Most vLLM replicas: bounds the GPU pool's limit."""
    labels: dict[str, str]
    """Labels on the created Kubernetes objects."""
    tags: dict[str, str]
    """AWS tags for the nodes."""
    capacity_reservation_ids: list[str]
    """EC2 capacity reservations / Capacity Blocks the GPU nodes may use (Karpenter mode only)."""
    pool_prefix: str
    """Put before the GPU pools' names and their nodes' role label, so the pools of two services
    in one cluster (two variants need two instance shapes) keep apart ("" = today's names)."""

    def gpu_node_pools(
        self, name: str, mode: ComputeMode, node_class: NodeClassRef, opts: pulumi.ResourceOptions
    ) -> list[k8s.apiextensions.CustomResource]:
        """The GPU NodePools of either mode, from the plan: the floor pool (if any), then the main one."""
        specs = gpu_pool_specs(
            self.plan,
            self.capacity_types,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            reserved=bool(self.capacity_reservation_ids),
        )
        return [
            custom_resource(
                f"{name}-{POOL_RESOURCE_SUFFIX[spec.name]}",
                prefixed_pool(
                    gpu_node_pool(
                        spec=spec, plan=self.plan, mode=mode, node_class=node_class, labels=self.labels
                    ),
                    self.pool_prefix,
                ),
                opts,
            )
            for spec in specs
        ]


def prefixed_pool(pool: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A GPU NodePool named ``<prefix><name>`` whose nodes carry ``<prefix>`` + the GPU role label."""
    if not prefix:
        return pool
    template = pool["spec"]["template"]
    return {
        **pool,
        "metadata": {**pool["metadata"], "name": prefix + pool["metadata"]["name"]},
        "spec": {
            **pool["spec"],
            "template": {
                **template,
                "metadata": {
                    "labels": {**template["metadata"]["labels"], NODE_ROLE_LABEL: prefix + GPU_NODE_ROLE}
                },
            },
        },
    }


@dataclass
class AutoModeCapacityArgs(CapacityArgs):
    """Inputs of ``AutoModeCapacity``."""

    node_role_name: pulumi.Input[str] = ""
    """Auto Mode's node role (only used when a custom NodeClass is needed)."""
    cluster_singletons: bool = True
    """Create the ALB IngressClass, the gp3 StorageClass and the network-policy switch (one
    service per cluster does)."""


class AutoModeCapacity(pulumi.ComponentResource):
    """A GPU NodePool on EKS Auto Mode's managed Karpenter, and the ALB IngressClass.

    Auto Mode ships the NVIDIA driver, device plugin, load balancer controller and EBS driver:
    none of them is installed here.
    """

    placement: GpuPlacement
    """Where GPU pods go and which IngressClass serves them."""
    gpu_limit: int
    """The pool's nvidia.com/gpu limit."""

    def __init__(self, name: str, args: AutoModeCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:AutoModeCapacity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        node_class = NodeClassRef("eks.amazonaws.com", "NodeClass", "default")
        depends: list[pulumi.Resource] = []
        if args.capacity_reservation_ids:
            raise ValueError("capacity reservations are Karpenter-mode only (settings refuse them here)")
        if needs_auto_mode_node_class(args.plan):
            manifest = auto_mode_node_class(
                name=f"{args.pool_prefix}gpu-inference",
                role=args.node_role_name,
                cluster_name=args.cluster_name,
                subnet_ids=args.private_subnet_ids,
                disk_gib=args.plan.ephemeral_storage_gib,
            )
            depends.append(custom_resource(f"{name}-nodeclass", manifest, child))
            node_class = NodeClassRef("eks.amazonaws.com", "NodeClass", f"{args.pool_prefix}gpu-inference")
        pools = args.gpu_node_pools(
            name, ComputeMode.AUTO_MODE, node_class, pulumi.ResourceOptions(parent=self, depends_on=depends)
        )
        self.gpu_limit = gpu_limit(args.plan, args.max_replicas)
        self.placement = gpu_placement(list(pools), ComputeMode.AUTO_MODE, args.pool_prefix)
        self.register_outputs({"nodePool": self.placement.node_pool, "gpuLimit": self.gpu_limit})
        if not args.cluster_singletons:
            return
        k8s.networking.v1.IngressClass(
            f"{name}-alb",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=INGRESS_CLASS, labels=args.labels),
            spec=k8s.networking.v1.IngressClassSpecArgs(controller="eks.amazonaws.com/alb"),
            opts=child,
        )
        gp3_storage_class(f"{name}-gp3", EBS_CSI_DRIVERS["auto-mode"], args.labels, child)
        # Auto Mode enforces NetworkPolicies only once this switch is on.
        k8s.core.v1.ConfigMap(
            f"{name}-network-policy",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="amazon-vpc-cni", namespace="kube-system", labels=args.labels
            ),
            data={"enable-network-policy-controller": "true"},
            opts=child,
        )
