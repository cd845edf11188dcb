"""`python -m automation render|plan` as users run it: layout, stability, masking, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.automation.stackfile import stack_names
from tests.conftest import stack_config

ROOT = Path(__file__).resolve().parents[2]


def automation(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "automation", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_render_writes_the_design_layout_and_is_byte_identical(tmp_path: Path) -> None:
    proc = automation("render", "--stack", "dev", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "dev"
    assert (root / "plan.json").is_file() and (root / "aws.json").is_file()
    assert (root / "helm").is_dir()
    files = sorted(p.name for p in (root / "kubernetes").glob("*.yaml"))
    assert {"namespace-cluster-deepseek.yaml", "nodepool-cluster-gpu-inference.yaml"} <= set(files)
    for f in files:  # one object per file
        assert len(list(yaml.safe_load_all((root / "kubernetes" / f).read_text()))) == 1
    plan = json.loads((root / "plan.json").read_text())
    assert plan["variant"] == "r1-distill-qwen-7b" and plan["feasible"] is True
    assert plan["stack_hourly_usd_at_max"] > plan["hourly_usd_at_max"]  # GPU nodes plus the rest
    assert "instance type  g6.xlarge" in proc.stdout and "stack cost     $" in proc.stdout
    assert f"rendered       {len(files)} Kubernetes objects (" in proc.stdout
    first = snapshot(root)
    assert automation("render", "--stack", "dev", "--out", str(tmp_path)).returncode == 0
    assert snapshot(root) == first


def test_default_output_folder(tmp_path: Path) -> None:
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "automation", "render", "--stack", "dev"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "build" / "rendered" / "dev" / "plan.json").is_file()


def test_secrets_never_reach_the_render(tmp_path: Path) -> None:
    config = stack_config("dev", secrets={"hfToken": "hf_TOKEN_0123456789", "apiKey": "sk-KEY-abcdef"})
    root = write(render(config), tmp_path)
    text = "\n".join(p.read_text() for p in root.rglob("*") if p.is_file())
    assert "hf_TOKEN_0123456789" not in text and "sk-KEY-abcdef" not in text
    secret = yaml.safe_load((root / "kubernetes" / "secret-deepseek-hf-token.yaml").read_text())
    assert secret["stringData"] == {"token": "[secret]"}


def test_plan_command(tmp_path: Path) -> None:
    proc = automation("plan", "--stack", "prod", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["variant"] == "r1-distill-llama-70b" and plan["max_replicas"] == 4
    human = automation("plan", "--stack", "prod")
    assert "g6e.12xlarge: 4x L40S, TP 4 PP 1" in human.stdout


def test_three_invalid_values_give_one_error_listing_all(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.broken.yaml").write_text(
        "config:\n"
        "  deepseek-eks:model.variant: r1-distill-qwen-3b\n"
        "  deepseek-eks:gpu.instanceFamilies: [g4]\n"
        "  deepseek-eks:autoscaling.minReplicas: 0\n"
    )
    proc = automation("--project-dir", str(tmp_path), "render", "--stack", "broken", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "error: 3 invalid setting(s) of stack 'broken':"
    assert any("deepseek-eks:model.variant" in line for line in lines)
    assert any("did you mean g4dn?" in line for line in lines)
    assert any("deepseek-eks:autoscaling.minReplicas = 0" in line for line in lines)


def test_infeasible_stack_exits_nonzero_with_reasons(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.tiny.yaml").write_text(
        "config:\n"
        "  deepseek-eks:model.variant: r1-distill-llama-70b\n"
        "  deepseek-eks:gpu.instanceFamilies: [g4dn]\n"
    )
    proc = automation("--project-dir", str(tmp_path), "render", "--stack", "tiny", "--out", str(tmp_path))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "No feasible plan for r1-distill-llama-70b:" in proc.stderr
    assert "g4dn: g4dn.metal (8x T4): 16.4 GiB of weights" in proc.stderr  # float16 on T4, too big
    assert not (tmp_path / "tiny").exists()


def test_unknown_stack_names_the_known_ones() -> None:
    proc = automation("render", "--stack", "no-such-stack")
    assert proc.returncode == 2
    known = ", ".join(stack_names())  # whatever stack files the checkout has, users' own included
    assert f"Pulumi.no-such-stack.yaml: no such stack file (stacks here: {known})" in proc.stderr
