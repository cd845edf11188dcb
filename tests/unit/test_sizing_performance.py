"""The replica performance model against its cited figures: GPU datasheets, published vLLM
measurements, vLLM 0.33.0's scheduler defaults, and physical bounds."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from deepseek_eks.sizing import performance
from deepseek_eks.sizing.catalog import gpu_memory_key, instance_catalog, model_catalog
from deepseek_eks.sizing.memory import Quantization, weight_bytes_per_gpu
from deepseek_eks.sizing.performance import (
    Hardware,
    SchedulerLimits,
    default_max_num_batched_tokens,
    hardware,
    planning_state,
    steady_state,
)
from deepseek_eks.sizing.planner import Fit, PlanRequest, evaluate
from tests.measured import load_test_points, slower_replica

ROOT = Path(__file__).resolve().parents[2]
FACTS = json.loads((ROOT / "reference/upstream/vllm-scheduler/scheduler-facts.json").read_text())["facts"]
MEASUREMENTS = json.loads((ROOT / "sizing/data/measurements.json").read_text())["points"]
SPECS = json.loads((ROOT / "sizing/data/gpu_specs.json").read_text())


def _feasible() -> list[tuple[str, Fit]]:
    """Every (variant, single-node fit) the planner accepts on the whole catalog."""
    out = []
    for variant, model in model_catalog().items():
        request = PlanRequest(variant, tuple(instance_catalog().families), max_model_len=8192)
        for instance in instance_catalog().instances.values():
            fit = evaluate(model, request.quantization, instance, request)
            if isinstance(fit, Fit) and fit.pipeline_parallel == 1:
                out.append((variant, fit))
    return out


FEASIBLE = _feasible()


def test_every_catalog_gpu_and_family_has_cited_datasheet_figures() -> None:
    for instance in instance_catalog().instances.values():
        key = gpu_memory_key(instance.gpu_model, instance.gpu_memory_mib)
        spec = SPECS["gpus"][key]
        assert spec["memory_gb_s"] > 0 and spec["fp16_tflops"] > 0, key
        assert "nvidia.com" in spec["source"] or "baseten.co" in spec["source"], key
        assert SPECS["interconnects"][instance.family]["gb_s"] > 0, instance.family


def test_batch_defaults_follow_vllm_0_33_0() -> None:
    # EngineArgs.get_batch_defaults tiers, read from the snapshot, applied to CUDA's memory totals.
    tiers = FACTS["max_num_batched_tokens_default_openai_server"]["tiers"]
    for gpu, mib in (("L4", 22593), ("A100", 81039), ("H100", 80998), ("H200", 143052), ("B200", 182918)):
        gib = mib / 1024
        expected = next(
            t["max_num_batched_tokens"]
            for t in tiers
            if gib >= t["min_device_memory_gib"] and not (t["excludes_a100"] and gpu == "A100")
        )
        assert default_max_num_batched_tokens(mib, gpu) == expected, gpu
    assert FACTS["block_size_default"]["value"] == performance.BLOCK_SIZE


@pytest.mark.parametrize(("variant", "fit"), FEASIBLE, ids=[f"{v}-{f.instance.name}" for v, f in FEASIBLE])
def test_single_stream_never_beats_the_bandwidth_bound(variant: str, fit: Fit) -> None:
    # One decoding stream reads every weight byte of its GPU once per token: tokens/s can never
    # exceed datasheet bandwidth / weight bytes (routed experts excepted for the MoE model).
    model = model_catalog()[variant]
    q = Quantization.AUTO.resolve(model)
    hw = hardware(model, q, fit.instance, fit.tensor_parallel)
    limits = SchedulerLimits(8, 2048, fit.kv_tokens)
    rate = steady_state(hw, limits, 1, 128, 1024).output_tokens_per_second
    key = gpu_memory_key(fit.instance.gpu_model, fit.instance.gpu_memory_mib)
    bandwidth = SPECS["gpus"][key]["memory_gb_s"] * 1e9
    weights = weight_bytes_per_gpu(model, q, fit.tensor_parallel, 1)
    if model.moe:
        active = SPECS["models"][variant]["active_parameters"] / model.parameters
        weights *= active
    assert 0 < rate <= bandwidth / weights


@pytest.mark.parametrize(
    ("variant", "fit"), FEASIBLE[::5], ids=[f"{v}-{f.instance.name}" for v, f in FEASIBLE[::5]]
)
def test_throughput_grows_with_concurrency_until_saturation(variant: str, fit: Fit) -> None:
    model = model_catalog()[variant]
    hw = hardware(model, Quantization.AUTO, fit.instance, fit.tensor_parallel)
    limits = SchedulerLimits(64, 2048, fit.kv_tokens)
    levels = (1, 2, 4, 8, 16, 32, 64, 128)
    rates = [steady_state(hw, limits, c, 500, 1000).output_tokens_per_second for c in levels]
    peak = rates.index(max(rates))
    # Rising up to the peak; past it (compute- or cache-bound) a plateau: longer KV reads of a
    # bigger batch may cost a little, never a collapse.
    assert all(b > a for a, b in itertools.pairwise(rates[: peak + 1])), rates
    assert min(rates[peak:]) >= 0.97 * rates[peak], rates
    # Past max_num_seqs nothing more runs: the rate holds and the extra streams only wait.
    at_limit = steady_state(hw, limits, 64, 500, 1000)
    beyond = steady_state(hw, limits, 128, 500, 1000)
    assert beyond.output_tokens_per_second == pytest.approx(at_limit.output_tokens_per_second)
    assert beyond.ttft_s > at_limit.ttft_s


@pytest.mark.parametrize("point", [p for p in MEASUREMENTS if p["concurrency"] == 1], ids=lambda p: p["id"])
def test_single_stream_decode_within_35_percent_of_published(point: dict) -> None:
    # Published single-stream rates (measurements.json, each with its source); the model is fitted
    # to all points at once, so each may miss by some margin: 35 % catches a wrong bandwidth or
    # weight size (a factor of 2), not the scatter between benchmarks.
    from deepseek_eks.sizing.fit import point_from_json
    from deepseek_eks.sizing.performance import fitted_efficiencies, kernel_class

    model = model_catalog()[point["variant"]]
    p = point_from_json(point, fitted_efficiencies(kernel_class(model)))
    got = steady_state(p.hardware, p.limits, 1, p.prompt_tokens, p.output_tokens).output_tokens_per_second
    assert got == pytest.approx(point["output_tokens_per_second"], rel=0.35)


def test_moe_step_reads_only_the_experts_its_tokens_touch() -> None:
    model = model_catalog()["r1-671b"]
    k = SPECS["models"]["r1-671b"]["experts_per_token"]
    assert performance.touched_expert_fraction(model, 1) == pytest.approx(k / model.n_routed_experts)
    assert performance.touched_expert_fraction(model, 1000) > 0.99
    p5en = instance_catalog().instances["p5en.48xlarge"]
    hw = hardware(model, Quantization.FP8, p5en, 8)
    assert performance.step_seconds(hw, 1, 1000) < performance.step_seconds(hw, 64, 64000)


def test_kv_cache_limits_the_running_batch_and_flags_preemption() -> None:
    model = model_catalog()["r1-distill-qwen-7b"]
    g6 = instance_catalog().instances["g6.xlarge"]
    hw = hardware(model, Quantization.BF16, g6, 1)
    # Room for 10 sequences at their mean length (500 + 1000/2 tokens, 63 blocks of 16).
    limits = SchedulerLimits(256, 2048, 63 * 16 * 10)
    state = steady_state(hw, limits, 50, 500, 1000)
    assert state.running == 10 and state.limited_by == "kv_cache"
    assert state.preempted  # 10 x 1,500 tokens at the end outgrow 10,080


def test_a_load_test_calibration_overrides_the_bundled_fit() -> None:
    from deepseek_eks.perf.simulate.replica import ReplicaModel, ThroughputCurve, published_curve
    from deepseek_eks.sizing.planner import plan

    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    d = sized.to_dict()
    bundled = ReplicaModel.from_plan(d, published_curve(d))
    # A measured replica at half the bundled model's rate at every concurrency.
    slow = ThroughputCurve(tuple((c, t / 2) for c, t in published_curve(d).points), "measured: half.json")
    calibrated = ReplicaModel.from_plan(d, slow)
    assert calibrated.hardware is not None and calibrated.hardware.efficiencies.source.startswith(
        "calibrated"
    )
    ratio = calibrated.saturated_tokens_per_s() / bundled.saturated_tokens_per_s()
    assert 0.4 < ratio < 0.65


def _g6_plan_and_a_slower_replica(variant: str) -> tuple[dict, SchedulerLimits, Hardware]:
    """The variant's plan on g6, its scheduler limits, and its replica as a load test might find
    it (tests/measured.py)."""
    from deepseek_eks.perf.simulate.replica import plan_hardware, plan_limits
    from deepseek_eks.sizing.planner import plan

    d = plan(PlanRequest(variant, ("g6",))).to_dict()
    return d, plan_limits(d), slower_replica(plan_hardware(d))


def test_a_calibration_is_refitted_at_the_lengths_its_requests_had(tmp_path: Path) -> None:
    """A load test run at other lengths than the plan's (here vllm bench serve's usual 1,024 in /
    128 out, prefill-heavy) calibrates the replica at those lengths: the refit then predicts the
    planning lengths' throughput of the same replica. Taken at the planning lengths instead, the
    prefill-heavy rates read as a slower replica (about a sixth too slow here)."""
    from deepseek_eks.perf.simulate.replica import ReplicaModel, load_calibration
    from deepseek_eks.sizing.measured import unstated_lengths

    d, limits, truth = _g6_plan_and_a_slower_replica("r1-distill-qwen-7b")
    points = load_test_points(truth, limits, 1024, 128)
    report = tmp_path / "bench.json"
    report.write_text(json.dumps({"points": points}))
    expected = planning_state(truth, limits, d["max_num_seqs"]).output_tokens_per_second
    curve = load_calibration(report)
    assert unstated_lengths(curve.measurements) == [] and "state no lengths" not in curve.source
    assert ReplicaModel.from_plan(d, curve).saturated_tokens_per_s() == pytest.approx(expected, rel=0.05)
    # The same points without their lengths (a report from before they were recorded): taken at
    # the planning lengths, flagged, and the refit misses.
    report.write_text(
        json.dumps({"points": [{k: p[k] for k in ("concurrency", "output_tokens_per_s")} for p in points]})
    )
    old = load_calibration(report)
    assert (
        unstated_lengths(old.measurements) == [1, 4, 16, 32]
        and "4 of 4 points state no lengths" in old.source
    )
    assert ReplicaModel.from_plan(d, old).saturated_tokens_per_s() < 0.9 * expected


def test_a_calibration_point_with_half_its_lengths_or_a_bad_one_is_refused(tmp_path: Path) -> None:
    from deepseek_eks.perf.simulate.replica import CalibrationError, load_calibration

    report = tmp_path / "r.json"
    for point, words in (
        ({"prompt_tokens": 500}, "only one of prompt_tokens and output_tokens"),
        ({"prompt_tokens": 500, "output_tokens": -3}, "output_tokens must be a positive number"),
        ({"prompt_tokens": "many", "output_tokens": 9}, "prompt_tokens must be a positive number"),
    ):
        report.write_text(json.dumps({"points": [{"concurrency": 8, "output_tokens_per_s": 80.0, **point}]}))
        with pytest.raises(CalibrationError, match=words):
            load_calibration(report)


def test_repeated_calibration_points_all_enter_the_refit(tmp_path: Path) -> None:
    """Two reports at one concurrency (a repeat run, or other lengths) are both kept for the refit;
    the curve's point there is their mean, where before the last one silently replaced the first."""
    from deepseek_eks.perf.simulate.replica import load_calibration

    report = tmp_path / "runs.json"
    one = {"concurrency": 8, "output_tokens_per_s": 80.0, "prompt_tokens": 500, "output_tokens": 1000}
    two = {**one, "output_tokens_per_s": 100.0, "prompt_tokens": 2000}
    report.write_text(json.dumps([{"points": [one]}, {"points": [two]}]))
    curve = load_calibration(report)
    assert curve.points == ((8, 90.0),)
    assert [(m.prompt_tokens, m.output_tokens_per_s) for m in curve.measurements] == [
        (500, 80.0),
        (2000, 100.0),
    ]


