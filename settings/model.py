"""Typed stack settings: every key of DESIGN.md's configuration table, its default and its rules.

Pure: no Pulumi import. ``parse_settings`` takes the raw config map Pulumi hands a program
(``"<namespace>:<key>" -> value``, values as strings or already typed) and returns ``Settings``
or raises ``SettingsError`` listing every problem at once.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from deepseek_eks.sizing import GPU_FAMILIES, VARIANTS, PlanRequest, Quantization, model_catalog
from deepseek_eks.sizing.catalog import unknown_family_message
from deepseek_eks.sizing.checkpoints import known_checkpoint

from . import safe_yaml
from .arns import arn_problem
from .credentials import looks_like_credential, redact
from .exposure import api_access, endpoint_access
from .names import (
    bucket_name_problem,
    hf_repo_id_problem,
    region_problem,
    stack_name_problems,
    vpc_range_problem,
)
from .safe_yaml import shown_key
from .schedule import Cron, CronError, never_fires, time_zone

PROJECT = "deepseek-eks"
SECRET_KEYS = ("hfToken", "apiKey", "grafanaAdminPassword")
DEFAULT_KUBERNETES_VERSION = "1.34"
# Minor versions the pinned AL2023 AMI release (components/versions.py) has images for.
SUPPORTED_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34")
DEFAULT_REGION = "us-east-1"

Variant = Enum("Variant", {v.upper().replace("-", "_").replace(".", "_"): v for v in VARIANTS}, type=str)  # type: ignore[misc]


class ComputeMode(StrEnum):
    """Where GPU nodes come from."""

    AUTO_MODE = "auto-mode"
    KARPENTER = "karpenter"


class CapacityType(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"


class ScalingSignal(StrEnum):
    """What the autoscaler follows."""

    GPU_UTILIZATION = "gpu-utilization"
    QUEUE_DEPTH = "queue-depth"
    COMBINED = "combined"
    KV_CACHE = "kv-cache"  # vllm:kv_cache_usage_perc, through KEDA
    # vllm:num_requests_running + vllm:num_requests_waiting, through KEDA: the load a replica carries
    CONCURRENCY = "concurrency"


class EndpointScheme(StrEnum):
    INTERNAL = "internal"
    INTERNET_FACING = "internet-facing"


class EndpointAuth(StrEnum):
    """How clients authenticate: a bearer key vLLM checks (generated when ``apiKey`` is unset), or
    nothing at all (an explicit, warned choice, refused for an internet-facing endpoint)."""

    API_KEY = "api-key"
    NONE = "none"


class LoadBalancerKind(StrEnum):
    """What fronts vLLM: an ALB (L7, routes only the key-guarded API) or an NLB (L4)."""

    ALB = "alb"
    NLB = "nlb"


S3_SCHEME = "s3://"


class WeightsSource(StrEnum):
    """Where vLLM loads the model from (README "Weights" compares them)."""

    HUGGINGFACE = "huggingface"
    # Run:ai streamer from the project's bucket, or from your own (model.repository s3://...)
    S3 = "s3"
    S3_MOUNTPOINT = "s3-mountpoint"  # that bucket mounted read-only by the Mountpoint CSI driver
    EBS_SNAPSHOT = "ebs-snapshot"  # a volume per pod from a snapshot `automation bake-weights` made


INT32_MAX = 2**31 - 1  # Kubernetes replica counts and most API integers are int32
# Kubernetes is built and tested for clusters of at most 5,000 nodes ("Considerations for large
# clusters", https://kubernetes.io/docs/setup/best-practices/cluster-large/); a replica holds at
# least one GPU node, so more replicas than that cannot be scheduled in one cluster.
MAX_REPLICAS = 5000
_ASCII_INT = re.compile(r"[-+]?[0-9]+", re.ASCII)
_ASCII_DECIMAL = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?", re.ASCII)
_IPV4_CIDR = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}", re.ASCII)
_REGION = re.compile(r"[a-z]{2,4}(-[a-z]+)+-[0-9]{1,2}", re.ASCII)


def _as_list(value: Any) -> Any:
    """Pulumi hands list config to programs as a JSON string; ``--set`` users type commas or
    YAML flow lists (read with the same safe loader as stack files)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return safe_yaml.load(text, "list")
            except safe_yaml.YamlError as e:
                raise ValueError(e.issues[0].message) from None
        return [p.strip() for p in text.split(",") if p.strip()]
    return value


def _distinct(value: Any) -> Any:
    if isinstance(value, list):
        seen = [v for i, v in enumerate(value) if v in value[:i]]
        if seen:
            raise ValueError(f"{_display(seen[0])} is listed twice")
    return value


def _whole_number(value: Any) -> Any:
    """Integers as Pulumi and JSON write them: ASCII digits (not ``\\d``, which matches any
    Unicode digit), an integral number, never a boolean."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true/false")
    if isinstance(value, str):
        if not _ASCII_INT.fullmatch(value.strip()):
            raise ValueError("must be a whole number written with the digits 0-9")
        return int(value.strip())
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be a whole number")
        return int(value)
    return value


def _decimal(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    if isinstance(value, str):
        if not _ASCII_DECIMAL.fullmatch(value.strip()):
            raise ValueError("must be a decimal number written with the digits 0-9")
        return float(value.strip())
    return value


def _boolean(value: Any) -> Any:
    """``true``/``false`` as Pulumi's Python SDK reads them (``pulumi/config.py`` ``_get_bool``
    accepts exactly ``true``, ``True``, ``false`` and ``False``), not pydantic's yes/on/1."""
    if isinstance(value, bool):
        return value
    if value in ("true", "True"):
        return True
    if value in ("false", "False"):
        return False
    raise ValueError("must be true or false")


def _gpu_family(value: Any) -> Any:
    if isinstance(value, str) and value not in GPU_FAMILIES:
        raise ValueError(unknown_family_message(_truncate(value)))
    return value


def _ipv4_cidr(value: Any) -> Any:
    """An IPv4 network with an explicit prefix length: the VPC, the ALB and the EKS public
    endpoint here are IPv4-only, and a bare address or a netmask form is easy to misread."""
    if not isinstance(value, str):
        return value
    if ":" in value:
        raise ValueError("IPv6 is not supported here (IPv4-only VPC, load balancer and API endpoint)")
    if not _IPV4_CIDR.fullmatch(value):
        if "/" not in value:
            raise ValueError("needs a prefix length, e.g. 203.0.113.7/32 for one address")
        raise ValueError("not an IPv4 CIDR block like 10.0.0.0/16")
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as e:
        if "host bits set" in str(e):
            network = ipaddress.IPv4Network(value, strict=False)
            raise ValueError(f"has host bits set; the network is {network}") from None
        raise ValueError(f"not an IPv4 CIDR block ({e})") from None
    return value


