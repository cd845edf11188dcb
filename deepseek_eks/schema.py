"""The multi-language schema of ``DeepSeekService``: what Pulumi's analyzer infers from the typed args
(types, and the descriptions written as the args' docstrings), completed from the settings model
the args are validated by, so the two cannot drift: a description where only the model has one,
an enum type for every closed set the model accepts, and each default the model applies (as the
schema's ``default`` for a scalar, in the description for a list, which Pulumi's schema cannot
hold). ``provider/__main__.py`` serves it; ``tools/generate_schema.py`` commits it."""

from __future__ import annotations

import copy
import json
import re
import typing
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .components.service import TYPE
from .components.service_doc import TOP_LEVEL
from .components.service_doc import default as _default
from .settings import PROJECT, SECRET_KEYS, Settings
from .settings.model import _GROUPS, AwsSettings
from .sizing import GPU_FAMILIES

# Closed sets the model checks with a validator rather than an Enum annotation: the values it
# accepts (settings/model.py _gpu_family refuses any other family).
CLOSED_SETS: dict[tuple[str, str], tuple[str, ...]] = {("gpu", "instance_families"): tuple(GPU_FAMILIES)}
_ENUM_NAMES = {("gpu", "instance_families"): "GpuFamily"}


def enrich(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (the analyzer's schema) completed from the settings model (module docstring)."""
    document = copy.deepcopy(document)
    types: dict[str, Any] = document["types"]
    service = document["resources"][TYPE]
    inputs = service["inputProperties"]
    for name in TOP_LEVEL:
        _complete(inputs[_camel(name)], Settings.model_fields[name], types, ("", name))
    for key in SECRET_KEYS:
        # The SDKs of other languages then wrap the value as a secret before it leaves the program
        # (the component makes it one too: components/service.py args_config).
        inputs[key]["secret"] = True
    groups: list[tuple[str, type[BaseModel]]] = [*_GROUPS.items(), ("aws", AwsSettings)]
    for group, model in groups:
        properties = types[inputs[group]["$ref"].removeprefix("#/types/")]["properties"]
        for name, field in model.model_fields.items():
            if _camel(name) in properties:
                _complete(properties[_camel(name)], field, types, (group, name))
    return document


def _complete(prop: dict[str, Any], field: FieldInfo, types: dict[str, Any], where: tuple[str, str]) -> None:
    if not prop.get("description") and field.description:
        prop["description"] = field.description
    values = CLOSED_SETS.get(where) or _enum_values(field.annotation)
    if values is not None:
        token = f"{PROJECT}:index:{_ENUM_NAMES.get(where) or _enum_class(field.annotation).__name__}"
        types[token] = {
            "type": "string",
            "enum": [{"name": _pascal(v), "value": v} for v in values],
        }
        target = prop["items"] if prop.get("type") == "array" else prop
        target.pop("type", None)  # a plain input stays plain: an enum decides the plan's shape too
        target["$ref"] = f"#/types/{token}"
    default = _default(field)
    if default is None:
        return
    if isinstance(default, list):  # Pulumi's schema holds a default for a scalar only
        described = prop.get("description", "").rstrip()
        prop["description"] = f"{described} Default: {json.dumps(default)}.".lstrip()
    else:
        prop["default"] = default


def _enum_class(annotation: Any) -> type[Enum]:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            return candidate
    raise TypeError(f"no Enum in {annotation!r}")


def _enum_values(annotation: Any) -> tuple[str, ...] | None:
    try:
        return tuple(str(m.value) for m in _enum_class(annotation))
    except TypeError:
        return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _pascal(value: str) -> str:
    """``r1-distill-qwen-1.5b`` -> ``R1DistillQwen1_5b``: an enum member name for generated SDKs."""
    parts = [p for p in re.split(r"[^A-Za-z0-9.]+", value) if p]
    return "".join(p[:1].upper() + p[1:] for p in parts).replace(".", "_")
