"""The one stack reader does what Pulumi does with a stack file (issue 10, items 1-6 and 9):
both config forms, project defaults merged by path, duplicates refused, hostile YAML refused
fast, secrets never echoed. Runs ``python -m automation`` in-process on stack files in tmp dirs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from deepseek_eks.automation.cli import main
from deepseek_eks.automation.stackfile import StackFileError, read_stack
from deepseek_eks.settings import parse_settings

ROOT = Path(__file__).resolve().parents[2]
CIPHERTEXT = "v1:c2VjcmV0LWNpcGhlcnRleHQtdGhhdC1tdXN0LW5ldmVyLWxlYWs="


def project(tmp_path: Path, stack_text: str, name: str = "t") -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / f"Pulumi.{name}.yaml").write_text(stack_text)
    return tmp_path


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--project-dir", str(tmp_path), *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def plan_of(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    code = main(["--project-dir", str(tmp_path), "plan", "--stack", "t", "--json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    return json.loads(out.out)  # --json: one document on stdout, warnings on stderr


# ------------------------------------------------------------------ 1. structured config, merge by path


def test_path_form_wins_over_project_defaults_and_keeps_the_others(tmp_path, capsys) -> None:
    project(tmp_path, "config:\n  deepseek-eks:model:\n    variant: r1-distill-llama-8b\n")
    config = read_stack("t", tmp_path)
    # The engine's merge: the other model.* defaults land inside the same object.
    assert json.loads(config.values["deepseek-eks:model"]) == {
        "variant": "r1-distill-llama-8b",
        "quantization": "auto",
        "kvCacheDtype": "auto",
        "maxModelLen": 32768,
        "minFullLengthSequences": 1,
    }
    plan = plan_of(tmp_path, capsys)
    assert plan["variant"] == "r1-distill-llama-8b" and plan["max_model_len"] == 32768


def test_the_nested_path_form_of_a_list_item_takes_effect(tmp_path) -> None:
    # What `pulumi config set --path 'cluster.publicAccessCidrs[0]' 203.0.113.7/32` writes: the
    # nested form docs/configuration.md names as an equivalent of the flat keys.
    project(tmp_path, "config:\n  deepseek-eks:cluster:\n    publicAccessCidrs:\n      - 203.0.113.7/32\n")
    config = read_stack("t", tmp_path)
    settings = parse_settings(config.values, config.secret_keys, "t")
    assert settings.cluster.public_access_cidrs == ["203.0.113.7/32"]


def test_both_forms_render_alike(tmp_path, capsys) -> None:
    """The README's two `pulumi config set` forms give byte-identical renders."""
    flat = (
        "config:\n  deepseek-eks:model.variant: r1-distill-llama-8b\n"
        "  deepseek-eks:autoscaling.maxReplicas: 5\n"
        "  deepseek-eks:cluster.publicAccessCidrs: [203.0.113.7/32]\n"
    )
    path = (
        "config:\n  deepseek-eks:model:\n    variant: r1-distill-llama-8b\n"
        "  deepseek-eks:autoscaling:\n    maxReplicas: 5\n"
        "  deepseek-eks:cluster:\n    publicAccessCidrs:\n      - 203.0.113.7/32\n"
    )
    renders = []
    for name, text in (("flat", flat), ("path", path)):
        (tmp_path / name).mkdir()
        root = project(tmp_path / name, text)
        code, out = run(root, capsys, "render", "--stack", "t", "--out", str(root / "out"))
        assert code == 0, out
        files = sorted(p for p in (root / "out" / "t").rglob("*") if p.is_file())
        renders.append({str(p.relative_to(root)): p.read_bytes() for p in files})
    assert renders[0] == renders[1]
    plan = json.loads(renders[0]["out/t/plan.json"])
    assert (plan["variant"], plan["max_replicas"]) == ("r1-distill-llama-8b", 5)


def _engine(root: Path) -> tuple[dict, list]:
    config = read_stack("t", root)
    return config.values, config.secret_keys


