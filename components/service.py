"""``DeepSeekService``: the package's one top-level component, and ``build()``, the stack program.

Its args are the stack settings in snake_case (``model.maxModelLen`` -> ``model.max_model_len``),
validated by the same ``settings.parse_settings`` a stack's config goes through, so a component
user gets the same all-at-once errors (named by their config key). The args are TypedDicts of
plain types because Pulumi's component provider infers the multi-language schema from them
(pulumi ``sdk/python/lib/pulumi/provider/experimental/analyzer.py``: TypedDicts, lists, dicts,
``Input``/``Optional``; no unions, no opaque objects) and hands ``construct`` plain dicts.
"""

# No ``from __future__ import annotations``: the analyzer reads the annotations of ``__init__`` and
# of the class itself with ``inspect.get_annotations`` and cannot follow plain strings.

import json
from typing import Any, TypedDict

import pulumi

from deepseek_eks.settings import PROJECT, SECRET_KEYS, Settings, parse_settings
from deepseek_eks.sizing import SizingPlan

from .build import INFERENCE_NAMESPACE, BuildResult, ExistingCluster, ServiceScope, build_service

TYPE = f"{PROJECT}:index:DeepSeekService"
PROGRAM_SERVICE_NAME = "deepseek"
"""The name ``__main__.py`` gives its service."""


class ModelArgs(TypedDict, total=False):
    """``model.*``: which DeepSeek-R1 variant to serve and how."""

    variant: str
    """r1-distill-qwen-1.5b ... r1-distill-llama-70b or r1-671b (default r1-distill-qwen-7b)."""
    quantization: str
    """auto, bf16, fp8 or awq-int4."""
    repository: str
    """A Hugging Face repo id (owner/name) or an s3:// prefix overriding the variant's."""
    max_model_len: int
    """Context window in tokens."""
    min_full_length_sequences: int
    """The KV cache must hold this many max_model_len sequences at once."""


class GpuArgs(TypedDict, total=False):
    """``gpu.*``: which EC2 GPU instances the node pool may launch."""

    instance_families: list[str]
    """EC2 GPU families (g4dn g5 g6 g6e p4d p4de p5 p5e p5en p6-b200)."""
    capacity_types: list[str]
    """spot and/or on-demand."""
    capacity_reservation_ids: list[str]
    """Capacity reservations (cr-...) used first; compute_mode karpenter only."""


class ScalingArgs(TypedDict, total=False):
    """``autoscaling.*``: the signal and bounds of the replica autoscaler."""

    signal: str
    """gpu-utilization, queue-depth or combined."""
    min_replicas: int
    max_replicas: int
    target_gpu_utilization: int
    """Percent, for the gpu-utilization signal."""
    queue_depth_per_replica: int
    """Waiting requests per replica, for the queue-depth signal."""
    warm_spare_nodes: int
    """GPU nodes held warm by preemptible placeholder pods (0 = none)."""


class EndpointArgs(TypedDict, total=False):
    """``endpoint.*``: how clients reach the OpenAI-compatible API."""

    scheme: str
    """internal or internet-facing."""
    allowed_cidrs: list[str]
    certificate_arn: str
    drain_seconds: int
    load_balancer: str
    """alb (default) or nlb (an NLB cannot limit paths: refused together with apiKey)."""


class WeightsArgs(TypedDict, total=False):
    """``weights.*``: where vLLM loads the model from."""

    source: str
    """huggingface, s3 (Run:ai streamer), s3-mountpoint (Mountpoint S3 CSI) or ebs-snapshot."""
    snapshot_id: str
    """EBS snapshot of the weights (python -m automation bake-weights), for ebs-snapshot."""
    fast_snapshot_restore: bool
    """Enable EBS fast snapshot restore on that snapshot (priced per zone-hour)."""
    kms_key_arn: str
    """KMS key of the weights bucket (and of your own bucket's SSE-KMS objects)."""


class ControlPlaneArgs(TypedDict, total=False):
    """``cluster.*``: the EKS control plane the service creates."""

    public_access_cidrs: list[str]
    admin_role_arns: list[str]
    secrets_kms_key_arn: str


class NetworkArgs(TypedDict, total=False):
    """``network.*``: a new VPC (default) or your own VPC and subnets."""

    vpc_cidr: str
    availability_zones: int
    vpc_id: str
    private_subnet_ids: list[str]
    public_subnet_ids: list[str]
    load_balancer_subnet_ids: list[str]
    nat_gateway_per_zone: bool
    flow_logs: bool


