"""The local twin of the cluster: the real etcd and kube-apiserver, built from
their released Go modules (twin/build.sh), judging a render by server-side dry-run.

What it proves: every rendered object is accepted by the Kubernetes API server of the pinned minor
with strict field validation, the CRD schemas' CEL rules and PodSecurity admission of the namespace
labels we set; against a previous render, that the update is accepted (no immutable field changed).
What it does not: AWS, EKS Auto Mode, the Helm charts' own objects (no chart repository offline) and
any controller's behaviour (no controllers run in the plain twin).

Capacity (``capacity.py``, ``twin capacity``) runs the real Karpenter (its kwok provider) with
kube-scheduler, kwok and the node lifecycle controller on a Karpenter-mode render's NodePools, with
instance types generated from the GPU catalog (``instance_types.py``); see docs/verification-twin.md.
"""

from typing import Any

from .binaries import BinariesMissing, binary_path, missing_binaries, pinned_version

# The checker needs the [twin] extra (the API-server client, certificates, CRD schemas): loaded on
# first use, so ``python -m automation --help`` and the commands that do not use it run without it.
_LAZY = {"CheckReport": ".check", "Finding": ".check", "check_render": ".check"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BinariesMissing",
    "CheckReport",
    "Finding",
    "binary_path",
    "check_render",
    "missing_binaries",
    "pinned_version",
]
