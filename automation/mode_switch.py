"""Refusing an in-place ``computeMode`` switch on a live stack.

Switching between auto-mode and karpenter on a deployed stack cannot work in place: the NodePools,
the gp3 StorageClass and the ``alb`` IngressClass keep their Kubernetes names under new URNs, and
Pulumi creates the new resources before it deletes the old ones, so each create fails with
AlreadyExists; and turning Auto Mode off makes EKS terminate every Auto Mode node and delete the
load balancers it runs (a new endpoint DNS name). The facts and their sources are in
``reference/upstream/compute-mode-switch.json``; ``python -m automation diff --stack S --set
computeMode=...`` shows the resources concerned.

``preview`` and ``up`` (``refuse_switch`` in automation/api.py) and ``preflight`` (here) read the
deployed mode from the stack's ``computeMode`` output and call :func:`switch_refusal`, which alone
decides; the program itself refuses too (components/deployed_state.py), so a plain ``pulumi up``
or another program using the component cannot switch either.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepseek_eks.components.deployed_state import COMPUTE_MODE_OUTPUT, deployed_mode, switch_refusal

from .api import AutomationError, open_stack, outputs_of
from .preflight import Check, Status

OUTPUT = COMPUTE_MODE_OUTPUT
"""The stack output that records the mode a stack was deployed with (components/build.py)."""

CHECK_NAME = "compute mode"


def read_deployed_mode(stack: str, project_dir: Path, opener: Callable[..., Any] | None = None) -> str | None:
    """The mode ``stack`` is deployed with, read through the Automation API; None when the stack
    does not exist yet (nothing to switch). Raises ``AutomationError`` without the Pulumi CLI."""
    try:
        stack_obj = (opener or open_stack)(stack, project_dir, create=False)
    except AutomationError as error:
        if error.exit_code == 2:  # no such stack in the backend: a first deployment
            return None
        raise
    return deployed_mode(outputs_of(stack_obj))


def preflight_check(
    stack: str, wanted: str, project_dir: Path, opener: Callable[..., Any] | None = None
) -> Check:
    """The preflight row: FAIL when the stack is deployed with another mode, WARN when its state
    cannot be read here (no Pulumi CLI or backend), PASS otherwise."""
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
