"""Network options of the VPC the program creates: one NAT gateway per AZ.

A NAT gateway lives in one AZ (AWS VPC User Guide, "NAT gateways"); with
``network.natGatewayPerZone`` each AZ's private subnets leave through the NAT gateway of their own
AZ, so an AZ outage leaves the others their egress. Off, there is one, as before, under the same
resource names.
"""

from __future__ import annotations

import json

import pytest

from deepseek_eks.automation.render import Construction
from deepseek_eks.components.platform.iam_policies import assert_least_privilege
from deepseek_eks.settings import SettingsError, parse_settings
from deepseek_eks.testing.mocks import resource_id
from tests.conftest import stack_config

PRIVATE = "subnet-0aaaaaaaaaaaaaaa1,subnet-0aaaaaaaaaaaaaaa2"


def _zone_of_egress(run: Construction) -> dict[str, str]:
    """Private (and load-balancer) subnet AZ -> the AZ of the NAT gateway its route table uses."""
    subnets = {resource_id(r.type, r.name): r.inputs for r in run.mocks.of_type("aws:ec2/subnet:Subnet")}
    nats = {
        resource_id(r.type, r.name): subnets[r.inputs["subnetId"]]["availabilityZone"]
        for r in run.mocks.of_type("aws:ec2/natGateway:NatGateway")
    }
    tables = {
        resource_id(r.type, r.name): nats[route["natGatewayId"]]
        for r in run.mocks.of_type("aws:ec2/routeTable:RouteTable")
        for route in r.inputs["routes"]
        if route.get("natGatewayId")
    }
    return {
        subnets[a.inputs["subnetId"]]["availabilityZone"]
        + "/"
        + subnets[a.inputs["subnetId"]]["cidrBlock"]: tables[a.inputs["routeTableId"]]
        for a in run.mocks.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
        if a.inputs["routeTableId"] in tables
    }


def test_one_nat_gateway_per_zone_when_asked(construct) -> None:
    run = construct(stack_config("dev", network__natGatewayPerZone="true"))
    egress = _zone_of_egress(run)
    assert len(run.mocks.of_type("aws:ec2/natGateway:NatGateway")) == 3
    assert len(egress) == 6  # 3 private and 3 load-balancer subnets
    assert all(zone.split("/")[0] == nat_zone for zone, nat_zone in egress.items())


def test_one_nat_gateway_by_default_under_its_old_name(construct) -> None:
    run = construct(stack_config("dev"))
    (nat,) = run.mocks.of_type("aws:ec2/natGateway:NatGateway")
    assert nat.name == "network-nat"
    assert len(set(_zone_of_egress(run).values())) == 1


def test_nat_gateway_per_zone_with_your_own_vpc_is_refused() -> None:
    with pytest.raises(SettingsError) as raised:
        parse_settings(
            {
                "deepseek-eks:network.vpcId": "vpc-0123456789abcdef0",
                "deepseek-eks:network.privateSubnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0aaaaaaaaaaaaaaa2",
                "deepseek-eks:network.natGatewayPerZone": "true",
            }
        )
    assert "deepseek-eks:network.natGatewayPerZone" in str(raised.value)
    assert "only applies to the VPC the program creates" in str(raised.value)


@pytest.mark.parametrize("own_vpc", [False, True])
def test_flow_logs_write_all_traffic_to_a_log_group_only_the_flow_log_role_can_write(
    construct, own_vpc: bool
) -> None:
    """pulumi-aws FlowLog (CloudWatch example): the role trusts vpc-flow-logs.amazonaws.com and
    may write log streams and events; here only to its own log group."""
    mine = (
        {"network__vpcId": "vpc-0123456789abcdef0", "network__privateSubnetIds": PRIVATE} if own_vpc else {}
    )
    run = construct(stack_config("dev", network__flowLogs="true", **mine))
    (flow,) = run.mocks.of_type("aws:ec2/flowLog:FlowLog")
    (group,) = run.mocks.of_type("aws:cloudwatch/logGroup:LogGroup")
    assert flow.inputs["trafficType"] == "ALL" and flow.inputs["logDestination"] == group.state["arn"]
    assert group.inputs["retentionInDays"] >= 365
    if own_vpc:
        assert flow.inputs["vpcId"] == "vpc-0123456789abcdef0"
    roles = {r.state["arn"]: r for r in run.mocks.of_type("aws:iam/role:Role")}
    trust = json.loads(roles[flow.inputs["iamRoleArn"]].inputs["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "vpc-flow-logs.amazonaws.com"}]
    (policy,) = [
        json.loads(r.inputs["policy"])
        for r in run.mocks.of_type("aws:iam/rolePolicy:RolePolicy")
        if r.name.endswith("flow-logs")
    ]
    (statement,) = policy["Statement"]
    assert {"logs:CreateLogStream", "logs:PutLogEvents"} <= set(statement["Action"])
    assert all(r.startswith(group.state["arn"]) for r in statement["Resource"])
    assert assert_least_privilege(policy) == []


def test_no_flow_logs_by_default(construct) -> None:
    assert construct(stack_config("dev")).mocks.of_type("aws:ec2/flowLog:FlowLog") == []
