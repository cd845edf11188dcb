"""``DeepSeekService``: the package's one top-level component, and ``build()``, the stack program.

Its args are the stack settings in snake_case (``model.maxModelLen`` -> ``model.max_model_len``),
validated by the same ``settings.parse_settings`` a stack's config goes through, so a component
user gets the same all-at-once errors (named by the argument path they wrote). The args are
TypedDicts because Pulumi's component provider infers the multi-language schema from them
(pulumi ``sdk/python/lib/pulumi/provider/experimental/analyzer.py``: TypedDicts, lists, dicts,
``Input``/``Optional``; no unions, no opaque objects) and hands ``construct`` dicts. They are
generated (components/service_args.py, tools/generate_settings.py) from each setting's one
declaration in the settings model, with the placement arguments of components/placement.py.

Inputs and plain values: the fields that wire the service to other infrastructure are typed
``pulumi.Input`` (an Output of another resource or stack is accepted): the VPC and subnet ids,
CIDRs, security groups, role ARNs, the certificate ARN, hosted zone and hostname, KMS key ARNs,
``existing_cluster``'s node role and security groups, and the secrets. Every other field is plain
(``plain: true`` in the schema): variant, quantization, families, capacity types, replicas,
signal, compute mode, region and the rest decide the sizing plan or the resources' shape, so they
must be known when the program runs; an Output there is refused by name. components/wiring.py
says how the Inputs are validated once known.
"""

# No ``from __future__ import annotations``: the analyzer reads the annotations of ``__init__`` and
# of the class itself with ``inspect.get_annotations`` and cannot follow plain strings.

import dataclasses
import difflib
import json
import os
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from deepseek_eks.settings import PROJECT, SECRET_KEYS, Problem, Settings, SettingsError, settings_from_values
from deepseek_eks.settings.model import DEFAULT_REGION, SEASONAL_RETENTION_S, RoutingKind, respelt
from deepseek_eks.sizing import SizingPlan

from . import wiring
from .build import (
    INFERENCE_NAMESPACE,
    MONITORING_NAMESPACE,
    BuildResult,
    ExistingCluster,
    ServiceScope,
    arg,
    build_service,
    size,
)
from .deployed_state import (
    deployed_mode,
    previous_outputs,
    switch_refusal,
)
from .monitoring.autoscaling import KEDA_NAMESPACE
from .placement import PLACEMENT_KEYS
from .platform.capacity import INGRESS_CLASS, STORAGE_CLASS
from .service_args import (
    DeepSeekServiceArgs,
    ExistingClusterArgs,
)
from .service_doc import init_doc

TYPE = f"{PROJECT}:index:DeepSeekService"
PROGRAM_SERVICE_NAME = "deepseek"
"""The name ``__main__.py`` gives its service."""


class ServiceError(ValueError):
    """A ``DeepSeekService``'s arguments cannot build it; the message names the service and the
    argument as you wrote it."""

    def __init__(self, service: str, message: str) -> None:
        self.service = service
        super().__init__(f"DeepSeekService {service!r}: {message}")


_GROUPS = (
    "model",
    "gpu",
    "autoscaling",
    "endpoint",
    "routing",
    "weights",
    "cluster",
    "network",
    "observability",
    "image",
)


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


def args_values(
    args: DeepSeekServiceArgs | Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, object], list[Problem]]:
    """The settings these args give, for the validator's typed path (``settings_from_values``):
    the values by setting (``model.maxModelLen``), the ``aws:*`` ones by name, the secrets as
    secret Outputs, and the problems only the args can have (a group that is not a dict).

    Unknown keys go through too, so the validator names them with every other problem."""
    values: dict[str, Any] = {}
    aws: dict[str, Any] = {}
    secrets: dict[str, object] = {}
    problems: list[Problem] = []
    for key, value in dict(args).items():
        if value is None or key in PLACEMENT_KEYS:
            continue
        if key in _SECRETS:
            secrets[_SECRETS[key]] = pulumi.Output.secret(value)  # never read here
        elif key == "region":
            aws["region"] = value
        elif key in (*_GROUPS, "aws") and not isinstance(value, dict):
            problems.append(Problem(arg(key), None, "must be a dict of its settings", hidden=True))
        elif key == "aws":
            aws.update({camel(name): _camel_keys(item) for name, item in value.items()})
        elif key in _GROUPS:
            values.update({f"{key}.{camel(name)}": item for name, item in value.items()})
        else:
            values[camel(key)] = value
    return values, aws, secrets, problems


