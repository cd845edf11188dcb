"""python -m automation: offline render, plan and capacity; preflight (read-only AWS checks); preview, up,
refresh, destroy and outputs through the Pulumi Automation API on the same program pulumi up runs.

up, refresh and destroy show a preview first and ask before changing anything (--yes answers
for you; with no terminal and no --yes they refuse). preview and up run the project's policy pack
unless --no-policy-pack. --json prints one JSON document on stdout and everything else on stderr.

Exit codes: 0 done; 1 infeasible plan or failed operation; 2 invalid settings or stack file, or a
refused confirmation; 3 a missing prerequisite (Pulumi CLI, AWS credentials)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from deepseek_eks.components import SizingError
from deepseek_eks.components.service import ServiceError
from deepseek_eks.settings import PROJECT, SettingsError
from deepseek_eks.sizing.cli import summary_lines
from deepseek_eks.sizing.stack_cost import summary_lines as stack_cost_lines

from .costing import whole_stack_cost
from .stackfile import PROJECT_ROOT, StackFileError, read_project

DEFAULT_OUT = Path("build/rendered")
OPERATIONS = ("preview", "up", "refresh", "destroy")
CONFIRMED = ("up", "refresh", "destroy")  # the operations that change state and ask first
SET_HELP = "override a setting for this run only (e.g. model.variant=r1-671b); never saved"
STACK_HELP = "the stack: its settings are Pulumi.<STACK>.yaml in --project-dir"
JSON_HELP = "print one JSON document on stdout and nothing else (human text goes to stderr)"


class Output:
    """Where a command writes: human text to stdout, or to stderr when ``--json`` keeps stdout
    for the one JSON document. Engine and user text is printed as ``Text``, never as markup."""

    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json
        self.human = Console(file=sys.stderr if as_json else sys.stdout, highlight=False, soft_wrap=True)
        self.errors = Console(file=sys.stderr, highlight=False, soft_wrap=True)
        self.warned: set[str] = set()  # the warnings this command has shown

    def warn(self, message: str) -> None:
        """``warning: message`` on stderr, once per command: the stack's settings say it, and the
        program says it again on each run of it."""
        if message not in self.warned:
            self.warned.add(message)
            self.error(f"warning: {message}")

    def line(self, text: str | Text) -> None:
        self.human.print(Text(text) if isinstance(text, str) else text)

    def error(self, text: str) -> None:
        self.errors.print(Text(text))

    def document(self, doc: Any) -> None:
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")


Handler = Callable[[argparse.Namespace, Output], int]


@dataclass(frozen=True)
class Command:
    """A subcommand: its help line, its options and what it runs."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, add_arguments: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    """Register ``run`` as the subcommand ``name`` (one function per subcommand)."""

    def register(run: Handler) -> Handler:
        COMMANDS[name] = Command(name, help, add_arguments, run)
        return run

    return register


# -- shared options --------------------------------------------------------------------------
def _stack(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, metavar="STACK", help=STACK_HELP)


def _set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _stack_set(p: argparse.ArgumentParser) -> None:
    _stack(p)
    _set(p)


def _stack_set_json(p: argparse.ArgumentParser) -> None:
    _stack_set(p)
    _json(p)


def _operation_arguments(name: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        _stack_set_json(p)
        if name in CONFIRMED:
            p.add_argument(
                "--yes",
                action="store_true",
                help="answer yes to the confirmation (the preview is still shown)",
            )
        p.add_argument(
            "--diff", action="store_true", help="also show Pulumi's own diff text (old and new values)"
        )
        p.add_argument(
            "--target",
            action="append",
            default=[],
            metavar="URN",
            help="only this resource (repeatable); see `pulumi stack --show-urns`",
        )
        p.add_argument(
            "--parallel",
            type=int,
            metavar="N",
            help="at most N resource operations at once (Pulumi's default: unbounded)",
        )
        if name in ("preview", "up", "destroy"):
            p.add_argument("--refresh", action="store_true", help="refresh the state from AWS first")
        if name in ("preview", "up", "refresh"):
            p.add_argument(
                "--expect-no-changes", action="store_true", help="fail (exit 1) if anything would change"
            )
        if name in ("preview", "up"):
            p.add_argument(
                "--no-policy-pack",
                action="store_true",
                help="do not run the project's policy pack (it runs by default; a warning says it did not)",
            )
        if name == "up":
            p.add_argument("--skip-preflight", action="store_true", help="deploy without the AWS preflight")
        if name in CONFIRMED:
            p.add_argument(
                "--progress-interval",
                type=float,
                default=30.0,
                metavar="SECONDS",
                help="off a terminal, print the steps still running this often (default 30)",
            )

    return add


# -- offline commands ------------------------------------------------------------------------
def _prepared(args: argparse.Namespace, out: Output) -> Any:
    """The stack's validated settings and plan (``api.prepare``), its warnings on stderr."""
    from .api import parse_overrides, prepare

    prepared = prepare(args.stack, parse_overrides(args.set), args.project_dir)
    for warning in prepared.settings.warnings:
        out.warn(warning)
    for blocker in prepared.settings.deploy_blockers:
        out.warn(f"preflight and up refuse this stack: {blocker}")
    for blocker in prepared.settings.first_run_blockers:
        out.warn(f"preflight warns and up refuses a first deployment: {blocker}")
    return prepared


