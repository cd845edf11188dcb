"""A variant change keeps serving (issue 31 §2): the service records where vLLM reads its weights
(``weightsLocation``), and the next update, reading it back from the stack's last update, keeps
that location in vLLM's read role while the new variant stages and rolls out; the update after
drops it. The node classes do not carry the variant, so a variant change rolls no node."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepseek_eks.automation.mocks import RecordingMocks
from deepseek_eks.automation.render import run_stack_program
from deepseek_eks.components import build
from deepseek_eks.components.service import PROGRAM_SERVICE_NAME, TYPE
from deepseek_eks.settings import PROJECT
from deepseek_eks.settings.pulumi_source import load_settings
from tests.conftest import stack_config
from tests.upstream import UPSTREAM

OLD = "r1-distill-qwen-32b"


def deploy(previous: dict[str, Any] | None = None, **overrides: str) -> tuple[RecordingMocks, dict[str, Any]]:
    urn = f"urn:pulumi:prod::{PROJECT}::{TYPE}::{PROGRAM_SERVICE_NAME}"
    mocks = RecordingMocks(previous={urn: {"type": TYPE, "outputs": previous}} if previous else None)
    outputs = run_stack_program(
        lambda: build(load_settings()).outputs, mocks, stack_config("prod", **overrides)
    )
    return mocks, outputs


def reader_policy(mocks: RecordingMocks) -> dict[str, Any]:
    (role_policy,) = [
        r for r in mocks.resources if r.type == "aws:iam/rolePolicy:RolePolicy" and "reader" in r.name
    ]
    return json.loads(role_policy.inputs["policy"])


def readable(policy: dict[str, Any]) -> set[str]:
    return {
        s["Resource"]
        for s in policy["Statement"]
        if s["Action"] == ["s3:GetObject"] or s["Action"] == "s3:GetObject"
    }


def test_the_first_update_records_where_vllm_reads_and_reads_only_there() -> None:
    mocks, outputs = deploy()  # prod: weights.source s3
    location = outputs["weightsLocation"]
    assert location.startswith("s3://") and f"/{outputs['variant']}/" in location  # /<commit>/ may follow
    assert len(readable(reader_policy(mocks))) == 1


def test_a_variant_change_keeps_the_served_prefix_until_the_next_update() -> None:
    _, before = deploy(model__variant=OLD)
    mocks, after = deploy(
        before,
    )  # prod's own variant now, the old one deployed
    resources = readable(reader_policy(mocks))
    old_prefix = before["weightsLocation"].removeprefix("s3://")
    assert f"arn:aws:s3:::{old_prefix}*" in resources and f"/{OLD}/" in old_prefix
    assert any(f"/{after['variant']}/" in r for r in resources) and len(resources) == 2
    settled, _ = deploy(after)  # the next update: the old prefix is dropped
    assert not any(f"/{OLD}/" in r for r in readable(reader_policy(settled)))


def test_node_classes_carry_no_variant_so_a_variant_change_rolls_no_node() -> None:
    facts = json.loads((UPSTREAM / "platform-facts.json").read_text())
    assert facts["karpenter"]["ec2nodeclass_tags_drift"]["value"] is True  # spec.tags drifts nodes
    classes = {}
    for variant in (OLD, None):
        mocks, _ = deploy(**({"model__variant": variant} if variant else {}))
        classes[variant] = [
            r.inputs["spec"] for r in mocks.resources if r.inputs.get("kind") == "EC2NodeClass"
        ]
    assert classes[OLD] and [c["tags"] for c in classes[OLD]] == [c["tags"] for c in classes[None]]
    assert all("variant" not in c["tags"] for c in classes[None])


MOUNTPOINT = {"weights__source": "s3-mountpoint"}


def refused(previous: dict[str, Any], **overrides: str) -> tuple[str, RecordingMocks]:
    """The program's refusal of an update over ``previous``, and what it registered first."""
    urn = f"urn:pulumi:prod::{PROJECT}::{TYPE}::{PROGRAM_SERVICE_NAME}"
    mocks = RecordingMocks(previous={urn: {"type": TYPE, "outputs": previous}})
    with pytest.raises(Exception) as raised:
        run_stack_program(lambda: build(load_settings()).outputs, mocks, stack_config("prod", **overrides))
    return str(raised.value), mocks


def test_a_mountpoint_volume_records_its_prefix_and_refuses_new_contents_before_anything() -> None:
    _, before = deploy(model__variant=OLD, **MOUNTPOINT)
    assert f"/{OLD}/" in before["weightsVolume"]
    _, same = deploy(before, model__variant=OLD, **MOUNTPOINT)  # nothing moved: goes ahead
    assert same["weightsVolume"] == before["weightsVolume"]
    message, mocks = refused(before, **MOUNTPOINT)  # prod's own variant: a new prefix on the volume
    assert "cannot change in place" in message and f"{PROJECT}:weights.source" in message
    assert "another stack" in message and "Nothing was changed" in message
    assert not [r for r in mocks.resources if r.custom]


def test_an_ebs_snapshot_volume_refuses_a_new_snapshot() -> None:
    snapshot = {"weights__source": "ebs-snapshot", "weights__snapshotId": "snap-0123456789abcdef0"}
    _, before = deploy(**snapshot)
    assert before["weightsVolume"] == "snap-0123456789abcdef0"
    message, _ = refused(before, **{**snapshot, "weights__snapshotId": "snap-0fedcba9876543210"})
    assert "snap-0fedcba9876543210" in message and "cannot change in place" in message
    _, streamed = deploy(before, weights__source="s3")  # leaving the volume behind is allowed
    assert streamed["weightsVolume"] == ""
