"""What ``python -m automation`` shows of Pulumi engine events.

- :class:`ChangeSet` collects a preview's steps: per resource the operation and the property-level
  diff (``detailedDiff``: which fields change, and which force a replacement), policy violations
  and the engine's change counts, as text and as JSON.
- :class:`ProgressView` follows a running ``up``/``destroy``/``refresh``: one line when a resource
  step starts and when it ends (with its elapsed time), the rollout status pulumi-kubernetes
  reports for it (info diagnostics carrying the resource's URN), a "still working" line for long
  waits, and a summary with the slowest steps at the end. On a terminal the steps in progress are
  a live table; elsewhere it is plain text.

Engine text (messages, names, property paths) is never parsed as Rich markup: it is wrapped in
``rich.text.Text``, so ``[secret]`` stays visible and a message with ``[/path]`` cannot raise.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

# Pulumi's colour directives (``<{%reset%}>``, ``<{%fg 3%}>``), which an engine message may carry.
_COLOUR = re.compile(r"<\{%[^%]*%\}>")


def plain_message(message: str) -> str:
    """An engine diagnostic's text as the program logged it: no colour directives, no trailing newline."""
    return _COLOUR.sub("", message).strip()


# op -> (symbol, colour). The symbols are Pulumi's own (pkg/display: + create, ~ update, - delete,
# +- replace, ~ refresh, = import).
SYMBOLS = {
    "create": ("+", "green"),
    "update": ("~", "yellow"),
    "delete": ("-", "red"),
    "replace": ("+-", "magenta"),
    "refresh": ("~", "cyan"),
    "import": ("=", "blue"),
}
# The parts of a replacement (the engine emits them around the ``replace`` step): shown as the
# replacement, not as separate changes.
REPLACEMENT_PARTS = {"create-replacement", "delete-replaced", "discard-replaced", "read-replacement"}
QUIET_OPS = {"same", "read"} | REPLACEMENT_PARTS
# Past tense for the end-of-step line.
DONE = {"create": "created", "update": "updated", "delete": "deleted", "replace": "replaced",
        "refresh": "refreshed", "import": "imported"}  # fmt: skip
DIFF_SYMBOLS = {"add": "+", "delete": "-", "update": "~"}
# pulumi-kubernetes reports rollout status as ephemeral info diagnostics (LogStatus with
# diag.Info): severity "info"; "info#err" is info written to stderr (pulumi's diag/sink).
STATUS_SEVERITIES = {"info", "info#err"}


def op_name(op: Any) -> str:
    """``OpType.CREATE`` / ``"create"`` -> ``"create"``."""
    return str(getattr(op, "value", op))


def short_name(urn: str) -> str:
    """The resource's name: the last ``::`` segment of its URN."""
    return urn.rsplit("::", 1)[-1]


def duration(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3725`` -> ``1h02m05s``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


@dataclass(frozen=True)
class PropertyChange:
    """One changed property of a resource (a ``detailedDiff`` entry, or a bare ``diffs`` key)."""

    path: str
    kind: str  # add / delete / update
    forces_replacement: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "forces_replacement": self.forces_replacement}


@dataclass(frozen=True)
class ResourceChange:
    """One resource step of a preview: what happens to it and which properties change."""

    urn: str
    type: str
    op: str
    properties: tuple[PropertyChange, ...] = ()

    @classmethod
    def from_metadata(cls, meta: Any) -> ResourceChange:
        replace_keys = set(meta.keys or ()) if op_name(meta.op) == "replace" else set()
        props: list[PropertyChange] = []
        for path, diff in sorted((meta.detailed_diff or {}).items()):
            kind = op_name(diff.diff_kind)
            base, _, replace = kind.partition("-")
            props.append(PropertyChange(path, base, bool(replace) or path in replace_keys))
        if not props:  # providers without detailed diffs still name the changed keys
            props = [PropertyChange(k, "update", k in replace_keys) for k in sorted(meta.diffs or ())]
        return cls(meta.urn, meta.type, op_name(meta.op), tuple(props))

    def lines(self) -> list[Text]:
        symbol, colour = SYMBOLS.get(self.op, ("*", "cyan"))
        head = Text.assemble(
            (f"{symbol:<2} {self.op:<8} ", colour), self.type + " ", (short_name(self.urn), "bold")
        )
        out = [head]
        for p in self.properties:
            line = Text.assemble("      ", (DIFF_SYMBOLS.get(p.kind, "~"), colour), " ", p.path)
            if p.forces_replacement:
                line.append("  (forces replacement)", "magenta")
            out.append(line)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "op": self.op,
            "properties": [p.to_dict() for p in self.properties],
        }


