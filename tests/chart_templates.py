"""Render a chart's vendored RBAC templates the way Helm would, with the values Helm would install.

No Helm binary or chart repository is reachable offline, so this evaluates the subset of Go's
``text/template`` (and of Helm's sprig functions) that the vendored RBAC templates under
``reference/upstream/helm-charts/<chart>-<version>/templates`` use: actions with ``{{-``/``-}}``
trimming, comments, ``if``/``else if``/``else``, ``with``, ``range`` (with ``$v :=`` and
``$i, $v :=``), variables, pipelines, parenthesised sub-expressions with a field chain, and the
functions in ``FUNCTIONS``. Anything else (an unknown function, ``define``, ``block``) raises
``TemplateError``: a template this cannot render fails the test, it never renders as nothing.

Named templates (``include``/``template``) are the chart's ``_helpers.tpl`` defines, which are not
vendored: names and labels do not decide what a rule grants, so they render as the helper's own
name (labels as nothing). The few helpers whose result decides which rules render are written out
in ``HELPERS`` from the chart's source, each citing the define it follows.

Checked against the real Helm engine (helm.sh/helm/v3 v3.18.6 ``engine.Render`` over the full
charts of the pinned releases, with the values of every example stack): the same Roles and
ClusterRoles with the same rules (issue 37 §3; see reference/upstream/chart-rbac-facts.json).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class TemplateError(ValueError):
    """A construct or function this evaluator does not implement (or a malformed template)."""


# ---- lexing ---------------------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{(-[ \t\r\n])?(.*?)([ \t\r\n]-)?\}\}", re.S)
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      |(?P<decl>:=)|(?P<assign>=)|(?P<pipe>\|)|(?P<lparen>\()|(?P<rparen>\))|(?P<comma>,)
      |(?P<string>"(?:\\.|[^"\\])*")|(?P<raw>`[^`]*`)
      |(?P<number>-?\d+(?:\.\d+)?)
      |(?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
      |(?P<field>(?:\.[A-Za-z0-9_]+)+|\.)
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)""",
    re.X,
)


def _chunks(text: str) -> list[tuple[str, str]]:
    """("text", s) and ("action", body) pieces, with Helm's whitespace trimming applied."""
    out: list[tuple[str, str]] = []
    pos = 0
    trim_next = False
    for match in _ACTION.finditer(text):
        literal = text[pos : match.start()]
        if trim_next:
            literal = literal.lstrip(" \t\r\n")
        if match.group(1):
            literal = literal.rstrip(" \t\r\n")
        out.append(("text", literal))
        out.append(("action", match.group(2).strip()))
        trim_next = bool(match.group(3))
        pos = match.end()
    tail = text[pos:]
    out.append(("text", tail.lstrip(" \t\r\n") if trim_next else tail))
    return out


@dataclass
class Token:
    kind: str
    text: str
    attached: bool = False  # a field chain written right after ")" (``(expr).name``)


