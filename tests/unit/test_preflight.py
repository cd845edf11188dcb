"""automation.preflight against moto's EC2, STS and S3, with Service Quotas stubbed.

moto 5.2.5 implements Service Quotas only for the ``vpc`` service code: GetServiceQuota answers
NoSuchResourceException for every ``ec2`` quota and GetAWSDefaultServiceQuota raises
NotImplementedError. So quotas come from botocore's Stubber on a real client, with responses
shaped like the real API (validated by Stubber against the botocore model).

The moto facts these tests rest on (us-east-1): zones a-f all available; g6.* offered in a, b, c,
d and f; p5en.48xlarge in a and c; p6-b200.48xlarge only in c; p5e.48xlarge nowhere. The first
tests assert them, so a moto upgrade that changes them fails loudly rather than misleadingly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from rich.console import Console
from rich.table import Table
from rich.text import Text

from deepseek_eks.automation import preflight
from deepseek_eks.automation.preflight import (
    Check,
    Status,
    as_json,
    exit_code,
    offered_zones,
    render_table,
    run_preflight,
)
from deepseek_eks.components import SizingError, size
from deepseek_eks.settings import Settings, parse_settings
from deepseek_eks.sizing.catalog import instance_catalog
from deepseek_eks.sizing.planner import SizingPlan
from tests.upstream_platform import platform_facts

ROOT = Path(__file__).resolve().parents[2]

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account

QUOTA_NAMES = {
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-417A185B": "Running On-Demand P instances",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-7212CCBC": "All P Spot Instance Requests",
}
OD_G, SPOT_G, OD_P, SPOT_P = "L-DB2E81BA", "L-3819A6DF", "L-417A185B", "L-7212CCBC"
READ_ONLY_PREFIXES = ("Get", "Describe", "Head", "List")


# --------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials so nothing can reach a real account (conftest does this too; be explicit)."""
    for var, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def aws(fake_env: None) -> Iterator[boto3.Session]:
    """A moto account and a session on it."""
    with mock_aws():
        yield boto3.Session(region_name=REGION)


@pytest.fixture
def aws_calls(aws: boto3.Session) -> list[str]:
    """Every AWS operation made through ``aws`` clients from now on, by API name."""
    calls: list[str] = []
    aws.events.register("before-call", lambda model, **_: calls.append(model.name))
    return calls


@dataclass
class Quotas:
    """A real Service Quotas client with a Stubber; queue answers in the order they are asked."""

    client: Any
    stub: Stubber

    @staticmethod
    def _quota(code: str, value: float, applied: bool = True) -> dict[str, Any]:
        account = ACCOUNT if applied else ""
        return {
            "Quota": {
                "ServiceCode": "ec2",
                "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                "QuotaArn": f"arn:aws:servicequotas:{REGION}:{account}:ec2/{code}",
                "QuotaCode": code,
                "QuotaName": QUOTA_NAMES[code],
                "Value": value,
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
                "UsageMetric": {
                    "MetricNamespace": "AWS/Usage",
                    "MetricName": "ResourceCount",
                    "MetricDimensions": {
                        "Class": "Standard/OnDemand",
                        "Resource": "vCPU",
                        "Service": "EC2",
                        "Type": "Resource",
                    },
                    "MetricStatisticRecommendation": "Maximum",
                },
                "QuotaAppliedAtLevel": "ACCOUNT",
            }
        }

    def applied(self, code: str, value: float) -> None:
        params = {"ServiceCode": "ec2", "QuotaCode": code}
        self.stub.add_response("get_service_quota", self._quota(code, value), params)

    def default_only(self, code: str, value: float) -> None:
        """An account never given its own value: GetServiceQuota fails, the AWS default answers."""
        params = {"ServiceCode": "ec2", "QuotaCode": code}
        self.stub.add_client_error(
            "get_service_quota",
            service_error_code="NoSuchResourceException",
            service_message="The request failed because the specified resource does not exist.",
            http_status_code=400,
            expected_params=params,
        )
        self.stub.add_response("get_aws_default_service_quota", self._quota(code, value, False), params)

    def denied(self, code: str) -> None:
        self.stub.add_client_error(
            "get_service_quota",
            service_error_code="AccessDeniedException",
            service_message="User is not authorized to perform: servicequotas:GetServiceQuota",
            http_status_code=400,
            expected_params={"ServiceCode": "ec2", "QuotaCode": code},
        )