@dataclass(frozen=True)
class PolicyViolation:
    """A policy pack's finding, with the fields ``pulumi preview`` prints for it."""

    pack: str
    policy: str
    enforcement: str
    message: str
    urn: str | None

    @classmethod
    def from_event(cls, event: Any) -> PolicyViolation:
        return cls(
            event.policy_pack_name,
            event.policy_name,
            event.enforcement_level,
            event.message.strip(),
            event.resource_urn,
        )

    @property
    def not_run(self) -> bool:
        """pulumi-policy's notice that a rule met a value unknown until ``up`` and was skipped at
        preview (pulumi_policy/policy.py, UnknownValueError: an advisory "can't run policy ...
        during preview"), not a finding: the rule runs again on the real values at ``up``."""
        return self.enforcement == "advisory" and self.message.startswith("can't run policy ")

    def lines(self) -> list[Text]:
        colour = "red" if self.enforcement == "mandatory" else "yellow"
        head = Text.assemble(
            (f"  [{self.enforcement}]  ", colour), (f"{self.pack}/{self.policy}", "bold"), "  ", self.message
        )
        return [head, Text(f"    resource: {self.urn}")] if self.urn else [head]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy_pack": self.pack,
            "policy": self.policy,
            "enforcement_level": self.enforcement,
            "message": self.message,
            "resource_urn": self.urn,
        }


def _policy_lines(violations: Iterable[PolicyViolation]) -> list[Text]:
    """The findings, each in full, then one line for the checks that waited for unknown values
    (hundreds on a fresh stack's preview: one line each would bury the findings)."""
    events = list(violations)
    found = [v for v in events if not v.not_run]
    skipped = [v for v in events if v.not_run]
    out = [Text("Policy violations:", "bold")] if found else []
    for v in found:
        out += v.lines()
    if skipped:
        rules = ", ".join(sorted({v.policy for v in skipped}))
        out.append(
            Text(
                f"Policy checks not run at preview: {len(skipped)} (values unknown until up; they run "
                f"at up): {rules}",
                "yellow",
            )
        )
    return out


def policy_report(violations: Iterable[PolicyViolation]) -> dict[str, Any]:
    """The JSON form: findings in full under ``policy_violations``, the skipped checks counted."""
    events = list(violations)
    skipped = [v for v in events if v.not_run]
    return {
        "policy_violations": [v.to_dict() for v in events if not v.not_run],
        "policy_not_run": {"count": len(skipped), "policies": sorted({v.policy for v in skipped})},
    }


