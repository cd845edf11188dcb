"""The progress display turns real Automation API engine events into one readable line each."""

from __future__ import annotations

from pulumi.automation.events import (
    DiagnosticEvent,
    EngineEvent,
    OpType,
    ResourcePreEvent,
    StepEventMetadata,
    SummaryEvent,
)
from rich.console import Console

from deepseek_eks.automation.progress import EventPrinter

URN = (
    "urn:pulumi:dev::deepseek-eks::deepseek-eks:index:Inference$kubernetes:apps/v1:Deployment"
    "::inference-deployment"
)


def step(op: OpType) -> EngineEvent:
    meta = StepEventMetadata(op=op, urn=URN, type="kubernetes:apps/v1:Deployment", provider="")
    return EngineEvent(sequence=1, timestamp=0, resource_pre_event=ResourcePreEvent(metadata=meta))


def test_steps_diagnostics_and_summary() -> None:
    console = Console(record=True, width=200, color_system=None)
    printer = EventPrinter(console)
    printer(step(OpType.CREATE))
    printer(step(OpType.SAME))  # unchanged resources are not worth a line
    printer(step(OpType.UPDATE))
    printer(
        EngineEvent(sequence=2, timestamp=0, diagnostic_event=DiagnosticEvent("quota hit\n", "", "warning"))
    )
    printer(
        EngineEvent(sequence=3, timestamp=0, diagnostic_event=DiagnosticEvent("debug noise", "", "debug"))
    )
    summary = SummaryEvent(maybe_corrupt=False, duration_seconds=42, resource_changes={}, policy_packs={})
    printer(EngineEvent(sequence=4, timestamp=0, summary_event=summary))
    lines = console.export_text().splitlines()
    assert lines == [
        "+ create   kubernetes:apps/v1:Deployment inference-deployment",
        "~ update   kubernetes:apps/v1:Deployment inference-deployment",
        "warning: quota hit",
        "done in 42s: 1 create, 1 update",
    ]
