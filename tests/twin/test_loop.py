"""The autoscaling loop, run whole: ``python -m automation twin loop --stack S --json``.

Every program is the real one (kube-apiserver, kube-controller-manager's HPA, kube-scheduler, kwok,
Karpenter's kwok provider, Prometheus, prometheus-adapter or KEDA, the EKS network-policy
controller) but vLLM and the GPUs, played by the stand-in (twin/standin.py). The command
asserts the scenario itself (exit 1 when an assertion fails); these tests run it as a user would and
read its JSON, so a loop that stops asserting, or asserts the wrong numbers, fails here too.

About 2-5 minutes per stack. CI runs dev (through KEDA: concurrency with the seasonal floor) and r1
(KEDA's queue depth scaling the 671B path's LeaderWorkerSet, whose groups the real LWS controller
makes) every time; the other cases run with DEEPSEEK_EKS_LOOP_ALL=1 (`make twin-loop`), to keep a
cold .ci/run within its budget. Skips without the programs or without network namespaces (root,
`ip netns`); under DEEPSEEK_EKS_REQUIRE_LOOP=1 (CI, once it has built them) fails instead, and
for r1 under DEEPSEEK_EKS_REQUIRE_LWS=1 without the LWS controller.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import TIER0
from deepseek_eks.twin.capacity import PROGRAMS
from tests.twin.conftest import require_binaries

REQUIRED_BY = "DEEPSEEK_EKS_REQUIRE_LOOP"
# (stack, --set overrides, the metrics program its signal needs)
CASES = {
    "dev": ((), "keda"),  # concurrency with the seasonal floor
    "prod": ((), "keda"),
    "dev-gpu": (("autoscaling.signal=gpu-utilization", "autoscaling.seasonal=false"), "prometheus-adapter"),
    "r1": ((), "keda"),  # queue depth, a LeaderWorkerSet of two-node groups
}
IN_CI = ("dev", "r1")


def _require(metrics: str, stack: str = "dev") -> None:
    if stack == "r1":
        build = "run `twin/build.sh lws` (the LeaderWorkerSet controller)"
        require_binaries(missing_binaries(("lws",)), "the LWS controller", build, "DEEPSEEK_EKS_REQUIRE_LWS")
    programs = ("keda-operator", "keda-metrics-apiserver") if metrics == "keda" else ("prometheus-adapter",)
    absent = missing_binaries((*TIER0, *PROGRAMS, "network-policy-controller", *programs))
    build = f"run `twin/build.sh {' '.join(programs)}` (and the twin's other programs)"
    require_binaries(absent, "the twin loop's programs", build, REQUIRED_BY)
    missing = []
    if shutil.which("prometheus") is None:
        missing.append("Prometheus (`apt-get install prometheus`)")
    if os.geteuid() != 0 or shutil.which("ip") is None:
        missing.append("network namespaces (root and iproute2's `ip`)")
    if missing:
        reason = f"the twin loop needs {' and '.join(missing)}"
        if os.environ.get(REQUIRED_BY) == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def _loop(stack: str, overrides: tuple[str, ...], as_args: bool = False) -> tuple[int, dict[str, Any], str]:
    """Run the loop; ``overrides`` are ``--set`` items, or with ``as_args`` arguments as they are
    (``--scenario wake`` first, then ``--set`` items)."""
    command = [sys.executable, "-m", "automation", "twin", "loop", "--stack", stack, "--json"]
    items = list(overrides)
    if as_args:
        command += items[:2]
        items = items[2:]
    for item in items:
        command += ["--set", item]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {}
    return done.returncode, report, done.stderr[-4000:]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.timeout(900)  # as the loop's own: r1's takes 4-5 minutes beside another test process
def test_the_loop_holds(case: str) -> None:
    if case not in IN_CI and os.environ.get("DEEPSEEK_EKS_LOOP_ALL") != "1":
        ci = ", ".join(IN_CI)
        pytest.skip(f"{case}: run with DEEPSEEK_EKS_LOOP_ALL=1 (`make twin-loop`); CI runs {ci}")
    stack = case.split("-")[0]
    overrides, metrics = CASES[case]
    _require(metrics, stack)
    code, report, stderr = _loop(stack, overrides)
    assert report, f"no JSON report (exit {code}):\n{stderr}"
    failed = [a for a in report["assertions"] if not a["ok"]]
    assert code == 0 and not failed, json.dumps(failed, indent=1) + "\n" + stderr

    # The contract's fields (DESIGN.md, the twin loop).
    timeline = report["timeline"]
    assert timeline and set(timeline[0]) >= {"t", "desired_replicas", "ready_replicas", "nodes", "node_types"}
    assert report["flows"] and set(report["flows"][0]) >= {"from", "to", "port", "required", "admitted"}
    assert {a["name"] for a in report["assertions"]} >= {
        "flows", "floor-ready", "start-up-not-shorter-than-planned", "metrics-read-at-the-floor",
        "scale-up", "scale-down",
        "never-below-minReplicas", "nodepool-limits", "nodes-released", "node-types-planned",
    }  # fmt: skip
    assert report["time_compression"]["factor"] > 1 and report["rewrites"]

    # Read the timeline itself rather than trusting the verdicts: the fleet rose to what the
    # peak needs, then went back to the floor, never under it after it first stood.
    replicas = report["replicas"]
    ready = [s["ready_replicas"] for s in timeline]
    assert max(ready) >= replicas["needed_at_peak"] > replicas["min"]
    assert ready[-1] <= replicas["min"] and timeline[-1]["desired_replicas"] == replicas["min"]
    first_up = next(i for i, n in enumerate(ready) if n >= replicas["min"])
    assert min(s["desired_replicas"] for s in timeline[first_up:]) >= replicas["min"]
    planned = report["planned"]
    assert max(s["nodes"] for s in timeline) >= replicas["needed_at_peak"] * planned["nodes_per_replica"]
    # The floor's first replica took at least the plan's start-up as played (its node launches and
    # the pod's own start): Ready sooner, the twin skipped a stage.
    first_ready = next(s["t"] for s in timeline if s["ready_replicas"] >= 1)
    assert first_ready >= planned["start_up_s"] - 1.0
    if planned["nodes_per_replica"] > 1:
        # A group's second node launched only once its first had come up and taken the leader: the
        # real LWS controller makes the workers after that (one launch later, at the earliest).
        first = next(s["t"] for s in timeline if s["nodes"] >= 1)
        second = next(s["t"] for s in timeline if s["nodes"] >= 2)
        assert second - first >= planned["node_launch_s"] - 1.0, (first, second, planned)
    # The simulator ran on the same scenario and is reported beside, not judged: the rise in two
    # parts, the autoscaler asking for the peak's replicas, then those replicas Ready.
    phases = report["simulator"]["phases"]
    for side in ("twin", "simulator"):
        assert phases["asked_s"][side] is not None and phases["scale_up_s"][side] is not None
        assert phases["asked_s"][side] <= phases["scale_up_s"][side]


WAKE = (
    "routing.kind=llm-d",
    "autoscaling.signal=router-queue",
    "autoscaling.minReplicas=0",
)


@pytest.mark.timeout(900)
def test_a_service_at_zero_wakes_on_a_queued_request() -> None:
    """dev with llm-d's router (a stand-in serving its queue gauges) and router-queue at
    minReplicas 0: KEDA (real) holds zero, activates on one queued request, the replica turns
    Ready before the router's queue timeout, and the service returns to zero."""
    if os.environ.get("DEEPSEEK_EKS_LOOP_ALL") != "1":
        pytest.skip("run with DEEPSEEK_EKS_LOOP_ALL=1 (`make twin-loop`); CI runs dev's step")
    _require("keda")
    code, report, stderr = _loop("dev", ("--scenario", "wake", *WAKE), as_args=True)
    assert report, f"no JSON report (exit {code}):\n{stderr}"
    failed = [a for a in report["assertions"] if not a["ok"]]
    assert code == 0 and not failed, json.dumps(failed, indent=1) + "\n" + stderr
    assert {a["name"] for a in report["assertions"]} >= {
        "flows", "at-zero", "wakes-on-a-queued-request", "served-before-the-queue-timeout", "back-to-zero",
    }  # fmt: skip
    assert any("STAND-IN" in r for r in report["rewrites"])  # the router is labelled as a stand-in
    # The timeline itself: zero, then one Ready after the request, then zero again.
    timeline, asked = report["timeline"], report["timings_s"]["request_at"]
    before = [s for s in timeline if s["t"] <= asked]  # (both rounded to 0.1 s)
    after = [s for s in timeline if s["t"] > asked]
    assert before[-1]["desired_replicas"] == 0 and before[-1]["ready_replicas"] == 0
    assert max(s["ready_replicas"] for s in after) >= 1
    assert timeline[-1]["desired_replicas"] == 0
    assert report["flows"]
    # The simulator ran the same request behind its router model and is reported beside.
    assert report["simulator"]["phases"]["ready_s"]["simulator"] is not None
