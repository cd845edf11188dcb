"""The load tester against a local streaming server with known pacing: the first token 200 ms after
the request, then one token every 20 ms, so every figure the tester reports has a true value.
The server listens on 127.0.0.1 only and misbehaves on request (429, 500, cut streams, stalls)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from deepseek_eks.perf.loadtest import cli, runner
from deepseek_eks.perf.loadtest.fake_server import Pacing, ServerLog, listen, serve
from deepseek_eks.perf.loadtest.metrics import is_good, parse_goodput, summary, tpot_s
from deepseek_eks.perf.loadtest.runner import (
    VERIFIED_STREAMS,
    Arrivals,
    Lengths,
    LoadTestConfig,
    LoadTestError,
    next_arrival_gap,
    point_warnings,
    request_body,
    run,
    split_events,
)
from deepseek_eks.perf.simulate.replica import load_calibration
from deepseek_eks.perf.stats import percentile

FIRST_TOKEN_S = 0.200
PER_TOKEN_S = 0.020
REASONING_TOKENS = 3  # the first tokens stream as reasoning_content, as vLLM's R1 parser does


@dataclass
class ServerStats:
    requests: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    bodies: list[dict] = field(default_factory=list)


# The server closes every connection after one response and says so (RFC 9112 section 9.6), so
# the client's pool never reuses a socket that is closing.
CLOSE = b"\r\nConnection: close\r\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def no_version_route(head: bytes, writer: asyncio.StreamWriter) -> bool:
    """Whether ``head`` is one of the tester's GETs (runner.server_version and server_counters,
    before and after the load), answered here as a server without those routes does: 404, so
    these servers count only the load's requests."""
    if not head.startswith(b"GET "):
        return False
    writer.write(b"HTTP/1.1 404 Not Found" + CLOSE + b"Content-Length: 0\r\n\r\n")
    writer.close()
    return True


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: ServerStats) -> None:
    start = asyncio.get_running_loop().time()
    head = await reader.readuntil(b"\r\n\r\n")
    if no_version_route(head, writer):
        return
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    body = json.loads(await reader.readexactly(length))
    stats.requests += 1
    stats.bodies.append(body)
    stats.in_flight += 1
    stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
    try:
        behaviour = body["model"]
        if behaviour in ("limited", "broken"):
            status = b"429 Too Many Requests" if behaviour == "limited" else b"500 Internal Server Error"
            text = b'{"error": "no"}'
            writer.write(b"HTTP/1.1 " + status + CLOSE + b"Content-Length: %d\r\n\r\n" % len(text) + text)
            return
        if behaviour == "stall":
            await asyncio.sleep(5)
            return
        if behaviour == "hangup":
            return  # the connection closes with no response at all
        if behaviour == "empty":
            body["max_tokens"] = 0  # a stream that ends properly without a single token
        writer.write(
            b"HTTP/1.1 200 OK"
            + CLOSE
            + b"Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        tokens = body["max_tokens"]
        loop = asyncio.get_running_loop()
        for k in range(tokens):
            await asyncio.sleep(max(0.0, start + FIRST_TOKEN_S + k * PER_TOKEN_S - loop.time()))
            key = "reasoning_content" if k < REASONING_TOKENS else "content"
            event = _event({"choices": [{"index": 0, "delta": {key: f"t{k}"}}]})
            if k == 1:  # one event split across two chunks: the parser must reassemble it
                writer.write(_chunk(event[:10]) + _chunk(event[10:]))
            else:
                writer.write(_chunk(event))
            await writer.drain()
            if behaviour == "cut" and k == 2:
                return  # connection closes mid-stream
        # usage as vLLM sends it; this server counts a prompt's tokens as its content's words.
        prompt = len(body["messages"][0]["content"].split())
        usage = {"prompt_tokens": prompt, "completion_tokens": tokens}
        writer.write(_chunk(_event({"choices": [], "usage": usage})))
        writer.write(_chunk(b"data: [DONE]\r\n\r\n") + b"0\r\n\r\n")
        await writer.drain()
    finally:
        stats.in_flight -= 1
        writer.close()


@asynccontextmanager
async def streaming_server() -> AsyncIterator[tuple[str, ServerStats]]:
    stats = ServerStats()
    async with listen(lambda r, w: _handle(r, w, stats)) as url:
        yield url, stats


def load_test(model: str, **kwargs: object) -> tuple[dict, ServerStats]:
    async def go() -> tuple[dict, ServerStats]:
        async with streaming_server() as (url, stats):
            config = LoadTestConfig(url=url, model=model, **kwargs)  # type: ignore[arg-type]
            return await run(config), stats

    return asyncio.run(go())


TEN_TOKENS = Lengths(prompt_tokens=20, output_tokens=10)


def test_measured_figures_match_the_server_pacing() -> None:
    report, stats = load_test(
        "ok", arrivals=Arrivals("closed", concurrency=4), lengths=TEN_TOKENS, max_requests=8, timeout_s=5
    )
    assert report["requests"] == {"sent": 8, "completed": 8, "failed": 0}
    assert stats.requests == 8 and stats.peak_in_flight == 4
    # Truth: TTFT 0.200 s, ITL 0.020 s, E2E 0.200 + 9 * 0.020 = 0.380 s; allow scheduling jitter.
    assert 0.195 <= report["ttft_s"]["p50"] <= 0.26
    assert 0.015 <= report["itl_s"]["p50"] <= 0.03
    assert report["itl_s"]["count"] == 8 * 9
    assert 0.375 <= report["e2e_s"]["p50"] <= 0.46
    assert report["output_tokens"] == 80  # from usage.completion_tokens
    assert report["output_tokens_per_s"] == pytest.approx(80 / report["elapsed_s"], rel=0.01)
    # Four clients back to back: two rounds of ~0.38 s.
    assert 0.75 <= report["elapsed_s"] <= 1.2
    (point,) = report["points"]
    assert (point["concurrency"], point["output_tokens_per_s"]) == (4, report["output_tokens_per_s"])
    assert point["warnings"] == [] and report["warnings"] == []
    sent = stats.bodies[0]
    assert sent["stream"] is True and sent["max_tokens"] == 10 and sent["ignore_eos"] is True


def test_open_loop_keeps_sending_while_responses_stream() -> None:
    report, stats = load_test(
        "ok", arrivals=Arrivals("constant", rate_rps=20), lengths=TEN_TOKENS, duration_s=0.5, timeout_s=5
    )
    # One request every 50 ms for 0.5 s, each streaming for 0.38 s: about 8 at once.
    assert stats.requests == 10
    assert stats.peak_in_flight >= 6
    assert report["requests"]["completed"] == 10


def test_poisson_arrivals_are_seeded_and_at_the_rate() -> None:
    poisson = Arrivals("poisson", rate_rps=4.0)
    draws = [next_arrival_gap(poisson, rng, 0.0) for rng in [random.Random(9)] for _ in range(4000)]
    again = [next_arrival_gap(poisson, rng, 0.0) for rng in [random.Random(9)] for _ in range(4000)]
    assert draws == again
    assert sum(d for d in draws if d is not None) / 4000 == pytest.approx(0.25, rel=0.05)  # 1 / 4 req/s


def test_schedule_waits_for_its_first_nonzero_step() -> None:
    steps = Arrivals("schedule", schedule=((0.0, 0.0), (2.0, 10.0), (3.0, 0.0)))
    gap = next_arrival_gap(steps, random.Random(1), 0.0)
    assert gap is not None and 2.0 <= gap < 3.0
    assert next_arrival_gap(steps, random.Random(1), 3.0) is None  # rate 0 forever after 3 s


@pytest.mark.parametrize(
    ("model", "timeouts", "kind"),
    [
        ("limited", {"timeout_s": 5.0}, "http_429"),
        ("broken", {"timeout_s": 5.0}, "http_500"),
        ("cut", {"timeout_s": 5.0}, "stream_cut"),
        ("hangup", {"timeout_s": 5.0}, "no_response"),
        ("empty", {"timeout_s": 5.0}, "no_tokens"),  # vllm bench serve fails these too
        ("stall", {"timeout_s": 0.3}, "timeout"),  # the whole-request bound
        ("stall", {"timeout_s": 5.0, "read_timeout_s": 0.3}, "timeout"),  # silence between bytes
    ],
)
def test_errors_by_kind(model: str, timeouts: dict[str, float], kind: str) -> None:
    report, _ = load_test(
        model, arrivals=Arrivals("closed", concurrency=2), lengths=TEN_TOKENS, max_requests=2, **timeouts
    )
    assert report["errors"] == {kind: 2}
    assert report["requests"]["completed"] == 0
    assert report["ttft_s"]["count"] == 0
    assert report["elapsed_s"] < 2.0  # the stalls were cut at 0.3 s, not waited out (5 s)


def test_open_loop_connections_are_bounded_by_the_pool() -> None:
    # 20 req/s of 0.38 s streams would hold ~8 at once; a pool of 3 lets only 3 reach the server.
    report, stats = load_test(
        "ok",
        arrivals=Arrivals("constant", rate_rps=20),
        lengths=TEN_TOKENS,
        duration_s=0.5,
        timeout_s=5,
        max_connections=3,
    )
    assert stats.peak_in_flight == 3
    assert report["requests"]["completed"] == 10
    assert report["max_in_flight"] >= 6  # started on their own clock, queued in the client
    # Waiting for a connection is part of the measured latency, as a user would see it.
    assert report["ttft_s"]["p99"] > 0.4


def test_closed_loop_pool_matches_the_clients() -> None:
    config = LoadTestConfig(
        url="http://127.0.0.1:1", model="m", arrivals=Arrivals("closed", concurrency=7), max_requests=1
    )
    assert config.connections() == 7
    with pytest.raises(LoadTestError, match="--read-timeout must be positive"):
        LoadTestConfig(url="http://127.0.0.1:1", model="m", max_requests=1, read_timeout_s=0)


def test_connection_refused_is_reported() -> None:
    async def go() -> dict:
        async with streaming_server() as (url, _):
            pass  # closed again: nothing listens on the port now
        return await run(LoadTestConfig(url=url, model="ok", lengths=TEN_TOKENS, max_requests=1, timeout_s=2))

    assert asyncio.run(go())["errors"] == {"connection": 1}


def test_sse_events_split_on_blank_lines() -> None:
    buffer = bytearray(b"data: 1\n\ndata: 2\r\n\r\ndata: 3")
    assert split_events(buffer) == [b"data: 1", b"data: 2"]
    assert buffer == bytearray(b"data: 3")


def test_lengths_must_be_positive() -> None:
    with pytest.raises(LoadTestError, match=r"--prompt-tokens must be at least 1.*--output-tokens must be"):
        Lengths(prompt_tokens=0, output_tokens=-1)


def test_a_run_must_be_bounded() -> None:
    with pytest.raises(LoadTestError, match="--requests N, --duration"):
        LoadTestConfig(url="http://127.0.0.1:1", model="m")
    with pytest.raises(ValueError, match="--url"):
        LoadTestConfig(url="ftp://x", model="m", max_requests=1)


def test_cli_writes_json_that_calibrates_the_simulator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"

    async def go() -> int:
        async with streaming_server() as (url, _):
            args = [
                "--url",
                url,
                "--model",
                "ok",
                "--arrivals",
                "closed",
                "--concurrency",
                "3",
                "--requests",
                "3",
            ]
            args += ["--prompt-tokens", "20", "--output-tokens", "10", "--out", str(out), "--quiet"]
            return await asyncio.to_thread(cli.main, args)

    assert asyncio.run(go()) == 0
    printed = capsys.readouterr().out
    assert "TTFT" in printed and "3 completed" in printed
    assert "lengths        mean " in printed and " / 10 output tokens per completed request" in printed
    pytest.importorskip("matplotlib")
    png = tmp_path / "report.png"
    assert cli.plot(json.loads(out.read_text()), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curve = load_calibration(out)
    assert curve.points[0][0] == 3
    assert curve.points[0][1] == json.loads(out.read_text())["output_tokens_per_s"]
    # The point carries its requests' mean lengths, so the refit times it at those: the output
    # from usage.completion_tokens (the server streams max_tokens), the prompt as the server
    # counted it (usage.prompt_tokens: this server counts the content's words), not the 20 asked for.
    config = LoadTestConfig(url="http://127.0.0.1:1", model="ok", max_requests=3)
    bodies = [json.loads(request_body(config, "0a1b2c3d", i, 20, 10)) for i in range(3)]
    counted = [len(b["messages"][0]["content"].split()) for b in bodies]
    (measured,) = curve.measurements
    assert measured.lengths_stated and measured.output_tokens == 10
    assert measured.prompt_tokens == pytest.approx(sum(counted) / 3) and measured.prompt_tokens != 20
    # ...and how its lengths were drawn (here fixed, the default), which the refit times them by;
    # a run with --lengths exponential says so.
    assert json.loads(out.read_text())["points"][0]["length_distribution"] == "fixed"
    assert not measured.exponential_lengths
    exponential = replace(config, lengths=Lengths(20, 10, "exponential"))
    assert runner.report(exponential, [], 1.0, 0, 0.0)["points"][0]["length_distribution"] == "exponential"


def test_cli_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["--url", "http://127.0.0.1:1", "--model", "m", "--duration", "1", "--schedule", "0-1"]) == 2
    )
    assert "--schedule" in capsys.readouterr().err
    assert cli.main(["--url", "http://127.0.0.1:1", "--model", "m"]) == 2


