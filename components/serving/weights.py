"""Where a replica's weights come from, as manifests and documents: the stager Job that copies a
checkpoint into the project's bucket, the key prefix it stages under, the read-only Mountpoint
volume, the EBS snapshot objects and the volumes restored from it, the IAM access policy on the
bucket, and the EKS add-ons each source needs. The component (serving/inference.py) creates them
as resources; automation's preflight checks the add-ons."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from deepseek_eks.settings import s3_location
from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.checkpoints import pinned_revision
from deepseek_eks.sizing.planner import SNAPSHOT_VOLUME_IOPS, SNAPSHOT_VOLUME_THROUGHPUT_MIBPS, WeightsSource
from deepseek_eks.sizing.startup import (
    HF_DOWNLOAD_GIB_PER_S,
    NODE_READY_S,
    SNAPSHOT_INIT_RATE_MIBPS,
    STANDARD_PULL_S,
)

from ..egress import egress_rules
from ..platform.nodepools import SERVING_POD_ANNOTATIONS
from ..versions import (
    MOUNTPOINT_S3_CSI_ADDON,
    MOUNTPOINT_S3_CSI_ADDON_VERSION,
    SNAPSHOT_CONTROLLER_ADDON,
    SNAPSHOT_CONTROLLER_ADDON_VERSION,
    VLLM_IMAGE,
)
from .secrets import HF_TOKEN_KEY, HF_TOKEN_SECRET
from .vllm import RUN_AS_USER, container_security_context, pod_security_context

STAGE_SCRIPT = Path(__file__).parent / "scripts" / "stage_weights.py"
STAGER = "weights-stager"
# The stager streams file by file (--stream): its disk holds the largest shard (8.6 GB for the 7B
# distill, ~5 GB for r1-671b's 163 shards), not the checkpoint.
STAGE_DISK_GIB = 20
# The read-only claim on the weights bucket (weights.source s3-mountpoint) and its volume.
WEIGHTS_CLAIM = "vllm-weights"
# Mountpoint for Amazon S3 CSI driver v2.7.0: its CSIDriver name (charts/.../csidriver.yaml) and
# pod-level credentials, the workload pod's own Pod Identity association (docs/CONFIGURATION.md).
MOUNTPOINT_DRIVER = "s3.csi.aws.com"
# weights.source ebs-snapshot: the pre-provisioned snapshot (its VolumeSnapshotContent names the
# baked EBS snapshot), the class both belong to, and the StorageClass of the volumes made from it.
SNAPSHOT_API = "snapshot.storage.k8s.io"
WEIGHTS_SNAPSHOT = "vllm-weights"
WEIGHTS_SNAPSHOT_CLASS = "deepseek-weights"
WEIGHTS_STORAGE_CLASS = "gp3-weights-from-snapshot"
# The stager's claim object (components/serving/scripts/stage_weights.py IN_PROGRESS_NAME; that script runs
# alone in the vLLM image and imports boto3, so the name is repeated here and a test keeps the two equal).
STAGING_CLAIM_NAME = ".staging.json"


def weights_addons(weights_source: WeightsSource | str) -> dict[str, str]:
    """The EKS add-ons (name -> pinned version) a weights source installs; preflight checks that
    EKS offers each pinned version."""
    source = WeightsSource(weights_source)  # a value outside the set is an error, not "none"
    if source == WeightsSource.S3_MOUNTPOINT:
        return {MOUNTPOINT_S3_CSI_ADDON: MOUNTPOINT_S3_CSI_ADDON_VERSION}
    if source == WeightsSource.EBS_SNAPSHOT:
        return {SNAPSHOT_CONTROLLER_ADDON: SNAPSHOT_CONTROLLER_ADDON_VERSION}
    return {}


# Beside the copy, the node and the pull: the pod's scheduling and the stager's own calls (listing
# the prefix, its claim and completion marker). A round margin, not a measured figure: past the
# whole budget Pulumi stops waiting for the Job (its create timeout) and `pulumi up` fails, and a
# rerun resumes from the files already staged (stage_weights.py skips an object of the listed size).
STAGING_SLACK_S = 600


def stage_seconds(plan: SizingPlan) -> int:
    """How long staging may take: download then upload the checkpoint (each at the Hugging Face
    rate, the slower), plus a node and an image pulled without SOCI (the Job may land on a node
    whose class does not turn it on), plus ``STAGING_SLACK_S``."""
    node_and_pull = NODE_READY_S["karpenter"] + STANDARD_PULL_S
    return int(2 * plan.checkpoint_gib / HF_DOWNLOAD_GIB_PER_S) + node_and_pull + STAGING_SLACK_S


def stage_job_spec(
    *,
    bucket: str,
    prefix: str,
    repo: str,
    region: str,
    hf_token: bool,
    labels: dict[str, str],
    disk_gib: int,
    image: str = VLLM_IMAGE,
    revision: str | None = None,
) -> dict[str, Any]:
    """The stager Job's spec: the vLLM image (it has huggingface_hub and boto3) runs
    ``stage_weights.py`` from a ConfigMap, hardened like the server, with a disk for one copy."""
    env: list[dict[str, Any]] = [
        {"name": "AWS_REGION", "value": region},
        {"name": "HOME", "value": "/stage"},
        {"name": "HF_HOME", "value": "/stage/.hf"},
    ]
    if hf_token:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY}},
            }
        )
    return {
        "backoffLimit": 3,
        "ttlSecondsAfterFinished": 86400,
        "template": {
            # A copy of hours restarts from scratch if consolidation moves it.
            "metadata": {
                "labels": {**labels, "app.kubernetes.io/name": STAGER},
                "annotations": dict(SERVING_POD_ANNOTATIONS),
            },
            "spec": {
                "serviceAccountName": STAGER,
                "automountServiceAccountToken": False,
                "restartPolicy": "OnFailure",
                "securityContext": pod_security_context(),
                "containers": [
                    {
                        "name": "stage",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python3", "/scripts/stage_weights.py"],
                        "args": [
                            "--repo",
                            repo,
                            "--bucket",
                            bucket,
                            "--prefix",
                            prefix,
                            # The pinned commit, or main: resolved once and recorded by the stager.
                            "--revision",
                            revision or "main",
                            "--workdir",
                            "/stage",
                            "--stream",  # one file at a time: the disk holds one shard
                        ],
                        "env": env,
                        "resources": {
                            "requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": f"{disk_gib}Gi"},
                            "limits": {"memory": "8Gi", "ephemeral-storage": f"{disk_gib}Gi"},
                        },
                        "securityContext": container_security_context(),
                        "volumeMounts": [
                            {"name": "stage", "mountPath": "/stage"},
                            {"name": "scripts", "mountPath": "/scripts", "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "stage", "emptyDir": {"sizeLimit": f"{disk_gib}Gi"}},
                    {"name": "scripts", "configMap": {"name": STAGER}},
                ],
            },
        },
    }


def weights_object_name(base: str, holds: str) -> str:
    """The name of a weights volume object holding ``holds`` (weights_volume_identity): one per
    content. A volume cannot change what it holds in place (the API server refuses a new size of a
    bound claim and a new snapshot handle; a Mountpoint volume pointed at a new prefix would give
    the old pods' restarts the new weights with the old arguments), so a new variant, commit or
    snapshot gets objects of its own beside the old ones: Pulumi creates them, rolls the workload
    onto them and deletes the old ones last, once the old pods are gone (the claim's
    kubernetes.io/pvc-protection finalizer holds it until then)."""
    return f"{base}-{hashlib.sha256(holds.encode()).hexdigest()[:8]}"


def mountpoint_volume(
    *,
    bucket: str,
    prefix: str,
    region: str,
    namespace: str,
    capacity_gib: int,
    labels: dict[str, str],
    holds: str,
) -> dict[str, dict[str, Any]]:
    """A static PersistentVolume of ``s3://bucket/prefix`` through Mountpoint, and the one claim
    allowed to bind it (``claimRef``), both named for what they hold (``weights_object_name``).
    Read-only everywhere: the access mode, the mount option and the IAM role (s3:GetObject and a
    prefix-limited ListBucket). Files are owned by vLLM's UID; ``allow-other`` lets that UID read a
    FUSE mount made by the driver's own pod."""
    claim_name = weights_object_name(WEIGHTS_CLAIM, holds)
    volume_name = f"{namespace}-{claim_name}"
    storage = {"storage": f"{capacity_gib}Gi"}  # required by the API, ignored by the driver
    return {
        "volume": {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume_name, "labels": labels},
            "spec": {
                "capacity": storage,
                "accessModes": ["ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",  # static provisioning: no class, no dynamic volume
                "claimRef": {"namespace": namespace, "name": claim_name},
                "mountOptions": [
                    "read-only",
                    "allow-other",
                    f"uid={RUN_AS_USER}",
                    f"gid={RUN_AS_USER}",
                    # Mountpoint's --prefix mounts the keys under it (it must end in "/"); the
                    # whole bucket is mounted without one.
                    *([f"prefix {prefix}"] if prefix else []),
                    f"region {region}",
                ],
                "csi": {
                    "driver": MOUNTPOINT_DRIVER,
                    "volumeHandle": volume_name,
                    "readOnly": True,
                    "volumeAttributes": {"bucketName": bucket, "authenticationSource": "pod"},
                },
            },
        },
        "claim": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name, "namespace": namespace, "labels": labels},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "storageClassName": "",
                "volumeName": volume_name,
                "resources": {"requests": storage},
            },
        },
    }


