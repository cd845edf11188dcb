"""Streaming load test of an OpenAI-compatible chat-completions endpoint (vLLM's server).

Open loop (``constant``, ``poisson`` or a rate ``schedule``): requests start on their own clock
whatever the server does, so a slow server faces a growing backlog, as it would in production.
Closed loop (``closed``): a fixed number of clients each send the next request when the last
one ends, which measures throughput at a known concurrency (the simulator's calibration).
Every run is bounded by a request count, a duration or both.

Requests go through one event loop and one pool of kept-alive connections sized to the
concurrency (client.py: a minimal HTTP/1.1 client, because httpx's per-chunk cost made the tester
the bottleneck beyond 32 streams on a 2-core machine; docs/load-testing.md has the numbers). Each
request streams (``"stream": true``) and is timed per server-sent event on the loop's clock, with
the definitions of ``vllm bench serve`` (metrics.py): TTFT is the first event carrying a generated
token, inter-token latency the gaps between such events, end-to-end the last such event. vLLM
streams reasoning text in ``delta.reasoning_content`` (``delta.reasoning`` in newer releases)
and the answer in ``delta.content``; all three count as output. With
``stream_options.include_usage`` the final event reports ``usage.completion_tokens``.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import ssl
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from deepseek_eks.sizing.measured import (
    REPLICA_SETTINGS,
    SERVER_COUNTERS,
    VLLM_VERSION_KEY,
    replica_setting_problem,
    server_problems,
    setting_flag,
    vllm_version_problem,
)

from . import probe
from .client import BodyCut, ConnectFailed, ConnectTimedOut, NoResponse, Pool
from .metrics import goodput_rps, summary, tpot_s

ARRIVALS = ("constant", "poisson", "schedule", "closed")
# Mean prompt / output tokens per profile. "reasoning": DeepSeek-R1 emitted ~1,162 completion
# tokens on a sample prompt (Microsoft Azure HPC blog, "Performance analysis of DeepSeek R1 AI
# inference using vLLM on ND-H100-v5"); "long-reasoning": traces of thousands of tokens.
LENGTH_PROFILES = {"chat": (200, 300), "reasoning": (500, 1162), "long-reasoning": (1000, 8000)}
OUTPUT_TEXT_KEYS = ("content", "reasoning_content", "reasoning")
# Concurrent streams at which tools/bench_loadtest.py found this tester within 5 % of a fake
# server's true throughput on the project's 2-core machine (docs/load-testing.md).
VERIFIED_STREAMS = 128


class LoadTestError(ValueError):
    """A load-test configuration that cannot run."""


class StreamCut(Exception):
    """The response body ended before the stream's ``data: [DONE]``."""


def check_url(url: str) -> str:
    """``url`` if it is an http(s) base URL with a host; a LoadTestError naming --url if not."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LoadTestError(f"--url {url!r}: expected http://host[:port] or https://host[:port]")
    return url.rstrip("/")


def check_replica_setting(key: str, value: object, where: str) -> None:
    """A LoadTestError naming ``where`` the value came from (the flag, the stack's plan or the
    result that recorded it) when ``value`` cannot be the replica's ``key`` (one of
    sizing/measured.py's REPLICA_SETTINGS)."""
    if (problem := replica_setting_problem(key, value)) is not None:
        raise LoadTestError(f"{where} {value!r}: {problem}")


@dataclass(frozen=True)
class Arrivals:
    """How requests start: ``rate_rps`` for constant/poisson, ``schedule`` of (start_s, rate_rps)
    steps, or ``concurrency`` clients for closed."""

    mode: str = "poisson"
    rate_rps: float = 1.0
    schedule: tuple[tuple[float, float], ...] = ()
    concurrency: int = 1

    def __post_init__(self) -> None:
        if self.mode not in ARRIVALS:
            raise LoadTestError(f"--arrivals {self.mode!r}: use one of {', '.join(ARRIVALS)}")
        if self.mode in ("constant", "poisson") and self.rate_rps <= 0:
            raise LoadTestError(f"--rate must be positive, got {self.rate_rps}")
        if self.mode == "schedule" and (not self.schedule or any(r < 0 for _, r in self.schedule)):
            raise LoadTestError("--schedule needs start_s:rate_rps steps with rates >= 0, e.g. 0:1,60:4")
        if self.mode == "closed" and self.concurrency < 1:
            raise LoadTestError(f"--concurrency must be at least 1, got {self.concurrency}")