def service_settings(
    args: DeepSeekServiceArgs | Mapping[str, Any],
    stack: str,
    service: str = "",
    extra: Sequence[Problem] = (),
    shown: Callable[[Any], Any] = lambda value: value,
) -> Settings:
    """Validated settings for these args; ``SettingsError`` lists every problem at once, each
    named as the args write it (``autoscaling={"max_replicas": ...}``), of the service named.
    ``extra``: problems found before (Outputs where plain values are required); ``shown``: how a
    problem shows its value (a placeholder as not yet known)."""
    values, aws, secrets, shape = args_values(args)
    unknown = [*extra, *shape, *_unknown_placement_keys(args)]  # type: ignore[arg-type]
    try:
        settings = settings_from_values(values, aws, stack, secrets)
    except SettingsError as error:
        unknown += [
            dataclasses.replace(p, value=shown(p.value), message=shown(p.message)) for p in error.problems
        ]
    if unknown:
        subject = f"DeepSeekService {service!r} (stack '{stack}')" if service else f"stack '{stack}'"
        raise SettingsError(unknown, stack, subject=subject, spelling=python_spelling)
    return settings


def _validated(args: Mapping[str, Any], stack: str, service: str) -> tuple[Settings, Settings]:
    """The settings of ``args`` (Outputs in wiring fields validated as placeholders, then again
    once known) and the same settings wired with those Outputs (components/wiring.py)."""
    parts = wiring.split(args, str(args.get("region") or DEFAULT_REGION))
    extra = [Problem(key, None, message, hidden=True) for key, message in parts.problems]
    settings = service_settings(parts.literal, stack, service, extra, parts.shown)

    def check(known: dict[str, Any]) -> None:
        service_settings(known, stack, service)  # the same messages, with the real values

    return settings, wiring.wired(settings, parts, check)


_SUFFIX = re.compile(r"([^.\[]*)(.*)")  # "privateSubnetIds[1]" -> "privateSubnetIds", "[1]"


def python_spelling(key: str) -> str:
    """A config key as the args write it: ``deepseek-eks:autoscaling.maxReplicas`` ->
    ``autoscaling={"max_replicas": ...}``, ``aws:region`` -> ``region=...``,
    ``deepseek-eks:network.privateSubnetIds[1]`` -> ``network={"private_subnet_ids": ...}[1]``.
    A key the args spell already (an ``existing_cluster`` key) is returned as it is."""
    if "=" in key:
        return key
    namespace, _, path = key.partition(":")
    head, suffix = _SUFFIX.fullmatch(path).groups()  # type: ignore[union-attr]
    if namespace == "aws":
        return arg("region") + snake(suffix) if head == "region" else _arg("aws", head + suffix)
    if suffix.startswith("."):
        return _arg(snake(head), suffix[1:])
    return arg(_name(snake(head))) + snake(suffix)


def _arg(name: str, path: str) -> str:
    key, suffix = _SUFFIX.fullmatch(path).groups()  # type: ignore[union-attr]
    return arg(name, snake(key)) + snake(suffix)


def _name(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name)


def _unknown_placement_keys(args: DeepSeekServiceArgs) -> list[Problem]:
    """Keys of ``existing_cluster`` it does not have (the settings validator checks the others)."""
    joined = args.get("existing_cluster") or {}
    allowed = sorted(ExistingClusterArgs.__annotations__)
    return [
        Problem(arg("existing_cluster", key), None, _unknown(key, allowed), hidden=True)
        for key in joined
        if key not in allowed
    ]


