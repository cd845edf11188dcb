"""Issue 20's done-means: a program outside the checkout, with the wheel installed in a fresh venv,
wires ``DeepSeekService`` to resources of its own (their Outputs: ``vpc.id``, the subnets' ids,
``role.name``) and to its own AWS provider for eu-west-1, under ``deepseek_eks.testing``'s mocks.
Every AWS resource the service creates uses that provider, and the Outputs' values reach the
resources' inputs; an Output that resolves to a bad value fails with the validator's message."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.components.wiring import WIRING
from tests.package.test_library import SITE
from tests.package.test_packaging import HAS_WHEEL

pytestmark = pytest.mark.skipif(not HAS_WHEEL, reason="the `wheel` package (requirements-dev.txt) is needed")

PROGRAM = """
import json
import sys

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from deepseek_eks import DeepSeekService
from deepseek_eks.testing import Mocks, run

BAD = sys.argv[1:] == ["bad"]
mocks = Mocks(region="eu-west-1")
seen = {}


def keep(key, output):
    output.apply(lambda value: seen.__setitem__(key, value))


def program():
    mine = aws.Provider("mine", region="eu-west-1")
    on_mine = pulumi.ResourceOptions(provider=mine)
    vpc = aws.ec2.Vpc("platform", cidr_block="10.0.0.0/16", opts=on_mine)
    subnets = [
        aws.ec2.Subnet(f"nodes-{i}", vpc_id=vpc.id, cidr_block=f"10.0.{i}.0/24", opts=on_mine)
        for i in range(2)
    ]
    role = aws.iam.Role("karpenter-nodes", assume_role_policy="{}", opts=on_mine)
    joined = k8s.Provider("platform", kubeconfig="{}")  # the existing cluster's
    clients = vpc.id.apply(lambda _: "not-a-cidr" if BAD else "10.77.0.0/16")
    keep("vpc", vpc.id)
    keep("subnets", pulumi.Output.all(*[s.id for s in subnets]))
    keep("role", role.name)
    DeepSeekService(
        "team-a",
        {
            "region": "eu-west-1",
            "compute_mode": "karpenter",
            "existing_cluster": {"cluster_name": "platform", "node_role_name": role.name},
            "network": {"vpc_id": vpc.id, "private_subnet_ids": [s.id for s in subnets]},
            "endpoint": {"allowed_cidrs": [clients]},
            "image": {"registry": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/docker-hub"},
            "weights": {"source": "s3"},
        },
        pulumi.ResourceOptions(providers={"aws": mine, "kubernetes": joined}),
    )


try:
    resources = run(program, config={"aws:region": "eu-west-1"}, mocks=mocks)
except Exception as error:
    print(error, file=sys.stderr)
    sys.exit(1)
fields = ("type", "name", "urn", "custom", "provider", "inputs")
print(json.dumps({
    "seen": seen,
    "resources": [{f: getattr(r, f) for f in fields} for r in resources],
    "invokes": [{"token": i.token, "args": dict(i.args)} for i in mocks.invokes],
}, default=str))
"""
USERS = {"platform", "nodes-0", "nodes-1", "karpenter-nodes", "mine"}


def _run(venv: Path, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "program.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AWS_REGION", "AWS_DEFAULT_REGION")}
    env["PYTHONPATH"] = SITE  # the tested dependencies; deepseek_eks comes from the venv's wheel
    return subprocess.run(
        [str(venv / "bin" / "python"), "program.py", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _placeholders() -> set[str]:
    return {wire.placeholder(i, "eu-west-1") for wire in WIRING.values() for i in range(2)}


def test_a_program_outside_the_checkout_wires_the_service_with_outputs_and_its_provider(
    package_venv: Path, tmp_path: Path
) -> None:
    result = _run(package_venv, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out: dict[str, Any] = json.loads(result.stdout)
    seen, resources = out["seen"], out["resources"]
    (provider,) = [r for r in resources if r["type"] == "pulumi:providers:aws"]
    assert provider["name"] == "mine" and provider["inputs"]["region"] == "eu-west-1"
    made = [r for r in resources if r["custom"] and r["type"].startswith("aws:") and r["name"] not in USERS]
    assert len(made) >= 3  # the weights bucket and its Pod Identity roles, the pull-through policy
    assert {r["provider"].rsplit("::", 1)[0] for r in made} == {provider["urn"]}

    # The Outputs' values arrived where the service uses them.
    (node_class,) = [r for r in resources if r["inputs"].get("kind") == "EC2NodeClass"]
    spec = node_class["inputs"]["spec"]
    assert spec["role"] == seen["role"]
    assert sorted(t["id"] for t in spec["subnetSelectorTerms"]) == sorted(seen["subnets"])
    (pull,) = [r for r in made if r["name"] == "team-a-image-pull-through-cache"]
    assert pull["inputs"]["role"] == seen["role"]
    invoked = {(i["token"], i["args"].get("id")) for i in out["invokes"]}
    assert ("aws:ec2/getVpc:getVpc", seen["vpc"]) in invoked
    assert {("aws:ec2/getSubnet:getSubnet", s) for s in seen["subnets"]} <= invoked
    (ingress,) = [r for r in resources if r["type"] == "kubernetes:networking.k8s.io/v1:Ingress"]
    assert (
        "10.77.0.0/16"
        in ingress["inputs"]["metadata"]["annotations"]["alb.ingress.kubernetes.io/inbound-cidrs"]
    )
    text = json.dumps(resources)
    assert not {p for p in _placeholders() if p in text}  # no placeholder reached a resource


def test_an_output_that_resolves_to_a_bad_cidr_fails_with_the_validators_message(
    package_venv: Path, tmp_path: Path
) -> None:
    result = _run(package_venv, tmp_path, "bad")
    assert result.returncode == 1, result.stdout[-2000:]
    assert "DeepSeekService 'team-a'" in result.stderr
    assert 'endpoint={"allowed_cidrs": ...}[0] = "not-a-cidr": needs a prefix length' in result.stderr
