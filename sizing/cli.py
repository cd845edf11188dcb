"""Command line of the sizing engine: ``python -m sizing --variant V --families f1,f2 ...``, and
``python -m sizing calibrate --log vllm.log ...`` to measure the runtime overhead (docs/sizing.md),
``python -m sizing throughput ...``: the replica model for one load, and ``python -m sizing capacity
...``: replica bounds for request rates (docs/sizing-performance.md).

Exit codes: 0 a feasible plan; 1 no feasible plan, or the EC2 refresh failed; 2 invalid input;
3 AWS credentials missing for --refresh-hardware."""

from __future__ import annotations

import argparse
import json
import sys

from .calibration import CalibrationError
from .catalog import GPU_FAMILIES, VARIANTS, instance_catalog
from .memory import KvCacheDtype, Quantization
from .planner import WEIGHTS_SOURCES, Infeasible, PlanError, PlanRequest, SizingPlan, WeightsSource, plan


def summary_lines(result: SizingPlan | Infeasible) -> list[str]:
    """A short human summary of a plan, shared by ``sizing`` and ``automation plan/render``."""
    if isinstance(result, Infeasible):
        lines = [f"No feasible plan for {result.request.variant}:"]
        lines += [f"  - {r}" for r in result.reasons]
        if result.suggestions:
            lines.append("What would work:")
            lines += [f"  - {s}" for s in result.suggestions]
        return lines
    d = result.to_dict()
    nodes = f" x {d['nodes_per_replica']} nodes" if d["nodes_per_replica"] > 1 else ""
    lines = [
        f"variant        {d['variant']} ({d['quantization']}, {d['repository'] or 'repository not set'})",
        f"instance type  {d['instance_type']}{nodes}: {d['gpus_per_replica']}x {d['gpu_model']}, "
        f"TP {d['tensor_parallel_size']} PP {d['pipeline_parallel_size']}"
        + (f", {d['replicas_per_node']} replicas per node" if d["replicas_per_node"] > 1 else ""),
        f"node pool      {', '.join(d['instance_types'])}",
        f"memory         weights {d['weights_gib']} GiB, KV cache {d['kv_cache_gib']} GiB = "
        f"{d['kv_cache_tokens']:,} tokens (max-model-len {d['max_model_len']:,})",
        f"per GPU        {d['gpu_cuda_memory_gib_per_gpu']} GiB CUDA-visible: "
        f"weights {d['weights_per_gpu_gib']}, runtime overhead {d['runtime_overhead_gib_per_gpu']} "
        f"({d['runtime_overhead_source']}), "
        f"load peak {d['load_peak_gib_per_gpu']} GiB",
        f"pod            cpu {d['cpu_request']}, memory {d['memory_request']}, "
        f"disk {d['ephemeral_storage_gib']} GiB",
        f"replicas       {d['min_replicas']}..{d['max_replicas']}",
        f"cost           ${d['replica_hourly_usd']:.2f}/h per replica; "
        f"${d['hourly_usd_at_min']:.2f}/h at min, ${d['hourly_usd_at_max']:.2f}/h at max",
    ]
    basis = d["throughput_basis"]
    lines.append(
        f"throughput     {d['output_tokens_per_second']:,.0f} output tok/s per replica at "
        f"{d['max_num_seqs']} sequences of {basis['prompt_tokens']} in / {basis['output_tokens']} out "
        f"({basis['lengths']} lengths; {d['requests_per_second']:.3f} req/s), "
        f"TTFT {d['ttft_s']:.2f} s, ITL {d['itl_s'] * 1000:.0f} ms; "
        f"${d['usd_per_million_output_tokens']:.2f} per million output tokens "
        f"(HBM roofline ${d['roofline_usd_per_million_output_tokens']:.2f})"
    )
    lines += [f"warning        {w}" for w in d["warnings"]]
    stages = d["startup_breakdown"]
    # A LeaderWorkerSet group's node stage is two launches in turn (sizing/planner.py startup_breakdown).
    serial = {"node": " (the leader's node, then its workers')"} if d["nodes_per_replica"] > 1 else {}
    lines.append(
        "cold start     "
        + ", ".join(f"{stage} {seconds} s{serial.get(stage, '')}" for stage, seconds in stages.items())
        + f"; probe budget {d['startup_probe_seconds']} s, Pulumi waits {d['rollout_seconds']} s"
    )
    extras = {
        "warm spare nodes": d["warm_spare_hourly_usd"],
        "fast snapshot restore": d["fast_snapshot_restore_hourly_usd"],
    }
    lines += [f"extra cost     ${usd:.2f}/h for {what}" for what, usd in extras.items() if usd]
    return lines


