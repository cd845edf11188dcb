"""The simulator's routing model: prefix caching on each replica, llm-d's router (scorers, flow-control
queue, TTL), the router-queue signal waking a service scaled to zero, and the synthetic shared-prefix
trace's fit to its published figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepseek_eks import promql
from deepseek_eks.perf.simulate.engine import SimConfig, Simulation, StartupTimes
from deepseek_eks.perf.simulate.hpa import Behavior
from deepseek_eks.perf.simulate.prefixes import reuse_share
from deepseek_eks.perf.simulate.replica import ReplicaModel, ThroughputCurve
from deepseek_eks.perf.simulate.router import (
    EndpointIndex,
    EndpointView,
    PrefixCache,
    RouterSpec,
    pick,
    saturation,
)
from deepseek_eks.perf.simulate.stack import (
    ROUTER_DEMAND,
    AutoscalerSpec,
    MetricSpec,
    from_scaled_object,
)
from deepseek_eks.perf.simulate.traffic import LengthProfile, Request, generate
from tests.unit.test_simulate_engine import fixed_config

ROOT = Path(__file__).resolve().parents[2]
NO_LIMIT = 10**9

# The published figure the synthetic trace is fitted to (NVIDIA Dynamo's Qwen3-32B KV-routing
# benchmark page: the Mooncake conversation trace's 36.64 % cache efficiency), written here from
# the source, not read from the code.
PUBLISHED_SHARE = 0.3664


def config(replicas: int, *, kv_cache_tokens: int = NO_LIMIT, **overrides: object) -> SimConfig:
    """Replicas whose steps last a fixed time per sequence count (test_simulate_engine's linear
    curve: 10 tokens/s a sequence, 8 sequences) and prefill at most 2,048 tokens a step (the
    replica model's default budget), so a prompt's prefill takes ceil(tokens / 2048) steps."""
    curve = ThroughputCurve(((8, 80.0),), "test: linear")
    replica = ReplicaModel(curve, 8, kv_cache_tokens, NO_LIMIT, None, 2048)
    return fixed_config(8, 10.0, replicas, replica=replica, **overrides)


def test_shared_prefix_trace_matches_the_published_reuse_share_and_the_stacks_lengths() -> None:
    lengths = LengthProfile()
    trace = generate("shared-prefix", 0.5, 86400, 3, lengths, 32768)
    assert reuse_share(trace) == pytest.approx(PUBLISHED_SHARE, abs=0.02)
    mean_prompt = sum(r.prompt_tokens for r in trace) / len(trace)
    assert mean_prompt == pytest.approx(lengths.prompt_tokens, rel=0.05)
    follow_ups = [r for r in trace if len(r.prefix) > 2]  # system prompt, earlier turn(s), own prompt
    assert follow_ups, "a multi-turn trace has follow-up turns"
    # Every other profile's prompts share nothing.
    assert not any(r.prefix for r in generate("diurnal", 0.5, 3600, 3, lengths, 32768))


def test_prefix_cache_reuses_whole_blocks_and_leaves_the_last_token() -> None:
    cache = PrefixCache()
    chain = ((1, 100), (2, 300), (3, 400))
    assert cache.match(chain, 400) == 0
    cache.insert(chain, NO_LIMIT)
    # The whole prompt is cached, but its last token is computed: 399 tokens, in 16-token blocks.
    assert cache.match(chain, 400) == 384
    # Another prompt sharing the first two segments reuses 300 tokens -> 288 in whole blocks.
    assert cache.match(((1, 100), (2, 300), (9, 700)), 700) == 288
    # A chain that does not start with a cached segment reuses nothing.
    assert cache.match(((8, 100), (2, 300)), 300) == 0


def test_prefix_cache_evicts_least_recently_used_under_pressure() -> None:
    cache = PrefixCache()
    cache.insert(((1, 1000),), NO_LIMIT)
    cache.insert(((2, 1000),), NO_LIMIT)
    cache.insert(((1, 1000),), NO_LIMIT)  # 1 used again: 2 is now the oldest
    cache.insert(((3, 1000),), 2000)  # room for two segments
    assert cache.match(((2, 1000),), 2000) == 0
    assert cache.match(((1, 1000),), 2000) > 0
    assert cache.match(((3, 1000),), 2000) > 0


def test_a_prefix_hit_skips_its_prefill() -> None:
    # Two requests with the same 6,000-token prefix, the second after the first has finished: its
    # prefill is 2,000 tokens (one step) instead of 8,000 (four steps of 2,048).
    prefix = ((1, 6000),)
    trace = [
        Request(0.0, 8000, 5, (*prefix, (2, 8000))),
        Request(100.0, 8000, 5, (*prefix, (3, 8000))),
    ]
    out = Simulation(config(1), trace, 200.0, "one replica").run()
    assert out.completed == 2
    first, second = out.ttft
    step = 1 / 10  # one sequence alone: 10 tokens/s
    assert first == pytest.approx(4 * step)
    assert second == pytest.approx(1 * step)
    assert out.cached_prompt_tokens == 6000
    assert out.prompt_tokens == 16000


def test_without_shared_prefixes_nothing_is_cached() -> None:
    trace = [Request(0.0, 8000, 5), Request(100.0, 8000, 5)]
    out = Simulation(config(1), trace, 200.0, "one replica").run()
    assert out.cached_prompt_tokens == 0
    assert out.ttft[0] == pytest.approx(out.ttft[1])


def groups_trace(groups: int, per_group: int, rate: float, prefix: int, question: int) -> list[Request]:
    """The llm-d benchmark's workload shape (groups sharing one long prefix, unique questions),
    requests spread evenly in time, each from a group drawn at random (seeded)."""
    import random

    rng = random.Random(5)
    out = []
    n = groups * per_group
    for i in range(n):
        g = rng.randrange(groups) + 1
        out.append(Request(i / rate, prefix + question, 20, ((g, prefix), (1000 + i, prefix + question))))
    return out


def test_llm_d_routing_raises_hits_and_lowers_ttft_where_round_robin_scatters_prefixes() -> None:
    # 4 replicas, 8 groups of 6,000-token prefixes, each replica's cache room for 3 of them: behind
    # round robin every replica sees every group and thrashes; the router keeps groups together.
    trace = groups_trace(8, 25, 1.0, 6000, 500)
    router = RouterSpec(request_ttl_s=1e6, max_requests=NO_LIMIT)
    kv = 3 * 6000 + 2000
    rr = Simulation(config(4, kv_cache_tokens=kv), trace, 400.0, "round robin").run()
    llm = Simulation(config(4, kv_cache_tokens=kv, router=router), trace, 400.0, "llm-d").run()
    assert rr.completed == llm.completed == len(trace)
    rr_hits = rr.cached_prompt_tokens / rr.prompt_tokens
    llm_hits = llm.cached_prompt_tokens / llm.prompt_tokens
    assert llm_hits > rr_hits + 0.3
    assert sum(llm.ttft) < sum(rr.ttft)


def test_scorers_prefer_the_endpoint_that_was_sent_the_prefix_unless_it_is_loaded() -> None:
    spec = RouterSpec(request_ttl_s=60.0, max_requests=100)
    chain = ((1, 4096), (2, 4200))
    warm, cold = EndpointIndex(), EndpointIndex()
    warm.record(((1, 4096), (3, 4300)))
    import random

    rng = random.Random(0)
    idle = EndpointView(0, 0.1)
    # Equal load: the prefix decides, every time (ties would go either way at random).
    assert {pick(spec, [idle, idle], [cold, warm], chain, 4200, rng) for _ in range(20)} == {1}
    # Prefix (weight 3 x ~0.98) against queue (2 x 1) and KV cache (2 x 0.8): a long queue and a
    # full cache on the warm endpoint outweigh its prefix.
    busy = EndpointView(20, 0.9)
    assert pick(spec, [idle, busy], [cold, warm], chain, 4200, rng) == 0


def test_saturation_is_full_without_endpoints_and_follows_queue_and_cache() -> None:
    assert saturation([]) == 1.0
    # GIE v1.5.0 defaults: queue depth threshold 5, KV-cache threshold 0.8.
    assert saturation([EndpointView(5, 0.0)]) == pytest.approx(1.0)
    assert saturation([EndpointView(0, 0.4)]) == pytest.approx(0.5)


def router_queue_autoscaler(min_replicas: int, cooldown_s: float = 300.0) -> AutoscalerSpec:
    return AutoscalerSpec(
        "router-queue",
        "ScaledObject",
        max(min_replicas, 1),
        4,
        Behavior.from_spec(None),
        (MetricSpec(ROUTER_DEMAND, 8.0, 0.0),),
        keda_min_replicas=min_replicas,
        polling_interval_s=30.0,
        cooldown_s=cooldown_s,
    )


STARTUP = StartupTimes(node_s=100.0, image_s=50.0, weights_s=200.0)  # 350 s to ready on a new node


def test_router_queue_wakes_a_service_scaled_to_zero_after_a_start_up() -> None:
    spec = router_queue_autoscaler(0)
    router = RouterSpec(request_ttl_s=1000.0, max_requests=100)
    cfg = config(1, autoscaler=spec, fixed_replicas=None, startup=STARTUP, router=router)
    out = Simulation(cfg, [Request(100.0, 500, 5)], 2000.0, "from zero").run()
    assert out.completed == 1 and out.rejected == 0
    # The request waits for the router's next scrape (15 s) and KEDA's next poll (30 s), then a
    # node, the image and the weights (350 s); then its prefill (one step).
    (ttft,) = out.ttft
    assert 350.0 <= ttft <= 350.0 + 15.0 + 30.0 + 1.0


def test_behind_the_load_balancer_a_service_at_zero_refuses() -> None:
    spec = router_queue_autoscaler(0)
    cfg = config(1, autoscaler=spec, fixed_replicas=None, startup=STARTUP)
    out = Simulation(cfg, [Request(100.0, 500, 5)], 2000.0, "no router").run()
    assert out.completed == 0 and out.rejected == 1 and out.timed_out == 0


def test_a_request_held_past_the_router_ttl_gets_503() -> None:
    spec = router_queue_autoscaler(0, cooldown_s=3600.0)  # the woken replica stays for the second
    router = RouterSpec(request_ttl_s=120.0, max_requests=100)  # shorter than the 350 s start-up
    cfg = config(1, autoscaler=spec, fixed_replicas=None, startup=STARTUP, router=router)
    out = Simulation(cfg, [Request(100.0, 500, 5), Request(800.0, 500, 5)], 2000.0, "ttl").run()
    # The first request times out in the queue; the second finds the replica it woke.
    assert out.timed_out == 1 and out.rejected == 1
    assert out.completed == 1


def test_the_router_queue_refuses_past_max_requests() -> None:
    spec = router_queue_autoscaler(0)
    router = RouterSpec(request_ttl_s=1000.0, max_requests=3)
    cfg = config(1, autoscaler=spec, fixed_replicas=None, startup=STARTUP, router=router)
    trace = [Request(100.0 + i, 500, 5) for i in range(5)]
    out = Simulation(cfg, trace, 2000.0, "full").run()
    assert out.timed_out == 2
    assert out.completed == 3


def test_the_router_queue_trigger_is_read_from_its_query() -> None:
    obj = {
        "kind": "ScaledObject",
        "spec": {
            "minReplicaCount": 0,
            "maxReplicaCount": 4,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "query": promql.router_demand("deepseek"),
                        "threshold": "28",
                        "activationThreshold": "0",
                    },
                }
            ],
        },
    }
    spec = from_scaled_object(obj, "router-queue")
    assert spec.metrics == (MetricSpec(ROUTER_DEMAND, 28.0, 0.0),)
    assert spec.floor == 0


def test_plan_reports_the_routing_whatif() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "automation", "plan", "--stack", "dev", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    whatif = json.loads(done.stdout)["routing_whatif"]
    rr, llm = whatif["round_robin"], whatif["llm_d"]
    assert llm["prefix_cache_hit_rate"] > rr["prefix_cache_hit_rate"]
    assert llm["p90_ttft_s"] < rr["p90_ttft_s"]
    assert llm["gpu_hours"] == rr["gpu_hours"]  # one fixed fleet


def test_the_compare_whatif_runs_the_stack_with_and_without_the_router() -> None:
    from deepseek_eks.perf.simulate.routing import whatif
    from deepseek_eks.perf.simulate.run import TraceSpec, load_stack

    result = whatif("dev", TraceSpec(profile="diurnal", hours=1.0, seed=2))
    keda = load_stack("dev", {"autoscaling.signal": "concurrency"})
    # The TTL the router renders: KEDA's polling (as the stack's ScaledObject renders it) plus the
    # plan's rollout budget.
    assert result.request_ttl_s == keda.autoscaler.polling_interval_s + keda.plan["rollout_seconds"]
    # A trace without shared prefixes is rebuilt as conversations (and says so).
    assert "synthetic" in result.trace and result.reuse_share > 0.2
    rows = {r.label.split(", ", 1)[1] if ", " in r.label else r.label: r for r in result.rows}
    assert [r.routing.split(" ")[0] for r in result.rows] == ["load", "llm-d", "llm-d", "llm-d", "llm-d"]
    assert result.rows[-1].autoscaler.endswith("replicas 0-2")  # the scale-from-zero run
    assert rows["llm-d"].prefix_cache_hit_rate >= rows["load balancer"].prefix_cache_hit_rate
    doc = result.as_dict()
    assert len(doc["runs"]) == len(result.rows) and doc["prefix_reuse_share"] == round(result.reuse_share, 4)


def test_the_what_ifs_router_queue_autoscaler_is_the_one_the_program_renders() -> None:
    """The what-if derives router-queue from the stack's concurrency ScaledObject; now that
    routing.kind llm-d renders, that derivation must equal the rendered router-queue ScaledObject
    (trigger, threshold, activation, floor, polling, cooldown, behavior) for each floor it runs."""
    from deepseek_eks.perf.simulate.routing import router_queue_autoscaler
    from deepseek_eks.perf.simulate.run import load_stack

    concurrency = load_stack("dev", {"autoscaling.signal": "concurrency"})
    for floor in (1, 0):
        rendered = load_stack(
            "dev",
            {
                "routing.kind": "llm-d",
                "autoscaling.signal": "router-queue",
                "autoscaling.minReplicas": str(floor),
            },
        ).autoscaler
        derived = router_queue_autoscaler(concurrency.autoscaler, floor)
        assert derived.metrics == rendered.metrics, floor
        for field in (
            "keda_min_replicas",
            "min_replicas",
            "max_replicas",
            "polling_interval_s",
            "cooldown_s",
        ):
            assert getattr(derived, field) == getattr(rendered, field), (floor, field)
        assert derived.behavior == rendered.behavior, floor
