"""The real Prometheus (the chart's release, twin/prometheus.py ``prometheus_binaries``) scraping
the vLLM/DCGM stand-in: the rendered
autoscaling queries, as KEDA and prometheus-adapter send them, return what the stand-in serves.

- prod on the ``combined`` signal (KEDA): each prometheus trigger's ``query`` of the rendered
  ScaledObject; and prod as shipped, whose seasonal triggers read 0 with no history.
- dev (HPA through prometheus-adapter): the adapter rule of helm/prometheus-adapter.yaml, its
  ``seriesQuery`` and its ``metricsQuery`` filled the way the adapter fills it for the pods of
  namespace deepseek (sigs.k8s.io/prometheus-adapter v0.12.0 pkg/naming/metrics_query.go
  ``metricsQuery.Build``: ``LabelMatchers`` = the namespace label ``="deepseek"`` then the pod
  label ``="a"``, or ``=~"a|b"`` for several pods (prom.LabelEq / prom.LabelMatches), joined by
  commas; ``GroupBy`` = the pod resource's label; the resource labels from the rule's
  ``resources.overrides``; templates delimited by ``<<``/``>>``, pkg/config).

Skips without a Prometheus unless DEEPSEEK_EKS_REQUIRE_TOOLS=1."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from deepseek_eks.automation.render import render, write
from deepseek_eks.twin import prometheus as prometheus_module
from deepseek_eks.twin.binaries import BinariesMissing
from deepseek_eks.twin.prometheus import (
    INSTALL_HINT,
    PROMETHEUS,
    PROMTOOL,
    Prometheus,
    running_prometheus,
)
from deepseek_eks.twin.server import LOOPBACK, TwinError, free_port
from deepseek_eks.twin.standin import PodRef, StandIn
from tests.conftest import stack_config
from tests.twin.conftest import ManualClock, require_binaries

A = PodRef("deepseek", "vllm-a", "node-a")
B = PodRef("deepseek", "vllm-b", "node-b")
C = PodRef("deepseek", "vllm-c", "node-c")  # scheduled, loading its weights
SCRAPE_S = 0.5  # compressed from the render's 15 s, so each test stays within seconds


def require_prometheus() -> None:
    absent = [p for p in (PROMETHEUS, PROMTOOL) if not os.access(p, os.X_OK)]
    require_binaries(absent, "Prometheus", INSTALL_HINT, "DEEPSEEK_EKS_REQUIRE_TOOLS")


def _objects(folder: Path) -> list[dict[str, Any]]:
    paths = sorted((folder / "kubernetes").glob("*.yaml"))
    return [o for p in paths for o in yaml.safe_load_all(p.read_text()) if o]


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_prometheus()
    out = tmp_path_factory.mktemp("renders")
    combined = stack_config("prod", autoscaling__signal="combined", autoscaling__seasonal="false")
    return {
        "dev": write(render(stack_config("dev")), out / "dev"),
        "prod": write(render(stack_config("prod")), out / "prod"),
        "prod-combined": write(render(combined), out / "prod-combined"),
    }


Scraped = tuple[StandIn, Prometheus, Callable[[], None], ManualClock]


@pytest.fixture
def scraped(tmp_path: Path, renders: dict[str, Path]) -> Iterator[Callable[[str], Scraped]]:
    """Start the stand-in's server and Prometheus for a stack; the third item re-publishes the
    stand-in's targets after a change of pods, the fourth is the stand-in's clock."""
    with contextlib.ExitStack() as stack:

        def start(name: str) -> Scraped:
            clock = ManualClock()
            standin = StandIn.from_render(renders[name], clock=clock)
            base = stack.enter_context(standin.serving(LOOPBACK, 0)).removeprefix("http://")
            listen = f"{LOOPBACK}:{free_port()}"
            prometheus = stack.enter_context(
                running_prometheus(renders[name], tmp_path / name, listen, scrape_interval_s=SCRAPE_S)
            )
            return standin, prometheus, lambda: prometheus.set_targets(standin.targets(base)), clock

        yield start


def _value(result: list[dict[str, Any]]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def _eventually(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Until ``check`` holds (the next scrapes after a change), at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "Prometheus did not reach the stand-in's values"
        time.sleep(0.2)


def test_keda_triggers_read_the_standin(scraped: Any, renders: dict[str, Path]) -> None:
    standin, prometheus, publish, clock = scraped("prod-combined")
    triggers = [
        t
        for o in _objects(renders["prod-combined"])
        if o["kind"] == "ScaledObject"
        for t in o["spec"]["triggers"]
        if t["type"] == "prometheus"
    ]
    assert {t["name"] for t in triggers} == {"queue-depth", "gpu-utilization"}
    # Overloaded: two ready replicas at 1.5 times their saturated rate each, for a minute, so
    # requests wait.
    standin.set_state(3 * standin.saturated_rps, [A, B])
    clock.now += 60.0
    publish()
    values = standin.values()
    expected = {
        "queue-depth": sum(v["vllm:num_requests_waiting"] for v in values.values()),
        "gpu-utilization": sum(v["DCGM_FI_DEV_GPU_UTIL"] for v in values.values()),
    }
    assert expected["queue-depth"] > 0 and expected["gpu-utilization"] > 0
    prometheus.wait_series("vllm:num_requests_waiting", 20)
    for trigger in triggers:
        want = expected[trigger["name"]]
        _eventually(functools.partial(_answers, prometheus, trigger["metadata"]["query"], want))
    # The load falls to nothing: both queries follow to 0 (the rendered fallback for "no target
    # up" is not what answers: the targets are up and report 0).
    standin.set_state(0.0, [A, B])
    clock.now += 2 * 3600.0  # the queue drained and the last requests done
    for trigger in triggers:
        _eventually(functools.partial(_answers, prometheus, trigger["metadata"]["query"], 0.0))


def _answers(prometheus: Prometheus, query: str, expected: float) -> bool:
    return _close(prometheus.query(query), expected)


def _close(result: list[dict[str, Any]], expected: float) -> bool:
    return len(result) == 1 and abs(float(result[0]["value"][1]) - expected) <= 1e-6 * max(1.0, expected)


def _adapter_rule(folder: Path) -> dict[str, Any]:
    values = yaml.safe_load((folder / "helm" / "prometheus-adapter.yaml").read_text())["values"]
    (rule,) = values["rules"]["custom"]
    return dict(rule)


def _fill(rule: dict[str, Any], namespace: str, pods: list[str]) -> str:
    """The adapter's metricsQuery for pods ``pods`` of ``namespace`` (see the module docstring)."""
    overrides = rule["resources"]["overrides"]
    label = {res["resource"]: name for name, res in overrides.items()}
    pod_matcher = f'{label["pod"]}="{pods[0]}"' if len(pods) == 1 else f'{label["pod"]}=~"{"|".join(pods)}"'
    matchers = f'{label["namespace"]}="{namespace}",{pod_matcher}'
    query = str(rule["metricsQuery"])
    return query.replace("<<.LabelMatchers>>", matchers).replace("<<.GroupBy>>", label["pod"])


