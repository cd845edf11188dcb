"""The namespaces the project installs into, with Pod Security admission labels."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class NamespaceSpec:
    name: str
    """Kubernetes name of the namespace."""
    pod_security: str
    """Pod Security Standard enforced by admission: restricted, baseline or privileged."""
    reason: str = ""
    """Why a level below restricted is needed (empty for restricted)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels of this namespace alone (e.g. the load balancer's readiness-gate opt-in)."""


@dataclass
class NamespacesArgs:
    """Inputs of ``Namespaces``."""

    namespaces: list[NamespaceSpec]
    """The namespaces to create."""
    labels: dict[str, str]
    """Labels every namespace carries."""


class Namespaces(pulumi.ComponentResource):
    """One Namespace per spec; ``names`` maps spec name to the created namespace's name."""

    names: dict[str, pulumi.Output[str]]
    """Namespace names, resolved once the namespaces exist (use these to order dependents)."""

    def __init__(self, name: str, args: NamespacesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Namespaces", name, None, opts)
        self.names = {}
        for spec in args.namespaces:
            labels = {
                **args.labels,
                **spec.labels,
                "pod-security.kubernetes.io/enforce": spec.pod_security,
                # Warn and audit at restricted everywhere so drift from the best level is visible.
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted",
            }
            annotations = {"deepseek-eks/pod-security-reason": spec.reason} if spec.reason else None
            ns = k8s.core.v1.Namespace(
                f"{name}-{spec.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, labels=labels, annotations=annotations),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.names[spec.name] = ns.metadata.apply(lambda m: str(m.name))
        self.register_outputs({"names": self.names})
