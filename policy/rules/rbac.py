"""Least-privilege Kubernetes RBAC: roles grant no wildcard verb or resource, no escalate, bind or
impersonate, exec or token minting, no cluster-wide read of Secrets; bindings hand cluster-admin, or
anything to all users, to no one; the charts' own roles only within their reasoned grants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import Props, Resource, as_list, charts_of, get_in, kind_of, object_name, strings

RBAC_GROUP = "rbac.authorization.k8s.io"
READ_VERBS_K8S = frozenset({"get", "list", "watch"})
# Verbs that let the holder grant itself more (Kubernetes docs, "Role Based Access Control Good
# Practices": escalate, bind, impersonate) and the subresources that run code in a pod or reach
# the kubelet's API (pods/exec, pods/attach; nodes/proxy, which the kubelet serves exec through) or
# mint any service account's token (serviceaccounts/token).
ESCALATING_VERBS = ("escalate", "bind", "impersonate")
EXEC_RESOURCES = ("pods/exec", "pods/attach", "nodes/proxy")
TOKEN_RESOURCE = "serviceaccounts/token"
# Subjects that mean every user or every workload of the cluster, and the built-in role that
# grants everything.
BROAD_GROUPS = ("system:authenticated", "system:unauthenticated", "system:serviceaccounts")
ANONYMOUS_USER = "system:anonymous"
CLUSTER_ADMIN = "cluster-admin"


def rbac_rule_problems(kind: str, rule: Mapping[str, Any]) -> list[str]:
    """What one rule of a Role or ClusterRole grants beyond least privilege."""
    groups = strings(rule.get("apiGroups")) or [""]
    resources = strings(rule.get("resources"))
    verbs = [v.lower() for v in strings(rule.get("verbs"))]
    names, urls = strings(rule.get("resourceNames")), strings(rule.get("nonResourceURLs"))
    problems = []
    if "*" in verbs:
        problems.append("every verb")
    if wild := [r for r in resources if r == "*" or r.startswith("*/")]:
        problems.append(f"every resource ({', '.join(wild)})")
    if "*" in urls:
        problems.append("every non-resource URL")
    if escalating := [v for v in ESCALATING_VERBS if v in verbs]:
        problems.append(f"{', '.join(escalating)} (grants itself more)")
    if exec_like := [r for r in resources if r in EXEC_RESOURCES]:
        problems.append(f"{', '.join(exec_like)} (runs commands in pods or on nodes)")
    if TOKEN_RESOURCE in resources and ({"create", "*"} & set(verbs)):
        problems.append(f"create {TOKEN_RESOURCE} (a token for any service account)")
    core = "" in groups or "*" in groups
    reads = sorted(READ_VERBS_K8S & set(verbs)) or (["*"] if "*" in verbs else [])
    if kind == "ClusterRole" and core and reads and not names and ({"secrets", "*"} & set(resources)):
        problems.append(f"{'/'.join(reads)} Secrets in every namespace")
    return problems


def rbac_binding_problems(props: Props) -> list[str]:
    """What a RoleBinding or ClusterRoleBinding hands out: cluster-admin, or any role to every
    user, every anonymous caller or every service account of the cluster."""
    problems = []
    role = str(get_in(props, "roleRef", "name") or "")
    if role == CLUSTER_ADMIN:
        problems.append(f"binds {CLUSTER_ADMIN}")
    for subject in as_list(props.get("subjects")):
        kind, name = str(get_in(subject, "kind")), str(get_in(subject, "name"))
        if (kind == "Group" and name in BROAD_GROUPS) or (kind == "User" and name == ANONYMOUS_USER):
            problems.append(f"binds {role} to {kind} {name}")
    return problems


@dataclass(frozen=True)
class ChartRoleGrant:
    """A Role or ClusterRole a known chart renders that grants what rbac-least-privilege refuses,
    allowed rule by rule: each refused rule of that object must fall within one of ``rules``
    (its API groups, resources, verbs and resource names each a subset)."""

    chart: str
    kind: str
    name: str
    rules: tuple[Mapping[str, tuple[str, ...]], ...]
    reason: str


# The charts this project installs (components/; their objects as rendered with the project's
# values are in tests/data/chart_objects.json, where a test runs the pack over them as a v4 Chart's
# children and requires every entry here to still be needed). Names are the ones the project's
# release names and values give (kube-prometheus-stack fullnameOverride kps). Only the objects and
# rules named here are allowed; anything else a chart renders is judged like any other object.
# KEDA (permissions.operator.restrict.secret, rbac.scaledRefKinds) and kube-state-metrics
# (collectorsExclude secrets) need none: the project's values narrow them (components/monitoring/).
CHART_ROLE_GRANTS: tuple[ChartRoleGrant, ...] = (
    ChartRoleGrant(
        "kube-prometheus-stack",
        "ClusterRole",
        "kps-operator",
        (
            {"apiGroups": ("monitoring.coreos.com",), "resources": ("*",), "verbs": ("*",)},
            {"apiGroups": ("apps",), "resources": ("statefulsets",), "verbs": ("*",)},
            {"apiGroups": ("",), "resources": ("configmaps", "secrets"), "verbs": ("*",)},
        ),
        "prometheus-operator creates and updates the StatefulSet, configuration Secrets and rule "
        "ConfigMaps of every Prometheus it runs, and manages all its own custom resources "
        "(kube-prometheus-stack 88.5.3 templates/prometheus-operator/clusterrole.yaml)",
    ),
    ChartRoleGrant(
        "prometheus-adapter",
        "ClusterRole",
        "prometheus-adapter-server-resources",
        ({"apiGroups": ("custom.metrics.k8s.io",), "resources": ("*",), "verbs": ("*",)},),
        "the custom metrics API the adapter serves (custom.metrics.k8s.io only), bound for the HPA "
        "to read the GPU-utilization metric it scales on (prometheus-adapter 5.3.0 "
        "templates/custom-metrics-cluster-role.yaml)",
    ),
    ChartRoleGrant(
        "lws",
        "ClusterRole",
        "lws-manager-role",
        ({"apiGroups": ("",), "resources": ("secrets",), "verbs": ("get", "list", "update", "watch")},),
        "the LeaderWorkerSet controller rotates the serving certificate of its own webhooks, kept "
        "in a Secret, and its cache watches Secrets (lws v0.10.0 config/rbac/role.yaml, generated "
        "by kubebuilder)",
    ),
)


def _within(rule: Mapping[str, Any], allowed: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether an RBAC rule grants no more than ``allowed``: each of its API groups, resources,
    verbs, resource names and URLs is listed there (a ``*`` there covers any resource of the API
    groups allowed, the way the chart's own rule spells it)."""
    for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
        have = set(strings(rule.get(key)) or ([""] if key == "apiGroups" else []))
        listed = set(allowed.get(key, ("",) if key == "apiGroups" else ()))
        if not (have <= listed or (key == "resources" and "*" in listed)):
            return False
    return True