def _render_arguments(p: argparse.ArgumentParser) -> None:
    _stack_set(p)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")


@command("render", "write every object the stack creates, offline", _render_arguments)
def _render(args: argparse.Namespace, out: Output) -> int:
    from .render import render, write

    prepared = _prepared(args, out)
    rendered = render(prepared.config)
    for warning in rendered.warnings:  # the program's own: those of the settings were shown above
        if warning not in rendered.sizing.warnings:  # the plan's: its summary below shows them
            out.warn(warning)
    root = write(rendered, args.out)
    for line in summary_lines(rendered.sizing):
        out.line(line)
    if rendered.stack_cost:
        for line in stack_cost_lines(rendered.stack_cost):
            out.line(line)
    out.line(alerts_line(prepared.settings))
    for extra in (routing_line(prepared.settings, rendered.sizing), dcgm_line(prepared.settings)):
        if extra:
            out.line(extra)
    kinds = Counter(m["kind"] for m in rendered.objects())
    kinds_text = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    out.line(
        f"rendered       {len(rendered.kubernetes)} Kubernetes objects ({kinds_text}), "
        f"{len(rendered.helm)} Helm releases, {len(rendered.aws)} AWS resources -> {root}"
    )
    return 0


def routing_facts(settings: Any, plan: Any) -> dict[str, Any] | None:
    """With llm-d's router: what a request that finds no replica waits in its queue before the
    503 (KEDA's next read of the queue, then a replica started within the plan's rollout budget),
    and how many requests the queue holds (components/serving/router.py); None without it."""
    from deepseek_eks.components.serving.router import cold_request_wait_seconds, endpoint_picker_config

    if settings.routing.kind.value != "llm-d":
        return None
    queue = endpoint_picker_config(plan, settings.autoscaling.max_replicas)["flowControl"]
    return {
        "kind": "llm-d",
        "cold_request_wait_seconds": cold_request_wait_seconds(plan),
        "queue_max_requests": int(queue["maxRequests"]),
        "scales_from_zero": settings.autoscaling.min_replicas == 0,
    }


def routing_line(settings: Any, plan: Any) -> str | None:
    facts = routing_facts(settings, plan)
    if facts is None:
        return None
    wait = facts["cold_request_wait_seconds"]
    cold = (
        f"at zero replicas a request waits up to {wait} s in the router's queue while KEDA starts one"
        if facts["scales_from_zero"]
        else f"a request waits in the router's queue up to {wait} s"
    )
    return (
        f"router         llm-d (prefix-cache and load aware); {cold}, then gets 503 with "
        f"Retry-After {wait}; the queue holds {facts['queue_max_requests']} requests"
    )


