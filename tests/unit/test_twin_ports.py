"""The twin's listening ports: outside the kernel's range for outgoing connections, never twice.

CI lost etcd on 2026-12-06 ("bind: address already in use" on 127.0.0.1:58767): the port had been
picked by binding port 0, which lies in the ephemeral range, and freed moments before etcd bound
it, so any outgoing connection on the machine could take it in between."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eks.twin import server


def test_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    span = server._ephemeral_range()
    if span is None:
        pytest.skip(f"{server.EPHEMERAL_RANGE_FILE} is not readable here (not Linux)")
    if span[0] - server.LISTEN_PORTS_FLOOR < 1000:
        pytest.skip(f"no room below this machine's ephemeral range {span}: the kernel picks")
    ports = [server.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(server.LISTEN_PORTS_FLOOR <= port < span[0] for port in ports), (span, ports)


def test_without_room_below_the_range_the_kernel_picks_but_still_never_twice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole = tmp_path / "ip_local_port_range"
    whole.write_text(f"{server.LISTEN_PORTS_FLOOR + 10}\t65535\n")
    monkeypatch.setattr(server, "EPHEMERAL_RANGE_FILE", whole)
    ports = [server.free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(port > server.LISTEN_PORTS_FLOOR + 10 for port in ports)


def test_a_lost_bind_race_is_told_apart_from_other_start_failures(tmp_path: Path) -> None:
    """The message as etcd v3.6.17 and Go's net package print it (CI's log of 2026-12-06)."""
    lost = tmp_path / "etcd.log"
    lost.write_text(
        '{"level":"fatal","msg":"discovery failed",'
        '"error":"listen tcp 127.0.0.1:58767: bind: address already in use"}\n'
    )
    other = tmp_path / "other.log"
    other.write_text('{"level":"fatal","msg":"cannot access data directory: permission denied"}\n')
    assert server.lost_port_race(lost)
    assert not server.lost_port_race(other)
    assert not server.lost_port_race(tmp_path / "absent.log")
