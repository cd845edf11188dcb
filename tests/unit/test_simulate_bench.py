"""The benchmark's judging and page rewriting (the benchmark itself is not a timed test):
"beats" as DESIGN.md defines it, issue 22's goal, and the generated section between markers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from deepseek_eks.perf.simulate.bench import (
    BEGIN,
    CANDIDATES,
    END,
    Result,
    goal_rows,
    rewrite,
    robustness_rows,
)
from deepseek_eks.perf.simulate.run import (
    ORACLE_AT_MIN_REPLICAS,
    REACTIVE_BASELINE,
    ReactiveBaseline,
    Run,
    Summary,
    beats,
    beats_goal_first,
    goal_for,
    goal_misses,
)

BASE = Summary(
    label="x",
    autoscaler="",
    requests=100,
    completed=100,
    rejected=0,
    cut=0,
    in_flight=0,
    p50_ttft_s=0.1,
    p95_ttft_s=0.1,
    p95_queue_wait_s=0.0,
    ttft_slo_attainment=0.99,
    queue_slo_attainment=1.0,
    mean_replicas=1.0,
    peak_replicas=1,
    gpu_hours=100.0,
    gpu_utilization=0.5,
    cost_usd=1.0,
    usd_per_million_output_tokens=1.0,
    output_tokens=1,
)


def run(label: str, attainment: float, gpu_hours: float) -> Summary:
    return replace(BASE, label=label, ttft_slo_attainment=attainment, gpu_hours=gpu_hours)


def test_beats_is_more_requests_for_no_more_gpu_hours_or_as_many_for_fewer() -> None:
    assert beats(run("a", 0.99, 100), run("b", 0.98, 100))
    assert beats(run("a", 0.99, 90), run("b", 0.99, 100))
    assert not beats(run("a", 0.99, 100), run("b", 0.99, 100))  # a tie beats nobody
    assert not beats(run("a", 1.0, 101), run("b", 0.9, 100))  # better but dearer


def test_beats_goal_first_ranks_the_attainment_goal_before_gpu_hours() -> None:
    guide_at_100 = run("guide:hpa-gpu", 1.0, 300)
    assert beats_goal_first(run("a", 0.995, 90), guide_at_100)
    assert not beats(run("a", 0.995, 90), guide_at_100)  # DESIGN.md: 100 % beats any 99.5 %
    short_but_cheap = run("guide", 0.985, 90)
    assert beats_goal_first(run("a", 0.995, 100), short_but_cheap)
    assert not beats(run("a", 0.995, 100), short_but_cheap)
    assert not beats_goal_first(run("a", 0.995, 100), run("b", 0.999, 100))  # a tie on cost
    # Short of the goal, DESIGN.md's relation.
    assert beats_goal_first(run("a", 0.98, 90), run("b", 0.97, 100))
    assert not beats_goal_first(run("a", 0.98, 90), run("b", 0.995, 100))


def test_goal_misses_name_every_shortfall() -> None:
    oracle = run("oracle", 0.995, 100)
    guides = [run("guide:keda-queue", 0.5, 200), run("guide:hpa-gpu", 0.985, 140)]
    assert goal_misses(run("own", 0.99, 130), oracle, guides) == []
    misses = goal_misses(run("own", 0.98, 131), oracle, guides)
    assert misses == [
        "SLO met for 98.0% < 99%",
        "1.31x the oracle's GPU-hours > 1.3x",
        "does not beat guide:hpa-gpu",
    ]


def test_rewrite_replaces_only_the_generated_section(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(f"# Title\n\nprose\n\n{BEGIN}\nold tables\n{END}\n\nafter\n")
    rewrite(doc, f"{BEGIN}\nnew tables\n{END}")
    assert doc.read_text() == f"# Title\n\nprose\n\n{BEGIN}\nnew tables\n{END}\n\nafter\n"
    fresh = tmp_path / "fresh.md"
    fresh.write_text("# Only prose\n")
    rewrite(fresh, f"{BEGIN}\nt\n{END}")
    assert fresh.read_text().endswith(f"{BEGIN}\nt\n{END}\n") and "# Only prose" in fresh.read_text()


def _result(
    seed_attainment: float, seed_hours: float, hpa_gpu: float = 0.9, floored_hours: float | None = None
) -> Result:
    """dev on step (judged at 99 % and 1.3x) with the oracle at 100 GPU-h and guides it beats or
    not; with ``floored_hours``, also the oracle held to minReplicas, after the oracle."""
    runs = [
        run("dev: gpu-utilization", seed_attainment, seed_hours),
        run("guide:keda-queue", 0.5, 200),
        run("guide:hpa-gpu", hpa_gpu, 300),
        run("oracle", 0.995, 100),
    ]
    if floored_hours is not None:
        runs.append(run(ORACLE_AT_MIN_REPLICAS, 0.995, floored_hours))
    return Result("dev", "step", tuple(Run(s, None) for s in runs))  # type: ignore[arg-type]


def test_robustness_rows_give_the_range_and_the_seeds_that_meet_the_goal() -> None:
    per_seed = {1: [_result(0.995, 120)], 2: [_result(0.97, 110)], 3: [_result(0.999, 140)]}
    (row,) = robustness_rows(per_seed)[2:]
    cells = [c.strip() for c in row.strip("|").split("|")]
    # Seed 1 meets everything; seed 2 misses the SLO; seed 3 meets the SLO at 1.4x the oracle.
    assert cells == [
        "dev",
        "step",
        "dev: gpu-utilization",
        "97.0%-99.9%",
        "1.10-1.40",
        "2 of 3",
        "1 of 3",
        "1 of 3",
        "-",  # minReplicas 1: no oracle held to a floor
        "-",
    ]
    # A guide at exactly 100 %: nothing below it beats it by DESIGN.md's relation; goal-first,
    # the cheaper run at 99.5 % does.
    per_seed = {1: [_result(0.995, 120, hpa_gpu=1.0)], 2: [_result(0.995, 110, hpa_gpu=1.0)]}
    (row,) = robustness_rows(per_seed)[2:]
    assert [c.strip() for c in row.strip("|").split("|")][-4:-2] == ["0 of 2", "2 of 2"]


def test_a_floor_above_one_is_judged_against_the_oracle_held_to_it_too() -> None:
    """Where the stack's minReplicas is above 1, the same run is judged again against the oracle
    held to that floor: a run at 1.4x the plain oracle (it may drop to one replica) and 1.12x the
    floored one misses the goal against the first and meets it against the second."""
    per_seed = {1: [_result(0.995, 140, floored_hours=125)], 2: [_result(0.995, 120, floored_hours=120)]}
    (row,) = robustness_rows(per_seed)[2:]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4:] == ["1.20-1.40", "2 of 2", "1 of 2", "1 of 2", "1.00-1.12", "2 of 2"]
    (goal,) = goal_rows(per_seed[1])[2:]
    cells = [c.strip() for c in goal.strip("|").split("|")]
    assert cells[6:] == ["1.40", "misses: 1.40x the oracle's GPU-hours > 1.3x", "1.12, meets the goal"]
    assert goal_rows([_result(0.995, 140, floored_hours=105)])[2].endswith("| 1.33, misses |")


def test_goal_rows_judge_the_reactive_baseline_with_its_setting() -> None:
    bound = ReactiveBaseline(Run(run(REACTIVE_BASELINE, 0.995, 180), None), load=0.7, hold_s=600.0, floor=2)  # type: ignore[arg-type]
    result = replace(_result(0.995, 120), baseline=bound)
    rows = goal_rows([result])[2:]
    assert len(rows) == 2  # the stack's own autoscaler, then the baseline
    cells = [c.strip() for c in rows[1].strip("|").split("|")]
    assert cells[2] == "reactive baseline (load 0.7, hold 10 min, floor 2)"
    assert cells[3:7] == ["99.5%", "180", "100", "1.80"]
    assert cells[7] == "misses: 1.80x the oracle's GPU-hours > 1.3x"
    # Over several seeds it is one row, whatever setting each seed found.
    other = replace(bound, floor=3)
    per_seed = {1: [result], 2: [replace(result, baseline=other)]}
    labels = [r.split("|")[3].strip() for r in robustness_rows(per_seed)[2:]]
    assert labels == ["dev: gpu-utilization", REACTIVE_BASELINE]


def test_the_bursts_are_judged_at_97_percent_and_1_5x_the_oracle_every_other_trace_at_99_and_1_3() -> None:
    """Issue 34 §4: 4x bursts no reaction sees coming get a lower bar; the other traces do not."""
    oracle = run("oracle", 1.0, 100)
    guides = [run("guide:keda-queue", 0.5, 300), run("guide:hpa-gpu", 0.96, 300)]
    own = run("own", 0.975, 140)
    bursty = goal_for("bursty")
    assert goal_misses(own, oracle, guides, goal=bursty) == []
    assert goal_misses(own, oracle, guides, goal=goal_for("step")) == [
        "SLO met for 97.5% < 99%",
        "1.40x the oracle's GPU-hours > 1.3x",
    ]
    assert goal_misses(run("own", 0.975, 151), oracle, guides, goal=bursty) == [
        "1.51x the oracle's GPU-hours > 1.5x"
    ]
    # Goal first at the trace's attainment: at 97.5 % the run meets the bursts' goal and beats a
    # guide at 100 % that costs more; at 99 % it would not.
    guide_at_100 = run("guide:hpa-gpu", 1.0, 300)
    assert beats_goal_first(own, guide_at_100, attainment=bursty.attainment)
    assert not beats_goal_first(own, guide_at_100)


def test_every_candidate_names_what_the_example_stacks_change() -> None:
    """The example stacks set autoscaling.seasonal and targetKvCacheUsage: a candidate that left
    either out would inherit the stack's value and be judged as what its label does not say."""
    for stack, candidates in CANDIDATES.items():
        config = yaml.safe_load((PROJECT_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        named = {
            "autoscaling.seasonal",
            "autoscaling.targetKvCacheUsage",
            "autoscaling.targetConcurrencyShare",
        }
        changed = {k.removeprefix("deepseek-eks:") for k in config} & named
        assert "autoscaling.seasonal" in changed, stack
        for label, overrides in candidates.items():
            assert overrides.get("autoscaling.seasonal") == ("true" if "seasonal" in label else "false"), (
                stack,
                label,
            )
            kv = overrides.get("autoscaling.targetKvCacheUsage")
            assert kv == next((k for k in ("0.4", "0.6") if f"KV {k}" in label), "0.85"), (stack, label)
            share = overrides.get("autoscaling.targetConcurrencyShare")
            assert share == next((c for c in ("0.6", "0.85") if f"concurrency {c}" in label), "0.7"), (
                stack,
                label,
            )


def test_seeds_run_as_tasks_and_a_plan_without_figures_shows_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepseek_eks.perf.simulate import bench

    def fake(stack: str, trace: str, hours: float, seed: int) -> bench.Result:
        if stack == "r1":
            return bench.Result(stack, trace, skipped="no figures")
        return bench.Result(stack, trace, rate_rps=float(seed))

    monkeypatch.setattr(bench, "_run_one", fake)
    per_seed = bench.run_seeds(["dev", "r1"], ["step", "bursty"], 1.0, [1, 2])
    assert [(r.stack, r.trace, r.rate_rps) for r in per_seed[2]] == [
        ("dev", "step", 2.0),
        ("dev", "bursty", 2.0),
        ("r1", "step", 0.0),
    ]
    assert per_seed[1][0].rate_rps == 1.0


def test_jobs_must_be_positive() -> None:
    from deepseek_eks.perf.simulate import bench

    with pytest.raises(SystemExit):
        bench.main(["--jobs", "0"])


def test_a_run_that_preempted_gets_a_line_and_one_that_did_not_gets_none() -> None:
    from deepseek_eks.perf.simulate.run import preemption_lines

    calm = replace(BASE, label="calm")
    thrashing = replace(BASE, label="thrashing", preempted_requests=3, preemptions=11)
    assert preemption_lines([calm, thrashing]) == [
        "preempted: thrashing: 3 of 100 requests (3.00%), 11 preemptions in all"
    ]
    once = replace(BASE, label="once", preempted_requests=1, preemptions=1)
    assert preemption_lines([once]) == ["preempted: once: 1 of 100 requests (1.00%), 1 preemption in all"]
    assert thrashing.as_dict()["preempted_requests"] == 3 and thrashing.as_dict()["preemptions"] == 11
