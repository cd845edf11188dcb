"""The load tester against a local streaming server with known pacing: the first token 200 ms after
the request, then one token every 20 ms, so every figure the tester reports has a true value.
The server listens on 127.0.0.1 only and misbehaves on request (429, 500, cut streams, stalls)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from deepseek_eks.automation.loadtest import cli
from deepseek_eks.automation.loadtest.runner import (
    Arrivals,
    Lengths,
    LoadTestConfig,
    LoadTestError,
    next_arrival_gap,
    run,
    split_events,
)
from deepseek_eks.automation.simulate.replica import load_calibration
from deepseek_eks.components.versions import LOADTEST_PACKAGES

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


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: ServerStats) -> None:
    start = asyncio.get_running_loop().time()
    head = await reader.readuntil(b"\r\n\r\n")
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
        writer.write(_chunk(_event({"choices": [], "usage": {"completion_tokens": tokens}})))
        writer.write(_chunk(b"data: [DONE]\r\n\r\n") + b"0\r\n\r\n")
        await writer.drain()
    finally:
        stats.in_flight -= 1
        writer.close()


@asynccontextmanager
async def streaming_server() -> AsyncIterator[tuple[str, ServerStats]]:
    stats = ServerStats()
    server = await asyncio.start_server(lambda r, w: _handle(r, w, stats), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", stats
    finally:
        server.close()
        await server.wait_closed()


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
    assert report["points"] == [{"concurrency": 4, "output_tokens_per_s": report["output_tokens_per_s"]}]
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
    pytest.importorskip("matplotlib")
    png = tmp_path / "report.png"
    assert cli.plot(json.loads(out.read_text()), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curve = load_calibration(out)
    assert curve.points[0][0] == 3
    assert curve.points[0][1] == json.loads(out.read_text())["output_tokens_per_s"]


def test_cli_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["--url", "http://127.0.0.1:1", "--model", "m", "--duration", "1", "--schedule", "0-1"]) == 2
    )
    assert "--schedule" in capsys.readouterr().err
    assert cli.main(["--url", "http://127.0.0.1:1", "--model", "m"]) == 2


JOB_ARGS = ["--url", "http://vllm.deepseek.svc.cluster.local", "--model", "m", "--arrivals", "poisson"]
JOB_ARGS += ["--rate", "0.5", "--duration", "600", "--out", "local.json", "--as-job"]


def job_manifests(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    import yaml

    assert cli.main(JOB_ARGS) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


def test_job_manifests_are_valid_kubernetes(capsys: pytest.CaptureFixture[str]) -> None:
    import kubernetes_validate

    from deepseek_eks.settings.model import DEFAULT_KUBERNETES_VERSION

    config_map, job = job_manifests(capsys)
    for obj in (config_map, job):
        kubernetes_validate.validate(obj, DEFAULT_KUBERNETES_VERSION, strict=True)
    container = job["spec"]["template"]["spec"]["containers"][0]
    # The test's own options travel (and parse back to the same test); the local ones are replaced
    # by a report on stdout.
    shell, flag, script, name, *args = container["command"]
    assert (shell, flag, name) == ("sh", "-c", "loadtest")
    assert args[-2:] == ["--quiet", "--json"]
    sent, local = cli.parser().parse_args(args), cli.parser().parse_args(JOB_ARGS)
    assert cli.config_from_args(sent) == cli.config_from_args(local)
    assert "local.json" not in args and "--as-job" not in args
    # httpx is installed, pinned and without dependency resolution, into an emptyDir on PYTHONPATH
    # before the tester starts; the root filesystem stays read-only.
    install, _, run = script.partition(" && ")
    assert run == 'exec python -m automation.loadtest "$@"'
    assert "--no-deps" in install.split() and install.split()[-len(LOADTEST_PACKAGES) :] == [
        *LOADTEST_PACKAGES
    ]
    target = install.split()[install.split().index("--target") + 1]
    pod = job["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == mounts[target])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert target in env["PYTHONPATH"].split(":")
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == mounts[env["TMPDIR"]])
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert job["spec"]["activeDeadlineSeconds"] == 600 + 600 + 300  # duration + timeout + scheduling
    key = next(e for e in container["env"] if e["name"] == "VLLM_API_KEY")["valueFrom"]["secretKeyRef"]
    assert key["optional"] is True


def test_job_with_a_prebuilt_image_installs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    assert cli.main([*JOB_ARGS, "--image", "registry.example/loadtest:1"]) == 0
    _, job = yaml.safe_load_all(capsys.readouterr().out)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/loadtest:1"
    assert container["command"][:3] == ["python", "-m", "automation.loadtest"]
    assert "registry.example/loadtest:1" not in container["command"]


def test_job_packages_are_the_tested_httpx_and_its_whole_closure() -> None:
    """The Job installs with --no-deps, so its list must be complete and match what the tests ran:
    every pin is the installed version here, requirements.txt pins the same httpx, and every
    dependency each package declares for Python 3.11 is in the list."""
    from importlib.metadata import requires, version

    from packaging.requirements import Requirement

    pins = dict(p.split("==") for p in LOADTEST_PACKAGES)
    for package, pinned in pins.items():
        assert version(package) == pinned, package
        for text in requires(package) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(
                {"python_version": "3.11", "extra": ""}
            ):
                assert requirement.name.replace("-", "_") in pins, (package, text)
    requirements = (Path(__file__).parents[2] / "requirements.txt").read_text().split()
    assert f"httpx=={pins['httpx']}" in requirements


def test_job_code_runs_on_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ConfigMap's files, laid out as the Job mounts them, run the test with nothing else of
    the project importable."""
    import subprocess
    import sys

    config_map, job = job_manifests(capsys)
    app = tmp_path / "app"
    for item in job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"]:
        target = app / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(config_map["data"][item["key"]])

    async def go() -> subprocess.CompletedProcess[str]:
        async with streaming_server() as (url, _):
            args = ["--url", url, "--model", "ok", "--arrivals", "closed", "--requests", "2"]
            args += ["--prompt-tokens", "5", "--output-tokens", "5", "--quiet", "--json"]
            return await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "automation.loadtest", *args],
                cwd=tmp_path,
                env={"PYTHONPATH": str(app)},
                capture_output=True,
                text=True,
                timeout=30,
            )

    done = asyncio.run(go())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # --json: stdout is the one document, the summary on stderr
    assert report["requests"]["completed"] == 2
