"""The dev stack (Pulumi.dev.yaml: a new VPC and EKS Auto Mode cluster) through the real Pulumi
engine (preview, up, a no-change preview, a setting change with --diff, destroy): AWS and the
cluster from the stand-ins, the cluster's kubeconfig the local twin's, so every Kubernetes object
goes to the real kube-apiserver through the real Kubernetes provider."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pulumi import automation as auto

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from tests.engine.cluster import stack_on_twin
from tests.engine.engine import changes


@pytest.mark.timeout(1200)
def test_dev_stack_lifecycle(tmp_path: Path) -> None:
    started = time.monotonic()
    with stack_on_twin(tmp_path, PROJECT_ROOT, "dev") as stack:
        # As shipped, dev's API is private-only with no deployer admitted: the program itself
        # refuses it before anything is created (settings/exposure.py), under the real engine too.
        with pytest.raises(auto.errors.CommandError) as refused:
            stack.preview()
        assert "cluster API would be unreachable" in str(refused.value)
        assert "cluster.publicAccessCidrs" in str(refused.value)
        stack.set_config("deepseek-eks:cluster.publicAccessCidrs", auto.ConfigValue('["203.0.113.7/32"]'))
        fresh = stack.preview()
        assert set(changes(fresh)) == {"create"}, fresh.stdout
        up = stack.up()
        assert up.summary.result == "succeeded"
        assert changes(up) == changes(fresh)
        types = {r["type"] for r in stack.export_stack().deployment["resources"]}
        assert {"eks:index:Cluster", "aws:ec2/vpc:Vpc", "kubernetes:apps/v1:Deployment"} <= types, types
        print(f"dev stack: {up.summary.resource_changes} through the engine")
        again = stack.preview(expect_no_changes=True)
        assert not changes(again), again.stdout
        # A setting change: one more replica at most -> dev's KEDA ScaledObject (the concurrency
        # signal) and the GPU NodePool's limits, updated in place.
        stack.set_config("deepseek-eks:autoscaling.maxReplicas", auto.ConfigValue("3"))
        diff = stack.preview(diff=True)
        assert changes(diff) and "maxReplicaCount: 2 => 3" in diff.stdout, diff.stdout
        assert stack.up().summary.result == "succeeded"
        stack.destroy()
        assert not stack.export_stack().deployment.get("resources")
    print(f"dev stack lifecycle through the engine: {time.monotonic() - started:.0f}s")
