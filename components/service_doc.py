"""What ``help(DeepSeekService)`` and ``pydoc`` show: every argument and every output with its
description, written from the sources the multi-language schema is made of, so there is nothing
to keep in step by hand:

- each argument's description is its docstring in the args TypedDicts (components/service_args.py,
  generated from the settings model's descriptions; the text Pulumi's analyzer puts in the schema),
  else the settings model's description of the setting;
- its allowed values are the settings' closed set (components/arg_types.py), its default the
  settings model's;
- each output is an annotated ``pulumi.Output`` attribute of the component and its docstring.

Attribute docstrings are not kept at runtime; like Pulumi's analyzer, this reads them from the
module's source (``ast``), which every install of the package ships.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import textwrap
import typing
from collections.abc import Awaitable, Iterator, Sequence
from enum import Enum
from functools import cache
from typing import Any

import pulumi
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from deepseek_eks.settings import Settings
from deepseek_eks.settings.model import _GROUPS, AwsSettings

from .arg_types import allowed

WIDTH = 100
INDENT = "    "
# The settings model of each group of arguments.
MODELS: dict[str, type[BaseModel]] = {**_GROUPS, "aws": AwsSettings}
# The top-level arguments completed from the settings model (``Settings``); the others are where
# the service goes (its region is its provider's, whatever the model's default), or secrets.
TOP_LEVEL = ("compute_mode", "kubernetes_version")


def setting_field(group: str, name: str) -> FieldInfo | None:
    """The settings model's field that completes the argument ``group.name`` (``""``: top level)."""
    if not group:
        return Settings.model_fields[name] if name in TOP_LEVEL else None
    model = MODELS.get(group)
    return model.model_fields.get(name) if model is not None else None


def default(field: FieldInfo) -> Any:
    """The default the settings model applies, as a plain value; None when there is none to show."""
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined or value is None or value == []:
        return None
    if isinstance(value, list):
        return [v.value if isinstance(v, Enum) else v for v in value]
    if isinstance(value, BaseModel):
        return None
    return value.value if isinstance(value, Enum) else value


@cache
def _module_docs(module: str) -> dict[str, dict[str, str]]:
    """Every class of ``module``: the docstring written under each of its annotated attributes."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (OSError, TypeError, KeyError):  # no source: the help text goes without descriptions
        return {}
    docs: dict[str, dict[str, str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        found = docs.setdefault(node.name, {})
        for statement, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[statement.target.id] = " ".join(after.value.value.split())
    return docs


def attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings of ``cls``'s annotated attributes, by name."""
    return _module_docs(cls.__module__).get(cls.__name__, {})


def describe(group: str, name: str, doc: str | None) -> str:
    """An argument's description: its docstring, else the settings model's, and the model's default."""
    field = setting_field(group, name)
    text = doc or (field.description if field is not None else None) or ""
    value = default(field) if field is not None else None
    if value is not None and "default" not in text.lower():
        text = f"{text} Default: {json.dumps(value)}.".strip()
    return text


def _is_typeddict(annotation: Any) -> bool:
    return isinstance(annotation, type) and typing.is_typeddict(annotation)


def _input_of(annotation: Any) -> Any | None:
    """``T`` of ``pulumi.Input[T]`` (a Union of T, Awaitable[T] and Output[T]); None otherwise."""
    for member in typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else ():
        if typing.get_origin(member) is Awaitable:
            return typing.get_args(member)[0]
    return None


def _item_of(annotation: Any) -> Any | None:
    """The item type of a list or sequence annotation; None otherwise."""
    if typing.get_origin(annotation) in (list, Sequence):
        return typing.get_args(annotation)[0]
    return None


def type_label(annotation: Any, group: str = "", name: str = "") -> str:
    """How an argument's type reads in the help text: a closed set as its values, an Input as
    "T or Output", a list as "list of T", a group as its TypedDict's name."""
    if (inner := _input_of(annotation)) is not None:
        return f"{type_label(inner, group, name)} or Output"
    if (item := _item_of(annotation)) is not None:
        label = type_label(item, group, name)
        return f"list of ({label})" if " or " in label or " | " in label else f"list of {label}"
    if (values := allowed(group, name)) is not None:
        return " | ".join(json.dumps(v) for v in values)
    return getattr(annotation, "__name__", str(annotation))


def _wrapped(head: str, text: str, depth: int) -> list[str]:
    indent = INDENT * depth
    return textwrap.wrap(
        f"{head} {text}".rstrip(),
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + INDENT,
        break_long_words=False,
        break_on_hyphens=False,
    )


def argument_lines(args_type: type, group: str = "", depth: int = 1) -> Iterator[str]:
    """One entry per argument of ``args_type``, a group's fields indented under it."""
    docs = attribute_docs(args_type)
    for name, annotation in args_type.__annotations__.items():
        item = _item_of(annotation)
        nested = annotation if _is_typeddict(annotation) else item if _is_typeddict(item) else None
        yield from _wrapped(
            f"{name} ({type_label(annotation, group, name)}):", describe(group, name, docs.get(name)), depth
        )
        if nested is not None:
            # A settings group's fields complete from its model; a list's items (schedule, assume
            # roles) carry their own docstrings.
            yield from argument_lines(nested, name if name in MODELS else "-", depth + 1)


def output_lines(component: type) -> Iterator[str]:
    """One entry per output attribute (an annotated ``pulumi.Output``) of ``component``."""
    docs = attribute_docs(component)
    for name, annotation in component.__annotations__.items():
        if typing.get_origin(annotation) is not pulumi.Output:
            continue
        (inner,) = typing.get_args(annotation)
        label = getattr(inner, "__name__", None) if not typing.get_args(inner) else str(inner)
        yield from _wrapped(f"{name} (Output[{label}]):", docs.get(name, ""), 1)


def outputs_of(component: type) -> list[str]:
    """The names of ``component``'s output attributes."""
    return [n for n, a in component.__annotations__.items() if typing.get_origin(a) is pulumi.Output]


def init_doc(component: type, args_type: type, intro: str) -> str:
    """The docstring of ``component.__init__``: ``intro``, then every argument and every output."""
    return "\n".join(
        [
            inspect.cleandoc(intro),
            "",
            f"Arguments (``args``, a {args_type.__name__}; every key is optional, a group's keys are "
            'its dict\'s: args["model"]["variant"]):',
            *argument_lines(args_type),
            "",
            "Outputs (attributes of the service, each a pulumi.Output):",
            *output_lines(component),
        ]
    )
