"""One way to install a pinned chart, shared by every component."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .versions import ChartPin


def helm_release(
    resource_name: str,
    release: str,
    pin: ChartPin,
    namespace: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    create_namespace: bool = False,
) -> k8s.helm.v3.Release:
    """A Helm release at the pinned version; a failed install rolls back instead of leaving a
    half-installed release behind."""
    return k8s.helm.v3.Release(
        resource_name,
        name=release,
        chart=pin.chart,
        version=pin.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=pin.repository) if pin.repository else None,
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        opts=opts,
    )
