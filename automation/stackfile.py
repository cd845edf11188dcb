"""The one reader of stack config: ``Pulumi.yaml`` defaults and ``Pulumi.<stack>.yaml`` turned
into the config map the Pulumi engine hands a program (full keys, values as strings, objects and
lists as JSON, secret keys listed apart). Render, plan, preflight and the Automation API all read
stacks here, so they see what ``pulumi up`` would.

What the engine does, and this reader copies (pulumi/pulumi at 1b59498):

- keys are ``<namespace>:<name>`` or the old ``<namespace>:config:<name>``; a key without a
  namespace is an error (``sdk/go/common/resource/config/key.go`` ``ParseKey``);
- a value is a scalar, a list or a mapping; ``{secure: <ciphertext>}`` (a one-key mapping with a
  string) is a secret (``object.go`` ``isSecureValue``); scalars reach the program as text and
  objects as JSON (``object.go`` ``MarshalString``);
- project defaults merge **by path**: for each key declared in ``Pulumi.yaml`` the engine looks the
  key up as a property path (``model.variant`` is ``variant`` inside ``deepseek-eks:model``) and,
  when absent, sets the default at that path (``pkg/workspace/config.go`` ``mergeConfig`` with
  ``config.Map.Get/Set(key, path=true)``, ``sdk/go/common/resource/config/map.go``). So a stack
  written with ``pulumi config set --path model.variant x`` keeps its ``x`` and gets the other
  ``model.*`` defaults; a stack written with flat keys gets the defaults in a ``deepseek-eks:model``
  object next to its flat keys, and the settings take the flat key over a default there.

Stricter than the engine, because a stack file should mean one thing: the same setting written
both flat and as a path is refused, so is any YAML the safe loader refuses (duplicate keys,
YAML 1.1 numbers, aliases beyond a limit; see ``settings/safe_yaml.py``), an ESC ``environment:``
(its values cannot be read offline) and unknown top-level keys (Pulumi ignores them silently).
Offline, secrets cannot be decrypted: they become a placeholder and stay marked secret.
"""

from __future__ import annotations

import copy
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eks.settings import safe_yaml
from deepseek_eks.settings.safe_yaml import shown_key

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SECRET_PLACEHOLDER = "[secret]"
# Fields of a stack file Pulumi knows (sdk/go/common/workspace/project.go ``ProjectStack``).
STACK_FILE_FIELDS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


