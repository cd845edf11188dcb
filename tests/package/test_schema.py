"""provider/schema.json is what Pulumi's analyzer infers from DeepSeekService's typed args today,
and it describes every setting (the other languages see all of them, with their types)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.settings import PROJECT, SettingsError, parse_settings
from deepseek_eks.settings.model import _GROUPS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from generate_schema import SCHEMA, schema  # noqa: E402

sys.path.pop(0)

COMMITTED = json.loads(SCHEMA.read_text())
SERVICE = COMMITTED["resources"]["deepseek-eks:index:DeepSeekService"]


def test_committed_schema_matches_the_analyzer() -> None:
    assert schema() == COMMITTED, "provider/schema.json is stale: run python tools/generate_schema.py"


def test_schema_names_the_component_and_the_plugin() -> None:
    plugin = yaml.safe_load((ROOT / "provider" / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["name"] == "python"
    assert COMMITTED["name"] == "deepseek-eks"
    assert SERVICE["isComponent"] is True


def test_every_settings_group_is_an_input_with_every_field() -> None:
    for group, model in _GROUPS.items():
        ref = SERVICE["inputProperties"][group]["$ref"]
        type_ = COMMITTED["types"][ref.removeprefix("#/types/")]
        assert set(type_["properties"]) == {f.alias for f in model.model_fields.values()}, group


def test_typed_inputs_and_outputs() -> None:
    inputs = SERVICE["inputProperties"]
    assert inputs["computeMode"]["$ref"] == "#/types/deepseek-eks:index:ComputeMode"
    assert inputs["kubernetesVersion"]["type"] == "string"
    model = COMMITTED["types"]["deepseek-eks:index:ModelArgs"]["properties"]
    assert model["maxModelLen"]["type"] == "integer"
    families = COMMITTED["types"]["deepseek-eks:index:GpuArgs"]["properties"]["instanceFamilies"]
    assert (families["type"], families["items"]["$ref"]) == ("array", "#/types/deepseek-eks:index:GpuFamily")
    assert SERVICE["properties"]["endpointUrl"]["type"] == "string"
    assert SERVICE["properties"]["hourlyUsdAtMax"]["type"] == "number"
    assert SERVICE["requiredInputs"] == []


# provider/__main__.py itself is started as the engine starts a plugin, and its served schema
# compared with this one, in tests/package/test_packaging.py.


def _properties() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, name, spec) of every input, output and type property of the schema."""
    for where, props in (("inputs", SERVICE["inputProperties"]), ("outputs", SERVICE["properties"])):
        for name, spec in props.items():
            yield where, name, spec
    for token, type_ in COMMITTED["types"].items():
        for name, spec in type_.get("properties", {}).items():
            yield token, name, spec


def test_every_property_has_a_description() -> None:
    missing = [f"{where}.{name}" for where, name, spec in _properties() if not spec.get("description")]
    assert not missing


def _setting_keys() -> Iterator[tuple[str, dict[str, Any]]]:
    """(config key, schema property) of every setting the schema has: top-level and grouped."""
    inputs = SERVICE["inputProperties"]
    for name in ("computeMode", "kubernetesVersion"):
        yield name, inputs[name]
    for group in _GROUPS:
        type_ = COMMITTED["types"][inputs[group]["$ref"].removeprefix("#/types/")]
        for name, spec in type_["properties"].items():
            yield f"{group}.{name}", spec


def _enum(spec: dict[str, Any]) -> list[str] | None:
    ref = (spec.get("items") or spec).get("$ref", "")
    type_ = COMMITTED["types"].get(ref.removeprefix("#/types/"), {})
    return [e["value"] for e in type_["enum"]] if "enum" in type_ else None


def _problem_keys(key: str, value: Any, companions: dict[str, Any] | None = None) -> set[str]:
    try:
        parse_settings({f"{PROJECT}:{key}": value, **(companions or {})})
    except SettingsError as error:
        return {p.key.split("[")[0] for p in error.problems}
    return set()


