"""Typed stack settings: every key of DESIGN.md's configuration table, its default and its rules.

Pure: no Pulumi import. ``parse_settings`` takes the raw config map Pulumi hands a program
(``"<namespace>:<key>" -> value``, values as strings or already typed) and returns ``Settings``
or raises ``SettingsError`` listing every problem at once.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from sizing import GPU_FAMILIES, VARIANTS, PlanRequest, Quantization, model_catalog
from sizing.catalog import unknown_family_message

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


class EndpointScheme(StrEnum):
    INTERNAL = "internal"
    INTERNET_FACING = "internet-facing"


class WeightsSource(StrEnum):
    HUGGINGFACE = "huggingface"
    S3 = "s3"


def _as_list(value: Any) -> Any:
    """Pulumi hands list config to programs as a JSON string; ``--set`` users type commas or
    YAML flow lists."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return yaml.safe_load(text)  # JSON from Pulumi, or YAML flow lists like [g6, g6e]
            except yaml.YAMLError:
                return value
        return [p.strip() for p in text.split(",") if p.strip()]
    return value


def _gpu_family(value: Any) -> Any:
    if isinstance(value, str) and value not in GPU_FAMILIES:
        raise ValueError(unknown_family_message(value))
    return value


def _cidr(value: Any) -> Any:
    if isinstance(value, str):
        try:
            ipaddress.ip_network(value, strict=True)
        except ValueError as e:
            raise ValueError(f"{value!r} is not a CIDR block ({e})") from None
    return value


GpuFamily = Annotated[str, BeforeValidator(_gpu_family)]
Cidr = Annotated[str, BeforeValidator(_cidr)]
IamRoleArn = Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")]
SubnetId = Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]


class _Group(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class ModelSettings(_Group):
    """``model.*``: which DeepSeek-R1 variant to serve and how."""

    variant: Variant = Field(Variant("r1-distill-qwen-7b"), description="The DeepSeek-R1 variant.")
    quantization: Quantization = Field(
        Quantization.AUTO,
        description="auto = the checkpoint's format (bf16 for distills, fp8 for r1-671b).",
    )
    repository: str | None = Field(
        None,
        pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?|[A-Za-z0-9][\w.-]*/[\w.-]+)$",
        description="Override: a Hugging Face repo id (owner/name) or an s3:// prefix.",
    )
    max_model_len: int = Field(32768, ge=1024, description="Context window in tokens.")
    min_full_length_sequences: int = Field(
        1, ge=1, description="The KV cache must hold this many maxModelLen sequences at once."
    )


class GpuSettings(_Group):
    """``gpu.*``: which EC2 GPU instances the node pool may launch."""

    instance_families: Annotated[list[GpuFamily], BeforeValidator(_as_list)] = Field(
        default_factory=lambda: ["g6", "g6e"], min_length=1
    )
    capacity_types: Annotated[list[CapacityType], BeforeValidator(_as_list)] = Field(
        default_factory=lambda: [CapacityType.SPOT, CapacityType.ON_DEMAND], min_length=1
    )
    capacity_reservation_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^cr-[0-9a-f]{17}$")]], BeforeValidator(_as_list)
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


class AutoscalingSettings(_Group):
    """``autoscaling.*``: the signal and bounds of the replica autoscaler."""

    signal: ScalingSignal = ScalingSignal.GPU_UTILIZATION
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(3, ge=1)
    target_gpu_utilization: int = Field(50, ge=1, le=100, description="Percent.")
    queue_depth_per_replica: int = Field(5, ge=1, description="Waiting requests per replica.")


class EndpointSettings(_Group):
    """``endpoint.*``: how clients reach the OpenAI-compatible API."""

    scheme: EndpointScheme = EndpointScheme.INTERNAL
    allowed_cidrs: Annotated[list[Cidr], BeforeValidator(_as_list)] = Field(default_factory=list)
    certificate_arn: str | None = Field(
        None,
        pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]+$",
        description="ACM certificate: the load balancer then listens on HTTPS 443 only.",
    )
    drain_seconds: int | None = Field(
        None,
        ge=30,
        le=3600,
        description="Grace for in-flight streams when a replica stops; default from the plan.",
    )


