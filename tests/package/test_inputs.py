"""``DeepSeekService`` wiring fields take ``pulumi.Input``s (issue 20 item 1): the Outputs' values
reach the resources, a bad value is refused once known with the validator's message (naming the
service and the argument path), an unknown value is not world-open, and an Output where a plain
value decides the plan is refused at construction by name. The literal path is the one the rest of
tests/package checks (unchanged)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from deepseek_eks import DeepSeekService, DeepSeekServiceArgs, ServiceError, SettingsError
from deepseek_eks.components.wiring import UNKNOWN
from deepseek_eks.testing import Mocks, Recorded, run

known = pulumi.Output.from_input  # an Output of a value known now
REGION = "eu-west-1"
CERT = f"arn:aws:acm:{REGION}:123456789012:certificate/0a1b2c3d-0000-4000-8000-00000000abcd"
KMS = f"arn:aws:kms:{REGION}:123456789012:key/0a1b2c3d-0000-4000-8000-00000000abcd"
ROLE = "arn:aws:iam::123456789012:role/platform-admins"
JOIN_NETWORK = {
    "vpc_id": "vpc-0a1b2c3d4e5f60718",
    "private_subnet_ids": ["subnet-0a1b2c3d", "subnet-0b1b2c3d"],
}


def _unknown() -> pulumi.Output[Any]:
    """An Output whose value is not known (as at preview for a resource not created yet)."""

    async def value() -> None:
        return None

    async def is_known() -> bool:
        return False

    return pulumi.Output(set(), value(), is_known())


def _service(args: Callable[[], Any], mocks: Mocks | None = None, join: bool = False) -> list[Recorded]:
    """Run a program making ``args()`` (Outputs belong to the program's event loop) into a service."""

    def program() -> None:
        opts = pulumi.ResourceOptions(providers={"kubernetes": k8s.Provider("platform", kubeconfig="{}")})
        DeepSeekService("team-a", args(), opts if join else None)

    return run(program, config={"aws:region": REGION}, mocks=mocks)


def _refusal(args: Callable[[], Any]) -> str:
    """The message of the error a run with ``args()`` fails with (inside an ``apply``)."""
    try:
        _service(args)
    except Exception as error:  # the engine wraps it in the ValueError of the resource it fed
        text = str(error)
    else:
        pytest.fail("the run succeeded")
    return text


def _one(resources: list[Recorded], type_: str, suffix: str = "") -> Recorded:
    (found,) = [r for r in resources if r.type == type_ and r.name.endswith(suffix)]
    return found


def test_outputs_reach_the_cluster_and_endpoint_resources() -> None:
    def args() -> DeepSeekServiceArgs:
        return {
            "cluster": {
                "public_access_cidrs": [known("203.0.113.7/32")],
                "private_access_cidrs": [known("198.51.100.0/24")],
                "private_access_security_group_ids": [known("sg-0123456789abcdef0")],
                "admin_role_arns": [known(ROLE)],
                "secrets_kms_key_arn": known(KMS),
            },
            "endpoint": {
                "scheme": "internet-facing",
                "certificate_arn": known(CERT),
                "allowed_cidrs": [known("192.0.2.128/25")],
                "hostname": known("chat.example.com"),
                "hosted_zone_id": known("Z0123456789ABC"),
            },
        }

    resources = _service(args)
    rules = {
        (r.inputs.get("cidrIpv4"), r.inputs.get("referencedSecurityGroupId"))
        for r in resources
        if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
    }
    assert {("198.51.100.0/24", None), (None, "sg-0123456789abcdef0")} <= rules
    cluster = _one(resources, "eks:index:Cluster").inputs
    assert cluster["publicAccessCidrs"] == ["203.0.113.7/32"]
    assert cluster["encryptionConfigKeyArn"] == KMS
    assert [e["principalArn"] for e in cluster["accessEntries"].values()] == [ROLE]
    annotations = _one(resources, "kubernetes:networking.k8s.io/v1:Ingress").inputs["metadata"]["annotations"]
    assert annotations["alb.ingress.kubernetes.io/certificate-arn"] == CERT
    assert annotations["alb.ingress.kubernetes.io/inbound-cidrs"] == "192.0.2.128/25"
    record = _one(resources, "aws:route53/record:Record").inputs
    assert (record["zoneId"], record["name"]) == ("Z0123456789ABC", "chat.example.com")


def test_outputs_of_whole_subnet_lists_and_keys_reach_an_existing_cluster() -> None:
    mocks = Mocks(region=REGION)
    private = ["subnet-0a1b2c3d", "subnet-0b1b2c3d", "subnet-0c1b2c3d"]
    balancers = ["subnet-0d1b2c3d", "subnet-0e1b2c3d"]

    def args() -> DeepSeekServiceArgs:
        return {
            "compute_mode": "karpenter",
            "existing_cluster": {
                "cluster_name": "platform",
                "node_role_name": known("karpenter-nodes"),
                "node_security_group_ids": [known("sg-0fedcba9876543210")],
            },
            "network": {
                "vpc_id": known("vpc-0a1b2c3d4e5f60718"),
                "private_subnet_ids": known(private),  # an Output of the whole list
                "load_balancer_subnet_ids": known(balancers),
            },
            "weights": {"source": "s3", "kms_key_arn": known(KMS)},
        }

    resources = _service(args, mocks, join=True)
    subnets = {i.args["id"] for i in mocks.invokes if i.token == "aws:ec2/getSubnet:getSubnet"}
    assert subnets == {*private, *balancers}
    node_class = next(r for r in resources if r.inputs.get("kind") == "EC2NodeClass").inputs["spec"]
    assert node_class["role"] == "karpenter-nodes"
    assert node_class["securityGroupSelectorTerms"] == [{"id": "sg-0fedcba9876543210"}]
    assert sorted(t["id"] for t in node_class["subnetSelectorTerms"]) == private
    annotations = _one(resources, "kubernetes:networking.k8s.io/v1:Ingress").inputs["metadata"]["annotations"]
    assert annotations["alb.ingress.kubernetes.io/subnets"] == ",".join(balancers)
    encryption = _one(
        resources, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    assert encryption.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == KMS
    policies = [
        json.loads(r.inputs["policy"]) for r in resources if r.type == "aws:iam/rolePolicy:RolePolicy"
    ]
    assert any(s.get("Resource") == KMS for p in policies for s in p["Statement"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            lambda: {"cluster": {"private_access_cidrs": ["198.51.100.0/24", known("not-a-cidr")]}},
            'cluster={"private_access_cidrs": ...}[1] = "not-a-cidr": needs a prefix length',
        ),
        (
            lambda: {
                "endpoint": {
                    "scheme": "internet-facing",
                    "certificate_arn": CERT,
                    "allowed_cidrs": [known("0.0.0.0/1"), known("128.0.0.0/1")],
                }
            },
            'endpoint={"allowed_cidrs": ...} = ["0.0.0.0/1", "128.0.0.0/1"]: 0.0.0.0/1, 128.0.0.0/1 '
            "together admit 100% of IPv4",
        ),
        (
            lambda: {
                "endpoint": {
                    "scheme": "internet-facing",
                    "certificate_arn": known(CERT.replace(REGION, "us-west-2")),
                    "allowed_cidrs": ["192.0.2.128/25"],
                }
            },
            # (a long value is shown cut short)
            f"...: is in us-west-2, but the load balancer is in region=... {REGION}",
        ),
        (
            lambda: {"network": {**JOIN_NETWORK, "private_subnet_ids": known(["subnet-0a1b2c3d"])}},
            'network={"private_subnet_ids": ...} = ["subnet-0a1b2c3d"]: with network={"vpc_id": ...}, '
            "list at least 2",
        ),
    ],
    ids=["bad-cidr", "world-open-union", "certificate-region", "one-subnet"],
)
def test_a_bad_output_value_is_refused_once_known_with_the_validators_message(
    args: Callable[[], DeepSeekServiceArgs], message: str
) -> None:
    text = _refusal(args)
    assert "DeepSeekService 'team-a'" in text
    assert message in text


def test_unknown_cidrs_are_not_world_open() -> None:
    """At preview an Output of a resource not yet created is unknown: the service constructs (the
    CIDR counts as one narrow network) and decides once it is known."""

    def args() -> DeepSeekServiceArgs:
        return {
            "endpoint": {"scheme": "internet-facing", "certificate_arn": CERT, "allowed_cidrs": [_unknown()]},
            "cluster": {"private_access_cidrs": [_unknown()]},
        }

    resources = _service(args)
    assert _one(resources, "kubernetes:networking.k8s.io/v1:Ingress")


def test_a_known_part_is_still_refused_at_construction_showing_the_output_as_unknown() -> None:
    def args() -> DeepSeekServiceArgs:
        return {
            "endpoint": {
                "scheme": "internet-facing",
                "certificate_arn": CERT,
                "allowed_cidrs": [known("10.0.0.0/8"), "0.0.0.0/0"],
            }
        }

    with pytest.raises(SettingsError) as caught:
        _service(args)
    assert f'endpoint={{"allowed_cidrs": ...}} = ["{UNKNOWN}", "0.0.0.0/0"]' in str(caught.value)
    assert "192.0." not in str(caught.value)  # the placeholder is never shown


def test_outputs_where_plain_values_decide_the_plan_are_refused_by_name() -> None:
    def args() -> Any:
        return {
            "compute_mode": known("karpenter"),
            "model": {"variant": known("r1-671b")},
            "autoscaling": {"max_replicas": known(4)},
            "gpu": {"instance_families": [known("p5")]},
            "cluster": {"private_access_cidrs": known(["198.51.100.0/24"])},  # per-item resources: a list
        }

    with pytest.raises(SettingsError) as caught:
        _service(args)
    text = str(caught.value)
    assert "5 invalid setting(s) of DeepSeekService 'team-a'" in text
    for name in (
        "compute_mode=...",
        'model={"variant": ...}',
        'autoscaling={"max_replicas": ...}',
        'gpu={"instance_families": ...}',
    ):
        assert f"{name}: must be a plain value, not an Output" in text
    assert 'cluster={"private_access_cidrs": ...}: give a list (its items may be Outputs)' in text
    assert "__str__" not in text


def test_an_output_region_is_refused_by_name() -> None:
    with pytest.raises(ServiceError, match=r"region=\.\.\.: must be a plain value, not an Output"):
        _service(lambda: {"region": known(REGION)})
