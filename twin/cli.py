"""python -m automation twin: the twin (a local, real kube-apiserver) judging a render.

twin check --render DIR [--previous DIR]   exit 0 all accepted, 1 a rejection, 2 bad input,
                                           3 the twin's binaries are missing (`make twin`)
twin capacity --render DIR [--logs DIR]    the real Karpenter (kwok provider) on the render's
                                           NodePools; same exit codes (3: `twin/build.sh karpenter-kwok`)
twin loop --stack S [--scenario step|wake] [--set K=V] [--json] [--logs DIR]
                                           the autoscaling loop end to end with the real
                                           controllers: 0 every assertion held, 1 one failed,
                                           2 bad input, 3 a program or capability is missing
twin flows --stack S [--set K=V] [--policy FILE] [--json]
                                           every required flow judged on the EKS network-policy
                                           controller's output; --policy replaces a rendered
                                           NetworkPolicy of the same name; exit 1 when one fails
twin snapshot [--update]                   the committed render snapshots (upgrade baseline)
twin build                                 build the missing binaries (twin/build.sh)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from .binaries import TWIN_DIR, BinariesMissing

# The twin's Python dependencies are the [twin] extra (pyproject.toml): what to install when a
# subcommand cannot import them.
TWIN_EXTRA_HINT = "pip install 'deepseek-eks[twin]'"

HELP = "check a render against the real kube-apiserver (server-side dry-run, strict)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``twin`` subcommands."""
    sub = parser.add_subparsers(dest="twin_command", required=True)
    check = sub.add_parser("check", help="judge one stack's render directory (build/rendered/<stack>)")
    check.add_argument("--render", type=Path, required=True, help="one stack's render directory")
    check.add_argument("--previous", type=Path, help="a previous render, applied first: judge an upgrade")
    capacity = sub.add_parser("capacity", help="the real Karpenter on a Karpenter-mode render's NodePools")
    capacity.add_argument(
        "--render", type=Path, required=True, help="one stack's render (computeMode karpenter)"
    )
    capacity.add_argument("--logs", type=Path, help="keep the programs' logs in this folder")
    loop = sub.add_parser("loop", help="the autoscaling loop end to end on the twin, asserted")
    loop.add_argument("--stack", required=True, help="the stack file to render (Pulumi.<stack>.yaml)")
    loop.add_argument("--scenario", default="step", help="step (default) or wake (scale from zero)")
    loop.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)"
    )
    loop.add_argument("--json", action="store_true", help="print the report as JSON")
    loop.add_argument("--logs", type=Path, help="keep the programs' logs in this folder")
    flows = sub.add_parser(
        "flows", help="the required-flows matrix on the network-policy controller's output"
    )
    flows.add_argument("--stack", required=True, help="the stack file to render (Pulumi.<stack>.yaml)")
    flows.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)"
    )
    flows.add_argument(
        "--policy", action="append", default=[], type=Path, metavar="FILE",
        help="a NetworkPolicy YAML file replacing the rendered one of the same namespace/name (repeatable)",
    )  # fmt: skip
    flows.add_argument("--json", action="store_true", help="print the matrix as JSON")
    snap = sub.add_parser("snapshot", help="compare (or --update) the committed render snapshots")
    snap.add_argument("--update", action="store_true", help="rewrite the snapshots from today's render")
    snap.add_argument("--stack", action="append", help="only this stack (repeatable)")
    sub.add_parser("build", help="build the twin's binaries that are missing (twin/build.sh)")


def _failed(error: Exception) -> int:
    """Print why a twin command could not judge its render; its exit code: 2 not a render (bad
    input), 3 binaries missing (a prerequisite), 1 the twin itself failed."""
    print(f"error: {error}", file=sys.stderr)
    return 2 if isinstance(error, ValueError) else 3 if isinstance(error, BinariesMissing) else 1


def _check(render: Path, previous: Path | None) -> int:
    from .check import check_render
    from .server import TwinError

    try:
        report = check_render(render, previous)
    except (ValueError, BinariesMissing, TwinError) as error:
        return _failed(error)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    for finding in report.findings:
        print(f"REJECTED {finding.subject}: {finding.message}")
    verdict = "accepted" if report.ok else f"{len(report.findings)} rejected"
    print(f"twin: {report.accepted} objects accepted, {verdict} ({render})")
    return 0 if report.ok else 1


def _capacity(render: Path, logs: Path | None) -> int:
    from .capacity import check_capacity
    from .server import TwinError

    try:
        report = check_capacity(render, logs)
    except (ValueError, BinariesMissing, TwinError) as error:
        return _failed(error)
    for line in report.observed:
        print(f"observed: {line}")
    for finding in report.findings:
        print(f"FAILED {finding}")
    verdict = "as the plan says" if report.ok else f"{len(report.findings)} finding(s)"
    print(f"twin capacity: Karpenter placed {report.stack}'s replicas {verdict} ({render})")
    return 0 if report.ok else 1


