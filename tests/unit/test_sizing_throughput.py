"""``python -m sizing throughput`` and the plan's throughput fields (one replica model for both)."""

from __future__ import annotations

import json

import pytest

from deepseek_eks.sizing.cli import main
from deepseek_eks.sizing.planner import PlanRequest, plan

BASE = ["throughput", "--prompt-tokens", "500", "--output-tokens", "1000"]


def test_throughput_json_answers_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, "--variant", "r1-distill-qwen-7b", "--instance-type", "g6.xlarge", "--concurrency", "8"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # DESIGN.md's contract fields.
    for key in (
        "output_tokens_per_second",
        "ttft_s",
        "itl_s",
        "requests_per_second",
        "kv_cache_tokens",
        "preempted",
    ):
        assert key in doc, key
    assert doc["output_tokens_per_second"] == pytest.approx(8 / doc["itl_s"], rel=0.01)
    assert doc["requests_per_second"] == pytest.approx(doc["output_tokens_per_second"] / 1000, rel=0.01)


def test_bad_flags_are_named_together_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, "--variant", "r1-distill-qwen-7b", "--instance-type", "p4d.24xlarge"]
    assert main([*argv, "--tp", "8", "--concurrency", "0"]) == 2
    err = capsys.readouterr().err
    assert "--tp 8" in err and "28 attention heads" in err and "--concurrency 0" in err
    assert (
        main([*BASE, "--variant", "r1-distill-qwen-7b", "--instance-type", "g9.huge", "--concurrency", "1"])
        == 2
    )
    assert "--instance-type g9.huge" in capsys.readouterr().err


def test_a_model_that_does_not_fit_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, "--variant", "r1-distill-llama-70b", "--instance-type", "g6.xlarge", "--concurrency", "1"]
    assert main(argv) == 1
    assert "exceed" in capsys.readouterr().err


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_small_model_runs_on_part_of_an_8_gpu_node(tp: int, capsys: pytest.CaptureFixture[str]) -> None:
    # 28 heads split over 1, 2 or 4 GPUs (not 8): vLLM accepts these TP sizes on p4d.
    argv = [*BASE, "--variant", "r1-distill-qwen-7b", "--instance-type", "p4d.24xlarge", "--concurrency", "4"]
    assert main([*argv, "--tp", str(tp), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tensor_parallel_size"] == tp


def test_plan_carries_throughput_and_cost_per_token(capsys: pytest.CaptureFixture[str]) -> None:
    result = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    d = result.to_dict()
    rate = d["output_tokens_per_second"]
    assert rate > 0 and d["requests_per_second"] > 0 and d["ttft_s"] > 0 and d["itl_s"] > 0
    assert d["usd_per_million_output_tokens"] == pytest.approx(
        d["replica_hourly_usd"] / (rate * 3600) * 1e6, rel=0.01
    )
    # The plan's figure is the throughput command's answer at max_num_seqs for the same lengths.
    basis = d["throughput_basis"]
    argv = [
        "throughput", "--variant", d["variant"], "--instance-type", d["instance_type"],
        "--concurrency", str(d["max_num_seqs"]), "--prompt-tokens", str(basis["prompt_tokens"]),
        "--output-tokens", str(basis["output_tokens"]), "--max-model-len", str(d["max_model_len"]), "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["output_tokens_per_second"] == pytest.approx(rate, rel=0.01)
