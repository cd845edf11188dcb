"""Capacity planning (``python -m sizing capacity``): Erlang C from first principles."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from deepseek_eks.components.versions import VLLM_RELEASE
from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
from deepseek_eks.sizing.capacity import (
    SLO_QUANTILE,
    capacity,
    erlang_c,
    highest_rate,
    kv_slots,
    p_ttft_above,
    replicas_for,
)
from deepseek_eks.sizing.cli import main
from deepseek_eks.sizing.measured import (
    REPLICA_SETTINGS,
    LoadTestReportError,
    Measurement,
    ReplicaSetup,
    read_load_test,
    refit,
)
from tests.measured import load_test_points, slower_replica


def erlang_c_textbook(c: int, a: float) -> float:
    """P(wait) in M/M/c: (a^c / c!) (c / (c - a)) over the same plus sum_{k<c} a^k / k!."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("c", "a"), [(1, 0.5), (2, 1.0), (10, 7.5), (40, 36.0)])
def test_erlang_c_matches_the_textbook_formula(c: int, a: float) -> None:
    assert erlang_c(c, a) == pytest.approx(erlang_c_textbook(c, a))


def test_recommended_count_is_the_least_that_meets_the_p95() -> None:
    slo, prefill, service, slots = 5.0, 0.5, 80.0, 20
    for rate in (0.1, 0.5, 1.0, 3.0):
        n = replicas_for(rate, slo, prefill, service, slots)
        assert p_ttft_above(slo, prefill, rate, service, n * slots) <= 1 - SLO_QUANTILE
        if n > 1:
            assert p_ttft_above(slo, prefill, rate, service, (n - 1) * slots) > 1 - SLO_QUANTILE


