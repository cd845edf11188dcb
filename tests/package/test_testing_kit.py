"""deepseek_eks.testing: a user's program runs offline under the project's own mocks; the
example of docs/component.md runs as written; plain ``set_mocks`` with echoing mocks gets a clear
error, not a TypeError."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pulumi
import pytest

from deepseek_eks import DeepSeekService
from deepseek_eks.testing import Mocks, run
from deepseek_eks.testing.mocks import RecordingMocks, run_with_mocks

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "component.md"
HEADING = "## Test your own program offline"


def readme_example() -> str:
    """The first Python code block of that section of the component page."""
    text = DOC.read_text()
    section = text[text.index(HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python code block under {HEADING!r}"
    return match[1]


def test_the_documented_example_runs_as_written() -> None:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(readme_example(), str(DOC), "exec"), namespace)
    tests = [value for key, value in namespace.items() if key.startswith("test_") and callable(value)]
    assert tests
    for test in tests:
        test()


def test_run_returns_the_recorded_resources_with_their_provider() -> None:
    def program() -> None:
        DeepSeekService("chat", {})

    resources = run(program, config={"aws:region": "eu-west-1"}, stack="staging")
    made = [r for r in resources if r.type.startswith("aws:ec2/")]
    assert made and all(r.provider == "" for r in made)  # the program's default provider
    (service,) = [r for r in resources if r.type == "deepseek-eks:index:DeepSeekService"]
    assert service.name == "chat"
    # The mocks answered for the program's region: its zones, in its subnets' inputs.
    zones = {r.inputs.get("availabilityZone") for r in resources if r.type == "aws:ec2/subnet:Subnet"}
    assert zones and all(str(z).startswith("eu-west-1") for z in zones)


def test_config_keys_of_the_project_and_structured_values() -> None:
    seen: dict[str, Any] = {}

    def program() -> None:
        seen["families"] = pulumi.Config().require_object("families")
        seen["region"] = pulumi.Config("aws").require("region")

    run(program, project="mine", config={"families": ["g6"], "aws:region": "eu-west-1"})
    assert seen == {"families": ["g6"], "region": "eu-west-1"}


def test_mocks_is_a_pulumi_mocks_that_fails_loudly_on_an_unknown_type() -> None:
    assert issubclass(Mocks, pulumi.runtime.Mocks)

    def program() -> None:
        pulumi.CustomResource("acme:index:Widget", "w", {})

    with pytest.raises(Exception, match="no mock for resource type 'acme:index:Widget'") as raised:
        run(program)
    # What a user of the installed package can do: subclass the kit's Mocks, not edit its files.
    assert "subclass of deepseek_eks.testing.Mocks" in str(raised.value)
    assert "deepseek_eks/testing/mocks.py" not in str(raised.value)


class EchoMocks(pulumi.runtime.Mocks):
    """What a user writes first: echo the inputs, answer invokes with nothing."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


def test_plain_set_mocks_with_echoing_mocks_gets_a_clear_error() -> None:
    def program() -> dict[str, Any]:
        DeepSeekService("chat", {"region": "us-east-1"})
        return {}

    with pytest.raises(Exception) as error:
        run_with_mocks(program, EchoMocks(), project="p", stack="dev", config={}, secret_keys=[])  # type: ignore[arg-type]
    text = str(error.value)
    assert "DeepSeekService 'chat'" in text and "set_mocks(EchoMocks())" in text
    assert "deepseek_eks.testing.Mocks" in text
    assert "NoneType" not in text


def test_the_projects_own_mocks_are_accepted() -> None:
    def program() -> dict[str, Any]:
        DeepSeekService("chat", {"region": "us-east-1"})
        return {}

    mocks = RecordingMocks()
    run_with_mocks(program, mocks, project="p", stack="dev", config={}, secret_keys=[])
    assert mocks.resources
