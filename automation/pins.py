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

from deepseek_eks.components import versions
from deepseek_eks.components.versions import ChartPin

from .manifest_gate import schema_dir
from .stackfile import PROJECT_ROOT

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
    for line in (PROJECT_ROOT / "requirements.txt").read_text().splitlines():
        if match := re.match(r"^(pulumi[a-z-]*)==(\S+)", line.strip()):
            package, version = match.groups()
            reference = "replace-on-change.json" if package in ("pulumi-aws", "pulumi-eks") else "-"
            pins.append(Pin("sdk", package, version, f"https://pypi.org/project/{package}/", reference))
    return pins


def collect_pins(schemas_dir: Path | None = None) -> list[Pin]:
    """Every pin, each with its problem (None when its reference data matches)."""
    schemas = _schema_index(schemas_dir)
    return [*_chart_pins(schemas), _vllm_pin(), _ami_pin(), *_schema_pins(schemas), *_requirement_pins()]


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
