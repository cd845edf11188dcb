"""What pods may do on their node: no privileged pod or host namespaces, paths or ports but the
allow-listed exporters; no container adding capabilities beyond Pod Security Baseline, allowing
privilege escalation, running seccomp-unconfined or with an unmasked /proc, but the reasoned grants
of the charts that need them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .base import (
    HELM_RELEASE,
    Props,
    Resource,
    as_list,
    chart_name,
    charts_of,
    get_in,
    kind_of,
    object_name,
    platform_fact,
    strings,
    truthy,
    walk,
)

# The only pods that may reach into their node, each for the reason given, keyed by (namespace,
# app.kubernetes.io/name). These charts are installed by the project (components/monitoring/observability.py,
# components/platform/karpenter.py), and a chart names its pods after itself (Helm's ``<chart>.name`` helper,
# .Chart.Name in reference/upstream/helm-charts/<chart>/Chart.yaml) unless nameOverride is set.
HOST_ACCESS_ALLOWED: Mapping[tuple[str, str], str] = {
    # The exporters live in a namespace of their own at Pod Security privileged (components/build.py
    # NODE_MONITORING_NAMESPACE), so `monitoring` can run at baseline.
    ("node-monitoring", "prometheus-node-exporter"): "node metrics from the host's /proc, /sys and network",
    (
        "node-monitoring",
        "dcgm-exporter",
    ): "GPU metrics from the NVIDIA driver and the kubelet's pod-resources socket",
    (
        "kube-system",
        "nvidia-device-plugin",
    ): "registers the GPUs with the kubelet through its device-plugin socket",
}
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
APP_NAME_LABEL = "app.kubernetes.io/name"


def pod_specs(props: Props, path: str = "") -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(path, metadata, pod spec) of every pod template in an object: a Pod itself, a workload's
    template, a CronJob's job template, a LeaderWorkerSet's leader and worker templates."""
    spec = props.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
        yield f"{path}spec", props.get("metadata") or {}, spec
    for key, value in props.items():
        if isinstance(value, Mapping):
            yield from pod_specs(value, f"{path}{key}.")


def host_access(spec: Mapping[str, Any]) -> list[str]:
    """What in a pod spec reaches into its node: host namespaces, hostPath volumes, privileged."""
    found = [name for name in HOST_NAMESPACES if truthy(spec.get(name))]
    found += [
        f"hostPath volume {get_in(v, 'name')}"
        for v in as_list(spec.get("volumes"))
        if get_in(v, "hostPath") is not None
    ]
    for key in ("containers", "initContainers", "ephemeralContainers"):
        found += [
            f"privileged container {get_in(c, 'name')}"
            for c in as_list(spec.get(key))
            if truthy(get_in(c, "securityContext", "privileged"))
        ]
        # A hostPort listens on the node's own address, past the pod network and its policies.
        found += [
            f"hostPort {get_in(port, 'hostPort')} on container {get_in(c, 'name')}"
            for c in as_list(spec.get(key))
            for port in as_list(get_in(c, "ports"))
            if str(get_in(port, "hostPort") or 0) not in ("0", "0.0")
        ]
    return found


def host_access_values(values: Any) -> list[str]:
    """What a Helm release's values switch on that reaches into the node, in the Kubernetes field
    names charts pass through to their pods (``securityContext.privileged``, ``hostNetwork``...)."""
    found = []
    for path, key, value in walk(values or {}):
        if key in (*HOST_NAMESPACES, "privileged") and truthy(value):
            found.append(f"values.{path} true")
        elif key == "hostPath" and value:
            found.append(f"values.{path} (a hostPath volume)")
        elif key == "hostPort" and str(value) not in ("0", "0.0", "None", ""):
            found.append(f"values.{path} {value}")
    return found


def no_host_access(token: str, props: Props) -> list[str]:
    if token == HELM_RELEASE:
        # A v3 Release's objects are no Pulumi resources (the engine never sees them), so its values
        # are judged: the allow-listed exporters by (namespace, chart name).
        namespace, chart = str(props.get("namespace") or "default"), chart_name(props)
        if (namespace, chart) in HOST_ACCESS_ALLOWED or not (
            found := host_access_values(props.get("values"))
        ):
            return []
        return [
            f"Helm release {props.get('name') or chart} ({chart}) sets {', '.join(found)}: only the "
            "allow-listed exporters may reach into the node (policy/rules/workloads.py HOST_ACCESS_ALLOWED)"
        ]
    if kind_of(token) is None or token.startswith("kubernetes:helm.sh/"):
        return []
    namespace = str(get_in(props, "metadata", "namespace") or "default")
    problems = []
    for path, metadata, spec in pod_specs(props):
        app = get_in(metadata, "labels", APP_NAME_LABEL) or get_in(
            props, "metadata", "labels", APP_NAME_LABEL
        )
        if (namespace, str(app)) in HOST_ACCESS_ALLOWED or not (found := host_access(spec)):
            continue
        problems.append(
            f"{object_name(props)} {path} has {', '.join(found)}: only the allow-listed exporters may reach "
            "into the node (policy/rules/workloads.py HOST_ACCESS_ALLOWED)"
        )
    return problems


def baseline_capabilities() -> frozenset[str]:
    """The capabilities Pod Security's Baseline level lets a container add (facts.json
    pod_security_baseline, from the Kubernetes Pod Security Standards)."""
    return frozenset(strings(platform_fact("pod_security_baseline", "capabilities", "allowed")))


def _capability(name: Any) -> str:
    return str(name).upper().removeprefix("CAP_")