def _unknown(key: str, allowed: list[str]) -> str:
    near = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"unknown key: {hint}it takes {', '.join(allowed)}"


class DeepSeekService(pulumi.ComponentResource):
    """A private, autoscaled DeepSeek-R1 vLLM service on Amazon EKS, sized by the project's planner."""

    # It builds network, cluster, GPU capacity, inference, observability and autoscaling (or, in an
    # existing cluster, only what is the service's own): components/build.py build_service.

    compute_mode: pulumi.Output[str]
    """auto-mode or karpenter, as planned."""
    cluster_name: pulumi.Output[str]
    """The EKS cluster's name (yours when joining one)."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig of the cluster (secret)."""
    vpc_id: pulumi.Output[str]
    """The VPC of the nodes."""
    gpu_node_pool: pulumi.Output[str]
    """The NodePool of the service's GPU nodes."""
    gpu_limit: pulumi.Output[int]
    """The GPU count the node pools may reach (at max_replicas)."""
    variant: pulumi.Output[str]
    """The DeepSeek-R1 variant served."""
    instance_type: pulumi.Output[str]
    """The planned EC2 instance type of a replica."""
    instance_types: pulumi.Output[list[str]]
    """Every instance type the node pool may launch."""
    gpus_per_replica: pulumi.Output[int]
    """GPUs one replica uses."""
    hourly_usd_at_min: pulumi.Output[float]
    """GPU node cost per hour at min_replicas (USD, on-demand list price)."""
    hourly_usd_at_max: pulumi.Output[float]
    """GPU node cost per hour at max_replicas (USD, on-demand list price)."""
    endpoint_url: pulumi.Output[str]
    """The load balancer URL ("" while it has no address)."""
    in_cluster_url: pulumi.Output[str]
    """The API's URL inside the cluster."""
    served_model_name: pulumi.Output[str]
    """The model name requests give."""
    curl: pulumi.Output[str]
    """A request that proves the endpoint works (it reads the key from the stack, never shows it)."""
    api_key: pulumi.Output[str]
    """The API key clients send (secret): the configured or the generated one ("" with auth none)."""
    weights_bucket: pulumi.Output[str]
    """The S3 bucket of the weights (weights source s3 or s3-mountpoint; else empty)."""
    weights_volume: pulumi.Output[str]
    """What the pods' weights volume holds (Mountpoint's bucket prefix, the EBS snapshot; else empty):
    an update that would change it is refused, since the deployed volume cannot change in place."""
    weights_location: pulumi.Output[str]
    """Where vLLM reads the weights, ``s3://bucket/prefix`` (weights source s3 or s3-mountpoint; else
    empty). The next update keeps it readable until the new weights have rolled out."""
    scaling_signal: pulumi.Output[str]
    """The autoscaling signal in effect."""
    hpa_name: pulumi.Output[str]
    """The HorizontalPodAutoscaler scaling the replicas."""
    prometheus_url: pulumi.Output[str]
    """The in-cluster Prometheus the autoscaler queries."""
    grafana_admin_password: pulumi.Output[str]
    """Grafana admin password (secret)."""
    inference_namespace: pulumi.Output[str]
    """The namespace of the service's workload."""
    monitoring_namespace: pulumi.Output[str]
    """The namespace of the monitoring stack."""
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
        # The docstring is written below the class from the args' and outputs' own (service_doc.py).
        if settings is not None and args:
            raise ValueError("DeepSeekService: give either args or settings, not both")
        _refuse_foreign_mocks(name)  # before any call into the engine those mocks would answer
        # Read before registering: this service's entry in the stack is still the last update's.
        previous = previous_outputs(TYPE, name)
        super().__init__(TYPE, name, None, opts)
        # The stack program (settings given) keeps its own provider, as it always had.
        own_provider = settings is not None or bool(args.get("create_aws_provider"))
        aws_provider = self.get_provider("aws::")
        try:
            wired = settings
            if settings is None:
                settings, wired = _validated_with_region(name, args, own_provider, aws_provider)
            _refuse_compute_mode_switch(name, settings, previous, as_config=not args)
            if args and settings.deploy_blockers and not args.get("existing_cluster"):
                _warn_unreachable_api(name, settings.deploy_blockers)
            if args:  # the stack program's settings log their own (settings/pulumi_source.py)
                for warning in settings.warnings:
                    _log_warning(name, warning, as_args=True)
            scope = dataclasses.replace(
                self._scope(name, args, own_provider, aws_provider), previous=previous or {}
            )
            _claim(name, scope, scope.existing_cluster.cluster_name if scope.existing_cluster else None)
            if settings.autoscaling.seasonal and not scope.shared_addons:
                _log_warning(name, SEASONAL_ON_FOREIGN_PROMETHEUS, as_args=bool(args))
            # The plan comes from the settings, the resources get the wired ones (the same with
            # Outputs where the args gave them): components/wiring.py.
            sizing_plan = sizing_plan or size(settings)
            refuse_on_multi_node(name, settings, sizing_plan, as_config=not args)
            # The plan's warnings (one replica, a family the node pool leaves out, ...) at preview
            # and up too, not only in `automation plan`: as the settings' warnings are, named as
            # the args wrote them, and as the stack file writes them for the stack program.
            for warning in sizing_plan.warnings:
                _log_warning(name, warning, as_args=bool(args))
            self.result: BuildResult = build_service(self, wired or settings, sizing_plan, scope)
        except ValueError as error:
            # Every error names the service (SizingError and the rest keep their types).
            if not isinstance(error, SettingsError | ServiceError):  # those name it already
                error.args = (f"DeepSeekService {name!r}: {error}",)
            raise
        for key, value in self.result.outputs.items():
            setattr(self, snake(key), pulumi.Output.from_input(value))
        self.register_outputs(self.result.outputs)

    def _scope(
        self,
        name: str,
        args: DeepSeekServiceArgs,
        own_provider: bool,
        aws_provider: pulumi.ProviderResource | None,
    ) -> ServiceScope:
        """The stack program's service keeps today's names; any other prefixes its own with its
        name, so two services (two variants, one per team) share a cluster."""
        if name == PROGRAM_SERVICE_NAME:
            prefix, namespace = "", args.get("namespace", INFERENCE_NAMESPACE)
        else:
            prefix, namespace = f"{name}-", args.get("namespace", name)
        theirs = None if own_provider else aws_provider
        joined = args.get("existing_cluster")
        if not joined:
            shared = args.get("install_shared_addons", True)
            return ServiceScope(prefix, namespace, None, own_provider, theirs, shared)
        provider = self.get_provider("kubernetes::")
        if provider is None or not joined.get("cluster_name"):
            raise ValueError(
                f"existing_cluster={{...}}: give {arg('existing_cluster', 'cluster_name')}, and the "
                "cluster's Kubernetes provider as this component's provider "
                "(opts=ResourceOptions(providers={'kubernetes': provider}))"
            )
        existing = ExistingCluster(
            joined["cluster_name"],
            provider,
            joined.get("node_role_name", ""),
            tuple(joined.get("node_security_group_ids", ())),
        )
        shared = args.get("install_shared_addons", False)
        return ServiceScope(prefix, namespace, existing, own_provider, theirs, shared)


