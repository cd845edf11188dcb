"""The twin starts when another socket takes a port it picked before etcd or the API server binds
it: the program that lost the race is started again on other ports (CI lost a whole engine test to
this on 2026-12-06)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from deepseek_eks.twin import server
from tests.twin.conftest import require_twin


@pytest.fixture
def taken() -> Iterator[socket.socket]:
    """A port something else listens on, as the racing socket would."""
    with socket.socket() as held:
        held.bind((server.LOOPBACK, 0))
        held.listen()
        yield held


@pytest.mark.parametrize("lost_by", ["etcd", "kube-apiserver"])
def test_the_twin_starts_again_on_other_ports_when_one_is_taken(
    lost_by: str, taken: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_twin()
    port = int(taken.getsockname()[1])
    real = server.free_port
    calls: list[int] = []
    # etcd asks for its client port first; the API server asks for its port third.
    racing_call = 1 if lost_by == "etcd" else 3

    def free_port(address: str = server.LOOPBACK) -> int:
        calls.append(1)
        return port if len(calls) == racing_call else real(address)

    monkeypatch.setattr(server, "free_port", free_port)
    with server.running_twin() as api:
        reply: Any = api.call("GET", "/api/v1/namespaces/default")
        assert reply.ok, reply.message
    # Taken etcd: two ports, then two more; taken API server: etcd's two, then two for it.
    assert len(calls) == (5 if lost_by == "etcd" else 4)