def _csv(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sizing",
        description="Size a DeepSeek-R1 variant on EC2 GPU instances (offline, bundled catalog).",
        epilog="other commands (each with its own --help): python -m sizing throughput (the replica model "
        "for one load), python -m sizing capacity (minReplicas and maxReplicas for request rates), "
        "python -m sizing calibrate (runtime overhead from a vLLM log)",
    )
    p.add_argument("--variant", required=True, choices=VARIANTS, help="the DeepSeek-R1 model to serve")
    p.add_argument("--families", required=True, type=_csv, help=f"comma-separated: {', '.join(GPU_FAMILIES)}")
    p.add_argument(
        "--quantization",
        default="auto",
        choices=[q.value for q in Quantization],
        help="weight format (default auto: the checkpoint's own, FP8 where the GPU runs it)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=[k.value for k in KvCacheDtype],
        help="KV cache element type (default auto: the model's 16-bit dtype; fp8 needs FP8 tensor cores)",
    )
    p.add_argument(
        "--max-model-len",
        type=int,
        default=32768,
        help="longest prompt plus output (default 32768)",
    )
    p.add_argument(
        "--min-full-length-sequences",
        type=int,
        default=1,
        help="sequences of --max-model-len the KV cache must hold at once (default 1)",
    )
    p.add_argument("--capacity-type", choices=["on-demand", "spot"], help="default: both, spot preferred")
    p.add_argument(
        "--region", default="us-east-1", help="AWS region of prices and offerings (default us-east-1)"
    )
    p.add_argument(
        "--weights-source",
        choices=WEIGHTS_SOURCES,
        default="huggingface",
        help="where the pods load weights from (default huggingface); sets the cold-start estimate",
    )
    p.add_argument("--repository", help="override the Hugging Face repo id or s3:// prefix")
    p.add_argument("--min-replicas", type=int, default=1, help="replicas always running (default 1)")
    p.add_argument("--max-replicas", type=int, default=3, help="most replicas it may scale to (default 3)")
    p.add_argument(
        "--refresh-hardware",
        action="store_true",
        help="check GPU facts against EC2 DescribeInstanceTypes first (needs AWS credentials)",
    )
    p.add_argument(
        "--calibration",
        help="runtime overheads measured with `python -m sizing calibrate` (default: the bundled file)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:
        from .calibration import main as calibrate

        return calibrate(argv[1:])
    if argv[:1] == ["capacity"]:
        from .capacity import main as capacity

        return capacity(argv[1:])
    if argv[:1] == ["throughput"]:
        from .throughput import main as throughput

        return throughput(argv[1:])
    args = parser().parse_args(argv)
    request = PlanRequest(
        variant=args.variant,
        families=args.families,
        quantization=Quantization(args.quantization),
        kv_cache_dtype=KvCacheDtype(args.kv_cache_dtype),
        max_model_len=args.max_model_len,
        min_full_length_sequences=args.min_full_length_sequences,
        capacity_types=(args.capacity_type,) if args.capacity_type else ("spot", "on-demand"),
        region=args.region,
        weights_source=WeightsSource(args.weights_source),
        repository=args.repository,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        calibration_file=args.calibration,
    )
    catalog = instance_catalog()
    if args.refresh_hardware:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        from .refresh import ec2_client, refresh_hardware

        try:
            catalog, drifts = refresh_hardware(catalog, ec2_client(args.region))
        except NoCredentialsError:
            print(
                "error: --refresh-hardware needs AWS credentials: run `aws configure` or `aws sso login`, "
                "or set AWS_PROFILE, then run the command again.",
                file=sys.stderr,
            )
            return 3
        except (BotoCoreError, ClientError) as e:  # reachable or not, the refresh failed: not bad input
            print(f"error: cannot read EC2 instance types in {args.region}: {e}", file=sys.stderr)
            return 1
        for drift in drifts:
            print(f"warning: catalog drift: {drift}", file=sys.stderr)
    try:
        result = plan(request, catalog)
    except (PlanError, CalibrationError) as e:
        if args.json:
            print(json.dumps({"feasible": False, "reasons": [str(e)], "suggestions": []}, indent=2))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print("\n".join(summary_lines(result)))
    return 0 if result.feasible else 1