@pytest.fixture
def quotas() -> Iterator[Quotas]:
    client = boto3.client("service-quotas", region_name=REGION)
    with Stubber(client) as stub:
        yield Quotas(client, stub)
        stub.assert_no_pending_responses()  # every queued quota was asked for


# ---------------------------------------------------------------------------------------------- helpers


def make_settings(
    variant: str = "r1-distill-qwen-7b",
    families: tuple[str, ...] = ("g6",),
    capacity: tuple[str, ...] = ("on-demand",),
    **extra: Any,
) -> Settings:
    """Settings from raw config; ``extra`` keys are written with ``__`` for dots (network__vpcId)."""
    config: dict[str, Any] = {
        "aws:region": REGION,
        "deepseek-eks:model.variant": variant,
        "deepseek-eks:gpu.instanceFamilies": json.dumps(list(families)),
        "deepseek-eks:gpu.capacityTypes": json.dumps(list(capacity)),
        # The deployer's egress address: without one the api-access row fails (test_exposure.py).
        "deepseek-eks:cluster.publicAccessCidrs": "203.0.113.7/32",
    }
    for key, value in extra.items():
        config[f"deepseek-eks:{key.replace('__', '.')}"] = (
            value if isinstance(value, str) else json.dumps(value)
        )
    return parse_settings(config)


def row(checks: list[Check], name: str) -> Check:
    found = [c for c in checks if c.name == name]
    assert len(found) == 1, f"{name}: {checks}"
    return found[0]


def statuses(checks: list[Check]) -> dict[str, Status]:
    return {c.name: c.status for c in checks}


def with_types(plan: SizingPlan, *names: str) -> SizingPlan:
    """The plan with its node pool replaced by ``names`` (first = the plan's type), same vLLM args."""
    catalog = instance_catalog().instances
    return replace(plan, fits=tuple(replace(plan.chosen, instance=catalog[n]) for n in names))


# ------------------------------------------------------------------------------------- moto's own facts


def test_moto_offerings_the_tests_rely_on(aws: boto3.Session) -> None:
    ec2 = aws.client("ec2")
    assert offered_zones(ec2, "g6.xlarge") == {f"{REGION}{z}" for z in "abcdf"}
    assert offered_zones(ec2, "p5en.48xlarge") == {"us-east-1a", "us-east-1c"}
    assert offered_zones(ec2, "p6-b200.48xlarge") == {"us-east-1c"}
    assert offered_zones(ec2, "p5e.48xlarge") == set()


def test_planner_refuses_p5e_in_us_east_1() -> None:
    """Why the not-offered tests edit a plan instead of sizing one: the planner knows p5e is absent."""
    with pytest.raises(SizingError, match=r"p5e\.48xlarge is not offered in us-east-1"):
        size(make_settings("r1-671b", ("p5e",)))


# ------------------------------------------------------------------------------- (a) all checks passing


def test_everything_offered_and_enough_quota_passes(
    aws: boto3.Session, aws_calls: list[str], quotas: Quotas
) -> None:
    settings = make_settings()
    plan = size(settings)
    assert plan.instance_type == "g6.xlarge" and plan.nodes_per_replica == 1
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    expected = [
        "credentials",
        "region",
        "zones",
        *(f"offering {t}" for t in plan.instance_types),
        "gpu facts",
        f"quota on-demand {OD_G}",
    ]
    assert [c.name for c in checks] == expected
    assert all(c.status is Status.PASS for c in checks), checks
    assert exit_code(checks) == 0
    assert row(checks, "credentials").detail == (f"account {ACCOUNT} as arn:aws:sts::{ACCOUNT}:user/moto.")
    assert row(checks, "zones").detail == "the new VPC spans us-east-1a, us-east-1b, us-east-1c."
    assert row(checks, "offering g6.xlarge").detail == "offered in us-east-1a, us-east-1b, us-east-1c."
    assert row(checks, "gpu facts").detail == (
        f"bundled hardware facts of {len(plan.instance_types)} plan type(s) match EC2 DescribeInstanceTypes."
    )
    quota = row(checks, f"quota on-demand {OD_G}").detail
    assert "64 vCPUs, 12 needed" in quota and "Running On-Demand G and VT instances" in quota
    # Read-only: only describe/get/head/list operations went out.
    assert {"GetCallerIdentity", "DescribeRegions", "DescribeInstanceTypeOfferings"} <= set(aws_calls)
    assert all(op.startswith(READ_ONLY_PREFIXES) for op in aws_calls), aws_calls


