"""Packing: a replica on fewer GPUs than its node has, several replicas per node (issue 22)."""

from __future__ import annotations

import math

from deepseek_eks.sizing import PlanRequest, Quantization, SizingPlan, plan
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


def _left_out(p: SizingPlan, family: str) -> list[str]:
    return [w for w in p.warnings if w.startswith(f"gpu.instanceFamilies lists {family},")]


def test_an_allowed_family_the_pool_cannot_run_is_named_with_its_reason() -> None:
    # The 70B distill: g6e.12xlarge runs one TP-4 replica a node; p5.48xlarge would pack two, a
    # pod of another size, so one node pool cannot hold both. Each plan alone says what it is.
    both = _plan("r1-distill-llama-70b", ("g6e", "p5"), max_replicas=4)
    g6e = _plan("r1-distill-llama-70b", ("g6e",), max_replicas=4)
    p5 = _plan("r1-distill-llama-70b", ("p5",), max_replicas=4)
    assert {f.instance.family for f in both.fits} == {"g6e"}
    assert g6e.chosen.replicas_per_node != p5.chosen.replicas_per_node
    (warning,) = _left_out(both, "p5")
    assert p5.instance_type in warning and f"packs {p5.chosen.replicas_per_node} replicas" in warning
    at_max = [q.to_dict()["hourly_usd_at_max"] for q in (p5, g6e)]
    assert all(f"${usd:,.2f}/h" in warning for usd in at_max)
    assert f"${p5.usd_per_million_output_tokens:,.2f} per million" in warning
    assert not _left_out(both, "g6e")


def test_a_family_that_serves_nothing_is_named_with_why() -> None:
    both = _plan("r1-distill-llama-70b", ("g6e", "g4dn"), max_replicas=4)
    refused = plan(PlanRequest("r1-distill-llama-70b", ("g4dn",), max_replicas=4))
    assert not refused.feasible
    (why,) = refused.to_dict()["reasons"]
    (warning,) = _left_out(both, "g4dn")
    assert why.removeprefix("g4dn: ") in warning and "never launches" in warning


def test_fp8_names_the_flag_that_splits_g5_from_g6_and_pooled_families_are_silent() -> None:
    fp8 = _plan("r1-distill-qwen-7b", ("g6", "g5"), quantization=Quantization.FP8, max_replicas=2)
    g5 = _plan("r1-distill-qwen-7b", ("g5",), quantization=Quantization.FP8, max_replicas=2)
    (warning,) = _left_out(fp8, "g5")
    assert f"--quantization {g5.chosen.quantization_flag}" in warning
    assert f"--quantization {fp8.chosen.quantization_flag}" in warning
    bf16 = _plan("r1-distill-qwen-7b", ("g6", "g5"), max_replicas=2)
    assert {f.instance.family for f in bf16.fits} == {"g6", "g5"} and not any(
        w.startswith("gpu.instanceFamilies") for w in bf16.warnings
    )
