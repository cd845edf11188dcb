"""Least privilege for every chart the program installs (issue 37 §3): the Roles and ClusterRoles
each chart renders with the values Helm would install, from the chart's own RBAC templates.

Helm cannot run here, so the charts' RBAC templates are vendored verbatim
(``reference/upstream/helm-charts/<chart>-<version>/templates``, sources in
``helm-charts/index.json``) and rendered by ``tests/chart_templates.py`` with the chart's defaults
coalesced with this program's values (and, for kube-prometheus-stack's kube-state-metrics and
Grafana, the parent's block too), exactly as ``tests/rendered/test_helm_values.py`` merges them.
What each chart grants and which value narrows it: ``reference/upstream/chart-rbac-facts.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from deepseek_eks.automation.render import Rendered, render
from tests.chart_templates import HELPERS, TemplateError, parse, render_objects, render_text
from tests.conftest import stack_config
from tests.examples import COMPUTE_MODES
from tests.rendered.test_helm_values import _dependencies, _merged
from tests.upstream import UPSTREAM, helm_chart_defaults

STACKS = ("dev", "prod", "r1")
SOURCES = [(stack, mode) for stack in STACKS for mode in COMPUTE_MODES]
CHARTS = UPSTREAM / "helm-charts"
ANY_GROUP = "example.com"  # an API group only a rule for every group ("*") covers

# The vendored templates that render Roles and ClusterRoles, per chart snapshot.
RBAC_TEMPLATES: dict[str, tuple[str, ...]] = {
    "keda-2.20.2": (
        "manager/clusterrole.yaml",
        "manager/minimal-rbac.yaml",
        "manager/clusterrolebindings.yaml",
        "metrics-server/clusterrole.yaml",
        "metrics-server/clusterrolebinding.yaml",
        "webhooks/clusterrole.yaml",
        "webhooks/clusterrolebindings.yaml",
    ),
    "prometheus-adapter-5.3.0": (
        "cluster-role-resource-reader.yaml",
        "custom-metrics-cluster-role.yaml",
        "external-metrics-cluster-role.yaml",
        "resource-metrics-cluster-role.yaml",
    ),
    "kube-prometheus-stack-88.5.3": (
        "prometheus-operator/clusterrole.yaml",
        "prometheus/clusterrole.yaml",
        "prometheus-operator/admission-webhooks/job-patch/clusterrole.yaml",
        "prometheus-operator/admission-webhooks/job-patch/role.yaml",
    ),
    "kube-state-metrics-8.4.0": ("role.yaml",),
    "grafana-12.11.1": ("clusterrole.yaml", "role.yaml"),
    "dcgm-exporter-4.8.2": ("clusterrole.yaml", "role.yaml"),
    "nvidia-device-plugin-0.18.0": ("role.yml",),
    "aws-load-balancer-controller-3.5.0": ("rbac.yaml",),
    "karpenter-1.14.1": (
        "clusterrole-core.yaml",
        "clusterrole.yaml",
        "role.yaml",
        "aggregate-clusterrole.yaml",
    ),
    "lws-0.10.0": ("rbac/clusterrole.yaml", "rbac/role.yaml", "prometheus/role.yaml"),
}

# Grants the charts keep because no value of the pinned release narrows them, each with why
# (keyed by chart snapshot and template). Each must still be granted: test_every_exception_is_used.
SECRET_READERS: dict[tuple[str, str], str] = {
    ("kube-prometheus-stack-88.5.3", "prometheus-operator/clusterrole.yaml"): (
        "prometheus-operator reads the Secrets monitors reference and writes each Prometheus' "
        "configuration Secret; its ClusterRole is unconditional once the operator is on"
    ),
    ("lws-0.10.0", "rbac/clusterrole.yaml"): (
        "the LWS manager rotates its webhook certificate (pkg/cert/cert.go); the role has no condition"
    ),
}
WILDCARDS: dict[tuple[str, str], str] = {
    ("kube-prometheus-stack-88.5.3", "prometheus-operator/clusterrole.yaml"): (
        "every verb on its own monitoring.coreos.com kinds, Secrets, ConfigMaps and StatefulSets"
    ),
    ("prometheus-adapter-5.3.0", "custom-metrics-cluster-role.yaml"): (
        "custom.metrics.k8s.io, the read-only metrics API the adapter itself serves"
    ),
}


class Grant(NamedTuple):
    """One rule of a Role or ClusterRole a chart renders."""

    chart: str  # snapshot folder, e.g. keda-2.20.2
    template: str
    kind: str  # Role or ClusterRole
    namespace: str | None
    rule: dict[str, Any]

    def allows(self, verb: str, resource: str, group: str = "") -> bool:
        groups, resources, verbs = (self.rule.get(k) or [] for k in ("apiGroups", "resources", "verbs"))
        return (
            (group in groups or "*" in groups)
            and (resource in resources or "*" in resources)
            and (verb in verbs or "*" in verbs)
        )


def _templates(snapshot: str) -> list[Path]:
    return [CHARTS / snapshot / "templates" / t for t in RBAC_TEMPLATES[snapshot]]


def chart_objects(
    chart: str, version: str, values: dict[str, Any], namespace: str
) -> Iterator[tuple[str, dict]]:
    """(snapshot, object) of every RBAC object the chart and its snapshotted sub-charts render."""
    parent = helm_chart_defaults(chart, version)
    own = _merged(parent.values, values)
    snapshot = f"{chart}-{version}"
    for obj in render_objects(_templates(snapshot), own, namespace=namespace, release=chart, helpers=HELPERS):
        yield snapshot, obj
    conditions = {"kube-state-metrics": "kubeStateMetrics", "grafana": "grafana"}
    for key, sub_version in _dependencies(parent).items():
        sub_snapshot = f"{key}-{sub_version}"
        if sub_snapshot not in RBAC_TEMPLATES or not own.get(conditions[key], {}).get("enabled"):
            continue
        sub_values = _merged(
            _merged(helm_chart_defaults(key, sub_version).values, parent.values.get(key) or {}),
            values.get(key) or {},
        )
        sub_values["global"] = own.get("global") or {}
        for obj in render_objects(
            _templates(sub_snapshot), sub_values, namespace=namespace, release=chart, helpers=HELPERS
        ):
            yield sub_snapshot, obj


def grants(objects: Iterator[tuple[str, dict]]) -> list[Grant]:
    return [
        Grant(
            snapshot,
            str(Path(obj["_template"]).relative_to(CHARTS / snapshot / "templates")),
            obj["kind"],
            obj["metadata"].get("namespace"),
            rule,
        )
        for snapshot, obj in objects
        if obj["kind"] in ("Role", "ClusterRole")
        for rule in obj.get("rules") or []
    ]


@cache
def _render(stack: str, mode: str) -> Rendered:
    return render(stack_config(stack, computeMode=mode))


@cache
def release_grants(stack: str, mode: str) -> dict[str, list[Grant]]:
    """Release name -> the rules its chart renders, for one stack in one compute mode."""
    out = {}
    for name, release in _render(stack, mode).helm.items():
        chart = release["chart"].rsplit("/", 1)[-1]
        objects = chart_objects(chart, release["version"], release.get("values", {}), release["namespace"])
        out[name] = grants(objects)
    return out


def _chart_defaults(chart: str, version: str) -> list[Grant]:
    return grants(chart_objects(chart, version, {}, "default"))


def reads_every_secret(grant: Grant) -> bool:
    return grant.kind == "ClusterRole" and any(grant.allows(v, "secrets") for v in ("get", "list", "watch"))


def wildcard(grant: Grant) -> bool:
    rule = grant.rule
    return any("*" in (rule.get(k) or []) for k in ("apiGroups", "resources", "verbs"))


# ---- what the program's releases grant ------------------------------------------------------------


def unexcepted(
    stack: str, mode: str, grants: Callable[[Grant], bool], exceptions: dict[tuple[str, str], str]
) -> list[str]:
    """The rules of the stack's releases that ``grants`` flags and no listed exception covers."""
    return [
        f"{name}: {g.chart} {g.template} {g.rule}"
        for name, rules in release_grants(stack, mode).items()
        for g in rules
        if grants(g) and (g.chart, g.template) not in exceptions
    ]