@dataclass
class ChangeSet:
    """A preview's outcome, collected from its engine events (an ``on_event`` callback)."""

    changes: list[ResourceChange] = field(default_factory=list)
    violations: list[PolicyViolation] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    diagnostics: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, event: Any) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            if op_name(meta.op) not in QUIET_OPS:
                self.changes.append(ResourceChange.from_metadata(meta))
        elif event.policy_event is not None:
            self.violations.append(PolicyViolation.from_event(event.policy_event))
        elif event.diagnostic_event is not None and event.diagnostic_event.severity in ("error", "warning"):
            self.diagnostics.append(
                (event.diagnostic_event.severity, plain_message(event.diagnostic_event.message))
            )
        elif event.summary_event is not None:
            self.counts = {op_name(k): int(v) for k, v in event.summary_event.resource_changes.items()}

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def summary(self) -> str:
        changed = {op: n for op, n in sorted(self.counts.items()) if op not in QUIET_OPS and n}
        if not changed and self.changes:
            changed = dict(sorted(Counter(c.op for c in self.changes).items()))
        text = ", ".join(f"{n} to {op}" for op, n in changed.items()) or "no changes"
        same = self.counts.get("same", 0)
        return f"{text}; {same} unchanged" if same else text

    def lines(self) -> list[Text]:
        out: list[Text] = []
        for change in self.changes:
            out += change.lines()
        for severity, message in self.diagnostics:
            out.append(Text.assemble((f"{severity}: ", "red" if severity == "error" else "yellow"), message))
        out += _policy_lines(self.violations)
        out.append(Text.assemble(("Changes: ", "bold"), self.summary()))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": [c.to_dict() for c in self.changes],
            "counts": self.counts,
            **policy_report(self.violations),
            "diagnostics": [{"severity": s, "message": m} for s, m in self.diagnostics],
        }


@dataclass
class Step:
    """A resource step of a running operation."""

    urn: str
    type: str
    op: str
    started: float
    ended: float | None = None
    failed: bool = False
    status: str = ""

    def elapsed(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "op": self.op,
            "seconds": None if self.ended is None else round(self.ended - self.started, 1),
            "failed": self.failed,
            "last_status": self.status,
        }