def _region(
    name: str, args: DeepSeekServiceArgs, own_provider: bool, provider: pulumi.ProviderResource | None
) -> str | None:
    """The region the service plans for and names in its resources: the one its AWS provider
    deploys to. A provider object does not expose its region before deployment, so with yours the
    region is required; with the default provider it is the program's (``aws:region``, else the
    environment's AWS_REGION / AWS_DEFAULT_REGION, the provider's own fallbacks); with its own
    provider it is the ``region`` arg or the program's. None: the settings' default."""
    given = args.get("region")
    if wiring.deferred(given):
        raise ServiceError(name, f"region=...: {wiring.PLAIN_REQUIRED}")
    if own_provider:
        if provider is not None:
            raise ServiceError(
                name,
                "create_aws_provider=True: the component was also given an AWS provider "
                "(opts.providers); keep one of them",
            )
        return given or _program_region()
    if args.get("aws"):
        raise ServiceError(
            name,
            "aws={...}: configures the service's own AWS provider; pass create_aws_provider=True, "
            "or set these on the AWS provider you pass in opts.providers",
        )
    if provider is not None:
        if not given:
            raise ServiceError(
                name,
                "region: required with your AWS provider (opts.providers): give its region, which "
                "the sizing plan prices and the resources name (a provider cannot be read before "
                "deployment)",
            )
        return given
    program = _program_region()
    if given and program and given != program:
        raise ServiceError(
            name,
            f"region={given!r}: the program's default AWS provider deploys to {program!r} "
            "(aws:region); drop region, pass an AWS provider for that region in opts.providers, "
            "or pass create_aws_provider=True",
        )
    if not (given or program):
        raise ServiceError(
            name,
            "region: no region for the program's default AWS provider: set aws:region "
            "(pulumi config set aws:region us-east-1) or pass region with your own provider",
        )
    return given or program