def _overrides(items: list[str]) -> dict[str, str] | None:
    """``--set KEY=VALUE`` items as a mapping; None (after saying why) when one has no ``=``."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            print(
                f"error: --set {item!r}: write KEY=VALUE, e.g. --set autoscaling.signal=queue-depth",
                file=sys.stderr,
            )
            return None
        overrides[key] = value
    return overrides


def _flows(args: argparse.Namespace) -> int:
    import json
    import tempfile

    import yaml

    from deepseek_eks.automation.render import render, write
    from deepseek_eks.automation.stackfile import StackFileError, read_stack

    from .flow_matrix import failures, flow_matrix
    from .server import TwinError

    overrides = _overrides(args.set)
    if overrides is None:
        return 2
    try:
        policies = [yaml.safe_load(path.read_text()) for path in args.policy]
        config = read_stack(args.stack)
        if overrides:
            config = config.with_overrides(overrides)
    except (OSError, yaml.YAMLError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    bad = [
        str(p)
        for p, obj in zip(args.policy, policies, strict=True)
        if (obj or {}).get("kind") != "NetworkPolicy"
    ]
    if bad:
        print(f"error: --policy {', '.join(bad)}: not a NetworkPolicy manifest", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-flows-") as temp:
        try:
            verdicts = flow_matrix(write(render(config), Path(temp)), policy_overrides=policies)
        except (BinariesMissing, TwinError) as error:
            return _failed(error)
    failed = failures(verdicts)
    if args.json:
        print(json.dumps([v.as_json() for v in verdicts], indent=1))
    else:
        for v in verdicts:
            need = "required" if v.required else "forbidden"
            verdict = "admitted" if v.admitted else "dropped"
            mark = "FAILED" if v in failed else "ok"
            print(f"{mark} {v.id}: {v.source} -> {v.target}:{v.port} {need}, {verdict}")
        print(f"twin flows: {len(verdicts)} judged, {len(failed)} failed ({args.stack})")
    return 1 if failed else 0


def _loop(args: argparse.Namespace) -> int:
    import json

    from deepseek_eks.automation.stackfile import StackFileError

    from .loop import LoopInputError, run_loop
    from .server import TwinError

    overrides = _overrides(args.set)
    if overrides is None:
        return 2
    try:
        report = run_loop(args.stack, args.scenario, overrides, keep=args.logs)
    except (LoopInputError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (BinariesMissing, TwinError) as error:
        # NetworkUnavailable (netns.py) is a TwinError for a missing capability: exit 3 like a
        # missing program (the CLI contract: 3 when a twin program is missing).
        from .netns import NetworkUnavailable

        if isinstance(error, TwinError) and not isinstance(error, NetworkUnavailable):
            return _failed(error)
        print(f"error: {error}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(report.as_json(), indent=1))
    else:
        for sample in report.timeline:
            print(
                f"t={sample.t:6.1f}s load={sample.load_rps:7.3f} req/s desired={sample.desired_replicas} "
                f"ready={sample.ready_replicas} gpu-nodes={sample.nodes} {','.join(sample.node_types)}"
            )
        for rewrite in report.rewrites:
            print(f"rewrite: {rewrite}")
        for flow in report.flows:
            verdict = "admitted" if flow["admitted"] else "dropped"
            need = "required" if flow["required"] else "forbidden"
            print(f"flow: {flow['from']} -> {flow['to']}:{flow['port']} {need}, {verdict}")
        for a in report.assertions:
            print(f"{'ok' if a.ok else 'FAILED'} {a.name}: {a.detail}")
        print(f"twin loop: {report.stack} ({report.autoscaler}) {'held' if report.ok else 'FAILED'}")
    return 0 if report.ok else 1


def _snapshot(update: bool, stacks: list[str] | None) -> int:
    from .snapshot import SNAPSHOT_DIR, sync

    changed = sync(update, stacks)
    for stack, files in changed.items():
        for name in files:
            print(f"{'updated' if update else 'differs'}: {SNAPSHOT_DIR.name}/{stack}/{name}")
    if update or not any(changed.values()):
        return 0
    print(
        "the render changed: review it, then `python -m automation twin snapshot --update`", file=sys.stderr
    )
    return 1


def run_command(args: argparse.Namespace) -> int:
    """Run the chosen ``twin`` subcommand; returns the exit code (3 when a Python dependency of
    the twin is not installed, naming the extra that holds it)."""
    try:
        return _run(args)
    except ModuleNotFoundError as error:
        print(f"error: twin {args.twin_command} needs {error.name!r}: {TWIN_EXTRA_HINT}", file=sys.stderr)
        return 3


def _run(args: argparse.Namespace) -> int:
    if args.twin_command == "check":
        return _check(args.render, args.previous)
    if args.twin_command == "capacity":
        return _capacity(args.render, args.logs)
    if args.twin_command == "loop":
        return _loop(args)
    if args.twin_command == "flows":
        return _flows(args)
    if args.twin_command == "snapshot":
        return _snapshot(args.update, args.stack)
    return subprocess.run([str(TWIN_DIR / "build.sh")], check=False).returncode
