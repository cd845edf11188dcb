"""examples/existing-cluster through the real Pulumi engine, the real Kubernetes provider and the
real kube-apiserver (Tier 0), AWS and pulumi-random answered by the stand-ins. Helm releases
install local stub charts and readiness waits are skipped (see tests/engine/cluster.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from deepseek_eks.automation.stackfile import read_stack
from tests.engine.cluster import stack_on_twin
from tests.engine.engine import changes
from tests.examples import EXISTING

PROJECT = read_stack("example", EXISTING).project


@pytest.fixture
def example_stack(tmp_path: Path) -> Iterator[Any]:
    """The example's stack (its stack file's settings, the twin's kubeconfig) on a fresh twin."""
    with stack_on_twin(tmp_path, EXISTING, "example", f"{PROJECT}:kubeconfig") as stack:
        yield stack


@pytest.mark.timeout(1200)  # one engine process per operation, each starting every plugin
def test_existing_cluster_example_lifecycle(example_stack: Any) -> None:
    stack, started = example_stack, time.monotonic()
    fresh = stack.preview()
    assert set(changes(fresh)) == {"create"}, fresh.stdout
    up = stack.up()
    assert up.summary.result == "succeeded"
    assert up.outputs["teamAVariant"].value == "r1-distill-qwen-7b"
    assert changes(up) == changes(fresh)  # the preview announced exactly what up did
    again = stack.preview(expect_no_changes=True)
    assert not changes(again), again.stdout

    # A setting change: team B's subnets -> the NetworkPolicies' egress CIDRs (getSubnet answers).
    stack.set_config(
        f"{PROJECT}:privateSubnetIds",
        auto.ConfigValue('["subnet-0feed0000000001", "subnet-0feed0000000002"]'),
    )
    diff = stack.preview(diff=True)
    assert changes(diff), diff.stdout
    assert stack.up().summary.result == "succeeded"

    stack.destroy()
    assert not stack.export_stack().deployment.get("resources")
    print(f"existing-cluster lifecycle through the engine: {time.monotonic() - started:.0f}s")


SECRET_SIG = (
    "4dabf18193072939515e22adb298388d"  # the state's secret marker (pulumi sdk/go/common/resource/sig)
)


def _plain(value: Any) -> Any:
    """A resource's outputs with each secret as one marker: a state rewrite re-encrypts secrets."""
    if isinstance(value, dict):
        return "<secret>" if SECRET_SIG in value else {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.timeout(1200)
def test_existing_cluster_compute_mode_switch_is_refused_by_the_program(example_stack: Any) -> None:
    """A raw switch through the real engine: each component reads its own outputs from the stack's
    last update (the engine's readStackResourceOutputs) and refuses before anything changes; the
    real API server would otherwise reject it half-way (Karpenter's NodePool CEL rule
    'nodeClassRef.group/kind is immutable', StorageClass 'updates to provisioner are forbidden')."""
    stack = example_stack
    assert stack.up().summary.result == "succeeded"
    before = stack.export_stack().deployment["resources"]
    stack.set_config(f"{PROJECT}:computeMode", auto.ConfigValue("karpenter"))
    stack.set_config(f"{PROJECT}:nodeRoleName", auto.ConfigValue("KarpenterNodeRole-platform"))
    for operation in (stack.preview, stack.up, stack.up):  # refused again after a refused up
        with pytest.raises(auto.errors.CommandError) as refused:
            operation()
        message = str(refused.value)
        assert "DeepSeekService 'team-a'" in message and "compute_mode is 'karpenter'" in message, message
        assert "deployed with 'auto-mode'" in message and "allow_compute_mode_switch" in message, message
    after = {r["urn"]: _plain(r.get("outputs")) for r in stack.export_stack().deployment["resources"]}
    was = {r["urn"]: _plain(r.get("outputs")) for r in before}
    assert set(after) == set(was)
    changed = {
        urn: sorted(
            k
            for k in set(was[urn] or {}) | set(after[urn] or {})
            if (was[urn] or {}).get(k) != (after[urn] or {}).get(k)
        )
        for urn in was
        if was[urn] != after[urn]
    }
    assert not changed, changed
    stack.set_config(f"{PROJECT}:computeMode", auto.ConfigValue("auto-mode"))
    stack.set_config(f"{PROJECT}:nodeRoleName", auto.ConfigValue("platform-auto-mode-node"))
    assert not changes(stack.preview(expect_no_changes=True))
    stack.destroy()