class ObservabilityArgs(TypedDict, total=False):
    """``observability.*``: Prometheus, Grafana, Alertmanager and alert thresholds."""

    prometheus_retention: str
    prometheus_storage_gib: int
    grafana: bool
    alertmanager: bool
    ttft_slo_seconds: float
    itl_slo_seconds: float
    queue_time_slo_seconds: float


class AssumeRoleArgs(TypedDict, total=False):
    """One role of ``aws:assumeRoles``, assumed in order."""

    role_arn: str
    session_name: str
    external_id: str
    duration: str


class AwsArgs(TypedDict, total=False):
    """The ``aws:*`` settings of the explicit AWS provider the service creates."""

    profile: str
    assume_roles: list[AssumeRoleArgs]
    allowed_account_ids: list[str]
    forbidden_account_ids: list[str]


# Docstrings the schema shows are one line each: Python 3.13 strips the indentation of longer
# ones and 3.11 does not, which would make the generated schema depend on the interpreter.


class ExistingClusterArgs(TypedDict, total=False):
    """An EKS cluster to join: Auto Mode, or running Karpenter (its provider is the component's)."""

    cluster_name: str
    """The cluster's name."""
    node_role_name: str
    """Nodes' IAM role: Auto Mode's (GPU nodes needing more disk) or Karpenter's (karpenter: required)."""
    node_security_group_ids: list[str]
    """karpenter: security groups of the GPU nodes (default: the EKS-managed cluster security group)."""


class DeepSeekServiceArgs(TypedDict, total=False):
    """The stack settings in snake_case, and where the service goes; every key is optional."""

    existing_cluster: ExistingClusterArgs
    """Join this cluster instead of creating a VPC and a cluster."""
    namespace: str
    """The inference namespace the service creates (default: the service's name)."""
    install_shared_addons: bool
    """Install the cluster-wide add-ons (default: only with a cluster of its own); README explains."""

    compute_mode: str
    """auto-mode (EKS Auto Mode) or karpenter (self-managed)."""
    kubernetes_version: str
    region: str
    """AWS region (aws:region)."""
    model: ModelArgs
    gpu: GpuArgs
    autoscaling: ScalingArgs
    endpoint: EndpointArgs
    weights: WeightsArgs
    cluster: ControlPlaneArgs
    network: NetworkArgs
    observability: ObservabilityArgs
    aws: AwsArgs
    hf_token: pulumi.Input[str]
    """Hugging Face token (kept secret)."""
    api_key: pulumi.Input[str]
    """Bearer key the endpoint requires (kept secret)."""
    grafana_admin_password: pulumi.Input[str]
    """Grafana admin password (kept secret; generated when unset)."""


# Where the service goes, not stack settings (see ``service_scope``).
PLACEMENT_KEYS = ("existing_cluster", "namespace", "install_shared_addons")
_GROUPS = ("model", "gpu", "autoscaling", "endpoint", "weights", "cluster", "network", "observability")


