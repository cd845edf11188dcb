"""Upgrade safety: every example stack against its committed URN snapshot (tests/snapshots), and
the check itself catching a rename, a re-parent and a replacing input change."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest

import deepseek_eks.components.namespaces
import deepseek_eks.components.platform.karpenter  # noqa: F401
from deepseek_eks import components
from deepseek_eks.automation.stackfile import read_stack, stack_names
from deepseek_eks.guardrails import diff as diff_module
from deepseek_eks.guardrails import urns
from deepseek_eks.testing.mocks import Recorded
from tests.rendered.test_render import automation

FACTS = urns.replace_on_change()
# The module, not the ``build`` function the package re-exports under the same name.
BUILD_MODULE = importlib.import_module("deepseek_eks.components.build")


@pytest.fixture(scope="module")
def resources() -> dict[str, list[Recorded]]:
    return {stack: urns.run_resources(read_stack(stack)) for stack in stack_names()}


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_keeps_its_snapshotted_urns(stack: str, resources: dict[str, list[Recorded]]) -> None:
    problems = urns.check(urns.load_snapshot(stack), resources[stack], FACTS)
    assert not problems, "\n".join(map(str, problems))


def test_every_example_stack_has_a_snapshot() -> None:
    # The snapshot set follows the stack files (iterated, never listed by hand).
    snapshots = sorted(p.name.removesuffix(".urns.json") for p in urns.SNAPSHOT_DIR.glob("*.urns.json"))
    assert snapshots == stack_names()


def test_the_snapshot_records_the_parent_chain_and_replacing_inputs() -> None:
    entries = {e["name"]: e for e in urns.load_snapshot("prod")["resources"]}
    group = entries["capacity-system"]
    assert group["type"] == "aws:eks/nodeGroup:NodeGroup"
    assert group["urn"].endswith(
        "::deepseek-eks:index:DeepSeekService$deepseek-eks:index:KarpenterCapacity"
        "$aws:eks/nodeGroup:NodeGroup::capacity-system"
    )
    assert group["parent"] == entries["capacity"]["urn"]
    assert set(group["replaceOnChange"]) <= set(FACTS["aws:eks/nodeGroup:NodeGroup"])
    assert {"instanceTypes", "subnetIds", "nodeRoleArn"} <= set(group["replaceOnChange"])


def _renamed_namespaces(monkeypatch: pytest.MonkeyPatch, alias: bool) -> None:
    """Make the Namespaces component name its children differently, as a refactor might."""
    real = k8s.core.v1.Namespace

    def renamed(name: str, opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> Any:
        aliases = [pulumi.Alias(name=name)] if alias else None
        return real(
            f"{name}-v2",
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases)),
            **kwargs,
        )

    monkeypatch.setattr(components.namespaces.k8s.core.v1, "Namespace", renamed)


def test_a_rename_without_an_alias_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    _renamed_namespaces(monkeypatch, alias=False)
    problems = urns.check(urns.load_snapshot("dev"), urns.run_resources(read_stack("dev")), FACTS)
    gone = [p for p in problems if "no resource lists it in aliases" in p.message]
    assert {p.urn.rsplit("::", 1)[1] for p in gone} == {
        "namespaces-deepseek",
        "namespaces-monitoring",
        "namespaces-node-monitoring",
    }
    assert all("$kubernetes:core/v1:Namespace::" in p.urn for p in gone)


def test_a_rename_with_an_alias_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    _renamed_namespaces(monkeypatch, alias=True)
    run = urns.run_resources(read_stack("dev"))
    assert any(r.name == "namespaces-deepseek-v2" for r in run)
    assert urns.check(urns.load_snapshot("dev"), run, FACTS) == []


def test_a_re_parent_without_an_alias_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = k8s.core.v1.Namespace

    def unparented(name: str, opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> Any:
        return real(name, opts=pulumi.ResourceOptions(), **kwargs)  # moved to the stack's top level

    monkeypatch.setattr(components.namespaces.k8s.core.v1, "Namespace", unparented)
    problems = urns.check(urns.load_snapshot("dev"), urns.run_resources(read_stack("dev")), FACTS)
    assert any(
        p.urn.endswith("deepseek-eks:index:Namespaces$kubernetes:core/v1:Namespace::namespaces-deepseek")
        and "aliases" in p.message
        for p in problems
    )


def test_changing_an_input_that_replaces_a_node_group_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = aws.eks.NodeGroup

    def other_instances(name: str, **kwargs: Any) -> Any:
        return real(name, **{**kwargs, "instance_types": ["m7i.xlarge"]})

    monkeypatch.setattr(components.platform.karpenter.aws.eks, "NodeGroup", other_instances)
    problems = urns.check(urns.load_snapshot("prod"), urns.run_resources(read_stack("prod")), FACTS)
    assert len(problems) == 1, problems
    assert problems[0].urn.endswith("::capacity-system")
    assert "'instanceTypes'" in problems[0].message and "m7i.xlarge" in problems[0].message


def test_a_new_resource_must_be_added_to_the_snapshot(resources: dict[str, list[Recorded]]) -> None:
    snapshot = urns.load_snapshot("dev")
    trimmed = {"resources": [e for e in snapshot["resources"] if e["name"] != "namespaces-monitoring"]}
    problems = urns.check(trimmed, resources["dev"], FACTS)
    assert [p.urn.rsplit("::", 1)[1] for p in problems] == ["namespaces-monitoring"]
    assert urns.UPDATE_HINT in problems[0].message
    # Upgrading from an older snapshot (diff --against) adds it safely: no UNSAFE line for it.
    assert urns.check(trimmed, resources["dev"], FACTS, new_unreviewed=False) == []


def test_diff_against_a_ref_calls_added_resources_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 §5: a resource the working tree adds is not UNSAFE in `diff --against`."""
    seen: dict[str, bool] = {}
    real = urns.check

    def recording(*args: Any, **kwargs: Any) -> list[urns.Problem]:
        seen["new_unreviewed"] = kwargs.get("new_unreviewed", True)
        return real(*args, **kwargs)

    monkeypatch.setattr(urns, "check", recording)
    diff_module.diff("dev", "HEAD")
    assert seen == {"new_unreviewed": False}