def snapshot_weights(
    *,
    snapshot_id: str,
    driver: str,
    namespace: str,
    volume_gib: int,
    labels: dict[str, str],
    fast_snapshot_restore: bool,
    prefix: str = "",
) -> dict[str, dict[str, Any]]:
    """The baked EBS snapshot as a pre-provisioned VolumeSnapshot (external-snapshotter v1 API:
    a VolumeSnapshotContent naming ``snapshot_id``, bound both ways to a VolumeSnapshot, both named
    for the snapshot: ``weights_object_name``), the
    StorageClass of the volumes restored from it (encrypted gp3 at the throughput the plan
    assumes), and the pod's generic ephemeral volume: one volume per pod, made when the pod is
    scheduled (in its zone) and deleted with it. ``Retain``: deleting the stack never deletes the
    snapshot ``bake-weights`` made. ``prefix`` goes before the cluster-scoped class names."""
    snapshot_name = weights_object_name(WEIGHTS_SNAPSHOT, snapshot_id)
    content_name = f"{namespace or 'ns'}-{snapshot_name}"
    snapshot_class, storage_class = prefix + WEIGHTS_SNAPSHOT_CLASS, prefix + WEIGHTS_STORAGE_CLASS
    parameters = {
        "type": "gp3",
        "encrypted": "true",
        "throughput": str(SNAPSHOT_VOLUME_THROUGHPUT_MIBPS),
        "iops": str(SNAPSHOT_VOLUME_IOPS),
    }
    if not fast_snapshot_restore:
        # With fast snapshot restore the volume is initialised at creation; a rate would override it.
        parameters["volumeInitializationRate"] = str(SNAPSHOT_INIT_RATE_MIBPS)
    return {
        "class": {
            "apiVersion": f"{SNAPSHOT_API}/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {"name": snapshot_class, "labels": labels},
            "driver": driver,
            "deletionPolicy": "Retain",
        },
        "content": {
            "apiVersion": f"{SNAPSHOT_API}/v1",
            "kind": "VolumeSnapshotContent",
            "metadata": {"name": content_name, "labels": labels},
            "spec": {
                "deletionPolicy": "Retain",
                "driver": driver,
                "source": {"snapshotHandle": snapshot_id},
                "volumeSnapshotClassName": snapshot_class,
                "volumeSnapshotRef": {"name": snapshot_name, "namespace": namespace},
            },
        },
        "snapshot": {
            "apiVersion": f"{SNAPSHOT_API}/v1",
            "kind": "VolumeSnapshot",
            "metadata": {"name": snapshot_name, "namespace": namespace, "labels": labels},
            "spec": {
                "volumeSnapshotClassName": snapshot_class,
                "source": {"volumeSnapshotContentName": content_name},
            },
        },
        "storage_class": {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class, "labels": labels},
            "provisioner": driver,
            "parameters": parameters,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
        "volume": {
            "ephemeral": {
                "volumeClaimTemplate": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": storage_class,
                        "dataSource": {
                            "apiGroup": SNAPSHOT_API,
                            "kind": "VolumeSnapshot",
                            "name": snapshot_name,
                        },
                        "resources": {"requests": {"storage": f"{volume_gib}Gi"}},
                    },
                }
            }
        },
    }


