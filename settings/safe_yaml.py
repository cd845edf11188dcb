"""Load a stack file's YAML as Pulumi reads it, safely, and refuse what two YAML dialects disagree on.

Pulumi reads ``Pulumi.<stack>.yaml`` with ``gopkg.in/yaml.v3`` (pulumi/pulumi
``sdk/go/common/encoding/marshal.go``): YAML 1.2 core-schema booleans (``true``/``false`` only),
no sexagesimal numbers, and duplicate mapping keys are an error ("mapping key ... already
defined"). PyYAML's ``safe_load`` is YAML 1.1: ``yes``/``on`` are booleans, ``1:30`` is 90 and
duplicate keys silently keep the last one. So this module builds values itself from PyYAML's
node graph, with the YAML 1.2 core rules, and refuses every plain scalar the two dialects (or
yaml.v3 and what a reader sees) disagree on, naming its key:

- ``010`` (yaml.v3 still reads a leading-zero number as YAML 1.1 octal, go-yaml/yaml v3
  ``resolve.go``: "Octals from the 1.1 spec, spelled as 0777, are still decoded by default"),
  ``0o10``, ``0x10``, ``0b10``, ``1_000`` and sexagesimal ``1:30``;
- ``yes``/``no``/``on``/``off``/``y``/``n`` (booleans in YAML 1.1, strings in 1.2);
- dates and timestamps (yaml.v3 makes them ``time.Time``, which Pulumi turns into Go's
  ``2006-01-02 00:00:00 +0000 UTC`` text, pulumi ``sdk/go/common/resource/config/object.go``);
- ``.inf``/``.nan``, the merge key ``<<``, and tags other than the core ``!!str !!int !!float
  !!bool !!null !!map !!seq`` (``!!binary``, ``!!set``, ``!!timestamp``, ``!!omap``, local tags).

Quoting a scalar always makes it the string as written. Hostile input is cut short: a size limit,
a nesting limit checked on the event stream before any recursion, and an alias limit on the
expanded value (yaml.v3 has its own "excessive aliasing" guard, ``decode.go``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 256 * 1024  # a stack file with every setting and its secrets is a few KiB
MAX_DEPTH = 32  # the deepest real config value is a list inside a group object (depth 4)
MAX_ALIASES = 32
MAX_NODES = 20_000  # values after alias expansion; a billion-laughs file needs millions

_NULLS = {"", "~", "null", "Null", "NULL"}
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_YAML11_BOOLS = re.compile(r"y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF", re.ASCII)
_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)", re.ASCII)
_DECIMAL_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?", re.ASCII)
_LEADING_ZERO_INT = re.compile(r"[-+]?0[0-9]+", re.ASCII)
_NOT_FINITE = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)", re.ASCII)
_OTHER_NUMBER = re.compile(
    r"[-+]?(0[0-9_]+|0[oO][0-7_]+|0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*(\.[0-9_]*)?)"
    r"|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?",
    re.ASCII,
)
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?", re.ASCII)
_CORE_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


@dataclass(frozen=True)
class YamlIssue:
    """One refused part of a YAML document: where (line, key path) and why. Never the value."""

    line: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f" ({self.path})" if self.path else ""
        return f"line {self.line}{where}: {self.message}"


class YamlError(ValueError):
    """Every refused part of one YAML document, reported together."""

    def __init__(self, source: str, issues: list[YamlIssue]):
        self.source = source
        self.issues = issues
        super().__init__("\n".join([f"{source}:", *(f"  - {i}" for i in issues)]))


def shown_key(key: str, limit: int = 120) -> str:
    """A key for a message: as written when it is plain, quoted and cut when it is empty, long or
    holds characters that would garble the message (keys are shown, values are not)."""
    plain = key and len(key) <= limit and key.isascii() and key.isprintable()
    # A leading colon or ": " inside would read as the separator before the message.
    if plain and not key.startswith(":") and ": " not in key:
        return key
    quoted = json.dumps(key)
    return quoted if len(quoted) <= limit else f"{quoted[: limit - 3]}..."


def format_path(path: tuple[Any, ...]) -> str:
    """``("config", "deepseek-eks:model", "variant")`` -> ``deepseek-eks:model.variant``."""
    parts = list(path[1:] if path[:1] == ("config",) else path)
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return shown_key(text) if text else ""


def _check_events(text: str, source: str) -> None:
    """Depth and alias limits on the event stream: iterative, so deep nesting cannot overflow
    Python's stack before it is refused."""
    depth = aliases = documents = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise YamlError(source, [_issue(event, (), "several YAML documents: keep one")])
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlError(source, [_issue(event, (), f"nested deeper than {MAX_DEPTH} levels")])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise YamlError(source, [_issue(event, (), f"more than {MAX_ALIASES} YAML aliases (*name)")])


def _issue(mark_holder: Any, path: tuple[Any, ...], message: str) -> YamlIssue:
    mark = getattr(mark_holder, "start_mark", None)
    return YamlIssue(mark.line + 1 if mark else 0, format_path(path), message)


_PLAIN = "tag:deepseek-eks,2026:plain"  # our marker for an untagged plain scalar