WholeNumber = Annotated[int, BeforeValidator(_whole_number)]
Decimal = Annotated[float, BeforeValidator(_decimal)]
Boolean = Annotated[bool, BeforeValidator(_boolean)]
GpuFamily = Annotated[str, BeforeValidator(_gpu_family)]
Cidr = Annotated[str, BeforeValidator(_ipv4_cidr)]
# ASCII classes only: pydantic's regex engine gives \d and \w their Unicode meaning.
IamRoleArn = Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]{1,512}$")]
SubnetId = Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]
SecurityGroupId = Annotated[str, Field(pattern=r"^sg-[0-9a-f]{8,17}$")]
AccountId = Annotated[
    str,
    BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v),
    Field(pattern=r"^[0-9]{12}$"),
]


# A list setting: JSON, YAML flow or comma-separated text (read first), then no item twice.
_AS_LIST = BeforeValidator(_as_list)
_DISTINCT = BeforeValidator(_distinct)


class _Group(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, allow_inf_nan=False
    )


class ModelSettings(_Group):
    """``model.*``: which DeepSeek-R1 variant to serve and how."""

    variant: Variant = Field(Variant("r1-distill-qwen-7b"), description="The DeepSeek-R1 variant.")
    quantization: Quantization = Field(
        Quantization.AUTO,
        description="auto = the checkpoint's format (bf16 for distills, fp8 for r1-671b).",
    )
    repository: str | None = Field(
        None,
        max_length=256,
        # Hugging Face repo ids are owner/name of ASCII letters, digits, '-', '_' and '.'
        # (huggingface_hub validate_repo_id); an S3 bucket name is 3-63 lowercase characters.
        pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?|[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+)$",
        description="Override: a Hugging Face repo id (owner/name) or an s3:// prefix.",
    )
    max_model_len: WholeNumber = Field(32768, ge=1024, le=INT32_MAX, description="Context window in tokens.")
    min_full_length_sequences: WholeNumber = Field(
        1, ge=1, le=4096, description="The KV cache must hold this many maxModelLen sequences at once."
    )


class GpuSettings(_Group):
    """``gpu.*``: which EC2 GPU instances the node pool may launch."""

    instance_families: Annotated[list[GpuFamily], _DISTINCT, _AS_LIST] = Field(
        default_factory=lambda: ["g6", "g6e"], min_length=1, max_length=len(GPU_FAMILIES)
    )
    capacity_types: Annotated[list[CapacityType], _DISTINCT, _AS_LIST] = Field(
        default_factory=lambda: [CapacityType.SPOT, CapacityType.ON_DEMAND], min_length=1, max_length=2
    )
    capacity_reservation_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^cr-[0-9a-f]{17}$")]], _DISTINCT, _AS_LIST
    ] = Field(
        default_factory=list,
        max_length=30,  # EC2NodeClass capacityReservationSelectorTerms maxItems (Karpenter 1.14)
        description="EC2 On-Demand Capacity Reservations or Capacity Blocks (cr-...) the GPU nodes "
        "use first (computeMode karpenter; needs on-demand in gpu.capacityTypes).",
    )


def _capacity_reservation_problems(gpu: GpuSettings | None, compute_mode: object) -> list[Problem]:
    """gpu.capacityReservationIds renders as EC2NodeClass capacityReservationSelectorTerms."""
    if not gpu or not gpu.capacity_reservation_ids:
        return []
    key, value = f"{PROJECT}:gpu.capacityReservationIds", gpu.capacity_reservation_ids
    if compute_mode != ComputeMode.KARPENTER.value:
        # EKS Auto Mode documents the same NodeClass field (EKS User Guide, "Control deployment of
        # workloads into Capacity Reservations with EKS Auto Mode"), but the Auto Mode NodeClass
        # schema the render is validated against has no such field, so it cannot be shipped.
        return [
            Problem(
                key,
                value,
                "only computeMode karpenter renders capacity reservations (EC2NodeClass "
                "capacityReservationSelectorTerms): set computeMode karpenter or remove this setting "
                "(Auto Mode launches into open On-Demand Capacity Reservations by itself)",
            )
        ]
    if CapacityType.ON_DEMAND not in gpu.capacity_types:
        return [
            Problem(key, value, "reservations stand in for on-demand: add on-demand to gpu.capacityTypes")
        ]
    return []


class ScheduleEntry(_Group):
    """One ``autoscaling.schedule`` item: a replica floor between two cron times (a KEDA cron
    trigger: ``start``/``end`` five-field cron, ``timezone`` an IANA name)."""

    start: str = Field(description="Cron (minute hour day-of-month month day-of-week) the floor starts at.")
    end: str = Field(description="Cron the floor ends at.")
    timezone: str = Field("UTC", description="IANA time zone of start and end (e.g. Europe/Paris).")
    replicas: WholeNumber = Field(ge=1, le=MAX_REPLICAS, description="Replicas kept from start to end.")

    # The checks KEDA's cron scaler makes (settings/schedule.py), one field at a time so each
    # error names its key, e.g. autoscaling.schedule[0].start.
    @field_validator("start", "end")
    @classmethod
    def _cron(cls, value: str) -> str:
        try:
            cron = Cron.parse(value)
        except CronError as e:
            raise ValueError(f"{e} (five-field cron, e.g. '0 8 * * MON-FRI')") from None
        if why := never_fires(cron):
            raise ValueError(f"never fires: {why}, so KEDA would never start or end this floor")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            time_zone(value)
        except CronError as e:
            raise ValueError(str(e)) from None
        return value

    @model_validator(mode="after")
    def _distinct_times(self) -> ScheduleEntry:
        if self.start.split() == self.end.split():
            raise ValueError("start and end are the same time (KEDA refuses that): give the floor an end")
        return self


# The concurrency signal's default share of max_num_seqs: chosen with the simulator
# (docs/autoscaling-simulation.md, python tools/bench_autoscaling.py).
DEFAULT_CONCURRENCY_SHARE = 0.7


class AutoscalingSettings(_Group):
    """``autoscaling.*``: the signal and bounds of the replica autoscaler."""

    signal: ScalingSignal = ScalingSignal.GPU_UTILIZATION
    min_replicas: WholeNumber = Field(1, ge=0, le=MAX_REPLICAS)
    max_replicas: WholeNumber = Field(
        3, ge=1, le=MAX_REPLICAS, description=f"At most {MAX_REPLICAS}: one GPU node per replica at least."
    )
    target_gpu_utilization: WholeNumber = Field(50, ge=1, le=100, description="Percent.")
    queue_depth_per_replica: WholeNumber = Field(
        5, ge=1, le=10_000, description="Waiting requests per replica."
    )
    target_kv_cache_usage: float = Field(
        0.85,
        gt=0,
        lt=1,
        description="KV-cache usage (0-1) per replica the kv-cache and concurrency signals keep; below "
        "1.0, where vLLM starts preempting.",
    )
    target_concurrency_share: float = Field(
        DEFAULT_CONCURRENCY_SHARE,
        gt=0,
        le=1,
        description="Requests running or waiting per replica the concurrency signal keeps, as a share "
        "(0-1] of the plan's max_num_seqs (vLLM's running batch).",
    )
    schedule: Annotated[list[ScheduleEntry] | None, _AS_LIST] = Field(
        None,
        max_length=20,
        description="Replica floors by time of day: [{start, end, timezone, replicas}] (KEDA cron triggers).",
    )
    warm_spare_nodes: WholeNumber = Field(
        0,
        ge=0,
        le=MAX_REPLICAS,
        description="GPU nodes held by low-priority placeholder pods, so a new replica skips node launch.",
    )


