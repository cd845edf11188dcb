"""The performance instruments are subcommands of python -m automation: listed in its help, with
their own options, and behaving as their own command lines do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deepseek_eks.automation import cli
from deepseek_eks.perf.loadtest import cli as loadtest_cli
from deepseek_eks.perf.simulate import cli as simulate_cli

ROOT = Path(__file__).parents[2]


def test_main_help_lists_simulate_and_loadtest() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "automation", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    lines = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ")}
    assert {"simulate", "loadtest"} <= lines
    assert "``" not in done.stdout


@pytest.mark.parametrize("name", ["simulate", "loadtest"])
def test_subcommand_help_is_the_instrument_own(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([name, "--help"])
    text = capsys.readouterr().out
    own = simulate_cli.parser() if name == "simulate" else loadtest_cli.parser()
    for action in own._actions:
        for flag in action.option_strings:
            assert flag in text
    assert "``" not in text


def test_loadtest_subcommand_prints_the_same_job(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--url",
        "http://vllm.deepseek.svc",
        "--model",
        "m",
        "--rate",
        "0.5",
        "--requests",
        "30",
        "--tokenizer",
        "org/m",
        "--as-job",
    ]
    assert loadtest_cli.main(argv) == 0
    alone = capsys.readouterr().out
    assert cli.main(["loadtest", *argv]) == 0
    assert capsys.readouterr().out == alone
    assert cli.main(["loadtest", "--url", "http://127.0.0.1:1", "--model", "m"]) == 2  # unbounded
    assert "--requests N" in capsys.readouterr().err


def test_simulate_subcommand_reads_the_top_level_project_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--project-dir", str(tmp_path), "simulate", "--stack", "prod"]) == 2
    assert "Pulumi.prod.yaml: no such stack file" in capsys.readouterr().err
    assert simulate_cli.main(["--project-dir", str(tmp_path), "--stack", "prod"]) == 2
    assert "Pulumi.prod.yaml: no such stack file" in capsys.readouterr().err


def test_project_dir_is_taken_after_the_command_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32 §5: `plan --stack dev --project-dir DIR` reads DIR as `--project-dir DIR plan` does."""
    assert cli.main(["plan", "--stack", "dev", "--project-dir", str(tmp_path)]) == 2
    after = capsys.readouterr().err
    assert cli.main(["--project-dir", str(tmp_path), "plan", "--stack", "dev"]) == 2
    assert "Pulumi.dev.yaml: no such stack file" in after and after == capsys.readouterr().err
