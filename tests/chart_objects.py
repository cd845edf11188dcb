"""The objects the project's Helm charts render, as the policy pack would see them if a program
installed the charts as pulumi-kubernetes v4 Charts (each object a child of its Chart).

The project installs its charts as v3 Releases, whose objects the engine never sees; the pack's
Kubernetes rules (rbac-least-privilege, container-least-privilege, no-host-access) must still pass
them, because a platform team runs the same pack over stacks that install these charts as Charts.
``tests/data/chart_objects.json`` holds what ``helm template`` renders for every Release of every
shipped stack, with the project's values (``tools/chart_objects.py`` writes it); each entry records
the digest of the values it was rendered with, so a test can tell when the values moved on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "chart_objects.json"
RELEASE = "kubernetes:helm.sh/v3:Release"
CHART = "kubernetes:helm.sh/v4:Chart"
# The kinds the pack's Kubernetes rules read: RBAC and everything with a pod template.
KINDS = frozenset(
    {
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "Pod",
        "Deployment",
        "DaemonSet",
        "StatefulSet",
        "ReplicaSet",
        "Job",
        "CronJob",
    }
)


@dataclass(frozen=True)
class Release:
    """One Helm release of one stack's offline render."""

    stack: str
    name: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]

    @property
    def chart_name(self) -> str:
        return self.chart.rstrip("/").rsplit("/", 1)[-1]

    @property
    def digest(self) -> str:
        return values_digest(self.values)


def values_digest(values: Any) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def releases(stack: str) -> list[Release]:
    """Every v3 Release of ``stack``'s offline render, with the values the program gives it."""
    from deepseek_eks.automation.render import _prune, construct, unwrap_secrets
    from deepseek_eks.automation.stackfile import read_stack

    found = []
    for record in construct(read_stack(stack)).mocks.resources:
        if record.type != RELEASE:
            continue
        props = _prune(unwrap_secrets(record.inputs))
        found.append(
            Release(
                stack,
                str(props["name"]),
                str(props["chart"]),
                str(props["version"]),
                str(props["namespace"]),
                props.get("values") or {},
            )
        )
    return found


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def as_chart_children(entry: dict[str, Any], stack: str = "s") -> list[Any]:
    """The policy pack's view of one rendered release installed as a v4 Chart: the Chart (its
    inputs) and each object as its child, with URNs as the engine builds them."""
    from deepseek_eks.policy.rules import Resource

    project = "deepseek-eks"
    chart_urn = f"urn:pulumi:{stack}::{project}::{CHART}::{entry['release']}"
    chart = Resource(
        CHART,
        {
            "chart": entry["chart"],
            "version": entry["version"],
            "namespace": entry["namespace"],
            "values": entry.get("values", {}),
        },
        chart_urn,
        entry["release"],
    )
    children = []
    for obj in entry["objects"]:
        group_version = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
        token = f"kubernetes:{group_version}:{obj['kind']}"
        meta = obj.get("metadata") or {}
        scoped = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        name = f"{entry['release']}:{scoped}"
        urn = f"urn:pulumi:{stack}::{project}::{CHART}${token}::{name}"
        children.append(Resource(token, obj, urn, name, parent=chart_urn))
    return [chart, *children]
