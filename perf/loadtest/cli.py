"""python -m automation loadtest --url URL --model NAME ...: a streaming load test.

Examples:
  open loop, Poisson at 2 req/s for 5 minutes:
    python -m automation loadtest --url http://localhost:8000 --model r1-distill-llama-70b \\
        --arrivals poisson --rate 2 --duration 300 --out out.json
  closed loop, 16 clients, 200 requests (a calibration point for simulate --calibration):
    python -m automation loadtest --url ... --model ... --arrivals closed --concurrency 16 --requests 200
  the same in the cluster with vllm bench serve, then its result as calibration points (--stack
  records the replica as the stack's plan deploys it; --instance-type is its node's; the URL one
  pod's, from kubectl -n deepseek get endpointslices -l kubernetes.io/service-name=vllm):
    python -m automation loadtest --stack dev --url http://POD_ADDRESS:8000 --arrivals closed \\
        --concurrency 16 --requests 200 --instance-type g6.xlarge --as-job | kubectl apply -f -
    kubectl -n deepseek logs job/vllm-loadtest > bench.log
    python -m automation loadtest --from-vllm-bench bench.log --out calibration.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from deepseek_eks.components.versions import VLLM_RELEASE
from deepseek_eks.sizing.measured import (
    LENGTH_DISTRIBUTIONS,
    MEASURE_ONE,
    RECORD_VERSION,
    RECORDED_KV_CACHE_DTYPES,
    RECORDED_QUANTIZATIONS,
    REPLICA_SETTINGS,
    VLLM_VERSION_KEY,
    public_release,
    spreads_over_replicas,
)

from .metrics import GoodputError, parse_goodput
from .runner import (
    ARRIVALS,
    LENGTH_PROFILES,
    Arrivals,
    Lengths,
    LoadTestConfig,
    LoadTestError,
    print_progress,
    run,
)

API_KEY_ENV = "VLLM_API_KEY"


HELP = "streaming load test of an OpenAI-compatible endpoint (or a Job that runs it in the cluster)"


def parser() -> argparse.ArgumentParser:
    """The load tester's own command line (python -m perf.loadtest)."""
    p = argparse.ArgumentParser(
        prog="python -m automation loadtest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The load tester's options, on its own parser or on python -m automation's subcommand."""
    p.add_argument("--url", help="base URL of the OpenAI-compatible server")
    p.add_argument("--model", help="served model name (the stack's model.variant)")
    p.add_argument(
        "--arrivals",
        choices=ARRIVALS,
        default="poisson",
        help="how requests start: at --rate (constant, poisson), by --schedule, or --concurrency (closed)",
    )
    p.add_argument("--rate", type=float, default=1.0, help="requests/s for constant and poisson")
    p.add_argument("--schedule", default="", help="start_s:rate_rps steps, e.g. 0:1,60:4,120:0")
    p.add_argument("--concurrency", type=int, default=1, help="clients for --arrivals closed")
    p.add_argument("--requests", type=int, help="stop after this many requests")
    p.add_argument("--duration", type=float, help="stop starting requests after this many seconds")
    p.add_argument("--profile", choices=sorted(LENGTH_PROFILES), default="reasoning", help="length profile")
    p.add_argument("--prompt-tokens", type=int, help="mean prompt tokens (overrides the profile)")
    p.add_argument("--output-tokens", type=int, help="mean output tokens (overrides the profile)")
    p.add_argument(
        "--lengths",
        choices=LENGTH_DISTRIBUTIONS,
        default="fixed",
        help="token counts per request: the means exactly, or exponentially around them (default fixed)",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="whole request, seconds (default 600)")
    p.add_argument("--connect-timeout", type=float, default=10.0, help="TCP/TLS connect, seconds")
    p.add_argument(
        "--read-timeout",
        type=float,
        default=300.0,
        help="longest silence between bytes, first token included, seconds (default 300)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        help="open loop: connections at once (closed loop uses --concurrency)",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="random seed of arrivals and lengths (default 1); with --as-job, of vllm bench serve's prompts "
        "too (default: a fresh one each run, so a rerun's prompts are not in the prefix cache)",
    )
    p.add_argument(
        "--api-key-env", default=API_KEY_ENV, help=f"env var holding the API key (default {API_KEY_ENV})"
    )
    p.add_argument("--no-ignore-eos", action="store_true", help="let the model stop early")
    p.add_argument(
        "--goodput",
        nargs="+",
        default=[],
        metavar="KEY:MS",
        help="SLOs for goodput as vllm bench serve takes them: ttft, tpot or e2el in milliseconds",
    )
    p.add_argument(
        "--max-num-seqs",
        type=int,
        help="the replica's --max-num-seqs (the plan's), recorded: a point above it is flagged (it measures "
        "saturation), and a refit of the report runs the replica model under it",
    )
    p.add_argument(
        "--instance-type",
        help="the EC2 instance type the replica under test runs on (the plan's), recorded: a refit for "
        "another type is refused",
    )
    p.add_argument(
        "--tensor-parallel-size", type=int, help="the replica's tensor parallelism (the plan's), recorded"
    )
    p.add_argument(
        "--pipeline-parallel-size", type=int, help="the replica's pipeline parallelism (the plan's), recorded"
    )
    p.add_argument(
        "--quantization",
        choices=RECORDED_QUANTIZATIONS,
        help="the replica's weight format (the plan's quantization), recorded",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=RECORDED_KV_CACHE_DTYPES,
        help="the replica's KV-cache element type (the stack's model.kvCacheDtype), recorded",
    )
    p.add_argument(
        "--stack",
        metavar="NAME",
        help="record the replica as stack NAME's plan deploys it (offline): --model, --max-num-seqs, the "
        "parallelism, --quantization and --kv-cache-dtype, each unless given, and --instance-type where the "
        "node pool has one type. A refit of the report for a replica deployed otherwise is refused",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the full report as one JSON document on stdout (the summary goes to stderr)",
    )
    p.add_argument("--out", type=Path, metavar="FILE", help="write the full report (JSON) to FILE")
    p.add_argument(
        "--png", type=Path, help="plot TTFT and end-to-end latency over the run (needs matplotlib)"
    )
    p.add_argument("--quiet", action="store_true", help="no live progress line")
    job = p.add_argument_group("in-cluster run (vllm bench serve in the pinned vLLM image)")
    job.add_argument(
        "--as-job", action="store_true", help="print a Job that runs this test with vllm bench serve"
    )
    job.add_argument("--namespace", default="deepseek", help="namespace of the Job (default deepseek)")
    job.add_argument(
        "--job-deadline", type=int, help="seconds before the Job is stopped (default: from the bounds)"
    )
    job.add_argument("--image", help="another image with vLLM's bench CLI (default: the pinned vLLM image)")
    job.add_argument(
        "--tokenizer",
        help="Hugging Face repository or path of the model's tokenizer, which vllm bench serve needs for "
        "its prompts (default: the variant's repository in the model catalog)",
    )
    job.add_argument(
        "--from-vllm-bench",
        type=Path,
        metavar="FILE",
        help="convert a vllm bench serve result (its JSON, or the Job's log) into calibration points",
    )


def tokenizer_for(args: argparse.Namespace) -> str | None:
    """--tokenizer, or the catalog's Hugging Face repository of the served variant (None if the
    variant is not in the catalog)."""
    if args.tokenizer:
        return str(args.tokenizer)
    from deepseek_eks.sizing.catalog import model_catalog

    spec = model_catalog().get(args.model)
    return None if spec is None else spec.hf_repo


def print_job(args: argparse.Namespace, config: LoadTestConfig, replica: StackReplica) -> None:
    """The Job and its policies on stdout; a LoadTestError where its result could not be one
    replica's (the vllm Service of a stack that keeps several), a warning where it may not be."""
    import yaml

    from .job import bench_args, manifests, one_pod_url, spread_problem

    if spread := spread_problem(config.url):
        measure_one = f"measure one replica at its own address: {one_pod_url(args.namespace)}"
        if replica.min_replicas > 1:
            raise LoadTestError(
                f"--url {config.url}: stack {args.stack} keeps at least {replica.min_replicas} replicas "
                f"(autoscaling.minReplicas), and {spread}; {measure_one}"
            )
        print(
            f"warning: --url {config.url}: {spread}: the result is one replica's only while one runs "
            f"throughout; {measure_one}",
            file=sys.stderr,
        )

    deadline = args.job_deadline
    if deadline is None:
        # Until the last request may start, plus its timeout and five minutes to schedule the pod.
        deadline = int((config.duration_s or 6 * 3600) + config.timeout_s + 300)
    job = manifests(
        bench_args(config, tokenizer_for(args), args.namespace, args.seed),
        args.namespace,
        deadline,
        args.image,
    )
    print(yaml.safe_dump_all(job, sort_keys=False), end="")


def _schedule(text: str) -> tuple[tuple[float, float], ...]:
    steps = []
    for item in filter(None, text.split(",")):
        start, sep, rate = item.partition(":")
        try:
            steps.append((float(start), float(rate)))
        except ValueError:
            raise LoadTestError(f"--schedule item {item!r}: expected start_s:rate_rps") from None
        if not sep:
            raise LoadTestError(f"--schedule item {item!r}: expected start_s:rate_rps")
    return tuple(steps)


def config_from_args(args: argparse.Namespace) -> LoadTestConfig:
    """The test that ``args`` describe; a LoadTestError naming the option that is wrong."""
    missing = [flag for flag in ("--url", "--model") if not getattr(args, flag[2:])]
    if missing:
        raise LoadTestError(
            f"{' and '.join(missing)} required (or --from-vllm-bench FILE to convert a result)"
        )
    try:
        goodput = tuple(parse_goodput(args.goodput).items())
    except GoodputError as error:
        raise LoadTestError(str(error)) from None
    prompt, output = LENGTH_PROFILES[args.profile]
    return LoadTestConfig(
        url=args.url,
        model=args.model,
        arrivals=Arrivals(args.arrivals, args.rate, _schedule(args.schedule), args.concurrency),
        lengths=Lengths(args.prompt_tokens or prompt, args.output_tokens or output, args.lengths),
        max_requests=args.requests,
        duration_s=args.duration,
        timeout_s=args.timeout,
        connect_timeout_s=args.connect_timeout,
        read_timeout_s=args.read_timeout,
        max_connections=args.max_connections,
        seed=1 if args.seed is None else args.seed,
        api_key=os.environ.get(args.api_key_env) or None,
        ignore_eos=not args.no_ignore_eos,
        goodput_ms=goodput,
        **{key: getattr(args, key) for key in REPLICA_SETTINGS},
    )


class StackReplica(NamedTuple):
    """What --stack NAME's plan says of the replica: the served model (``model``) and the
    REPLICA_SETTINGS it deploys (``planned``; the instance type only where the node pool has one
    type), and the pool's types where it has several (``pool``: the node is whichever of them was
    launched). Empty without --stack."""

    planned: dict[str, Any]
    pool: tuple[str, ...] = ()
    # The stack's autoscaling.minReplicas: the replicas a Service address spreads a test over at
    # the least (0 without --stack: unknown).
    min_replicas: int = 0


def stack_replica(args: argparse.Namespace) -> StackReplica:
    """--stack NAME's replica, from its plan rendered offline; a LoadTestError naming the stack
    when it does not plan."""
    if not args.stack:
        return StackReplica({})
    from deepseek_eks.automation.api import prepare
    from deepseek_eks.automation.stackfile import PROJECT_ROOT, StackFileError
    from deepseek_eks.components import SizingError
    from deepseek_eks.settings import SettingsError

    try:
        plan = prepare(args.stack, {}, getattr(args, "project_dir", PROJECT_ROOT)).plan.to_dict()
    except (StackFileError, SettingsError, SizingError) as error:
        raise LoadTestError(f"--stack {args.stack}: {' '.join(str(error).split())}") from None
    planned = {"model": plan["variant"], **{key: plan[key] for key in REPLICA_SETTINGS}}
    if plan["instance_types"] == [plan["instance_type"]]:
        return StackReplica(planned, min_replicas=plan["min_replicas"])
    del planned["instance_type"]
    return StackReplica(planned, tuple(plan["instance_types"]), plan["min_replicas"])


def say_stack_differences(stack: str, replica: StackReplica, used: dict[str, Any]) -> None:
    """Notes on stderr for what the report records other than ``stack``'s plan (a flag given, or
    a Job's record), and for an instance type neither the plan nor the user gave."""
    for key, value in replica.planned.items():
        if used.get(key) is not None and used[key] != value:
            print(
                f"note: {key} {used[key]} is kept (given, or recorded by the result); stack {stack}'s "
                f"plan has {value}, so the report measures a replica deployed otherwise",
                file=sys.stderr,
            )
    if replica.pool and used.get("instance_type") is None:
        print(
            f"note: stack {stack}'s node pool may launch {', '.join(replica.pool)}: give --instance-type "
            "with the replica's node's (kubectl get nodes -L node.kubernetes.io/instance-type), or a "
            "refit takes it as the plan's",
            file=sys.stderr,
        )


def apply_stack(args: argparse.Namespace, replica: StackReplica) -> None:
    """Each replica setting (and --model) not given is taken from --stack's plan; one given
    otherwise is kept, and said."""
    used = {key: getattr(args, key) for key in replica.planned}
    say_stack_differences(args.stack, replica, {**used, "instance_type": args.instance_type})
    for key, value in replica.planned.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def spread_note(url: str) -> str | None:
    """A note for a local run at a name other than this machine's (a load balancer, a Service):
    it spreads the requests over every ready replica, so the report would be their sum; None for
    a loopback or IP address (a port-forward, which kubectl pins to one pod, or one pod's own)."""
    if not spreads_over_replicas(url):
        return None
    return (
        f"note: --url {url}: a load balancer or Service spreads the requests over every ready replica, "
        f"so the report is their sum, which a refit takes for one replica's speed. To measure one, "
        f"{MEASURE_ONE}"
    )


def summary_lines(report: dict[str, Any]) -> list[str]:
    req = report["requests"]
    lines = [
        f"requests       {req['sent']} sent, {req['completed']} completed, {req['failed']} failed "
        f"in {report['elapsed_s']:.1f} s ({report['achieved_rps']:.2f} req/s, "
        f"max {report['max_in_flight']} in flight)",
        f"output         {report['output_tokens']} tokens, {report['output_tokens_per_s']:.1f} tok/s",
    ]
    release = report["config"].get(VLLM_VERSION_KEY)
    if release is None:
        why = report.get("vllm_version_unknown")
        lines.append(f"vLLM           release not recorded ({why}): {RECORD_VERSION}")
    else:
        other = public_release(release) != VLLM_RELEASE
        deployed = f" (this checkout deploys {VLLM_RELEASE})" if other else ""
        lines.append(f"vLLM           {release}, as the server reports it{deployed}")
    point = report["points"][0]
    if "prompt_tokens" in point:
        lines.append(
            f"lengths        mean {point['prompt_tokens']:g} prompt / {point['output_tokens']:g} output "
            "tokens per completed request (the calibration point's)"
        )
    for name in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        s = report[name]
        if s["count"]:
            lines.append(
                f"{name[:-2].upper():<14} mean {s['mean']:.3f} s  p50 {s['p50']:.3f} s  "
                f"p95 {s['p95']:.3f} s  p99 {s['p99']:.3f} s  (n={s['count']})"
            )
    if report["goodput"]:
        g = report["goodput"]
        slos = " ".join(f"{k}:{v:g}" for k, v in g["slo_ms"].items())
        lines.append(
            f"goodput        {g['request_goodput_rps']:.2f} req/s ({g['good_requests']} within {slos} ms)"
        )
    if report["errors"]:
        lines.append("errors         " + ", ".join(f"{k} {v}" for k, v in report["errors"].items()))
    lines += [f"warning        {w}" for w in report["warnings"]]
    return lines


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in report["timeline"] if r["error"] is None]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.scatter([r["start_s"] for r in rows], [r["e2e_s"] for r in rows], s=6, label="end-to-end")
    ax.scatter([r["start_s"] for r in rows], [r["ttft_s"] for r in rows], s=6, label="TTFT")
    failed = [r["start_s"] for r in report["timeline"] if r["error"]]
    if failed:
        ax.scatter(failed, [0] * len(failed), marker="x", color="red", label="failed")
    ax.set_xlabel("request start, s")
    ax.set_ylabel("seconds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str]) -> int:
    return run_command(parser().parse_args(argv))


def convert_bench(args: argparse.Namespace, replica: StackReplica) -> int:
    """--from-vllm-bench: the result as calibration points, on stdout or in --out; ``replica``:
    --stack's (stack_replica)."""
    from .job import calibration_from_bench, read_bench_result

    path: Path = args.from_vllm_bench
    try:
        text = path.read_text()
    except OSError as error:
        raise LoadTestError(f"--from-vllm-bench {path}: {error.strerror}") from None
    result = read_bench_result(text, str(path))
    given = {key: getattr(args, key) for key in REPLICA_SETTINGS}
    # --stack's plan stands in only for what neither a flag nor the result's record says: a Job
    # run with a capped --max-num-seqs recorded what the replica ran with.
    report = calibration_from_bench(result, path.name, given, args.model, replica.planned)
    say_stack_differences(args.stack, replica, report["config"])
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    document = json.dumps(report, indent=2) + "\n"
    if args.out:
        args.out.write_text(document)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(document, end="")
    return 0


def run_command(args: argparse.Namespace) -> int:
    """Run the load test (or print its Job, or convert a vllm bench serve result) as parsed by
    ``add_arguments``; the exit code."""
    try:
        replica = stack_replica(args)
        if args.from_vllm_bench:
            return convert_bench(args, replica)
        apply_stack(args, replica)
        config = config_from_args(args)
        if args.as_job:
            print_job(args, config, replica)
            return 0
    except (LoadTestError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if note := spread_note(config.url):
        print(note, file=sys.stderr)
    result = asyncio.run(run(config, None if args.quiet else print_progress))
    if not args.quiet:
        sys.stderr.write("\n")
    human = sys.stderr if args.json else sys.stdout  # --json keeps stdout for the one document
    print("\n".join(summary_lines(result)), file=human)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}", file=human)
    if args.png:
        print(
            f"wrote {args.png}" if plot(result, args.png) else "matplotlib is not installed: no PNG",
            file=human,
        )
    if args.json:
        print(json.dumps(result, indent=2))
    return 1 if result["requests"]["completed"] == 0 else 0