class EndpointSettings(_Group):
    """``endpoint.*``: how clients reach the OpenAI-compatible API."""

    scheme: EndpointScheme = EndpointScheme.INTERNAL
    auth: EndpointAuth = Field(
        EndpointAuth.API_KEY,
        description="api-key (default: apiKey, or a generated key exported as the secret output apiKey) "
        "or none (no authentication; internal endpoints only).",
    )
    load_balancer: LoadBalancerKind = LoadBalancerKind.ALB
    allowed_cidrs: Annotated[list[Cidr], _DISTINCT, _AS_LIST] = Field(default_factory=list, max_length=60)
    certificate_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-f-]{1,64}$",
        description="ACM certificate: the load balancer then listens on HTTPS 443 only.",
    )
    drain_seconds: WholeNumber | None = Field(
        None,
        ge=30,
        le=3600,
        description="Grace for in-flight streams when a replica stops; default from the plan.",
    )
    hostname: str | None = Field(
        None,
        max_length=253,
        # A DNS name of letters, digits and hyphens, dot-separated labels of at most 63 (RFC 1123).
        pattern=r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$",
        description="DNS name of the endpoint: a Route 53 record in endpoint.hostedZoneId points it at "
        "the load balancer (the name endpoint.certificateArn is issued for).",
    )
    hosted_zone_id: str | None = Field(
        None,
        pattern=r"^Z[0-9A-Z]{1,31}$",
        description="Route 53 hosted zone of endpoint.hostname.",
    )
    # ALB access logs.
    access_logs: Boolean = Field(
        False,
        description="ALB access logs to an S3 bucket the program creates (SSE-S3, public access "
        "blocked, kept when the stack is destroyed); objects expire after endpoint.accessLogsDays.",
    )
    access_logs_days: WholeNumber | None = Field(
        None,
        ge=1,
        le=3650,
        description="Days ALB access logs are kept (default 90); needs endpoint.accessLogs.",
    )


class ClusterSettings(_Group):
    """``cluster.*``: the EKS control plane."""

    public_access_cidrs: Annotated[list[Cidr], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=40,  # EKS accepts at most 40 public access CIDR blocks
        description="CIDRs allowed to reach the public API endpoint; empty = private endpoint only.",
    )
    admin_role_arns: Annotated[list[IamRoleArn], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=100,
        description="IAM roles given cluster-admin through EKS access entries.",
    )
    private_access_cidrs: Annotated[list[Cidr], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=50,
        description="CIDRs admitted on 443 to the private API endpoint (the cluster security group "
        "admits only itself otherwise): a runner or VPN inside, or routed to, the VPC.",
    )
    private_access_security_group_ids: Annotated[list[SecurityGroupId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=50,
        description="Security groups admitted on 443 to the private API endpoint (a CI runner's, "
        "a bastion's).",
    )
    # Customer-managed KMS key for Kubernetes Secrets.
    secrets_kms_key_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:key/[0-9a-f-]{36}$",
        description="KMS key (ARN, same region) EKS envelope-encrypts Kubernetes Secrets with; once "
        "set it cannot be removed or changed on that cluster (EKS).",
    )
    # A KMS key the program creates.
    create_kms_key: Boolean = Field(
        False,
        description="Create a customer-managed KMS key (automatic yearly rotation) for Kubernetes "
        "Secrets and the project's weights bucket, instead of cluster.secretsKmsKeyArn / "
        "weights.kmsKeyArn.",
    )
    allow_compute_mode_switch: Boolean = Field(
        False,
        description="Let an update change computeMode on a stack deployed with the other mode. Off, the "
        "program refuses the switch before anything changes: turning Auto Mode off terminates its nodes "
        "and deletes its load balancers, and the NodePools, StorageClass and IngressClass collide under "
        "their new URNs. Set it only for a migration you have prepared.",
    )


