"""Whether a set of CIDRs is, taken together, "open to the world".

One definition for the settings (refusals and warnings), the plan and the policy pack: a set of
allowed CIDRs is world-open when its union covers most of an address family, not only when one of
them is ``0.0.0.0/0``. ``0.0.0.0/1`` plus ``128.0.0.0/1`` admits every IPv4 address as surely as
``0.0.0.0/0`` does. Pure standard library, so the policy pack can import it without Pulumi.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

# A union that covers at least this share of its address family counts as open to the world. Half
# of IPv4 is 2^31 addresses: no organisation's egress ranges come near it (the largest allocations
# are /8s, 1/256 of the space each).
WORLD_OPEN_SHARE = 0.5

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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


def coverage(cidrs: Iterable[str]) -> dict[int, float]:
    """Share of each address family (4, 6) that the union of ``cidrs`` covers, overlaps counted once."""
    networks, _ = parse(cidrs)
    shares: dict[int, float] = {}
    for version, bits in ((4, 32), (6, 128)):
        family = [n for n in networks if n.version == version]
        if not family:
            continue
        merged: list[Network] = list(ipaddress.collapse_addresses(family))  # type: ignore[type-var]
        covered = sum(n.num_addresses for n in merged)
        shares[version] = covered / float(2**bits)
    return shares


def world_open(cidrs: Iterable[str]) -> bool:
    """True when the union of ``cidrs`` covers at least half of IPv4 or of IPv6."""
    return any(share >= WORLD_OPEN_SHARE for share in coverage(list(cidrs)).values())


def describe_world_open(cidrs: Iterable[str]) -> str | None:
    """A sentence saying how much of the internet ``cidrs`` admit, or None when they are not world-open."""
    listed = list(cidrs)
    shares = coverage(listed)
    open_families = {v: s for v, s in shares.items() if s >= WORLD_OPEN_SHARE}
    if not open_families:
        return None
    parts = [f"{share:.0%} of IPv{version}" for version, share in sorted(open_families.items())]
    return f"{', '.join(listed)} together admit {' and '.join(parts)}"
