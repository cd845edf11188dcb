"""Pin hygiene: every pinned version (charts, images, AMI, CRD schemas, vLLM flags snapshot,
provider SDKs) with its upstream source and the reference data that must move with it.

``python -m automation pins`` prints the table and fails (exit 1) when a pin moved without its
reference data: a vLLM image without ``reference/upstream/vllm-<version>/``, a Karpenter, KEDA or
LeaderWorkerSet chart whose CRD schemas (``schemas/index.json``) are of another release, an AMI
alias that is not an amazon-eks-ami release, a load balancer controller chart without its IAM
policy snapshot, any chart without its default values snapshot (``helm-charts/<chart>-<version>/``,
which tests/rendered/test_helm_values.py checks every value the program sets against) or without
the upstream release row (repository, tag, commit) it was read from in ``helm-charts/index.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from deepseek_eks.components import versions
from deepseek_eks.components.versions import ChartPin

from .manifest_gate import schema_dir

UPSTREAM = PROJECT_ROOT / "reference" / "upstream"
HELM_CHARTS = UPSTREAM / "helm-charts"

# The charts that install CRDs the manifest gate validates, by the upstream repository whose CRD
# files the schema index names; each of these charts is released at its app's version.
CHART_CRD_REPOS = {
    "KARPENTER": "aws/karpenter-provider-aws",
    "KEDA": "kedacore/keda",
    "LEADER_WORKER_SET": "kubernetes-sigs/lws",
}


@dataclass(frozen=True)
class Pin:
    """One pinned version: what it is, where it comes from, and the reference data tied to it."""

    kind: str
    name: str
    version: str
    source: str
    reference: str
    problem: str | None = None
    unchecked: str | None = None  # why the reference data could not be compared here


def _release(version: str) -> str:
    return version if version.startswith("v") else f"v{version}"


def _schema_index(directory: Path | None = None) -> list[dict]:
    root = directory or schema_dir()
    return list(json.loads((root / "index.json").read_text())["schemas"])


def _exists(path: Path, what: str) -> str | None:
    return (
        None
        if path.exists()
        else f"{what}: {path.relative_to(PROJECT_ROOT)} is missing; snapshot it from upstream"
    )


def _crd_link(pin: ChartPin, repo: str, schemas: list[dict]) -> tuple[str, str | None]:
    """(reference, problem) of a chart whose CRDs the schema index holds."""
    reference = f"schemas/index.json entries of {repo}"
    tags = sorted({s["upstream"]["tag"] for s in schemas if s.get("upstream", {}).get("repo") == repo})
    if tags == [_release(pin.version)]:
        return reference, None
    found = ", ".join(tags) or "absent"
    return (
        reference,
        f"chart {pin.version} but the CRD schemas of {repo} are {found}: refresh them together",
    )


def _karpenter_files(pin: ChartPin) -> tuple[str, str | None]:
    """The IAM CloudFormation (per minor) and VPC limits (per release) snapshots of Karpenter."""
    minor = ".".join(pin.version.split(".")[:2])
    files = [
        UPSTREAM / f"karpenter-{minor}-cloudformation.yaml",
        UPSTREAM / f"karpenter-{pin.version}-vpclimits-gpu.json",
    ]
    missing = [problem for f in files if (problem := _exists(f, "Karpenter reference"))]
    return ", ".join(f.name for f in files), (missing[0] if missing else None)


def _load_balancer_controller_link(pin: ChartPin, name: str) -> tuple[str, str | None]:
    released = json.loads((UPSTREAM / "eks-charts-versions.json").read_text())["charts"].get(name, {})
    reference = f"eks-charts-versions.json, aws-load-balancer-controller-{released.get('appVersion')}/"
    if released.get("version") != pin.version:
        return reference, f"chart {pin.version} but eks-charts-versions.json has {released.get('version')}"
    policy = UPSTREAM / f"aws-load-balancer-controller-{released['appVersion']}" / "iam_policy.json"
    return reference, _exists(policy, "controller IAM policy")


def helm_chart_snapshot(chart: str, version: str) -> Path:
    """The folder of a chart's default values snapshot at ``version`` (it may be missing: the
    caller reports it)."""
    return HELM_CHARTS / f"{chart}-{version}"


def helm_chart_source(chart: str, version: str) -> dict[str, str] | None:
    """The upstream release row of a chart snapshot (``snapshots`` of ``helm-charts/index.json``:
    repository, tag or release ref, commit, path), or None when there is none."""
    row: dict[str, str] | None = json.loads((HELM_CHARTS / "index.json").read_text())["snapshots"].get(
        f"{chart}-{version}"
    )
    return row


def _values_link(pin: ChartPin, name: str) -> tuple[str, str | None]:
    """(reference, problem) of the chart's default values snapshot and its upstream release row: a
    pin with no row is a version nobody has shown to exist upstream."""
    folder = helm_chart_snapshot(name, pin.version)
    reference = f"{folder.relative_to(UPSTREAM)}/"
    source = helm_chart_source(name, pin.version)
    problem = _exists(folder / "values.yaml", "chart default values")
    if source is None:
        return reference, problem or (
            f"no upstream release row for {folder.name} in helm-charts/index.json: pin a version whose "
            "tag or release can be read upstream and record where its snapshot came from"
        )
    return f"{reference} ({source['repo']} {source['ref']})", problem


def _chart_pins(schemas: list[dict]) -> list[Pin]:
    pins = []
    for attr, pin in sorted(vars(versions).items()):
        if not isinstance(pin, ChartPin):
            continue
        name = pin.chart.rsplit("/", 1)[-1]
        reference, problem = "-", None
        if attr in CHART_CRD_REPOS:
            reference, problem = _crd_link(pin, CHART_CRD_REPOS[attr], schemas)
        if attr == "KARPENTER":
            files, missing = _karpenter_files(pin)
            reference, problem = f"{reference}, {files}", problem or missing
        if attr == "AWS_LOAD_BALANCER_CONTROLLER":
            reference, problem = _load_balancer_controller_link(pin, name)
        values, missing_values = _values_link(pin, name)
        reference = values if reference == "-" else f"{reference}, {values}"
        pins.append(
            Pin(
                "chart",
                name,
                pin.version,
                pin.repository or pin.chart,
                reference,
                problem or missing_values,
            )
        )
    return pins


def _vllm_pin() -> Pin:
    image = versions.VLLM_IMAGE
    repository, tag = image.rsplit(":", 1)
    folder = UPSTREAM / f"vllm-{tag.removeprefix('v')}"
    problem = _exists(folder / "serve-flags.json", "vLLM serve flags")
    source = f"https://hub.docker.com/r/{repository} (PyPI vllm=={tag.removeprefix('v')})"
    reference = f"{folder.name}/ (serve-flags.json, metric-names.txt, FACTS.md)"
    return Pin("image", repository, tag, source, reference, problem)


def _router_pins() -> list[Pin]:
    """llm-d's router images (routing.kind llm-d): the standalone chart's values at the release."""
    facts = UPSTREAM / "llm-d" / "router-facts.json"
    problem = _exists(facts, "llm-d router facts")
    source = (
        f"kubernetes-sigs/gateway-api-inference-extension {versions.LLM_D_ROUTER_RELEASE} "
        "config/charts/standalone/values.yaml"
    )
    pins = []
    for image in (versions.EPP_IMAGE, versions.ROUTER_PROXY_IMAGE):
        repository, tag = image.rsplit(":", 1)
        pins.append(Pin("image", repository, tag, source, "llm-d/router-facts.json", problem))
    return pins


def _ami_pin() -> Pin:
    release = versions.AL2023_AMI_RELEASE
    tags = set((UPSTREAM / "amazon-eks-ami-release-tags.txt").read_text().split())
    images = json.loads((UPSTREAM / "amazon-eks-ami-al2023-images.json").read_text())["releases"]
    problem = None
    if release not in tags:
        problem = f"{release} is not an awslabs/amazon-eks-ami release tag in amazon-eks-ami-release-tags.txt"
    elif release not in images:
        problem = f"amazon-eks-ami-al2023-images.json has no images for {release}"
    reference = "amazon-eks-ami-release-tags.txt, amazon-eks-ami-al2023-images.json"
    return Pin("ami", "al2023", release, "awslabs/amazon-eks-ami releases", reference, problem)


def _schema_pins(schemas: list[dict]) -> list[Pin]:
    return [
        Pin(
            "crd-schema",
            f"{s['group']}/{s['version']} {s['kind']}",
            str(s.get("upstream", {}).get("tag") or "-"),
            f"{s.get('upstream', {}).get('repo')} {s.get('upstream', {}).get('path', '')}".strip(),
            f"schemas/{s['file']}",
        )
        for s in schemas
    ]


def _requirement_pins() -> list[Pin]:
    pins = []
    for line in (PROJECT_ROOT / "requirements-pins.txt").read_text().splitlines():
        if match := re.match(r"^(pulumi[a-z-]*)==(\S+)", line.strip()):
            package, version = match.groups()
            reference = "replace-on-change.json" if package in ("pulumi-aws", "pulumi-eks") else "-"
            pins.append(Pin("sdk", package, version, f"https://pypi.org/project/{package}/", reference))
    return pins


def collect_pins(schemas_dir: Path | None = None) -> list[Pin]:
    """Every pin, each with its problem (None when its reference data matches)."""
    schemas = _schema_index(schemas_dir)
    return [
        *_chart_pins(schemas),
        _vllm_pin(),
        *_router_pins(),
        _ami_pin(),
        *_schema_pins(schemas),
        *_requirement_pins(),
    ]


def check_pins(pins: list[Pin]) -> list[str]:
    return [f"{p.kind} {p.name} {p.version}: {p.problem}" for p in pins if p.problem]


def pin_table(pins: list[Pin], width: Callable[[str], int] = len) -> str:
    """A plain-text table: kind, name, version, upstream source, reference data."""
    rows = [("KIND", "NAME", "VERSION", "SOURCE", "REFERENCE")]
    rows += [(p.kind, p.name, p.version, p.source, p.reference) for p in pins]
    widths = [max(width(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join([*(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)), r[4]]) for r in rows
    )


# ---- drift: `python -m automation pins --check` ---------------------------------------------------
#
# Each pin against the newest release a reachable registry serves: PyPI's JSON API for Python
# packages (vLLM, the Pulumi SDKs) and the Go module proxy protocol (GOPROXY) for whatever a Go
# module releases (KEDA, LeaderWorkerSet, Karpenter, the NVIDIA device plugin, the twin's builds).
# Charts, images and releases no registry here serves (Helm repositories, Docker Hub, GitHub
# releases, EKS add-ons) are listed as manual steps, with where to look; nothing is left out.

PYPI_ENV = "DEEPSEEK_EKS_PYPI_URL"
DEFAULT_PYPI = "https://pypi.org/pypi"
DEFAULT_GOPROXY = "https://proxy.golang.org,direct"  # Go's own default
TWIN_GO = PROJECT_ROOT / "twin" / "go"
HTTP_TIMEOUT_S = 10.0
# A proxy's @v/list names the versions it knows, which may be fewer than it serves (one lists
# github.com/NVIDIA/k8s-device-plugin v0.17.4 alone and answers v0.19.3's .info): from the newest
# version known, the next patch, minor and (from v0) major are asked for by name, at most this often.
MAX_PROBES = 16
# At most this many newer releases' go.mod files are read to find one the local Go can build.
MAX_GO_LINE_READS = 6
STATUSES = ("current", "behind", "held", "manual", "not-served", "unreachable", "unknown")


@dataclass(frozen=True)
class Upstream:
    """Where a pin's releases can be asked for: a PyPI project or a Go module."""

    registry: str  # "pypi" or "go"
    package: str  # PyPI project name or Go module path
    build: str | None = None
    """Go module the twin builds from this release (the module itself, or one its go.mod requires):
    a release whose build module needs a newer Go than the local toolchain cannot be taken."""
    hold_minor: str | None = None
    """Why only releases of the pinned major.minor are due (newer minors are reported as held)."""
    same_major: str | None = None
    """Why releases of another major are not this project's (left out altogether, not held)."""
    note: str | None = None


