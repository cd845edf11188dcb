"""Each warning once per command, as a user's terminal shows it: the offline commands say the
stack's warnings before they run the program, and the program, which logs the same warnings on
each of its runs (``simulate --compare`` renders the stack once per signal, ``diff`` twice), keeps
its log for the command to show (automation/render.py). preview and up, where the engine relays the
program's log, are checked against the stand-in CLI in test_cli_operations.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepseek_eks.automation.api import read_config
from deepseek_eks.settings import Settings, parse_settings

ROOT = Path(__file__).resolve().parents[2]


def _settings(stack: str) -> Settings:
    config = read_config(stack, {})
    return parse_settings(config.values, config.secret_keys, stack)


def _said(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "automation", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argv", "blockers"),
    [
        (("plan", "--stack", "prod"), True),
        (("render", "--stack", "prod", "--out", "{tmp}"), True),
        # the simulator says the settings' warnings; refusals of `up` are not its subject
        (("simulate", "--stack", "dev", "--compare", "--hours", "1", "--out", "{tmp}"), False),
    ],
    ids=lambda value: value[0] if isinstance(value, tuple) else "",
)
def test_the_stack_s_warnings_are_said_once(argv: tuple[str, ...], blockers: bool, tmp_path: Path) -> None:
    said = _said(*(a.replace("{tmp}", str(tmp_path)) for a in argv))
    settings = _settings(argv[argv.index("--stack") + 1])
    messages = [*settings.warnings, *(settings.deploy_blockers if blockers else ())]
    assert messages, "the stack warns about nothing: this test would prove nothing"
    for message in messages:
        assert said.count(message) == 1, f"{argv[0]}: {said.count(message)} times: {message}\n{said}"


@pytest.mark.parametrize(
    "argv",
    [("diff", "--stack", "dev", "--set", "autoscaling.maxReplicas=3"), ("urns",)],
    ids=lambda argv: argv[0],
)
def test_commands_that_render_to_compare_repeat_no_warning(argv: tuple[str, ...]) -> None:
    said = _said(*argv)
    for stack in ("dev", "prod", "r1"):
        for message in _settings(stack).warnings:
            assert said.count(message) <= 1, f"{argv[0]} repeats: {message}\n{said}"


@pytest.mark.parametrize(
    "argv",
    [("plan", "--stack", "dev"), ("render", "--stack", "dev", "--out", "{tmp}")],
    ids=lambda argv: argv[0],
)
def test_the_plan_s_warnings_are_said_once(argv: tuple[str, ...], tmp_path: Path) -> None:
    """The program logs the plan's warnings too (the component, at preview and up), and render
    runs the program: its summary shows them, the program's log does not repeat them."""
    from deepseek_eks.components.build import size

    said = _said(*(a.replace("{tmp}", str(tmp_path)) for a in argv))
    messages = size(_settings("dev")).warnings
    assert messages, "dev's plan warns about nothing: this test would prove nothing"
    for message in messages:
        assert said.count(message) == 1, f"{argv[0]}: {said.count(message)} times: {message}\n{said}"