def _tokens(body: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    previous_end = -1
    while pos < len(body):
        match = _TOKEN.match(body, pos)
        if not match:
            raise TemplateError(f"cannot read {body[pos:]!r} in {{{{ {body} }}}}")
        kind = match.lastgroup or ""
        if kind != "ws":
            attached = (
                kind == "field"
                and previous_end == match.start()
                and bool(tokens)
                and (tokens[-1].kind == "rparen")
            )
            tokens.append(Token(kind, match.group(), attached))
            previous_end = match.end()
        pos = match.end()
    return tokens


# ---- parsing --------------------------------------------------------------------------------------


@dataclass
class Operand:
    kind: str  # field, var, string, number, bool, nil, ident, pipeline
    value: Any
    chain: tuple[str, ...] = ()


@dataclass
class Pipeline:
    commands: list[list[Operand]]
    declare: tuple[str, ...] = ()
    assign: bool = False  # ``$x = ...`` (not ``:=``)


@dataclass
class Node:
    kind: str  # text, action, if, with, range
    text: str = ""
    pipeline: Pipeline | None = None
    branches: list[tuple[Pipeline, list[Node]]] = field(default_factory=list)
    body: list[Node] = field(default_factory=list)
    otherwise: list[Node] = field(default_factory=list)


def _parse_pipeline(body: str) -> Pipeline:
    tokens = _tokens(body)
    declare: tuple[str, ...] = ()
    assign = False
    for i, token in enumerate(tokens):
        if token.kind in ("decl", "assign"):
            names = [t.text for t in tokens[:i] if t.kind == "var"]
            if not names or any(t.kind not in ("var", "comma") for t in tokens[:i]):
                raise TemplateError(f"malformed declaration {{{{ {body} }}}}")
            declare, assign, tokens = tuple(names), token.kind == "assign", tokens[i + 1 :]
            break
    commands, rest = _parse_commands(tokens, body)
    if rest:
        raise TemplateError(f"unexpected {rest[0].text!r} in {{{{ {body} }}}}")
    return Pipeline(commands, declare, assign)


def _parse_commands(tokens: list[Token], body: str) -> tuple[list[list[Operand]], list[Token]]:
    commands: list[list[Operand]] = [[]]
    while tokens:
        token = tokens[0]
        if token.kind == "rparen":
            break
        tokens = tokens[1:]
        if token.kind == "pipe":
            commands.append([])
            continue
        if token.kind == "lparen":
            inner, tokens = _parse_commands(tokens, body)
            if not tokens or tokens[0].kind != "rparen":
                raise TemplateError(f"unclosed ( in {{{{ {body} }}}}")
            tokens = tokens[1:]
            chain: tuple[str, ...] = ()
            if tokens and tokens[0].kind == "field" and tokens[0].attached:
                chain = tuple(tokens[0].text.split(".")[1:])
                tokens = tokens[1:]
            commands[-1].append(Operand("pipeline", Pipeline(inner), chain))
        elif token.kind == "field":
            commands[-1].append(Operand("field", tuple(p for p in token.text.split(".") if p)))
        elif token.kind == "var":
            name, *chain_parts = token.text.split(".")
            commands[-1].append(Operand("var", name, tuple(chain_parts)))
        elif token.kind == "string":
            commands[-1].append(Operand("string", json.loads(token.text)))
        elif token.kind == "raw":
            commands[-1].append(Operand("string", token.text[1:-1]))
        elif token.kind == "number":
            number = float(token.text) if "." in token.text else int(token.text)
            commands[-1].append(Operand("number", number))
        elif token.kind == "ident" and token.text in ("true", "false"):
            commands[-1].append(Operand("bool", token.text == "true"))
        elif token.kind == "ident" and token.text == "nil":
            commands[-1].append(Operand("nil", None))
        elif token.kind == "ident":
            commands[-1].append(Operand("ident", token.text))
        else:
            raise TemplateError(f"unexpected {token.text!r} in {{{{ {body} }}}}")
    if any(not c for c in commands):
        raise TemplateError(f"empty command in {{{{ {body} }}}}")
    return commands, tokens


def parse(text: str) -> list[Node]:
    """The template's node tree."""
    chunks = _chunks(text)
    nodes, _, end = _parse_block(chunks, 0, top=True)
    if end is not None:
        raise TemplateError(f"unexpected {{{{ {end} }}}}")
    return nodes


def _parse_block(
    chunks: list[tuple[str, str]], index: int, top: bool = False
) -> tuple[list[Node], int, str | None]:
    """Nodes up to the ``else``/``end`` that closes this block (returned as the third item)."""
    nodes: list[Node] = []
    while index < len(chunks):
        kind, body = chunks[index]
        index += 1
        if kind == "text":
            if body:
                nodes.append(Node("text", text=body))
            continue
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise TemplateError(f"unclosed comment {{{{ {body} }}}}")
            continue
        word = body.split(None, 1)[0] if body else ""
        if word in ("end", "else"):
            if top:
                raise TemplateError(f"{{{{ {body} }}}} without a block")
            return nodes, index, body
        if word in ("if", "with", "range"):
            node, index = _parse_control(word, body[len(word) :].strip(), chunks, index)
            nodes.append(node)
        elif word in ("define", "block", "break", "continue"):
            raise TemplateError(f"{{{{ {word} }}}} is not implemented here")
        else:
            nodes.append(Node("action", pipeline=_parse_pipeline(body)))
    if not top:
        raise TemplateError("a block has no {{ end }}")
    return nodes, index, None


def _parse_control(word: str, condition: str, chunks: list[tuple[str, str]], index: int) -> tuple[Node, int]:
    node = Node(word)
    pipeline = _parse_pipeline(condition)
    while True:
        body, index, closer = _parse_block(chunks, index)
        if word == "if":
            node.branches.append((pipeline, body))
        else:
            node.pipeline, node.body = pipeline, body
        assert closer is not None
        if closer == "end":
            return node, index
        rest = closer[len("else") :].strip()
        if rest.startswith("if ") and word == "if":
            pipeline = _parse_pipeline(rest[3:])
            continue
        if rest:
            raise TemplateError(f"{{{{ {closer} }}}} is not implemented here")
        node.otherwise, index, closer = _parse_block(chunks, index)
        if closer != "end":
            raise TemplateError(f"{{{{ {closer} }}}} after else")
        return node, index


# ---- evaluation -----------------------------------------------------------------------------------


def truthy(value: Any) -> bool:
    """Go template truth: false, 0, nil and empty strings, lists and maps are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, str | list | dict | tuple):
        return len(value) > 0
    return True


def printed(value: Any) -> str:
    """What ``{{ value }}`` writes (Helm writes a missing value as nothing)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    raise TemplateError(f"cannot print {type(value).__name__} {value!r} (Go would write its %v form)")


def _field(value: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise TemplateError(f"can't evaluate field {name} in {type(value).__name__}")
        value = value.get(name)
    return value


def to_yaml(value: Any) -> str:
    """sprig/Helm ``toYaml``: block YAML, keys sorted, no trailing newline."""
    return (
        yaml.safe_dump(value, default_flow_style=False, sort_keys=True)
        .removesuffix("\n")
        .removesuffix("\n...")
    )


def _indent(width: int, text: Any) -> str:
    pad = " " * int(width)
    return "\n".join(pad + line for line in str(text).split("\n"))


def _go_format(fmt: str, *args: Any) -> str:
    out, values = [], list(args)

    def take() -> Any:
        if not values:
            raise TemplateError(f"printf {fmt!r}: too few arguments")
        return values.pop(0)

    i = 0
    while i < len(fmt):
        if fmt[i] == "%" and i + 1 < len(fmt):
            verb = fmt[i + 1]
            if verb == "%":
                out.append("%")
            elif verb in "sdv":
                out.append(printed(take()))
            elif verb == "q":
                out.append(json.dumps(printed(take())))
            else:
                raise TemplateError(f"printf verb %{verb} is not implemented here")
            i += 2
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


def _uniq(items: Any) -> list[Any]:
    found: list[Any] = []
    for item in items or []:
        if item not in found:
            found.append(item)
    return found


def _kind_is(kind: str, value: Any) -> bool:
    kinds = {
        "string": isinstance(value, str),
        "map": isinstance(value, dict),
        "slice": isinstance(value, list),
        "bool": isinstance(value, bool),
        "invalid": value is None,
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float64": isinstance(value, float),
    }
    if kind not in kinds:
        raise TemplateError(f"kindIs {kind!r} is not implemented here")
    return kinds[kind]


def _index(value: Any, *keys: Any) -> Any:
    for key in keys:
        if value is None:
            return None
        value = value[key] if isinstance(value, list) else value.get(key)
    return value


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toYaml": to_yaml,
    "nindent": lambda width, text: "\n" + _indent(width, text),
    "indent": _indent,
    "quote": lambda *values: " ".join(json.dumps(printed(v)) for v in values if v is not None),
    "printf": _go_format,
    "default": lambda fallback, *value: value[0] if value and truthy(value[0]) else fallback,
    "eq": lambda first, *others: any(first == other for other in others),
    "ne": lambda a, b: a != b,
    "not": lambda value: not truthy(value),
    "has": lambda item, items: item in (items or []),
    "hasKey": lambda mapping, key: key in (mapping or {}),
    "index": _index,
    "ternary": lambda yes, no, condition: yes if truthy(condition) else no,
    "join": lambda sep, items: sep.join(printed(i) for i in (items or [])),
    "split": lambda sep, text: {f"_{i}": part for i, part in enumerate(str(text).split(sep))},
    "splitList": lambda sep, text: str(text).split(sep),
    "list": lambda *items: list(items),
    "append": lambda items, item: [*(items or []), item],
    "concat": lambda *lists: [item for items in lists for item in (items or [])],
    "uniq": _uniq,
    "mustUniq": _uniq,
    "trim": lambda text: str(text).strip(),
    "kindIs": _kind_is,
    "empty": lambda value: not truthy(value),
    "fromYamlArray": lambda text: list(yaml.safe_load(text) or []),
    "fromJson": lambda text: json.loads(text),
}
LAZY = ("and", "or")


Helper = Callable[["Scope", Any], str]


@dataclass
class Scope:
    root: dict[str, Any]
    helpers: Mapping[str, Helper]
    variables: list[dict[str, Any]] = field(default_factory=list)

    def lookup(self, name: str) -> Any:
        if name == "$":
            return self.root
        for frame in reversed(self.variables):
            if name in frame:
                return frame[name]
        raise TemplateError(f"undefined variable {name}")

    def assign(self, name: str, value: Any) -> None:
        for frame in reversed(self.variables):
            if name in frame:
                frame[name] = value
                return
        raise TemplateError(f"assignment to undeclared variable {name}")


def _include(scope: Scope, name: str, context: Any) -> str:
    helper = scope.helpers.get(name)
    if helper is not None:
        return helper(scope, context)
    if name.endswith("labels"):
        return ""  # labels decide nothing a rule grants
    return name.replace(".", "-")


def _operand(scope: Scope, dot: Any, operand: Operand) -> Any:
    if operand.kind == "field":
        return _field(dot, operand.value)
    if operand.kind == "var":
        return _field(scope.lookup(operand.value), operand.chain)
    if operand.kind == "pipeline":
        return _field(_pipeline(scope, dot, operand.value), operand.chain)
    if operand.kind == "ident":
        return _call(scope, dot, operand.value, [], None, has_piped=False)
    return operand.value


def _call(scope: Scope, dot: Any, name: str, args: list[Operand], piped: Any, has_piped: bool) -> Any:
    if name in LAZY:
        thunks: list[Callable[[], Any]] = [lambda a=a: _operand(scope, dot, a) for a in args]
        if has_piped:
            thunks.append(lambda: piped)
        value: Any = None
        for thunk in thunks:
            value = thunk()
            if truthy(value) != (name == "and"):
                return value
        return value
    values = [_operand(scope, dot, a) for a in args]
    if has_piped:
        values.append(piped)
    if name in ("include", "template"):
        return _include(scope, values[0], values[1] if len(values) > 1 else None)
    if name not in FUNCTIONS:
        raise TemplateError(f"function {name!r} is not implemented here")
    return FUNCTIONS[name](*values)


def _pipeline(scope: Scope, dot: Any, pipeline: Pipeline) -> Any:
    value: Any = None
    for i, command in enumerate(pipeline.commands):
        head, args = command[0], command[1:]
        if head.kind == "ident":
            value = _call(scope, dot, head.value, args, value, has_piped=i > 0)
        else:
            if args or i > 0:
                raise TemplateError("only a function takes arguments or a piped value")
            value = _operand(scope, dot, head)
    for name in pipeline.declare:
        if pipeline.assign:
            scope.assign(name, value)
        else:
            scope.variables[-1][name] = value
    return value


def _items(value: Any) -> Iterator[tuple[Any, Any]]:
    if value is None:
        return
    if isinstance(value, dict):
        for key in sorted(value):
            yield key, value[key]
    elif isinstance(value, list | tuple):
        yield from enumerate(value)
    else:
        raise TemplateError(f"range over {type(value).__name__}")


def _run(scope: Scope, dot: Any, nodes: list[Node], out: list[str]) -> None:
    for node in nodes:
        if node.kind == "text":
            out.append(node.text)
        elif node.kind == "action":
            assert node.pipeline is not None
            value = _pipeline(scope, dot, node.pipeline)
            if not node.pipeline.declare:
                out.append(printed(value))
        elif node.kind == "if":
            scope.variables.append({})
            try:
                for condition, body in node.branches:
                    if truthy(_pipeline(scope, dot, condition)):
                        _run(scope, dot, body, out)
                        break
                else:
                    _run(scope, dot, node.otherwise, out)
            finally:
                scope.variables.pop()
        elif node.kind == "with":
            assert node.pipeline is not None
            scope.variables.append({})
            try:
                value = _pipeline(scope, dot, node.pipeline)
                _run(scope, value, node.body, out) if truthy(value) else _run(scope, dot, node.otherwise, out)
            finally:
                scope.variables.pop()
        elif node.kind == "range":
            assert node.pipeline is not None
            names, node.pipeline.declare = node.pipeline.declare, ()
            scope.variables.append({})
            try:
                items = list(_items(_pipeline(scope, dot, node.pipeline)))
                for key, item in items:
                    frame = (
                        {names[0]: item} if len(names) == 1 else dict(zip(names, (key, item), strict=False))
                    )
                    scope.variables.append(frame)
                    try:
                        _run(scope, item, node.body, out)
                    finally:
                        scope.variables.pop()
                if not items:
                    _run(scope, dot, node.otherwise, out)
            finally:
                scope.variables.pop()
                node.pipeline.declare = names


def render_text(
    text: str, values: Mapping[str, Any], *, namespace: str, release: str, helpers: Mapping[str, Helper] = {}
) -> str:
    """The template's output with ``.Values`` = ``values`` (already coalesced with the chart's
    defaults, as Helm does before rendering)."""
    root = {
        "Values": dict(values),
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True},
        "Subcharts": {},
    }
    scope = Scope(root, helpers, [{}])
    out: list[str] = []
    _run(scope, root, parse(text), out)
    return "".join(out)


