"""The ``replay`` trace: REAL production traffic, not a model of it. Every arrival instant and every
prompt and output length comes from Azure's public LLM inference trace of 2023 (the conversation
service), scaled to a stack's mean rate.

The data: reference/upstream/llm-traces/azure-llm-inference-2023-conv.csv holds all 19,366
requests of ``data/AzureLLMInferenceTrace_conv.csv`` in Azure/AzurePublicDataset (CC-BY 4.0;
Patel et al., "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024):
58.4 minutes of arrivals on 2023-11-16, each with its context and generated tokens. Its README
gives the commit it was read at, the licence, the attribution and how it was cut. The trace is
bursty: its per-minute counts vary with a coefficient of variation of 0.22, four times the 0.055
of a Poisson process at its mean of 333 a minute (figures measured on the upstream file, in that
README).

How one hour becomes ``duration_s`` at ``mean_rps`` (``requests``):

- Tiled, not stretched. Stretching the hour over a day would turn a two-minute surge into a
  50-minute one, and an autoscaler's job is exactly to ride out surges of a given length. The hour
  is repeated instead, every other copy played backwards (a mirror), so the rate runs on without
  a jump where one copy meets the next and every copy keeps the trace's own surges, gaps and
  sub-second clustering. The replay therefore has no daily cycle: it is the conversation service's
  real minute-to-minute burstiness, held for the whole run (the diurnal and step profiles model
  the day).
- A seeded phase. The run starts at a point of the two-hour mirrored cycle drawn from ``seed``, so
  seeds give different stretches of the same traffic.
- Scaled by thinning or replicating arrivals, never by moving them. With ``factor`` = the requested
  mean over the trace's own rate in the run's window, each arrival of the tiled trace is kept
  ``floor(factor)`` times and once more with probability ``frac(factor)`` (below 1 that is
  independent thinning, which keeps the rate's shape and adds the Poisson noise a smaller service
  really sees); an extra copy lands at a uniform instant before the trace's next arrival, so the
  per-minute counts are the trace's, times ``factor``. The expected number of requests over the
  run is ``mean_rps * duration_s`` exactly.
- Lengths are the row's own (the stack's ``--prompt-tokens`` and ``--output-tokens`` are not used),
  clipped so prompt + output fit ``max_model_len`` as every other profile clips them. They are a
  2023 chat service's: a mean of 1,155 prompt and 211 output tokens. DeepSeek-R1's chains of thought
  run longer; the ``reasoning`` profile is the one for long outputs.

``reference/`` is part of the checkout, not of the wheel: run from a checkout, or the replay stops
with an error that names the file it could not read.
"""

from __future__ import annotations

import bisect
import csv
import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from .trace_types import Request, TraceError

SAMPLE_PATH = PROJECT_ROOT / "reference" / "upstream" / "llm-traces" / "azure-llm-inference-2023-conv.csv"
SOURCE = (
    "Azure LLM inference trace 2023, conversation (Azure/AzurePublicDataset "
    "data/AzureLLMInferenceTrace_conv.csv, CC-BY 4.0)"
)
COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
RATE_BIN_S = 60.0  # rate_function's resolution: per-minute counts, the trace's own burst scale


@dataclass(frozen=True)
class TraceSample:
    """One vendored trace: arrival offsets from its first request (sorted), and each request's
    prompt and output tokens."""

    arrivals_s: tuple[float, ...]
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]

    @property
    def period_s(self) -> float:
        """How long one copy of the trace lasts when tiled: its span plus one mean gap, so the
        last request of a copy and the first of the next are as far apart as requests on average."""
        span = self.arrivals_s[-1] - self.arrivals_s[0]
        return span + span / max(1, len(self.arrivals_s) - 1)

    @property
    def mean_rps(self) -> float:
        return len(self.arrivals_s) / self.period_s

    def mean_lengths(self) -> tuple[float, float]:
        """Mean prompt and output tokens, unclipped."""
        n = len(self.arrivals_s)
        return sum(self.prompt_tokens) / n, sum(self.output_tokens) / n

    @functools.cached_property
    def cycle(self) -> tuple[tuple[float, ...], tuple[int, ...]]:
        """One period of the mirrored tiling (2 x ``period_s``): the trace forwards, then backwards.
        Returns the offsets (sorted) and the row each one replays."""
        first, last = self.arrivals_s[0], self.arrivals_s[-1]
        forward = [(t - first, row) for row, t in enumerate(self.arrivals_s)]
        backward = [(self.period_s + (last - t), row) for row, t in enumerate(self.arrivals_s)]
        events = sorted(forward + backward)
        return tuple(t for t, _ in events), tuple(row for _, row in events)


def load_sample(path: Path | None = None) -> TraceSample:
    """The vendored trace (``SAMPLE_PATH`` unless ``path`` says otherwise), read once a process."""
    return _read_sample(path or SAMPLE_PATH)


