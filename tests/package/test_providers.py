"""DeepSeekService deploys with the AWS provider its user gives it (or the program's default provider
and ``aws:region``); it creates a provider of its own only when asked to (``create_aws_provider``)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest

from deepseek_eks import DeepSeekService, DeepSeekServiceArgs
from deepseek_eks.settings import PROJECT
from deepseek_eks.testing.mocks import RecordingMocks, run_with_mocks

AWS_PROVIDER = "pulumi:providers:aws"
JOIN: DeepSeekServiceArgs = {
    "existing_cluster": {"cluster_name": "platform"},
    "network": {
        "vpc_id": "vpc-0a1b2c3d4e5f60718",
        "private_subnet_ids": ["subnet-0a1b2c3d", "subnet-0b1b2c3d"],
    },
    "weights": {"source": "s3"},  # its bucket and Pod Identity role are AWS resources
}


def _run(
    args: DeepSeekServiceArgs,
    *,
    region: str,
    config: dict[str, str] | None = None,
    provider_region: str | None = None,
    join: bool = False,
) -> tuple[RecordingMocks, dict[str, Any]]:
    mocks = RecordingMocks(region=region)

    def program() -> dict[str, Any]:
        providers: dict[str, pulumi.ProviderResource] = {}
        if provider_region:
            providers["aws"] = aws.Provider("mine", region=provider_region)
        if join:
            providers["kubernetes"] = k8s.Provider("existing", kubeconfig="{}")
        service = DeepSeekService("team-a", args, pulumi.ResourceOptions(providers=providers))
        return {"plan": service.plan}

    outputs = run_with_mocks(
        program, mocks, project=PROJECT, stack="dev", config=config or {}, secret_keys=[]
    )
    return mocks, outputs


def _aws_resources(mocks: RecordingMocks) -> list[Any]:
    return [r for r in mocks.resources if r.custom and r.type.startswith("aws:")]


@pytest.mark.parametrize("join", [False, True], ids=["own-cluster", "existing-cluster"])
def test_every_aws_resource_uses_the_provider_passed_in(join: bool) -> None:
    args: DeepSeekServiceArgs = {**JOIN, "region": "eu-central-1"} if join else {"region": "eu-central-1"}
    mocks, outputs = _run(args, region="eu-central-1", provider_region="eu-central-1", join=join)
    (provider,) = mocks.of_type(AWS_PROVIDER)  # the user's; the service made none of its own
    assert provider.name == "mine"
    made = _aws_resources(mocks)
    assert made
    assert {r.provider.rsplit("::", 1)[0] for r in made} == {provider.urn}
    assert outputs["plan"]["region"] == "eu-central-1"
    # The eks.Cluster component (own cluster) is constructed by its own plugin; it gets the
    # provider too, through the component's providers (checked on the wire in test_packaging.py).


def test_the_default_provider_and_aws_region_are_used_everywhere() -> None:
    mocks, outputs = _run(JOIN, region="eu-west-1", config={"aws:region": "eu-west-1"}, join=True)
    assert not mocks.of_type(AWS_PROVIDER)
    made = _aws_resources(mocks)
    assert made and {r.provider for r in made} == {""}  # the SDK sends no reference: the default
    assert outputs["plan"]["region"] == "eu-west-1"
    text = json.dumps([r.inputs for r in mocks.resources], default=str)
    assert "us-east-1" not in text
    assert "eu-west-1" in text


def test_its_own_provider_is_an_explicit_choice() -> None:
    mocks, outputs = _run({"create_aws_provider": True, "region": "ap-south-1"}, region="ap-south-1")
    (provider,) = mocks.of_type(AWS_PROVIDER)
    assert (provider.name, provider.inputs["region"]) == ("team-a-aws", "ap-south-1")
    assert {r.provider.rsplit("::", 1)[0] for r in _aws_resources(mocks)} == {provider.urn}
    assert outputs["plan"]["region"] == "ap-south-1"


@pytest.mark.parametrize(
    ("args", "config", "provider_region", "message"),
    [
        ({}, {}, "eu-central-1", r"'team-a': region: required with your AWS provider"),
        ({"region": "eu-north-1"}, {"aws:region": "eu-west-1"}, None, r"region='eu-north-1': the program's"),
        ({"aws": {"profile": "x"}}, {"aws:region": "eu-west-1"}, None, r"aws=\{...\}: .*create_aws_provider"),
        ({"create_aws_provider": True}, {}, "eu-west-1", r"create_aws_provider=True: .*keep one"),
    ],
    ids=["provider-without-region", "region-against-aws-region", "aws-args-without-own", "both"],
)
def test_conflicting_or_missing_region_and_provider_are_refused(
    args: DeepSeekServiceArgs, config: dict[str, str], provider_region: str | None, message: str
) -> None:
    with pytest.raises(Exception, match=message):
        _run(args, region="eu-west-1", config=config, provider_region=provider_region)


def test_no_region_anywhere_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(Exception, match="region: no region for the program's default AWS provider"):
        _run({}, region="us-east-1")
