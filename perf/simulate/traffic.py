"""Request traces: built-in profiles (steady, bursty, diurnal, step, reasoning, shared-prefix) as
non-homogeneous Poisson arrivals, or a CSV, with prompt/output lengths drawn per request. Everything
derives from one seed. ``shared-prefix`` is the diurnal shape with multi-turn chats whose prompts
share prefixes: synthetic, fitted to a published prefix-reuse figure (perf/simulate/prefixes.py).
``replay`` is not synthetic: a real production hour (Azure's public LLM inference trace of 2023,
conversation service) tiled over the run and thinned or replicated to the mean rate, with each
request's own prompt and output lengths (perf/simulate/replay.py)."""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from . import replay
from .prefixes import shared_prefix_trace
from .trace_types import DEFAULT_OUTPUT_TOKENS as DEFAULT_OUTPUT_TOKENS
from .trace_types import DEFAULT_PROMPT_TOKENS as DEFAULT_PROMPT_TOKENS
from .trace_types import LengthProfile as LengthProfile
from .trace_types import Request as Request
from .trace_types import TraceError as TraceError

PROFILES = ("steady", "bursty", "diurnal", "step", "reasoning", "shared-prefix", "replay")
SHARED_PREFIX = "shared-prefix"
REPLAY = "replay"
# step: office hours, a sudden rise at 09:00 and fall at 17:00 (UTC, the trace's clock).
STEP_HOURS = (9, 17)
STEP_RATIO = 4.0  # busy rate over quiet rate
# reasoning: the diurnal shape with long chains of thought, REASONING_OUTPUT_FACTOR x the mean
# output (4,648 tokens with the default 1,162; R1's reasoning traces often run to several
# thousand tokens, its model card allows 32,768).
REASONING_OUTPUT_FACTOR = 4
DAY_S = 86400.0


def rate_function(profile: str, mean_rps: float, seed: int, duration_s: float) -> Callable[[float], float]:
    """Arrival rate (requests/s) over time for a built-in profile with the given long-run mean.

    diurnal (and reasoning, shared-prefix): a sine over the day between 40 % and 160 % of the
    mean, peak at 14:00.
    step: STEP_RATIO x the quiet rate between STEP_HOURS, changing at once.
    bursty: the diurnal shape with bursts of 4x its rate, starting on average every 2 h and
    lasting 5-30 min (seeded), scaled back so the mean stays ``mean_rps``.
    replay: the replayed trace's expected rate in each minute (replay.rate), so a peak read from
    it is the real trace's busiest minute at this scale.
    """
    if profile not in PROFILES:
        raise TraceError(
            f"unknown traffic profile {profile!r}: use one of {', '.join(PROFILES)} or --trace FILE"
        )
    if mean_rps <= 0:
        raise TraceError(f"--rate must be positive, got {mean_rps}")
    if profile == "steady":
        return lambda t: mean_rps
    if profile == REPLAY:
        return replay.rate(mean_rps, seed, duration_s)

    def diurnal(t: float) -> float:
        return 1.0 + 0.6 * math.sin(2 * math.pi * (t / DAY_S - 8 / 24))

    if profile in ("diurnal", "reasoning", SHARED_PREFIX):
        return lambda t: mean_rps * diurnal(t)
    if profile == "step":
        busy_share = (STEP_HOURS[1] - STEP_HOURS[0]) / 24
        quiet = mean_rps / (1 + (STEP_RATIO - 1) * busy_share)

        def office_hours(t: float) -> float:
            hour = (t % DAY_S) / 3600
            return quiet * (STEP_RATIO if STEP_HOURS[0] <= hour < STEP_HOURS[1] else 1.0)

        return office_hours
    rng = random.Random(seed * 7919 + 17)
    bursts: list[tuple[float, float]] = []
    t = rng.expovariate(1 / 7200)
    while t < duration_s:
        length = rng.uniform(300, 1800)
        bursts.append((t, t + length))
        t += length + rng.expovariate(1 / 7200)

    def in_burst(t: float) -> bool:
        return any(a <= t < b for a, b in bursts)

    # Normalize numerically so the profile's mean over the run is mean_rps.
    step = 60.0
    grid = [i * step for i in range(max(1, int(duration_s / step)))]
    raw_mean = sum(diurnal(x) * (4.0 if in_burst(x) else 1.0) for x in grid) / len(grid)
    scale = mean_rps / raw_mean
    return lambda t: scale * diurnal(t) * (4.0 if in_burst(t) else 1.0)


