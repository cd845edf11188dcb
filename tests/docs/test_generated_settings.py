"""A setting is declared once (settings/model.py) and the files made from that declaration follow
by regeneration: tools/generate_settings.py writes the component's args types
(components/service_args.py) and Pulumi.yaml's config block; tools/generate_schema.py and
tools/generate_docs.py take the schema and the configuration reference from those and the model.
A declaration changed without regenerating fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import Field

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import generate_settings  # noqa: E402

from deepseek_eks.settings.model import _GROUPS, Boolean, ObservabilitySettings  # noqa: E402


def test_the_generated_settings_files_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_settings.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_fails_on_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "service_args.py"
    stale.write_text(generate_settings.args_module().replace("Context window in tokens", "Window"))
    monkeypatch.setattr(generate_settings, "ARGS_FILE", stale)
    assert generate_settings.main(["--check"]) == 1


def test_a_setting_declared_once_reaches_args_and_project_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One new field in the model, nothing else: both generated files carry it, typed and described."""

    class WithNewSetting(ObservabilitySettings):
        tracing: Boolean = Field(False, description="Export OpenTelemetry traces of each request.")

    monkeypatch.setitem(_GROUPS, "observability", WithNewSetting)
    monkeypatch.setitem(generate_settings.ARGS_NAMES, WithNewSetting, "ObservabilityArgs")
    monkeypatch.setattr(generate_settings, "known_keys", lambda: [*_known(), "observability.tracing"])

    args = generate_settings.args_module()
    assert '    tracing: bool\n    """Export OpenTelemetry traces of each request."""' in args
    config = yaml.safe_load(generate_settings.project_config())["config"]
    assert config["observability.tracing"] == {
        "type": "boolean",
        "description": "Export OpenTelemetry traces of each request.",
        "default": False,
    }


def _known() -> list[str]:
    from deepseek_eks.settings.model import known_keys

    return known_keys()


def test_every_declared_setting_has_one_description_everywhere() -> None:
    """The args' docstring and Pulumi.yaml's description of a setting are the model's, word for word."""
    config = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    args = (ROOT / "components" / "service_args.py").read_text()
    for group, model in _GROUPS.items():
        for name, field in model.model_fields.items():
            assert field.description, f"{group}.{field.alias} has no description in settings/model.py"
            declared = config.get(f"{group}.{field.alias}")
            if declared is not None:
                assert declared["description"] == field.description
            assert f'"""{field.description}"""' in args, f"{group}.{name}"
