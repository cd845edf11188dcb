"""The twin loop's flow matrix (``twin/flow_matrix.py``): every flow of the required-flows
table, judged on the PolicyEndpoints the real EKS network-policy controller writes for a render
folder, hosts included (their addresses from the render's networks).

About 12 s per twin run. Skips without the binaries; fails instead under DEEPSEEK_EKS_REQUIRE_SEAMS=1.
"""

from __future__ import annotations

import copy
import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.components.required_flows import required_flows
from deepseek_eks.twin.flow_matrix import (
    Candidates,
    ClusterNetworks,
    FlowVerdict,
    Placed,
    _judge_host,
    cluster_networks,
    failures,
    flow_matrix,
    host_candidates,
    load_render,
)
from tests.conftest import stack_config
from tests.twin.test_policy_endpoints import require_controller

DATA = Path(__file__).resolve().parent.parent / "data"
STACKS = ["prod", "dev"]
# Judged on every stack: the service's own flows, a host flow each way, the forbidden ones.
EVERYWHERE = {
    "prometheus-scrapes-vllm",
    "load-balancer-reaches-vllm",
    "internet-does-not-reach-vllm",
    "prometheus-watches-the-api",
    "api-server-calls-operator-webhook",
    "adapter-queries-prometheus",
    "adapter-watches-the-api",
    "api-server-calls-adapter",
    "loadtest-reaches-vllm",
    "loadtest-reaches-one-vllm-pod",
    "loadtest-downloads-the-tokenizer",
    "strangers-do-not-query-prometheus",
    "vllm-does-not-query-prometheus",
    "vllm-does-not-reach-dcgm",
}
KEDA = {"keda-queries-prometheus", "keda-metrics-server-calls-operator", "api-server-calls-keda-metrics"}


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("rendered")
    return {name: write(render(stack_config(name)), out) for name in STACKS}


_matrices: dict[str, list[FlowVerdict]] = {}


def matrix(renders: dict[str, Path], name: str) -> list[FlowVerdict]:
    require_controller()
    if name not in _matrices:
        _matrices[name] = flow_matrix(renders[name])
    return _matrices[name]


@pytest.mark.parametrize("name", STACKS)
def test_every_required_flow_is_admitted_and_every_forbidden_one_dropped(
    renders: dict[str, Path], name: str
) -> None:
    verdicts = matrix(renders, name)
    wrong = [f"{v.id}: {'dropped' if v.required else 'admitted'}; {v.detail}" for v in failures(verdicts)]
    assert not wrong, "\n".join(wrong)
    judged = {v.id for v in verdicts}
    assert judged >= EVERYWHERE, EVERYWHERE - judged
    # Both stacks scale with KEDA (the concurrency signal and the seasonal floor).
    assert judged >= KEDA, KEDA - judged
    assert all(v.admitted for v in verdicts if v.required)
    assert not any(v.admitted for v in verdicts if not v.required)
    assert {v.id for v in verdicts if not v.required} >= {
        f.id for f in required_flows() if not f.required and "keda" not in f.id and f.applies_to("none")
    }


def test_the_verdicts_serialise_as_the_loop_reports_them(renders: dict[str, Path]) -> None:
    (lb,) = [v for v in matrix(renders, "prod") if v.id == "load-balancer-reaches-vllm"]
    row = lb.as_json()
    assert set(row) == {"id", "from", "to", "port", "required", "admitted", "detail"}
    assert row["from"] == "host:load-balancer-subnets" and row["to"].endswith("/vllm") and row["port"] == 8000
    # judged over the load balancer's subnets as aws.json tags them for the internal scheme
    aws = yaml.safe_load((renders["prod"] / "aws.json").read_text())
    internal = [
        r["inputs"]["cidrBlock"]
        for r in aws
        if r["type"] == "aws:ec2/subnet:Subnet" and "kubernetes.io/role/internal-elb" in r["inputs"]["tags"]
    ]
    assert internal and all(cidr in row["detail"] for cidr in internal), row["detail"]


def test_the_keda_policy_rendered_before_the_fix_drops_keda_queries(renders: dict[str, Path]) -> None:
    """The blocker issue 33 names: KEDA's Prometheus peer asked for a pod-only label, so the
    controller left Prometheus' ClusterIP out of KEDA's egress and every query was dropped."""
    require_controller()
    (before,) = [
        d for d in yaml.safe_load_all((DATA / "keda-networkpolicy-before-fix.yaml").read_text()) if d
    ]
    verdicts = flow_matrix(renders["prod"], policy_overrides=[before])
    (keda,) = [v for v in verdicts if v.id == "keda-queries-prometheus"]
    assert keda.required and not keda.admitted, keda.detail
    assert "egress to ClusterIP" in keda.detail and "False" in keda.detail.split(",")[0], keda.detail
    assert [v.id for v in failures(verdicts)] == ["keda-queries-prometheus"]


