"""``python -m automation capacity --stack NAME``: the replica bounds for a load, on the stack's own
plan (its KV-cache dtype, minFullLengthSequences, families...), its TTFT SLO by default, and what
to change in the stack file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eks.automation.api import prepare
from deepseek_eks.automation.cli import main
from deepseek_eks.sizing.capacity import capacity
from deepseek_eks.sizing.cli import main as sizing_main
from deepseek_eks.sizing.performance import steady_state
from tests.measured import load_test_points, slower_replica

# dev with an FP8 KV cache: a setting `python -m sizing capacity` has no option for.
FP8 = {"model.kvCacheDtype": "fp8", "gpu.instanceFamilies": '["g6"]'}


def sets(overrides: dict[str, str]) -> list[str]:
    return [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["capacity", *argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_the_stack_is_sized_on_its_own_plan(capsys: pytest.CaptureFixture[str]) -> None:
    prepared = prepare("dev", FP8)
    sized = prepared.plan
    slo = float(prepared.settings.observability.ttft_slo_seconds)
    expected = capacity(sized, 0.5, 2.0, slo)
    out = run_json(capsys, "--stack", "dev", *sets(FP8), "--rate", "0.5", "--peak-rate", "2")
    assert (out["min_replicas"], out["max_replicas"]) == (expected.min_replicas, expected.max_replicas)
    assert out["slots_per_replica"] <= sized.max_num_seqs and out["ttft_slo_seconds"] == slo
    # The variant-and-families command plans a 16-bit KV cache: fewer slots, more replicas. The
    # stack's command is the one that matches what the stack deploys.
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    assert sizing_main([*argv, "--peak-rate", "2", "--ttft-slo", str(slo), "--json"]) == 0
    generic = json.loads(capsys.readouterr().out)
    assert generic["slots_per_replica"] < out["slots_per_replica"]
    assert generic["max_replicas"] > out["max_replicas"]


def test_the_slo_defaults_to_the_stack_s(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--stack", "dev", "--rate", "0.5", "--peak-rate", "2"]
    assert run_json(capsys, *base)["ttft_slo_seconds"] == 5.0  # the setting's default
    strict = run_json(capsys, *base, "--set", "observability.ttftSloSeconds=0.5")
    assert strict["ttft_slo_seconds"] == 0.5
    assert run_json(capsys, *base, "--ttft-slo", "0.5")["ttft_slo_seconds"] == 0.5
    # One below a request's prefill is named as such, not searched to a thousand replicas.
    assert main(["capacity", *base, "--set", "observability.ttftSloSeconds=0.01"]) == 1
    err = capsys.readouterr().err
    assert "a TTFT SLO of 0.01 s is below one request's prefill alone" in err
    assert "observability.ttftSloSeconds" in err


def test_the_bounds_the_stack_lacks_come_with_the_command_that_sets_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bounds = {"autoscaling.minReplicas": "1", "autoscaling.maxReplicas": "2"}
    out = run_json(capsys, "--stack", "dev", *sets(bounds), "--rate", "1", "--peak-rate", "3")
    assert out["min_replicas"] > 1 and out["max_replicas"] > 2  # the case needs both raised
    by_setting = {c["setting"]: c for c in out["changes"]}
    for setting, needed in (("minReplicas", out["min_replicas"]), ("maxReplicas", out["max_replicas"])):
        change = by_setting[f"autoscaling.{setting}"]
        assert (
            change["command"] == f"pulumi config set --stack dev deepseek-eks:autoscaling.{setting} {needed}"
        )
    # Bounds above the need: said, but no command (a floor of two may be for availability).
    bounds = {"autoscaling.minReplicas": "3", "autoscaling.maxReplicas": "9"}
    out = run_json(capsys, "--stack", "dev", *sets(bounds), "--rate", "0.1", "--peak-rate", "0.2")
    assert {c["setting"] for c in out["changes"]} == {"autoscaling.minReplicas", "autoscaling.maxReplicas"}
    assert all(c["command"] is None for c in out["changes"])
    # Bounds that meet the need exactly: nothing to change, and the text says nothing more.
    bounds = {
        "autoscaling.minReplicas": str(out["min_replicas"]),
        "autoscaling.maxReplicas": str(out["max_replicas"]),
    }
    assert (
        run_json(capsys, "--stack", "dev", *sets(bounds), "--rate", "0.1", "--peak-rate", "0.2")["changes"]
        == []
    )


def test_a_load_test_of_the_stack_s_replica(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stack's replica measured slower than the fit: counts on the measured speed; a report
    from another instance type is refused, naming both."""
    sized = prepare("dev").plan
    truth = slower_replica(sized.hardware)
    report = tmp_path / "loadtest.json"
    config = {
        "model": "r1-distill-qwen-7b",
        "instance_type": sized.instance_type,
        "max_num_seqs": sized.max_num_seqs,
    }
    report.write_text(
        json.dumps({"config": config, "points": load_test_points(truth, sized.scheduler_limits, 500, 1162)})
    )
    slo = float(prepare("dev").settings.observability.ttft_slo_seconds)
    expected = capacity(sized, 0.5, 3.0, slo, measured=truth)
    assert expected.max_replicas > capacity(sized, 0.5, 3.0, slo).max_replicas
    out = run_json(capsys, "--stack", "dev", "--rate", "0.5", "--peak-rate", "3", "--load-test", str(report))
    assert (out["min_replicas"], out["max_replicas"]) == (expected.min_replicas, expected.max_replicas)
    # What a token costs on the measured replica, beside the plan's figure on the bundled fit.
    measured = steady_state(
        truth, sized.scheduler_limits, sized.max_num_seqs, 500, 1162, exponential_lengths=True
    )
    usd = sized.replica_hourly_usd / (measured.output_tokens_per_second * 3600) * 1e6
    assert out["usd_per_million_output_tokens"] == pytest.approx(usd, rel=0.05)
    assert out["usd_per_million_output_tokens"] > 1.1 * sized.usd_per_million_output_tokens
    bundled = run_json(capsys, "--stack", "dev", "--rate", "0.5")
    assert bundled["usd_per_million_output_tokens"] == pytest.approx(
        sized.usd_per_million_output_tokens, rel=0.01
    )
    report.write_text(
        json.dumps(
            {
                "config": {**config, "instance_type": "g6e.xlarge"},
                "points": load_test_points(truth, sized.scheduler_limits, 500, 1162),
            }
        )
    )
    assert main(["capacity", "--stack", "dev", "--rate", "0.5", "--load-test", str(report)]) == 2
    assert (
        f"ran on g6e.xlarge (its report's config.instance_type), not {sized.instance_type}"
        in capsys.readouterr().err
    )
    assert main(["capacity", "--stack", "dev", "--rate", "0.5", "--peak-rate", "0.1"]) == 2
    assert "--peak-rate 0.1: below --rate 0.5" in capsys.readouterr().err


