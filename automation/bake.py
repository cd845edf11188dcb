"""``python -m automation bake-weights --stack NAME``: bake the model's checkpoint into an encrypted
EBS snapshot once, for ``weights.source ebs-snapshot``.

Steps, each found again by its tags when a run is repeated (idempotent and resumable):

1. a completed snapshot tagged for this stack and repository: done, its id is printed;
2. a snapshot of it still pending: wait for it;
3. the bake volume (encrypted gp3, sized and provisioned for the checkpoint), created or found;
4. unless the volume is tagged filled: a short-lived EC2 instance in one of the stack's subnets
   formats it, downloads the checkpoint from Hugging Face onto it, prints a marker to its console
   and powers off; the volume is then tagged filled;
5. the snapshot (tagged, encrypted like its volume), then the volume is deleted;
6. with ``weights.fastSnapshotRestore``: fast snapshot restore in the node zones.

On failure the instance is terminated, a snapshot this run started is deleted, and so is the
volume unless it is already filled (then the next run goes straight to the snapshot).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.checkpoints import pinned_revision
from deepseek_eks.sizing.planner import SNAPSHOT_VOLUME_IOPS, SNAPSHOT_VOLUME_THROUGHPUT_MIBPS

TAG_STACK = "deepseek-eks:stack"
TAG_REPOSITORY = "deepseek-eks:repository"
TAG_REVISION = "deepseek-eks:revision"
TAG_ROLE = "deepseek-eks:role"
TAG_FILLED = "deepseek-eks:filled"
ROLE_VOLUME = "weights-bake-volume"
ROLE_SNAPSHOT = "weights-snapshot"
ROLE_BAKER = "weights-baker"
# Printed to the instance console by the bake script once the checkpoint is on the volume.
DONE_MARKER = "DEEPSEEK-EKS-BAKE-DONE"
# The bake instance: network-optimised (up to 50 Gbps, c6in family) so the Hugging Face download,
# not the NIC, is the limit; nothing else runs on it.
BAKER_INSTANCE_TYPE = "c6in.2xlarge"
# Amazon Linux 2023's public SSM parameter for its current x86_64 AMI (AL2023 user guide).
AL2023_AMI_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
# huggingface_hub release the bake script installs (its `hf download` CLI).
HUGGINGFACE_HUB_VERSION = "0.36.0"
DEVICE_NAME = "/dev/sdf"
POLL_S = 15


class BakeError(RuntimeError):
    """A step of the bake failed; what was created by this run has been cleaned up."""


@dataclass(frozen=True)
class BakeSpec:
    """What to bake and where."""

    stack: str
    repository: str
    """Hugging Face repo id of the checkpoint."""
    volume_gib: int
    """Volume size: the plan's ``weights_volume_gib`` (every restored volume asks for the same)."""
    subnet_id: str
    """Subnet of the bake instance (private, with a route to the internet for Hugging Face)."""
    availability_zone: str
    """The subnet's zone: the volume must be there to attach."""
    fast_restore_zones: tuple[str, ...] = ()
    """Zones to enable fast snapshot restore in (empty: off)."""
    kms_key_id: str | None = None
    """KMS key for the volume and snapshot; None: the account's EBS default key."""
    throughput_mibps: int = SNAPSHOT_VOLUME_THROUGHPUT_MIBPS
    iops: int = SNAPSHOT_VOLUME_IOPS
    revision: str = "main"
    """The Hugging Face commit the model catalog pins for the repository, or main (then the bake
    reads whatever main is at bake time, and the tag says so)."""

    @property
    def tags(self) -> dict[str, str]:
        # The revision is part of what a snapshot is: a new pin bakes a new snapshot, never reuses one.
        return {TAG_STACK: self.stack, TAG_REPOSITORY: self.repository, TAG_REVISION: self.revision}


def spec_for(
    stack: str, plan: SizingPlan, subnet_id: str, zone: str, fast_restore_zones: tuple[str, ...]
) -> BakeSpec:
    """The bake of ``plan``'s checkpoint for ``stack``."""
    repository = plan.repository or plan.model.hf_repo  # a known AWQ checkpoint included
    return BakeSpec(
        stack=stack,
        repository=repository,
        revision=pinned_revision(plan.model.variant, repository) or "main",
        volume_gib=plan.weights_volume_gib,
        subnet_id=subnet_id,
        availability_zone=zone,
        fast_restore_zones=fast_restore_zones,
    )


