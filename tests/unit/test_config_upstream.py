"""The stack reader and settings against what Pulumi itself does: facts read from the Pulumi
engine's and yaml.v3's source (reference/upstream/pulumi-config), and the installed Pulumi SDK
and AWS provider package."""

from __future__ import annotations

import pytest

from deepseek_eks.automation.stackfile import parse_key
from deepseek_eks.settings import parse_settings, safe_yaml
from deepseek_eks.settings.model import AWS_KEYS, MAX_REPLICAS, SettingsError, _boolean
from tests.upstream import pulumi_config_facts

FACTS = pulumi_config_facts()


def test_key_forms_are_pulumis() -> None:
    forms = FACTS["config_key_forms"]
    for key in forms["accepted"]:
        namespace, name = parse_key(key)
        assert key.startswith(namespace) and key.endswith(name)
    for key in forms["refused"]:
        with pytest.raises(ValueError):
            parse_key(key)


def test_core_schema_booleans_and_nulls_are_yaml_v3s() -> None:
    core = FACTS["yaml_v3_core_schema"]
    for text in core["bools_true"]:
        assert safe_yaml.load(f"a: {text}", "t") == {"a": True}
    for text in core["bools_false"]:
        assert safe_yaml.load(f"a: {text}", "t") == {"a": False}
    for text in core["nulls"]:
        assert safe_yaml.load(f"a: {text}", "t") == {"a": None}


def test_every_number_yaml_v3_reads_otherwise_than_decimal_is_refused() -> None:
    for text, yaml_v3_value in FACTS["yaml_v3_numbers"]["decoded_as"].items():
        looks_like = text.replace("_", "")
        if looks_like.isdigit() and int(looks_like) == yaml_v3_value:
            continue  # reads as it looks: nothing to refuse
        with pytest.raises(safe_yaml.YamlError):
            safe_yaml.load(f"a: {text}", "t")
        assert safe_yaml.load(f"a: '{text}'", "t") == {"a": text}  # quoted: the text as written


def test_sexagesimal_and_timestamps_are_refused_not_guessed() -> None:
    assert FACTS["yaml_v3_numbers"]["sexagesimal_supported"] is False  # PyYAML would make 90
    with pytest.raises(safe_yaml.YamlError):
        safe_yaml.load("a: 1:30", "t")
    for text, pulumi_text in FACTS["pulumi_timestamp_to_program"]["example"].items():
        assert pulumi_text != text  # Pulumi would hand the program other text than written
        with pytest.raises(safe_yaml.YamlError):
            safe_yaml.load(f"a: {text}", "t")


def test_duplicate_keys_are_an_error_as_in_yaml_v3() -> None:
    assert "already defined" in FACTS["yaml_v3_duplicate_keys"]["error"]
    with pytest.raises(safe_yaml.YamlError, match="given twice"):
        safe_yaml.load("a: 1\na: 2\n", "t")


def test_booleans_are_what_the_pulumi_python_sdk_accepts() -> None:
    """Behaviour of the installed SDK's ``Config.get_bool`` on the same text."""
    import pulumi
    from pulumi.runtime import set_all_config

    for text in ("true", "True", "TRUE", "false", "False", "yes", "on", "1", "t", "y"):
        set_all_config({"p:flag": text}, [])
        try:
            sdk: bool | None = pulumi.Config("p").get_bool("flag")
        except pulumi.ConfigTypeError:
            sdk = None
        finally:
            set_all_config({}, [])
        try:
            ours: bool | None = _boolean(text)
        except ValueError:
            ours = None
        assert ours == sdk, text


def test_honoured_aws_keys_are_the_providers_config_keys() -> None:
    """Every aws:* key the settings accept is one the installed pulumi-aws provider reads."""
    from pathlib import Path

    import pulumi_aws

    source = (Path(pulumi_aws.__file__).parent / "config" / "vars.py").read_text()
    for key in AWS_KEYS:
        assert f"__config__.get('{key}')" in source or f'__config__.get("{key}")' in source, key


def test_replica_bound_is_kubernetes_node_limit() -> None:
    assert FACTS["kubernetes_max_nodes_per_cluster"]["value"] == MAX_REPLICAS
    with pytest.raises(SettingsError):
        parse_settings({"deepseek-eks:autoscaling.maxReplicas": str(MAX_REPLICAS + 1)})