class NetworkSettings(_Group):
    """``network.*``: a new VPC (default) or your own VPC and subnets."""

    vpc_cidr: Cidr = Field("10.42.0.0/16", description="CIDR of the VPC the program creates.")
    availability_zones: WholeNumber = Field(3, ge=2, le=3, description="AZs of the VPC the program creates.")
    vpc_id: str | None = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$", description="Bring your own VPC.")
    private_subnet_ids: Annotated[list[SubnetId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=16
    )
    public_subnet_ids: Annotated[list[SubnetId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=16
    )
    # VPC flow logs.
    flow_logs: Boolean = Field(
        False, description="VPC flow logs (all traffic) to a CloudWatch log group kept 365 days."
    )
    # One NAT gateway per AZ.
    nat_gateway_per_zone: Boolean = Field(
        False, description="One NAT gateway per AZ in the VPC the program creates (one in all by default)."
    )
    # Load-balancer-only subnets.
    load_balancer_subnet_ids: Annotated[list[SubnetId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=16,
        description="With network.vpcId, private subnets only internal load balancers use (no pods).",
    )


# Prometheus reads --storage.tsdb.retention.time with prometheus/common's model.ParseDuration
# (v0.67.5 model/time.go): each unit's nanoseconds, and "duration out of range" when the total
# passes Go's time.Duration (int64 nanoseconds, about 292 years). The Prometheus CRD's pattern
# accepts any digits, so a too-long retention passes the API server and Prometheus then exits at
# start-up: monitoring and every autoscaling signal stop while `up` reports success.
# Facts: reference/upstream/settings-rules.json "prometheus_retention_duration".
_RETENTION_UNIT_NS = {"h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9, "y": 365 * 86400 * 10**9}
_GO_DURATION_MAX_NS = 2**63 - 1


def prometheus_duration_problem(value: str) -> str | None:
    """Why Prometheus would refuse the retention ``value`` (``<digits><h|d|w|y>``), or None."""
    amount, unit = int(value[:-1]), value[-1]
    if amount * _RETENTION_UNIT_NS[unit] <= _GO_DURATION_MAX_NS:
        return None
    longest = _GO_DURATION_MAX_NS // _RETENTION_UNIT_NS[unit]
    return (
        f"is past the longest duration Prometheus can parse (Go's time.Duration, about 292 years: "
        f"at most {longest}{unit}); Prometheus would exit at start-up. Use a retention such as 15d or 1y"
    )


class ObservabilitySettings(_Group):
    """``observability.*``: Prometheus, Grafana, Alertmanager and alert thresholds."""

    prometheus_retention: str = Field(
        "15d", pattern=r"^[0-9]{1,5}[hdwy]$", description="How long Prometheus keeps data."
    )

    @field_validator("prometheus_retention")
    @classmethod
    def _within_go_duration(cls, value: str) -> str:
        if why := prometheus_duration_problem(value):
            raise ValueError(why)
        return value

    prometheus_storage_gib: WholeNumber = Field(50, ge=10, le=4096, description="Prometheus volume size.")
    grafana: Boolean = Field(True, description="Install Grafana with the project's dashboards.")
    alertmanager: Boolean = Field(
        False, description="Install Alertmanager (configure its receivers yourself)."
    )
    ttft_slo_seconds: Decimal = Field(
        5.0, gt=0, le=3600, description="Alert when p95 time to first token exceeds this."
    )
    itl_slo_seconds: Decimal = Field(
        0.15, gt=0, le=60, description="Alert when p95 inter-token latency exceeds this."
    )
    queue_time_slo_seconds: Decimal = Field(
        30.0, gt=0, le=3600, description="Alert when p95 queue time exceeds this."
    )


class WeightsSettings(_Group):
    """``weights.*``: where vLLM loads the model from."""

    source: WeightsSource = WeightsSource.HUGGINGFACE
    snapshot_id: str | None = Field(
        None,
        pattern=r"^snap-[0-9a-f]{8,17}$",
        description="EBS snapshot holding the weights (weights.source ebs-snapshot); bake-weights sets it.",
    )
    fast_snapshot_restore: Boolean = Field(
        False,
        description="Enable EBS fast snapshot restore on the weights snapshot in the cluster's zones.",
    )
    retain_bucket: Boolean = Field(
        True,
        description=(
            "Keep the bucket of staged weights (weights.source s3 or s3-mountpoint) when the stack is "
            "destroyed or the bucket replaced; false deletes it with its objects."
        ),
    )
    # Customer-managed KMS key for the weights bucket.
    kms_key_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:key/[0-9a-f-]{36}$",
        description="KMS key (ARN) of the weights: the project's bucket is encrypted with it, and the "
        "weights roles may use it (also for your own bucket's SSE-KMS objects).",
    )


# A registry host (with an optional port) and path, as a container image reference starts
# (distribution/reference grammar: lowercase domain components, path components of [a-z0-9._-]).
_DOMAIN_PART = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
_REGISTRY = rf"^{_DOMAIN_PART}(\.{_DOMAIN_PART})*(:[0-9]{{1,5}})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$"
# A private ECR registry: <account>.dkr.ecr.<region>.amazonaws.com[.cn], then an optional path
# (a pull-through cache rule's repository prefix). Amazon ECR User Guide, "Private registry concepts".
ECR_REGISTRY = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?P<cn>\.cn)?(/(?P<prefix>.+))?$",
    re.ASCII,
)


class ImageSettings(_Group):
    """``image.*``: where GPU nodes pull the vLLM image from."""

    registry: str | None = Field(
        None,
        max_length=255,
        pattern=_REGISTRY,
        description=(
            "Registry (host and optional path) that replaces docker.io for the vLLM image: a "
            "mirror, or an ECR pull-through cache for Docker Hub "
            "(<account>.dkr.ecr.<region>.amazonaws.com/<prefix>). Unset: anonymous Docker Hub pulls."
        ),
    )

    @property
    def ecr(self) -> re.Match[str] | None:
        """The registry's account, region and prefix when it is a private ECR registry."""
        return ECR_REGISTRY.match(self.registry or "")


# Docker Hub's pull limit for unauthenticated users, per IPv4 address (or IPv6 /64): every GPU node
# behind the VPC's NAT gateway shares one. Source: reference/upstream/image-pulls.json.
DOCKER_HUB_WARNING = (
    f"{PROJECT}:image.registry is unset: every GPU node pulls the vLLM image anonymously from Docker Hub "
    "through the NAT gateway's address, and Docker Hub allows unauthenticated users 100 pulls per 6 hours "
    "per IPv4 address (docs.docker.com/docker-hub/usage/pulls); a scale-out or node replacement beyond "
    "that fails with 429 Too Many Requests. Set image.registry to a mirror or an ECR pull-through cache "
    "(<account>.dkr.ecr.<region>.amazonaws.com/<prefix>)"
)


class AssumeRole(_Group):
    """One entry of ``aws:assumeRoles`` (pulumi-aws 7 provider config), assumed in order."""

    role_arn: IamRoleArn
    session_name: str | None = Field(None, pattern=r"^[A-Za-z0-9_+=,.@-]{2,64}$")
    external_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_+=,.@:/-]{2,1224}$")
    duration: str | None = Field(
        None, pattern=r"^([0-9]{1,2}h)?([0-9]{1,3}m)?([0-9]{1,5}s)?$", description="Go duration, 15m to 12h."
    )

    @property
    def duration_seconds(self) -> int | None:
        if not self.duration:
            return None
        units = {"h": 3600, "m": 60, "s": 1}
        return sum(int(n) * units[u] for n, u in re.findall(r"([0-9]+)([hms])", self.duration, re.ASCII))


