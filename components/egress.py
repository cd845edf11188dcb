"""What a pod of the project may reach outside its own workload, as NetworkPolicy egress rules
(pure: no resources created): DNS, HTTPS for a pod that downloads, and the node's EKS Pod Identity
agent for a pod whose service account has an association. The serving pods, the stager and the
load-test Job take them, and the monitoring namespaces' policies (network_policies.py).
"""

from __future__ import annotations

from typing import Any

# EKS Pod Identity: the agent answers credential requests on the node at a link-local address
# per IP family, port 80 (aws/eks-pod-identity-agent configuration/config.go, cmd/server.go; EKS
# User Guide "Set up the Amazon EKS Pod Identity Agent"). The clusters this project builds are
# IPv4; an IPv6 cluster's pods would call fd00:ec2::23 instead.
POD_IDENTITY_AGENT_CIDRS = {"ipv4": "169.254.170.23/32", "ipv6": "fd00:ec2::23/128"}
POD_IDENTITY_AGENT_PORT = 80
DNS_PORT = 53
HTTPS_PORT = 443


def egress_rules(*, pod_identity: bool, https: bool = True, ip_family: str = "ipv4") -> list[dict[str, Any]]:
    """What a pod may reach outside its own workload.

    DNS goes to any address on port 53: the resolver in the pod's resolv.conf is a CoreDNS pod in
    Karpenter mode, but EKS Auto Mode answers it on the node and runs no CoreDNS pod
    (aws/containers-roadmap#2546, #2552), so a rule naming kube-system pods breaks resolution
    there. ``https``: 443 to any address, for a pod that downloads (Hugging Face, or S3 through
    the gateway endpoint, whose prefix list a NetworkPolicy cannot name); a vLLM server reading
    weights from a local volume gets none. A pod whose service account has a Pod Identity
    association also reaches the agent on the node (EKS User Guide, pod-id-agent-setup: the
    agent listens on 169.254.170.23:80 / [fd00:ec2::23]:80)."""
    rules: list[dict[str, Any]] = [
        {"ports": [{"port": DNS_PORT, "protocol": "UDP"}, {"port": DNS_PORT, "protocol": "TCP"}]},
    ]
    if https:
        rules.append({"ports": [{"port": HTTPS_PORT, "protocol": "TCP"}]})
    if pod_identity:
        rules.append(
            {
                "to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT_CIDRS[ip_family]}}],
                "ports": [{"port": POD_IDENTITY_AGENT_PORT, "protocol": "TCP"}],
            }
        )
    return rules
