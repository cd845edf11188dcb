"""The policy pack over hostile input: the probe corpus (tests/policy_probes.py), stacks this program
renders with hostile settings, the shipped stacks and their feature variants, and the objects the
project's Helm charts render (tests/data/chart_objects.json) as a v4 Chart's children."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deepseek_eks.automation.render import construct
from deepseek_eks.automation.stackfile import stack_names
from deepseek_eks.policy import rules
from deepseek_eks.policy.rules import Resource, base, rbac, violations, workloads
from deepseek_eks.settings.model import SettingsError
from tests import chart_objects
from tests.conftest import feature_configs, stack_config
from tests.policy_probes import ALLOWED, HALVES, NEAR_WORLD, PROBES, Probe
from tests.rendered.test_policy_pack import policy_view

# --- the probe corpus


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_each_probe_is_refused_by_its_rule_alone(probe: Probe) -> None:
    found = violations(list(probe.resources))
    assert {rule for rule, _, _ in found} == {probe.rule}, f"{probe.what}: {found}"


def test_the_probes_cover_every_rule_once_named() -> None:
    assert len({p.name for p in PROBES}) == len(PROBES)
    names = {r.name for r in (*rules.RESOURCE_RULES, *rules.STACK_RULES)}
    assert {p.rule for p in PROBES} == names


@pytest.mark.parametrize(("what", "build"), ALLOWED, ids=[a for a, _ in ALLOWED])
def test_what_the_look_alikes_imitate_passes(what: str, build: Callable[[], tuple[Resource, ...]]) -> None:
    assert violations(list(build())) == [], what


# --- stacks this program renders with hostile settings


# A set of distinct, harmless CIDRs the program accepts, one per hostile CIDR: the stack is rendered
# with them and each is then replaced by its hostile counterpart, as a program that skips the
# settings' checks would render it.
def markers(count: int) -> list[str]:
    return [f"198.51.100.{16 * i}/28" for i in range(count)]


CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234"
# (what, stack, setting that takes the CIDRs, other settings, the rule that must refuse it)
HOSTILE_SETTINGS: tuple[tuple[str, str, str, dict[str, str], str], ...] = (
    ("public API endpoint", "prod", "cluster__publicAccessCidrs", {}, "cluster-endpoint-private-or-limited"),
    ("private API access", "prod", "cluster__privateAccessCidrs", {}, "no-world-open-ingress"),
    (
        "internet-facing endpoint",
        "prod",
        "endpoint__allowedCidrs",
        {"endpoint__scheme": "internet-facing", "endpoint__certificateArn": CERTIFICATE},
        "endpoint-not-open-to-world",
    ),
    ("internal endpoint", "dev", "endpoint__allowedCidrs", {}, "endpoint-not-open-to-world"),
)
HOSTILE_CIDRS = {"near-world": NEAR_WORLD, "halves": HALVES, "slash-zero": ["0.0.0.0/0"]}
# Rules that judge the same thing from the stack's side: one ingress rule per CIDR (how the private
# API access renders) is judged alone and, with the others of its group and port, as a set.
COMPANIONS = {"no-world-open-ingress": ("no-world-open-ingress-sets",)}
CASES = [
    pytest.param(stack, setting, extra, rule, cidrs, id=f"{what.replace(' ', '-')}-{name}")
    for what, stack, setting, extra, rule in HOSTILE_SETTINGS
    for name, cidrs in HOSTILE_CIDRS.items()
]


def _replace(value: Any, swap: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _replace(v, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, swap) for v in value]
    if isinstance(value, str):
        for old, new in swap.items():
            value = value.replace(old, new)
    return value


def rendered(stack: str, **settings: str) -> list[Resource]:
    return policy_view(construct(stack_config(stack, None, **settings)).mocks.resources)


@pytest.mark.parametrize(("stack", "setting", "extra", "rule", "cidrs"), CASES)
def test_hostile_cidrs_are_refused_by_the_settings_or_caught_by_the_pack(
    stack: str, setting: str, extra: dict[str, str], rule: str, cidrs: list[str]
) -> None:
    """What the review found: stacks the settings accepted that the pack passed. Either the
    settings refuse the stack, or the pack refuses its render."""
    try:
        resources = rendered(stack, **{setting: ",".join(cidrs)}, **extra)
    except SettingsError:
        return
    assert rule in {r for r, _, _ in violations(resources)}


@pytest.mark.parametrize(("stack", "setting", "extra", "rule", "cidrs"), CASES)
def test_hostile_cidrs_in_a_render_that_skips_the_settings_are_caught(
    stack: str, setting: str, extra: dict[str, str], rule: str, cidrs: list[str]
) -> None:
    """The same stack as a program that does not run the settings' checks registers it: the pack
    alone must refuse it, with that rule only."""
    safe = markers(len(cidrs))
    resources = rendered(stack, **{setting: ",".join(safe)}, **extra)
    assert violations(resources) == []
    swap = dict(zip(safe, cidrs, strict=True))
    hostile = [
        Resource(r.type, _replace(r.props, swap), r.urn, r.name, r.property_dependencies, r.parent)
        for r in resources
    ]
    found = {r for r, _, _ in violations(hostile)}
    assert rule in found and found <= {rule, *COMPANIONS.get(rule, ())}, found


# --- the project's own renders pass


@pytest.mark.parametrize("stack", stack_names())
def test_the_shipped_stacks_render_with_no_violation(stack: str) -> None:
    assert violations(rendered(stack)) == []


@pytest.mark.parametrize("name", sorted(feature_configs()))
def test_every_feature_variant_renders_with_no_violation(name: str) -> None:
    config = feature_configs()[name]
    assert violations(policy_view(construct(config).mocks.resources)) == []


# --- the charts' own objects, as a v4 Chart's children


def test_the_chart_objects_were_rendered_with_the_values_the_program_gives_now() -> None:
    """tests/data/chart_objects.json must describe today's releases: rerun tools/chart_objects.py
    after changing a chart's values or version (its --help says how)."""
    recorded = {
        (stack, entry["release"]): (entry["chart"], entry["version"], entry["values_sha256"])
        for entry in chart_objects.load()["releases"]
        for stack in entry["stacks"]
    }
    now = {
        (stack, r.name): (r.chart_name, r.version, r.digest)
        for stack in stack_names()
        for r in chart_objects.releases(stack)
    }
    stale = sorted(f"{s}/{name}" for (s, name), v in now.items() if recorded.get((s, name)) != v)
    gone = sorted(f"{s}/{name}" for s, name in set(recorded) - set(now))
    assert (stale, gone) == ([], []), "rerun tools/chart_objects.py --charts DIR"


