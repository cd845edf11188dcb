"""Whether a set of CIDRs is, taken together, "open to the world".

One definition for the settings (refusals and warnings), the plan and the policy pack: a set of
allowed CIDRs is world-open when its union covers a large share of the *public* address space of
its family, not only when one of them is ``0.0.0.0/0``. ``0.0.0.0/1`` plus ``128.0.0.0/1`` admits
every IPv4 address as surely as ``0.0.0.0/0`` does, and six large blocks that miss only private
and reserved space admit nearly every internet host while covering under half of IPv4.

The public address space (facts and sources: reference/upstream/public-address-space.json):

- IPv4: everything but the blocks the IANA IPv4 Special-Purpose Address Registry marks not
  globally reachable (RFC 1918 private use, 100.64.0.0/10 shared CGNAT space, 0.0.0.0/8, loopback,
  link-local, 192.0.0.0/24, the documentation and benchmarking blocks, 240.0.0.0/4 reserved and
  the limited broadcast address inside it), and multicast 224.0.0.0/4 (the IANA IPv4 Multicast
  Address Space Registry): no client connects from those. 3,702,258,688 addresses, 86.2 % of IPv4.
- IPv6: the global unicast space 2000::/3 (IANA IPv6 Address Space registry) less the
  special-purpose blocks in it that are not globally reachable (2001::/23 IETF protocol
  assignments, 2001:db8::/32 and 3fff::/20 documentation).

Python's ``ipaddress`` is not used for this: in 3.11 ``is_global`` counts multicast 224.0.0.0/4 as
global, and a network's ``is_global`` looks at its first and last address only (Lib/ipaddress.py,
``_BaseNetwork.is_global``, ``_IPv4Constants._private_networks``).

Pure standard library, so the policy pack can import it without Pulumi.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from fractions import Fraction

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# A union that covers at least this share of its family's public address space is open to the
# world: 1/16 of public IPv4 is about 231 million addresses, the size of almost fourteen /8 blocks.
# A list of your own networks (offices, VPNs, NAT gateways, a partner's ranges) is a few thousand
# addresses, and the largest single allocations are /8s (0.45 % of the public space each); a set
# past the line admits a sixteenth of every internet host, so it is refused as the internet
# itself would be. Well below half on purpose: at half, six /3-to-/6 blocks covering 49 % of IPv4
# but nearly all of its public space were accepted.
WORLD_OPEN_SHARE = Fraction(1, 16)
WORLD_OPEN_LINE = "1/16 of them, 6.25 %"

# IANA IPv4 Special-Purpose Address Registry entries whose "Globally Reachable" is False (the
# registry lists 192.0.0.9/32 and 192.0.0.10/32 inside 192.0.0.0/24 as reachable: two addresses,
# left out here with their /24), the limited broadcast address being inside 240.0.0.0/4, plus
# multicast.
NOT_PUBLIC_IPV4 = (
    "0.0.0.0/8",  # "this network" (RFC 791)
    "10.0.0.0/8",  # private use (RFC 1918)
    "100.64.0.0/10",  # shared address space, carrier-grade NAT (RFC 6598)
    "127.0.0.0/8",  # loopback (RFC 1122)
    "169.254.0.0/16",  # link local (RFC 3927)
    "172.16.0.0/12",  # private use (RFC 1918)
    "192.0.0.0/24",  # IETF protocol assignments (RFC 6890)
    "192.0.2.0/24",  # documentation, TEST-NET-1 (RFC 5737)
    "192.168.0.0/16",  # private use (RFC 1918)
    "198.18.0.0/15",  # benchmarking (RFC 2544)
    "198.51.100.0/24",  # documentation, TEST-NET-2 (RFC 5737)
    "203.0.113.0/24",  # documentation, TEST-NET-3 (RFC 5737)
    "224.0.0.0/4",  # multicast (RFC 5771, IANA IPv4 Multicast Address Space Registry)
    "240.0.0.0/4",  # reserved (RFC 1112), and 255.255.255.255/32 limited broadcast (RFC 919)
)
PUBLIC_IPV6 = "2000::/3"  # global unicast (IANA IPv6 Address Space registry, RFC 4291)
NOT_PUBLIC_IPV6 = (
    "2001::/23",  # IETF protocol assignments (RFC 2928)
    "2001:db8::/32",  # documentation (RFC 3849)
    "3fff::/20",  # documentation (RFC 9637)
)


def parse(cidrs: Iterable[str]) -> tuple[list[Network], list[str]]:
    """The CIDRs that parse (host bits allowed, as AWS accepts them) and the ones that do not."""
    good: list[Network] = []
    bad: list[str] = []
    for cidr in cidrs:
        try:
            good.append(ipaddress.ip_network(str(cidr).strip(), strict=False))
        except ValueError:
            bad.append(str(cidr))
    return good, bad


def _merged(networks: Iterable[Network]) -> list[Network]:
    return list(ipaddress.collapse_addresses(networks))  # type: ignore[type-var]


def _overlap(a: Network, b: Network) -> int:
    """Addresses two CIDRs share: two prefixes are nested or disjoint."""
    if not a.overlaps(b):
        return 0
    return min(a.num_addresses, b.num_addresses)


_SPACE: dict[int, tuple[Network, list[Network]]] = {
    4: (ipaddress.ip_network("0.0.0.0/0"), _merged(ipaddress.ip_network(c) for c in NOT_PUBLIC_IPV4)),
    6: (ipaddress.ip_network(PUBLIC_IPV6), _merged(ipaddress.ip_network(c) for c in NOT_PUBLIC_IPV6)),
}


def public_size(version: int) -> int:
    """Addresses in the public space of IPv4 (4) or IPv6 (6)."""
    root, excluded = _SPACE[version]
    return root.num_addresses - sum(n.num_addresses for n in excluded)


def coverage(cidrs: Iterable[str]) -> dict[int, float]:
    """Share of each address family (4, 6) that the union of ``cidrs`` covers, overlaps counted once."""
    networks, _ = parse(cidrs)
    shares: dict[int, float] = {}
    for version, bits in ((4, 32), (6, 128)):
        family = [n for n in networks if n.version == version]
        if not family:
            continue
        covered = sum(n.num_addresses for n in _merged(family))
        shares[version] = covered / float(2**bits)
    return shares


def public_coverage(cidrs: Iterable[str]) -> dict[int, Fraction]:
    """Share of each family's public address space (see the module) that the union of ``cidrs``
    covers, overlaps counted once; exact."""
    networks, _ = parse(cidrs)
    shares: dict[int, Fraction] = {}
    for version in (4, 6):
        family = _merged(n for n in networks if n.version == version)
        if not family:
            continue
        root, excluded = _SPACE[version]
        covered = sum(_overlap(n, root) - sum(_overlap(n, x) for x in excluded) for n in family)
        shares[version] = Fraction(covered, public_size(version))
    return shares


def world_open(cidrs: Iterable[str]) -> bool:
    """True when the union of ``cidrs`` covers at least WORLD_OPEN_SHARE of the public IPv4 or
    IPv6 address space."""
    return any(share >= WORLD_OPEN_SHARE for share in public_coverage(list(cidrs)).values())


def _percent(share: Fraction) -> str:
    return f"{float(share):.0%}" if share >= Fraction(1, 10) else f"{float(share):.1%}"


def describe_world_open(cidrs: Iterable[str]) -> str | None:
    """A sentence saying how much of the internet ``cidrs`` admit, or None when they are not world-open."""
    listed = list(cidrs)
    shares = public_coverage(listed)
    open_families = {v: s for v, s in shares.items() if s >= WORLD_OPEN_SHARE}
    if not open_families:
        return None
    parts = [
        f"{_percent(share)} of IPv{version}'s public addresses"
        for version, share in sorted(open_families.items())
    ]
    return (
        f"{', '.join(listed)} together admit {' and '.join(parts)} (the world-open line is {WORLD_OPEN_LINE})"
    )
