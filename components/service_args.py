"""The argument types of ``DeepSeekService``, generated from the settings model: do not edit.

Written by tools/generate_settings.py from settings/model.py (each setting's type, closed set
and description), components/wiring.py (which settings take an Output) and
components/placement.py (where the service goes). Pulumi's analyzer infers the multi-language
schema from these TypedDicts and their one-line docstrings.
"""

# ruff: noqa: E501
# No ``from __future__ import annotations``: the analyzer reads these annotations at runtime.

from collections.abc import Sequence
from typing import TypedDict

import pulumi

from .arg_types import (
    CapacityTypeArg,
    ComputeModeArg,
    EndpointAuthArg,
    EndpointSchemeArg,
    GpuFamilyArg,
    KubernetesVersionArg,
    KvCacheDtypeArg,
    LoadBalancerArg,
    QuantizationArg,
    RoutingKindArg,
    ScalingSignalArg,
    VariantArg,
    WeightsSourceArg,
)
from .placement import ExistingClusterArgs

__all__ = ["ExistingClusterArgs"]  # re-exported: DeepSeekServiceArgs names it


class ScheduleArgs(TypedDict, total=False):
    """One autoscaling.schedule item: a replica floor between two cron times (a KEDA cron trigger: start/end five-field cron, timezone an IANA name)."""

    start: str
    """Cron (minute hour day-of-month month day-of-week) the floor starts at."""
    end: str
    """Cron the floor ends at."""
    timezone: str
    """IANA time zone of start and end (e.g. Europe/Paris)."""
    replicas: int
    """Replicas kept from start to end."""


class ModelArgs(TypedDict, total=False):
    """model.*: which DeepSeek-R1 variant to serve and how."""

    variant: VariantArg
    """DeepSeek-R1 variant, r1-distill-qwen-1.5b ... r1-distill-llama-70b or r1-671b."""
    quantization: QuantizationArg
    """auto (the checkpoint's format: bf16 for distills, fp8 for r1-671b), bf16, fp8 or awq-int4."""
    kv_cache_dtype: KvCacheDtypeArg
    """KV cache element type: auto (the model's 16-bit dtype) or fp8 (half the bytes, twice the tokens; GPUs with FP8 tensor cores only: L4, L40S, H100, H200, B200)."""
    repository: str
    """A Hugging Face repo id (owner/name) or an s3:// prefix overriding the variant's."""
    max_model_len: int
    """Context window in tokens; at most the model's max_position_embeddings."""
    min_full_length_sequences: int
    """The KV cache must hold this many maxModelLen sequences at once."""


class GpuArgs(TypedDict, total=False):
    """gpu.*: which EC2 GPU instances the node pool may launch."""

    instance_families: list[GpuFamilyArg]
    """EC2 GPU families the node pool may launch (g4dn g5 g6 g6e p4d p4de p5 p5e p5en p6-b200)."""
    capacity_types: list[CapacityTypeArg]
    """Subset of spot and on-demand; spot is preferred when both are allowed."""
    capacity_reservation_ids: list[str]
    """EC2 On-Demand Capacity Reservations or Capacity Blocks (cr-...) the GPU nodes use first (computeMode karpenter; needs on-demand in gpu.capacityTypes)."""


class ScalingArgs(TypedDict, total=False):
    """autoscaling.*: the signal and bounds of the replica autoscaler."""

    signal: ScalingSignalArg
    """gpu-utilization, queue-depth, combined, kv-cache, concurrency or router-queue (the router's queue; needs routing.kind llm-d)."""
    min_replicas: int
    """Fewest vLLM replicas; 0 only with autoscaling.signal router-queue (the one signal measured in front of vLLM)."""
    max_replicas: int
    """Most vLLM replicas (at most 5000: a replica holds one GPU node at least)."""
    target_gpu_utilization: int
    """Target GPU utilization in percent for the gpu-utilization signal."""
    queue_depth_per_replica: int
    """Waiting requests per replica for the queue-depth signal."""
    target_kv_cache_usage: float
    """KV-cache usage (0-1) per replica the kv-cache and concurrency signals keep; below 1.0, where vLLM starts preempting."""
    target_concurrency_share: float
    """Requests running or waiting per replica the concurrency and router-queue signals keep, as a share (0-1] of the plan's max_num_seqs (vLLM's running batch)."""
    schedule: list[ScheduleArgs]
    """Replica floors by time of day: [{start, end, timezone, replicas}] (KEDA cron triggers)."""
    warm_spare_nodes: int
    """GPU nodes kept warm by placeholder pods that real replicas preempt (priced in the plan)."""
    seasonal: bool
    """Also keep, one start-up ahead, the replicas yesterday's and last week's requests (running or queued, at the concurrency target) called for then, even on a quieter day (KEDA Prometheus triggers with an offset; needs observability.prometheusRetention of 8d or more)."""


