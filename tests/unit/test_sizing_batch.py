"""--max-num-seqs from the length distribution: the largest batch whose chance of preemption, in
the simulator's own preemption model, stays under 1 % (issue 34 §2)."""

from __future__ import annotations

import random

import pytest

from deepseek_eks.perf.simulate import engine
from deepseek_eks.perf.simulate.traffic import LengthProfile
from deepseek_eks.sizing import performance
from deepseek_eks.sizing.performance import (
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    kv_blocks,
    preemption_probability,
)
from deepseek_eks.sizing.planner import PREEMPTION_TARGET, PlanRequest, plan, planned_max_num_seqs

KV_TOKENS = 87_556  # the dev plan's cache (r1-distill-qwen-7b on one L4)


def test_the_simulator_preempts_by_the_planners_function() -> None:
    # One function for both: the engine's block count is the planner's.
    assert engine.kv_blocks is performance.kv_blocks


def test_planned_batch_is_the_largest_under_the_target() -> None:
    b = planned_max_num_seqs(KV_TOKENS)
    assert preemption_probability(b, KV_TOKENS, PLAN_PROMPT_TOKENS, PLAN_OUTPUT_TOKENS) < PREEMPTION_TARGET
    assert (
        preemption_probability(b + 1, KV_TOKENS, PLAN_PROMPT_TOKENS, PLAN_OUTPUT_TOKENS) >= PREEMPTION_TARGET
    )
    # Far more than the old rule (the cache over 4,096 tokens a sequence: 21).
    assert b > KV_TOKENS // 4096
    # Never below the full-length sequences the cache must hold, never above the ceiling.
    assert planned_max_num_seqs(KV_TOKENS, min_full_length_sequences=60) == 60
    assert planned_max_num_seqs(10**9) == 256


@pytest.mark.parametrize("batch", [38, 45])
def test_probability_matches_the_simulators_length_draw(batch: int) -> None:
    """Running sequences seen at a random instant, drawn from the simulator's own lengths
    (traffic.LengthProfile, exponential): each request weighted by its output (the time it
    runs), at a uniform point of its output; preempted when the engine's block count of the
    batch exceeds the cache's blocks."""
    rng = random.Random(7)
    lengths = LengthProfile()
    pool = [lengths.draw(rng, 32768) for _ in range(20000)]
    weights = [o for _, o in pool]
    total_blocks = KV_TOKENS // performance.BLOCK_SIZE
    trials, over = 4000, 0
    for _ in range(trials):
        running = rng.choices(pool, weights, k=batch)
        tokens = sum(p + int(rng.random() * o) for p, o in running)
        over += kv_blocks(tokens, batch) > total_blocks
    expected = preemption_probability(batch, KV_TOKENS, PLAN_PROMPT_TOKENS, PLAN_OUTPUT_TOKENS)
    assert over / trials == pytest.approx(expected, abs=0.02 + 0.25 * expected)


def test_the_plan_runs_the_batch_and_does_not_preempt_at_it() -> None:
    p = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert p.feasible
    d = p.to_dict()  # type: ignore[union-attr]
    assert d["max_num_seqs"] == planned_max_num_seqs(d["kv_cache_tokens"], d["min_full_length_sequences"])
    assert d["vllm_args"][d["vllm_args"].index("--max-num-seqs") + 1] == str(d["max_num_seqs"])
    assert d["throughput_basis"]["concurrency"] == d["max_num_seqs"]
    assert not d["throughput_basis"]["preempted"]


def _saturated_run(max_num_seqs: int) -> tuple[int, int, int]:
    """Dev's replica (the 7B on one L4) behind a queue that never empties (Poisson at 1.3x its
    saturated rate, the simulator's exponential 500 / 1,162 lengths, two hours), with
    ``max_num_seqs`` as given: (requests completed, requests preempted, preemptions)."""
    from dataclasses import replace

    from deepseek_eks.perf.simulate.engine import SimConfig, Simulation
    from deepseek_eks.perf.simulate.replica import ReplicaModel, published_curve
    from deepseek_eks.perf.simulate.traffic import generate

    d = plan(PlanRequest("r1-distill-qwen-7b", ("g6",))).to_dict()  # type: ignore[union-attr]
    replica = replace(ReplicaModel.from_plan(d, published_curve(d)), max_num_seqs=max_num_seqs)
    rate = 1.3 * replica.saturated_tokens_per_s() / PLAN_OUTPUT_TOKENS
    duration = 2 * 3600.0
    trace = generate(
        "steady", rate, duration, seed=3, lengths=LengthProfile(), max_model_len=d["max_model_len"]
    )
    config = SimConfig.fixed_fleet(replica, 1)
    out = Simulation(config, trace, duration, f"max_num_seqs {max_num_seqs}").run()
    return out.completed, out.preempted_requests, out.preemptions


def test_the_simulator_counts_preemptions_and_the_planned_batch_preempts_about_the_target() -> None:
    """The rule bounds the chance that a full batch, seen at a random instant, outgrows the cache;
    the simulator runs the batch through time. At the planned batch a saturated replica preempts
    about the target's share of its requests (within a factor of four either way: two hours hold a
    few dozen), several times each once readmitted into a full cache; a batch a fifth smaller
    preempts none; one a quarter larger, far more."""
    planned = planned_max_num_seqs(KV_TOKENS)
    completed, preempted, preemptions = _saturated_run(planned)
    assert PREEMPTION_TARGET / 4 < preempted / completed < 4 * PREEMPTION_TARGET
    assert preemptions >= preempted
    assert _saturated_run(planned * 4 // 5)[1] == 0
    more = _saturated_run(planned * 5 // 4)
    assert more[1] / more[0] > 10 * PREEMPTION_TARGET
