"""The real CoreDNS beside the twin: EKS's cluster DNS (the coredns add-on, v1.12.4 for Kubernetes
1.33 and 1.34: reference/upstream/eks-addon-versions.json), reading Services and EndpointSlices
from the twin's kube-apiserver with its kubernetes plugin, so a name a pod dials is judged by the
program that answers it on EKS.

The Corefile is the kubernetes plugin's block of the Kubernetes addon template (kubernetes v1.34.12
cluster/addons/dns/coredns/coredns.yaml.base: ``kubernetes cluster.local in-addr.arpa ip6.arpa``
with ``pods insecure``, ``fallthrough in-addr.arpa ip6.arpa``, ``ttl 30``), on 127.0.0.1 and a free
port, reading the twin through a kubeconfig. What differs from a cluster: no ``forward`` (nothing
upstream), ``cache``, ``loop``, ``reload``, ``health``, ``ready`` or ``prometheus``, none of which
changes what the kubernetes plugin answers for a cluster name.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

from .binaries import require_binaries
from .programs import Program, kubeconfig, wait_for
from .server import LOOPBACK, Api, TwinError, _stop, _tail, free_port

CLUSTER_DOMAIN = "cluster.local"
READY_TIMEOUT_S = 60.0
QUERY_TIMEOUT_S = 2.0
TYPE_A, CLASS_IN = 1, 1
RCODE_NXDOMAIN = 3


def corefile(port: int, config: Path) -> str:
    return (
        f".:{port} {{\n"
        f"    bind {LOOPBACK}\n"
        "    errors\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {config} twin\n"
        "        pods insecure\n"
        "        fallthrough in-addr.arpa ip6.arpa\n"
        "        ttl 30\n"
        "    }\n"
        "}\n"
    )


def _query(name: str) -> tuple[int, bytes]:
    """An RFC 1035 query for ``name``'s A records: its id and the datagram."""
    ident = secrets.randbelow(1 << 16)
    header = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0)  # recursion desired, one question
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split("."))
    return ident, header + labels + b"\x00" + struct.pack("!HH", TYPE_A, CLASS_IN)


def _skip_name(message: bytes, offset: int) -> int:
    while True:
        length = message[offset]
        if length & 0xC0 == 0xC0:  # a compression pointer ends the name
            return offset + 2
        if length == 0:
            return offset + 1
        offset += 1 + length


def _answers(message: bytes, ident: int) -> list[str] | None:
    """The A addresses of a reply; None for NXDOMAIN."""
    got, flags, questions, answers = struct.unpack("!HHHH", message[:8])
    if got != ident:
        raise TwinError(f"CoreDNS answered query {got}, not {ident}")
    rcode = flags & 0x000F
    if rcode == RCODE_NXDOMAIN:
        return None
    if rcode != 0:
        raise TwinError(f"CoreDNS answered with rcode {rcode}")
    offset = 12
    for _ in range(questions):
        offset = _skip_name(message, offset) + 4
    found = []
    for _ in range(answers):
        offset = _skip_name(message, offset)
        kind, _class, _ttl, length = struct.unpack("!HHIH", message[offset : offset + 10])
        offset += 10
        if kind == TYPE_A and length == 4:
            found.append(socket.inet_ntoa(message[offset : offset + 4]))
        offset += length
    return found


class Dns:
    """Ask the running CoreDNS as a pod would, after its search list has made the name whole."""

    def __init__(self, port: int, program: Program) -> None:
        self.port, self.program = port, program

    def lookup(self, name: str) -> list[str] | None:
        """The A addresses of ``name`` (fully qualified), [] for a name with no A record, None for
        NXDOMAIN."""
        ident, datagram = _query(name)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(QUERY_TIMEOUT_S)
            sock.sendto(datagram, (LOOPBACK, self.port))
            try:
                reply, _ = sock.recvfrom(4096)
            except TimeoutError as err:
                raise TwinError(f"CoreDNS did not answer {name}:\n{_tail(self.program.log)}") from err
        return _answers(reply, ident)

    def pod_lookup(self, name: str, namespace: str) -> list[str] | None:
        """``name`` as a pod of ``namespace`` resolves it with ndots 5: relative names are tried
        with the search list first (``<ns>.svc.<domain>``, ``svc.<domain>``, ``<domain>``), as
        kubelet writes resolv.conf; the first list of addresses wins."""
        if name.endswith("."):
            return self.lookup(name)
        search = [f"{namespace}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN]
        candidates = [f"{name}.{s}" for s in search]
        # ndots 5: a name with fewer than five dots goes through the search list before itself.
        candidates = [*candidates, name] if name.count(".") < 5 else [name, *candidates]
        for candidate in candidates:
            if not candidate.endswith(f".{CLUSTER_DOMAIN}"):
                # Forwarded upstream on a cluster (the VPC's resolver), which holds no cluster
                # name; this CoreDNS has no upstream and would answer SERVFAIL.
                continue
            found = self.lookup(candidate)
            if found:
                return found
        return None


@contextlib.contextmanager
def running_coredns(api: Api, folder: Path) -> Iterator[Dns]:
    """CoreDNS against ``api``, answering on 127.0.0.1 once its kubernetes plugin has synced."""
    binary = require_binaries(("coredns",))["coredns"]
    port = free_port()
    config = folder / "Corefile"
    config.write_text(corefile(port, kubeconfig(api, folder)))
    program = Program.start([str(binary), "-conf", str(config)], folder / "coredns.log")
    dns = Dns(port, program)
    try:
        # The API server's own Service, answered once the plugin has synced its caches.
        wait_for(
            "answer from CoreDNS",
            lambda: dns.lookup(f"kubernetes.default.svc.{CLUSTER_DOMAIN}"),
            [program],
            READY_TIMEOUT_S,
        )
        yield dns
    finally:
        _stop(program.process)
