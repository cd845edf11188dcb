"""A strict, recording Pulumi mocks class: runs ``build()`` with no cloud and no CLI.

Every resource registration is recorded with its inputs. Computed outputs (ids, ARNs, names,
endpoints, kubeconfig) are made up per type token, deterministically, so a re-render is
byte-identical. A type or invoke this class does not know fails loudly instead of returning
``{}``: a silent empty answer would hide a wrong token or a missing mock.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"


@dataclass(frozen=True)
class Recorded:
    """One registered resource: its type token, logical name, inputs and the state returned."""

    type: str
    name: str
    inputs: dict[str, Any]
    state: dict[str, Any]
    custom: bool


def _short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _arn(service: str, resource: str, region: str = REGION) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{resource}"


# Computed outputs by exact type token, for AWS-side resources the program creates.
OutputFn = Callable[[MockResourceArgs], dict[str, Any]]
AWS_OUTPUTS: dict[str, OutputFn] = {}


class UnmockedError(RuntimeError):
    """A type token or invoke the mocks do not know: add it to the table with realistic outputs."""


class RecordingMocks(Mocks):
    """Strict mocks that record every resource and invoke (see module docstring)."""

    def __init__(self, region: str = REGION) -> None:
        self.region = region
        self.resources: list[Recorded] = []
        self.invokes: list[MockCallArgs] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict]:
        token = args.typ
        inputs = dict(args.inputs)
        if token.startswith("pulumi:providers:"):
            state = inputs
        elif token.startswith("deepseek-eks:"):
            state = {}  # our own components; their children register themselves
        elif token.startswith("kubernetes:"):
            state = {**inputs, "status": None}
        elif token in AWS_OUTPUTS:
            state = {**inputs, **AWS_OUTPUTS[token](args)}
        else:
            raise UnmockedError(
                f"no mock for resource type {token!r} ({args.name}); add it to AWS_OUTPUTS "
                "in automation/mocks.py with the outputs the real provider computes"
            )
        resource_id = f"{args.name}-{_short_hash(token + args.name)}"
        self.resources.append(Recorded(token, args.name, inputs, state, bool(args.custom)))
        return resource_id, state

    def call(self, args: MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        self.invokes.append(args)
        raise UnmockedError(f"no mock for invoke {args.token!r}; the program should not need one")

    def of_type(self, token: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == token]

    def named(self, name: str) -> Recorded:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]


def run_with_mocks(
    program: Callable[[], dict[str, Any]],
    mocks: RecordingMocks,
    *,
    project: str,
    stack: str,
    config: dict[str, str],
    secret_keys: list[str],
) -> dict[str, Any]:
    """Run ``program`` under ``mocks`` in a fresh Pulumi runtime and event loop.

    ``program`` returns the stack outputs; they are returned resolved (secrets unwrapped, so the
    caller must mask them). Global runtime state is reset before and after, so runs in one
    process do not leak into each other.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    resolved: dict[str, Any] = {}
    try:
        pulumi.runtime.settings.reset_options(project=project, stack=stack, preview=False)
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False)
        pulumi.runtime.set_all_config(config, secret_keys)

        @pulumi.runtime.test
        def _run() -> pulumi.Output:
            outputs = program()
            return pulumi.Output.from_input(outputs).apply(resolved.update)

        _run()
    finally:
        pulumi.runtime.settings.reset_options()
        pulumi.runtime.set_all_config({}, [])
        loop.close()
        asyncio.set_event_loop(None)
    return resolved
