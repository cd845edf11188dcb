"""The weights roles list only their prefix, no setting can widen them with a wildcard, and every
S3 call the stager makes is one its role allows.

The IAM action, resource and condition keys of each S3 call are upstream facts
(``reference/upstream/eks-iam-facts.json``, Service Authorization Reference for Amazon S3); the
evaluator below applies IAM's Allow semantics for the operators the policies use.
"""

from __future__ import annotations

import fnmatch
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from deepseek_eks.components.serving.scripts import stage_weights as sw
from deepseek_eks.components.serving.weights import weights_access_policy
from deepseek_eks.settings import SettingsError, parse_settings
from tests.conftest import stack_config
from tests.unit.test_stage_weights import hub_api
from tests.upstream import UPSTREAM

S3_CALLS = json.loads((UPSTREAM / "eks-iam-facts.json").read_text())["s3_actions_by_operation"]["value"]
BUCKET = "weights-bucket"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
PREFIX = "r1-distill-qwen-7b/"
P = "deepseek-eks:"


def _condition_holds(operator: str, wanted: dict[str, Any], context: dict[str, str]) -> bool:
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    for key, values in wanted.items():
        values = _as_list(values)
        if key not in context:
            if if_exists:
                continue
            return False
        if base == "StringLike" and not any(fnmatch.fnmatchcase(context[key], v) for v in values):
            return False
        if base == "StringEquals" and context[key] not in values:
            return False
        if base not in ("StringLike", "StringEquals"):
            raise AssertionError(f"operator {operator} not modelled")
    return True


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def allowed(policy: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    """Whether an Allow statement of ``policy`` grants ``action`` on ``resource`` (no Deny here)."""
    for statement in policy["Statement"]:
        actions, resources = _as_list(statement["Action"]), _as_list(statement["Resource"])
        if action not in actions or not any(fnmatch.fnmatchcase(resource, r) for r in resources):
            continue
        if all(_condition_holds(op, keys, context) for op, keys in statement.get("Condition", {}).items()):
            return True
    return False


def call_allowed(policy: dict[str, Any], operation: str, params: dict[str, Any]) -> bool:
    fact = S3_CALLS[operation]
    resource = BUCKET_ARN if fact["resource"] == "bucket" else f"{BUCKET_ARN}/{params['Key']}"
    context = (
        {"s3:prefix": params["Prefix"]}
        if "Prefix" in params and "s3:prefix" in fact.get("condition_keys", [])
        else {}
    )
    return allowed(policy, fact["action"], resource, context)


@pytest.mark.parametrize("write", [False, True])
def test_the_weights_roles_list_only_their_prefix(write: bool) -> None:
    policy = weights_access_policy(BUCKET_ARN, PREFIX, write=write)
    assert call_allowed(policy, "ListObjectsV2", {"Prefix": PREFIX})
    assert call_allowed(policy, "ListObjectsV2", {"Prefix": PREFIX + "config.json"})
    assert not call_allowed(policy, "ListObjectsV2", {}), "a listing of the whole bucket"
    assert not call_allowed(policy, "HeadBucket", {}), "HeadBucket is ListBucket with no prefix"
    assert not call_allowed(policy, "ListObjectsV2", {"Prefix": "r1-distill-qwen-7b-old/"})
    assert not call_allowed(policy, "GetObject", {"Key": "other/config.json"})


def test_the_whole_bucket_when_asked_lists_everything() -> None:
    """model.repository s3://bucket: the prefix is "" and the reader may list the bucket."""
    policy = weights_access_policy(BUCKET_ARN, "", write=False)
    assert call_allowed(policy, "ListObjectsV2", {}) and call_allowed(policy, "GetObject", {"Key": "a/b"})


@pytest.mark.parametrize(
    "repository", ["s3://my-bucket/*", "s3://my-bucket/models/*/r1", "s3://my-bucket/r1*"]
)
def test_a_wildcard_in_the_repository_prefix_is_refused(repository: str) -> None:
    with pytest.raises(SettingsError) as raised:
        parse_settings({f"{P}model.repository": repository, f"{P}weights.source": "s3"})
    message = str(raised.value)
    assert f"{P}model.repository" in message and "wildcard" in message
    assert "s3://bucket/deepseek/r1" in message


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every S3 call of the stager's boto3 clients (default session), against moto's S3."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    calls: list[tuple[str, dict[str, Any]]] = []
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        assert session is not None

        def record(model: Any, params: dict[str, Any], **_: Any) -> None:
            calls.append((model.name, dict(params)))

        session.events.register("provide-client-params.s3", record)
        yield calls


def test_every_call_the_stager_makes_is_allowed_by_its_role(
    recorded: list[tuple[str, dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_bytes(b"{}")
    monkeypatch.setattr(sw, "download", lambda repo, revision, workdir: tmp_path)
    # The Hub lists what was downloaded (the stager checks the staged files against its listing).
    monkeypatch.setitem(
        sys.modules, "huggingface_hub", types.SimpleNamespace(HfApi=hub_api({"config.json": b"{}"}))
    )
    argv = ["--bucket", BUCKET, "--prefix", PREFIX, "--repo", "deepseek-ai/x", "--revision", "abc"]
    argv += ["--region", "us-east-1", "--workdir", str(tmp_path / "w")]
    assert sw.main(argv) == 0  # stages
    assert sw.main(argv) == 0  # finds the marker
    policy = weights_access_policy(BUCKET_ARN, PREFIX, write=True)
    assert recorded
    refused = [(op, params) for op, params in recorded if not call_allowed(policy, op, params)]
    assert refused == []


KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SSE_KMS = json.loads((UPSTREAM / "eks-iam-facts.json").read_text())["s3_sse_kms_permissions"]["value"]


@pytest.mark.parametrize("write", [False, True])
def test_with_a_weights_key_the_roles_may_use_it_as_s3_needs(write: bool) -> None:
    policy = weights_access_policy(BUCKET_ARN, PREFIX, write=write, kms_key_arn=KEY)
    needed = SSE_KMS["multipart_upload"] if write else SSE_KMS["read"]
    assert all(allowed(policy, action, KEY, {}) for action in needed)
    if not write:
        assert not any(allowed(policy, a, KEY, {}) for a in SSE_KMS["write"]), "the reader cannot encrypt"
    assert not allowed(policy, "kms:Decrypt", KEY.replace("1234abcd", "99999999"), {}), "only that key"
    assert not allowed(weights_access_policy(BUCKET_ARN, PREFIX, write=write), "kms:Decrypt", KEY, {})


def test_the_project_bucket_is_encrypted_with_the_weights_key(construct) -> None:  # type: ignore[no-untyped-def]
    run = construct(stack_config("dev", weights__source="s3", weights__kmsKeyArn=KEY))
    token = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    (sse,) = run.mocks.of_type(token)
    rule = sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]
    assert rule == {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": KEY}
    policies = [json.loads(r.inputs["policy"]) for r in run.mocks.of_type("aws:iam/rolePolicy:RolePolicy")]
    assert sum(any(s.get("Resource") == KEY for s in p["Statement"]) for p in policies) == 2  # reader, stager


def test_a_weights_key_without_s3_weights_is_refused() -> None:
    with pytest.raises(SettingsError) as raised:
        parse_settings({f"{P}weights.kmsKeyArn": KEY})
    assert f"{P}weights.kmsKeyArn" in str(raised.value) and "only applies with weights.source s3" in str(
        raised.value
    )


def test_the_staging_claim_the_role_may_delete_is_the_one_the_stager_writes() -> None:
    from deepseek_eks.components.serving.weights import STAGING_CLAIM_NAME

    assert STAGING_CLAIM_NAME == sw.IN_PROGRESS_NAME
    policy = weights_access_policy(BUCKET_ARN, PREFIX, write=True)
    assert call_allowed(policy, "DeleteObject", {"Key": sw.in_progress_key(PREFIX)})
    assert not call_allowed(policy, "DeleteObject", {"Key": f"{PREFIX}model.safetensors"})
    assert not call_allowed(weights_access_policy(BUCKET_ARN, PREFIX, write=False), "DeleteObject",
                            {"Key": sw.in_progress_key(PREFIX)})  # fmt: skip


# A variant change keeps serving (issue 31 §2): the deployed pods' weights stay readable until the
# new variant has rolled out (InferenceArgs.previous_weights_location).
OLD_PREFIX = "r1-distill-llama-8b/"


def test_a_variant_change_keeps_the_served_weights_readable_by_vllm_only() -> None:
    served = f"s3://{BUCKET}/{OLD_PREFIX}"
    reader = weights_access_policy(BUCKET_ARN, PREFIX, write=False, still_served=served)
    for prefix in (PREFIX, OLD_PREFIX):
        assert call_allowed(reader, "ListObjectsV2", {"Prefix": prefix})
        assert call_allowed(reader, "GetObject", {"Key": f"{prefix}model-00001-of-00002.safetensors"})
    assert not call_allowed(reader, "ListObjectsV2", {}), "still no listing of the whole bucket"
    assert not call_allowed(reader, "GetObject", {"Key": "r1-671b/config.json"})
    assert not call_allowed(reader, "PutObject", {"Key": f"{OLD_PREFIX}x"})
    stager = weights_access_policy(BUCKET_ARN, PREFIX, write=True, still_served=served)
    assert not call_allowed(stager, "GetObject", {"Key": f"{OLD_PREFIX}config.json"})
    # Once the deployed location is the new one (the next update), the old prefix is gone.
    settled = weights_access_policy(BUCKET_ARN, PREFIX, write=False, still_served=f"s3://{BUCKET}/{PREFIX}")
    assert settled == weights_access_policy(BUCKET_ARN, PREFIX, write=False)


def test_weights_served_from_another_bucket_stay_readable_there() -> None:
    reader = weights_access_policy(BUCKET_ARN, PREFIX, write=False, still_served="s3://acme-models/r1/")
    assert allowed(reader, "s3:GetObject", "arn:aws:s3:::acme-models/r1/config.json", {})
    assert allowed(reader, "s3:ListBucket", "arn:aws:s3:::acme-models", {"s3:prefix": "r1/"})
    assert not allowed(reader, "s3:GetObject", "arn:aws:s3:::acme-models/other/config.json", {})