@dataclass(frozen=True)
class DriftTarget:
    """One pinned version and where its newer releases are found (or, when no registry serves it,
    where to look by hand)."""

    kind: str
    name: str
    version: str
    upstream: Upstream | None
    manual: str | None = None


@dataclass(frozen=True)
class Drift:
    target: DriftTarget
    status: str
    newest: str | None
    detail: str


# Charts by name: the Go module whose tags release the chart's app at the chart's version, or where
# to look by hand when no registry here serves its releases.
CHART_UPSTREAMS: dict[str, Upstream | str] = {
    "karpenter": Upstream(
        "go",
        "github.com/aws/karpenter-provider-aws",
        build="sigs.k8s.io/karpenter",
        note="the chart is released from aws/karpenter-provider-aws at its version; twin/go/karpenter "
        "builds the sigs.k8s.io/karpenter core that release requires",
    ),
    "keda": Upstream(
        "go", "github.com/kedacore/keda/v2", note="kedacore/charts releases the chart at the app's version"
    ),
    "lws": Upstream(
        "go", "sigs.k8s.io/lws", note="the chart is released with the app (registry.k8s.io/lws/charts)"
    ),
    "nvidia-device-plugin": Upstream(
        "go", "github.com/NVIDIA/k8s-device-plugin", note="the chart is released with the plugin's tag"
    ),
    "aws-load-balancer-controller": "aws/eks-charts stable/aws-load-balancer-controller/Chart.yaml "
    "(https://aws.github.io/eks-charts/index.yaml); refresh reference/upstream/eks-charts-versions.json",
    "dcgm-exporter": "NVIDIA/dcgm-exporter tags <dcgm>-<exporter> (GitHub releases, "
    "https://nvidia.github.io/dcgm-exporter/helm-charts/index.yaml, NGC nvcr.io/nvidia/k8s/dcgm-exporter); "
    "its tags are not Go module versions",
    "kube-prometheus-stack": "prometheus-community/helm-charts tags kube-prometheus-stack-<version> "
    "(https://prometheus-community.github.io/helm-charts/index.yaml)",
    "prometheus-adapter": "prometheus-community/helm-charts tags prometheus-adapter-<version> "
    "(https://prometheus-community.github.io/helm-charts/index.yaml)",
}

