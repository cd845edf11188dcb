"""Known pre-quantized checkpoints per variant (sizing/data/checkpoints.json) and the pinned Hugging Face
commits of the default repositories (sizing/data/revisions.json), each with its source."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from .catalog import model_catalog


def _data(name: str) -> Any:
    data = resources.files(__package__ or "sizing").joinpath("data", name)
    return json.loads(data.read_text(encoding="utf-8"))


@cache
def _table() -> dict[str, dict[str, dict[str, Any]]]:
    table: dict[str, dict[str, dict[str, Any]]] = _data("checkpoints.json")["checkpoints"]
    return table


def known_checkpoint(variant: str, quantization: str) -> str | None:
    """The public repository serving ``variant`` pre-quantized as ``quantization``, if one is known."""
    entry = _table().get(variant, {}).get(quantization)
    return entry["repository"] if entry else None


def catalogued_variant(repository: str) -> str | None:
    """The variant whose weights ``repository`` holds when the catalogs know it: a variant's own
    repository (models.json) or a pre-quantized checkpoint under its name or a former one
    (checkpoints.json); else None (a fine-tune or mirror of the user's, which nothing here can
    judge). Case is ignored: a name that differs from a catalogued one only in case can mean that
    model or none, never another."""
    wanted = repository.casefold()
    own = [(variant, spec.hf_repo) for variant, spec in model_catalog().items()]
    for variant, name in [*own, *prequantized_repositories()]:
        if name.casefold() == wanted:
            return variant
    return None


def prequantized_repositories() -> list[tuple[str, str]]:
    """(variant, repository) for each catalogued pre-quantized checkpoint, under its name and each
    former name."""
    return [
        (variant, name)
        for variant, formats in _table().items()
        for entry in formats.values()
        for name in (entry["repository"], *entry.get("aliases", ()))
    ]


def prequantized_format(variant: str, repository: str | None) -> str | None:
    """The quantization ``repository`` already holds for ``variant`` when it is a catalogued
    pre-quantized checkpoint (its name or a former name), else None: an uncatalogued repository is
    taken to hold the variant's own 16-bit checkpoint."""
    if not repository:
        return None
    for quantization, entry in _table().get(variant, {}).items():
        if repository in (entry["repository"], *entry.get("aliases", ())):
            return quantization
    return None


@cache
def _revisions() -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = _data("revisions.json")["revisions"]
    return table


def pinned_revision(variant: str, repository: str) -> str | None:
    """The Hugging Face commit ``repository`` is served at for ``variant`` (sizing/data/revisions.json,
    each with the source that records it), or None when none is recorded: the stager then resolves
    the main branch once and records the commit it staged."""
    entry = _revisions().get(variant)
    return entry["revision"] if entry and entry["repository"] == repository else None