@dataclass(frozen=True)
class Lengths:
    """Prompt and output lengths in tokens; ``exponential`` draws around the means or ``fixed``."""

    prompt_tokens: int = LENGTH_PROFILES["reasoning"][0]
    output_tokens: int = LENGTH_PROFILES["reasoning"][1]
    distribution: str = "fixed"

    def __post_init__(self) -> None:
        bad = [
            f"{flag} must be at least 1, got {value}"
            for flag, value in (
                ("--prompt-tokens", self.prompt_tokens),
                ("--output-tokens", self.output_tokens),
            )
            if value < 1
        ]
        if bad:
            raise LoadTestError("; ".join(bad))

    def draw(self, rng: random.Random) -> tuple[int, int]:
        if self.distribution == "exponential":
            return (
                max(1, round(rng.expovariate(1 / self.prompt_tokens))),
                max(1, round(rng.expovariate(1 / self.output_tokens))),
            )
        return self.prompt_tokens, self.output_tokens


@dataclass(frozen=True)
class LoadTestConfig:
    url: str
    model: str
    arrivals: Arrivals = field(default_factory=Arrivals)
    lengths: Lengths = field(default_factory=Lengths)
    max_requests: int | None = None
    duration_s: float | None = None
    timeout_s: float = 600.0  # whole request, connection to the last event
    connect_timeout_s: float = 10.0
    # Longest silence between bytes: the wait for the first token (queueing and prefill) counts.
    read_timeout_s: float = 300.0
    # Open loop only: connections at once; later arrivals wait for one inside their timeout.
    max_connections: int = 1024
    seed: int = 1
    api_key: str | None = None
    ignore_eos: bool = True  # vLLM extension: generate exactly max_tokens, so lengths are known
    # SLOs in milliseconds for goodput, as vllm bench serve's --goodput (metrics.parse_goodput).
    goodput_ms: tuple[tuple[str, float], ...] = ()
    # The replica's --max-num-seqs (the plan's): a calibration point above it is flagged
    # (point_warnings), and the refit runs the replica model under it (sizing/measured.py).
    max_num_seqs: int | None = None
    # The EC2 instance type of the replica under test, recorded so a refit on another type is
    # refused rather than taken for this one's speed (sizing/measured.py).
    instance_type: str | None = None
    # Its parallelism, weight format and KV-cache element type (the plan's), recorded so a refit
    # for a replica deployed otherwise is refused (sizing/measured.py ReplicaSetup).
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.max_requests is None and self.duration_s is None:
            raise LoadTestError("bound the run: give --requests N, --duration SECONDS or both")
        if self.max_requests is not None and self.max_requests < 1:
            raise LoadTestError(f"--requests must be at least 1, got {self.max_requests}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise LoadTestError(f"--duration must be positive, got {self.duration_s}")
        for flag, value in (
            ("--timeout", self.timeout_s),
            ("--connect-timeout", self.connect_timeout_s),
            ("--read-timeout", self.read_timeout_s),
            ("--max-connections", self.max_connections),
        ):
            if value <= 0:
                raise LoadTestError(f"{flag} must be positive, got {value}")
        check_url(self.url)
        for key in REPLICA_SETTINGS:
            if (value := getattr(self, key)) is not None:
                check_replica_setting(key, value, setting_flag(key))

    def connections(self) -> int:
        """Pool size: one connection per closed-loop client, else ``max_connections``."""
        if self.arrivals.mode == "closed":
            return self.arrivals.concurrency
        return self.max_connections

    def pool(self) -> Pool:
        """The connections of one run: ``connections()`` of them, kept alive between requests."""
        return Pool(check_url(self.url), self.connections(), self.connect_timeout_s)


def _get(url: str, path: str, timeout_s: float) -> tuple[bytes | None, str | None]:
    """The body of GET ``url``+``path``, or None and why not. Straight to the server, as the
    load's own connections go (client.py): no proxy from the environment."""
    request = urllib.request.Request(check_url(url) + path)
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ssl.create_default_context())
    )
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return response.read(), None
    except urllib.error.HTTPError as error:
        return None, f"GET {path} answered {error.code}"
    except (urllib.error.URLError, OSError) as error:
        return None, f"GET {path}: {getattr(error, 'reason', None) or error}"