@pytest.mark.parametrize("variant", list(model_catalog()))
def test_every_plan_the_planner_accepts_can_be_simulated(variant: str) -> None:
    from deepseek_eks.perf.simulate.replica import ReplicaModel, published_curve
    from deepseek_eks.sizing.planner import plan

    families = tuple(instance_catalog().families)
    for family in families:
        sized = plan(PlanRequest(variant, (family,), max_model_len=8192))
        if not sized.feasible:
            continue
        d = sized.to_dict()
        model = ReplicaModel.from_plan(d, published_curve(d))
        assert model.saturated_tokens_per_s() == pytest.approx(d["output_tokens_per_second"], rel=0.01)


def test_all_reduce_latency_is_per_interconnect_and_follows_vllms_gate() -> None:
    # vLLM 0.33.0 runs its custom all-reduce on fully connected (NVLink) GPUs or on two PCIe GPUs,
    # and leaves more than two PCIe-only GPUs to NCCL (custom_all_reduce.py:267-270, :509).
    model = model_catalog()["r1-distill-llama-70b"]
    catalog = instance_catalog().instances
    nvlink = hardware(model, Quantization.BF16, catalog["p5.48xlarge"], 4)
    pcie4 = hardware(model, Quantization.BF16, catalog["g6e.12xlarge"], 4)
    pcie2 = hardware(model, Quantization.BF16, catalog["g6e.12xlarge"], 2)
    assert (
        "NVLink" in SPECS["interconnects"]["p5"]["kind"] and "PCIe" in SPECS["interconnects"]["g6e"]["kind"]
    )
    assert nvlink.link_latency_s < pcie2.link_latency_s < pcie4.link_latency_s
    assert hardware(model, Quantization.BF16, catalog["p5.48xlarge"], 1).link_latency_s == 0.0