class ClusterSettings(_Group):
    """``cluster.*``: the EKS control plane."""

    public_access_cidrs: Annotated[list[Cidr], BeforeValidator(_as_list)] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the public API endpoint; empty = private endpoint only.",
    )
    admin_role_arns: Annotated[list[IamRoleArn], BeforeValidator(_as_list)] = Field(
        default_factory=list, description="IAM roles given cluster-admin through EKS access entries."
    )


class NetworkSettings(_Group):
    """``network.*``: a new VPC (default) or your own VPC and subnets."""

    vpc_cidr: Cidr = Field("10.42.0.0/16", description="CIDR of the VPC the program creates.")
    availability_zones: int = Field(3, ge=2, le=3, description="AZs of the VPC the program creates.")
    vpc_id: str | None = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$", description="Bring your own VPC.")
    private_subnet_ids: Annotated[list[SubnetId], BeforeValidator(_as_list)] = Field(default_factory=list)
    public_subnet_ids: Annotated[list[SubnetId], BeforeValidator(_as_list)] = Field(default_factory=list)


class ObservabilitySettings(_Group):
    """``observability.*``: Prometheus, Grafana, Alertmanager and alert thresholds."""

    prometheus_retention: str = Field(
        "15d", pattern=r"^\d+[hdwy]$", description="How long Prometheus keeps data."
    )
    prometheus_storage_gib: int = Field(50, ge=10, le=4096, description="Prometheus volume size.")
    grafana: bool = Field(True, description="Install Grafana with the project's dashboards.")
    alertmanager: bool = Field(False, description="Install Alertmanager (configure its receivers yourself).")
    ttft_slo_seconds: float = Field(5.0, gt=0, description="Alert when p95 time to first token exceeds this.")
    itl_slo_seconds: float = Field(0.15, gt=0, description="Alert when p95 inter-token latency exceeds this.")
    queue_time_slo_seconds: float = Field(30.0, gt=0, description="Alert when p95 queue time exceeds this.")


class WeightsSettings(_Group):
    """``weights.*``: where vLLM loads the model from."""

    source: WeightsSource = WeightsSource.HUGGINGFACE


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
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    region: str = DEFAULT_REGION
    stack: str = "dev"
    # Secret config values, as the loader found them (Pulumi secret Outputs, never plain strings).
    hf_token: object | None = Field(None, exclude=True, repr=False)
    api_key: object | None = Field(None, exclude=True, repr=False)
    grafana_admin_password: object | None = Field(None, exclude=True, repr=False)

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
            repository=self.model.repository,
            min_replicas=self.autoscaling.min_replicas,
            max_replicas=self.autoscaling.max_replicas,
            drain_seconds=self.endpoint.drain_seconds,
        )


@dataclass(frozen=True)
class Problem:
    """One invalid setting: its key path, the value given and what is allowed."""

    key: str
    value: Any
    message: str

    def __str__(self) -> str:
        shown = "(not set)" if self.value is _UNSET else json.dumps(self.value, default=str)
        return f"{self.key} = {shown}: {self.message}"


_UNSET = object()


class SettingsError(ValueError):
    """Every problem found in a stack's settings, reported together."""

    def __init__(self, problems: Iterable[Problem], stack: str = ""):
        self.problems = list(problems)
        where = f" of stack '{stack}'" if stack else ""
        lines = [f"{len(self.problems)} invalid setting(s){where}:"]
        lines += [f"  - {p}" for p in self.problems]
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
}
_SCALARS = ("computeMode", "kubernetesVersion", *SECRET_KEYS)


def known_keys() -> list[str]:
    """Every key of the project namespace, as users write it (``model.variant``)."""
    keys = list(_SCALARS)
    for group, cls in _GROUPS.items():
        keys += [f"{group}.{f.alias}" for f in cls.model_fields.values()]
    return keys


def _flatten(key: str, value: Any) -> Iterable[tuple[str, Any]]:
    """``model: {"variant": x}`` (written with ``pulumi config set --path``) -> ``model.variant``."""
    if isinstance(value, str) and key in _GROUPS and value.strip().startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    if isinstance(value, dict) and key in _GROUPS:
        for k, v in value.items():
            yield f"{key}.{k}", v
    else:
        yield key, value


