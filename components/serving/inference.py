"""The vLLM inference service: workload (Deployment, or LeaderWorkerSet across nodes), weights
(Hugging Face download, an encrypted S3 bucket staged by a Job, your own bucket read in place, or
an EBS snapshot; their manifests and access policy are serving/weights.py), and a private
endpoint."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from deepseek_eks.settings import s3_location
from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.checkpoints import pinned_revision
from deepseek_eks.sizing.planner import (
    STAGED_SOURCES,
    WeightsSource,
)

from ..helm import helm_release
from ..manifests import TopLevelCustomResource
from ..monitoring.autoscaling import ScaleTarget
from ..network_policies import (
    ClusterCidrs,
    chart_policies,
    default_deny,
    network_policy_resources,
    with_api_egress,
)
from ..platform.capacity import GpuPlacement
from ..platform.image_prepull import IMAGE_PREPULL, closed_network_policy, prepull_daemonset
from ..platform.pod_identity import ServiceAccountRef, pod_identity_role
from ..platform.warm_spare import WARM_SPARE, placeholder_deployment, priority_class
from ..versions import (
    LEADER_WORKER_SET,
    ROUTER_PROXY_IMAGE,
    VLLM_IMAGE,
    image_reference,
)
from .buckets import private_bucket
from .exposure import Endpoint, ingress, nlb_service
from .multinode import LWS_API_VERSION, leader_worker_set
from .routing import Router, RouterArgs
from .vllm import (
    APP,
    CHECKOV_SKIPS,
    COMPILE_CACHE_SCRIPT,
    DELETION_COST_SCRIPT,
    WEIGHTS_MOUNT_PATH,
    Workload,
    checkov_annotations,
    compile_cache_prefix,
    deletion_cost_policy,
    deployment,
    disruption_budget,
    network_policy,
    service,
    termination_grace_seconds,
)
from .weights import (
    SNAPSHOT_API,
    STAGE_DISK_GIB,
    STAGE_SCRIPT,
    STAGER,
    WEIGHTS_CLAIM,
    mountpoint_volume,
    snapshot_weights,
    stage_job_spec,
    stage_seconds,
    staged_prefix,
    stager_network_policy,
    weights_access_policy,
    weights_addons,
    weights_object_name,
    weights_volume_identity,
)

DELETION_COST_SOURCE = Path(__file__).parent / "scripts" / "deletion_cost.py"
COMPILE_CACHE_SOURCE = Path(__file__).parent / "scripts" / "compile_cache.py"
LWS_NAMESPACE = "lws-system"


@dataclass
class InferenceArgs:
    """Inputs of ``Inference``."""

    plan: SizingPlan
    """The sizing plan: every vLLM flag, resources, probes and drain time come from it."""
    namespace: pulumi.Input[str]
    """Namespace of the workload (Pod Security restricted)."""
    monitoring_namespace: str
    """Namespace Prometheus scrapes from (admitted by the NetworkPolicy)."""
    placement: GpuPlacement
    """GPU node selector, tolerations and IngressClass from the capacity layer."""
    endpoint: Endpoint
    """Load balancer scheme, allowed CIDRs, TLS certificate and drain time."""
    cluster_cidrs: pulumi.Input[ClusterCidrs]
    """The VPC's CIDR blocks and the service CIDR: who may reach an internal NLB (it has no path
    rules; see ``nlb_service``), and where the Kubernetes API is (``network_policies.py``)."""
    load_balancer_cidrs: pulumi.Input[list[str]]
    """CIDRs of the subnets the load balancer lives in: the only addresses admitted to port 8000
    besides Prometheus (the ALB reaches pods from its own addresses there)."""
    cluster_name: str
    """EKS cluster name (Pod Identity associations)."""
    region: str
    """AWS region (S3 client of vLLM and the stager)."""
    labels: dict[str, str]
    """Labels on every object."""
    image: str = VLLM_IMAGE
    """The vLLM image reference the server and the stager pull (image.registry applied)."""
    retain_weights_bucket: bool = True
    """``weights.retainBucket``: keep the staged-weights bucket (and its settings) on destroy and
    replacement; False deletes it with its objects."""
    weights_source: WeightsSource = WeightsSource.HUGGINGFACE
    """``weights.source``: ``s3`` stages the weights into an encrypted bucket and streams them from
    there; ``s3-mountpoint`` mounts that bucket read-only; with an ``s3://`` repository in the plan
    both read your own bucket in place instead (no bucket, no stager); ``ebs-snapshot`` gives each
    pod a volume restored from ``snapshot_id``; ``huggingface`` downloads at start."""
    snapshot_id: str | None = None
    """EBS snapshot of the weights (``weights.snapshotId``, made by ``automation bake-weights``)."""
    previous_weights_location: str | None = None
    """``s3://bucket/prefix`` the deployed vLLM reads (the service's ``weightsLocation`` output of
    the stack's last update; None for a first deployment or weights not in S3). While it differs
    from the new one, vLLM's read role keeps it readable: the old pods keep serving and restarting
    (scale-out, spot or node replacement) until the new variant has rolled out; the next update
    drops it."""
    weights_kms_key_arn: pulumi.Input[str] | None = None
    """KMS key of the weights (``weights.kmsKeyArn``, or the key ``cluster.createKmsKey`` makes):
    the project's bucket's default encryption, and a key the weights roles may use; None: SSE-S3."""
    access_logs_bucket: pulumi.Input[str] | None = None
    """Bucket the ALB writes access logs to, under ``access_logs_prefix`` (None: no logs)."""
    access_logs_prefix: str = ""
    """Prefix of the ALB's access logs in ``access_logs_bucket``."""
    ebs_driver: str = "ebs.csi.aws.com"
    """The cluster's EBS CSI provisioner (Auto Mode's own, or the add-on's in Karpenter mode)."""
    max_replicas: int = 1
    """Most replicas; a PodDisruptionBudget is created when above one."""
    warm_spare_nodes: int = 0
    """GPU nodes held by placeholder pods that vLLM replicas preempt (``autoscaling.warmSpareNodes``)."""
    api_key: bool = False
    """An API key Secret exists: vLLM requires it on every request."""
    hf_token: bool = False
    """A Hugging Face token Secret exists: downloads use it."""
    on_demand_floor: bool = False
    """The GPU pools keep the minimum replicas on on-demand beside spot (nodepools.has_on_demand_floor):
    single-node replicas then rank themselves for scale-down (vllm.with_deletion_cost)."""
    cluster_object_prefix: str = ""
    """Put before the names of the cluster-scoped objects this service owns (the warm spares'
    PriorityClass, the snapshot weights' VolumeSnapshotClass and StorageClass), so two services
    in one cluster keep apart ("" = today's names)."""
    install_cluster_singletons: bool = True
    """Install what the workload needs once per cluster: the LeaderWorkerSet controller for a
    multi-node plan, the weights source's EKS add-on (Mountpoint CSI driver, snapshot controller).
    With several services in one cluster, the one with the shared add-ons installs them."""
    image_registry: str | None = None
    """``image.registry``: where Docker Hub images are pulled from instead (the router's proxy)."""
    routing: str = "none"
    """``routing.kind``: ``none`` (the load balancer targets vLLM's pods) or ``llm-d`` (llm-d's
    router in front of them, which the load balancer targets instead; serving/routing.py)."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """Resources the workload waits for (namespaces, secrets, node pool)."""


@dataclass(frozen=True)
class WeightsBucket:
    """Where in S3 vLLM reads the weights, and what must finish before it may."""

    name: pulumi.Output[str]
    prefix: str
    """"" (the whole bucket) or a key prefix ending in "/" (see ``s3_location``)."""
    ready: list[pulumi.Resource]
    """The stager Job for the project's bucket; nothing for yours."""


