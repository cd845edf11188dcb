"""Run PromQL under real Prometheus (``promtool``) over series shaped like scraped data: the
release the pinned kube-prometheus-stack chart runs where ``twin/build.sh promtool`` built it, else
the one on PATH (Debian's 2.42, whose ranges include their start; twin/prometheus.py
``prometheus_binaries`` says which and why).

Policy: a test that needs promtool calls :func:`require_promtool`. Without the binary it is
skipped, or fails when ``DEEPSEEK_EKS_REQUIRE_TOOLS=1`` (CI), never silently passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
import yaml

from deepseek_eks.twin.prometheus import DEBIAN_PROMTOOL, INSTALL_HINT, REQUIRE_ENV, prometheus_binaries

_CHOSEN = prometheus_binaries()[1]
PROMTOOL = (
    str(_CHOSEN)
    if os.access(_CHOSEN, os.X_OK)
    else (shutil.which("promtool") if _CHOSEN == DEBIAN_PROMTOOL else None)
)
MISSING = f"promtool not found: {INSTALL_HINT}"


def require_promtool() -> str:
    """The promtool path; skips the calling test (fails under DEEPSEEK_EKS_REQUIRE_TOOLS=1) without it."""
    if PROMTOOL is None:
        if os.environ.get("DEEPSEEK_EKS_REQUIRE_TOOLS") == "1":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return PROMTOOL


def require_chart_promtool() -> str:
    """The promtool of the release the pinned chart runs, for a test whose answer depends on what
    changed in Prometheus 3 (left-open ranges); skips without it (fails under
    DEEPSEEK_EKS_REQUIRE_PROMETHEUS=1, which .ci/run sets once it built it)."""
    path = require_promtool()
    if path != str(_CHOSEN) or _CHOSEN == DEBIAN_PROMTOOL:
        message = f"needs the chart's promtool (Prometheus 3), not {path}: {INSTALL_HINT}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _run(args: list[str], what: str) -> None:
    proc = subprocess.run(
        [require_promtool(), *args], capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{what} failed (exit {proc.returncode}):\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )


def _dump(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=1000))
    return path


def run_rule_test(tmp_path: Path, rule_groups: list[dict], tests: list[dict]) -> None:
    """``promtool test rules`` over ``rule_groups`` and unit ``tests``; AssertionError with its output."""
    rules = _dump(tmp_path / "rules.yaml", {"groups": rule_groups})
    test_file = _dump(
        tmp_path / "rules_test.yaml",
        {"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests},
    )
    _run(["test", "rules", str(test_file)], f"promtool test rules {test_file}")


def check_query_parses(tmp_path: Path, expr: str) -> None:
    """``promtool check rules`` on ``expr`` as a recording rule; AssertionError with its output."""
    rules = _dump(
        tmp_path / "parse.yaml",
        {"groups": [{"name": "parse", "rules": [{"record": "test:parse", "expr": expr}]}]},
    )
    _run(["check", "rules", str(rules)], f"promtool check rules for {expr!r}")


# ---- series shaped like scraped data -----------------------------------------------------------


def labels(metric: str, lbls: Mapping[str, str]) -> str:
    """``metric{k="v",...}`` in Prometheus' text form (values escaped)."""

    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return metric + "{" + ",".join(f'{k}="{esc(v)}"' for k, v in lbls.items()) + "}"


def series(metric: str, lbls: Mapping[str, str], values: str) -> dict:
    """One promtool ``input_series`` entry."""
    return {"series": labels(metric, lbls), "values": values}


