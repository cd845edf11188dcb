"""``build_service()``: the body of ``DeepSeekService`` (components/service.py), the one program.
``__main__.py``, the tests, the offline render and the Automation API all reach it through that
component; there is no second copy of what the stack creates."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pulumi
import pulumi_aws as aws

from deepseek_eks import promql
from deepseek_eks.settings import ComputeMode, EndpointScheme, Settings
from deepseek_eks.settings.model import EndpointAuth, RoutingKind
from deepseek_eks.settings.names import stack_cluster_name
from deepseek_eks.sizing import Infeasible, SizingPlan, plan
from deepseek_eks.sizing.cli import summary_lines
from deepseek_eks.sizing.planner import STAGED_SOURCES

from .deployed_state import COMPUTE_MODE_OUTPUT, WEIGHTS_LOCATION_OUTPUT, WEIGHTS_VOLUME_OUTPUT
from .labels import aws_tags, common_labels
from .monitoring.autoscaling import (
    KEDA_NAMESPACE,
    Autoscaling,
    AutoscalingArgs,
    ScalingSpec,
    concurrency_target,
    hpa_name,
    scheduled_floors,
    seasonal_lead_s,
)
from .monitoring.observability import Observability, ObservabilityInputs, ObservabilityOptions
from .namespaces import Namespaces, NamespacesArgs, NamespaceSpec
from .network_policies import ClusterCidrs, chart_policies, network_policy_resources
from .platform.capacity import EBS_CSI_DRIVERS, AutoModeCapacity, AutoModeCapacityArgs, CapacityArgs
from .platform.cluster import Cluster, ClusterArgs, project_kms_key
from .platform.iam_policies import pull_through_cache_policy
from .platform.karpenter import KarpenterCapacity, KarpenterCapacityArgs
from .platform.network import ACCESS_LOGS_DAYS, ACCESS_LOGS_PREFIX, Network, NetworkInputs, invoke_field
from .platform.nodepools import (
    AUTO_MODE_DEFAULT_EPHEMERAL_GIB,
    has_on_demand_floor,
    needs_auto_mode_node_class,
)
from .serving.exposure import NLB_CLASSES, Endpoint, nlb_idle_warning
from .serving.inference import Inference, InferenceArgs
from .serving.multinode import zone_refusal
from .serving.secrets import ApiSecrets, ApiSecretsArgs
from .serving.vllm import APP, READINESS_GATE_LABELS
from .versions import VLLM_IMAGE, VLLM_IMAGE_DIGEST, image_reference

INFERENCE_NAMESPACE = "deepseek"
MONITORING_NAMESPACE = "monitoring"
# node-exporter and dcgm-exporter: host PID/network, hostPath and GPU devices (Pod Security privileged).
NODE_MONITORING_NAMESPACE = "node-monitoring"


class SizingError(ValueError):
    """The settings are valid but no allowed instance type can serve them."""

    def __init__(self, result: Infeasible):
        self.result = result
        super().__init__("\n".join(summary_lines(result)))


def size(settings: Settings) -> SizingPlan:
    """The sizing plan of these settings, or ``SizingError`` saying why none exists."""
    result = plan(settings.plan_request())
    if isinstance(result, Infeasible):
        raise SizingError(result)
    zones = None if settings.network.vpc_id else settings.network.availability_zones
    refusal = zone_refusal(result, settings.autoscaling.max_replicas, zones)
    if refusal:
        raise SizingError(Infeasible(result.request, (refusal,)))
    endpoint = settings.endpoint
    idle = nlb_idle_warning(
        endpoint.load_balancer.value, bool(endpoint.certificate_arn), result.drain_seconds
    )
    return replace(result, warnings=(*result.warnings, idle)) if idle else result


@dataclass
class BuildResult:
    """What ``build`` made: the plan, the top-level components and the stack outputs."""

    plan: SizingPlan
    outputs: dict[str, object] = field(default_factory=dict)
    components: dict[str, pulumi.ComponentResource] = field(default_factory=dict)


def curl_line(url: str, model: str, api_key: bool) -> str:
    """A request that proves the endpoint works. The key is read from the stack's secret output when
    the line runs (configured or generated, ``apiKey`` holds it), never written into the line."""
    auth = ' -H "Authorization: Bearer $(pulumi stack output --show-secrets apiKey)"' if api_key else ""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "What is 17 * 23?"}]})
    return f"curl -s {url}/v1/chat/completions -H 'Content-Type: application/json'{auth} -d '{body}'"


def provider_args(settings: Settings) -> dict[str, Any]:
    """``aws:profile``, ``aws:assumeRoles``, ``aws:allowedAccountIds`` and
    ``aws:forbiddenAccountIds`` as the explicit AWS provider's arguments (settings refuse the
    aws:* keys not passed here)."""
    cfg = settings.aws
    args: dict[str, Any] = {}
    if cfg.profile:
        args["profile"] = cfg.profile
    if cfg.assume_roles:
        args["assume_roles"] = [
            aws.ProviderAssumeRoleArgs(
                role_arn=r.role_arn,
                session_name=r.session_name,
                external_id=r.external_id,
                duration=r.duration,
            )
            for r in cfg.assume_roles
        ]
    if cfg.allowed_account_ids:
        args["allowed_account_ids"] = list(cfg.allowed_account_ids)
    if cfg.forbidden_account_ids:
        args["forbidden_account_ids"] = list(cfg.forbidden_account_ids)
    return args


def arg(name: str, key: str | None = None) -> str:
    """A ``DeepSeekService`` argument as its user writes it: ``compute_mode=...``, or a key of a
    dict-typed one, ``autoscaling={"max_replicas": ...}`` (the names quoted as Python would)."""
    return f"{name}={{{json.dumps(key)}: ...}}" if key else f"{name}=..."


def cluster_name(settings: Settings, prefix: str = "") -> str:
    """EKS cluster name: the stack program's is ``deepseek-<stack>``; another service that creates
    its own cluster names it after itself (``<service>-<stack>``), so two can share an account."""
    return f"{prefix}{settings.stack}" if prefix else stack_cluster_name(settings.stack)


# The stack's top-level components were created at the root before DeepSeekService parented them;
# this alias keeps each one's URN (and, through the engine's inherited child aliases, its whole
# subtree's) so an upgrade does not replace the cluster.
WAS_AT_ROOT = pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)


@dataclass(frozen=True)
class ExistingCluster:
    """An EKS cluster the service joins instead of creating its own (and its VPC).

    With ``computeMode`` auto-mode, Auto Mode brings the Pod Identity agent (EKS User Guide, "Set
    up the Amazon EKS Pod Identity Agent": built into Auto Mode), the load balancer controller, the
    EBS driver and the GPU drivers. With karpenter, the cluster must run Karpenter v1, the AWS Load
    Balancer Controller (IngressClass ``alb``), the EKS Pod Identity agent and the EBS CSI driver;
    the service adds its own GPU NodeClass and NodePools (docs/component.md, "An existing cluster")."""

    cluster_name: str
    """The cluster's name (Pod Identity associations, NodeClass discovery)."""
    provider: pulumi.ProviderResource
    """A Kubernetes provider for the cluster (from another language: a provider reference)."""
    node_role_name: pulumi.Input[str] = ""
    """The nodes' IAM role: Auto Mode's (for the NodeClass of GPU nodes that need a larger disk),
    or, required with karpenter, the role of Karpenter's nodes that its controller may pass."""
    node_security_group_ids: tuple[pulumi.Input[str], ...] = ()
    """karpenter: the GPU nodes' security groups (default: the EKS-managed cluster security group)."""


@dataclass(frozen=True)
class ServiceScope:
    """Where a service goes and what it may name: the stack program's service owns its cluster and
    keeps today's names; any other service prefixes its names and may join an existing cluster."""

    prefix: str = ""
    """Put before the logical names of the top-level components and the GPU node pools' names."""
    namespace: str = INFERENCE_NAMESPACE
    """The inference namespace (created by the service)."""
    existing_cluster: ExistingCluster | None = None
    own_aws_provider: bool = True
    """Create the service's own AWS provider from the settings' region and aws:* (the stack program)."""
    aws_provider: pulumi.ProviderResource | None = None
    """Otherwise the AWS provider the component was given (None: the program's default provider)."""
    shared_addons: bool = True
    """Install the cluster-wide singletons: the monitoring stack (namespace, kube-prometheus-stack,
    dcgm-exporter on every NVIDIA node, prometheus-adapter, dashboards), KEDA and the gp3
    StorageClass; with auto-mode the ALB IngressClass and the VPC CNI network-policy switch, with
    karpenter the NVIDIA device plugin; and what this service's workload needs once per cluster:
    the LeaderWorkerSet controller (multi-node plan), the weights source's EKS add-on. One service
    per cluster does; the others' HPAs and ScaledObjects use them (the adapter rule serves every
    namespace's vLLM pods)."""
    previous: Mapping[str, Any] = field(default_factory=dict)
    """The outputs this service registered in the stack's last update (components/deployed_state.py;
    empty for a first deployment): what must stay working while an update rolls out."""


def _image_pull_access(
    name: str, settings: Settings, node_role_name: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> None:
    """The node role's access for the chosen image source: nothing more for Docker Hub or another
    registry (anonymous pulls), and for an ECR pull-through cache what it documents besides ECR
    pull access (which both node roles have: AmazonEC2ContainerRegistryPullOnly)."""
    ecr = settings.image.ecr
    if ecr is None or not node_role_name:
        return
    aws.iam.RolePolicy(
        name,
        role=node_role_name,
        policy=json.dumps(
            pull_through_cache_policy(
                partition="aws-cn" if ecr["cn"] else "aws",
                region=ecr["region"],
                account=ecr["account"],
                prefix=ecr["prefix"],
            )
        ),
        opts=opts,
    )


def weights_bucket_kept(settings: Settings) -> bool:
    """Whether destroy keeps a bucket of the project's own with the weights (weights.retainBucket, on
    by default), i.e. one the program stages into: s3 or s3-mountpoint without an s3:// repository."""
    staged = settings.weights.source in STAGED_SOURCES and not (settings.model.repository or "").startswith(
        "s3://"
    )
    return staged and settings.weights.retain_bucket


def _service_cidrs(
    existing: ExistingCluster | None,
    name: str,
    parent: pulumi.Resource,
    aws_provider: pulumi.ProviderResource | None,
) -> pulumi.Input[list[str] | None]:
    """The service CIDR of the cluster: read from an existing cluster (EKS DescribeCluster
    ``kubernetesNetworkConfig.serviceIpv4Cidr``), None for one this project creates (it sets none,
    so EKS takes one of its two defaults: network_policies.EKS_SERVICE_CIDRS)."""
    if existing is None:
        return None
    described = aws.eks.get_cluster_output(
        name=name, opts=pulumi.InvokeOutputOptions(parent=parent, provider=aws_provider)
    )
    return described.kubernetes_network_configs.apply(
        lambda configs: (
            [cidr for c in configs or [] if (cidr := invoke_field(c, "service_ipv4_cidr"))] or None
        )
    )


@dataclass
class _Service:
    """What every step of ``build_service`` shares: the settings and plan, the scope, the names,
    labels and tags, and the resource options of the service's children."""

    settings: Settings
    sizing_plan: SizingPlan
    scope: ServiceScope
    name: str
    labels: dict[str, str]
    tags: dict[str, str]
    child: pulumi.ResourceOptions
    aws_provider: pulumi.ProviderResource | None
    aws_opts: pulumi.ResourceOptions


def _refuse_existing_cluster_conflicts(
    settings: Settings, sizing_plan: SizingPlan, scope: ServiceScope
) -> None:
    """An existing cluster's arguments that cannot work with these settings, named as the
    component's arguments (before anything is created)."""
    existing = scope.existing_cluster
    auto_mode = settings.compute_mode is ComputeMode.AUTO_MODE
    if existing and existing.node_security_group_ids and auto_mode:
        raise ValueError(
            f"{arg('existing_cluster', 'node_security_group_ids')}: karpenter mode only (EKS Auto Mode's "
            "built-in NodeClass places nodes in the cluster security group); remove it or set "
            "compute_mode='karpenter'"
        )
    if existing and not existing.node_role_name and auto_mode and needs_auto_mode_node_class(sizing_plan):
        raise ValueError(
            f"{arg('existing_cluster', 'node_role_name')}: required here: the plan needs "
            f"{sizing_plan.ephemeral_storage_gib} GiB of node disk, more than Auto Mode's built-in "
            f"NodeClass gives ({AUTO_MODE_DEFAULT_EPHEMERAL_GIB} GiB), so the service makes a NodeClass, "
            "which must name the cluster's Auto Mode node role"
        )
    if existing and not settings.network.vpc_id:
        raise ValueError(
            f"existing_cluster={{...}}: set {arg('network', 'vpc_id')} and "
            f"{arg('network', 'private_subnet_ids')} to the cluster's VPC and node subnets (the "
            "service creates no VPC)"
        )


def _service(
    parent: pulumi.ComponentResource, settings: Settings, sizing_plan: SizingPlan, scope: ServiceScope
) -> _Service:
    """The shared context, with the service's own AWS provider when it makes one."""
    # Only the stack program's service (unprefixed names) has resources created before it existed.
    child = pulumi.ResourceOptions(parent=parent, aliases=None if scope.prefix else [WAS_AT_ROOT])
    existing = scope.existing_cluster
    labels = common_labels(settings)
    tags = aws_tags(settings)
    name = existing.cluster_name if existing else cluster_name(settings, scope.prefix)

    aws_provider = scope.aws_provider
    if scope.own_aws_provider:
        # The stack's aws:* provider settings (an explicit provider reads none of them itself).
        aws_provider = aws.Provider(
            f"{scope.prefix}aws",
            region=settings.region,
            default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
            **provider_args(settings),
            opts=child,
        )
    # None: the program's default AWS provider (children inherit no provider from the component).
    aws_providers = {"aws": aws_provider} if aws_provider else {}
    aws_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(providers=aws_providers))
    return _Service(settings, sizing_plan, scope, name, labels, tags, child, aws_provider, aws_opts)


def _network(s: _Service) -> Network:
    """The VPC (or your subnets), with the flow and access logs the settings ask for."""
    settings, scope, name, tags, aws_opts = s.settings, s.scope, s.name, s.tags, s.aws_opts
    net = settings.network
    network = Network(
        f"{scope.prefix}network",
        NetworkInputs(
            cluster_name=name,
            region=settings.region,
            tags=tags,
            vpc_cidr=net.vpc_cidr,
            availability_zones=net.availability_zones,
            vpc_id=net.vpc_id,
            private_subnet_ids=net.private_subnet_ids,
            public_subnet_ids=net.public_subnet_ids,
            load_balancer_subnet_ids=net.load_balancer_subnet_ids,
            nat_gateway_per_zone=net.nat_gateway_per_zone,
            flow_logs=net.flow_logs,
            access_logs_days=(settings.endpoint.access_logs_days or ACCESS_LOGS_DAYS)
            if settings.endpoint.access_logs
            else None,
        ),
        opts=aws_opts,
    )
    return network


def _cluster(
    s: _Service, network: Network, parent: pulumi.ComponentResource
) -> tuple[Cluster | None, pulumi.Output[ClusterCidrs], pulumi.Output[str] | None]:
    """The EKS cluster (None with an existing one), the cluster's CIDRs for the network policies,
    and the project's KMS key when cluster.createKmsKey asks for one."""
    settings, scope, name, tags, aws_opts = s.settings, s.scope, s.name, s.tags, s.aws_opts
    existing, aws_provider = scope.existing_cluster, s.aws_provider
    auto_mode = settings.compute_mode is ComputeMode.AUTO_MODE
    cluster_cidrs = pulumi.Output.all(
        network.vpc_cidrs, _service_cidrs(existing, name, parent, aws_provider)
    ).apply(lambda v: ClusterCidrs.of(v[0], v[1]))
    # cluster.createKmsKey: one key for the cluster's Secrets and the project's weights bucket.
    kms_key = (
        project_kms_key(
            f"{scope.prefix}kms-key", name, tags, aws_opts, outlives_the_stack=weights_bucket_kept(settings)
        ).arn
        if settings.cluster.create_kms_key
        else None
    )
    cluster = (
        None
        if existing
        else Cluster(
            f"{scope.prefix}cluster",
            ClusterArgs(
                cluster_name=name,
                kubernetes_version=settings.kubernetes_version,
                auto_mode=auto_mode,
                vpc_id=network.vpc_id,
                private_subnet_ids=network.private_subnet_ids,
                public_subnet_ids=network.public_subnet_ids,
                public_access_cidrs=settings.cluster.public_access_cidrs,
                admin_role_arns=settings.cluster.admin_role_arns,
                private_access_cidrs=settings.cluster.private_access_cidrs,
                private_access_security_group_ids=settings.cluster.private_access_security_group_ids,
                tags=tags,
                secrets_kms_key_arn=kms_key or settings.cluster.secrets_kms_key_arn,
            ),
            opts=aws_opts,
        )
    )
    return cluster, cluster_cidrs, kms_key


def _capacity(
    s: _Service, network: Network, cluster: Cluster | None
) -> tuple[AutoModeCapacity | KarpenterCapacity, pulumi.ResourceOptions]:
    """GPU capacity (Auto Mode's or Karpenter's NodePools), the image source's access for the node
    role, and the options every Kubernetes child is created with."""
    settings, sizing_plan, scope, name = s.settings, s.sizing_plan, s.scope, s.name
    labels, tags, child, aws_opts = s.labels, s.tags, s.child, s.aws_opts
    existing = scope.existing_cluster
    auto_mode = settings.compute_mode is ComputeMode.AUTO_MODE
    aws_providers = {"aws": s.aws_provider} if s.aws_provider else {}
    k8s_provider = existing.provider if existing else cluster.provider  # type: ignore[union-attr]
    k8s_opts = pulumi.ResourceOptions.merge(
        child, pulumi.ResourceOptions(providers={"kubernetes": k8s_provider, **aws_providers})
    )
    capacity: AutoModeCapacity | KarpenterCapacity
    common = CapacityArgs(
        plan=sizing_plan,
        cluster_name=name,
        private_subnet_ids=network.private_subnet_ids,
        capacity_types=[c.value for c in settings.gpu.capacity_types],
        min_replicas=settings.autoscaling.min_replicas,
        max_replicas=settings.autoscaling.max_replicas,
        labels=labels,
        tags=tags,
        capacity_reservation_ids=list(settings.gpu.capacity_reservation_ids),
        pool_prefix=scope.prefix,
    )
    if auto_mode:
        capacity = AutoModeCapacity(
            f"{scope.prefix}capacity",
            AutoModeCapacityArgs(
                **vars(common),
                node_role_name=existing.node_role_name if existing else cluster.auto_mode_node_role_name,  # type: ignore[union-attr]
                cluster_singletons=scope.shared_addons,
            ),
            opts=k8s_opts,
        )
    else:
        capacity = KarpenterCapacity(
            f"{scope.prefix}capacity",
            KarpenterCapacityArgs(
                **vars(common),
                region=settings.region,
                vpc_id=network.vpc_id,
                k8s_provider=k8s_provider,
                cluster=cluster,
                existing_node_role_name=existing.node_role_name if existing else "",
                node_security_group_ids=list(existing.node_security_group_ids) if existing else [],
                cluster_singletons=scope.shared_addons,
                kubernetes_version=settings.kubernetes_version,
            ),
            opts=k8s_opts,
        )

    node_role_name = (
        existing.node_role_name
        if existing
        else cluster.auto_mode_node_role_name  # type: ignore[union-attr]
        if auto_mode
        else capacity.node_role_name  # type: ignore[union-attr]
    )
    _image_pull_access(f"{scope.prefix}image-pull-through-cache", settings, node_role_name, aws_opts)

    return capacity, k8s_opts


def _namespaces_and_secrets(s: _Service, k8s_opts: pulumi.ResourceOptions) -> tuple[Namespaces, ApiSecrets]:
    """The service's namespace (and the shared monitoring ones), and its API key and token Secrets."""
    settings, scope, labels = s.settings, s.scope, s.labels
    namespaces = Namespaces(
        f"{scope.prefix}namespaces",
        NamespacesArgs(
            namespaces=[
                NamespaceSpec(
                    scope.namespace,
                    "restricted",
                    labels=READINESS_GATE_LABELS[settings.compute_mode.value],
                ),
                NamespaceSpec(
                    MONITORING_NAMESPACE,
                    "baseline",
                    reason="the charts' default pod settings are not all restricted-compliant "
                    "(warned and audited at restricted)",
                ),
                NamespaceSpec(
                    NODE_MONITORING_NAMESPACE,
                    "privileged",
                    reason="node-exporter and dcgm-exporter read host PID/network and GPU devices",
                ),
            ][: 3 if scope.shared_addons else 1],  # the monitoring namespaces are shared add-ons
            labels=labels,
        ),
        opts=k8s_opts,
    )
    secrets = ApiSecrets(
        f"{scope.prefix}api-secrets",
        ApiSecretsArgs(
            namespace=namespaces.names[scope.namespace],
            labels=labels,
            hf_token=settings.hf_token,  # type: ignore[arg-type]
            api_key=settings.api_key,  # type: ignore[arg-type]
            generate_api_key=settings.endpoint.auth is EndpointAuth.API_KEY,
        ),
        opts=k8s_opts,
    )

    return namespaces, secrets


def _inference(
    s: _Service,
    network: Network,
    capacity: AutoModeCapacity | KarpenterCapacity,
    cluster_cidrs: pulumi.Output[ClusterCidrs],
    kms_key: pulumi.Output[str] | None,
    namespaces: Namespaces,
    secrets: ApiSecrets,
    k8s_opts: pulumi.ResourceOptions,
) -> Inference:
    """vLLM behind its load balancer (and llm-d's router when routing.kind says so)."""
    settings, sizing_plan, scope, name, labels = s.settings, s.sizing_plan, s.scope, s.name, s.labels
    drain = sizing_plan.drain_seconds  # endpoint.drainSeconds when set (the plan's request carries it)
    internet_facing = settings.endpoint.scheme is EndpointScheme.INTERNET_FACING
    inference = Inference(
        f"{scope.prefix}inference",
        InferenceArgs(
            plan=sizing_plan,
            namespace=namespaces.names[scope.namespace],
            monitoring_namespace=MONITORING_NAMESPACE,
            placement=capacity.placement,
            endpoint=Endpoint(
                ingress_class=capacity.placement.ingress_class,
                internet_facing=internet_facing,
                allowed_cidrs=settings.endpoint.allowed_cidrs,
                certificate_arn=settings.endpoint.certificate_arn,
                drain_seconds=drain,
                load_balancer=settings.endpoint.load_balancer.value,
                nlb_class=NLB_CLASSES[settings.compute_mode.value],
                # An Output while your subnet ids are (components/wiring.py); Inference resolves it.
                subnet_ids=() if internet_facing else network.load_balancer_subnet_ids,  # type: ignore[arg-type]
            ),
            cluster_cidrs=cluster_cidrs,
            # The ALB takes addresses in the subnets the load balancer controller discovers for its
            # scheme: public (kubernetes.io/role/elb) or the load-balancer-only private subnets
            # (kubernetes.io/role/internal-elb), or the ones the Ingress/Service names.
            load_balancer_cidrs=network.public_subnet_cidrs
            if internet_facing
            else network.internal_load_balancer_cidrs,
            cluster_name=name,
            region=settings.region,
            labels=labels,
            image=image_reference(VLLM_IMAGE, settings.image.registry, VLLM_IMAGE_DIGEST),
            weights_source=settings.weights.source,
            retain_weights_bucket=settings.weights.retain_bucket,
            snapshot_id=settings.weights.snapshot_id,
            previous_weights_location=scope.previous.get(WEIGHTS_LOCATION_OUTPUT) or None,
            weights_kms_key_arn=kms_key or settings.weights.kms_key_arn,
            access_logs_bucket=network.access_logs_bucket,
            access_logs_prefix=ACCESS_LOGS_PREFIX,
            ebs_driver=EBS_CSI_DRIVERS[settings.compute_mode.value],
            max_replicas=settings.autoscaling.max_replicas,
            on_demand_floor=has_on_demand_floor(
                [c.value for c in settings.gpu.capacity_types], settings.autoscaling.min_replicas
            ),
            warm_spare_nodes=settings.autoscaling.warm_spare_nodes,
            api_key=secrets.api_key is not None,
            hf_token=settings.hf_token is not None,
            install_cluster_singletons=scope.shared_addons,
            cluster_object_prefix=scope.prefix,
            image_registry=settings.image.registry,
            routing=settings.routing.kind.value,
            depends_on=[namespaces, secrets],
        ),
        opts=k8s_opts,
    )
    return inference


def _observability(
    s: _Service,
    inference: Inference,
    capacity: AutoModeCapacity | KarpenterCapacity,
    cluster_cidrs: pulumi.Output[ClusterCidrs],
    namespaces: Namespaces,
    k8s_opts: pulumi.ResourceOptions,
) -> tuple[Observability, promql.Scope]:
    """Prometheus and friends, and the scope of the service's queries."""
    settings, scope, labels = s.settings, s.scope, s.labels
    queries = promql.Scope(namespace=scope.namespace, model_name=inference.served_model_name)
    obs = settings.observability
    observability = Observability(
        f"{scope.prefix}observability",
        ObservabilityInputs(
            namespace=MONITORING_NAMESPACE,
            host_namespace=NODE_MONITORING_NAMESPACE,
            scope=queries,
            slo=promql.Slo(
                ttft_p95_seconds=obs.ttft_slo_seconds,
                itl_p95_seconds=obs.itl_slo_seconds,
                queue_time_p95_seconds=obs.queue_time_slo_seconds,
            ),
            hpa_name=hpa_name(
                settings.autoscaling.signal,
                scheduled_floors(settings.autoscaling.schedule),
                settings.autoscaling.seasonal,
            ),
            options=ObservabilityOptions(
                retention=obs.prometheus_retention,
                storage_gib=obs.prometheus_storage_gib,
                storage_class=capacity.placement.storage_class,
                grafana=obs.grafana,
                alertmanager=obs.alertmanager,
            ),
            placement=capacity.placement,
            labels=labels,
            cluster_cidrs=cluster_cidrs,
            # Any service of the cluster may scale with KEDA, whose Prometheus trigger queries it.
            metrics_clients=[KEDA_NAMESPACE],
            grafana_admin_password=settings.grafana_admin_password,  # type: ignore[arg-type]
            routed=settings.routing.kind is RoutingKind.LLM_D,
            depends_on=[namespaces],
            shared=scope.shared_addons,
        ),
        opts=k8s_opts,
    )
    return observability, queries


def _autoscaling(
    s: _Service,
    inference: Inference,
    observability: Observability,
    queries: promql.Scope,
    cluster_cidrs: pulumi.Output[ClusterCidrs],
    k8s_opts: pulumi.ResourceOptions,
) -> Autoscaling:
    """The HPA or KEDA ScaledObject on the service's signal, and KEDA's namespace closed."""
    settings, sizing_plan, scope, labels = s.settings, s.sizing_plan, s.scope, s.labels
    auto = settings.autoscaling
    autoscaling = Autoscaling(
        f"{scope.prefix}autoscaling",
        AutoscalingArgs(
            spec=ScalingSpec(
                signal=auto.signal,
                namespace=scope.namespace,
                target=inference.scale_target,
                min_replicas=auto.min_replicas,
                max_replicas=auto.max_replicas,
                target_gpu_utilization=auto.target_gpu_utilization,
                queue_depth_per_replica=auto.queue_depth_per_replica,
                target_kv_cache_usage=auto.target_kv_cache_usage,
                target_concurrency=concurrency_target(
                    auto.target_concurrency_share, sizing_plan.max_num_seqs
                ),
                schedule=scheduled_floors(auto.schedule),
                seasonal_lead_s=seasonal_lead_s(sizing_plan.startup_seconds) if auto.seasonal else None,
                startup_seconds=sizing_plan.startup_probe_seconds,
                scope=queries,
                prometheus_url=observability.prometheus_url,
                labels=labels,
            ),
            depends_on=[inference, observability],
            install_keda=scope.shared_addons,
        ),
        opts=k8s_opts,
    )
    if scope.shared_addons and autoscaling.keda:
        # KEDA's namespace (its chart creates it) closed like the monitoring ones.
        network_policy_resources(
            f"{scope.prefix}keda-netpol",
            lambda cidrs: chart_policies(
                "keda",
                KEDA_NAMESPACE,
                cidrs=cidrs,
                labels=labels,
                monitoring_namespace=MONITORING_NAMESPACE,
            ),
            cluster_cidrs,
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[autoscaling])),
        )

    return autoscaling


