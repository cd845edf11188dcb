"""Manifests of the vLLM service, built from the sizing plan (pure: no resources created).

Every vLLM flag comes from ``plan.vllm_args``; this module only adds what Kubernetes needs
around it: probes, resources, volumes, security context, graceful shutdown; the Deployment, its
Service, NetworkPolicies and disruption budget, and the deletion-cost and compile-cache sidecars.
A replica on several nodes is ``multinode.py``'s; the load balancer in front, ``exposure.py``'s.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.planner import VLLM_PORT

from ..egress import egress_rules
from ..monitoring.prometheus_names import PROMETHEUS_SELECTOR
from ..platform.nodepools import ROLLOUT_MAX_SURGE, SERVING_POD_ANNOTATIONS
from ..versions import VLLM_IMAGE
from .secrets import API_KEY_KEY, API_KEY_SECRET, HF_TOKEN_KEY, HF_TOKEN_SECRET

APP = "vllm"
PORT_NAME = "http"
SERVICE_PORT = 80
# The vLLM image's Python needs no root: every path it writes is pointed at a volume below.
# A UID above 10000 cannot collide with a host account's (checkov CKV_K8S_40).
RUN_AS_USER = 10001

# Checks the vLLM pods fail on purpose, each with its reason (checkov reads these annotations).
CHECKOV_SKIPS = {
    "CKV_K8S_11": "no CPU limit on purpose: CFS throttling stalls token streams; the request holds the node",
    # Docker Hub counts a pull's version check as a pull even when no layer is downloaded (docs
    # 'Definition of a pull request': reference/upstream/image-pulls.json docker_hub_pull_definition).
    "CKV_K8S_15": "IfNotPresent on purpose: Always makes every pod start ask the registry for the pinned "
    "tag, which Docker Hub counts as a pull against the NAT address's limit, and ties each start to "
    "the registry being reachable; a cached copy of the pinned tag is the image wanted",
    "CKV_K8S_43": "pinned by tag in components/versions.py; no registry was reachable to resolve its digest",
}


# CKV_K8S_35 (secrets as files, not env) is kept on purpose. vLLM 0.33.0 takes its key only from
# VLLM_API_KEY or --api-key (FrontendArgs.api_key in vllm/entrypoints/openai/cli_args.py, no file
# form; reference/upstream/vllm-0.33.0/serve-flags.json, FACTS.md). Satisfying the check would
# take a `sh -c` wrapper that reads a mounted file into VLLM_API_KEY and execs vLLM: the key then
# sits in the same process environment (/proc/<pid>/environ) as it does now, vLLM still reads it
# once at start (a rotated file changes nothing until a restart), and the container's entrypoint
# becomes a shell line that the policy pack and readers must parse. The Secret reference keeps the
# value out of the pod spec, which is what the check protects; a wrapper would add no protection.
SECRET_ENV_SKIP = {
    "CKV_K8S_35": "vLLM reads its API key (and huggingface_hub its token) only from the environment "
    "or argv; the value comes from a Secret reference, never the pod spec",
}


def vllm_checkov_skips(workload: Workload) -> dict[str, str]:
    """The vLLM pods' accepted findings; the secret-env one only when a Secret is read."""
    return {**CHECKOV_SKIPS, **(SECRET_ENV_SKIP if workload.api_key or workload.hf_token else {})}


def checkov_annotations(skips: dict[str, str]) -> dict[str, str]:
    """``checkov.io/skipN: CHECK=reason`` annotations: every accepted finding says why in place."""
    return {
        f"checkov.io/skip{i}": f"{check}={reason}"
        for i, (check, reason) in enumerate(sorted(skips.items()), 1)
    }


# Time for the ALB and kube-proxy to stop sending new requests before vLLM stops accepting.
DEREGISTRATION_PAUSE_S = 15
# After --shutdown-timeout, vLLM aborts what is left and tears the engine down; the grace
# period leaves it this long to exit before the kubelet sends KILL.
ENGINE_EXIT_S = 15

