"""Read ``Pulumi.yaml`` defaults and ``Pulumi.<stack>.yaml`` into the config map Pulumi gives a
program: full keys (``deepseek-eks:model.variant``), scalar values as strings, lists and objects
as JSON, secret keys listed apart. Offline, secrets cannot be decrypted: they are replaced by a
placeholder and stay marked secret."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SECRET_PLACEHOLDER = "[secret]"


class StackFileError(ValueError):
    """A stack file that is missing or not shaped like Pulumi's."""


@dataclass
class StackConfig:
    """The config of one stack as the Pulumi engine would hand it to the program."""

    stack: str
    values: dict[str, str] = field(default_factory=dict)
    secret_keys: list[str] = field(default_factory=list)
    project: str = "deepseek-eks"

    def with_overrides(self, overrides: dict[str, Any], project: str) -> StackConfig:
        """A copy with ``key=value`` overrides (keys without a namespace are the project's)."""
        values = dict(self.values)
        for key, value in overrides.items():
            full = key if ":" in key else f"{project}:{key}"
            values[full] = _engine_value(value)
        return StackConfig(self.stack, values, list(self.secret_keys), self.project)


def _engine_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)


def project_name(root: Path = PROJECT_ROOT) -> str:
    return str(yaml.safe_load((root / "Pulumi.yaml").read_text())["name"])


def project_defaults(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """``config:`` defaults declared in Pulumi.yaml, under full keys."""
    project = yaml.safe_load((root / "Pulumi.yaml").read_text())
    name = project["name"]
    out: dict[str, Any] = {}
    for key, decl in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(decl, dict) and ("type" in decl or "default" in decl or "value" in decl):
            if "default" in decl:
                out[full] = decl["default"]
            elif "value" in decl:
                out[full] = decl["value"]
        else:
            out[full] = decl
    return out


def stack_names(root: Path = PROJECT_ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def read_stack(stack: str, root: Path = PROJECT_ROOT) -> StackConfig:
    """Pulumi.yaml defaults overlaid with ``Pulumi.<stack>.yaml``."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = ", ".join(stack_names(root)) or "none"
        raise StackFileError(f"no stack file {path.name} (stacks here: {known})")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise StackFileError(f"{path.name} is not a mapping")
    config = data.get("config") or {}
    name = project_name(root)
    values = {k: _engine_value(v) for k, v in project_defaults(root).items()}
    secret_keys: list[str] = []
    for key, value in config.items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[full] = SECRET_PLACEHOLDER
            secret_keys.append(full)
        else:
            values[full] = _engine_value(value)
    return StackConfig(stack, values, sorted(secret_keys), name)
