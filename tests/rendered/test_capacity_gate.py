"""Capacity variants no example stack renders (reservations, an Auto Mode NodeClass) through the
same manifest gate as the stacks."""

from __future__ import annotations

import pytest

from deepseek_eks.automation.render import render
from deepseek_eks.guardrails.manifest_gate import check, schema_dir
from tests.conftest import stack_config

VARIANTS = {
    "karpenter-reservations": stack_config(
        "r1", gpu__capacityReservationIds="cr-0123456789abcdef0,cr-0123456789abcdef1"
    ),
    "auto-mode-node-class": stack_config(
        "dev", model__variant="r1-distill-qwen-32b", gpu__instanceFamilies="g6e"
    ),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_capacity_objects_pass_their_crd_schemas(variant: str) -> None:
    crd_dir = schema_dir()
    rendered = render(VARIANTS[variant])
    kinds = {"NodePool", "EC2NodeClass", "NodeClass"}
    objects = [o for o in rendered.objects() if o["kind"] in kinds]
    assert objects
    problems = [p for o in objects for p in check(o, "1.34", crd_dir)]
    assert problems == []