def alerts_line(settings: Any) -> str:
    """Where the alert rules' firing alerts go, said in every plan: Alertmanager is off by default,
    and kube-prometheus-stack's own Alertmanager configuration sends every alert to its 'null'
    receiver (the chart's values.yaml, alertmanager.config)."""
    if settings.observability.alertmanager:
        return (
            "alerts         Alertmanager routes them: give it your receivers (the chart's default "
            "sends every alert to its 'null' receiver)"
        )
    return (
        "alerts         evaluated by Prometheus but routed nowhere (observability.alertmanager false): "
        "nobody is paged; set observability.alertmanager true and give it a receiver"
    )


# NVIDIA/dcgm-exporter#636 (open): the exporter exits at start on EKS 1.34 Bottlerocket GPU nodes
# (libdcgm.so.4 missing from the container's linker cache); the pinned 4.5.3-4.8.2 has the same
# startup check (reference/upstream/dcgm-exporter-636.json). Auto Mode's GPU nodes run Bottlerocket.
DCGM_636 = "https://github.com/NVIDIA/dcgm-exporter/issues/636"
DCGM_636_KUBERNETES = ("1.34",)


def dcgm_line(settings: Any) -> str | None:
    """What the stack scales on if dcgm-exporter cannot start: said in the plan where the known
    failure applies (Auto Mode's Bottlerocket nodes at Kubernetes 1.34) and the signal reads GPU
    utilization; None otherwise."""
    signal = settings.autoscaling.signal.value
    exposed = (
        settings.compute_mode.value == "auto-mode" and settings.kubernetes_version in DCGM_636_KUBERNETES
    )
    if not exposed or signal not in ("gpu-utilization", "combined"):
        return None
    effect = (
        "the GPU-utilization HPA then keeps its replica count: it neither scales out nor in"
        if signal == "gpu-utilization"
        else "the queue trigger still scales out, but nothing scales in while the GPU trigger fails"
    )
    return (
        f"dcgm-exporter  may not start on Auto Mode's Bottlerocket GPU nodes at Kubernetes "
        f"{settings.kubernetes_version} ({DCGM_636}); {effect}. autoscaling.signal concurrency, "
        "kv-cache or queue-depth read vLLM's own metrics instead"
    )


@command("plan", "print the sizing plan of a stack, offline", _stack_set_json)
def _plan(args: argparse.Namespace, out: Output) -> int:
    from deepseek_eks.perf.simulate import routing as whatif_routing

    prepared = _prepared(args, out)
    cost = whole_stack_cost(prepared.settings, prepared.plan)
    facts = routing_facts(prepared.settings, prepared.plan)
    whatif = whatif_routing.plan_field(prepared.settings, prepared.plan.to_dict())
    if out.as_json:
        document = {**prepared.plan.to_dict(), **cost.to_dict(), "routing_whatif": whatif}
        out.document({**document, **({"routing": facts} if facts else {})})
    else:
        lines = [*summary_lines(prepared.plan), *stack_cost_lines(cost), alerts_line(prepared.settings)]
        lines.append(whatif_routing.plan_line(whatif))
        for line in [*lines, routing_line(prepared.settings, prepared.plan), dcgm_line(prepared.settings)]:
            if line:
                out.line(line)
    return 0


def _capacity_arguments(p: argparse.ArgumentParser) -> None:
    from deepseek_eks.sizing.capacity import add_load_arguments

    _stack_set(p)
    add_load_arguments(p, ttft_slo_default="the stack's")