def staged_prefix(plan: SizingPlan) -> str:
    """The key prefix the project's bucket holds this plan's weights under: one per variant,
    repository and pinned commit, so a new pin or another ``model.repository`` (an FP8 or AWQ
    checkpoint of the same variant) stages beside the old copy instead of over it. Over it, the
    stager would refuse (``claim_prefix``: the prefix's marker names another repository) and
    ``pulumi up`` would fail until someone emptied the prefix. The variant's own repository keeps
    the plain ``<variant>/`` it always had; another one gets a sibling, ``<variant>--<org>--<name>/``
    (a repo id holds one ``/`` and never ``--``: settings/names.py ``hf_repo_id_problem``, as the
    Hub's validator, so no two repositories share it), never a folder below ``<variant>/``, so
    neither read role's ``<prefix>*`` grant covers the other's."""
    repository = plan.request.repository or plan.model.hf_repo
    revision = pinned_revision(plan.model.variant, repository)
    base = plan.model.variant
    if repository != plan.model.hf_repo:
        base += "--" + repository.replace("/", "--")
    return f"{base}/" + (f"{revision}/" if revision else "")


def weights_volume_identity(
    weights_source: WeightsSource | str, plan: SizingPlan, snapshot_id: str | None
) -> str:
    """What the pods' weights volume holds, for the sources that give vLLM a volume (the bucket's
    prefix under Mountpoint, the snapshot for ebs-snapshot; "" for the others): a change of it
    is a new volume, which the deployed one cannot become in place."""
    source = WeightsSource(weights_source)
    if source == WeightsSource.S3_MOUNTPOINT:
        own = s3_location(plan.request.repository or "")
        return f"s3://{own[0]}/{own[1]}" if own else f"project-bucket/{staged_prefix(plan)}"
    if source == WeightsSource.EBS_SNAPSHOT:
        return snapshot_id or ""
    return ""