def test_zone_count_of_new_vpc_follows_settings(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings(network__availabilityZones="2")
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    assert row(checks, "zones").detail == "the new VPC spans us-east-1a, us-east-1b."
    assert row(checks, "offering g6.xlarge").detail == "offered in us-east-1a, us-east-1b."


def test_render_table_and_json() -> None:
    checks = [
        Check("credentials", Status.PASS, "account 1 as arn."),
        Check("zones", Status.WARN, "w."),
        Check("region", Status.FAIL, "f."),
    ]
    table = render_table(checks)
    assert isinstance(table, Table)
    assert [c.header for c in table.columns] == ["check", "status", "detail"]
    assert table.row_count == 3
    console = Console(record=True, width=120, color_system="truecolor")
    console.print(table)
    text = console.export_text()
    assert "credentials" in text and "fail" in text
    styles = [cell.style for cell in table.columns[1].cells if isinstance(cell, Text)]
    assert styles == ["bold green", "bold yellow", "bold red"]
    assert as_json(checks) == [
        {"name": "credentials", "status": "pass", "detail": "account 1 as arn."},
        {"name": "zones", "status": "warn", "detail": "w."},
        {"name": "region", "status": "fail", "detail": "f."},
    ]
    assert json.loads(json.dumps(as_json(checks)))[2]["status"] == "fail"
    assert exit_code(checks) == 1
    assert exit_code(checks[:2]) == 0
    assert Status.FAIL == "fail" and isinstance(Status.PASS, str)


# ------------------------------------------------------------------------- (b) offered in too few zones


def test_type_offered_in_one_zone_warns(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings("r1-671b", ("p5en", "p6-b200"), ("spot", "on-demand"))
    plan = size(settings)
    assert plan.instance_types == ["p5en.48xlarge", "p6-b200.48xlarge"]
    quotas.applied(SPOT_P, 576.0)  # 192 vCPUs x 1 node x 3 replicas
    quotas.applied(OD_P, 576.0)

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    assert row(checks, "offering p5en.48xlarge").status is Status.PASS
    one = row(checks, "offering p6-b200.48xlarge")
    assert one.status is Status.WARN
    assert one.detail.startswith("only in us-east-1c: one AZ outage stops every replica")
    assert row(checks, f"quota spot {SPOT_P}").status is Status.PASS
    assert row(checks, f"quota on-demand {OD_P}").status is Status.PASS
    assert exit_code(checks) == 0


def test_plan_type_offered_nowhere_fails(aws: boto3.Session, quotas: Quotas) -> None:
    plan = with_types(size(make_settings("r1-671b", ("p5en",))), "p5e.48xlarge")
    settings = make_settings("r1-671b", ("p5en",))
    quotas.applied(OD_P, 1000.0)

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    fail = row(checks, "offering p5e.48xlarge")
    assert fail.status is Status.FAIL
    assert "the plan's instance type" in fail.detail and "us-east-1a, us-east-1b, us-east-1c" in fail.detail
    assert row(checks, "gpu facts").status is Status.PASS  # moto knows p5e's hardware, just not offered
    assert exit_code(checks) == 1


def test_pool_type_offered_nowhere_warns(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings()
    plan = with_types(size(settings), "g6.xlarge", "p5e.48xlarge")
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    assert row(checks, "offering g6.xlarge").status is Status.PASS
    warn = row(checks, "offering p5e.48xlarge")
    assert warn.status is Status.WARN
    assert "the node pool will never launch it" in warn.detail
    assert exit_code(checks) == 0


# ------------------------------------------------------------------------------------------- (c) quotas


def test_quota_below_one_replica_fails_when_only_capacity_type(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings()  # g6.xlarge: 4 vCPUs x 1 node x maxReplicas 3 = 12
    quotas.applied(OD_G, 2.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    quota = row(checks, f"quota on-demand {OD_G}")
    assert quota.status is Status.FAIL
    assert "is 2 vCPUs, 12 needed and 4 for a single replica" in quota.detail
    assert f"Running On-Demand G and VT instances ({OD_G})" in quota.detail
    assert "Service Quotas console" in quota.detail
    assert exit_code(checks) == 1


def test_quota_short_of_max_replicas_warns_where_scaling_stops(aws: boto3.Session, quotas: Quotas) -> None:
    """Value 8 covers two 4-vCPU replicas: the stack deploys, the autoscaler stops at 2 of 3."""
    settings = make_settings()
    quotas.applied(OD_G, 8.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    quota = row(checks, f"quota on-demand {OD_G}")
    assert quota.status is Status.WARN
    assert "is 8 vCPUs, 12 needed" in quota.detail
    assert "maxReplicas 3 will stop at 2 replica(s)" in quota.detail
    assert "increase of Running On-Demand G and VT instances (L-DB2E81BA) to 12" in quota.detail
    assert exit_code(checks) == 0


def test_quota_follows_max_replicas(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings(autoscaling__maxReplicas="20")  # 4 x 1 x 20 = 80
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    quota = row(checks, f"quota on-demand {OD_G}")
    assert quota.status is Status.WARN
    assert "64 vCPUs, 80 needed: maxReplicas 20 will stop at 16 replica(s)" in quota.detail


def test_spot_short_with_on_demand_allowed_warns(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings(capacity=("spot", "on-demand"))
    quotas.applied(SPOT_G, 0.0)
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    spot = row(checks, f"quota spot {SPOT_G}")
    assert spot.status is Status.WARN
    assert "All G and VT Spot Instance Requests is 0 vCPUs, 12 needed" in spot.detail
    assert "on-demand capacity can still launch it" in spot.detail
    assert row(checks, f"quota on-demand {OD_G}").status is Status.PASS
    assert exit_code(checks) == 0


def test_both_capacity_types_short_of_one_replica_fail(aws: boto3.Session, quotas: Quotas) -> None:
    """Falling back to the other capacity type only helps when that one has room for a replica."""
    settings = make_settings(capacity=("spot", "on-demand"))
    quotas.applied(SPOT_G, 0.0)
    quotas.applied(OD_G, 0.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    assert row(checks, f"quota spot {SPOT_G}").status is Status.FAIL
    assert row(checks, f"quota on-demand {OD_G}").status is Status.FAIL
    assert exit_code(checks) == 1


def test_quota_falls_back_to_aws_default(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings()
    quotas.default_only(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    assert row(checks, f"quota on-demand {OD_G}").status is Status.PASS


def test_unreadable_quota_warns(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings()
    quotas.denied(OD_G)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    quota = row(checks, f"quota on-demand {OD_G}")
    assert quota.status is Status.WARN
    assert "AccessDeniedException" in quota.detail and "12 vCPUs are needed" in quota.detail
    assert exit_code(checks) == 0


def test_p_family_uses_p_quota(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings("r1-distill-llama-70b", ("p5en",))
    plan = size(settings)
    assert plan.instance_type == "p5en.48xlarge"
    quotas.applied(OD_P, 192.0)  # one replica of 192 vCPUs, maxReplicas 3 needs 576

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    quota = row(checks, f"quota on-demand {OD_P}")
    assert quota.status is Status.WARN
    assert "Running On-Demand P instances is 192 vCPUs, 576 needed" in quota.detail


# ------------------------------------------------------------------------------------ (d) credentials


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup


def test_no_credentials_is_one_fail_row(no_credentials: None, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings()

    checks = run_preflight(settings, size(settings))  # no mock_aws: the real default session

    assert len(checks) == 1
    (only,) = checks
    assert (only.name, only.status) == ("credentials", Status.FAIL)
    assert "no AWS credentials" in only.detail
    assert "aws configure" in only.detail and "AWS_PROFILE" in only.detail
    assert exit_code(checks) == 3  # a missing prerequisite (DESIGN.md exit codes)
    assert "Traceback" not in capsys.readouterr().err


def test_missing_profile_is_one_fail_row(no_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "does-not-exist")
    settings = make_settings()

    checks = run_preflight(settings, size(settings))

    assert [(c.name, c.status) for c in checks] == [("credentials", Status.FAIL)]
    assert "does-not-exist" in checks[0].detail and "AWS_PROFILE" in checks[0].detail


class _StubbedSession:
    """Stands in for boto3.Session: hands out one pre-stubbed client per service."""

    def __init__(self, clients: dict[str, Any]):
        self.clients = clients

    def client(self, service: str, **_: Any) -> Any:
        return self.clients[service]


def test_rejected_credentials_are_one_fail_row(fake_env: None) -> None:
    sts = boto3.client("sts", region_name=REGION)
    with Stubber(sts) as stub:
        stub.add_client_error(
            "get_caller_identity",
            service_error_code="ExpiredToken",
            service_message="The security token included in the request is expired",
            http_status_code=403,
        )
        settings = make_settings()
        checks = run_preflight(settings, size(settings), _StubbedSession({"sts": sts}))

    assert [(c.name, c.status) for c in checks] == [("credentials", Status.FAIL)]
    assert "ExpiredToken" in checks[0].detail and "aws sso login" in checks[0].detail


# --------------------------------------------------------------------------------------------- region


def test_region_not_enabled_stops_the_run(aws: boto3.Session) -> None:
    """moto lists ap-east-1 with OptInStatus not-opted-in even when AllRegions=False."""
    settings = parse_settings(
        {
            "aws:region": "ap-east-1",
            "deepseek-eks:gpu.capacityTypes": '["on-demand"]',
            "deepseek-eks:cluster.publicAccessCidrs": "203.0.113.7/32",
        }
    )

    checks = run_preflight(settings, size(settings), boto3.Session(region_name="ap-east-1"))

    assert [c.name for c in checks] == ["credentials", "region"]
    assert row(checks, "region").status is Status.FAIL
    assert "ap-east-1 is an opt-in region this account has not enabled" in checks[1].detail


# ------------------------------------------------------------------------------------------ (e) drift


def test_catalog_drift_warns_naming_the_type(
    aws: boto3.Session, quotas: Quotas, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = instance_catalog()
    stale = replace(bundled.instances["g6.2xlarge"], gpu_memory_mib=20000)
    off_plan = replace(bundled.instances["p5.48xlarge"], vcpu=1)  # not a plan type: not reported
    patched = bundled.replace_instances({**bundled.instances, "g6.2xlarge": stale, "p5.48xlarge": off_plan})
    monkeypatch.setattr(preflight, "instance_catalog", lambda: patched)
    settings = make_settings()
    plan = size(settings)
    assert "g6.2xlarge" in plan.instance_types
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    facts = row(checks, "gpu facts")
    assert facts.status is Status.WARN
    assert "g6.2xlarge gpu_memory_mib: bundled 20000, EC2 says 22888" in facts.detail
    assert "g6.xlarge" not in facts.detail  # only the drifted type is named
    assert "p5.48xlarge" not in facts.detail  # only the plan's types are compared
    assert exit_code(checks) == 0


# ------------------------------------------------------------------------------- (f) your own VPC


def _vpc_with_subnets(session: boto3.Session, *zones: str) -> tuple[str, list[str]]:
    ec2 = session.client("ec2")
    vpc_id = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet_ids = [
        ec2.create_subnet(VpcId=vpc_id, CidrBlock=f"10.20.{i}.0/24", AvailabilityZone=zone)["Subnet"][
            "SubnetId"
        ]
        for i, zone in enumerate(zones)
    ]
    return vpc_id, subnet_ids


def test_own_vpc_uses_the_subnets_zones(aws: boto3.Session, quotas: Quotas) -> None:
    vpc_id, subnets = _vpc_with_subnets(aws, "us-east-1b", "us-east-1d")
    settings = make_settings(network__vpcId=vpc_id, network__privateSubnetIds=subnets)
    quotas.applied(OD_G, 64.0)
    calls: list[str] = []
    aws.events.register("before-call", lambda model, **_: calls.append(model.name))

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    assert preflight.cluster_zones(aws.client("ec2"), settings) == (["us-east-1b", "us-east-1d"], [])
    zones = row(checks, "zones")
    assert zones.status is Status.PASS
    assert zones.detail == f"the private subnets of {vpc_id} are in us-east-1b, us-east-1d."
    assert row(checks, "offering g6.xlarge").detail == "offered in us-east-1b, us-east-1d."
    assert "DescribeSubnets" in calls and "DescribeAvailabilityZones" not in calls
    assert all(op.startswith(READ_ONLY_PREFIXES) for op in calls), calls
    assert exit_code(checks) == 0


def test_own_vpc_subnet_elsewhere_fails(aws: boto3.Session, quotas: Quotas) -> None:
    vpc_id, subnets = _vpc_with_subnets(aws, "us-east-1a", "us-east-1b")
    other_vpc, (stray,) = _vpc_with_subnets(aws, "us-east-1c")
    settings = make_settings(network__vpcId=vpc_id, network__privateSubnetIds=[subnets[0], stray])
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    zones = row(checks, "zones")
    assert zones.status is Status.FAIL
    assert f"subnet {stray} is in {other_vpc}, not network.vpcId {vpc_id}" in zones.detail
    assert "network.privateSubnetIds" in zones.detail
    assert exit_code(checks) == 1


def test_own_vpc_unknown_subnet_fails(aws: boto3.Session, quotas: Quotas) -> None:
    vpc_id, subnets = _vpc_with_subnets(aws, "us-east-1a", "us-east-1b")
    missing = "subnet-0123456789abcdef0"
    settings = make_settings(network__vpcId=vpc_id, network__privateSubnetIds=[*subnets, missing])
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    zones = row(checks, "zones")
    assert zones.status is Status.FAIL
    assert f"subnet {missing} does not exist in us-east-1" in zones.detail
    # The good subnets' zones are still checked for offerings.
    assert row(checks, "offering g6.xlarge").detail == "offered in us-east-1a, us-east-1b."


def test_own_vpc_in_one_zone_fails(aws: boto3.Session, quotas: Quotas) -> None:
    vpc_id, subnets = _vpc_with_subnets(aws, "us-east-1a", "us-east-1a")
    settings = make_settings(network__vpcId=vpc_id, network__privateSubnetIds=subnets)
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    zones = row(checks, "zones")
    assert zones.status is Status.FAIL
    assert "span only us-east-1a" in zones.detail


# ------------------------------------------------------------------------------------ (g) S3 weights


def _s3_settings(bucket: str) -> Settings:
    return make_settings(weights__source="s3", model__repository=f"s3://{bucket}/deepseek/r1-7b")


def test_s3_weights_bucket_found(aws: boto3.Session, quotas: Quotas) -> None:
    aws.client("s3").create_bucket(Bucket="my-weights")
    settings = _s3_settings("my-weights")
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    bucket = row(checks, "weights bucket")
    assert bucket.status is Status.PASS and "my-weights" in bucket.detail
    assert checks[-1] is bucket
    assert exit_code(checks) == 0


def test_s3_weights_bucket_missing(aws: boto3.Session, quotas: Quotas) -> None:
    settings = _s3_settings("no-such-weights")
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    bucket = row(checks, "weights bucket")
    assert bucket.status is Status.FAIL
    assert "bucket no-such-weights not found or not accessible" in bucket.detail
    assert exit_code(checks) == 1


def test_s3_weights_bucket_in_another_region_warns(aws: boto3.Session, quotas: Quotas) -> None:
    aws.client("s3", region_name="eu-west-1").create_bucket(
        Bucket="far-weights", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    settings = _s3_settings("far-weights")
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    bucket = row(checks, "weights bucket")
    assert bucket.status is Status.WARN
    assert "far-weights is in eu-west-1, the cluster in us-east-1" in bucket.detail


def test_hugging_face_repository_has_no_bucket_row(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings(model__repository="deepseek-ai/DeepSeek-R1-Distill-Qwen-7B")
    quotas.applied(OD_G, 64.0)

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    assert "weights bucket" not in statuses(checks)


# ------------------------------------------------------------------------- the command on a real stack


def _cli_preflight(
    monkeypatch: pytest.MonkeyPatch, quotas: Quotas, capsys: pytest.CaptureFixture[str]
) -> tuple:
    import json as json_module

    from deepseek_eks.automation import cli, preflight

    real = preflight.run_preflight
    monkeypatch.setattr(preflight, "run_preflight", lambda s, p: real(s, p, quotas_client=quotas.client))
    reachable = ["--set", "cluster.publicAccessCidrs=203.0.113.7/32"]  # prod's own API is private-only
    code = cli.main(["preflight", "--stack", "prod", "--json", *reachable])
    return code, {row["name"]: row for row in json_module.loads(capsys.readouterr().out)}


def test_preflight_command_on_prod_passes_with_offerings_and_quota(
    aws: boto3.Session, quotas: Quotas, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prod: 70B on g6e.12xlarge (48 vCPU) x maxReplicas 4 = 192 vCPUs, spot then on-demand.
    quotas.applied("L-3819A6DF", 192)
    quotas.applied("L-DB2E81BA", 192)
    for variant in ("nvidia", "standard"):  # AWS publishes the pinned release's images (moto does not)
        path = karpenter_ssm_path("1.34", variant, preflight.pinned_ami_release())
        publish_public_parameter(path, "ami-0aaaaaaaaaaaaaaa1")
    code, rows = _cli_preflight(monkeypatch, quotas, capsys)
    assert code == 0
    assert rows["ami release"]["status"] == "pass"
    assert rows["offering g6e.12xlarge"]["status"] == "pass"
    assert rows["quota on-demand L-DB2E81BA"]["status"] == "pass"


def test_preflight_command_on_prod_fails_on_quota_shortfall(
    aws: boto3.Session, quotas: Quotas, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    quotas.applied("L-3819A6DF", 0)
    quotas.applied("L-DB2E81BA", 32)  # less than one 48-vCPU node
    code, rows = _cli_preflight(monkeypatch, quotas, capsys)
    assert code == 1
    detail = rows["quota on-demand L-DB2E81BA"]["detail"]
    assert rows["quota on-demand L-DB2E81BA"]["status"] == "fail" and "192" in detail and "32" in detail


# ------------------------------------------------------------------ the pinned AMI release (Karpenter)


def publish_public_parameter(name: str, value: str) -> None:
    """Add an AWS-published ``/aws/service/...`` parameter to moto's SSM, the way moto loads its own
    (PutParameter refuses that reserved prefix, as AWS does)."""
    from datetime import UTC, datetime

    from moto.ssm.models import Parameter, ParameterDict, ssm_backends

    store = ssm_backends[ACCOUNT][REGION]._parameters
    dict_getitem = super(ParameterDict, store).__getitem__
    dict_getitem(name).append(
        Parameter(
            account_id=ACCOUNT,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.now(UTC),
            version=1,
            data_type="aws:ec2:image",
        )
    )


def karpenter_ssm_path(minor: str, variant: str, release: str) -> str:
    """The path format read from Karpenter's source (reference/upstream/platform-facts.json)."""
    template = platform_facts()["karpenter"]["ami_alias_ssm_parameter"]["value"]
    return template.format(k8s=minor, arch="x86_64", variant=variant, release=release)


def test_ami_parameters_are_the_paths_karpenter_resolves() -> None:
    release = preflight.pinned_ami_release()
    assert preflight.ami_parameter_names("1.34", release) == [
        karpenter_ssm_path("1.34", "nvidia", release),
        karpenter_ssm_path("1.34", "standard", release),
    ]


def test_karpenter_stack_checks_the_pinned_release_in_ssm(
    aws: boto3.Session, aws_calls: list[str], quotas: Quotas
) -> None:
    settings = make_settings(computeMode="karpenter")
    plan = size(settings)
    quotas.applied(OD_G, 64.0)
    release = preflight.pinned_ami_release()
    for variant, image in (("nvidia", "ami-0aaaaaaaaaaaaaaa1"), ("standard", "ami-0aaaaaaaaaaaaaaa2")):
        publish_public_parameter(karpenter_ssm_path(settings.kubernetes_version, variant, release), image)

    checks = run_preflight(settings, plan, aws, quotas_client=quotas.client)

    ami = row(checks, "ami release")
    assert ami.status is Status.PASS, ami
    assert "ami-0aaaaaaaaaaaaaaa1" in ami.detail and release in ami.detail
    assert "GetParameters" in aws_calls
    assert all(op.startswith(READ_ONLY_PREFIXES) for op in aws_calls), aws_calls


def test_a_release_without_images_for_the_kubernetes_version_fails(
    aws: boto3.Session, quotas: Quotas
) -> None:
    settings = make_settings(computeMode="karpenter", kubernetesVersion="1.33")
    quotas.applied(OD_G, 64.0)
    release = preflight.pinned_ami_release()
    # Only 1.34 images published: the stack's 1.33 has none in this region.
    publish_public_parameter(karpenter_ssm_path("1.34", "nvidia", release), "ami-0aaaaaaaaaaaaaaa1")

    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)

    ami = row(checks, "ami release")
    assert ami.status is Status.FAIL and exit_code(checks) == 1
    assert karpenter_ssm_path("1.33", "nvidia", release) in ami.detail
    assert "Kubernetes 1.33" in ami.detail and "components/versions.py" in ami.detail


def test_auto_mode_has_no_ami_row(aws: boto3.Session, quotas: Quotas) -> None:
    settings = make_settings()  # auto-mode: EKS picks the node AMIs
    quotas.applied(OD_G, 64.0)
    checks = run_preflight(settings, size(settings), aws, quotas_client=quotas.client)
    assert "ami release" not in statuses(checks)


def test_unreadable_ssm_warns_with_the_permission_to_grant() -> None:
    ssm = boto3.client("ssm", region_name=REGION)
    with Stubber(ssm) as stub:
        stub.add_client_error(
            "get_parameters", service_error_code="AccessDeniedException", http_status_code=400
        )
        check = preflight._check_ami_release(ssm, "1.34", "v20260714")
    assert check.status is Status.WARN and "ssm:GetParameters" in check.detail


# ------------------------------------------------------- aws:* provider settings reach the session


def test_session_uses_the_stacks_aws_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deepseek_eks.automation.preflight import aws_session

    credentials = tmp_path / "credentials"
    credentials.write_text("[deploy]\naws_access_key_id = AKIADEPLOYPROFILE\naws_secret_access_key = x\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var, raising=False)
    settings = parse_settings({"aws:profile": "deploy"})
    assert aws_session(settings).get_credentials().access_key == "AKIADEPLOYPROFILE"


def test_session_assumes_the_stacks_roles_and_checks_the_account() -> None:
    from deepseek_eks.automation.preflight import aws_session

    role = f"arn:aws:iam::{ACCOUNT}:role/deploy"
    settings = parse_settings(
        {
            "aws:assumeRoles": json.dumps([{"roleArn": role, "sessionName": "ci"}]),
            "aws:allowedAccountIds": '["111111111111"]',
            "deepseek-eks:cluster.publicAccessCidrs": "203.0.113.7/32",
        }
    )
    with mock_aws():
        identity = aws_session(settings).client("sts").get_caller_identity()
        assert identity["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/deploy/ci"
        checks = run_preflight(settings, size(settings))
    assert [c.name for c in checks] == ["credentials", "account"]
    assert "not in aws:allowedAccountIds" in checks[-1].detail and exit_code(checks) == 1


def test_pinned_weights_addons_are_checked_against_the_versions_eks_offers() -> None:
    from botocore.stub import Stubber

    from deepseek_eks.automation.preflight import _check_addon
    from deepseek_eks.components.serving.weights import weights_addons
    from deepseek_eks.components.versions import MOUNTPOINT_S3_CSI_ADDON, MOUNTPOINT_S3_CSI_ADDON_VERSION

    assert weights_addons("s3-mountpoint") == {MOUNTPOINT_S3_CSI_ADDON: MOUNTPOINT_S3_CSI_ADDON_VERSION}
    assert set(weights_addons("ebs-snapshot")) == {"snapshot-controller"}
    assert weights_addons("huggingface") == weights_addons("s3") == {}
    eks = boto3.client("eks", region_name="us-east-1")

    def answer(*versions: str) -> dict:
        return {
            "addons": [
                {
                    "addonName": MOUNTPOINT_S3_CSI_ADDON,
                    "addonVersions": [{"addonVersion": v} for v in versions],
                }
            ]
        }

    request = {"addonName": MOUNTPOINT_S3_CSI_ADDON, "kubernetesVersion": "1.34"}
    with Stubber(eks) as stub:
        stub.add_response(
            "describe_addon_versions", answer("v2.6.0-eksbuild.1", MOUNTPOINT_S3_CSI_ADDON_VERSION), request
        )
        check = _check_addon(eks, MOUNTPOINT_S3_CSI_ADDON, MOUNTPOINT_S3_CSI_ADDON_VERSION, "1.34")
    assert check.status.value == "pass"
    with Stubber(eks) as stub:
        stub.add_response("describe_addon_versions", answer("v2.6.0-eksbuild.1"), request)
        check = _check_addon(eks, MOUNTPOINT_S3_CSI_ADDON, MOUNTPOINT_S3_CSI_ADDON_VERSION, "1.34")
    assert check.status.value == "fail" and "v2.6.0-eksbuild.1" in check.detail and "pin one" in check.detail
    with Stubber(eks) as stub:
        stub.add_client_error("describe_addon_versions", "AccessDeniedException", "no")
        check = _check_addon(eks, MOUNTPOINT_S3_CSI_ADDON, MOUNTPOINT_S3_CSI_ADDON_VERSION, "1.34")
    assert check.status.value == "warn"


def test_an_unreachable_cluster_api_fails_preflight_with_exit_2() -> None:
    """prod creates its VPC and a private-only endpoint, whose security group admits only itself
    (reference/upstream/endpoint-access-facts.json): preflight refuses it as a settings problem
    (exit 2, the fix named)."""
    facts = json.loads((ROOT / "reference/upstream/endpoint-access-facts.json").read_text())
    inbound = [
        r for r in facts["eks_cluster_security_group_default_rules"]["rules"] if r["type"] == "Inbound"
    ]
    assert [r["source"] for r in inbound] == ["Self"]
    [row] = preflight.api_access_check(parse_settings({}))
    assert row.status is Status.FAIL and "cluster.publicAccessCidrs" in row.detail
    assert preflight.exit_code([row, Check("quota", Status.FAIL, "x")]) == 2
    assert preflight.api_access_check(make_settings()) == []  # it admits 203.0.113.7/32
