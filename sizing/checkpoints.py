"""Known pre-quantized checkpoints per variant (sizing/data/checkpoints.json, each with its source)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def _table() -> dict[str, dict[str, dict[str, str]]]:
    text = (
        resources.files(__package__ or "sizing")
        .joinpath("data", "checkpoints.json")
        .read_text(encoding="utf-8")
    )
    table: dict[str, dict[str, dict[str, str]]] = json.loads(text)["checkpoints"]
    return table


def known_checkpoint(variant: str, quantization: str) -> str | None:
    """The public repository serving ``variant`` pre-quantized as ``quantization``, if one is known."""
    entry = _table().get(variant, {}).get(quantization)
    return entry["repository"] if entry else None
