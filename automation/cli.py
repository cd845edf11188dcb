"""python -m automation: offline render and plan; preflight (read-only AWS checks); preview, up,
refresh, destroy and outputs through the Pulumi Automation API on the same program pulumi up runs.

Exit codes: 0 done; 1 infeasible plan or failed operation; 2 invalid settings or stack file;
3 a missing prerequisite (Pulumi CLI, AWS credentials)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from deepseek_eks.components import SizingError
from deepseek_eks.settings import SettingsError
from deepseek_eks.sizing.cli import summary_lines
from deepseek_eks.sizing.stack_cost import summary_lines as stack_cost_lines

from .costing import whole_stack_cost
from .stackfile import PROJECT_ROOT, StackFileError

DEFAULT_OUT = Path("build/rendered")
OPERATIONS = ("preview", "up", "refresh", "destroy")
CONFIRMED = ("up", "destroy")  # the operations that change resources and take --yes
SET_HELP = "override a setting for this run only (e.g. model.variant=r1-671b); never saved"


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m automation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--project-dir", type=Path, default=PROJECT_ROOT, help="folder with Pulumi.yaml and the stack files"
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="write every object the stack creates, offline")
    r.add_argument("--stack", required=True)
    r.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    _add_set(r)
    pl = sub.add_parser("plan", help="print the sizing plan of a stack, offline")
    pl.add_argument("--stack", required=True)
    _add_set(pl)
    pl.add_argument("--json", action="store_true")
    pf = sub.add_parser("preflight", help="read-only AWS checks: credentials, offerings, quotas")
    pf.add_argument("--stack", required=True)
    _add_set(pf)
    pf.add_argument("--json", action="store_true")
    for name in OPERATIONS:
        op = sub.add_parser(name, help=f"pulumi {name} through the Automation API")
        op.add_argument("--stack", required=True)
        _add_set(op)
        if name in CONFIRMED:
            op.add_argument("--yes", action="store_true", help=f"confirm: {name} changes real AWS resources")
        op.add_argument("--json", action="store_true", help="print the outputs as JSON at the end")
        if name == "up":
            op.add_argument("--skip-preflight", action="store_true", help="deploy without the AWS preflight")
    bake = sub.add_parser(
        "bake-weights",
        help="bake the checkpoint into an encrypted EBS snapshot (weights.source ebs-snapshot)",
    )
    bake.add_argument("--stack", required=True)
    bake.add_argument("--subnet-id", help="private subnet of the bake instance (default: the stack's first)")
    _add_set(bake)
    out = sub.add_parser("outputs", help="the stack's outputs (secrets masked)")
    out.add_argument("--stack", required=True)
    out.add_argument("--json", action="store_true")
    _guardrail_commands(sub)
    # The performance instruments keep their own options and handlers (automation/simulate/cli.py,
    # automation/loadtest/cli.py).
    from .loadtest import cli as loadtest_cli
    from .simulate import cli as simulate_cli

    for name, module in (("simulate", simulate_cli), ("loadtest", loadtest_cli)):
        instrument = sub.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(instrument)
        instrument.set_defaults(instrument=module.run_command)
    return p


def _warn(settings: Any) -> None:
    for warning in settings.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _guardrail_commands(sub: Any) -> None:
    """``diff``, ``urns`` and ``pins`` (upgrade safety and pin hygiene; see automation/guardrails.py)."""
    from .guardrails import add_commands

    add_commands(sub)


def _plan(stack: str, overrides: dict[str, str], as_json: bool, project_dir: Path) -> int:
    from .api import prepare

    prepared = prepare(stack, overrides, project_dir)
    _warn(prepared.settings)
    cost = whole_stack_cost(prepared.settings, prepared.plan)
    if as_json:
        print(json.dumps({**prepared.plan.to_dict(), **cost.to_dict()}, indent=2))
    else:
        print("\n".join([*summary_lines(prepared.plan), *stack_cost_lines(cost)]))
    return 0


def _render(stack: str, overrides: dict[str, str], out: Path, project_dir: Path) -> int:
    from .api import prepare
    from .render import render, write

    prepared = prepare(stack, overrides, project_dir)
    _warn(prepared.settings)
    rendered = render(prepared.config)
    root = write(rendered, out)
    print("\n".join(summary_lines(rendered.sizing)))
    if rendered.stack_cost:
        print("\n".join(stack_cost_lines(rendered.stack_cost)))
    kinds = Counter(m["kind"] for m in rendered.objects())
    kinds_text = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    print(
        f"rendered       {len(rendered.kubernetes)} Kubernetes objects ({kinds_text}), "
        f"{len(rendered.helm)} Helm releases, {len(rendered.aws)} AWS resources -> {root}"
    )
    return 0


def _preflight(stack: str, overrides: dict[str, str], as_json: bool, project_dir: Path) -> int:
    from rich.console import Console

    from .api import prepare
    from .preflight import as_json as checks_json
    from .preflight import exit_code, render_table, run_preflight

    prepared = prepare(stack, overrides, project_dir)
    _warn(prepared.settings)
    checks = run_preflight(prepared.settings, prepared.plan)
    checks.append(_compute_mode_check(stack, prepared.settings, project_dir))
    if as_json:
        print(json.dumps(checks_json(checks), indent=2))
    else:
        Console().print(render_table(checks))
    return exit_code(checks)


def _compute_mode_check(stack: str, settings: Any, project_dir: Path) -> Any:
    """The preflight row refusing an in-place computeMode switch (automation/mode_switch.py)."""
    from .mode_switch import preflight_check

    return preflight_check(stack, settings.compute_mode.value, project_dir)


def _print_outputs(values: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(values, indent=2, sort_keys=True, default=str))
        return
    for key in sorted(values):
        value = values[key]
        if isinstance(value, dict | list):
            value = json.dumps(value, default=str)
        print(f"{key:<22} {value}")


def _operation(args: argparse.Namespace) -> int:
    from .api import Operation, Orchestrator, parse_overrides
    from .preflight import run_preflight
    from .progress import EventPrinter

    orchestrator = Orchestrator(
        project_dir=args.project_dir, preflight=run_preflight, on_event=EventPrinter()
    )
    outputs = orchestrator.run(
        Operation(args.command),
        args.stack,
        parse_overrides(args.set),
        yes=getattr(args, "yes", False),
        skip_preflight=getattr(args, "skip_preflight", False),
    )
    if outputs:
        _print_outputs(outputs, args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    from .api import AutomationError, parse_overrides

    args = _parser().parse_args(argv)
    if "instrument" in args:
        return int(args.instrument(args))
    try:
        if args.command == "render":
            return _render(args.stack, parse_overrides(args.set), args.out, args.project_dir)
        if args.command == "plan":
            return _plan(args.stack, parse_overrides(args.set), args.json, args.project_dir)
        if args.command == "preflight":
            return _preflight(args.stack, parse_overrides(args.set), args.json, args.project_dir)
        if args.command in ("diff", "urns", "pins"):
            return int(args.run(args))
        if args.command == "bake-weights":
            from .bake import run_bake

            return run_bake(args.stack, parse_overrides(args.set), args.subnet_id, args.project_dir)
        if args.command == "outputs":
            from .api import outputs

            _print_outputs(outputs(args.stack, args.project_dir), args.json)
            return 0
        return _operation(args)
    except (SettingsError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SizingError as error:
        print(str(error), file=sys.stderr)
        return 1
    except AutomationError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