def test_a_bound_the_stack_cannot_take_gets_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The 671B on p5 spans two nodes in one zone, so three zones hold at most two replicas: a
    peak that needs three is answered with the reason, not a command the stack would refuse."""
    r1 = {
        "model.variant": "r1-671b",
        "gpu.instanceFamilies": '["p5"]',
        "autoscaling.minReplicas": "1",
        "autoscaling.maxReplicas": "2",
    }
    out = run_json(capsys, "--stack", "prod", *sets(r1), "--rate", "0.5", "--peak-rate", "4")
    (change,) = [c for c in out["changes"] if c["setting"] == "autoscaling.maxReplicas"]
    assert change["needed"] > 2 and change["command"] is None
    assert "the stack cannot take it" in change["why"] and "one replica per zone" in change["why"]


def test_a_bound_that_changes_the_replica_is_not_offered_as_this_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance type and packing are chosen for maxReplicas, so a raised bound can bring
    another replica, for which this answer does not hold: said, with how to ask again. (Stood in
    for by a stack whose plan moves to g6e when maxReplicas changes.)"""
    from deepseek_eks.automation import api

    real = api.prepare

    def prepare(
        stack: str, overrides: dict[str, str] | None = None, project_dir: Path = api.PROJECT_ROOT
    ) -> object:
        overrides = dict(overrides or {})
        if "autoscaling.maxReplicas" in overrides:
            overrides["gpu.instanceFamilies"] = '["g6e"]'
        return real(stack, overrides, project_dir)

    monkeypatch.setattr(api, "prepare", prepare)
    out = run_json(capsys, "--stack", "dev", "--rate", "0.5", "--peak-rate", "3")
    (change,) = [c for c in out["changes"] if c["setting"] == "autoscaling.maxReplicas"]
    assert change["command"] is None
    assert (
        "the plan serves from g6e." in change["why"]
        and f"not this answer's {out['instance_type']}" in change["why"]
    )
    assert f"rerun with --set autoscaling.maxReplicas={change['needed']}" in change["why"]


