"""The ``diff``, ``urns`` and ``pins`` subcommands of ``python -m automation`` (upgrade safety and
pin hygiene); each parser carries its handler as ``run``."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _diff(args: argparse.Namespace) -> int:
    from .diff import DiffError, diff

    if bool(args.against) == bool(args.set):
        print(
            "error: diff takes --against REF (a git ref) or --set KEY=VALUE (a setting change)",
            file=sys.stderr,
        )
        return 2
    if args.set:
        from deepseek_eks.automation.api import parse_overrides

        from .diff import setting_report

        sys.stdout.writelines(setting_report(args.stack, parse_overrides(args.set), args.project_dir))
        return 0
    try:
        lines, problems = diff(args.stack, args.against, args.project_dir)
    except DiffError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"UNSAFE {problem}")
    sys.stdout.writelines(lines)
    if not lines and not problems:
        print(f"{args.stack}: the render at {args.against} and the working tree are identical")
    return 1 if problems else 0


def _urns(args: argparse.Namespace) -> int:
    from . import urns

    if args.update:
        for path in urns.write_snapshots(args.project_dir):
            print(f"wrote {path}")
        return 0
    failed = False
    for stack, problems in urns.check_stacks(args.project_dir).items():
        print(f"{stack}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


def _pins(args: argparse.Namespace) -> int:
    from .pins import check_pins, collect_pins, pin_table, run_check

    if args.check or args.strict:
        return run_check(args.strict, args.pypi_url, args.goproxy, args.go_version, args.timeout)
    pins = collect_pins()
    print(pin_table(pins))
    for pin in pins:
        if pin.unchecked:
            print(f"UNCHECKED {pin.kind} {pin.name}: {pin.unchecked}", file=sys.stderr)
    problems = check_pins(pins)
    for problem in problems:
        print(f"STALE {problem}", file=sys.stderr)
    return 1 if problems else 0


def add_commands(sub: Any) -> None:
    d = sub.add_parser(
        "diff", help="review the render of a stack against a git ref, or what a setting change does, offline"
    )
    d.add_argument("--stack", required=True, help="the stack to compare: Pulumi.<STACK>.yaml")
    d.add_argument("--against", metavar="REF", help="git ref to compare with, e.g. main")
    d.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="show what this setting change would create, replace and delete (e.g. computeMode=karpenter)",
    )
    d.set_defaults(run=_diff)
    u = sub.add_parser("urns", help="check every stack's URNs against tests/snapshots (or --update them)")
    u.add_argument(
        "--update", action="store_true", help="rewrite the snapshots; review the diff before committing"
    )
    u.set_defaults(run=_urns)
    p = sub.add_parser("pins", help="list every pinned version with its upstream source and reference data")
    p.add_argument(
        "--check",
        action="store_true",
        help="instead, compare each pin with the newest release a reachable registry serves (PyPI, the "
        "Go module proxy) and list the pins no registry here serves as manual steps; exits 0 unless --strict",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="with --check (implied): exit 1 when a pin is behind or a registry did not answer",
    )
    p.add_argument(
        "--pypi-url",
        metavar="URL",
        help="PyPI JSON API base (default: $DEEPSEEK_EKS_PYPI_URL, else https://pypi.org/pypi)",
    )
    p.add_argument(
        "--goproxy",
        metavar="LIST",
        help="Go module proxies, as GOPROXY spells them (default: $GOPROXY, else https://proxy.golang.org,direct)",
    )
    p.add_argument(
        "--go-version",
        metavar="VERSION",
        help="the Go toolchain the twin builds with, e.g. go1.26.8 (default: `go env GOVERSION`)",
    )
    p.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="per-request timeout (default 10)"
    )
    p.set_defaults(run=_pins)
