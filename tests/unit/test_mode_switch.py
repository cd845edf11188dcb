"""An in-place computeMode switch is refused (automation/mode_switch.py), and ``diff --set`` shows
what a setting change would create, replace and delete (guardrails/diff.py), against the facts in
reference/upstream/compute-mode-switch.json and replace-on-change.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation import cli
from deepseek_eks.automation.api import AutomationError
from deepseek_eks.automation.mode_switch import preflight_check, switch_refusal
from deepseek_eks.automation.preflight import Status
from deepseek_eks.guardrails import urns
from deepseek_eks.guardrails.diff import MODE_SWITCH_FACTS, resource_changes
from deepseek_eks.testing.mocks import Recorded

ROOT = Path(__file__).resolve().parents[2]
FACTS = json.loads(MODE_SWITCH_FACTS.read_text())["facts"]


def test_only_a_deployed_stack_of_another_mode_is_refused() -> None:
    assert switch_refusal("dev", None, "karpenter") is None  # nothing deployed yet
    assert switch_refusal("dev", "auto-mode", "auto-mode") is None
    refusal = switch_refusal("prod", "karpenter", "auto-mode")
    assert refusal and "deepseek-eks:computeMode" in refusal and "new stack" in refusal
    assert "terminates" not in refusal  # nothing turns Auto Mode off
    leaving_auto_mode = switch_refusal("dev", "auto-mode", "karpenter") or ""
    # EKS User Guide, "Disable EKS Auto Mode": its instances are terminated, its load balancers deleted.
    assert "EC2 instance" in FACTS["auto_mode_disable"]["statement"]
    assert "terminates every Auto Mode node" in leaving_auto_mode
    assert "deletes its load balancers" in leaving_auto_mode


class _Outputs:
    def __init__(self, mode: str | None):
        self.mode = mode

    def outputs(self) -> dict[str, Any]:
        class Value:
            secret = False

            def __init__(self, value: str):
                self.value = value

        return {"computeMode": Value(self.mode)} if self.mode else {}


def test_preflight_fails_a_switch_passes_a_first_deployment_and_warns_without_state() -> None:
    def deployed(mode: str) -> Any:
        return lambda stack, path, create: _Outputs(mode)

    def raising(code: int) -> Any:
        def opener(stack: str, path: Path, create: bool) -> Any:
            raise AutomationError("no such stack" if code == 2 else "no Pulumi CLI", code)

        return opener

    assert preflight_check("dev", "karpenter", ROOT, deployed("auto-mode")).status is Status.FAIL
    assert preflight_check("dev", "auto-mode", ROOT, deployed("auto-mode")).status is Status.PASS
    assert preflight_check("dev", "karpenter", ROOT, raising(2)).status is Status.PASS
    assert preflight_check("dev", "karpenter", ROOT, raising(3)).status is Status.WARN

    def not_logged_in(stack: str, path: Path, create: bool) -> Any:
        raise RuntimeError("error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive sessions")

    warned = preflight_check("dev", "karpenter", ROOT, not_logged_in)
    assert warned.status is Status.WARN and "PULUMI_ACCESS_TOKEN" in warned.detail


def _k8s(urn: str, kind: str, name: str, **inputs: Any) -> Recorded:
    return Recorded(kind, urn, {"metadata": {"name": name}, **inputs}, {}, True, urn=urn)


def test_a_new_urn_for_a_kept_kubernetes_name_is_a_replacement_that_fails() -> None:
    """Pulumi creates new URNs before deleting removed ones (pulumi/pulumi performPostSteps), and
    pulumi-kubernetes refuses a create of an existing name: the pair is one failing replacement."""
    assert "after" in FACTS["create_before_delete"]["statement"]
    pool = "kubernetes:karpenter.sh/v1:NodePool"
    before = [_k8s("urn:a$pool", pool, "gpu"), _k8s("urn:a$gone", "kubernetes:core/v1:ConfigMap", "cni")]
    after = [_k8s("urn:b$pool", pool, "gpu"), _k8s("urn:b$new", pool, "general")]
    changes = {(c.action, c.name): c.why for c in resource_changes(before, after, {})}
    assert set(changes) == {("replace", "urn:b$pool"), ("delete", "urn:a$gone"), ("create", "urn:b$new")}
    assert "AlreadyExists" in changes["replace", "urn:b$pool"]


def test_a_same_urn_change_of_an_input_the_provider_cannot_update_names_that_input() -> None:
    facts = urns.replace_on_change()
    token = "aws:s3/bucket:Bucket"
    forcing = facts[token][0]  # an input the provider source marks ForceNew
    old = Recorded(token, "weights", {forcing: "a"}, {}, True, urn="urn:weights")
    new = Recorded(token, "weights", {forcing: "b"}, {}, True, urn="urn:weights")
    tagged = Recorded(token, "weights", {forcing: "a", "tags": {"x": "1"}}, {}, True, urn="urn:weights")
    [replace] = resource_changes([old], [new], facts)
    assert replace.action == "replace" and forcing in replace.why
    [update] = resource_changes([old], [tagged], facts)
    assert update.action == "update" and "tags" in update.why
    assert resource_changes([old], [old], facts) == []


def test_diff_set_compute_mode_shows_the_switch_and_its_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diff", "--stack", "dev", "--set", "computeMode=karpenter"]) == 0
    out = capsys.readouterr().out
    replaced = [line.split()[1] for line in out.splitlines() if line.strip().startswith("replace")]
    # dev runs on Auto Mode: its GPU NodePools and gp3 StorageClass are re-created by the
    # Karpenter capacity layer under the same Kubernetes names.
    assert "kubernetes:karpenter.sh/v1:NodePool" in replaced
    assert "kubernetes:storage.k8s.io/v1:StorageClass" in replaced
    assert "refused in place" in out
    assert all(fact["url"] in out for fact in FACTS.values())


def test_diff_takes_a_ref_or_a_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diff", "--stack", "dev"]) == 2
    assert cli.main(["diff", "--stack", "dev", "--against", "HEAD", "--set", "computeMode=karpenter"]) == 2
    assert "--against REF" in capsys.readouterr().err