def build_service(
    parent: pulumi.ComponentResource,
    settings: Settings,
    sizing_plan: SizingPlan | None = None,
    scope: ServiceScope | None = None,
) -> BuildResult:
    """Create every resource of the service described by ``settings`` as children of ``parent``:
    network, cluster, capacity, namespaces and secrets, inference, observability, autoscaling,
    each built by its own step in that order, then the outputs."""
    scope = scope or ServiceScope()
    sizing_plan = sizing_plan or size(settings)
    _refuse_existing_cluster_conflicts(settings, sizing_plan, scope)
    s = _service(parent, settings, sizing_plan, scope)
    network = _network(s)
    cluster, cluster_cidrs, kms_key = _cluster(s, network, parent)
    capacity, k8s_opts = _capacity(s, network, cluster)
    namespaces, secrets = _namespaces_and_secrets(s, k8s_opts)
    inference = _inference(s, network, capacity, cluster_cidrs, kms_key, namespaces, secrets, k8s_opts)
    observability, queries = _observability(s, inference, capacity, cluster_cidrs, namespaces, k8s_opts)
    autoscaling = _autoscaling(s, inference, observability, queries, cluster_cidrs, k8s_opts)
    return _result(s, network, cluster, capacity, namespaces, secrets, inference, observability, autoscaling)


