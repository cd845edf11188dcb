"""``python -m policy check FILE|-``: every rule of the pack over a JSON list of resources, without
Pulumi.

Input: a JSON list of ``{"type", "name", "urn", "props"}`` objects (the Pulumi type token, the
resource name, its URN and its inputs as the engine sends them, camelCase), optionally with
``"propertyDependencies"`` (input name -> URNs it depends on, as the engine reports them to stack
policies) and ``"parent"`` (the parent's URN: a Helm Chart's objects name their Chart, which is how
the rules know which chart rendered them). Resource rules judge each object; stack rules see the
whole list.

Output: one ``rule<TAB>urn<TAB>message`` line per violation on stdout. Exit status 0 when there is
none, 1 when there is any, 2 when the input cannot be read (the reasons on stderr, all of them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .rules import Resource, violations

OK, VIOLATIONS, BAD_INPUT = 0, 1, 2
REQUIRED = ("type", "name", "urn", "props")
OPTIONAL = ("propertyDependencies", "parent")


class InputError(Exception):
    """The input is not a list of resources; ``problems`` says every way it is not."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _resource(index: int, item: Any) -> tuple[Resource | None, list[str]]:
    where = f"item {index}"
    if not isinstance(item, dict):
        return None, [f"{where} is {type(item).__name__}, not an object with keys {', '.join(REQUIRED)}"]
    problems = []
    if missing := [k for k in REQUIRED if k not in item]:
        problems.append(f"{where} lacks {', '.join(missing)}")
    if unknown := sorted(set(item) - {*REQUIRED, *OPTIONAL}):
        allowed = ", ".join((*REQUIRED, *OPTIONAL))
        problems.append(f"{where} has unknown key(s) {', '.join(unknown)}: allowed are {allowed}")
    problems += [
        f"{where}.{k} must be a string, not {type(item[k]).__name__}"
        for k in ("type", "name", "urn", "parent")
        if k in item and not isinstance(item[k], str)
    ]
    if "props" in item and not isinstance(item["props"], dict):
        problems.append(
            f"{where}.props must be an object (the resource's inputs), not {type(item['props']).__name__}"
        )
    deps = item.get("propertyDependencies", {})
    if not isinstance(deps, dict) or not all(
        isinstance(urns, list) and all(isinstance(u, str) for u in urns) for urns in deps.values()
    ):
        problems.append(f"{where}.propertyDependencies must map each input name to a list of URNs")
    if problems:
        return None, problems
    resource = Resource(
        type=item["type"],
        props=item["props"],
        urn=item["urn"],
        name=item["name"],
        property_dependencies={key: tuple(urns) for key, urns in deps.items()},
        parent=item.get("parent", ""),
    )
    return resource, []


def parse_resources(text: str) -> list[Resource]:
    """The resources of a JSON document, or InputError naming every problem found."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputError([f"not JSON: {error}"]) from None
    if not isinstance(document, list):
        raise InputError([f"the document is a JSON {type(document).__name__}, not a list of resources"])
    resources, problems = [], []
    for index, item in enumerate(document):
        resource, found = _resource(index, item)
        problems += found
        if resource is not None:
            resources.append(resource)
    if problems:
        raise InputError(problems)
    return resources


def check(text: str, out: TextIO) -> int:
    """Write each violation of the resources in ``text`` to ``out``; the exit status."""
    resources = parse_resources(text)
    try:
        found = violations(resources)
    except (TypeError, ValueError, AttributeError) as error:
        # A rule met a shape no Pulumi provider would send (a number where a list belongs...).
        raise InputError([f"a rule could not read the inputs ({type(error).__name__}: {error})"]) from None
    for rule, urn, message in found:
        out.write(f"{rule}\t{urn}\t{message}\n")
    return VIOLATIONS if found else OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m policy``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m policy", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("check", help="run every rule over a JSON list of resources")
    run.add_argument("file", help="the JSON file, or - for standard input")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"python -m policy check: cannot read {args.file}: {error}", file=sys.stderr)
        return BAD_INPUT
    try:
        return check(text, sys.stdout)
    except InputError as error:
        source = "standard input" if args.file == "-" else args.file
        print(f"python -m policy check: {source} is not a list of resources:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        print(
            '  expected: [{"type": "<Pulumi type token>", "name": "...", "urn": "...", "props": {...}}, ...]',
            file=sys.stderr,
        )
        return BAD_INPUT
