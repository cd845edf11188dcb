"""The policy pack's shared ground: what a rule sees of a resource (``Resource``, ``Props``), the rule
types, the platform facts shipped with the pack, and the helpers every concern reads inputs with
(type tokens, nested inputs, containers, policy documents, the Helm charts that made an object).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eks.settings import cidrs as _CIDRS

Props = Mapping[str, Any]

# The facts of reference/upstream/platform-facts.json the rules need, shipped inside the pack (a
# wheel has no reference/ folder); a test keeps the copy equal to the snapshot.
PLATFORM_FACTS = Path(__file__).resolve().parent.parent / "facts.json"
KARPENTER_NODECLASS_GROUP = "karpenter.k8s.aws"


@dataclass(frozen=True)
class Resource:
    """What a stack rule sees of one resource."""

    type: str
    props: Props
    urn: str = ""
    name: str = ""
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    parent: str = ""
    """The URN of the resource's parent ("" for none, or when the caller does not know it): how a
    stack rule tells an object rendered by a Helm chart (a child of its Chart) from one written by
    hand."""


ResourceCheck = Callable[[str, Props], list[str]]
StackCheck = Callable[[list[Resource]], list[tuple[str, str]]]


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    check: ResourceCheck


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: StackCheck


def kind_of(token: str) -> tuple[str, str] | None:
    """(group, kind) of a ``kubernetes:<group>/<version>:<Kind>`` token (core group is "")."""
    if not token.startswith("kubernetes:"):
        return None
    _, api, kind = token.split(":", 2)
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    return ("" if group == "core" else group), kind


def is_kind(token: str, group: str, kind: str) -> bool:
    return kind_of(token) == (group, kind)


def get_in(props: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(props, Mapping):
            return None
        props = props.get(key)
    return props


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def open_to_world(cidrs: Iterable[Any]) -> str | None:
    """Why ``cidrs`` admit the whole internet, or None. Open means their union crosses the line of
    settings/cidrs.py (``describe_world_open``, the one definition the settings use too), so
    ``0.0.0.0/1`` plus ``128.0.0.0/1`` is as open as ``0.0.0.0/0``, and so is a set of large blocks
    that misses only part of the space; a string that is no CIDR is named too, since it cannot be
    judged."""
    listed = [str(c) for c in cidrs]
    _, bad = _CIDRS.parse(listed)
    if bad:
        return f"{', '.join(bad)} is not a CIDR"
    described: str | None = _CIDRS.describe_world_open(listed)
    return described


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, key, value) of every mapping entry under ``value``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            yield here, key, item
            yield from walk(item, here)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from walk(item, f"{path}[{index}]")


def containers(props: Props) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, container) of every container and init container in a Kubernetes object."""
    for path, key, value in walk(props):
        if key in ("containers", "initContainers", "ephemeralContainers") and isinstance(value, list):
            for index, container in enumerate(value):
                if isinstance(container, Mapping):
                    yield f"{path}[{index}]", container


def annotations_of(props: Props) -> Mapping[str, Any]:
    return get_in(props, "metadata", "annotations") or {}


def object_name(props: Props) -> str:
    meta = props.get("metadata") or {}
    scope = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{scope}{meta.get('name', '?')}"


def platform_fact(*path: str) -> Any:
    return get_in(json.loads(PLATFORM_FACTS.read_text()), *path)


def truthy(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def policy_document(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    try:
        parsed = json.loads(str(value))
    except ValueError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# Charts whose rendered objects the engine registers as the chart's children (pulumi-kubernetes
# v4 Chart, and the SDKs' v3 Chart component): the rules see each object, and which chart made it
# by its parent. A v3 Release installs its objects itself, so only its values can be judged.
HELM_CHARTS = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")


def chart_name(props: Props) -> str:
    """The chart a Helm resource installs: ``keda`` for ``keda``, ``kedacore/keda``,
    ``oci://ghcr.io/kedacore/keda``, ``https://.../keda-2.20.2.tgz`` or ``./charts/keda``."""
    raw = str(props.get("chart") or props.get("path") or "").rstrip("/")
    last = raw.rsplit("/", 1)[-1].removesuffix(".tgz")
    return re.sub(r"-v?\d+\.\d+[\w.+-]*$", "", last)


def charts_of(resources: list[Resource]) -> dict[str, str]:
    """URN -> the chart that rendered it, for every descendant of a Helm Chart resource."""
    by_urn = {r.urn: r for r in resources if r.urn}
    found: dict[str, str] = {}
    for resource in resources:
        seen, parent = set(), by_urn.get(resource.parent)
        while parent is not None and parent.urn not in seen:
            if parent.type in HELM_CHARTS:
                found[resource.urn] = chart_name(parent.props)
                break
            seen.add(parent.urn)
            parent = by_urn.get(parent.parent)
    return found


def strings(value: Any) -> list[str]:
    return [str(v) for v in as_list(value)]