def test_adapter_rule_reads_the_standin(scraped: Any, renders: dict[str, Path]) -> None:
    standin, prometheus, publish, _ = scraped("dev")
    rule = _adapter_rule(renders["dev"])
    # A light load, so that the utilization is a fraction (busy part of the time), and a third
    # pod still loading: dcgm-exporter maps its GPU to it and it reads 0.
    standin.set_state(0.02, [A, B], loading=[C])
    publish()
    values = standin.values()
    assert 0 < values[A.name]["DCGM_FI_DEV_GPU_UTIL"] < 100
    pods = [A.name, B.name, C.name]
    query = _fill(rule, "deepseek", pods)
    assert "<<" not in query
    prometheus.wait_series(rule["seriesQuery"], 20)

    def matches() -> bool:
        result = prometheus.query(query)
        got = {r["metric"].get("exported_pod"): float(r["value"][1]) for r in result}
        want = {p: values[p]["DCGM_FI_DEV_GPU_UTIL"] for p in pods}
        return got.keys() == want.keys() and all(abs(got[p] - want[p]) < 1e-6 for p in pods)

    _eventually(matches)
    # The series the adapter discovers: one per pod and GPU, each with the labels its
    # resources.overrides map to namespace and pod.
    series = prometheus.query(rule["seriesQuery"])
    assert {s["metric"]["exported_pod"] for s in series} == set(pods)
    assert {s["metric"]["exported_namespace"] for s in series} == {"deepseek"}
    # One pod alone: the adapter's single-pod matcher.
    alone = _fill(rule, "deepseek", [A.name])
    _eventually(lambda: _close(prometheus.query(alone), values[A.name]["DCGM_FI_DEV_GPU_UTIL"]))


def test_rendered_rules_load(scraped: Any, renders: dict[str, Path]) -> None:
    # promtool checked them before start; Prometheus itself lists every rendered group.
    _, prometheus, _, _ = scraped("prod")
    groups = httpx.get(f"{prometheus.url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    rendered = [
        g for o in _objects(renders["prod"]) if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"]
    ]
    assert rendered
    assert {g["name"]: len(g["rules"]) for g in groups} == {g["name"]: len(g["rules"]) for g in rendered}


def test_a_failed_start_says_why(tmp_path: Path, renders: dict[str, Path]) -> None:
    # An address this machine does not have: Prometheus cannot listen and exits; the error
    # carries its log's tail.
    with (
        pytest.raises(TwinError, match=r"(?s)exited.*192\.0\.2\.1:9090"),
        running_prometheus(renders["dev"], tmp_path, "192.0.2.1:9090"),
    ):
        pass


def test_missing_prometheus_is_binaries_missing(
    tmp_path: Path, renders: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus_module, "PROMETHEUS", tmp_path / "absent")
    with (
        pytest.raises(BinariesMissing),
        running_prometheus(renders["dev"], tmp_path, f"{LOOPBACK}:{free_port()}"),
    ):
        pass


def test_the_seasonal_triggers_read_0_without_history(scraped: Any, renders: dict[str, Path]) -> None:
    """prod as shipped: with the replicas busy now and nothing a day or a week back, the seasonal
    queries answer 0 (one element), not an empty result KEDA would take as an error."""
    standin, prometheus, publish, _ = scraped("prod")
    seasonal = [
        t["metadata"]["query"]
        for o in _objects(renders["prod"])
        if o["kind"] == "ScaledObject"
        for t in o["spec"]["triggers"]
        if t["name"].startswith("seasonal-")
    ]
    assert len(seasonal) == 2
    standin.set_state(3 * standin.saturated_rps, [A, B])
    publish()
    prometheus.wait_series("vllm:num_requests_waiting", 20)
    for query in seasonal:
        _eventually(functools.partial(_answers, prometheus, query, 0.0))