@functools.lru_cache(maxsize=4)
def _read_sample(path: Path) -> TraceSample:
    """The trace at ``path``: columns ``COLUMNS``, one request a row."""
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise TraceError(
            f"the replay trace {path} cannot be read ({e.strerror}): it lives in the checkout's "
            "reference/upstream/llm-traces/, which an installed package does not ship; run the "
            "simulator from a checkout"
        ) from None
    if not rows or not set(COLUMNS) <= set(rows[0]):
        raise TraceError(f"the replay trace {path} has no rows with columns {', '.join(COLUMNS)}")
    try:
        parsed = sorted(
            (float(r["arrival_s"]), int(r["prompt_tokens"]), int(r["output_tokens"])) for r in rows
        )
    except (TypeError, ValueError) as e:
        raise TraceError(f"the replay trace {path}: {e}") from None
    if len(parsed) < 2 or parsed[-1][0] <= parsed[0][0]:
        raise TraceError(f"the replay trace {path} needs at least two distinct arrival times")
    if any(p < 1 or o < 1 for _, p, o in parsed):
        raise TraceError(f"the replay trace {path} has a request with no prompt or output tokens")
    return TraceSample(
        tuple(t for t, _, _ in parsed), tuple(p for _, p, _ in parsed), tuple(o for _, _, o in parsed)
    )


def phase_s(sample: TraceSample, rng: random.Random) -> float:
    """Where in the mirrored cycle a run starts: the first draw of the run's generator
    (``random.Random(seed)``), so ``requests`` and ``rate`` agree on it."""
    return rng.uniform(0.0, 2 * sample.period_s)


def tiled(sample: TraceSample, start_s: float, duration_s: float) -> tuple[list[float], list[int]]:
    """The mirrored tiling's arrivals in [0, ``duration_s``) when the run starts ``start_s`` into
    the cycle, and the row each replays."""
    offsets, rows = sample.cycle
    cycle_s = 2 * sample.period_s
    times: list[float] = []
    replayed: list[int] = []
    lap = math.floor(start_s / cycle_s)
    while lap * cycle_s - start_s < duration_s:
        base = lap * cycle_s - start_s
        first = bisect.bisect_left(offsets, -base)  # the first offset at or after run time 0
        last = bisect.bisect_left(offsets, duration_s - base)
        times.extend(base + offsets[i] for i in range(first, last))
        replayed.extend(rows[first:last])
        lap += 1
    return times, replayed


def window(
    sample: TraceSample, mean_rps: float, duration_s: float, rng: random.Random
) -> tuple[list[float], list[int], float]:
    """The run's tiled arrivals and rows from ``rng``'s phase (its first draw), and how many
    requests each stands for so the run's expected count is ``mean_rps * duration_s``. The factor
    is taken over the run's own window, not the trace's overall mean: a short run that starts in a
    lull of the hour would otherwise fall short of the mean."""
    if mean_rps <= 0:
        raise TraceError(f"--rate must be positive, got {mean_rps}")
    times, rows = tiled(sample, phase_s(sample, rng), duration_s)
    if not times:
        raise TraceError(
            f"{duration_s:g} s holds no arrival of the replay trace (it averages one every "
            f"{1 / sample.mean_rps:.2f} s): run it longer"
        )
    return times, rows, mean_rps * duration_s / len(times)


def clip(prompt: int, output: int, max_model_len: int) -> tuple[int, int]:
    """Prompt and output tokens that fit ``max_model_len`` together, as ``LengthProfile.draw``
    clips (trace_types.py): the prompt first, leaving at least one output token."""
    prompt = max(1, min(prompt, max_model_len - 1))
    return prompt, max(1, min(output, max_model_len - prompt))


def requests(
    mean_rps: float, duration_s: float, seed: int, max_model_len: int, sample: TraceSample | None = None
) -> list[Request]:
    """The trace tiled over ``duration_s`` from ``seed``'s phase, thinned or replicated to
    ``mean_rps`` (module docstring), each request with its row's clipped lengths."""
    sample = sample or load_sample()
    rng = random.Random(seed)  # its first draw is the phase, the rest thin and place copies
    times, rows, factor = window(sample, mean_rps, duration_s, rng)
    whole, fraction = divmod(factor, 1.0)
    out: list[Request] = []
    for i, (t, row) in enumerate(zip(times, rows, strict=True)):
        copies = int(whole) + (1 if rng.random() < fraction else 0)
        if copies == 0:
            continue
        gap = (times[i + 1] if i + 1 < len(times) else duration_s) - t
        prompt, output = clip(sample.prompt_tokens[row], sample.output_tokens[row], max_model_len)
        out.append(Request(t, prompt, output))
        out.extend(Request(t + rng.random() * gap, prompt, output) for _ in range(copies - 1))
    out.sort(key=lambda r: r.arrival_s)
    return out


def rate(
    mean_rps: float, seed: int, duration_s: float, sample: TraceSample | None = None
) -> Callable[[float], float]:
    """The replay's expected arrival rate (requests/s) over the run: the tiled trace's count in each
    RATE_BIN_S minute times the scale factor, per second. It is what ``requests`` draws from
    (before thinning noise), so a peak read from it is the trace's busiest minute; past the run's
    end it holds the last minute's rate."""
    sample = sample or load_sample()
    _, _, factor = window(sample, mean_rps, duration_s, random.Random(seed))
    bins = max(1, math.ceil(duration_s / RATE_BIN_S))
    # Whole minutes, the last one counted past duration_s too, so a run ending mid-minute does not
    # read as a lull there.
    times, _ = tiled(sample, phase_s(sample, random.Random(seed)), bins * RATE_BIN_S)
    counts = [0] * bins
    for t in times:
        counts[min(bins - 1, int(t // RATE_BIN_S))] += 1
    per_s = [c * factor / RATE_BIN_S for c in counts]

    def at(t: float) -> float:
        return per_s[min(bins - 1, max(0, int(t // RATE_BIN_S)))]

    return at
