"""The EKS network-policy controller, run against the twin: NetworkPolicies in, PolicyEndpoints out.

On EKS, aws/amazon-network-policy-controller-k8s (run by EKS for the cluster) resolves each
NetworkPolicy's selectors into addresses and writes them as ``PolicyEndpoint`` objects; the node
agent enforces exactly those with eBPF, before kube-proxy's DNAT, so a flow to a Service is judged
on its ClusterIP. The controller decides which ClusterIPs a policy admits
(``pkg/resolvers/endpoints.go`` ``getMatchingServiceClusterIPs``: the peer's podSelector must match
the Service's own selector; headless Services never). Running the released controller here, built
by ``twin/build.sh network-policy-controller``, replaces a model of that rule with the rule.

The agent's side is small and stays here (``admits``): a pod no PolicyEndpoint selects for a
direction is not isolated in it; an isolated pod is admitted to (or from) an address when some
rule's CIDR holds it, outside its ``except``, on a listed port (no ports: every port). The
controller's CRDs and its PolicyEndpoint fields: ``reference/upstream/network-policy-controller-v1.1.10``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from .binaries import require_binaries
from .capacity import install_crd_files
from .programs import Program, kubeconfig
from .server import Api, TwinError, _stop, _tail, free_port

CONTROLLER = "network-policy-controller"
FACTS = PROJECT_ROOT / "reference" / "upstream" / "network-policy-controller-v1.1.10"
POLICY_ENDPOINTS = "/apis/networking.k8s.aws/v1alpha1/policyendpoints"
SETTLE_TIMEOUT_S = 90.0


def install_crds(api: Api) -> None:
    """The controller's CRDs (it watches all four kinds at start)."""
    install_crd_files(api, FACTS / "crds")


@contextlib.contextmanager
def controller(api: Api, folder: Path) -> Iterator[Program]:
    """The released controller against ``api``, as EKS runs it but for two flags: no leader election
    (one replica) and no check of the VPC CNI's ConfigMap (which only switches it on in a cluster)."""
    binary = require_binaries((CONTROLLER,))[CONTROLLER]
    config = kubeconfig(api, folder)
    command = [
        str(binary),
        f"--kubeconfig={config}",
        "--enable-leader-election=false",
        "--enable-configmap-check=false",
        f"--metrics-bind-addr=127.0.0.1:{free_port()}",
        f"--health-probe-bind-addr=127.0.0.1:{free_port()}",
        "--pod-update-batch-period-duration=100ms",
    ]
    log = folder / f"{CONTROLLER}.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield Program(process, log)
    finally:
        _stop(process)


def policy_endpoints(api: Api) -> list[dict[str, Any]] | None:
    """Every PolicyEndpoint; None while the server's storage for the new CRD is still starting."""
    reply = api.call("GET", POLICY_ENDPOINTS)
    if reply.status == 429:  # "storage is (re)initializing" just after the CRD is established
        return None
    if not reply.ok:
        raise TwinError(f"listing PolicyEndpoints failed ({reply.status}): {reply.message}")
    return list(reply.body.get("items", []))


def settle(api: Api, program: Program, policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The PolicyEndpoints once every policy has its own and none changed for two seconds."""
    wanted = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in policies}
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last: list[dict[str, Any]] = []
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        if program.process.poll() is not None:
            raise TwinError(f"the network-policy controller exited; its log:\n{_tail(program.log)}")
        found = policy_endpoints(api)
        if found is None:
            time.sleep(0.5)
            continue
        specs = sorted(str(pe["spec"]) for pe in found)
        if specs != sorted(str(pe["spec"]) for pe in last):
            last, stable_since = found, time.monotonic()
        refs = {(pe["spec"]["policyRef"]["namespace"], pe["spec"]["policyRef"]["name"]) for pe in last}
        if wanted <= refs and time.monotonic() - stable_since >= 2.0:
            return last
        time.sleep(0.5)
    raise TwinError(
        f"PolicyEndpoints did not settle within {SETTLE_TIMEOUT_S:.0f} s; "
        f"controller log:\n{_tail(program.log)}"
    )


def _port_matches(rule_ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not rule_ports:
        return True
    for p in rule_ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        if p["port"] <= port <= p.get("endPort", p["port"]):
            return True
    return False


def _address_in(rule: dict[str, Any], address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if "cidr" not in rule or ip not in ipaddress.ip_network(rule["cidr"], strict=False):
        return False
    return not any(ip in ipaddress.ip_network(e, strict=False) for e in rule.get("except") or [])


def _by_policy(endpoints: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """One policy's PolicyEndpoints (the controller splits a large one into chunks) as one."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for pe in endpoints:
        spec = pe["spec"]
        ref = (spec["policyRef"]["namespace"], spec["policyRef"]["name"])
        into = merged.setdefault(ref, {"isolation": set(), "pods": set(), "ingress": [], "egress": []})
        into["isolation"].update(spec.get("podIsolation") or [])
        into["pods"].update(e["podIP"] for e in spec.get("podSelectorEndpoints") or [])
        into["ingress"] += spec.get("ingress") or []
        into["egress"] += spec.get("egress") or []
    return merged


def admits(
    endpoints: list[dict[str, Any]], pod_ip: str, peer: str, port: int, protocol: str, direction: str
) -> bool:
    """Whether the agent lets ``pod_ip`` send to (``egress``) or receive from (``ingress``) ``peer``
    on ``port``: ``peer`` is the address on the wire at the pod's interface (a ClusterIP for egress
    to a Service, before DNAT)."""
    isolation = "Egress" if direction == "egress" else "Ingress"
    selecting = [
        policy
        for policy in _by_policy(endpoints).values()
        if isolation in policy["isolation"] and pod_ip in policy["pods"]
    ]
    if not selecting:
        return True
    return any(
        _address_in(rule, peer) and _port_matches(rule.get("ports"), port, protocol)
        for policy in selecting
        for rule in policy[direction]
    )