# What each service of the running program holds in each cluster it joins: (cluster, object) ->
# the service's name. One table per program run (keyed by its root stack resource).
_CLAIMS: weakref.WeakKeyDictionary[object, dict[tuple[str, ...], str]] = weakref.WeakKeyDictionary()


class _NoRoot:
    """Stands in for the root stack resource where a runtime has none."""


_NO_ROOT = _NoRoot()
# The cluster-wide objects install_shared_addons creates (components/monitoring/observability.py,
# autoscaling.py, capacity.py), named in a collision.
SHARED_OBJECTS = (
    f"Helm releases kube-prometheus-stack, prometheus-adapter and dcgm-exporter in namespace "
    f"{MONITORING_NAMESPACE}, keda in namespace {KEDA_NAMESPACE}, IngressClass {INGRESS_CLASS}, "
    f"StorageClass {STORAGE_CLASS}"
)


def _claim(name: str, scope: ServiceScope, joined: str | None) -> None:
    """Refuse a service that would create what another service of this program already creates
    in the same existing cluster: the shared add-ons, or a namespace (and with it the Helm
    releases, Deployments and Services named in it). Services with clusters of their own share
    nothing."""
    if joined is None:
        return
    wanted = {("namespace", scope.namespace): f"namespace {scope.namespace!r}"}
    if scope.shared_addons:
        wanted[("shared-addons", "")] = f"the shared add-ons ({SHARED_OBJECTS})"
        for namespace in (MONITORING_NAMESPACE, KEDA_NAMESPACE):
            wanted[("namespace", namespace)] = f"namespace {namespace!r} (a shared add-on's)"
    claims = _CLAIMS.setdefault(pulumi.runtime.get_root_resource() or _NO_ROOT, {})
    clashes = [
        f"{what} would also be created by DeepSeekService {claims[(joined, *key)]!r}"
        for key, what in wanted.items()
        if (joined, *key) in claims
    ]
    if clashes:
        raise ServiceError(
            name,
            f"collides in cluster {joined!r}: " + "; ".join(clashes) + ". Give each service its own "
            "namespace (namespace=...) and install_shared_addons=True on one service per cluster",
        )
    claims.update({(joined, *key): name for key in wanted})


def _validated_with_region(
    name: str, args: DeepSeekServiceArgs, own_provider: bool, aws_provider: pulumi.ProviderResource | None
) -> tuple[Settings, Settings]:
    """The validated settings, region included. A region problem does not hide the others: the
    arguments are validated anyway (in the default region) and every problem is reported at once."""
    try:
        region = _region(name, args, own_provider, aws_provider)
    except ServiceError as region_error:
        try:
            _validated(args, pulumi.get_stack(), name)
        except SettingsError as others:
            raise ServiceError(name, f"{region_error.args[0].split(': ', 1)[1]}\nand {others}") from None
        raise
    with_region = {**args, "region": region} if region else args
    return _validated(with_region, pulumi.get_stack(), name)


