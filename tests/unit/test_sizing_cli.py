"""`python -m sizing` as users run it: exit codes and the JSON contract of DESIGN.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def sizing(*args: str) -> tuple[int, dict | str]:
    proc = subprocess.run([sys.executable, "-m", "sizing", *args], capture_output=True, text=True, timeout=60)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc.returncode, proc.stdout + proc.stderr


def test_infeasible_70b_on_g4dn_exits_nonzero_with_reasons_and_suggestions() -> None:
    rc, out = sizing("--variant", "r1-distill-llama-70b", "--families", "g4dn", "--json")
    assert rc != 0
    assert isinstance(out, dict)
    assert out["feasible"] is False
    assert [r.split(":")[0] for r in out["reasons"]] == ["g4dn"]
    assert any(s.startswith("set model.quantization=awq-int4") for s in out["suggestions"])
    assert any(s.startswith("add g6e to gpu.instanceFamilies") for s in out["suggestions"])


def test_one_reason_per_requested_family() -> None:
    rc, out = sizing("--variant", "r1-671b", "--families", "g4dn,g5,p4d", "--json")
    assert rc == 1 and isinstance(out, dict)
    assert [r.split(":")[0] for r in out["reasons"]] == ["g4dn", "g5", "p4d"]


def test_g5_plan_avoids_four_a10g_types() -> None:
    rc, out = sizing("--variant", "r1-distill-llama-70b", "--families", "g5", "--json")
    assert rc == 0 and isinstance(out, dict)
    assert not {"g5.12xlarge", "g5.24xlarge"} & set(out["instance_types"])


def test_g6e_plan_is_tp4_with_32k_tokens() -> None:
    rc, out = sizing("--variant", "r1-distill-llama-70b", "--families", "g6e", "--json")
    assert rc == 0 and isinstance(out, dict)
    assert out["instance_type"].startswith("g6e.")
    assert out["tensor_parallel_size"] == 4
    assert out["kv_cache_tokens"] >= 32768


def test_human_output_and_bad_family() -> None:
    rc, text = sizing("--variant", "r1-distill-qwen-1.5b", "--families", "g6")
    assert rc == 0 and "g6.xlarge" in str(text) and "$/h" not in str(text)
    rc, text = sizing("--variant", "r1-distill-qwen-1.5b", "--families", "g4")
    assert rc == 2 and "'g4' is not an EC2 GPU instance family; did you mean g4dn?" in str(text)


def test_capacity_type_and_region_flags() -> None:
    rc, out = sizing("--variant", "r1-distill-qwen-7b", "--families", "g6", "--capacity-type", "on-demand",
                     "--region", "eu-west-1", "--json")  # fmt: skip
    assert rc == 0 and isinstance(out, dict)
    assert out["capacity_types"] == ["on-demand"]
    assert "no bundled prices for eu-west-1" in out["price_source"]


def test_small_distill_on_g4dn_is_planned_in_float16_with_a_warning() -> None:
    rc, out = sizing("--variant", "r1-distill-qwen-1.5b", "--families", "g4dn", "--json")
    assert rc == 0 and isinstance(out, dict)
    assert out["instance_type"] == "g4dn.xlarge"
    assert out["dtype"] == "float16"
    assert any("float16" in w for w in out["warnings"])


def test_max_model_len_outside_the_model_is_refused_with_exit_2() -> None:
    # r1-distill-qwen-7b: max_position_embeddings 131072 (reference/upstream/model-configs.json)
    for bad in ("0", "-5", "131073"):
        rc, text = sizing("--variant", "r1-distill-qwen-7b", "--families", "g6", "--max-model-len", bad)
        assert rc == 2, bad
        assert f"max-model-len {bad} is outside 1..131072" in str(text)
    rc, _ = sizing("--variant", "r1-distill-qwen-7b", "--families", "g6", "--max-model-len", "131072")
    assert rc == 0


def test_counts_outside_their_ranges_are_refused_with_exit_2() -> None:
    base = ("--variant", "r1-distill-qwen-7b", "--families", "g6")
    for flags, message in (
        (("--min-full-length-sequences", "0"), "min-full-length-sequences 0 must be at least 1"),
        (("--min-replicas", "3", "--max-replicas", "2"), "replicas 3..2: need 0 <= min <= max"),
        (("--min-replicas", "-1"), "replicas -1..3"),
    ):
        rc, text = sizing(*base, *flags)
        assert rc == 2 and message in str(text), flags


def test_summary_shows_the_cold_start_stages_and_extra_costs() -> None:
    from deepseek_eks.sizing import PlanRequest, plan
    from deepseek_eks.sizing.cli import summary_lines

    request = PlanRequest("r1-distill-qwen-7b", ("g6",), warm_spare_nodes=2)
    result = plan(request)
    text = "\n".join(summary_lines(result))
    d = result.to_dict()
    stages = d["startup_breakdown"]
    assert f"weights {stages['weights']} s" in text and f"node {stages['node']} s" in text
    assert (
        f"${d['warm_spare_hourly_usd']:.2f}/h for warm spare nodes" in text and d["warm_spare_hourly_usd"] > 0
    )
    assert "fast snapshot restore" not in text


@pytest.mark.parametrize(
    "command",
    [
        ["sizing", "--variant", "r1-distill-qwen-1.5b", "--families", "g4dn", "--json"],
        ["automation", "plan", "--stack", "dev", "--json"],
    ],
)
def test_a_reader_that_stops_early_gets_no_traceback(command: list[str]) -> None:
    """``python -m sizing ... | head -2``: the closed pipe ends the command quietly."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *command],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    # Like `| head -0`: the reader is gone before the command (still importing) writes anything.
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sizing --variant r1-671b --families g4dn --json", 1),  # infeasible: stays 1 behind the pipe
        ("sizing --variant r1-671b --families g4dn", 1),
        ("sizing --variant r1-distill-qwen-1.5b --families g4dn --json", 0),
        ("automation plan --stack dev --json --set model.variant=r1-671b --set gpu.instanceFamilies=g4dn", 1),
    ],
)
def test_exit_code_survives_a_reader_that_stops_early(command: str, expected: int) -> None:
    """``set -o pipefail; python -m sizing ... | head -1`` keeps the command's own exit code."""
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m {command} | head -1"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == expected, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
