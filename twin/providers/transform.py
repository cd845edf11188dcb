"""The twin's one change to a program's resources (the real engine), shared by the Python programs
(a stack transform) and the component provider (a transform on each DeepSeekService it constructs),
and only in ways the twin needs: a Helm release's chart becomes a local stub chart of the same name
and version (no chart repository is reachable; ``repositoryOpts`` dropped, not atomic), and every
Kubernetes object and release skips pulumi-kubernetes' readiness wait (there are no kubelets, so no
pod ever runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import yaml

SKIP_AWAIT = "pulumi.com/skipAwait"  # pulumi-kubernetes' per-object opt-out of its readiness wait
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def stub_chart(root: Path, name: str, version: str) -> Path:
    """A chart named and versioned like the pinned one, rendering one Deployment."""
    chart = root / f"{name}-{version}"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "{{ .Release.Name }}-stub", "namespace": "{{ .Release.Namespace }}"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "{{ .Release.Name }}-stub"}},
            "template": {
                "metadata": {"labels": {"app": "{{ .Release.Name }}-stub"}},
                "spec": {"containers": [{"name": "stub", "image": f"registry.invalid/{name}:{version}"}]},
            },
        },
    }
    (chart / "templates" / "deployment.yaml").write_text(yaml.safe_dump(deployment))
    return chart


def twin_transform(charts: Path) -> pulumi.ResourceTransform:
    """The transform: stub charts (built under ``charts``) for Helm releases, no readiness waits."""

    def annotate(metadata: Any) -> Any:
        if isinstance(metadata, dict):
            return {**metadata, "annotations": {**(metadata.get("annotations") or {}), SKIP_AWAIT: "true"}}
        return pulumi.Output.from_input(metadata).apply(annotate)

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if not args.type_.startswith("kubernetes:") or args.type_.startswith("pulumi:providers:"):
            return None
        props = dict(args.props)
        if args.type_ == HELM_RELEASE:
            # An OCI reference (oci://registry/path/name) names its chart by its last segment.
            name = str(props["chart"]).rsplit("/", 1)[-1]
            chart = stub_chart(charts, name, str(props["version"]))
            # `atomic` makes Helm wait for readiness whatever skipAwait says.
            props |= {"chart": str(chart), "skipAwait": True, "atomic": False}
            props.pop("repositoryOpts", None)
        elif "metadata" in props:
            props["metadata"] = annotate(props["metadata"] or {})
        return pulumi.ResourceTransformResult(props, args.opts)

    return transform


def register_twin_transform(charts: Path) -> None:
    """``twin_transform`` on every resource of the running program (a stack transform)."""
    pulumi.runtime.register_resource_transform(twin_transform(charts))