def test_same_setting_in_both_forms_is_refused(tmp_path, capsys) -> None:
    project(
        tmp_path,
        "config:\n  deepseek-eks:model.variant: r1-671b\n"
        "  deepseek-eks:model:\n    variant: r1-distill-qwen-14b\n",
    )
    code, text = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2
    assert "deepseek-eks:model.variant: also given as deepseek-eks:model (the --path form)" in text


def test_runtime_map_with_both_forms_keeps_the_flat_value_over_a_default_only() -> None:
    """What the engine hands a flat-form stack: the flat key and the defaults object."""
    engine = {
        "deepseek-eks:model.variant": "r1-671b",
        "deepseek-eks:model": '{"variant":"r1-distill-qwen-7b"}',
    }
    assert parse_settings(engine).model.variant.value == "r1-671b"
    engine["deepseek-eks:model"] = '{"variant":"r1-distill-qwen-14b"}'
    with pytest.raises(Exception, match="given twice"):
        parse_settings(engine)


def test_set_override_goes_where_the_stack_has_the_setting(tmp_path, capsys) -> None:
    project(tmp_path, "config:\n  deepseek-eks:model:\n    variant: r1-distill-llama-8b\n")
    plan = plan_of(tmp_path, capsys, "--set", "model.variant=r1-distill-qwen-14b")
    assert plan["variant"] == "r1-distill-qwen-14b"


# ------------------------------------------------------------------------------------ 2. duplicate keys

DUPLICATES = {
    "repeated YAML key": (
        "config:\n  deepseek-eks:autoscaling.maxReplicas: 2\n  deepseek-eks:autoscaling.maxReplicas: 4\n"
    ),
    "bare key": f"config:\n  apiKey: plain\n  deepseek-eks:apiKey:\n    secure: {CIPHERTEXT}\n",
    "old config: form": (
        "config:\n  deepseek-eks:config:computeMode: karpenter\n  deepseek-eks:computeMode: auto-mode\n"
    ),
}


@pytest.mark.parametrize("text", DUPLICATES.values(), ids=DUPLICATES.keys())
def test_duplicate_keys_are_refused(tmp_path, capsys, text: str) -> None:
    project(tmp_path, text)
    code, out = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2, out
    assert "Traceback" not in out and CIPHERTEXT not in out and "plain" not in out


# ----------------------------------------------------------- 3 and 4. misspelt namespaces, secrets echoed


@pytest.mark.parametrize("namespace", ["deepseek_eks", "DeepSeek-EKS", "deepseek-ek", "AWS"])
def test_misspelt_namespace_is_an_error_without_the_value(tmp_path, capsys, namespace: str) -> None:
    project(tmp_path, f"config:\n  {namespace}:apiKey: sk-live-PLAINTEXT-1234\n")
    code, out = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2
    assert f"{namespace}:apiKey: unknown namespace" in out
    assert "sk-live-PLAINTEXT-1234" not in out


@pytest.mark.parametrize(
    "key", ["apikey", "api_key", "hf_token", "grafanaAdminPasword", "model.hfToken", "ApiKey", "apiKey.value"]
)
@pytest.mark.parametrize("secure", [False, True])
def test_misspelt_secret_is_never_echoed(tmp_path, capsys, key: str, secure: bool) -> None:
    value = f"\n    secure: {CIPHERTEXT}" if secure else " sk-live-PLAINTEXT-1234"
    project(tmp_path, f"config:\n  deepseek-eks:{key}:{value}\n")
    code, out = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2
    assert f"deepseek-eks:{key}" in out
    assert "sk-live-PLAINTEXT-1234" not in out and CIPHERTEXT not in out and "c2VjcmV0" not in out


# ---------------------------------------------------------------------------- 5 and 6. hostile input

