"""Typed stack settings: every configuration key, its default and its rules within a group.

Pure: no Pulumi import. The validation across keys and groups, and the parsers that build
``Settings`` from a config map or the component's values, are in settings/validate.py.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from deepseek_eks.sizing import GPU_FAMILIES, VARIANTS, KvCacheDtype, PlanRequest, Quantization, WeightsSource
from deepseek_eks.sizing.catalog import unknown_family_message

from . import safe_yaml
from .credentials import looks_like_credential, redact
from .safe_yaml import shown_key
from .schedule import Cron, CronError, never_fires, time_zone

PROJECT = "deepseek-eks"
SECRET_KEYS = ("hfToken", "apiKey", "grafanaAdminPassword")
DEFAULT_KUBERNETES_VERSION = "1.34"
# EKS minor versions this project is tested at (the twin's kube-apiserver runs the default,
# guardrails/pins.py KUBERNETES_MINOR_HOLD); the pinned AL2023 AMI release (components/versions.py)
# has images for each, and for more (1.30-1.36).
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
    # The llm-d router's queue and in-flight requests, through KEDA: measured in front of vLLM, so it
    # has a value while no replica runs and can wake a service scaled to zero (routing.kind llm-d).
    ROUTER_QUEUE = "router-queue"


class RoutingKind(StrEnum):
    """What spreads requests over the replicas behind the load balancer."""

    NONE = "none"  # the load balancer itself, round-robin over the ready vLLM pods
    # llm-d's router: the Gateway API Inference Extension endpoint picker with its own proxy, scoring
    # replicas by prefix-cache hits and load (reference/upstream/llm-d/README.md)
    LLM_D = "llm-d"


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

    variant: Variant = Field(
        Variant("r1-distill-qwen-7b"),
        description="DeepSeek-R1 variant, r1-distill-qwen-1.5b ... r1-distill-llama-70b or r1-671b.",
    )
    quantization: Quantization = Field(
        Quantization.AUTO,
        description=(
            "auto (the checkpoint's format: bf16 for distills, fp8 for r1-671b), bf16, fp8 or awq-int4."
        ),
    )
    kv_cache_dtype: KvCacheDtype = Field(
        KvCacheDtype.AUTO,
        description=(
            "KV cache element type: auto (the model's 16-bit dtype) or fp8 (half the bytes, twice the"
            " tokens; GPUs with FP8 tensor cores only: L4, L40S, H100, H200, B200)."
        ),
    )
    repository: str | None = Field(
        None,
        max_length=256,
        # Hugging Face repo ids are owner/name of ASCII letters, digits, '-', '_' and '.'
        # (huggingface_hub validate_repo_id); an S3 bucket name is 3-63 lowercase characters.
        pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?|[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+)$",
        description="A Hugging Face repo id (owner/name) or an s3:// prefix overriding the variant's.",
    )
    max_model_len: WholeNumber = Field(
        32768,
        ge=1024,
        le=INT32_MAX,
        description="Context window in tokens; at most the model's max_position_embeddings.",
    )
    min_full_length_sequences: WholeNumber = Field(
        1, ge=1, le=4096, description="The KV cache must hold this many maxModelLen sequences at once."
    )


class GpuSettings(_Group):
    """``gpu.*``: which EC2 GPU instances the node pool may launch."""

    instance_families: Annotated[list[GpuFamily], _DISTINCT, _AS_LIST] = Field(
        default_factory=lambda: ["g6", "g6e"],
        min_length=1,
        max_length=len(GPU_FAMILIES),
        description=(
            "EC2 GPU families the node pool may launch (g4dn g5 g6 g6e p4d p4de p5 p5e p5en p6-b200)."
        ),
    )
    capacity_types: Annotated[list[CapacityType], _DISTINCT, _AS_LIST] = Field(
        default_factory=lambda: [CapacityType.SPOT, CapacityType.ON_DEMAND],
        min_length=1,
        max_length=2,
        description="Subset of spot and on-demand; spot is preferred when both are allowed.",
    )
    capacity_reservation_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^cr-[0-9a-f]{17}$")]], _DISTINCT, _AS_LIST
    ] = Field(
        default_factory=list,
        max_length=30,  # EC2NodeClass capacityReservationSelectorTerms maxItems (Karpenter 1.14)
        description=(
            "EC2 On-Demand Capacity Reservations or Capacity Blocks (cr-...) the GPU nodes use first "
            "(computeMode karpenter; needs on-demand in gpu.capacityTypes)."
        ),
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


# autoscaling.seasonal: how far back each seasonal trigger reads the demand it keeps capacity for
# (yesterday's and last week's, each one start-up ahead of now), by trigger name suffix.
SEASONAL_PERIODS_S = {"day": 86_400, "week": 7 * 86_400}
# Prometheus must still hold last week's samples: the longest period plus a day of start-up margin.
SEASONAL_RETENTION_S = max(SEASONAL_PERIODS_S.values()) + 86_400


# The concurrency signal's default share of max_num_seqs: chosen with the simulator
# (docs/autoscaling-simulation.md, python tools/bench_autoscaling.py).
DEFAULT_CONCURRENCY_SHARE = 0.7


class AutoscalingSettings(_Group):
    """``autoscaling.*``: the signal and bounds of the replica autoscaler."""

    signal: ScalingSignal = Field(
        ScalingSignal.GPU_UTILIZATION,
        description=(
            "gpu-utilization, queue-depth, combined, kv-cache, concurrency or router-queue (the "
            "router's queue; needs routing.kind llm-d)."
        ),
    )
    min_replicas: WholeNumber = Field(
        1,
        ge=0,
        le=MAX_REPLICAS,
        description=(
            "Fewest vLLM replicas; 0 only with autoscaling.signal router-queue (the one signal "
            "measured in front of vLLM)."
        ),
    )
    max_replicas: WholeNumber = Field(
        3,
        ge=1,
        le=MAX_REPLICAS,
        description="Most vLLM replicas (at most 5000: a replica holds one GPU node at least).",
    )
    target_gpu_utilization: WholeNumber = Field(
        50, ge=1, le=100, description="Target GPU utilization in percent for the gpu-utilization signal."
    )
    queue_depth_per_replica: WholeNumber = Field(
        5, ge=1, le=10_000, description="Waiting requests per replica for the queue-depth signal."
    )
    target_kv_cache_usage: float = Field(
        0.85,
        gt=0,
        lt=1,
        description=(
            "KV-cache usage (0-1) per replica the kv-cache and concurrency signals keep; below 1.0, "
            "where vLLM starts preempting."
        ),
    )
    target_concurrency_share: float = Field(
        DEFAULT_CONCURRENCY_SHARE,
        gt=0,
        le=1,
        description=(
            "Requests running or waiting per replica the concurrency and router-queue signals keep, "
            "as a share (0-1] of the plan's max_num_seqs (vLLM's running batch)."
        ),
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
        description=(
            "GPU nodes kept warm by placeholder pods that real replicas preempt (priced in the plan)."
        ),
    )
    seasonal: Boolean = Field(
        False,
        description=(
            "Also keep, one start-up ahead, the replicas yesterday's and last week's requests (running "
            "or queued, at the concurrency target) called for then, even on a quieter day (KEDA "
            "Prometheus triggers with an offset; needs observability.prometheusRetention of 8d or more)."
        ),
    )


class EndpointSettings(_Group):
    """``endpoint.*``: how clients reach the OpenAI-compatible API."""

    scheme: EndpointScheme = Field(
        EndpointScheme.INTERNAL, description="internal (default) or internet-facing load balancer."
    )
    auth: EndpointAuth = Field(
        EndpointAuth.API_KEY,
        description=(
            "api-key (default: apiKey, or a generated key exported as the secret output apiKey) or "
            "none (no authentication; internal endpoints only)."
        ),
    )
    load_balancer: LoadBalancerKind = Field(
        LoadBalancerKind.ALB,
        description=(
            "alb (L7, routes only the key-guarded /v1 API) or nlb (L4, every route; only with "
            "endpoint.auth none)."
        ),
    )
    allowed_cidrs: Annotated[list[Cidr], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=60,
        description="Client CIDRs; required when internet-facing; admitted besides the VPC when internal.",
    )
    certificate_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-f-]{1,64}$",
        description="ACM certificate: the load balancer then listens on HTTPS 443 only.",
    )
    drain_seconds: WholeNumber | None = Field(
        None,
        ge=30,
        le=3600,
        description=(
            "Grace in seconds for in-flight streams when a replica stops; default from the sizing plan."
        ),
    )
    hostname: str | None = Field(
        None,
        max_length=253,
        # A DNS name of letters, digits and hyphens, dot-separated labels of at most 63 (RFC 1123).
        pattern=r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$",
        description=(
            "DNS name of the endpoint: a Route 53 record in endpoint.hostedZoneId points it at the "
            "load balancer (the name endpoint.certificateArn is issued for)."
        ),
    )
    hosted_zone_id: str | None = Field(
        None,
        pattern=r"^Z[0-9A-Z]{1,31}$",
        description="Route 53 hosted zone of endpoint.hostname.",
    )
    # ALB access logs.
    access_logs: Boolean = Field(
        False,
        description=(
            "ALB access logs to an S3 bucket the program creates (SSE-S3, public access blocked, kept"
            " when the stack is destroyed); objects expire after endpoint.accessLogsDays."
        ),
    )
    access_logs_days: WholeNumber | None = Field(
        None,
        ge=1,
        le=3650,
        description="Days ALB access logs are kept (default 90); needs endpoint.accessLogs.",
    )


class RoutingSettings(_Group):
    """``routing.*``: what spreads requests over the replicas behind the load balancer."""

    kind: RoutingKind = Field(
        RoutingKind.NONE,
        description=(
            "none (the load balancer round-robins over the replicas) or llm-d (llm-d's router, the "
            "Gateway API Inference Extension endpoint picker, routes each request by prefix-cache "
            "hits and load, and holds a queue autoscaling.signal router-queue scales on)."
        ),
    )


class ClusterSettings(_Group):
    """``cluster.*``: the EKS control plane."""

    public_access_cidrs: Annotated[list[Cidr], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=40,  # EKS accepts at most 40 public access CIDR blocks
        description="CIDRs allowed to reach the public EKS API endpoint; empty keeps the endpoint private.",
    )
    admin_role_arns: Annotated[list[IamRoleArn], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=100,
        description="IAM role ARNs given cluster-admin through EKS access entries.",
    )
    private_access_cidrs: Annotated[list[Cidr], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=50,
        description=(
            "CIDRs admitted on 443 to the private API endpoint (the cluster security group admits "
            "only itself otherwise): a runner or VPN inside, or routed to, the VPC."
        ),
    )
    private_access_security_group_ids: Annotated[list[SecurityGroupId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=50,
        description=(
            "Security groups admitted on 443 to the private API endpoint (a CI runner's, a bastion's)."
        ),
    )
    # Customer-managed KMS key for Kubernetes Secrets.
    secrets_kms_key_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:key/[0-9a-f-]{36}$",
        description=(
            "KMS key (ARN, same region) EKS envelope-encrypts Kubernetes Secrets with; once set it "
            "cannot be removed or changed on that cluster (EKS)."
        ),
    )
    # A KMS key the program creates.
    create_kms_key: Boolean = Field(
        False,
        description=(
            "Create a customer-managed KMS key (automatic yearly rotation) for Kubernetes Secrets and"
            " the project's weights bucket, instead of cluster.secretsKmsKeyArn / weights.kmsKeyArn."
        ),
    )
    allow_compute_mode_switch: Boolean = Field(
        False,
        description=(
            "Let an update change computeMode on a stack deployed with the other mode. Off, the "
            "program refuses the switch before anything changes: turning Auto Mode off terminates its"
            " nodes and deletes its load balancers, and the NodePools, StorageClass and IngressClass "
            "collide under their new URNs. Set it only for a migration you have prepared."
        ),
    )


class NetworkSettings(_Group):
    """``network.*``: a new VPC (default) or your own VPC and subnets."""

    vpc_cidr: Cidr = Field("10.42.0.0/16", description="CIDR (/16 to /20) of the VPC the program creates.")
    availability_zones: WholeNumber = Field(
        3, ge=2, le=3, description="Availability zones (2 or 3) of the VPC the program creates."
    )
    vpc_id: str | None = Field(
        None,
        pattern=r"^vpc-[0-9a-f]{8,17}$",
        description="Bring your own VPC (vpc-...), with network.privateSubnetIds.",
    )
    private_subnet_ids: Annotated[list[SubnetId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=16,
        description="With network.vpcId, your private subnets (at least 2, in different AZs).",
    )
    public_subnet_ids: Annotated[list[SubnetId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=16,
        description="With network.vpcId, your public subnets (needed for an internet-facing endpoint).",
    )
    # VPC flow logs.
    flow_logs: Boolean = Field(
        False,
        description=(
            "VPC flow logs (all traffic) to a CloudWatch log group kept 365 days, for the VPC created"
            " or yours."
        ),
    )
    # One NAT gateway per AZ.
    nat_gateway_per_zone: Boolean = Field(
        False,
        description=(
            "One NAT gateway per AZ in the VPC the program creates, so one AZ's outage does not cut "
            "the others off; one for all by default."
        ),
    )
    # Load-balancer-only subnets.
    load_balancer_subnet_ids: Annotated[list[SubnetId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list,
        max_length=16,
        description=(
            "With network.vpcId, private subnets only internal load balancers use (no nodes or pods);"
            " without them port 8000 admits the pod subnets (warned)."
        ),
    )


# Prometheus reads --storage.tsdb.retention.time with prometheus/common's model.ParseDuration
# (v0.67.5 model/time.go): each unit's nanoseconds, and "duration out of range" when the total
# passes Go's time.Duration (int64 nanoseconds, about 292 years). The Prometheus CRD's pattern
# accepts any digits, so a too-long retention passes the API server and Prometheus then exits at
# start-up: monitoring and every autoscaling signal stop while `up` reports success.
# Facts: reference/upstream/settings-rules.json "prometheus_retention_duration".
_RETENTION_UNIT_NS = {"h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9, "y": 365 * 86400 * 10**9}
_GO_DURATION_MAX_NS = 2**63 - 1


def prometheus_retention_s(value: str) -> int:
    """A valid ``observability.prometheusRetention`` (``<digits><h|d|w|y>``) in seconds."""
    return int(value[:-1]) * _RETENTION_UNIT_NS[value[-1]] // 10**9


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
        "15d",
        pattern=r"^[0-9]{1,5}[hdwy]$",
        description="How long Prometheus keeps data (e.g. 15d; autoscaling.seasonal needs 8d or more).",
    )

    @field_validator("prometheus_retention")
    @classmethod
    def _within_go_duration(cls, value: str) -> str:
        if why := prometheus_duration_problem(value):
            raise ValueError(why)
        return value

    prometheus_storage_gib: WholeNumber = Field(
        50, ge=10, le=4096, description="Size of the Prometheus volume in GiB."
    )
    grafana: Boolean = Field(True, description="Install Grafana with the vLLM and GPU dashboards.")
    alertmanager: Boolean = Field(
        False, description="Install Alertmanager (its receivers are yours to configure)."
    )
    ttft_slo_seconds: Decimal = Field(
        5.0, gt=0, le=3600, description="Alert when p95 time to first token exceeds this many seconds."
    )
    itl_slo_seconds: Decimal = Field(
        0.15, gt=0, le=60, description="Alert when p95 inter-token latency exceeds this many seconds."
    )
    queue_time_slo_seconds: Decimal = Field(
        30.0, gt=0, le=3600, description="Alert when p95 queue time exceeds this many seconds."
    )


class WeightsSettings(_Group):
    """``weights.*``: where vLLM loads the model from."""

    source: WeightsSource = Field(
        WeightsSource.HUGGINGFACE,
        description=(
            "huggingface (download at start), s3 (streamed from the project's bucket), s3-mountpoint "
            "(the bucket mounted read-only) or ebs-snapshot (a volume per pod from "
            "weights.snapshotId)."
        ),
    )
    snapshot_id: str | None = Field(
        None,
        pattern=r"^snap-[0-9a-f]{8,17}$",
        description="EBS snapshot holding the weights (weights.source ebs-snapshot); bake-weights sets it.",
    )
    fast_snapshot_restore: Boolean = Field(
        False,
        description=(
            "EBS fast snapshot restore on the weights snapshot (ebs-snapshot only; billed per zone-hour)."
        ),
    )
    retain_bucket: Boolean = Field(
        True,
        description=(
            "Keep the bucket of staged weights (weights.source s3 or s3-mountpoint) when the stack is"
            " destroyed or the bucket replaced; false deletes it with its objects."
        ),
    )
    # Customer-managed KMS key for the weights bucket.
    kms_key_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:key/[0-9a-f-]{36}$",
        description=(
            "KMS key (ARN) of the weights: the project's bucket is encrypted with it, and the weights"
            " roles may use it (also for your own bucket's SSE-KMS objects)."
        ),
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
            "Registry (host and optional path) that replaces docker.io for the vLLM image: a mirror, "
            "or an ECR pull-through cache for Docker Hub "
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
    "that fails with 429 Too Many Requests. The plan's image stage assumes a registry in the Region too "
    "(its pull rates were measured from ECR): from Docker Hub through NAT a cold start takes longer. "
    "Set image.registry to a mirror or an ECR pull-through cache "
    "(<account>.dkr.ecr.<region>.amazonaws.com/<prefix>)"
)


class AssumeRole(_Group):
    """One entry of ``aws:assumeRoles`` (pulumi-aws 7 provider config), assumed in order."""

    role_arn: IamRoleArn = Field(description="The IAM role to assume.")
    session_name: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_+=,.@-]{2,64}$", description="The session name of the assumed role."
    )
    external_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_+=,.@:/-]{2,1224}$",
        description="The external id the role's trust policy requires.",
    )
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
    """``aws:*``: the AWS provider settings honoured (the component: with create_aws_provider only).

    The program applies them to the explicit AWS provider it builds and to preflight's boto3
    session alike (``aws:region`` is ``Settings.region``)."""

    profile: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.+@=,-]{1,64}$",
        description="The AWS shared-config profile the provider uses.",
    )
    assume_roles: Annotated[list[AssumeRole], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=5, description="Roles the provider assumes, in order."
    )
    allowed_account_ids: Annotated[list[AccountId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=100, description="The provider refuses any other AWS account."
    )
    forbidden_account_ids: Annotated[list[AccountId], _DISTINCT, _AS_LIST] = Field(
        default_factory=list, max_length=100, description="The provider refuses these AWS accounts."
    )


class Settings(BaseModel):
    """All stack settings. Defaults here are the authoritative ones (mirrored in Pulumi.yaml)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    compute_mode: ComputeMode = Field(
        ComputeMode.AUTO_MODE,
        description="Where GPU nodes come from, auto-mode (EKS Auto Mode) or karpenter (self-managed).",
    )
    model: ModelSettings = Field(default_factory=ModelSettings)
    gpu: GpuSettings = Field(default_factory=GpuSettings)
    autoscaling: AutoscalingSettings = Field(default_factory=AutoscalingSettings)
    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    weights: WeightsSettings = Field(default_factory=WeightsSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    image: ImageSettings = Field(default_factory=ImageSettings)
    kubernetes_version: str = Field(
        DEFAULT_KUBERNETES_VERSION,
        description=(
            "EKS Kubernetes minor version of the cluster the program creates (1.32 to 1.34: the "
            "minors this project is tested at; the pinned AMI release has images for each)."
        ),
    )
    region: str = Field(
        DEFAULT_REGION,
        description=(
            "AWS region (the stack's aws:region; a component given your AWS provider takes the provider's)."
        ),
    )
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
    hf_token: object | None = Field(
        None,
        exclude=True,
        repr=False,
        description=(
            "Hugging Face token for gated or private repositories (a secret: pulumi config set "
            "--secret hfToken)."
        ),
    )
    api_key: object | None = Field(
        None,
        exclude=True,
        repr=False,
        description=(
            "Bearer key the endpoint requires (a secret; generated when unset and endpoint.auth is api-key)."
        ),
    )
    grafana_admin_password: object | None = Field(
        None, exclude=True, repr=False, description="Grafana admin password (a secret; generated when unset)."
    )

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
            kv_cache_dtype=self.model.kv_cache_dtype,
            max_model_len=self.model.max_model_len,
            min_full_length_sequences=self.model.min_full_length_sequences,
            capacity_types=tuple(c.value for c in self.gpu.capacity_types),
            region=self.region,
            weights_source=self.weights.source,
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
One validator, two spellings."""


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
    "routing": RoutingSettings,
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
