"""The autoscaling loop's network on this host: a Linux bridge with a private /24, one network
namespace per in-cluster program (Prometheus, prometheus-adapter, KEDA's two), each with its own
address on the bridge, and cluster DNS names resolved through ``/etc/netns/<ns>/hosts``.

``ip netns exec <ns>`` bind-mounts every file of ``/etc/netns/<ns>/`` over the one of the same
name in ``/etc`` (iproute2 ip/ipnetns.c, ``bind_etc``), so a program run that way reads that
namespace's ``hosts``: ``kps-prometheus.monitoring.svc`` names the Prometheus namespace's address,
as cluster DNS would name its Service. The host side of the bridge holds the bridge's first address,
where kube-apiserver listens. Nothing is routed beyond this host (no NAT, no forwarding set up).

Everything made here is named ``<prefix>-...`` and removed when the block ends, and leftovers of a
crashed earlier run with the same prefix are removed when it starts.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .server import TwinError

NETNS_ETC = Path("/etc/netns")
CLUSTER_DOMAIN = "cluster.local"
# Private /24s tried in turn: 10.213.0.0/24 ... 10.213.255.0/24 (rarely used by VPCs, container
# runtimes or VPNs; any that overlaps an address or route of this host is skipped).
CANDIDATES = ipaddress.IPv4Network("10.213.0.0/16")


class NetworkUnavailable(TwinError):
    """The host cannot make the loop's network: not root, no ``ip`` (iproute2), or the kernel
    refused a network namespace or bridge. The message names what is missing."""


@dataclass(frozen=True)
class Netns:
    """One network namespace on the bridge: its name and its address there."""

    name: str
    address: str

    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside this namespace."""
        return ["ip", "netns", "exec", self.name]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkUnavailable(
            f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.stdout.strip()}"
        )
    return done


def service_names(name: str, namespace: str) -> list[str]:
    """The DNS names cluster DNS gives a Service: ``name.ns``, ``name.ns.svc`` and
    ``name.ns.svc.cluster.local`` (the names a pod in another namespace can use)."""
    return [f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}"]


@dataclass
class Network:
    """The bridge and the namespaces made on it (see ``bridge``)."""

    prefix: str
    subnet: ipaddress.IPv4Network
    namespaces: dict[str, Netns] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)
    _links: list[str] = field(default_factory=list)

    @property
    def bridge_name(self) -> str:
        return f"{self.prefix}-br"

    @property
    def host_address(self) -> str:
        """The bridge's own address (the first of the /24), where kube-apiserver binds."""
        return str(self.subnet.network_address + 1)

    def namespace(self, role: str) -> Netns:
        """A new namespace ``<prefix>-<role>``: a veth pair into the bridge, ``lo`` up, the next
        address of the /24 on its ``eth0``, default route via the host side."""
        if role in self.namespaces:
            return self.namespaces[role]
        index = len(self.namespaces) + 2  # .1 is the host
        if index > 254:
            raise NetworkUnavailable(f"the /24 {self.subnet} has no address left for {role}")
        ns = Netns(f"{self.prefix}-{role}", str(self.subnet.network_address + index))
        # Interface names are at most 15 characters (IFNAMSIZ 16 with the NUL): short ones.
        host_side, peer = f"{self.prefix}h{index}", f"{self.prefix}p{index}"
        _ip("netns", "add", ns.name)
        self.namespaces[role] = ns
        _ip("link", "add", host_side, "type", "veth", "peer", "name", peer)
        self._links.append(host_side)
        _ip("link", "set", peer, "netns", ns.name)
        _ip("link", "set", host_side, "master", self.bridge_name)
        _ip("link", "set", host_side, "up")
        _ip("-n", ns.name, "link", "set", "lo", "up")
        _ip("-n", ns.name, "link", "set", peer, "name", "eth0")
        _ip("-n", ns.name, "addr", "add", f"{ns.address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", ns.name, "link", "set", "eth0", "up")
        _ip("-n", ns.name, "route", "add", "default", "via", self.host_address)
        self._write_hosts(ns)
        return ns

    def set_hosts(self, names: Mapping[str, str]) -> None:
        """Resolve each DNS name of ``names`` to its address in every namespace, those made so far
        and those made later (``/etc/netns/<ns>/hosts``, with ``localhost``)."""
        self.hosts.update(names)
        for ns in self.namespaces.values():
            self._write_hosts(ns)

    def _write_hosts(self, ns: Netns) -> None:
        folder = NETNS_ETC / ns.name
        folder.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        lines += [f"{address} {name}" for name, address in sorted(self.hosts.items())]
        (folder / "hosts").write_text("\n".join(lines) + "\n")
        # No name server is reachable from the namespace: an empty resolv.conf makes a lookup of
        # a name not in hosts fail at once (Go's resolver then tries 127.0.0.1:53, refused)
        # instead of timing out against the host's resolver.
        (folder / "resolv.conf").write_text("")


