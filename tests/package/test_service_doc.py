"""``help(DeepSeekService)`` documents every argument and every output with the description the
schema gives it (components/service_doc.py writes the text from the args' and outputs' own
docstrings and the settings model, as the schema is made), and the outputs it documents are the
ones a service registers."""

from __future__ import annotations

import json
import pydoc
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepseek_eks import DeepSeekService, DeepSeekServiceArgs
from deepseek_eks.automation.render import construct
from deepseek_eks.components.service import camel, snake
from tests.conftest import stack_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "provider" / "schema.json").read_text())
SERVICE = SCHEMA["resources"]["deepseek-eks:index:DeepSeekService"]


def _words(text: str) -> str:
    return " ".join(text.split())


def _help() -> str:
    """The whole help page as one line of words (pydoc's margins and the wrapping dropped)."""
    page = pydoc.render_doc(DeepSeekService, renderer=pydoc.plaintext)
    return _words("\n".join(re.sub(r"^\s*\|", "", line) for line in page.splitlines()))


HELP = _help()


def _typeddict(annotation: typing.Any) -> type | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and typing.is_typeddict(candidate):
            return candidate
    return None


def _arguments(args_type: type, schema: dict[str, typing.Any], path: str = "") -> Iterator[tuple[str, str]]:
    """(path, description) of every argument, from the args' annotations; the description is the
    schema's for that property."""
    for name, annotation in args_type.__annotations__.items():
        prop = schema["properties"][camel(name)]
        yield f"{path}{name}", _words(prop.get("description", ""))
        nested = _typeddict(annotation)
        if nested is not None:
            ref = (prop.get("items") or prop)["$ref"].removeprefix("#/types/")
            yield from _arguments(nested, SCHEMA["types"][ref], f"{path}{name}.")


ARGUMENTS = dict(_arguments(DeepSeekServiceArgs, {"properties": SERVICE["inputProperties"]}))
OUTPUTS = {snake(key): _words(prop.get("description", "")) for key, prop in SERVICE["properties"].items()}


def _documented(name: str, description: str) -> bool:
    """``name (type): description`` in the help text (the type label is at most a few hundred
    characters: a closed set's values)."""
    pattern = rf"\b{re.escape(name)} \(.{{1,400}}?\): {re.escape(description)}"
    return re.search(pattern, HELP) is not None


@pytest.mark.parametrize("path", sorted(ARGUMENTS))
def test_help_shows_each_argument_with_its_description(path: str) -> None:
    description = ARGUMENTS[path]
    assert description, f"{path} has no description in the schema"
    assert _documented(path.rsplit(".", 1)[-1], description), f"{path}: {description!r} not in help()"


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_help_shows_each_output_with_its_description(name: str) -> None:
    assert OUTPUTS[name], f"output {name} has no description"
    assert _documented(name, OUTPUTS[name]), f"output {name}: {OUTPUTS[name]!r} not in help()"


def test_the_documented_outputs_are_the_registered_ones() -> None:
    registered = construct(stack_config("dev")).result.outputs
    assert {snake(key) for key in registered} == set(OUTPUTS)
    annotated = {
        name for name, a in DeepSeekService.__annotations__.items() if typing.get_origin(a) is not None
    }
    assert annotated == set(OUTPUTS)


def test_closed_sets_show_their_values() -> None:
    assert _documented("compute_mode", ARGUMENTS["compute_mode"])
    assert 'compute_mode ("auto-mode" | "karpenter")' in HELP
    assert '"huggingface" | "s3" | "s3-mountpoint" | "ebs-snapshot"' in HELP