def server_version(url: str, timeout_s: float) -> tuple[str | None, str | None]:
    """The vLLM release the server at ``url`` reports (GET /version), and None; or None and why
    it could not be read. Asked once before the load starts, so it times nothing."""
    body, why = _get(url, probe.VERSION_PATH, timeout_s)
    if body is None:
        return None, why
    try:
        answer = json.loads(body)
    except ValueError:
        return None, f"GET {probe.VERSION_PATH} answered no JSON"
    version = probe.release(answer)
    if vllm_version_problem(version) is not None:
        return None, f"GET {probe.VERSION_PATH} answered {str(answer)[:80]!r}, not a vLLM release"
    return version, None


def server_counters(url: str, timeout_s: float) -> dict[str, float]:
    """The server's counters a run is checked against (SERVER_COUNTERS, GET /metrics), or {}
    where it does not answer with them (through the load balancer, which routes only /v1)."""
    body, _ = _get(url, probe.METRICS_PATH, timeout_s)
    try:
        return probe.counter_totals(body.decode(), tuple(SERVER_COUNTERS)) if body is not None else {}
    except (UnicodeDecodeError, ValueError, IndexError):
        return {}


@dataclass
class RequestResult:
    start_s: float  # since the run began
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float | None = None
    output_tokens: int = 0
    # The prompt's tokens as the server counted them (usage.prompt_tokens: the chat template
    # included), else the length asked for.
    prompt_tokens: int = 0
    error: str | None = None


def _prompt(run: str, index: int, tokens: int) -> str:
    # A first word distinct per request and per run defeats prefix caching, which vLLM keeps on
    # by default and which hashes whole 16-token blocks: a block with one differing token is a
    # miss, within a run and against an earlier run's cached prompts alike. "go" is one token in
    # the Llama and Qwen vocabularies, so the prompt is close to ``tokens`` tokens long.
    return f"{run}-{index}: " + " ".join(["go"] * max(0, tokens - 3))


def run_id() -> str:
    """A run's own prompt prefix: drawn apart from the seeded arrivals and lengths, which a
    rerun repeats, so a rerun's prompts are not the cached prompts of the last."""
    return f"{random.SystemRandom().getrandbits(32):08x}"


def split_events(buffer: bytearray) -> list[bytes]:
    """Complete server-sent events taken off the front of ``buffer``."""
    out: list[bytes] = []
    while True:
        cut = min((i for i in (buffer.find(b"\n\n"), buffer.find(b"\r\n\r\n")) if i >= 0), default=-1)
        if cut < 0:
            return out
        sep = 4 if buffer[cut : cut + 4] == b"\r\n\r\n" else 2
        out.append(bytes(buffer[:cut]))
        del buffer[: cut + sep]


# HTTP statuses reported on their own; any other failure status counts by class (http_4xx).
NAMED_STATUSES = (429, 500, 502, 503, 504)


def status_error(code: int) -> str:
    """The error kind of a non-200 response."""
    return f"http_{code}" if code in NAMED_STATUSES else f"http_{code // 100}xx"


def error_kind(error: BaseException, streaming: bool) -> str:
    """The error kind of a failed request; ``streaming`` once the 200 status has arrived."""
    if isinstance(error, ConnectTimedOut):
        return "connect_timeout"
    if isinstance(error, TimeoutError):
        return "timeout"  # the whole-request bound or a silence longer than the read timeout
    if isinstance(error, StreamCut | BodyCut):
        return "stream_cut"
    if isinstance(error, ConnectFailed):
        return "connection"
    if isinstance(error, NoResponse | ConnectionError):
        return "stream_cut" if streaming else "no_response"
    return "bad_response"  # an event that is not JSON, or any other protocol error