class _Loader(yaml.SafeLoader):
    """PyYAML's composer with no YAML 1.1 type guessing: every untagged plain scalar gets the
    ``_PLAIN`` tag, and ``_Builder`` types it with the YAML 1.2 core rules."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class-level registry


_Loader.add_implicit_resolver(_PLAIN, re.compile(r".*", re.DOTALL), None)


class _Builder:
    """Turns PyYAML's node graph into plain values with the YAML 1.2 core rules above."""

    def __init__(self) -> None:
        self.issues: list[YamlIssue] = []
        self.nodes = 0

    def refuse(self, node: Node, path: tuple[Any, ...], message: str) -> None:
        self.issues.append(_issue(node, path, message))

    def value(self, node: Node, path: tuple[Any, ...], depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            raise _TooLarge(node)
        if node.tag != _PLAIN and node.tag not in _CORE_TAGS:
            short = node.tag.replace("tag:yaml.org,2002:", "!!")
            self.refuse(node, path, f"YAML tag {short} is not supported in a stack file: write a plain value")
            return None
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if isinstance(node, SequenceNode):
            return [self.value(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        assert isinstance(node, MappingNode)
        return self.mapping(node, path, depth)

    def mapping(self, node: MappingNode, path: tuple[Any, ...], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            self.nodes += 1
            key = self.scalar(key_node, path) if isinstance(key_node, ScalarNode) else None
            if key == "<<" and key_node.tag == _PLAIN:
                self.refuse(key_node, path, "YAML merge keys (<<) are not supported: write the keys out")
                continue
            if not isinstance(key, str):
                self.refuse(key_node, path, "a mapping key must be a string: quote it")
                continue
            if key in lines:
                self.refuse(key_node, (*path, key), f"given twice (first at line {lines[key]}): keep one")
                continue
            lines[key] = key_node.start_mark.line + 1
            out[key] = self.value(value_node, (*path, key), depth + 1)
        return out

    def scalar(self, node: ScalarNode, path: tuple[Any, ...]) -> Any:
        text, tag = node.value, node.tag
        typed = _typed(text)
        if tag == _PLAIN:
            if typed is not _TEXT:
                return typed
            reason = _ambiguity(text)
            if reason:
                self.refuse(node, path, f"{reason} quote it to mean the text as written")
                return None
            return text
        if tag == "tag:yaml.org,2002:str":
            return text
        wanted: Any = {
            "tag:yaml.org,2002:null": type(None),
            "tag:yaml.org,2002:bool": bool,
            "tag:yaml.org,2002:int": int,
            "tag:yaml.org,2002:float": (int, float),
        }.get(tag)
        if (
            wanted is None
            or typed is _TEXT
            or not isinstance(typed, wanted)
            or isinstance(typed, bool) is not (wanted is bool)
        ):
            self.refuse(node, path, f"not a valid {tag.replace('tag:yaml.org,2002:', '!!')} value")
            return None
        return float(typed) if tag == "tag:yaml.org,2002:float" else typed


_TEXT = object()


def _typed(text: str) -> Any:
    """The YAML 1.2 core-schema value of a plain scalar, or ``_TEXT`` when it is a string."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if _DECIMAL_INT.fullmatch(text):
        return int(text)
    if _DECIMAL_FLOAT.fullmatch(text) and not _LEADING_ZERO_INT.fullmatch(text):
        return float(text)
    return _TEXT


def _ambiguity(text: str) -> str | None:
    """Why a plain scalar would not mean what it looks like (or differs between YAML 1.1 and 1.2)."""
    if _YAML11_BOOLS.fullmatch(text):
        return (
            "an unquoted yes/no/on/off is a boolean in YAML 1.1 and a string in YAML 1.2 "
            "(write true or false), or"
        )
    if _NOT_FINITE.fullmatch(text):
        return "not a finite number: write a plain decimal, or"
    if _TIMESTAMP.fullmatch(text):
        return "an unquoted date is a timestamp in YAML, not text:"
    if _OTHER_NUMBER.fullmatch(text):
        return (
            "an unquoted number with a leading 0, a 0o/0x/0b prefix, underscores or colons is "
            "read as octal, hex, binary or base 60 by YAML parsers (010 is 8, 1:30 is 90): "
            "write a plain decimal, or"
        )
    return None


class _TooLarge(Exception):
    def __init__(self, node: Node):
        self.node = node


def load(text: str, source: str) -> Any:
    """The single YAML document in ``text`` as plain values (dict, list, str, int, float, bool,
    None); raises ``YamlError`` listing every refused part, with line numbers, never values."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YamlError(source, [YamlIssue(0, "", f"larger than {MAX_BYTES // 1024} KiB: not a stack file")])
    try:
        _check_events(text, source)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 0
        raise YamlError(source, [YamlIssue(line, "", f"not valid YAML: {e.problem or e.context}")]) from None
    except yaml.YAMLError as e:
        raise YamlError(source, [YamlIssue(0, "", f"not valid YAML: {type(e).__name__}")]) from None
    if node is None:
        return None
    builder = _Builder()
    try:
        value = builder.value(node, (), 0)
    except _TooLarge as e:
        raise YamlError(
            source, [_issue(e.node, (), "YAML aliases expand to too many values (an alias bomb?)")]
        ) from None
    if builder.issues:
        raise YamlError(source, builder.issues)
    return value
