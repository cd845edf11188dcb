"""Pure node pool / node class builders and the subnet plan."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

import pytest

from deepseek_eks.components.platform.network import plan_subnets
from deepseek_eks.components.platform.nodepools import (
    GPU_FLOOR_NODE_POOL,
    GPU_NODE_POOL,
    SERVING_POD_ANNOTATIONS,
    GpuPoolSpec,
    NodeClassRef,
    auto_mode_node_class,
    ec2_node_class,
    gpu_node_pool,
    gpu_pool_specs,
    gpu_requirements,
    instance_store_allocatable_gib,
    instance_store_holds,
    label_prefix,
    needs_auto_mode_node_class,
    node_disk_gib,
)
from deepseek_eks.settings import ComputeMode
from deepseek_eks.sizing import PlanRequest, SizingPlan, instance_catalog, plan
from tests.upstream_platform import platform_facts


def sized(variant: str, families: tuple[str, ...]) -> SizingPlan:
    result = plan(PlanRequest(variant, families))
    assert isinstance(result, SizingPlan)
    return result


def test_label_prefix_per_mode() -> None:
    assert label_prefix(ComputeMode.AUTO_MODE) == "eks.amazonaws.com"
    assert label_prefix(ComputeMode.KARPENTER) == "karpenter.k8s.aws"


def test_requirements_floor_is_below_every_admitted_gpu_and_above_smaller_ones() -> None:
    p = sized("r1-distill-qwen-7b", ("g6", "g6e"))  # L4 (22888 MiB) and L40S (45776 MiB) both fit
    reqs = {r["key"]: r for r in gpu_requirements(p, ComputeMode.KARPENTER, ["spot"])}
    floor = int(reqs["karpenter.k8s.aws/instance-gpu-memory"]["values"][0])
    assert reqs["karpenter.k8s.aws/instance-gpu-memory"]["operator"] == "Gt"
    assert floor == 22888 - 1  # admits L4, and a T4 (16384 MiB) never
    assert reqs["karpenter.k8s.aws/instance-family"]["values"] == sorted(
        {t.split(".")[0] for t in p.instance_types}
    )


def test_gpu_pool_limit_and_node_class_ref() -> None:
    p = sized("r1-distill-llama-70b", ("g6e",))
    [spec] = gpu_pool_specs(p, ["on-demand"], min_replicas=1, max_replicas=3)
    pool = gpu_node_pool(
        spec=spec,
        plan=p,
        mode=ComputeMode.KARPENTER,
        node_class=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "gpu"),
        labels={},
    )
    # (3 replicas + the one a rollout surges) x TP 4
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": "16"}
    assert pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "gpu",
    }


def test_node_classes_select_subnets_by_id() -> None:
    ec2 = ec2_node_class(
        name="gpu", role="r", cluster_name="c", subnet_ids=["subnet-1", "subnet-2"], disk_gib=100, tags={}
    )
    assert ec2["spec"]["subnetSelectorTerms"] == [{"id": "subnet-1"}, {"id": "subnet-2"}]
    auto = auto_mode_node_class(name="gpu", role="r", cluster_name="c", subnet_ids=["subnet-1"], disk_gib=300)
    assert auto["spec"]["ephemeralStorage"]["size"] == "300Gi"


def test_auto_mode_node_class_only_above_its_default_disk() -> None:
    assert not needs_auto_mode_node_class(sized("r1-distill-qwen-1.5b", ("g6",)))
    assert needs_auto_mode_node_class(sized("r1-distill-llama-70b", ("g6e",)))


@pytest.mark.parametrize(("cidr", "zones"), [("10.42.0.0/16", 3), ("10.0.0.0/20", 2), ("172.16.0.0/18", 3)])
def test_subnet_plan_is_disjoint_and_inside_the_vpc(cidr: str, zones: int) -> None:
    plan_ = plan_subnets(cidr, zones)
    vpc = ipaddress.ip_network(cidr)
    nets = [ipaddress.ip_network(c) for c in plan_.private + plan_.public]
    assert len(plan_.private) == len(plan_.public) == zones
    assert all(n.subnet_of(vpc) for n in nets)  # type: ignore[arg-type]
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    assert nets[0].prefixlen == vpc.prefixlen + 2 and nets[-1].prefixlen == vpc.prefixlen + 4


def test_subnet_plan_for_the_default_vpc() -> None:
    assert plan_subnets("10.42.0.0/16", 3).private == ["10.42.0.0/18", "10.42.64.0/18", "10.42.128.0/18"]
    assert plan_subnets("10.42.0.0/16", 3).public == ["10.42.192.0/20", "10.42.208.0/20", "10.42.224.0/20"]


def _pool(spec: GpuPoolSpec, p: SizingPlan) -> dict:
    return gpu_node_pool(
        spec=spec,
        plan=p,
        mode=ComputeMode.KARPENTER,
        node_class=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "gpu"),
        labels={},
    )


def _capacity_types(pool: dict) -> list[str]:
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    return next(r["values"] for r in reqs if r["key"] == "karpenter.sh/capacity-type")


def test_floor_replicas_get_an_on_demand_pool_tried_first_when_spot_is_allowed() -> None:
    weights = platform_facts()["karpenter"]["weighted_nodepools"]
    assert weights["higher_weight_first"] and weights["limits_cap_a_pool"]
    p = sized("r1-distill-llama-70b", ("g6e",))
    floor, main = (
        _pool(s, p) for s in gpu_pool_specs(p, ["spot", "on-demand"], min_replicas=2, max_replicas=5)
    )
    assert floor["metadata"]["name"] == GPU_FLOOR_NODE_POOL and main["metadata"]["name"] == GPU_NODE_POOL
    assert _capacity_types(floor) == ["on-demand"]
    # the floor's replicas and a rollout's surge, so a rollout at the floor stays on on-demand
    assert floor["spec"]["limits"] == {"nvidia.com/gpu": str(3 * p.gpus_per_replica)}
    # Karpenter treats a pool without weight as weight 0: the floor pool must rank above.
    assert floor["spec"]["weight"] > main["spec"].get("weight", 0)
    assert set(_capacity_types(main)) == {"spot", "on-demand"}
    assert main["spec"]["limits"] == {"nvidia.com/gpu": str(6 * p.gpus_per_replica)}
    # Both pools label their nodes alike, so one node selector reaches either.
    assert floor["spec"]["template"]["metadata"] == main["spec"]["template"]["metadata"]


@pytest.mark.parametrize(
    ("types", "min_replicas"), [(["on-demand"], 1), (["spot"], 1), (["spot", "on-demand"], 0)]
)
def test_one_gpu_pool_when_no_floor_needs_protecting(types: list[str], min_replicas: int) -> None:
    p = sized("r1-distill-qwen-7b", ("g6",))
    [spec] = gpu_pool_specs(p, types, min_replicas=min_replicas, max_replicas=3)
    assert spec.name == GPU_NODE_POOL and spec.weight is None and list(spec.capacity_types) == types


def test_capacity_reservations_join_every_pool_that_buys_on_demand() -> None:
    reserved = platform_facts()["karpenter"]["reserved_capacity"]["capacity_type"]
    p = sized("r1-distill-qwen-7b", ("g6",))
    floor, main = gpu_pool_specs(p, ["spot", "on-demand"], min_replicas=1, max_replicas=3, reserved=True)
    assert reserved in floor.capacity_types and reserved in main.capacity_types
    [spot_only] = gpu_pool_specs(p, ["spot"], min_replicas=1, max_replicas=3, reserved=True)
    assert reserved not in spot_only.capacity_types


def test_gpu_nodes_never_expire_and_only_empty_ones_are_consolidated() -> None:
    expiry = platform_facts()["karpenter"]["expiration"]
    # Expiry is forceful (budgets and do-not-disrupt do not hold it), so it must be off.
    assert expiry["forceful"] and not expiry["blocked_by_budgets"] and not expiry["blocked_by_do_not_disrupt"]
    p = sized("r1-distill-qwen-7b", ("g6",))
    for spec in gpu_pool_specs(p, ["spot", "on-demand"], min_replicas=1, max_replicas=3):
        pool = _pool(spec, p)
        assert pool["spec"]["template"]["spec"]["expireAfter"] == expiry["never"]
        assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"


def test_auto_mode_gpu_pool_expires_no_sooner_than_auto_mode_forces() -> None:
    lifetime = platform_facts()["eks"]["auto_mode_max_node_lifetime"]["value"]
    p = sized("r1-distill-qwen-7b", ("g6",))
    [spec] = gpu_pool_specs(p, ["on-demand"], min_replicas=1, max_replicas=3)
    pool = gpu_node_pool(
        spec=spec,
        plan=p,
        mode=ComputeMode.AUTO_MODE,
        node_class=NodeClassRef("eks.amazonaws.com", "NodeClass", "default"),
        labels={},
    )
    assert pool["spec"]["template"]["spec"]["expireAfter"] == lifetime


def test_serving_pod_annotation_is_karpenters_permanent_do_not_disrupt() -> None:
    fact = platform_facts()["karpenter"]["do_not_disrupt_annotation"]
    assert {fact["key"]: fact["permanent_value"]} == SERVING_POD_ANNOTATIONS
    assert "Consolidation" in fact["excludes_from"]


def test_auto_mode_node_class_carries_no_tags_the_cluster_role_may_not_apply() -> None:
    assert platform_facts()["eks"]["auto_mode_managed_policies_allow_user_defined_tags"]["value"] is False
    auto = auto_mode_node_class(name="gpu", role="r", cluster_name="c", subnet_ids=["subnet-1"], disk_gib=300)
    assert "tags" not in auto["spec"]


def test_instance_store_allocatable_follows_karpenters_accounting() -> None:
    facts = platform_facts()["karpenter"]["instance_store_ephemeral_storage"]
    assert facts["capacity_unit"] == "G"  # decimal gigabytes, as EC2 reports TotalSizeInGB
    expected = 1000 * 1000**3 / 1024**3 * (1 - facts["eviction_fraction"]) - facts["kube_reserved_gib"]
    assert instance_store_allocatable_gib(1000) == pytest.approx(expected)


def test_raid0_node_class_keeps_only_the_os_on_the_root_volume() -> None:
    p = sized("r1-distill-llama-70b", ("g6e",))
    assert node_disk_gib(p, instance_store_raid0=True) < p.ephemeral_storage_gib
    catalog = instance_catalog().instances
    assert all(
        instance_store_allocatable_gib(catalog[t].instance_storage_gb) >= p.ephemeral_storage_gib
        for t in p.instance_types
    )
    ec2 = ec2_node_class(
        name="gpu",
        role="r",
        cluster_name="c",
        subnet_ids=["subnet-1"],
        disk_gib=node_disk_gib(p, instance_store_raid0=True),
        tags={},
        instance_store_raid0=True,
        capacity_reservation_ids=["cr-0123456789abcdef0"],
    )
    assert (
        ec2["spec"]["instanceStorePolicy"] == platform_facts()["karpenter"]["instance_store_policy"]["value"]
    )
    assert ec2["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]


def test_no_raid0_when_some_admitted_type_has_too_little_local_nvme() -> None:
    p = sized("r1-distill-llama-70b", ("g6e",))  # about 180 GiB of image, weights and scratch
    small = instance_catalog().instances["g4dn.xlarge"]  # 125 GB of NVMe
    assert instance_store_allocatable_gib(small.instance_storage_gb) < p.ephemeral_storage_gib
    mixed = replace(p, fits=(*p.fits, replace(p.chosen, instance=small)))
    assert instance_store_holds(p) and not instance_store_holds(mixed)
    # Then the root volume holds image and weights, as before.
    assert node_disk_gib(mixed) == p.ephemeral_storage_gib + node_disk_gib(p, instance_store_raid0=True)