class Inference(pulumi.ComponentResource):
    """OpenAI-compatible vLLM endpoint for one DeepSeek-R1 variant."""

    service_name: pulumi.Output[str]
    """In-cluster Service of the endpoint."""
    endpoint_host: pulumi.Output[str]
    """DNS name of the (internal by default) load balancer, once provisioned."""
    served_model_name: str
    """The ``model`` clients pass in requests."""
    weights_bucket: pulumi.Output[str] | None
    """Bucket vLLM reads the weights from (weights.source s3 or s3-mountpoint): the project's
    staging bucket, or yours when model.repository is an s3:// URI."""
    scale_target: ScaleTarget
    """The workload an autoscaler resizes (Deployment or LeaderWorkerSet)."""

    def __init__(self, name: str, args: InferenceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Inference", name, None, opts)
        self._name, self._args = name, args
        plan = args.plan
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": APP, "namespace": args.namespace, "labels": args.labels},
            automount_service_account_token=False,
            opts=after,
        )
        workload_deps: list[pulumi.Resource] = list(args.depends_on) + list(args.placement.depends_on)
        model_uri, cache_bucket, weights_volume = self._weights_source(workload_deps)
        streamed = args.weights_source == WeightsSource.S3

        workload = Workload(
            namespace="",  # filled below: the namespace is an Output
            labels=args.labels,
            node_selector=args.placement.node_selector,
            tolerations=args.placement.tolerations,
            api_key=args.api_key,
            hf_token=args.hf_token,
            aws_region=args.region if streamed else None,
            # vLLM itself calls S3 (and the Pod Identity agent) only with the streamer; with
            # Mountpoint the driver's pod fetches the credentials of vLLM's service account.
            pod_identity=streamed,
            weights_volume=weights_volume,
            image=args.image,
            # A LeaderWorkerSet removes the highest group index first and reads no deletion cost.
            deletion_cost=args.on_demand_floor and plan.nodes_per_replica == 1,
        )
        if workload.deletion_cost:
            workload_deps += self._deletion_cost_access()
        timeouts = rollout_timeouts(plan)
        workload_opts = pulumi.ResourceOptions(
            parent=self, depends_on=workload_deps, custom_timeouts=timeouts
        )
        multi_node = plan.nodes_per_replica > 1
        if multi_node and args.install_cluster_singletons:
            lws = self._leader_worker_set_controller()
            workload_opts = pulumi.ResourceOptions(
                parent=self, depends_on=[*workload_deps, lws], custom_timeouts=timeouts
            )
        cache_prefix = compile_cache_prefix(plan)
        manifest = pulumi.Output.all(args.namespace, model_uri, cache_bucket).apply(
            lambda v: (leader_worker_set if multi_node else deployment)(
                plan,
                replace(
                    workload,
                    namespace=v[0],
                    model_uri=v[1],
                    compile_cache=(v[2], cache_prefix) if v[2] else None,
                ),
            )
        )
        self.scale_target = (
            ScaleTarget(LWS_API_VERSION, "LeaderWorkerSet", APP)
            if multi_node
            else ScaleTarget("apps/v1", "Deployment", APP)
        )
        self.workload: pulumi.Resource
        if multi_node:
            # apiVersion and kind make the resource's type token, so they must be plain strings.
            self.workload = k8s.apiextensions.CustomResource(
                f"{name}-lws-workload",
                api_version=LWS_API_VERSION,
                kind="LeaderWorkerSet",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=workload_opts,
            )
        else:
            self.workload = k8s.apps.v1.Deployment(
                f"{name}-deployment",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=workload_opts,
            )

        ns_workload = pulumi.Output.from_input(args.namespace).apply(
            lambda ns: replace(workload, namespace=ns)
        )
        svc_manifest = ns_workload.apply(lambda w: service(w, leader_only=multi_node))
        svc = k8s.core.v1.Service(
            f"{name}-service",
            metadata=svc_manifest["metadata"],
            spec=svc_manifest["spec"],
            opts=after,
        )
        self.endpoint_host = self._front(ns_workload, svc, multi_node)
        if args.warm_spare_nodes:
            self._warm_spares(ns_workload)
        if args.plan.image_prepull:
            self._image_prepull(ns_workload)
        if args.max_replicas > 1:
            pdb = ns_workload.apply(disruption_budget)
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=after
            )

        self.service_name = svc.metadata.apply(lambda m: str(m.name))
        self.served_model_name = plan.model.variant
        self.register_outputs(
            {
                "serviceName": self.service_name,
                "endpointHost": self.endpoint_host,
                "servedModelName": self.served_model_name,
                "weightsBucket": self.weights_bucket,
                "weightsLocation": self.weights_location,
                "weightsVolume": self.weights_volume,
            }
        )

    def _weights_source(
        self, workload_deps: list[pulumi.Resource]
    ) -> tuple[pulumi.Input[str] | None, pulumi.Input[str] | None, dict[str, Any] | None]:
        """Where vLLM reads the weights from (weights.source): the model URI, the bucket that keeps
        the compile caches (the plan's compile_cache), and the pod volume holding the weights; what
        the workload must wait for is added to ``workload_deps``. Sets the weights outputs."""
        args, plan = self._args, self._args.plan
        model_uri: pulumi.Input[str] | None = None
        # The project's bucket, where replicas keep vLLM's compile caches (the plan's compile_cache).
        cache_bucket: pulumi.Input[str] | None = None
        weights_volume: dict[str, Any] | None = None
        self.weights_bucket = None
        self.weights_location: pulumi.Output[str] = pulumi.Output.from_input("")
        self.weights_volume = weights_volume_identity(args.weights_source, plan, args.snapshot_id)
        streamed = args.weights_source == WeightsSource.S3
        repository = plan.request.repository or plan.model.hf_repo
        # The commit the model catalog pins for this repository (None: staged at main, resolved then).
        self._revision = pinned_revision(plan.model.variant, repository)
        if args.weights_source in STAGED_SOURCES:
            own = s3_location(plan.request.repository or "")
            weights = self._own_bucket(*own) if own else self._staged_bucket()
            self.weights_bucket = weights.name
            self.weights_location = pulumi.Output.concat("s3://", weights.name, "/", weights.prefix)
            workload_deps += weights.ready
            if streamed:
                # vLLM 0.33.0 first copies the *.json/*.model/*.py and tokenizer files of this prefix
                # into $VLLM_ASSETS_CACHE/model_streamer/<hash> (vllm/config/model.py:1204
                # maybe_pull_model_tokenizer_for_runai, vllm/transformers_utils/runai_utils.py:62
                # ObjectStorageModel); its default, $XDG_CACHE_HOME/vllm/assets (vllm/envs.py:943),
                # lies on the "home" emptyDir (components/serving/vllm.py _env), not the read-only root.
                # Facts: reference/upstream/vllm-0.33.0/object-storage-model.json.
                model_uri = pulumi.Output.concat("s3://", weights.name, "/", weights.prefix)
                if plan.compile_cache:
                    cache_bucket = weights.name
                    workload_deps.append(self._compile_cache_script())
            else:
                workload_deps.append(self._mountpoint_claim(weights.name, weights.prefix))
                model_uri = WEIGHTS_MOUNT_PATH
                claim = weights_object_name(WEIGHTS_CLAIM, self.weights_volume)
                weights_volume = {"persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        elif args.weights_source == WeightsSource.EBS_SNAPSHOT:
            snapshot, weights_volume = self._snapshot_volume()
            workload_deps.append(snapshot)
            model_uri = WEIGHTS_MOUNT_PATH

        return model_uri, cache_bucket, weights_volume

    def _leader_worker_set_controller(self) -> pulumi.Resource:
        """The LeaderWorkerSet controller a multi-node plan needs (once per cluster), its namespace
        closed by network policies."""
        name, args = self._name, self._args
        # No values: LWS 0.10.0's RBAC cannot be narrowed by one. Its manager ClusterRole
        # (charts/lws/templates/rbac/clusterrole.yaml, unconditional) may get, list, watch and
        # update Secrets in every namespace, for its webhook certificate rotation; the chart
        # has no value that scopes it (enableCertManager changes only where the certificate
        # comes from). Listed as an exception in docs/security.md and chart-rbac-facts.json.
        lws = helm_release(
            f"{name}-lws",
            "lws",
            LEADER_WORKER_SET,
            LWS_NAMESPACE,
            {},
            pulumi.ResourceOptions(parent=self),
            create_namespace=True,
        )
        # The controller's namespace (its chart creates it), closed like the monitoring ones.
        network_policy_resources(
            f"{name}-lws-netpol",
            lambda cidrs: chart_policies(
                "lws",
                LWS_NAMESPACE,
                cidrs=cidrs,
                labels=args.labels,
                monitoring_namespace=args.monitoring_namespace,
            ),
            args.cluster_cidrs,
            pulumi.ResourceOptions(parent=self, depends_on=[lws]),
        )
        return lws

    def _front(
        self, ns_workload: pulumi.Output[Workload], svc: pulumi.Resource, multi_node: bool
    ) -> pulumi.Output[str]:
        """The load balancer, in front of vLLM's Service or of llm-d's router (routing.kind), and
        the network policies that admit what it sends; returns the load balancer's DNS name."""
        name, args, plan = self._name, self._args, self._args.plan
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        routed = args.routing == "llm-d"
        front: pulumi.Resource = svc
        if routed:
            front = Router(
                f"{name}-router",
                RouterArgs(
                    plan=plan,
                    namespace=args.namespace,
                    monitoring_namespace=args.monitoring_namespace,
                    labels=args.labels,
                    max_replicas=args.max_replicas,
                    grace_seconds=termination_grace_seconds(plan),
                    load_balancer_cidrs=args.load_balancer_cidrs,
                    cluster_cidrs=args.cluster_cidrs,
                    install_crds=args.install_cluster_singletons,
                    proxy_image=image_reference(ROUTER_PROXY_IMAGE, args.image_registry),
                    depends_on=list(args.depends_on),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        endpoint_host = self._load_balancer(ns_workload, front, multi_node, routed=routed)
        policy = pulumi.Output.all(ns_workload, args.load_balancer_cidrs, args.cluster_cidrs).apply(
            lambda v: with_api_egress(
                network_policy(
                    v[0],
                    load_balancer_cidrs=list(v[1]),
                    monitoring_namespace=args.monitoring_namespace,
                    routed=routed,
                ),
                v[2] if v[0].deletion_cost else None,
            )
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol", metadata=policy["metadata"], spec=policy["spec"], opts=after
        )
        # Every pod of the namespace isolated both ways: one that no other policy selects (started by
        # hand, or a workload added later) reaches nothing and is reached by nothing; vLLM's, the
        # stager's and the placeholders' own policies add what they allow.
        deny = ns_workload.apply(lambda w: default_deny(w.namespace, w.labels))
        k8s.networking.v1.NetworkPolicy(
            f"{name}-default-deny", metadata=deny["metadata"], spec=deny["spec"], opts=after
        )
        return endpoint_host

    def _staged_bucket(self) -> WeightsBucket:
        """An encrypted, private, TLS-only bucket that the stager Job fills from Hugging Face, with
        a write role for the Job and a read role for vLLM, each limited to this variant's prefix."""
        name, args = self._name, self._args
        # Kept on destroy and on replacement by default: staging the weights again takes hours. The
        # settings below it are kept too, or deleting them would change the kept bucket (its public
        # access block above all). README "Weights from S3" says how to delete it.
        retain = args.retain_weights_bucket
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=retain)
        prefix = staged_prefix(args.plan)
        bucket = private_bucket(
            f"{name}-weights", child, force_destroy=not retain, kms_key_arn=args.weights_kms_key_arn
        )
        cache = compile_cache_prefix(args.plan) if args.plan.compile_cache else None
        self._weights_role(
            "reader", APP, bucket.arn, prefix, write=False, keep=self._still_served(), compile_cache=cache
        )
        self._weights_role("stager", STAGER, bucket.arn, prefix, write=True)
        job = self._stage_job(bucket, prefix)
        return WeightsBucket(bucket.bucket, prefix, [job])

    def _own_bucket(self, bucket: str, prefix: str) -> WeightsBucket:
        """Your bucket (model.repository s3://bucket/prefix), read where it is: no bucket, stager
        or write role is created, only vLLM's read role on that bucket and prefix."""
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        bucket_arn = partition.apply(lambda p: f"arn:{p}:s3:::{bucket}")
        self._weights_role("reader", APP, bucket_arn, prefix, write=False, keep=self._still_served())
        return WeightsBucket(pulumi.Output.from_input(bucket), prefix, [])

    def _still_served(self) -> str | None:
        """The deployed vLLM's weights (``s3://bucket/prefix``) its read role keeps while the new
        ones roll out; None when there is none."""
        previous = self._args.previous_weights_location
        return previous if previous and s3_location(previous) else None

    def _weights_role(
        self,
        role: str,
        service_account: str,
        bucket_arn: pulumi.Output[str],
        prefix: str,
        *,
        write: bool,
        keep: str | None = None,
        compile_cache: str | None = None,
    ) -> None:
        """A Pod Identity role of ``service_account`` limited to ``prefix`` of the bucket, and
        (read-only) to the ``keep`` location too (``s3://bucket/prefix``), and to the
        ``compile_cache`` prefix (read-write) where one is given."""
        name, args = self._name, self._args
        pod_identity_role(
            f"{name}-{role}",
            parent=self,
            # The key's ARN may be an Output (components/wiring.py).
            policy=pulumi.Output.all(bucket_arn, args.weights_kms_key_arn).apply(
                lambda v: json.dumps(
                    weights_access_policy(
                        v[0],
                        prefix,
                        write=write,
                        kms_key_arn=v[1],
                        still_served=keep,
                        compile_cache=compile_cache,
                    )
                )
            ),
            service_account=ServiceAccountRef(
                args.cluster_name, args.namespace, service_account, args.region
            ),
            depends_on=list(args.depends_on),
        )

    def _load_balancer(
        self, workload: pulumi.Output[Workload], svc: pulumi.Resource, multi_node: bool, *, routed: bool
    ) -> pulumi.Output[str]:
        """The ALB Ingress (default) or the NLB Service, in front of vLLM's Service or, ``routed``,
        the router's; returns its DNS name once provisioned."""
        args = self._args
        given = args.endpoint
        opts = pulumi.ResourceOptions(parent=self, depends_on=[svc, *args.placement.depends_on])
        # Its wiring fields may hold Outputs (components/wiring.py): the manifests get the values.
        endpoint = pulumi.Output.all(
            list(given.allowed_cidrs),
            given.subnet_ids if isinstance(given.subnet_ids, pulumi.Output) else list(given.subnet_ids),
            given.certificate_arn,
        ).apply(
            lambda v: replace(given, allowed_cidrs=list(v[0]), subnet_ids=tuple(v[1]), certificate_arn=v[2])
        )
        # Who may connect: the allowed CIDRs on an internet-facing endpoint; on an internal one the
        # VPC (its clients) plus the allowed CIDRs (peered networks, a VPN).
        sources = pulumi.Output.all(args.cluster_cidrs, endpoint).apply(
            lambda v: (
                list(v[1].allowed_cidrs)
                if given.internet_facing
                else [*v[0].vpc, *(c for c in v[1].allowed_cidrs if c not in v[0].vpc)]
            )
        )
        if given.load_balancer == "nlb":
            manifest = pulumi.Output.all(workload, endpoint, sources).apply(
                lambda v: nlb_service(v[0], v[1], v[2], leader_only=multi_node, routed=routed)
            )
            nlb = k8s.core.v1.Service(
                f"{self._name}-nlb", metadata=manifest["metadata"], spec=manifest["spec"], opts=opts
            )
            return nlb.status.apply(_ingress_host)
        logs = args.access_logs_bucket
        ing_manifest = pulumi.Output.all(workload, endpoint, sources, logs).apply(
            lambda v: ingress(
                v[0],
                v[1],
                v[2],
                access_logs=(v[3], args.access_logs_prefix) if v[3] else None,
                routed=routed,
            )
        )
        ing = k8s.networking.v1.Ingress(
            f"{self._name}-ingress", metadata=ing_manifest["metadata"], spec=ing_manifest["spec"], opts=opts
        )
        return ing.status.apply(_ingress_host)

    def _compile_cache_script(self) -> pulumi.Resource:
        """The ConfigMap the compile-cache containers run their script from (vllm.with_compile_cache)."""
        name, args = self._name, self._args
        return k8s.core.v1.ConfigMap(
            f"{name}-compile-cache-script",
            metadata={"name": COMPILE_CACHE_SCRIPT, "namespace": args.namespace, "labels": args.labels},
            data={"compile_cache.py": COMPILE_CACHE_SOURCE.read_text()},
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )

    def _deletion_cost_access(self) -> list[pulumi.Resource]:
        """The script and the least the init container needs: read nodes (their capacity-type
        label), patch pods of this namespace (RBAC cannot name a pod whose name is generated), and
        a ValidatingAdmissionPolicy that narrows the patch to the deletion-cost annotation of the
        caller's own pod (vllm.deletion_cost_policy)."""
        name, args = self._name, self._args
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        rbac = k8s.rbac.v1
        meta = k8s.meta.v1.ObjectMetaArgs(
            name=DELETION_COST_SCRIPT, namespace=args.namespace, labels=args.labels
        )
        cluster_name = f"{args.cluster_object_prefix}{DELETION_COST_SCRIPT}"
        cluster_meta = k8s.meta.v1.ObjectMetaArgs(name=cluster_name, labels=args.labels)
        subjects = [rbac.SubjectArgs(kind="ServiceAccount", name=APP, namespace=args.namespace)]
        group = "rbac.authorization.k8s.io"
        script = k8s.core.v1.ConfigMap(
            f"{name}-deletion-cost-script",
            metadata=meta,
            data={"deletion_cost.py": DELETION_COST_SOURCE.read_text()},
            opts=child,
        )
        bindings: list[pulumi.Resource] = [script]
        grants = (  # (suffix, role kind, metadata, resource, verb, role name)
            ("", "Role", meta, "pods", "patch", DELETION_COST_SCRIPT),
            ("-nodes", "ClusterRole", cluster_meta, "nodes", "get", cluster_name),
        )
        for suffix, kind, metadata, resource, verb, role_name in grants:
            role_class = rbac.Role if kind == "Role" else rbac.ClusterRole
            binding_class = rbac.RoleBinding if kind == "Role" else rbac.ClusterRoleBinding
            role = role_class(
                f"{name}-deletion-cost{suffix}",
                metadata=metadata,
                rules=[rbac.PolicyRuleArgs(api_groups=[""], resources=[resource], verbs=[verb])],
                opts=child,
            )
            bindings.append(
                binding_class(
                    f"{name}-deletion-cost{suffix}",
                    metadata=metadata,
                    role_ref=rbac.RoleRefArgs(api_group=group, kind=kind, name=role_name),
                    subjects=subjects,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[role]),
                )
            )
        # The policy before the pods can patch anything: the workload waits for it and its binding.
        manifests = pulumi.Output.from_input(args.namespace).apply(
            lambda ns: deletion_cost_policy(ns, cluster_name, args.labels)
        )
        admission = k8s.admissionregistration.v1
        policy = admission.ValidatingAdmissionPolicy(
            f"{name}-deletion-cost-policy",
            metadata=manifests[0]["metadata"],
            spec=manifests[0]["spec"],
            opts=child,
        )
        bindings.append(policy)
        bindings.append(
            admission.ValidatingAdmissionPolicyBinding(
                f"{name}-deletion-cost-policy",
                metadata=manifests[1]["metadata"],
                spec=manifests[1]["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
            )
        )
        return bindings

    def _warm_spares(self, workload: pulumi.Output[Workload]) -> None:
        """The placeholder pods' PriorityClass, Deployment and (closed) NetworkPolicy."""
        name, args = self._name, self._args
        child = pulumi.ResourceOptions(parent=self)
        klass = priority_class(args.labels, args.cluster_object_prefix)
        priority = k8s.scheduling.v1.PriorityClass(
            f"{name}-warm-spare-priority",
            metadata=klass["metadata"],
            value=klass["value"],
            global_default=klass["globalDefault"],
            preemption_policy=klass["preemptionPolicy"],
            description=klass["description"],
            opts=child,
        )
        spares = workload.apply(
            lambda w: placeholder_deployment(args.plan, w, args.warm_spare_nodes, klass["metadata"]["name"])
        )
        k8s.apps.v1.Deployment(
            f"{name}-warm-spare",
            metadata=spares["metadata"],
            spec=spares["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, *args.placement.depends_on, priority]
            ),
        )
        self._closed_network_policy(workload, "warm-spare", WARM_SPARE)

    def _image_prepull(self, workload: pulumi.Output[Workload]) -> None:
        """The DaemonSet that pulls the vLLM image onto each GPU node while its GPUs register, and
        its (closed) NetworkPolicy."""
        name, args = self._name, self._args
        daemonset = workload.apply(prepull_daemonset)
        k8s.apps.v1.DaemonSet(
            f"{name}-image-prepull",
            metadata=daemonset["metadata"],
            spec=daemonset["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, *args.placement.depends_on]
            ),
        )
        self._closed_network_policy(workload, "image-prepull", IMAGE_PREPULL)

    def _closed_network_policy(self, workload: pulumi.Output[Workload], suffix: str, app_name: str) -> None:
        """``{name}-{suffix}-netpol``: the pods labelled ``app_name`` accept nothing and reach nothing."""
        closed = workload.apply(lambda w: closed_network_policy(w, app_name))
        k8s.networking.v1.NetworkPolicy(
            f"{self._name}-{suffix}-netpol",
            metadata=closed["metadata"],
            spec=closed["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self._args.depends_on)),
        )

    def _addon(self, suffix: str) -> list[pulumi.Resource]:
        """The weights source's EKS add-on at its pinned version, once GPU capacity exists. One per
        cluster: a service without the cluster singletons relies on the cluster's (docs/component.md)."""
        args = self._args
        if not args.install_cluster_singletons:
            return []
        ((addon_name, version),) = weights_addons(args.weights_source).items()
        addon = aws.eks.Addon(
            f"{self._name}-{suffix}",
            cluster_name=args.cluster_name,
            addon_name=addon_name,
            addon_version=version,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.placement.depends_on)),
        )
        return [addon]

    def _mountpoint_claim(self, bucket: pulumi.Output[str], prefix: str) -> pulumi.Resource:
        """The Mountpoint CSI driver (EKS add-on) and a static, read-only PersistentVolume of the
        weights prefix of the bucket, bound to the claim vLLM mounts."""
        name, args = self._name, self._args
        addons = self._addon("mountpoint-s3-csi")
        manifests = pulumi.Output.all(bucket, args.namespace).apply(
            lambda v: mountpoint_volume(
                bucket=v[0],
                prefix=prefix,
                region=args.region,
                namespace=v[1],
                capacity_gib=math.ceil(args.plan.checkpoint_gib),
                labels=args.labels,
                holds=self.weights_volume,
            )
        )
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-weights-pv",
            metadata=manifests["volume"]["metadata"],
            spec=manifests["volume"]["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=addons),
        )
        return k8s.core.v1.PersistentVolumeClaim(
            f"{name}-weights-pvc",
            metadata=manifests["claim"]["metadata"],
            spec=manifests["claim"]["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, volume]),
        )

    def _snapshot_volume(self) -> tuple[pulumi.Resource, dict[str, Any]]:
        """The snapshot controller (EKS add-on, with the VolumeSnapshot CRDs), the baked snapshot
        as a pre-provisioned VolumeSnapshot, and the pod volume restored from it."""
        name, args = self._name, self._args
        if not args.snapshot_id:
            raise ValueError("weights.source ebs-snapshot needs weights.snapshotId (automation bake-weights)")
        addons = self._addon("snapshot-controller")
        snapshot_id, plan = args.snapshot_id, args.plan

        def manifests(namespace: str) -> dict[str, dict[str, Any]]:
            return snapshot_weights(
                snapshot_id=snapshot_id,
                driver=args.ebs_driver,
                namespace=namespace,
                volume_gib=plan.weights_volume_gib,
                labels=args.labels,
                fast_snapshot_restore=plan.request.fast_snapshot_restore,
                prefix=args.cluster_object_prefix,
            )

        fixed = manifests("")  # the class, StorageClass and pod volume name no namespace
        placed = pulumi.Output.from_input(args.namespace).apply(manifests)
        snapshot_class = TopLevelCustomResource(
            f"{name}-weights-snapshot-class",
            fixed["class"],
            pulumi.ResourceOptions(parent=self, depends_on=addons),
        )
        content = k8s.apiextensions.CustomResource(
            f"{name}-weights-snapshot-content",
            api_version=f"{SNAPSHOT_API}/v1",
            kind="VolumeSnapshotContent",
            metadata=placed["content"]["metadata"],
            spec=placed["content"]["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*addons, snapshot_class]),
        )
        sc = fixed["storage_class"]
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-weights-storage-class",
            metadata=sc["metadata"],
            provisioner=sc["provisioner"],
            parameters=sc["parameters"],
            volume_binding_mode=sc["volumeBindingMode"],
            reclaim_policy=sc["reclaimPolicy"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        snapshot = k8s.apiextensions.CustomResource(
            f"{name}-weights-snapshot",
            api_version=f"{SNAPSHOT_API}/v1",
            kind="VolumeSnapshot",
            metadata=placed["snapshot"]["metadata"],
            spec=placed["snapshot"]["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, content, storage_class]),
        )
        volume = fixed["volume"]
        return snapshot, volume

    def _stage_job(self, bucket: aws.s3.Bucket, prefix: str) -> pulumi.Resource:
        """A Job (in the vLLM image, which has huggingface_hub and boto3) that copies the model
        from Hugging Face into the bucket once; Pulumi waits for it before starting vLLM."""
        name, args = self._name, self._args
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        k8s.core.v1.ServiceAccount(
            f"{name}-stager-sa",
            metadata={"name": STAGER, "namespace": args.namespace, "labels": args.labels},
            automount_service_account_token=False,
            opts=after,
        )
        script = k8s.core.v1.ConfigMap(
            f"{name}-stager-script",
            metadata={"name": STAGER, "namespace": args.namespace, "labels": args.labels},
            data={"stage_weights.py": STAGE_SCRIPT.read_text()},
            opts=after,
        )
        repo = args.plan.request.repository or args.plan.model.hf_repo
        # Typed Any: the SDK's TypedDict for JobSpec does not accept a plain dict Output.
        spec: pulumi.Output[Any] = bucket.bucket.apply(
            lambda b: stage_job_spec(
                bucket=b,
                prefix=prefix,
                repo=repo,
                region=args.region,
                hf_token=args.hf_token,
                labels=args.labels,
                disk_gib=STAGE_DISK_GIB,
                image=args.image,
                revision=self._revision,
            )
        )
        # Only DNS, HTTPS (Hugging Face, S3) and its Pod Identity credentials out; nothing in.
        stager_policy = stager_network_policy(args.labels)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-stager-netpol",
            metadata={**stager_policy["metadata"], "namespace": args.namespace},
            spec=stager_policy["spec"],
            opts=after,
        )
        # One Job per staged content: a Job's pod template cannot change (the API server refuses
        # it), so a new variant or commit gets a Job of its own, which Pulumi creates before it
        # deletes the old one (the URN stays; weights_object_name, as for the weights volumes).
        job_name = weights_object_name(STAGER, f"{repo}@{self._revision or ''} -> {prefix}")
        return k8s.batch.v1.Job(
            f"{name}-stage-weights",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=job_name,
                namespace=args.namespace,
                labels=args.labels,
                annotations=checkov_annotations(
                    {k: v for k, v in CHECKOV_SKIPS.items() if k != "CKV_K8S_11"}
                    | {"CKV_K8S_11": "a one-off copy job: a CPU limit would only slow the download"}
                ),
            ),
            spec=spec,
            # Pulumi waits for the copy to finish: download and upload at the planned download rate.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*args.depends_on, script],
                custom_timeouts=pulumi.CustomTimeouts(create=f"{stage_seconds(args.plan)}s"),
            ),
        )


def rollout_timeouts(plan: SizingPlan) -> pulumi.CustomTimeouts:
    """Pulumi waits for the first replica to become ready: as long as the plan's cold start for
    its weights source (node, image, weights, engine) with slack, instead of the provider's
    default 10 minutes."""
    rollout = f"{plan.rollout_seconds}s"
    return pulumi.CustomTimeouts(create=rollout, update=rollout)


def _ingress_host(status: Any) -> str:
    """The load balancer's DNS name from an Ingress or Service status ("" until AWS has
    provisioned it)."""
    try:
        return str(status.load_balancer.ingress[0].hostname or "")
    except (AttributeError, IndexError, TypeError):
        return ""