@command(
    "capacity",
    "minReplicas and maxReplicas for a stack's request rates and TTFT SLO, on its own plan "
    "(optionally a load test of it), offline",
    _capacity_arguments,
)
def _capacity(args: argparse.Namespace, out: Output) -> int:
    from deepseek_eks.sizing.capacity import Load, LoadError, NoReplicaCount
    from deepseek_eks.sizing.measured import LoadTestReportError

    from .api import parse_overrides
    from .capacity import capacity_changes, replan_refusal

    prepared = _prepared(args, out)
    settings, sized = prepared.settings, prepared.plan
    try:
        load = Load.from_args(args, float(settings.observability.ttft_slo_seconds))
        cap, messages = load.size(sized)
    except LoadError as error:
        return _fail(out, 2, "\n".join(f"error: {problem}" for problem in error.problems))
    except LoadTestReportError as error:
        return _fail(out, 2, f"error: {error}")
    except NoReplicaCount as error:
        return _fail(out, 1, f"error: {error}")
    for message in messages:
        out.error(message)
    autoscaling = settings.autoscaling
    changes = capacity_changes(prepared.config, autoscaling.min_replicas, autoscaling.max_replicas, cap)
    # The raises offered are checked together: the stack must build with all of them.
    proposed = {c["setting"]: c["needed"] for c in changes if c["command"]}
    overrides = parse_overrides(args.set)
    if proposed and (refusal := replan_refusal(args.stack, overrides, args.project_dir, sized, proposed)):
        for change in changes:
            if change["command"]:
                change["why"] += f"; but the stack cannot take it: {refusal}"
                change["command"] = None
    if out.as_json:
        out.document(
            {
                "stack": args.stack,
                "variant": settings.model.variant.value,
                "instance_type": sized.instance_type,
                "ttft_slo_seconds": load.ttft_slo_s,
                **cap.to_dict(),
                "stack_min_replicas": autoscaling.min_replicas,
                "stack_max_replicas": autoscaling.max_replicas,
                "changes": changes,
            }
        )
        return 0
    out.line(load.summary(cap, sized.instance_type))
    if load.measurements:
        out.line(f"replica speed from {load.report} (the replica model refitted to its points)")
    for change in changes:
        out.line(change["why"])
        if change["command"]:
            out.line(f"  {change['command']}")
    return 0


@command("preflight", "read-only AWS checks: credentials, offerings, quotas", _stack_set_json)
def _preflight(args: argparse.Namespace, out: Output) -> int:
    from .mode_switch import preflight_check
    from .preflight import as_json as checks_json
    from .preflight import exit_code, render_table, run_preflight

    prepared = _prepared(args, out)
    checks = run_preflight(prepared.settings, prepared.plan)
    # the row refusing an in-place computeMode switch (automation/mode_switch.py)
    checks.append(preflight_check(args.stack, prepared.settings.compute_mode.value, args.project_dir))
    if out.as_json:
        out.document(checks_json(checks))
    else:
        out.human.print(render_table(checks))
    return exit_code(checks)


def _bake_arguments(p: argparse.ArgumentParser) -> None:
    _stack(p)
    p.add_argument("--subnet-id", help="private subnet of the bake instance (default: the stack's first)")
    _set(p)


@command(
    "bake-weights",
    "bake the checkpoint into an encrypted EBS snapshot (weights.source ebs-snapshot)",
    _bake_arguments,
)
def _bake(args: argparse.Namespace, out: Output) -> int:
    from .api import parse_overrides
    from .bake import run_bake

    return run_bake(args.stack, parse_overrides(args.set), args.subnet_id, args.project_dir)


def _print_outputs(values: dict[str, Any], out: Output) -> None:
    for key in sorted(values):
        value = values[key]
        if isinstance(value, dict | list):
            value = json.dumps(value, default=str)
        out.line(f"{key:<22} {value}")


def _outputs_arguments(p: argparse.ArgumentParser) -> None:
    _stack(p)
    _json(p)


@command("outputs", "the stack's outputs (secrets masked)", _outputs_arguments)
def _outputs(args: argparse.Namespace, out: Output) -> int:
    from .api import outputs

    values = outputs(args.stack, args.project_dir)
    if out.as_json:
        out.document(values)
    else:
        _print_outputs(values, out)
    return 0


