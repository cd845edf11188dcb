"""The real prometheus-adapter and KEDA on the twin, on the loop's network (issue 33 §1).

The twin's API server listens on the bridge with aggregator routing; Prometheus (the chart's
release where built, twin/prometheus.py ``prometheus_binaries``) runs in its own network
namespace and scrapes a tiny metrics server serving
DCGM and vLLM series; prometheus-adapter is configured from dev's render and KEDA from prod's. The
test reads the custom metric of dev's HPA through the aggregated API, waits for KEDA to create the
HPA of prod's ScaledObject and checks each external metric against Prometheus' own answer to the
trigger's query. Afterwards no namespace, link or /etc/netns folder of the run is left.
"""

from __future__ import annotations

import http.server
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.twin import missing_binaries, netns
from deepseek_eks.twin.binaries import BUILD_HINT, TIER0
from deepseek_eks.twin.check import load_render
from deepseek_eks.twin.metrics_programs import (
    CUSTOM_METRICS,
    EXTERNAL_METRICS,
    apiservice_available,
    metrics_programs,
)
from deepseek_eks.twin.prometheus import INSTALL_HINT, prometheus_binaries
from deepseek_eks.twin.server import Api, _stop, free_port, running_twin
from tests.conftest import stack_config
from tests.twin.conftest import require_binaries

PROGRAMS = (*TIER0, "prometheus-adapter", "keda-operator", "keda-metrics-apiserver")
PROMETHEUS = prometheus_binaries()[0]
PREFIX = "dsmt"  # not the loop's "dse": a test run must not sweep away a loop's network
GPU_UTIL = 63  # what the fake DCGM exporter serves for vllm-0
WAITING = 12  # what the fake vLLM serves as requests waiting
KEDA_HPA_TIMEOUT_S = 180.0


def _objects(folder: Path) -> list[dict[str, Any]]:
    return load_render(folder)[0]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o.get("kind") == kind)


def _quantity(text: str) -> Decimal:
    """A Kubernetes quantity as the metrics APIs write them (plain, or with the milli suffix)."""
    return Decimal(text[:-1]) / 1000 if text.endswith("m") else Decimal(text)


