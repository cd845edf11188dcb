"""The smallest end-to-end run through the real Pulumi engine: one ``random.RandomPassword`` served by
the stand-in ``random`` provider, through preview (fresh stack: unknown outputs), up, a no-change
preview, a setting change shown by ``preview --diff``, and destroy."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pulumi
import pulumi_random as random
import pytest
from pulumi import automation as auto

from tests.engine.engine import make_engine, standin


def program() -> None:
    """One password whose length is a stack setting."""
    length = pulumi.Config().get_int("length") or 16
    password = random.RandomPassword("api-key", length=length, special=False)
    pulumi.export("length", password.length)
    pulumi.export("result", password.result)


@pytest.mark.timeout(900)  # the engine starts a process per plugin per operation
def test_random_password_lifecycle_through_the_real_engine(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    stack = engine.stack("twin-random", "dev", program)
    started = time.monotonic()
    events: list[Any] = []

    fresh = stack.preview(on_event=events.append)
    assert fresh.change_summary == {"create": 2}  # the stack and the password
    # In a fresh preview the provider has computed nothing: the engine reports `result` unknown.
    [outputs] = [e.res_outputs_event.metadata.new.outputs for e in events if _is_stack_outputs(e)]
    assert outputs == {"length": 16, "result": standin.UNKNOWN}

    up = stack.up()
    assert up.summary.result == "succeeded"
    assert up.summary.resource_changes == {"create": 2}
    assert up.outputs["length"].value == 16
    assert up.outputs["result"].secret  # additionalSecretOutputs of pulumi-random's SDK, kept by the engine

    again = stack.preview(expect_no_changes=True)
    assert again.change_summary == {"same": 2}

    stack.set_config("length", auto.ConfigValue("24"))
    with pytest.raises(auto.errors.CommandError):
        stack.preview(expect_no_changes=True)
    diff = stack.preview(diff=True)
    assert "length" in diff.stdout
    changed = {k: v for k, v in diff.change_summary.items() if k != "same"}
    assert changed, diff.stdout

    stack.destroy()
    state = stack.export_stack().deployment
    assert not state.get("resources"), state
    print(f"random lifecycle through the engine: {time.monotonic() - started:.1f}s")


def _is_stack_outputs(event: Any) -> bool:
    return bool(
        event.res_outputs_event
        and event.res_outputs_event.metadata.type == "pulumi:pulumi:Stack"
        and event.res_outputs_event.metadata.new.outputs
    )
