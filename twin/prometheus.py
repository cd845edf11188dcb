"""The real Prometheus for the twin's autoscaling loop: the release the pinned kube-prometheus-stack
chart runs (v3.14.0), built from its Go module by ``twin/build.sh prometheus promtool``, or, where
that is not built yet, Debian's package (``/usr/bin/prometheus``, 2.42.0+ds-5+deb12u1), whose
range selectors and subqueries still include their start (Prometheus 3 made them left-open: see
``prometheus_binaries``). It runs with a generated
configuration: one file-based discovery job for the stand-in's targets (twin/standin.py
writes the groups, with the target labels the prometheus-operator would give), a short scrape and
rule-evaluation interval (``scrape_interval_s``, 1 s by default; the loop passes the render's 15 s
compressed), and the rendered PrometheusRule objects' groups as rule files, checked by
``promtool check config`` before the server starts.

What differs from the cluster's Prometheus (kube-prometheus-stack, run by the operator): no
Kubernetes discovery (the targets come from the stand-in's file instead of PodMonitor and
ServiceMonitor discovery), no Alertmanager, no external labels, and one job for every target, its
``job`` label set by the target itself."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from .binaries import BinariesMissing, binary_path
from .server import TwinError, _start, _stop, _tail

DEBIAN_PROMETHEUS = Path("/usr/bin/prometheus")
DEBIAN_PROMTOOL = Path("/usr/bin/promtool")
# Set by .ci/run once the chart's release is built: a run must not fall back to Debian's 2.42.
REQUIRE_ENV = "DEEPSEEK_EKS_REQUIRE_PROMETHEUS"
INSTALL_HINT = (
    "build the chart's release with `twin/build.sh prometheus promtool` (about 10 minutes of CPU "
    "once per machine), or install Debian's prometheus package (apt-get install prometheus), an "
    "older release (2.42) whose ranges include their start"
)


def prometheus_binaries() -> tuple[Path, Path]:
    """(prometheus, promtool): the release the pinned chart runs (twin/go/prometheus; Prometheus 3
    evaluates a range ``[t - d, t]`` left-open, without the sample at ``t - d``, prometheus
    promql/engine.go at v0.314.0), or Debian's 2.42 where that is not built, unless
    ``DEEPSEEK_EKS_REQUIRE_PROMETHEUS=1`` (CI, once it built them) asks for the chart's."""
    built = (binary_path("prometheus"), binary_path("promtool"))
    if all(os.access(p, os.X_OK) for p in built) or os.environ.get(REQUIRE_ENV) == "1":
        return built
    return DEBIAN_PROMETHEUS, DEBIAN_PROMTOOL


PROMETHEUS, PROMTOOL = prometheus_binaries()
READY_TIMEOUT_S = 60.0
JOB = "twin-standin"
# file_sd re-reads on inotify events and at least this often (prometheus/prometheus
# discovery/file/file.go, DefaultSDConfig RefreshInterval 5m; read at module v0.304.2 in the Go
# module cache): short, so a lost event costs one second. The discovery manager then hands new
# target groups on after a backoff of 100 ms growing to 5 s while updates keep coming
# (v0.314.0 discovery/manager.go ``sender``), and the scrape manager takes them every 5 s
# (``reloader``, the hidden flag --scrape.discovery-reload-interval): with that left at its
# default a pod that turns ready was scraped up to about 6 s after ``set_targets`` (measured
# here); the loop compresses it (``running_prometheus`` ``discovery_reload_s``): about 1 s.
FILE_SD_REFRESH = "1s"


def _duration(seconds: float) -> str:
    """A Prometheus duration string (whole milliseconds)."""
    return f"{max(1, round(seconds * 1000))}ms"