# Rollouts: a template change surges one new replica and takes none away before it is ready, for
# the Deployment and the LeaderWorkerSet alike. LWS 0.10.0 would otherwise default to
# maxUnavailable 1, maxSurge 0 (pkg/webhooks/leaderworkerset_webhook.go Default): a one-replica
# service would go dark for a whole cold start on every change.
ROLLOUT_MAX_UNAVAILABLE = 0

# Pod readiness gates: the load balancer controller injects a target-health gate into pods of a
# namespace carrying this label, so a rollout never removes the last healthy ALB target
# (target-type ip only). The AWS Load Balancer Controller reads elbv2.k8s.aws/...
# (kubernetes-sigs/aws-load-balancer-controller docs/deploy/pod_readiness_gate.md); EKS Auto
# Mode's built-in controller reads eks.amazonaws.com/... (AWS Containers blog on Auto Mode
# resiliency; its eks-load-balancing-webhook selects that key).
READINESS_GATE_LABELS = {
    "karpenter": {"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"},
    "auto-mode": {"eks.amazonaws.com/pod-readiness-gate-inject": "enabled"},
}
STARTUP_PROBE_PERIOD_S = 10

# Where a weights volume (Mountpoint bucket or snapshot volume) is mounted read-only; vLLM's
# --model then names this directory.
WEIGHTS_MOUNT_PATH = "/weights"
WEIGHTS_VOLUME = "weights"

CACHE_MOUNTS = {
    # volume name -> mount path; HOME, Hugging Face, vLLM, Triton and FlashInfer caches
    "home": "/home/vllm",
    "tmp": "/tmp",
}


@dataclass(frozen=True)
class Workload:
    """Everything the manifests need besides the plan."""

    namespace: str
    labels: dict[str, str]
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    service_account: str = APP
    api_key: bool = False
    hf_token: bool = False
    model_uri: str | None = None  # overrides the plan's repository (s3:// of the staged weights)
    aws_region: str | None = None
    pod_identity: bool = False  # the service account has an EKS Pod Identity association
    # Each pod gives itself a scale-down deletion cost from its node's capacity type (on-demand
    # floor beside spot): an init container with a projected token (see deletion_cost_init).
    deletion_cost: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    # A volume source (e.g. {"persistentVolumeClaim": ...}) holding the weights, mounted read-only
    # at WEIGHTS_MOUNT_PATH; None when vLLM downloads or streams them.
    weights_volume: dict[str, Any] | None = None
    image: str = VLLM_IMAGE  # the reference GPU nodes pull (image.registry applied)
    # (bucket, prefix) where replicas keep vLLM's compile caches (the plan's compile_cache): an init
    # container restores them before vLLM starts and a sidecar saves them once it is healthy.
    compile_cache: tuple[str, str] | None = None


def selector_labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": APP}


def shm_gib(plan: SizingPlan) -> int:
    """/dev/shm for NCCL between tensor-parallel ranks: 2 GiB, plus 4 GiB per extra GPU."""
    return 2 + 4 * (plan.tensor_parallel_size - 1)


def termination_grace_seconds(plan: SizingPlan) -> int:
    """The pause before SIGTERM, vLLM's drain (``--shutdown-timeout``), then time to exit."""
    return DEREGISTRATION_PAUSE_S + plan.drain_seconds + ENGINE_EXIT_S


def vllm_args(plan: SizingPlan, workload: Workload) -> list[str]:
    """The plan's arguments, with the model replaced by the staged S3 copy when there is one."""
    args = list(plan.vllm_args)
    if workload.model_uri:
        args[args.index("--model") + 1] = workload.model_uri
    return args


