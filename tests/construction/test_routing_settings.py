"""routing.kind and autoscaling.signal router-queue: the scale-from-zero rules in both spellings
(stack config keys, the component's argument path), the router rendered with llm-d, and llm-d refused
before anything is created where it does not route yet (a multi-node replica)."""

from __future__ import annotations

from typing import Any

import pytest

from deepseek_eks.automation.cli import main as automation_main
from deepseek_eks.automation.render import run_stack_program
from deepseek_eks.components import DeepSeekService, build, size
from deepseek_eks.components.service import ServiceError, service_settings
from deepseek_eks.settings import PROJECT, SettingsError, parse_settings
from deepseek_eks.settings.pulumi_source import load_settings
from deepseek_eks.testing.mocks import RecordingMocks, run_with_mocks
from tests.conftest import stack_config


def test_the_component_names_both_settings_and_the_fix_in_its_argument_spelling() -> None:
    with pytest.raises(SettingsError) as error:
        service_settings({"autoscaling": {"min_replicas": 0, "signal": "queue-depth"}}, "dev", "chat")
    text = str(error.value)
    needs = 'autoscaling={"min_replicas": ...} = 0: 0 needs autoscaling={"signal": ...} router-queue and '
    assert needs in text
    assert 'routing={"kind": ...} llm-d' in text and "minReplicas" not in text and f"{PROJECT}:" not in text
    with pytest.raises(SettingsError) as error:
        service_settings({"autoscaling": {"signal": "router-queue"}}, "dev", "chat")
    text = str(error.value)
    needs = 'autoscaling={"signal": ...} = "router-queue": router-queue needs routing={"kind": ...} llm-d'
    assert needs in text
    settings = service_settings(
        {"autoscaling": {"min_replicas": 0, "signal": "router-queue"}, "routing": {"kind": "llm-d"}}, "dev"
    )
    assert (settings.autoscaling.min_replicas, settings.routing.kind) == (0, "llm-d")


def test_the_stack_program_refuses_llm_d_on_a_multi_node_replica_before_creating_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    mocks = RecordingMocks()
    config = stack_config("r1", routing__kind="llm-d")
    with pytest.raises(Exception) as raised:
        run_stack_program(lambda: build(load_settings()).outputs, mocks, config)
    message = str(raised.value)
    assert f"{PROJECT}:routing.kind llm-d does not route to a multi-node replica yet" in message
    assert "on 2 nodes" in message and "Set routing.kind none" in message
    assert [r.type for r in mocks.resources if r.custom] == []
    # python -m automation plan refuses it with the same words (exit 2), rather than plan a router.
    assert automation_main(["plan", "--stack", "r1", "--set", "routing.kind=llm-d"]) == 2
    assert "does not route to a multi-node replica yet" in capsys.readouterr().err


def test_a_component_refuses_llm_d_on_a_multi_node_replica_in_its_argument_spelling() -> None:
    mocks = RecordingMocks()

    def program() -> dict[str, Any]:
        DeepSeekService(
            "team-a",
            {
                "routing": {"kind": "llm-d"},
                "region": "us-east-1",
                "compute_mode": "karpenter",
                "model": {"variant": "r1-671b", "max_model_len": 32768},
                "gpu": {"instance_families": ["p5"], "capacity_types": ["on-demand"]},
                "autoscaling": {"max_replicas": 2},
            },
        )
        return {}

    with pytest.raises(Exception) as raised:
        run_with_mocks(program, mocks, project=PROJECT, stack="dev", config={}, secret_keys=[])
    message = str(raised.value)
    assert "DeepSeekService 'team-a'" in message
    assert 'routing={"kind": ...} llm-d does not route to a multi-node replica yet' in message
    assert "routing.kind" not in message
    assert [r.type for r in mocks.resources if r.custom] == []


def test_llm_d_with_router_queue_renders_the_router_and_a_scaled_object_that_wakes_from_zero() -> None:
    mocks = RecordingMocks()
    config = stack_config(
        "dev", routing__kind="llm-d", autoscaling__signal="router-queue", autoscaling__minReplicas="0"
    )
    run_stack_program(lambda: build(load_settings()).outputs, mocks, config)
    kinds = {r.type.rsplit(":", 1)[-1] for r in mocks.resources if r.custom}
    assert {"InferencePool", "CustomResourceDefinition", "Deployment", "ScaledObject"} <= kinds
    (scaled,) = [r.inputs for r in mocks.resources if r.type.endswith(":ScaledObject")]
    assert scaled["spec"]["minReplicaCount"] == 0
    # The router's queue, and dev's seasonal floor beside it (it may wake the service ahead of a
    # busy hour too).
    names = [t["name"] for t in scaled["spec"]["triggers"]]
    assert names == ["router-queue", "seasonal-day", "seasonal-week"]
    trigger = scaled["spec"]["triggers"][0]
    assert "inference_extension_flow_control_queue_size" in trigger["metadata"]["query"]
    assert trigger["metadata"]["activationThreshold"] == "0"


