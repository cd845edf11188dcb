"""The simulator reads the autoscaler the stack renders (never its own copy of the thresholds),
its figures move when the rendered thresholds move, runs are reproducible from a seed, and the
command line reports bad input with the right exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eks.automation.render import render
from deepseek_eks.perf.simulate import cli
from deepseek_eks.perf.simulate.hpa import Behavior
from deepseek_eks.perf.simulate.run import (
    ORACLE_AT_MIN_REPLICAS,
    TraceSpec,
    build_trace,
    compare,
    load_stack,
    simulate,
)
from deepseek_eks.perf.simulate.stack import GPU_TOTAL, QUEUE_TOTAL, duration_s
from deepseek_eks.perf.simulate.traffic import LengthProfile, TraceError, read_csv

from ..conftest import stack_config

# prod on the combined signal (queue depth and GPU utilization), without the seasonal floor:
# two triggers of different kinds whose thresholds the tests move.
COMBINED = {
    "autoscaling.signal": "combined",
    "autoscaling.seasonal": "false",
    "autoscaling.queueDepthPerReplica": "3",
}


@pytest.fixture(scope="module")
def prod_render():
    return render(stack_config("prod", **{k.replace(".", "__"): v for k, v in COMBINED.items()}))


def test_autoscaler_is_the_rendered_scaled_object(prod_render) -> None:
    inputs = load_stack("prod", COMBINED)
    rendered = next(o for o in prod_render.objects() if o["kind"] == "ScaledObject")["spec"]
    spec = inputs.autoscaler
    assert spec.kind == "ScaledObject"
    by_measure = {m.measures: m for m in spec.metrics}
    triggers = {t["name"]: t["metadata"] for t in rendered["triggers"]}
    assert by_measure[QUEUE_TOTAL].target == float(triggers["queue-depth"]["threshold"]) == 3.0
    assert by_measure[QUEUE_TOTAL].activation == float(triggers["queue-depth"]["activationThreshold"])
    assert by_measure[GPU_TOTAL].target == float(triggers["gpu-utilization"]["threshold"])
    assert (spec.keda_min_replicas, spec.max_replicas) == (
        rendered["minReplicaCount"],
        rendered["maxReplicaCount"],
    )
    assert (spec.polling_interval_s, spec.cooldown_s) == (
        rendered["pollingInterval"],
        rendered["cooldownPeriod"],
    )
    behavior = rendered["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert spec.behavior == Behavior.from_spec(behavior)
    assert spec.behavior.scale_down.stabilization_s == behavior["scaleDown"]["stabilizationWindowSeconds"]


def test_stack_facts_come_from_the_render(prod_render) -> None:
    inputs = load_stack("prod", COMBINED)
    objects = {o["kind"]: o for o in prod_render.objects()}
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert inputs.facts.termination_grace_s == pod["terminationGracePeriodSeconds"]
    monitor = objects["PodMonitor"]["spec"]["podMetricsEndpoints"][0]
    assert inputs.facts.vllm_scrape_s == duration_s(monitor["interval"])
    gpu_pool = next(
        o
        for o in prod_render.objects()
        if o["kind"] == "NodePool" and "nvidia.com/gpu" in o["spec"].get("limits", {})
    )
    assert inputs.facts.consolidate_after_s == duration_s(gpu_pool["spec"]["disruption"]["consolidateAfter"])


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15), ("10m", 600), ("1h30m", 5400), (30, 30)])
def test_durations(text: str | int, seconds: float) -> None:
    assert duration_s(text) == seconds


def short_trace(inputs, seed: int = 5):
    return build_trace(TraceSpec(profile="bursty", hours=6, seed=seed), inputs, _curve(inputs))


def _curve(inputs):
    from deepseek_eks.perf.simulate.replica import published_curve

    return published_curve(inputs.plan)


def test_figures_move_when_the_queue_threshold_moves() -> None:
    # One replica at the floor, so that the threshold alone decides when a second one comes.
    base = {"autoscaling.signal": "queue-depth", "autoscaling.minReplicas": "1"}
    low = load_stack("prod", {**base, "autoscaling.queueDepthPerReplica": "1"})
    high = load_stack("prod", {**base, "autoscaling.queueDepthPerReplica": "50"})
    trace, duration, _ = short_trace(low)
    eager = simulate(low, trace, duration).summary
    lazy = simulate(high, trace, duration).summary
    assert eager.requests == lazy.requests
    # A lower waiting-requests threshold asks for more replicas sooner: more GPU-hours, shorter waits.
    assert eager.gpu_hours > lazy.gpu_hours
    assert eager.p95_queue_wait_s < lazy.p95_queue_wait_s


def test_figures_move_when_the_gpu_target_moves() -> None:
    # Near-idle traffic: the busy fraction sits between the two targets.
    base = {"autoscaling.signal": "gpu-utilization", "autoscaling.minReplicas": "1"}
    low = load_stack("prod", {**base, "autoscaling.targetGpuUtilization": "10"})
    high = load_stack("prod", {**base, "autoscaling.targetGpuUtilization": "90"})
    spec = TraceSpec(profile="steady", hours=6, rate_rps=0.01, seed=2, lengths=LengthProfile(200, 400))
    trace, duration, _ = build_trace(spec, low, _curve(low))
    assert (
        simulate(low, trace, duration).summary.gpu_hours > simulate(high, trace, duration).summary.gpu_hours
    )


def test_compare_is_reproducible_with_a_seed() -> None:
    spec = TraceSpec(profile="bursty", hours=3, seed=11)
    first, rate, _ = compare("prod", spec)
    again, rate_again, _ = compare("prod", spec)
    other, _, _ = compare("prod", TraceSpec(profile="bursty", hours=3, seed=12))
    assert [r.summary for r in first] == [r.summary for r in again] and rate == rate_again
    assert [r.summary for r in first] != [r.summary for r in other]
    labels = [r.summary.label for r in first]
    # DESIGN.md runs[]: the stack's own autoscaler, the other signals, the guides, the fixed
    # fleets, the oracle.
    assert labels[:7] == [
        "prod: concurrency",
        "gpu-utilization",
        "queue-depth",
        "combined",
        "kv-cache",
        "guide:keda-queue",
        "guide:hpa-gpu",
    ]
    assert labels[7] == "fixed:1" and all(x.startswith("fixed:") for x in labels[7:-2])
    # prod's minReplicas is 2: the oracle held to it joins after the oracle.
    assert labels[-2:] == ["oracle", ORACLE_AT_MIN_REPLICAS]


def test_csv_traces(tmp_path: Path) -> None:
    per_request = tmp_path / "requests.csv"
    per_request.write_text("arrival_s,prompt_tokens,output_tokens\n5,100,200\n1,50,60\n")
    requests, duration = read_csv(per_request, 1, LengthProfile(), 32768)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in requests] == [
        (1.0, 50, 60),
        (5.0, 100, 200),
    ]
    assert duration == 6.0
    schedule = tmp_path / "schedule.csv"
    schedule.write_text("start_s,rate_rps\n0,0\n1000,2\n2000,0\n")
    requests, duration = read_csv(schedule, 1, LengthProfile(), 32768)
    assert duration == 3000.0
    assert all(1000 <= r.arrival_s < 2000 for r in requests)
    assert 1800 < len(requests) < 2200  # Poisson at 2/s for 1000 s: 2000 +- 3 sigma
    bad = tmp_path / "bad.csv"
    bad.write_text("when,what\n1,2\n")
    with pytest.raises(TraceError, match="expected arrival_s"):
        read_csv(bad, 1, LengthProfile(), 32768)


def test_cli_compare_writes_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["--stack", "prod", "--compare", "--hours", "2", "--seed", "3", "--out", str(tmp_path)]) == 0
    )
    printed = capsys.readouterr().out
    assert "guide:keda-queue" in printed and "$/M out tok" in printed
    report = json.loads((tmp_path / "prod.json").read_text())
    assert report["seed"] == 3 and [r["label"] for r in report["runs"][-2:]] == [
        "oracle",
        ORACLE_AT_MIN_REPLICAS,
    ]
    assert "sizing/performance.py" in report["throughput_source"]  # the replica model
    png = tmp_path / "prod.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists()  # the plot is optional
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_dev_runs_on_the_replica_model_and_a_calibration_overrides_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default dev stack (r1-distill-qwen-7b on g6) has no published curve: the replica model
    # serves it (issue 22: every plan the planner accepts can be simulated).
    assert cli.main(["--stack", "dev", "--hours", "1", "--out", str(tmp_path)]) == 0
    assert "replica model" in json.loads((tmp_path / "dev.json").read_text())["throughput_source"]
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert (
        cli.main(["--stack", "dev", "--hours", "1", "--out", str(tmp_path), "--calibration", str(bad)]) == 2
    )
    assert "no points" in capsys.readouterr().err
    measured = tmp_path / "loadtest.json"
    lengths = {"prompt_tokens": 1024, "output_tokens": 128}
    points = [
        {"concurrency": 1, "output_tokens_per_s": 40, **lengths},
        {"concurrency": 8, "output_tokens_per_s": 200, **lengths},
    ]
    measured.write_text(json.dumps({"points": points}))
    args = ["--stack", "dev", "--hours", "1", "--calibration", str(measured), "--out", str(tmp_path)]
    assert cli.main(args) == 0
    assert json.loads((tmp_path / "dev.json").read_text())["throughput_source"] == "measured: loadtest.json"
    err = capsys.readouterr().err
    assert "state no request lengths" not in err
    # What the report leaves unsaid is taken from the plan, said once, naming the report.
    assert err.count(f"note: --calibration {measured}: the load test does not say which instance type") == 1
    for unsaid in ("--max-num-seqs", "tensor_parallel_size"):
        assert (
            err.count(f"note: --calibration {measured}: the load test does not say the replica's {unsaid}")
            == 1
        )
    # A report of another served model is refused at the command, naming the report.
    measured.write_text(json.dumps({"config": {"model": "r1-distill-llama-70b"}, "points": points}))
    assert cli.main(args) == 2
    assert f"--calibration {measured}: the load test measured r1-distill-llama-70b" in capsys.readouterr().err
    # So is one from a machine whose replica has other GPUs (dev plans g6.xlarge, one L4).
    measured.write_text(json.dumps({"config": {"instance_type": "g6e.12xlarge"}, "points": points}))
    assert cli.main(args) == 2
    assert f"--calibration {measured}: the load test ran on g6e.12xlarge" in capsys.readouterr().err
    measured.write_text(json.dumps({"points": points}))
    # A report from before the lengths were recorded: taken at the planning lengths, and said so.
    measured.write_text(
        json.dumps({"points": [{k: p[k] for k in ("concurrency", "output_tokens_per_s")} for p in points]})
    )
    assert cli.main(args) == 0
    assert "points at concurrency 1, 8 state no request lengths" in capsys.readouterr().err
    source = json.loads((tmp_path / "dev.json").read_text())["throughput_source"]
    assert source == "measured: loadtest.json (2 of 2 points state no lengths: taken at 500 in / 1162 out)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "--rate must be positive"),
        (["--trace", "/nonexistent.csv"], "--trace /nonexistent.csv"),
        (["--set", "autoscaling.signal=sometimes"], "autoscaling.signal"),
    ],
)
def test_cli_bad_input_exits_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--stack", "prod", *args]) == 2
    assert message in capsys.readouterr().err


def test_dcgm_collection_interval_from_chart_values() -> None:
    from deepseek_eks.perf.simulate.stack import stack_facts

    def collect(values: dict) -> float:
        return stack_facts([], {"dcgm-exporter": {"values": values}}).gpu_collect_s

    assert collect({"arguments": ["-f", "/etc/counters.csv", "-c", "5000"]}) == 5.0
    assert collect({"arguments": ["--collect-interval=2000"]}) == 2.0
    assert collect({"extraEnv": [{"name": "DCGM_EXPORTER_INTERVAL", "value": "1000"}]}) == 1.0
    # Unset: dcgm-exporter's own default, 30000 ms (NVIDIA/dcgm-exporter pkg/cmd/app.go).
    assert collect({}) == 30.0


def test_pod_start_follows_the_plan_breakdown_when_present() -> None:
    from deepseek_eks.perf.simulate.run import startup_times

    plan = {
        "startup_seconds": 900,
        "startup_breakdown": {"node": 150, "image": 360, "weights": 420, "engine": 150},
    }
    times = startup_times(plan, "karpenter")
    assert (times.node_s, times.image_s, times.weights_s) == (150.0, 360.0, 570.0)
    # Without a breakdown, the load time is the startup budget less its 1.5 probe margin.
    assert startup_times({"startup_seconds": 900}, "karpenter").weights_s == 600.0


def test_default_rate_is_the_load_the_ceiling_was_set_for() -> None:
    # The default trace is the stack's own: its busiest moment is what maxReplicas serve within
    # the TTFT SLO for 99 % of requests (capacity planning's M/M/c model, one queue per replica as
    # the round-robin load balancer routes), so twice the ceiling means twice the default load
    # (1.5 saturated replicas' worth, the old default, ignored the ceiling).
    from deepseek_eks.perf.simulate.replica import ReplicaModel, plan_limits
    from deepseek_eks.perf.simulate.run import default_rate
    from deepseek_eks.perf.simulate.traffic import rate_function
    from deepseek_eks.sizing.capacity import highest_rate, service_model

    low = load_stack("dev", {"autoscaling.maxReplicas": "2"})
    high = load_stack("dev", {"autoscaling.maxReplicas": "4"})
    lengths, day = LengthProfile(), 86400.0
    rates = [default_rate(s, _curve(s), "step", lengths, 1, day) for s in (low, high)]
    assert rates[1] == pytest.approx(2 * rates[0])
    shape = rate_function("step", rates[0], 1, day)
    peak = max(shape(i * 30.0) for i in range(int(day / 30) + 1))
    hardware = ReplicaModel.from_plan(low.plan, _curve(low)).hardware
    assert hardware is not None
    prefill, service, slots = service_model(hardware, plan_limits(low.plan), 500, 1162)
    assert peak == pytest.approx(2 * highest_rate(1, low.ttft_slo_s, prefill, service, slots, 0.99))