class _Metrics(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


# One stack per metrics program, on the signal that drives it: dev's HPA through prometheus-adapter
# (gpu-utilization), prod's KEDA ScaledObject on queue depth and GPU utilization (combined); both
# without the seasonal floor the example stacks ship with.
SIGNALS = {
    "dev": {"autoscaling__signal": "gpu-utilization", "autoscaling__seasonal": "false"},
    "prod": {"autoscaling__signal": "combined", "autoscaling__seasonal": "false"},
}


@pytest.fixture(scope="module")
def renders() -> Iterator[dict[str, Path]]:
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-metrics-render-") as temp:
        yield {s: write(render(stack_config(s, **o)), Path(temp)) for s, o in SIGNALS.items()}


def _serve(address: str, body: bytes) -> tuple[http.server.HTTPServer, int]:
    handler = type("Metrics", (_Metrics,), {"body": body})
    port = free_port(address)
    server = http.server.HTTPServer((address, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


def _start_prometheus(ns: netns.Netns, target: str, folder: Path) -> subprocess.Popen[bytes]:
    config = {
        # A scrape that outlasts its timeout marks the series stale, so a trigger's query reads its
        # `or vector(0)` branch for a moment: on a loaded two-core CI machine the fake exporter in
        # the test's own process once missed a 1 s timeout. An unset timeout is min(10 s, interval)
        # and a longer one is refused (github.com/prometheus/prometheus v0.314.0 config/config.go:668-673).
        "global": {"scrape_interval": "5s", "scrape_timeout": "5s", "evaluation_interval": "5s"},
        # honor_labels: the served namespace/pod labels stay as served (what the DCGM exporter's
        # exported_* labels and vLLM's own labels look like after kube-prometheus-stack's scrape).
        "scrape_configs": [
            {"job_name": "fake", "honor_labels": True, "static_configs": [{"targets": [target]}]}
        ],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (folder / "prometheus.log").open("wb")
    return subprocess.Popen(
        [
            *ns.prefix(),
            str(PROMETHEUS),
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            "--web.listen-address=0.0.0.0:9090",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def _query(prometheus: str, query: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"http://{prometheus}:9090/api/v1/query", params={"query": query}, timeout=5)
    result: list[dict[str, Any]] = reply.json()["data"]["result"]
    return result


def _served(prometheus: str, query: str) -> Decimal:
    """The query's value once the fake exporter's series are fresh.

    The triggers fall back to 0 while the pod's series are missing (`or vector(0)`), which a
    scrape that timed out also causes for a moment; a real 0 is never served here, so a 0 is
    waited out (and a query that only ever reads 0 fails the wait, naming it)."""

    def nonzero() -> Decimal | None:
        result = _query(prometheus, query)  # empty while neither branch has a sample yet
        return (Decimal(result[0]["value"][1]) or None) if result else None

    found: Decimal = _wait(f"a non-zero answer to {query}", nonzero, 60)
    return found


def _wait(what: str, check: Any, timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except (httpx.HTTPError, KeyError, ValueError):
            found = None
        if found:
            return found
        time.sleep(1.0)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    pytest.fail(f"{what} not within {timeout:.0f} s\n{tail}")


def _create(api: Api, obj: dict[str, Any]) -> None:
    reply = api.apply(obj, dry_run=False)
    assert reply.ok, f"{obj['kind']} {obj['metadata']['name']}: {reply.message}"


def _pod(name: str, namespace: str) -> dict[str, Any]:
    """A pod the namespace's restricted Pod Security admits (no kubelet runs it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "vllm",
                    "image": "registry.invalid/vllm:twin",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def _check_external(
    api: Api, prometheus: str, scaled: dict[str, Any], hpa: dict[str, Any], programs: dict[str, Any]
) -> None:
    """Each external metric of KEDA's HPA answers what Prometheus answers to its trigger's query."""
    external = [m["external"]["metric"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert len(external) == len(scaled["spec"]["triggers"])
    for metric in external:
        # KEDA names a trigger's metric s<index>-<scaler> (github.com/kedacore/keda/v2 v2.20.2
        # pkg/scalers/scaler.go GenerateMetricNameWithIndex).
        match = re.match(r"s(\d+)-", metric["name"])
        assert match, metric["name"]
        trigger = scaled["spec"]["triggers"][int(match[1])]
        expected = _served(prometheus, trigger["metadata"]["query"])
        selector = ",".join(f"{k}={v}" for k, v in metric["selector"]["matchLabels"].items())
        url = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/deepseek/{metric['name']}"

        def value(url: str = url, selector: str = selector) -> Decimal | None:
            reply = api.call("GET", url, params={"labelSelector": selector})
            items = reply.body.get("items") or []
            return _quantity(items[0]["value"]) if reply.ok and items else None

        got = _wait(url, value, 90, programs["keda-metrics-apiserver"].log)
        assert got == expected, (trigger["name"], got, expected)


def _network_or_skip() -> None:
    try:
        netns.check_available()
    except netns.NetworkUnavailable as e:
        pytest.skip(f"no network namespaces here: {e}")


def test_namespaces_reach_each_other_and_the_host_by_service_name() -> None:
    """Two namespaces on the bridge: a Service name set with set_hosts (also for a namespace made
    afterwards) reaches the other's server, the host's address reaches a server on the host, and
    nothing of the run is left afterwards."""
    _network_or_skip()
    fetch = (
        "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
    )
    with netns.bridge(PREFIX) as net:
        server_ns = net.namespace("server")
        net.set_hosts({n: server_ns.address for n in netns.service_names("web", "demo")})
        client = net.namespace("client")  # made after set_hosts: gets the names too
        port = 8080
        served = subprocess.Popen(
            [*server_ns.prefix(), sys.executable, "-m", "http.server", "--bind", "0.0.0.0", str(port)],
            cwd=Path(__file__).parent,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        host, host_port = _serve(net.host_address, b"from the host")
        try:
            for name in ("web.demo.svc", "web.demo.svc.cluster.local"):
                url = f"http://{name}:{port}/{Path(__file__).name}"
                body = _wait(
                    url,
                    lambda url=url: (
                        subprocess.run(
                            [*client.prefix(), sys.executable, "-c", fetch, url],
                            capture_output=True,
                            text=True,
                        ).stdout
                    ),
                    30,
                )
                assert "test_namespaces_reach_each_other" in body
            on_host = subprocess.run(
                [*client.prefix(), sys.executable, "-c", fetch, f"http://{net.host_address}:{host_port}/"],
                capture_output=True,
                text=True,
                check=True,
            )
            assert on_host.stdout.strip() == "from the host"
            assert netns.leftovers(PREFIX), "the bridge and namespaces exist while the block runs"
        finally:
            _stop(served)
            host.shutdown()
            host.server_close()
    assert netns.leftovers(PREFIX) == []


def test_adapter_and_keda_serve_the_rendered_metrics(renders: dict[str, Path], tmp_path: Path) -> None:
    require_binaries(
        missing_binaries(PROGRAMS),
        "twin binaries (prometheus-adapter, KEDA)",
        BUILD_HINT,
        "DEEPSEEK_EKS_REQUIRE_SEAMS",
    )
    if not PROMETHEUS.exists():
        pytest.skip(f"{PROMETHEUS} not built or installed: {INSTALL_HINT}")
    _network_or_skip()
    dev, prod = _objects(renders["dev"]), _objects(renders["prod"])
    hpa = _one(dev, "HorizontalPodAutoscaler")
    scaled = _one(prod, "ScaledObject")
    custom_metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    queue_query = next(
        t for t in scaled["spec"]["triggers"] if "num_requests_waiting" in t["metadata"]["query"]
    )
    model = re.search(r'model_name="([^"]+)"', queue_query["metadata"]["query"])
    assert model, queue_query
    # dcgm-exporter's series as kube-prometheus-stack stores them (exported_* labels: the exporter's
    # own namespace/pod/container labels renamed on the conflict), vLLM's with its model name.
    dcgm = 'gpu="0",exported_namespace="deepseek",exported_pod="vllm-0",exported_container="vllm"'
    vllm = f'namespace="deepseek",pod="vllm-0",container="vllm",model_name="{model[1]}"'
    served = (
        f"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{{{dcgm}}} {GPU_UTIL}\n"
        f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{vllm}}} {WAITING}\n"
    ).encode()

    prometheus_process = None
    with netns.bridge(PREFIX) as net:
        prometheus = net.namespace("prometheus")
        metrics_server, port = _serve(net.host_address, served)
        try:
            flags = ["--enable-aggregator-routing=true"]
            with running_twin(address=net.host_address, extra_flags=flags) as api:
                prometheus_process = _start_prometheus(prometheus, f"{net.host_address}:{port}", tmp_path)
                _wait(
                    "Prometheus scraping the fake exporter",
                    lambda: _query(prometheus.address, "DCGM_FI_DEV_GPU_UTIL"),
                    120,
                    tmp_path / "prometheus.log",
                )
                for obj in [*dev, *prod]:
                    if obj.get("kind") == "Namespace":
                        _create(api, obj)
                account = {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": "deepseek"},
                }
                _create(api, account)  # no controller-manager makes the namespace's default account
                _create(api, _pod("vllm-0", "deepseek"))
                _create(api, hpa)
                _create(api, _one(prod, "Deployment"))  # the ScaledObject's scale target
                api.discover()
                with (
                    metrics_programs(
                        api, net, renders["dev"], tmp_path / "dev", ["prometheus-adapter"], prometheus
                    ) as adapter,
                    metrics_programs(
                        api, net, renders["prod"], tmp_path / "prod", ["keda"], prometheus
                    ) as keda,
                ):
                    assert apiservice_available(api, CUSTOM_METRICS)[0]
                    assert apiservice_available(api, EXTERNAL_METRICS)[0]
                    assert any("Endpoints" in r for r in adapter.rewrites), adapter.rewrites
                    assert any("ValidatingWebhookConfiguration" in r for r in keda.rewrites), keda.rewrites
                    _create(api, scaled)

                    path = (
                        f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/deepseek/pods/vllm-0/{custom_metric}"
                    )

                    def custom() -> Decimal | None:
                        reply = api.call("GET", path)
                        items = reply.body.get("items") or []
                        return _quantity(items[0]["value"]) if reply.ok and items else None

                    # The adapter lists series at start and every --metrics-relist-interval (1m).
                    value = _wait(f"{path}", custom, 150, adapter.programs["prometheus-adapter"].log)
                    assert value == GPU_UTIL

                    name = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"]
                    hpa_path = f"/apis/autoscaling/v2/namespaces/deepseek/horizontalpodautoscalers/{name}"
                    operator_log = keda.programs["keda-operator"].log
                    created = _wait(
                        f"KEDA's HPA {name}",
                        lambda: (r := api.call("GET", hpa_path)).ok and r.body,
                        KEDA_HPA_TIMEOUT_S,
                        operator_log,
                    )
                    _check_external(api, prometheus.address, scaled, created, keda.programs)
                    queries = [t["metadata"]["query"] for t in scaled["spec"]["triggers"]]
                    values = {_served(prometheus.address, q) for q in queries}
                    assert values == {GPU_UTIL, WAITING}  # both triggers read what was served
                for apiservice in (CUSTOM_METRICS, EXTERNAL_METRICS):  # withdrawn with their servers
                    gone = api.call("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{apiservice}")
                    assert gone.status == 404, apiservice
        finally:
            if prometheus_process is not None:
                _stop(prometheus_process)
            metrics_server.shutdown()
            metrics_server.server_close()
    assert netns.leftovers(PREFIX) == []