# CRD schema sources by upstream repository: the Go module released with the same tags.
SCHEMA_UPSTREAMS: dict[str, Upstream] = {
    "aws/karpenter-provider-aws": Upstream(
        "go",
        "github.com/aws/karpenter-provider-aws",
        build="sigs.k8s.io/karpenter",
        note="moves with the karpenter chart",
    ),
    "kedacore/keda": Upstream("go", "github.com/kedacore/keda/v2", note="moves with the keda chart"),
    "kubernetes-sigs/lws": Upstream("go", "sigs.k8s.io/lws", note="moves with the lws chart"),
    "kubernetes-sigs/gateway-api-inference-extension": Upstream(
        "go",
        "sigs.k8s.io/gateway-api-inference-extension",
        hold_minor="v1.6.0 and later carry only the InferencePool API: the router moved to "
        "llm-d/llm-d-router (reference/upstream/llm-d/README.md), so a newer minor is a new router pin",
        note="moves with the router pin (components/serving/router.py)",
    ),
    "prometheus-operator/prometheus-operator": Upstream(
        "go",
        "github.com/prometheus-operator/prometheus-operator",
        note="moves with kube-prometheus-stack (the operator its appVersion names)",
    ),
    "kubernetes-csi/external-snapshotter": Upstream(
        "go",
        "github.com/kubernetes-csi/external-snapshotter/v8",
        note="moves with SNAPSHOT_CONTROLLER_ADDON_VERSION (an EKS add-on build of the same release)",
    ),
}