def _result(
    s: _Service,
    network: Network,
    cluster: Cluster | None,
    capacity: AutoModeCapacity | KarpenterCapacity,
    namespaces: Namespaces,
    secrets: ApiSecrets,
    inference: Inference,
    observability: Observability,
    autoscaling: Autoscaling,
) -> BuildResult:
    """The endpoint's DNS record when a hostname is set, and the service's outputs."""
    settings, sizing_plan, scope, name, aws_opts = s.settings, s.sizing_plan, s.scope, s.name, s.aws_opts
    auto = settings.autoscaling
    scheme = "https" if settings.endpoint.certificate_arn else "http"
    endpoint_host = inference.endpoint_host
    if settings.endpoint.hostname:
        # The certificate's name, pointed at the load balancer, so the printed curl verifies TLS.
        record = aws.route53.Record(
            f"{scope.prefix}endpoint-dns",
            zone_id=settings.endpoint.hosted_zone_id,
            name=settings.endpoint.hostname,
            type="CNAME",
            ttl=60,
            records=[inference.endpoint_host],
            opts=aws_opts,
        )
        endpoint_host = pulumi.Output.all(record.name, settings.endpoint.hostname).apply(lambda v: v[1] or "")
    endpoint_url = endpoint_host.apply(lambda h: f"{scheme}://{h}" if h else "")
    in_cluster_url = f"http://{APP}.{scope.namespace}.svc.cluster.local"

    d = sizing_plan.to_dict()
    outputs: dict[str, object] = {
        "plan": d,
        COMPUTE_MODE_OUTPUT: settings.compute_mode.value,
        "clusterName": cluster.cluster_name if cluster else name,
        "kubeconfig": cluster.kubeconfig if cluster else pulumi.Output.secret(""),  # yours, not ours
        "vpcId": network.vpc_id,
        "gpuNodePool": capacity.placement.node_pool,
        "gpuLimit": capacity.gpu_limit,
        "variant": d["variant"],
        "instanceType": d["instance_type"],
        "instanceTypes": d["instance_types"],
        "gpusPerReplica": d["gpus_per_replica"],
        "hourlyUsdAtMin": d["hourly_usd_at_min"],
        "hourlyUsdAtMax": d["hourly_usd_at_max"],
        "endpointUrl": endpoint_url,
        "inClusterUrl": in_cluster_url,
        "servedModelName": inference.served_model_name,
        "curl": endpoint_url.apply(
            lambda url: curl_line(
                url or in_cluster_url, inference.served_model_name, secrets.api_key is not None
            )
        ),
        "apiKey": secrets.api_key if secrets.api_key is not None else pulumi.Output.secret(""),
        "weightsBucket": inference.weights_bucket,
        WEIGHTS_LOCATION_OUTPUT: inference.weights_location,
        WEIGHTS_VOLUME_OUTPUT: inference.weights_volume,
        "scalingSignal": auto.signal.value,
        "hpaName": autoscaling.hpa_name,
        "prometheusUrl": observability.prometheus_url,
        "grafanaAdminPassword": observability.grafana_admin_password,
        "inferenceNamespace": namespaces.names[scope.namespace],
        "monitoringNamespace": MONITORING_NAMESPACE,
    }
    return BuildResult(
        plan=sizing_plan,
        outputs=outputs,
        components={
            key: component
            for key, component in {
                "network": network,
                "cluster": cluster,
                "capacity": capacity,
                "namespaces": namespaces,
                "secrets": secrets,
                "inference": inference,
                "observability": observability,
                "autoscaling": autoscaling,
            }.items()
            if component is not None
        },
    )
