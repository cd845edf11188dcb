"""The cluster and GPU capacity layer under the mock engine, in both compute modes."""

from __future__ import annotations

import json

import pytest

from deepseek_eks.automation.render import Construction
from deepseek_eks.components.platform.iam_policies import assert_least_privilege
from deepseek_eks.sizing import instance_catalog
from tests.conftest import stack_config
from tests.upstream import cold_start_facts, eks_ami_release_tags
from tests.upstream_platform import al2023_images, platform_facts

KARPENTER_RELEASES = {"karpenter", "nvidia-device-plugin", "aws-load-balancer-controller"}
KARPENTER_ONLY = (
    "aws:sqs/queue:Queue",
    "aws:cloudwatch/eventRule:EventRule",
    "aws:eks/nodeGroup:NodeGroup",
)


def releases(run: Construction) -> dict[str, dict]:
    return {r.inputs["name"]: r.inputs for r in run.mocks.of_type("kubernetes:helm.sh/v3:Release")}


def custom_objects(run: Construction, kind: str) -> dict[str, dict]:
    records = [
        r for r in run.mocks.resources if r.type.startswith("kubernetes:") and r.type.endswith(f":{kind}")
    ]
    return {r.inputs["metadata"]["name"]: r.inputs for r in records}


def requirement(pool: dict, key: str) -> dict:
    matches = [r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    assert len(matches) == 1, key
    return matches[0]


def gpu_pool(run: Construction) -> dict:
    return custom_objects(run, "NodePool")["gpu-inference"]


def rollout_surge(run: Construction) -> int:
    """Replicas the serving workload's rollout adds before it removes one (its own maxSurge)."""
    for token in ("kubernetes:apps/v1:Deployment", "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"):
        for obj in run.mocks.of_type(token):
            spec = obj.inputs["spec"]
            if token.endswith("Deployment") and obj.inputs["metadata"].get("name") == "vllm":
                return int(spec["strategy"]["rollingUpdate"]["maxSurge"])
            if token.endswith("LeaderWorkerSet"):
                return int(spec["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"])
    raise AssertionError("no serving workload")


@pytest.fixture(scope="module")
def dev(construct_module) -> Construction:
    return construct_module(stack_config("dev"))


@pytest.fixture(scope="module")
def prod(construct_module) -> Construction:
    return construct_module(stack_config("prod"))


def test_auto_mode_installs_no_karpenter_queue_or_device_plugin(dev: Construction) -> None:
    for token in KARPENTER_ONLY:
        assert dev.mocks.of_type(token) == [], token
    assert not KARPENTER_RELEASES & set(releases(dev))
    cluster = dev.mocks.of_type("eks:index:Cluster")[0].inputs
    assert cluster["autoMode"]["enabled"] is True
    assert cluster["authenticationMode"] == "API"


def test_karpenter_mode_has_controller_queue_rules_and_device_plugin(prod: Construction) -> None:
    assert set(releases(prod)) >= KARPENTER_RELEASES
    karpenter = releases(prod)["karpenter"]
    queue = prod.mocks.of_type("aws:sqs/queue:Queue")[0]
    assert karpenter["values"]["settings"]["interruptionQueue"] == queue.inputs["name"]
    assert karpenter["version"] == "1.14.1" and karpenter["chart"].startswith("oci://")
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True
    rules = prod.mocks.of_type("aws:cloudwatch/eventRule:EventRule")
    detail_types = {d for r in rules for d in json.loads(r.inputs["eventPattern"])["detail-type"]}
    assert detail_types == {
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "AWS Health Event",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
    assert len(prod.mocks.of_type("aws:cloudwatch/eventTarget:EventTarget")) == len(rules)
    assert "autoMode" not in prod.mocks.of_type("eks:index:Cluster")[0].inputs


def test_queue_policy_is_tls_only(prod: Construction) -> None:
    policy = json.loads(prod.mocks.of_type("aws:sqs/queuePolicy:QueuePolicy")[0].inputs["policy"])
    deny = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert deny and deny[0]["Condition"]["Bool"]["aws:SecureTransport"] == "false"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_gpu_pool_admits_exactly_the_plan_types_with_the_mode_prefix(stack: str, dev, prod) -> None:
    run = {"dev": dev, "prod": prod}[stack]
    plan = run.result.plan
    pool = gpu_pool(run)
    assert requirement(pool, "node.kubernetes.io/instance-type")["values"] == plan.instance_types
    prefix, other = ("eks.amazonaws.com", "karpenter.k8s.aws")
    if stack == "prod":
        prefix, other = other, prefix
    keys = [r["key"] for r in pool["spec"]["template"]["spec"]["requirements"]]
    assert not any(k.startswith(other) for k in keys)
    assert requirement(pool, f"{prefix}/instance-gpu-count")["values"] == [str(plan.tensor_parallel_size)]
    floor = int(requirement(pool, f"{prefix}/instance-gpu-memory")["values"][0])
    assert floor < min(f.instance.gpu_memory_mib for f in plan.fits)
    taints = pool["spec"]["template"]["spec"]["taints"]
    assert taints == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    max_replicas = run.outputs["plan"]["max_replicas"]
    # Room for every replica at the maximum and the one a rollout surges there.
    gpus = (max_replicas + rollout_surge(run)) * plan.gpus_per_replica
    assert rollout_surge(run) >= 1
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == str(gpus)
    assert run.outputs["gpuLimit"] == gpus


def test_karpenter_node_class_is_pinned_imdsv2_and_encrypted(prod: Construction) -> None:
    gpu = custom_objects(prod, "EC2NodeClass")["gpu-inference"]["spec"]
    assert "latest" not in json.dumps(gpu)
    assert gpu["metadataOptions"]["httpTokens"] == "required"
    assert gpu["metadataOptions"]["httpPutResponseHopLimit"] == 1
    ebs = gpu["blockDeviceMappings"][0]["ebs"]
    assert ebs["encrypted"] is True and ebs["volumeType"] == "gp3"


@pytest.mark.parametrize("stack", ["dev", "prod", "r1"])
def test_every_rendered_ami_alias_is_a_real_release_for_the_stacks_kubernetes(
    stack: str, construct_module
) -> None:
    run = construct_module(stack_config(stack, computeMode="karpenter"))
    minor = run.mocks.of_type("eks:index:Cluster")[0].inputs["version"]
    classes = custom_objects(run, "EC2NodeClass")
    assert classes
    for name, node_class in classes.items():
        for term in node_class["spec"]["amiSelectorTerms"]:
            family, _, release = term["alias"].partition("@")
            assert family == "al2023" and release in eks_ami_release_tags(), (name, term)
            # The release notes list the x86_64 images Karpenter resolves for CPU and NVIDIA nodes.
            images = al2023_images()[release]
            assert minor in images["x86_64-standard"] and minor in images["x86_64-nvidia"], (name, release)


def test_karpenter_gpu_nodes_keep_images_and_weights_on_local_nvme(prod: Construction) -> None:
    gpu = custom_objects(prod, "EC2NodeClass")["gpu-inference"]["spec"]
    assert gpu["instanceStorePolicy"] == platform_facts()["karpenter"]["instance_store_policy"]["value"]
    plan = prod.result.plan
    catalog = instance_catalog().instances
    store = platform_facts()["karpenter"]["instance_store_ephemeral_storage"]
    for name in plan.instance_types:  # Karpenter's own accounting of the RAID0, from the snapshot
        gib = catalog[name].instance_storage_gb * 1000**3 / 1024**3
        assert (
            gib * (1 - store["eviction_fraction"]) - store["kube_reserved_gib"] >= plan.ephemeral_storage_gib
        )
    root = int(gpu["blockDeviceMappings"][0]["ebs"]["volumeSize"].removesuffix("Gi"))
    assert root < plan.ephemeral_storage_gib  # the root volume no longer holds image and weights
    general = custom_objects(prod, "EC2NodeClass")["general"]["spec"]
    assert "instanceStorePolicy" not in general


def test_karpenter_gpu_nodes_pull_with_soci_parallel_mode(prod: Construction) -> None:
    """The GPU node class turns on nodeadm's FastImagePull gate in a NodeConfig part of its user
    data (the blueprint's AL2023 form), on an AL2023 release that ships SOCI parallel mode; the
    image stage's rate was measured with it (sizing/startup.py IMAGE_PULL_S)."""
    import email

    import yaml

    from deepseek_eks.components.versions import AL2023_AMI_RELEASE

    soci = cold_start_facts()["karpenter_soci"]
    gpu = custom_objects(prod, "EC2NodeClass")["gpu-inference"]["spec"]
    message = email.message_from_string(gpu["userData"])
    assert message.is_multipart()
    parts = [
        yaml.safe_load(part.get_payload())
        for part in message.walk()
        if part.get_content_type() == soci["blueprint"]["user_data_part_content_type"]
    ]
    assert len(parts) == 1 and parts[0]["kind"] == "NodeConfig"
    assert parts[0]["apiVersion"] == "node.eks.aws/v1alpha1"
    assert parts[0]["spec"]["featureGates"] == {soci["nodeadm"]["feature_gate"]: True}
    assert soci["nodeadm"]["min_ami_release"] < AL2023_AMI_RELEASE  # vYYYYMMDD sorts by date
    # The kubelet keeps nodeadm's parallel image pulls (no kubelet config of ours overrides them),
    # so the replica's pull joins the pre-pull DaemonSet's rather than queueing behind it.
    assert cold_start_facts()["image_prepull"]["al2023_parallel_pulls"]["serialize_image_pulls"] is False
    assert "serializeImagePulls" not in parts[0]["spec"].get("kubelet", {}).get("config", {})
    # Every GPU type of the plan is above nodeadm's threshold, or the gate would be ignored.
    catalog = instance_catalog().instances
    for name in prod.result.plan.instance_types:
        assert catalog[name].vcpu >= soci["nodeadm"]["min_vcpus"], name
        assert catalog[name].memory_mib / 1024 >= soci["nodeadm"]["min_memory_gib"], name
    general = custom_objects(prod, "EC2NodeClass")["general"]["spec"]
    assert "userData" not in general


def test_node_role_has_no_second_access_entry(prod: Construction) -> None:
    fact = platform_facts()["eks"]["managed_node_group_access_entry_created_by_eks"]
    assert fact["value"] is True  # EKS makes the node group role's entry; one entry per principal
    group = prod.mocks.of_type("aws:eks/nodeGroup:NodeGroup")[0].inputs
    entries = prod.mocks.of_type("aws:eks/accessEntry:AccessEntry")
    assert [e for e in entries if e.inputs.get("principalArn") == group["nodeRoleArn"]] == []
    assert [e for e in entries if e.inputs.get("type") == "EC2_LINUX"] == []


def test_floor_replicas_land_on_an_on_demand_pool_when_spot_is_allowed(prod: Construction) -> None:
    plan = prod.outputs["plan"]
    assert set(plan["capacity_types"]) == {"spot", "on-demand"} and plan["min_replicas"] >= 1
    pools = custom_objects(prod, "NodePool")
    floor, main = pools["gpu-inference-floor"], pools["gpu-inference"]
    assert requirement(floor, "karpenter.sh/capacity-type")["values"] == ["on-demand"]
    floor_gpus = (plan["min_replicas"] + rollout_surge(prod)) * plan["gpus_per_replica"]
    assert floor["spec"]["limits"]["nvidia.com/gpu"] == str(floor_gpus)
    assert floor["spec"]["weight"] > main["spec"].get("weight", 0)  # Karpenter: no weight is 0
    # The vLLM pods select a label both GPU pools put on their nodes.
    deployments = prod.mocks.of_type("kubernetes:apps/v1:Deployment")
    [deployment] = [d.inputs for d in deployments if d.inputs["metadata"].get("name") == "vllm"]
    selector = deployment["spec"]["template"]["spec"]["nodeSelector"]
    for pool in (floor, main):
        assert selector.items() <= pool["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("stack", ["dev", "prod", "r1"])
def test_no_gpu_node_expires_or_is_consolidated_under_a_replica(stack: str, construct_module) -> None:
    run = construct_module(stack_config(stack))
    auto_mode = "autoMode" in run.mocks.of_type("eks:index:Cluster")[0].inputs
    # Karpenter: never (expiry is forceful). Auto Mode: no sooner than its own 21-day maximum.
    expected = (
        platform_facts()["eks"]["auto_mode_max_node_lifetime"]["value"]
        if auto_mode
        else platform_facts()["karpenter"]["expiration"]["never"]
    )
    gpu_pools = [p for n, p in custom_objects(run, "NodePool").items() if n.startswith("gpu-inference")]
    assert gpu_pools
    for pool in gpu_pools:
        assert pool["spec"]["template"]["spec"]["expireAfter"] == expected
        assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"


@pytest.mark.parametrize("stack", ["prod", "r1"])
def test_drift_never_deletes_a_serving_pod_in_karpenter_mode(stack: str, construct_module) -> None:
    """Karpenter 1.14: with terminationGracePeriod set, drift may take a node despite PDBs and
    do-not-disrupt and deletes its pods before the period ends. Karpenter-mode GPU pools (expiry
    Never, so no forced drain to bound) set none; Auto Mode, whose nodes expire within 21 days
    whatever the pool says, keeps a bounded period (its README section says what that costs)."""
    tgp = platform_facts()["karpenter"]["termination_grace_period"]
    assert tgp["drift_ignores_pdb_and_do_not_disrupt"] is True
    run = construct_module(stack_config(stack))
    assert "autoMode" not in run.mocks.of_type("eks:index:Cluster")[0].inputs
    gpu_pools = [p for n, p in custom_objects(run, "NodePool").items() if n.startswith("gpu-inference")]
    assert gpu_pools
    for pool in gpu_pools:
        assert tgp["field"] not in pool["spec"]["template"]["spec"]


def test_auto_mode_custom_node_class_has_no_tags(construct_module) -> None:
    assert platform_facts()["eks"]["auto_mode_managed_policies_allow_user_defined_tags"]["value"] is False
    big = construct_module(
        stack_config(
            "dev",
            model__variant="r1-distill-qwen-32b",
            gpu__instanceFamilies="g6e",
            weights__source="huggingface",  # downloaded to the node disk: past the default class
        )
    )
    node_class = custom_objects(big, "NodeClass")["gpu-inference"]["spec"]
    assert "tags" not in node_class


def test_capacity_reservations_are_selected_and_used_as_reserved_capacity(construct_module) -> None:
    run = construct_module(
        stack_config("r1", gpu__capacityReservationIds="cr-0123456789abcdef0,cr-0123456789abcdef1")
    )
    gpu = custom_objects(run, "EC2NodeClass")["gpu-inference"]["spec"]
    assert gpu["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"},
        {"id": "cr-0123456789abcdef1"},
    ]
    reserved = platform_facts()["karpenter"]["reserved_capacity"]["capacity_type"]
    assert reserved in requirement(gpu_pool(run), "karpenter.sh/capacity-type")["values"]


def test_auto_mode_uses_default_node_class_when_its_disk_suffices(
    dev: Construction, construct_module
) -> None:
    assert dev.result.plan.ephemeral_storage_gib <= 80
    assert custom_objects(dev, "NodeClass") == {}
    assert gpu_pool(dev)["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    big = construct_module(
        stack_config(
            "dev",
            model__variant="r1-distill-qwen-32b",
            gpu__instanceFamilies="g6e",
            weights__source="huggingface",  # downloaded to the node disk: past the default class
        )
    )
    node_class = custom_objects(big, "NodeClass")["gpu-inference"]["spec"]
    assert node_class["ephemeralStorage"]["size"] == f"{big.result.plan.ephemeral_storage_gib}Gi"
    assert gpu_pool(big)["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu-inference"


@pytest.mark.parametrize(
    ("variant", "family", "cheapest", "gpus_per_node", "nodes", "per_node"),
    [
        ("r1-distill-qwen-1.5b", "g6", "g6.xlarge", 1, 1, 1),
        # 61 GiB of bf16 weights exceed one L40S; g6e has no 2-GPU size, so two TP-2 replicas
        # share the 4-GPU one (packing, issue 22).
        ("r1-distill-qwen-32b", "g6e", "g6e.12xlarge", 4, 1, 2),
        ("r1-distill-llama-70b", "g6e", "g6e.12xlarge", 4, 1, 1),
        ("r1-671b", "p5", "p5.48xlarge", 8, 2, 1),
    ],
)
def test_variant_and_families_drive_requirements_and_gpu_limit(
    construct_module, variant, family, cheapest, gpus_per_node, nodes, per_node
) -> None:
    # At most 2 replicas: a two-node r1-671b replica takes a whole zone of the 3-zone VPC, and a
    # rollout at the maximum needs a third.
    run = construct_module(
        stack_config("prod", model__variant=variant, gpu__instanceFamilies=family, autoscaling__maxReplicas=2)
    )
    pool = gpu_pool(run)
    admitted = requirement(pool, "node.kubernetes.io/instance-type")["values"]
    assert admitted[0] == cheapest
    assert requirement(pool, "karpenter.k8s.aws/instance-family")["values"] == [family]
    assert requirement(pool, "karpenter.k8s.aws/instance-gpu-count")["values"] == [str(gpus_per_node)]
    # Karpenter's limit counts whole nodes: replicas packed per_node to a node share one.
    node_count = -(-(2 + rollout_surge(run)) // per_node) * nodes
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == str(node_count * gpus_per_node)
    assert run.result.plan.chosen.replicas_per_node == per_node


def test_every_iam_policy_is_least_privilege(prod: Construction) -> None:
    documents = [json.loads(r.inputs["policy"]) for r in prod.mocks.of_type("aws:iam/rolePolicy:RolePolicy")]
    documents += [json.loads(r.inputs["assumeRolePolicy"]) for r in prod.mocks.of_type("aws:iam/role:Role")]
    documents += [
        json.loads(r.inputs["policy"]) for r in prod.mocks.of_type("aws:sqs/queuePolicy:QueuePolicy")
    ]
    # 4 roles (node, karpenter, load balancer controller, EBS CSI), 2 inline policies, 1 queue
    # policy; Pulumi.prod.yaml's weights.source s3 adds vLLM's read-only role and the stager's
    # role on the weights bucket, each with its inline policy (docs/weights.md).
    assert len(documents) == 11
    for doc in documents:
        assert assert_least_privilege(doc) == []


def test_pod_identity_roles_are_scoped_to_their_service_accounts(prod: Construction) -> None:
    token = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    associations = {r.inputs["serviceAccount"]: r.inputs for r in prod.mocks.of_type(token)}
    controllers = {"karpenter", "aws-load-balancer-controller"}
    # weights.source s3 (Pulumi.prod.yaml): vLLM reads and the stager Job writes the weights bucket.
    weights = {"vllm", "weights-stager"}
    assert set(associations) == controllers | weights
    assert all(associations[sa]["namespace"] == "kube-system" for sa in controllers)
    assert all(associations[sa]["namespace"] == "deepseek" for sa in weights)
    ebs = [
        a for a in prod.mocks.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver"
    ]
    assert ebs[0].inputs["podIdentityAssociations"][0]["serviceAccount"] == "ebs-csi-controller-sa"


def test_cluster_endpoint_is_private_unless_cidrs_are_given(dev: Construction, construct_module) -> None:
    cluster = dev.mocks.of_type("eks:index:Cluster")[0].inputs
    assert cluster["endpointPrivateAccess"] is True and cluster["endpointPublicAccess"] is False
    assert cluster["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]
    run = construct_module(stack_config("dev", cluster__publicAccessCidrs="203.0.113.7/32"))
    cluster = run.mocks.of_type("eks:index:Cluster")[0].inputs
    assert cluster["endpointPublicAccess"] is True and cluster["publicAccessCidrs"] == ["203.0.113.7/32"]


def test_bring_your_own_vpc_creates_no_network(construct_module) -> None:
    run = construct_module(
        stack_config(
            "dev",
            network__vpcId="vpc-0123456789abcdef0",
            network__privateSubnetIds="subnet-0123456789abcdef0,subnet-0123456789abcdef1",
        )
    )
    assert run.mocks.of_type("aws:ec2/vpc:Vpc") == [] and run.mocks.of_type("aws:ec2/subnet:Subnet") == []
    cluster = run.mocks.of_type("eks:index:Cluster")[0].inputs
    assert cluster["vpcId"] == "vpc-0123456789abcdef0"
    assert cluster["privateSubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]


def test_new_vpc_spans_three_zones_with_tagged_subnets(dev: Construction) -> None:
    subnets = [r.inputs for r in dev.mocks.of_type("aws:ec2/subnet:Subnet")]
    private = [s for s in subnets if s["tags"].get("karpenter.sh/discovery") == "deepseek-dev"]
    internal_lb = [s for s in subnets if s["tags"].get("kubernetes.io/role/internal-elb") == "1"]
    public = [s for s in subnets if s["tags"].get("kubernetes.io/role/elb") == "1"]
    assert len(private) == len(internal_lb) == len(public) == 3
    for tier in (private, internal_lb, public):
        assert {s["availabilityZone"] for s in tier} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    # Internal load balancers keep out of the node (and pod) subnets: test_load_balancer_subnets.
    assert not any("kubernetes.io/role/internal-elb" in s["tags"] for s in private)
    assert len(dev.mocks.of_type("aws:ec2/natGateway:NatGateway")) == 1


def test_everything_aws_is_tagged_through_the_provider(dev: Construction) -> None:
    provider = dev.mocks.of_type("pulumi:providers:aws")[0].inputs
    default_tags = provider["defaultTags"]
    if isinstance(default_tags, str):
        default_tags = json.loads(default_tags)
    assert default_tags["tags"] == {
        "project": "deepseek-eks",
        "stack": "dev",
        "variant": "r1-distill-qwen-7b",
    }


def test_children_are_named_from_their_components(prod: Construction) -> None:
    names = {r.name for r in prod.mocks.resources}
    expected = {
        "capacity-karpenter",
        "capacity-interruptions",
        "capacity-gpu-nodepool",
        "network-vpc",
        "cluster-eks",
    }
    assert expected <= names


def test_system_node_group_is_tainted_on_demand_with_imdsv2(prod: Construction) -> None:
    group = prod.mocks.of_type("aws:eks/nodeGroup:NodeGroup")[0].inputs
    assert group["taints"] == [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]
    assert group["capacityType"] == "ON_DEMAND"
    assert group["launchTemplate"]["version"] == "1"  # a number, not "$Latest" (which drifts)
    template = prod.mocks.of_type("aws:ec2/launchTemplate:LaunchTemplate")[0].inputs
    assert template["metadataOptions"]["httpTokens"] == "required"
    assert template["metadataOptions"]["httpPutResponseHopLimit"] == 1
