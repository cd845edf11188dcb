"""The console scripts (pyproject.toml ``[project.scripts]``): ``deepseek-eks`` is
``python -m automation`` and ``deepseek-eks-sizing`` is ``python -m sizing``, from any directory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

# What only the command-line tools import (pyproject.toml's ``cli`` extra).
CLI_EXTRA = {
    "boto3": "boto3",
    "botocore": "boto3",
    "rich": "rich",
    "httpx": "httpx",
    "pulumi_policy": "pulumi-policy",
}
MISSING_PREREQUISITE = 3  # the CLI contract's exit code for a missing prerequisite


def _run(load: Callable[[], Callable[[list[str] | None], int]]) -> NoReturn:
    """The command ``load`` returns, run with its exit code kept also when a reader stops early
    (``| head``: see sizing/pipe.py); exit 3 naming the extra when a command-line-only dependency
    is missing, whether at import or at run time."""
    from deepseek_eks.sizing.pipe import run_main

    def call() -> int:
        try:
            return load()(None)
        except ModuleNotFoundError as error:
            package = CLI_EXTRA.get((error.name or "").split(".")[0])
            if package is None:
                raise
            print(
                f"error: this command needs {package}, an optional dependency of the command-line "
                "tools: pip install 'deepseek-eks[cli]'",
                file=sys.stderr,
            )
            return MISSING_PREREQUISITE

    run_main(call)


def _automation_main() -> Callable[[list[str] | None], int]:
    from deepseek_eks.automation.cli import main

    return main


def _sizing_main() -> Callable[[list[str] | None], int]:
    from deepseek_eks.sizing.cli import main

    return main


def automation() -> NoReturn:
    """``deepseek-eks``: render, plan, preflight and the Automation API (automation/cli.py)."""
    _run(_automation_main)


def sizing() -> NoReturn:
    """``deepseek-eks-sizing``: the sizing engine alone (sizing/cli.py)."""
    _run(_sizing_main)
