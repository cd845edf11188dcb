"""Two DeepSeek-R1 services on an EKS cluster you already run, EKS Auto Mode or self-managed
Karpenter (config ``computeMode``): team A serves the 7B distill on L4s and installs the
cluster-wide add-ons (monitoring, KEDA, ...); team B serves the 70B distill on L40S from its own S3
weights bucket and scales on queue depth. No VPC and no cluster are created; each service's
objects take its name (namespace, GPU node pools, AWS resources): no collisions."""

import pulumi
import pulumi_kubernetes as k8s

from deepseek_eks import DeepSeekService, DeepSeekServiceArgs

config = pulumi.Config()
cluster = k8s.Provider("existing-cluster", kubeconfig=config.require_secret("kubeconfig"))
# nodeRoleName: Auto Mode's node role, or (required with karpenter) the role of Karpenter's nodes.
joined = {"cluster_name": config.require("clusterName"), "node_role_name": config.get("nodeRoleName") or ""}
compute_mode = config.get("computeMode") or "auto-mode"
network = {"vpc_id": config.require("vpcId"), "private_subnet_ids": config.require_object("privateSubnetIds")}
on_this_cluster = pulumi.ResourceOptions(providers={"kubernetes": cluster})
# One replica each at the floor, the cheapest services that work: each warns at preview what
# losing its node costs (a cold start without service); min_replicas 2 keeps one serving.

team_a = DeepSeekService(
    "team-a",
    DeepSeekServiceArgs(
        existing_cluster=joined,
        compute_mode=compute_mode,
        network=network,
        install_shared_addons=True,
        model={"variant": "r1-distill-qwen-7b", "max_model_len": 16384},
        gpu={"instance_families": ["g6"]},
        autoscaling={"min_replicas": 1, "max_replicas": 2},
    ),
    on_this_cluster,
)
team_b = DeepSeekService(
    "team-b",
    DeepSeekServiceArgs(
        existing_cluster=joined,
        compute_mode=compute_mode,
        network=network,
        model={"variant": "r1-distill-llama-70b"},
        weights={"source": "s3"},
        gpu={"instance_families": ["g6e"], "capacity_types": ["on-demand"]},
        autoscaling={"signal": "queue-depth", "min_replicas": 1, "max_replicas": 2},
    ),
    on_this_cluster,
)

for team, service in (("teamA", team_a), ("teamB", team_b)):
    pulumi.export(f"{team}InClusterUrl", service.in_cluster_url)
    pulumi.export(f"{team}Variant", service.variant)
    pulumi.export(f"{team}HourlyUsdAtMax", service.hourly_usd_at_max)