def parse_settings(
    config: Mapping[str, Any],
    secret_keys: Iterable[str] = (),
    stack: str = "dev",
    secrets: Mapping[str, object] | None = None,
) -> Settings:
    """Validate a raw Pulumi config map into ``Settings``; raise ``SettingsError`` with all problems.

    ``config`` keys are full Pulumi keys (``deepseek-eks:model.variant``, ``aws:region``).
    ``secrets`` maps ``hfToken``/``apiKey`` to the secret Outputs the caller read.
    """
    secret_keys = set(secret_keys)
    problems: list[Problem] = []
    flat: dict[str, Any] = {}
    region = DEFAULT_REGION
    prefix = f"{PROJECT}:"
    for full_key, value in sorted(config.items()):
        if full_key == "aws:region":
            region = str(value)
            continue
        if not full_key.startswith(prefix):
            continue  # other namespaces (aws:profile, kubernetes:...) belong to their providers
        for key, v in _flatten(full_key[len(prefix) :], value):
            flat[key] = v

    known = known_keys()
    for key in flat:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=2)
            hint = f"did you mean {' or '.join(near)}?" if near else f"known keys: {', '.join(known)}"
            problems.append(Problem(f"{prefix}{key}", flat[key], f"unknown setting; {hint}"))

    for key in SECRET_KEYS:
        if key in flat and f"{prefix}{key}" not in secret_keys:
            problems.append(
                Problem(
                    f"{prefix}{key}",
                    "(plaintext value hidden)",
                    f"must be a secret: run `pulumi config rm {key}` then "
                    f"`pulumi config set --secret {key} <value>`",
                )
            )

    if not re.fullmatch(r"[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d", region):
        problems.append(Problem("aws:region", region, "not an AWS region name (e.g. us-east-1)"))

    values: dict[str, Any] = {}
    groups: dict[str, Any] = {}
    for group, cls in _GROUPS.items():
        raw = {k.split(".", 1)[1]: v for k, v in flat.items() if k.split(".", 1)[0] == group and "." in k}
        raw = {k: v for k, v in raw.items() if k in {f.alias for f in cls.model_fields.values()}}
        try:
            groups[group] = cls.model_validate(raw)
        except ValidationError as e:
            problems += _problems(e, group, raw)

    compute_mode = flat.get("computeMode", ComputeMode.AUTO_MODE.value)
    try:
        values["compute_mode"] = ComputeMode(compute_mode)
    except ValueError:
        allowed = ", ".join(m.value for m in ComputeMode)
        problems.append(Problem(f"{prefix}computeMode", compute_mode, f"allowed: {allowed}"))

    k8s = str(flat.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION))
    if k8s not in SUPPORTED_KUBERNETES_VERSIONS:
        problems.append(
            Problem(
                f"{prefix}kubernetesVersion",
                k8s,
                f"allowed: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} "
                "(EKS minor versions this project is tested at)",
            )
        )

    problems += _cross_field_problems(groups)
    problems += _capacity_reservation_problems(groups.get("gpu"), compute_mode)
    if problems:
        raise SettingsError(problems, stack)
    secrets = secrets or {}
    return Settings(
        **values,
        **groups,
        kubernetes_version=k8s,
        region=region,
        stack=stack,
        hf_token=secrets.get("hfToken"),
        api_key=secrets.get("apiKey"),
        grafana_admin_password=secrets.get("grafanaAdminPassword"),
    )


def _problems(error: ValidationError, group: str, raw: Mapping[str, Any]) -> list[Problem]:
    out = []
    for err in error.errors():
        loc = [str(p) for p in err["loc"]]
        field = loc[0] if loc else ""
        key = f"{PROJECT}:{group}.{field}"
        if len(loc) > 1:
            key += f"[{loc[1]}]"
        value = raw.get(field, _UNSET)
        if len(loc) > 1 and isinstance(err.get("input"), str | int):
            value = err["input"]
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch" and field == "repository":
            message = "must be a Hugging Face repo id (owner/name) or an s3://bucket/prefix"
        out.append(Problem(key, value, message))
    return out


