"""Security scan: checkov's Kubernetes checks over every stack's render. A finding either gets
fixed or is skipped in code with its reason (``checkov.io/skipN`` annotations); none may stay."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.automation.stackfile import read_stack, stack_names
from tests.conftest import feature_configs

ROOT = Path(__file__).resolve().parents[2]
MISSING = "checkov not found: run `make checkov-venv` (or pip install checkov)"


def checkov_binary() -> str:
    local = ROOT / ".venv-checkov" / "bin" / "checkov"
    found = str(local) if local.exists() else shutil.which("checkov")
    if found is None:
        if os.environ.get("DEEPSEEK_EKS_REQUIRE_TOOLS") == "1":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return found


def scan(directory: Path) -> list[dict]:
    proc = subprocess.run(
        [checkov_binary(), "-d", str(directory), "--framework", "kubernetes", "-o", "json", "--compact"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode not in (0, 1):
        raise AssertionError(f"checkov crashed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    report = json.loads(proc.stdout or "[]")
    return report if isinstance(report, list) else [report]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("render")
    for stack in stack_names():
        write(render(read_stack(stack)), out)
    for label, config in feature_configs().items():  # weights sources, endpoints the files leave unset
        write(render(config), out / label)
    reports = scan(out)
    failed = [c for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    skipped = [c for r in reports for c in r.get("results", {}).get("skipped_checks", [])]
    passed = [c for r in reports for c in r.get("results", {}).get("passed_checks", [])]
    return {"failed": failed, "skipped": skipped, "passed": passed}


def test_every_stack_passes_checkov(results: dict) -> None:
    failures = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in results["failed"]]
    assert failures == []
    assert len(results["passed"]) > 100  # the scan really looked at the workloads


def test_every_skip_carries_its_reason(results: dict) -> None:
    assert results["skipped"], "expected the documented skips on the vLLM workload"
    for check in results["skipped"]:
        assert len(check["check_result"].get("suppress_comment") or "") > 20, check["check_id"]


def test_the_scan_catches_a_privileged_container(tmp_path: Path) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad", "namespace": "deepseek"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox:1.36", "securityContext": {"privileged": True}}]
        },
    }
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(pod))
    failed = {c["check_id"] for r in scan(tmp_path) for c in r.get("results", {}).get("failed_checks", [])}
    assert "CKV_K8S_16" in failed  # "Container should not be privileged"