def _warn_unreachable_api(name: str, blockers: Sequence[str]) -> None:
    """The stack program refuses to deploy a cluster whose API nothing could reach (``__main__.py``);
    a component in someone else's program warns, in its argument spelling, so the first ``up`` does
    not create a VPC and a cluster and then fail on every Kubernetes object."""
    pulumi.log.warn(
        f"DeepSeekService {name!r}: nothing could reach the Kubernetes API of the cluster it creates, so "
        "`pulumi up` would create the VPC and the cluster and then fail on every Kubernetes object. Give "
        'cluster={"public_access_cidrs": ["<your egress IP>/32"]}, or, from inside your own VPC '
        '(network={"vpc_id": ...}), cluster={"private_access_cidrs": [...]} or '
        '{"private_access_security_group_ids": [...]}. (' + " ".join(blockers) + ")"
    )


def _refuse_compute_mode_switch(
    name: str, settings: Settings, previous: dict[str, Any] | None, *, as_config: bool
) -> None:
    """Refuse, before anything changes, a compute mode other than the one this service was
    deployed with (components/deployed_state.py), unless cluster.allowComputeModeSwitch says the
    migration is deliberate; ``as_config``: name the settings as stack config keys, else as the
    component's arguments."""
    spelling = (
        {}
        if as_config
        else {
            "setting": "compute_mode",
            "override": 'cluster={"allow_compute_mode_switch": True}',
        }
    )
    refusal = switch_refusal(
        pulumi.get_stack(), deployed_mode(previous), settings.compute_mode.value, **spelling
    )
    if refusal is None:
        return
    if settings.cluster.allow_compute_mode_switch:
        pulumi.log.warn(f"DeepSeekService {name!r}: switching compute mode as allowed. {refusal}")
        return
    raise ServiceError(name, refusal)


# The one routing case not rendered: llm-d's router in front of a multi-node (LeaderWorkerSet)
# replica. Refused before anything is created rather than accepted and ignored.
ROUTED_MULTI_NODE = (
    f"{PROJECT}:routing.kind llm-d does not route to a multi-node replica yet (this plan puts one "
    "replica on {nodes} nodes, a LeaderWorkerSet): the router's InferencePool selects pods by label, "
    "and a replica's workers carry the leader's labels but serve nothing. Set routing.kind none "
    f"(with an autoscaling.signal other than router-queue and autoscaling.minReplicas 1 or more) "
    "for this variant"
)


# Warm spares hold single GPU nodes (components/platform/warm_spare.py), in no particular zone; a
# multi-node replica needs several at once, in a zone no other group uses (the LeaderWorkerSet's
# exclusive topology, components/serving/vllm.py). Refused rather than paid for and unused.
WARM_MULTI_NODE = (
    f"{PROJECT}:autoscaling.warmSpareNodes cannot warm this plan's replicas: each spans {{nodes}} "
    "nodes (a LeaderWorkerSet group, in a zone no other group uses), and a warm spare holds one node "
    "in no particular zone, so a new group would still wait for new nodes while the spares are paid "
    "for. Set autoscaling.warmSpareNodes 0 for this variant"
)


# autoscaling.seasonal reads last week from the Prometheus of whoever installed the shared add-ons:
# settings/consistency.py checks this service's observability.prometheusRetention, which only the
# service that installs them applies.
SEASONAL_ON_FOREIGN_PROMETHEUS = (
    "autoscaling.seasonal reads last week's requests from the cluster's Prometheus, which this service "
    "does not install (install_shared_addons is false): that Prometheus must keep at least "
    f"{SEASONAL_RETENTION_S // 86_400}d of samples, or the week trigger reads 0 without a word and the "
    "floor is yesterday's alone. Its retention counts, not this service's "
    "observability.prometheusRetention; check it with the owner of the shared add-ons"
)