def dcgm_labels(
    *,
    gpu: int = 0,
    node_ip: str = "10.42.1.5",
    exporter_pod: str = "dcgm-exporter-abcde",
    workload: tuple[str, str, str] | None = None,
) -> dict[str, str]:
    """Labels of a dcgm-exporter GPU series after a ServiceMonitor scrape with ``honorLabels: false``.

    ``workload`` is the (namespace, pod, container) holding the GPU, which arrives renamed to
    ``exported_*`` because the target labels ``namespace``/``pod``/``container`` (the exporter's
    own) win; a GPU no pod holds has no ``exported_*`` labels at all.
    """
    host = "ip-" + node_ip.replace(".", "-") + ".ec2.internal"
    out = {
        "gpu": str(gpu),
        "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{host}/{gpu}')}",
        "pci_bus_id": f"00000000:00:{0x1E + gpu:02X}.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA L4",
        "Hostname": host,
        "DCGM_FI_DRIVER_VERSION": "570.133.20",
        "container": "dcgm-exporter",
        "namespace": "monitoring",
        "pod": exporter_pod,
        "service": "dcgm-exporter",
        "endpoint": "metrics",
        "job": "dcgm-exporter",
        "instance": f"{node_ip}:9400",
    }
    if workload is not None:
        ns, pod, container = workload
        out |= {"exported_container": container, "exported_namespace": ns, "exported_pod": pod}
    return out


def dcgm_series(metric: str, values: str, **kw) -> dict:
    """A dcgm-exporter series (see :func:`dcgm_labels` for the keyword arguments)."""
    return series(metric, dcgm_labels(**kw), values)


def xid_series(code: int, err_msg: str, values: str, **kw) -> dict:
    """A DCGM_FI_DEV_XID_ERRORS series as dcgm-exporter 4.5.3-4.8.2 writes it: the GPU's last XID
    as the value and, on this metric only, the same code in ``err_code`` and its text in ``err_msg``
    (internal/pkg/collector/gpu_collector.go toMetric; reference/upstream/nvidia-xid-catalog.json
    ``exporter``). Another XID is therefore another series."""
    return series(
        "DCGM_FI_DEV_XID_ERRORS", dcgm_labels(**kw) | {"err_code": str(code), "err_msg": err_msg}, values
    )


def vllm_labels(
    *,
    pod: str = "vllm-7d9f8-xyz",
    pod_ip: str = "10.42.2.9",
    namespace: str = "deepseek",
    model_name: str = "r1-distill-qwen-7b",
    engine: str | None = "0",
    container: str = "vllm",
) -> dict[str, str]:
    """Labels of a vLLM series after a PodMonitor scrape (``model_name``/``engine`` from vLLM,
    the rest target labels). ``engine=None`` for target-only series such as ``up``."""
    own = {"model_name": model_name, "engine": engine} if engine is not None else {}
    return own | {
        "namespace": namespace,
        "pod": pod,
        "container": container,
        "endpoint": "http",
        "job": f"{namespace}/vllm",
        "instance": f"{pod_ip}:8000",
    }


def vllm_series(metric: str, values: str, **kw) -> dict:
    """A vLLM gauge/counter series (see :func:`vllm_labels` for the keyword arguments)."""
    return series(metric, vllm_labels(**kw), values)


def _le(bound: float) -> str:
    """``le`` as prometheus_client (vLLM) writes it: ``1.0``, ``0.05``, ``+Inf``."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


def vllm_histogram(
    name: str, bounds: Iterable[float], per_minute: Mapping[float, int], *, steps: int = 30, **kw
) -> list[dict]:
    """A vLLM histogram as scraped: cumulative ``_bucket{le}`` counters (with ``le="+Inf"``) plus
    ``_sum`` and ``_count``, growing every minute for ``steps`` minutes.

    ``per_minute`` maps a bucket's upper bound (``float("inf")`` for the overflow bucket) to the
    observations landing in that bucket, not cumulatively, each minute.
    """
    bounds = [*sorted(float(b) for b in bounds), float("inf")]
    unknown = set(per_minute) - set(bounds)
    assert not unknown, f"observations for bounds not in the histogram: {unknown}"
    lbls = vllm_labels(**kw)
    out, cumulative, total_sum, lower = [], 0, 0.0, 0.0
    for bound in bounds:
        n = per_minute.get(bound, 0)
        cumulative += n
        # Observations are taken at the bucket's midpoint (twice the lower bound for +Inf).
        total_sum += n * ((lower + bound) / 2 if bound != float("inf") else 2 * lower)
        lower = bound
        out.append(series(f"{name}_bucket", lbls | {"le": _le(bound)}, f"0+{cumulative}x{steps}"))
    out.append(series(f"{name}_sum", lbls, f"0+{total_sum:g}x{steps}"))
    out.append(series(f"{name}_count", lbls, f"0+{cumulative}x{steps}"))
    return out