class Filler(Protocol):
    """Puts the checkpoint onto an attached-nowhere, available volume (raises on failure)."""

    def __call__(self, ec2: Any, spec: BakeSpec, volume_id: str) -> None: ...


@dataclass
class BakeResult:
    snapshot_id: str
    reused: bool
    """True when a completed snapshot already existed (nothing was created)."""
    log: list[str] = field(default_factory=list)


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def _filters(tags: dict[str, str]) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]


def find_snapshots(ec2: Any, spec: BakeSpec, states: tuple[str, ...]) -> list[dict[str, Any]]:
    """This stack's snapshots of the repository in ``states``, newest first."""
    found = ec2.describe_snapshots(
        OwnerIds=["self"],
        Filters=[
            *_filters({**spec.tags, TAG_ROLE: ROLE_SNAPSHOT}),
            {"Name": "status", "Values": list(states)},
        ],
    )["Snapshots"]
    return sorted(found, key=lambda s: s["StartTime"], reverse=True)


def find_volume(ec2: Any, spec: BakeSpec) -> dict[str, Any] | None:
    volumes = ec2.describe_volumes(
        Filters=[
            *_filters({**spec.tags, TAG_ROLE: ROLE_VOLUME}),
            {"Name": "status", "Values": ["available", "creating"]},
        ]
    )["Volumes"]
    return volumes[0] if volumes else None


def create_volume(ec2: Any, spec: BakeSpec) -> str:
    """Encrypted gp3 with the throughput and IOPS the restored volumes get (so the bake writes as
    fast as they will read)."""
    kwargs: dict[str, Any] = {
        "AvailabilityZone": spec.availability_zone,
        "Size": spec.volume_gib,
        "VolumeType": "gp3",
        "Iops": spec.iops,
        "Throughput": spec.throughput_mibps,
        "Encrypted": True,
        "TagSpecifications": [
            {
                "ResourceType": "volume",
                "Tags": _tag_list({**spec.tags, TAG_ROLE: ROLE_VOLUME, "Name": f"{spec.stack}-weights-bake"}),
            }
        ],
    }
    if spec.kms_key_id:
        kwargs["KmsKeyId"] = spec.kms_key_id
    volume_id: str = ec2.create_volume(**kwargs)["VolumeId"]
    ec2.get_waiter("volume_available").wait(VolumeIds=[volume_id])
    return volume_id


def bake(ec2: Any, spec: BakeSpec, fill: Filler, say: Callable[[str], None] = print) -> BakeResult:
    """Make (or find) the weights snapshot of ``spec``; see the module docstring."""
    done = find_snapshots(ec2, spec, ("completed",))
    if done:
        say(f"snapshot {done[0]['SnapshotId']} of {spec.repository} already exists")
        _fast_restore(ec2, spec, done[0]["SnapshotId"], say)
        return BakeResult(done[0]["SnapshotId"], reused=True)
    pending = find_snapshots(ec2, spec, ("pending",))
    if pending:
        earlier: str = pending[0]["SnapshotId"]
        say(f"waiting for snapshot {earlier}, started by an earlier run")
        ec2.get_waiter("snapshot_completed").wait(SnapshotIds=[earlier])
        _fast_restore(ec2, spec, earlier, say)
        return BakeResult(earlier, reused=False)

    existing = find_volume(ec2, spec)
    created = existing is None
    volume_id = create_volume(ec2, spec) if existing is None else existing["VolumeId"]
    verb = "created" if created else "resuming with"
    say(f"{verb} volume {volume_id} ({spec.volume_gib} GiB gp3, encrypted)")
    filled = existing is not None and {"Key": TAG_FILLED, "Value": "true"} in existing.get("Tags", [])
    snapshot_id: str | None = None
    try:
        if not filled:
            fill(ec2, spec, volume_id)
            ec2.create_tags(Resources=[volume_id], Tags=[{"Key": TAG_FILLED, "Value": "true"}])
            filled = True
        snapshot_id = ec2.create_snapshot(
            VolumeId=volume_id,
            Description=f"deepseek-eks {spec.stack}: {spec.repository}",
            TagSpecifications=[
                {
                    "ResourceType": "snapshot",
                    "Tags": _tag_list(
                        {**spec.tags, TAG_ROLE: ROLE_SNAPSHOT, "Name": f"{spec.stack}-weights"}
                    ),
                }
            ],
        )["SnapshotId"]
        say(f"snapshot {snapshot_id} started")
        ec2.get_waiter("snapshot_completed").wait(SnapshotIds=[snapshot_id])
    except Exception as error:
        _clean_up(ec2, volume_id if not filled else None, snapshot_id, say)
        raise BakeError(f"baking {spec.repository} failed: {error}") from error
    ec2.delete_volume(VolumeId=volume_id)
    _fast_restore(ec2, spec, snapshot_id, say)
    return BakeResult(snapshot_id, reused=False)


