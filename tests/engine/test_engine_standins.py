"""The stand-in ``aws`` and ``eks`` providers under the real Pulumi engine: custom resources and an
invoke answered from deepseek_eks/testing/mocks.py's tables, and ``eks.Cluster`` constructed as the remote
component it is (the engine calls the ``eks`` plugin's Construct), with the kubeconfig of the local
API server when one is given."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pytest
from pulumi import automation as auto

from deepseek_eks.testing.mocks import COMPUTED_OUTPUTS
from tests.engine.engine import make_engine, standin

LOCAL_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "twin", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "contexts": [{"name": "twin", "context": {"cluster": "twin", "user": "twin"}}],
    "current-context": "twin",
    "users": [{"name": "twin", "user": {}}],
}


def program() -> None:
    """A queue, a role, a VPC look-up and a cluster: one of each path through the stand-ins."""
    config = pulumi.Config()
    queue = aws.sqs.Queue("interruptions", message_retention_seconds=config.get_int("retention") or 300)
    role = aws.iam.Role("nodes", assume_role_policy=json.dumps({"Version": "2012-10-17", "Statement": []}))
    vpc = aws.ec2.get_vpc_output(id="vpc-0a1b2c3d4e5f60718")
    cluster = eks.Cluster(
        "platform",
        name="platform",
        vpc_id=vpc.id,
        private_subnet_ids=["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
        skip_default_node_group=True,
        auto_mode=eks.AutoModeOptionsArgs(enabled=True),
    )
    pulumi.export("queueUrl", queue.url)
    pulumi.export("roleArn", role.arn)
    pulumi.export("vpcCidr", vpc.cidr_block)
    pulumi.export("kubeconfig", cluster.kubeconfig_json)
    pulumi.export("autoModeNodeRoleName", cluster.auto_mode_node_role_name)


@pytest.mark.timeout(900)  # the engine starts a process per plugin per operation
def test_aws_and_eks_standins_through_the_real_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig_file = tmp_path / "twin.kubeconfig"
    kubeconfig_file.write_text(json.dumps(LOCAL_KUBECONFIG))
    engine = make_engine(tmp_path / "engine")
    engine.env[standin.KUBECONFIG_ENV] = str(kubeconfig_file)
    stack = engine.stack("twin-standins", "dev", program)
    stack.set_config("aws:region", auto.ConfigValue("us-east-1"))

    fresh = stack.preview()
    assert fresh.change_summary.get("create", 0) >= 4, fresh.stdout  # stack, queue, role, cluster

    up = stack.up()
    outputs = {k: v.value for k, v in up.outputs.items()}
    assert outputs["queueUrl"].startswith("https://sqs.us-east-1.amazonaws.com/")
    assert outputs["roleArn"].startswith("arn:aws:iam::")
    assert outputs["vpcCidr"] == "10.20.0.0/16"
    # The remote component answered with the local API server's kubeconfig, not the mock's.
    assert json.loads(outputs["kubeconfig"])["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    # The rest of the cluster's outputs are the mock table's (what the offline render sees).
    table = standin.computed_state(
        "eks:index:Cluster", "platform", {"name": "platform", "autoMode": {"enabled": True}}, "us-east-1"
    )[1]
    assert outputs["autoModeNodeRoleName"] == table["autoModeNodeRoleName"] != ""
    types = {r["type"] for r in stack.export_stack().deployment["resources"]}
    assert {"aws:sqs/queue:Queue", "aws:iam/role:Role", "eks:index:Cluster"} <= types

    assert stack.preview(expect_no_changes=True).change_summary.get("same")

    stack.set_config("retention", auto.ConfigValue("600"))
    diff = stack.preview(diff=True)
    assert diff.change_summary.get("update") == 1, diff.stdout
    assert "messageRetentionSeconds" in diff.stdout

    stack.destroy()
    assert not stack.export_stack().deployment.get("resources")


@pytest.mark.timeout(900)  # the engine starts a process per plugin per operation
def test_a_type_the_tables_lack_fails_naming_the_table(tmp_path: Path) -> None:
    assert "aws:ec2/instance:Instance" not in COMPUTED_OUTPUTS
    engine = make_engine(tmp_path)
    stack = engine.stack(
        "twin-unknown",
        "dev",
        lambda: aws.ec2.Instance("box", ami="ami-0123456789abcdef0", instance_type="t3.micro"),
    )
    with pytest.raises(auto.errors.CommandError, match=r"COMPUTED_OUTPUTS in deepseek_eks/testing/mocks\.py"):
        stack.preview()
