"""The commands run with what their installs declare and nothing more (issue 32 §1), checked
offline: in a subprocess, every module of an installed distribution outside the declared
dependency closure is blocked, as if that distribution were not installed.

- ``requirements.txt`` alone (what ``pulumi install`` builds for the program): ``python -m
  automation`` plans, renders and runs the preflight;
- the wheel with its ``[cli]`` extra: every command's ``--help``, ``plan`` and ``loadtest --stack``.

The closure follows each distribution's own ``Requires-Dist`` (with its markers and the extras
asked for) through ``importlib.metadata``, so a transitive dependency counts, as pip would install it.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def closure(requirements: Iterable[str]) -> set[str]:
    """The distributions ``requirements`` install, transitively (canonical names)."""
    todo = [(Requirement(r), "") for r in requirements]
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        for wanted in ("", *sorted(requirement.extras)):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            names.add(name)
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue
            todo += [(Requirement(r), wanted) for r in dist.requires or []]
    return names


def blocked_modules(allowed: set[str]) -> list[str]:
    """Top-level modules that only distributions outside ``allowed`` (and this project) provide."""
    allowed = allowed | {"deepseek-eks"}
    blocked = []
    for module, dists in metadata.packages_distributions().items():
        if module.startswith("_") or module in sys.stdlib_module_names:
            continue
        if not {canonicalize_name(d) for d in dists} & allowed:
            blocked.append(module)
    return sorted(blocked)


def requirements_txt() -> list[str]:
    lines = (ROOT / "requirements-pins.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.strip() and not line.startswith(("#", "-"))]


@cache
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def run(blocked: list[str], code: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "PULUMI_HOME": str(tmp / ".pulumi")},
    )


def automation(*argv: str) -> str:
    """Code that runs the console script with ``argv``."""
    call = f"sys.argv = ['deepseek-eks', *{list(argv)!r}]\nautomation()\n"
    return "from deepseek_eks.console import automation\n" + call


EVERY_HELP = """
from deepseek_eks.automation.cli import _parser
parser = _parser()
commands = [[name] for name in parser._subparsers._group_actions[0].choices]
commands += [["twin", t] for t in ("check", "capacity", "snapshot", "build")]
for command in [[], *commands]:
    try:
        _parser().parse_args([*command, "--help"])
    except SystemExit as done:
        assert done.code == 0, (command, done.code)
print("helped", len(commands))
"""


def assert_ran(result: subprocess.CompletedProcess[str], *codes: int) -> None:
    output = result.stdout + result.stderr
    assert "ModuleNotFoundError" not in output and "Traceback" not in output, output[-3000:]
    assert result.returncode in codes, (result.returncode, output[-3000:])


@pytest.fixture(scope="module")
def program_only() -> list[str]:
    """What a venv from requirements.txt alone lacks."""
    blocked = blocked_modules(closure(requirements_txt()))
    assert {"jsonschema", "kubernetes_validate", "cryptography", "moto"} <= set(blocked)  # not vacuous
    return blocked


@pytest.fixture(scope="module")
def wheel_with_cli() -> list[str]:
    """What a venv with only the wheel and its [cli] extra lacks."""
    declared = [*project()["dependencies"], *project()["optional-dependencies"]["cli"]]
    blocked = blocked_modules(closure(declared))
    assert {"jsonschema", "kubernetes_validate", "moto", "pytest"} <= set(blocked)
    return blocked


def test_every_command_helps_with_the_wheel_and_its_cli_extra(
    wheel_with_cli: list[str], tmp_path: Path
) -> None:
    result = run(wheel_with_cli, EVERY_HELP, tmp_path)
    assert_ran(result, 0)
    assert "helped" in result.stdout


def test_plan_runs_with_the_wheel_and_its_cli_extra(wheel_with_cli: list[str], tmp_path: Path) -> None:
    assert_ran(run(wheel_with_cli, automation("plan", "--stack", "dev"), tmp_path), 0)
    # loadtest --stack plans the stack too, and prints the in-cluster Job recording its settings.
    job = ["--url", "http://vllm.deepseek.svc.cluster.local", "--arrivals", "closed", "--concurrency", "8"]
    job += ["--requests", "10", "--instance-type", "g6.xlarge", "--as-job"]
    result = run(wheel_with_cli, automation("loadtest", "--stack", "dev", *job), tmp_path)
    assert_ran(result, 0)
    assert "kind: Job" in result.stdout and "tensor_parallel_size=1" in result.stdout


def test_the_program_venv_plans_renders_and_runs_the_preflight(
    program_only: list[str], tmp_path: Path
) -> None:
    assert_ran(run(program_only, EVERY_HELP, tmp_path), 0)
    assert_ran(run(program_only, automation("plan", "--stack", "dev"), tmp_path), 0)
    rendered = run(
        program_only, automation("render", "--stack", "dev", "--out", str(tmp_path / "r")), tmp_path
    )
    assert_ran(rendered, 0)
    assert (tmp_path / "r" / "dev" / "plan.json").is_file()
    # No AWS credentials and no Pulumi CLI here: the preflight reports its failed checks (exit 2
    # or 3), but every module it needs is there.
    assert_ran(run(program_only, automation("preflight", "--stack", "dev"), tmp_path), 0, 1, 2, 3)


def test_a_twin_command_without_its_extra_names_it(wheel_with_cli: list[str], tmp_path: Path) -> None:
    result = run(wheel_with_cli, automation("twin", "check", "--render", str(tmp_path)), tmp_path)
    assert result.returncode == 3 and "pip install 'deepseek-eks[twin]'" in result.stderr, result.stderr
