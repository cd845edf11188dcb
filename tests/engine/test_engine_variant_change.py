"""A variant change of prod, rehearsed through the real Pulumi engine, the real Kubernetes provider
and the real kube-apiserver (issue 31 §2), for each way vLLM can read its weights from AWS: streamed
from S3, mounted with Mountpoint, restored from an EBS snapshot.

The update must go through (no refused object), every weights volume object must be replaced by
one of a new name rather than changed in place (the API server refuses a new size of a bound claim
and a new snapshot handle), with the old one deleted only after the workload moved, and the old
prefix must stay in vLLM's read policy while the old workload may still start pods. AWS answers
from the stand-ins (tests/engine/cluster.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from tests.engine.cluster import stack_on_twin

NEW_VARIANT = "r1-distill-qwen-32b"
SOURCES = {
    "s3": {},
    "s3-mountpoint": {},
    "ebs-snapshot": {"weights.snapshotId": "snap-0123456789abcdef0", "weights.fastSnapshotRestore": "true"},
}
VOLUME_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "VolumeSnapshot", "VolumeSnapshotContent")


def volume_objects(stack: Any) -> dict[str, str]:
    """Each weights volume object in the state: its URN -> its Kubernetes name."""
    out = {}
    for r in stack.export_stack().deployment.get("resources") or []:
        outputs = r.get("outputs") or {}
        if outputs.get("kind") in VOLUME_KINDS and "weights" in r["urn"]:
            out[r["urn"]] = outputs["metadata"]["name"]
    return out


def readable_prefixes(stack: Any) -> set[str]:
    """What vLLM's read role may get (its inline policy's s3:GetObject resources)."""
    found = set()
    for r in stack.export_stack().deployment.get("resources") or []:
        if r["type"] != "aws:iam/rolePolicy:RolePolicy" or "reader" not in r["urn"]:
            continue
        policy = json.loads((r.get("outputs") or r.get("inputs"))["policy"])
        for statement in policy["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "s3:GetObject" in actions:
                resources = statement["Resource"]
                found |= set(resources if isinstance(resources, list) else [resources])
    return found


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("source", list(SOURCES))
def test_a_variant_change_of_prod_goes_through_and_keeps_the_old_weights_readable(
    tmp_path: Path, source: str
) -> None:
    started = time.monotonic()
    with stack_on_twin(tmp_path, PROJECT_ROOT, "prod") as stack:
        stack.set_config("deepseek-eks:cluster.publicAccessCidrs", auto.ConfigValue('["203.0.113.7/32"]'))
        stack.set_config("deepseek-eks:weights.source", auto.ConfigValue(source))
        for key, value in SOURCES[source].items():
            stack.set_config(f"deepseek-eks:{key}", auto.ConfigValue(value))
        first = stack.up()
        assert first.summary.result == "succeeded"
        before = volume_objects(stack)
        old_location = first.outputs["weightsLocation"].value
        assert bool(before) == (source != "s3"), before

        stack.set_config("deepseek-eks:model.variant", auto.ConfigValue(NEW_VARIANT))
        if source == "ebs-snapshot":  # a new variant is a new bake
            stack.set_config("deepseek-eks:weights.snapshotId", auto.ConfigValue("snap-0fedcba9876543210"))
        preview = stack.preview(diff=True)
        assert "replace" in preview.change_summary or source == "s3", preview.change_summary
        second = stack.up()
        assert second.summary.result == "succeeded"
        after = volume_objects(stack)
        assert after.keys() == before.keys()  # the same resources (URNs) ...
        assert set(after.values()).isdisjoint(before.values())  # ... now other Kubernetes objects
        if source != "ebs-snapshot":
            assert second.outputs["weightsLocation"].value != old_location
            prefixes = readable_prefixes(stack)
            old = old_location.removeprefix("s3://")
            assert any(p.startswith(f"arn:aws:s3:::{old}") for p in prefixes), prefixes  # still readable
            assert any(f"/{NEW_VARIANT}/" in p for p in prefixes), prefixes
            # The update after the rollout drops the old prefix.
            assert stack.up().summary.result == "succeeded"
            assert not any(p.startswith(f"arn:aws:s3:::{old}") for p in readable_prefixes(stack))
        stack.destroy()
    print(f"prod variant change ({source}) through the engine: {time.monotonic() - started:.0f}s")
