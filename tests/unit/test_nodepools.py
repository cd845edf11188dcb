"""Pure node pool / node class builders and the subnet plan."""

from __future__ import annotations

import ipaddress

import pytest

from components.network import plan_subnets
from components.nodepools import (
    NodeClassRef,
    auto_mode_node_class,
    ec2_node_class,
    gpu_node_pool,
    gpu_requirements,
    label_prefix,
    needs_auto_mode_node_class,
)
from settings import ComputeMode
from sizing import PlanRequest, SizingPlan, plan


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
    pool = gpu_node_pool(
        name="gpu",
        plan=p,
        mode=ComputeMode.KARPENTER,
        capacity_types=["on-demand"],
        max_replicas=3,
        node_class=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "gpu"),
        labels={},
    )
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": "12"}  # 3 replicas x TP 4
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
    auto = auto_mode_node_class(
        name="gpu", role="r", cluster_name="c", subnet_ids=["subnet-1"], disk_gib=300, tags={}
    )
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
