"""The component as a Pulumi package for other languages, against the real CLI (issue 24, Tier 1):
``pulumi package get-schema`` loads our provider as a plugin and reads the schema it serves, and
Pulumi's own SDK generators (pkg/v3 codegen/python and codegen/nodejs, run by ``pulumi-sdkgen``
as the language hosts' GeneratePackage runs them: ``pulumi package gen-sdk`` itself stops at the
missing Python and Node.js hosts) turn it into SDKs whose DeepSeekService takes each input the
way the schema declares it: a plain value where ``plain: true``, an ``Input`` otherwise."""

from __future__ import annotations

import json
import py_compile
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.engine.engine import Engine, make_engine, require_binary
from tests.package.test_packaging import _build_wheel
from twin.providers import component

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "deepseek-eks:index:DeepSeekService"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The schema the real CLI reads from our provider (``pulumi package get-schema PLUGIN``)."""
    home = tmp_path_factory.mktemp("engine")
    engine: Engine = make_engine(home)
    site = home / "site"
    with zipfile.ZipFile(_build_wheel(home / "wheel")) as archive:
        archive.extractall(site)
    plugin = component.write_launcher(home / "bin", site)
    done = engine.cli("package", "get-schema", str(plugin))
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def inputs(schema: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """DeepSeekService's inputs: name -> (plain, its type or $ref)."""
    props = schema["resources"][TOKEN]["inputProperties"]
    return {k: (bool(v.get("plain")), v.get("$ref") or v.get("type", "")) for k, v in props.items()}


def generate(served: dict[str, Any], language: str, out: Path) -> Path:
    tool = require_binary("pulumi-sdkgen", "PULUMI_VERSION")
    out.mkdir(parents=True)
    schema = out / "schema.json"
    schema.write_text(json.dumps(served))
    done = subprocess.run(
        [str(tool), str(schema), language, str(out / language)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return out / language


def snake(name: str) -> str:
    """camelCase -> snake_case, as Pulumi's Python codegen names arguments (PyName)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_the_cli_serves_the_committed_component_schema(served: dict[str, Any]) -> None:
    committed = json.loads((ROOT / "provider" / "schema.json").read_text())
    assert served["name"] == committed["name"] and served["version"] == committed["version"]
    assert inputs(served) == inputs(committed)
    assert set(served["types"]) == set(committed["types"])


def test_python_sdk_takes_plain_and_input_arguments_as_declared(
    served: dict[str, Any], tmp_path: Path
) -> None:
    sdk = generate(served, "python", tmp_path / "gen")
    module = sdk / "pulumi_deepseek_eks" / "deep_seek_service.py"
    for path in sdk.rglob("*.py"):
        py_compile.compile(str(path), doraise=True)
    text = module.read_text()
    args = text[text.index("class DeepSeekServiceArgs:") :]
    signature = args[args.index("def __init__(") : args.index("):")]
    for name, (plain, _) in inputs(served).items():
        match = re.search(rf"\b{snake(name)}: ([^=]+)=", signature)
        assert match, f"{snake(name)} missing from DeepSeekServiceArgs.__init__"
        assert match.group(1).startswith("pulumi.Input[") is not plain, (name, match.group(1))


def test_nodejs_sdk_takes_plain_and_input_arguments_as_declared(
    served: dict[str, Any], tmp_path: Path
) -> None:
    sdk = generate(served, "nodejs", tmp_path / "gen")
    # The TypeScript example imports the package under the name the generator gives it.
    example = (ROOT / "examples" / "typescript-existing-cluster" / "index.ts").read_text()
    imported = re.search(r'import \* as deepseek from "([^"]+)"', example)
    assert imported and imported.group(1) == json.loads((sdk / "package.json").read_text())["name"]
    text = (sdk / "deepSeekService.ts").read_text()
    body = text[text.index("export interface DeepSeekServiceArgs {") :]
    body = body[: body.index("\n}")]
    for name, (plain, _) in inputs(served).items():
        match = re.search(rf"^\s+{name}\?: (.+);$", body, re.MULTILINE)
        assert match, f"{name} missing from DeepSeekServiceArgs"
        assert match.group(1).startswith("pulumi.Input<") is not plain, (name, match.group(1))