def snake(name: str) -> str:
    """``endpointUrl`` -> ``endpoint_url``: a config key or stack output as a Python name."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


_SECRETS = {snake(key): key for key in SECRET_KEYS}


def camel(name: str) -> str:
    """``max_model_len`` -> ``maxModelLen`` (the config key spelling)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {camel(k): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def args_config(args: DeepSeekServiceArgs) -> tuple[dict[str, Any], list[str], dict[str, object]]:
    """The Pulumi config map these args stand for, its secret keys, and the secret values.

    Unknown keys go through too, so ``parse_settings`` names them with every other problem."""
    config: dict[str, Any] = {}
    secret_keys: list[str] = []
    secrets: dict[str, object] = {}
    for key, value in dict(args).items():
        if value is None or key in PLACEMENT_KEYS:
            continue
        if key in _SECRETS:
            full = f"{PROJECT}:{_SECRETS[key]}"
            config[full] = "[secret]"  # the value itself stays an Output, never read here
            secret_keys.append(full)
            secrets[_SECRETS[key]] = pulumi.Output.secret(value)
        elif key == "region":
            config["aws:region"] = value
        elif key == "aws" and isinstance(value, dict):
            for name, item in value.items():
                # Structured aws:* values reach a program as JSON text (settings/pulumi_source.py).
                structured = isinstance(item, list | dict)
                config[f"aws:{camel(name)}"] = json.dumps(_camel_keys(item)) if structured else item
        elif key in _GROUPS and isinstance(value, dict):
            for name, item in value.items():
                config[f"{PROJECT}:{key}.{camel(name)}"] = item
        else:
            config[f"{PROJECT}:{camel(key)}"] = value
    return config, secret_keys, secrets


def service_settings(args: DeepSeekServiceArgs, stack: str) -> Settings:
    """Validated settings for these args; ``SettingsError`` lists every problem at once."""
    config, secret_keys, secrets = args_config(args)
    return parse_settings(config, secret_keys, stack=stack, secrets=secrets)


class DeepSeekService(pulumi.ComponentResource):
    """A private, autoscaled DeepSeek-R1 vLLM service on Amazon EKS, sized by the project's planner."""

    # It builds network, cluster, GPU capacity, inference, observability and autoscaling (or, in an
    # existing cluster, only what is the service's own): components/build.py build_service.

    compute_mode: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    """Kubeconfig of the cluster (secret)."""
    vpc_id: pulumi.Output[str]
    gpu_node_pool: pulumi.Output[str]
    gpu_limit: pulumi.Output[int]
    variant: pulumi.Output[str]
    instance_type: pulumi.Output[str]
    instance_types: pulumi.Output[list[str]]
    gpus_per_replica: pulumi.Output[int]
    hourly_usd_at_min: pulumi.Output[float]
    hourly_usd_at_max: pulumi.Output[float]
    endpoint_url: pulumi.Output[str]
    """The load balancer URL ("" while it has no address)."""
    in_cluster_url: pulumi.Output[str]
    served_model_name: pulumi.Output[str]
    curl: pulumi.Output[str]
    """A request that proves the endpoint works."""
    weights_bucket: pulumi.Output[str]
    scaling_signal: pulumi.Output[str]
    hpa_name: pulumi.Output[str]
    prometheus_url: pulumi.Output[str]
    grafana_admin_password: pulumi.Output[str]
    """Grafana admin password (secret)."""
    inference_namespace: pulumi.Output[str]
    monitoring_namespace: pulumi.Output[str]
    plan: pulumi.Output[dict[str, Any]]
    """The sizing plan (plan.json's fields)."""

    def __init__(
        self,
        name: str,
        args: DeepSeekServiceArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        settings: Settings | None = None,
        sizing_plan: SizingPlan | None = None,
    ) -> None:
        """``settings``: already validated settings instead of ``args`` (the stack program reads
        them from config; pass ``{}`` as ``args`` then). ``sizing_plan``: a plan already made
        for them."""
        if settings is not None and args:
            raise ValueError("DeepSeekService: give either args or settings, not both")
        super().__init__(TYPE, name, None, opts)
        settings = settings or service_settings(args, pulumi.get_stack())
        self.result: BuildResult = build_service(self, settings, sizing_plan, self._scope(name, args))
        for key, value in self.result.outputs.items():
            setattr(self, snake(key), pulumi.Output.from_input(value))
        self.register_outputs(self.result.outputs)

    def _scope(self, name: str, args: DeepSeekServiceArgs) -> ServiceScope:
        """The stack program's service keeps today's names; any other prefixes its own with its
        name, so two services (two variants, one per team) share a cluster."""
        if name == PROGRAM_SERVICE_NAME:
            prefix, namespace = "", args.get("namespace", INFERENCE_NAMESPACE)
        else:
            prefix, namespace = f"{name}-", args.get("namespace", name)
        joined = args.get("existing_cluster")
        if not joined:
            return ServiceScope(prefix, namespace, None, args.get("install_shared_addons", True))
        provider = self.get_provider("kubernetes::")
        if provider is None or not joined.get("cluster_name"):
            raise ValueError(
                "existing_cluster: give cluster_name, and the cluster's Kubernetes provider as this "
                "component's provider (opts=ResourceOptions(providers={'kubernetes': provider}))"
            )
        existing = ExistingCluster(
            joined["cluster_name"],
            provider,
            joined.get("node_role_name", ""),
            tuple(joined.get("node_security_group_ids", ())),
        )
        return ServiceScope(prefix, namespace, existing, args.get("install_shared_addons", False))


def export_outputs(service: DeepSeekService) -> None:
    """The stack outputs DESIGN.md names, from the service's outputs."""
    for key, value in service.result.outputs.items():
        pulumi.export(key, value)


def build(settings: Settings, sizing_plan: SizingPlan | None = None) -> BuildResult:
    """The stack program: one ``DeepSeekService`` for ``settings``, its outputs exported."""
    service = DeepSeekService(PROGRAM_SERVICE_NAME, {}, settings=settings, sizing_plan=sizing_plan)
    export_outputs(service)
    return service.result
