"""Refusing an in-place ``computeMode`` switch on a live stack.

Switching between auto-mode and karpenter on a deployed stack cannot work in place: the NodePools,
the gp3 StorageClass and the ``alb`` IngressClass keep their Kubernetes names under new URNs, and
Pulumi creates the new resources before it deletes the old ones, so each create fails with
AlreadyExists; and turning Auto Mode off makes EKS terminate every Auto Mode node and delete the
load balancers it runs (a new endpoint DNS name). The facts and their sources are in
``reference/upstream/compute-mode-switch.json``; ``python -m automation diff --stack S --set
computeMode=...`` shows the resources concerned.

``preview`` and ``up`` (automation/api.py) and ``preflight`` read the deployed mode from the stack's
``computeMode`` output and call :func:`switch_refusal`, which alone decides.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepseek_eks.settings import PROJECT

OUTPUT = "computeMode"
"""The stack output that records the mode a stack was deployed with (components/build.py)."""

CHECK_NAME = "compute mode"


def switch_refusal(stack: str, deployed: str | None, wanted: str) -> str | None:
    """Why ``stack``, deployed with ``deployed`` (None: nothing deployed, or no record of it),
    must not be updated to ``wanted`` in place; None when the update may go ahead."""
    if deployed is None or deployed == wanted:
        return None
    return (
        f"{PROJECT}:computeMode is {wanted!r} but stack {stack!r} is deployed with {deployed!r}; "
        "switching in place fails (the NodePools, StorageClass and IngressClass keep their Kubernetes "
        "names under new URNs, so their creation fails with AlreadyExists)"
        + (
            " and turning Auto Mode off terminates every Auto Mode node and deletes its load balancers"
            if deployed == "auto-mode"
            else ""
        )
        + f". Keep computeMode {deployed!r} on this stack; to move, deploy a new stack with computeMode "
        f"{wanted!r}, check it serves, move traffic to its endpoint, then destroy {stack!r} "
        f"(`python -m automation diff --stack {stack} --set computeMode={wanted}` shows what the switch "
        "would replace)."
    )


def refuse_switch(stack: str, outputs: dict[str, Any], wanted: str) -> None:
    """Raise ``AutomationError`` (exit 2: the settings) when ``stack``'s outputs record another
    mode than ``wanted``."""
    from .api import AutomationError

    refusal = switch_refusal(stack, deployed_mode(outputs), wanted)
    if refusal:
        raise AutomationError(refusal, 2)


def deployed_mode(outputs: dict[str, Any]) -> str | None:
    """The mode recorded in a stack's outputs (``{name: value}``); None when it has none."""
    value = outputs.get(OUTPUT)
    return value if isinstance(value, str) and value else None


def read_deployed_mode(stack: str, project_dir: Path, opener: Callable[..., Any] | None = None) -> str | None:
    """The mode ``stack`` is deployed with, read through the Automation API; None when the stack
    does not exist yet (nothing to switch). Raises ``AutomationError`` without the Pulumi CLI."""
    from .api import AutomationError, open_stack, outputs_of

    try:
        stack_obj = (opener or open_stack)(stack, project_dir, create=False)
    except AutomationError as error:
        if error.exit_code == 2:  # no such stack in the backend: a first deployment
            return None
        raise
    return deployed_mode(outputs_of(stack_obj))


def preflight_check(
    stack: str, wanted: str, project_dir: Path, opener: Callable[..., Any] | None = None
) -> Any:
    """The preflight row: FAIL when the stack is deployed with another mode, WARN when its state
    cannot be read here (no Pulumi CLI or backend), PASS otherwise."""
    from .preflight import Check, Status

    try:
        deployed = read_deployed_mode(stack, project_dir, opener)
    except Exception as error:  # no CLI (AutomationError), no backend login (CommandError), ...
        detail = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        return Check(CHECK_NAME, Status.WARN, f"could not read stack {stack!r}'s deployed mode ({detail}).")
    refusal = switch_refusal(stack, deployed, wanted)
    if refusal:
        return Check(CHECK_NAME, Status.FAIL, refusal)
    where = f"deployed with {deployed}" if deployed else "not deployed yet"
    return Check(CHECK_NAME, Status.PASS, f"stack {stack!r} is {where}; computeMode {wanted} keeps it.")
