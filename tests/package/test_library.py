"""The wheel as a library other programs depend on: compatible ranges (the program keeps its exact
pins), ``py.typed``, ``__version__``, the exports, the ``cli`` extra, console scripts that work
from any folder, and a type checker that sees the package's types."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.package.test_packaging import HAS_WHEEL, ROOT

pytestmark = pytest.mark.skipif(not HAS_WHEEL, reason="the `wheel` package (requirements-dev.txt) is needed")
SITE = sysconfig.get_paths()["purelib"]  # the tested dependencies, for the fresh venv's scripts
CLI_ONLY = {"rich", "httpx", "boto3", "pulumi-policy"}  # the CLI runs the policy pack
TWIN_ONLY = {"cryptography", "jsonschema", "kubernetes-validate"}  # python -m automation twin


@pytest.fixture
def wheel(package_wheel: Path) -> Path:
    return package_wheel  # tests/package/conftest.py: built once per session


def _metadata(wheel: Path) -> tuple[dict[str, list[str]], list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        text = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    message = Parser().parsestr(text)
    fields = {key: message.get_all(key) or [] for key in ("Version", "Requires-Dist", "Provides-Extra")}
    return fields, names


def _pins(*files: str) -> dict[str, str]:
    pins = {}
    for file in files or ("requirements-pins.txt",):
        for line in (ROOT / file).read_text().splitlines():
            if "==" in line and not line.startswith("#"):
                name, version = line.split("==")
                pins[canonicalize_name(name)] = version.strip()
    return pins


def test_metadata_has_compatible_ranges_holding_the_programs_pins(wheel: Path) -> None:
    fields, _ = _metadata(wheel)
    requires = [Requirement(r) for r in fields["Requires-Dist"]]
    library = [r for r in requires if r.marker is None]
    extra = {canonicalize_name(r.name) for r in requires if r.marker is not None}
    pins = _pins()
    assert library
    for requirement in library:
        operators = {spec.operator for spec in requirement.specifier}
        assert operators == {">=", "<"}, f"{requirement}: a range with an upper bound, not a pin"
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name}: the program pins every library dependency (requirements-pins.txt)"
        assert pins[name] in requirement.specifier, (
            f"requirements-pins.txt's {name}=={pins[name]} is outside {requirement}"
        )
    # The CLI's and the twin's own dependencies are extras, not the library's; the twin's are
    # pinned with the tools (requirements-dev.txt), not in the program's requirements.txt.
    assert sorted(fields["Provides-Extra"]) == ["cli", "twin"]
    assert extra == CLI_ONLY | TWIN_ONLY
    assert not (CLI_ONLY | TWIN_ONLY) & {canonicalize_name(r.name) for r in library}
    every_pin = _pins("requirements-pins.txt", "requirements-dev.txt")
    for requirement in requires:
        if requirement.marker is not None:
            which = "twin" if canonicalize_name(requirement.name) in TWIN_ONLY else "cli"
            assert requirement.marker.evaluate({"extra": which}), requirement
            assert every_pin[canonicalize_name(requirement.name)] in requirement.specifier


def _without_the_cli_extra(code: str) -> subprocess.CompletedProcess[str]:
    blocked = sorted(CLI_ONLY | {"botocore"})
    prelude = f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, capture_output=True, text=True)


def test_the_library_and_its_testing_kit_run_without_the_cli_extra() -> None:
    """No part of the library or the testing kit imports what the ``cli`` extra holds."""
    result = _without_the_cli_extra(
        "import deepseek_eks, deepseek_eks.testing\n"
        "resources = deepseek_eks.testing.run(lambda: deepseek_eks.DeepSeekService('x', {}), "
        "config={'aws:region': 'us-east-1'})\n"
        "assert resources\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_console_script_without_the_cli_extra_says_what_to_install() -> None:
    result = _without_the_cli_extra(
        "from deepseek_eks.console import automation\n"
        "sys.argv = ['deepseek-eks', 'plan', '--stack', 'dev']\n"
        "automation()\n"
    )
    assert result.returncode == 3  # DESIGN.md: a missing prerequisite
    assert "pip install 'deepseek-eks[cli]'" in result.stderr and "Traceback" not in result.stderr


def test_py_typed_version_and_exports(wheel: Path) -> None:
    fields, names = _metadata(wheel)
    assert "deepseek_eks/py.typed" in names
    assert "deepseek_eks/testing/__init__.py" in names
    assert "deepseek_eks/automation/cli.py" in names
    import deepseek_eks

    assert fields["Version"] == [deepseek_eks.__version__]
    for name in (
        "DeepSeekService",
        "DeepSeekServiceArgs",
        "ExistingClusterArgs",
        "SettingsError",
        "SizingError",
        "ServiceError",
        "Infeasible",
        "PlanError",
        "plan",
        "PlanRequest",
        "__version__",
    ):
        assert name in deepseek_eks.__all__ and hasattr(deepseek_eks, name), name


@pytest.fixture
def venv(package_venv: Path) -> Path:
    return package_venv  # tests/package/conftest.py: the wheel in a fresh venv, once per session


def _script(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AWS_REGION", "AWS_DEFAULT_REGION")}
    env["PYTHONPATH"] = SITE
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_sizing_console_script_works_from_any_folder(venv: Path, tmp_path: Path) -> None:
    result = _script(
        venv,
        "deepseek-eks-sizing",
        "--variant",
        "r1-distill-qwen-7b",
        "--families",
        "g6",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["variant"] == "r1-distill-qwen-7b"


def _project(folder: Path, name: str | None = None) -> Path:
    folder.mkdir()
    text = (ROOT / "Pulumi.yaml").read_text()
    if name:
        text = text.replace("name: deepseek-eks", f"name: {name}", 1)
        assert f"name: {name}" in text
    (folder / "Pulumi.yaml").write_text(text)
    (folder / "Pulumi.dev.yaml").write_text(
        "config:\n  aws:region: eu-west-1\n  deepseek-eks:gpu.instanceFamilies: [g6e]\n"
    )
    return folder


def test_deepseek_eks_plans_the_project_in_the_current_folder(venv: Path, tmp_path: Path) -> None:
    """Installed, there is no checkout: the current folder's Pulumi.yaml and stack files are read
    (``--project-dir`` likewise)."""
    project = _project(tmp_path / "mine")
    for args, cwd in ((("plan",), project), (("--project-dir", str(project), "plan"), tmp_path)):
        result = _script(venv, "deepseek-eks", *args, "--stack", "dev", "--json", cwd=cwd)
        assert result.returncode == 0, result.stderr
        plan = json.loads(result.stdout)
        assert (plan["region"], plan["instance_type"][:3]) == ("eu-west-1", "g6e")


def test_a_project_that_is_not_this_program_is_refused(venv: Path, tmp_path: Path) -> None:
    """Its config keys are another namespace: planning it would silently be this program's defaults."""
    project = _project(tmp_path / "theirs", name="platform-ai")
    result = _script(
        venv, "deepseek-eks", "--project-dir", str(project), "plan", "--stack", "dev", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "project 'platform-ai' is not the deepseek-eks program" in result.stderr
    assert "deepseek_eks.testing" in result.stderr and "Traceback" not in result.stderr


USER_PROGRAM = """
import pulumi
from deepseek_eks import DeepSeekService, DeepSeekServiceArgs, ExistingClusterArgs

network = pulumi.StackReference("platform/network/prod")
vpc_id: pulumi.Output[str] = network.require_output("vpcId")
subnets: pulumi.Output[list[str]] = network.require_output("privateSubnetIds")
joined: ExistingClusterArgs = {"cluster_name": "platform", "node_role_name": vpc_id.apply(str)}
args = DeepSeekServiceArgs(
    existing_cluster=joined,
    model={"variant": "r1-distill-qwen-7b"},
    network={"vpc_id": vpc_id, "private_subnet_ids": subnets, "public_subnet_ids": [vpc_id, "subnet-0a"]},
    endpoint={"allowed_cidrs": [vpc_id, "10.0.0.0/16"]},
)
service = DeepSeekService("chat", args)
url: pulumi.Output[str] = service.endpoint_url
"""
WRONG = 'DeepSeekService("chat", {"model": {"max_model_len": "long"}})\n'
# A plan-shaping field stays plain: an Output there is a type error (issue 20 item 1).
WRONG_OUTPUT = 'DeepSeekService("chat", {"model": {"variant": vpc_id}})\n'


# mypy checks the user's files strictly and reads deepseek_eks and pulumi; the generated provider
# SDKs (tens of thousands of modules) are skipped, their names typed Any, to keep it to seconds.
MYPY_INI = """[mypy]
strict = True
[mypy-pulumi_aws.*,pulumi_kubernetes.*,pulumi_eks.*,pulumi_random.*]
follow_imports = skip
"""


def test_mypy_of_a_user_program_sees_the_package_types(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    (tmp_path / "good.py").write_text(USER_PROGRAM)
    (tmp_path / "bad.py").write_text(USER_PROGRAM + WRONG)
    (tmp_path / "plain.py").write_text(USER_PROGRAM + WRONG_OUTPUT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    env["PYTHONPATH"] = SITE  # the venv's interpreter sees the wheel and the tested dependencies

    def mypy(name: str) -> subprocess.CompletedProcess[str]:
        args = ["--python-executable", str(venv / "bin" / "python"), name]
        return subprocess.run(
            [sys.executable, "-m", "mypy", *args], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    good = mypy("good.py")
    assert good.returncode == 0, good.stdout
    bad = mypy("bad.py")
    assert bad.returncode == 1
    assert 'TypedDict item "max_model_len" has type "int"' in bad.stdout, bad.stdout
    plain = mypy("plain.py")
    assert plain.returncode == 1
    assert 'TypedDict item "variant" has type "Literal[' in plain.stdout, plain.stdout


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


# The previous patch release of the pinned pulumi-aws 7.51.1 (`pip index versions pulumi-aws`:
# 7.51.1, 7.51.0, 7.50.0, ...).
OLDER_PULUMI_AWS = "7.51.0"


@pytest.mark.skipif(not _pypi_reachable(), reason="needs PyPI to resolve the wheel's dependencies")
def test_the_wheel_installs_next_to_an_older_pulumi_aws_patch_release(
    wheel: Path, venv: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"),
            *("--dry-run", "--ignore-installed", "-q", "--report", str(report)),
            str(wheel),
            f"pulumi-aws=={OLDER_PULUMI_AWS}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    chosen = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert chosen["pulumi-aws"] == OLDER_PULUMI_AWS
    assert "deepseek-eks" in chosen