class ProgressView:
    """Live progress of an ``up``/``destroy``/``refresh`` from its engine events.

    ``live`` (default: whether ``console`` is a terminal) shows the steps in progress as a table
    that updates in place; otherwise a plain line every ``heartbeat_s`` seconds lists them with
    their elapsed time. Call :meth:`start` before the operation and :meth:`stop` after it."""

    def __init__(
        self,
        console: Console,
        *,
        live: bool | None = None,
        heartbeat_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.steps: dict[str, Step] = {}
        self.order: list[Step] = []
        self.violations: list[PolicyViolation] = []
        self.began = clock()
        self.finished: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the live table (terminal) or the heartbeat thread (plain text)."""
        self.began = self.clock()
        if self.live:
            from rich.live import Live

            self._live = Live(self._table(), console=self.console, refresh_per_second=2, transient=True)
            self._live.start()
            target, interval = self._refresh_live, 0.5
        else:
            target, interval = self.heartbeat, self.heartbeat_s
        self._stop.clear()
        self._thread = threading.Thread(target=self._tick, args=(target, interval), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the ticker and the live table; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _tick(self, target: Callable[[], None], interval: float) -> None:
        while not self._stop.wait(interval):
            target()

    def _refresh_live(self) -> None:
        with self._lock:
            if self._live is not None:
                self._live.update(self._table())

    # -- output ------------------------------------------------------------------------------
    def _print(self, *renderables: RenderableType) -> None:
        # Text objects only: engine strings are never interpreted as markup.
        target = self._live.console if self._live is not None else self.console
        for r in renderables:
            target.print(r, soft_wrap=True)

    def _stamp(self, step: Step) -> Text:
        return Text(f" ({duration(step.elapsed(self.clock()))})", "dim")

    def running(self) -> list[Step]:
        return [s for s in self.order if s.ended is None]

    def _table(self) -> RenderableType:
        now = self.clock()
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        for column in ("resource", "step", "elapsed", "status"):
            table.add_column(column, overflow="fold" if column == "status" else "ellipsis")
        for s in self.running():
            table.add_row(
                Text(f"{s.type} {short_name(s.urn)}"),
                Text(s.op),
                Text(duration(s.elapsed(now))),
                Text(s.status),
            )
        title = Text(f"{len(self.running())} in progress, {duration(now - self.began)} elapsed", "dim")
        return Group(title, table)

    def heartbeat(self) -> None:
        """One plain line naming every step still running, its elapsed time and last status."""
        with self._lock:
            running = self.running()
            if not running:
                return
            now = self.clock()
            parts = []
            for s in running:
                part = f"{short_name(s.urn)} {duration(s.elapsed(now))}"
                parts.append(f"{part} ({s.status})" if s.status else part)
            self._print(Text(f"... still working ({duration(now - self.began)}): " + "; ".join(parts), "dim"))

    # -- events ------------------------------------------------------------------------------
    def __call__(self, event: Any) -> None:
        with self._lock:
            self._handle(event)

    def _handle(self, event: Any) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            op = op_name(meta.op)
            if op in QUIET_OPS:
                return
            step = Step(meta.urn, meta.type, op, self.clock())
            self.steps[meta.urn] = step
            self.order.append(step)
            symbol, colour = SYMBOLS.get(op, ("*", "cyan"))
            self._print(
                Text.assemble(
                    (f"{symbol:<2} {op:<8} ", colour), meta.type + " ", (short_name(meta.urn), "bold")
                )
            )
        elif event.res_outputs_event is not None:
            self._end(event.res_outputs_event.metadata.urn, failed=False)
        elif event.res_op_failed_event is not None:
            self._end(event.res_op_failed_event.metadata.urn, failed=True)
        elif event.diagnostic_event is not None:
            self._diagnostic(event.diagnostic_event)
        elif event.policy_event is not None:
            violation = PolicyViolation.from_event(event.policy_event)
            self.violations.append(violation)
            if not violation.not_run:  # the skipped checks are counted in the summary
                self._print(*violation.lines())
        elif event.summary_event is not None:
            self.finished = self.clock()
            self._print(*self.summary_lines(event.summary_event))

    def _end(self, urn: str, failed: bool) -> None:
        step = self.steps.get(urn)
        if step is None or step.ended is not None:
            return
        step.ended, step.failed = self.clock(), failed
        word, colour = ("failed", "red") if failed else (DONE.get(step.op, "done"), "green")
        self._print(
            Text.assemble(
                (f"   {word:<9} ", colour), f"{step.type} ", (short_name(urn), "bold"), self._stamp(step)
            )
        )

    def _diagnostic(self, diag: Any) -> None:
        message = plain_message(diag.message)
        if not message:
            return
        step = self.steps.get(diag.urn or "")
        if diag.severity in STATUS_SEVERITIES:
            if step is None or message == step.status:
                return  # info without a resource is engine chatter; repeats add nothing
            step.status = message
            self._print(
                Text.assemble("   ", (short_name(step.urn), "bold"), ": ", message, self._stamp(step))
            )
        elif diag.severity in ("warning", "error"):
            colour = "red" if diag.severity == "error" else "yellow"
            where = f"{short_name(step.urn)}: " if step is not None else ""
            self._print(Text.assemble((f"{diag.severity}: ", colour), where, message))

    def summary_lines(self, summary: Any) -> list[Text]:
        """The final count, the total time and the slowest steps."""
        counts = Counter(s.op for s in self.order if not s.failed)
        failed = sum(1 for s in self.order if s.failed)
        parts = [f"{n} {DONE.get(op, op)}" for op, n in sorted(counts.items())]
        parts += [f"{failed} failed"] if failed else []
        changes = ", ".join(parts) or "no changes"
        total = summary.duration_seconds or (self.clock() - self.began)
        out = [Text.assemble(("done", "bold"), f" in {duration(total)}: {changes}")]
        timed = sorted((s for s in self.order if s.ended is not None), key=lambda s: -s.elapsed(s.started))
        if timed:
            out.append(Text("slowest steps:", "dim"))
            out += [
                Text(f"  {duration(s.elapsed(s.started)):>9}  {s.op:<8} {s.type} {short_name(s.urn)}")
                for s in timed[:8]
            ]
        return out

    def timings(self) -> list[dict[str, Any]]:
        """Every step with its elapsed seconds, for ``--json``."""
        return [s.to_dict() for s in self.order]
