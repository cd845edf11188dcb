"""Manifests of a replica that spans nodes (pure: no resources created): a LeaderWorkerSet whose
leader starts Ray and vLLM and whose workers join its Ray cluster, each group kept in one zone.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from deepseek_eks.sizing import SizingPlan

from ..platform.nodepools import ROLLOUT_MAX_SURGE, SERVING_POD_ANNOTATIONS
from .vllm import (
    APP,
    DEREGISTRATION_PAUSE_S,
    Workload,
    checkov_annotations,
    pod_spec,
    rolling_update,
    selector_labels,
    server_container,
    vllm_args,
    vllm_checkov_skips,
)

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"


# Ray's GCS port on the leader of a multi-node replica.
RAY_PORT = 6379

# Both nodes of a multi-node replica in one zone: LWS gives each group's leader a required
# affinity to its own group on this key, pins the workers to the leader's zone, and keeps other
# groups out of it (kubernetes-sigs/lws v0.10.0 ExclusiveKeyAnnotationKey, SetExclusiveAffinities).
# The price is one replica per zone.
LWS_EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
ZONE_KEY = "topology.kubernetes.io/zone"

# How a LeaderWorkerSet's pods find their leader: LWS 0.10.0 gives every pod LWS_LEADER_ADDRESS =
# <lws>-<group>.<subdomain>.<namespace>. With the default "Shared" policy the subdomain is the LWS's
# own name, and the controller creates that headless Service only when no Service of that name
# exists (pkg/utils/controller/controller_utils.go CreateHeadlessServiceIfNotExists), so our
# client Service "vllm" would shadow it and the leader's name would never resolve.
# "UniquePerReplica" gives each group a headless Service named after its leader pod
# (<lws>-<group>, pkg/controllers/pod_controller.go) and sets that as every pod's subdomain
# (pkg/webhooks/pod_webhook.go): the client Service keeps the name "vllm".
# Facts: reference/upstream/lws-v0.10.0.json.
LWS_SUBDOMAIN_POLICY = "UniquePerReplica"
# pulumi-kubernetes waits for a Deployment's rollout itself, but for a custom resource only when
# told: "condition=Available" waits until the LWS reports Available for the object's current
# generation (provider/pkg/metadata/overrides.go ReadyCondition, await/condition/kubectl.go
# checkCondition), which LWS 0.10.0 sets only once every group is updated and ready
# (pkg/controllers/leaderworkerset_controller.go). Facts: reference/upstream/pulumi-kubernetes-await.json.
PULUMI_WAIT_FOR = "pulumi.com/waitFor"
LWS_READY_CONDITION = "condition=Available"


def zone_refusal(plan: SizingPlan, max_replicas: int, zones: int | None) -> str | None:
    """Why a multi-node plan cannot scale to ``max_replicas``: with LWS exclusive topology on the
    zone, each replica takes a whole zone (see ``LWS_EXCLUSIVE_TOPOLOGY``), and a rollout at the
    maximum surges one more (ROLLOUT_MAX_SURGE). ``zones`` is None for your own VPC, whose zones
    are known only on AWS."""
    most = None if zones is None else zones - ROLLOUT_MAX_SURGE
    if plan.nodes_per_replica == 1 or most is None or max_replicas <= most:
        return None
    return (
        f"autoscaling.maxReplicas = {max_replicas}: a {plan.model.variant} replica spans "
        f"{plan.nodes_per_replica} nodes kept in one zone, one replica per zone, the VPC has "
        f"{zones} zones and a rollout needs a free zone for the new replica before the old one "
        f"goes; set autoscaling.maxReplicas to at most {most}, or add a single-node "
        "instance family (e.g. p5en) to gpu.instanceFamilies"
    )


def worker_drain_wait_seconds(plan: SizingPlan) -> int:
    """How long a LeaderWorkerSet worker keeps its ranks after its deletion: the leader's pause
    and drain, which start at the same moment (see leader_worker_set)."""
    return DEREGISTRATION_PAUSE_S + plan.drain_seconds


# vLLM places all TP x PP ranks when it starts, so the leader waits until every node has joined.
# (Double quotes only inside the Python code: sh then shows it in plain single quotes.)
_WAIT_FOR_RAY_NODES = (
    'import ray, sys, time; ray.init(address="auto"); n = int(sys.argv[1]); '
    '[time.sleep(5) for _ in iter(lambda: sum(x["Alive"] for x in ray.nodes()) < n, False)]'
)

# Object-storage models across nodes: vLLM 0.33.0 pulls the config and tokenizer files of an s3://
# --model only in the process that builds the model config (the leader), into
# $VLLM_ASSETS_CACHE/model_streamer/<sha256(url)[:8]>, and hands that node-local path to the Ray
# workers on the other nodes (vllm/config/model.py maybe_pull_model_tokenizer_for_runai,
# vllm/transformers_utils/runai_utils.py ObjectStorageModel; vllm-project/vllm#50616, fix not
# released). Each worker pod therefore pulls the same files with vLLM's own code, from the same
# URL into the same directory (same image, same cache environment), before joining Ray.
# Facts: reference/upstream/vllm-0.33.0/object-storage-model.json.
OBJECT_STORAGE_SCHEMES = ("s3://", "gs://", "az://")
CONFIG_PULL_PATTERNS = ["*.model", "*.py", "*.json"]
TOKENIZER_IGNORE_PATTERNS = ["*.pt", "*.safetensors", "*.bin", "*.tensors", "*.pth"]
_PULL_CONFIG_AND_TOKENIZER = (
    "import sys; from vllm.transformers_utils.runai_utils import ObjectStorageModel; "
    "url = sys.argv[1]; store = ObjectStorageModel(url=url); "
    f"store.pull_files(url, allow_pattern={json.dumps(CONFIG_PULL_PATTERNS)}); "
    f"store.pull_files(url, ignore_pattern={json.dumps(TOKENIZER_IGNORE_PATTERNS)})"
)


def shell_line(*argv: str) -> str:
    """One command for ``sh -c``, every argument quoted (an S3 prefix may hold any character)."""
    return shlex.join(argv)


def _model_of(args: list[str]) -> str:
    return args[args.index("--model") + 1]


def _ray_leader_command(plan: SizingPlan, workload: Workload) -> list[str]:
    script = " && ".join(
        [
            shell_line("ray", "start", "--head", f"--port={RAY_PORT}"),
            shell_line("python3", "-c", _WAIT_FOR_RAY_NODES, str(plan.nodes_per_replica)),
            "exec " + shell_line("vllm", "serve", *vllm_args(plan, workload)),
        ]
    )
    return ["/bin/sh", "-c", script]


def _ray_worker_command(plan: SizingPlan, workload: Workload) -> list[str]:
    """Join the leader's Ray cluster (LWS_LEADER_ADDRESS, set by LWS on every pod of the group),
    first pulling an object-storage model's config and tokenizer files the leader's vLLM will
    point this node at."""
    steps = []
    model = _model_of(vllm_args(plan, workload))
    if model.lower().startswith(OBJECT_STORAGE_SCHEMES):
        steps.append(shell_line("python3", "-c", _PULL_CONFIG_AND_TOKENIZER, model))
    join = f'exec ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --block'
    return ["/bin/sh", "-c", " && ".join([*steps, join])]


def leader_worker_set(plan: SizingPlan, workload: Workload, name: str = APP) -> dict[str, Any]:
    """A multi-node replica (r1-671b on nodes too small for it) as a LeaderWorkerSet: one group
    of ``nodes_per_replica`` pods per replica, restarted together when any pod fails."""
    labels = {**workload.labels, **selector_labels()}
    leader = server_container(plan, workload, _ray_leader_command(plan, workload))
    leader["ports"] = [*leader["ports"], {"name": "ray", "containerPort": RAY_PORT, "protocol": "TCP"}]
    worker = {
        **server_container(plan, workload, _ray_worker_command(plan, workload)),
        "ports": [{"name": "ray", "containerPort": RAY_PORT, "protocol": "TCP"}],
    }
    for key in ("startupProbe", "readinessProbe", "livenessProbe"):
        worker.pop(key)  # workers serve no HTTP; the leader's probes cover the group
    # A worker holds ranks of every stream its leader serves. When a worker pod is deleted (a
    # drain, an interruption, Karpenter's consolidation), LWS deletes the group's leader at once
    # (RecreateGroupOnPodRestart; lws v0.10.0 pkg/controllers/pod_controller.go
    # handleRestartPolicy: "the leader pod will be deleted if the worker pod is deleted"), and the
    # leader pauses, then drains its streams for --shutdown-timeout. The worker must outlive that
    # drain, so it waits as long before its Ray process gets SIGTERM: the group drains as the
    # leader is drained. Its grace period (pod_spec) covers the wait and the exit.
    worker["lifecycle"] = {"preStop": {"sleep": {"seconds": worker_drain_wait_seconds(plan)}}}
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": labels,
            "annotations": {
                **checkov_annotations(vllm_checkov_skips(workload)),
                LWS_EXCLUSIVE_TOPOLOGY: ZONE_KEY,
                PULUMI_WAIT_FOR: LWS_READY_CONDITION,
            },
        },
        "spec": {
            "startupPolicy": "LeaderCreated",
            "networkConfig": {"subdomainPolicy": LWS_SUBDOMAIN_POLICY},
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": rolling_update()},
            "leaderWorkerTemplate": {
                "size": plan.nodes_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {
                        "labels": {**labels, "deepseek-eks/role": "leader"},
                        "annotations": dict(SERVING_POD_ANNOTATIONS),
                    },
                    "spec": pod_spec(plan, workload, [leader]),
                },
                "workerTemplate": {
                    "metadata": {
                        "labels": {**labels, "deepseek-eks/role": "worker"},
                        "annotations": dict(SERVING_POD_ANNOTATIONS),
                    },
                    "spec": pod_spec(plan, workload, [worker]),
                },
            },
        },
    }
