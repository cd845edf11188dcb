"""A small HTTP/1.1 streaming client on asyncio streams, cheap enough per event to time 128 streams.

Why not httpx: on this project's 2-core machine the tester built on httpx's AsyncClient read only
60 % of a fake server's true throughput at 128 streams (tools/bench_loadtest.py; numbers in
docs/load-testing.md): its per-chunk cost through httpcore and anyio saturates the one event loop,
so requests reach the server late and the run looks slower than the server. This client does only
what a load test of an OpenAI-compatible server needs: POST a JSON body on a kept-alive connection
(RFC 9112 section 9.3), read the status and headers, and yield the body as it arrives, de-chunked
(RFC 9112 section 7.1) or up to Content-Length or the connection's end.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

READ_SIZE = 65536


class ConnectFailed(Exception):
    """Nothing accepted the connection (refused, unreachable, name not resolved)."""


class ConnectTimedOut(Exception):
    """The TCP (and TLS) handshake did not finish within the connect timeout."""


class NoResponse(Exception):
    """The server closed the connection before a complete status line and headers."""


class BodyCut(Exception):
    """The server closed the connection inside a chunked or Content-Length body."""


@dataclass
class Response:
    """A response's status, lower-cased headers and body reader; ``reusable`` once fully read."""

    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    reusable: bool = False

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, without transfer coding."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            async for data in self._chunked():
                yield data
        elif "content-length" in self.headers:
            left = int(self.headers["content-length"])
            while left > 0:
                data = await self.reader.read(min(left, READ_SIZE))
                if not data:
                    raise BodyCut("the connection closed inside the body")
                left -= len(data)
                yield data
        else:  # delimited by the connection's end (RFC 9112 section 6.3, rule 8)
            while data := await self.reader.read(READ_SIZE):
                yield data
            return
        self.reusable = self.headers.get("connection", "").lower() != "close"

    async def _chunked(self) -> AsyncIterator[bytes]:
        try:
            while True:
                size_line = await self.reader.readuntil(b"\r\n")
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    # Trailer fields, if any, end with an empty line.
                    while await self.reader.readuntil(b"\r\n") != b"\r\n":
                        pass
                    return
                data = await self.reader.readexactly(size + 2)
                yield data[:-2]
        except asyncio.IncompleteReadError:
            raise BodyCut("the connection closed inside a chunk") from None

    async def read_all(self) -> bytes:
        """The whole body (an error response's)."""
        return b"".join([part async for part in self.body()])


@dataclass
class Pool:
    """At most ``size`` connections to one origin, idle ones reused last-in first-out."""

    url: str
    size: int
    connect_timeout_s: float
    _idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    _slots: asyncio.Semaphore | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        self.host = parts.hostname or ""
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        default_port = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal (RFC 3986)
        self.authority = host if default_port else f"{host}:{self.port}"
        # One TLS context for every connection: building one loads the CA bundle each time.
        self.ssl_context = ssl.create_default_context() if self.tls else None
        self.base_path = parts.path.rstrip("/")

    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:  # made inside the running loop
            self._slots = asyncio.Semaphore(self.size)
        return self._slots

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        context = ssl.create_default_context() if self.tls else None
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                return await asyncio.open_connection(self.host, self.port, ssl=context, limit=READ_SIZE * 4)
        except TimeoutError:
            raise ConnectTimedOut(f"connect to {self.authority}") from None
        except OSError as error:
            raise ConnectFailed(f"connect to {self.authority}: {error}") from None

    @asynccontextmanager
    async def post(
        self, path: str, body: bytes, headers: dict[str, str], on_sent: Callable[[], None] | None = None
    ) -> AsyncIterator[Response]:
        """POST ``body`` to ``path`` and yield the response once its headers arrived; waits for a
        free connection first (bounded by the caller's timeout); ``on_sent`` runs once the request
        is written, when the wait for the server starts."""
        async with self._semaphore():
            fresh = not self._idle
            reader, writer = self._idle.pop() if self._idle else await self._open()
            response: Response | None = None
            try:
                head = (
                    f"POST {self.base_path}{path} HTTP/1.1\r\nHost: {self.authority}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                    + "\r\n"
                )
                writer.write(head.encode() + body)
                if on_sent is not None:
                    on_sent()
                try:
                    status_and_headers = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    if fresh:
                        raise NoResponse("the connection closed before a response") from None
                    # A kept-alive connection the server had closed meanwhile: one retry on a new
                    # one, as clients do for idempotent-safe reuse failures before any response.
                    writer.close()
                    reader, writer = await self._open()
                    writer.write(head.encode() + body)
                    try:
                        status_and_headers = await reader.readuntil(b"\r\n\r\n")
                    except (asyncio.IncompleteReadError, ConnectionError):
                        raise NoResponse("the connection closed before a response") from None
                status_line, *lines = status_and_headers[:-4].decode("latin-1").split("\r\n")
                try:
                    status = int(status_line.split(" ", 2)[1])
                except (IndexError, ValueError):
                    raise NoResponse(f"not an HTTP status line: {status_line[:80]!r}") from None
                fields: dict[str, str] = {}
                for line in lines:
                    name, _, value = line.partition(":")
                    fields[name.strip().lower()] = value.strip()
                response = Response(status, fields, reader)
                yield response
            finally:
                if response is not None and response.reusable:
                    self._idle.append((reader, writer))
                else:
                    writer.close()

    def close(self) -> None:
        """Close the idle connections."""
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