HOSTILE = {
    "date": ("config:\n  deepseek-eks:model.variant: 2024-01-01\n", "deepseek-eks:model.variant"),
    "binary": ("config:\n  deepseek-eks:model.variant: !!binary aGk=\n", "deepseek-eks:model.variant"),
    "set": (
        "config:\n  deepseek-eks:gpu.instanceFamilies: !!set {g6, g5}\n",
        "deepseek-eks:gpu.instanceFamilies",
    ),
    "config list": ("config:\n  - a\n  - b\n", "config"),
    "config scalar": ("config: 3\n", "config"),
    "non-string key": ("config:\n  1: x\n", "mapping key"),
    "syntax": ("config:\n  a: [b\n", "not valid YAML"),
    "deep": (
        "config:\n  deepseek-eks:gpu.instanceFamilies: " + "[" * 5000 + "]" * 5000 + "\n",
        "nested deeper",
    ),
    "ipv6 vpc": ("config:\n  deepseek-eks:network.vpcCidr: fd00::/16\n", "deepseek-eks:network.vpcCidr"),
    "no prefix": ("config:\n  deepseek-eks:network.vpcCidr: 10.42.0.0\n", "deepseek-eks:network.vpcCidr"),
    "octal": (
        "config:\n  deepseek-eks:autoscaling.maxReplicas: 010\n",
        "deepseek-eks:autoscaling.maxReplicas",
    ),
    "sexagesimal": (
        "config:\n  deepseek-eks:autoscaling.maxReplicas: 1:30\n",
        "deepseek-eks:autoscaling.maxReplicas",
    ),
    "yes": ("config:\n  deepseek-eks:observability.grafana: yes\n", "deepseek-eks:observability.grafana"),
    "environment": ("environment:\n  - my-env\n", "environment"),
    "typo top level": ("confg:\n  deepseek-eks:computeMode: karpenter\n", "did you mean config?"),
}


@pytest.mark.parametrize(("text", "named"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_stack_files_exit_2_naming_the_key(tmp_path, capsys, text: str, named: str) -> None:
    project(tmp_path, text)
    code, out = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2, out
    assert named in out and "Traceback" not in out


def test_alias_bomb_is_refused_fast_and_small(tmp_path, capsys) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    project(tmp_path, "config:\n  deepseek-eks:gpu.instanceFamilies: *a9\n" + "\n".join(lines) + "\n")
    start = time.monotonic()
    code, out = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2 and time.monotonic() - start < 2
    assert len(out) < 2000 and "alias" in out


def test_expanding_aliases_are_bounded(tmp_path) -> None:
    # Few aliases, each doubling: refused by the expansion limit, not by the alias count.
    lines = ["config:", "  x0: &x0 [a, b]"] + [f"  x{i}: &x{i} [*x{i - 1}, *x{i - 1}]" for i in range(1, 16)]
    project(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(StackFileError, match="expand to too many values"):
        read_stack("t", tmp_path)


# ------------------------------------------------------------------------------------ 9. rough edges


def test_render_takes_set(tmp_path, capsys) -> None:
    project(tmp_path, (ROOT / "Pulumi.dev.yaml").read_text())
    out = tmp_path / "out"
    code, text = run(
        tmp_path,
        capsys,
        "render",
        "--stack",
        "t",
        "--out",
        str(out),
        "--set",
        "autoscaling.signal=queue-depth",
    )
    assert code == 0, text
    kinds = {p.name.split("-", 1)[0] for p in (out / "t" / "kubernetes").glob("*.yaml")}
    assert "scaledobject" in kinds and "horizontalpodautoscaler" not in kinds


def test_help_has_no_rst_backticks_and_yes_only_where_it_does_something(capsys) -> None:
    for command in ("render", "plan", "preflight", "preview", "up", "refresh", "destroy", "outputs"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "``" not in text
        assert ("--yes" in text) is (command in ("up", "refresh", "destroy")), command
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out


def test_a_secret_inside_a_group_is_one_error_and_never_shown(tmp_path, capsys) -> None:
    project(tmp_path, f"config:\n  deepseek-eks:model:\n    repository:\n      secure: {CIPHERTEXT}\n")
    code, out = run(tmp_path, capsys, "plan", "--stack", "t")
    assert code == 2 and CIPHERTEXT not in out
    assert "deepseek-eks:model: holds a secret value, but no model.* setting is a secret" in out
    assert out.count("deepseek-eks:") == 1