# -- Pulumi operations -----------------------------------------------------------------------
def _prompt(out: Output) -> Callable[[Any, Any], bool]:
    """Ask on the terminal, after the preview was shown; nothing to change needs no answer."""

    def confirm(operation: Any, changes: Any) -> bool:
        if not changes.has_changes:
            return True
        out.errors.print(
            Text(f"Do you want to {operation.value} stack resources as shown above? [y/N] "), end=""
        )
        try:
            answer = input()
        except EOFError:
            answer = ""
        return answer.strip().lower() in ("y", "yes")

    return confirm


def _show_changes(out: Output, operation: str) -> Callable[[Any], None]:
    def show(changes: Any) -> None:
        what = "Preview" if operation == "preview" else f"Preview of `{operation}`"
        out.line(Text(f"{what}:", "bold"))
        for line in changes.lines():
            out.line(line)

    return show


def _operation(args: argparse.Namespace, out: Output) -> int:
    from .api import AutomationError, Operation, Orchestrator, RunOptions, parse_overrides
    from .preflight import run_preflight
    from .progress import ProgressView

    operation = Operation(args.command)
    yes = getattr(args, "yes", False)
    if args.command in CONFIRMED and not yes and not sys.stdin.isatty():
        raise AutomationError(
            f"`{args.command}` asks before changing anything and there is no terminal to ask on: "
            f"pass --yes to go ahead (the preview is still shown first).",
            2,
        )
    no_pack = getattr(args, "no_policy_pack", False)
    if no_pack:
        out.error("warning: --no-policy-pack: the project's policy pack does not run; its rules go unchecked")
    options = RunOptions(
        diff=args.diff,
        target=list(args.target),
        refresh=getattr(args, "refresh", False),
        parallel=args.parallel,
        expect_no_changes=getattr(args, "expect_no_changes", False),
        policy_packs=[] if no_pack else None,
    )
    orchestrator = Orchestrator(
        project_dir=args.project_dir,
        preflight=run_preflight,
        print=out.line,
        confirm=_prompt(out),
        show_changes=_show_changes(out, args.command),
        progress=lambda _: ProgressView(out.human, heartbeat_s=getattr(args, "progress_interval", 30.0)),
        on_output=(lambda line: out.line(Text(line))) if args.diff else None,
    )
    result = orchestrator.run_detailed(
        operation,
        args.stack,
        parse_overrides(args.set),
        yes=yes,
        skip_preflight=getattr(args, "skip_preflight", False),
        options=options,
    )
    if out.as_json:
        out.document(
            {
                "operation": operation.value,
                "stack": args.stack,
                **result.changes.to_dict(),
                "applied": result.applied,
                "timings": result.timings,
                **({"kept": result.kept} if operation.value == "destroy" else {}),
                "outputs": result.outputs,
            }
        )
    elif result.outputs:
        _print_outputs(result.outputs, out)
    return 0


for _name in OPERATIONS:
    command(_name, f"pulumi {_name} through the Automation API", _operation_arguments(_name))(_operation)