def _env(plan: SizingPlan, workload: Workload) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "HOME", "value": CACHE_MOUNTS["home"]},
        # The UID has no passwd entry in the image; getpass.getuser() (torch's cache paths) reads USER.
        {"name": "USER", "value": "vllm"},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": f"{CACHE_MOUNTS['home']}/.cache/torchinductor"},
        {"name": "HF_HOME", "value": "/models/hf"},
        {"name": "XDG_CACHE_HOME", "value": f"{CACHE_MOUNTS['home']}/.cache"},
        {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_MOUNTS['home']}/.cache/vllm"},
        {"name": "TRITON_CACHE_DIR", "value": f"{CACHE_MOUNTS['home']}/.triton"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "DO_NOT_TRACK", "value": "1"},
    ]
    if workload.aws_region:
        env.append({"name": "AWS_REGION", "value": workload.aws_region})
    if workload.hf_token:
        env.append(_secret_env("HF_TOKEN", HF_TOKEN_SECRET, HF_TOKEN_KEY))
    if workload.api_key:
        # vLLM then requires "Authorization: Bearer <key>" under its guarded prefixes only (see
        # ROUTED_PATH_PREFIXES): the load balancer routes nothing else.
        env.append(_secret_env("VLLM_API_KEY", API_KEY_SECRET, API_KEY_KEY))
    env += [{"name": k, "value": v} for k, v in sorted(workload.extra_env.items())]
    return env


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def pod_share(plan: SizingPlan, beside: dict[str, str] | None) -> tuple[str, str]:
    """CPU and memory of the plan's pod request left to one container when ``beside`` (the requests
    of the pod's other long-running containers) is taken out of it: the pod as a whole still asks
    for the plan's request, which is what fits the node (sizing/nodes.py pod_room)."""
    if not beside:
        return plan.cpu_request, plan.memory_request
    cpu = int(plan.cpu_request.removesuffix("m")) - int(beside["cpu"].removesuffix("m"))
    memory = int(plan.memory_request.removesuffix("Gi")) * 1024 - int(beside["memory"].removesuffix("Mi"))
    return f"{cpu}m", f"{memory}Mi"


def _resources(plan: SizingPlan, gpus: int) -> dict[str, Any]:
    scratch_gib = math.ceil(plan.weights_download_gib * 1.1) + 10
    # The compile-cache sidecar (with_compile_cache) runs beside vLLM for the pod's life.
    cpu, memory = pod_share(plan, COMPILE_CACHE_RESOURCES["requests"] if plan.compile_cache else None)
    requests = {
        "cpu": cpu,
        "memory": memory,
        "nvidia.com/gpu": str(gpus),
        "ephemeral-storage": f"{scratch_gib}Gi",
    }
    # GPUs are requested and limited alike (extended resources must be); memory is limited at
    # the request so a leak cannot starve the node's agents; CPU is left unlimited (no throttling).
    limits = {
        "memory": memory,
        "nvidia.com/gpu": str(gpus),
        "ephemeral-storage": f"{scratch_gib}Gi",
    }
    # No vpc.amazonaws.com/efa: the pinned vllm/vllm-openai image has no libfabric or aws-ofi-nccl,
    # so NCCL could not use EFA devices and would fall back to TCP sockets anyway. Multi-node
    # replicas use sockets openly, and the plan says so in its warnings.
    return {"requests": requests, "limits": limits}


