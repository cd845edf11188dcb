"""python -m automation simulate --stack NAME [--trace F] [--seed N] [--compare]: a discrete-event
simulation of the stack's autoscaler, as rendered, under a traffic trace."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deepseek_eks.automation.stackfile import PROJECT_ROOT, StackFileError
from deepseek_eks.components import SizingError
from deepseek_eks.settings import SettingsError

from .hpa import AutoscalerSpecError
from .replica import CalibrationError, NoThroughputData, calibrate, published_curve
from .run import (
    FIXED,
    Run,
    StackInputs,
    TraceSpec,
    build_trace,
    compare,
    demand_history,
    load_stack,
    plot,
    preemption_lines,
    simulate,
    table,
)
from .traffic import PROFILES, LengthProfile, TraceError

DEFAULT_OUT = Path("build/simulate")


HELP = "simulate the stack's autoscaler under a traffic trace: replicas, latency, SLOs, cost"


def parser() -> argparse.ArgumentParser:
    """The simulator's own command line."""
    p = argparse.ArgumentParser(prog="python -m automation simulate", description=__doc__)
    add_arguments(p)
    p.set_defaults(project_dir=PROJECT_ROOT)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The simulator's options, on its own parser or on python -m automation's subcommand."""
    p.add_argument("--stack", required=True, help="the stack to simulate: Pulumi.<STACK>.yaml")
    # No default here: under python -m automation the top-level --project-dir supplies it.
    p.add_argument(
        "--project-dir",
        type=Path,
        default=argparse.SUPPRESS,
        help="folder with Pulumi.yaml and the stack files",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    p.add_argument(
        "--trace", type=Path, help="CSV: arrival_s[,prompt_tokens,output_tokens] or start_s,rate_rps"
    )
    p.add_argument("--profile", choices=PROFILES, default="bursty", help="built-in trace (default bursty)")
    p.add_argument("--hours", type=float, default=24.0, help="length of a built-in trace (default 24)")
    p.add_argument(
        "--rate",
        type=float,
        help="mean requests/s (default: the rate whose peak maxReplicas serve within the SLO)",
    )
    p.add_argument(
        "--history-rate",
        type=float,
        metavar="RATE",
        help="mean requests/s of the earlier days autoscaling.seasonal reads (default: --rate's, a day like "
        "yesterday); below --rate, a quiet day such as a holiday, where the seasonal floor holds what "
        "yesterday needed",
    )
    p.add_argument(
        "--prompt-tokens", type=int, default=LengthProfile().prompt_tokens, help="mean prompt length"
    )
    p.add_argument(
        "--output-tokens", type=int, default=LengthProfile().output_tokens, help="mean output length"
    )
    p.add_argument("--seed", type=int, default=1, help="random seed of the built-in trace (default 1)")
    p.add_argument("--calibration", type=Path, help="load-test JSON with measured throughput points")
    p.add_argument(
        "--compare",
        action="store_true",
        help="the stack's autoscaler, every other signal, both published guides, fixed fleets and the "
        "oracle; then the routing what-if (llm-d's router, the router-queue signal, scale from zero)",
    )
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"PNG and JSON go here (default {DEFAULT_OUT})"
    )


def _write(runs: list[Run], header: dict[str, object], out: Path, stack: str) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    report = {
        **header,
        "runs": [
            {
                **r.summary.as_dict(),
                "timeline": {
                    "columns": [
                        "t_s",
                        "desired_replicas",
                        "ready_replicas",
                        "waiting_requests",
                        "arrivals_rps",
                    ],
                    "rows": r.outcome.timeline,
                },
            }
            for r in runs
        ],
    }
    json_path = out / f"{stack}.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    written.append(str(json_path))
    png = out / f"{stack}.png"
    # The fixed fleets are flat lines: the plot shows the autoscalers and the oracle.
    if plot([r for r in runs if not r.summary.label.startswith(FIXED)], png):
        written.append(str(png))
    return written


def _warn(stack: str, overrides: dict[str, str], project_dir: Path) -> None:
    """The stack's settings warnings, each once: its renders (one per signal with --compare) keep
    what the program logs to themselves (automation/render.py)."""
    from deepseek_eks.automation.api import read_config
    from deepseek_eks.settings import parse_settings

    config = read_config(stack, overrides, project_dir)
    for warning in parse_settings(config.values, config.secret_keys, stack).warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _check_history_rate(args: argparse.Namespace, inputs: StackInputs) -> None:
    """A TraceError where --history-rate would change nothing: a trace file has no earlier days,
    and a stack without the seasonal triggers reads none."""
    if args.history_rate is None:
        return
    if args.trace is not None:
        raise TraceError(
            "--history-rate: a --trace file has no earlier days (the seasonal triggers read 0, as for a "
            "new service); drop one of the two"
        )
    if not any(m.window for m in inputs.autoscaler.metrics):
        raise TraceError(
            f"--history-rate: stack {args.stack} has no seasonal triggers (autoscaling.seasonal is false), "
            "so nothing reads the earlier days; add --set autoscaling.seasonal=true"
        )


def _simulate(args: argparse.Namespace) -> int:
    from deepseek_eks.automation.api import parse_overrides

    overrides = parse_overrides(args.set)
    for name in ("hours", "rate", "history_rate", "prompt_tokens", "output_tokens"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise TraceError(f"--{name.replace('_', '-')} must be positive, got {value}")
    spec = TraceSpec(
        profile=args.profile,
        hours=args.hours,
        rate_rps=args.rate,
        csv=args.trace,
        seed=args.seed,
        lengths=LengthProfile(args.prompt_tokens, args.output_tokens),
        history_rate_rps=args.history_rate,
    )
    inputs = load_stack(args.stack, overrides, args.project_dir)
    _check_history_rate(args, inputs)
    curve = None
    if args.calibration:
        curve, messages = calibrate(inputs.plan, args.calibration)
        for message in messages:
            print(message, file=sys.stderr)
    _warn(args.stack, overrides, args.project_dir)
    if args.compare:
        runs, rate, used = compare(args.stack, spec, overrides, args.project_dir, curve, inputs)
    else:
        used = curve or published_curve(inputs.plan)
        trace, duration, rate = build_trace(spec, inputs, used)
        runs = [simulate(inputs, trace, duration, used, history=demand_history(inputs, spec, rate, used))]
    first = runs[0]
    header: dict[str, object] = {
        "stack": args.stack,
        "trace": str(args.trace) if args.trace else f"{args.profile}, {args.hours:g} h",
        "seed": args.seed,
        "mean_rate_rps": round(rate, 4),
        **({"history_mean_rate_rps": args.history_rate} if args.history_rate is not None else {}),
        "requests": first.summary.requests,
        "throughput_source": used.source,
    }
    print(
        f"stack {args.stack}: {header['trace']} trace, seed {args.seed}, mean {rate:.3f} req/s, "
        f"{first.summary.requests} requests"
        + (
            f"; earlier days (the seasonal history) at {args.history_rate:g} req/s"
            if args.history_rate
            else ""
        )
        + f"\nthroughput: {used.source}"
    )
    for run_ in runs:
        print(f"  {run_.summary.autoscaler}")
    print(table([r.summary for r in runs]))
    for line in preemption_lines([r.summary for r in runs]):
        print(line)
    if args.compare:
        from . import routing

        whatif = routing.whatif(args.stack, spec, overrides, args.project_dir, used)
        header["routing_whatif"] = whatif.as_dict()
        print(
            f"\nrouting what-if ({whatif.trace}; prompt tokens an earlier request computed: "
            f"{whatif.reuse_share:.1%}, fitted to {routing.PUBLISHED_REUSE_SOURCE}; router queue TTL "
            f"{whatif.request_ttl_s:g} s, at most {whatif.max_requests} held)"
        )
        print(routing.table(whatif.rows))
    for path in _write(runs, header, args.out, args.stack):
        print(f"wrote {path}")
    return 0


def main(argv: list[str]) -> int:
    return run_command(parser().parse_args(argv))


def run_command(args: argparse.Namespace) -> int:
    """Simulate as parsed by ``add_arguments``; the exit code (2 bad input or an unreadable
    --calibration file, 1 infeasible plan or no throughput data for the plan)."""
    from deepseek_eks.automation.api import AutomationError

    try:
        return _simulate(args)
    except (SettingsError, StackFileError, TraceError, AutoscalerSpecError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SizingError as error:
        print(str(error), file=sys.stderr)
        return 1
    except NoThroughputData as error:  # exit 3 is for missing tools and credentials only
        print(f"error: cannot simulate: {error}", file=sys.stderr)
        return 1
    except CalibrationError as error:  # a --calibration file that is not a load-test report
        print(f"error: {error}", file=sys.stderr)
        return 2
    except AutomationError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