def _host_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this host has an address in or a route to."""
    found: list[ipaddress.IPv4Network] = []
    for entry in json.loads(_ip("-j", "-4", "addr", "show").stdout or "[]"):
        for info in entry.get("addr_info", []):
            found.append(ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}", strict=False))
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all").stdout or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default" and ":" not in dst:
            with contextlib.suppress(ValueError):
                found.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
    return found


def _free_subnet() -> ipaddress.IPv4Network:
    used = _host_networks()
    for candidate in CANDIDATES.subnets(new_prefix=24):
        if not any(candidate.overlaps(u) for u in used):
            return candidate
    raise NetworkUnavailable(f"no /24 of {CANDIDATES} is free on this host")


def _remove_leftovers(prefix: str) -> None:
    """Delete the namespaces, links and /etc/netns folders named ``<prefix>-*`` (or the veth
    names ``<prefix>h<n>``) of an earlier run that did not clean up."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"{prefix}-"):
            _ip("netns", "del", name, check=False)
    for link in json.loads(_ip("-j", "link", "show", check=False).stdout or "[]"):
        name = link.get("ifname", "")
        if name == f"{prefix}-br" or (name.startswith(f"{prefix}h") and name[len(prefix) + 1 :].isdigit()):
            _ip("link", "del", name, check=False)
    if NETNS_ETC.is_dir():
        for folder in NETNS_ETC.glob(f"{prefix}-*"):
            shutil.rmtree(folder, ignore_errors=True)


def leftovers(prefix: str = "dse") -> list[str]:
    """The namespaces and links named for ``prefix`` that exist now (none after ``bridge``)."""
    out = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        if line.split() and line.split()[0].startswith(f"{prefix}-"):
            out.append(f"netns {line.split()[0]}")
    for link in json.loads(_ip("-j", "link", "show", check=False).stdout or "[]"):
        name = link.get("ifname", "")
        if name == f"{prefix}-br" or (name.startswith(f"{prefix}h") and name[len(prefix) + 1 :].isdigit()):
            out.append(f"link {name}")
    out += [f"folder {f}" for f in sorted(NETNS_ETC.glob(f"{prefix}-*"))] if NETNS_ETC.is_dir() else []
    return out


def check_available() -> None:
    """Raise ``NetworkUnavailable`` naming what is missing when this host cannot make the loop's
    network (root and iproute2's ``ip`` with netns support)."""
    if shutil.which("ip") is None:
        raise NetworkUnavailable("no `ip` command on PATH (iproute2): the loop's network needs it")
    if os.geteuid() != 0:
        raise NetworkUnavailable(
            "not root: network namespaces and a bridge need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
        )
    probe = _ip("netns", "list", check=False)
    if probe.returncode != 0:
        raise NetworkUnavailable(f"`ip netns` does not work here: {probe.stderr.strip()}")


@contextlib.contextmanager
def bridge(prefix: str = "dse") -> Iterator[Network]:
    """A bridge ``<prefix>-br`` holding the first address of a private /24 unused on this host;
    ``Network.namespace`` adds namespaces to it. Everything made is removed when the block ends,
    however it ends (stop the programs run in the namespaces first)."""
    check_available()
    if len(f"{prefix}-br") > 15 or len(f"{prefix}h254") > 15:
        raise ValueError(f"prefix {prefix!r} is too long for interface names (15 characters)")
    _remove_leftovers(prefix)
    subnet = _free_subnet()
    net = Network(prefix, subnet)
    try:
        added = _ip("link", "add", "name", net.bridge_name, "type", "bridge", check=False)
        if added.returncode != 0:
            raise NetworkUnavailable(
                f"the kernel refused a bridge ({net.bridge_name}): {added.stderr.strip()}"
            )
        _ip("addr", "add", f"{net.host_address}/{subnet.prefixlen}", "dev", net.bridge_name)
        _ip("link", "set", net.bridge_name, "up")
        yield net
    finally:
        for ns in net.namespaces.values():
            _ip("netns", "del", ns.name, check=False)  # takes its veth end, and so the pair, along
        for link in net._links:
            _ip("link", "del", link, check=False)  # already gone unless the move into the ns failed
        _ip("link", "del", net.bridge_name, check=False)
        for ns in net.namespaces.values():
            shutil.rmtree(NETNS_ETC / ns.name, ignore_errors=True)
        _remove_leftovers(prefix)
