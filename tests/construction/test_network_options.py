"""Network options of the VPC the program creates: one NAT gateway per AZ.

A NAT gateway lives in one AZ (AWS VPC User Guide, "NAT gateways"); with
``network.natGatewayPerZone`` each AZ's private subnets leave through the NAT gateway of their own
AZ, so an AZ outage leaves the others their egress. Off, there is one, as before, under the same
resource names.
"""

from __future__ import annotations

import pytest

from automation.mocks import resource_id
from automation.render import Construction
from deepseek_eks.settings import SettingsError, parse_settings
from tests.conftest import stack_config


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
