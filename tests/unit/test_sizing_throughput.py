"""``python -m sizing throughput`` and the plan's throughput fields (one replica model for both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eks.components.versions import VLLM_RELEASE
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
        "--output-tokens", str(basis["output_tokens"]), "--lengths", basis["lengths"],
        "--max-model-len", str(d["max_model_len"]), "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["output_tokens_per_second"] == pytest.approx(rate, rel=0.01)


def test_max_num_seqs_defaults_to_vllms_own_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.33.0's OpenAI-server defaults, read from the wheel into the scheduler snapshot
    # (EngineArgs.get_batch_defaults tiers): 256 below 70 GiB (L4), 1024 on an H100.
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    facts = json.loads((root / "reference/upstream/vllm-scheduler/scheduler-facts.json").read_text())
    tiers = facts["facts"]["max_num_batched_tokens_default_openai_server"]["tiers"]
    small = next(t["max_num_seqs"] for t in tiers if t["min_device_memory_gib"] == 0)
    large = next(t["max_num_seqs"] for t in tiers if t["min_device_memory_gib"] == 70)
    for instance, expected in (("g6.xlarge", small), ("p5.48xlarge", large)):
        argv = [*BASE, "--variant", "r1-distill-qwen-7b", "--instance-type", instance, "--concurrency", "4"]
        assert main([*argv, "--tp", "1", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["max_num_seqs"] == expected, instance
        assert "vLLM 0.33.0's default" in doc["max_num_seqs_rule"]
        assert main([*argv, "--tp", "1"]) == 0
        assert f"max-num-seqs {expected}: vLLM 0.33.0 default" in capsys.readouterr().out
    argv = [*BASE, "--variant", "r1-distill-qwen-7b", "--instance-type", "g6.xlarge", "--concurrency", "4"]
    assert main([*argv, "--max-num-seqs", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["max_num_seqs"] == 3 and doc["max_num_seqs_rule"] == "--max-num-seqs as given"
    assert doc["running"] == 3 and doc["limited_by"] == "max_num_seqs"


def test_any_catalogued_type_is_answered_whatever_the_region_offers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # p5e.48xlarge is not offered in us-east-1 and has no On-Demand price (Capacity Blocks only):
    # the plan refuses it there, the throughput command still answers for its GPUs.
    from deepseek_eks.sizing.catalog import instance_catalog

    p5e = instance_catalog().instances["p5e.48xlarge"]
    assert p5e.offered_in_region.get("us-east-1") is False
    argv = [
        *BASE,
        "--variant",
        "r1-distill-llama-70b",
        "--instance-type",
        "p5e.48xlarge",
        "--concurrency",
        "8",
    ]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output_tokens_per_second"] > 0
    assert main([*argv, "--region", "us-east-1"]) == 1
    assert "not offered in us-east-1" in capsys.readouterr().err


def test_plan_carries_the_hbm_roofline_below_its_own_cost() -> None:
    # The roofline from datasheet figures computed here, not from the module: the KV-limited batch
    # of the plan's workload (lengths drawn exponentially around 500 / 1,162, as the simulator draws
    # them: a running sequence holds its prompt and a whole mean output on average, 1,662 tokens),
    # weights + batch KV over HBM bandwidth per step (dev's 7B is bandwidth-bound).
    from deepseek_eks.sizing.catalog import model_catalog
    from deepseek_eks.sizing.memory import kv_bytes_per_token_per_gpu, weight_bytes_per_gpu
    from deepseek_eks.sizing.performance import read_data

    d = plan(PlanRequest("r1-distill-qwen-7b", ("g6",))).to_dict()
    assert d["throughput_basis"]["lengths"] == "exponential"
    model = model_catalog()[d["variant"]]
    q = __import__("deepseek_eks.sizing.memory", fromlist=["Quantization"]).Quantization(d["quantization"])
    held = 500 + 1162
    batch = d["kv_cache_tokens"] // 16 // -(-held // 16)
    bandwidth = read_data("gpu_specs.json")["gpus"]["L4"]["memory_gb_s"] * 1e9
    step = (
        weight_bytes_per_gpu(model, q, 1, 1) + kv_bytes_per_token_per_gpu(model, 1, 1) * batch * held
    ) / bandwidth
    expected = d["replica_hourly_usd"] / (batch / step * 3600) * 1e6
    assert d["roofline_usd_per_million_output_tokens"] == pytest.approx(expected, rel=0.01)
    assert d["roofline_usd_per_million_output_tokens"] < d["usd_per_million_output_tokens"]
    assert batch > d["max_num_seqs"]  # the plan runs fewer sequences than the cache holds


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_stacks_plans_cost_at_most_twice_their_roofline(stack: str) -> None:
    """The goal for the example stacks: the plan's $/M output tokens within 2x the HBM roofline
    of the same workload (the batch rule, the throughput and the roofline all on the planning
    lengths drawn exponentially)."""
    from deepseek_eks.automation.api import prepare

    d = prepare(stack).plan.to_dict()
    assert d["usd_per_million_output_tokens"] <= 2 * d["roofline_usd_per_million_output_tokens"]


def test_a_load_test_refits_the_answer_to_the_measured_replica(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica load tested at 1,024 in / 128 out (slower than the bundled fit: tests/measured.py)
    is predicted at another load: reasoning-length streams, which its report never ran."""
    from deepseek_eks.sizing.catalog import instance_catalog, model_catalog
    from deepseek_eks.sizing.memory import Quantization
    from deepseek_eks.sizing.performance import SchedulerLimits, hardware, steady_state
    from tests.measured import load_test_points, slower_replica

    argv = ["throughput", "--variant", "r1-distill-qwen-7b", "--instance-type", "g6.xlarge", "--json"]
    load = ["--concurrency", "24", "--prompt-tokens", "500", "--output-tokens", "4000"]
    assert main([*argv, *load]) == 0
    bundled = json.loads(capsys.readouterr().out)
    limits = SchedulerLimits(
        bundled["max_num_seqs"], bundled["max_num_batched_tokens"], bundled["kv_cache_tokens"]
    )
    g6 = instance_catalog().instances["g6.xlarge"]
    truth = slower_replica(hardware(model_catalog()["r1-distill-qwen-7b"], Quantization.BF16, g6, 1))
    report = tmp_path / "loadtest.json"
    report.write_text(json.dumps({"points": load_test_points(truth, limits, 1024, 128)}))
    assert main([*argv, *load, "--load-test", str(report)]) == 0
    measured = json.loads(capsys.readouterr().out)
    expected = steady_state(truth, limits, 24, 500, 4000).output_tokens_per_second
    assert measured["output_tokens_per_second"] == pytest.approx(expected, rel=0.05)
    assert bundled["output_tokens_per_second"] > 1.1 * expected  # the fit alone would be wrong
    assert measured["efficiencies"].startswith("calibrated to measured: loadtest.json")


