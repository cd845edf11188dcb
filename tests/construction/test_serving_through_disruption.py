"""The service keeps serving through rollouts and node loss, and a multi-node replica forms.

Each test checks the rendered objects against the upstream system's own behaviour, snapshotted
under ``reference/upstream/``: LeaderWorkerSet 0.10.0 (its headless Services, pod subdomains,
leader address, rollout defaults and Available condition), pulumi-kubernetes (how it waits for a
custom resource) and vLLM 0.33.0 (where an object-storage model's config files are pulled).
"""

from __future__ import annotations

import shlex
import sys
import types
from functools import cache
from typing import Any, ClassVar

import pytest

from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components.serving.multinode import leader_worker_set
from deepseek_eks.components.serving.vllm import APP, Workload
from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
from tests.conftest import stack_config
from tests.upstream import (
    lws_facts,
    nlb_facts,
    pulumi_kubernetes_await_facts,
    serving_facts,
    vllm_object_storage_facts,
)


@cache
def rendered(stack: str, **overrides: Any) -> Rendered:
    return render(stack_config(stack, **overrides))


def the(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


def containers(lws: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    template = lws["spec"]["leaderWorkerTemplate"]
    return (
        template["leaderTemplate"]["spec"]["containers"][0],
        template["workerTemplate"]["spec"]["containers"][0],
    )


def steps(container: dict[str, Any]) -> list[list[str]]:
    """The commands of a container's ``sh -c`` line, each parsed back into its words."""
    assert container["command"][:2] == ["/bin/sh", "-c"]
    words = shlex.split(container["command"][2])
    commands: list[list[str]] = [[]]
    for word in words:
        if word == "&&":
            commands.append([])
        else:
            commands[-1].append(word)
    return commands


def serve_args(leader: dict[str, Any]) -> list[str]:
    (serve,) = [c for c in steps(leader) if c[:3] == ["exec", "vllm", "serve"]]
    return serve[3:]


def model_of(args: list[str]) -> str:
    return args[args.index("--model") + 1]


# --- item 2: the LeaderWorkerSet forms -------------------------------------------------------


def test_workers_reach_their_leader_through_a_headless_service_lws_creates() -> None:
    """Every group's leader address (LWS_LEADER_ADDRESS, which the worker's ``ray start`` dials)
    resolves only through the headless Service LWS creates for its subdomain, and LWS creates it
    only when no Service of that name exists: none of ours may take it."""
    facts = lws_facts()
    r = rendered("r1")
    objects = r.objects()
    lws = the(objects, "LeaderWorkerSet")
    name, namespace = lws["metadata"]["name"], lws["metadata"]["namespace"]
    policy = (lws["spec"].get("networkConfig") or {}).get("subdomainPolicy") or facts[
        "subdomain_policy_default"
    ]["value"]
    rule = facts["subdomain_policies"][policy]
    _, worker = containers(lws)
    assert f"${facts['leader_address_env']['name']}:" in worker["command"][-1]
    ours = {
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Service" and o["metadata"]["namespace"] == namespace
    }
    # Every group that can exist: the maximum, and the one a rollout surges above it.
    surge = int(lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"])
    for group in range(r.plan["max_replicas"] + surge):
        subdomain = rule["pod_subdomain"].format(lws=name, group=group)
        address = facts["leader_address_env"]["value"].format(
            lws=name, group=group, subdomain=subdomain, namespace=namespace
        )
        headless = rule["headless_service_name"].format(lws=name, group=group)
        assert address.split(".")[1] == subdomain == headless
        assert facts["headless_service_only_if_name_free"]["value"] is True
        assert headless not in ours, f"our Service {headless} would keep LWS from creating the headless one"
    # Clients keep their name: http://vllm.<namespace>.svc.cluster.local (README).
    assert APP in ours


# --- item 12: every argument of a shell line is quoted ----------------------------------------


def test_any_character_in_the_model_uri_survives_the_leaders_shell_line() -> None:
    """An S3 prefix may hold quotes, spaces and $: the leader's ``sh -c`` line, parsed back the way
    sh splits it, still passes vLLM exactly the plan's arguments, and the worker pulls from the
    same URI."""
    odd = 's3://acme-models/o\'brien "r1" $(id)/'
    r = rendered("r1")
    lws = the(r.objects(), "LeaderWorkerSet")
    workload = Workload(namespace="deepseek", labels={}, node_selector={}, tolerations=[], model_uri=odd)
    manifest = leader_worker_set(r.sizing, workload)
    leader, worker = containers(manifest)
    expected = list(r.plan["vllm_args"])
    expected[expected.index("--model") + 1] = odd
    assert serve_args(leader) == expected
    assert any(c[-1] == odd for c in steps(worker))
    # The rendered stack's own line parses back to the plan's arguments with its bucket.
    assert serve_args(containers(lws)[0])[2:] == r.plan["vllm_args"][2:]


def test_a_repository_with_a_quote_renders_a_leader_line_that_parses_back() -> None:
    repository = "s3://acme-models/o'brien/r1"
    r = rendered("r1", model__repository=repository)
    leader, worker = containers(the(r.objects(), "LeaderWorkerSet"))
    model = model_of(serve_args(leader))
    assert model.startswith("s3://acme-models/o'brien/r1")
    assert any(c[-1] == model for c in steps(worker))


# --- item 3: the worker node has the files the leader points it at ----------------------------


class PullRecorder:
    """Stands in for vLLM's ObjectStorageModel and records what the worker's pull asks for."""

    calls: ClassVar[list[tuple[str, str, list[str] | None, list[str] | None]]] = []

    def __init__(self, url: str) -> None:
        self.calls.append(("init", url, None, None))

    def pull_files(
        self,
        model_path: str = "",
        allow_pattern: list[str] | None = None,
        ignore_pattern: list[str] | None = None,
    ) -> None:
        self.calls.append(("pull", model_path, allow_pattern, ignore_pattern))


def test_each_worker_pulls_the_config_and_tokenizer_files_into_the_leaders_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM 0.33.0 pulls an s3:// model's config and tokenizer files only where the model config
    is built (the leader) and hands that node-local directory to the Ray workers. The worker runs
    the same pull, with vLLM's own class (so the same directory, sha256 of the same URL), for the
    same URL and patterns, before it joins Ray; both pods share the cache environment."""
    facts = vllm_object_storage_facts()
    assert facts["pulled_only_where_the_config_is_built"]["value"] is True
    patterns = facts["config_and_tokenizer_patterns"]
    leader, worker = containers(the(rendered("r1").objects(), "LeaderWorkerSet"))
    model = model_of(serve_args(leader))
    assert model.startswith(tuple(facts["object_storage_schemes"]["value"]))
    commands = steps(worker)
    (pull,) = [c for c in commands if c[:2] == ["python3", "-c"]]
    assert commands.index(pull) < next(i for i, c in enumerate(commands) if "ray" in c)
    code, url = pull[2], pull[3]
    assert url == model
    module = types.ModuleType("vllm.transformers_utils.runai_utils")
    module.ObjectStorageModel = PullRecorder  # type: ignore[attr-defined]
    for parent in ("vllm", "vllm.transformers_utils"):
        monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(sys, "argv", ["-c", url])
    PullRecorder.calls = []
    exec(code, {})  # the worker's own pull, against a recording stand-in
    assert PullRecorder.calls == [
        ("init", model, None, None),
        ("pull", model, patterns["allow_pattern"], None),
        ("pull", model, None, patterns["ignore_pattern"]),
    ]
    # The directory is $VLLM_ASSETS_CACHE, else $XDG_CACHE_HOME/vllm/assets, else ~/.cache/...:
    # the same on both pods.
    env = {c["name"]: {e["name"]: e.get("value") for e in c["env"]} for c in (leader, worker)}
    for var in facts["assets_cache_default"]["value"]:
        name = var.split("/")[0]
        assert env[leader["name"]].get(name) == env[worker["name"]].get(name)
    assert env[leader["name"]]["XDG_CACHE_HOME"]  # set, so the path does not depend on the image


# --- item 8: rollouts keep a serving replica, and Pulumi waits for the new one ----------------


def test_the_leader_worker_set_surges_and_pulumi_waits_until_it_is_available() -> None:
    """LWS defaults to maxUnavailable 1, maxSurge 0: at one replica every template change would
    stop the service. Ours surges one group and removes none before it is ready, and Pulumi, which
    does not wait for a custom resource unless told, waits for Available at the new generation."""
    defaults = lws_facts()["rollout_defaults"]
    assert (defaults["maxUnavailable"], defaults["maxSurge"]) == (1, 0)
    awaits = pulumi_kubernetes_await_facts()
    assert awaits["custom_resources_not_awaited_by_default"]["value"] is True
    assert awaits["condition_checks_observed_generation"]["value"] is True
    lws = the(rendered("r1").objects(), "LeaderWorkerSet")
    strategy = lws["spec"]["rolloutStrategy"]
    assert strategy["type"] == defaults["type"]
    config = strategy["rollingUpdateConfiguration"]
    assert set(config) <= set(lws_facts()["rollout_fields"]["fields"])
    assert config["maxUnavailable"] == 0 and config["maxSurge"] >= 1
    annotations = lws["metadata"]["annotations"]
    key = awaits["wait_for_annotation"]["key"]
    assert annotations[key] == f"condition={lws_facts()['available_condition']['type']}"
    assert annotations.get("pulumi.com/skipAwait") != "true"  # it would win over waitFor


def test_a_deleted_worker_keeps_its_ranks_until_the_leader_has_drained_the_group() -> None:
    """Draining a worker's node deletes the worker pod, and LWS then deletes the group's leader at
    once (upstream fact). The leader pauses and drains its streams for --shutdown-timeout; the
    worker holds ranks of every one of them, so its preStop must last at least as long, inside its
    grace period, or each stream of the 671B replica is cut mid-generation."""
    fact = serving_facts()["leaderworkerset_worker_deletion"]
    assert fact["recreates_group_on_worker_deletion"] is True
    assert serving_facts()["kubernetes_termination"]["grace_period_includes_prestop"]
    r = rendered("r1")
    lws = the(r.objects(), "LeaderWorkerSet")
    assert lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader, worker = containers(lws)
    args = serve_args(leader)
    drain = int(args[args.index("--shutdown-timeout") + 1])
    leader_done = leader["lifecycle"]["preStop"]["sleep"]["seconds"] + drain
    worker_wait = worker["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert worker_wait >= leader_done
    grace = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["terminationGracePeriodSeconds"]
    assert worker_wait < grace


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_deployment_surges_and_is_awaited(stack: str) -> None:
    deployment = the(rendered(stack).objects(), "Deployment", APP)
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert deployment["metadata"].get("annotations", {}).get("pulumi.com/skipAwait") != "true"


# --- item 6: one replica is all there is ------------------------------------------------------


def test_plan_warns_whenever_one_replica_is_all_there_is_with_the_outage() -> None:
    lone = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), min_replicas=1, max_replicas=3))
    assert isinstance(lone, SizingPlan)
    (warning,) = [w for w in lone.warnings if "one replica is all there is" in w]
    cold_start = sum(lone.startup_breakdown.values())
    assert f"about {cold_start} s" in warning
    assert "autoscaling.minReplicas" in warning
    zero = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), min_replicas=0, max_replicas=1))
    assert any("one replica is all there is" in w for w in zero.warnings)
    two = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), min_replicas=2, max_replicas=3))
    assert not any("one replica is all there is" in w for w in two.warnings)
    # The examples all run one replica at the floor: render shows the notice.
    assert any("one replica is all there is" in w for w in rendered("r1").plan["warnings"])


# --- item 5: the NLB keeps a silent connection as long as a generation may take ---------------


def nlb(r: Rendered) -> dict[str, Any]:
    (service,) = [
        o for o in r.objects() if o["kind"] == "Service" and o["spec"].get("type") == "LoadBalancer"
    ]
    return service


def test_the_nlb_tcp_listener_idle_timeout_covers_the_drain_budget() -> None:
    facts = nlb_facts()
    low, high = facts["nlb_idle_timeout"]["tcp_range_s"]
    attributes = facts["listener_attributes"]
    r = rendered("dev", endpoint__loadBalancer="nlb", endpoint__auth="none")
    service = nlb(r)
    (port,) = service["spec"]["ports"]
    key = attributes["annotation"].format(protocol="TCP", port=port["port"])
    name, _, value = service["metadata"]["annotations"][key].partition("=")
    assert name == attributes["tcp_idle_timeout_attribute"]
    # Above the plan's longest generation (its drain budget), within what the NLB accepts.
    assert low <= int(value) <= high and int(value) > r.plan["drain_seconds"]
    assert not any("endpoint.loadBalancer = nlb" in w for w in r.plan["warnings"])


def test_a_tls_nlb_warns_that_its_fixed_idle_timeout_cannot_hold_a_long_generation() -> None:
    tls_fixed = nlb_facts()["nlb_idle_timeout"]["tls_fixed_s"]
    r = rendered(
        "dev",
        endpoint__loadBalancer="nlb",
        endpoint__auth="none",
        endpoint__certificateArn="arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
    )
    assert r.plan["drain_seconds"] > tls_fixed
    (warning,) = [w for w in r.plan["warnings"] if "endpoint.loadBalancer = nlb" in w]
    assert f"{tls_fixed} s" in warning and "stream" in warning
    # No TCP attribute for the TLS listener: AWS would refuse to change its idle timeout.
    assert not any("listener-attributes" in k for k in nlb(r)["metadata"]["annotations"])
    short = rendered(
        "dev",
        endpoint__loadBalancer="nlb",
        endpoint__auth="none",
        endpoint__certificateArn="arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
        endpoint__drainSeconds=120,
    )
    assert not any("endpoint.loadBalancer = nlb" in w for w in short.plan["warnings"])


# --- item 7: what the on-demand floor holds ---------------------------------------------------


def test_plan_says_a_multi_node_floor_holds_at_launch_only() -> None:
    """A ReplicaSet never weighs capacity type when it picks the pod to delete; single-node pods
    now give themselves a deletion cost (tests/construction/test_on_demand_floor.py), but a
    LeaderWorkerSet reads none, so for a multi-node plan the plan still says a scale-down can
    leave the floor on spot."""
    order = serving_facts()["replicaset_scale_down_order"]
    assert order["capacity_type_considered"] is False
    mixed = ("spot", "on-demand")
    multi = plan(PlanRequest("r1-671b", ("p5",), capacity_types=mixed, min_replicas=1))
    assert isinstance(multi, SizingPlan) and multi.nodes_per_replica > 1
    assert any("scale-down may remove an on-demand replica" in w for w in multi.warnings)
    single = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), capacity_types=mixed))
    assert isinstance(single, SizingPlan)
    assert not any("scale-down may remove" in w for w in single.warnings)
    on_demand = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), capacity_types=("on-demand",)))
    assert isinstance(on_demand, SizingPlan)
    assert not any("scale-down may remove" in w for w in on_demand.warnings)
