"""Every Helm value the program sets is a key the pinned chart reads.

Helm ignores a values key the chart does not know, so a misspelt, misplaced or renamed key would
install something other than what the code and README say, with every other test green. Here each
release the example stacks and the existing-cluster example render is checked against the chart's
own default values at the pinned version (``reference/upstream/helm-charts``, read from the chart's
source): every key path we set must be a key of those defaults (or a property of the chart's
values.schema.json), and when the chart ships a schema the merged values must validate against it.

A key the defaults leave out but a template of the chart reads is a key too, when that template
is vendored beside the defaults (``<chart>-<version>/templates``): KEDA documents its
PodDisruptionBudget fields only as comments under ``podDisruptionBudget.operator: {}``, and its
``templates/manager/poddisruptionbudget.yaml`` reads ``.Values.podDisruptionBudget.operator.maxUnavailable``.

What the defaults cannot describe is not checked below it: list items (tolerations, adapter rules:
a chart's defaults never enumerate them, only the list's own key is checked) and the free-form maps
of ``FREE_FORM``. Keys a parent chart sets for a dependency (kube-prometheus-stack's ``grafana``,
``prometheus-node-exporter``) are checked against that sub-chart's defaults at the version the
parent's Chart.yaml names, together with the parent's own block for it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from deepseek_eks.automation.render import HELM_TOKENS, _helm_release, render
from deepseek_eks.automation.stackfile import read_stack
from tests.examples import COMPUTE_MODES, run_existing_cluster_example
from tests.upstream import ChartDefaults, helm_chart_defaults, helm_chart_sources

STACKS = ("dev", "prod", "r1")
SOURCES = (*STACKS, *(f"existing-cluster-{mode}" for mode in COMPUTE_MODES))

# Keys whose value is a free-form map: any key below them is valid, so only the key itself is
# checked. Kept to what the program sets; an entry no release uses fails
# test_every_free_form_exception_is_used.
FREE_FORM: dict[str, str] = {
    "nodeSelector": "node labels (a Kubernetes PodSpec nodeSelector): any label key is valid",
    "resources": "a Kubernetes ResourceRequirements the charts copy into the container as is",
    "storageSpec": (
        "kube-prometheus-stack copies prometheus.prometheusSpec.storageSpec into the Prometheus "
        "resource verbatim: a prometheus-operator StorageSpec, validated by its CRD, not the chart"
    ),
}

_MISSING = object()
Releases = dict[str, dict[str, dict[str, Any]]]
"""Source (stack or example) -> release name -> {chart, version, values, ...}."""


def _chart_name(chart: str) -> str:
    return chart.rsplit("/", 1)[-1]  # oci://.../karpenter -> karpenter


def _merged(defaults: Any, override: Any) -> Any:
    """Helm's coalescing of values: maps merge key by key, anything else is replaced."""
    if isinstance(defaults, dict) and isinstance(override, dict):
        return {k: _merged(defaults.get(k), v) if k in defaults else v for k, v in override.items()} | {
            k: v for k, v in defaults.items() if k not in override
        }
    return override