# The module each twin wrapper (twin/go/<dir>/go.mod) pins and builds.
KUBERNETES_MINOR_HOLD = (
    "the twin runs the clusters' Kubernetes minor (settings DEFAULT_KUBERNETES_VERSION and "
    "SUPPORTED_KUBERNETES_VERSIONS); a newer minor comes with a new supported version"
)
TWIN_UPSTREAMS: dict[str, Upstream] = {
    "etcd": Upstream(
        "go",
        "go.etcd.io/etcd/server/v3",
        build="go.etcd.io/etcd/server/v3",
        hold_minor="kube-apiserver v1.34 is built against etcd 3.6 (k8s.io/kubernetes v1.34 go.mod: "
        "go.etcd.io/etcd/client/v3 v3.6.x)",
    ),
    "karpenter": Upstream(
        "go", "sigs.k8s.io/karpenter", build="sigs.k8s.io/karpenter", note="moves with the karpenter chart"
    ),
    "kubernetes": Upstream(
        "go", "k8s.io/kubernetes", build="k8s.io/kubernetes", hold_minor=KUBERNETES_MINOR_HOLD
    ),
    "keda": Upstream(
        "go",
        "github.com/kedacore/keda/v2",
        build="github.com/kedacore/keda/v2",
        note="moves with the keda chart",
    ),
    "coredns": Upstream(
        "go",
        "github.com/coredns/coredns",
        build="github.com/coredns/coredns",
        hold_minor="the twin runs the CoreDNS release EKS's coredns add-on ships for the clusters' "
        "Kubernetes minor (reference/upstream/eks-addon-versions.json)",
    ),
    "kwok": Upstream("go", "sigs.k8s.io/kwok", build="sigs.k8s.io/kwok"),
    "lws": Upstream(
        "go",
        "sigs.k8s.io/lws",
        build="sigs.k8s.io/lws",
        note="moves with the lws chart (0.10.0), whose module the proxy does not serve: the twin runs the "
        "newest release it does (reference/upstream/lws-twin.json)",
    ),
    "network-policy-controller": Upstream(
        "go",
        "github.com/aws/amazon-network-policy-controller-k8s",
        build="github.com/aws/amazon-network-policy-controller-k8s",
        note="the controller EKS runs for its network-policy agent (the twin runs this release)",
    ),
    "prometheus-adapter": Upstream(
        "go",
        "sigs.k8s.io/prometheus-adapter",
        build="sigs.k8s.io/prometheus-adapter",
        note="the version the pinned prometheus-adapter chart runs",
    ),
    "prometheus": Upstream(
        "go",
        "github.com/prometheus/prometheus",
        build="github.com/prometheus/prometheus",
        same_major="Prometheus 3 is released as module v0.<major><minor>.<patch>; the module's v1 and "
        "v2+incompatible tags are Prometheus 1 and 2",
        note="moves with kube-prometheus-stack (the Prometheus image its values pin)",
    ),
    "pulumi": Upstream("go", "github.com/pulumi/pulumi/pkg/v3", build="github.com/pulumi/pulumi/pkg/v3"),
    "pulumi-resource-kubernetes": Upstream(
        "go",
        "github.com/pulumi/pulumi-kubernetes/provider/v4",
        build="github.com/pulumi/pulumi-kubernetes/provider/v4",
        note="the proxy serves provider/v4 only at pseudo-versions (commits), not at the SDK's tags",
    ),
    "pulumi-sdkgen": Upstream(
        "go",
        "github.com/pulumi/pulumi/pkg/v3",
        build="github.com/pulumi/pulumi/pkg/v3",
        note="moves with twin/go/pulumi",
    ),
    "pulumi-yaml": Upstream("go", "github.com/pulumi/pulumi-yaml", build="github.com/pulumi/pulumi-yaml"),
}


# -- versions ------------------------------------------------------------------------------------

_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_PEP440 = re.compile(r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?$")
_GO_VERSION = re.compile(r"^(?:go)?(\d+)\.(\d+)(?:\.(\d+))?(?:(rc|beta)(\d+))?$")
_PSEUDO = re.compile(r"(?:^|[.-])\d{14}-[0-9a-f]{12}$")


def semver_key(version: str) -> tuple | None:
    """Sort key of a Go module version (semver with a v), None when it is not one."""
    m = _SEMVER.match(version)
    if not m:
        return None
    major, minor, patch, pre = m.groups()
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return (int(major), int(minor), int(patch), 0 if pre else 1, ids)


def is_prerelease(version: str) -> bool:
    m = _SEMVER.match(version)
    return bool(m and m.group(4))


def is_pseudo(version: str) -> bool:
    return bool(_PSEUDO.search(version.split("+", 1)[0]))


def pep440_key(version: str) -> tuple | None:
    """Sort key of a PyPI release, None when it is not a plain PEP 440 version."""
    m = _PEP440.match(version)
    if not m:
        return None
    release, pre_kind, pre_n, post, dev = m.groups()
    parts = tuple(int(p) for p in release.split("."))
    parts += (0,) * (6 - len(parts))
    pre = ({"a": 0, "b": 1, "rc": 2}[pre_kind], int(pre_n)) if pre_kind else (3, 0)
    return (parts, pre, int(post) if post else -1, int(dev) if dev else 1 << 30)


def _order(key: Callable[[str], tuple | None]) -> Callable[[str], tuple]:
    """A sort key for versions already known to parse."""

    def ordered(version: str) -> tuple:
        parsed = key(version)
        if parsed is None:
            raise ValueError(f"not a version: {version}")
        return parsed

    return ordered


def pep440_prerelease(version: str) -> bool:
    m = _PEP440.match(version)
    return bool(m and (m.group(2) or m.group(5)))


def go_version_key(version: str) -> tuple[int, int, int, int, int] | None:
    """Key of a Go toolchain or go.mod ``go`` line: 1.26 < 1.26rc1 < 1.26.0 < 1.26.8."""
    m = _GO_VERSION.match(version.strip())
    if not m:
        return None
    major, minor, patch, pre, pre_n = m.groups()
    if patch is not None:
        return (int(major), int(minor), 1, int(patch), 0)
    if pre:
        return (int(major), int(minor), 0, 1 if pre == "rc" else 0, int(pre_n))
    return (int(major), int(minor), -1, 0, 0)


def escape_module_path(path: str) -> str:
    """Module path (or version) as the GOPROXY protocol spells it: each capital as ``!`` and its
    lower case (github.com/NVIDIA/x -> github.com/!n!v!i!d!i!a/x)."""
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in path)