# -- the parser ------------------------------------------------------------------------------
def version() -> str:
    """The package version: installed metadata, else the checkout's pyproject.toml."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("deepseek-eks")
    except PackageNotFoundError:  # a checkout: the version pyproject.toml reads (deepseek_eks.__version__)
        from deepseek_eks import __version__

        return __version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=Path(sys.argv[0]).name if sys.argv[0].endswith("deepseek-eks") else "python -m automation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"deepseek-eks {version()}")
    p.add_argument(
        "--project-dir",
        type=Path,
        default=None,
        help="folder with this program's Pulumi.yaml and stack files (default: the current folder "
        "when it has a Pulumi.yaml, else the checkout's)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS.values():
        parser = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(parser)
        parser.set_defaults(handler=cmd.run)
    _guardrail_commands(sub)
    # The performance instruments keep their own options and handlers (perf/simulate/cli.py,
    # perf/loadtest/cli.py).
    from deepseek_eks.perf.loadtest import cli as loadtest_cli
    from deepseek_eks.perf.simulate import cli as simulate_cli
    from deepseek_eks.twin import cli as twin_cli

    for name, module in (("simulate", simulate_cli), ("loadtest", loadtest_cli), ("twin", twin_cli)):
        instrument = sub.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(instrument)
        instrument.set_defaults(instrument=module.run_command)
    # --project-dir after the command too (`plan --stack dev --project-dir ../infra`), as users
    # write it; SUPPRESS keeps the one given before the command when it is not repeated.
    for parser in sub.choices.values():
        if "--project-dir" not in parser._option_string_actions:
            parser.add_argument("--project-dir", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def _guardrail_commands(sub: Any) -> None:
    """``diff``, ``urns`` and ``pins`` (upgrade safety and pin hygiene; see guardrails/guardrails.py)."""
    from deepseek_eks.guardrails.guardrails import add_commands

    add_commands(sub)


def _fail(out: Output, code: int, message: str, doc: dict[str, Any] | None = None) -> int:
    """One message on stderr; with --json, one JSON document on stdout too."""
    out.error(message)
    if out.as_json:
        out.document(doc or {"error": message, "exit_code": code})
    return code


def project_dir(given: Path | None) -> Path:
    """The project folder the commands read: ``--project-dir``, else the current folder when it
    holds a Pulumi.yaml (as the Pulumi CLI does), else the checkout's. These commands build the
    deepseek-eks program itself from that folder's stack files, so a folder of another project (a
    program of your own that uses the component) is refused instead of being planned as this
    program with nothing but its defaults."""
    if given is None:
        cwd = Path.cwd()
        given = (
            PROJECT_ROOT
            if (PROJECT_ROOT / "Pulumi.yaml").is_file() and not (cwd / "Pulumi.yaml").is_file()
            else cwd
        )
    if (given / "Pulumi.yaml").is_file():
        name = read_project(given).name
        if name != PROJECT:
            raise StackFileError(
                str(given / "Pulumi.yaml"),
                [
                    f"project {name!r} is not the {PROJECT} program these commands build (they "
                    f"would plan {PROJECT}'s defaults, not your program): test a program of your own "
                    "with deepseek_eks.testing (docs/component.md, 'Test your own program offline'), or give "
                    f"--project-dir a {PROJECT} project (its Pulumi.yaml says name: {PROJECT})"
                ],
            )
    return given


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit code (see the module docstring)."""
    from .api import AutomationError

    argv = sys.argv[1:] if argv is None else argv
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit:  # usage errors (argparse printed why); --help and --version are 0
        if exit.code and "--json" in argv:
            Output(True).document({"error": "invalid command line (see stderr)", "exit_code": exit.code})
        raise
    try:
        args.project_dir = project_dir(args.project_dir)
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if "instrument" in args:
        return int(args.instrument(args))
    if "run" in args:  # the guardrail commands
        return int(args.run(args))
    out = Output(getattr(args, "json", False))
    try:
        return args.handler(args, out)
    except (SettingsError, StackFileError, ServiceError) as error:
        # ServiceError: settings that validate but this version cannot build (routing.kind llm-d).
        return _fail(out, 2, f"error: {error}")
    except SizingError as error:
        result = error.result.to_dict()
        return _fail(out, 1, str(error), {**result, "exit_code": 1})
    except AutomationError as error:
        return _fail(out, error.exit_code, f"error: {error}")
    except KeyboardInterrupt:  # Pulumi got the same signal and stops its operation cleanly
        return _fail(
            out,
            1,
            "interrupted: Pulumi was asked to stop; if it was applying changes, "
            "`python -m automation refresh` reconciles the state",
        )
