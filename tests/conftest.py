"""Shared fixtures: a hermetic AWS environment and a Pulumi mock-engine runner for build()."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deepseek_eks.automation.render import Construction
from deepseek_eks.automation.render import construct as run_build
from deepseek_eks.automation.stackfile import StackConfig, read_stack
from deepseek_eks.settings import PROJECT

# `make test` runs the suite on several processes (pytest-xdist). Each test is sent with its group:
# by default its module, so a module's fixtures (a twin, a render, a simulated day) are made once,
# on one process. Tests that share something beyond their module run as one group: each of these
# folders' session fixtures and engine state, and the host network the loop builds
# (twin/netns.py removes a bridge of its prefix that it finds, so two at once would tear down each
# other's).
SHARED_GROUPS: dict[str, tuple[str, ...]] = {
    "engine": ("tests/engine/",),
    "package": ("tests/package/",),
    "host-network": (
        "tests/twin/test_loop.py",
        "tests/twin/test_loop_units.py",
        "tests/twin/test_metrics_programs.py",
    ),
}
# Groups handed out first, so that no process is left with a long one at the end while the other
# idles: those that run real programs (the engine, the twin's loop and capacity) or simulate days.
# Only the order changes; every test runs either way.
LONG_FIRST = (
    "engine",
    "host-network",
    "tests/twin/",
    "tests/unit/test_simulate",
    "tests/docs/test_doc_examples",
)


def schedule_group(nodeid: str) -> str:
    """The group a test (its node id, or its file's path from the root) is scheduled in: a shared
    group its file belongs to, or its file."""
    relative = nodeid.split("::", 1)[0]
    for group, prefixes in SHARED_GROUPS.items():
        if any(relative.startswith(prefix) for prefix in prefixes):
            return group
    return relative


def _rank(group: str) -> int:
    return next((i for i, prefix in enumerate(LONG_FIRST) if group.startswith(prefix)), len(LONG_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only on xdist's workers: a plain run keeps the files' order. Every worker sorts alike, so
    # their collections still agree, as xdist requires.
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: _rank(schedule_group(item.nodeid)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # xdist's own `--dist loadgroup` writes a test's group into `item._nodeid` (xdist 3.8.0
    # remote.py:241-253), which pytest 9.2 no longer reads (Node.nodeid returns `_id`,
    # _pytest/nodes.py:289-292), so it sends every test alone: group here instead.
    if config.getvalue("dist") != "load":  # `-n N` alone means "load"; another --dist asked is kept
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return schedule_group(nodeid)

    config.option.loadscopereorder = False  # keep LONG_FIRST's order, not the most tests first
    return GroupScheduling(config, log)


@pytest.fixture(autouse=True)
def hermetic_aws(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test may reach a real AWS account: credentials are fake and config files absent."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ROLE_ARN"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path_factory.mktemp("aws") / "none"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)


def stack_config(stack: str = "dev", secrets: dict[str, str] | None = None, **overrides: Any) -> StackConfig:
    """A stack file's config with ``key=value`` overrides (dots in keys spelled as ``__``)."""
    config = read_stack(stack).with_overrides(
        {k.replace("__", "."): v for k, v in overrides.items()}, PROJECT
    )
    for key, value in (secrets or {}).items():
        config.values[f"{PROJECT}:{key}"] = value
        config.secret_keys.append(f"{PROJECT}:{key}")
    return config


@pytest.fixture
def construct() -> Callable[[StackConfig], Construction]:
    """Run build() under fresh strict recording mocks for a stack config."""
    return run_build


@pytest.fixture(scope="module")
def construct_module() -> Callable[[StackConfig], Construction]:
    """Like ``construct``, for module-scoped fixtures that share one run among tests."""
    return run_build


# Settings the stack files leave at their defaults, rendered on a distill (dev) and on r1-671b (r1)
# so the manifest gate and checkov see every object they add.
FEATURE_OVERRIDES: dict[str, dict[str, Any]] = {
    "s3-mountpoint": {"weights__source": "s3-mountpoint"},
    # Weights already in your bucket: no project bucket or stager, vLLM reads s3://acme-models/...
    "own-bucket-s3": {"weights__source": "s3", "model__repository": "s3://acme-models/deepseek-r1"},
    "own-bucket-mountpoint": {"weights__source": "s3-mountpoint", "model__repository": "s3://acme-models/"},
    "ebs-snapshot-fsr": {
        "weights__source": "ebs-snapshot",
        "weights__snapshotId": "snap-0123456789abcdef0",
        "weights__fastSnapshotRestore": "true",
    },
    # dev only: r1's two-node replicas refuse warm spares (components/service.py WARM_MULTI_NODE).
    "warm-spare": {"autoscaling__warmSpareNodes": 1},
    # ALB access logs to their own bucket, and the KMS key the program creates (issue 23 item 8).
    "access-logs-kms-key": {
        "endpoint__accessLogs": "true",
        "cluster__createKmsKey": "true",
        "weights__source": "s3",
    },
    # An NLB cannot limit paths, so it serves only keyless and internal (settings/exposure.py).
    "nlb-tls": {
        "endpoint__loadBalancer": "nlb",
        "endpoint__auth": "none",
        "endpoint__allowedCidrs": "198.51.100.0/24",
        "endpoint__certificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
    },
    "internet-facing-tls": {
        "endpoint__scheme": "internet-facing",
        "endpoint__allowedCidrs": "198.51.100.0/24",
        "endpoint__certificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
        "endpoint__hostname": "llm.example.com",
        "endpoint__hostedZoneId": "Z0123456789ABCDEFGHIJ",
    },
    "ebs-snapshot-karpenter": {
        "computeMode": "karpenter",
        "weights__source": "ebs-snapshot",
        "weights__snapshotId": "snap-0123456789abcdef0",
    },
}


# Features a stack refuses before anything is created, each tested where it is refused.
REFUSED_FEATURES = {("r1", "warm-spare")}  # tests/construction/test_routing_settings.py


# llm-d's router in front of vLLM on the stacks it routes (single-node replicas: r1 refuses it):
# dev scaled to zero on the router's queue, prod on its own signal.
ROUTED_OVERRIDES: dict[str, dict[str, Any]] = {
    "dev-llm-d": {
        "routing__kind": "llm-d",
        "autoscaling__signal": "router-queue",
        "autoscaling__minReplicas": "0",
    },
    "prod-llm-d": {"routing__kind": "llm-d"},
}


def routed_configs() -> dict[str, StackConfig]:
    """``<stack>-llm-d`` -> that stack's config with llm-d's router."""
    return {label: stack_config(label.split("-")[0], **o) for label, o in ROUTED_OVERRIDES.items()}


def feature_configs() -> dict[str, StackConfig]:
    """``<stack>-<feature>`` -> that stack's config with the feature's overrides; and the routed
    stacks (``routed_configs``)."""
    return {
        **{
            f"{stack}-{feature}": stack_config(stack, **overrides)
            for stack in ("dev", "r1")
            for feature, overrides in FEATURE_OVERRIDES.items()
            if (stack, feature) not in REFUSED_FEATURES
        },
        **routed_configs(),
    }
