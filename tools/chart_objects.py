"""Regenerate tests/data/chart_objects.json: the RBAC objects and pod-bearing workloads that each
Helm chart the project installs renders with the project's values, for every shipped stack.

    python tools/chart_objects.py --charts DIR [--helm PATH]
    python tools/chart_objects.py --check          # exit 1 when a release's values moved on

DIR holds each pinned chart unpacked as ``<chart>-<version>/``, its sub-charts under ``charts/``
(``helm pull <repo>/<chart> --version <v> --untar``, or the chart's source at the commit
reference/upstream/helm-charts/index.json names, with kube-prometheus-stack's kube-state-metrics,
prometheus-node-exporter, grafana and prometheus-windows-exporter copied into its ``charts/``;
lws as kubernetes-sigs/lws hack/push-chart.sh packages it: values image.manager.tag v0.10.0 and
pullPolicy IfNotPresent instead of the source's main/Always). ``helm template`` renders each
offline for the stack's Kubernetes version, with monitoring.coreos.com/v1 among the API versions
(kube-prometheus-stack installs those CRDs), CRDs left out.

Why the file exists: tests/rendered/test_policy_pack.py runs the policy pack over these objects as
a v4 Chart's children, so every chart object the pack would refuse is either fixed or allowed by a
narrow, reasoned entry of CHART_ROLE_GRANTS (policy/rules/rbac.py) / CHART_CAPABILITY_GRANTS
(policy/rules/workloads.py), and an entry no object needs any more fails the test. Rerun this after
changing a chart's values or pin.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from tests import chart_objects

API_VERSIONS = ("monitoring.coreos.com/v1",)


def kubernetes_version(stack: str) -> str:
    """The stack's Kubernetes minor (cluster.kubernetesVersion, else the default), as helm's
    --kube-version wants it."""
    from deepseek_eks.automation.stackfile import read_stack
    from deepseek_eks.settings.model import DEFAULT_KUBERNETES_VERSION

    values = read_stack(stack).values
    version = next((str(v) for k, v in values.items() if k.endswith("kubernetesVersion")), None)
    return f"v{version or DEFAULT_KUBERNETES_VERSION}.0"


def render(helm: str, charts: Path, release: chart_objects.Release, kube: str) -> list[dict[str, Any]]:
    import yaml

    chart_dir = charts / f"{release.chart_name}-{release.version}"
    if not (chart_dir / "Chart.yaml").is_file():
        raise SystemExit(f"{chart_dir} is not an unpacked chart (no Chart.yaml): see --help")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as values:
        json.dump(release.values, values)
        values.flush()
        command = [
            helm,
            "template",
            release.name,
            str(chart_dir),
            "--namespace",
            release.namespace,
            "--values",
            values.name,
            "--kube-version",
            kube,
            *(arg for api in API_VERSIONS for arg in ("--api-versions", api)),
        ]
        out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr}")
    documents = [d for d in yaml.safe_load_all(out.stdout) if isinstance(d, dict)]
    return [d for d in documents if d.get("kind") in chart_objects.KINDS]


def helm_version(helm: str) -> str:
    out = subprocess.run([helm, "version", "--short"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def stacks() -> list[str]:
    from deepseek_eks.automation.stackfile import stack_names

    return list(stack_names())


def write(helm: str, charts: Path) -> None:
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for stack in stacks():
        kube = kubernetes_version(stack)
        for release in chart_objects.releases(stack):
            key = (release.name, release.digest)
            if key in entries:
                entries[key]["stacks"].append(stack)
                continue
            entries[key] = {
                "stacks": [stack],
                "release": release.name,
                "chart": release.chart_name,
                "version": release.version,
                "namespace": release.namespace,
                "kube_version": kube,
                "values_sha256": release.digest,
                "values": release.values,
                "objects": render(helm, charts, release, kube),
            }
    document = {
        "about": (
            "What `helm template` renders for every Helm release of every shipped stack, with the "
            "values the program gives it (only the kinds the policy pack's Kubernetes rules read: RBAC "
            "and workloads). Written by tools/chart_objects.py; read by tests/chart_objects.py. The "
            "charts are the pinned versions (reference/upstream/helm-charts/index.json names the "
            "source commit of each)."
        ),
        "helm": helm_version(helm),
        "api_versions": list(API_VERSIONS),
        "releases": sorted(entries.values(), key=lambda e: (e["release"], e["stacks"][0])),
    }
    chart_objects.FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    chart_objects.FIXTURE.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    print(f"wrote {chart_objects.FIXTURE} ({len(entries)} renders)")


def stale() -> list[str]:
    """The (stack, release) whose values differ from the ones the fixture was rendered with."""
    recorded = {
        (stack, entry["release"]): entry["values_sha256"]
        for entry in chart_objects.load()["releases"]
        for stack in entry["stacks"]
    }
    found = []
    for stack in stacks():
        for release in chart_objects.releases(stack):
            if recorded.get((stack, release.name)) != release.digest:
                found.append(f"{stack}/{release.name}")
    found += [f"{s}/{r} (no such release any more)" for s, r in recorded if s not in stacks()]
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--charts", type=Path, help="folder of unpacked charts, <chart>-<version>/ each")
    parser.add_argument("--helm", default="helm", help="the helm (v3) binary (default: helm on PATH)")
    parser.add_argument("--check", action="store_true", help="only report releases whose values moved on")
    args = parser.parse_args(argv)
    if args.check:
        moved = stale()
        for name in moved:
            print(f"stale: {name}")
        return 1 if moved else 0
    if args.charts is None:
        parser.error("--charts is required to render")
    write(args.helm, args.charts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
