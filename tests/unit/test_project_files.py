"""Project files agree with the code: Pulumi.yaml mirrors the Settings defaults, and every stack
file in the repo is valid and sizes to a feasible plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from deepseek_eks.automation.stackfile import read_stack, stack_names
from deepseek_eks.components import size
from deepseek_eks.settings import known_keys, parse_settings
from deepseek_eks.settings.model import _GROUPS as SETTINGS_GROUPS

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILE = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())


def code_defaults() -> dict[str, object]:
    s = parse_settings({})
    out: dict[str, object] = {"computeMode": s.compute_mode.value, "kubernetesVersion": s.kubernetes_version}
    for group in SETTINGS_GROUPS:
        for key, value in getattr(s, group).model_dump(mode="json", by_alias=True).items():
            out[f"{group}.{key}"] = value
    return out


# A declared key without a default is one Pulumi requires in every stack, so optional keys with
# no default stay undeclared (and are listed in Pulumi.yaml's comment and the README).
OPTIONAL_WITHOUT_DEFAULT = {
    "model.repository",
    "network.vpcId",
    "endpoint.certificateArn",
    "endpoint.hostname",
    "endpoint.hostedZoneId",
    "endpoint.drainSeconds",
    "weights.snapshotId",
    "image.registry",
    "cluster.secretsKmsKeyArn",
    "weights.kmsKeyArn",
    "autoscaling.schedule",
    "endpoint.accessLogsDays",
    "hfToken",
    "apiKey",
    "grafanaAdminPassword",
}


def test_project_file_declares_every_setting_that_has_a_default() -> None:
    assert set(PROJECT_FILE["config"]) == set(known_keys()) - OPTIONAL_WITHOUT_DEFAULT
    for key in OPTIONAL_WITHOUT_DEFAULT:
        assert key in (ROOT / "Pulumi.yaml").read_text(), f"{key} should be named in the comment"


@pytest.mark.parametrize("key", sorted(set(code_defaults()) - OPTIONAL_WITHOUT_DEFAULT))
def test_project_file_defaults_mirror_the_code(key: str) -> None:
    declared = PROJECT_FILE["config"][key]
    assert declared.get("description")
    default = code_defaults()[key]
    if isinstance(default, float):  # declared as strings: project config has no number type
        assert declared["type"] == "string" and float(declared["default"]) == default
    else:
        assert declared["default"] == default


def test_project_defaults_parse_to_the_code_defaults() -> None:
    from deepseek_eks.automation.stackfile import project_defaults

    values = {k: v if isinstance(v, str) else json.dumps(v) for k, v in project_defaults().items()}
    assert parse_settings(values) == parse_settings({})


def test_optional_keys_have_no_code_default() -> None:
    assert code_defaults()["model.repository"] is None
    for key in OPTIONAL_WITHOUT_DEFAULT - {"hfToken", "apiKey", "grafanaAdminPassword"}:
        assert code_defaults()[key] is None, key
    s = parse_settings({})
    assert s.hf_token is None and s.api_key is None


def test_runtime_is_python_with_pip_and_venv() -> None:
    assert PROJECT_FILE["name"] == "deepseek-eks"
    assert PROJECT_FILE["runtime"] == {
        "name": "python",
        "options": {"toolchain": "pip", "virtualenv": ".venv"},
    }


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_file_is_valid_and_feasible(stack: str) -> None:
    config = read_stack(stack)
    settings = parse_settings(config.values, config.secret_keys, stack)
    assert size(settings).feasible


def test_dev_and_prod_are_what_design_describes() -> None:
    """DESIGN.md's stacks, but for the signal: issue 34 has the example stacks take the default
    the simulator chose (docs/autoscaling-simulation.md), the concurrency signal with the seasonal
    floor, where DESIGN still names the earlier choices (GPU utilization, combined)."""
    dev = read_stack("dev")
    prod = read_stack("prod")
    d = parse_settings(dev.values, dev.secret_keys, "dev")
    p = parse_settings(prod.values, prod.secret_keys, "prod")
    assert d.compute_mode.value == "auto-mode"
    assert d.gpu.instance_families == ["g6", "g5"]
    assert (p.compute_mode.value, p.model.variant.value) == ("karpenter", "r1-distill-llama-70b")
    for chosen in (d, p):
        assert (chosen.autoscaling.signal.value, chosen.autoscaling.seasonal) == ("concurrency", True)
    assert [c.value for c in p.gpu.capacity_types] == ["spot", "on-demand"]
