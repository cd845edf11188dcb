"""The twin's fixtures: one running etcd + kube-apiserver per module, and renders to judge.

Without the twin's binaries the tests that need them skip with the reason (how to build them);
under DEEPSEEK_EKS_REQUIRE_TOOLS=1 (CI, after twin/build.sh) they fail instead."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepseek_eks.automation.render import HELM_TOKENS, kubernetes_manifest, render, write
from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import BUILD_HINT
from deepseek_eks.twin.server import Api, running_twin
from tests.conftest import stack_config
from tests.examples import run_existing_cluster_example


class ManualClock:
    """A clock for the vLLM stand-in that only the test moves (``now``, in clock seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def require_binaries(absent: list[Path], what: str, build: str, required_by: str) -> None:
    """Skip when ``absent`` binaries are not built here, saying how to build them; fail instead
    when the environment variable ``required_by`` is 1 (CI, once it has built them)."""
    if not absent:
        return
    reason = f"{what} not built ({', '.join(map(str, absent))}): {build}"
    if shutil.which("go") is None:
        reason = f"no Go toolchain on PATH; {reason}"
    if os.environ.get(required_by) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def require_twin() -> None:
    """Skip (or, in CI, fail) when the twin's binaries are not built on this machine."""
    require_binaries(missing_binaries(), "twin binaries", BUILD_HINT, "DEEPSEEK_EKS_REQUIRE_TOOLS")


@pytest.fixture(scope="module")
def twin() -> Iterator[Api]:
    """A running twin shared by a module's dry-run checks (they persist only namespaces, service
    accounts, priority/runtime classes and CRDs, which every render applies the same way)."""
    require_twin()
    with running_twin() as api:
        yield api


def render_stack(stack: str, compute_mode: str, out: Path) -> Path:
    """``stack``'s render in ``compute_mode`` (the stack file's other settings kept)."""
    config = stack_config(stack, computeMode=compute_mode)
    folder = write(render(config), out / compute_mode)
    return folder


def write_objects(objects: list[dict[str, Any]], folder: Path) -> Path:
    """A render directory (``kubernetes/*.yaml``) holding ``objects``."""
    (folder / "kubernetes").mkdir(parents=True)
    for i, obj in enumerate(objects):
        (folder / "kubernetes" / f"{i:03d}-{obj['kind'].lower()}.yaml").write_text(yaml.safe_dump(obj))
    return folder


def render_example(compute_mode: str, out: Path) -> Path:
    """examples/existing-cluster's Kubernetes objects (both services) as a render directory."""
    mocks = run_existing_cluster_example(compute_mode)
    objects = [
        kubernetes_manifest(r)
        for r in mocks.resources
        if r.type.startswith("kubernetes:") and r.type not in HELM_TOKENS
    ]
    return write_objects(objects, out / f"example-{compute_mode}")
