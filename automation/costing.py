"""The whole-stack cost of a stack's settings and plan (sizing/stack_cost.py), for ``plan`` and
``render``'s plan.json; kept out of SizingPlan, which knows only the GPU nodes."""

from __future__ import annotations

from deepseek_eks.components.versions import SYSTEM_NODE_INSTANCE_TYPES
from deepseek_eks.settings import Settings
from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.stack_cost import StackCost, StackShape, stack_cost


def stack_shape(settings: Settings) -> StackShape:
    """What the program creates around the GPU nodes, as the components decide it: a new VPC
    (with its NAT gateway) unless network.vpcId is set, and the compute mode's system nodes."""
    return StackShape(
        compute_mode=settings.compute_mode.value,
        creates_vpc=settings.network.vpc_id is None,
        kubernetes_version=settings.kubernetes_version,
        system_node_types=SYSTEM_NODE_INSTANCE_TYPES,
    )


def whole_stack_cost(settings: Settings, plan: SizingPlan) -> StackCost:
    return stack_cost(plan, stack_shape(settings))
