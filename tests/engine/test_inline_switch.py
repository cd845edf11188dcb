"""``DEEPSEEK_EKS_INLINE_PROGRAM=1`` (automation/api.py ``open_stack``): the stack the automation CLI
opens runs the project's ``__main__.py`` as an inline program; without it, as a local program. No
engine needed: the Automation API's stack constructor is recorded."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from deepseek_eks.automation import api
from deepseek_eks.automation.stackfile import PROJECT_ROOT, project_name


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(auto, "create_or_select_stack", lambda **kwargs: calls.append(kwargs) or kwargs)
    return calls


def test_inline_switch_runs_the_project_file_in_process(
    opened: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(api.INLINE_PROGRAM_ENV, "1")
    api.open_stack("dev", PROJECT_ROOT)
    (call,) = opened
    assert call["project_name"] == project_name(PROJECT_ROOT) and "work_dir" not in call
    assert call["opts"].work_dir == str(PROJECT_ROOT)  # its Pulumi.yaml and stack files
    ran: list[str] = []
    monkeypatch.setattr(runpy, "run_path", lambda path, *a, **k: ran.append(path))
    call["program"]()
    assert ran == [str(PROJECT_ROOT / "__main__.py")]


@pytest.mark.parametrize("value", [None, "0", "true"])
def test_without_the_switch_the_project_is_a_local_program(
    value: str | None, opened: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv(api.INLINE_PROGRAM_ENV, raising=False)
    else:
        monkeypatch.setenv(api.INLINE_PROGRAM_ENV, value)
    api.open_stack("dev", Path(PROJECT_ROOT))
    (call,) = opened
    assert call["work_dir"] == str(PROJECT_ROOT) and "program" not in call
