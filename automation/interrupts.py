"""Ctrl-C and SIGTERM during a Pulumi operation: Pulumi's own graceful cancel, never a broken pipe.

The Pulumi CLI cancels an operation on its first SIGINT or SIGTERM and terminates on the second
(pulumi/pulumi v3.274.0 ``pkg/backend/cancellation_scope.go``: "^C received; cancelling ... press ^C
again", the same for SIGTERM). The Automation API runs it as a child whose output it reads through
pipes; Python's default SIGINT handling raises KeyboardInterrupt in the reader, ``Popen.__exit__``
closes the pipes, and the CLI dies of SIGPIPE in the middle of its cancel, which can leave pending
operations or a locked stack; a SIGTERM to this process killed it at once.

So while an operation runs: each Pulumi process starts in its own process group (the terminal's
Ctrl-C reaches this process alone), and each SIGINT or SIGTERM this process receives is forwarded
once to those groups, as the same signal. This process keeps reading their output: the first
signal lets Pulumi cancel cleanly and report; a second makes it terminate. See docs/operations.md
(``Interrupting an operation``) for what to run afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

FORWARDED = (signal.SIGINT, signal.SIGTERM)


class _ChildGroups:
    """The Popen the Automation API calls, starting each child in a new process group it records."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen[Any]] = []
        self.signals: list[int] = []

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        kwargs.setdefault("process_group", 0)
        child = subprocess.Popen(*args, **kwargs)
        self.children.append(child)
        return child

    def forward(self, signum: int) -> None:
        self.signals.append(signum)
        for child in self.children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # it just exited
                    os.killpg(child.pid, signum)


@contextlib.contextmanager
def graceful_interrupts(say: Callable[[str], None]) -> Iterator[_ChildGroups]:
    """Run the block with Pulumi's processes in their own groups and SIGINT/SIGTERM forwarded to
    them (module docstring); outside the main thread (where Python cannot install handlers) the
    block runs as it is."""
    groups = _ChildGroups()
    if threading.current_thread() is not threading.main_thread():
        yield groups
        return
    from pulumi.automation import _cmd

    def handle(signum: int, _frame: Any) -> None:
        first = not groups.signals
        groups.forward(signum)
        name = signal.Signals(signum).name
        if first:
            say(
                f"{name}: Pulumi is cancelling the operation cleanly (it finishes the steps in flight); "
                f"send it again to stop at once, which may leave pending operations"
            )
        else:
            say(f"{name} again: Pulumi stops at once")

    shim = types.SimpleNamespace(
        **{k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")}
    )
    shim.Popen = groups.popen
    previous = {s: signal.signal(s, handle) for s in FORWARDED}
    original = _cmd.subprocess
    _cmd.subprocess = shim  # type: ignore[assignment]  # only its Popen differs
    try:
        yield groups
    finally:
        _cmd.subprocess = original
        for s, handler in previous.items():
            signal.signal(s, handler)


RECOVERY = (
    "the operation was interrupted. Pulumi cancelled it cleanly unless it was stopped at once. Then: "
    "`python -m automation refresh --stack {stack}` reconciles the state with AWS and Kubernetes; if "
    "Pulumi reports pending operations (a create it could not confirm), `pulumi refresh --stack {stack} "
    "--clear-pending-creates` drops them after checking whether each resource exists (delete any that "
    "does by hand, or `pulumi import` it); a stack left locked on Pulumi Cloud is unlocked by "
    "`pulumi cancel --stack {stack}` (docs/operations.md, Interrupting an operation)"
)
