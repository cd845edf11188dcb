"""``python -m sizing throughput``: the replica model's steady state for one load.

    python -m sizing throughput --variant V --instance-type T [--tp N] [--quantization Q]
        --concurrency C --prompt-tokens P --output-tokens O [--lengths fixed|exponential]
        [--max-num-seqs N] [--region R]
        [--load-test REPORT] [--json]

It sizes the replica as the planner would (KV cache from the GPUs' memory, vLLM's default
``max_num_batched_tokens`` for the GPU) and answers ``sizing.performance.steady_state``. Any
catalogued instance type is answered, whatever a region offers or costs (a throughput does not
depend on either); ``--region`` only refuses a type the catalog says that region does not offer.
``--max-num-seqs`` defaults to vLLM's own default for the pinned engine version (what a published
benchmark that did not set it ran with), printed, and ``--json`` says which rule applied
(``max_num_seqs_rule``). Exit codes: 0 an answer; 1 the model does not fit on those GPUs, or the
region does not offer the type; 2 a bad flag (named in the message). ``--load-test`` refits the
model to a load test of that replica first (``sizing/measured.py``, as ``sizing capacity`` and
``simulate --calibration`` do), so the answer predicts the measured replica at another load.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from .catalog import VARIANTS, instance_catalog, model_catalog
from .measured import LoadTestReportError, read_load_test, refit_report
from .memory import Quantization, tensor_parallel_refusal
from .performance import (
    LENGTH_DISTRIBUTIONS,
    Hardware,
    PerformanceError,
    SchedulerLimits,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    hardware,
    length_distribution,
    steady_state,
)
from .planner import PRICE_FALLBACK_REGION, PlanRequest, Rejection, evaluate

# What --json's ``max_num_seqs_rule`` says for each way the value was chosen.
RULE_GIVEN = "--max-num-seqs as given"
RULE_VLLM_DEFAULT = (
    "vLLM 0.33.0's default for the GPU's memory (vllm/engine/arg_utils.py "
    "EngineArgs.get_batch_defaults, lines 2973-3006: 1024 from 70 GiB except A100, else 256)"
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sizing throughput",
        description="One vLLM replica's output tokens/s, TTFT and ITL for a closed-loop load.",
    )
    p.add_argument("--variant", required=True, choices=VARIANTS)
    p.add_argument("--instance-type", required=True, help="an EC2 GPU instance type, e.g. g6e.12xlarge")
    p.add_argument("--tp", type=int, help="tensor-parallel size (default: every GPU of the instance)")
    p.add_argument("--quantization", default="auto", choices=[q.value for q in Quantization])
    p.add_argument("--concurrency", type=int, required=True, help="streams in flight (closed loop)")
    p.add_argument("--prompt-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    p.add_argument(
        "--lengths",
        choices=LENGTH_DISTRIBUTIONS,
        default=LENGTH_DISTRIBUTIONS[0],
        help="token counts per request: the means exactly (a benchmark's closed loop), or drawn "
        "exponentially around them, as the simulator and the plan's throughput_basis take them "
        f"(default {LENGTH_DISTRIBUTIONS[0]})",
    )
    p.add_argument("--max-model-len", type=int, default=32768, help="context window (default 32768)")
    p.add_argument(
        "--max-num-seqs",
        type=int,
        help="vLLM --max-num-seqs (default: vLLM 0.33.0's own default for the GPU, printed)",
    )
    p.add_argument(
        "--region",
        help="refuse the type if the catalog says this region does not offer it (default: any region)",
    )
    p.add_argument(
        "--load-test",
        type=Path,
        metavar="REPORT",
        help="a load test of a replica of this variant on this type (python -m automation loadtest "
        "--out REPORT): the model is refitted to its points first, under the --max-num-seqs the report "
        "records (else this command's)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def _problems(args: argparse.Namespace) -> list[str]:
    problems = []
    for flag in ("concurrency", "prompt_tokens", "output_tokens", "max_model_len"):
        if getattr(args, flag) < 1:
            problems.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be at least 1")
    if args.max_num_seqs is not None and args.max_num_seqs < 1:
        problems.append(f"--max-num-seqs {args.max_num_seqs}: must be at least 1")
    if args.prompt_tokens + args.output_tokens > args.max_model_len:
        problems.append(
            f"--prompt-tokens + --output-tokens = {args.prompt_tokens + args.output_tokens} exceeds "
            f"--max-model-len {args.max_model_len}"
        )
    instances = instance_catalog().instances
    if args.instance_type not in instances:
        problems.append(f"--instance-type {args.instance_type}: not a GPU instance type of the catalog")
        return problems
    instance = instances[args.instance_type]
    if args.tp is not None:
        model = model_catalog()[args.variant]
        q = Quantization(args.quantization).resolve(model)
        if not 1 <= args.tp <= instance.gpu_count:
            problems.append(f"--tp {args.tp}: {instance.name} has {instance.gpu_count} GPUs")
        elif refusal := tensor_parallel_refusal(model, args.tp, q):
            problems.append(f"--tp {args.tp}: {refusal}")
    return problems


def _refitted(hw: Hardware, limits: SchedulerLimits, report: Path, instance_type: str) -> Hardware:
    """``hw`` (on ``instance_type``) refitted to a load-test report, as every command that takes
    one does it (``sizing/measured.py`` ``refit_report``), its warnings and notes on stderr."""
    measurements = read_load_test(report, "--load-test")
    refitted = refit_report(hw, limits, measurements, "--load-test", report, instance_type)
    for message in refitted.messages:
        print(message, file=sys.stderr)
    return refitted.hardware


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    problems = _problems(args)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    model = model_catalog()[args.variant]
    instance = instance_catalog().instances[args.instance_type]
    if args.region and instance.offered_in_region.get(args.region, True) is False:
        print(f"error: {instance.name} is not offered in {args.region}", file=sys.stderr)
        return 1
    # Offer and price do not change what a replica delivers: the planner's memory and kernel
    # checks run on the type as if offered at some price (a Capacity-Blocks-only type included).
    region = args.region or PRICE_FALLBACK_REGION
    priced = dict(instance.on_demand_usd_per_hour)
    if priced.get(region) is None:
        priced[region] = 0.0
    instance = replace(instance, offered_in_region={}, on_demand_usd_per_hour=priced)
    q = Quantization(args.quantization)
    request = PlanRequest(
        args.variant, (instance.family,), q, max_model_len=args.max_model_len, region=region
    )
    fit = evaluate(model, q, instance, request, args.tp)
    if isinstance(fit, Rejection):
        print(f"error: {fit.reason}", file=sys.stderr)
        return 1
    try:
        hw = hardware(model, q, instance, fit.tensor_parallel, fit.pipeline_parallel)
    except PerformanceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.max_num_seqs:
        max_num_seqs, rule = args.max_num_seqs, RULE_GIVEN
    else:
        max_num_seqs = default_max_num_seqs(instance.cuda_memory_mib, instance.gpu_model)
        rule = RULE_VLLM_DEFAULT
    limits = SchedulerLimits(
        max_num_seqs,
        default_max_num_batched_tokens(instance.cuda_memory_mib, instance.gpu_model),
        fit.kv_tokens,
    )
    if args.load_test is not None:
        try:
            hw = _refitted(hw, limits, args.load_test, instance.name)
        except LoadTestReportError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    exponential = args.lengths == length_distribution(True)
    state = steady_state(hw, limits, args.concurrency, args.prompt_tokens, args.output_tokens, exponential)
    doc = {
        "variant": model.variant,
        "instance_type": instance.name,
        "gpu_model": instance.gpu_model,
        "tensor_parallel_size": fit.tensor_parallel,
        "pipeline_parallel_size": fit.pipeline_parallel,
        "quantization": hw.quantization.value,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "lengths": args.lengths,
        "max_num_seqs": limits.max_num_seqs,
        "max_num_seqs_rule": rule,
        "max_num_batched_tokens": limits.max_num_batched_tokens,
        **state.to_dict(),
        "efficiencies": hw.efficiencies.source,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"{model.variant} on {instance.name} (TP {fit.tensor_parallel}, {hw.quantization.value}), "
        f"{args.concurrency} streams of {args.prompt_tokens} in / {args.output_tokens} out "
        f"({args.lengths} lengths):\n"
        f"  {state.output_tokens_per_second:.1f} output tok/s, {state.requests_per_second:.3f} req/s, "
        f"TTFT {state.ttft_s:.2f} s, ITL {state.itl_s * 1000:.1f} ms\n"
        f"  {state.running} running (limited by {state.limited_by}; max-num-seqs {limits.max_num_seqs}: "
        f"{'as given' if rule == RULE_GIVEN else 'vLLM 0.33.0 default'}), "
        f"KV cache {limits.kv_cache_tokens:,} tokens{', preempting' if state.preempted else ''}"
    )
    return 0
