"""The whole-stack cost in ``plan``: expected figures are sums of the cited list prices
(sizing/data/stack_prices.json and gpu_instances.json sources), worked out by hand here."""

from __future__ import annotations

import json

import pytest

from deepseek_eks.automation import cli
from deepseek_eks.automation.api import prepare
from deepseek_eks.automation.costing import stack_shape, whole_stack_cost
from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
from deepseek_eks.sizing.stack_cost import StackShape, stack_cost
from tests.conftest import stack_config

# us-east-1 list prices, USD per hour, from the sources the data file cites.
CONTROL_PLANE = 0.10  # EKS, standard support
M7I_LARGE = 0.1008  # EC2 On-Demand, Karpenter's generated price table
NAT_GATEWAY = 0.045
PUBLIC_IPV4 = 0.005
ALB = 0.0225
G6_XLARGE = 0.8048  # EC2 On-Demand, Karpenter's generated price table
AUTO_MODE_SHARE = 0.12  # estimate of the Auto Mode fee, labelled as such in the plan


def rows(cost_fields: dict) -> dict[str, dict]:
    return {row["item"]: row for row in cost_fields["stack_cost_breakdown"]}


def test_auto_mode_stack_adds_the_fee_on_every_node() -> None:
    prepared = prepare("dev")  # auto-mode, g6.xlarge, replicas 1..2, a new VPC, us-east-1
    fields = whole_stack_cost(prepared.settings, prepared.plan).to_dict()
    fixed = CONTROL_PLANE + 2 * M7I_LARGE + NAT_GATEWAY + PUBLIC_IPV4 + ALB + 2 * M7I_LARGE * AUTO_MODE_SHARE
    per_gpu_node = G6_XLARGE * (1 + AUTO_MODE_SHARE)
    # 0.10 + 0.2016 + 0.045 + 0.005 + 0.0225 + 0.024192 = 0.398292; + 0.901376 per node
    assert fields["stack_hourly_usd_at_min"] == pytest.approx(1.299668, abs=1e-4)
    assert fields["stack_hourly_usd_at_max"] == pytest.approx(2.201044, abs=1e-4)
    assert fields["stack_hourly_usd_at_min"] == pytest.approx(fixed + per_gpu_node, abs=1e-4)
    fee = rows(fields)["EKS Auto Mode fee, GPU nodes (g6.xlarge)"]
    assert fee["price_source"].startswith("estimate: 12% of each node's On-Demand price")
    assert "aws.amazon.com/eks/pricing" in fee["price_source"]
    assert rows(fields)["system nodes (m7i.large)"]["price_source"].startswith("estimate:")


def test_karpenter_stack_has_a_system_node_group_and_no_fee() -> None:
    prepared = prepare("prod")  # karpenter, replicas 1..4
    fields = whole_stack_cost(prepared.settings, prepared.plan).to_dict()
    rest = CONTROL_PLANE + 2 * M7I_LARGE + NAT_GATEWAY + PUBLIC_IPV4 + ALB  # 0.3741
    gpu = prepared.plan.to_dict()
    assert fields["stack_hourly_usd_at_min"] == pytest.approx(gpu["hourly_usd_at_min"] + 0.3741, abs=1e-4)
    assert fields["stack_hourly_usd_at_max"] == pytest.approx(gpu["hourly_usd_at_max"] + rest, abs=1e-4)
    assert not [item for item in rows(fields) if "Auto Mode" in item]
    control = rows(fields)["EKS control plane"]
    assert (
        control["unit_usd_per_hour"] == CONTROL_PLANE and "$0.60/h once Kubernetes" in control["price_source"]
    )


def _plan(**request: object) -> SizingPlan:
    result = plan(PlanRequest(variant="r1-distill-qwen-7b", families=("g6",), **request))  # type: ignore[arg-type]
    assert isinstance(result, SizingPlan)
    return result


