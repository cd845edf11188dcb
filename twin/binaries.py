"""Where the twin's programs are: built by ``twin/build.sh`` into a cache outside the work tree,
one folder per program and version, the versions read from the wrapper modules' go.mod files."""

from __future__ import annotations

import os
import re
from pathlib import Path

from deepseek_eks.automation.stackfile import PROJECT_ROOT

TWIN_DIR = PROJECT_ROOT / "twin"
CACHE_ENV = "DEEPSEEK_EKS_TWIN_CACHE"
BUILD_HINT = (
    "build them with `make twin` (or `twin/build.sh`): Go >= 1.26 and the Go module proxy, "
    "about 30-60 minutes of CPU once per machine; binaries are cached in "
    f"${CACHE_ENV} (default ~/.cache/deepseek-eks/twin)"
)

# program -> (wrapper module folder under twin/, the upstream module whose version it is)
PROGRAMS = {
    "etcd": ("go/etcd", "go.etcd.io/etcd/server/v3"),
    "kube-apiserver": ("go/kubernetes", "k8s.io/kubernetes"),
    "kube-controller-manager": ("go/kubernetes", "k8s.io/kubernetes"),
    "kube-scheduler": ("go/kubernetes", "k8s.io/kubernetes"),
    "kwok": ("go/kwok", "sigs.k8s.io/kwok"),
    "karpenter-kwok": ("go/karpenter", "sigs.k8s.io/karpenter"),
    "network-policy-controller": (
        "go/network-policy-controller",
        "github.com/aws/amazon-network-policy-controller-k8s",
    ),
    "prometheus-adapter": ("go/prometheus-adapter", "sigs.k8s.io/prometheus-adapter"),
    "keda-operator": ("go/keda", "github.com/kedacore/keda/v2"),
    "keda-metrics-apiserver": ("go/keda", "github.com/kedacore/keda/v2"),
    "lws": ("go/lws", "sigs.k8s.io/lws"),
    "coredns": ("go/coredns", "github.com/coredns/coredns"),
    "prometheus": ("go/prometheus", "github.com/prometheus/prometheus"),
    "promtool": ("go/prometheus", "github.com/prometheus/prometheus"),
}
TIER0 = ("etcd", "kube-apiserver")


class BinariesMissing(RuntimeError):
    """A twin program is not built on this machine (exit 3 of ``twin check``)."""


def cache_dir() -> Path:
    """The binary cache: ``$DEEPSEEK_EKS_TWIN_CACHE`` or ``~/.cache/deepseek-eks/twin``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "deepseek-eks" / "twin"


def pinned_version(program: str) -> str:
    """The upstream version the wrapper module of ``program`` requires (its go.mod)."""
    folder, module = PROGRAMS[program]
    text = (TWIN_DIR / folder / "go.mod").read_text()
    # A require line, single or inside a require block, maybe `// indirect` (a tool's module);
    # replace lines (`a => b v`) never match.
    pattern = rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)\s*(?://.*)?$"
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise ValueError(f"twin/{folder}/go.mod does not require {module}")
    return match[1]


def binary_path(program: str) -> Path:
    """``<cache>/<program>-<version>/<program>``, where twin/build.sh puts it."""
    return cache_dir() / f"{program}-{pinned_version(program)}" / program


def missing_binaries(programs: tuple[str, ...] = TIER0) -> list[Path]:
    """The expected paths of the programs not built yet."""
    return [p for p in map(binary_path, programs) if not os.access(p, os.X_OK)]


def require_binaries(programs: tuple[str, ...] = TIER0) -> dict[str, Path]:
    """Each program's binary; raises ``BinariesMissing`` naming every absent one and the fix."""
    absent = missing_binaries(programs)
    if absent:
        raise BinariesMissing(f"twin binaries missing: {', '.join(map(str, absent))}; {BUILD_HINT}")
    return {p: binary_path(p) for p in programs}