def _clean_up(ec2: Any, volume_id: str | None, snapshot_id: str | None, say: Callable[[str], None]) -> None:
    if snapshot_id:
        ec2.delete_snapshot(SnapshotId=snapshot_id)
        say(f"deleted incomplete snapshot {snapshot_id}")
    if volume_id:
        ec2.delete_volume(VolumeId=volume_id)
        say(f"deleted unfilled volume {volume_id}")


def _fast_restore(ec2: Any, spec: BakeSpec, snapshot_id: str, say: Callable[[str], None]) -> None:
    if not spec.fast_restore_zones:
        return
    ec2.enable_fast_snapshot_restores(
        AvailabilityZones=list(spec.fast_restore_zones), SourceSnapshotIds=[snapshot_id]
    )
    zones = ", ".join(spec.fast_restore_zones)
    say(f"fast snapshot restore enabled for {snapshot_id} in {zones} (billed per zone-hour)")


def bake_script(repository: str, volume_id: str, revision: str = "main") -> str:
    """User data of the bake instance: find the attached volume by its NVMe serial (the volume id
    without the dash), format it if blank, download the checkpoint onto it, then power off."""
    serial = volume_id.replace("-", "")
    repo = shlex.quote(repository)
    rev = shlex.quote(revision)
    return f"""#!/bin/bash
set -euo pipefail
for _ in $(seq 120); do
  dev=$(lsblk -dpno NAME,SERIAL | awk '$2=="{serial}" {{print $1}}')
  [ -n "$dev" ] && break
  sleep 5
done
[ -n "$dev" ]
blkid "$dev" || mkfs.ext4 -q -L weights "$dev"
mkdir -p /weights && mount "$dev" /weights
python3 -m venv /opt/hf && /opt/hf/bin/pip install -q huggingface_hub=={HUGGINGFACE_HUB_VERSION}
/opt/hf/bin/hf download {repo} --revision {rev} --local-dir /weights
rm -rf /weights/.cache
chown -R 10001:10001 /weights
sync && umount /weights
echo "{DONE_MARKER} {volume_id}" > /dev/console
poweroff
"""