class EndpointArgs(TypedDict, total=False):
    """endpoint.*: how clients reach the OpenAI-compatible API."""

    scheme: EndpointSchemeArg
    """internal (default) or internet-facing load balancer."""
    auth: EndpointAuthArg
    """api-key (default: apiKey, or a generated key exported as the secret output apiKey) or none (no authentication; internal endpoints only)."""
    load_balancer: LoadBalancerArg
    """alb (L7, routes only the key-guarded /v1 API) or nlb (L4, every route; only with endpoint.auth none)."""
    allowed_cidrs: Sequence[pulumi.Input[str]]
    """Client CIDRs; required when internet-facing; admitted besides the VPC when internal."""
    certificate_arn: pulumi.Input[str]
    """ACM certificate: the load balancer then listens on HTTPS 443 only."""
    drain_seconds: int
    """Grace in seconds for in-flight streams when a replica stops; default from the sizing plan."""
    hostname: pulumi.Input[str]
    """DNS name of the endpoint: a Route 53 record in endpoint.hostedZoneId points it at the load balancer (the name endpoint.certificateArn is issued for)."""
    hosted_zone_id: pulumi.Input[str]
    """Route 53 hosted zone of endpoint.hostname."""
    access_logs: bool
    """ALB access logs to an S3 bucket the program creates (SSE-S3, public access blocked, kept when the stack is destroyed); objects expire after endpoint.accessLogsDays."""
    access_logs_days: int
    """Days ALB access logs are kept (default 90); needs endpoint.accessLogs."""


class RoutingArgs(TypedDict, total=False):
    """routing.*: what spreads requests over the replicas behind the load balancer."""

    kind: RoutingKindArg
    """none (the load balancer round-robins over the replicas) or llm-d (llm-d's router, the Gateway API Inference Extension endpoint picker, routes each request by prefix-cache hits and load, and holds a queue autoscaling.signal router-queue scales on)."""


class WeightsArgs(TypedDict, total=False):
    """weights.*: where vLLM loads the model from."""

    source: WeightsSourceArg
    """huggingface (download at start), s3 (streamed from the project's bucket), s3-mountpoint (the bucket mounted read-only) or ebs-snapshot (a volume per pod from weights.snapshotId)."""
    snapshot_id: str
    """EBS snapshot holding the weights (weights.source ebs-snapshot); bake-weights sets it."""
    fast_snapshot_restore: bool
    """EBS fast snapshot restore on the weights snapshot (ebs-snapshot only; billed per zone-hour)."""
    retain_bucket: bool
    """Keep the bucket of staged weights (weights.source s3 or s3-mountpoint) when the stack is destroyed or the bucket replaced; false deletes it with its objects."""
    kms_key_arn: pulumi.Input[str]
    """KMS key (ARN) of the weights: the project's bucket is encrypted with it, and the weights roles may use it (also for your own bucket's SSE-KMS objects)."""


class ControlPlaneArgs(TypedDict, total=False):
    """cluster.*: the EKS control plane."""

    public_access_cidrs: Sequence[pulumi.Input[str]]
    """CIDRs allowed to reach the public EKS API endpoint; empty keeps the endpoint private."""
    admin_role_arns: Sequence[pulumi.Input[str]]
    """IAM role ARNs given cluster-admin through EKS access entries."""
    private_access_cidrs: Sequence[pulumi.Input[str]]
    """CIDRs admitted on 443 to the private API endpoint (the cluster security group admits only itself otherwise): a runner or VPN inside, or routed to, the VPC."""
    private_access_security_group_ids: Sequence[pulumi.Input[str]]
    """Security groups admitted on 443 to the private API endpoint (a CI runner's, a bastion's)."""
    secrets_kms_key_arn: pulumi.Input[str]
    """KMS key (ARN, same region) EKS envelope-encrypts Kubernetes Secrets with; once set it cannot be removed or changed on that cluster (EKS)."""
    create_kms_key: bool
    """Create a customer-managed KMS key (automatic yearly rotation) for Kubernetes Secrets and the project's weights bucket, instead of cluster.secretsKmsKeyArn / weights.kmsKeyArn."""
    allow_compute_mode_switch: bool
    """Let an update change computeMode on a stack deployed with the other mode. Off, the program refuses the switch before anything changes: turning Auto Mode off terminates its nodes and deletes its load balancers, and the NodePools, StorageClass and IngressClass collide under their new URNs. Set it only for a migration you have prepared."""


class NetworkArgs(TypedDict, total=False):
    """network.*: a new VPC (default) or your own VPC and subnets."""

    vpc_cidr: str
    """CIDR (/16 to /20) of the VPC the program creates."""
    availability_zones: int
    """Availability zones (2 or 3) of the VPC the program creates."""
    vpc_id: pulumi.Input[str]
    """Bring your own VPC (vpc-...), with network.privateSubnetIds."""
    private_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """With network.vpcId, your private subnets (at least 2, in different AZs)."""
    public_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """With network.vpcId, your public subnets (needed for an internet-facing endpoint)."""
    flow_logs: bool
    """VPC flow logs (all traffic) to a CloudWatch log group kept 365 days, for the VPC created or yours."""
    nat_gateway_per_zone: bool
    """One NAT gateway per AZ in the VPC the program creates, so one AZ's outage does not cut the others off; one for all by default."""
    load_balancer_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """With network.vpcId, private subnets only internal load balancers use (no nodes or pods); without them port 8000 admits the pod subnets (warned)."""


