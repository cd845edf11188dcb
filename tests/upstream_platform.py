"""Loaders for the EKS, Karpenter and chart facts snapshotted in ``reference/upstream`` (see its
README): AL2023 images per release, Karpenter's VPC limits of the GPU instance types, the eks-charts
versions, the load balancer controller's IAM policy and the documented platform facts."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from tests.upstream import UPSTREAM


def _load(name: str) -> Any:
    return json.loads((UPSTREAM / name).read_text())


@cache
def al2023_images() -> dict[str, dict[str, list[str]]]:
    """``release -> {"<arch>-<variant>": [Kubernetes minors]}`` from amazon-eks-ami's release notes."""
    data: dict[str, dict[str, list[str]]] = _load("amazon-eks-ami-al2023-images.json")["releases"]
    return data


@cache
def platform_facts() -> dict[str, Any]:
    """Documented EKS and Karpenter behaviour, each fact with its source."""
    data: dict[str, Any] = _load("platform-facts.json")
    return data


@cache
def karpenter_vpc_limits() -> dict[str, dict[str, Any]]:
    """Karpenter v1.14.1's VPCLimits of the GPU instance types."""
    data: dict[str, dict[str, Any]] = _load("karpenter-1.14.1-vpclimits-gpu.json")["limits"]
    return data


def eni_limited_pods(instance_type: str) -> int:
    """Karpenter's ENILimitedPods (reservedENIs 0) computed from the snapshot."""
    limits = karpenter_vpc_limits()[instance_type]
    card = next(
        c for c in limits["NetworkCards"] if c["NetworkCardIndex"] == limits["DefaultNetworkCardIndex"]
    )
    return int(card["MaximumNetworkInterfaces"]) * (int(limits["IPv4PerInterface"]) - 1) + 2


@cache
def eks_chart_versions() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = _load("eks-charts-versions.json")["charts"]
    return data


@cache
def load_balancer_controller_iam_policy(version: str = "v3.5.0") -> dict[str, Any]:
    data: dict[str, Any] = _load(f"aws-load-balancer-controller-{version}/iam_policy.json")
    return data
