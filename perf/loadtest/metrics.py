"""The metrics of ``vllm bench serve``, so a local run and the in-cluster Job report the same thing.

Definitions from vLLM 0.33.0, ``vllm/benchmarks/serve.py`` (``calculate_metrics``,
``parse_goodput``, ``check_goodput_args``) and ``vllm/benchmarks/lib/endpoint_request_func.py``
(``async_request_openai_chat_completions``); the excerpt is summarised in
reference/upstream/vllm-bench-serve/definitions.json:

- TTFT: request start to the first event that carries a generated token.
- ITL: the gaps between consecutive such events.
- E2EL: request start to the last such event.
- TPOT of a request: (E2EL - TTFT) / (output_tokens - 1), only for output_tokens > 1; a request of
  one token has no TPOT in the statistics but counts as TPOT 0 for goodput.
- goodput (``--goodput ttft:MS tpot:MS e2el:MS``): completed requests whose every named metric is
  at most its SLO, divided by the run's duration.
- percentiles: ``numpy.percentile``'s default, linear interpolation between closest ranks (the
  simulator's too: ``perf/stats.py``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from ..stats import percentile

GOODPUT_METRICS = ("ttft", "tpot", "e2el")  # vllm/benchmarks/serve.py check_goodput_args VALID_NAMES


class GoodputError(ValueError):
    """A --goodput SLO that vllm bench serve would also refuse."""


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, median, standard deviation (population, as numpy.std) and p50/p90/p95/p99, in the
    values' unit; None where there are no values."""

    def clean(x: float) -> float | None:
        return None if math.isnan(x) else round(x, 6)

    out: dict[str, float | None] = {f"p{q}": clean(percentile(values, q)) for q in (50, 90, 95, 99)}
    out["mean"] = clean(statistics.fmean(values)) if values else None
    out["median"] = out["p50"]
    out["std"] = clean(statistics.pstdev(values)) if values else None
    out["count"] = len(values)
    return out


def tpot_s(e2el_s: float, ttft_s: float, output_tokens: int) -> float | None:
    """Time per output token after the first, None for a response of one token or none."""
    if output_tokens <= 1:
        return None
    return (e2el_s - ttft_s) / (output_tokens - 1)


def parse_goodput(pairs: Iterable[str]) -> dict[str, float]:
    """``KEY:MS`` SLO pairs (keys ttft, tpot, e2el) as a dict of milliseconds; a GoodputError
    listing every bad pair."""
    slos: dict[str, float] = {}
    problems: list[str] = []
    for pair in pairs:
        name, sep, value = pair.partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = math.nan
        if not sep or name not in GOODPUT_METRICS or not ms >= 0:
            problems.append(
                f"--goodput {pair!r}: expected KEY:MILLISECONDS with KEY one of {', '.join(GOODPUT_METRICS)} "
                "and a number >= 0, e.g. ttft:5000 tpot:50"
            )
            continue
        slos[name] = ms
    if problems:
        raise GoodputError("; ".join(problems))
    return slos


def is_good(slos_ms: dict[str, float], ttft_s: float, e2el_s: float, output_tokens: int) -> bool:
    """Whether a completed request meets every SLO (vLLM compares ``slo >= value``)."""
    values = {"ttft": ttft_s, "tpot": tpot_s(e2el_s, ttft_s, output_tokens) or 0.0, "e2el": e2el_s}
    return all(slo / 1000 >= values[name] for name, slo in slos_ms.items())


def goodput_rps(
    slos_ms: dict[str, float], completed: Iterable[tuple[float, float, int]], duration_s: float
) -> tuple[int, float]:
    """(good requests, good requests per second) of ``completed`` (ttft_s, e2el_s, output_tokens)."""
    good = sum(is_good(slos_ms, ttft, e2el, tokens) for ttft, e2el, tokens in completed)
    return good, (good / duration_s if duration_s > 0 else 0.0)
