"""What the twin builds and how ``twin check`` fails without it; no binaries needed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from deepseek_eks.guardrails.manifest_gate import schema_dir
from deepseek_eks.settings.model import DEFAULT_KUBERNETES_VERSION
from deepseek_eks.twin import pinned_version
from deepseek_eks.twin.binaries import PROGRAMS, TWIN_DIR, binary_path
from deepseek_eks.twin.check import pods_of
from deepseek_eks.twin.crds import crd_objects
from tests.upstream import UPSTREAM

KUBERNETES_GO_MOD = UPSTREAM / "kubernetes-v1.34.12.go.mod"  # k8s.io/kubernetes@v1.34.12, module proxy


def test_the_api_server_is_the_minor_the_project_pins() -> None:
    assert pinned_version("kube-apiserver").removeprefix("v").rsplit(".", 1)[0] == DEFAULT_KUBERNETES_VERSION
    assert KUBERNETES_GO_MOD.name == f"kubernetes-{pinned_version('kube-apiserver')}.go.mod"


def test_every_staging_module_is_pinned_to_the_matching_release() -> None:
    """k8s.io/kubernetes replaces its staging modules with ./staging; a dependent module does not
    inherit replaces, so each must be pinned here to v0.<minor>.<patch> of the same release."""
    upstream = set(re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", KUBERNETES_GO_MOD.read_text(), re.M))
    ours = dict(
        re.findall(
            r"^\s*(k8s\.io/[\w.-]+) => \1 (v\S+)$", (TWIN_DIR / "go/kubernetes/go.mod").read_text(), re.M
        )
    )
    assert upstream and set(ours) == upstream
    release = "v0." + pinned_version("kube-apiserver").split(".", 1)[1]
    assert set(ours.values()) == {release}


def test_binaries_are_cached_outside_the_work_tree_by_version(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DEEPSEEK_EKS_TWIN_CACHE", str(tmp_path))
    assert binary_path("etcd") == tmp_path / f"etcd-{pinned_version('etcd')}" / "etcd"


def test_check_without_binaries_exits_3_and_says_how_to_build(tmp_path: Path) -> None:
    (tmp_path / "render" / "kubernetes").mkdir(parents=True)
    env = {**os.environ, "DEEPSEEK_EKS_TWIN_CACHE": str(tmp_path / "empty")}
    proc = subprocess.run(
        [sys.executable, "-m", "automation", "twin", "check", "--render", str(tmp_path / "render")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 3, proc.stderr
    assert "make twin" in proc.stderr and "kube-apiserver" in proc.stderr


def test_check_of_a_folder_that_is_no_render_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "automation", "twin", "check", "--render", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "kubernetes" in proc.stderr


def test_one_crd_per_indexed_kind_with_one_storage_version() -> None:
    index = json.loads((schema_dir() / "index.json").read_text())["schemas"]
    crds = crd_objects()
    assert {c["metadata"]["name"] for c in crds} == {f"{e['plural']}.{e['group']}" for e in index}
    assert all(sum(v["storage"] for v in c["spec"]["versions"]) == 1 for c in crds)


def test_a_leader_worker_set_yields_its_leader_and_worker_pods() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}
    lws = {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "r1", "namespace": "deepseek"},
        "spec": {"leaderWorkerTemplate": {"leaderTemplate": template, "workerTemplate": template}},
    }
    pods = pods_of(lws)
    assert [p["metadata"]["name"] for p in pods] == ["r1-leader", "r1-worker"]
    assert all(
        p["metadata"]["namespace"] == "deepseek" and p["metadata"]["labels"] == {"a": "b"} for p in pods
    )


def test_every_program_the_build_script_knows_has_a_pinned_version() -> None:
    script = (TWIN_DIR / "build.sh").read_text()
    for program in PROGRAMS:
        assert re.fullmatch(r"v\d+\.\d+\.\d+", pinned_version(program)), program
        assert f"{program})" in script or f"|{program}" in script, program


def test_the_twin_s_prometheus_is_the_release_the_pinned_chart_runs() -> None:
    """Prometheus 3 is released as Go module v0.<major><minor>.<patch>; the wrapper's must be the
    server image the vendored kube-prometheus-stack values pin (v3.14.0-distroless)."""
    import yaml

    charts = sorted((UPSTREAM / "helm-charts").glob("kube-prometheus-stack-*/values.yaml"))
    assert len(charts) == 1, charts
    values = yaml.safe_load(charts[0].read_text())
    tag = values["prometheus"]["prometheusSpec"]["image"]["tag"]
    major, minor, patch = tag.removeprefix("v").split("-")[0].split(".")
    assert pinned_version("prometheus") == f"v0.{major}{int(minor):02d}.{patch}" == pinned_version("promtool")
    assert "prometheus" in PROGRAMS and "promtool" in PROGRAMS