def _schema_property(schema: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    """The schema of ``key`` in an object schema: a declared property, or a schema every other key
    must satisfy (``additionalProperties`` given as a schema). None when the schema says nothing."""
    if not schema:
        return None
    declared = schema.get("properties", {}).get(key)
    if declared is not None:
        return declared  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def template_value_paths(chart: ChartDefaults) -> frozenset[str]:
    """Every ``.Values.<path>`` the chart's vendored templates read (none vendored: empty)."""
    folder = chart.folder / "templates"
    if not folder.is_dir():
        return frozenset()
    return frozenset(
        match
        for template in sorted(folder.rglob("*"))
        if template.is_file()
        for match in re.findall(r"\.Values\.([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)", template.read_text())
    )


def unknown_keys(
    values: Mapping[str, Any],
    defaults: Mapping[str, Any],
    schema: Mapping[str, Any] | None = None,
    path: tuple[str, ...] = (),
    read: frozenset[str] = frozenset(),
) -> list[str]:
    """Key paths of ``values`` that are neither keys of the chart's ``defaults``, nor described by
    its ``schema``, nor read by its templates (``read``: :func:`template_value_paths`), or that
    are maps where the chart has something else."""
    problems = []
    for key, value in values.items():
        here = ".".join((*path, key))
        default = defaults.get(key, _MISSING) if isinstance(defaults, dict) else _MISSING
        described = _schema_property(schema, key)
        if default is _MISSING and described is None:
            if here in read and not isinstance(value, dict):
                continue  # a leaf the chart's template reads
            problems.append(f"{here}: not a key of the chart's values")
            continue
        if value == {} and isinstance(default, dict) and default:
            # Helm merges a map into the chart's map key by key: {} leaves the default in place.
            # Only null deletes a key, and nulls in values from Python do not reliably reach Helm
            # (pulumi/pulumi#12178, pulumi/pulumi-kubernetes#3811): override the default instead.
            problems.append(f"{here}: {{}} does not clear the chart's default {sorted(default)}")
            continue
        if key in FREE_FORM or not isinstance(value, dict):
            continue
        if default is not _MISSING and not isinstance(default, dict) and described is None:
            problems.append(f"{here}: a map here, but {type(default).__name__} in the chart's values")
            continue
        below = default if isinstance(default, dict) else {}
        problems += unknown_keys(value, below, described, (*path, key), read)
    return problems


def schema_problems(chart: ChartDefaults, values: Mapping[str, Any]) -> list[str]:
    """What the chart's values.schema.json refuses in the values Helm would install (its defaults
    coalesced with ours, which is what Helm validates); nothing when it ships no schema."""
    if chart.schema is None:
        return []
    validator = jsonschema.Draft7Validator(chart.schema)
    merged = _merged(chart.values, dict(values))
    return [f"schema: {e.json_path}: {e.message}" for e in validator.iter_errors(merged)]


def _dependencies(parent: ChartDefaults) -> dict[str, str]:
    """Values key -> version of each dependency in the parent's Chart.yaml."""
    return {d.get("alias", d["name"]): d["version"] for d in parent.chart.get("dependencies", [])}


def chart_value_problems(chart: str, version: str, values: Mapping[str, Any]) -> list[str]:
    """Everything wrong with ``values`` for ``chart`` at ``version``, sub-chart keys included."""
    parent = helm_chart_defaults(chart, version)
    dependencies = _dependencies(parent)
    own = {k: v for k, v in values.items() if k not in dependencies}
    problems = unknown_keys(own, parent.values, parent.schema, read=template_value_paths(parent))
    problems += schema_problems(parent, values)
    for key in sorted(values.keys() & dependencies.keys()):
        sub = helm_chart_defaults(key, dependencies[key])
        # The sub-chart sees its own defaults coalesced with the parent's block for it, which may
        # also hold keys only the parent's templates read (the dependency's condition, enabled).
        defaults = _merged(sub.values, parent.values.get(key) or {})
        problems += [f"{key}.{p}" for p in unknown_keys(values[key], defaults, sub.schema)]
    return problems


def _releases_of_stack(stack: str) -> dict[str, dict[str, Any]]:
    return render(read_stack(stack)).helm


def _releases_of_example(compute_mode: str) -> dict[str, dict[str, Any]]:
    mocks = run_existing_cluster_example(compute_mode)
    return dict(_helm_release(record) for record in mocks.resources if record.type in HELM_TOKENS)


@pytest.fixture(scope="module")
def releases() -> Releases:
    """Source (stack or example) -> release -> {chart, version, values, ...}, rendered once."""
    found = {stack: _releases_of_stack(stack) for stack in STACKS}
    found |= {f"existing-cluster-{mode}": _releases_of_example(mode) for mode in COMPUTE_MODES}
    return found


def _all_releases(releases: Releases) -> Iterator[dict[str, Any]]:
    for by_name in releases.values():
        yield from by_name.values()


@pytest.mark.parametrize("source", SOURCES)
def test_every_value_we_set_is_a_key_of_the_pinned_chart(source: str, releases: Releases) -> None:
    assert releases[source], f"{source} renders no Helm release"
    problems = [
        f"{name} ({_chart_name(r['chart'])} {r['version']}): {problem}"
        for name, r in sorted(releases[source].items())
        for problem in chart_value_problems(_chart_name(r["chart"]), r["version"], r.get("values", {}))
    ]
    assert not problems, "\n".join(problems)


def test_the_renders_cover_every_chart_the_program_pins(releases: Releases) -> None:
    """No chart escapes the check because no checked render installs it."""
    from deepseek_eks.components import versions

    pinned = {_chart_name(v.chart) for v in vars(versions).values() if isinstance(v, versions.ChartPin)}
    assert {_chart_name(r["chart"]) for r in _all_releases(releases)} == pinned


def test_every_free_form_exception_is_used(releases: Releases) -> None:
    def keys(value: Any) -> Iterator[str]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield k
                yield from keys(v)

    used = {k for r in _all_releases(releases) for k in keys(r.get("values", {}))}
    assert set(FREE_FORM) <= used, f"stale FREE_FORM entries: {set(FREE_FORM) - used}"


def test_each_snapshot_is_the_chart_release_it_is_named_after() -> None:
    sources = helm_chart_sources()
    for folder, source in sources["snapshots"].items():
        chart, version = folder.rsplit("-", 1)
        defaults = helm_chart_defaults(chart, version)
        assert defaults.folder.name == folder
        assert defaults.chart["name"] == chart, folder
        # LWS packages its tag's chart under the release version (see the entry's note).
        assert str(defaults.chart["version"]) == source.get("source_version", version), folder
        assert {"repo", "ref", "commit", "path"} <= source.keys(), folder
    assert set(sources) == {"about", "snapshots"}, "a chart snapshot must be its own release's"


def test_sub_chart_snapshots_are_the_versions_their_parent_names(releases: Releases) -> None:
    """A snapshot of a dependency is at exactly the version the parent snapshot's Chart.yaml names,
    so refreshing the parent without its sub-charts fails here (88.x pins exact versions)."""
    snapshots = set(helm_chart_sources()["snapshots"])
    parents = {(_chart_name(r["chart"]), r["version"]) for r in _all_releases(releases)}
    checked = 0
    for chart, version in sorted(parents):
        for name, wanted in _dependencies(helm_chart_defaults(chart, version)).items():
            found = {s for s in snapshots if s.rsplit("-", 1)[0] == name}
            assert found <= {f"{name}-{wanted}"}, (chart, name, wanted, found)
            checked += len(found)
    assert checked, "no sub-chart snapshot checked"


def test_node_exporter_tolerates_every_no_schedule_taint(releases: Releases) -> None:
    """node-exporter belongs on every node: the GPU nodes (nvidia.com/gpu) and the system nodes
    (CriticalAddonsOnly) are tainted NoSchedule. A tolerations list of ours replaces the chart's."""
    for release in _all_releases(releases):
        if _chart_name(release["chart"]) != "kube-prometheus-stack":
            continue
        parent = helm_chart_defaults("kube-prometheus-stack", release["version"])
        chart_default = helm_chart_defaults(
            "prometheus-node-exporter", _dependencies(parent)["prometheus-node-exporter"]
        ).values["tolerations"]
        ours = release.get("values", {}).get("prometheus-node-exporter", {})
        tolerations = ours.get("tolerations", chart_default)
        assert any(
            t.get("operator") == "Exists" and "key" not in t and t.get("effect") in (None, "NoSchedule")
            for t in tolerations
        ), tolerations


# --- the check itself: it must refuse what Helm would silently ignore ---------------------------


def _rendered_values(releases: Releases, chart: str) -> tuple[str, dict[str, Any]]:
    release = next(r for r in _all_releases(releases) if _chart_name(r["chart"]) == chart)
    return release["version"], copy.deepcopy(release["values"])


def test_a_misspelt_key_fails(releases: Releases) -> None:
    version, values = _rendered_values(releases, "aws-load-balancer-controller")
    assert chart_value_problems("aws-load-balancer-controller", version, values) == []
    values["enableWafV2"] = values.pop("enableWafv2")
    assert chart_value_problems("aws-load-balancer-controller", version, values) == [
        "enableWafV2: not a key of the chart's values"
    ]


def test_a_key_in_the_wrong_place_fails(releases: Releases) -> None:
    version, values = _rendered_values(releases, "dcgm-exporter")
    values["honorLabels"] = values["serviceMonitor"].pop("honorLabels")
    assert chart_value_problems("dcgm-exporter", version, values) == [
        "honorLabels: not a key of the chart's values"
    ]


def test_a_misspelt_sub_chart_key_fails(releases: Releases) -> None:
    version, values = _rendered_values(releases, "kube-prometheus-stack")
    dashboards = values["grafana"]["sidecar"]["dashboards"]
    dashboards["searchNamespaces"] = dashboards.pop("searchNamespace")
    values["prometheus"]["prometheusSpec"]["retentionTime"] = "1d"
    assert chart_value_problems("kube-prometheus-stack", version, values) == [
        "prometheus.prometheusSpec.retentionTime: not a key of the chart's values",
        "grafana.sidecar.dashboards.searchNamespaces: not a key of the chart's values",
    ]


def test_an_empty_map_over_a_chart_default_fails(releases: Releases) -> None:
    """What components/platform/karpenter.py once set: Helm keeps the chart's NFD node affinity under {}."""
    version, values = _rendered_values(releases, "nvidia-device-plugin")
    values["affinity"] = {}
    assert chart_value_problems("nvidia-device-plugin", version, values) == [
        "affinity: {} does not clear the chart's default ['nodeAffinity']"
    ]


def test_a_map_where_the_chart_has_a_scalar_fails() -> None:
    problems = unknown_keys({"replicaCount": {"min": 2}}, {"replicaCount": 1})
    assert problems == ["replicaCount: a map here, but int in the chart's values"]


def test_a_key_only_a_vendored_template_reads_is_a_key_and_a_misspelling_of_it_is_not() -> None:
    """KEDA 2.20.2 documents its PodDisruptionBudget fields only as comments; the chart's PDB
    templates (vendored from kedacore/charts cbb9bb8c) read them."""
    keda = helm_chart_defaults("keda", "2.20.2")
    read = template_value_paths(keda)
    assert "podDisruptionBudget.operator.maxUnavailable" in read
    assert "podDisruptionBudget.metricServer.maxUnavailable" in read
    budgets = {"operator": {"maxUnavailable": 1}, "metricServer": {"maxUnavailabe": 1}}
    values = {"podDisruptionBudget": budgets}
    assert unknown_keys(values, keda.values, read=read) == [
        "podDisruptionBudget.metricServer.maxUnavailabe: not a key of the chart's values"
    ]
    # Without the templates the documented-by-comment key is refused like any other.
    assert unknown_keys(values, keda.values) == [
        "podDisruptionBudget.operator.maxUnavailable: not a key of the chart's values",
        "podDisruptionBudget.metricServer.maxUnavailabe: not a key of the chart's values",
    ]


def test_free_form_maps_and_list_items_are_not_checked_below_their_key() -> None:
    defaults = {"nodeSelector": {}, "tolerations": [], "podLabels": {}}
    values = {"nodeSelector": {"any/label": "x"}, "tolerations": [{"key": "k"}], "podLabels": {"a": "b"}}
    assert unknown_keys(values, defaults) == ["podLabels.a: not a key of the chart's values"]


def test_a_values_schema_allows_keys_and_is_enforced(tmp_path: Path) -> None:
    """No pinned chart ships values.schema.json today; the path is exercised on a small one."""
    schema = {
        "type": "object",
        "properties": {"image": {"type": "object", "properties": {"tag": {"type": "string"}}}},
    }
    assert unknown_keys({"image": {"tag": "v1"}}, {}, schema) == []
    misspelt = unknown_keys({"image": {"digest": "sha"}}, {}, schema)
    assert misspelt == ["image.digest: not a key of the chart's values"]
    chart = ChartDefaults(tmp_path, {"name": "demo"}, {"image": {"tag": "v1"}}, schema)
    assert schema_problems(chart, {"image": {"tag": "v2"}}) == []
    assert schema_problems(chart, {"image": {"tag": 2}}) == ["schema: $.image.tag: 2 is not of type 'string'"]