SHAPE = StackShape("karpenter", True, "1.34", ("m7i.large", "m6i.large"))


def test_own_vpc_counts_no_nat_gateway() -> None:
    sized = _plan(min_replicas=0, max_replicas=3)
    own = stack_cost(sized, StackShape("karpenter", False, "1.34", ("m7i.large",))).to_dict()
    nat = rows(own)["NAT gateway"]
    assert (nat["count_at_min"], nat["count_at_max"]) == (0, 0) and "network.vpcId" in nat["price_source"]
    # minReplicas 0: no GPU node at all, the cluster's fixed parts remain.
    assert own["stack_hourly_usd_at_min"] == pytest.approx(CONTROL_PLANE + 2 * M7I_LARGE + ALB, abs=1e-4)


def test_unbundled_region_falls_back_to_us_east_1_and_says_so() -> None:
    cost = stack_cost(_plan(region="eu-west-1"), SHAPE).to_dict()
    assert (
        "us-east-1 (no bundled price for eu-west-1)" in rows(cost)["system nodes (m7i.large)"]["price_source"]
    )
    assert "us-east-1 (no bundled price for eu-west-1)" in rows(cost)["NAT gateway"]["price_source"]


def test_vcpu_quota_at_max_per_capacity_type() -> None:
    # g6.xlarge: 4 vCPUs (EC2 DescribeInstanceTypes); 3 replicas of one node each = 12 vCPUs in
    # whichever bucket the nodes land: G and VT, spot or on-demand.
    cost = stack_cost(_plan(max_replicas=3, capacity_types=("spot", "on-demand")), SHAPE).to_dict()
    assert [
        (n["capacity_type"], n["quota_code"], n["quota_name"], n["vcpus"]) for n in cost["vcpu_quota_at_max"]
    ] == [
        ("spot", "L-3819A6DF", "All G and VT Spot Instance Requests", 12),
        ("on-demand", "L-DB2E81BA", "Running On-Demand G and VT instances", 12),
    ]
    r1 = prepare("r1")  # p5.48xlarge: 192 vCPUs, 2 nodes per replica, maxReplicas 2, on-demand only
    need = whole_stack_cost(r1.settings, r1.plan).to_dict()["vcpu_quota_at_max"]
    assert [(n["quota_code"], n["vcpus"]) for n in need] == [("L-417A185B", 768)]


def test_counts_match_what_the_program_creates(construct) -> None:
    """The system node group's size and first type, and the NAT gateways, as the render has them."""
    run = construct(stack_config("prod"))
    cost = whole_stack_cost(prepare("prod").settings, run.result.plan).to_dict()
    group = run.mocks.of_type("aws:eks/nodeGroup:NodeGroup")[0].inputs
    system = rows(cost)["system nodes (m7i.large)"]
    assert group["scalingConfig"]["desiredSize"] == system["count_at_min"] == system["count_at_max"]
    assert group["instanceTypes"][0] == "m7i.large"
    nats = run.mocks.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == rows(cost)["NAT gateway"]["count_at_max"] == 1
    assert stack_shape(prepare("prod").settings).creates_vpc


def test_plan_command_prints_and_writes_the_stack_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", "--stack", "dev", "--json"]) == 0
    fields = json.loads(capsys.readouterr().out)
    assert {
        "stack_hourly_usd_at_min",
        "stack_hourly_usd_at_max",
        "stack_cost_breakdown",
        "vcpu_quota_at_max",
    } <= set(fields)
    assert fields["hourly_usd_at_min"] == pytest.approx(G6_XLARGE)  # the GPU-only figure is unchanged
    assert cli.main(["plan", "--stack", "dev"]) == 0
    text = capsys.readouterr().out
    assert "stack cost     $1.30/h at min, $2.20/h at max" in text
    assert "vCPU quota     8 vCPUs at maxReplicas: on-demand, Running On-Demand G and VT instances" in text
