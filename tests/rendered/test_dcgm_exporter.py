"""dcgm-exporter starts on SELinux-enforcing nodes (EKS Auto Mode) and reads the counters we query.

The chart's default mounts its metrics ConfigMap key with ``subPath`` over
/etc/dcgm-exporter/default-counters.csv, a file the image ships; runc refuses that bind mount on
Bottlerocket with SELinux enforcing (NVIDIA/dcgm-exporter#613). The container's mounts are
computed here from the values Helm would install (the chart's defaults coalesced with ours) the
way the pinned chart's ``templates/daemonset.yaml`` builds them (snapshotted verbatim under
``reference/upstream/helm-charts/dcgm-exporter-4.8.2/templates``), and checked against the files
the image has (``reference/upstream/dcgm-exporter-4.8.2-image.json``, from its Dockerfile).
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

import pytest

from deepseek_eks import promql
from deepseek_eks.automation.render import render
from deepseek_eks.automation.stackfile import read_stack
from tests.rendered.test_helm_values import _merged
from tests.upstream import UPSTREAM, helm_chart_defaults

STACKS = ("dev", "prod", "r1")
TEMPLATES = UPSTREAM / "helm-charts" / "dcgm-exporter-4.8.2" / "templates"
IMAGE = json.loads((UPSTREAM / "dcgm-exporter-4.8.2-image.json").read_text())

# What feeds the exporter container's volumeMounts in templates/daemonset.yaml: its fixed mounts
# by name, and the values copied in verbatim. test_the_modelled_mounts_are_the_templates keeps
# this in step with the snapshot.
TEMPLATE_MOUNT_SOURCES = {
    '- name: "pod-gpu-resources"',
    '- name: "tls"',
    '- name: "web-config-yaml"',
    "{{- toYaml .Values.extraVolumeMounts | nindent 8 }}",
    '- name: "debug-dumps"',
}


def _container_block(template: str, start: str, end: str) -> str:
    """The lines of the exporter container between ``start`` and ``end``."""
    block = template.split("      containers:", 1)[1]
    return block.split(start, 1)[1].split(end, 1)[0]


def exporter_mounts(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The exporter container's volumeMounts as templates/daemonset.yaml renders them."""
    mounts: list[dict[str, Any]] = [
        {"name": "pod-gpu-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}
    ]
    tls = values["tlsServerConfig"]["enabled"]
    if tls:
        mounts.append({"name": "tls", "mountPath": "/etc/dcgm-exporter/tls"})
    if tls or values["basicAuth"]["users"]:
        mounts.append(
            {
                "name": "web-config-yaml",
                "mountPath": "/etc/dcgm-exporter/web-config.yaml",
                "subPath": "web-config.yaml",
            }
        )
    mounts += values.get("extraVolumeMounts") or []
    if values["debugDump"]["enabled"]:
        mounts.append({"name": "debug-dumps", "mountPath": values["debugDump"]["directory"]})
    return mounts


def _installed_values() -> dict[str, dict[str, Any]]:
    """Stack -> the dcgm-exporter values Helm would install (chart defaults coalesced with ours)."""
    out = {}
    for stack in STACKS:
        releases = render(read_stack(stack)).helm.values()
        (release,) = (r for r in releases if r["chart"].endswith("dcgm-exporter"))
        chart = helm_chart_defaults("dcgm-exporter", release["version"])
        out[stack] = _merged(chart.values, release.get("values", {}))
    return out


@pytest.fixture(scope="module")
def installed() -> dict[str, dict[str, Any]]:
    return _installed_values()


def test_the_modelled_mounts_are_the_templates() -> None:
    block = _container_block((TEMPLATES / "daemonset.yaml").read_text(), "volumeMounts:", "livenessProbe:")
    sources = {
        line.strip()
        for line in block.splitlines()
        if line.strip().startswith("- name:") or (".Values." in line and "toYaml" in line)
    }
    assert sources == TEMPLATE_MOUNT_SOURCES


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_is_mounted_over_a_file_the_image_ships(stack: str, installed: dict[str, Any]) -> None:
    image_files = set(IMAGE["image_files"]["value"])
    onto_files = [m for m in exporter_mounts(installed[stack]) if m["mountPath"] in image_files]
    assert onto_files == [], f"{stack}: runc refuses these on SELinux-enforcing nodes (#613)"
    # No subPath at all: a subPath bind of a single file is what #613 reports failing.
    assert [m for m in exporter_mounts(installed[stack]) if m.get("subPath")] == []


def _counters_path(arguments: list[str]) -> str:
    flag = IMAGE["counters_flag"]["value"]
    for i, arg in enumerate(arguments):
        if arg in flag["aliases"]:
            return arguments[i + 1]
        if arg.startswith("--collectors="):
            return arg.split("=", 1)[1]
    return str(flag["default"])


@pytest.mark.parametrize("stack", STACKS)
def test_the_counters_file_is_the_charts_configmap_in_a_directory_mount(
    stack: str, installed: dict[str, Any]
) -> None:
    values = installed[stack]
    path = _counters_path([str(a) for a in values["arguments"]])
    directory, file = posixpath.split(path)
    (mount,) = [m for m in exporter_mounts(values) if m["mountPath"].rstrip("/") == directory]
    (volume,) = [v for v in values["extraConfigMapVolumes"] if v["name"] == mount["name"]]
    wanted = IMAGE["chart_metrics_configmap"]["value"]
    assert volume["configMap"]["name"] == wanted["name"]
    assert {"key": wanted["key"], "path": file} in volume["configMap"]["items"]


def test_the_charts_counters_list_has_every_dcgm_metric_we_query(installed: dict[str, Any]) -> None:
    template = (TEMPLATES / "metrics-configmap.yaml").read_text()
    default_list = template.split("{{- else }}", 1)[1]
    collected = set(re.findall(r"^\s*(DCGM_FI_\w+)\s*,", default_list, flags=re.M))
    queried = {v for k, v in vars(promql).items() if k.startswith("DCGM_") and isinstance(v, str)}
    assert queried and queried <= collected, sorted(queried - collected)
    for stack, values in installed.items():
        assert not values.get("customMetrics"), f"{stack}: a custom list replaces the default one"


def test_the_charts_own_default_is_what_fails(installed: dict[str, Any]) -> None:
    """The check sees the defect: the chart's values alone mount onto the image's counters file."""
    chart = helm_chart_defaults("dcgm-exporter", "4.8.2").values
    image_files = set(IMAGE["image_files"]["value"])
    assert any(m["mountPath"] in image_files and m.get("subPath") for m in exporter_mounts(chart))
