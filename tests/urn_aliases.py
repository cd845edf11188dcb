"""Every URN a stack registers, and the URNs its aliases cover, computed the way the engine does.

The mock monitor's own URNs keep only the parent's last type, so they are not the engine's. The
engine qualifies a child's type with its parent's whole type chain (``parent$child``) and leaves
the root stack out. A child of an aliased parent inherits one alias per alias of its parent, which
is what keeps a whole subtree in place when only its top-level component is aliased: pulumi/pulumi
``tests/integration/aliases/python/rename_component`` (step 2 aliases only the component; its
children, unaliased, must not be replaced) and pulumi-java's ``Urn.inheritedChildAlias``. (Children
named with their parent's name as prefix also get that prefix renamed; no alias here renames.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from pulumi.runtime.mocks import MockMonitor

from automation.render import construct
from automation.stackfile import StackConfig

ROOT_TYPE = "pulumi:pulumi:Stack"
SNAPSHOT = Path(__file__).parent / "data" / "urns_before_deepseek_service.json"


@dataclass
class Registration:
    type: str
    name: str
    parent: Registration | None
    alias_specs: list[Any] = field(default_factory=list)
    project: str = ""
    stack: str = ""

    @property
    def qualified_type(self) -> str:
        if self.parent is None or self.parent.type == ROOT_TYPE:
            return self.type
        return f"{self.parent.qualified_type}${self.type}"

    @property
    def urn(self) -> str:
        return urn(self.stack, self.project, self.qualified_type, self.name)

    def alias_urns(self) -> set[str]:
        """The URNs this resource also answers to: its own aliases and those inherited."""
        found: set[str] = set()
        for alias in self.alias_specs:
            if alias.urn:
                found.add(alias.urn)
                continue
            spec = alias.spec
            typ, name = spec.type or self.type, spec.name or self.name
            if spec.noParent:
                found.add(urn(self.stack, self.project, typ, name))
            elif spec.parentUrn:
                parent_type = spec.parentUrn.split("::")[2]
                qualified = typ if parent_type == ROOT_TYPE else f"{parent_type}${typ}"
                found.add(urn(self.stack, self.project, qualified, name))
            else:
                parent_type = self.parent.qualified_type if self.parent else ROOT_TYPE
                qualified = typ if parent_type == ROOT_TYPE else f"{parent_type}${typ}"
                found.add(urn(self.stack, self.project, qualified, name))
        if self.parent is not None:
            for parent_alias in self.parent.alias_urns():
                parent_type = parent_alias.split("::")[2]
                qualified = self.type if parent_type == ROOT_TYPE else f"{parent_type}${self.type}"
                found.add(urn(self.stack, self.project, qualified, self.name))
        return found


def urn(stack: str, project: str, qualified_type: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{project}::{qualified_type}::{name}"


def registrations(config: StackConfig) -> list[Registration]:
    """Run the program for ``config`` under the recording mocks and keep each registration's
    parent and alias specs (the mock engine's ``RegisterResource`` request carries both)."""
    return recording(lambda: construct(config), config.project, config.stack)


def recording(run: Callable[[], Any], project: str, stack: str) -> list[Registration]:
    """Each registration ``run()`` makes under the mock engine, with its parent and aliases."""
    by_mock_urn: dict[str, Registration] = {}
    recorded: list[Registration] = []
    original = MockMonitor.RegisterResource

    def register(monitor: MockMonitor, request: Any) -> Any:
        response = original(monitor, request)
        parent = by_mock_urn.get(request.parent) if request.parent else None
        reg = Registration(
            request.type,
            request.name,
            parent,
            list(request.aliases),
            project=project,
            stack=stack,
        )
        by_mock_urn[response.urn] = reg
        recorded.append(reg)
        return response

    with mock.patch.object(MockMonitor, "RegisterResource", register):
        run()
    return recorded


def snapshot(configs: list[StackConfig]) -> dict[str, list[str]]:
    """Each stack's URNs, sorted (what ``SNAPSHOT`` holds for the program before DeepSeekService)."""
    return {c.stack: sorted(r.urn for r in registrations(c)) for c in configs}


def write_snapshot(configs: list[StackConfig]) -> None:
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(snapshot(configs), indent=1) + "\n")