def test_step_adds_gemm_and_attention_instead_of_hiding_one() -> None:
    # A step that reads as many KV bytes as weight bytes costs the weights' time plus the KV's at
    # the attention kernels' own bandwidth: the operators are added, not overlapped (the old
    # model's max() hid attention behind the GEMMs).
    model = model_catalog()["r1-distill-llama-8b"]
    hw = hardware(model, Quantization.BF16, instance_catalog().instances["g6e.xlarge"], 1)
    weights = weight_bytes_per_gpu(model, hw.quantization, 1, 1)
    kv_tokens = weights / performance.kv_bytes_per_token_per_gpu(model, 1, 1)
    alone = performance.step_seconds(hw, 1, 1)
    both = performance.step_seconds(hw, 1, kv_tokens)
    e = hw.efficiencies
    kv_bandwidth = hw.gpu.memory_gb_s * 1e9 * (e.attention_bandwidth or e.bandwidth)
    assert both - alone == pytest.approx(weights / kv_bandwidth, rel=0.02)


def test_host_cost_per_sequence_stays_within_its_bound_and_ttft_pays_the_server_path() -> None:
    for kind in ("dense", "moe"):
        assert performance.fitted_efficiencies(kind).per_sequence_s <= performance.PER_SEQUENCE_BOUND_S
    model = model_catalog()["r1-distill-qwen-7b"]
    hw = hardware(model, Quantization.BF16, instance_catalog().instances["g6.xlarge"], 1)
    state = steady_state(hw, SchedulerLimits(8, 2048, 100000), 1, 16, 100)
    assert state.ttft_s > performance.SERVER_PATH_S + performance.step_seconds(hw, 16, 16) * 0.99