def render_objects(
    templates: list[Path],
    values: Mapping[str, Any],
    *,
    namespace: str,
    release: str,
    helpers: Mapping[str, Helper] = {},
) -> list[dict[str, Any]]:
    """Every object the templates render (Helm drops documents that render empty), each with the
    path of its template under ``_template``."""
    objects: list[dict[str, Any]] = []
    for template in templates:
        text = render_text(
            template.read_text(), values, namespace=namespace, release=release, helpers=helpers
        )
        for document in yaml.safe_load_all(text):
            if isinstance(document, dict) and document:
                document.setdefault("metadata", {})
                objects.append(document | {"_template": str(template)})
    return objects


# ---- helpers that decide which rules render ------------------------------------------------------


def _ksm_collectors(scope: Scope, context: Any) -> str:
    """kube-state-metrics 8.4.0 ``_helpers.tpl`` define "kube-state-metrics.collectors": ``collectors``
    without ``collectorsExclude``, then ``collectorsExtra``, de-duplicated, as a YAML list."""
    values = context["Values"]

    def listed(key: str) -> list[Any]:
        value = values.get(key) or []
        return [value] if isinstance(value, str) else list(value)

    exclude = listed("collectorsExclude")
    final = [c for c in listed("collectors") if c not in exclude]
    return to_yaml(_uniq([*final, *listed("collectorsExtra")]))


