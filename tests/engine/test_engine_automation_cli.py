"""``python -m automation preview|up|destroy --stack dev`` through the real Pulumi engine: the CLI
itself (argument parsing, sizing summary, the credentials check, preview first, the project's
policy pack, progress, the JSON document), with ``DEEPSEEK_EKS_INLINE_PROGRAM=1`` so that the
project's ``__main__.py`` runs as an inline program (no Python language host is served). AWS is the
stand-in providers plus the stand-in STS endpoint (twin/providers/sts.py), the cluster the local
kube-apiserver; the project's policy pack runs as a binary analyzer plugin (the CLI starts a pack
folder only through the missing language host: twin/providers/policy_analyzer.py)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation import api, cli
from deepseek_eks.automation.stackfile import PROJECT_ROOT
from tests.engine.cluster import local_cluster
from tests.engine.engine import make_engine, require_binary, standin
from twin.providers import policy_analyzer, sts
from twin.providers.transform import register_twin_transform

# dev's API is private-only as shipped, and the CLI refuses a first `up` of it (exit 2); a deployer
# CIDR, as the refusal says, makes it deployable.
DEPLOYER = 'cluster.publicAccessCidrs=["203.0.113.7/32"]'


@pytest.fixture
def cli_on_twin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The environment a user's shell would have, pointed at the twin: the engine's bin folder first
    on PATH, its file backend, the stand-in STS; yields a copy of the project folder (stack init
    writes the stack file's encryption salt, which must not touch the checkout)."""
    kubernetes = require_binary("pulumi-resource-kubernetes", "K8S_VERSION")
    engine = make_engine(tmp_path / "engine", {"pulumi-resource-kubernetes": kubernetes})
    pack = policy_analyzer.write_launcher(tmp_path / "engine" / "bin", api.policy_pack_dir())
    monkeypatch.setattr(api, "policy_pack_dir", lambda: pack)  # the CLI passes it as --policy-pack
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        shutil.copy(PROJECT_ROOT / name, project / name)
    program = api.project_program

    def on_twin(project_dir: Path) -> Any:
        run = program(project_dir)

        def twin_program() -> None:
            register_twin_transform(tmp_path / "charts")
            run()

        return twin_program

    monkeypatch.setattr(api, "project_program", on_twin)
    with local_cluster(tmp_path) as kubeconfig, sts.running_sts() as sts_url:
        for key, value in {
            **engine.env,
            standin.KUBECONFIG_ENV: str(kubeconfig),
            api.INLINE_PROGRAM_ENV: "1",
            sts.ENDPOINT_ENV: sts_url,
            "AWS_ACCESS_KEY_ID": "AKIATWINSTANDIN00000",  # any value: only the stand-in reads them
            "AWS_SECRET_ACCESS_KEY": "twin-stand-in-secret",
        }.items():
            monkeypatch.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(key, raising=False)
        yield project


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """``python -m automation ARGV --json`` in this process: exit code, JSON document, stderr."""
    code = cli.main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def changed(document: dict[str, Any]) -> dict[str, int]:
    """The JSON document's change counts without the unchanged ones."""
    return {op: n for op, n in document["counts"].items() if op != "same" and n}


@pytest.mark.timeout(1500)
def test_automation_cli_dev_stack_through_the_engine(
    cli_on_twin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """preview, up --yes, preview --expect-no-changes, a refused compute-mode switch, destroy --yes;
    the policy pack is off here
    (``--no-policy-pack``: see the next test for why)."""
    started = time.monotonic()
    dev = ("--project-dir", str(cli_on_twin))
    settings = ("--stack", "dev", "--set", DEPLOYER)

    code, preview, err = run_cli(capsys, *dev, "preview", *settings, "--no-policy-pack")
    assert code == 0, err
    assert preview["operation"] == "preview" and preview["applied"] is False, preview
    assert set(changed(preview)) == {"create"}, preview  # a fresh stack: everything is created

    code, up, err = run_cli(capsys, *dev, "up", *settings, "--yes", "--skip-preflight", "--no-policy-pack")
    assert code == 0, err
    assert up["applied"] is True and up["outputs"]["clusterName"], up
    assert changed(up) == changed(preview), (up, preview)  # up's own preview matched the first
    assert up["timings"], up  # the progress view followed the operation's steps

    code, again, err = run_cli(capsys, *dev, "preview", *settings, "--expect-no-changes", "--no-policy-pack")
    assert code == 0, err
    assert not changed(again), again

    # The compute-mode switch the product refuses (automation/mode_switch.py: the real API server
    # rejects it in place, tests/engine/test_engine_existing_cluster.py): refused with exit 2 and
    # the migration path, from the deployed stack's own outputs, before anything changes.
    switch = (*settings, "--set", "deepseek-eks:computeMode=karpenter")
    code, refused, err = run_cli(capsys, *dev, "up", *switch, "--yes", "--skip-preflight", "--no-policy-pack")
    assert code == 2, (refused, err)
    assert "deploy a new stack with computeMode 'karpenter'" in refused["error"], refused
    code, still, err = run_cli(capsys, *dev, "preview", *settings, "--expect-no-changes", "--no-policy-pack")
    assert code == 0 and not changed(still), (still, err)

    code, gone, err = run_cli(capsys, *dev, "destroy", "--stack", "dev", "--yes")
    assert code == 0, err
    assert gone["applied"] is True and set(changed(gone)) == {"delete"}, gone
    seconds = time.monotonic() - started
    print(f"automation CLI preview, up, preview, destroy of dev through the engine: {seconds:.0f}s")


@pytest.mark.timeout(900)
def test_automation_cli_preview_with_the_policy_pack(
    cli_on_twin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``preview`` as shipped: the project's policy pack runs (through the real engine) and passes."""
    code, preview, err = run_cli(
        capsys, "--project-dir", str(cli_on_twin), "preview", "--stack", "dev", "--set", DEPLOYER
    )
    assert preview.get("policy_violations") == [], preview.get("policy_violations")
    assert code == 0, err


@pytest.mark.timeout(1500)
def test_an_interrupted_up_cancels_cleanly_and_says_how_to_recover(
    cli_on_twin: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM a few seconds into `up` (issue 37 §1): the command forwards it to Pulumi, which
    cancels (finishing the steps in flight), and exits 1 with the recovery steps; the state has no
    pending operation and the stack is not locked: the next preview and destroy run."""
    import os
    import signal
    import threading

    dev = ("--project-dir", str(cli_on_twin))
    settings = ("--stack", "dev", "--set", DEPLOYER)
    original = api.Orchestrator._apply

    def apply_then_interrupt(self: Any, stack_obj: Any, operation: Any, base: dict[str, Any]) -> Any:
        threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
        return original(self, stack_obj, operation, base)

    monkeypatch.setattr(api.Orchestrator, "_apply", apply_then_interrupt)
    code, up, err = run_cli(capsys, *dev, "up", *settings, "--yes", "--skip-preflight", "--no-policy-pack")
    said = err + json.dumps(up)
    assert code == 1, said
    assert "Pulumi is cancelling the operation cleanly" in said, said
    assert "--clear-pending-creates" in said and "refresh" in said, said
    monkeypatch.setattr(api.Orchestrator, "_apply", original)
    state = api.open_stack("dev", cli_on_twin, create=False).export_stack().deployment
    assert not state.get("pending_operations"), state.get("pending_operations")
    code, _, err = run_cli(capsys, *dev, "preview", *settings, "--no-policy-pack")
    assert code == 0, err  # not locked
    code, _, err = run_cli(capsys, *dev, "destroy", "--stack", "dev", "--yes")
    assert code == 0, err
