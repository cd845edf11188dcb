"""GPU capacity with self-managed Karpenter: the AWS side (IAM, interruption queue and its
EventBridge rules, access entry) and the in-cluster side (system node group, CoreDNS, Karpenter,
node classes and pools, NVIDIA device plugin, AWS Load Balancer Controller, EBS CSI driver)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from deepseek_eks.settings import ComputeMode
from deepseek_eks.settings.model import DEFAULT_KUBERNETES_VERSION

from ..helm import helm_release
from ..manifests import custom_resource
from ..versions import (
    AWS_LOAD_BALANCER_CONTROLLER,
    COREDNS_ADDON,
    COREDNS_ADDON_VERSIONS,
    EBS_CSI_ADDON,
    EBS_CSI_ADDON_VERSION,
    KARPENTER,
    NVIDIA_DEVICE_PLUGIN,
    POD_IDENTITY_AGENT_ADDON,
    POD_IDENTITY_AGENT_ADDON_VERSION,
    SYSTEM_NODE_INSTANCE_TYPES,
)
from .capacity import (
    EBS_CSI_DRIVERS,
    INGRESS_CLASS,
    CapacityArgs,
    GpuPlacement,
    gp3_storage_class,
    gpu_placement,
)
from .iam_policies import (
    interruption_queue_policy,
    karpenter_controller_policy,
    load_balancer_controller_policy,
    service_trust_policy,
)
from .nodepools import (
    GPU_TOLERATION,
    NodeClassRef,
    any_gpu_node_selector,
    ec2_node_class,
    general_node_pool,
    gpu_limit,
    instance_store_holds,
    node_disk_gib,
)
from .pod_identity import ServiceAccountRef, pod_identity_role

SYSTEM_NAMESPACE = "kube-system"
GENERAL_NODE_DISK_GIB = 50  # CPU nodes hold only small images
CRITICAL_ADDONS_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}
MANAGED_POLICY = "arn:{partition}:iam::aws:policy/{name}"
# The node role's managed policies: Karpenter 1.14's getting-started CloudFormation
# (reference/upstream/karpenter-1.14-cloudformation.yaml, KarpenterNodeRole) gives ECR pull-only
# access, not ReadOnly's Describe/List; AmazonSSMManagedInstanceCore is left out (no SSM sessions).
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly")
# Policies attached before under another resource name: (old name, the policy that replaced it).
NODE_POLICY_RENAMES = {"AmazonEC2ContainerRegistryPullOnly": "AmazonEC2ContainerRegistryReadOnly"}
# The aws-ebs-csi-driver add-on's controller service account, in kube-system (EKS User Guide, ebs-csi).
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"

# EventBridge events Karpenter acts on before AWS takes a node away (Karpenter interruption docs).
INTERRUPTION_EVENTS: dict[str, dict[str, list[str]]] = {
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "capacity-reservation": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}


def managed_policy_arn(partition: pulumi.Output[str], policy: str) -> pulumi.Output[str]:
    """ARN of an AWS-managed IAM policy in the account's partition."""
    return partition.apply(lambda p: MANAGED_POLICY.format(partition=p, name=policy))


@dataclass
class KarpenterCapacityArgs(CapacityArgs):
    """Inputs of ``KarpenterCapacity``: the common capacity inputs and what Karpenter needs."""

    region: str
    """AWS region."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster (for the load balancer controller)."""
    k8s_provider: pulumi.ProviderResource
    """Provider of the cluster."""
    cluster: pulumi.Resource | None = None
    """The cluster component this stack creates (everything here waits for it); ``None`` joins an
    existing cluster that runs Karpenter already (see ``existing_node_role_name``)."""
    existing_node_role_name: pulumi.Input[str] = ""
    """Joining: the IAM role of the cluster's Karpenter nodes, which its controller may pass and
    which has an EC2_LINUX access entry. Karpenter, its IAM and interruption queue, the system
    nodes, the EKS add-ons and the load balancer controller are the cluster's own then."""
    node_security_group_ids: list[pulumi.Input[str]] = field(default_factory=list)
    """Security groups of the GPU nodes (default: the EKS-managed cluster security group)."""
    cluster_singletons: bool = True
    """Joining: install the NVIDIA device plugin and the gp3 StorageClass too (one service per
    cluster does). A cluster of our own always gets them."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """The cluster's Kubernetes minor (setting kubernetesVersion): picks the CoreDNS
    add-on build (versions.COREDNS_ADDON_VERSIONS)."""


@dataclass(frozen=True)
class InstalledController:
    """What installing Karpenter on a cluster of our own gives the GPU pools."""

    node_role: aws.iam.Role
    """The nodes' IAM role (the system node group's and every Karpenter node's)."""
    controllers: pulumi.ResourceOptions
    """Options of in-cluster controllers (after the system nodes and add-ons)."""
    custom_resources: pulumi.ResourceOptions
    """Options of Karpenter's custom resources (after Karpenter's chart)."""
    gpu_waits_for: list[pulumi.Resource]
    """What GPU pods wait for (the load balancer controller)."""


