"""A readable progress display of Pulumi engine events (rich), for ``python -m automation``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console

SYMBOLS = {
    "create": ("+", "green"),
    "update": ("~", "yellow"),
    "delete": ("-", "red"),
    "replace": ("+-", "magenta"),
}


class EventPrinter:
    """Prints one line per resource step, diagnostics worth reading, and a final count."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(highlight=False)
        self.counts: Counter[str] = Counter()

    def __call__(self, event: Any) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            op = str(getattr(meta.op, "value", meta.op))
            if op in ("same", "read"):
                return
            self.counts[op] += 1
            symbol, colour = SYMBOLS.get(op, ("*", "cyan"))
            name = meta.urn.rsplit("::", 1)[-1]
            self.console.print(f"[{colour}]{symbol} {op:<8}[/] {meta.type} [bold]{name}[/]")
        elif event.res_op_failed_event is not None:
            meta = event.res_op_failed_event.metadata
            self.console.print(f"[red]failed[/] {meta.type} {meta.urn.rsplit('::', 1)[-1]}")
        elif event.diagnostic_event is not None and event.diagnostic_event.severity in ("error", "warning"):
            diag = event.diagnostic_event
            colour = "red" if diag.severity == "error" else "yellow"
            self.console.print(f"[{colour}]{diag.severity}:[/] {diag.message.strip()}")
        elif event.summary_event is not None:
            changes = ", ".join(f"{n} {op}" for op, n in sorted(self.counts.items())) or "no changes"
            self.console.print(f"[bold]done[/] in {event.summary_event.duration_seconds}s: {changes}")
