"""``automation bake-weights`` against moto: the volume, the snapshot, their tags, a second run that
finds the snapshot, a resumed run, fast snapshot restore, and cleanup when a step fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.validate import validate_parameters
from moto import mock_aws

from deepseek_eks.automation.bake import (
    DONE_MARKER,
    PLACEHOLDER_SNAPSHOT,
    TAG_FILLED,
    TAG_REVISION,
    BakeError,
    BakeSpec,
    InstanceFiller,
    bake,
    bake_script,
    create_volume,
    spec_for,
)
from deepseek_eks.components import size
from deepseek_eks.settings import PROJECT, parse_settings
from tests.conftest import stack_config

REGION = "us-east-1"


@pytest.fixture
def ec2() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def subnet(ec2: Any) -> tuple[str, str]:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    found = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=f"{REGION}b")["Subnet"]
    return found["SubnetId"], found["AvailabilityZone"]


def spec(ec2: Any, **kw: Any) -> BakeSpec:
    subnet_id, zone = subnet(ec2)
    config = stack_config(
        "prod", weights__source="ebs-snapshot", weights__snapshotId="snap-0123456789abcdef0"
    )
    plan = size(parse_settings(config.values, config.secret_keys, "prod"))
    return spec_for("prod", plan, subnet_id, zone, kw.pop("fast", ()))


class RecordingFiller:
    def __init__(self, fail: bool = False):
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, ec2: Any, spec: BakeSpec, volume_id: str) -> None:
        self.calls.append(volume_id)
        if self.fail:
            raise RuntimeError("download interrupted")


def tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def ours(ec2: Any, what: str) -> list[dict[str, Any]]:
    """Snapshots or volumes the bake tagged (moto's account also holds its AMIs' snapshots)."""
    if what == "snapshots":
        found = ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    else:
        found = ec2.describe_volumes()["Volumes"]
    return [r for r in found if "deepseek-eks:role" in tags(r)]


def test_bake_makes_an_encrypted_tagged_snapshot_and_deletes_its_volume(ec2: Any) -> None:
    s = spec(ec2)
    filler = RecordingFiller()
    volumes_seen: list[dict[str, Any]] = []

    def fill(client: Any, bake_spec: BakeSpec, volume_id: str) -> None:
        volumes_seen.extend(client.describe_volumes(VolumeIds=[volume_id])["Volumes"])
        filler(client, bake_spec, volume_id)

    result = bake(ec2, s, fill, say=lambda _: None)
    (volume,) = volumes_seen
    assert volume["VolumeType"] == "gp3" and volume["Encrypted"] is True
    assert volume["Size"] == s.volume_gib >= 130  # the 70B distill's ~131 GiB checkpoint fits
    # gp3: throughput at most 1000 MiB/s and 0.25 MiB/s per IOPS (EBS user guide).
    assert volume["Throughput"] <= 1000 and volume["Throughput"] <= volume["Iops"] / 4
    assert volume["AvailabilityZone"] == s.availability_zone
    (snapshot,) = ours(ec2, "snapshots")
    assert snapshot["SnapshotId"] == result.snapshot_id and not result.reused
    assert snapshot["Encrypted"] is True and snapshot["VolumeId"] == volume["VolumeId"]
    assert tags(snapshot)["deepseek-eks:stack"] == "prod"
    assert tags(snapshot)["deepseek-eks:repository"] == "deepseek-ai/DeepSeek-R1-Distill-Llama-70B"
    assert ours(ec2, "volumes") == []  # the bake volume is gone
    # The id is one the stack setting accepts.
    config = stack_config(
        "prod", weights__source="ebs-snapshot", weights__snapshotId=result.snapshot_id
    ).values
    assert parse_settings(config).weights.snapshot_id == result.snapshot_id


def test_a_second_run_finds_the_snapshot_and_creates_nothing(ec2: Any) -> None:
    s = spec(ec2)
    first = bake(ec2, s, RecordingFiller(), say=lambda _: None)
    again = RecordingFiller()
    second = bake(ec2, s, again, say=lambda _: None)
    assert second.snapshot_id == first.snapshot_id and second.reused
    assert again.calls == []
    assert len(ours(ec2, "snapshots")) == 1
    assert ours(ec2, "volumes") == []


def test_another_repository_gets_its_own_snapshot(ec2: Any) -> None:
    s = spec(ec2)
    first = bake(ec2, s, RecordingFiller(), say=lambda _: None)
    other = BakeSpec(**{**s.__dict__, "repository": "someone/r1-70b-awq"})
    assert bake(ec2, other, RecordingFiller(), say=lambda _: None).snapshot_id != first.snapshot_id


def test_a_failed_download_deletes_the_volume_and_leaves_no_snapshot(ec2: Any) -> None:
    s = spec(ec2)
    with pytest.raises(BakeError, match="download interrupted"):
        bake(ec2, s, RecordingFiller(fail=True), say=lambda _: None)
    assert ours(ec2, "volumes") == []
    assert ours(ec2, "snapshots") == []


def test_a_filled_volume_is_resumed_without_downloading_again(ec2: Any) -> None:
    s = spec(ec2)
    volume_id = create_volume(ec2, s)
    ec2.create_tags(Resources=[volume_id], Tags=[{"Key": TAG_FILLED, "Value": "true"}])
    filler = RecordingFiller()
    result = bake(ec2, s, filler, say=lambda _: None)
    assert filler.calls == []
    (snapshot,) = ours(ec2, "snapshots")
    assert (
        snapshot["VolumeId"] == volume_id == snapshot["VolumeId"]
        and result.snapshot_id == snapshot["SnapshotId"]
    )


def test_an_unfilled_volume_of_an_earlier_run_is_filled_not_duplicated(ec2: Any) -> None:
    s = spec(ec2)
    volume_id = create_volume(ec2, s)
    filler = RecordingFiller()
    bake(ec2, s, filler, say=lambda _: None)
    assert filler.calls == [volume_id]


class FastRestoreRecorder:
    """moto has no EnableFastSnapshotRestores: record the call, validated against botocore's own
    model of the EC2 API, and pass everything else to moto."""

    def __init__(self, client: Any):
        self.client = client
        self.requests: list[dict[str, Any]] = []

    def enable_fast_snapshot_restores(self, **params: Any) -> dict[str, Any]:
        shape = self.client.meta.service_model.operation_model("EnableFastSnapshotRestores").input_shape
        validate_parameters(params, shape)
        self.requests.append(params)
        return {"Successful": [], "Unsuccessful": []}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_fast_snapshot_restore_is_enabled_in_the_node_zones(ec2: Any) -> None:
    zones = (f"{REGION}a", f"{REGION}b")
    s = spec(ec2, fast=zones)
    recorder = FastRestoreRecorder(ec2)
    result = bake(recorder, s, RecordingFiller(), say=lambda _: None)
    assert recorder.requests == [
        {"AvailabilityZones": list(zones), "SourceSnapshotIds": [result.snapshot_id]}
    ]
    # A repeated run finds the snapshot and makes sure fast restore is on (the call is idempotent).
    bake(recorder, s, RecordingFiller(), say=lambda _: None)
    assert len(recorder.requests) == 2 and len(ours(ec2, "snapshots")) == 1


def test_the_instance_filler_terminates_its_instance_when_the_download_did_not_finish(ec2: Any) -> None:
    s = spec(ec2)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    # moto's instances never power off by themselves: the filler gives up at its deadline.
    filler = InstanceFiller(image_id=image, timeout_s=0, sleep=lambda _: None)
    with pytest.raises(BakeError, match="still running"):
        bake(ec2, s, filler, say=lambda _: None)
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert len(instances) == 1 and instances[0]["State"]["Name"] in ("shutting-down", "terminated")
    assert instances[0]["SubnetId"] == s.subnet_id
    assert instances[0]["MetadataOptions"]["HttpTokens"] == "required"
    assert "IamInstanceProfile" not in instances[0]  # it makes no AWS call
    assert ours(ec2, "volumes") == []  # the unfilled bake volume was deleted


def test_the_bake_script_finds_its_volume_downloads_and_reports() -> None:
    script = bake_script("deepseek-ai/DeepSeek-R1", "vol-0123456789abcdef0")
    assert script.startswith("#!/bin/bash\nset -euo pipefail")
    assert '"vol0123456789abcdef0"' in script  # NVMe serial of an EBS volume: its id without the dash
    assert "hf download deepseek-ai/DeepSeek-R1 --revision main --local-dir /weights" in script
    pinned = bake_script("deepseek-ai/DeepSeek-R1", "vol-0123456789abcdef0", "0" * 40)
    assert f"--revision {'0' * 40} --local-dir" in pinned
    assert "blkid" in script and "mkfs.ext4" in script  # a resumed volume is not reformatted
    assert f"{DONE_MARKER} vol-0123456789abcdef0" in script and script.rstrip().endswith("poweroff")
    assert "10001:10001" in script  # readable by vLLM's UID (components/serving/vllm.py RUN_AS_USER)
    hostile = bake_script("a/b; rm -rf /", "vol-0123456789abcdef0")
    assert "'a/b; rm -rf /'" in hostile


def test_a_bake_is_of_the_pinned_commit_and_tagged_with_it(ec2: Any) -> None:
    """prod serves r1-distill-llama-70b, whose commit sizing/data/revisions.json pins: a snapshot of
    another commit (or of main) is another snapshot, never reused for this one."""
    s = spec(ec2)
    assert s.revision == "07a264a567ba0863a4ab34fdb3c2b8a54e0bb494"
    assert s.tags[TAG_REVISION] == s.revision


def test_the_placeholder_id_parses_but_is_not_a_real_snapshot() -> None:
    values = stack_config(
        "prod", weights__source="ebs-snapshot", weights__snapshotId=PLACEHOLDER_SNAPSHOT
    ).values
    assert parse_settings(values).weights.snapshot_id == PLACEHOLDER_SNAPSHOT
    assert f"{PROJECT}:weights.snapshotId" not in stack_config("prod").values


def test_the_command_refuses_a_stack_of_another_source_and_a_missing_subnet(capsys) -> None:
    from deepseek_eks.automation.cli import main

    assert main(["bake-weights", "--stack", "prod"]) == 2
    assert "set it to ebs-snapshot" in capsys.readouterr().err
    # No weights.snapshotId yet (that is what the command makes): only the subnet is missing.
    assert main(["bake-weights", "--stack", "prod", "--set", "weights.source=ebs-snapshot"]) == 2
    assert "pass --subnet-id" in capsys.readouterr().err