class KarpenterCapacity(pulumi.ComponentResource):
    """Self-managed Karpenter with spot interruption handling and a GPU NodePool from the plan; or,
    in a cluster whose Karpenter is already running, only this service's GPU NodeClass and pools."""

    placement: GpuPlacement
    """Where GPU pods go and which IngressClass serves them."""
    gpu_limit: int
    """The GPU pool's nvidia.com/gpu limit."""
    interruption_queue_name: pulumi.Output[str] | None
    """SQS queue Karpenter reads interruption events from (None when joining)."""
    node_role_arn: pulumi.Output[str] | None
    """IAM role of every node, system and Karpenter-launched (None when joining)."""
    node_role_name: pulumi.Input[str]
    """The name of that role (the existing cluster's when joining)."""

    def __init__(self, name: str, args: KarpenterCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:KarpenterCapacity", name, None, opts)
        installed: list[pulumi.Resource] = []
        node_role: pulumi.Input[str]
        if args.cluster is None:
            if not args.existing_node_role_name:
                raise ValueError(
                    "existing_cluster.node_role_name: required with computeMode karpenter (the IAM role "
                    "name of the cluster's Karpenter nodes, which its controller may pass)"
                )
            node_role = self.node_role_name = args.existing_node_role_name
            self.interruption_queue_name = self.node_role_arn = None
            after_controller = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
            k8s_child = after_controller
            singletons = args.cluster_singletons
        else:
            controller = self._install_controller(name, args, args.cluster)
            node_role, k8s_child = controller.node_role.name, controller.controllers
            after_controller, installed = controller.custom_resources, controller.gpu_waits_for
            singletons = True

        # Local NVMe carries images and weights when it holds the pod's ephemeral storage on
        # every instance type of the plan (every GPU type in the catalog has instance store).
        raid0 = instance_store_holds(args.plan)
        gpu_class = f"{args.pool_prefix}gpu-inference"
        gpu_node_class = custom_resource(
            f"{name}-gpu-inference-nodeclass",
            ec2_node_class(
                name=gpu_class,
                role=node_role,
                cluster_name=args.cluster_name,
                subnet_ids=args.private_subnet_ids,
                disk_gib=node_disk_gib(args.plan, instance_store_raid0=raid0),
                tags=args.tags,
                instance_store_raid0=raid0,
                capacity_reservation_ids=args.capacity_reservation_ids,
                security_group_ids=args.node_security_group_ids,
                # The multi-GB vLLM image: SOCI parallel pull (sizing/startup.py IMAGE_PULL_S).
                fast_image_pull=True,
            ),
            after_controller,
        )
        gpu_pools = args.gpu_node_pools(
            name,
            ComputeMode.KARPENTER,
            NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", gpu_class),
            pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[gpu_node_class]),
        )
        gpu_ready: list[pulumi.Resource] = [*gpu_pools, *installed]
        if singletons:
            gpu_ready.append(self._device_plugin(name, k8s_child))
        if args.cluster is None and singletons:
            # A cluster of our own gets it with its EBS add-on (_install_controller); a joined
            # cluster's own EBS CSI driver provisions it (a prerequisite of joining, see README).
            gp3_storage_class(f"{name}-gp3", EBS_CSI_DRIVERS["karpenter"], args.labels, k8s_child)
        # No EFA device plugin: the pinned vLLM image has no libfabric/aws-ofi-nccl, so no pod requests
        # vpc.amazonaws.com/efa (the plan warns that multi-node NCCL runs over TCP).
        self.gpu_limit = gpu_limit(args.plan, args.max_replicas)
        self.placement = gpu_placement(gpu_ready, ComputeMode.KARPENTER, args.pool_prefix)
        outputs: dict[str, Any] = {"nodePool": self.placement.node_pool, "gpuLimit": self.gpu_limit}
        if args.cluster is not None:
            outputs["interruptionQueueName"] = self.interruption_queue_name
            outputs["nodeRoleArn"] = self.node_role_arn
        self.register_outputs(outputs)

    def _device_plugin(self, name: str, opts: pulumi.ResourceOptions) -> pulumi.Resource:
        """The NVIDIA device plugin on every NVIDIA node Karpenter launches (a cluster-wide DaemonSet)."""
        gpu_nodes = any_gpu_node_selector(ComputeMode.KARPENTER)
        return helm_release(
            f"{name}-nvidia-device-plugin",
            "nvidia-device-plugin",
            NVIDIA_DEVICE_PLUGIN,
            SYSTEM_NAMESPACE,
            {
                # The chart's default node affinity (deployments/helm/nvidia-device-plugin/values.yaml,
                # v0.18.0) requires Node Feature Discovery's labels, which our nodes lack. Helm merges
                # maps key by key, so `affinity: {}` would keep it; a list replaces the chart's, so
                # these terms replace NFD's: GPU nodes by the label Karpenter sets.
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": key, "operator": "In", "values": [value]}
                                        for key, value in gpu_nodes.items()
                                    ]
                                }
                            ]
                        }
                    }
                },
                "nodeSelector": gpu_nodes,
                "tolerations": [GPU_TOLERATION, CRITICAL_ADDONS_TOLERATION],
                "priorityClassName": "system-node-critical",
                # RBAC (v0.18.0 templates/role.yml): a ClusterRole reading nodes only with a config
                # ConfigMap (`config.name`/`config.map`) or GPU feature discovery with NFD's API;
                # neither is set, so the plugin gets no role at all.
            },
            opts,
        )

    def _install_controller(
        self, name: str, args: KarpenterCapacityArgs, cluster: pulumi.Resource
    ) -> InstalledController:
        """What a cluster of our own needs before any NodePool: node role, interruption queue,
        controller IAM, system nodes, add-ons, Karpenter, the load balancer controller, the general
        CPU pool and the gp3 StorageClass."""
        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        node_role = self._node_role(name, partition)
        queue = self._interruption_queue(name, args)

        def system_account(service_account: str) -> ServiceAccountRef:
            return ServiceAccountRef(args.cluster_name, SYSTEM_NAMESPACE, service_account, args.region)

        controller_role = pod_identity_role(
            f"{name}-karpenter",
            parent=self,
            policy=pulumi.Output.all(partition, identity.account_id, node_role.arn, queue.arn).apply(
                lambda v: json.dumps(
                    karpenter_controller_policy(
                        partition=v[0],
                        region=args.region,
                        account_id=v[1],
                        cluster_name=args.cluster_name,
                        node_role_arn=v[2],
                        queue_arn=v[3],
                    )
                )
            ),
            service_account=system_account("karpenter"),
            depends_on=[cluster],
        )
        lbc_role = pod_identity_role(
            f"{name}-aws-load-balancer-controller",
            parent=self,
            policy=partition.apply(
                lambda p: json.dumps(
                    load_balancer_controller_policy(partition=p, cluster_name=args.cluster_name)
                )
            ),
            service_account=system_account("aws-load-balancer-controller"),
            depends_on=[cluster],
        )

        system_nodes, coredns, pod_identity_agent, ebs_addon = self._system_nodes(
            name, args, cluster, node_role, partition, system_account
        )
        k8s_child = pulumi.ResourceOptions(
            parent=self,
            provider=args.k8s_provider,
            depends_on=[system_nodes, coredns, pod_identity_agent, controller_role, lbc_role],
        )
        karpenter, lbc = self._controllers(name, args, queue, k8s_child)
        crd_opts = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[karpenter])
        general_class = custom_resource(
            f"{name}-general-nodeclass",
            ec2_node_class(
                name="general",
                role=node_role.name,
                cluster_name=args.cluster_name,
                subnet_ids=args.private_subnet_ids,
                disk_gib=GENERAL_NODE_DISK_GIB,
                tags=args.tags,
            ),
            crd_opts,
        )
        custom_resource(
            f"{name}-general-nodepool",
            general_node_pool(
                name="general",
                node_class=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "general"),
                labels=args.labels,
            ),
            pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[general_class]),
        )
        gp3_storage_class(
            f"{name}-gp3",
            EBS_CSI_DRIVERS["karpenter"],
            args.labels,
            pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[ebs_addon]),
        )
        return InstalledController(node_role, k8s_child, crd_opts, [lbc])

    def _controllers(
        self, name: str, args: KarpenterCapacityArgs, queue: aws.sqs.Queue, opts: pulumi.ResourceOptions
    ) -> tuple[pulumi.Resource, pulumi.Resource]:
        """Karpenter and the AWS Load Balancer Controller, on the system nodes."""
        karpenter = helm_release(
            f"{name}-karpenter",
            "karpenter",
            KARPENTER,
            SYSTEM_NAMESPACE,
            {
                "settings": {"clusterName": args.cluster_name, "interruptionQueue": queue.name},
                "serviceAccount": {"name": "karpenter"},
                "replicas": 2,
                "controller": {
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    }
                },
                # RBAC (chart 1.14.1 templates/clusterrole-core.yaml, clusterrole.yaml, role.yaml):
                # reads pods, nodes, volumes and workloads cluster-wide, writes NodeClaims and
                # nodes, deletes and evicts pods (disruption), no Secrets. No value narrows it:
                # the templates have no condition, and a provisioner must see every pending pod
                # and drain any node. `additionalClusterRoleRules` (which would add) is not set.
            },
            opts,
        )
        lbc = helm_release(
            f"{name}-aws-load-balancer-controller",
            "aws-load-balancer-controller",
            AWS_LOAD_BALANCER_CONTROLLER,
            SYSTEM_NAMESPACE,
            {
                "clusterName": args.cluster_name,
                "region": args.region,
                "vpcId": args.vpc_id,
                "serviceAccount": {"name": "aws-load-balancer-controller"},
                "replicaCount": 2,
                "ingressClass": INGRESS_CLASS,
                "createIngressClassResource": True,
                # WAF and Shield are not used; disabling them keeps their IAM actions out of the role.
                "enableWaf": False,
                "enableWafv2": False,
                "enableShield": False,
                "tolerations": [CRITICAL_ADDONS_TOLERATION],
                # RBAC (chart 3.5.0 templates/rbac.yaml): its ClusterRole reads pods, nodes,
                # services, endpoints and ingresses and writes their status, TargetGroupBindings
                # and Ingresses; Secrets in every namespace only with this flag, which ALB OIDC
                # authentication needs and this project does not use (false is the chart's
                # default, stated so a chart bump cannot turn it on unseen).
                "clusterSecretsPermissions": {"allowAllSecrets": False},
            },
            opts,
        )

        return karpenter, lbc

    def _node_role(self, name: str, partition: pulumi.Output[str]) -> aws.iam.Role:
        """The one IAM role of the system node group and every Karpenter node."""
        node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=json.dumps(service_trust_policy("ec2.amazonaws.com")),
            opts=pulumi.ResourceOptions(parent=self),
        )
        for policy in NODE_POLICIES:
            was = NODE_POLICY_RENAMES.get(policy)
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}",
                role=node_role.name,
                policy_arn=managed_policy_arn(partition, policy),
                # The same attachment under its old name: the engine replaces it (the new policy
                # attached before the old one is detached) instead of orphaning the old URN.
                opts=pulumi.ResourceOptions(
                    parent=self, aliases=[pulumi.Alias(name=f"{name}-node-{was}")] if was else None
                ),
            )
        # No AccessEntry for this role: the system managed node group uses it, and EKS creates the
        # EC2_LINUX access entry of a managed node group's role itself; a principal can be in one
        # access entry only (EKS User Guide, "Create access entries"). Karpenter's nodes share
        # the role, so that entry admits them too.
        self.node_role_arn = node_role.arn
        self.node_role_name = node_role.name

        return node_role

    def _interruption_queue(self, name: str, args: KarpenterCapacityArgs) -> aws.sqs.Queue:
        """EventBridge -> SQS -> Karpenter drains a node before AWS reclaims it."""
        queue = aws.sqs.Queue(
            f"{name}-interruptions",
            name=f"{args.cluster_name}-karpenter",
            message_retention_seconds=300,
            sqs_managed_sse_enabled=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruptions",
            queue_url=queue.url,
            policy=queue.arn.apply(lambda arn: json.dumps(interruption_queue_policy(queue_arn=arn))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        for event, pattern in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{event}",
                description=f"Karpenter interruption handling for {args.cluster_name}: {event}",
                event_pattern=json.dumps(pattern),
                opts=pulumi.ResourceOptions(parent=self),
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{event}",
                rule=rule.name,
                arn=queue.arn,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.interruption_queue_name = queue.name

        return queue

    def _system_nodes(
        self,
        name: str,
        args: KarpenterCapacityArgs,
        cluster: pulumi.Resource,
        node_role: aws.iam.Role,
        partition: pulumi.Output[str],
        system_account: Callable[[str], ServiceAccountRef],
    ) -> tuple[aws.eks.NodeGroup, aws.eks.Addon, aws.eks.Addon, aws.eks.Addon]:
        """The tainted system node group for the controllers, and the CoreDNS, Pod Identity agent
        and EBS CSI add-ons on it."""
        # System nodes for controllers, tainted so only critical add-ons run there.
        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-system",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=40, volume_type="gp3", encrypted="true", delete_on_termination="true"
                    ),
                )
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        system_nodes = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=args.cluster_name,
            node_role_arn=node_role.arn,
            subnet_ids=args.private_subnet_ids,
            instance_types=list(SYSTEM_NODE_INSTANCE_TYPES),
            ami_type="AL2023_x86_64_STANDARD",
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(min_size=2, max_size=3, desired_size=2),
            # A concrete version: EKS stores "$Latest" as a number, which would show a diff on every run.
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=launch_template.id, version=launch_template.latest_version.apply(str)
            ),
            taints=[aws.eks.NodeGroupTaintArgs(key="CriticalAddonsOnly", value="true", effect="NO_SCHEDULE")],
            labels={"deepseek-eks/node-role": "system"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
        )
        addon_opts = pulumi.ResourceOptions(parent=self, depends_on=[system_nodes])
        # Add-on versions: components/versions.py (CoreDNS pinned per minor; the other two have no
        # offline source and are a manual step of `pins --check`).
        coredns = aws.eks.Addon(
            f"{name}-coredns",
            cluster_name=args.cluster_name,
            addon_name=COREDNS_ADDON,
            addon_version=COREDNS_ADDON_VERSIONS[args.kubernetes_version],
            opts=addon_opts,
        )
        pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=args.cluster_name,
            addon_name=POD_IDENTITY_AGENT_ADDON,
            addon_version=POD_IDENTITY_AGENT_ADDON_VERSION,
            opts=addon_opts,
        )
        # The EBS add-on makes its own Pod Identity association from the role given to it.
        ebs_role = pod_identity_role(
            f"{name}-ebs-csi",
            parent=self,
            managed_policy_arn=managed_policy_arn(partition, "AmazonEBSCSIDriverPolicy"),
            service_account=system_account(EBS_CSI_SERVICE_ACCOUNT),
            associate=False,
        )
        ebs_addon = aws.eks.Addon(
            f"{name}-ebs-csi",
            cluster_name=args.cluster_name,
            addon_name=EBS_CSI_ADDON,
            addon_version=EBS_CSI_ADDON_VERSION,
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=ebs_role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT
                )
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[system_nodes, pod_identity_agent]),
        )

        return system_nodes, coredns, pod_identity_agent, ebs_addon
