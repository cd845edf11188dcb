"""examples/typescript-existing-cluster through the real Pulumi engine (issue 24, Tier 1): its npm
dependencies from the registry, our component's Node.js SDK generated from the schema
(``pulumi-sdkgen``) and compiled, the example compiled with ``tsc`` against it, then run as a
Node.js Automation API inline program (tests/engine/typescript_inline.js: the Node.js language
host is not served, and ``@pulumi/pulumi``'s Automation API reaches the CLI with ``--client``
instead). The services are constructed by our provider on PATH, their objects sent to the twin's
kube-apiserver, AWS answered by the stand-ins: preview, up, a no-change preview, destroy."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pulumi
import pytest

from deepseek_eks.automation.stackfile import read_stack
from tests.engine.cluster import local_cluster
from tests.engine.engine import Engine, cache_dir, make_engine, require_binary, standin
from tests.examples import EXISTING
from tests.package.test_packaging import _build_wheel
from twin.providers import component

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "typescript-existing-cluster"
DRIVER = Path(__file__).with_name("typescript_inline.js")
# Where the registry here lacks the example's range, the newest version it serves (2026-12-03:
# `npm view @pulumi/aws versions` ends at 7.48.0; the example asks ^7.51.1, pulumi-aws's PyPI pin).
# The AWS SDK only names resource types here: the stand-in provider answers for them.
FALLBACKS = {"@pulumi/aws": "7.48.0"}


def _skip(reason: str) -> None:
    if os.environ.get("DEEPSEEK_EKS_REQUIRE_ENGINE") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _npm_install(folder: Path, specs: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(folder), *specs],
        capture_output=True,
        text=True,
        timeout=900,
    )


def node_modules() -> Path:
    """The example's dependencies, installed once into the twin cache (keyed by the ranges asked)."""
    if not (shutil.which("node") and shutil.which("npm")):
        _skip("node and npm are needed for the TypeScript example")
    package = json.loads((EXAMPLE / "package.json").read_text())
    wanted = {**package.get("dependencies", {}), **package.get("devDependencies", {})}
    key = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:12]
    folder = cache_dir() / f"node-typescript-example-{key}"
    if not (folder / "node_modules" / ".package-lock.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        done = _npm_install(folder, [f"{name}@{spec}" for name, spec in wanted.items()])
        if done.returncode != 0 and "notarget" in done.stderr:
            specs = [f"{name}@{FALLBACKS.get(name, spec)}" for name, spec in wanted.items()]
            print(f"npm: the example's ranges are not all served; installing {specs}")
            done = _npm_install(folder, specs)
        if done.returncode != 0:
            _skip(f"npm install failed: {done.stderr[-2000:]}")
    return folder / "node_modules"


def typescript_project(root: Path) -> Path:
    """The example compiled by tsc against our generated SDK, in ``root/project``."""
    project = root / "project"
    project.mkdir()
    for name in ("index.ts", "tsconfig.json", "package.json"):
        shutil.copy(EXAMPLE / name, project / name)
    # A hard-linked copy: the SDK goes into it, never into the shared cache.
    subprocess.run(["cp", "-al", str(node_modules()), str(project / "node_modules")], check=True)
    schema = root / "schema.json"
    shutil.copy(ROOT / "provider" / "schema.json", schema)
    sdk = root / "sdk"
    tool = require_binary("pulumi-sdkgen", "PULUMI_VERSION")
    subprocess.run([str(tool), str(schema), "nodejs", str(sdk)], check=True)
    (sdk / "node_modules").symlink_to(project / "node_modules")
    tsc(sdk, project)
    # The package the example imports, placed as `pulumi install` would link it.
    installed = project / "node_modules" / json.loads((sdk / "package.json").read_text())["name"]
    shutil.copytree(sdk / "bin", installed)
    shutil.copy(sdk / "package.json", installed / "package.json")
    tsc(project, project)
    return project


def tsc(folder: Path, project: Path) -> None:
    """``tsc -p folder`` with the example's TypeScript; its errors fail the test."""
    compiler = project / "node_modules" / ".bin" / "tsc"
    done = subprocess.run([str(compiler), "-p", str(folder)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"tsc -p {folder}:\n{done.stdout[-4000:]}"


# A stack in the same backend exporting the network, for an example that reads the VPC and subnets
# through a StackReference (its `networkStack` setting); harmless for one that reads them as config.
NETWORK_PROJECT, NETWORK_STACK = "deepseek-network", "net"


def network_stack(engine: Engine) -> str:
    """Create and deploy the network stack (outputs only, from the Python example's stack file)."""
    python_stack = read_stack("example", EXISTING)

    def program() -> None:
        for key in ("vpcId", "privateSubnetIds"):
            value = python_stack.values[f"{python_stack.project}:{key}"]
            pulumi.export(
                key, json.loads(value) if key == "privateSubnetIds" and isinstance(value, str) else value
            )

    engine.stack(NETWORK_PROJECT, NETWORK_STACK, program).up()
    return f"organization/{NETWORK_PROJECT}/{NETWORK_STACK}"  # the file backend's qualified name


def example_config(project: str, kubeconfig: Path, network: str) -> dict[str, Any]:
    """The example's config: the Python example's cluster and VPC (as config and as the network
    stack), the twin's kubeconfig, an API key."""
    python_stack = read_stack("example", EXISTING)
    config: dict[str, Any] = {
        f"{project}:{key}": {"value": str(python_stack.values[f"{python_stack.project}:{key}"])}
        for key in ("clusterName", "nodeRoleName", "vpcId", "privateSubnetIds")
    }
    config[f"{project}:networkStack"] = {"value": network}
    config[f"{project}:kubeconfig"] = {"value": kubeconfig.read_text(), "secret": True}
    config[f"{project}:apiKey"] = {"value": "twin-api-key-not-a-secret-0001", "secret": True}
    return config


@pytest.mark.timeout(1800)
def test_typescript_example_lifecycle(tmp_path: Path) -> None:
    kubernetes = require_binary("pulumi-resource-kubernetes", "K8S_VERSION")
    engine = make_engine(tmp_path / "engine", {"pulumi-resource-kubernetes": kubernetes})
    project = typescript_project(tmp_path)
    site = tmp_path / "site"
    with zipfile.ZipFile(_build_wheel(tmp_path / "wheel")) as archive:
        archive.extractall(site)
    component.write_launcher(engine.home / "bin", site)
    engine.env[component.CHARTS_ENV] = str(tmp_path / "charts")
    name = "deepseek-typescript"
    with local_cluster(tmp_path) as kubeconfig:
        engine.env[standin.KUBECONFIG_ENV] = str(kubeconfig)
        env = {
            **os.environ,
            **engine.env,
            "ENGINE_HOME": str(engine.home),
            "TS_CONFIG": json.dumps(example_config(name, kubeconfig, network_stack(engine))),
        }
        done = subprocess.run(
            ["node", str(DRIVER), str(project)], env=env, capture_output=True, text=True, timeout=1500
        )
    assert done.returncode == 0, done.stderr[-6000:]
    steps = {d["operation"]: d for d in map(json.loads, done.stdout.splitlines()) if d.get("operation")}
    created = steps["preview"]["changes"]
    assert set(created) == {"create"}, created
    assert steps["up"]["result"] == "succeeded" and steps["up"]["changes"] == created, steps["up"]
    assert steps["up"]["outputs"]["teamAInClusterUrl"].startswith("http"), steps["up"]
    assert set(steps["again"]["changes"]) == {"same"}, steps["again"]
    assert steps["destroy"]["left"] == 0