class ObservabilityArgs(TypedDict, total=False):
    """observability.*: Prometheus, Grafana, Alertmanager and alert thresholds."""

    prometheus_retention: str
    """How long Prometheus keeps data (e.g. 15d; autoscaling.seasonal needs 8d or more)."""
    prometheus_storage_gib: int
    """Size of the Prometheus volume in GiB."""
    grafana: bool
    """Install Grafana with the vLLM and GPU dashboards."""
    alertmanager: bool
    """Install Alertmanager (its receivers are yours to configure)."""
    ttft_slo_seconds: float
    """Alert when p95 time to first token exceeds this many seconds."""
    itl_slo_seconds: float
    """Alert when p95 inter-token latency exceeds this many seconds."""
    queue_time_slo_seconds: float
    """Alert when p95 queue time exceeds this many seconds."""


class ImageArgs(TypedDict, total=False):
    """image.*: where GPU nodes pull the vLLM image from."""

    registry: str
    """Registry (host and optional path) that replaces docker.io for the vLLM image: a mirror, or an ECR pull-through cache for Docker Hub (<account>.dkr.ecr.<region>.amazonaws.com/<prefix>). Unset: anonymous Docker Hub pulls."""


class AssumeRoleArgs(TypedDict, total=False):
    """One entry of aws:assumeRoles (pulumi-aws 7 provider config), assumed in order."""

    role_arn: str
    """The IAM role to assume."""
    session_name: str
    """The session name of the assumed role."""
    external_id: str
    """The external id the role's trust policy requires."""
    duration: str
    """Go duration, 15m to 12h."""


class AwsArgs(TypedDict, total=False):
    """aws:*: the AWS provider settings honoured (the component: with create_aws_provider only)."""

    profile: str
    """The AWS shared-config profile the provider uses."""
    assume_roles: list[AssumeRoleArgs]
    """Roles the provider assumes, in order."""
    allowed_account_ids: list[str]
    """The provider refuses any other AWS account."""
    forbidden_account_ids: list[str]
    """The provider refuses these AWS accounts."""


class DeepSeekServiceArgs(TypedDict, total=False):
    """The stack settings in snake_case, and where the service goes; every key is optional."""

    existing_cluster: ExistingClusterArgs
    """Join this cluster instead of creating a VPC and a cluster."""
    namespace: str
    """The inference namespace the service creates (default: the service's name)."""
    install_shared_addons: bool
    """Install the cluster-wide add-ons (default: only with a cluster of its own); README explains."""
    create_aws_provider: bool
    """Create the service's own AWS provider from region and aws (default: use yours, opts.providers)."""
    compute_mode: ComputeModeArg
    """Where GPU nodes come from, auto-mode (EKS Auto Mode) or karpenter (self-managed)."""
    kubernetes_version: KubernetesVersionArg
    """EKS Kubernetes minor version of the cluster the program creates (1.32 to 1.34: the minors this project is tested at; the pinned AMI release has images for each)."""
    region: str
    """AWS region (the stack's aws:region; a component given your AWS provider takes the provider's)."""
    model: ModelArgs
    """model.*: which DeepSeek-R1 variant to serve and how."""
    gpu: GpuArgs
    """gpu.*: which EC2 GPU instances the node pool may launch."""
    autoscaling: ScalingArgs
    """autoscaling.*: the signal and bounds of the replica autoscaler."""
    endpoint: EndpointArgs
    """endpoint.*: how clients reach the OpenAI-compatible API."""
    routing: RoutingArgs
    """routing.*: what spreads requests over the replicas behind the load balancer."""
    weights: WeightsArgs
    """weights.*: where vLLM loads the model from."""
    cluster: ControlPlaneArgs
    """cluster.*: the EKS control plane."""
    network: NetworkArgs
    """network.*: a new VPC (default) or your own VPC and subnets."""
    observability: ObservabilityArgs
    """observability.*: Prometheus, Grafana, Alertmanager and alert thresholds."""
    image: ImageArgs
    """image.*: where GPU nodes pull the vLLM image from."""
    aws: AwsArgs
    """aws:*: the AWS provider settings honoured (the component: with create_aws_provider only)."""
    hf_token: pulumi.Input[str]
    """Hugging Face token for gated or private repositories (a secret: pulumi config set --secret hfToken)."""
    api_key: pulumi.Input[str]
    """Bearer key the endpoint requires (a secret; generated when unset and endpoint.auth is api-key)."""
    grafana_admin_password: pulumi.Input[str]
    """Grafana admin password (a secret; generated when unset)."""