@dataclass
class InstanceFiller:
    """Fills the volume from a short-lived EC2 instance (no instance profile: it makes no AWS call)."""

    image_id: str
    instance_type: str = BAKER_INSTANCE_TYPE
    timeout_s: int = 6 * 3600
    sleep: Callable[[float], None] = time.sleep

    def __call__(self, ec2: Any, spec: BakeSpec, volume_id: str) -> None:
        instance_id = ec2.run_instances(
            ImageId=self.image_id,
            InstanceType=self.instance_type,
            MinCount=1,
            MaxCount=1,
            SubnetId=spec.subnet_id,
            UserData=bake_script(spec.repository, volume_id, spec.revision),
            InstanceInitiatedShutdownBehavior="stop",
            MetadataOptions={"HttpTokens": "required", "HttpEndpoint": "enabled"},
            BlockDeviceMappings=[
                {"DeviceName": "/dev/xvda", "Ebs": {"Encrypted": True, "VolumeType": "gp3", "VolumeSize": 20}}
            ],
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": _tag_list({**spec.tags, TAG_ROLE: ROLE_BAKER})}
            ],
        )["Instances"][0]["InstanceId"]
        try:
            ec2.get_waiter("instance_running").wait(InstanceIds=[instance_id])
            ec2.attach_volume(Device=DEVICE_NAME, InstanceId=instance_id, VolumeId=volume_id)
            self._wait_stopped(ec2, instance_id)
            console = ec2.get_console_output(InstanceId=instance_id, Latest=True).get("Output", "")
            if f"{DONE_MARKER} {volume_id}" not in console:
                raise BakeError(
                    f"instance {instance_id} stopped without finishing the download (see its console output)"
                )
            ec2.detach_volume(VolumeId=volume_id, InstanceId=instance_id)
            ec2.get_waiter("volume_available").wait(VolumeIds=[volume_id])
        finally:
            ec2.terminate_instances(InstanceIds=[instance_id])

    def _wait_stopped(self, ec2: Any, instance_id: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            state = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0][
                "State"
            ]["Name"]
            if state in ("stopped", "terminated"):
                return
            self.sleep(POLL_S)
        raise BakeError(f"instance {instance_id} still running after {self.timeout_s} s")


def al2023_image(ssm: Any) -> str:
    image: str = ssm.get_parameter(Name=AL2023_AMI_PARAMETER)["Parameter"]["Value"]
    return image


# Parses a stack that has no snapshot yet: the id this command is about to make stands in for
# weights.snapshotId (required with ebs-snapshot) while the settings are read; it is never used.
PLACEHOLDER_SNAPSHOT = "snap-00000000"


def run_bake(stack: str, overrides: dict[str, str], subnet_id: str | None, project_dir: Any) -> int:
    """The ``bake-weights`` command: 0 with the snapshot id; errors raise for the CLI to map."""
    from deepseek_eks.settings import PROJECT, SettingsError, WeightsSource

    from .api import AutomationError, prepare, require_aws_credentials
    from .preflight import aws_session, cluster_zones
    from .stackfile import config_set_command

    try:
        prepared = prepare(stack, overrides, project_dir)
    except SettingsError as error:
        missing_id = [p for p in error.problems if p.key == f"{PROJECT}:weights.snapshotId"]
        if len(missing_id) != len(error.problems) or not all("required" in p.message for p in missing_id):
            raise
        prepared = prepare(stack, {**overrides, "weights.snapshotId": PLACEHOLDER_SNAPSHOT}, project_dir)
    settings = prepared.settings
    if settings.weights.source is not WeightsSource.EBS_SNAPSHOT:
        raise AutomationError(
            f"stack {stack} has weights.source {settings.weights.source.value}: set it to ebs-snapshot "
            "(pulumi config set weights.source ebs-snapshot) before baking",
            exit_code=2,
        )
    subnet = subnet_id or next(iter(settings.network.private_subnet_ids), None)
    if subnet is None:
        raise AutomationError(
            "the bake instance needs a private subnet with a route to the internet: pass --subnet-id "
            "(one of the stack's private subnets, e.g. from `pulumi stack output vpcId`)",
            exit_code=2,
        )
    require_aws_credentials(settings)
    session = aws_session(settings)
    ec2 = session.client("ec2")
    zone = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["AvailabilityZone"]
    fast: tuple[str, ...] = ()
    if settings.weights.fast_snapshot_restore:
        zones, problems = cluster_zones(ec2, settings)  # the zones preflight checks, as the VPC picks them
        if problems:
            raise AutomationError(
                f"cannot tell the node zones for fast snapshot restore: {'; '.join(problems)}"
            )
        fast = tuple(zones)
    spec = spec_for(stack, prepared.plan, subnet, zone, fast)
    filler = InstanceFiller(al2023_image(session.client("ssm")))
    try:
        result = bake(ec2, spec, filler)
    except BakeError as error:
        raise AutomationError(str(error), exit_code=1) from error
    if settings.weights.snapshot_id != result.snapshot_id:
        print(
            "keep it in the stack: "
            + config_set_command(prepared.config, "weights.snapshotId", result.snapshot_id)
        )
    print(result.snapshot_id)
    return 0
