"""Every option of every command line has help text, and --version answers from the package."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from deepseek_eks.automation import cli
from deepseek_eks.sizing import cli as sizing_cli

ROOT = Path(__file__).resolve().parents[2]


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    top = cli._parser()
    (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return [("automation", top), ("sizing", sizing_cli.parser()), *sub.choices.items()]


@pytest.mark.parametrize(("name", "parser"), parsers(), ids=[n for n, _ in parsers()])
def test_every_option_has_help(name: str, parser: argparse.ArgumentParser) -> None:
    missing = [
        "/".join(a.option_strings)
        for a in parser._actions
        if a.option_strings and not a.help and a.help is not argparse.SUPPRESS
    ]
    assert missing == [], f"{name}: options without help: {missing}"


def test_version_comes_from_the_package() -> None:
    from deepseek_eks import __version__ as expected  # pyproject.toml reads its version from there

    done = subprocess.run(
        [sys.executable, "-m", "automation", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == f"deepseek-eks {expected}"
