"""The simulator's queueing core against queueing theory, and its bookkeeping."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from deepseek_eks.perf.simulate.engine import TIMELINE_STEP_S, SimConfig, Simulation, StartupTimes
from deepseek_eks.perf.simulate.hpa import Behavior
from deepseek_eks.perf.simulate.replica import ReplicaModel, ThroughputCurve
from deepseek_eks.perf.simulate.stack import CONCURRENCY_TOTAL, QUEUE_TOTAL, AutoscalerSpec, MetricSpec
from deepseek_eks.perf.simulate.traffic import LengthProfile, Request, generate

NO_LIMIT = 10**9
SCHEDULER_FACTS = (
    Path(__file__).resolve().parents[2] / "reference/upstream/vllm-scheduler/scheduler-facts.json"
)


def erlang_c_wait(arrival_rate: float, service_rate: float, servers: int) -> float:
    """Mean wait in queue of M/M/c (Erlang C formula), computed here from first principles."""
    a = arrival_rate / service_rate
    rho = a / servers
    assert rho < 1
    tail = a**servers / math.factorial(servers) / (1 - rho)
    p_wait = tail / (sum(a**k / math.factorial(k) for k in range(servers)) + tail)
    return p_wait / (servers * service_rate - arrival_rate)


def fixed_config(servers: int, tokens_per_s: float, replicas: int = 1, **overrides: object) -> SimConfig:
    # A linear curve: each sequence decodes at tokens_per_s whatever the batch, so one replica
    # with max_num_seqs = c is c independent servers sharing one FIFO queue: M/M/c.
    curve = ThroughputCurve(((servers, tokens_per_s * servers),), "test: linear")
    replica = overrides.pop("replica", None) or ReplicaModel(curve, servers, NO_LIMIT, NO_LIMIT)
    return SimConfig.fixed_fleet(replica, replicas, replica_hourly_usd=1.0, **overrides)  # type: ignore[arg-type]


# Tolerance: 60,000 requests at 70 % load give the mean wait to within a few percent (waits are
# autocorrelated, so the effective sample is smaller than the count; seed 7 lands within 1.2 %);
# 5 % fails on any modelling error of the size of one server (c=3 instead of 4 more than
# doubles the wait) or a non-FIFO queue.
ERLANG_TOLERANCE = 0.05


@pytest.mark.parametrize("servers", [1, 4])
def test_mean_queue_wait_matches_erlang_c(servers: int) -> None:
    tokens_per_s, mean_output = 100.0, 1000  # service time 10 s on average, exponential
    service_rate = tokens_per_s / mean_output
    arrival_rate = 0.7 * servers * service_rate
    duration = 60_000 / arrival_rate
    trace = generate(
        "steady",
        arrival_rate,
        duration,
        seed=7,
        lengths=LengthProfile(1, mean_output),
        max_model_len=NO_LIMIT,
    )
    out = Simulation(fixed_config(servers, tokens_per_s), trace, duration, "mmc").run()
    assert out.completed > 0.99 * len(trace)
    measured = sum(out.queue_wait) / len(out.queue_wait)
    expected = erlang_c_wait(arrival_rate, service_rate, servers)
    assert measured == pytest.approx(expected, rel=ERLANG_TOLERANCE)
    # And the time in service is the exponential mean (Little-free check of the decode rate).
    service = [e - w for e, w in zip(out.e2e, out.queue_wait, strict=True)]
    assert sum(service) / len(service) == pytest.approx(1 / service_rate, rel=0.03)


def test_batching_curve_sets_the_decode_rate() -> None:
    # A curve of 20 tok/s for 1 sequence and 30 for 2: a step lasts 1/20 s alone, 1/15 s for two.
    # vLLM steps are discrete: A arrives first and its prefill step (alone, 0.05 s) is in flight
    # when B arrives, so B joins at the next step. A's token k comes at step k: steps 2..150 run
    # both (149 x 1/15 s); B's 150th token comes at step 151, alone again (0.05 s).
    curve_config = fixed_config(
        2, 20.0, replica=ReplicaModel(ThroughputCurve(((1, 20.0), (2, 30.0)), "t"), 2, NO_LIMIT, NO_LIMIT)
    )
    trace = [Request(0.0, 10, 150), Request(0.0, 10, 150)]
    out = Simulation(curve_config, trace, 100.0, "pair").run()
    a_done = 0.05 + 149 / 15
    assert out.e2e == pytest.approx([a_done, a_done + 0.05])
    assert out.ttft == pytest.approx([0.05, 0.05 + 1 / 15])
    assert out.output_tokens == 300


def test_kv_cache_limits_admission() -> None:
    # KV room for one 1,000-token sequence at a time, although max_num_seqs allows 4.
    config = fixed_config(
        4, 100.0, replica=ReplicaModel(ThroughputCurve(((1, 100.0), (4, 400.0)), "t"), 4, 1000, 1000)
    )
    trace = [Request(0.0, 500, 500), Request(0.0, 500, 500)]
    out = Simulation(config, trace, 100.0, "kv").run()
    assert sorted(out.queue_wait) == pytest.approx([0.0, 5.0])  # the second waits for the first's 5 s


def scale_to_zero_config() -> SimConfig:
    spec = AutoscalerSpec(
        "keda",
        "ScaledObject",
        min_replicas=1,
        max_replicas=3,
        behavior=Behavior.from_spec({"scaleDown": {"stabilizationWindowSeconds": 0}}),
        metrics=(MetricSpec(QUEUE_TOTAL, 2.0),),
        keda_min_replicas=0,
        polling_interval_s=15.0,
        cooldown_s=60.0,
    )
    return fixed_config(
        4,
        20.0,
        autoscaler=spec,
        fixed_replicas=None,
        initial_replicas=1,
        startup=StartupTimes(10.0, 5.0, 20.0),
        termination_grace_s=5.0,
    )


def test_every_request_is_accounted_for() -> None:
    # A burst makes KEDA scale up; when it ends, scale-down drains replicas whose 50 s streams
    # outlast the 5 s grace (cut); after the cooldown KEDA scales to zero, so the late requests
    # find no replica (rejected). Nothing may go missing.
    burst = generate("steady", 0.5, 600.0, seed=3, lengths=LengthProfile(100, 1000), max_model_len=NO_LIMIT)
    late = [Request(3000.0 + i, 100, 100) for i in range(20)]
    out = Simulation(scale_to_zero_config(), burst + late, 3600.0, "account").run()
    assert out.requests == len(burst) + len(late)
    assert out.completed + out.rejected + out.cut + out.in_flight == out.requests
    assert out.completed > 0 and out.cut > 0 and out.rejected >= len(late)
    assert max(row[1] for row in out.timeline) == 3  # it did scale up to maxReplicaCount
    assert out.timeline[-1][1] == 0  # and down to zero


def test_requests_still_running_at_the_end_are_in_flight() -> None:
    trace = [Request(0.0, 10, 1000), Request(1.0, 10, 10)]
    out = Simulation(fixed_config(1, 10.0), trace, 50.0, "cutoff").run()
    assert (out.completed, out.in_flight, out.rejected, out.cut) == (0, 2, 0, 0)


def test_cost_counts_every_node_second() -> None:
    trace = [Request(10.0, 10, 10)]
    out = Simulation(fixed_config(1, 10.0, replicas=2), trace, 3600.0, "cost").run()
    assert out.node_seconds == pytest.approx(2 * 3600.0)
    assert out.busy_seconds == pytest.approx(1.0)  # 10 tokens at 10 tok/s


def test_p95_ttft_over_time_buckets_by_arrival() -> None:
    from deepseek_eks.perf.simulate.run import p95_ttft_over_time

    # One server at 100 tok/s, 100-token requests: 1 s each. Two at t=0 (the second waits 1 s),
    # one alone at t=700.
    trace = [Request(0.0, 1, 100), Request(0.0, 1, 100), Request(700.0, 1, 100)]
    out = Simulation(fixed_config(1, 100.0), trace, 1000.0, "ttft").run()
    windows = p95_ttft_over_time(out, 600.0)
    assert [t for t, _ in windows] == [0.0, 600.0]
    # TTFTs 0.01 s and 1.01 s (waited 1 s, then one 10 ms decode step); the p95 interpolates at
    # rank 0.95 * (2 - 1): 0.01 + 0.95 * 1.0.
    assert windows[0][1] == pytest.approx(0.96)
    assert windows[1][1] == pytest.approx(0.01)


def test_chunked_prefill_spreads_a_long_prompt_over_steps() -> None:
    # vLLM 0.33.0 chunks a prefill within max_num_batched_tokens (its default, read from the
    # snapshot): a prompt of 2.5 budgets needs 3 steps before its first token. A step lasts
    # 1/100 s here (a curve of 100 tok/s for one sequence).
    facts = json.loads(SCHEDULER_FACTS.read_text())["facts"]
    budget = facts["max_num_batched_tokens_default_openai_server"]["tiers"][-1]["max_num_batched_tokens"]
    replica = ReplicaModel(
        ThroughputCurve(((1, 100.0),), "t"), 4, NO_LIMIT, NO_LIMIT, max_num_batched_tokens=budget
    )
    out = Simulation(
        fixed_config(4, 100.0, replica=replica), [Request(0.0, budget * 5 // 2, 10)], 60.0, "c"
    ).run()
    assert out.ttft == pytest.approx([0.03])
    assert out.e2e == pytest.approx([0.03 + 9 * 0.01])  # then one token per step


def test_a_full_cache_preempts_the_last_admitted_and_recomputes_it() -> None:
    # KV blocks of 16 tokens (vLLM's default block size, from the snapshot). Two requests of 160
    # prompt tokens each growing to 480: together they outgrow a 640-token cache, so vLLM preempts
    # the later one (``_preempt_request``), finishes the first and recomputes the second.
    block = json.loads(SCHEDULER_FACTS.read_text())["facts"]["block_size_default"]["value"]
    replica = ReplicaModel(ThroughputCurve(((1, 100.0), (2, 200.0)), "t"), 2, 40 * block, NO_LIMIT)
    trace = [Request(0.0, 160, 320), Request(0.001, 160, 320)]
    out = Simulation(fixed_config(2, 100.0, replica=replica), trace, 600.0, "p").run()
    assert out.completed == 2 and out.output_tokens == 640
    first, second = sorted(out.e2e)
    # Without preemption both would finish within one step of each other.
    assert second > first + 1.0
    roomy = ReplicaModel(ThroughputCurve(((1, 100.0), (2, 200.0)), "t"), 2, NO_LIMIT, NO_LIMIT)
    free = Simulation(fixed_config(2, 100.0, replica=roomy), trace, 600.0, "f").run()
    assert max(free.e2e) - min(free.e2e) < 0.05


def test_a_run_of_decode_steps_lasts_the_sum_of_its_steps() -> None:
    # The engine runs identical decode steps as one event; the KV each step reads grows by one
    # token (decode i reads the prompt and i tokens, the one it feeds included), so the run must
    # last the sum of the replica model's step times, step by step.
    from deepseek_eks.sizing.catalog import instance_catalog, model_catalog
    from deepseek_eks.sizing.memory import Quantization
    from deepseek_eks.sizing.performance import hardware, step_seconds

    hw = hardware(
        model_catalog()["r1-distill-qwen-7b"], Quantization.BF16, instance_catalog().instances["g6.xlarge"], 1
    )
    replica = ReplicaModel(ThroughputCurve(((1, 1.0),), "unused"), 4, NO_LIMIT, NO_LIMIT, hw)
    prompt, output = 100, 400
    out = Simulation(
        fixed_config(4, 1.0, replica=replica), [Request(0.0, prompt, output)], 600.0, "run"
    ).run()
    prefill = step_seconds(hw, prompt, prompt, prompt * prompt / 2, 1)
    decode = sum(step_seconds(hw, 1, prompt + i, prompt + i, 1) for i in range(1, output))
    assert out.ttft == pytest.approx([prefill], rel=1e-9)
    assert out.e2e == pytest.approx([prefill + decode], rel=1e-7)


def _steady_signal_run(metric: MetricSpec) -> list[int]:
    """Replica counts over two hours of steady load that keeps about 6 of a replica's 16 slots
    busy (nothing waits), under a KEDA ScaledObject on ``metric``."""
    spec = AutoscalerSpec(
        "keda",
        "ScaledObject",
        min_replicas=1,
        max_replicas=4,
        behavior=Behavior.from_spec(None),
        metrics=(metric,),
        keda_min_replicas=1,
        polling_interval_s=15.0,
        cooldown_s=300.0,
    )
    config = fixed_config(
        16,
        20.0,
        autoscaler=spec,
        fixed_replicas=None,
        initial_replicas=1,
        startup=StartupTimes(10.0, 5.0, 20.0),
    )
    # 0.12 requests/s of 50 s each (1,000 tokens at 20 tokens/s): 6 running on average (Little).
    trace = generate("steady", 0.12, 7200.0, seed=5, lengths=LengthProfile(10, 1000), max_model_len=NO_LIMIT)
    out = Simulation(config, trace, 7200.0, "steady").run()
    return [row[1] for row in out.timeline if row[0] >= 1800.0]  # after the first half hour


def test_concurrency_scales_on_running_requests_where_the_queue_signal_sees_nothing() -> None:
    # The same load against 3 requests per replica: about 6 running asks for 2 replicas; the
    # queue signal (1 waiting request per replica) never fires, since nothing waits.
    by_concurrency = _steady_signal_run(MetricSpec(CONCURRENCY_TOTAL, 3.0))
    by_queue = _steady_signal_run(MetricSpec(QUEUE_TOTAL, 1.0))
    assert set(by_queue) == {1}
    assert min(by_concurrency) >= 2 and sum(by_concurrency) / len(by_concurrency) >= 1.9


@pytest.mark.parametrize("spares", [0, 1])
def test_a_warm_spare_node_starts_the_next_replica_without_node_and_image_and_costs_its_time(
    spares: int,
) -> None:
    """autoscaling.warmSpareNodes: a scale-out takes a held node that is up with the image pulled,
    so the replica only loads (weights and engine); the preempted placeholder gets a new node,
    which is paid from the moment it is asked for, like the spare before it."""
    node_s, image_s, load_s, step_at, duration = 300.0, 100.0, 50.0, 100.0, 1000.0
    config = fixed_config(
        1,
        10.0,
        startup=StartupTimes(node_s, image_s, load_s),
        fixed_replicas=None,
        replica_plan=((0.0, 1), (step_at, 2)),
        warm_spare_nodes=spares,
        consolidate_after_s=30.0,
    )
    out = Simulation(config, [], duration, "spare").run()
    ready_at = min(t for t, _desired, ready, _queue, _rps in out.timeline if ready == 2)
    expected = step_at + load_s if spares else step_at + node_s + image_s + load_s
    assert expected <= ready_at < expected + TIMELINE_STEP_S  # the timeline samples each step
    # The fleet record has each change at its instant: asked for at the plan's step, Ready a
    # start-up later (what the twin loop compares its controllers' timings with).
    assert min(t for t, desired, _ready in out.fleet if desired == 2) == step_at
    assert min(t for t, _desired, ready in out.fleet if ready == 2) == pytest.approx(expected)
    assert out.fleet[0] == (0.0, 1, 1)
    # Node time: the first replica's node all along, the second's from the step (without spares),
    # or the spare all along and its replacement from the step.
    paid = duration + (duration - step_at) + (duration if spares else 0.0)
    assert out.node_seconds == pytest.approx(paid)