def test_the_replace_facts_name_their_upstream_source() -> None:
    types = json.loads(urns.REPLACE_FACTS.read_text())["types"]
    for token, entry in types.items():
        assert entry["fields"], token
        assert "/" in entry["source"], f"{token}: cite the upstream file"


def test_the_urns_command_checks_and_never_rewrites() -> None:
    before = {p.name: p.read_bytes() for p in urns.SNAPSHOT_DIR.glob("*.urns.json")}
    proc = automation("urns")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"{stack}: ok" for stack in stack_names()]
    assert {p.name: p.read_bytes() for p in urns.SNAPSHOT_DIR.glob("*.urns.json")} == before


def test_diff_against_a_ref_shows_the_render_change(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = read_stack("dev").with_overrides({"autoscaling.maxReplicas": "3"}, "deepseek-eks")
    monkeypatch.setattr(diff_module, "read_stack", lambda stack, root: changed)
    lines, problems = diff_module.diff("dev", "HEAD")
    text = "".join(lines)
    # dev scales with a KEDA ScaledObject (the concurrency signal).
    assert "--- a/HEAD/kubernetes/scaledobject-deepseek-" in text
    assert "+++ b/worktree/kubernetes/scaledobject-deepseek-" in text
    assert "-  maxReplicaCount: 2\n" in text and "+  maxReplicaCount: 3\n" in text
    assert problems == []


def test_diff_names_a_ref_git_cannot_read() -> None:
    with pytest.raises(diff_module.DiffError, match="no-such-ref"):
        diff_module.diff("dev", "no-such-ref")


def _namespaces_under_a_new_component(monkeypatch: pytest.MonkeyPatch, alias: bool) -> None:
    """A refactor that groups components under a new intermediate component. The moved component
    says where it was (``Alias(parent=<its old parent>)``); its children inherit that alias."""
    real = BUILD_MODULE.Namespaces

    def moved(name: str, args: Any, opts: pulumi.ResourceOptions | None = None) -> Any:
        old_parent = opts.parent if opts else None
        group = pulumi.ComponentResource(
            "deepseek-eks:index:Platform", "platform", opts=pulumi.ResourceOptions(parent=old_parent)
        )
        aliases = [pulumi.Alias(parent=old_parent)] if alias else None
        return real(
            name,
            args,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=group, aliases=aliases)),
        )

    monkeypatch.setattr(BUILD_MODULE, "Namespaces", moved)


def test_moving_a_component_under_a_new_parent_keeps_its_children_through_inherited_aliases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _namespaces_under_a_new_component(monkeypatch, alias=True)
    run = urns.run_resources(read_stack("dev"))
    namespace = next(r for r in run if r.name == "namespaces-deepseek")
    assert namespace.urn.endswith(
        "DeepSeekService$deepseek-eks:index:Platform$deepseek-eks:index:Namespaces"
        "$kubernetes:core/v1:Namespace::namespaces-deepseek"
    )
    problems = urns.check(urns.load_snapshot("dev"), run, FACTS)
    # Only the new parent is unknown to the snapshot; nothing is lost.
    assert [p.urn.rsplit("::", 1)[1] for p in problems] == ["platform"]


def test_moving_a_component_without_an_alias_loses_it_and_its_children(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _namespaces_under_a_new_component(monkeypatch, alias=False)
    problems = urns.check(urns.load_snapshot("dev"), urns.run_resources(read_stack("dev")), FACTS)
    gone = {p.urn.rsplit("::", 1)[1] for p in problems if "no resource lists it in aliases" in p.message}
    assert gone == {
        "namespaces",
        "namespaces-deepseek",
        "namespaces-monitoring",
        "namespaces-node-monitoring",
    }