class StackFileError(ValueError):
    """A stack or project file that is missing or not shaped like Pulumi's; lists every problem."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = problems
        lines = (
            [f"{source}:", *(f"  - {p}" for p in problems)]
            if len(problems) > 1
            else [f"{source}: {problems[0]}"]
        )
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Project:
    """``Pulumi.yaml``: the project name and its config defaults under full keys."""

    name: str
    defaults: dict[str, Any]


@dataclass
class StackConfig:
    """The config of one stack as the Pulumi engine would hand it to the program.

    ``values``/``secret_keys`` are the engine's view (project defaults merged);
    ``raw`` is the stack file's own ``config:`` (full keys, secure values kept as written) and
    ``document`` the rest of the file, so a run can write the stack file back with overrides.
    """

    stack: str
    values: dict[str, str] = field(default_factory=dict)
    secret_keys: list[str] = field(default_factory=list)
    project: str = "deepseek-eks"
    raw: dict[str, Any] = field(default_factory=dict)
    document: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, overrides: dict[str, Any], project: str | None = None) -> StackConfig:
        """A copy with ``key=value`` overrides (keys without a namespace are the project's), each
        written where the stack already has that setting: inside its object when the stack uses
        ``--path`` objects, as a flat key otherwise. String values are read as YAML scalars or
        flow lists, the way they would be read from the stack file."""
        project = project or self.project
        raw = copy.deepcopy(self.raw)
        problems: list[str] = []
        for key, value in overrides.items():
            full = key if ":" in key else f"{project}:{key}"
            try:
                namespace, name = parse_key(full)
            except ValueError as e:
                problems.append(f"--set {shown_key(key)}: {e}")
                continue
            if isinstance(value, str):
                try:
                    value = safe_yaml.load(value, f"--set {key}") if value.strip() else value
                except safe_yaml.YamlError as e:
                    problems += [f"--set {shown_key(key)}: {i.message}" for i in e.issues]
                    continue
            _override(raw, namespace, name, value)
        if problems:
            raise StackFileError("--set", problems)
        return _engine_config(self.stack, raw, self.document, Project(project, self.defaults))


def config_set_command(config: StackConfig, name: str, value: object) -> str:
    """The ``pulumi config set`` command that sets the project's setting ``name``
    (``autoscaling.maxReplicas``) to ``value`` in ``config``'s stack, in the form its stack file
    keeps that setting: ``--path`` into its object where the file keeps the group as one (a flat key
    beside it would be refused as the same setting twice), else the flat key."""
    path = " --path" if _kept_as_object(config.raw, config.project, name) else ""
    return f"pulumi config set --stack {config.stack}{path} {config.project}:{name} {value}"


def parse_key(key: str) -> tuple[str, str]:
    """``ns:name`` or ``ns:config:name`` -> ``(ns, name)``, as Pulumi's ``config.ParseKey``."""
    parts = key.split(":")
    if len(parts) == 2 and parts[0] and parts[1]:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[1] == "config" and parts[0] and parts[2]:
        return parts[0], parts[2]
    if len(parts) == 1:
        raise ValueError("a config key needs a namespace, e.g. deepseek-eks:<name> or aws:<name>")
    raise ValueError("not a config key: use <namespace>:<name>")


def _path(name: str) -> list[str]:
    """The property path of a key name; config names here are dotted (``model.variant``)."""
    return name.split(".")


def _get_path(config: dict[str, Any], namespace: str, name: str) -> tuple[bool, Any]:
    """``config.Map.Get(key, path=true)``: the value at ``name``'s path, if any."""
    first, *rest = _path(name)
    node = config.get(f"{namespace}:{first}", _ABSENT)
    for segment in rest:
        if not isinstance(node, dict) or segment not in node:
            return False, None
        node = node[segment]
    return node is not _ABSENT, node


def _set_path(config: dict[str, Any], namespace: str, name: str, value: Any) -> None:
    """``config.Map.Set(key, value, path=true)``: objects are created along the path."""
    first, *rest = _path(name)
    key = f"{namespace}:{first}"
    if not rest:
        config[key] = value
        return
    node = config.setdefault(key, {})
    for segment in rest[:-1]:
        node = node.setdefault(segment, {})
    node[rest[-1]] = value


def _kept_as_object(raw: dict[str, Any], namespace: str, name: str) -> bool:
    """Whether the stack file keeps ``name``'s group (``autoscaling`` of ``autoscaling.maxReplicas``)
    as one object, the ``--path`` form, where a flat key for it would be the same setting twice."""
    first, *rest = _path(name)
    root = raw.get(f"{namespace}:{first}")
    return bool(rest) and isinstance(root, dict) and not _is_secure(root)


def _override(raw: dict[str, Any], namespace: str, name: str, value: Any) -> None:
    if _kept_as_object(raw, namespace, name):
        _set_path(raw, namespace, name, value)
    else:
        raw[f"{namespace}:{name}"] = value


_ABSENT = object()


def _is_secure(value: Any) -> bool:
    # pulumi sdk/go/common/resource/config/object.go ``isSecureValue``
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("secure"), str)


