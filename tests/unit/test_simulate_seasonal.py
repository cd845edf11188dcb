"""autoscaling.seasonal in the simulator: the demand Prometheus remembers (history.py), the earlier
days it is simulated from (run.demand_history), and the floor the seasonal triggers keep."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deepseek_eks.perf.simulate.history import DemandHistory
from deepseek_eks.perf.simulate.replica import published_curve
from deepseek_eks.perf.simulate.run import TraceSpec, build_trace, demand_history, load_stack, simulate
from deepseek_eks.perf.simulate.stack import SEASONAL
from deepseek_eks.perf.simulate.traffic import STEP_HOURS


def test_the_peak_of_a_window_is_its_largest_sample_and_0_where_it_holds_none() -> None:
    history = DemandHistory([(-120.0, 4.0), (-60.0, 9.0), (0.0, 2.0)])
    assert history.peak(-120, -60) == 9.0  # both ends count
    assert history.peak(-59, 0) == 2.0
    assert history.peak(60, 600) == 0.0
    history.record(60.0, 5.0)
    assert history.peak(1, 60) == 5.0
    with pytest.raises(ValueError, match="comes before the last one"):
        history.record(30.0, 1.0)


@pytest.fixture(scope="module")
def dev_step():
    spec = TraceSpec(profile="step", hours=24, seed=1)
    # The KV-cache trigger at the setting's default, so that the concurrency trigger alone moves
    # the count before the step (the example stack's 0.4 asks for a replica earlier by itself).
    signal = {"autoscaling.signal": "concurrency", "autoscaling.targetKvCacheUsage": "0.85"}
    base = load_stack("dev", {**signal, "autoscaling.seasonal": "false"})
    seasonal = load_stack("dev", {**signal, "autoscaling.seasonal": "true"})
    curve = published_curve(base.plan)
    trace, duration, rate = build_trace(spec, base, curve)
    return spec, base, seasonal, curve, trace, duration, rate


def test_earlier_days_are_simulated_before_0_for_each_period(dev_step) -> None:
    spec, base, seasonal, curve, _, _, rate = dev_step
    assert demand_history(base, spec, rate, curve) is None  # no seasonal trigger, nothing to read
    history = demand_history(seasonal, spec, rate, curve)
    assert history is not None and history.times and max(history.times) < 0
    windows = [m.window for m in seasonal.autoscaler.metrics if m.measures == SEASONAL]
    lead = windows[0][1]
    # Yesterday's and last week's office hours both left demand where the triggers look.
    busy = STEP_HOURS[0] * 3600
    for period, _ in windows:
        assert history.peak(busy - period, busy - period + lead) > 0
        assert history.peak(-period - 3600, -period - 60) == 0  # nothing before the day begins


def test_yesterdays_office_hours_start_replicas_before_the_step(dev_step) -> None:
    """The step trace jumps 4x at 09:00. The concurrency signal alone asks for the second replica
    after the jump; with the seasonal floor it is asked for one start-up ahead, from yesterday's
    09:00; without history the same triggers read 0 and change nothing."""
    spec, base, seasonal, curve, trace, duration, rate = dev_step
    history = demand_history(seasonal, spec, rate, curve)
    lead = next(m.window for m in seasonal.autoscaler.metrics if m.window)[1]
    step_at = STEP_HOURS[0] * 3600

    def desired(run, at: float) -> int:
        return next(d for t, d, *_ in run.outcome.timeline if t >= at)

    reactive = simulate(base, trace, duration, curve)
    ahead = simulate(seasonal, trace, duration, curve, history=history)
    blind = simulate(seasonal, trace, duration, curve)
    # Yesterday's demand passed one replica's target a minute or two after 09:00: the floor asks
    # for the second replica by 09:00, before today's queue has formed.
    assert desired(reactive, step_at) == 1 and desired(ahead, step_at) == 2
    assert desired(ahead, step_at - lead) == 1  # not earlier than the window reaches

    def worst_queue(run) -> int:
        return max(q for t, _, _, q, _ in run.outcome.timeline if step_at <= t <= step_at + 1800)

    assert worst_queue(ahead) * 10 < worst_queue(reactive)
    assert ahead.summary.ttft_slo_attainment > reactive.summary.ttft_slo_attainment
    assert blind.summary.gpu_hours == reactive.summary.gpu_hours
    assert blind.summary.ttft_slo_attainment == reactive.summary.ttft_slo_attainment


def test_a_quiet_day_after_busy_ones_holds_what_they_needed(dev_step) -> None:
    """--history-rate: a day at half the rate of the days before it (a holiday). The seasonal
    floor reads what yesterday and last week needed and holds it: more GPU-hours than the same
    quiet day after quiet days, which the history's own peaks show."""
    spec, _, seasonal, curve, _, _, rate = dev_step
    quiet = replace(spec, rate_rps=rate / 2)
    trace, duration, _ = build_trace(quiet, seasonal, curve)
    after_busy = replace(quiet, history_rate_rps=rate)
    calm = demand_history(seasonal, quiet, rate / 2, curve)
    busy = demand_history(seasonal, after_busy, rate / 2, curve)
    assert calm is not None and busy is not None
    assert busy.peak(-86_400, 0) > calm.peak(-86_400, 0)  # the earlier days were busier
    held = simulate(seasonal, trace, duration, curve, history=busy)
    like_them = simulate(seasonal, trace, duration, curve, history=calm)
    assert held.summary.gpu_hours > like_them.summary.gpu_hours


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--set", "autoscaling.seasonal=false"], "has no seasonal triggers (autoscaling.seasonal is false)"),
        (["--trace", "TRACE"], "a --trace file has no earlier days"),
        (["--history-rate", "0"], "--history-rate must be positive"),
    ],
)
def test_history_rate_is_refused_where_it_would_change_nothing(
    argv: list[str], says: str, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deepseek_eks.automation.cli import main

    trace = tmp_path / "trace.csv"
    trace.write_text("0.0\n1.0\n")
    argv = [str(trace) if a == "TRACE" else a for a in argv]
    assert main(["simulate", "--stack", "dev", "--history-rate", "0.5", *argv, "--out", str(tmp_path)]) == 2
    assert says in capsys.readouterr().err
