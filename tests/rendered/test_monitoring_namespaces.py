"""Monitoring runs at Pod Security ``baseline`` or stricter, the host exporters in a namespace of
their own, and Grafana reads Secrets and ConfigMaps of its own namespace only.

Each chart's pods are placed where Helm puts them: the release namespace, or a sub-chart's
``namespaceOverride`` from the values Helm would install (the chart's defaults, the parent's block
for a sub-chart, then ours: ``reference/upstream/helm-charts``). Those values are searched for
what the Baseline policy forbids (``reference/upstream/pod-security-standards.json``). This is a
check of the chart values, not of rendered pods (no Helm here): a template that switches on host
access without a value would escape it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any, NamedTuple

import pytest

from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.automation.stackfile import read_stack
from tests.rendered.test_helm_values import _dependencies, _merged
from tests.upstream import UPSTREAM, helm_chart_defaults

STACKS = ("dev", "prod", "r1")
BASELINE = json.loads((UPSTREAM / "pod-security-standards.json").read_text())["baseline"]
GRAFANA_TEMPLATES = UPSTREAM / "helm-charts" / "grafana-12.11.1" / "templates"
HOST_EXPORTERS = {"prometheus-node-exporter", "dcgm-exporter"}
ENFORCE = "pod-security.kubernetes.io/enforce"


class Placed(NamedTuple):
    """A chart (or sub-chart) and the namespace its pods go to, with the values it installs."""

    chart: str
    namespace: str
    values: dict[str, Any]


@cache
def _render(stack: str) -> Rendered:
    return render(read_stack(stack))


def placed_charts(rendered: Rendered) -> Iterator[Placed]:
    """Every chart and snapshotted sub-chart of the render, in the namespace its pods go to."""
    for release in rendered.helm.values():
        name = release["chart"].rsplit("/", 1)[-1]
        try:
            parent = helm_chart_defaults(name, release["version"])
        except FileNotFoundError:
            continue  # test_helm_values requires a snapshot of every chart the program pins
        ours = release.get("values", {})
        dependencies = _dependencies(parent)
        own = _merged(parent.values, ours)
        namespace = own.get("namespaceOverride") or release["namespace"]
        yield Placed(name, namespace, {k: v for k, v in own.items() if k not in dependencies})
        for key, version in dependencies.items():
            try:
                sub = helm_chart_defaults(key, version)
            except FileNotFoundError:
                continue  # crds (no pods) and the Windows exporter (not enabled) are not snapshotted
            values = _merged(_merged(sub.values, parent.values.get(key) or {}), ours.get(key, {}))
            yield Placed(key, values.get("namespaceOverride") or namespace, values)


def baseline_violations(values: Any, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Key paths of chart values that switch on what the Baseline policy forbids."""
    if isinstance(values, list):
        for i, item in enumerate(values):
            yield from baseline_violations(item, (*path, str(i)))
        return
    if not isinstance(values, dict):
        return
    allowed_caps = set(BASELINE["capabilities"]["allowed"])
    for key, value in values.items():
        here = ".".join((*path, key))
        on = value is True or (isinstance(value, dict) and value.get("enabled") is True)
        unconfined = isinstance(value, dict) and value.get("type") == "Unconfined"
        if (
            (key in ("hostNetwork", "hostPID", "hostIPC", "privileged") and on)
            or (key in ("hostPath", "hostPort") and value)
            or (key == "seccompProfile" and unconfined)
        ):
            yield here
        elif key == "capabilities" and isinstance(value, dict):
            extra = sorted(set(value.get("add") or []) - allowed_caps)
            if extra:
                yield f"{here}.add {extra}"
        yield from baseline_violations(value, (*path, key))


def enforced_levels(rendered: Rendered) -> dict[str, str]:
    return {
        m["metadata"]["name"]: m["metadata"]["labels"][ENFORCE]
        for m in rendered.kubernetes.values()
        if m["kind"] == "Namespace"
    }


@pytest.mark.parametrize("stack", STACKS)
def test_monitoring_enforces_baseline_or_stricter(stack: str) -> None:
    rendered = _render(stack)
    prometheus = {p.namespace for p in placed_charts(rendered) if p.chart == "kube-prometheus-stack"}
    assert len(prometheus) == 1
    assert enforced_levels(rendered)[prometheus.pop()] in ("baseline", "restricted")


@pytest.mark.parametrize("stack", STACKS)
def test_host_exporters_live_in_a_privileged_namespace_of_their_own(stack: str) -> None:
    rendered = _render(stack)
    levels = enforced_levels(rendered)
    placed = list(placed_charts(rendered))
    exporters = {p.namespace for p in placed if p.chart in HOST_EXPORTERS}
    others = {p.namespace for p in placed if p.chart not in HOST_EXPORTERS}
    assert {p.chart for p in placed} >= HOST_EXPORTERS
    assert exporters and all(levels[ns] == "privileged" for ns in exporters)
    assert not exporters & others, "a namespace of their own"


@pytest.mark.parametrize("stack", STACKS)
def test_every_chart_in_a_baseline_namespace_passes_baseline(stack: str) -> None:
    rendered = _render(stack)
    levels = enforced_levels(rendered)
    for p in placed_charts(rendered):
        if levels.get(p.namespace, "privileged") != "privileged":
            assert list(baseline_violations(p.values)) == [], (p.chart, p.namespace)


def test_the_baseline_check_sees_host_access() -> None:
    """node-exporter's own defaults (host network and PID) are what baseline refuses."""
    node_exporter = helm_chart_defaults("prometheus-node-exporter", "4.56.1").values
    assert set(baseline_violations(node_exporter)) >= {"hostNetwork", "hostPID"}
    assert list(baseline_violations({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}))
    assert not list(baseline_violations({"securityContext": {"capabilities": {"add": ["CHOWN"]}}}))


# grafana 12.11.1 templates/clusterrole.yaml and role.yaml render a ClusterRole, or Roles in the
# release namespace plus rbac.namespaces, under these conditions (checked against the snapshot).
CLUSTER_ROLE_IF = (
    "{{- if and .Values.rbac.create (or (not .Values.rbac.namespaced) .Values.rbac.extraClusterRoleRules) "
    "(not .Values.rbac.useExistingClusterRole) }}"
)
ROLE_NAMESPACES = (
    '{{- range $namespace := (append .Values.rbac.namespaces (include "grafana.namespace" .)) }}'
)


def test_the_grafana_conditions_are_the_templates() -> None:
    assert (GRAFANA_TEMPLATES / "clusterrole.yaml").read_text().splitlines()[0] == CLUSTER_ROLE_IF
    assert ROLE_NAMESPACES in (GRAFANA_TEMPLATES / "role.yaml").read_text().splitlines()


@pytest.mark.parametrize("stack", STACKS)
def test_grafana_reads_only_its_own_namespace(stack: str) -> None:
    (grafana,) = (p for p in placed_charts(_render(stack)) if p.chart == "grafana")
    rbac = grafana.values["rbac"]
    cluster_role = (
        rbac["create"]
        and (not rbac["namespaced"] or rbac["extraClusterRoleRules"])
        and not rbac.get("useExistingClusterRole")
    )
    assert not cluster_role, "a ClusterRole reads every namespace's Secrets"
    role_namespaces = {*rbac["namespaces"], grafana.namespace}
    assert role_namespaces == {grafana.namespace}
    watched = grafana.values["sidecar"]["dashboards"]["searchNamespace"]
    watched = [watched] if isinstance(watched, str) else list(watched or [grafana.namespace])
    assert set(watched) <= role_namespaces, "the sidecar would list namespaces its Role does not cover"