def _cross_field_problems(groups: Mapping[str, Any]) -> list[Problem]:
    """Rules that involve two settings; each runs when the settings it reads are valid."""
    out: list[Problem] = []
    p = f"{PROJECT}:"
    auto: AutoscalingSettings | None = groups.get("autoscaling")
    if auto:
        if auto.min_replicas > auto.max_replicas:
            out.append(
                Problem(
                    f"{p}autoscaling.minReplicas",
                    auto.min_replicas,
                    f"greater than autoscaling.maxReplicas ({auto.max_replicas})",
                )
            )
        if auto.min_replicas == 0 and auto.signal is ScalingSignal.GPU_UTILIZATION:
            out.append(
                Problem(
                    f"{p}autoscaling.minReplicas",
                    0,
                    "0 needs autoscaling.signal queue-depth or combined: with gpu-utilization "
                    "no pod is left to report the metric that would scale back up",
                )
            )
    endpoint: EndpointSettings | None = groups.get("endpoint")
    if endpoint:
        if endpoint.scheme is EndpointScheme.INTERNET_FACING and not endpoint.allowed_cidrs:
            out.append(
                Problem(
                    f"{p}endpoint.allowedCidrs",
                    [],
                    "required when endpoint.scheme is internet-facing: list the client CIDRs",
                )
            )
        if endpoint.scheme is EndpointScheme.INTERNAL and endpoint.allowed_cidrs:
            out.append(
                Problem(
                    f"{p}endpoint.allowedCidrs",
                    endpoint.allowed_cidrs,
                    "only applies when endpoint.scheme is internet-facing; remove it or change the scheme",
                )
            )
    model: ModelSettings | None = groups.get("model")
    if model:
        spec = model_catalog()[model.variant.value]
        if model.max_model_len > spec.max_position_embeddings:
            out.append(
                Problem(
                    f"{p}model.maxModelLen",
                    model.max_model_len,
                    f"above {model.variant.value}'s max_position_embeddings ({spec.max_position_embeddings})",
                )
            )
        if model.quantization is Quantization.AWQ_INT4 and not model.repository:
            out.append(
                Problem(
                    f"{p}model.repository",
                    None,
                    "required with model.quantization awq-int4: name a pre-quantized AWQ "
                    "checkpoint (Hugging Face repo id or s3:// prefix)",
                )
            )
    network: NetworkSettings | None = groups.get("network")
    if network:
        out += _network_problems(network, endpoint)
    weights: WeightsSettings | None = groups.get("weights")
    s3_repository = bool(model and model.repository and model.repository.startswith("s3://"))
    if model and weights and s3_repository and weights.source is not WeightsSource.S3:
        out.append(
            Problem(
                f"{p}model.repository",
                model.repository,
                "an s3:// repository needs weights.source s3",
            )
        )
    return out


def _network_problems(network: NetworkSettings, endpoint: EndpointSettings | None) -> list[Problem]:
    p = f"{PROJECT}:network."
    out = []
    if network.vpc_id:
        if len(network.private_subnet_ids) < 2:
            out.append(
                Problem(
                    f"{p}privateSubnetIds",
                    network.private_subnet_ids,
                    "with network.vpcId, list at least 2 private subnets in different AZs",
                )
            )
        internet_facing = endpoint is not None and endpoint.scheme is EndpointScheme.INTERNET_FACING
        if internet_facing and len(network.public_subnet_ids) < 2:
            out.append(
                Problem(
                    f"{p}publicSubnetIds",
                    network.public_subnet_ids,
                    "an internet-facing endpoint in your VPC needs at least 2 public subnets",
                )
            )
        # Pulumi passes Pulumi.yaml's defaults as config too, so only a changed value is a mistake.
        for key in ("vpc_cidr", "availability_zones"):
            if getattr(network, key) != NetworkSettings.model_fields[key].default:
                alias = NetworkSettings.model_fields[key].alias
                out.append(
                    Problem(
                        f"{p}{alias}",
                        getattr(network, key),
                        "only applies to the VPC the program creates; remove it when network.vpcId is set",
                    )
                )
    else:
        for key in ("private_subnet_ids", "public_subnet_ids"):
            if getattr(network, key):
                alias = NetworkSettings.model_fields[key].alias
                out.append(Problem(f"{p}{alias}", getattr(network, key), "needs network.vpcId"))
        prefix = int(network.vpc_cidr.split("/")[1])
        if not 16 <= prefix <= 20:
            out.append(
                Problem(
                    f"{p}vpcCidr",
                    network.vpc_cidr,
                    "must be a /16 to /20: pods take VPC addresses, so GPU nodes need large subnets",
                )
            )
    return out