class AwsSettings(_Group):
    """The ``aws:*`` provider settings this program honours, in the explicit AWS provider it
    builds and in preflight's boto3 session alike (``aws:region`` is ``Settings.region``)."""

    profile: str | None = Field(None, pattern=r"^[A-Za-z0-9_.+@=,-]{1,64}$")
    assume_roles: Annotated[list[AssumeRole], _DISTINCT, _AS_LIST] = Field(default_factory=list, max_length=5)
    allowed_account_ids: Annotated[list[AccountId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=100
    )
    forbidden_account_ids: Annotated[list[AccountId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=100
    )


class Settings(BaseModel):
    """All stack settings. Defaults here are the authoritative ones (mirrored in Pulumi.yaml)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    compute_mode: ComputeMode = ComputeMode.AUTO_MODE
    model: ModelSettings = Field(default_factory=ModelSettings)
    gpu: GpuSettings = Field(default_factory=GpuSettings)
    autoscaling: AutoscalingSettings = Field(default_factory=AutoscalingSettings)
    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    weights: WeightsSettings = Field(default_factory=WeightsSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    image: ImageSettings = Field(default_factory=ImageSettings)
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    region: str = DEFAULT_REGION
    aws: AwsSettings = Field(default_factory=AwsSettings)
    stack: str = "dev"
    # Settings that are valid but have no effect or are risky, shown by every command.
    warnings: tuple[str, ...] = ()
    # Valid offline, but a deployment would fail with them (the API unreachable from the deployer):
    # render and plan warn, preflight and up refuse before anything is created (exit 2).
    deploy_blockers: tuple[str, ...] = ()
    # Refused only on a stack's first deployment (nothing can route into a VPC that does not exist yet).
    first_run_blockers: tuple[str, ...] = ()
    # Secret config values, as the loader found them (Pulumi secret Outputs, never plain strings).
    hf_token: object | None = Field(None, exclude=True, repr=False)
    api_key: object | None = Field(None, exclude=True, repr=False)
    grafana_admin_password: object | None = Field(None, exclude=True, repr=False)

    @property
    def network_zones(self) -> int:
        """Availability Zones of the nodes: one per private subnet of your VPC, or the VPC's own."""
        network = self.network
        return len(network.private_subnet_ids) if network.vpc_id else network.availability_zones

    def plan_request(self) -> PlanRequest:
        """What the sizing engine needs from these settings."""
        return PlanRequest(
            variant=self.model.variant.value,
            families=tuple(self.gpu.instance_families),
            quantization=self.model.quantization,
            max_model_len=self.model.max_model_len,
            min_full_length_sequences=self.model.min_full_length_sequences,
            capacity_types=tuple(c.value for c in self.gpu.capacity_types),
            region=self.region,
            weights_source=self.weights.source.value,
            compute_mode=self.compute_mode.value,
            fast_snapshot_restore=self.weights.fast_snapshot_restore,
            warm_spare_nodes=self.autoscaling.warm_spare_nodes,
            zones=self.network_zones,
            repository=self.model.repository,
            min_replicas=self.autoscaling.min_replicas,
            max_replicas=self.autoscaling.max_replicas,
            drain_seconds=self.endpoint.drain_seconds,
        )


_MAX_SHOWN = 60  # characters of a value shown in a message; long values are cut


def _truncate(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else f"{text[: _MAX_SHOWN - 3]}..."


def _display(value: Any) -> str:
    """A value for a message: scalars and lists of scalars as JSON, cut when long; never the
    content of a mapping (it may hold ``secure`` ciphertext)."""
    if isinstance(value, dict):
        return "(a mapping)"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return "(a nested list)"
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")) and "secure" in value:
        return "(hidden: it holds a secure value)"
    if looks_like_credential(json.dumps(value, default=str)):
        return "(hidden: it looks like a credential; keep tokens and keys in secret settings)"
    return _truncate(json.dumps(value, default=str, ensure_ascii=True))


@dataclass(frozen=True)
class Problem:
    """One invalid setting: its key path, the value given (unless hidden) and what is allowed.

    ``hidden``: the value is never shown, for unknown keys (a misspelt secret), secrets and
    values that were encrypted in the stack file."""

    key: str
    value: Any
    message: str
    hidden: bool = False

    def __str__(self) -> str:
        return self.shown()

    def shown(self, spelling: Spelling | None = None) -> str:
        """The problem with its key (and the keys its message names) in ``spelling``; by default
        as a stack file writes them."""
        key = spelling(self.key) if spelling else shown_key(self.key)  # a spelling quotes its own
        # A message may quote the value (e.g. "'...' is not an EC2 GPU instance family").
        message = redact(respelt(self.message, spelling) if spelling else self.message)
        if self.hidden:
            return f"{key}: {message}"
        shown = "(not set)" if self.value is _UNSET else _display(self.value)
        return f"{key} = {shown}: {message}"


Spelling = Callable[[str], str]
"""How a front end names a setting, from its full config key (``deepseek-eks:model.maxModelLen``,
``aws:region``): the component shows ``model={"max_model_len": ...}`` (components/service.py).
One validator, two spellings (DESIGN.md)."""


def respelt(message: str, spelling: Spelling) -> str:
    """``message`` with each setting it names (``endpoint.allowedCidrs``,
    ``deepseek-eks:image.registry``, ``aws:region``) in ``spelling``."""
    names = known_keys()
    keys = sorted(
        (*names, *(f"{PROJECT}:{k}" for k in names), *(f"{AWS}:{k}" for k in AWS_KEYS)), key=len, reverse=True
    )
    alternatives = "|".join(re.escape(k) for k in keys)
    pattern = re.compile(rf"(?<![\w.:-])(?:{alternatives})(?![\w])")
    return pattern.sub(lambda m: spelling(m[0] if ":" in m[0] else f"{PROJECT}:{m[0]}"), message)


_UNSET = object()


class SettingsError(ValueError):
    """Every problem found in a stack's settings, reported together."""

    def __init__(
        self,
        problems: Iterable[Problem],
        stack: str = "",
        *,
        subject: str = "",
        spelling: Spelling | None = None,
    ):
        """``subject``: what the settings belong to (default: the stack); ``spelling``: how the
        keys are shown (default: as in a stack file)."""
        self.problems = list(problems)
        where = f" of {subject}" if subject else f" of stack '{stack}'" if stack else ""
        lines = [f"{len(self.problems)} invalid setting(s){where}:"]
        lines += [f"  - {p.shown(spelling)}" for p in self.problems]
        super().__init__("\n".join(lines))


# Top-level keys and the group models behind the dotted ones.
_GROUPS: dict[str, type[_Group]] = {
    "model": ModelSettings,
    "gpu": GpuSettings,
    "autoscaling": AutoscalingSettings,
    "endpoint": EndpointSettings,
    "weights": WeightsSettings,
    "cluster": ClusterSettings,
    "network": NetworkSettings,
    "observability": ObservabilitySettings,
    "image": ImageSettings,
}
_SCALARS = ("computeMode", "kubernetesVersion", *SECRET_KEYS)
AWS = "aws"
# aws:* keys passed to the explicit provider (components/build.py) and preflight's session.
AWS_KEYS = ("region", *(f.alias for f in AwsSettings.model_fields.values()))


def known_keys() -> list[str]:
    """Every key of the project namespace, as users write it (``model.variant``)."""
    keys = list(_SCALARS)
    for group, cls in _GROUPS.items():
        keys += [f"{group}.{f.alias}" for f in cls.model_fields.values()]
    return keys


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


# Real Pulumi packages whose names are close to ``aws``: their config is theirs, not a typo.
OTHER_PROVIDERS = frozenset({"awsx", "aws-native", "eks"})


def _looks_like(namespace: str, target: str) -> bool:
    """A misspelling of ``target``: other case, ``_`` for ``-``, or a small edit distance."""
    if namespace in OTHER_PROVIDERS:
        return False
    a, b = _normal(namespace), _normal(target)
    return _edit_distance(a, b) <= (2 if len(b) > 4 else 1)


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _split_key(full_key: str) -> tuple[str, str] | None:
    """``ns:name`` or Pulumi's old ``ns:config:name`` (config.ParseKey) -> ``(ns, name)``."""
    parts = full_key.split(":")
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[1] == "config":
        return parts[0], parts[2]
    return None


def _decode_object(value: Any) -> Any:
    """A group given with ``--path`` reaches the program as JSON text (engine) or a dict."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _is_default(group: str, field_alias: str, value: Any) -> bool:
    """Whether ``value`` is that field's default. The engine writes Pulumi.yaml's defaults into
    a group's object for every key the stack set flat (merge by path), so a flat key wins over
    an object value that is the default; any other object value is the user's."""
    cls = _GROUPS[group]
    try:
        parsed = cls.model_validate({field_alias: value})
    except ValidationError:
        return False
    return bool(parsed == cls())


@dataclass
class _Collected:
    """The project namespace's settings by dotted key, and which of them are secret."""

    values: dict[str, Any]
    secret: set[str]
    problems: list[Problem]


def _collect(config: Mapping[str, Any], secret_keys: set[str]) -> tuple[_Collected, dict[str, Any]]:
    """Split the engine's config map: this project's settings (both forms merged), the ``aws:*``
    ones, and problems for keys in namespaces that look like either."""
    problems: list[Problem] = []
    flat: dict[str, Any] = {}
    flat_secret: set[str] = set()
    objects: dict[str, tuple[dict[str, Any], bool]] = {}
    aws: dict[str, Any] = {}
    for full_key, value in sorted(config.items()):
        split = _split_key(full_key)
        secret = full_key in secret_keys
        if split is None:
            problems.append(Problem(full_key, value, "not a config key: use <namespace>:<name>", hidden=True))
            continue
        namespace, name = split
        if namespace == AWS:
            aws[name] = (value, secret)
            continue
        if namespace != PROJECT:
            for target in (PROJECT, AWS):
                if _looks_like(namespace, target):
                    problems.append(
                        Problem(
                            full_key,
                            None,
                            f"unknown namespace {namespace!r}; did you mean {target}:{name}?",
                            hidden=True,
                        )
                    )
            continue  # other namespaces (kubernetes:..., pulumi:...) belong to their providers
        if name in _GROUPS:
            decoded = _decode_object(value)
            if not isinstance(decoded, dict):
                problems.append(
                    Problem(
                        f"{PROJECT}:{name}",
                        value,
                        f"must be a mapping of {name}.* settings; set each as its own key "
                        f"instead (pulumi config set {name}.<key> <value>)",
                        hidden=True,
                    )
                )
                continue
            if secret:  # a --secret value inside the group: the engine marks the whole key
                problems.append(
                    Problem(
                        f"{PROJECT}:{name}",
                        None,
                        f"holds a secret value, but no {name}.* setting is a secret: set it without --secret",
                        hidden=True,
                    )
                )
                continue
            objects[name] = (decoded, secret)
        else:
            flat[name] = value
            if secret:
                flat_secret.add(name)
    for group, (obj, secret) in objects.items():
        for field_alias, value in obj.items():
            key = f"{group}.{field_alias}"
            if key in flat:
                if field_alias in _aliases(group) and _is_default(group, field_alias, value):
                    continue
                problems.append(
                    Problem(
                        f"{PROJECT}:{key}",
                        None,
                        f"given twice, as {PROJECT}:{key} and inside {PROJECT}:{group} "
                        "(--path form): keep one",
                        hidden=True,
                    )
                )
                continue
            flat[key] = value
            if secret:
                flat_secret.add(key)
    return _Collected(flat, flat_secret, problems), aws


def _aliases(group: str) -> set[str]:
    return {f.alias for f in _GROUPS[group].model_fields.values() if f.alias}


def _key_problems(collected: _Collected) -> list[Problem]:
    """Unknown keys (values never shown: a misspelt secret must not be echoed) and secrets."""
    p = f"{PROJECT}:"
    known = known_keys()
    lowered = {_normal(k.replace(".", "")): k for k in known}
    out = []
    for key in collected.values:
        if key in known:
            continue
        near = difflib.get_close_matches(key, known, n=2)
        exact = lowered.get(_normal(key.replace(".", "")))
        if exact and exact not in near:
            near = [exact, *near][:2]
        hint = f"did you mean {' or '.join(near)}?" if near else f"known keys: {', '.join(known)}"
        out.append(Problem(f"{p}{key}", None, f"unknown setting; {hint}", hidden=True))
    for key in collected.values:
        if key in SECRET_KEYS and key not in collected.secret:
            out.append(
                Problem(
                    f"{p}{key}",
                    None,
                    f"must be a secret: run `pulumi config rm {key}` then "
                    f"`pulumi config set --secret {key} <value>`",
                    hidden=True,
                )
            )
        elif key in collected.secret and key in known and key not in SECRET_KEYS:
            out.append(
                Problem(
                    f"{p}{key}",
                    None,
                    f"is not a secret setting (only {', '.join(SECRET_KEYS)} are): set it without --secret",
                    hidden=True,
                )
            )
    return out


def _aws_settings(aws: Mapping[str, tuple[Any, bool]]) -> tuple[str, AwsSettings, list[Problem]]:
    """``aws:region`` and the provider settings this program passes on; any other ``aws:*`` key
    is refused, because the explicit provider would silently not use it."""
    problems: list[Problem] = []
    region_value, region_secret = aws.get("region", (DEFAULT_REGION, False))
    region = region_value if isinstance(region_value, str) else str(region_value)
    if not _REGION.fullmatch(region):
        problems.append(
            Problem("aws:region", region, "not an AWS region name (e.g. us-east-1)", hidden=region_secret)
        )
        region = DEFAULT_REGION
    elif why := region_problem(region):
        problems.append(Problem("aws:region", region, why, hidden=region_secret))
        region = DEFAULT_REGION
    raw: dict[str, Any] = {}
    for name, (value, secret) in aws.items():
        if name == "region":
            continue
        if name not in AWS_KEYS or secret:
            supported = ", ".join(f"aws:{k}" for k in AWS_KEYS)
            why = "is a secret here; none of the supported aws:* keys is" if secret else "is not used"
            problems.append(
                Problem(
                    f"aws:{name}",
                    None,
                    f"{why} by this program's explicit AWS provider and preflight "
                    f"(supported: {supported}); remove it, or use AWS_* environment variables",
                    hidden=True,
                )
            )
            continue
        raw[name] = _decode_object(value) if name == "assumeRoles" else value
    settings = AwsSettings()
    try:
        settings = AwsSettings.model_validate(raw)
    except ValidationError as e:
        problems += _problems(e, "aws:", raw)
    if settings.allowed_account_ids and settings.forbidden_account_ids:
        # The provider declares each ConflictsWith the other (hashicorp/terraform-provider-aws
        # internal/provider/provider.go, bridged by pulumi-aws): `up` would fail at the provider.
        problems.append(
            Problem(
                "aws:forbiddenAccountIds",
                settings.forbidden_account_ids,
                "is set with aws:allowedAccountIds, and the AWS provider accepts only one of the "
                "two: remove aws:forbiddenAccountIds (the allow list already refuses every other account)",
            )
        )
    return region, settings, problems


def _group_settings(group: str, raw: dict[str, Any]) -> tuple[_Group, list[Problem], set[str]]:
    """Validate one group field by field: the invalid fields are reported and take their
    defaults, so the cross-field rules can still run on the valid ones."""
    cls = _GROUPS[group]
    try:
        return cls.model_validate(raw), [], set()
    except ValidationError as e:
        problems = _problems(e, f"{PROJECT}:{group}.", raw)
        invalid = {str(err["loc"][0]) for err in e.errors() if err["loc"]}
        partial = {k: v for k, v in raw.items() if k not in invalid}
        return cls.model_validate(partial), problems, {f"{group}.{k}" for k in invalid}


def parse_settings(
    config: Mapping[str, Any],
    secret_keys: Iterable[str] = (),
    stack: str = "dev",
    secrets: Mapping[str, object] | None = None,
) -> Settings:
    """Validate a raw Pulumi config map into ``Settings``; raise ``SettingsError`` with all problems.

    ``config`` is what the engine hands a program (``automation/stackfile.py`` builds the same
    map offline): full keys (``deepseek-eks:model.variant``, ``aws:region``), values as text or
    typed; a group set with ``--path`` is one key (``deepseek-eks:model``) holding a JSON object.
    ``secrets`` maps ``hfToken``/``apiKey``/``grafanaAdminPassword`` to the secret Outputs the
    caller read.
    """
    secret_keys = set(secret_keys)
    collected, aws = _collect(config, secret_keys)
    return _validated(collected, aws, stack, secrets)


def settings_from_values(
    values: Mapping[str, Any],
    aws: Mapping[str, Any],
    stack: str,
    secrets: Mapping[str, object],
) -> Settings:
    """The typed path to ``Settings`` (the ``DeepSeekService`` component's): ``values`` by setting,
    as ``known_keys`` names them (``computeMode``, ``model.maxModelLen``), holding Python values;
    ``aws`` the ``aws:*`` values by name (``region``, ``assumeRoles``) as Python objects;
    ``secrets`` the secret Outputs by their key (``apiKey``). No config map and no text decoding:
    the same validator as ``parse_settings`` from its typed stage on, the same problems (keyed
    as in a stack file; a front end respells them, ``SettingsError(spelling=...)``)."""
    collected = _Collected(dict(values), set(), [])
    return _validated(collected, {k: (v, False) for k, v in aws.items()}, stack, secrets)


def _validated(
    collected: _Collected,
    aws: Mapping[str, tuple[Any, bool]],
    stack: str,
    secrets: Mapping[str, object] | None,
) -> Settings:
    """Every rule, over the values of each setting (``_collect`` or ``settings_from_values``)."""
    problems = collected.problems + _key_problems(collected)
    flat = collected.values
    region, aws_settings, aws_problems = _aws_settings(aws)
    problems += aws_problems

    groups: dict[str, Any] = {}
    invalid: set[str] = set()
    for group in _GROUPS:
        raw = {
            k.split(".", 1)[1]: v
            for k, v in flat.items()
            if k.split(".", 1)[0] == group and "." in k and k.split(".", 1)[1] in _aliases(group)
        }
        groups[group], group_problems, group_invalid = _group_settings(group, raw)
        problems += group_problems
        invalid |= group_invalid

    values: dict[str, Any] = {}
    compute_mode = flat.get("computeMode", ComputeMode.AUTO_MODE.value)
    try:
        values["compute_mode"] = ComputeMode(compute_mode)
    except (ValueError, TypeError):
        allowed = ", ".join(m.value for m in ComputeMode)
        problems.append(Problem(f"{PROJECT}:computeMode", compute_mode, f"allowed: {allowed}"))

    k8s = flat.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION)
    if k8s not in SUPPORTED_KUBERNETES_VERSIONS:
        problems.append(
            Problem(
                f"{PROJECT}:kubernetesVersion",
                k8s,
                f"allowed: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} "
                "(EKS minor versions this project is tested at)",
            )
        )
        k8s = DEFAULT_KUBERNETES_VERSION

    cross, warnings = _cross_field_problems(groups, invalid)
    problems += cross
    karpenter = compute_mode == ComputeMode.KARPENTER.value
    problems += [
        Problem(
            "stack name",
            stack,
            f"{why}: use a stack name of at most 63 letters, digits, '-' and '_', beginning and "
            "ending with a letter or digit (pulumi stack rename)",
        )
        for why in stack_name_problems(stack, karpenter)
    ]
    problems += _arn_problems(groups, aws_settings, region, invalid)
    problems += _capacity_reservation_problems(groups.get("gpu"), compute_mode)
    problems += _weights_problems(groups["weights"], compute_mode, invalid)
    api_key_set = "apiKey" in flat or "apiKey" in (secrets or {})
    endpoint_fields = {f.alias for f in EndpointSettings.model_fields.values() if f.alias}
    exposure = endpoint_access(
        groups["endpoint"],
        region,
        api_key_set,
        f"{PROJECT}:",
        {k for k in endpoint_fields if _usable(invalid, f"endpoint.{k}")},
    )
    access = api_access(groups["cluster"], groups["network"], f"{PROJECT}:")
    problems += exposure.problems + access.problems
    warnings += exposure.warnings
    # A value read from a secret (decrypted by the engine) is never shown, whatever the problem.
    problems = [replace(p, hidden=True) if _setting_of(p.key) in collected.secret else p for p in problems]
    if problems:
        raise SettingsError(problems, stack)
    secrets = secrets or {}
    return Settings(
        **values,
        **groups,
        kubernetes_version=k8s,
        region=region,
        aws=aws_settings,
        stack=stack,
        warnings=tuple(warnings),
        deploy_blockers=tuple(access.deploy_blockers),
        first_run_blockers=tuple(access.first_run_blockers),
        hf_token=secrets.get("hfToken"),
        api_key=secrets.get("apiKey"),
        grafana_admin_password=secrets.get("grafanaAdminPassword"),
    )


def _arn_problems(
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
        and _usable(invalid, key.split("[", 1)[0])
        and (why := arn_problem(arn, region, regional=in_region))
    ]
    out += [
        Problem(f"aws:assumeRoles[{i}].roleArn", role.role_arn, why)
        for i, role in enumerate(aws_settings.assume_roles)
        if (why := arn_problem(role.role_arn, region, regional=False))
    ]
    return out


def _setting_of(key: str) -> str:
    """``deepseek-eks:gpu.instanceFamilies[0]`` -> ``gpu.instanceFamilies``."""
    return key.removeprefix(f"{PROJECT}:").split("[", 1)[0]


def _problems(error: ValidationError, prefix: str, raw: Mapping[str, Any]) -> list[Problem]:
    out = []
    for err in error.errors():
        loc = [str(p) for p in err["loc"]]
        field = loc[0] if loc else ""
        key = f"{prefix}{field}"
        for part in loc[1:]:
            key += f"[{part}]" if part.isdigit() else f".{part}"
        value = raw.get(field, _UNSET)
        if len(loc) > 1 and isinstance(err.get("input"), str | int):
            value = err["input"]
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch":
            message = _PATTERN_MESSAGES.get(field, "not in the expected format")
        elif err["type"] == "extra_forbidden":
            message = "unknown setting"
        out.append(Problem(key, value, message, hidden=err["type"] == "extra_forbidden"))
    return out


# Pattern errors said in words (pydantic would print the regular expression).
_PATTERN_MESSAGES = {
    "repository": "must be a Hugging Face repo id (owner/name) or an s3://bucket/prefix",
    "certificateArn": "must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)",
    "vpcId": "must be a VPC id like vpc-0123456789abcdef0",
    "privateSubnetIds": "must be a subnet id like subnet-0123456789abcdef0",
    "publicSubnetIds": "must be a subnet id like subnet-0123456789abcdef0",
    "privateAccessSecurityGroupIds": "must be a security group id like sg-0123456789abcdef0",
    "hostname": "must be a lowercase DNS name like llm.example.com",
    "hostedZoneId": "must be a Route 53 hosted zone id like Z0123456789ABCDEFGHIJ",
    "capacityReservationIds": "must be a capacity reservation id: cr-[0-9a-f]{17} (cr-0123456789abcdef0)",
    "adminRoleArns": "must be an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
    "secretsKmsKeyArn": "must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias",
    "kmsKeyArn": "must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias",
    "prometheusRetention": "must be a number and one unit of h, d, w or y (e.g. 15d)",
    "profile": "must be an AWS profile name (letters, digits and _.+@=,-)",
    "allowedAccountIds": "must be a 12-digit AWS account id",
    "forbiddenAccountIds": "must be a 12-digit AWS account id",
    "snapshotId": "must be an EBS snapshot id like snap-0123456789abcdef0",
    "assumeRoles": "must be a list of {roleArn, sessionName, externalId, duration} (duration like 1h)",
}


def _usable(invalid: set[str], *keys: str) -> bool:
    """A cross-field rule runs when every setting it reads is valid."""
    return not invalid.intersection(keys)


def _cross_field_problems(groups: Mapping[str, Any], invalid: set[str]) -> tuple[list[Problem], list[str]]:
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
        if _usable(invalid, f"autoscaling.{key}", "autoscaling.maxReplicas") and value > auto.max_replicas:
            out.append(Problem(f"{p}autoscaling.{key}", value, message))
    if _usable(invalid, "autoscaling.schedule", "autoscaling.maxReplicas"):
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
    min_and_signal = _usable(invalid, "autoscaling.minReplicas", "autoscaling.signal")
    if min_and_signal and auto.min_replicas == 0 and auto.signal is ScalingSignal.GPU_UTILIZATION:
        out.append(
            Problem(
                f"{p}autoscaling.minReplicas",
                0,
                "0 needs autoscaling.signal queue-depth, combined, kv-cache or concurrency: with "
                "gpu-utilization no pod is left to report the metric that would scale back up",
            )
        )
    if _usable(invalid, "autoscaling.signal"):
        warnings += _signal_warnings(auto)
    endpoint: EndpointSettings = groups["endpoint"]
    usable = _usable(invalid, "endpoint.scheme", "endpoint.allowedCidrs")
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
    if _usable(invalid, "model.variant", "model.maxModelLen"):
        spec = model_catalog()[model.variant.value]
        if model.max_model_len > spec.max_position_embeddings:
            out.append(
                Problem(
                    f"{p}model.maxModelLen",
                    model.max_model_len,
                    f"above {model.variant.value}'s max_position_embeddings ({spec.max_position_embeddings})",
                )
            )
    awq = _usable(invalid, "model.quantization") and model.quantization is Quantization.AWQ_INT4
    no_known_checkpoint = known_checkpoint(model.variant.value, Quantization.AWQ_INT4.value) is None
    if awq and _usable(invalid, "model.repository") and not model.repository and no_known_checkpoint:
        out.append(
            Problem(
                f"{p}model.repository",
                None,
                "required with model.quantization awq-int4: name a pre-quantized AWQ "
                "checkpoint (Hugging Face repo id)",
            )
        )
    repository = model.repository
    hf_repository = repository and not repository.startswith(S3_SCHEME)
    hf_repository = hf_repository and _usable(invalid, "model.repository")
    if hf_repository and (why := hf_repo_id_problem(str(repository))):
        out.append(Problem(f"{p}model.repository", repository, f"as a Hugging Face repo id {why}"))
    obs: ObservabilitySettings = groups["observability"]
    if _usable(invalid, "observability.prometheusRetention") and int(obs.prometheus_retention[:-1]) == 0:
        out.append(
            Problem(
                f"{p}observability.prometheusRetention",
                obs.prometheus_retention,
                "must be more than zero (Prometheus would keep nothing); e.g. 15d",
            )
        )
    out += _s3_repository_problems(model, groups["weights"], invalid)
    out += _weights_kms_problems(groups["weights"], invalid)
    out += _security_option_problems(groups["cluster"], groups["weights"], endpoint)
    out += _network_problems(groups["network"], endpoint, invalid)
    if _usable(invalid, "image.registry") and not groups["image"].registry:
        warnings.append(DOCKER_HUB_WARNING)
    return out, warnings


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
    if not _usable(invalid, "model.repository") or not model.repository:
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
    if not _usable(invalid, "weights.source"):
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


def _weights_problems(weights: WeightsSettings, compute_mode: str, invalid: set[str]) -> list[Problem]:
    """``weights.snapshotId`` and ``weights.fastSnapshotRestore`` belong to ``ebs-snapshot``, which
    needs the id; on Auto Mode it also needs fast snapshot restore (see the message)."""
    p = f"{PROJECT}:weights."
    if not _usable(invalid, "weights.source"):
        return []
    out = []
    snapshot = weights.source is WeightsSource.EBS_SNAPSHOT
    if snapshot and not weights.snapshot_id and _usable(invalid, "weights.snapshotId"):
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
        and _usable(invalid, "weights.fastSnapshotRestore")
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
    """Scale to zero, which nothing undoes on traffic, and settings the chosen signal does not
    read. Warnings, not errors: ``--set autoscaling.signal=...`` switches the signal for one run
    and should keep the stack's other tuning. Only a changed value is reported: the engine passes
    Pulumi.yaml's default for every key, so an unset key cannot be told from one set to its
    default."""
    scaled_to_zero = []
    if auto.min_replicas == 0:
        # KEDA's queue trigger reads vllm:num_requests_waiting, which only a running vLLM pod exports.
        scaled_to_zero.append(
            f"{PROJECT}:autoscaling.minReplicas is 0: once scaled to zero, incoming requests do not "
            "wake the service (the queue it scales on lives in the vLLM pods); the endpoint answers "
            "503 until a replica is started (raise minReplicas, or kubectl scale the workload)"
        )
    gpu_signal = auto.signal in (ScalingSignal.GPU_UTILIZATION, ScalingSignal.COMBINED)
    if gpu_signal and auto.target_gpu_utilization < LOW_GPU_TARGET:
        # The HPA asks for ceil(replicas x utilization / target) (Kubernetes HPA algorithm
        # details): one GPU busy with a single stream, near 100 %, already asks for 100 / target.
        asked = math.ceil(100 / auto.target_gpu_utilization)
        scaled_to_zero.append(
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
    if (
        auto.signal is not ScalingSignal.CONCURRENCY
        and auto.target_concurrency_share != DEFAULT_CONCURRENCY_SHARE
    ):
        unused.append(("targetConcurrencyShare", "concurrency"))
    return scaled_to_zero + [
        f"{PROJECT}:autoscaling.{key} has no effect with autoscaling.signal {auto.signal.value} "
        f"(only with {signals})"
        for key, signals in unused
    ]


# Customer-managed KMS key for the weights.
def _weights_kms_problems(weights: WeightsSettings, invalid: set[str]) -> list[Problem]:
    """The key is used only where the weights are in S3; elsewhere it would be silently ignored."""
    if not weights.kms_key_arn or not _usable(invalid, "weights.source"):
        return []
    if weights.source in (WeightsSource.S3, WeightsSource.S3_MOUNTPOINT):
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
    if both and _usable(invalid, "network.privateSubnetIds", "network.publicSubnetIds"):
        out.append(Problem(f"{p}publicSubnetIds", both, "also listed in network.privateSubnetIds"))
    if network.vpc_id:
        if len(private) < 2 and _usable(invalid, "network.privateSubnetIds"):
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
            and _usable(invalid, "network.publicSubnetIds", "endpoint.scheme")
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
        if _usable(invalid, "network.vpcCidr") and (why := vpc_range_problem(network.vpc_cidr)):
            out.append(Problem(f"{p}vpcCidr", network.vpc_cidr, why))
        if not 16 <= prefix <= 20 and _usable(invalid, "network.vpcCidr"):
            out.append(
                Problem(
                    f"{p}vpcCidr",
                    network.vpc_cidr,
                    "must be a /16 to /20: pods take VPC addresses, so GPU nodes need large subnets",
                )
            )
    return out