def request_body(config: LoadTestConfig, run: str, index: int, prompt: int, output: int) -> bytes:
    """The streaming chat-completions request of request ``index`` of the run ``run`` (run_id),
    usage in the last event."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [{"role": "user", "content": _prompt(run, index, prompt)}],
        "max_tokens": output,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if config.ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body).encode()


def streamed_output(delta: dict[str, Any]) -> bool:
    """Whether an event's delta carries a generated token, as ``vllm bench serve`` decides
    (vllm/benchmarks/lib/endpoint_request_func.py, ``_choice_has_streamed_output``): text,
    reasoning or a tool call, or an empty ``content`` without ``role`` (a token that decodes to
    nothing); the opening chunk has ``role`` and empty content and is not a token. Older vLLM
    releases stream reasoning as ``reasoning_content``, counted too."""
    if any(delta.get(k) for k in OUTPUT_TEXT_KEYS) or delta.get("tool_calls") or delta.get("function_call"):
        return True
    return delta.get("content") == "" and "role" not in delta


async def _one(
    config: LoadTestConfig, pool: Pool, run: str, index: int, prompt: int, output: int, t0: float
) -> RequestResult:
    loop = asyncio.get_running_loop()
    start = loop.time()
    result = RequestResult(start_s=start - t0)
    headers = {"Accept": "text/event-stream"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    last_token: float | None = None
    chunks_with_text = 0
    usage_tokens: int | None = None
    usage_prompt: int | None = None
    done = False
    streaming = False
    whole = start + config.timeout_s
    try:
        # One timer for both bounds: the whole request (which includes waiting for a pooled
        # connection), and, once the request is written, the longest silence between reads (moved
        # forward on every read); either expiry is a "timeout".
        async with asyncio.timeout(whole) as bound:

            def sent() -> None:
                bound.reschedule(min(whole, loop.time() + config.read_timeout_s))

            body = request_body(config, run, index, prompt, output)
            async with pool.post("/v1/chat/completions", body, headers, sent) as response:
                if response.status != 200:
                    await response.read_all()
                    result.error = status_error(response.status)
                    return result
                streaming = True
                buffer = bytearray()
                async for chunk in response.body():
                    now = loop.time()
                    bound.reschedule(min(whole, now + config.read_timeout_s))
                    buffer += chunk
                    for event in split_events(buffer):
                        for line in event.splitlines():
                            if not line.startswith(b"data:"):
                                continue
                            payload = line[5:].strip()
                            if payload == b"[DONE]":
                                done = True
                                continue
                            data = json.loads(payload)
                            if data.get("usage"):
                                usage_tokens = data["usage"].get("completion_tokens")
                                usage_prompt = data["usage"].get("prompt_tokens")
                            choices = data.get("choices")
                            if choices and streamed_output(choices[0].get("delta") or {}):
                                if last_token is None:
                                    result.ttft_s = now - start
                                else:
                                    result.itl_s.append(now - last_token)
                                last_token = now
                                chunks_with_text += 1
                if not done:
                    raise StreamCut("the stream ended without data: [DONE]")
        if last_token is None:
            # vllm bench serve fails a request that never streamed a token (no TTFT to measure).
            result.error = "no_tokens"
            return result
        # E2EL as vllm bench serve measures it: request start to the last token's event.
        result.e2e_s = last_token - start
        result.output_tokens = usage_tokens if usage_tokens is not None else chunks_with_text
        result.prompt_tokens = usage_prompt if usage_prompt is not None else prompt
    except (
        TimeoutError,
        StreamCut,
        BodyCut,
        NoResponse,
        ConnectFailed,
        ConnectTimedOut,
        ConnectionError,
        ValueError,
    ) as error:
        result.error = error_kind(error, streaming)
    return result


@dataclass
class Progress:
    sent: int = 0
    finished: int = 0
    errors: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    output_tokens: int = 0


def next_arrival_gap(arrivals: Arrivals, rng: random.Random, now_s: float) -> float | None:
    """Seconds to the next open-loop arrival after ``now_s``; None when the schedule has ended
    at rate 0."""
    if arrivals.mode == "constant":
        return 1.0 / arrivals.rate_rps
    if arrivals.mode == "poisson":
        return rng.expovariate(arrivals.rate_rps)
    # Piecewise-constant Poisson rate; memorylessness lets each step restart the draw.
    t = now_s
    steps = sorted(arrivals.schedule)
    while True:
        current = [r for s, r in steps if s <= t]
        rate = current[-1] if current else 0.0
        later = [s for s, _ in steps if s > t]
        if rate > 0:
            gap = rng.expovariate(rate)
            if not later or t + gap < later[0]:
                return t + gap - now_s
        if not later:
            return None
        t = later[0]


async def run(
    config: LoadTestConfig, on_progress: Callable[[Progress, float], None] | None = None
) -> dict[str, Any]:
    """Run the load test and return its report (see ``report``)."""
    # What the server says of itself, before and after the load (probe.py): the load balancer
    # routes only /v1 (components/serving/vllm.py), so through it neither answers, and a
    # port-forward or one pod's address reaches both.
    version = await asyncio.to_thread(server_version, config.url, config.connect_timeout_s)
    before = await asyncio.to_thread(server_counters, config.url, config.connect_timeout_s)
    rng = random.Random(config.seed)
    run_prefix = run_id()
    pool = config.pool()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    deadline = t0 + config.duration_s if config.duration_s is not None else math.inf
    limit = config.max_requests if config.max_requests is not None else math.inf
    progress = Progress()
    results: list[RequestResult] = []
    busy_s = 0.0

    async def send(index: int) -> None:
        nonlocal busy_s
        prompt, output = config.lengths.draw(rng)
        progress.sent += 1
        progress.in_flight += 1
        progress.max_in_flight = max(progress.max_in_flight, progress.in_flight)
        try:
            result = await _one(config, pool, run_prefix, index, prompt, output, t0)
        finally:
            progress.in_flight -= 1
        results.append(result)
        progress.finished += 1
        progress.errors += result.error is not None
        progress.output_tokens += result.output_tokens
        busy_s += loop.time() - t0 - result.start_s  # Little's law: the whole request, [DONE] included

    def may_send() -> bool:
        return progress.sent < limit and loop.time() < deadline

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1.0)
            if on_progress:
                on_progress(progress, loop.time() - t0)

    ticking = asyncio.create_task(ticker())
    try:
        if config.arrivals.mode == "closed":

            async def client() -> None:
                while may_send():
                    await send(progress.sent)

            await asyncio.gather(*(client() for _ in range(config.arrivals.concurrency)))
        else:
            tasks: set[asyncio.Task[None]] = set()
            next_at = 0.0
            first = True
            while True:
                # A constant rate starts at once; random and scheduled arrivals draw their first gap.
                gap = (
                    0.0
                    if first and config.arrivals.mode == "constant"
                    else next_arrival_gap(config.arrivals, rng, next_at)
                )
                first = False
                if gap is None:
                    break
                next_at += gap
                wait = t0 + next_at - loop.time()
                if t0 + next_at >= deadline:
                    break
                if wait > 0:
                    await asyncio.sleep(wait)
                if not may_send():
                    break
                task = asyncio.create_task(send(progress.sent))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
    finally:
        ticking.cancel()
        pool.close()
    elapsed = loop.time() - t0
    if on_progress:
        on_progress(progress, elapsed)
    after = await asyncio.to_thread(server_counters, config.url, config.connect_timeout_s)
    return report(config, results, elapsed, progress.max_in_flight, busy_s, version, (before, after))


def point_warnings(concurrency: int, max_in_flight: int, max_num_seqs: int | None) -> list[str]:
    """Why a calibration point may not mean what it says: more streams than this tester was
    verified to time correctly, or more than the server runs at once (the rest only queue)."""
    out = []
    if max_in_flight > VERIFIED_STREAMS:
        out.append(
            f"{max_in_flight} streams in flight: beyond the {VERIFIED_STREAMS} this tester was verified "
            "to measure correctly (tools/bench_loadtest.py); throughput may be under-reported"
        )
    if max_num_seqs is not None and concurrency > max_num_seqs:
        out.append(
            f"concurrency {concurrency} is above the plan's max_num_seqs {max_num_seqs}: requests beyond it "
            "queue in the server, so this point is the saturated throughput, not that concurrency's"
        )
    return out


def point_lengths(prompt_tokens: float, output_tokens: float, completed: int) -> dict[str, float]:
    """A calibration point's ``prompt_tokens`` and ``output_tokens``: the mean lengths of its
    ``completed`` requests, from their totals (none without a completed request). The replica
    model's refit of the point (simulate --calibration) times it at these, not at the planning
    lengths."""
    if completed <= 0:
        return {}
    return {
        "prompt_tokens": round(prompt_tokens / completed, 1),
        "output_tokens": round(output_tokens / completed, 1),
    }


def report(
    config: LoadTestConfig,
    results: list[RequestResult],
    elapsed_s: float,
    max_in_flight: int,
    busy_s: float,
    version: tuple[str | None, str | None] = (None, None),
    counters: tuple[dict[str, float], dict[str, float]] = ({}, {}),
) -> dict[str, Any]:
    """Latency statistics and throughput as ``vllm bench serve`` defines them (metrics.py), goodput
    under the configured SLOs, errors by kind, and a calibration point for the simulator (mean
    concurrency by Little's law: request-seconds / elapsed), flagged where it may mislead.
    ``version``: the server's vLLM release, or why it is unknown (``server_version``), recorded
    in ``config`` beside the replica's settings (sizing/measured.py reads it there). ``counters``:
    the server's before and after the run (``server_counters``): the point's ``server`` is what
    they rose by, and each problem they show is a warning (sizing/measured.py server_problems)."""
    ok = [r for r in results if r.error is None]
    output_tokens = sum(r.output_tokens for r in ok)
    mean_concurrency = busy_s / elapsed_s if elapsed_s else 0.0
    tokens_per_s = output_tokens / elapsed_s if elapsed_s else 0.0
    timed = [(r.ttft_s, r.e2e_s, r.output_tokens) for r in ok if r.ttft_s is not None and r.e2e_s is not None]
    tpots = [t for t in (tpot_s(e2e, ttft, n) for ttft, e2e, n in timed) if t is not None]
    goodput = None
    if config.goodput_ms:
        slos = dict(config.goodput_ms)
        good, rate = goodput_rps(slos, timed, elapsed_s)
        goodput = {"slo_ms": slos, "good_requests": good, "request_goodput_rps": round(rate, 4)}
    concurrency = max(1, round(mean_concurrency))
    lengths = point_lengths(sum(r.prompt_tokens for r in ok), output_tokens, len(ok))
    # Streams the tester timed at once: open-loop arrivals beyond the pool wait in the client.
    streams = min(max_in_flight, config.connections())
    server = probe.run_deltas(*counters, output_tokens, SERVER_COUNTERS)
    warnings = point_warnings(concurrency, streams, config.max_num_seqs) + server_problems(server)
    cfg = asdict(config)
    cfg.pop("api_key")
    release, unknown = version
    cfg[VLLM_VERSION_KEY] = release
    return {
        "config": cfg,
        **({"vllm_version_unknown": unknown} if unknown else {}),
        "elapsed_s": round(elapsed_s, 3),
        "requests": {"sent": len(results), "completed": len(ok), "failed": len(results) - len(ok)},
        "errors": dict(sorted(Counter(r.error for r in results if r.error).items())),
        "achieved_rps": round(len(results) / elapsed_s, 4) if elapsed_s else 0.0,
        "request_throughput_rps": round(len(ok) / elapsed_s, 4) if elapsed_s else 0.0,
        "output_tokens": output_tokens,
        "output_tokens_per_s": round(tokens_per_s, 3),
        "ttft_s": summary([t[0] for t in timed]),
        "tpot_s": summary(tpots),
        "itl_s": summary([x for r in ok for x in r.itl_s]),
        "e2e_s": summary([t[1] for t in timed]),
        "goodput": goodput,
        "max_in_flight": max_in_flight,
        "warnings": warnings,
        "points": [
            {
                "concurrency": concurrency,
                "output_tokens_per_s": round(tokens_per_s, 3),
                **lengths,
                # How they were drawn: the refit times exponential lengths as such (sizing/measured.py).
                "length_distribution": config.lengths.distribution,
                # Only a closed loop's concurrency is a count of streams the refit can time.
                "arrivals": config.arrivals.mode,
                **({"server": server} if server else {}),
                "max_in_flight": max_in_flight,
                "source": "automation loadtest",
                "warnings": warnings,
            }
        ],
        "timeline": [
            {"start_s": round(r.start_s, 4), "ttft_s": r.ttft_s, "e2e_s": r.e2e_s, "error": r.error}
            for r in sorted(results, key=lambda r: r.start_s)
        ],
    }


def print_progress(progress: Progress, elapsed_s: float) -> None:
    """One live status line on stderr."""
    rate = progress.output_tokens / elapsed_s if elapsed_s else 0.0
    sys.stderr.write(
        f"\r{elapsed_s:7.1f}s  sent {progress.sent}  done {progress.finished}  errors {progress.errors}  "
        f"in flight {progress.in_flight}  {rate:8.1f} output tok/s"
    )
    sys.stderr.flush()