def container_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> dict[str, Any]:
    """Non-root pods whose volumes belong to the container's group."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _volumes(plan: SizingPlan, workload: Workload) -> list[dict[str, Any]]:
    scratch_gib = math.ceil(plan.weights_download_gib * 1.1) + 10
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib(plan)}Gi"}},
        {"name": "models", "emptyDir": {"sizeLimit": f"{scratch_gib}Gi"}},
        {"name": "home", "emptyDir": {"sizeLimit": "20Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi"}},
    ]
    if workload.weights_volume:
        volumes.append({"name": WEIGHTS_VOLUME, **workload.weights_volume})
    return volumes


def _mounts(workload: Workload) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "models", "mountPath": "/models"},
        {"name": "home", "mountPath": CACHE_MOUNTS["home"]},
        {"name": "tmp", "mountPath": CACHE_MOUNTS["tmp"]},
    ]
    if workload.weights_volume:
        mounts.append({"name": WEIGHTS_VOLUME, "mountPath": WEIGHTS_MOUNT_PATH, "readOnly": True})
    return mounts


def _probe(path: str, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": PORT_NAME},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def server_container(
    plan: SizingPlan, workload: Workload, command: list[str] | None = None
) -> dict[str, Any]:
    """The vLLM OpenAI server container (the leader's, for multi-node replicas)."""
    container: dict[str, Any] = {
        "name": APP,
        "image": workload.image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": PORT_NAME, "containerPort": VLLM_PORT, "protocol": "TCP"}],
        "env": _env(plan, workload),
        "resources": _resources(plan, plan.tensor_parallel_size),
        "volumeMounts": _mounts(workload),
        "securityContext": container_security_context(),
        # Startup covers download, load and compile: the plan's estimate, in 10 s periods.
        "startupProbe": _probe(
            "/health", STARTUP_PROBE_PERIOD_S, math.ceil(plan.startup_probe_seconds / STARTUP_PROBE_PERIOD_S)
        ),
        "readinessProbe": _probe("/health", 5, 3),
        "livenessProbe": _probe("/health", 15, 6),
        # A short pause so the ALB and Service stop routing here before vLLM stops accepting;
        # vLLM then drains in-flight streams for --shutdown-timeout (the plan's drain_seconds).
        "lifecycle": {"preStop": {"sleep": {"seconds": DEREGISTRATION_PAUSE_S}}},
    }
    if command:
        container["command"] = command
    else:
        container["args"] = vllm_args(plan, workload)
    return container


def pod_spec(plan: SizingPlan, workload: Workload, containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "serviceAccountName": workload.service_account,
        # The pod never calls the Kubernetes API; AWS access (S3) comes from Pod Identity's own token.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(workload.node_selector),
        "tolerations": [dict(t) for t in workload.tolerations],
        "terminationGracePeriodSeconds": termination_grace_seconds(plan),
        "securityContext": pod_security_context(),
        "containers": containers,
        "volumes": _volumes(plan, workload),
    }


def rolling_update() -> dict[str, int]:
    """Surge one replica, keep every serving one until it is ready (see ROLLOUT_MAX_UNAVAILABLE)."""
    return {"maxSurge": ROLLOUT_MAX_SURGE, "maxUnavailable": ROLLOUT_MAX_UNAVAILABLE}


def deployment(plan: SizingPlan, workload: Workload, name: str = APP) -> dict[str, Any]:
    """A single-node replica as a Deployment. ``spec.replicas`` is left out: the autoscaler owns
    it, and Pulumi must not reset it on every update."""
    labels = {**workload.labels, **selector_labels()}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": labels,
            "annotations": checkov_annotations(vllm_checkov_skips(workload)),
        },
        "spec": {
            "selector": {"matchLabels": selector_labels()},
            # Never take a replica away before its replacement serves: surge one, none unavailable.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling_update()},
            "progressDeadlineSeconds": plan.startup_probe_seconds + 600,
            "template": {
                "metadata": {"labels": labels, "annotations": dict(SERVING_POD_ANNOTATIONS)},
                "spec": with_deletion_cost(
                    with_compile_cache(
                        pod_spec(plan, workload, [server_container(plan, workload)]), plan, workload
                    ),
                    workload,
                ),
            },
        },
    }


DELETION_COST_SCRIPT = "vllm-deletion-cost"
"""ConfigMap holding components/serving/scripts/deletion_cost.py, and the name of its RBAC objects."""
DELETION_COST_TOKEN_DIR = "/var/run/secrets/deletion-cost"  # deletion_cost.py TOKEN_DIR
# The projected token lives ten minutes (the API server's minimum), long enough for one call.
DELETION_COST_TOKEN_SECONDS = 600