def _role_grant(chart: str, kind: str, name: str, rule: Mapping[str, Any]) -> ChartRoleGrant | None:
    for grant in CHART_ROLE_GRANTS:
        if (grant.chart, grant.kind, grant.name) == (chart, kind, name) and any(
            _within(rule, allowed) for allowed in grant.rules
        ):
            return grant
    return None


def rbac_least_privilege(resources: list[Resource]) -> list[tuple[str, str]]:
    """Roles and ClusterRoles grant no wildcard verb or resource, no escalate/bind/impersonate,
    no exec into pods, no token minting, no Secrets read cluster-wide; bindings hand out neither
    cluster-admin nor anything to every user or service account. The rules a known chart needs
    (CHART_ROLE_GRANTS) pass for that chart's object alone."""
    charts = charts_of(resources)
    problems = []
    for resource in resources:
        found = kind_of(resource.type)
        if found is None or found[0] != RBAC_GROUP:
            continue
        kind, name = found[1], str(get_in(resource.props, "metadata", "name"))
        if kind in ("Role", "ClusterRole"):
            for index, rule in enumerate(as_list(resource.props.get("rules"))):
                if not isinstance(rule, Mapping) or not (why := rbac_rule_problems(kind, rule)):
                    continue
                if _role_grant(charts.get(resource.urn, ""), kind, name, rule):
                    continue
                problems.append(
                    (
                        resource.urn,
                        f"{kind} {object_name(resource.props)} rules[{index}] grants {'; '.join(why)}: "
                        "name the resources and verbs it needs",
                    )
                )
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            problems.extend(
                (
                    resource.urn,
                    f"{kind} {object_name(resource.props)} {why}: bind a narrower role to named subjects",
                )
                for why in rbac_binding_problems(resource.props)
            )
    return problems
