"""The checkout builds one import package, ``deepseek_eks``, that works outside the checkout; in the
checkout (an editable install of the same package: setup.py, requirements.txt) each project module
is loaded under one name only, from the folder it lives in, with no symlink, path edit or
import-rewriting tool in between."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToJson

from tests.package_tree import build_lock, package_tree

ROOT = Path(__file__).resolve().parents[2]
GENERIC = ("components", "settings", "sizing", "promql", "automation", "policy")
# The package's own folder and the source files around it that are not installed (scripts, tests).
SKIP = {".venv", ".venv-checkov", ".venv-docs", "build", ".git", "reference", "node_modules"}


def _build_wheel(out: Path) -> Path:
    with build_lock():
        # setuptools copies into build/lib and packs what is there: a file deleted or renamed in the
        # checkout since the last build would otherwise still be in the wheel.
        for stale in (ROOT / "build" / "lib", *ROOT.glob("build/bdist.*")):
            shutil.rmtree(stale, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(out),
                ".",
            ],
            cwd=ROOT,
            check=True,
        )
    (wheel,) = out.glob("deepseek_eks-*.whl")
    return wheel


HAS_WHEEL = importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package installed (without dependencies) into a directory outside the checkout."""
    target = tmp_path_factory.mktemp("target")
    if HAS_WHEEL:
        wheel = _build_wheel(tmp_path_factory.mktemp("wheel"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)  # a wheel is installed by unpacking it
    else:
        package_tree(target)
    return target


@pytest.mark.skipif(not HAS_WHEEL, reason="the `wheel` package (requirements-dev.txt) is not installed")
def test_wheel_holds_only_deepseek_eks(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"deepseek_eks", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "deepseek_eks/sizing/data/models.json" in names
    assert "Requires-Dist: pulumi" in metadata  # its dependencies: tests/package/test_library.py


def test_installed_tree_has_no_generic_top_level_name(installed: Path) -> None:
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert top == {"deepseek_eks"}
    assert not any(p.is_symlink() for p in installed.rglob("*"))


def test_installed_package_imports_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    site = sysconfig.get_paths()["purelib"]  # the venv's dependencies, not the checkout
    code = (
        "import sys, deepseek_eks\n"
        "from deepseek_eks import DeepSeekService, DeepSeekServiceArgs, PlanRequest, plan\n"
        "p = plan(PlanRequest(variant='r1-distill-qwen-7b', families=('g6',)))\n"
        "print(deepseek_eks.__file__)\n"
        "print(type(p).__name__, DeepSeekService.__name__, DeepSeekServiceArgs.__name__)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({GENERIC!r})))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(installed), site])
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    file, names, generic = result.stdout.splitlines()
    assert Path(file).is_relative_to(installed)
    assert names == "SizingPlan DeepSeekService DeepSeekServiceArgs"
    assert generic == "[]"


def _modules_after(code: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(result.stdout.split())


def test_the_program_and_tools_load_each_module_once() -> None:
    """Everything in the checkout imports ``deepseek_eks.<name>``; a generic name beside it would be
    a second copy of the same file (two ``ComputeMode`` enums that never compare equal)."""
    modules = _modules_after(
        "import deepseek_eks.automation.cli, deepseek_eks.automation.render, deepseek_eks.testing, "
        "tests.conftest"
    )
    assert "deepseek_eks.components.service" in modules
    assert not {m for m in modules if m.split(".")[0] in GENERIC}


def test_python_m_automation_loads_the_package_under_its_one_name() -> None:
    """``python -m automation`` runs the folder's ``__main__``, which loads the CLI as
    ``deepseek_eks.automation`` (the wheel's name): nothing else loads as ``automation.*``."""
    modules = _modules_after(
        "import runpy, sys\n"
        "sys.argv = ['automation', 'plan', '--stack', 'dev', '--json']\n"
        "try:\n    runpy.run_module('automation', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
    )
    assert "deepseek_eks.automation.cli" in modules
    assert {m for m in modules if m.split(".")[0] == "automation"} <= {"automation", "automation.__main__"}


ENTRY_POINTS = {
    # python -m <folder> from the repository root (DESIGN.md's command-line contracts)
    "automation": ["plan", "--stack", "dev", "--json"],
    "sizing": ["--variant", "r1-distill-qwen-7b", "--families", "g6"],
    "policy": ["check", "-"],
}


@pytest.mark.parametrize("folder", sorted(ENTRY_POINTS))
def test_python_m_folder_is_a_thin_entry_point_over_the_package(folder: str) -> None:
    """``python -m sizing`` (and automation, policy) from the checkout runs the folder's
    ``__main__``, which hands over to ``deepseek_eks.<folder>``: the command's modules load under
    the package's name only, and every class the folder's ``__init__`` exposes under its own name is
    the package's, not a copy (one ``SizingPlan`` class, whichever name reaches it)."""
    modules = _modules_after(
        "import runpy, sys, io\n"
        "sys.stdin = io.StringIO('[]')\n"
        f"sys.argv = [{folder!r}, *{ENTRY_POINTS[folder]!r}]\n"
        f"try:\n    runpy.run_module({folder!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"import deepseek_eks.{folder} as package\n"
        f"entry = sys.modules[{folder!r}]\n"
        "shared = [n for n, v in vars(entry).items() if isinstance(v, type)]\n"
        "assert all(getattr(entry, n) is getattr(package, n) for n in shared), shared\n"
    )
    assert f"deepseek_eks.{folder}.cli" in modules
    assert {m for m in modules if m.split(".")[0] == folder} <= {folder, f"{folder}.__main__"}


def _loaded_twice(code: str, cwd: Path = ROOT) -> list[list[str]]:
    """Run ``code``, then list each of the checkout's files that ``sys.modules`` holds under more
    than one name."""
    probe = (
        code + "\nimport collections, json, os, sys\n"
        "names = collections.defaultdict(list)\n"
        "for name, module in list(sys.modules.items()):\n"
        "    file = getattr(module, '__file__', None)\n"
        f"    if file and os.path.realpath(file).startswith({str(ROOT) + os.sep!r})"
        " and '.venv' not in file:\n"
        "        names[os.path.realpath(file)].append(name)\n"
        "print(json.dumps(sorted(sorted(n) for n in names.values() if len(n) > 1)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])


def test_the_program_and_a_construction_load_no_module_under_two_names(tmp_path: Path) -> None:
    """The Pulumi program (__main__.py, under the mocks the tests use) and a whole construction
    (the offline render of dev) in one process: every project file is one module. A second name
    for a file (``sizing.planner`` beside ``deepseek_eks.sizing.planner``) would give two
    ``SizingPlan`` classes that never compare equal."""
    code = (
        "import runpy, sys\n"
        "import pulumi\n"
        "from deepseek_eks.testing import run\n"
        "try:\n"
        "    run(lambda: runpy.run_path('__main__.py'), project='deepseek-eks')\n"
        "except pulumi.RunError:\n"
        "    pass  # the default settings' cluster API admits no deployer: imported all the same\n"
        "assert 'deepseek_eks.settings.pulumi_source' in sys.modules\n"
        f"sys.argv = ['automation', 'render', '--stack', 'dev', '--out', {str(tmp_path)!r}]\n"
        "try:\n    runpy.run_module('automation', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "assert 'deepseek_eks.components.service' in sys.modules\n"
    )
    twice = _loaded_twice(code)
    assert (tmp_path / "dev" / "plan.json").is_file()
    # runpy's own modules aside (the program file as <run_path>, the entry point's __main__).
    assert [names for names in twice if not {"__main__", "<run_path>"} & set(names)] == [
        ["automation", "deepseek_eks.automation"]
    ]


def test_the_checkout_imports_the_package_from_its_folders(tmp_path: Path) -> None:
    """The editable install (make venv, requirements.txt's ``-e .``) maps ``deepseek_eks.<folder>``
    onto the checkout's folder, from any working directory: the files you edit are the ones run."""
    code = (
        "import importlib, json\n"
        f"names = {[f'deepseek_eks.{f}' for f in GENERIC]!r} + ['deepseek_eks.components.platform.network']\n"
        "print(json.dumps({n: importlib.import_module(n).__file__ for n in names}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    files = json.loads(result.stdout)
    for folder in GENERIC:
        assert Path(files[f"deepseek_eks.{folder}"]) == ROOT / folder / "__init__.py"
    assert (
        Path(files["deepseek_eks.components.platform.network"])
        == ROOT / "components" / "platform" / "network.py"
    )


def test_no_symlink_in_the_repository() -> None:
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert [line.split("\t")[1] for line in listed.stdout.splitlines() if line.startswith("120000")] == []


def _sources() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if not SKIP & set(path.relative_to(ROOT).parts) and "venv" not in path.relative_to(ROOT).parts
    ]


def test_no_file_imports_a_folder_by_its_generic_name() -> None:
    """``from sizing import plan`` would load sizing/ a second time beside ``deepseek_eks.sizing``
    (pytest puts the checkout on sys.path): everything imports ``deepseek_eks.<folder>``, or its
    own package relatively."""
    offenders = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            if any(name.split(".")[0] in GENERIC for name in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_no_path_edits_or_loading_by_path_in_the_package() -> None:
    """The package's modules import each other by name: no ``sys.path`` edit and no module loaded
    from a file path (the workarounds a symlinked layout needed)."""
    folders = [ROOT / "deepseek_eks", *(ROOT / f for f in GENERIC), ROOT / "__main__.py"]
    found = []
    for base in folders:
        for path in [base] if base.is_file() else base.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for needle in ("sys.path.insert", "sys.path.append", "spec_from_file_location"):
                if needle in text:
                    found.append(f"{path.relative_to(ROOT)}: {needle}")
    assert found == []


@contextmanager
def _plugin(installed: Path, cwd: Path, engine_address: str) -> Iterator[Any]:
    """provider/__main__.py started as the engine starts a plugin: outside the checkout, with only
    the installed package, the engine's address as its argument, its gRPC port read from stdout
    (pulumi sdk/python/lib/pulumi/provider/server.py ``main``). Yields a ResourceProvider stub."""
    import grpc
    from pulumi.runtime.proto import provider_pb2_grpc

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(installed), sysconfig.get_paths()["purelib"]])
    plugin = subprocess.Popen(
        [sys.executable, str(ROOT / "provider" / "__main__.py"), engine_address],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert plugin.stdout is not None and plugin.stderr is not None
        port = plugin.stdout.readline().decode().strip()
        assert port.isdigit(), plugin.stderr.read().decode()[-2000:]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield provider_pb2_grpc.ResourceProviderStub(channel)
    finally:
        plugin.kill()
        plugin.wait()


PLUGIN_NEEDS_WHEEL = pytest.mark.skipif(
    not HAS_WHEEL, reason="the plugin reads its version from the wheel's dist-info"
)


@PLUGIN_NEEDS_WHEEL
def test_the_plugin_starts_as_the_engine_starts_it_and_serves_the_committed_schema(
    installed: Path, tmp_path: Path
) -> None:
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import provider_pb2

    with _plugin(installed, tmp_path, "127.0.0.1:1") as stub:
        info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=30)
        served = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=120)
    committed = json.loads((ROOT / "provider" / "schema.json").read_text())
    assert json.loads(served.schema) == committed
    assert info.version == committed["version"]


# The marker Pulumi's wire format wraps a secret value in (sdk/python/lib/pulumi/runtime/rpc.py).
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_SIG_KEY = "4dabf18193072939515e22adb298388d"


def _construct(stub: Any, engine: Any, name: str, properties: dict[str, Any], provider_ref: str) -> Any:
    """One Construct request for a DeepSeekService as the engine sends it for a program in another
    language: its properties as a protobuf Struct, the cluster's provider as a reference."""
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import provider_pb2

    inputs = struct_pb2.Struct()
    inputs.update(properties)
    project, stack = engine.project, engine.stack
    return stub.Construct(
        provider_pb2.ConstructRequest(
            project=project,
            stack=stack,
            organization="organization",
            dryRun=True,
            parallel=4,
            monitorEndpoint=engine.address,
            type="deepseek-eks:index:DeepSeekService",
            name=name,
            parent=f"urn:pulumi:{stack}::{project}::pulumi:pulumi:Stack::{project}-{stack}",
            inputs=inputs,
            providers={"kubernetes": provider_ref},
        ),
        timeout=300,
    )


NETWORK = {
    "vpcId": "vpc-0a1b2c3d4e5f60718",
    "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
}


@PLUGIN_NEEDS_WHEEL
def test_the_plugin_constructs_a_service_in_an_existing_cluster_as_another_language_asks(
    installed: Path, tmp_path: Path
) -> None:
    """A Construct request as the engine sends it for a TypeScript or YAML program: camelCase
    properties, a secret API key, and the cluster's Kubernetes provider as a provider reference.
    The service must build in that cluster through that provider, with no VPC or cluster, and the
    key must stay a secret on the wire."""
    from tests.package.engine import FakeEngine

    project, stack = "platform-services", "dev"
    engine = FakeEngine(project, stack)
    provider_ref = engine.existing("pulumi:providers:kubernetes", "platform", "4b1d")
    properties = {
        "existingCluster": {"clusterName": "platform"},
        "network": NETWORK,
        "model": {"variant": "r1-distill-qwen-7b", "maxModelLen": 16384},
        "autoscaling": {"signal": "queue-depth", "maxReplicas": 2},
        "apiKey": {_SIG_KEY: SECRET_SIG, "value": "not-a-real-key"},
    }
    with engine, _plugin(installed, tmp_path, engine.address) as stub:
        reply = _construct(stub, engine, "team-a", properties, provider_ref)
    assert reply.urn == f"urn:pulumi:{stack}::{project}::deepseek-eks:index:DeepSeekService::team-a"
    registered = engine.registrations
    types = [r.type for r in registered]
    assert not [t for t in types if t.startswith(("aws:ec2/vpc:", "aws:eks/cluster:", "eks:"))]
    workloads = [r for r in registered if r.type == "kubernetes:apps/v1:Deployment"]
    assert len(workloads) == 1 and workloads[0].provider == provider_ref
    assert {r.provider for r in registered if r.type.startswith("kubernetes:") and r.custom} == {provider_ref}
    (secret,) = [r for r in registered if r.type == "kubernetes:core/v1:Secret"]
    wire = json.dumps(json.loads(MessageToJson(secret.object)))
    assert SECRET_SIG in wire and "not-a-real-key" in wire  # sent to the engine, marked secret
    outputs = json.loads(MessageToJson(reply.state))
    assert outputs["inClusterUrl"] == "http://vllm.team-a.svc.cluster.local"
    assert outputs["clusterName"] == "platform"


@PLUGIN_NEEDS_WHEEL
def test_the_yaml_examples_services_construct_through_the_plugin(installed: Path, tmp_path: Path) -> None:
    """examples/yaml-existing-cluster as the YAML runtime would send it: each DeepSeekService's
    properties, its ${config} references filled with a stack's values, constructed by the plugin."""
    import re

    import yaml

    from tests.package.engine import FakeEngine

    program = yaml.safe_load((ROOT / "examples" / "yaml-existing-cluster" / "Pulumi.yaml").read_text())
    stack_values = {
        "clusterName": "platform",
        "nodeRoleName": "platform-auto-mode-node",
        "vpcId": NETWORK["vpcId"],
        "privateSubnetIds": NETWORK["privateSubnetIds"],
    }

    def fill(value: Any) -> Any:
        if isinstance(value, str) and (m := re.fullmatch(r"\$\{(\w+)\}", value)):
            return stack_values[m[1]]
        if isinstance(value, str) and (m := re.fullmatch(r"\$\{([\w-]+)\.\w+\}", value)):
            # Another resource's output (team B's generated key): a secret output value.
            urn = f"urn:pulumi:dev::{program['name']}::{program['resources'][m[1]]['type']}::{m[1]}"
            return {**_output("generated-key-stand-in", urn), "secret": True}
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    services = {
        name: fill(resource["properties"])
        for name, resource in program["resources"].items()
        if resource["type"] == "deepseek-eks:index:DeepSeekService"
    }
    engine = FakeEngine(program["name"], "dev")
    provider_ref = engine.existing("pulumi:providers:kubernetes", "existing-cluster", "0c2f")
    with engine, _plugin(installed, tmp_path, engine.address) as stub:
        replies = {name: _construct(stub, engine, name, p, provider_ref) for name, p in services.items()}
    assert set(replies) == {"team-a", "team-b"}
    namespaces = {json.loads(MessageToJson(reply.state))["inferenceNamespace"] for reply in replies.values()}
    assert namespaces == {"team-a", "team-b"}
    types = [r.type for r in engine.registrations]
    assert not [t for t in types if t.startswith(("aws:ec2/vpc:", "aws:eks/cluster:", "eks:"))]
    keys = [
        json.dumps(json.loads(MessageToJson(r.object)))
        for r in engine.registrations
        if r.type == "kubernetes:core/v1:Secret" and "generated-key-stand-in" in MessageToJson(r.object)
    ]
    assert len(keys) == 1 and SECRET_SIG in keys[0]  # team B's key reached its Secret, as a secret


# An Output on the wire: the signature of an output value (sdk/python/lib/pulumi/runtime/rpc.py
# ``_special_output_value_sig``), its value when known and the URNs it depends on.
_OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"


def _output(value: Any, urn: str) -> dict[str, Any]:
    return {_SIG_KEY: _OUTPUT_SIG, "value": value, "dependencies": [urn]}


@PLUGIN_NEEDS_WHEEL
def test_the_plugin_takes_outputs_for_wiring_fields_as_another_language_sends_them(
    installed: Path, tmp_path: Path
) -> None:
    """A TypeScript or YAML program passing another resource's outputs (``vpc.id``, the subnets'
    ids, the node role's name): the engine sends them as output values, which the service must take
    (issue 20 item 1), and their values must reach its resources."""
    from tests.package.engine import FakeEngine

    project, stack = "platform-services", "dev"
    engine = FakeEngine(project, stack)
    provider_ref = engine.existing("pulumi:providers:kubernetes", "platform", "4b1d")
    urn = f"urn:pulumi:{stack}::{project}::aws:ec2/vpc:Vpc::platform"
    subnets = NETWORK["privateSubnetIds"]
    properties = {
        "computeMode": "karpenter",
        "existingCluster": {"clusterName": "platform", "nodeRoleName": _output("karpenter-nodes", urn)},
        "network": {
            "vpcId": _output(NETWORK["vpcId"], urn),
            "privateSubnetIds": [_output(s, urn) for s in subnets],
        },
    }
    with engine, _plugin(installed, tmp_path, engine.address) as stub:
        reply = _construct(stub, engine, "team-a", properties, provider_ref)
    (node_class,) = [
        r for r in engine.registrations if json.loads(MessageToJson(r.object)).get("kind") == "EC2NodeClass"
    ]
    spec = json.loads(MessageToJson(node_class.object))["spec"]
    assert spec["role"] == "karpenter-nodes"
    assert [t["id"] for t in spec["subnetSelectorTerms"]] == subnets
    assert json.loads(MessageToJson(reply.state))["vpcId"] == NETWORK["vpcId"]


def test_typecheck_reports_the_checkouts_paths() -> None:
    """tools/typecheck.py runs mypy over the package as the wheel lays it out; what it reports must
    name the file you edit (sizing/planner.py), not the copy."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from typecheck import checkout_path
    finally:
        sys.path.pop(0)
    assert checkout_path("deepseek_eks/sizing/planner.py") == "sizing/planner.py"
    assert checkout_path("deepseek_eks/components/platform/network.py") == "components/platform/network.py"
    assert checkout_path("deepseek_eks/testing/__init__.py") == "deepseek_eks/testing/__init__.py"
    assert checkout_path("deepseek_eks/console.py") == "deepseek_eks/console.py"