def with_deletion_cost(spec: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """``spec`` plus, with ``workload.deletion_cost``, the init container that sets this pod's
    ``controller.kubernetes.io/pod-deletion-cost`` from its node's capacity type. The cost must be
    on the pod object: a ReplicaSet reads it there (kubernetes/kubernetes pkg/controller/
    controller_utils.go ActivePodsWithRanks.Less) and a Deployment's pods share one template.
    Only the init container gets a service-account token (a projected volume, not automounted);
    vLLM's container has none."""
    if not workload.deletion_cost:
        return spec
    field_env = {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "NODE_NAME": "spec.nodeName",
    }
    init = {
        "name": "deletion-cost",
        "image": workload.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "/scripts/deletion_cost.py"],
        "env": [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in field_env.items()],
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "deletion-cost-token", "mountPath": DELETION_COST_TOKEN_DIR, "readOnly": True},
            {"name": "deletion-cost-script", "mountPath": "/scripts", "readOnly": True},
        ],
    }
    token = {
        "name": "deletion-cost-token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": DELETION_COST_TOKEN_SECONDS}},
                # Every namespace has this ConfigMap (the kube-root-ca.crt publisher).
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ]
        },
    }
    script = {"name": "deletion-cost-script", "configMap": {"name": DELETION_COST_SCRIPT}}
    return {
        **spec,
        "initContainers": [init, *spec.get("initContainers", [])],
        "volumes": [*spec["volumes"], token, script],
    }


COMPILE_CACHE_SCRIPT = "vllm-compile-cache"
"""ConfigMap holding components/serving/scripts/compile_cache.py."""
COMPILE_CACHE_PREFIX = "compile-cache/"
"""Where the project's weights bucket keeps the compile caches, beside (never inside) the weights
prefixes, which vLLM's loader lists."""
COMPILE_CACHE_RESOURCES = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "256Mi"},
}


def compile_cache_prefix(plan: SizingPlan) -> str:
    """The key prefix of this variant's compile caches, which the pods' role may read and write."""
    return f"{COMPILE_CACHE_PREFIX}{plan.model.variant}/"


def compile_cache_key(plan: SizingPlan, image: str) -> str:
    """The folder, below the variant's prefix, where the pods of this image and these vLLM arguments
    keep their caches. vLLM names a new directory for every change to what it compiles (its config, the
    environment, its source: vllm/compilation/backends.py in 0.33.0), and the restore downloads
    everything under its prefix, up to a bound: one prefix per image and arguments keeps what an
    upgrade or a resized batch left behind out of every later start, and out of that bound. The
    GPU models one node pool mixes (dev's L4 and A10G) still share it, a directory each."""
    return hashlib.sha256("\0".join([image, *plan.vllm_args]).encode()).hexdigest()[:12]


def with_compile_cache(spec: dict[str, Any], plan: SizingPlan, workload: Workload) -> dict[str, Any]:
    """``spec`` plus, with ``workload.compile_cache``, the init container that restores vLLM's
    torch.compile and Triton caches from the bucket into the pod's HOME volume before vLLM starts,
    and a sidecar (an init container that keeps running, Kubernetes' native sidecars) that saves
    them once vLLM is healthy. Both run scripts/compile_cache.py in the vLLM image, hardened like
    the server; the pod's Pod Identity role may read and write that prefix only."""
    if not workload.compile_cache:
        return spec
    bucket, variant_prefix = workload.compile_cache
    prefix = f"{variant_prefix}{compile_cache_key(plan, workload.image)}/"
    env: list[dict[str, str]] = [
        {"name": "HOME", "value": CACHE_MOUNTS["home"]},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]
    if workload.aws_region:
        env.append({"name": "AWS_REGION", "value": workload.aws_region})
    mounts: list[dict[str, Any]] = [
        {"name": "home", "mountPath": CACHE_MOUNTS["home"]},
        {"name": "tmp", "mountPath": CACHE_MOUNTS["tmp"]},
        {"name": "compile-cache-script", "mountPath": "/scripts", "readOnly": True},
    ]
    where = ["--bucket", bucket, "--prefix", prefix]

    def container(mode: str, args: list[str]) -> dict[str, Any]:
        return {
            "name": f"compile-cache-{mode}",
            "image": workload.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "/scripts/compile_cache.py", mode],
            "args": [*where, *args],
            "env": [dict(e) for e in env],
            "resources": {k: dict(v) for k, v in COMPILE_CACHE_RESOURCES.items()},
            "securityContext": container_security_context(),
            "volumeMounts": [dict(m) for m in mounts],
        }

    restore = container("restore", [])
    # The sidecar starts before vLLM does and waits as long as Pulumi waits for a new replica.
    save = container("save", ["--deadline", str(plan.rollout_seconds)])
    save["restartPolicy"] = "Always"
    script = {"name": "compile-cache-script", "configMap": {"name": COMPILE_CACHE_SCRIPT}}
    return {
        **spec,
        "initContainers": [*spec.get("initContainers", []), restore, save],
        "volumes": [*spec["volumes"], script],
    }


DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"  # deletion_cost.py DELETION_COST
DELETION_COST_VALUE = "1000"  # deletion_cost.py KEPT_COST
# The pod a projected (bound) service-account token belongs to: the API server puts its name in the
# caller's user info under this key (k8s.io/apiserver v0.34.12 pkg/authentication/serviceaccount/
# util.go PodNameKey, set from the token's kubernetes.io.pod claim).
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"


def deletion_cost_policy(
    namespace: str, name: str, labels: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1, GA since
    Kubernetes 1.30; the supported clusters are 1.32-1.34) that narrow the init container's
    ``patch pods`` Role: RBAC cannot name a pod whose name is generated, so the Role covers every
    pod of the namespace, and this policy takes everything back but the one change the script
    makes. A request by the ``vllm`` service account on a pod is allowed only when it

    - is an update of the pod itself (no create, delete, connect or subresource),
    - targets the pod its bound token was issued for (the token's pod name in the user info),
    - leaves the spec, labels, owner references, finalizers and every other annotation as they
      were, and sets ``controller.kubernetes.io/pod-deletion-cost`` to 1000 or leaves it.

    Everyone else's requests are not matched (``matchConditions`` on the user name), so the kubelet,
    controllers and the deployer are untouched. A CEL error denies (``failurePolicy: Fail``): the
    script is best effort, the pod still starts and ranks like a spot pod."""
    user = f"system:serviceaccount:{namespace}:{APP}"
    key = json.dumps(DELETION_COST_ANNOTATION).replace('"', "'")
    pod = json.dumps(POD_NAME_EXTRA).replace('"', "'")
    same = [
        f"object.metadata.?{field}.orValue({empty}) == oldObject.metadata.?{field}.orValue({empty})"
        for field, empty in (("labels", "{}"), ("ownerReferences", "[]"), ("finalizers", "[]"))
    ]
    validations = [
        (
            "request.operation == 'UPDATE' && request.?subResource.orValue('') == ''",
            f"{APP} may only update a pod's own fields: no create, delete, connect or subresource",
        ),
        (
            f"{pod} in request.userInfo.extra && request.userInfo.extra[{pod}] == [object.metadata.name]",
            f"{APP} may only change the pod its token was issued for",
        ),
        (
            "object.spec == oldObject.spec && " + " && ".join(same),
            f"{APP} may not change a pod's spec, labels, owner references or finalizers",
        ),
        (
            "variables.new.all(k, k == variables.key"
            " || (k in variables.old && variables.old[k] == variables.new[k]))"
            " && variables.old.all(k, k == variables.key || k in variables.new)",
            f"{APP} may change no annotation but {DELETION_COST_ANNOTATION}",
        ),
        (
            f"!(variables.key in variables.new) || variables.new[variables.key] == '{DELETION_COST_VALUE}'"
            " || (variables.key in variables.old"
            " && variables.old[variables.key] == variables.new[variables.key])",
            f"{APP} may set {DELETION_COST_ANNOTATION} to {DELETION_COST_VALUE} only",
        ),
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["*"],
                        "resources": ["pods", "pods/*"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "deletion-cost-service-account",
                    "expression": f"request.userInfo.username == '{user}'",
                }
            ],
            "variables": [
                {"name": "key", "expression": key},
                {"name": "new", "expression": "object.metadata.?annotations.orValue({})"},
                {"name": "old", "expression": "oldObject.metadata.?annotations.orValue({})"},
            ],
            "validations": [{"expression": e, "message": m, "reason": "Forbidden"} for e, m in validations],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return policy, binding


def service(workload: Workload, name: str = APP, leader_only: bool = False) -> dict[str, Any]:
    selector = selector_labels()
    if leader_only:
        selector = {**selector, "deepseek-eks/role": "leader"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": {**workload.labels, **selector_labels()},
            # Pulumi would otherwise wait for endpoints, which appear only once a GPU replica has
            # loaded its weights (often past Pulumi's 10 min), and never at zero replicas.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


# llm-d's router pods (serving/router.py router_labels): its proxy connects to the picked pod's
# address on vLLM's port, and its endpoint picker scrapes each pod's /metrics there.
ROUTER_PEER = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "vllm-router"}}}


def network_policy(
    workload: Workload,
    *,
    load_balancer_cidrs: list[str],
    monitoring_namespace: str,
    name: str = APP,
    routed: bool = False,
) -> dict[str, Any]:
    """Admit port 8000 only from the load balancer's subnets (``routed``: from the router's pods
    instead, which the load balancer then targets) and from Prometheus' pods, and anything
    from the replica's own pods (Ray and NCCL between the nodes of a replica); let out DNS,
    HTTPS, Pod Identity (when the service account has an association) and the replica's pods.

    With ``target-type: ip`` the ALB connects to the pod from its own addresses in the subnets
    it was placed in; a NetworkPolicy cannot name the ALB's security group, so those subnets'
    CIDRs are the narrowest honest source."""
    own_pods = {"podSelector": {"matchLabels": selector_labels()}}
    vllm_port = [{"port": VLLM_PORT, "protocol": "TCP"}]
    if not load_balancer_cidrs:
        raise ValueError("network_policy: no load balancer subnet CIDRs; the endpoint would be unreachable")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": workload.namespace, "labels": workload.labels},
        "spec": {
            "podSelector": {"matchLabels": selector_labels()},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [ROUTER_PEER], "ports": vllm_port}
                if routed
                else {
                    "from": [{"ipBlock": {"cidr": cidr}} for cidr in load_balancer_cidrs],
                    "ports": vllm_port,
                },
                {
                    "from": [
                        {  # one peer: Prometheus pods AND in the monitoring namespace
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": monitoring_namespace}
                            },
                            "podSelector": {"matchLabels": dict(PROMETHEUS_SELECTOR)},
                        }
                    ],
                    "ports": vllm_port,
                },
                {"from": [own_pods]},
            ],
            # Weights on a local volume (Mountpoint, EBS snapshot): nothing to download.
            "egress": [
                *egress_rules(pod_identity=workload.pod_identity, https=workload.weights_volume is None),
                {"to": [own_pods]},
            ],
        },
    }


def disruption_budget(workload: Workload, name: str = APP) -> dict[str, Any]:
    """At most one replica evicted at a time. It binds only the Eviction API (node drains,
    Karpenter's graceful drift and consolidation): with two or more replicas the others keep
    serving while one is drained. It does not hold against forceful disruption (expiry, spot
    interruption, a node failure, or Auto Mode's terminationGracePeriod ending a drain; see
    nodepools.gpu_node_pool), and with one replica it protects nothing (the plan warns)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": workload.namespace, "labels": workload.labels},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels()},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