def stager_network_policy(labels: dict[str, str]) -> dict[str, Any]:
    """The stager talks to DNS, HTTPS endpoints and the Pod Identity agent (its service account
    always has an association: it writes the bucket), and accepts no connections."""
    return {
        "metadata": {"name": STAGER, "labels": labels},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": STAGER}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress_rules(pod_identity=True),
        },
    }


def weights_access_policy(
    bucket_arn: str,
    prefix: str,
    *,
    write: bool,
    kms_key_arn: str | None = None,
    still_served: str | None = None,
    compile_cache: str | None = None,
) -> dict[str, Any]:
    """Read (vLLM) or read-write (stager) on one prefix of the weights bucket only: the variant's in
    the project's bucket, or the one model.repository names in yours ("" is the whole bucket).
    With a KMS key, also the key calls S3 makes for SSE-KMS objects on the caller's behalf:
    kms:Decrypt to read, and kms:GenerateDataKey to write (Amazon S3 User Guide, "Using
    server-side encryption with AWS KMS keys": permissions; reference/upstream/eks-iam-facts.json)."""
    object_actions = ["s3:GetObject"] + (["s3:PutObject", "s3:AbortMultipartUpload"] if write else [])
    listing: dict[str, Any] = {
        "Sid": "ListThePrefix",
        "Effect": "Allow",
        "Action": ["s3:ListBucket"],
        "Resource": bucket_arn,
    }
    if prefix:
        # StringLike, not StringLikeIfExists: a listing that names no prefix (the whole bucket)
        # has no s3:prefix key, and IfExists would let it through. The stager therefore checks
        # the bucket and its objects by listing under the prefix, never with HeadBucket.
        listing["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}}
    statements = [
        listing,
        {
            "Sid": "ObjectsUnderThePrefix",
            "Effect": "Allow",
            "Action": sorted(object_actions),
            "Resource": f"{bucket_arn}/{prefix}*",
        },
    ]
    if write:
        # The stager removes its own claim (``<prefix>.staging.json``) once the completion marker
        # names the commit; it may delete that one object, never a staged weight.
        statements.append(
            {
                "Sid": "ReleaseTheStagingClaim",
                "Effect": "Allow",
                "Action": ["s3:DeleteObject"],
                "Resource": f"{bucket_arn}/{prefix}{STAGING_CLAIM_NAME}",
            }
        )
    kept = s3_location(still_served or "")
    if kept and not write and (kept[0], kept[1]) != (bucket_arn.rsplit(":", 1)[-1], prefix):
        # The weights the deployed pods read, until the new ones have rolled out (InferenceArgs
        # previous_weights_location): listing and reading only, in the same partition.
        kept_arn = f"{bucket_arn.rsplit(':', 1)[0]}:{kept[0]}"
        condition = {"StringLike": {"s3:prefix": [kept[1], f"{kept[1]}*"]}} if kept[1] else None
        statements.append(
            {
                "Sid": "ListTheServedPrefix",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": kept_arn,
                **({"Condition": condition} if condition else {}),
            }
        )
        statements.append(
            {
                "Sid": "ReadTheServedWeights",
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": f"{kept_arn}/{kept[1]}*",
            }
        )
    if compile_cache:
        # vLLM's compile caches (vllm.with_compile_cache): listed, read and written under their own
        # prefix, never over the weights; nothing there is ever deleted by the pods.
        statements.append(
            {
                "Sid": "ListTheCompileCache",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [compile_cache, f"{compile_cache}*"]}},
            }
        )
        statements.append(
            {
                "Sid": "ReadAndWriteTheCompileCache",
                "Effect": "Allow",
                "Action": ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
                "Resource": f"{bucket_arn}/{compile_cache}*",
            }
        )
    if kms_key_arn:
        key_actions = ["kms:Decrypt"] + (["kms:GenerateDataKey"] if write or compile_cache else [])
        statements.append(
            {"Sid": "UseTheWeightsKey", "Effect": "Allow", "Action": key_actions, "Resource": kms_key_arn}
        )
    return {"Version": "2012-10-17", "Statement": statements}