def profile_lengths(profile: str, lengths: LengthProfile) -> LengthProfile:
    """The lengths a profile draws: ``reasoning`` multiplies the mean output; ``replay`` has the
    trace's own means (its rows' lengths replace ``lengths``), which the default rate is sized at."""
    if profile == "reasoning":
        return replace(lengths, output_tokens=lengths.output_tokens * REASONING_OUTPUT_FACTOR)
    if profile == REPLAY:
        prompt, output = replay.load_sample().mean_lengths()
        return replace(lengths, prompt_tokens=round(prompt), output_tokens=round(output))
    return lengths


def generate(
    profile: str,
    mean_rps: float,
    duration_s: float,
    seed: int,
    lengths: LengthProfile,
    max_model_len: int,
) -> list[Request]:
    """Non-homogeneous Poisson arrivals by thinning (Lewis and Shedler) over ``duration_s``; for
    ``replay``, the real trace's arrivals and lengths scaled to ``mean_rps`` (``lengths`` unused)."""
    if profile == REPLAY:
        return replay.requests(mean_rps, duration_s, seed, max_model_len)
    rate = rate_function(profile, mean_rps, seed, duration_s)
    requests = arrivals(rate, duration_s, seed, lengths, max_model_len)
    if profile == SHARED_PREFIX:
        return shared_prefix_trace(requests, seed, lengths, max_model_len)
    return requests


def arrivals(
    rate: Callable[[float], float], duration_s: float, seed: int, lengths: LengthProfile, max_model_len: int
) -> list[Request]:
    """Requests arriving at ``rate(t)`` per second over ``duration_s`` (thinning against the
    highest rate on a 30 s grid, with 1 % headroom)."""
    peak = max(rate(i * 30.0) for i in range(int(duration_s / 30) + 1)) * 1.01
    if peak <= 0:
        return []
    rng = random.Random(seed)
    out: list[Request] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= duration_s:
            return out
        if rng.random() * peak <= rate(t):
            prompt, output = lengths.draw(rng, max_model_len)
            out.append(Request(t, prompt, output))


def read_csv(
    path: Path, seed: int, lengths: LengthProfile, max_model_len: int
) -> tuple[list[Request], float]:
    """A trace file: either one request per row (``arrival_s[,prompt_tokens,output_tokens]``) or a
    rate schedule (``start_s,rate_rps``: piecewise-constant Poisson rate from each start).
    Returns the requests and the trace's duration."""
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise TraceError(f"--trace {path}: {e.strerror}") from None
    if not rows:
        raise TraceError(f"--trace {path}: no rows")
    columns = set(rows[0])
    rng = random.Random(seed)
    try:
        if "arrival_s" in columns:
            out = []
            for row in rows:
                prompt, output = lengths.draw(rng, max_model_len)
                out.append(
                    Request(
                        float(row["arrival_s"]),
                        int(row.get("prompt_tokens") or prompt),
                        int(row.get("output_tokens") or output),
                    )
                )
            out.sort(key=lambda r: r.arrival_s)
            return out, out[-1].arrival_s + 1.0
        if {"start_s", "rate_rps"} <= columns:
            steps = sorted((float(r["start_s"]), float(r["rate_rps"])) for r in rows)
            duration = steps[-1][0] + (steps[-1][0] - steps[-2][0] if len(steps) > 1 else 3600.0)
            out = []
            for i, (start, rate) in enumerate(steps):
                end = steps[i + 1][0] if i + 1 < len(steps) else duration
                t = start
                while rate > 0:
                    t += rng.expovariate(rate)
                    if t >= end:
                        break
                    prompt, output = lengths.draw(rng, max_model_len)
                    out.append(Request(t, prompt, output))
            return out, duration
    except (TypeError, ValueError) as e:
        raise TraceError(f"--trace {path}: {e}") from None
    raise TraceError(
        f"--trace {path}: columns {sorted(columns)}; expected arrival_s[,prompt_tokens,output_tokens] "
        "or start_s,rate_rps"
    )
