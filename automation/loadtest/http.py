"""A small asyncio HTTP/1.1 client for one streaming POST: the request goes out, the status and
headers come back, then the body arrives as it is sent (chunked, Content-Length or until close).

Why not a third-party client: the project's virtualenv carries none (requests is synchronous);
HTTP/1.1 framing (RFC 9112 sections 6-7: Content-Length, chunked transfer coding) is all a
streaming chat completion needs, and owning it lets the load tester time every byte it reads.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit


class StreamCut(Exception):
    """The connection closed before the response body ended."""


class BadResponse(Exception):
    """Bytes that are not an HTTP/1.1 response."""


@dataclass(frozen=True)
class Endpoint:
    """Where requests go, parsed once from a base URL such as ``http://10.0.0.5:8000``."""

    host: str
    port: int
    tls: bool
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--url {url!r}: expected http://host[:port] or https://host[:port]")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.hostname, port, parts.scheme == "https", parts.path.rstrip("/"))


class Response:
    """Status, headers and a body read incrementally from an open connection."""

    def __init__(self, status: int, headers: dict[str, str], reader: asyncio.StreamReader) -> None:
        self.status = status
        self.headers = headers
        self._reader = reader

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises StreamCut if the connection closes early."""
        reader = self._reader
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await reader.readline()
                if not size_line.endswith(b"\n"):
                    raise StreamCut("connection closed inside the chunked body")
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise BadResponse(f"bad chunk size line {size_line[:40]!r}") from None
                if size == 0:
                    await reader.readline()  # the empty line after the last chunk (no trailers)
                    return
                try:
                    data = await reader.readexactly(size)
                    await reader.readexactly(2)
                except asyncio.IncompleteReadError:
                    raise StreamCut("connection closed inside a chunk") from None
                yield data
        elif "content-length" in self.headers:
            remaining = int(self.headers["content-length"])
            while remaining > 0:
                data = await reader.read(min(remaining, 65536))
                if not data:
                    raise StreamCut(f"connection closed {remaining} bytes before Content-Length")
                remaining -= len(data)
                yield data
        else:
            while data := await reader.read(65536):
                yield data

    async def read(self) -> bytes:
        return b"".join([c async for c in self.chunks()])


class Connection:
    """One connection used for one request (the load tester wants independent streams)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Response:
        ep = self.endpoint
        context = ssl.create_default_context() if ep.tls else None
        reader, writer = await asyncio.open_connection(ep.host, ep.port, ssl=context)
        self._writer = writer
        host = ep.host if ep.port in (80, 443) else f"{ep.host}:{ep.port}"
        lines = [
            f"POST {ep.base_path}{path} HTTP/1.1",
            f"Host: {host}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            if not status_line:
                raise StreamCut("connection closed before the response status")
            raise BadResponse(f"not an HTTP/1.1 status line: {status_line[:60]!r}")
        response_headers: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if not line.endswith(b"\n"):
                raise StreamCut("connection closed inside the response headers")
            if line in (b"\r\n", b"\n"):
                break
            key, _, value = line.decode("latin-1").partition(":")
            response_headers[key.strip().lower()] = value.strip()
        return Response(int(parts[1]), response_headers, reader)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
