"""The seams, judged by the real EKS network-policy controller instead of a model of it.

Each stack's render is written to a folder and handed to the flow matrix
(``twin/flow_matrix.py``): its namespaces, the charts' pods and Services (from their
sources, ``reference/upstream/chart-workloads.json``) and the program's own pods go to the twin's
real kube-apiserver, which assigns the ClusterIPs; the pods get addresses through their status, as
a kubelet would report them. The released controller
(aws/amazon-network-policy-controller-k8s v1.1.10, ``twin/build.sh network-policy-controller``)
then writes the PolicyEndpoints the EKS agent enforces, and every flow of the one required-flows
table is judged on them as the agent judges it: at the client's interface, before DNAT, on the
ClusterIP (``twin/policy_endpoints.py``). Host flows (the control plane's interfaces,
the load-balancer subnets, the ``kubernetes`` Service, the Internet) are judged on the CIDRs the
controller copies from ipBlocks, over the addresses the render's networks give those hosts. The
load-test Job's flows are judged with the policies `loadtest --as-job` prints beside it, which
exist only while a load test runs.

About 12 s per stack. Skips without the binaries; fails instead under DEEPSEEK_EKS_REQUIRE_SEAMS=1.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation.render import write
from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import TIER0
from deepseek_eks.twin.flow_matrix import FlowVerdict, failures, flow_matrix
from deepseek_eks.twin.policy_endpoints import CONTROLLER, admits
from tests.rendered.test_network_policies import stack
from tests.twin.conftest import require_binaries

CASES = ["prod", "r1", "dev-queue-depth", "dev"]


def require_controller() -> None:
    absent = missing_binaries((*TIER0, CONTROLLER))
    build = "run `twin/build.sh etcd kube-apiserver network-policy-controller`"
    require_binaries(
        absent, "the twin and the EKS network-policy controller", build, "DEEPSEEK_EKS_REQUIRE_SEAMS"
    )


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each case's render folder (written on first use)."""
    root = tmp_path_factory.mktemp("seams")

    class Folders(dict[str, Path]):
        def __missing__(self, case: str) -> Path:
            self[case] = write(stack(case).rendered, root / case)
            return self[case]

    return Folders()


_judged: dict[str, list[FlowVerdict]] = {}


def judged(folders: dict[str, Path], case: str) -> list[FlowVerdict]:
    """The flow matrix of ``case``: each flow this stack runs both ends of."""
    require_controller()
    if case not in _judged:
        _judged[case] = flow_matrix(folders[case])
    return _judged[case]


@pytest.mark.parametrize("case", CASES)
def test_the_real_controller_admits_every_required_flow_and_no_forbidden_one(
    folders: dict[str, Path], case: str
) -> None:
    wrong = [
        f"{v.id}: {'dropped' if v.required else 'admitted'}; {v.detail}"
        for v in failures(judged(folders, case))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_signals_flows_are_among_those_judged(folders: dict[str, Path]) -> None:
    """Not vacuous: KEDA's and the adapter's queries to Prometheus' Service are judged, and the
    API server's calls to their metrics APIs."""
    ids = {case: {v.id for v in judged(folders, case)} for case in CASES}
    for case in ("prod", "r1", "dev-queue-depth"):
        assert {
            "keda-queries-prometheus",
            "keda-metrics-server-calls-operator",
            "api-server-calls-keda-metrics",
        } <= ids[case], case
    for case in ("dev", "prod"):
        assert {"adapter-queries-prometheus", "api-server-calls-adapter"} <= ids[case], case
    for case in CASES:  # the in-cluster load test reaches the service (issue 32 §2)
        assert {"loadtest-reaches-vllm", "load-balancer-reaches-vllm"} <= ids[case], case


def test_the_controller_drops_a_service_whose_selector_the_peer_does_not_match(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    """The blocker of a real EKS cluster: a KEDA egress peer that also asks for a label the
    Prometheus Service's own selector lacks (managed-by, on the pods only) still admits the pods'
    addresses, but the controller leaves the ClusterIP out, and KEDA's queries, which go to the
    ClusterIP, are dropped. This is what the rendered policy must not do."""
    require_controller()
    s = stack("prod")
    narrowed: list[dict[str, Any]] = []
    for policy in copy.deepcopy(list(s.cluster.policies)):
        hits = 0
        for rule in policy["spec"].get("egress") or []:
            for peer in rule.get("to") or []:
                labels = (peer.get("podSelector") or {}).get("matchLabels") or {}
                if labels.get("app.kubernetes.io/name") == "prometheus":
                    labels["app.kubernetes.io/managed-by"] = "prometheus-operator"
                    hits += 1
        if hits:
            narrowed.append(dict(policy))
    assert narrowed, "no egress peer selects Prometheus' pods"
    verdicts = flow_matrix(folders["prod"], policy_overrides=narrowed, keep=tmp_path)
    (keda,) = [v for v in verdicts if v.id == "keda-queries-prometheus"]
    assert not keda.admitted, keda.detail
    assert "egress to ClusterIP" in keda.detail and "False" in keda.detail.split(",")[0]
    placed = json.loads((tmp_path / "placed.json").read_text())
    endpoints = json.loads((tmp_path / "policyendpoints.json").read_text())["without-loadtest"]
    prometheus_ip, keda_ip = placed["pods"]["prometheus"], placed["pods"]["keda-operator"]
    assert admits(endpoints, keda_ip, prometheus_ip, 9090, "TCP", "egress")  # the pod address stays
