"""gpu.capacityReservationIds: format, and refused where the render cannot honour it."""

from __future__ import annotations

import pytest

from deepseek_eks.settings import SettingsError, parse_settings

P = "deepseek-eks:"
KEY = f"{P}gpu.capacityReservationIds"
GOOD = "cr-0123456789abcdef0"


def problems(config: dict) -> dict[str, str]:
    with pytest.raises(SettingsError) as info:
        parse_settings(config)
    return {p.key: p.message for p in info.value.problems}


def test_default_is_no_reservation() -> None:
    assert parse_settings({}).gpu.capacity_reservation_ids == []


def test_karpenter_with_on_demand_takes_reservation_ids() -> None:
    s = parse_settings({f"{P}computeMode": "karpenter", KEY: f"{GOOD}, cr-0123456789abcdef1"})
    assert s.gpu.capacity_reservation_ids == [GOOD, "cr-0123456789abcdef1"]


@pytest.mark.parametrize(
    "bad",
    [
        "cr-0123456789ABCDEF0",  # EC2 ids are lower-case hex
        "cr-0123456789abcdef",  # 16 hex digits
        "cr-\u0660123456789abcdef0",  # a non-ASCII digit in place of 0
        "odcr-0123456789abcdef0",
    ],
)
def test_malformed_ids_are_refused_with_the_element_named(bad: str) -> None:
    found = problems({f"{P}computeMode": "karpenter", KEY: bad})
    assert f"{KEY}[0]" in found and "cr-[0-9a-f]{17}" in found[f"{KEY}[0]"]


def test_auto_mode_refuses_reservations_and_names_the_fix() -> None:
    found = problems({KEY: GOOD})  # computeMode defaults to auto-mode
    assert "computeMode karpenter" in found[KEY] and "remove this setting" in found[KEY]


def test_spot_only_pools_cannot_use_reservations() -> None:
    found = problems({f"{P}computeMode": "karpenter", f"{P}gpu.capacityTypes": "spot", KEY: GOOD})
    assert "add on-demand to gpu.capacityTypes" in found[KEY]