def container_problems(spec: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    """What one container (in its pod spec) runs with beyond Pod Security Baseline, privileged and
    host access aside (no-host-access judges those): added capabilities outside Baseline's list
    (``ALL``, ``SYS_ADMIN``, ``NET_ADMIN``...), ``allowPrivilegeEscalation: true``, an
    ``Unconfined`` seccomp profile, an ``Unmasked`` /proc."""
    context = container.get("securityContext") or {}
    problems = []
    allowed = baseline_capabilities()
    if extra := [
        c for c in map(_capability, as_list(get_in(context, "capabilities", "add"))) if c not in allowed
    ]:
        problems.append(f"adds capabilities {', '.join(extra)}")
    if truthy(context.get("allowPrivilegeEscalation")):
        problems.append("allowPrivilegeEscalation true")
    for where, holder in (("pod", spec.get("securityContext") or {}), ("container", context)):
        if str(get_in(holder, "seccompProfile", "type")) == "Unconfined":
            problems.append(f"an Unconfined seccomp profile ({where})")
    if str(context.get("procMount")) == "Unmasked":
        problems.append("an Unmasked /proc")
    return problems


@dataclass(frozen=True)
class ChartCapabilityGrant:
    """A container of a known chart allowed to add capabilities beyond Baseline: those in
    ``capabilities`` and no others."""

    chart: str
    kind: str
    name: str
    container: str
    capabilities: frozenset[str]
    reason: str


CHART_CAPABILITY_GRANTS: tuple[ChartCapabilityGrant, ...] = (
    ChartCapabilityGrant(
        "dcgm-exporter",
        "DaemonSet",
        "dcgm-exporter",
        "exporter",
        frozenset({"SYS_ADMIN"}),
        "DCGM's profiling metrics need CAP_SYS_ADMIN (dcgm-exporter 4.8.2 values.yaml: 'Required for "
        "profiling metrics (DCGM_FI_PROF_*)'), and the project reads two of them, "
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE and DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (promql/__init__.py); it "
        "runs in node-monitoring, the namespace at Pod Security privileged",
    ),
)


def _capability_grant(chart: str, kind: str, name: str, container: str, added: list[str]) -> bool:
    return any(
        (grant.chart, grant.kind, grant.name, grant.container) == (chart, kind, name, container)
        and set(added) <= grant.capabilities
        for grant in CHART_CAPABILITY_GRANTS
    )


def container_values_problems(values: Any) -> list[tuple[str, frozenset[str]]]:
    """The same in a Helm release's values (charts pass securityContext fields through): each as
    (what, the capabilities it adds beyond Baseline; none for the other findings)."""
    allowed = baseline_capabilities()
    found: list[tuple[str, frozenset[str]]] = []
    for path, key, value in walk(values or {}):
        if key == "capabilities" and isinstance(value, Mapping):
            extra = [c for c in map(_capability, as_list(value.get("add"))) if c not in allowed]
            if extra:
                found.append((f"values.{path}.add {', '.join(extra)}", frozenset(extra)))
        elif key == "allowPrivilegeEscalation" and truthy(value):
            found.append((f"values.{path} true", frozenset()))
        elif key == "seccompProfile" and str(get_in(value, "type")) == "Unconfined":
            found.append((f"values.{path} Unconfined", frozenset()))
        elif key == "procMount" and str(value) == "Unmasked":
            found.append((f"values.{path} Unmasked", frozenset()))
    return found


def _release_problems(release: Resource) -> list[tuple[str, str]]:
    found = container_values_problems(release.props.get("values"))
    chart = chart_name(release.props)
    added = frozenset().union(*(caps for _, caps in found)) if found else frozenset()
    if not found or (
        all(caps for _, caps in found)
        and any(g.chart == chart and added <= g.capabilities for g in CHART_CAPABILITY_GRANTS)
    ):
        return []
    what = ", ".join(message for message, _ in found)
    label = release.props.get("name") or chart
    return [(release.urn, f"Helm release {label} ({chart}) sets {what}: drop them (Pod Security Baseline)")]


def container_least_privilege(resources: list[Resource]) -> list[tuple[str, str]]:
    """No container adds capabilities beyond Pod Security Baseline, allows privilege escalation,
    runs unconfined by seccomp or sees an unmasked /proc; a Helm release's values switch none of
    these on. The containers a known chart needs (CHART_CAPABILITY_GRANTS) pass for that chart's
    object alone."""
    charts = charts_of(resources)
    problems = []
    for resource in resources:
        if resource.type == HELM_RELEASE:
            problems.extend(_release_problems(resource))
            continue
        found_kind = kind_of(resource.type)
        if found_kind is None or resource.type.startswith("kubernetes:helm.sh/"):
            continue
        chart, name = charts.get(resource.urn, ""), str(get_in(resource.props, "metadata", "name"))
        for path, _, spec in pod_specs(resource.props):
            for key in ("containers", "initContainers", "ephemeralContainers"):
                for index, container in enumerate(as_list(spec.get(key))):
                    if not isinstance(container, Mapping) or not (why := container_problems(spec, container)):
                        continue
                    added = [
                        c
                        for c in map(
                            _capability, as_list(get_in(container, "securityContext", "capabilities", "add"))
                        )
                        if c not in baseline_capabilities()
                    ]
                    if why == [f"adds capabilities {', '.join(added)}"] and _capability_grant(
                        chart, found_kind[1], name, str(container.get("name")), added
                    ):
                        continue
                    problems.append(
                        (
                            resource.urn,
                            f"{object_name(resource.props)} {path}.{key}[{index}] ({container.get('name')}) "
                            f"runs with {', '.join(why)}: drop them (Pod Security Baseline)",
                        )
                    )
    return problems