REFERENCE = Path(__file__).parents[2] / "reference" / "upstream" / "vllm-bench-serve"
JOB_ARGS = ["--url", "http://vllm.deepseek.svc.cluster.local", "--model", "r1-distill-qwen-7b"]
JOB_ARGS += ["--arrivals", "closed", "--concurrency", "32", "--requests", "640", "--prompt-tokens", "500"]
JOB_ARGS += ["--output-tokens", "1000", "--goodput", "ttft:5000", "tpot:50", "--max-num-seqs", "64"]
JOB_ARGS += ["--out", "local.json", "--as-job"]


def test_job_runs_vllm_bench_serve_with_flags_it_has(capsys: pytest.CaptureFixture[str]) -> None:
    import kubernetes_validate
    import yaml

    from deepseek_eks.components.versions import VLLM_IMAGE
    from deepseek_eks.settings.model import DEFAULT_KUBERNETES_VERSION
    from deepseek_eks.sizing.catalog import model_catalog

    assert cli.main(JOB_ARGS) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    for document in documents:
        kubernetes_validate.validate(document, DEFAULT_KUBERNETES_VERSION, strict=True)
    (job,) = [d for d in documents if d["kind"] == "Job"]
    assert sorted(d["kind"] for d in documents) == ["Job", "NetworkPolicy", "NetworkPolicy"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == VLLM_IMAGE  # the pinned image carries vllm bench serve
    shell, flag, script, name, url, *args = container["command"]
    assert (shell, flag, name) == ("sh", "-c", "loadtest")
    assert 'vllm bench serve --seed "$(date +%s)" "$@"' in script  # a fresh seed unless --seed is given
    assert url == "http://vllm.deepseek.svc.cluster.local" and "--seed" not in args
    # Every flag passed is one vLLM 0.33.0's parser has (reference snapshot), with our values.
    known = set(json.loads((REFERENCE / "bench-serve-flags.json").read_text())["flags"])
    passed = [a for a in args if a.startswith("--")]
    assert set(passed) <= known, set(passed) - known
    value = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    assert value["--backend"] == "openai-chat" and value["--dataset-name"] == "random"
    assert value["--max-concurrency"] == "32" and value["--num-prompts"] == "640"
    assert (value["--random-input-len"], value["--random-output-len"]) == ("500", "1000")
    assert value["--served-model-name"] == "r1-distill-qwen-7b"
    assert value["--tokenizer"] == model_catalog()["r1-distill-qwen-7b"].hf_repo
    assert args[args.index("--goodput") + 1 : args.index("--goodput") + 3] == ["ttft:5000", "tpot:50"]
    assert "--save-result" in args and "local.json" not in args
    key = next(e for e in container["env"] if e["name"] == "OPENAI_API_KEY")["valueFrom"]["secretKeyRef"]
    assert key["optional"] is True  # vllm bench serve reads OPENAI_API_KEY (reference snapshot)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_job_refuses_what_vllm_bench_serve_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--url", "http://x", "--model", "unknown-model", "--arrivals", "constant", "--duration", "60"]
    assert cli.main([*args, "--lengths", "exponential", "--as-job"]) == 2
    err = capsys.readouterr().err
    # Every problem at once, the unknown tokenizer and the unreachable URL included.
    assert "--arrivals constant" in err and "--duration" in err and "--lengths exponential" in err
    assert "--tokenizer" in err
    assert "--url http://x" in err and "http://vllm.deepseek.svc.cluster.local" in err


@pytest.mark.parametrize(
    "url, reachable",
    [
        ("http://vllm.deepseek.svc.cluster.local", True),
        ("http://vllm.deepseek:80", True),
        ("https://llm.example.com", True),  # HTTPS egress is open for the tokenizer download
        ("http://internal-k8s-alb.us-east-1.elb.amazonaws.com", False),
        ("http://vllm.other.svc.cluster.local", False),
        ("http://10.0.3.7:8000", True),  # one vLLM pod's own address: the egress rule's peer and port
        ("http://10.0.3.7:80", False),  # a pod address on another port
        ("http://10.0.3.7", False),
    ],
)
def test_the_job_refuses_a_url_its_policies_would_drop(url: str, reachable: bool) -> None:
    from deepseek_eks.perf.loadtest.job import url_problem

    assert (url_problem(url, "deepseek") is None) is reachable


def bench_result(concurrency: int, in_flight: float, duration: float = 100.0) -> dict:
    """A vllm bench serve --save-result JSON: every field named in the reference snapshot, none
    invented; values for 40 requests of 1000 tokens capped at ``concurrency``, ``in_flight`` of
    them on average."""
    fields = json.loads((REFERENCE / "result-fields.json").read_text())
    kept = [f for f in fields["benchmark_fields"] if f not in fields["removed_without_save_detailed"]]
    result: dict = dict.fromkeys(fields["run_fields"] + kept)
    result.update(
        backend="openai-chat",
        max_concurrency=concurrency,
        request_rate="inf",
        duration=duration,
        completed=40,
        failed=0,
        total_input_tokens=40 * 512,
        total_output_tokens=40_000,
        output_throughput=400.0,
        request_throughput=0.4,
        request_goodput=0.3,
        # 40 requests of 2.5 * in_flight seconds each over 100 s: Little's law gives it back.
        latencies=[duration / 40 * in_flight] * 40,
        max_concurrent_requests=concurrency + 3,
        mean_ttft_ms=250.0,
        p99_ttft_ms=900.0,
        mean_tpot_ms=30.0,
    )
    return result


def test_vllm_bench_result_becomes_calibration_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "bench.log"
    from deepseek_eks.perf.loadtest.job import RESULT_MARKER, bench_args

    # The Job's log: vllm bench serve's own output, then the marked result line.
    log.write_text("Starting...\n" + RESULT_MARKER + json.dumps(bench_result(32, in_flight=30)) + "\n")
    out = tmp_path / "calibration.json"
    assert cli.main(["--from-vllm-bench", str(log), "--max-num-seqs", "64", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    # The mean in flight (Little's law over the latencies), not the cap.
    assert report["points"][0]["concurrency"] == 30 and report["points"][0]["warnings"] == []
    assert report["ttft_s"]["mean"] == 0.25 and report["tpot_s"]["mean"] == 0.03
    assert report["request_goodput_rps"] == 0.3
    curve = load_calibration(out)  # the simulator reads it
    assert curve.points == ((30, 400.0),)
    # Its requests' mean lengths: vLLM's totals over the completed requests (definitions.json).
    assert (
        "successful requests only"
        in json.loads((REFERENCE / "definitions.json").read_text())["lengths"]["definition"]
    )
    assert (report["points"][0]["prompt_tokens"], report["points"][0]["output_tokens"]) == (512.0, 1000.0)
    assert curve.measurements[0].lengths_stated
    # Fixed lengths: the Job leaves --random-range-ratio at vLLM's default, which is 0.
    definitions = json.loads((REFERENCE / "definitions.json").read_text())
    assert definitions["random_range_ratio"]["default"] == 0.0
    job_args = bench_args(LoadTestConfig(url="http://vllm", model="m", max_requests=10), "org/m")
    assert "--random-range-ratio" not in job_args
    assert not curve.measurements[0].exponential_lengths
    # Above max_num_seqs and beyond the verified streams: flagged in the JSON and on stderr.
    (tmp_path / "big.json").write_text(json.dumps(bench_result(200, in_flight=180)))
    assert cli.main(["--from-vllm-bench", str(tmp_path / "big.json"), "--max-num-seqs", "64"]) == 0
    captured = capsys.readouterr()
    flagged = json.loads(captured.out)["points"][0]["warnings"]
    assert any("max_num_seqs 64" in w for w in flagged)
    assert any(f"beyond the {VERIFIED_STREAMS}" in w for w in flagged)
    assert "warning:" in captured.err
    (tmp_path / "not.json").write_text("[1]")
    assert cli.main(["--from-vllm-bench", str(tmp_path / "not.json")]) == 2
    assert "--from-vllm-bench" in capsys.readouterr().err


def fake_run(pacing: Pacing, streams: int, tokens: int, **kwargs: object) -> tuple[dict, ServerLog]:
    """Two closed-loop rounds of ``streams`` clients of ``tokens``-token responses on the fake server."""

    async def go() -> tuple[dict, ServerLog]:
        async with serve(pacing) as (url, log):
            config = LoadTestConfig(
                url=url,
                model="fake",
                arrivals=Arrivals("closed", concurrency=streams),
                lengths=Lengths(prompt_tokens=8, output_tokens=tokens),
                max_requests=2 * streams,
                timeout_s=10,
                **kwargs,  # type: ignore[arg-type]
            )
            return await run(config), log

    return asyncio.run(go())


def test_metrics_follow_vllm_bench_serve_on_a_known_server() -> None:
    """TTFT, TPOT, ITL and E2EL against the fake vLLM-format server's known pacing, TPOT exactly
    (E2EL - TTFT) / (tokens - 1), and goodput under SLOs either side of the truth."""
    pacing = Pacing(ttft_s=0.15, itl_s=0.01)
    report, log = fake_run(pacing, 4, 21, goodput_ms=(("ttft", 1000.0), ("tpot", 30.0)), max_num_seqs=2)
    assert report["requests"]["completed"] == 8 and len(log.requests) == 8
    assert log.peak_in_flight == 4
    assert 0.15 <= report["ttft_s"]["mean"] <= 0.2  # the opening role chunk is not a token
    assert report["itl_s"]["count"] == 8 * 20
    assert report["tpot_s"]["count"] == 8
    assert report["tpot_s"]["mean"] == pytest.approx(0.01, abs=0.002)
    for row in report["timeline"]:  # TPOT from each request's own timestamps
        assert row["e2e_s"] == pytest.approx(row["ttft_s"] + 20 * 0.01, abs=0.03)
    exact = [(r["e2e_s"] - r["ttft_s"]) / 20 for r in report["timeline"]]
    assert report["tpot_s"]["mean"] == pytest.approx(sum(exact) / 8, abs=1e-6)
    assert report["goodput"]["good_requests"] == 8
    assert report["goodput"]["request_goodput_rps"] == pytest.approx(8 / report["elapsed_s"], rel=1e-3)
    # Concurrency 4 above max_num_seqs 2: the point is flagged.
    assert any("max_num_seqs 2" in w for w in report["points"][0]["warnings"])
    strict, _ = fake_run(pacing, 1, 5, goodput_ms=(("ttft", 100.0),))  # below the server's 150 ms
    assert strict["goodput"]["good_requests"] == 0


def test_goodput_and_percentiles_match_vllm_definitions() -> None:
    import numpy

    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    for q in (50, 90, 95, 99):
        assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))
    assert summary(values)["std"] == pytest.approx(float(numpy.std(values)), abs=1e-6)  # rounded to 1 us
    assert tpot_s(1.2, 0.2, 11) == pytest.approx(0.1)
    assert tpot_s(0.5, 0.5, 1) is None
    # A one-token response counts as TPOT 0 for goodput (vllm: all_tpots gets 0.0).
    assert is_good({"tpot": 0.0}, 0.2, 0.2, 1)
    assert not is_good({"e2el": 999.0}, 0.2, 1.0, 10)
    assert parse_goodput(["ttft:5000", "e2el:60000"]) == {"ttft": 5000.0, "e2el": 60000.0}
    with pytest.raises(ValueError, match=r"'itl:5'.*'ttft:-1'"):
        parse_goodput(["itl:5", "ttft:-1"])


def test_point_warnings() -> None:
    assert point_warnings(64, 64, 64) == []
    (too_many,) = point_warnings(64, VERIFIED_STREAMS + 1, None)
    assert f"{VERIFIED_STREAMS + 1} streams" in too_many


def test_cli_rejects_bad_goodput(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--url", "http://127.0.0.1:1", "--model", "m", "--requests", "1", "--goodput", "ttft=5"]
    assert cli.main(args) == 2
    assert "--goodput 'ttft=5'" in capsys.readouterr().err


def test_a_kept_alive_connection_the_server_closed_is_retried_once() -> None:
    """The server answers on a kept-alive connection, then closes it while idle (as servers do
    after their keep-alive timeout); the next request on the pooled socket must go out again on a
    new connection, not count as a failure."""
    connections = 0

    async def once_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        head = await reader.readuntil(b"\r\n\r\n")
        if no_version_route(head, writer):
            return
        connections += 1
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        events = _event({"choices": [{"index": 0, "delta": {"content": "x"}}]}) + b"data: [DONE]\n\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(events), events))
        await writer.drain()
        writer.close()  # no Connection: close header: the client believes it may reuse the socket

    async def go() -> dict:
        async with listen(once_then_close) as url:
            config = LoadTestConfig(
                url=url, model="m", arrivals=Arrivals("closed", concurrency=1), max_requests=3, timeout_s=5
            )
            return await run(config)

    report = asyncio.run(go())
    assert report["requests"] == {"sent": 3, "completed": 3, "failed": 0}
    assert connections == 3


def metadata_as_vllm_saves_it(args: list[str]) -> dict[str, str]:
    """The result fields vllm bench serve 0.33.0 writes for the Job's --metadata, by the rule in
    the reference snapshot (result-fields.json "metadata"): one flag of nargs='*' (a repeated flag
    keeps only its last values), each KEY=VALUE split at the first '=', both stripped."""
    rule = json.loads((REFERENCE / "result-fields.json").read_text())["metadata"]
    assert "repeated flag keeps only its last values" in rule and "split at the first '='" in rule
    last = max(i for i, a in enumerate(args) if a == "--metadata")
    values = list(itertools.takewhile(lambda a: not a.startswith("--"), args[last + 1 :]))
    return {k.strip(): v.strip() for k, v in (item.split("=", 1) for item in values)}


def test_the_job_records_what_it_measured_and_the_refit_honours_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The served model, --max-num-seqs and --instance-type travel from the Job's flags through
    vllm bench serve's result into the converted report, where sizing reads them."""
    import yaml

    from deepseek_eks.perf.loadtest.job import RESULT_MARKER
    from deepseek_eks.sizing.measured import read_load_test

    assert cli.main([*JOB_ARGS, "--instance-type", "g6.12xlarge"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    (job,) = [d for d in documents if d["kind"] == "Job"]
    args = job["spec"]["template"]["spec"]["containers"][0]["command"][5:]
    assert args.count("--metadata") == 1  # a second one would drop the first's values
    result = bench_result(32, in_flight=30)
    result.update(metadata_as_vllm_saves_it(args))
    log = tmp_path / "bench.log"
    log.write_text(RESULT_MARKER + json.dumps(result) + "\n")
    out = tmp_path / "calibration.json"
    assert cli.main(["--from-vllm-bench", str(log), "--out", str(out)]) == 0
    (measured,) = read_load_test(out, "--load-test")
    assert (measured.model, measured.max_num_seqs, measured.instance_type) == (
        "r1-distill-qwen-7b",
        64,
        "g6.12xlarge",
    )
    # A flag that contradicts what the result records is refused, naming both.
    assert cli.main(["--from-vllm-bench", str(log), "--instance-type", "g6e.12xlarge"]) == 2
    err = capsys.readouterr().err
    assert "records instance_type=g6.12xlarge" in err and "--instance-type g6e.12xlarge" in err
    # An instance type the catalog does not know is refused at the flag.
    assert cli.main([*JOB_ARGS, "--instance-type", "g6.13xlarge"]) == 2
    assert "--instance-type 'g6.13xlarge': not a GPU instance type of the catalog" in capsys.readouterr().err
    # So is a --model that contradicts the served model the result records.
    assert cli.main(["--from-vllm-bench", str(log), "--model", "r1-distill-llama-70b"]) == 2
    err = capsys.readouterr().err
    assert "records served_model_name=r1-distill-qwen-7b" in err and "--model r1-distill-llama-70b" in err


def job_metadata(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """What the Job printed for ``argv`` records through vllm bench serve's --metadata."""
    import yaml

    assert cli.main(argv) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    (job,) = [d for d in documents if d["kind"] == "Job"]
    return metadata_as_vllm_saves_it(job["spec"]["template"]["spec"]["containers"][0]["command"][5:])


def test_stack_records_the_replica_its_plan_deploys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--stack dev: the Job records the served model and every setting dev's plan deploys its
    replica with, and the converted report carries them to the refit; a flag given otherwise is
    kept, and said."""
    from deepseek_eks.automation.api import prepare
    from deepseek_eks.perf.loadtest.job import RESULT_MARKER
    from deepseek_eks.sizing.measured import REPLICA_SETTINGS, ReplicaSetup, read_load_test

    planned = prepare("dev").plan.to_dict()
    argv = ["--stack", "dev", "--url", "http://vllm.deepseek.svc.cluster.local", "--arrivals", "closed"]
    argv += ["--concurrency", "8", "--requests", "100", "--as-job"]
    # dev's pool may launch g6 and g5 sizes: the node's type is the user's to give, and said so.
    assert len(planned["instance_types"]) > 1
    assert cli.main(argv) == 0
    assert "give --instance-type with the replica's node's" in capsys.readouterr().err
    node = planned["instance_types"][-1]
    argv += ["--instance-type", node]
    metadata = job_metadata(argv, capsys)
    assert metadata == {
        "served_model_name": planned["variant"],
        "url": "http://vllm.deepseek.svc.cluster.local",
        **{key: str(planned[key]) for key in REPLICA_SETTINGS if key != "instance_type"},
        "instance_type": node,
    }
    log = tmp_path / "bench.log"
    log.write_text(RESULT_MARKER + json.dumps({**bench_result(8, in_flight=8), **metadata}) + "\n")
    out = tmp_path / "calibration.json"
    assert cli.main(["--from-vllm-bench", str(log), "--out", str(out)]) == 0
    (measured,) = read_load_test(out, "--load-test")
    assert measured.model == planned["variant"]
    assert measured.setup == ReplicaSetup(
        **{**{key: planned[key] for key in REPLICA_SETTINGS}, "instance_type": node},
        url="http://vllm.deepseek.svc.cluster.local",  # where the Job reached it
    )
    # A flag beside --stack is what the replica under test ran with: kept, and the difference said.
    capped = planned["max_num_seqs"] // 2
    assert job_metadata([*argv, "--max-num-seqs", str(capped)], capsys)["max_num_seqs"] == str(capped)
    assert cli.main([*argv, "--max-num-seqs", str(capped)]) == 0
    err = capsys.readouterr().err
    assert f"max_num_seqs {capped} is kept (given, or recorded by the result); stack dev's plan has" in err
    # Converting that Job's result with --stack: the plan stands in only for what the result does
    # not record, so the cap it recorded is kept, not contradicted.
    capped_metadata = job_metadata([*argv, "--max-num-seqs", str(capped)], capsys)
    log.write_text(RESULT_MARKER + json.dumps({**bench_result(8, in_flight=8), **capped_metadata}) + "\n")
    assert cli.main(["--from-vllm-bench", str(log), "--stack", "dev", "--out", str(out)]) == 0
    assert f"max_num_seqs {capped} is kept" in capsys.readouterr().err
    assert read_load_test(out, "--load-test")[0].max_num_seqs == capped
    # ... and fills what a result run by hand does not record.
    log.write_text(RESULT_MARKER + json.dumps(bench_result(8, in_flight=8)) + "\n")
    assert cli.main(["--from-vllm-bench", str(log), "--stack", "dev", "--out", str(out)]) == 0
    assert "give --instance-type with the replica's node's" in capsys.readouterr().err
    (by_hand,) = read_load_test(out, "--load-test")
    assert by_hand.model == planned["variant"]
    assert by_hand.setup == ReplicaSetup(
        **{key: planned[key] for key in REPLICA_SETTINGS if key != "instance_type"}
    )
    # A pool of one type (r1's p5.48xlarge) says the node's type too.
    r1 = prepare("r1").plan.to_dict()
    assert r1["instance_types"] == [r1["instance_type"]]
    assert job_metadata(["--stack", "r1", *argv[2:-2]], capsys)["instance_type"] == r1["instance_type"]
    # A stack that does not plan is named.
    assert cli.main([*argv[:1], "no-such-stack", *argv[2:]]) == 2
    assert "--stack no-such-stack:" in capsys.readouterr().err
    # A setting the result records that no replica runs with is named as the result's.
    log.write_text(
        RESULT_MARKER + json.dumps({**bench_result(8, in_flight=8), "kv_cache_dtype": "int4"}) + "\n"
    )
    assert cli.main(["--from-vllm-bench", str(log)]) == 2
    assert "the result's kv_cache_dtype 'int4': must be one of auto, fp8" in capsys.readouterr().err


def test_a_converted_result_takes_what_the_flags_say_where_it_records_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A result from vllm bench serve run by hand (no --metadata) records nothing of the replica:
    --model, --max-num-seqs and --instance-type are kept in the report, so the refit can check
    them, and a value no replica runs with is refused, named by where it came from."""
    from deepseek_eks.perf.loadtest.job import RESULT_MARKER
    from deepseek_eks.sizing.measured import read_load_test

    log = tmp_path / "bench.log"
    log.write_text(RESULT_MARKER + json.dumps(bench_result(32, in_flight=30)) + "\n")
    out = tmp_path / "calibration.json"
    flags = ["--model", "r1-distill-qwen-7b", "--max-num-seqs", "40", "--instance-type", "g6.xlarge"]
    assert cli.main(["--from-vllm-bench", str(log), *flags, "--out", str(out)]) == 0
    capsys.readouterr()
    (measured,) = read_load_test(out, "--load-test")
    assert (measured.model, measured.max_num_seqs, measured.instance_type) == (
        "r1-distill-qwen-7b",
        40,
        "g6.xlarge",
    )
    for bad in ("0", "-5"):
        assert cli.main(["--from-vllm-bench", str(log), "--max-num-seqs", bad]) == 2
        assert f"--max-num-seqs {bad}: must be a whole number, at least 1" in capsys.readouterr().err
    # Recorded by the result, not given: the message says the result holds it.
    result = {**bench_result(32, in_flight=30), "max_num_seqs": "0", "instance_type": "g6.13xlarge"}
    log.write_text(RESULT_MARKER + json.dumps(result) + "\n")
    assert cli.main(["--from-vllm-bench", str(log)]) == 2
    assert "the result's max_num_seqs 0: must be a whole number, at least 1" in capsys.readouterr().err
    result["max_num_seqs"] = "8"
    log.write_text(RESULT_MARKER + json.dumps(result) + "\n")
    assert cli.main(["--from-vllm-bench", str(log)]) == 2
    assert "the result's instance_type 'g6.13xlarge': not a GPU instance type" in capsys.readouterr().err


def test_the_local_report_records_the_replica_it_measured() -> None:
    pacing = Pacing(ttft_s=0.0, itl_s=0.001)
    report, _ = fake_run(pacing, 2, 5, max_num_seqs=16, instance_type="g6e.2xlarge")
    assert (report["config"]["max_num_seqs"], report["config"]["instance_type"]) == (16, "g6e.2xlarge")


def test_a_rerun_sends_prompts_the_last_run_did_not() -> None:
    """vLLM's prefix cache (on by default) hashes whole 16-token blocks: a rerun with the same seed
    draws the same arrivals and lengths, but each run's prompts start with its own word, so no
    block of a rerun's prompt is an earlier run's."""
    firsts = []
    for _ in range(2):
        _, stats = load_test(
            "ok", max_requests=2, lengths=TEN_TOKENS, arrivals=Arrivals("closed", concurrency=1)
        )
        prompts = [b["messages"][0]["content"] for b in stats.bodies]
        assert len({p.split()[0] for p in prompts}) == 2  # one per request within the run
        firsts.append(prompts[0].split()[0])
    assert firsts[0] != firsts[1]
