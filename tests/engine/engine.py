"""The real Pulumi engine for tests (issue 24, Tier 1): the CLI built by ``twin/build-engine.sh``,
the stand-in providers of ``twin/providers/standin.py`` on its ``PATH``, a ``file://`` backend and
no plugin downloads.

The Python language host (``pulumi-language-python``) is not served by the Go module proxy, so
programs run as Automation API inline programs: the SDK's own language server in this process,
which the CLI reaches with ``--client`` (the path every inline Automation API program takes).
Without the CLI binary a test is skipped with the command that builds it, or fails under
``DEEPSEEK_EKS_REQUIRE_ENGINE=1`` (.ci/run sets it once the engine is built).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from twin.providers import standin

ROOT = Path(__file__).resolve().parents[2]

BUILD_SCRIPT = ROOT / "twin" / "build-engine.sh"
PASSPHRASE = "twin-test-passphrase"  # encrypts the test stacks' secrets; a throwaway value


def cache_dir() -> Path:
    """Where twin/build-engine.sh (and twin/build.sh) cache binaries by name and version."""
    default = Path.home() / ".cache" / "deepseek-eks" / "twin"
    return Path(os.environ.get("DEEPSEEK_EKS_TWIN_CACHE") or default)


def _script_value(name: str) -> str:
    """A ``NAME=value`` pin of twin/build-engine.sh: one source for the versions."""
    for line in BUILD_SCRIPT.read_text().splitlines():
        if line.startswith(f"{name}="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"{BUILD_SCRIPT} has no {name}= line")


def cached_binary(name: str, version_var: str) -> Path:
    """``<cache>/<name>-<version>/<name>`` for the version twin/build-engine.sh pins."""
    return cache_dir() / f"{name}-{_script_value(version_var)}" / name


def require_binary(name: str, version_var: str) -> Path:
    """The cached binary; skips the test (fails under DEEPSEEK_EKS_REQUIRE_ENGINE=1) without it."""
    path = cached_binary(name, version_var)
    if not os.access(path, os.X_OK):
        reason = f"{name} is not built ({path} missing): run twin/build-engine.sh (Go module proxy)"
        if os.environ.get("DEEPSEEK_EKS_REQUIRE_ENGINE") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@dataclass
class Engine:
    """One isolated engine home: a bin dir (the CLI and the stand-ins), a file backend, a state dir."""

    home: Path
    env: dict[str, str]

    @property
    def backend(self) -> Path:
        return self.home / "backend"

    def stack(self, project: str, stack: str, program: Callable[[], Any]) -> Any:
        """A fresh (or the existing) inline-program stack of ``project`` on this engine."""
        from pulumi import automation as auto

        opts = auto.LocalWorkspaceOptions(
            pulumi_home=str(self.home / "pulumi-home"),
            env_vars=self.env,
            pulumi_command=auto.PulumiCommand(root=str(self.home), skip_version_check=True),
            project_settings=auto.ProjectSettings(
                name=project, runtime="python", backend=auto.ProjectBackend(url=f"file://{self.backend}")
            ),
        )
        return auto.create_or_select_stack(stack_name=stack, project_name=project, program=program, opts=opts)

    def local_stack(self, stack: str, work_dir: Path) -> Any:
        """A fresh (or the existing) stack of the project in ``work_dir``, run by its language host."""
        from pulumi import automation as auto

        opts = auto.LocalWorkspaceOptions(
            pulumi_home=str(self.home / "pulumi-home"),
            env_vars=self.env,
            pulumi_command=auto.PulumiCommand(root=str(self.home), skip_version_check=True),
        )
        return auto.create_or_select_stack(stack_name=stack, work_dir=str(work_dir), opts=opts)

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run the built CLI directly (``pulumi version``, ``pulumi stack ls``...)."""
        return subprocess.run(
            [str(self.home / "bin" / "pulumi"), *args],
            env={**os.environ, **self.env},
            cwd=cwd or self.home,
            capture_output=True,
            text=True,
            timeout=300,
        )


def make_engine(home: Path, extra_binaries: dict[str, Path] | None = None) -> Engine:
    """The CLI and every stand-in provider in ``home/bin``, with the environment that keeps the
    engine local: plugins only from PATH (an absent one is an error, never a download), secrets
    by passphrase, no update check."""
    pulumi = require_binary("pulumi", "PULUMI_VERSION")
    bin_dir = home / "bin"
    standin.write_launchers(bin_dir)
    for name, path in {"pulumi": pulumi, **(extra_binaries or {})}.items():
        (bin_dir / name).symlink_to(path)
    (home / "backend").mkdir(parents=True)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_HOME": str(home / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{home / 'backend'}",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
    }
    return Engine(home, env)


def changes(result: Any) -> dict[str, int]:
    """A preview's or update's counts without the unchanged ones."""
    summary = getattr(result, "change_summary", None) or result.summary.resource_changes
    return {op: n for op, n in summary.items() if op != "same"}