@pytest.mark.parametrize(("stack", "mode"), SOURCES)
def test_no_chart_may_read_every_secret(stack: str, mode: str) -> None:
    found = unexcepted(stack, mode, reads_every_secret, SECRET_READERS)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("stack", "mode"), SOURCES)
def test_no_chart_grants_a_wildcard_it_could_avoid(stack: str, mode: str) -> None:
    found = unexcepted(stack, mode, wildcard, WILDCARDS)
    assert not found, "\n".join(found)


def test_every_exception_is_still_granted() -> None:
    """An exception the charts no longer need is removed, not kept as a blank cheque."""
    every = [g for source in SOURCES for rules in release_grants(*source).values() for g in rules]
    assert {(g.chart, g.template) for g in every if reads_every_secret(g)} >= set(SECRET_READERS)
    assert {(g.chart, g.template) for g in every if wildcard(g)} >= set(WILDCARDS)


def test_the_values_narrow_what_the_chart_defaults_grant() -> None:
    """Without the program's values the same templates grant what the values take away."""
    keda_defaults = _chart_defaults("keda", "2.20.2")
    assert any(reads_every_secret(g) for g in keda_defaults)
    assert any(g.allows("get", "secrets", ANY_GROUP) for g in keda_defaults)
    stack_defaults = _chart_defaults("kube-prometheus-stack", "88.5.3")
    ksm = [g for g in stack_defaults if g.chart == "kube-state-metrics-8.4.0"]
    assert any(g.allows("list", "secrets") for g in ksm) and any(g.allows("list", "configmaps") for g in ksm)
    grafana = [g for g in stack_defaults if g.chart == "grafana-12.11.1"]
    assert any(reads_every_secret(g) for g in grafana)

    ours = release_grants("prod", "karpenter")  # prod scales with KEDA
    keda = ours["keda"]
    assert not any(reads_every_secret(g) for g in keda)
    assert not any(g.allows("get", "secrets", ANY_GROUP) for g in keda)
    ksm = [g for g in ours["kube-prometheus-stack"] if g.chart == "kube-state-metrics-8.4.0"]
    assert ksm and not any(g.allows("list", r) for g in ksm for r in ("secrets", "configmaps"))
    grafana = [g for g in ours["kube-prometheus-stack"] if g.chart == "grafana-12.11.1"]
    assert grafana and all(g.kind == "Role" and g.namespace == "monitoring" for g in grafana)