def test_capacity_grows_with_the_peak_and_the_cli_answers(capsys: pytest.CaptureFixture[str]) -> None:
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    low = capacity(sized, 0.2, 0.2, 5.0)
    high = capacity(sized, 0.2, 2.0, 5.0)
    assert high.max_replicas > low.max_replicas >= low.min_replicas >= 1
    # The peak needs at least its offered load in slots: rate x service time.
    assert high.max_replicas * high.slots_per_replica >= 2.0 * high.service_s
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.2"]
    assert main([*argv, "--peak-rate", "2", "--ttft-slo", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_replicas"] == high.max_replicas
    assert main([*argv, "--peak-rate", "0.1", "--ttft-slo", "0"]) == 2
    err = capsys.readouterr().err
    assert "--peak-rate 0.1: below --rate" in err and "--ttft-slo 0.0" in err


@pytest.mark.parametrize("replicas", [1, 2, 5])
def test_highest_rate_is_the_inverse_of_the_replica_count(replicas: int) -> None:
    # The simulator's default load is the highest rate a ceiling serves: just below it that many
    # replicas suffice, just above it one more is needed (at the same quantile).
    prefill, service, slots = 0.3, 60.0, 16
    top = highest_rate(replicas, 5.0, prefill, service, slots, 0.99)
    assert top > 0
    assert p_ttft_above(5.0, prefill, top * 0.999, service, replicas * slots) <= 0.01
    assert p_ttft_above(5.0, prefill, top * 1.001, service, replicas * slots) > 0.01
    # A stricter quantile serves less; an SLO shorter than the prefill serves nothing.
    assert highest_rate(replicas, 5.0, prefill, service, slots, SLO_QUANTILE) > top
    assert highest_rate(replicas, 0.2, prefill, service, slots) == 0.0


def _held_at(rng: random.Random, slots: int, prompt: float, output: float, at: float) -> int:
    """KV tokens ``slots`` always-busy slots hold at time ``at`` (in decode steps): each slot runs
    requests back to back from time 0, one token per step, each holding its prompt plus what it
    has generated. Drawn mechanically, so the inspection paradox shows up by itself."""
    total = 0
    for _ in range(slots):
        start = 0.0
        while True:
            p = max(1, round(rng.expovariate(1 / prompt)))
            o = max(1, round(rng.expovariate(1 / output)))
            if start + o > at:
                total += p + int(at - start)
                break
            start += o
    return total


@pytest.mark.parametrize("output", [1162, 4648])
def test_kv_slots_keep_the_running_batch_within_the_cache_at_the_slo_quantile(output: int) -> None:
    # The planned 7B on one L4 (reasoning-length outputs make the KV cache, not max_num_seqs, the
    # limit). At a random moment of a saturated replica, kv_slots sequences overflow the cache at
    # most about 5 % of the time; the sequences M/M/c's mean-length count would admit, far more.
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    limits = sized.scheduler_limits
    slots = kv_slots(limits, 500, output)
    rng = random.Random(7)
    kv = limits.kv_blocks * limits.block_size

    def overflow(n: int) -> float:
        moments = [rng.uniform(20 * output, 40 * output) for _ in range(600)]
        return sum(_held_at(rng, n, 500, output, t) > kv for t in moments) / len(moments)

    if slots == limits.max_num_seqs:  # the default lengths: max_num_seqs binds, not the cache
        assert output == 1162 and overflow(slots) < 0.01
        return
    assert overflow(slots) <= 0.08
    by_mean_length = kv // (500 + output // 2)  # what a fixed-length closed loop would hold
    assert by_mean_length > slots and overflow(min(by_mean_length, limits.max_num_seqs)) > 0.3


def test_capacity_rests_on_a_load_test_when_given_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica measured slower than the bundled fit (tests/measured.py): --load-test refits the
    model to the report, and the replica counts are the ones that replica needs, more than the
    bundled fit's."""
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    truth = slower_replica(sized.hardware)
    report = tmp_path / "loadtest.json"
    # At vllm bench serve's usual prefill-heavy 1,024 in / 128 out, not the planning lengths.
    report.write_text(json.dumps({"points": load_test_points(truth, sized.scheduler_limits, 1024, 128)}))
    expected = capacity(sized, 0.5, 3.0, 5.0, measured=truth)
    bundled = capacity(sized, 0.5, 3.0, 5.0)
    assert expected.max_replicas > bundled.max_replicas  # the case tells the two apart
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    assert main([*argv, "--peak-rate", "3", "--ttft-slo", "5", "--load-test", str(report), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["min_replicas"], out["max_replicas"]) == (expected.min_replicas, expected.max_replicas)
    assert out["throughput_source"].startswith("calibrated to measured: loadtest.json")
    assert out["replica_requests_per_second_at_saturation"] == pytest.approx(
        expected.replica_requests_per_second, rel=0.05
    )


def test_capacity_refuses_a_file_that_is_not_a_load_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runtime-overhead calibration (python -m sizing calibrate) handed to --load-test is named
    as such, with where it belongs; the load-test report handed to python -m sizing
    --calibration, the other way round; and a load test of another model is refused."""
    overhead = tmp_path / "calibration.json"
    overhead.write_text(json.dumps({"about": "runtime overhead", "entries": []}))
    argv = [
        "capacity",
        "--variant",
        "r1-distill-qwen-7b",
        "--families",
        "g6",
        "--rate",
        "0.5",
        "--ttft-slo",
        "5",
    ]
    assert main([*argv, "--load-test", str(overhead)]) == 2
    err = capsys.readouterr().err
    assert "is a runtime-overhead calibration" in err and "python -m sizing --calibration" in err
    report = tmp_path / "loadtest.json"
    point = {"concurrency": 4, "output_tokens_per_s": 100.0}
    report.write_text(json.dumps({"points": [point]}))
    assert main(["--variant", "r1-distill-qwen-7b", "--families", "g6", "--calibration", str(report)]) == 2
    err = capsys.readouterr().err
    assert "is a load-test report" in err and "sizing capacity --load-test" in err
    # A load test of another model (its report's config.model: the served name is the variant).
    report.write_text(json.dumps({"config": {"model": "r1-distill-llama-70b"}, "points": [point]}))
    assert main([*argv, "--load-test", str(report)]) == 2
    err = capsys.readouterr().err
    assert "measured r1-distill-llama-70b (its report's config.model), not r1-distill-qwen-7b" in err


def test_a_load_test_is_refitted_under_the_max_num_seqs_its_replica_ran_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica load tested with --max-num-seqs 8 (below the plan's): at concurrency 16 and 32
    only 8 sequences ran and the rest queued. The refit runs the model under the report's 8, so the
    counts are the slower replica's; under the plan's limit those saturated points would read as
    a replica slower still. With the report silent, a note says what was assumed."""
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    limits = sized.scheduler_limits
    assert limits.max_num_seqs > 8
    ran = replace(limits, max_num_seqs=8)
    truth = slower_replica(sized.hardware)
    deployed = {key: sized.to_dict()[key] for key in REPLICA_SETTINGS}  # loadtest --stack records it
    # ...and the server's GET /version the release it runs.
    setup = {**deployed, "model": "r1-distill-qwen-7b", "max_num_seqs": 8, "vllm_version": VLLM_RELEASE}
    points = load_test_points(truth, ran, 1024, 128)
    report = tmp_path / "loadtest.json"
    report.write_text(json.dumps({"config": setup, "points": points}))
    expected = capacity(sized, 0.5, 3.0, 5.0, measured=truth)
    misread = capacity(
        sized,
        0.5,
        3.0,
        5.0,
        measured=refit(
            sized.hardware,
            limits,
            [
                replace(m, setup=replace(m.setup, max_num_seqs=None))
                for m in read_load_test(report, "--load-test")
            ],
            "under the plan's limits",
        ),
    )
    assert misread.max_replicas > expected.max_replicas  # the case tells the two apart
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    argv += ["--peak-rate", "3", "--ttft-slo", "5", "--load-test", str(report), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (out["min_replicas"], out["max_replicas"]) == (expected.min_replicas, expected.max_replicas)
    assert "does not say" not in captured.err  # the report says all the refit needs
    assert f"ran with --max-num-seqs 8 and the one answered for has {sized.max_num_seqs}" in captured.err
    # The same points from a report that records neither: taken as the plan's, and said so.
    report.write_text(json.dumps({"points": load_test_points(truth, limits, 1024, 128)}))
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"does not say which instance type it ran on: taken as {sized.instance_type}" in err
    assert f"does not say the replica's --max-num-seqs: taken as {limits.max_num_seqs}" in err


def test_a_load_test_on_another_instance_type_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    other = "g6e.12xlarge"
    assert other != sized.instance_type
    report = tmp_path / "loadtest.json"
    point = {"concurrency": 4, "output_tokens_per_s": 100.0, "prompt_tokens": 500, "output_tokens": 1162}
    report.write_text(json.dumps({"config": {"instance_type": other}, "points": [point]}))
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    assert main([*argv, "--ttft-slo", "5", "--load-test", str(report)]) == 2
    err = capsys.readouterr().err
    assert f"ran on {other} (its report's config.instance_type), not {sized.instance_type}" in err
    # A larger size of the same family: the same L4 and no interconnect for a one-GPU replica
    # (g6.2xlarge differs from g6.xlarge in CPUs and memory only), so its speed is this replica's.
    same = "g6.2xlarge"
    assert sized.instance_type == "g6.xlarge"
    report.write_text(json.dumps({"config": {"instance_type": same}, "points": [point]}))
    assert main([*argv, "--ttft-slo", "5", "--load-test", str(report)]) == 0
    # ... which the command says, with what the replica model does not see.
    err = capsys.readouterr().err
    assert f"note: --load-test {report}: the load test ran on {same}: taken as g6.xlarge's replica" in err
    assert "their vCPUs and memory differ" in err
    # A malformed record is named, not ignored.
    report.write_text(json.dumps({"config": {"max_num_seqs": "many"}, "points": [point]}))
    assert main([*argv, "--ttft-slo", "5", "--load-test", str(report)]) == 2
    assert "config.max_num_seqs 'many': must be a whole number, at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("recorded", "named"),
    [
        ({"tensor_parallel_size": 2}, "tensor_parallel_size 2"),
        ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype fp8"),
        ({"quantization": "fp8"}, "quantization fp8"),
        ({"pipeline_parallel_size": 2}, "pipeline_parallel_size 2"),
    ],
)
def test_a_load_test_of_a_replica_deployed_otherwise_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded: dict[str, object], named: str
) -> None:
    """The 7B planned on one L4 (TP 1, bf16, a 16-bit KV cache): a report that records another
    parallelism, weight format or KV-cache type measured another deployment, whose speed the
    refit would take for this one's. Refused, naming what it ran with and what is answered for."""
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    deployed = {key: sized.to_dict()[key] for key in REPLICA_SETTINGS}
    (key,) = recorded
    assert deployed[key] != recorded[key]  # the case differs from the plan
    report = tmp_path / "loadtest.json"
    point = {"concurrency": 4, "output_tokens_per_s": 100.0, "prompt_tokens": 500, "output_tokens": 1162}
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    argv += ["--ttft-slo", "5", "--load-test", str(report)]
    report.write_text(json.dumps({"config": {**deployed, **recorded}, "points": [point]}))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"ran with {named} (its report's config)" in err
    assert f"answered for has {key} {deployed[key]}" in err and "loadtest --stack" in err
    # The same report recording the plan's own settings (and release) is taken, with nothing assumed.
    report.write_text(json.dumps({"config": {**deployed, "vllm_version": VLLM_RELEASE}, "points": [point]}))
    assert main(argv) == 0
    assert "does not say" not in capsys.readouterr().err


def test_a_load_test_that_records_no_engine_settings_says_what_it_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "loadtest.json"
    point = {"concurrency": 4, "output_tokens_per_s": 100.0, "prompt_tokens": 500, "output_tokens": 1162}
    report.write_text(json.dumps({"config": {"quantization": "bf16"}, "points": [point]}))
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    assert main([*argv, "--ttft-slo", "5", "--load-test", str(report)]) == 0
    err = capsys.readouterr().err
    assert "does not say the replica's tensor_parallel_size (taken as 1)" in err
    assert "kv_cache_dtype (taken as auto)" in err and "quantization (taken" not in err
    # A recorded value no replica runs with is named, as the report's.
    report.write_text(json.dumps({"config": {"quantization": "int8"}, "points": [point]}))
    assert main([*argv, "--ttft-slo", "5", "--load-test", str(report)]) == 2
    assert "config.quantization 'int8': must be one of bf16, fp8, awq-int4" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("ran_on", "same"),
    [
        ("g6e.24xlarge", True),  # the same four L40S on PCIe; more CPUs and memory
        ("g6e.48xlarge", True),  # eight of them: room for the TP-4 replica
        ("g6e.xlarge", False),  # one L40S: no room for TP 4
        ("p5.48xlarge", False),  # H100 on NVSwitch
    ],
)
def test_the_instance_type_check_judges_the_replica_s_hardware(ran_on: str, same: bool) -> None:
    """The 70B's TP-4 replica planned on g6e.12xlarge: a load test on another size with the same
    GPUs and interconnect measured the same replica (the replica model cannot tell them apart)."""
    sized = plan(PlanRequest("r1-distill-llama-70b", ("g6e",)))
    assert isinstance(sized, SizingPlan) and sized.instance_type == "g6e.12xlarge"
    assert sized.tensor_parallel_size == 4
    measured = Measurement(4, 60.0, 500, 1162, True, "test", setup=ReplicaSetup(instance_type=ran_on))
    limits = sized.scheduler_limits
    if same:
        refit(sized.hardware, limits, [measured], "test", sized.instance_type)
    else:
        with pytest.raises(
            LoadTestReportError, match=f"ran on {ran_on} .* other GPUs or another interconnect"
        ):
            refit(sized.hardware, limits, [measured], "test", sized.instance_type)


@pytest.mark.parametrize(
    ("point", "words"),
    [
        ({"concurrency": 1, "output_tokens_per_s": 0.0}, "output_tokens_per_s 0.0: a point must measure"),
        ({"concurrency": 1, "output_tokens_per_s": "nan"}, "output_tokens_per_s 'nan'"),
        ({"concurrency": 0, "output_tokens_per_s": 50.0}, "concurrency must be a whole number .* got 0"),
        ({"concurrency": 2.5, "output_tokens_per_s": 50.0}, "got 2.5"),
        ({"concurrency": 4, "output_tokens_per_s": 50.0, "prompt_tokens": math.inf}, "prompt_tokens must be"),
    ],
)
def test_a_point_that_measured_nothing_is_refused_naming_it(
    tmp_path: Path, point: dict[str, object], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A load test whose requests all failed still writes its report (output 0 tok/s): the refit
    would divide by it. Every command that reads one refuses it, naming the file and the point."""
    report = tmp_path / "loadtest.json"
    report.write_text(json.dumps({"points": [point]}))
    with pytest.raises(LoadTestReportError, match=words):
        read_load_test(report, "--load-test")
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    assert main([*argv, "--ttft-slo", "5", "--load-test", str(report)]) == 2
    assert f"error: --load-test {report}" in capsys.readouterr().err


def test_the_report_of_a_load_test_where_nothing_completed_is_refused(tmp_path: Path) -> None:
    from deepseek_eks.perf.loadtest.runner import LoadTestConfig, report

    config = LoadTestConfig(url="http://127.0.0.1:1", model="r1-distill-qwen-7b", max_requests=1)
    written = report(config, [], 10.0, 0, 0.0)
    path = tmp_path / "loadtest.json"
    path.write_text(json.dumps(written))
    with pytest.raises(LoadTestReportError, match="no request completed"):
        read_load_test(path, "--calibration")


def test_a_load_no_replica_count_serves_is_infeasible_and_a_bad_number_is_a_bad_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both capacity commands keep the exit-code table: no count meets the SLO (one below a
    request's prefill, or a rate beyond the search) is an infeasible load, 1; a rate that is not a
    positive number is a bad option, 2, named."""
    from deepseek_eks.automation.cli import main as automation_main

    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    assert main([*argv, "--ttft-slo", "0.01"]) == 1
    assert "below one request's prefill alone" in capsys.readouterr().err
    assert automation_main(["capacity", "--stack", "dev", "--rate", "0.5", "--ttft-slo", "0.01"]) == 1
    assert "below one request's prefill alone" in capsys.readouterr().err
    for bad in ("nan", "inf", "-1"):
        assert main([*argv[:-1], bad, "--ttft-slo", "5"]) == 2
        assert f"--rate {float(bad)}: must be a positive number" in capsys.readouterr().err
        assert automation_main(["capacity", "--stack", "dev", "--rate", bad]) == 2
        assert f"--rate {float(bad)}: must be a positive number" in capsys.readouterr().err


def test_requests_the_replica_cannot_hold_are_refused_not_counted(capsys: pytest.CaptureFixture[str]) -> None:
    """Longer than the context: vLLM refuses them (a bad option, 2). One mean request outgrowing the
    KV cache at the SLO quantile: no replica count serves it (1). Neither is answered with a count."""
    from deepseek_eks.automation.cli import main as automation_main
    from deepseek_eks.sizing.capacity import NoReplicaCount
    from deepseek_eks.sizing.performance import SchedulerLimits

    long = ["--prompt-tokens", "200000", "--output-tokens", "30000"]
    assert automation_main(["capacity", "--stack", "dev", "--rate", "0.01", "--ttft-slo", "600", *long]) == 2
    err = capsys.readouterr().err
    assert "= 230000 exceeds the replica's context, max_model_len 32768" in err
    assert "autoscaling.maxReplicas" not in err
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.01"]
    assert main([*argv, "--ttft-slo", "600", *long]) == 2
    assert "exceeds the replica's context" in capsys.readouterr().err
    limits = SchedulerLimits(max_num_seqs=40, max_num_batched_tokens=2048, kv_cache_tokens=16_000)
    assert kv_slots(limits, 2000, 2000) >= 1  # one fits with room at its 95th percentile
    with pytest.raises(NoReplicaCount, match="outgrows the replica's KV cache"):
        kv_slots(limits, 6000, 6000)


def test_the_saturation_figures_are_the_queue_model_s(capsys: pytest.CaptureFixture[str]) -> None:
    """Where the KV cache holds fewer long requests than max_num_seqs, a replica's throughput at
    saturation is that of the slots the counts rest on, so rate / per-replica throughput never asks
    for more replicas than the answer gives; at the planning lengths it is the plan's own figure."""
    from deepseek_eks.automation.cli import main as automation_main

    argv = ["capacity", "--stack", "dev", "--rate", "0.05", "--json"]
    assert automation_main([*argv, "--prompt-tokens", "4000", "--output-tokens", "4000"]) == 0
    long = json.loads(capsys.readouterr().out)
    per_replica = long["slots_per_replica"] / long["service_seconds"]
    assert long["replica_requests_per_second_at_saturation"] == pytest.approx(per_replica, rel=0.01)
    assert 0.05 / long["replica_requests_per_second_at_saturation"] <= long["min_replicas"]
    assert automation_main(argv) == 0
    planned = json.loads(capsys.readouterr().out)
    from deepseek_eks.automation.api import prepare

    sized = prepare("dev").plan
    assert planned["slots_per_replica"] == sized.max_num_seqs
    assert planned["usd_per_million_output_tokens"] == pytest.approx(
        sized.usd_per_million_output_tokens, abs=1e-3
    )
