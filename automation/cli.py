"""``python -m automation``: offline ``render`` and ``plan`` today; the Automation API commands
(preview, up, destroy, refresh, outputs, preflight) build on the same ``build()``."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from components import SizingError, size
from settings import SettingsError, parse_settings
from sizing.cli import summary_lines

from .stackfile import PROJECT_ROOT, StackFileError, read_stack

DEFAULT_OUT = Path("build/rendered")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m automation", description=__doc__)
    p.add_argument(
        "--project-dir", type=Path, default=PROJECT_ROOT, help="folder with Pulumi.yaml and the stack files"
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="write every object the stack creates, offline")
    r.add_argument("--stack", required=True)
    r.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    pl = sub.add_parser("plan", help="print the sizing plan of a stack, offline")
    pl.add_argument("--stack", required=True)
    pl.add_argument("--json", action="store_true")
    return p


def _plan(stack: str, as_json: bool, project_dir: Path) -> int:
    config = read_stack(stack, project_dir)
    sizing_plan = size(parse_settings(config.values, config.secret_keys, stack))
    if as_json:
        print(json.dumps(sizing_plan.to_dict(), indent=2))
    else:
        print("\n".join(summary_lines(sizing_plan)))
    return 0


def _render(stack: str, out: Path, project_dir: Path) -> int:
    from .render import render, write

    rendered = render(read_stack(stack, project_dir))
    root = write(rendered, out)
    print("\n".join(summary_lines(rendered.sizing)))
    kinds = Counter(m["kind"] for m in rendered.objects())
    kinds_text = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    print(
        f"rendered       {len(rendered.kubernetes)} Kubernetes objects ({kinds_text}), "
        f"{len(rendered.helm)} Helm releases, {len(rendered.aws)} AWS resources -> {root}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "render":
            return _render(args.stack, args.out, args.project_dir)
        if args.command == "plan":
            return _plan(args.stack, args.json, args.project_dir)
    except (SettingsError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SizingError as error:
        print(str(error), file=sys.stderr)
        return 1
    return 2