def _log_warning(name: str, warning: str, *, as_args: bool) -> None:
    """A warning at preview and up: for args, named by the service and in the spelling the args
    were written in; for the stack program, as its stack file spells it."""
    pulumi.log.warn(f"DeepSeekService {name!r}: {respelt(warning, python_spelling)}" if as_args else warning)


def refuse_on_multi_node(name: str, settings: Settings, plan: SizingPlan, *, as_config: bool = True) -> None:
    """Refuse what a multi-node (LeaderWorkerSet) replica cannot do, ``routing.kind llm-d`` and
    warm spares, in the spelling the user wrote (stack config keys, or the component's arguments).
    The component refuses at construction; ``python -m automation`` (automation/api.py
    ``prepare``) refuses the same stack before ``plan``, ``capacity`` or ``diff`` prices it."""
    if plan.nodes_per_replica == 1:
        return
    refused = [
        message
        for message, asked in (
            (ROUTED_MULTI_NODE, settings.routing.kind is RoutingKind.LLM_D),
            (WARM_MULTI_NODE, settings.autoscaling.warm_spare_nodes > 0),
        )
        if asked
    ]
    if refused:
        message = " ".join(refused).replace("{nodes}", str(plan.nodes_per_replica))
        raise ServiceError(name, message if as_config else respelt(message, python_spelling))


def _refuse_foreign_mocks(name: str) -> None:
    """Under ``pulumi.runtime.set_mocks`` with mocks of one's own, the component would get back
    only its inputs: no availability zone names from ``getAvailabilityZones``, no kubeconfig from
    the EKS cluster, no ARNs, and the program dies later inside an ``apply`` with an opaque
    ``TypeError: 'NoneType' object is not subscriptable`` (the first is the network's
    ``zones[i]``). Say so now, and what to use instead."""
    monitor = pulumi.runtime.settings.SETTINGS.monitor
    if not isinstance(monitor, MockMonitor):
        return
    # Imported here: only a program under mocks needs them (deepseek_eks.testing.Mocks is one).
    from deepseek_eks.testing.mocks import RecordingMocks

    mocks = monitor.mocks
    if not isinstance(mocks, RecordingMocks):
        raise ServiceError(
            name,
            f"running under pulumi.runtime.set_mocks({type(mocks).__name__}()), whose answers lack "
            "the outputs the cloud computes for this component (availability zones, the EKS "
            "cluster's kubeconfig, ARNs); use deepseek_eks.testing.Mocks (subclass it to answer "
            "your own resources, calling super() for the rest) or deepseek_eks.testing.run(program)",
        )


def _program_region() -> str | None:
    return (
        pulumi.Config("aws").get("region")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )


def export_outputs(service: DeepSeekService) -> None:
    """The stack outputs, from the service's outputs."""
    for key, value in service.result.outputs.items():
        pulumi.export(key, value)


def build(settings: Settings, sizing_plan: SizingPlan | None = None) -> BuildResult:
    """The stack program: one ``DeepSeekService`` for ``settings``, its outputs exported."""
    service = DeepSeekService(PROGRAM_SERVICE_NAME, {}, settings=settings, sizing_plan=sizing_plan)
    export_outputs(service)
    return service.result


# help(DeepSeekService): every argument and output with its description (components/service_doc.py).
DeepSeekService.__init__.__doc__ = init_doc(
    DeepSeekService,
    DeepSeekServiceArgs,
    """Create the service ``name`` from ``args``: its settings, validated all at once (every
    problem is reported together, named as the args write it). The service named "deepseek" keeps
    the stack program's resource names; any other prefixes its resources with its name, which is
    also its namespace unless ``namespace`` says otherwise. ``opts.providers``: your AWS provider
    (then ``region`` is required) and, with ``existing_cluster``, the cluster's Kubernetes provider.

    ``settings``: already validated settings instead of ``args`` (the stack program reads them
    from config; pass ``{}`` as ``args`` then). ``sizing_plan``: a plan already made for them.""",
)
