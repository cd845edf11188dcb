"""examples/existing-cluster run offline: the program as a user runs it, under recording mocks."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

from deepseek_eks.automation.render import run_stack_program
from deepseek_eks.automation.stackfile import read_stack
from deepseek_eks.testing.mocks import ProgramLog, RecordingMocks

EXISTING = Path(__file__).resolve().parents[1] / "examples" / "existing-cluster"
COMPUTE_MODES = ("auto-mode", "karpenter")


def run_existing_cluster_example(compute_mode: str, log: ProgramLog | None = None) -> RecordingMocks:
    """The example on an Auto Mode cluster (its stack file) or on a cluster running Karpenter;
    what the program logs goes to ``log``."""
    config = read_stack("example", EXISTING)
    if compute_mode == "karpenter":
        config.values |= {
            f"{config.project}:computeMode": "karpenter",
            f"{config.project}:nodeRoleName": "KarpenterNodeRole-platform",
        }
    assert config.values[f"{config.project}:computeMode"] in ("auto-mode", compute_mode)
    mocks = RecordingMocks(region="us-east-1")

    def program() -> dict[str, Any]:
        runpy.run_path(str(EXISTING / "__main__.py"))
        return {}

    run_stack_program(program, mocks, config, log)
    return mocks
