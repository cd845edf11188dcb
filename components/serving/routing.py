"""The router component (``routing.kind llm-d``): llm-d's router in front of vLLM, built from the
pure manifests of ``router.py``. The load balancer targets its Service instead of vLLM's. Its
PodMonitor and alert rules are Observability's (they need the Prometheus Operator's CRDs, which
the monitoring stack installs after this component)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from deepseek_eks.sizing import SizingPlan

from ..network_policies import ClusterCidrs, with_api_egress
from . import router


@dataclass
class RouterArgs:
    """What the router needs from the service around it."""

    plan: SizingPlan
    """The sizing plan: the queue's bound (max_num_seqs × max_replicas) and timeout (start-up)."""
    namespace: pulumi.Input[str]
    """The service's namespace, where vLLM runs."""
    monitoring_namespace: str
    """Where Prometheus runs (it scrapes the router's metrics)."""
    labels: dict[str, str]
    """Labels for every object."""
    max_replicas: int
    """autoscaling.maxReplicas: the queue holds what the fleet at its largest runs at once."""
    grace_seconds: int
    """How long streams in flight may finish when the router pod stops (vLLM's grace period)."""
    load_balancer_cidrs: pulumi.Input[list[str]]
    """The load balancer's subnets, admitted to the proxy."""
    cluster_cidrs: pulumi.Input[ClusterCidrs]
    """The VPC and service CIDRs: the EPP watches the API server."""
    proxy_image: str = router.PROXY_IMAGE
    """The proxy's image as the nodes pull it (``image.registry`` applied)."""
    install_crds: bool = True
    """Install the Gateway API Inference Extension CRDs (cluster-scoped: once per cluster)."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """Created first (the namespace)."""


def crd_manifests() -> list[dict[str, Any]]:
    """The three CRDs the EPP reconciles, as copied from GIE v1.5.0 into crds/."""
    folder = resources.files(__package__).joinpath("crds")
    return [yaml.safe_load(folder.joinpath(name).read_text()) for name in router.CRD_FILES]


class Router(pulumi.ComponentResource):
    """llm-d's router (the endpoint picker and its proxy) in front of vLLM's pods."""

    service_name: str
    """The router's Service, which the load balancer targets."""

    def __init__(self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Router", name, None, opts)
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        crds: list[pulumi.Resource] = []
        if args.install_crds:
            for crd in crd_manifests():
                crds.append(
                    k8s.apiextensions.v1.CustomResourceDefinition(
                        f"{name}-crd-{crd['spec']['names']['plural']}",
                        metadata=crd["metadata"],
                        spec=crd["spec"],
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                )
        ns = pulumi.Output.from_input(args.namespace)
        labels = args.labels
        rbac = ns.apply(lambda n: router.rbac(n, labels))
        sa, role, binding = (rbac[i] for i in range(3))
        k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=sa["metadata"],
            automount_service_account_token=False,
            opts=after,
        )
        k8s.rbac.v1.Role(f"{name}-role", metadata=role["metadata"], rules=role["rules"], opts=after)
        k8s.rbac.v1.RoleBinding(
            f"{name}-rolebinding",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=after,
        )
        config = ns.apply(lambda n: router.config_map(n, labels, args.plan, args.max_replicas))
        k8s.core.v1.ConfigMap(f"{name}-config", metadata=config["metadata"], data=config["data"], opts=after)
        config_hash = config.apply(
            lambda c: hashlib.sha256(json.dumps(c["data"], sort_keys=True).encode()).hexdigest()[:16]
        )
        deployment = pulumi.Output.all(ns, config_hash).apply(
            lambda v: router.deployment(v[0], labels, v[1], args.grace_seconds, args.proxy_image)
        )
        k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata=deployment["metadata"], spec=deployment["spec"], opts=after
        )
        svc = ns.apply(lambda n: router.service(n, labels))
        k8s.core.v1.Service(f"{name}-service", metadata=svc["metadata"], spec=svc["spec"], opts=after)
        pool = ns.apply(lambda n: router.inference_pool(n, labels))
        # apiVersion and kind make the type token, so they are given as plain strings.
        k8s.apiextensions.CustomResource(
            f"{name}-inferencepool",
            api_version=router.INFERENCE_POOL_API,
            kind="InferencePool",
            metadata=pool["metadata"],
            spec=pool["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *crds]),
        )
        policy = pulumi.Output.all(ns, args.load_balancer_cidrs, args.cluster_cidrs).apply(
            lambda v: with_api_egress(
                router.network_policy(
                    v[0],
                    labels,
                    load_balancer_cidrs=list(v[1]),
                    monitoring_namespace=args.monitoring_namespace,
                ),
                v[2],
            )
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol", metadata=policy["metadata"], spec=policy["spec"], opts=after
        )
        self.service_name = router.ROUTER
        self.register_outputs({"serviceName": self.service_name})
