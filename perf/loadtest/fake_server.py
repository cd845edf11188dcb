"""A fake OpenAI-compatible streaming server whose timing is known, to measure load testers against.

Every ``POST /v1/chat/completions`` (or ``/v1/completions``) streams ``max_tokens`` tokens: the
first ``ttft_s`` after the request's body arrived, then one every ``itl_s``, each on its own
absolute schedule (a late event does not push the next one back), so the true TTFT, ITL, TPOT and
throughput of a run are fixed before it starts. The server also records when it actually wrote
each request's first and last token, so a run on a busy machine can be compared with what the
server really did, not only with the schedule.

The events follow vLLM 0.33.0's OpenAI server (``vllm/entrypoints/openai/chat_completion/serving.py``,
``chat_completion_stream_generator``; snapshot in reference/upstream/vllm-bench-serve/): a first
chunk with ``delta: {"role": "assistant", "content": ""}``, one ``chat.completion.chunk`` per
token, ``finish_reason: "length"`` on the last token's chunk, then, with
``stream_options.include_usage``, a chunk with ``choices: []`` and ``usage``, then ``data: [DONE]``.
Connections are kept alive (HTTP/1.1), as uvicorn does. Given a ``version`` answer (vLLM's is
``{"version": "<release>"}``, reference/upstream/vllm-0.33.0/version-route.json), ``GET /version``
returns it; without one the route is not found, as through the load balancer. Given a
``metrics`` function, ``GET /metrics`` returns the text it makes of the server's log (the
exposition vLLM would give: reference/upstream/vllm-0.33.0/counters-exposition.txt).

Run alone (another process, so the server's work does not share the tester's event loop):
``python -m perf.loadtest.fake_server --port 8100 --ttft 0.2 --itl 0.02``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from . import probe

CHAT_PATH = b"/v1/chat/completions"
COMPLETIONS_PATH = b"/v1/completions"
# The routes the load tester's probe asks (probe.py), answered here as vLLM answers them.
VERSION_PATH = probe.VERSION_PATH.encode()
METRICS_PATH = probe.METRICS_PATH.encode()


@dataclass(frozen=True)
class Pacing:
    """The known timing: first token ``ttft_s`` after the request, then one token every ``itl_s``."""

    ttft_s: float = 0.2
    itl_s: float = 0.02

    def e2e_s(self, tokens: int) -> float:
        """End-to-end latency of a ``tokens``-token response (first to last token)."""
        return self.ttft_s + (tokens - 1) * self.itl_s

    def closed_loop_tokens_per_s(self, streams: int, tokens: int) -> float:
        """True output throughput of ``streams`` back-to-back clients of ``tokens``-token responses."""
        return streams * tokens / self.e2e_s(tokens)


@dataclass
class ServedRequest:
    """What the server did for one request, on ``time.monotonic()`` (the loop clock here)."""

    received: float
    tokens: int
    first_token: float | None = None
    last_token: float | None = None


@dataclass
class ServerLog:
    """Every request the server answered, and its peak concurrency."""

    requests: list[ServedRequest] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0

    def served_tokens_per_s(self) -> float:
        """Tokens written over the span from the first request's arrival to the last token."""
        done = [r for r in self.requests if r.last_token is not None]
        if not done:
            return 0.0
        span = max(r.last_token for r in done if r.last_token) - min(r.received for r in done)
        return sum(r.tokens for r in done) / span if span > 0 else 0.0

    def late_s(self, pacing: Pacing) -> float:
        """The largest delay of a last token behind its schedule: how far the server itself slipped."""
        return max(
            (
                r.last_token - (r.received + pacing.e2e_s(r.tokens))
                for r in self.requests
                if r.last_token is not None
            ),
            default=0.0,
        )


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _chunk(data: bytes) -> bytes:
    # HTTP/1.1 chunked transfer coding (RFC 9112 section 7.1): size in hex, CRLF, data, CRLF.
    return b"%x\r\n%s\r\n" % (len(data), data)


def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, Any]] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None  # the client closed its keep-alive connection
    request_line, *header_lines = head.split(b"\r\n")
    length = 0
    for line in header_lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = json.loads(await reader.readexactly(length)) if length else {}
    return request_line.split(b" ")[1], body


