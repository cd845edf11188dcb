"""examples/yaml-existing-cluster through the real Pulumi YAML language host (pulumi-yaml, built by
twin/build-engine.sh), the real engine and our component provider (twin/providers/component.py on
PATH as pulumi-resource-deepseek-eks): two DeepSeekService components constructed from YAML, their
Kubernetes objects sent by the real Kubernetes provider to the real kube-apiserver of Tier 0, AWS
answered by the stand-ins. preview (a fresh stack), up, a no-change preview, destroy."""

from __future__ import annotations

import contextlib
import json
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from deepseek_eks.automation.stackfile import read_stack
from tests.engine.cluster import local_cluster
from tests.engine.engine import changes, make_engine, require_binary, standin
from tests.examples import EXISTING
from tests.package.test_packaging import _build_wheel
from twin.providers import component

ROOT = Path(__file__).resolve().parents[2]
YAML_EXAMPLE = ROOT / "examples" / "yaml-existing-cluster"
COMPONENT = "deepseek-eks:index:DeepSeekService"


# What the real programs require of the example, each found by running them (the example is kept
# to both; tests/engine/test_twin_facts.py checks it against the facts):
# - the CLI validates Pulumi.yaml's `config:` block against its project schema, whose config types
#   are string, integer, boolean, array, object (pulumi sdk/v3 v3.274.0
#   go/common/workspace/project.json, $defs/simpleConfigType); `String` / `List<String>` are refused;
# - pulumi-yaml takes the `providers` resource option as a list of resources (pulumi-yaml v1.25.0
#   pkg/pulumiyaml/run.go evaluateResourceListValuedOption: "resource option providers value must be
#   a list of resources"); a {package: provider} map is refused.


def installed_package(target: Path) -> Path:
    """This checkout's wheel unpacked into ``target`` (a wheel is installed by unpacking it)."""
    wheel = _build_wheel(target.parent / "wheel")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def yaml_project(folder: Path) -> Path:
    """The YAML example less its ``packages:`` block: that block makes the CLI install the plugin
    from ../../provider, which runs it with the Python language host (not served here); without it
    the engine finds ``pulumi-resource-deepseek-eks`` on PATH, the same provider."""
    program = yaml.safe_load((YAML_EXAMPLE / "Pulumi.yaml").read_text())
    assert "deepseek-eks" in program.get("packages", {}), "the example no longer declares the package"
    del program["packages"]
    folder.mkdir(parents=True)
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump(program, sort_keys=False))
    return folder


def example_settings(project: str) -> dict[str, auto.ConfigValue]:
    """The YAML program's config, from the Python example's stack file (the same cluster and VPC),
    as ``--path`` keys: a list is typed ``array<string>`` in the stack, not a JSON string."""
    python_stack = read_stack("example", EXISTING)
    values = {"aws:region": python_stack.values["aws:region"]}
    for key in ("clusterName", "nodeRoleName", "vpcId"):
        values[f"{project}:{key}"] = python_stack.values[f"{python_stack.project}:{key}"]
    subnets = python_stack.values[f"{python_stack.project}:privateSubnetIds"]
    for i, subnet in enumerate(json.loads(subnets) if isinstance(subnets, str) else subnets):
        values[f"{project}:privateSubnetIds[{i}]"] = subnet
    return {key: auto.ConfigValue(str(value)) for key, value in values.items()}


@contextlib.contextmanager
def yaml_stack_on_twin(home: Path) -> Iterator[Any]:
    """The YAML example (``yaml_project``) as a stack on a fresh twin: the YAML host and our
    provider on the engine's PATH, the example's settings, the twin's kubeconfig."""
    language_host = require_binary("pulumi-language-yaml", "YAML_VERSION")
    kubernetes = require_binary("pulumi-resource-kubernetes", "K8S_VERSION")
    engine = make_engine(
        home / "engine",
        {"pulumi-language-yaml": language_host, "pulumi-resource-kubernetes": kubernetes},
    )
    component.write_launcher(home / "engine" / "bin", installed_package(home / "site"))
    engine.env[component.CHARTS_ENV] = str(home / "charts")
    project_dir = yaml_project(home / "project")
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())["name"]
    with local_cluster(home) as kubeconfig:
        engine.env[standin.KUBECONFIG_ENV] = str(kubeconfig)
        stack = engine.local_stack("example", project_dir)
        stack.set_all_config(example_settings(project), path=True)
        stack.set_config(f"{project}:kubeconfig", auto.ConfigValue(kubeconfig.read_text(), secret=True))
        yield stack


@pytest.mark.timeout(1200)  # one engine process per operation, each starting every plugin
def test_yaml_example_lifecycle(tmp_path: Path) -> None:
    started = time.monotonic()
    with yaml_stack_on_twin(tmp_path) as stack:
        fresh = stack.preview()
        assert set(changes(fresh)) == {"create"}, fresh.stdout
        up = stack.up()
        assert up.summary.result == "succeeded", up.stdout
        assert changes(up) == changes(fresh)  # the preview announced exactly what up did
        resources = stack.export_stack().deployment["resources"]
        services = [r for r in resources if r["type"] == COMPONENT]
        assert sorted(r["urn"].rsplit("::", 1)[-1] for r in services) == ["team-a", "team-b"]
        # The components' own objects (their URNs name the component type as an ancestor) reached
        # the real API server through the real Kubernetes provider.
        inside = {r["type"] for r in resources if f"{COMPONENT}$" in r["urn"]}
        assert "kubernetes:apps/v1:Deployment" in inside, sorted(inside)
        assert up.outputs["teamAInClusterUrl"].value.startswith("http://"), up.outputs
        again = stack.preview(expect_no_changes=True)
        assert not changes(again), again.stdout
        stack.destroy()
        assert not stack.export_stack().deployment.get("resources")
    print(f"YAML example lifecycle through the engine: {time.monotonic() - started:.0f}s")