@pytest.mark.parametrize(
    "entry", chart_objects.load()["releases"], ids=lambda e: f"{e['release']}-{'-'.join(e['stacks'])}"
)
def test_every_chart_object_passes_the_pack_as_a_charts_child(entry: dict[str, Any]) -> None:
    assert entry["objects"], "the render holds the kinds the rules read"
    assert violations(chart_objects.as_chart_children(entry)) == []


def _chart_resources() -> list[Resource]:
    return [r for entry in chart_objects.load()["releases"] for r in chart_objects.as_chart_children(entry)]


def test_every_chart_grant_is_still_needed() -> None:
    """Each rule a CHART_ROLE_GRANTS entry allows is refused without it for some object its chart
    renders today, and each CHART_CAPABILITY_GRANTS entry's container adds those capabilities: an
    exception no object needs (a chart narrowed by its values, an upgrade) fails here."""
    resources = _chart_resources()
    charts = base.charts_of(resources)
    used: set[tuple[int, int]] = set()
    for resource in resources:
        found = base.kind_of(resource.type)
        if found is None or found[1] not in ("Role", "ClusterRole"):
            continue
        name = str(resource.props["metadata"]["name"])
        for rule in resource.props.get("rules") or []:
            if not rbac.rbac_rule_problems(found[1], rule):
                continue
            for g, grant in enumerate(rbac.CHART_ROLE_GRANTS):
                if (grant.chart, grant.kind, grant.name) != (charts.get(resource.urn), found[1], name):
                    continue
                used |= {(g, a) for a, allowed in enumerate(grant.rules) if rbac._within(rule, allowed)}
    wanted = {(g, a) for g, grant in enumerate(rbac.CHART_ROLE_GRANTS) for a in range(len(grant.rules))}
    unused = [
        f"{rbac.CHART_ROLE_GRANTS[g].chart}/{rbac.CHART_ROLE_GRANTS[g].name} rules[{a}]"
        for g, a in sorted(wanted - used)
    ]
    assert unused == []
    for capability in workloads.CHART_CAPABILITY_GRANTS:
        added = {
            cap.upper()
            for r in resources
            if charts.get(r.urn) == capability.chart
            and r.props.get("kind") == capability.kind
            and r.props["metadata"]["name"] == capability.name
            for _, _, spec in workloads.pod_specs(r.props)
            for c in spec.get("containers", [])
            if c.get("name") == capability.container
            for cap in (c.get("securityContext") or {}).get("capabilities", {}).get("add", [])
        }
        assert capability.capabilities <= added, capability


def test_without_their_chart_the_granted_objects_are_refused() -> None:
    """The grants hold for a chart's own objects only: the same objects registered by hand (no
    Chart parent) are refused, each by its rule."""
    by_hand = [
        Resource(r.type, r.props, r.urn, r.name) for r in _chart_resources() if r.type != chart_objects.CHART
    ]
    found = violations(by_hand)
    refused = {(rule, m.split(" ", 2)[1]) for rule, _, m in found if rule == "rbac-least-privilege"}
    assert {name for _, name in refused} >= {g.name for g in rbac.CHART_ROLE_GRANTS}
    containers = [m for rule, _, m in found if rule == "container-least-privilege"]
    assert any("(exporter) runs with adds capabilities SYS_ADMIN" in m for m in containers)