def test_each_enum_is_the_closed_set_the_settings_accept() -> None:
    """Every value of an enum passes the settings validator, and a value outside it does not."""
    enums = {key: (values, spec) for key, spec in _setting_keys() if (values := _enum(spec)) is not None}
    assert {"computeMode", "model.variant", "gpu.instanceFamilies", "weights.source"} <= set(enums)
    # Values that need a companion setting to be valid (settings/exposure.py): an NLB serves keyless;
    # the router's queue needs the router.
    companions = {
        ("endpoint.loadBalancer", "nlb"): {f"{PROJECT}:endpoint.auth": "none"},
        ("autoscaling.signal", "router-queue"): {f"{PROJECT}:routing.kind": "llm-d"},
    }
    for key, (values, spec) in enums.items():
        wrap = (lambda v: [v]) if spec.get("type") == "array" else (lambda v: v)
        for value in values:
            found = _problem_keys(key, wrap(value), companions.get((key, str(value)), {}))
            assert f"{PROJECT}:{key}" not in found, (key, value)
        assert f"{PROJECT}:{key}" in _problem_keys(key, wrap("not-a-value")), key


def test_each_default_is_the_one_the_settings_apply() -> None:
    settings = parse_settings({})
    defaults = {key: spec["default"] for key, spec in _setting_keys() if "default" in spec}
    assert len(defaults) > 20
    for key, default in defaults.items():
        value: Any = settings
        for part in key.split("."):
            value = getattr(value, "".join(f"_{c.lower()}" if c.isupper() else c for c in part))
        assert getattr(value, "value", value) == default, key


# Resource and property names a TypeScript program uses: `new deepseek.X(`, `key:` inside the args.
_TS_RESOURCE = re.compile(r"new deepseek\.(\w+)\(\s*\"[^\"]+\",\s*\{(.*?)\n\}, \{ providers \}\);", re.S)
_TS_KEY = re.compile(r"(\w+):")
_TS_OUTPUT = re.compile(r"= team\w+\.(\w+);")
_TS_SHARED = re.compile(r"const clusterWiring = \{(.*?)\n\};", re.S)  # spread into both


def test_the_typescript_example_uses_only_what_the_schema_has() -> None:
    source = (ROOT / "examples" / "typescript-existing-cluster" / "index.ts").read_text()
    (shared,) = _TS_SHARED.findall(source)
    services = [(resource, body + shared) for resource, body in _TS_RESOURCE.findall(source)]
    assert len(services) == 2
    known = set(SERVICE["inputProperties"])
    for type_ in COMMITTED["types"].values():
        known |= set(type_.get("properties", {}))
    for resource, body in services:
        assert f"{PROJECT}:index:{resource}" in COMMITTED["resources"]
        used = set(_TS_KEY.findall(body))
        assert used and used <= known, used - known
        # String values of enum-typed properties are values of that enum.
        for key, spec in _setting_keys():
            values = _enum(spec)
            name = key.rsplit(".", 1)[-1]
            for literal in re.findall(rf"\b{name}: (\[?\"[^\n]*?)[,}}]", body) if values else []:
                for value in re.findall(r"\"([^\"]+)\"", literal):
                    assert value in values, (key, value)
    outputs = _TS_OUTPUT.findall(source)
    assert outputs and set(outputs) <= set(SERVICE["properties"])


_TS_GIVEN_AN_OUTPUT = re.compile(r"(\w+): [^,\n]*\bas pulumi\.Output<")


def test_the_typescript_example_passes_outputs_only_where_the_schema_takes_inputs() -> None:
    """A generated TypeScript SDK types a ``plain`` property as the bare value, so an Output there
    would not compile: each property the example gives an Output is an Input in the schema (for
    a list: the list and its items)."""
    source = (ROOT / "examples" / "typescript-existing-cluster" / "index.ts").read_text()
    given = set(_TS_GIVEN_AN_OUTPUT.findall(source))
    assert given == {"vpcId", "privateSubnetIds"}
    network = COMMITTED["types"][f"{PROJECT}:index:NetworkArgs"]["properties"]
    for name in given:
        assert not network[name].get("plain"), name
        assert not network[name].get("items", {}).get("plain"), name


def test_the_examples_name_the_package_they_use() -> None:
    for example in ("yaml-existing-cluster", "typescript-existing-cluster"):
        project = yaml.safe_load((ROOT / "examples" / example / "Pulumi.yaml").read_text())
        assert (ROOT / "examples" / example / project["packages"][PROJECT] / "PulumiPlugin.yaml").is_file()