def test_routing_none_is_the_default_and_renders() -> None:
    mocks = RecordingMocks()
    config = stack_config("dev", routing__kind="none")
    run_stack_program(lambda: build(load_settings()).outputs, mocks, config)
    assert any(r.custom for r in mocks.resources)


def test_render_refuses_llm_d_on_r1_as_a_settings_error_without_a_traceback(tmp_path) -> None:
    from tests.rendered.test_render import automation

    proc = automation("render", "--stack", "r1", "--set", "routing.kind=llm-d", "--out", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: DeepSeekService 'deepseek': {PROJECT}:routing.kind llm-d does not route" in proc.stderr


def test_a_component_renders_the_router_under_its_own_names() -> None:
    """A DeepSeekService named other than "deepseek" gets the router as its own children, in its
    own namespace, with the load balancer in front of the router's Service."""
    mocks = RecordingMocks()

    def program() -> dict[str, Any]:
        DeepSeekService(
            "team-a",
            {
                "routing": {"kind": "llm-d"},
                "autoscaling": {"signal": "router-queue", "min_replicas": 0},
                "region": "us-east-1",
            },
        )
        return {}

    run_with_mocks(program, mocks, project=PROJECT, stack="dev", config={}, secret_keys=[])
    routers = [r for r in mocks.resources if r.type == "deepseek-eks:index:Router"]
    assert [r.name for r in routers] == ["team-a-inference-router"]
    pools = [r for r in mocks.resources if r.type.endswith(":InferencePool")]
    assert [p.inputs["metadata"]["namespace"] for p in pools] == ["team-a"]
    (ingress,) = [r for r in mocks.resources if r.type == "kubernetes:networking.k8s.io/v1:Ingress"]
    backend = ingress.inputs["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "vllm-router"


def test_warm_spares_are_refused_for_a_multi_node_replica_and_priced_as_they_pack() -> None:
    """A warm spare holds one node in no particular zone; an r1 replica is a LeaderWorkerSet group
    of two nodes in a zone of its own, so the spares would be paid for and warm nothing: refused,
    and the plan promises no warm start there. Where replicas share a node, spares share it too."""
    from deepseek_eks.automation.api import prepare, read_config

    mocks = RecordingMocks()
    config = stack_config("r1", autoscaling__warmSpareNodes="1")
    with pytest.raises(Exception) as raised:
        run_stack_program(lambda: build(load_settings()).outputs, mocks, config)
    message = str(raised.value)
    assert (
        f"{PROJECT}:autoscaling.warmSpareNodes cannot warm this plan's replicas: each spans 2 nodes"
        in message
    )
    assert "Set autoscaling.warmSpareNodes 0" in message
    assert [r.type for r in mocks.resources if r.custom] == []
    # plan, capacity and diff refuse the stack as the program does, rather than price the spares.
    with pytest.raises(ServiceError) as refused:
        prepare("r1", {"autoscaling.warmSpareNodes": "1"})
    assert str(refused.value) in message
    r1_config = read_config("r1", {"autoscaling.warmSpareNodes": "1"})
    r1 = size(parse_settings(r1_config.values, r1_config.secret_keys, "r1"))
    assert r1.nodes_per_replica == 2 and r1.warm_node_startup_breakdown == r1.startup_breakdown
    # prod on p5 packs two 4-GPU replicas to a node: two placeholders take one node, not two.
    packed = prepare("prod", {"gpu.instanceFamilies": '["p5"]', "autoscaling.warmSpareNodes": "2"}).plan
    assert packed.chosen.replicas_per_node == 2
    assert packed.warm_spare_hourly_usd == pytest.approx(packed.chosen.node_usd_per_hour, abs=1e-3)
    # dev's pool holds two replicas' nodes: with one replica running, one of two spares gets a node.
    dev = prepare("dev", {"autoscaling.warmSpareNodes": "2"}).plan
    assert dev.warm_spare_hourly_usd == pytest.approx(dev.chosen.node_usd_per_hour, abs=1e-3)
