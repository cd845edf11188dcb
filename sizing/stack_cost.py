"""The whole stack's hourly cost at minReplicas and maxReplicas, and the EC2 vCPU quota it needs.

GPU nodes are what the plan already prices; around them the stack runs an EKS control plane, in
Karpenter mode a small system node group (in Auto Mode, nodes of Auto Mode's general-purpose
pool for the same controllers, plus Auto Mode's per-instance fee on every node), one NAT gateway
with its public IPv4 address when the program creates the VPC, and one Application Load Balancer.
Prices and their sources: sizing/data/stack_prices.json. Only hourly charges are summed; usage
charges (NAT data processed, ALB LCU-hours, EBS, data transfer) depend on traffic and are named
in each row's ``price_source`` instead. Pure: no Pulumi, no settings import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .planner import SizingPlan
from .quotas import QuotaNeed, quota_needs

AUTO_MODE = "auto-mode"  # settings.ComputeMode.AUTO_MODE's value


@dataclass(frozen=True)
class StackShape:
    """What the stack creates besides the plan's GPU nodes (from the stack settings)."""

    compute_mode: str  # "auto-mode" or "karpenter"
    creates_vpc: bool  # False with network.vpcId: the NAT gateway is the VPC owner's
    kubernetes_version: str
    system_node_types: tuple[str, ...]  # components/versions.py SYSTEM_NODE_INSTANCE_TYPES


@dataclass(frozen=True)
class CostLine:
    """One priced part of the stack: ``count`` units at ``unit_usd_per_hour`` each."""

    item: str
    count_at_min: float
    count_at_max: float
    unit_usd_per_hour: float
    price_source: str

    @property
    def usd_per_hour_at_min(self) -> float:
        return self.count_at_min * self.unit_usd_per_hour

    @property
    def usd_per_hour_at_max(self) -> float:
        return self.count_at_max * self.unit_usd_per_hour

    def to_dict(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "count_at_min": self.count_at_min,
            "count_at_max": self.count_at_max,
            "unit_usd_per_hour": round(self.unit_usd_per_hour, 6),
            "usd_per_hour_at_min": round(self.usd_per_hour_at_min, 4),
            "usd_per_hour_at_max": round(self.usd_per_hour_at_max, 4),
            "price_source": self.price_source,
        }


# plan.json fields of the whole-stack cost (docs/reference/plan-json.md is generated from them).
STACK_COST_FIELD_DOCS: dict[str, str] = {
    "stack_hourly_usd_at_min": "The whole stack's hourly price at autoscaling.minReplicas: GPU nodes, "
    "control plane, system nodes, NAT gateways, load balancer, volumes.",
    "stack_hourly_usd_at_max": "The same at autoscaling.maxReplicas.",
    "stack_cost_breakdown": "One line per priced item: what it is, its hourly price at min and max, "
    "and the price's source.",
    "vcpu_quota_at_max": "The EC2 vCPU quota each instance family needs at maxReplicas (On-Demand "
    "and Spot quotas are counted separately).",
}


@dataclass(frozen=True)
class StackCost:
    lines: tuple[CostLine, ...]
    quota: tuple[QuotaNeed, ...]

    @property
    def usd_per_hour_at_min(self) -> float:
        return sum(line.usd_per_hour_at_min for line in self.lines)

    @property
    def usd_per_hour_at_max(self) -> float:
        return sum(line.usd_per_hour_at_max for line in self.lines)

    def to_dict(self) -> dict[str, Any]:
        """The plan.json fields of the whole-stack cost."""
        return {
            "stack_hourly_usd_at_min": round(self.usd_per_hour_at_min, 4),
            "stack_hourly_usd_at_max": round(self.usd_per_hour_at_max, 4),
            "stack_cost_breakdown": [line.to_dict() for line in self.lines],
            "vcpu_quota_at_max": [need.to_dict() for need in self.quota],
        }


@cache
def stack_prices() -> dict[str, Any]:
    """sizing/data/stack_prices.json."""
    # The package it is loaded as: sizing in the checkout, deepseek_eks.sizing from the wheel.
    data = resources.files(__package__ or "sizing").joinpath("data", "stack_prices.json")
    return json.loads(data.read_text("utf-8"))


def _regional(prices: dict[str, float], region: str, fallback: str) -> tuple[float, str]:
    """The price in ``region``, or the fallback region's with a note saying so."""
    if region in prices:
        return prices[region], region
    return prices[fallback], f"{fallback} (no bundled price for {region})"


def _warm_spares(plan: SizingPlan) -> list[CostLine]:
    """autoscaling.warmSpareNodes: the nodes placeholders hold at the floor; at the ceiling the
    replicas have taken them and the pool's limit leaves none for the spares."""
    if not plan.request.warm_spare_nodes:
        return []
    gpu = plan.chosen
    item = f"warm spare GPU nodes ({gpu.instance.name}, {plan.request.warm_spare_nodes} placeholders)"
    return [CostLine(item, plan.warm_spare_extra_nodes, 0, gpu.node_usd_per_hour, plan.price_source)]