def _device_plugin_options(scope: Scope, context: Any) -> str:
    """nvidia-device-plugin 0.18.0 ``_helpers.tpl`` define "nvidia-device-plugin.options": its
    ``hasConfigMap`` is whether "nvidia-device-plugin.configMapName" is non-empty (``config.name``,
    or a ``config.map`` that is not empty); ``addMigMonitorDevices`` decides no rule."""
    config = context["Values"].get("config") or {}
    has_config_map = bool(config.get("name")) or truthy(config.get("map"))
    return json.dumps({"": "", "hasConfigMap": has_config_map, "addMigMonitorDevices": False})


def _namespace_helper(scope: Scope, context: Any) -> str:
    """Charts' "<chart>.namespace" defines: ``namespaceOverride``, else the release's namespace."""
    values = context["Values"]
    return str(values.get("namespaceOverride") or context["Release"]["Namespace"])


HELPERS: dict[str, Helper] = {
    "kube-state-metrics.collectors": _ksm_collectors,
    "nvidia-device-plugin.options": _device_plugin_options,
    "grafana.namespace": _namespace_helper,
    "dcgm-exporter.namespace": _namespace_helper,
    "k8s-prometheus-adapter.namespace": _namespace_helper,
    "kube-prometheus-stack.namespace": _namespace_helper,
}