def parse_go_mod(text: str) -> tuple[str | None, dict[str, str], list[str]]:
    """A go.mod's ``go`` line, its requirements {path: version} and its ``tool`` paths."""
    go_line, requires, tools = None, {}, []
    block = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block:
            if line == ")":
                block = None
            elif block == "require" and len(line.split()) >= 2:
                path, version = line.split()[:2]
                requires[path] = version
            elif block == "tool":
                tools.append(line.split()[0])
            continue
        words = line.split()
        if words[0] in ("require", "tool") and words[-1] == "(":
            block = words[0]
        elif words[0] == "go" and len(words) == 2:
            go_line = words[1]
        elif words[0] == "require" and len(words) >= 3:
            requires[words[1]] = words[2]
        elif words[0] == "tool" and len(words) == 2:
            tools.append(words[1])
    return go_line, requires, tools


# -- registries ----------------------------------------------------------------------------------


class Unreachable(Exception):
    """The registry could not be reached (no answer, DNS, TLS, timeout)."""


class NotServed(Exception):
    """The registry answered that it does not serve this (HTTP 403, 404 or 410)."""


class Registries:
    """HTTP reads of PyPI and the Go module proxy, each URL once; after a registry fails to answer,
    every later read of it fails the same way at once (no second timeout)."""

    def __init__(self, pypi: str, goproxy: str, timeout: float = HTTP_TIMEOUT_S) -> None:
        self.pypi = pypi.rstrip("/")
        self.goproxy = goproxy
        self.timeout = timeout
        self._cache: dict[str, bytes | Exception] = {}
        self._down: dict[str, Unreachable] = {}

    def get(self, base: str, path: str) -> bytes:
        import urllib.error
        import urllib.request

        if base in self._down:
            raise self._down[base]
        url = f"{base.rstrip('/')}/{path}"
        if url not in self._cache:
            request = urllib.request.Request(url, headers={"User-Agent": "deepseek-eks-pins-check"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    self._cache[url] = response.read()
            except urllib.error.HTTPError as error:
                if error.code in (403, 404, 410):
                    self._cache[url] = NotServed(f"HTTP {error.code} for {url}")
                else:
                    self._cache[url] = Unreachable(f"HTTP {error.code} for {url}")
            except (urllib.error.URLError, OSError, ValueError) as error:
                reason = getattr(error, "reason", error)
                down = Unreachable(f"{base}: {reason}")
                self._down[base] = down
                raise down from None
        answer = self._cache[url]
        if isinstance(answer, Exception):
            raise answer
        return answer

    # PyPI JSON API: https://docs.pypi.org/api/json/
    def pypi_releases(self, project: str) -> list[str]:
        """Every release of a PyPI project that is not yanked."""
        data = json.loads(self.get(self.pypi, f"{project}/json"))
        return [
            v
            for v, files in data.get("releases", {}).items()
            if files and not all(f.get("yanked") for f in files)
        ]

    # GOPROXY protocol: https://go.dev/ref/mod#goproxy-protocol
    def proxies(self) -> list[tuple[str, bool]]:
        """(proxy URL, fall through on any error) per GOPROXY entry, up to ``direct`` or ``off``."""
        entries, any_error = [], False
        for part in re.split(r"([,|])", self.goproxy.strip()):
            if part in (",", "|"):
                any_error = part == "|"
                continue
            part = part.strip()
            if part in ("direct", "off") or not part:
                break
            entries.append((part, any_error))
        return entries

    def go(self, module: str, suffix: str) -> bytes:
        """``$GOPROXY/<escaped module>/@v/<suffix>``, trying each proxy as the go command does."""
        proxies = self.proxies()
        if not proxies:
            raise NotServed(f"GOPROXY={self.goproxy!r} names no module proxy (direct and off are not asked)")
        error: Exception | None = None
        for index, (url, _) in enumerate(proxies):
            try:
                return self.get(url, f"{escape_module_path(module)}/@v/{suffix}")
            except NotServed as e:
                error = e
            except Unreachable as e:
                error = e
                following = proxies[index + 1][1] if index + 1 < len(proxies) else False
                if not following:
                    raise
        assert error is not None
        raise error

    def go_list(self, module: str) -> list[str]:
        return self.go(module, "list").decode().split()

    def go_has(self, module: str, version: str) -> bool:
        try:
            self.go(module, f"{escape_module_path(version)}.info")
        except NotServed:
            return False
        return True

    def go_mod(self, module: str, version: str) -> str:
        return self.go(module, f"{escape_module_path(version)}.mod").decode()


def local_go_version() -> str | None:
    """``go env GOVERSION`` (the twin builds with GOTOOLCHAIN=local), None without a go command."""
    import shutil
    import subprocess

    go = shutil.which("go")
    if not go:
        return None
    try:
        done = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


# -- targets -------------------------------------------------------------------------------------


def twin_targets(root: Path = TWIN_GO) -> list[DriftTarget]:
    """The module each twin wrapper builds, at the version its go.mod pins."""
    targets = []
    for mod in sorted(root.glob("*/go.mod")):
        folder = mod.parent.name
        name = f"twin/go/{folder}"
        upstream = TWIN_UPSTREAMS.get(folder)
        _, requires, _ = parse_go_mod(mod.read_text())
        if upstream is None or upstream.package not in requires:
            targets.append(
                DriftTarget(
                    "twin-go",
                    name,
                    "-",
                    None,
                    f"no module mapped for {name}: add it to TWIN_UPSTREAMS in guardrails/pins.py",
                )
            )
            continue
        targets.append(DriftTarget("twin-go", name, requires[upstream.package], upstream))
    return targets


def drift_targets(pins: list[Pin] | None = None, twin_root: Path = TWIN_GO) -> list[DriftTarget]:
    """Every pin of the inventory (collect_pins; CRD schemas once per upstream release), the add-on
    and image pins of components/versions.py it does not list, and the twin's Go modules."""
    pins = collect_pins() if pins is None else pins
    targets: list[DriftTarget] = []
    seen_schemas: set[tuple[str, str]] = set()
    for pin in pins:
        if pin.kind == "chart":
            where = CHART_UPSTREAMS.get(pin.name)
            if isinstance(where, Upstream):
                targets.append(DriftTarget("chart", pin.name, pin.version, where))
            else:
                targets.append(
                    DriftTarget(
                        "chart",
                        pin.name,
                        pin.version,
                        None,
                        where or f"{pin.source}: no registry mapping (add one to CHART_UPSTREAMS)",
                    )
                )
        elif pin.kind == "image" and pin.name == versions.VLLM_IMAGE.rsplit(":", 1)[0]:
            targets.append(
                DriftTarget(
                    "image",
                    pin.name,
                    pin.version,
                    Upstream("pypi", "vllm", note="the image is released with the PyPI package of its tag"),
                )
            )
        elif pin.kind == "ami":
            targets.append(
                DriftTarget(
                    "ami",
                    pin.name,
                    pin.version,
                    None,
                    "awslabs/amazon-eks-ami release tags v<YYYYMMDD> (GitHub releases; or aws ssm "
                    "get-parameter --name /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/x86_64/"
                    "nvidia/recommended/image_id); refresh amazon-eks-ami-release-tags.txt and "
                    "amazon-eks-ami-al2023-images.json with it",
                )
            )
        elif pin.kind == "crd-schema":
            repo = pin.source.split()[0]
            if (repo, pin.version) in seen_schemas:
                continue
            seen_schemas.add((repo, pin.version))
            upstream = SCHEMA_UPSTREAMS.get(repo)
            if upstream is None or pin.version == "-":
                manual = f"{repo}: no upstream release recorded in schemas/index.json (a commit snapshot)"
                targets.append(DriftTarget("crd-schema", repo, pin.version, None, manual))
            else:
                targets.append(DriftTarget("crd-schema", repo, pin.version, upstream))
        elif pin.kind == "sdk":
            targets.append(DriftTarget("sdk", pin.name, pin.version, Upstream("pypi", pin.name)))
        else:
            targets.append(
                DriftTarget(pin.kind, pin.name, pin.version, None, f"{pin.source} (no registry mapping)")
            )
    for addon, version in addon_pins():
        targets.append(DriftTarget("addon", addon, version, None, _addon_manual(addon, version)))
    pause, tag = versions.PAUSE_IMAGE.rsplit(":", 1)
    targets.append(
        DriftTarget(
            "image",
            pause,
            tag,
            None,
            "kubernetes/kubernetes build/pause/CHANGELOG.md and the pause tag kubeadm names for the "
            "clusters' minor",
        )
    )
    return [*targets, *image_digest_targets(), *twin_targets(twin_root)]


UNPINNED = "unpinned"
"""The PINNED column of an add-on with no version: EKS installs its default build for the minor."""


def addon_pins() -> list[tuple[str, str]]:
    """(add-on, pinned version) of every EKS add-on the program creates: the weights sources' and
    Karpenter mode's, CoreDNS once per supported Kubernetes minor (``name@minor``)."""
    pins = [
        (versions.MOUNTPOINT_S3_CSI_ADDON, versions.MOUNTPOINT_S3_CSI_ADDON_VERSION),
        (versions.SNAPSHOT_CONTROLLER_ADDON, versions.SNAPSHOT_CONTROLLER_ADDON_VERSION),
    ]
    pins += [(f"{versions.COREDNS_ADDON}@{k}", v) for k, v in sorted(versions.COREDNS_ADDON_VERSIONS.items())]
    pins += [
        (versions.POD_IDENTITY_AGENT_ADDON, versions.POD_IDENTITY_AGENT_ADDON_VERSION or UNPINNED),
        (versions.EBS_CSI_ADDON, versions.EBS_CSI_ADDON_VERSION or UNPINNED),
    ]
    return pins


def _addon_manual(addon: str, version: str) -> str:
    name, _, minor = addon.partition("@")
    listing = f"aws eks describe-addon-versions --addon-name {name} --kubernetes-version {minor or '<k8s>'}"
    if version == UNPINNED:
        return (
            f"no version pinned: no upstream source read here states a build for the supported "
            f"Kubernetes minors (reference/upstream/eks-addon-versions.json), so EKS installs its "
            f"default; read the builds with `{listing}` and pin one in components/versions.py"
        )
    return f"EKS add-on builds: {listing}"


# Chart images that the pinned chart itself names by digest (the rest come by the chart's tags).
CHART_IMAGE_DIGESTS = {
    "karpenter": "the chart pins its controller image by digest (values.yaml controller.image.digest)",
}


def image_digest_targets() -> list[DriftTarget]:
    """One row per image the program pulls, saying whether it is pinned by digest. No registry is
    reachable here, so none is checked against one: a digest is pinned only where an upstream
    source states it (components/versions.py cites it), and each row is a manual step."""
    rows = []
    for image, digest, source in (
        (
            versions.VLLM_IMAGE,
            versions.VLLM_IMAGE_DIGEST,
            "no upstream record of this tag's digest was found offline (image-pulls.json vllm_image_digest)",
        ),
        (
            versions.PAUSE_IMAGE,
            versions.PAUSE_IMAGE_DIGEST,
            "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-kubernetes/images.yaml (image-pulls.json "
            "pause_image_digest)",
        ),
    ):
        repository = image.rsplit(":", 1)[0]
        confirm = f"`docker buildx imagetools inspect {image}` (or `crane digest {image}`)"
        detail = (
            f"pinned by digest, from {source}: confirm it with {confirm} when the tag moves"
            if digest
            else f"pinned by tag only ({source}): read the digest with {confirm} and set it in "
            "components/versions.py"
        )
        rows.append(DriftTarget("digest", f"{repository}@digest", digest or "none", None, detail))
    for _, pin in sorted(vars(versions).items()):
        if not isinstance(pin, ChartPin):
            continue
        name = pin.chart.rsplit("/", 1)[-1]
        detail = CHART_IMAGE_DIGESTS.get(name) or (
            "the chart's images come by the tags of its defaults: list them with `helm "
            f"template {name} --version {pin.version} | grep image:`, read each digest with `crane digest`, "
            "and set the chart's digest value where it has one"
        )
        pinned = "chart digests" if name in CHART_IMAGE_DIGESTS else "chart tags"
        rows.append(DriftTarget("digest", f"{name}@images", pinned, None, detail))
    return rows


# -- the comparison ------------------------------------------------------------------------------


def _go_successors(version: str, module: str) -> list[str]:
    """The next two patches (a proxy may lack one), the next minor and (from v0, on a path without a
    /vN suffix) the next major of a version."""
    key = semver_key(version)
    if key is None:
        return []
    major, minor, patch = key[0], key[1], key[2]
    nexts = [f"v{major}.{minor}.{patch + 1}", f"v{major}.{minor}.{patch + 2}", f"v{major}.{minor + 1}.0"]
    if major == 0 and not re.search(r"/v\d+$", module):
        nexts.append("v1.0.0")
    return nexts


def _go_versions(reg: Registries, module: str, pinned: str) -> list[str]:
    """The versions the proxy lists, plus newer ones it serves when asked for by name."""
    listed = [v for v in reg.go_list(module) if semver_key(v)]
    known = set(listed)
    stable = [v for v in listed if not is_prerelease(v)]
    pinned_stable = [pinned] if semver_key(pinned) and not is_prerelease(pinned) else []
    start = max([*stable, *pinned_stable], key=_order(semver_key), default=None)
    probes = 0
    while start and probes < MAX_PROBES:
        found = None
        for candidate in _go_successors(start, module):
            if probes >= MAX_PROBES:
                break
            if candidate in known:
                found = candidate
                break
            probes += 1
            if reg.go_has(module, candidate):
                known.add(candidate)
                found = candidate
                break
        if found is None:
            break
        start = found
    return sorted(known, key=_order(semver_key))


def _go_line(reg: Registries, upstream: Upstream, version: str) -> tuple[str | None, str]:
    """(go line, what it was read from) of the module the twin builds for this release."""
    module, at = upstream.package, version
    if upstream.build and upstream.build != upstream.package:
        _, requires, _ = parse_go_mod(reg.go_mod(upstream.package, version))
        if upstream.build not in requires:
            return None, f"{upstream.package}@{version} requires no {upstream.build}"
        module, at = upstream.build, requires[upstream.build]
    go_line, _, _ = parse_go_mod(reg.go_mod(module, at))
    return go_line, f"{module}@{at}"


def _fits(go_line: str | None, local: str | None) -> bool | None:
    if go_line is None or local is None:
        return None
    need, have = go_version_key(go_line), go_version_key(local.removeprefix("go"))
    if need is None or have is None:
        return None
    return need <= have


def _takeable(
    reg: Registries, upstream: Upstream, newer: list[str], local_go: str | None
) -> tuple[str | None, list[str]]:
    """The newest of ``newer`` (ascending) whose build module the local Go can build, and why the
    ones above it cannot; every release is takeable when nothing is built here."""
    if not upstream.build:
        return (newer[-1] if newer else None), []
    too_new: list[str] = []
    unread: list[str] = []
    for version in list(reversed(newer))[:MAX_GO_LINE_READS]:
        try:
            go_line, source = _go_line(reg, upstream, version)
        except NotServed:
            unread.append(version)
            continue
        if _fits(go_line, local_go):
            reasons = _toolchain_reasons(too_new, unread, local_go)
            if upstream.build != upstream.package:
                reasons.insert(0, f"the twin then builds {source} (go {go_line})")
            return version, reasons
        too_new.append(f"{version} ({source}: go {go_line})")
    return None, _toolchain_reasons(too_new, unread, local_go)


def _toolchain_reasons(too_new: list[str], unread: list[str], local_go: str | None) -> list[str]:
    reasons = []
    if too_new:
        have = local_go or "no go command found here to compare with"
        reasons.append(
            f"needs a newer Go than {have} (the twin builds with GOTOOLCHAIN=local): {', '.join(too_new)}"
        )
    if unread:
        reasons.append(f"go.mod of the module the twin builds not served for {', '.join(unread)}")
    return reasons


def _newest(versions_: list[str], key: Callable[[str], tuple | None]) -> str | None:
    usable = [v for v in versions_ if key(v) is not None]
    return max(usable, key=_order(key)) if usable else None


def check_drift(target: DriftTarget, reg: Registries, local_go: str | None) -> Drift:
    """One pin against its registry."""
    upstream = target.upstream
    if upstream is None:
        return Drift(
            target, "manual", None, f"not served by a reachable registry: manual step: {target.manual}"
        )
    where = "PyPI" if upstream.registry == "pypi" else "Go proxy"
    source = f"{where} {upstream.package}"
    note = f"; {upstream.note}" if upstream.note else ""
    try:
        if upstream.registry == "pypi":
            pinned = target.version.removeprefix("v")
            releases = [v for v in reg.pypi_releases(upstream.package) if not pep440_prerelease(v)]
            newest = _newest(releases, pep440_key)
            if newest is None or pep440_key(pinned) is None:
                return Drift(target, "unknown", newest, f"{source}: no comparable release{note}")
            if _order(pep440_key)(pinned) >= _order(pep440_key)(newest):
                return Drift(target, "current", newest, f"{source}{note}")
            return Drift(target, "behind", newest, f"{source}: {newest} is released{note}")
        pinned = _release(target.version)
        if semver_key(pinned) is None:
            return Drift(target, "unknown", None, f"{source}: {pinned} is not a module version{note}")
        all_versions = _go_versions(reg, upstream.package, pinned)
        pseudo = is_pseudo(pinned)
        candidates = [v for v in all_versions if pseudo or not is_prerelease(v)]
        if upstream.same_major:
            major = semver_key(pinned)[0]  # type: ignore[index]
            candidates = [v for v in candidates if (k := semver_key(v)) is not None and k[0] == major]
            note += f"; other majors left out: {upstream.same_major}"
        newest = _newest([*candidates, pinned], semver_key)
        if not candidates:
            return Drift(target, "not-served", None, f"{source}: the proxy lists no release{note}")
        assert newest is not None
        key = _order(semver_key)
        pin_key = key(pinned)
        newer = [v for v in candidates if key(v) > pin_key]
        if pinned not in all_versions and newest == pinned:
            note += f"; the proxy lists up to {_newest(candidates, semver_key)} and does not list {pinned}"
        held: list[str] = []
        if upstream.hold_minor:
            same = [v for v in newer if key(v)[:2] == pin_key[:2]]
            if len(same) < len(newer):
                held.append(f"newer minor {newer[-1]} held: {upstream.hold_minor}")
            newer = same
        if not newer:
            status = "held" if held else "current"
            return Drift(target, status, newest, "; ".join([source, *held]) + note)
        take, reasons = _takeable(reg, upstream, newer, local_go)
        if take is None:
            why = "; ".join(reasons) or "no release above the pin could be checked"
            return Drift(target, "held", newest, f"{source}: cannot take a newer release: {why}" + note)
        parts = [f"{source}: take {take}", *reasons, *held]
        return Drift(target, "behind", newest, "; ".join(parts) + note)
    except Unreachable as error:
        return Drift(target, "unreachable", None, f"unreachable: {error}")
    except NotServed as error:
        return Drift(
            target,
            "not-served",
            None,
            f"{source} is not served ({error}): manual step: its GitHub tags{note}",
        )


def check_all(
    targets: list[DriftTarget], reg: Registries, local_go: str | None, workers: int = 8
) -> list[Drift]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda t: check_drift(t, reg, local_go), targets))


