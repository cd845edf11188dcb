"""docs/choosing-a-variant.md says what each variant scores, costs and how fast it starts: its cost
table must be what the commands printed under it print now, its quality table what DeepSeek
published (the vendored copy), and its advice must still follow from both. Staleness of the whole
generated region is tests/docs/test_generated_pages.py's ``generate_docs.py --check``."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "choosing-a-variant.md"
EVALUATION = ROOT / "reference" / "upstream" / "deepseek-r1" / "evaluation.json"


def _tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table of ``text``, as rows keyed by header."""
    tables = []
    for block in re.findall(r"(?:^\|.*\|\n)+", text, re.M):
        lines = block.strip().splitlines()
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
        tables.append([dict(zip(header, row, strict=True)) for row in rows])
    return tables


def _table(first_header: str, second_header: str) -> list[dict[str, str]]:
    for table in _tables(PAGE.read_text()):
        if table and list(table[0])[:2] == [first_header, second_header]:
            return table
    raise AssertionError(f"{PAGE.name} has no table starting with {first_header} | {second_header}")


def _commands() -> list[list[str]]:
    """The ``python -m sizing`` commands the page says its cost rows come from, in row order."""
    found = re.findall(r"^python -m sizing (.+)$", PAGE.read_text(), re.M)
    return [shlex.split(line) for line in found if "--variant" in line]


def _sizing(argv: list[str]) -> dict[str, Any]:
    from deepseek_eks.sizing.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main([*argv, "--json"]) == 0, argv
    plan: dict[str, Any] = json.loads(out.getvalue())
    return plan


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


COST = _table("variant", "instance type")
COMMANDS = _commands()


def test_the_page_lists_one_command_per_cost_row_and_every_variant() -> None:
    from deepseek_eks.sizing import VARIANTS

    assert len(COMMANDS) == len(COST) >= len(VARIANTS)
    assert {c[c.index("--variant") + 1] for c in COMMANDS} == set(VARIANTS)


ROWS = list(zip(COST, COMMANDS, strict=False))


@pytest.mark.parametrize("row, argv", ROWS, ids=[r["variant"] for r in COST])
def test_a_cost_row_is_what_its_command_prints_now(row: dict[str, str], argv: list[str]) -> None:
    hub = _sizing(argv)
    s3 = _sizing([*argv, "--weights-source", "s3"])
    assert row["variant"].startswith(f"`{hub['variant']}`")
    assert row["instance type"] == f"`{hub['instance_type']}`"
    assert row["GPUs per replica"].startswith(f"{hub['gpus_per_replica']}x {hub['gpu_model']}")
    # Half a printed unit, plus float slack: 0.065 prints as 0.07, 0.005000000000000004 away.
    half = 0.005 + 1e-9
    assert _number(row["$/h per replica"]) == pytest.approx(hub["replica_hourly_usd"], abs=half)
    assert _number(row["$ per million output tokens"]) == pytest.approx(
        hub["usd_per_million_output_tokens"], abs=half
    )
    assert _number(row["output tok/s per replica"]) == pytest.approx(hub["output_tokens_per_second"], abs=0.5)
    assert _number(row["TTFT s"]) == pytest.approx(hub["ttft_s"], abs=half)
    assert _number(row["ITL ms"]) == pytest.approx(hub["itl_s"] * 1000, abs=0.5 + 1e-9)
    # The plan's start-up for a new node is the sum of its stages (DESIGN.md, plan.json).
    assert _number(row["start-up s, Hugging Face"]) == sum(hub["startup_breakdown"].values())
    assert _number(row["start-up s, S3"]) == sum(s3["startup_breakdown"].values())


def test_the_quality_table_is_what_deepseek_published() -> None:
    from deepseek_eks.sizing import model_catalog

    published = json.loads(EVALUATION.read_text())
    labels = published["metrics"]
    rows = _table("variant", "model")
    assert {r["variant"].strip("`") for r in rows} == set(model_catalog())
    for row in rows:
        model = model_catalog()[row["variant"].strip("`")].hf_repo.split("/")[-1]
        assert row["model"] == model
        for key, label in labels.items():
            assert _number(row[label]) == published["models"][model][key], (model, label)


def test_the_published_scores_cover_every_variant_and_metric() -> None:
    """The vendored copy holds a figure for each metric of each model this project serves."""
    from deepseek_eks.sizing import model_catalog

    published = json.loads(EVALUATION.read_text())
    assert published["source"]["commit"] and published["source"]["repository"] == "deepseek-ai/DeepSeek-R1"
    for spec in model_catalog().values():
        scores = published["models"][spec.hf_repo.split("/")[-1]]
        assert all(isinstance(scores[m], int | float) for m in published["metrics"]), spec.variant


def test_the_advice_still_follows_from_the_tables() -> None:
    """Each claim of 'How to choose' against today's figures: a change of prices, fits or scores
    that turns one false fails here, so the prose is rewritten with the numbers."""
    cost = {r["variant"]: r for r in COST}
    quality = {r["variant"].strip("`"): r for r in _table("variant", "model")}

    def usd_per_m(variant: str) -> float:
        return _number(cost[f"`{variant}`"]["$ per million output tokens"])

    hourly = {v: _number(r["$/h per replica"]) for v, r in cost.items()}
    # 7B: the cheapest instance the plan uses (the 1.5B shares it).
    assert hourly["`r1-distill-qwen-7b`"] == min(hourly.values())
    assert cost["`r1-distill-qwen-7b`"]["GPUs per replica"] == "1x L4"
    seven, one_and_a_half = quality["r1-distill-qwen-7b"], quality["r1-distill-qwen-1.5b"]
    for metric in list(seven)[2:]:  # "far better than the 1.5B on every benchmark"
        assert _number(seven[metric]) > _number(one_and_a_half[metric])
    # 14B: one GPU, within three points of the 32B and 70B on the math benchmarks, six on the rest.
    assert cost["`r1-distill-qwen-14b`"]["GPUs per replica"].startswith("1x ")
    for bigger in ("r1-distill-qwen-32b", "r1-distill-llama-70b"):
        for metric, points in (
            ("AIME 2024 pass@1", 3),
            ("MATH-500 pass@1", 3),
            ("GPQA Diamond pass@1", 6.5),
            ("LiveCodeBench pass@1", 6.5),
        ):
            gap = _number(quality[bigger][metric]) - _number(quality["r1-distill-qwen-14b"][metric])
            assert gap <= points, (bigger, metric, gap)
    # 32B and 70B trade places; the 32B costs less per token.
    wins = [
        _number(quality["r1-distill-qwen-32b"][m]) > _number(quality["r1-distill-llama-70b"][m])
        for m in ("AIME 2024 pass@1", "MATH-500 pass@1", "GPQA Diamond pass@1", "CodeForces rating")
    ]
    assert any(wins) and not all(wins)
    assert usd_per_m("r1-distill-qwen-32b") < usd_per_m("r1-distill-llama-70b")
    # The full R1: eight H200 in one p5en node, or sixteen H100 over two p5 nodes; best on every score.
    assert cost["`r1-671b`"]["GPUs per replica"] == "8x H200"
    assert cost["`r1-671b` (p5 only)"]["GPUs per replica"] == "16x H100 on 2 nodes"
    for metric in list(quality["r1-671b"])[2:]:
        assert _number(quality["r1-671b"][metric]) == max(_number(r[metric]) for r in quality.values())
    # S3 takes the full R1's start-up from hours to well under an hour.
    assert _number(cost["`r1-671b`"]["start-up s, Hugging Face"]) > 2 * 3600
    assert _number(cost["`r1-671b`"]["start-up s, S3"]) < 3600