def test_an_unreadable_report_is_named_with_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing, broken = tmp_path / "missing.json", tmp_path / "broken.json"
    broken.write_text("{")
    assert main(["capacity", "--stack", "dev", "--rate", "1", "--load-test", str(missing)]) == 2
    assert f"--load-test {missing}: No such file or directory" in capsys.readouterr().err
    assert main(["capacity", "--stack", "dev", "--rate", "1", "--load-test", str(broken)]) == 2
    assert f"--load-test {broken}: not JSON (" in capsys.readouterr().err


def test_the_command_offered_keeps_the_form_the_stack_file_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack that keeps ``autoscaling`` as one object (``pulumi config set --path``) gets a
    ``--path`` command: a flat key beside the object would be the same setting twice, which the
    stack reader refuses. Applied as Pulumi writes each form, the command leaves a stack that plans
    with the bound it offered."""
    import shutil

    import yaml

    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    document = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    prefix = "deepseek-eks:autoscaling."
    config["deepseek-eks:autoscaling"] = {
        key.removeprefix(prefix): config.pop(key) for key in [k for k in config if k.startswith(prefix)]
    }
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    argv = ["--project-dir", str(tmp_path), "capacity", "--stack", "dev", "--rate", "1", "--peak-rate", "3"]
    assert main([*argv, "--json"]) == 0
    change = next(
        c for c in json.loads(capsys.readouterr().out)["changes"] if c["setting"] == "autoscaling.maxReplicas"
    )
    command = change["command"]
    assert (
        command
        == f"pulumi config set --stack dev --path deepseek-eks:autoscaling.maxReplicas {change['needed']}"
    )
    # What `pulumi config set` writes: with --path, into the object; without, a flat key.
    if "--path" in command.split():
        config["deepseek-eks:autoscaling"]["maxReplicas"] = change["needed"]
    else:
        config["deepseek-eks:autoscaling.maxReplicas"] = change["needed"]
    stack_file.write_text(yaml.safe_dump(document))
    assert prepare("dev", project_dir=tmp_path).settings.autoscaling.max_replicas == change["needed"]


def test_plan_and_capacity_print_the_same_replica_throughput(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """prod's replica once saturated near 516.5 output tok/s, which both JSONs keep to one decimal:
    the two texts whole-round that same figure, so one replica does not read 516 in one and 517 in
    the other. No shipped figure falls on such a half now, so the replica model's saturated figure
    is pinned to one (495.46: once rounded 495, twice 496) in both commands."""
    import dataclasses
    import re

    from deepseek_eks.sizing import capacity as capacity_module
    from deepseek_eks.sizing import performance

    raw = 495.46
    assert f"{raw:.0f}" != f"{round(raw, 1):.0f}"  # the case tells rounding once from rounding twice
    model = performance.steady_state

    def pinned(*args: object, **kwargs: object) -> performance.SteadyState:
        return dataclasses.replace(model(*args, **kwargs), output_tokens_per_second=raw)  # type: ignore[arg-type]

    monkeypatch.setattr(performance, "steady_state", pinned)
    monkeypatch.setattr(capacity_module, "steady_state", pinned)
    assert main(["plan", "--stack", "prod"]) == 0
    planned = re.search(r"throughput +([\d,]+) output tok/s per replica", capsys.readouterr().out)
    assert main(["capacity", "--stack", "prod", "--rate", "0.3"]) == 0
    sized = re.search(r"([\d,]+) output tok/s at saturation", capsys.readouterr().out)
    assert planned and sized and planned.group(1) == sized.group(1)