def _without_secrets(value: Any) -> tuple[Any, bool]:
    """``value`` with each secure leaf replaced by the placeholder, and whether it had one."""
    if _is_secure(value):
        return SECRET_PLACEHOLDER, True
    if isinstance(value, dict):
        pairs = {k: _without_secrets(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_without_secrets(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


def engine_text(value: Any) -> str:
    """How the engine hands a config value to a program (``object.go`` ``MarshalString``)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def read_project(root: Path = PROJECT_ROOT) -> Project:
    """``Pulumi.yaml``: name and ``config:`` defaults under full keys."""
    path = root / "Pulumi.yaml"
    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"), path.name)
    except OSError as e:
        raise StackFileError(path.name, [f"cannot be read ({e.strerror})"]) from None
    except safe_yaml.YamlError as e:
        raise StackFileError(path.name, [str(i) for i in e.issues]) from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise StackFileError(path.name, ["needs a mapping with a name"])
    name = data["name"]
    defaults: dict[str, Any] = {}
    for key, decl in (data.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        # Short-hand values are defaults (project keys) or values (other namespaces):
        # project.go ``RewriteShorthandConfigValues``.
        if isinstance(decl, dict):
            if "default" in decl:
                defaults[full] = decl["default"]
            elif "value" in decl:
                defaults[full] = decl["value"]
        else:
            defaults[full] = decl
    return Project(name, defaults)


def project_name(root: Path = PROJECT_ROOT) -> str:
    return read_project(root).name


def project_defaults(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """``config:`` defaults declared in Pulumi.yaml, under full keys."""
    return read_project(root).defaults


def stack_names(root: Path = PROJECT_ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def _document(path: Path) -> dict[str, Any]:
    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"), path.name)
    except UnicodeDecodeError:
        raise StackFileError(path.name, ["is not UTF-8 text"]) from None
    except safe_yaml.YamlError as e:
        raise StackFileError(path.name, [str(i) for i in e.issues]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StackFileError(path.name, ["must be a mapping with a config: section"])
    problems = []
    for key in data:
        if key == "environment":
            problems.append(
                "environment: Pulumi ESC environments cannot be read offline; put the settings "
                "in config: (or run pulumi preview)"
            )
        elif key not in STACK_FILE_FIELDS:
            near = difflib.get_close_matches(key, STACK_FILE_FIELDS, n=1)
            hint = f"did you mean {near[0]}?" if near else f"a stack file has {', '.join(STACK_FILE_FIELDS)}"
            problems.append(f"unknown top-level key {shown_key(key)}: {hint}")
    if "config" in data and data["config"] is not None and not isinstance(data["config"], dict):
        problems.append("config: must be a mapping of <namespace>:<key>: value")
    if problems:
        raise StackFileError(path.name, problems)
    return data


def read_stack(stack: str, root: Path = PROJECT_ROOT) -> StackConfig:
    """Pulumi.yaml defaults merged by path into ``Pulumi.<stack>.yaml``'s config."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stack_names(root)) or "none"
        raise StackFileError(path.name, [f"no such stack file (stacks here: {known})"])
    project = read_project(root)
    document = _document(path)
    raw: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in (document.get("config") or {}).items():
        try:
            namespace, name = parse_key(key)
        except ValueError as e:
            hint = f" (did you mean {project.name}:{shown_key(key)}?)" if ":" not in key and key else ""
            problems.append(f"{shown_key(key)}: {e}{hint}")
            continue
        full = f"{namespace}:{name}"
        if full in raw:
            problems.append(f"{shown_key(key)}: the same key as {shown_key(full)}, given twice: keep one")
            continue
        raw[full] = value
    problems += _both_forms(raw)
    if problems:
        raise StackFileError(path.name, problems)
    return _engine_config(stack, raw, document, project)


def _both_forms(raw: dict[str, Any]) -> list[str]:
    """A flat key (``ns:model.variant``) whose setting is also in an object (``ns:model``)."""
    problems = []
    for full in raw:
        namespace, name = full.split(":", 1)
        if "." not in name:
            continue
        root = raw.get(f"{namespace}:{_path(name)[0]}", _ABSENT)
        found, _ = _get_path(raw, namespace, name)
        if found or (root is not _ABSENT and not isinstance(root, dict)):
            problems.append(
                f"{shown_key(full)}: also given as {shown_key(namespace + ':' + _path(name)[0])} (the "
                "--path form): the same setting written twice; keep one form"
            )
    return problems


def _engine_config(
    stack: str, raw: dict[str, Any], document: dict[str, Any], project: Project
) -> StackConfig:
    merged = copy.deepcopy(raw)
    for key in sorted(project.defaults):
        namespace, name = parse_key(key)
        found, _ = _get_path(merged, namespace, name)
        root = merged.get(f"{namespace}:{_path(name)[0]}", _ABSENT)
        if not found and (root is _ABSENT or isinstance(root, dict)) and not _is_secure(root):
            _set_path(merged, namespace, name, copy.deepcopy(project.defaults[key]))
    values: dict[str, str] = {}
    secret_keys = []
    for key, value in merged.items():
        plain, secret = _without_secrets(value)
        values[key] = engine_text(plain)
        if secret:
            secret_keys.append(key)
    return StackConfig(stack, values, sorted(secret_keys), project.name, raw, document, project.defaults)


def stack_document(config: StackConfig) -> dict[str, Any]:
    """The stack file as ``config`` means it (overrides applied, secure values as written),
    for the Automation API to hand the Pulumi CLI as ``--config-file``."""
    document = dict(config.document)
    document["config"] = copy.deepcopy(config.raw)
    return document
