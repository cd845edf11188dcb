"""The rules across stack settings: each reads two or more settings (of one group or of several)
and runs only when every setting it reads is valid on its own, so one mistake is reported once.
``settings/validate.py`` collects and types the settings, then calls them; who can reach what is
``settings/exposure.py``'s. Pure: no Pulumi import.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from deepseek_eks.sizing import KvCacheDtype, Quantization, instance_catalog, model_catalog
from deepseek_eks.sizing.checkpoints import catalogued_variant, known_checkpoint, prequantized_format
from deepseek_eks.sizing.planner import STAGED_SOURCES, served_quantization

from .arns import arn_problem
from .model import (
    _UNSET,
    DEFAULT_CONCURRENCY_SHARE,
    DOCKER_HUB_WARNING,
    PROJECT,
    S3_SCHEME,
    SEASONAL_RETENTION_S,
    AutoscalingSettings,
    AwsSettings,
    ClusterSettings,
    ComputeMode,
    EndpointScheme,
    EndpointSettings,
    LoadBalancerKind,
    ModelSettings,
    NetworkSettings,
    ObservabilitySettings,
    Problem,
    RoutingKind,
    RoutingSettings,
    ScalingSignal,
    WeightsSettings,
    WeightsSource,
    prometheus_retention_s,
)
from .names import (
    bucket_name_problem,
    hf_repo_id_problem,
    vpc_range_problem,
)


def arn_problems(
    groups: Mapping[str, Any], aws_settings: AwsSettings, region: str, invalid: set[str]
) -> list[Problem]:
    """Keys, certificates and roles from another region or partition (settings/arns.py)."""
    cluster: ClusterSettings = groups["cluster"]
    given: list[tuple[str, str | None, bool]] = [
        ("cluster.secretsKmsKeyArn", cluster.secrets_kms_key_arn, True),
        ("weights.kmsKeyArn", groups["weights"].kms_key_arn, True),
        # Its region is endpoint_access's rule (settings/exposure.py); its partition is judged here.
        ("endpoint.certificateArn", groups["endpoint"].certificate_arn, False),
    ]
    given += [(f"cluster.adminRoleArns[{i}]", arn, False) for i, arn in enumerate(cluster.admin_role_arns)]
    out = [
        Problem(f"{PROJECT}:{key}", arn, why)
        for key, arn, in_region in given
        if arn
        and all_valid(invalid, key.split("[", 1)[0])
        and (why := arn_problem(arn, region, regional=in_region))
    ]
    out += [
        Problem(f"aws:assumeRoles[{i}].roleArn", role.role_arn, why)
        for i, role in enumerate(aws_settings.assume_roles)
        if (why := arn_problem(role.role_arn, region, regional=False))
    ]
    return out


def all_valid(invalid: set[str], *keys: str) -> bool:
    """A cross-field rule runs when every setting it reads is valid."""
    return not invalid.intersection(keys)


def cross_field_problems(groups: Mapping[str, Any], invalid: set[str]) -> tuple[list[Problem], list[str]]:
    """Rules that involve two settings, each run when the settings it reads are valid (even if
    another field of the same group is not), and the warnings for valid but risky values."""
    out: list[Problem] = []
    warnings: list[str] = []
    p = f"{PROJECT}:"
    auto: AutoscalingSettings = groups["autoscaling"]
    above_max = (
        ("minReplicas", auto.min_replicas, f"greater than autoscaling.maxReplicas ({auto.max_replicas})"),
        (
            "warmSpareNodes",
            auto.warm_spare_nodes,
            f"more than autoscaling.maxReplicas ({auto.max_replicas}): the GPU pool's limit is sized "
            "for maxReplicas, so the extra spares could never get a node",
        ),
    )
    for key, value, message in above_max:
        if all_valid(invalid, f"autoscaling.{key}", "autoscaling.maxReplicas") and value > auto.max_replicas:
            out.append(Problem(f"{p}autoscaling.{key}", value, message))
    if all_valid(invalid, "autoscaling.schedule", "autoscaling.maxReplicas"):
        # A cron trigger's desiredReplicas is a metric of the HPA KEDA owns, and the HPA bounds
        # every recommendation by maxReplicas without a word (kubernetes
        # pkg/controller/podautoscaler/horizontal.go normalizeDesiredReplicas): a floor above it
        # is never what was asked for.
        out += [
            Problem(
                f"{p}autoscaling.schedule[{i}].replicas",
                floor.replicas,
                f"above autoscaling.maxReplicas ({auto.max_replicas}): the HPA would cap the floor "
                "there; lower the floor or raise autoscaling.maxReplicas",
            )
            for i, floor in enumerate(auto.schedule or [])
            if floor.replicas > auto.max_replicas
        ]
    out += _scale_from_zero_problems(auto, groups["routing"], invalid)
    if all_valid(invalid, "autoscaling.signal"):
        warnings += _signal_warnings(auto)
    endpoint: EndpointSettings = groups["endpoint"]
    usable = all_valid(invalid, "endpoint.scheme", "endpoint.allowedCidrs")
    if usable and endpoint.scheme is EndpointScheme.INTERNET_FACING and not endpoint.allowed_cidrs:
        out.append(
            Problem(
                f"{p}endpoint.allowedCidrs",
                [],
                "required when endpoint.scheme is internet-facing: list the client CIDRs",
            )
        )
    warnings += _load_balancer_subnet_warnings(groups["network"], endpoint)
    model: ModelSettings = groups["model"]
    if all_valid(invalid, "model.variant", "model.maxModelLen"):
        spec = model_catalog()[model.variant.value]
        if model.max_model_len > spec.max_position_embeddings:
            out.append(
                Problem(
                    f"{p}model.maxModelLen",
                    model.max_model_len,
                    f"above {model.variant.value}'s max_position_embeddings ({spec.max_position_embeddings})",
                )
            )
    awq = all_valid(invalid, "model.quantization") and model.quantization is Quantization.AWQ_INT4
    no_known_checkpoint = known_checkpoint(model.variant.value, Quantization.AWQ_INT4.value) is None
    if awq and all_valid(invalid, "model.repository") and not model.repository and no_known_checkpoint:
        out.append(
            Problem(
                f"{p}model.repository",
                None,
                "required with model.quantization awq-int4: name a pre-quantized AWQ "
                "checkpoint (Hugging Face repo id)",
            )
        )
    out += _kv_cache_dtype_problems(model, groups["gpu"].instance_families, invalid)
    out += _repository_variant_problems(model, invalid)
    out += _prequantized_repository_problems(model, invalid)
    repository = model.repository
    hf_repository = repository and not repository.startswith(S3_SCHEME)
    hf_repository = hf_repository and all_valid(invalid, "model.repository")
    if hf_repository and (why := hf_repo_id_problem(str(repository))):
        out.append(Problem(f"{p}model.repository", repository, f"as a Hugging Face repo id {why}"))
    obs: ObservabilitySettings = groups["observability"]
    if all_valid(invalid, "observability.prometheusRetention") and int(obs.prometheus_retention[:-1]) == 0:
        out.append(
            Problem(
                f"{p}observability.prometheusRetention",
                obs.prometheus_retention,
                "must be more than zero (Prometheus would keep nothing); e.g. 15d",
            )
        )
    out += _seasonal_problems(auto, obs, invalid)
    out += _s3_repository_problems(model, groups["weights"], invalid)
    out += _weights_kms_problems(groups["weights"], invalid)
    out += _security_option_problems(groups["cluster"], groups["weights"], endpoint)
    out += _network_problems(groups["network"], endpoint, invalid)
    if all_valid(invalid, "image.registry") and not groups["image"].registry:
        warnings.append(DOCKER_HUB_WARNING)
    return out, warnings


def _seasonal_problems(
    auto: AutoscalingSettings, obs: ObservabilitySettings, invalid: set[str]
) -> list[Problem]:
    """autoscaling.seasonal reads last week's demand from Prometheus: a shorter retention would
    leave that trigger reading nothing, without a word, so the floor would silently be yesterday's
    alone."""
    if (
        not all_valid(invalid, "autoscaling.seasonal", "observability.prometheusRetention")
        or not auto.seasonal
    ):
        return []
    if prometheus_retention_s(obs.prometheus_retention) >= SEASONAL_RETENTION_S:
        return []
    days = SEASONAL_RETENTION_S // 86_400
    return [
        Problem(
            f"{PROJECT}:autoscaling.seasonal",
            True,
            f"needs observability.prometheusRetention of at least {days}d to read last week's demand "
            f"(it is {obs.prometheus_retention}): raise observability.prometheusRetention to {days}d or "
            "more, or set autoscaling.seasonal false",
        )
    ]


def _kv_cache_dtype_problems(
    model: ModelSettings, families: Iterable[str], invalid: set[str]
) -> list[Problem]:
    """model.kvCacheDtype fp8 needs FP8 tensor cores on every GPU the pool may launch (compute
    capability 8.9 or newer: L4, L40S, H100, H200, B200; sizing/catalog.py ``GpuArch.fp8``)."""
    if not all_valid(invalid, "model.kvCacheDtype", "gpu.instanceFamilies"):
        return []
    if model.kv_cache_dtype is not KvCacheDtype.FP8:
        return []
    catalog = instance_catalog()
    lacking: dict[str, str] = {}
    for family in families:
        for instance in catalog.in_families([family]):
            if not instance.arch.fp8:
                lacking[family] = instance.gpu_model
    if not lacking:
        return []
    named = ", ".join(f"{f} ({gpu})" for f, gpu in lacking.items())
    keep = [f for f in families if f not in lacking]
    fix = f"remove {', '.join(lacking)} from gpu.instanceFamilies" + (
        "" if keep else " (allow g6, g6e, p5, p5e, p5en or p6-b200)"
    )
    return [
        Problem(
            f"{PROJECT}:model.kvCacheDtype",
            model.kv_cache_dtype.value,
            f"fp8 needs GPUs with FP8 tensor cores; gpu.instanceFamilies allows {named}, which have none: "
            f"{fix}, or set model.kvCacheDtype auto",
        )
    ]


def _scale_from_zero_problems(
    auto: AutoscalingSettings, routing: RoutingSettings, invalid: set[str]
) -> list[Problem]:
    """Only the router's queue has a value while no replica runs: every other signal is a metric of
    the vLLM pods (or their GPUs), so at zero replicas nothing would ever ask for one. Hence
    ``minReplicas 0`` needs ``router-queue``, and ``router-queue`` needs the router."""
    p = f"{PROJECT}:"
    out: list[Problem] = []
    with_router = routing.kind is RoutingKind.LLM_D
    signal_usable = all_valid(invalid, "autoscaling.signal")
    router_queue = auto.signal is ScalingSignal.ROUTER_QUEUE
    if (
        all_valid(invalid, "autoscaling.minReplicas")
        and signal_usable
        and auto.min_replicas == 0
        and not router_queue
    ):
        fix = "" if with_router else " and routing.kind llm-d"
        out.append(
            Problem(
                f"{p}autoscaling.minReplicas",
                0,
                f"0 needs autoscaling.signal router-queue{fix}: with {auto.signal.value} the metric "
                "lives in the vLLM pods, so once none runs nothing would start one and the endpoint "
                f"would answer 503. Set autoscaling.signal router-queue{fix}, or autoscaling."
                "minReplicas 1",
            )
        )
    if signal_usable and all_valid(invalid, "routing.kind") and router_queue and not with_router:
        out.append(
            Problem(
                f"{p}autoscaling.signal",
                auto.signal.value,
                f"router-queue needs routing.kind llm-d (routing.kind is {routing.kind.value}): the "
                "queue it reads is the router's. Set routing.kind llm-d, or choose another "
                "autoscaling.signal (queue-depth, concurrency, kv-cache, combined, gpu-utilization)",
            )
        )
    return out


def _repository_variant_problems(model: ModelSettings, invalid: set[str]) -> list[Problem]:
    """A repository the catalogs know to hold another variant's weights: the plan would size the
    pods, GPUs and cache for ``model.variant`` while vLLM loaded the other model (the 70B's 131 GiB
    on the 7B's one L4), failing only when the first pod ran out of memory."""
    if not (all_valid(invalid, "model.repository", "model.variant") and model.repository):
        return []
    holds = catalogued_variant(model.repository)
    if holds is None or holds == model.variant.value:
        return []
    return [
        Problem(
            f"{PROJECT}:model.repository",
            model.repository,
            f"holds the weights of {holds} (sizing/data/models.json, checkpoints.json), not of "
            f"model.variant {model.variant.value}: set model.variant {holds}, or name a repository "
            f"of {model.variant.value}'s weights",
        )
    ]


def _prequantized_repository_problems(model: ModelSettings, invalid: set[str]) -> list[Problem]:
    """A catalogued pre-quantized checkpoint holds one format: vLLM refuses to start when
    ``--quantization`` names another (vllm/config/model.py ``ModelConfig._verify_quantization``)."""
    if not (all_valid(invalid, "model.repository") and all_valid(invalid, "model.quantization")):
        return []
    held = prequantized_format(model.variant.value, model.repository)
    spec = model_catalog()[model.variant.value]
    wanted = served_quantization(model.quantization, spec, model.repository).value
    if held is None or held == wanted:
        return []
    return [
        Problem(
            f"{PROJECT}:model.quantization",
            model.quantization.value,
            f"model.repository {model.repository} holds {held} weights (sizing/data/checkpoints.json) and "
            f"vLLM refuses to serve them as {wanted}: set model.quantization {held}, or name a "
            f"repository with {wanted} weights",
        )
    ]


def s3_location(repository: str) -> tuple[str, str] | None:
    """``s3://bucket[/prefix]`` -> ``(bucket, prefix)``, the one place an s3:// repository is taken
    apart; None for a Hugging Face repo id. The prefix is "" for the whole bucket, else it ends in
    exactly one "/": Mountpoint's ``--prefix`` must (awslabs/mountpoint-s3 doc/CONFIGURATION.md),
    and it keeps IAM's ``prefix*`` from matching a sibling (``r1`` would match ``r1-old/``)."""
    if not repository.startswith(S3_SCHEME):
        return None
    bucket, _, prefix = repository.removeprefix(S3_SCHEME).partition("/")
    prefix = prefix.rstrip("/")
    return bucket, f"{prefix}/" if prefix else ""


def _s3_repository_problems(
    model: ModelSettings, weights: WeightsSettings, invalid: set[str]
) -> list[Problem]:
    """An s3:// repository is the user's own bucket, read in place: vLLM streams it (``s3``) or
    Mountpoint mounts it (``s3-mountpoint``). The other sources cannot read it, and the source is
    never switched for the user."""
    if not all_valid(invalid, "model.repository") or not model.repository:
        return []
    location = s3_location(model.repository)
    if location is None:
        return []
    key, repository = f"{PROJECT}:model.repository", model.repository
    if why := bucket_name_problem(location[0]):
        return [Problem(key, repository, f"the bucket name {why} (S3 bucket naming rules)")]
    # No IAM wildcard from a setting.
    # The bucket and prefix become IAM resources (arn:...:bucket/prefix*) and an s3:prefix
    # condition, where * and ? are wildcards: s3://bucket/* would grant every object of the
    # bucket, not a folder named "*".
    if any(c in location[1] for c in "*?"):
        return [
            Problem(
                key,
                repository,
                "the prefix contains '*' or '?', which IAM reads as a wildcard in the reader's "
                "policy (s3://bucket/* would grant the whole bucket): give the folder itself, such "
                "as s3://bucket/deepseek/r1, or s3://bucket for the whole bucket",
            )
        ]
    segments = location[1].removesuffix("/").split("/")
    if location[1] and any(segment in ("", ".", "..") for segment in segments):
        return [
            Problem(
                key,
                repository,
                "the prefix has an empty, '.' or '..' path segment (such as '//'): S3 keeps them "
                "literally, so it names other objects than the folder meant; write it as "
                "s3://bucket/folder/subfolder",
            )
        ]
    if not all_valid(invalid, "weights.source"):
        return []
    if weights.source is WeightsSource.HUGGINGFACE:
        return [
            Problem(
                key,
                repository,
                "an s3:// repository needs weights.source s3 (vLLM streams it) or s3-mountpoint "
                "(mounted read-only), but weights.source is huggingface (also when unset), "
                "which downloads a Hugging Face repo id: set weights.source, or give a Hugging Face repo id",
            )
        ]
    if weights.source is WeightsSource.EBS_SNAPSHOT:
        # automation/bake.py fills the volume with `hf download` from an instance that has no
        # instance profile: it can neither read a bucket nor be given one without a new role.
        return [
            Problem(
                key,
                repository,
                "weights.source ebs-snapshot cannot use an s3:// repository: `automation "
                "bake-weights` downloads from Hugging Face on an instance with no AWS role; set "
                "weights.source s3 or s3-mountpoint to read your bucket, or give the Hugging Face repo id",
            )
        ]
    return []


def weights_problems(weights: WeightsSettings, compute_mode: str, invalid: set[str]) -> list[Problem]:
    """``weights.snapshotId`` and ``weights.fastSnapshotRestore`` belong to ``ebs-snapshot``, which
    needs the id; on Auto Mode it also needs fast snapshot restore (see the message)."""
    p = f"{PROJECT}:weights."
    if not all_valid(invalid, "weights.source"):
        return []
    out = []
    snapshot = weights.source is WeightsSource.EBS_SNAPSHOT
    if snapshot and not weights.snapshot_id and all_valid(invalid, "weights.snapshotId"):
        out.append(
            Problem(
                f"{p}snapshotId",
                _UNSET,
                "required with weights.source ebs-snapshot: run `python -m automation bake-weights "
                "--stack <stack>`, which makes the snapshot and saves its id here",
            )
        )
    if not snapshot:
        for key, default in (("snapshot_id", None), ("fast_snapshot_restore", False)):
            if getattr(weights, key) != default:
                alias = WeightsSettings.model_fields[key].alias
                out.append(
                    Problem(
                        f"{p}{alias}",
                        getattr(weights, key),
                        "only applies to weights.source ebs-snapshot; remove it or change the source",
                    )
                )
    auto_mode = compute_mode == ComputeMode.AUTO_MODE.value
    if (
        snapshot
        and auto_mode
        and not weights.fast_snapshot_restore
        and all_valid(invalid, "weights.fastSnapshotRestore")
    ):
        # Volumes from a snapshot load each block from S3 on first read at an unpublished rate. The
        # EBS CSI driver can ask for a provisioned initialization rate (aws-ebs-csi-driver
        # docs/parameters.md volumeInitializationRate); Auto Mode's provisioner documents none.
        out.append(
            Problem(
                f"{p}fastSnapshotRestore",
                False,
                "weights.source ebs-snapshot on computeMode auto-mode needs true: Auto Mode's EBS "
                "provisioner has no provisioned initialization rate, so without fast snapshot "
                "restore a replica would read its weights at an unknown rate; or use computeMode "
                "karpenter, or weights.source s3",
            )
        )
    return out


# Below this GPU target one busy replica asks for more than four (100 / target): see _signal_warnings.
LOW_GPU_TARGET = 25


def _signal_warnings(auto: AutoscalingSettings) -> list[str]:
    """A GPU target so low that light traffic fills the fleet, and settings the chosen signal does
    not read. (Scale to zero is refused unless the router's queue can wake the service:
    ``_scale_from_zero_problems``.) Warnings, not errors: ``--set autoscaling.signal=...``
    switches the signal for one run and should keep the stack's other tuning. Only a changed value
    is reported: the engine passes Pulumi.yaml's default for every key, so an unset key cannot be
    told from one set to its default."""
    low_target = []
    gpu_signal = auto.signal in (ScalingSignal.GPU_UTILIZATION, ScalingSignal.COMBINED)
    if gpu_signal and auto.target_gpu_utilization < LOW_GPU_TARGET:
        # The HPA asks for ceil(replicas x utilization / target) (Kubernetes HPA algorithm
        # details): one GPU busy with a single stream, near 100 %, already asks for 100 / target.
        asked = math.ceil(100 / auto.target_gpu_utilization)
        low_target.append(
            f"{PROJECT}:autoscaling.targetGpuUtilization is {auto.target_gpu_utilization}: one GPU "
            f"busy with a single request asks the HPA for {asked} replicas, so light traffic holds "
            f"the fleet near autoscaling.maxReplicas ({auto.max_replicas}); targets of "
            f"{LOW_GPU_TARGET} or more scale with the load"
        )
    unused = []
    if auto.signal is ScalingSignal.QUEUE_DEPTH and auto.target_gpu_utilization != 50:
        unused.append(("targetGpuUtilization", "gpu-utilization or combined"))
    if auto.signal is ScalingSignal.GPU_UTILIZATION and auto.queue_depth_per_replica != 5:
        unused.append(("queueDepthPerReplica", "queue-depth or combined"))
    kv_signals = (ScalingSignal.KV_CACHE, ScalingSignal.CONCURRENCY)
    if auto.signal not in kv_signals and auto.target_kv_cache_usage != 0.85:
        unused.append(("targetKvCacheUsage", "kv-cache or concurrency"))
    share_signals = (ScalingSignal.CONCURRENCY, ScalingSignal.ROUTER_QUEUE)
    # The seasonal triggers hold their demand at the same per-replica share.
    share_read = auto.signal in share_signals or auto.seasonal
    if not share_read and auto.target_concurrency_share != DEFAULT_CONCURRENCY_SHARE:
        unused.append(("targetConcurrencyShare", "concurrency, router-queue or autoscaling.seasonal"))
    return low_target + [
        f"{PROJECT}:autoscaling.{key} has no effect with autoscaling.signal {auto.signal.value} "
        f"(only with {signals})"
        for key, signals in unused
    ]


# Customer-managed KMS key for the weights.
def _weights_kms_problems(weights: WeightsSettings, invalid: set[str]) -> list[Problem]:
    """The key is used only where the weights are in S3; elsewhere it would be silently ignored."""
    if not weights.kms_key_arn or not all_valid(invalid, "weights.source"):
        return []
    if weights.source in STAGED_SOURCES:
        return []
    return [
        Problem(
            f"{PROJECT}:weights.kmsKeyArn",
            weights.kms_key_arn,
            f"only applies with weights.source s3 or s3-mountpoint (it is {weights.source.value}): "
            "remove it or change the source",
        )
    ]


# Created KMS key, ALB access logs.
def _security_option_problems(
    cluster: ClusterSettings, weights: WeightsSettings, endpoint: EndpointSettings
) -> list[Problem]:
    """A created key and a given one for the same use contradict each other; access-log settings
    that would change nothing are refused rather than ignored."""
    out = []
    if cluster.create_kms_key:
        for key, arn in (
            ("cluster.secretsKmsKeyArn", cluster.secrets_kms_key_arn),
            ("weights.kmsKeyArn", weights.kms_key_arn),
        ):
            if arn:
                out.append(
                    Problem(
                        f"{PROJECT}:{key}",
                        arn,
                        f"contradicts {PROJECT}:cluster.createKmsKey true (that key would be used "
                        "instead): remove one of the two",
                    )
                )
    if endpoint.access_logs_days is not None and not endpoint.access_logs:
        out.append(
            Problem(
                f"{PROJECT}:endpoint.accessLogsDays",
                endpoint.access_logs_days,
                f"has no effect without {PROJECT}:endpoint.accessLogs true: set that or remove this",
            )
        )
    if endpoint.access_logs and endpoint.load_balancer is LoadBalancerKind.NLB:
        out.append(
            Problem(
                f"{PROJECT}:endpoint.accessLogs",
                True,
                f"applies to the ALB only ({PROJECT}:endpoint.loadBalancer is nlb, whose access logs "
                "cover TLS listeners alone): use the alb or remove endpoint.accessLogs",
            )
        )
    return out


# Load-balancer-only subnets.
def _load_balancer_subnet_problems(network: NetworkSettings) -> list[Problem]:
    """Load-balancer subnets must be their own: one that is also a pod subnet would admit its pods."""
    key, lb = f"{PROJECT}:network.loadBalancerSubnetIds", network.load_balancer_subnet_ids
    if not lb:
        return []
    shared = sorted(set(lb) & (set(network.private_subnet_ids) | set(network.public_subnet_ids)))
    if shared:
        return [
            Problem(
                key,
                shared,
                "also listed in network.privateSubnetIds or network.publicSubnetIds: give subnets "
                "no node or pod uses, so the NetworkPolicy can admit the load balancer alone",
            )
        ]
    if len(lb) < 2:
        return [Problem(key, lb, "list at least 2 subnets in different AZs (an ALB needs two)")]
    return []


def _load_balancer_subnet_warnings(network: NetworkSettings, endpoint: EndpointSettings) -> list[str]:
    """Your VPC with an internal endpoint and no load-balancer subnets: the policy can only admit
    the private subnets, where every pod of the cluster has its address too (VPC CNI)."""
    if not network.vpc_id or network.load_balancer_subnet_ids:
        return []
    if endpoint.scheme is EndpointScheme.INTERNET_FACING:
        return []
    return [
        f"{PROJECT}:network.loadBalancerSubnetIds is not set: the internal load balancer takes "
        "addresses in your private subnets, which are also pod subnets, so port 8000 admits every "
        "pod there; give 2+ small private subnets that only load balancers use (they are named on "
        "the Ingress or Service)"
    ]


def _network_problems(
    network: NetworkSettings, endpoint: EndpointSettings, invalid: set[str]
) -> list[Problem]:
    p = f"{PROJECT}:network."
    out = []
    private, public = network.private_subnet_ids, network.public_subnet_ids
    both = sorted(set(private) & set(public))
    if both and all_valid(invalid, "network.privateSubnetIds", "network.publicSubnetIds"):
        out.append(Problem(f"{p}publicSubnetIds", both, "also listed in network.privateSubnetIds"))
    if network.vpc_id:
        if len(private) < 2 and all_valid(invalid, "network.privateSubnetIds"):
            out.append(
                Problem(
                    f"{p}privateSubnetIds",
                    private,
                    "with network.vpcId, list at least 2 distinct private subnets in different AZs",
                )
            )
        internet_facing = endpoint.scheme is EndpointScheme.INTERNET_FACING
        if (
            internet_facing
            and len(public) < 2
            and all_valid(invalid, "network.publicSubnetIds", "endpoint.scheme")
        ):
            out.append(
                Problem(
                    f"{p}publicSubnetIds",
                    public,
                    "an internet-facing endpoint in your VPC needs at least 2 distinct public subnets",
                )
            )
        # Pulumi passes Pulumi.yaml's defaults as config too, so only a changed value is a mistake.
        for key in ("vpc_cidr", "availability_zones", "nat_gateway_per_zone"):
            if getattr(network, key) != NetworkSettings.model_fields[key].default:
                alias = NetworkSettings.model_fields[key].alias
                out.append(
                    Problem(
                        f"{p}{alias}",
                        getattr(network, key),
                        "only applies to the VPC the program creates; remove it when network.vpcId is set",
                    )
                )
        out += _load_balancer_subnet_problems(network)
    else:
        for key in ("private_subnet_ids", "public_subnet_ids", "load_balancer_subnet_ids"):
            if getattr(network, key):
                alias = NetworkSettings.model_fields[key].alias
                out.append(Problem(f"{p}{alias}", getattr(network, key), "needs network.vpcId"))
        prefix = int(network.vpc_cidr.split("/")[1])
        if all_valid(invalid, "network.vpcCidr") and (why := vpc_range_problem(network.vpc_cidr)):
            out.append(Problem(f"{p}vpcCidr", network.vpc_cidr, why))
        if not 16 <= prefix <= 20 and all_valid(invalid, "network.vpcCidr"):
            out.append(
                Problem(
                    f"{p}vpcCidr",
                    network.vpc_cidr,
                    "must be a /16 to /20: pods take VPC addresses, so GPU nodes need large subnets",
                )
            )
    return out
