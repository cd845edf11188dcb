"""The cluster and GPU capacity layer under the mock engine, in both compute modes."""

from __future__ import annotations

import json

import pytest

from automation.render import Construction
from components.iam_policies import assert_least_privilege
from tests.conftest import stack_config

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
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == str(max_replicas * plan.gpus_per_replica)
    assert run.outputs["gpuLimit"] == max_replicas * plan.gpus_per_replica


def test_karpenter_node_class_is_pinned_imdsv2_and_encrypted(prod: Construction) -> None:
    gpu = custom_objects(prod, "EC2NodeClass")["gpu-inference"]["spec"]
    assert gpu["amiSelectorTerms"] == [{"alias": "al2023@v20251110"}]
    assert "latest" not in json.dumps(gpu)
    assert gpu["metadataOptions"]["httpTokens"] == "required"
    assert gpu["metadataOptions"]["httpPutResponseHopLimit"] == 1
    ebs = gpu["blockDeviceMappings"][0]["ebs"]
    assert ebs["encrypted"] is True and ebs["volumeType"] == "gp3"
    assert ebs["volumeSize"] == f"{prod.result.plan.ephemeral_storage_gib + 20}Gi"


def test_auto_mode_uses_default_node_class_when_its_disk_suffices(
    dev: Construction, construct_module
) -> None:
    assert dev.result.plan.ephemeral_storage_gib <= 80
    assert custom_objects(dev, "NodeClass") == {}
    assert gpu_pool(dev)["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    big = construct_module(
        stack_config("dev", model__variant="r1-distill-qwen-32b", gpu__instanceFamilies="g6e")
    )
    node_class = custom_objects(big, "NodeClass")["gpu-inference"]["spec"]
    assert node_class["ephemeralStorage"]["size"] == f"{big.result.plan.ephemeral_storage_gib}Gi"
    assert gpu_pool(big)["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu-inference"


@pytest.mark.parametrize(
    ("variant", "family", "cheapest", "gpus_per_node", "nodes"),
    [
        ("r1-distill-qwen-1.5b", "g6", "g6.xlarge", 1, 1),
        # 61 GiB of bf16 weights exceed one L40S; g6e has no 2-GPU size, so the 4-GPU one.
        ("r1-distill-qwen-32b", "g6e", "g6e.12xlarge", 4, 1),
        ("r1-distill-llama-70b", "g6e", "g6e.12xlarge", 4, 1),
        ("r1-671b", "p5", "p5.48xlarge", 8, 2),
    ],
)
def test_variant_and_families_drive_requirements_and_gpu_limit(
    construct_module, variant, family, cheapest, gpus_per_node, nodes
) -> None:
    # At most 3 replicas: a two-node r1-671b replica takes a whole zone of the 3-zone VPC.
    run = construct_module(
        stack_config("prod", model__variant=variant, gpu__instanceFamilies=family, autoscaling__maxReplicas=3)
    )
    pool = gpu_pool(run)
    admitted = requirement(pool, "node.kubernetes.io/instance-type")["values"]
    assert admitted[0] == cheapest
    assert requirement(pool, "karpenter.k8s.aws/instance-family")["values"] == [family]
    assert requirement(pool, "karpenter.k8s.aws/instance-gpu-count")["values"] == [str(gpus_per_node)]
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == str(3 * gpus_per_node * nodes)


def test_every_iam_policy_is_least_privilege(prod: Construction) -> None:
    documents = [json.loads(r.inputs["policy"]) for r in prod.mocks.of_type("aws:iam/rolePolicy:RolePolicy")]
    documents += [json.loads(r.inputs["assumeRolePolicy"]) for r in prod.mocks.of_type("aws:iam/role:Role")]
    documents += [
        json.loads(r.inputs["policy"]) for r in prod.mocks.of_type("aws:sqs/queuePolicy:QueuePolicy")
    ]
    # 4 roles (node, karpenter, load balancer controller, EBS CSI), 2 inline policies, 1 queue policy.
    assert len(documents) == 7
    for doc in documents:
        assert assert_least_privilege(doc) == []


def test_pod_identity_roles_are_scoped_to_their_service_accounts(prod: Construction) -> None:
    token = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    associations = {r.inputs["serviceAccount"]: r.inputs for r in prod.mocks.of_type(token)}
    assert set(associations) == {"karpenter", "aws-load-balancer-controller"}
    assert all(a["namespace"] == "kube-system" for a in associations.values())
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
    private = [s for s in subnets if s["tags"].get("kubernetes.io/role/internal-elb") == "1"]
    public = [s for s in subnets if s["tags"].get("kubernetes.io/role/elb") == "1"]
    assert len(private) == len(public) == 3
    assert {s["availabilityZone"] for s in private} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert all(s["tags"]["karpenter.sh/discovery"] == "deepseek-dev" for s in private)
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