def test_a_narrowed_ip_block_drops_the_host_flow_it_no_longer_covers(renders: dict[str, Path]) -> None:
    """Host flows are judged on the controller's CIDRs over every address the host may have: a
    vLLM policy admitting one load-balancer subnet of three drops the flow, naming what it left out."""
    require_controller()
    view = load_render(renders["prod"])
    networks = cluster_networks(view)
    (policy,) = [p for p in view.policies if p["metadata"]["name"] == "vllm"]
    narrowed = copy.deepcopy(policy)
    kept = networks.lb_subnets[0]
    hits = 0
    for rule in narrowed["spec"]["ingress"]:
        peers = rule.get("from") or []
        blocks = [p for p in peers if "ipBlock" in p and p["ipBlock"]["cidr"] in networks.lb_subnets]
        if blocks:
            rule["from"] = [p for p in peers if p not in blocks] + [{"ipBlock": {"cidr": kept}}]
            hits += 1
    assert hits, "the vLLM policy names no load-balancer subnet"
    verdicts = flow_matrix(renders["prod"], policy_overrides=[narrowed])
    (lb,) = [v for v in verdicts if v.id == "load-balancer-reaches-vllm"]
    assert not lb.admitted and "leaves out" in lb.detail, lb.detail
    assert networks.lb_subnets[1] in lb.detail
    assert [v.id for v in failures(verdicts)] == ["load-balancer-reaches-vllm"]


def _ingress_pe(pod_ip: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "spec": {
                "policyRef": {"namespace": "n", "name": "p"},
                "podIsolation": ["Ingress"],
                "podSelectorEndpoints": [{"podIP": pod_ip}],
                "ingress": rules,
            }
        }
    ]


def test_a_host_is_admitted_only_when_every_address_it_may_have_is() -> None:
    """Without the twin: the CIDR arithmetic of host verdicts (``except`` and ports honoured)."""
    (flow,) = [f for f in required_flows() if f.id == "load-balancer-reaches-vllm"]
    (forbidden,) = [f for f in required_flows() if f.id == "internet-does-not-reach-vllm"]
    subnets = Candidates(
        (ipaddress.ip_network("10.42.240.0/22"), ipaddress.ip_network("10.42.244.0/22")), "lb"
    )
    vpc = {"cidr": "10.42.0.0/16", "ports": [{"port": 8000, "protocol": "TCP"}]}
    assert _judge_host(_ingress_pe("10.42.0.5", [vpc]), "10.42.0.5", subnets, flow, "ingress")[0]
    holed = {**vpc, "except": ["10.42.246.0/24"]}
    admitted, why = _judge_host(_ingress_pe("10.42.0.5", [holed]), "10.42.0.5", subnets, flow, "ingress")
    assert not admitted and "10.42.246.0/24" in why
    other_port = {**vpc, "ports": [{"port": 9000, "protocol": "TCP"}]}
    assert not _judge_host(_ingress_pe("10.42.0.5", [other_port]), "10.42.0.5", subnets, flow, "ingress")[0]
    # forbidden: admitted as soon as one address may pass
    anywhere = {"cidr": "0.0.0.0/0"}
    public = Candidates((ipaddress.ip_network("8.0.0.0/8"),), "internet")
    assert _judge_host(_ingress_pe("10.42.0.5", [anywhere]), "10.42.0.5", public, forbidden, "ingress")[0]
    assert not _judge_host(_ingress_pe("10.42.0.5", [vpc]), "10.42.0.5", public, forbidden, "ingress")[0]


def test_a_host_the_render_cannot_place_is_judged_on_the_rendered_ip_blocks_and_says_so() -> None:
    """An existing cluster's render has no subnets: the control plane's addresses are then the
    rendered ipBlocks' (``known`` False), and the verdict's detail says the address is not known."""
    (flow,) = [f for f in required_flows() if f.id == "api-server-calls-adapter"]
    bare = ClusterNetworks((), (), (), (), ("10.100.0.0/16",), ())
    placed = Placed({}, {}, "10.96.0.1", "10.96.0.0/16")
    rendered = (ipaddress.ip_network("10.7.0.0/16"),)
    host = host_candidates("control-plane", bare, placed, rendered)
    assert not host.known and host.networks == rendered
    rule = {"cidr": "10.7.0.0/16", "ports": [{"port": 6443, "protocol": "TCP"}]}
    admitted, why = _judge_host(_ingress_pe("10.7.0.9", [rule]), "10.7.0.9", host, flow, "ingress")
    assert admitted and "not known from the render" in why
    api = host_candidates("kubernetes-api", bare, placed, rendered)
    assert ipaddress.ip_network("10.100.0.1/32") in api.networks and not api.known


def test_the_flows_command_reports_the_pre_fix_keda_policy_as_dropping_prometheus() -> None:
    """What a user runs: `twin flows --stack prod --policy <the keda policy before the fix>` exits 1
    and names KEDA -> Prometheus; the shipped render exits 0."""
    import subprocess
    import sys

    from deepseek_eks.automation.stackfile import PROJECT_ROOT

    require_controller()
    command = [sys.executable, "-m", "automation", "twin", "flows", "--stack", "prod"]
    fixture = str(Path(__file__).parents[1] / "data" / "keda-networkpolicy-before-fix.yaml")
    broken = subprocess.run([*command, "--policy", fixture], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert broken.returncode == 1, broken.stderr
    failed = [line for line in broken.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "keda-queries-prometheus" in failed[0] and "dropped" in failed[0]
    shipped = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
