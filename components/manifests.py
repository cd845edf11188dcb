"""Turn a manifest dict from the pure builders into a Pulumi custom resource."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def custom_resource(
    name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource (NodePool, ScaledObject, PodMonitor, ...) from ``manifest``.

    ``apiVersion`` and ``kind`` make the resource's type token, so they must be plain strings.
    """
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )


class TopLevelCustomResource(pulumi.CustomResource):
    """A custom resource whose fields sit beside ``metadata`` rather than under ``spec``
    (VolumeSnapshotClass: ``driver``, ``deletionPolicy``); the SDK's CustomResource only takes
    ``spec``. Same type token, ``kubernetes:<apiVersion>:<kind>``."""

    def __init__(self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions):
        super().__init__(
            f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, dict(manifest), opts
        )
