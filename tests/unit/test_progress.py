"""The progress view and the preview's change set, from real Automation API engine events (the
SDK's own ``EngineEvent.from_json`` parses what the Pulumi CLI writes), with a controlled clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pulumi.automation.events import EngineEvent
from rich.console import Console

from deepseek_eks.automation.progress import ChangeSet, ProgressView, duration
from tests.unit import pulumi_standin as standin

URN = "urn:pulumi:dev::deepseek-eks::deepseek-eks:index:Inference$kubernetes:apps/v1:Deployment::inference"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
# What pulumi-kubernetes logs while a Deployment rolls out (provider/pkg/await/deployment.go),
# snapshotted with its source in reference/upstream/pulumi-kubernetes-await.json.
AWAIT = json.loads(
    (Path(__file__).resolve().parents[2] / "reference/upstream/pulumi-kubernetes-await.json").read_text()
)


def event(data: dict[str, Any]) -> EngineEvent:
    return EngineEvent.from_json({"sequence": 1, "timestamp": 0, **data})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def view() -> tuple[ProgressView, Console, Clock]:
    console = Console(record=True, width=300, color_system=None, force_terminal=False)
    clock = Clock()
    return ProgressView(console, live=False, heartbeat_s=3600, clock=clock), console, clock


def test_steps_end_with_their_elapsed_time_and_rollout_status_per_resource() -> None:
    progress, console, clock = view()
    waiting = AWAIT["deployment"]["waiting_for_replicaset"].replace("%d/%d", "0/1")
    progress(event(standin.pre("create", URN, DEPLOYMENT)))
    clock.now += 5
    progress(event(standin.diag(waiting, URN, "info")))
    progress(event(standin.diag(waiting, URN, "info")))  # pulumi-kubernetes repeats itself: shown once
    clock.now += 600
    progress.heartbeat()
    progress(event(standin.diag(AWAIT["deployment"]["complete"], URN, "info#err")))
    progress(event(standin.diag("engine chatter without a resource", "", "info")))
    clock.now += 21
    progress(event(standin.done("create", URN, DEPLOYMENT)))
    progress(event(standin.pre("same", URN + "2", DEPLOYMENT)))  # unchanged: no line
    progress(event(standin.summary({"create": 1}, seconds=626)))
    assert console.export_text().splitlines() == [
        f"+  create   {DEPLOYMENT} inference",
        f"   inference: {waiting} (5s)",
        f"... still working (10m05s): inference 10m05s ({waiting})",
        f"   inference: {AWAIT['deployment']['complete']} (10m05s)",
        f"   created   {DEPLOYMENT} inference (10m26s)",
        "done in 10m26s: 1 created",
        "slowest steps:",
        f"     10m26s  create   {DEPLOYMENT} inference",
    ]
    assert progress.timings()[0]["seconds"] == 626.0


def test_engine_text_is_never_markup() -> None:
    progress, console, _ = view()
    progress(event(standin.pre("update", URN, DEPLOYMENT)))
    progress(event(standin.diag("mounting [/x] from [bold]s3[/bold]", URN)))
    progress(event(standin.diag("token is [secret]", "", "warning")))
    progress(event(standin.policy("no-public-endpoint", "bad [/path] here", URN)))
    text = console.export_text()
    assert "inference: mounting [/x] from [bold]s3[/bold]" in text
    assert "warning: token is [secret]" in text
    assert "[mandatory]  deepseek-eks/no-public-endpoint  bad [/path] here" in text


def test_a_failed_step_is_counted_as_failed() -> None:
    progress, console, clock = view()
    progress(event(standin.pre("create", URN, DEPLOYMENT)))
    clock.now += 90
    failed = {
        "resOpFailedEvent": {
            "metadata": standin.step_meta("create", URN, DEPLOYMENT),
            "status": 1,
            "steps": 1,
        }
    }
    progress(event(failed))
    progress(event(standin.summary({}, seconds=0)))
    text = console.export_text()
    assert f"   failed    {DEPLOYMENT} inference (1m30s)" in text
    assert "done in 1m30s: 1 failed" in text


def test_change_set_names_the_fields_that_force_a_replacement() -> None:
    changes = ChangeSet()
    changes(
        event(
            standin.pre(
                "replace",
                URN,
                DEPLOYMENT,
                detailed={"spec.selector": "update-replace", "spec.replicas": "update"},
            )
        )
    )
    # no detailedDiff: the changed keys, and the replace keys that forced it
    changes(
        event(
            {
                "resourcePreEvent": {
                    "metadata": {
                        **standin.step_meta("replace", URN + "b", DEPLOYMENT),
                        "diffs": ["data", "immutable"],
                        "keys": ["immutable"],
                    }
                }
            }
        )
    )
    changes(event(standin.pre("create-replacement", URN, DEPLOYMENT)))  # part of the replace
    changes(event(standin.pre("same", URN + "c", DEPLOYMENT)))
    changes(event(standin.summary({"replace": 2, "same": 7})))
    lines = [t.plain for t in changes.lines()]
    assert lines == [
        f"+- replace  {DEPLOYMENT} inference",
        "      ~ spec.replicas",
        "      ~ spec.selector  (forces replacement)",
        f"+- replace  {DEPLOYMENT} inferenceb",
        "      ~ data",
        "      ~ immutable  (forces replacement)",
        "Changes: 2 to replace; 7 unchanged",
    ]
    assert changes.has_changes


def test_durations() -> None:
    assert [duration(s) for s in (0, 59.4, 60, 3599, 3600, 5025)] == [
        "0s",
        "59s",
        "1m00s",
        "59m59s",
        "1h00m00s",
        "1h23m45s",
    ]


def test_checks_skipped_for_unknown_values_are_counted_not_reported_as_findings() -> None:
    # pulumi-policy's notice for a rule that met a value unknown at preview (pulumi_policy/
    # policy.py, the UnknownValueError branch of the analyzer): advisory, "can't run policy ...".
    skipped = (
        "can't run policy 'encrypted-volumes' from policy pack 'deepseek-eks-guardrails@v0.1.0' "
        "during preview: vpcId can't be known during preview"
    )
    changes = ChangeSet()
    changes(event(standin.policy("encrypted-volumes", skipped, URN, level="advisory")))
    changes(event(standin.policy("encrypted-volumes", skipped, URN + "2", level="advisory")))
    changes(event(standin.policy("pinned-versions", "image has no tag", URN)))
    doc = changes.to_dict()
    assert [v["policy"] for v in doc["policy_violations"]] == ["pinned-versions"]
    assert doc["policy_not_run"] == {"count": 2, "policies": ["encrypted-volumes"]}
    lines = [t.plain for t in changes.lines()]
    assert "Policy violations:" in lines and not any("can't run policy" in line for line in lines)
    assert any(line.startswith("Policy checks not run at preview: 2") for line in lines)
