"""provider/schema.json is what Pulumi's analyzer infers from DeepSeekService's typed args today,
and it describes every setting (the other languages see all of them, with their types)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

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
    assert inputs["computeMode"]["type"] == "string"
    model = COMMITTED["types"]["deepseek-eks:index:ModelArgs"]["properties"]
    assert model["maxModelLen"]["type"] == "integer"
    families = COMMITTED["types"]["deepseek-eks:index:GpuArgs"]["properties"]["instanceFamilies"]
    assert (families["type"], families["items"]["type"]) == ("array", "string")
    assert SERVICE["properties"]["endpointUrl"]["type"] == "string"
    assert SERVICE["properties"]["hourlyUsdAtMax"]["type"] == "number"
    assert SERVICE["requiredInputs"] == []


# provider/__main__.py itself is started as the engine starts a plugin, and its served schema
# compared with this one, in tests/package/test_packaging.py.
