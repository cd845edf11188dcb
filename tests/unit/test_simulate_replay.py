"""The ``replay`` profile (issue 34 §4): a real production trace, vendored with its source and
licence, replayed at a stack's rate with its burstiness and lengths kept.

The vendored file is checked against figures its README records from the upstream file (not from
this project's code); the replay against the vendored file itself."""

from __future__ import annotations

import csv
import itertools
import math
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from deepseek_eks.perf.simulate import replay
from deepseek_eks.perf.simulate.cli import parser
from deepseek_eks.perf.simulate.traffic import (
    PROFILES,
    LengthProfile,
    Request,
    TraceError,
    generate,
    profile_lengths,
    rate_function,
)

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "reference" / "upstream" / "llm-traces"
SAMPLE = FOLDER / "azure-llm-inference-2023-conv.csv"
README = FOLDER / "README.md"
DAY_S = 86400.0
MAX_MODEL_LEN = 32768


def sample_rows() -> list[tuple[float, int, int]]:
    """The vendored file, read here without the module under test."""
    with SAMPLE.open(newline="") as f:
        return [
            (float(r["arrival_s"]), int(r["prompt_tokens"]), int(r["output_tokens"]))
            for r in csv.DictReader(f)
        ]


def readme_figures() -> dict[str, str]:
    """The README's "Figures measured on the upstream file" table: figure -> value."""
    section = README.read_text().split("## Figures measured on the upstream file", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", section, re.MULTILINE)
    return {name: value for name, value in rows if name not in ("figure", "---")}


def number(text: str) -> float:
    return float(text.replace(",", "").removesuffix(" s"))


def per_minute(arrivals: list[float], minutes: int) -> list[int]:
    counts = Counter(int(t // 60) for t in arrivals)
    return [counts[i] for i in range(minutes)]


def cv(values: list[int] | list[float]) -> float:
    return statistics.pstdev(values) / statistics.mean(values)


# ---- the vendored data ---------------------------------------------------------------------------


def test_readme_names_source_commit_licence_and_attribution() -> None:
    text = README.read_text()
    assert "https://github.com/Azure/AzurePublicDataset" in text
    assert "`data/AzureLLMInferenceTrace_conv.csv`" in text
    assert re.search(r"commit read \| `[0-9a-f]{40}`", text)
    assert "Creative Commons Attribution 4.0 International" in text
    assert "https://creativecommons.org/licenses/by/4.0/legalcode" in text
    assert "Splitwise: Efficient generative LLM inference using phase splitting" in text
    assert "How the file was cut" in text and "real data, not a fit" in text.lower()


def test_vendored_file_is_small_and_is_the_one_the_replay_reads() -> None:
    assert SAMPLE.stat().st_size < 1_000_000
    assert replay.SAMPLE_PATH.resolve() == SAMPLE.resolve()
    with SAMPLE.open(newline="") as f:
        assert next(csv.reader(f)) == list(replay.COLUMNS)


def test_vendored_file_matches_the_figures_measured_upstream() -> None:
    figures = readme_figures()
    rows = sample_rows()
    prompts = [p for _, p, _ in rows]
    outputs = [o for _, _, o in rows]
    assert len(rows) == number(figures["requests (rows)"]) == 19366
    assert rows[-1][0] - rows[0][0] == pytest.approx(
        number(figures["span, first to last request"]), abs=0.002
    )
    assert statistics.median(prompts) == number(figures["median ContextTokens"])
    assert statistics.median(outputs) == number(figures["median GeneratedTokens"])
    assert statistics.mean(prompts) == pytest.approx(number(figures["mean ContextTokens"]), abs=0.05)
    assert statistics.mean(outputs) == pytest.approx(number(figures["mean GeneratedTokens"]), abs=0.05)
    assert max(prompts) == number(figures["max ContextTokens"])
    assert max(outputs) == number(figures["max GeneratedTokens"])
    minutes = per_minute([t for t, _, _ in rows], 58)
    key = "requests per minute, the 58 whole minutes from the first request"
    assert statistics.mean(minutes) == pytest.approx(number(figures[f"{key}: mean"]), abs=0.05)
    assert cv(minutes) == pytest.approx(
        number(figures["the same: coefficient of variation (population)"]), abs=5e-4
    )
    assert f"{min(minutes)}, {max(minutes)}" == figures["the same: fewest, most"]


# ---- the replay ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def day() -> list[Request]:
    """A day at 2 req/s: the trace thinned to about a third."""
    return generate("replay", 2.0, DAY_S, 1, LengthProfile(), MAX_MODEL_LEN)


def test_replay_is_a_built_in_profile_the_command_line_accepts() -> None:
    assert "replay" in PROFILES
    args = parser().parse_args(["--stack", "dev", "--profile", "replay", "--hours", "24", "--compare"])
    assert args.profile == "replay"


@pytest.mark.parametrize("mean_rps", [2.0, 13.0])  # thinned, and replicated (the trace runs 5.5/s)
def test_mean_rate_over_a_day_is_the_requested_one(mean_rps: float, day: list[Request]) -> None:
    trace = day if mean_rps == 2.0 else generate("replay", mean_rps, DAY_S, 1, LengthProfile(), MAX_MODEL_LEN)
    assert len(trace) / DAY_S == pytest.approx(mean_rps, rel=0.02)
    assert all(0 <= r.arrival_s < DAY_S for r in trace)
    assert [r.arrival_s for r in trace] == sorted(r.arrival_s for r in trace)


@pytest.mark.parametrize("mean_rps", [2.0, 13.0])
def test_burstiness_is_kept_well_above_poisson(mean_rps: float, day: list[Request]) -> None:
    trace = day if mean_rps == 2.0 else generate("replay", mean_rps, DAY_S, 2, LengthProfile(), MAX_MODEL_LEN)
    minutes = per_minute([r.arrival_s for r in trace], int(DAY_S // 60))
    poisson_cv = 1 / math.sqrt(statistics.mean(minutes))
    assert cv(minutes) > 2 * poisson_cv
    # And about the real trace's own variability (0.22 a minute), with thinning's noise on top.
    real = cv(per_minute([t for t, _, _ in sample_rows()], 58))
    assert real * 0.9 < cv(minutes) < math.hypot(real, poisson_cv) * 1.25


def test_surges_last_as_long_as_in_the_trace_not_stretched() -> None:
    """Stretching the hour over the day would make consecutive minutes nearly equal; tiling keeps
    the trace's own minute-to-minute swings."""
    real = per_minute([t for t, _, _ in sample_rows()], 58)
    real_swing = statistics.mean(abs(b - a) for a, b in itertools.pairwise(real)) / statistics.mean(real)
    shape = rate_function("replay", 1.0, 1, DAY_S)
    rates = [shape(i * 60.0) for i in range(int(DAY_S // 60))]
    swing = statistics.mean(abs(b - a) for a, b in itertools.pairwise(rates)) / statistics.mean(rates)
    assert swing == pytest.approx(real_swing, rel=0.2)


def test_lengths_are_the_traces_own(day: list[Request]) -> None:
    pairs = {(p, o) for _, p, o in sample_rows()}
    assert {(r.prompt_tokens, r.output_tokens) for r in day} <= pairs
    outputs = [r.output_tokens for r in day]
    assert statistics.median(outputs) == pytest.approx(
        statistics.median(o for _, _, o in sample_rows()), rel=0.05
    )


def test_lengths_are_clipped_to_max_model_len() -> None:
    limit = 1024
    trace = generate("replay", 20.0, 3600.0, 3, LengthProfile(), limit)
    assert all(r.prompt_tokens + r.output_tokens <= limit and r.output_tokens >= 1 for r in trace)
    assert any(r.prompt_tokens == limit - 1 for r in trace)  # long prompts were cut, not dropped
    outputs = {o for _, _, o in sample_rows()}
    assert all(r.output_tokens in outputs or r.output_tokens == limit - r.prompt_tokens for r in trace)


def test_same_seed_same_trace_other_seed_other_trace(day: list[Request]) -> None:
    assert generate("replay", 2.0, DAY_S, 1, LengthProfile(), MAX_MODEL_LEN) == day
    other = generate("replay", 2.0, DAY_S, 2, LengthProfile(), MAX_MODEL_LEN)
    assert other != day
    assert [r.arrival_s for r in other[:100]] != [r.arrival_s for r in day[:100]]
    # Seeds start at different points of the trace, not only thin it differently: the expected
    # rate (which thinning does not touch) differs.
    first_hour = [[rate_function("replay", 2.0, seed, DAY_S)(m * 60.0) for m in range(60)] for seed in (1, 2)]
    assert first_hour[0] != first_hour[1]


def test_rate_function_is_what_the_replay_draws_from(day: list[Request]) -> None:
    """Callers size a stack by the peak of rate_function (run.default_rate): it must be the
    replay's own per-minute rate, with the requested mean, over the whole 30 s grid they read."""
    shape = rate_function("replay", 2.0, 1, DAY_S)
    grid = [shape(i * 30.0) for i in range(int(DAY_S / 30) + 1)]
    assert all(v > 0 and math.isfinite(v) for v in grid)
    assert statistics.mean(grid[:-1]) == pytest.approx(2.0, rel=0.01)
    assert 1.3 < max(grid) / 2.0 < 2.0  # the trace's busiest minute, 507 against 333 on average
    expected = [shape(i * 60.0) * 60 for i in range(int(DAY_S // 60))]
    drawn = per_minute([r.arrival_s for r in day], int(DAY_S // 60))
    assert statistics.correlation(expected, drawn) > 0.8


def test_profile_lengths_are_the_traces_means() -> None:
    lengths = profile_lengths("replay", LengthProfile(500, 1162))
    rows = sample_rows()
    assert lengths.prompt_tokens == round(statistics.mean(p for _, p, _ in rows))
    assert lengths.output_tokens == round(statistics.mean(o for _, _, o in rows))


def test_a_missing_trace_file_is_a_clear_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed wheel has no reference/ folder: the replay says which file it needs."""
    missing = tmp_path / "reference" / "upstream" / "llm-traces" / "azure-llm-inference-2023-conv.csv"
    monkeypatch.setattr(replay, "SAMPLE_PATH", missing)
    for call in (
        lambda: generate("replay", 1.0, 3600.0, 1, LengthProfile(), MAX_MODEL_LEN),
        lambda: rate_function("replay", 1.0, 1, 3600.0),
        lambda: profile_lengths("replay", LengthProfile()),
    ):
        with pytest.raises(TraceError, match=re.escape(str(missing))):
            call()


def test_bad_rate_or_empty_window_is_refused() -> None:
    with pytest.raises(TraceError, match="positive"):
        generate("replay", 0.0, 3600.0, 1, LengthProfile(), MAX_MODEL_LEN)
    with pytest.raises(TraceError, match="no arrival"):
        generate("replay", 1.0, 1e-6, 1, LengthProfile(), MAX_MODEL_LEN)