def test_keda_still_scales_what_the_project_scales_and_reads_secrets_of_its_namespace_only() -> None:
    keda = release_grants("r1", "karpenter")["keda"]  # r1 scales a LeaderWorkerSet with KEDA
    for verb in ("get", "patch", "update"):
        assert any(g.allows(verb, "leaderworkersets/scale", "leaderworkerset.x-k8s.io") for g in keda)
        assert any(g.allows(verb, "deployments/scale", "apps") for g in keda)
    assert any(g.allows("get", "leaderworkersets", "leaderworkerset.x-k8s.io") for g in keda)
    secret_rules = [g for g in keda if g.allows("list", "secrets")]
    assert secret_rules and all(g.kind == "Role" and g.namespace == "keda" for g in secret_rules)


@pytest.mark.parametrize(("stack", "mode"), SOURCES)
def test_nothing_reads_a_secret_through_keda(stack: str, mode: str) -> None:
    """permissions.operator.restrict.secret keeps KEDA to Secrets of its own namespace: a
    TriggerAuthentication in the service's namespace that reads a Secret would stop working."""
    objects = _render(stack, mode).kubernetes.values()
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"TriggerAuthentication", "ClusterTriggerAuthentication"}
    for scaled in (o for o in objects if o["kind"] == "ScaledObject"):
        for trigger in scaled["spec"]["triggers"]:
            assert "authenticationRef" not in trigger, trigger
            assert trigger["type"] in ("prometheus", "cron"), trigger


def test_every_vendored_rbac_template_is_rendered() -> None:
    """A snapshot's template that renders a Role or ClusterRole is judged, not skipped."""
    for snapshot in sorted(p.name for p in CHARTS.iterdir() if (p / "templates").is_dir()):
        found = {
            str(t.relative_to(CHARTS / snapshot / "templates"))
            for t in (CHARTS / snapshot / "templates").rglob("*")
            if t.is_file() and ("kind: ClusterRole\n" in t.read_text() or "kind: Role\n" in t.read_text())
        }
        assert found <= set(RBAC_TEMPLATES.get(snapshot, ())), (snapshot, found)


# ---- the renderer ----------------------------------------------------------------------------------


def test_the_renderer_trims_branches_and_ranges_as_go_templates_do() -> None:
    text = (
        "rules:\n"
        "{{- if not .Values.restrict }}\n"
        "- resources: [secrets]\n"
        "{{- else if .Values.other }}\n"
        "- resources: [other]\n"
        "{{- end }}\n"
        "{{- range $k := .Values.kinds }}\n"
        '- resources: [{{ printf "%s/scale" $k.kind | quote }}]\n'
        "{{- end }}\n"
        "name: {{ (.Values.sa.operator).name | default .Values.sa.name }}\n"
    )
    values = {"restrict": True, "other": False, "kinds": [{"kind": "a"}, {"kind": "b"}], "sa": {"name": "x"}}
    assert render_text(text, values, namespace="n", release="r") == (
        'rules:\n- resources: ["a/scale"]\n- resources: ["b/scale"]\nname: x\n'
    )
    values["restrict"] = False
    assert "- resources: [secrets]" in render_text(text, values, namespace="n", release="r")


def test_the_renderer_refuses_what_it_does_not_implement() -> None:
    with pytest.raises(TemplateError, match="lookup"):
        render_text('{{ lookup "v1" "Secret" "ns" "x" }}', {}, namespace="n", release="r")
    with pytest.raises(TemplateError, match="define"):
        parse('{{ define "x" }}y{{ end }}')
    with pytest.raises(TemplateError, match="end"):
        parse("{{ if .Values.x }}never closed")


def test_and_or_stop_at_the_first_deciding_argument() -> None:
    """Go 1.18+ templates: ``and``/``or`` do not evaluate what follows the deciding argument,
    which charts rely on (``index .Subcharts ...`` behind a false condition)."""
    text = '{{ if and .Values.off (lookup "v1" "Secret" "ns" "x") }}yes{{ else }}no{{ end }}'
    assert render_text(text, {"off": False}, namespace="n", release="r") == "no"
