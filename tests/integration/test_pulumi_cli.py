"""Real Automation API runs: need the Pulumi CLI, so they skip with that reason without it.

They use a throwaway local file backend and no AWS: `preview` of a stack whose program fails on
purpose would need credentials, so what is exercised is stack creation, config handling and the
outputs call through the real CLI.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.pulumi_cli,
    pytest.mark.skipif(shutil.which("pulumi") is None, reason="the Pulumi CLI is not on PATH"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def local_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test-only")
    monkeypatch.setenv("PULUMI_SKIP_UPDATE_CHECK", "true")
    return tmp_path


def test_stack_is_created_and_has_no_outputs_before_up(local_backend: Path) -> None:
    from deepseek_eks.automation import api

    assert api.outputs("dev", ROOT) == {}
    assert any(local_backend.rglob("*.json"))  # the stack now exists in the file backend


def test_cli_version_is_usable() -> None:
    from deepseek_eks.automation.api import require_pulumi_cli

    assert os.path.basename(require_pulumi_cli()) == "pulumi"