async def _stream(
    writer: asyncio.StreamWriter, body: dict[str, Any], pacing: Pacing, record: ServedRequest
) -> None:
    loop = asyncio.get_running_loop()
    ident = f"chatcmpl-fake-{id(record):x}"
    base = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model"),
    }
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
        + _chunk(_event({**base, "choices": [_choice({"role": "assistant", "content": ""})]}))
    )
    await writer.drain()
    tokens = record.tokens
    for k in range(tokens):
        await asyncio.sleep(max(0.0, record.received + pacing.ttft_s + k * pacing.itl_s - loop.time()))
        finish = "length" if k == tokens - 1 else None
        writer.write(_chunk(_event({**base, "choices": [_choice({"content": f" t{k}"}, finish)]})))
        now = loop.time()
        if record.first_token is None:
            record.first_token = now
        record.last_token = now
        await writer.drain()
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        prompt = len(json.dumps(body.get("messages") or body.get("prompt") or "").split())
        usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
        writer.write(_chunk(_event({**base, "choices": [], "usage": usage})))
    writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


def _response(body: bytes, content_type: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        content_type,
        len(body),
        body,
    )


async def _connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    pacing: Pacing,
    log: ServerLog,
    version: Any = None,
    metrics: Callable[[ServerLog], str] | None = None,
) -> None:
    loop = asyncio.get_running_loop()
    try:
        while (request := await _read_request(reader)) is not None:
            path, body = request
            if path == VERSION_PATH and version is not None:
                writer.write(_response(json.dumps(version).encode(), b"application/json"))
                await writer.drain()
                continue
            if path == METRICS_PATH and metrics is not None:
                writer.write(_response(metrics(log).encode(), b"text/plain; version=0.0.4; charset=utf-8"))
                await writer.drain()
                continue
            if path not in (CHAT_PATH, COMPLETIONS_PATH) or not body.get("stream"):
                text = b'{"error": "the fake server only streams completions"}'
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: %d\r\n\r\n%s" % (len(text), text))
                await writer.drain()
                continue
            # vLLM reads either field (max_completion_tokens is the OpenAI name that vllm bench
            # serve and guidellm send); 16 is vLLM's default for completions without either.
            limit = body.get("max_completion_tokens") or body.get("max_tokens") or 16
            record = ServedRequest(received=loop.time(), tokens=max(1, int(limit)))
            log.requests.append(record)
            log.in_flight += 1
            log.peak_in_flight = max(log.peak_in_flight, log.in_flight)
            try:
                await _stream(writer, body, pacing, record)
            finally:
                log.in_flight -= 1
    except ConnectionError:
        pass  # the client went away mid-stream
    finally:
        writer.close()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def listen(handler: Handler, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """``handler`` serving every connection on ``host:port`` (0: any free port) for the
    ``async with`` block; yields the base URL. The backlog is raised so hundreds of clients can
    connect at once."""
    server = await asyncio.start_server(handler, host, port, backlog=4096)
    bound = server.sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def serve(
    pacing: Pacing,
    host: str = "127.0.0.1",
    port: int = 0,
    version: Any = None,
    metrics: Callable[[ServerLog], str] | None = None,
) -> AsyncIterator[tuple[str, ServerLog]]:
    """The fake server with ``pacing`` for the ``async with`` block; yields its URL and log.
    ``version``: what ``GET /version`` answers, ``metrics`` makes ``GET /metrics``'s text from the
    log (None: the route is not found)."""
    log = ServerLog()
    async with listen(lambda r, w: _connection(r, w, pacing, log, version, metrics), host, port) as url:
        yield url, log


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted; prints the base URL on its first line."""
    p = argparse.ArgumentParser(prog="python -m perf.loadtest.fake_server", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft", type=float, default=0.2, help="seconds to the first token")
    p.add_argument("--itl", type=float, default=0.02, help="seconds between tokens")
    args = p.parse_args(argv)

    async def forever() -> None:
        async with serve(Pacing(args.ttft, args.itl), args.host, args.port) as (url, _):
            print(url, flush=True)
            await asyncio.Event().wait()

    with suppress(KeyboardInterrupt):
        asyncio.run(forever())


if __name__ == "__main__":
    main()