def test_a_load_test_is_refitted_under_the_max_num_seqs_it_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica load tested with --max-num-seqs 8 (recorded in the report) answers at the
    command's 32: the refit runs under 8, where the points above 8 were a full batch and a queue.
    Refitted under the command's 32 instead, they read as a much slower replica."""
    from dataclasses import replace

    from deepseek_eks.sizing.catalog import instance_catalog, model_catalog
    from deepseek_eks.sizing.memory import Quantization
    from deepseek_eks.sizing.performance import SchedulerLimits, hardware, steady_state
    from tests.measured import load_test_points, slower_replica

    argv = ["throughput", "--variant", "r1-distill-qwen-7b", "--instance-type", "g6.xlarge", "--json"]
    load = [
        "--concurrency",
        "32",
        "--prompt-tokens",
        "500",
        "--output-tokens",
        "1162",
        "--max-num-seqs",
        "32",
    ]
    assert main([*argv, *load]) == 0
    bundled = json.loads(capsys.readouterr().out)
    limits = SchedulerLimits(32, bundled["max_num_batched_tokens"], bundled["kv_cache_tokens"])
    g6 = instance_catalog().instances["g6.xlarge"]
    truth = slower_replica(hardware(model_catalog()["r1-distill-qwen-7b"], Quantization.BF16, g6, 1))
    points = load_test_points(truth, replace(limits, max_num_seqs=8), 1024, 128)
    report = tmp_path / "loadtest.json"
    config = {"max_num_seqs": 8, "instance_type": "g6.xlarge", "tensor_parallel_size": 1}
    config |= {"pipeline_parallel_size": 1, "quantization": "bf16", "kv_cache_dtype": "auto"}
    config |= {"vllm_version": VLLM_RELEASE}  # as the server reports the release this checkout deploys
    report.write_text(json.dumps({"config": config, "points": points}))
    assert main([*argv, *load, "--load-test", str(report)]) == 0
    captured = capsys.readouterr()
    expected = steady_state(truth, limits, 32, 500, 1162).output_tokens_per_second
    assert json.loads(captured.out)["output_tokens_per_second"] == pytest.approx(expected, rel=0.05)
    # Nothing is taken as the command's; the cap the report records is said, as it was refitted.
    assert "does not say" not in captured.err
    assert "ran with --max-num-seqs 8 and the one answered for has 32" in captured.err
    # The same points from a report that does not record its 8: refitted under 32, and said so.
    report.write_text(json.dumps({"points": points}))
    assert main([*argv, *load, "--load-test", str(report)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["output_tokens_per_second"] < 0.9 * expected
    assert "does not say the replica's --max-num-seqs: taken as 32" in captured.err
    # A report from another instance type is refused, naming both.
    report.write_text(json.dumps({"config": {"instance_type": "g6e.xlarge"}, "points": points}))
    assert main([*argv, *load, "--load-test", str(report)]) == 2
    assert "ran on g6e.xlarge (its report's config.instance_type), not g6.xlarge" in capsys.readouterr().err
