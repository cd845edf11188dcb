"""A variant change keeps serving (issue 31 §2): the service records where vLLM reads its weights
(``weightsLocation``), and the next update, reading it back from the stack's last update, keeps
that location in vLLM's read role while the new variant stages and rolls out; the update after
drops it. The node classes do not carry the variant, so a variant change rolls no node."""

from __future__ import annotations

import json
from typing import Any

from deepseek_eks.automation.render import run_stack_program
from deepseek_eks.components import build
from deepseek_eks.components.service import PROGRAM_SERVICE_NAME, TYPE
from deepseek_eks.settings import PROJECT
from deepseek_eks.settings.pulumi_source import load_settings
from deepseek_eks.testing.mocks import RecordingMocks
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
SNAPSHOT = {"weights__source": "ebs-snapshot", "weights__snapshotId": "snap-0123456789abcdef0"}


def kubernetes(mocks: RecordingMocks, kind: str) -> list[Any]:
    return [r for r in mocks.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind]


def named(mocks: RecordingMocks, kind: str) -> dict[str, str]:
    """Each ``kind`` object's Pulumi name -> its Kubernetes name."""
    return {r.name: r.inputs["metadata"]["name"] for r in kubernetes(mocks, kind)}


def pod_volume(mocks: RecordingMocks) -> dict[str, Any]:
    (deployment,) = kubernetes(mocks, "Deployment")
    volumes = deployment.inputs["spec"]["template"]["spec"]["volumes"]
    (weights,) = [v for v in volumes if "persistentVolumeClaim" in v or "ephemeral" in v]
    return weights


def test_a_new_mountpoint_prefix_gets_its_own_volume_and_claim_beside_the_old_ones() -> None:
    """The API server refuses a bound claim a new size, and a PV pointed at a new prefix would give
    the old pods' restarts new weights with old arguments: a new variant gets a PV and a claim of
    its own names (the same Pulumi resources, so the URNs stay and Pulumi replaces them: the new
    ones first, the old ones deleted last), and the pods move to the new claim by a rollout."""
    old_mocks, before = deploy(model__variant=OLD, **MOUNTPOINT)
    assert f"/{OLD}/" in before["weightsVolume"]
    new_mocks, after = deploy(before, **MOUNTPOINT)  # prod's own variant: a new prefix
    assert after["weightsVolume"] != before["weightsVolume"]
    for kind in ("PersistentVolume", "PersistentVolumeClaim"):
        old, new = named(old_mocks, kind), named(new_mocks, kind)
        assert old.keys() == new.keys() and len(old) == 1, kind  # the same resources (URNs)
        assert set(old.values()).isdisjoint(new.values()), kind  # other Kubernetes objects
    (claim,) = named(new_mocks, "PersistentVolumeClaim").values()
    (pv,) = kubernetes(new_mocks, "PersistentVolume")
    assert pv.inputs["spec"]["claimRef"]["name"] == claim
    assert f"prefix {after['weightsLocation'].split('/', 3)[3]}" in pv.inputs["spec"]["mountOptions"]
    assert pod_volume(new_mocks)["persistentVolumeClaim"]["claimName"] == claim
    _, same = deploy(before, model__variant=OLD, **MOUNTPOINT)  # nothing moved: the same objects
    assert same["weightsVolume"] == before["weightsVolume"]
    assert named(deploy(before, model__variant=OLD, **MOUNTPOINT)[0], "PersistentVolumeClaim") == named(
        old_mocks, "PersistentVolumeClaim"
    )


def test_a_new_snapshot_gets_its_own_volume_snapshot_and_content() -> None:
    """A VolumeSnapshotContent's snapshot handle is immutable: a new bake gets a snapshot and
    content of their own names, and the pods' ephemeral volumes restore from the new one."""
    old_mocks, before = deploy(**SNAPSHOT)
    assert before["weightsVolume"] == SNAPSHOT["weights__snapshotId"]
    new_mocks, _ = deploy(before, **{**SNAPSHOT, "weights__snapshotId": "snap-0fedcba9876543210"})
    for kind in ("VolumeSnapshot", "VolumeSnapshotContent"):
        old, new = named(old_mocks, kind), named(new_mocks, kind)
        assert old.keys() == new.keys() and len(old) == 1, kind
        assert set(old.values()).isdisjoint(new.values()), kind
    (content,) = kubernetes(new_mocks, "VolumeSnapshotContent")
    assert content.inputs["spec"]["source"]["snapshotHandle"] == "snap-0fedcba9876543210"
    (snapshot_name,) = named(new_mocks, "VolumeSnapshot").values()
    assert content.inputs["spec"]["volumeSnapshotRef"]["name"] == snapshot_name
    source = pod_volume(new_mocks)["ephemeral"]["volumeClaimTemplate"]["spec"]["dataSource"]
    assert source["name"] == snapshot_name
    _, streamed = deploy(before, weights__source="s3")  # leaving the volume behind
    assert streamed["weightsVolume"] == ""
