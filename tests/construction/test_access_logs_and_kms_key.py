"""endpoint.accessLogs (ALB access logs to a bucket made for them) and cluster.createKmsKey (one
customer-managed key for Kubernetes Secrets and the weights bucket): issue 23 item 8.

What the bucket must be is read from ``reference/upstream/alb-access-logs-facts.json`` (ELB User
Guide; the regional ELB accounts of terraform-provider-aws' aws_elb_service_account, which
pulumi-aws bridges; the AWS Load Balancer Controller's attribute keys).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepseek_eks.automation.render import Construction
from deepseek_eks.components.platform.network import access_log_writers
from deepseek_eks.settings import SettingsError, parse_settings
from deepseek_eks.testing.mocks import ACCOUNT_ID
from tests.conftest import stack_config
from tests.upstream import UPSTREAM

FACTS: dict[str, Any] = json.loads((UPSTREAM / "alb-access-logs-facts.json").read_text())
ATTRIBUTES = "alb.ingress.kubernetes.io/load-balancer-attributes"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _one(run: Construction, type_: str, name_part: str = "") -> Any:
    (found,) = [r for r in run.mocks.of_type(type_) if name_part in r.name]
    return found


def _attributes(run: Construction) -> dict[str, str]:
    ingress = _one(run, "kubernetes:networking.k8s.io/v1:Ingress")
    pairs = ingress.inputs["metadata"]["annotations"][ATTRIBUTES].split(",")
    return dict(p.split("=", 1) for p in pairs)


@pytest.fixture(scope="module")
def logged(construct_module) -> Construction:
    return construct_module(stack_config("dev", endpoint__accessLogs="true"))


def test_the_alb_writes_access_logs_to_the_bucket_made_for_them(logged: Construction) -> None:
    bucket = _one(logged, "aws:s3/bucket:Bucket", "access-logs")
    attributes = _attributes(logged)
    enabled, bucket_key, prefix_key = FACTS["controller_attributes"]["keys"]
    assert attributes[enabled] == "true"
    assert attributes[bucket_key] == bucket.state["bucket"]
    assert "AWSLogs" not in attributes[prefix_key]  # the ELB adds AWSLogs/<account>/ itself
    # ...and the bucket lets the region's ELB account write exactly there.
    policy = json.loads(_one(logged, "aws:s3/bucketPolicy:BucketPolicy", "access-logs").inputs["policy"])
    (grant,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    elb_account = FACTS["elb_account_per_region"]["value"]["us-east-1"]
    assert grant["Principal"] == {"AWS": f"arn:aws:iam::{elb_account}:root"}
    assert grant["Action"] == FACTS["object_key"]["write_action"]
    written = f"{bucket.state['arn']}/{attributes[prefix_key]}/AWSLogs/{ACCOUNT_ID}/*"
    assert grant["Resource"] == written


def test_the_access_log_bucket_is_private_sse_s3_and_expires_its_logs(logged: Construction) -> None:
    (rule,) = _one(
        logged,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "access-logs",
    ).inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == FACTS["encryption"]["value"]
    block = _one(logged, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "access-logs").inputs
    assert all(
        block[k]
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    (expiry,) = _one(
        logged, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "access-logs"
    ).inputs["rules"]
    assert expiry["status"] == "Enabled" and expiry["expiration"]["days"] == 90
    assert expiry["filter"]["prefix"] == _attributes(logged)["access_logs.s3.prefix"] + "/"


def test_the_retention_follows_the_setting(construct) -> None:
    run = construct(stack_config("dev", endpoint__accessLogs="true", endpoint__accessLogsDays="30"))
    (expiry,) = _one(run, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    assert expiry["expiration"]["days"] == 30


def test_no_access_logs_by_default(construct) -> None:
    run = construct(stack_config("dev"))
    assert not [b for b in run.mocks.of_type("aws:s3/bucket:Bucket") if "access-logs" in b.name]
    assert not any(k.startswith("access_logs.") for k in _attributes(run))


def test_every_region_uses_its_elb_account_or_the_log_delivery_service() -> None:
    """Regions with an ELB account grant it; the others (launched from August 2022) the service."""
    accounts = FACTS["elb_account_per_region"]["value"]
    for region, account in accounts.items():
        (grant,) = access_log_writers("arn:aws:s3:::b", region, account_id=ACCOUNT_ID, partition="aws")
        assert grant["Principal"] == {"AWS": f"arn:aws:iam::{account}:root"}, region
    for region in ("me-central-1", "ap-southeast-4", "il-central-1", "ca-west-1"):
        assert region not in accounts
        (grant,) = access_log_writers("arn:aws:s3:::b", region, account_id=ACCOUNT_ID, partition="aws")
        assert grant["Principal"] == {"Service": FACTS["log_delivery_service_principal"]["value"]}


def _refused(config: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as raised:
        parse_settings({f"deepseek-eks:{k}": v for k, v in config.items()})
    return str(raised.value)


def test_settings_that_would_change_nothing_are_refused() -> None:
    message = _refused({"endpoint.accessLogsDays": "30"})
    assert "deepseek-eks:endpoint.accessLogsDays" in message and "endpoint.accessLogs true" in message
    message = _refused(
        {"endpoint.accessLogs": "true", "endpoint.loadBalancer": "nlb", "endpoint.auth": "none"}
    )
    assert "deepseek-eks:endpoint.accessLogs" in message and "ALB only" in message
    assert FACTS["nlb_logs_tls_only"]["value"] is True  # why the NLB is not offered


def test_a_created_key_and_a_given_one_are_refused_naming_both() -> None:
    message = _refused(
        {
            "cluster.createKmsKey": "true",
            "cluster.secretsKmsKeyArn": KEY_ARN,
            "weights.kmsKeyArn": KEY_ARN,
            "weights.source": "s3",
        }
    )
    for key in ("cluster.secretsKmsKeyArn", "weights.kmsKeyArn"):
        assert f"deepseek-eks:{key}" in message
    assert message.count("deepseek-eks:cluster.createKmsKey") >= 2  # each problem names both


def test_the_created_key_rotates_and_encrypts_secrets_and_the_weights(construct) -> None:
    run = construct(stack_config("prod", cluster__createKmsKey="true", weights__source="s3"))
    key = _one(run, "aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    (statement,) = json.loads(key.inputs["policy"])["Statement"]
    assert statement["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:root"}
    arn = key.state["arn"]
    assert _one(run, "eks:index:Cluster").inputs["encryptionConfigKeyArn"] == arn
    (rule,) = _one(
        run,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "weights",
    ).inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": arn}
    policies = [json.loads(p.inputs["policy"]) for p in run.mocks.of_type("aws:iam/rolePolicy:RolePolicy")]
    key_users = [s for p in policies for s in p["Statement"] if s.get("Resource") == arn]
    assert {a for s in key_users for a in s["Action"]} == {"kms:Decrypt", "kms:GenerateDataKey"}


def test_no_key_is_created_by_default(construct) -> None:
    assert construct(stack_config("prod")).mocks.of_type("aws:kms/key:Key") == []