def stack_cost(plan: SizingPlan, shape: StackShape) -> StackCost:
    """Every hourly-priced part of the stack at the plan's min and max replicas."""
    data = stack_prices()
    fallback = data["fallback_region"]
    region = plan.request.region
    lo, hi = plan.request.min_replicas, plan.request.max_replicas
    gpu = plan.chosen
    gpu_nodes_min, gpu_nodes_max = gpu.nodes_for(lo), gpu.nodes_for(hi)
    auto_mode = shape.compute_mode == AUTO_MODE

    control = data["eks_control_plane"]
    lines = [
        CostLine(
            f"GPU nodes ({gpu.instance.name})",
            gpu_nodes_min,
            gpu_nodes_max,
            gpu.node_usd_per_hour,
            plan.price_source,
        ),
        *_warm_spares(plan),
        CostLine(
            "EKS control plane",
            1,
            1,
            control["standard_support_usd_per_hour"],
            f"standard support; ${control['extended_support_usd_per_hour']:.2f}/h once Kubernetes "
            f"{shape.kubernetes_version} leaves standard support (14 months after its EKS release), "
            f"as clusters enter extended support by default. {control['source']}",
        ),
    ]

    system = data["system_node_group"]
    system_type = shape.system_node_types[0]  # managed node groups fill On-Demand in list order
    if system_type not in data["instances"]:
        raise ValueError(f"no bundled price for system node type {system_type}: add it to stack_prices.json")
    system_price, system_region = _regional(
        data["instances"][system_type]["on_demand_usd_per_hour"], region, fallback
    )
    system_basis = (
        "estimate: Auto Mode's general-purpose pool picks the nodes for the controllers; priced as "
        "the Karpenter-mode system node group"
        if auto_mode
        else "the system node group"
    )
    lines.append(
        CostLine(
            f"system nodes ({system_type})",
            system["desired_size"],
            system["desired_size"],
            system_price,
            f"{system_basis}; On-Demand {system_region}, {data['instance_price_source']['source']}",
        )
    )

    if auto_mode:
        fee = data["auto_mode_fee"]
        share = fee["fraction_of_on_demand"]
        basis = f"{fee['basis']}: {share:.0%} of each node's On-Demand price. {fee['source']}"
        lines += [
            CostLine(
                f"EKS Auto Mode fee, GPU nodes ({gpu.instance.name})",
                gpu_nodes_min,
                gpu_nodes_max,
                share * gpu.node_usd_per_hour,
                basis,
            ),
            CostLine(
                f"EKS Auto Mode fee, system nodes ({system_type})",
                system["desired_size"],
                system["desired_size"],
                share * system_price,
                basis,
            ),
        ]

    nat = data["nat_gateway"]
    nat_price, nat_region = _regional(nat["usd_per_hour"], region, fallback)
    nat_count = 1 if shape.creates_vpc else 0
    own_vpc = "" if shape.creates_vpc else "none: network.vpcId is set, the VPC's own NAT is not counted; "
    ipv4 = data["public_ipv4"]
    lines += [
        CostLine(
            "NAT gateway",
            nat_count,
            nat_count,
            nat_price,
            f"{own_vpc}hourly only, {nat_region}; plus ${nat['usd_per_gb_processed']}/GB processed. "
            f"{nat['source']}",
        ),
        CostLine(
            "NAT gateway public IPv4 address", nat_count, nat_count, ipv4["usd_per_hour"], ipv4["source"]
        ),
    ]

    alb = data["application_load_balancer"]
    alb_price, alb_region = _regional(alb["usd_per_hour"], region, fallback)
    lines.append(
        CostLine(
            "Application Load Balancer",
            1,
            1,
            alb_price,
            f"hourly only, {alb_region}; plus ${alb['usd_per_lcu_hour']} per LCU-hour with traffic "
            f"(and public IPv4 addresses when internet-facing). {alb['source']}",
        )
    )

    quota = quota_needs(gpu.instance.family, gpu.instance.vcpu, gpu.nodes, hi, plan.request.capacity_types)
    return StackCost(tuple(lines), tuple(quota))


def summary_lines(cost: StackCost) -> list[str]:
    """The human summary of the whole-stack cost, for ``plan`` and ``render``."""
    lines = [
        f"stack cost     ${cost.usd_per_hour_at_min:.2f}/h at min, ${cost.usd_per_hour_at_max:.2f}/h "
        "at max (hourly charges; traffic-billed NAT, ALB LCU and EBS extra)"
    ]
    for line in cost.lines:
        lines.append(
            f"  {line.item:<44} {line.count_at_min:g}..{line.count_at_max:g} x "
            f"${line.unit_usd_per_hour:.4f}/h = "
            f"${line.usd_per_hour_at_min:.2f}..${line.usd_per_hour_at_max:.2f}/h"
        )
    for need in cost.quota:
        where = f"{need.quota_name} ({need.quota_code})" if need.quota_code else "no known EC2 vCPU quota"
        lines.append(f"vCPU quota     {need.vcpus} vCPUs at maxReplicas: {need.capacity_type}, {where}")
    return lines