def test_fit_uses_only_the_fit_split_and_bench_reports_held_out_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from deepseek_eks.sizing.fit import bench_main

    data = json.loads((ROOT / "sizing/data/efficiency.json").read_text())
    vetted = [p for p in MEASUREMENTS if "excluded" not in p]
    fit = [p for p in vetted if p["split"] == "fit"]
    held = [p for p in vetted if p["split"] == "held_out"]
    assert held and {p["split"] for p in vetted} == {"fit", "held_out"}
    moe = {v for v, m in model_catalog().items() if m.moe}
    assert data["dense"]["points"] == sum(p["variant"] not in moe for p in fit)
    assert data["moe"]["points"] == sum(p["variant"] in moe for p in fit)
    for p in vetted:
        assert p["vllm_version"] and p["engine_flags"] and p["harness"], p["id"]
    assert bench_main(["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["held_out"]["points"] == len(held) and doc["in_sample"]["points"] == len(fit)
    assert {r["id"] for r in doc["points"] if r["split"] == "held_out"} == {p["id"] for p in held}
    # The verdict follows the goal (median |error| <= 20 %, worst <= 50 %) on the held-out rows.
    errors = sorted(abs(r["error_percent"]) for r in doc["points"] if r["split"] == "held_out")
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
    assert doc["goal"]["met"] is (median <= 20 and errors[-1] <= 50)
    assert bench_main([]) == 0
    out = capsys.readouterr().out
    assert "held-out (out of sample)" in out and "in-sample (fitted to)" in out
    assert ("): met" in out) is doc["goal"]["met"] and ("NOT met" in out) is not doc["goal"]["met"]


def test_async_scheduling_hides_the_host_term_under_the_gpu_step() -> None:
    # vLLM 0.33.0 schedules step N+1 on the host while the GPU runs step N (vllm/config/vllm.py,
    # VllmConfig.__post_init__: async scheduling on unless pipeline parallel): a step lasts as long
    # as the longer of host and GPU work, not their sum. Without async (V0, older V1) they add.
    model = model_catalog()["r1-distill-qwen-7b"]
    g6 = instance_catalog().instances["g6.xlarge"]
    hw = hardware(model, Quantization.BF16, g6, 1)
    assert hw.async_scheduling
    eff = hw.efficiencies
    no_host = hw.with_efficiencies(replace(eff, step_overhead_s=0.0, per_sequence_s=0.0))
    gpu = performance.step_seconds(no_host, 8, 8 * 1000)
    host = eff.step_overhead_s + 8 * eff.per_sequence_s
    assert 0 < host < gpu  # a 15 GB weight read on an L4 outlasts the host's work
    assert performance.step_seconds(hw, 8, 8 * 1000) == pytest.approx(gpu)
    sync = replace(hw, async_scheduling=False)
    assert performance.step_seconds(sync, 8, 8 * 1000) == pytest.approx(gpu + host)
    # A host slower than the GPU sets the pace on its own.
    slow = hw.with_efficiencies(replace(eff, step_overhead_s=2 * gpu))
    assert performance.step_seconds(slow, 8, 8 * 1000) == pytest.approx(2 * gpu + 8 * eff.per_sequence_s)


def test_pipeline_parallel_replicas_run_without_async_scheduling() -> None:
    # v1_async_sched_incompat = "pipeline parallelism" in vLLM 0.33.0's VllmConfig.__post_init__.
    model = model_catalog()["r1-distill-llama-70b"]
    g6e = instance_catalog().instances["g6e.12xlarge"]
    assert hardware(model, Quantization.BF16, g6e, 4).async_scheduling
    assert not hardware(model, Quantization.BF16, g6e, 2, pipeline_parallel=2).async_scheduling


def test_each_measurement_records_async_scheduling_by_its_version_rule() -> None:
    # The rule in measurements.json (split.async_scheduling): on for a stated vLLM 0.21.0 or later,
    # off for V0 (0.7.x) and for sources before async scheduling became the default.
    for p in MEASUREMENTS:
        version = p["vllm_version"]
        if version[:1].isdigit():
            minor = int(version.split(".")[1])
            assert p["async_scheduling"] is (minor >= 21), p["id"]
        else:
            assert p["async_scheduling"] is False, p["id"]


def test_fp8_kv_cache_halves_the_bytes_a_step_reads_and_is_planned_only_with_fp8_tensor_cores() -> None:
    from deepseek_eks.sizing import KvCacheDtype, PlanRequest, plan
    from deepseek_eks.sizing.memory import kv_bytes_per_token_per_gpu

    model = model_catalog()["r1-distill-qwen-7b"]
    assert kv_bytes_per_token_per_gpu(model, 1, 1, KvCacheDtype.FP8) * 2 == kv_bytes_per_token_per_gpu(
        model, 1, 1
    )
    g6 = instance_catalog().instances["g6.xlarge"]
    bf16 = hardware(model, Quantization.BF16, g6, 1)
    fp8 = hardware(model, Quantization.BF16, g6, 1, kv_cache_dtype=KvCacheDtype.FP8)
    # Long contexts: the attention term (KV read at e_kv) is what FP8 halves; the weights are not.
    context = 64 * 8000
    saved = performance.step_seconds(bf16, 64, context) - performance.step_seconds(fp8, 64, context)
    kv_read = kv_bytes_per_token_per_gpu(model, 1, 1) / 2 * context
    e = bf16.efficiencies
    assert saved == pytest.approx(kv_read / (bf16.gpu.memory_gb_s * 1e9 * e.attention_bandwidth), rel=0.01)
    refused = plan(PlanRequest("r1-distill-qwen-7b", ("g5",), kv_cache_dtype="fp8")).to_dict()
    assert not refused["feasible"]
    assert all("no native FP8" in r and "model.kvCacheDtype fp8" in r for r in refused["reasons"])
    assert refused["suggestions"][0].startswith("set model.kvCacheDtype=auto: fits g5")


def test_the_simulator_times_a_plan_with_its_kv_cache_dtype() -> None:
    from deepseek_eks.perf.simulate.replica import plan_hardware
    from deepseek_eks.sizing import KvCacheDtype, PlanRequest, plan

    fp8 = plan(PlanRequest("r1-distill-qwen-7b", ("g6",), kv_cache_dtype="fp8")).to_dict()
    assert plan_hardware(fp8).kv_cache_dtype is KvCacheDtype.FP8
    auto = plan(PlanRequest("r1-distill-qwen-7b", ("g6",))).to_dict()
    assert plan_hardware(auto).kv_cache_dtype is KvCacheDtype.AUTO


def test_nccl_over_pcie_moves_the_payload_at_the_cited_share_of_the_link() -> None:
    # The PCIe all-reduce table cited for NCCL's latency (4 ranks, PCIe Gen3 x16, 16 GB/s a
    # direction) grows 59.3 us from 32 KB to 384 KB: a ring moves 1.5x that payload per GPU, so
    # 9.1 GB/s, 57 % of the link. NVLink (custom all-reduce) and two PCIe GPUs keep the link figure.
    share = (384 - 32) * 1024 * 1.5 / (83.5e-6 - 24.2e-6) / 16e9
    assert performance.pcie_nccl_bus_efficiency() == pytest.approx(share)
    assert 0.55 < share < 0.6
    model = model_catalog()["r1-distill-llama-70b"]
    catalog = instance_catalog().instances
    pcie4 = hardware(model, Quantization.BF16, catalog["g6e.12xlarge"], 4)
    assert pcie4.link_efficiency == pytest.approx(share)
    assert hardware(model, Quantization.BF16, catalog["g6e.12xlarge"], 2).link_efficiency == 1.0
    assert hardware(model, Quantization.BF16, catalog["p5.48xlarge"], 4).link_efficiency == 1.0
    # The step pays the slower payload on both all-reduces of every layer, nothing else.
    gpu_only = pcie4.with_efficiencies(replace(pcie4.efficiencies, step_overhead_s=0.0, per_sequence_s=0.0))
    line_rate = replace(gpu_only, link_efficiency=1.0)
    tokens = 64
    ring = 2 * 3 / 4 * tokens * model.hidden_size * 2 / (pcie4.link_gb_s * 1e9)
    extra = 2 * model.num_hidden_layers * ring * (1 / share - 1)
    slower = performance.step_seconds(gpu_only, tokens, tokens * 600) - performance.step_seconds(
        line_rate, tokens, tokens * 600
    )
    assert slower == pytest.approx(extra, rel=1e-6)


def test_vetting_rule_client_cpu_is_applied_to_every_point() -> None:
    # measurements.json vetting.client_cpu: a point whose client would spend half a core or more
    # parsing its streamed tokens (tokens/s x the client's cited CPU per chunk) is harness-limited;
    # every point is judged by it, an unnamed client at the costliest cited figure.
    vetting = json.loads((ROOT / "sizing/data/measurements.json").read_text())["vetting"]["client_cpu"]
    cost = {k: v["value"] for k, v in vetting["per_chunk_cpu_s"].items()}
    assert all(v["source"] for v in vetting["per_chunk_cpu_s"].values())
    assert cost["not stated"] == max(cost.values())
    limited = set()
    for p in MEASUREMENTS:
        load = p["output_tokens_per_second"] * cost[p["client"]]
        if "rule client_cpu" in p.get("excluded", ""):
            assert load >= vetting["threshold_cores"], p["id"]
            limited.add(p["id"])
        elif "excluded" not in p:
            assert load < vetting["threshold_cores"], p["id"]
    assert limited == {"llama8b-h100-c16"}
    # An excluded point keeps its split: it is not moved, only left out.
    assert next(p for p in MEASUREMENTS if p["id"] == "llama8b-h100-c16")["split"] == "held_out"


def test_inferencebench_points_record_the_harness_lengths() -> None:
    # InferenceBench's chatbot-short asks every request for max_tokens=128 (plugin.py) over ten
    # one-line builtin prompts: 128 out and ~45 in (with Llama-3.1's chat template), not 128/256.
    sweep = [p for p in MEASUREMENTS if p["id"].startswith("llama8b-h100-")]
    assert {p["concurrency"] for p in sweep} == {1, 4, 16}
    for p in sweep:
        assert p["output_tokens"] == 128 and p["prompt_tokens"] == 45, p["id"]
        assert "lengths_assumed" not in p and "max_tokens=128" in p["lengths_source"], p["id"]
        assert p["split"] == "held_out" and p["client"] == "litellm-sync-stream", p["id"]


def test_the_overhead_calibration_is_refused_as_a_load_test_naming_where_it_belongs(tmp_path: Path) -> None:
    from deepseek_eks.perf.simulate.replica import CalibrationError, load_calibration

    overhead = tmp_path / "calibration.json"
    overhead.write_text(json.dumps({"about": "runtime overhead", "entries": []}))
    with pytest.raises(
        CalibrationError, match=r"is a runtime-overhead calibration .* python -m sizing --calibration"
    ):
        load_calibration(overhead)


def test_a_calibration_with_exponential_lengths_is_refitted_as_such(tmp_path: Path) -> None:
    """A load test with --lengths exponential (the simulator's own traffic) keeps more KV per
    running sequence than one at fixed lengths of the same means: a running sequence is
    length-biased and holds, on average, its prompt and a whole mean output, not half of one. The
    refit times the points that way, and predicts the replica at the planning lengths within 5 %;
    read as fixed lengths (what it did before), the heavier attention reads as a slower replica."""
    from deepseek_eks.perf.simulate.replica import CalibrationError, ReplicaModel, load_calibration

    d, limits, truth = _g6_plan_and_a_slower_replica("r1-distill-llama-8b")
    points = load_test_points(truth, limits, 500, 1162, exponential_lengths=True)
    report = tmp_path / "exponential.json"
    report.write_text(json.dumps({"points": points}))
    expected = planning_state(truth, limits, d["max_num_seqs"]).output_tokens_per_second
    assert ReplicaModel.from_plan(d, load_calibration(report)).saturated_tokens_per_s() == pytest.approx(
        expected, rel=0.05
    )
    report.write_text(json.dumps({"points": [{**p, "length_distribution": "fixed"} for p in points]}))
    assert ReplicaModel.from_plan(d, load_calibration(report)).saturated_tokens_per_s() < 0.9 * expected
    report.write_text(json.dumps({"points": [{**points[0], "length_distribution": "uniform"}]}))
    with pytest.raises(
        CalibrationError, match="length_distribution 'uniform' is not one of fixed, exponential"
    ):
        load_calibration(report)


def test_exponential_lengths_hold_a_whole_mean_output_per_running_sequence() -> None:
    """The running batch the KV cache admits: prompt + output / 2 tokens a sequence at fixed
    lengths, prompt + output with exponential ones (the length bias ``preemption_probability``
    reasons with)."""
    model = model_catalog()["r1-distill-qwen-7b"]
    hw = hardware(model, Quantization.BF16, instance_catalog().instances["g6.xlarge"], 1)
    limits = SchedulerLimits(256, 2048, 16 * 10_000)
    fixed = steady_state(hw, limits, 200, 500, 1000)
    exponential = steady_state(hw, limits, 200, 500, 1000, exponential_lengths=True)
    assert fixed.running == 160_000 // (16 * math.ceil(1000 / 16))  # 1,000 tokens each
    assert exponential.running == 160_000 // (16 * math.ceil(1500 / 16))  # 1,500 tokens each
    assert exponential.output_tokens_per_second < fixed.output_tokens_per_second


def test_a_load_test_of_another_model_is_refused_for_this_stack(tmp_path: Path) -> None:
    """The report says which served model it measured (config.model; a stack serves under its
    model.variant): refitting the 7B's replica to a 70B's speed is refused, naming both."""
    from deepseek_eks.perf.simulate.replica import CalibrationError, ReplicaModel, load_calibration

    d, limits, truth = _g6_plan_and_a_slower_replica("r1-distill-qwen-7b")
    report = tmp_path / "other.json"
    points = load_test_points(truth, limits, 500, 1162)
    report.write_text(json.dumps({"config": {"model": "r1-distill-llama-70b"}, "points": points}))
    with pytest.raises(CalibrationError, match=r"measured r1-distill-llama-70b .*, not r1-distill-qwen-7b"):
        ReplicaModel.from_plan(d, load_calibration(report))
    report.write_text(json.dumps({"config": {"model": "r1-distill-qwen-7b"}, "points": points}))
    assert ReplicaModel.from_plan(d, load_calibration(report)).hardware is not None


def test_a_load_test_on_another_instance_type_is_refused_for_this_stack(tmp_path: Path) -> None:
    """The report says which instance type it ran on (config.instance_type, loadtest
    --instance-type): the simulator's replica on the plan's type is not refitted to another's."""
    from deepseek_eks.perf.simulate.replica import CalibrationError, ReplicaModel, load_calibration

    d, limits, truth = _g6_plan_and_a_slower_replica("r1-distill-qwen-7b")
    report = tmp_path / "other.json"
    points = load_test_points(truth, limits, 500, 1162)
    other = "g6e.48xlarge"
    assert d["instance_type"] != other
    report.write_text(json.dumps({"config": {"instance_type": other}, "points": points}))
    with pytest.raises(CalibrationError, match=rf"ran on {other} .*, not {d['instance_type']}"):
        ReplicaModel.from_plan(d, load_calibration(report))
    report.write_text(json.dumps({"config": {"instance_type": d["instance_type"]}, "points": points}))
    assert ReplicaModel.from_plan(d, load_calibration(report)).hardware is not None
