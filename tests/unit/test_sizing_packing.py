"""Packing: a replica on fewer GPUs than its node has, several replicas per node (issue 22)."""

from __future__ import annotations

import math

from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
from deepseek_eks.sizing.catalog import instance_catalog
from deepseek_eks.sizing.nodes import pod_room


def _plan(variant: str, families: tuple[str, ...], **kw: object) -> SizingPlan:
    result = plan(PlanRequest(variant, families, **kw))  # type: ignore[arg-type]
    assert isinstance(result, SizingPlan), result.to_dict()
    return result


def test_qwen_7b_on_p4d_packs_instead_of_being_refused() -> None:
    # 28 attention heads do not split over 8 GPUs, but over 1, 2 or 4 they do.
    p = _plan("r1-distill-qwen-7b", ("p4d",), max_replicas=8)
    node = instance_catalog().instances[p.instance_type]
    k = p.chosen.replicas_per_node
    assert p.tensor_parallel_size in (1, 2, 4) and k == node.gpu_count // p.tensor_parallel_size
    # Priced by its GPU share; the node costs what it costs at min and max.
    price = node.on_demand_usd_per_hour["us-east-1"]
    assert p.replica_hourly_usd == round(price * p.tensor_parallel_size / node.gpu_count, 4)
    d = p.to_dict()
    assert d["replicas_per_node"] == k
    assert d["hourly_usd_at_max"] == round(price * math.ceil(8 / k), 4)
    # k pods fit on one node: GPUs, CPU and memory (what the node leaves after system pods).
    room = pod_room(node)
    assert k * d["gpus_per_replica"] <= node.gpu_count
    assert k * int(d["cpu_request"].rstrip("m")) <= room.millicores
    assert k * int(d["memory_request"].rstrip("Gi")) * 1024 <= room.memory_mib


def test_a_big_node_is_not_bought_for_few_replicas() -> None:
    # Eight 1.5B replicas could share a p5.48xlarge, but at maxReplicas 3 five GPUs would idle.
    few = _plan("r1-distill-qwen-1.5b", ("p5",), max_replicas=3)
    assert few.chosen.replicas_per_node == 1 and few.instance_type == "p5.4xlarge"


def test_refusal_names_every_reason() -> None:
    result = plan(
        PlanRequest("r1-distill-qwen-7b", ("g6",), max_model_len=131072, min_full_length_sequences=16)
    )
    assert not result.feasible
    reason = result.to_dict()["reasons"][0]
    assert "do not split over 8 GPUs" in reason and "(4x L4): weights fit but the KV cache holds" in reason


def test_node_disk_holds_every_packed_pods_ephemeral_storage() -> None:
    from deepseek_eks.components.serving.vllm import _resources

    packed = _plan("r1-distill-qwen-7b", ("p4d",), max_replicas=8)
    k = packed.chosen.replicas_per_node
    pod = _resources(packed, packed.gpus_per_replica)["requests"]["ephemeral-storage"]
    assert k > 1 and k * int(pod.rstrip("Gi")) <= packed.ephemeral_storage_gib
