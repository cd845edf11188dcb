"""Internal load balancers get subnets of their own, so the NetworkPolicy can admit them without
admitting every pod (the VPC CNI gives pods addresses in the node subnets).

In the VPC the program creates, small private subnets carry the internal-elb discovery tag and
the node subnets do not (AWS Load Balancer Controller subnet auto-discovery). In your VPC,
``network.loadBalancerSubnetIds`` names them on the Ingress or Service (the controller's
``subnets`` annotations, v3.5.0 docs: ``reference/upstream/nlb-facts.json``); without it the
policy can only admit your private subnets, and settings warn.
"""

from __future__ import annotations

import ipaddress
import json

import pytest

from deepseek_eks.automation.render import render
from deepseek_eks.components.platform.network import plan_subnets
from deepseek_eks.settings import SettingsError, parse_settings
from tests.conftest import stack_config
from tests.upstream import UPSTREAM

P = "deepseek-eks:"
VPC = "vpc-0123456789abcdef0"
PRIVATE = "subnet-0aaaaaaaaaaaaaaa1,subnet-0aaaaaaaaaaaaaaa2"
LB = "subnet-0bbbbbbbbbbbbbbb1,subnet-0bbbbbbbbbbbbbbb2"
INTERNAL_ELB = "kubernetes.io/role/internal-elb"  # the controller's discovery tag for internal LBs
NLB_FACTS = json.loads((UPSTREAM / "nlb-facts.json").read_text())["aws_load_balancer_controller"]


def _admitted(rendered) -> list[str]:  # type: ignore[no-untyped-def]
    policy = next(
        o for o in rendered.objects() if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "vllm"
    )["spec"]
    return [p["ipBlock"]["cidr"] for rule in policy["ingress"] for p in rule["from"] if "ipBlock" in p]


@pytest.mark.parametrize(("cidr", "zones"), [("10.42.0.0/16", 3), ("10.42.0.0/16", 2), ("10.9.0.0/20", 3)])
def test_load_balancer_subnets_are_apart_from_the_others_and_big_enough(cidr: str, zones: int) -> None:
    plan = plan_subnets(cidr, zones)
    nets = [ipaddress.ip_network(c) for c in [*plan.private, *plan.public, *plan.load_balancer]]
    assert len(plan.load_balancer) == zones
    assert all(a == b or not a.overlaps(b) for a in nets for b in nets)
    assert all(n.subnet_of(ipaddress.ip_network(cidr)) for n in nets)
    # An ALB needs a /27 or larger with 8 free addresses (ELB User Guide, load balancer subnets).
    assert all(ipaddress.ip_network(c).prefixlen <= 27 for c in plan.load_balancer)


def test_only_the_load_balancer_subnets_carry_the_internal_discovery_tag() -> None:
    rendered = render(stack_config("dev"))
    subnets = [r["inputs"] for r in rendered.aws if r["type"] == "aws:ec2/subnet:Subnet"]
    tagged = sorted(s["cidrBlock"] for s in subnets if INTERNAL_ELB in s["tags"])
    nodes = [s for s in subnets if "karpenter.sh/discovery" in s["tags"]]
    assert tagged == sorted(plan_subnets("10.42.0.0/16", 3).load_balancer)
    assert nodes and not any(INTERNAL_ELB in s["tags"] for s in nodes)
    assert sorted(_admitted(rendered)) == tagged


@pytest.mark.parametrize("load_balancer", ["alb", "nlb"])
def test_your_load_balancer_subnets_are_named_on_the_ingress_or_service_and_admitted(
    load_balancer: str,
) -> None:
    rendered = render(
        stack_config(
            "dev",
            network__vpcId=VPC,
            network__privateSubnetIds=PRIVATE,
            network__loadBalancerSubnetIds=LB,
            endpoint__loadBalancer=load_balancer,
            **({"endpoint__auth": "none"} if load_balancer == "nlb" else {}),  # an NLB serves keyless
        )
    )
    front = next(
        o
        for o in rendered.objects()
        if o["kind"] == "Ingress" or (o["kind"] == "Service" and o["spec"].get("type") == "LoadBalancer")
    )
    annotations = front["metadata"]["annotations"]
    key = (
        "alb.ingress.kubernetes.io/subnets"
        if load_balancer == "alb"
        else "service.beta.kubernetes.io/aws-load-balancer-subnets"
    )
    if load_balancer == "nlb":
        assert key in NLB_FACTS["service_annotations"]
    assert annotations[key] == LB
    # The mocks give each of your subnets a /20 chosen from its id: the two LB subnets' CIDRs.
    admitted = _admitted(rendered)
    assert len(admitted) == 2
    private_only = render(stack_config("dev", network__vpcId=VPC, network__privateSubnetIds=PRIVATE))
    assert set(admitted).isdisjoint(_admitted(private_only))


def test_your_vpc_without_load_balancer_subnets_is_warned() -> None:
    settings = parse_settings({f"{P}network.vpcId": VPC, f"{P}network.privateSubnetIds": PRIVATE})
    (warning,) = [w for w in settings.warnings if "loadBalancerSubnetIds" in w]
    assert f"{P}network.loadBalancerSubnetIds" in warning and "every pod" in warning
    with_lb = parse_settings(
        {
            f"{P}network.vpcId": VPC,
            f"{P}network.privateSubnetIds": PRIVATE,
            f"{P}network.loadBalancerSubnetIds": LB,
        }
    )
    assert not [w for w in with_lb.warnings if "loadBalancerSubnetIds" in w]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({f"{P}network.loadBalancerSubnetIds": LB}, "needs network.vpcId"),
        (
            {
                f"{P}network.vpcId": VPC,
                f"{P}network.privateSubnetIds": PRIVATE,
                f"{P}network.loadBalancerSubnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb1",
            },
            "also listed in network.privateSubnetIds",
        ),
        (
            {
                f"{P}network.vpcId": VPC,
                f"{P}network.privateSubnetIds": PRIVATE,
                f"{P}network.loadBalancerSubnetIds": "subnet-0bbbbbbbbbbbbbbb1",
            },
            "at least 2 subnets",
        ),
    ],
)
def test_bad_load_balancer_subnets_are_refused(config: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        parse_settings(config)
    assert f"{P}network.loadBalancerSubnetIds" in str(raised.value) and message in str(raised.value)