def _rule_groups(render: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(namespace-name, spec.groups) of each rendered PrometheusRule."""
    found = []
    for path in sorted((render / "kubernetes").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj and obj.get("kind") == "PrometheusRule":
                meta = obj["metadata"]
                found.append((f"{meta.get('namespace', 'default')}-{meta['name']}", obj["spec"]["groups"]))
    return found


def write_config(render: Path, folder: Path, scrape_interval_s: float) -> Path:
    """prometheus.yml, its rule files and an empty file_sd target list under ``folder``."""
    rules = folder / "rules"
    rules.mkdir(parents=True, exist_ok=True)
    rule_files = []
    for name, groups in _rule_groups(render):
        path = rules / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
        rule_files.append(str(path))
    targets = folder / "targets.json"
    if not targets.exists():
        targets.write_text("[]\n")
    interval = _duration(scrape_interval_s)
    config = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": interval,  # may not exceed the interval
            "evaluation_interval": interval,
        },
        "rule_files": rule_files,
        "scrape_configs": [
            {
                "job_name": JOB,
                # What the rendered PodMonitor (no honorLabels: false) and the dcgm-exporter
                # values (serviceMonitor.honorLabels false) give: a scraped label that clashes
                # with a target label is kept as exported_<name> (prometheus/prometheus
                # scrape/scrape.go mutateSampleLabels, model.ExportedLabelPrefix; read at
                # v0.304.2), which is how dcgm-exporter's pod/namespace/container become
                # exported_pod/exported_namespace/exported_container.
                "honor_labels": False,
                "file_sd_configs": [{"files": [str(targets)], "refresh_interval": FILE_SD_REFRESH}],
            }
        ],
    }
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def check_config(config: Path) -> None:
    """``promtool check config`` (which loads the rule files too); TwinError with its output."""
    if not os.access(PROMTOOL, os.X_OK):
        raise BinariesMissing(f"{PROMTOOL} not found: {INSTALL_HINT}")
    result = subprocess.run(
        [str(PROMTOOL), "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise TwinError(f"promtool rejects the twin's Prometheus config:\n{result.stdout}{result.stderr}")


class Prometheus:
    """A running Prometheus: its URL, its file_sd target file, and its HTTP query API."""

    def __init__(self, url: str, targets_file: Path) -> None:
        self.url = url
        self.targets_file = targets_file
        self._client = httpx.Client(base_url=url, timeout=10.0)
        self._written: str | None = None

    def close(self) -> None:
        self._client.close()

    def set_targets(self, groups: list[dict[str, Any]]) -> None:
        """Replace the discovered targets: write a temporary file and rename it over the old one,
        so that Prometheus never reads half a file. Unchanged groups write nothing (the loop
        publishes every tick; each write is a rediscovery)."""
        text = json.dumps(groups, indent=1, sort_keys=True)
        if text == self._written:
            return
        tmp = self.targets_file.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(self.targets_file)
        self._written = text

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query (``GET /api/v1/query``): the result's vector (or a scalar as one
        sample); TwinError when Prometheus refuses it."""
        response = self._client.get("/api/v1/query", params={"query": promql})
        body = response.json()
        if body.get("status") != "success":
            raise TwinError(f"Prometheus query {promql!r} failed: {body.get('error', response.text)}")
        data = body["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def scrapes_every_target(self) -> bool:
        """Whether each target written by ``set_targets`` has been scraped, and answered (``up``
        is 1 for as many targets as were written)."""
        expected = len(json.loads(self._written)) if self._written else 0
        with contextlib.suppress(httpx.HTTPError, TwinError):
            result = self.query("count(up == 1)")
            return bool(result) and float(result[0]["value"][1]) >= expected
        return False

    def wait_series(self, promql: str, timeout_s: float) -> None:
        """Until ``promql`` returns at least one series; TwinError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if self.query(promql):
                    return
            if time.monotonic() > deadline:
                raise TwinError(f"Prometheus: no series for {promql!r} within {timeout_s:g} s")
            time.sleep(0.25)


def _url(listen: str) -> str:
    host, _, port = listen.rpartition(":")
    if host in ("", "0.0.0.0", "[::]"):
        host = "127.0.0.1"
    return f"http://{host}:{port}"


@contextlib.contextmanager
def running_prometheus(
    render: Path,
    folder: Path,
    listen: str,
    *,
    scrape_interval_s: float = 1.0,
    discovery_reload_s: float | None = None,
    command_prefix: Sequence[str] = (),
) -> Iterator[Prometheus]:
    """Prometheus on ``listen`` (``addr:port``) with ``render``'s rules, its config, data and log
    under ``folder``, started through ``command_prefix`` (e.g. ``ip netns exec <ns>``), stopped when
    the block ends. ``discovery_reload_s`` sets how often the scrape manager takes new targets
    (``--scrape.discovery-reload-interval``, a hidden flag, default 5 s: prometheus v0.314.0
    cmd/prometheus/main.go, scrape/manager.go ``reloader``), so that a compressed loop sees a new
    pod's series no later than a cluster would. BinariesMissing without Debian's
    prometheus/promtool; TwinError (with the log's tail) when it does not become ready."""
    if not os.access(PROMETHEUS, os.X_OK):
        raise BinariesMissing(f"{PROMETHEUS} not found: {INSTALL_HINT}")
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(render, folder, scrape_interval_s)
    check_config(config)
    log = folder / "prometheus.log"
    command = [
        *command_prefix,
        str(PROMETHEUS),
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address={listen}",
        # Debian's defaults load consoles from /etc/prometheus; nothing here uses them.
        "--web.console.templates=/dev/null",
        "--web.console.libraries=/dev/null",
    ]
    if discovery_reload_s is not None:
        command.append(f"--scrape.discovery-reload-interval={_duration(discovery_reload_s)}")
    process = _start(command, log)
    prometheus = Prometheus(_url(listen), folder / "targets.json")
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise TwinError(f"Prometheus exited with {process.returncode} before ready:\n{_tail(log)}")
            with contextlib.suppress(httpx.HTTPError):
                if prometheus._client.get("/-/ready").status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TwinError(f"Prometheus not ready within {READY_TIMEOUT_S:.0f} s:\n{_tail(log)}")
            time.sleep(0.25)
        yield prometheus
    finally:
        prometheus.close()
        _stop(process)