def _styled(drift: Drift) -> str:
    """The newest version spelled as the pin is (with or without a leading v)."""
    if not drift.newest:
        return "-"
    bare = drift.newest.removeprefix("v")
    return f"v{bare}" if drift.target.version.startswith("v") else bare


def drift_table(drifts: list[Drift]) -> str:
    rows = [("KIND", "NAME", "PINNED", "NEWEST", "STATUS", "DETAIL")]
    rows += [(d.target.kind, d.target.name, d.target.version, _styled(d), d.status, d.detail) for d in drifts]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join([*(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)), r[5]]) for r in rows
    )


def drift_summary(drifts: list[Drift], reg: Registries, local_go: str | None) -> list[str]:
    counts = {s: sum(d.status == s for d in drifts) for s in STATUSES}
    checked = counts["current"] + counts["behind"] + counts["held"]
    lines = [
        f"{len(drifts)} pins: {checked} compared with a registry (PyPI {reg.pypi}, GOPROXY={reg.goproxy}; "
        f"local Go {local_go or 'none found'}): {counts['current']} current, {counts['behind']} behind, "
        f"{counts['held']} held back",
    ]
    unchecked = {
        s: [d.target.name for d in drifts if d.status == s]
        for s in ("manual", "not-served", "unreachable", "unknown")
    }
    why = {
        "manual": "no registry reachable here serves their releases: manual step (see DETAIL)",
        "not-served": "the registry does not serve the module that releases them: manual step",
        "unreachable": "the registry did not answer",
        "unknown": "the registry's answer could not be compared",
    }
    for status, names in unchecked.items():
        if names:
            lines.append(f"NOT CHECKED ({status}, {len(names)}): {why[status]}: {', '.join(names)}")
    return lines


def run_check(
    strict: bool = False,
    pypi: str | None = None,
    goproxy: str | None = None,
    go_version: str | None = None,
    timeout: float = HTTP_TIMEOUT_S,
    targets: list[DriftTarget] | None = None,
) -> int:
    """``pins --check``: print one line per pin and a summary; 0 unless ``strict`` and a pin is
    behind or a registry did not answer."""
    import os
    import sys

    reg = Registries(
        pypi or os.environ.get(PYPI_ENV) or DEFAULT_PYPI,
        goproxy or os.environ.get("GOPROXY") or DEFAULT_GOPROXY,
        timeout,
    )
    local_go = go_version or local_go_version()
    drifts = check_all(drift_targets() if targets is None else targets, reg, local_go)
    print(drift_table(drifts))
    for line in drift_summary(drifts, reg, local_go):
        print(line)
    failing = [d for d in drifts if d.status in ("behind", "unreachable")]
    if strict and failing:
        print(
            f"--strict: {len(failing)} pin(s) behind or unchecked because a registry did not answer",
            file=sys.stderr,
        )
        return 1
    return 0
