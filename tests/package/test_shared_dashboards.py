"""Two services on one cluster (examples/existing-cluster): the Grafana dashboards are a shared
add-on, installed once by the service with ``install_shared_addons``, and must serve the other
service too (issue 32 §4). Their queries name Grafana variables, never the installing service's
namespace or model; with the other service's values the panels are that service's queries."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from deepseek_eks import promql
from deepseek_eks.automation.render import HELM_TOKENS, kubernetes_manifest
from tests.examples import run_existing_cluster_example

DASHBOARD_LABEL = "grafana_dashboard"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    mocks = run_existing_cluster_example("auto-mode")
    return [
        kubernetes_manifest(r)
        for r in mocks.resources
        if r.type.startswith("kubernetes:") and r.type not in HELM_TOKENS and r.custom
    ]


def served_models(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Namespace -> the model name its alert rules select (vLLM's ``model_name`` label)."""
    out = {}
    for rule in (o for o in objects if o["kind"] == "PrometheusRule"):
        exprs = json.dumps(rule["spec"])
        (model,) = set(re.findall(r'model_name=\\"([^"\\]+)\\"', exprs))
        out[rule["metadata"]["namespace"]] = model
    return out


def boards(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    maps = [
        o for o in objects if o["kind"] == "ConfigMap" and DASHBOARD_LABEL in o["metadata"].get("labels", {})
    ]
    return {key: json.loads(text) for m in maps for key, text in m["data"].items()}


def interpolate(query: str, values: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: values[m[1]], query)


def test_the_dashboards_come_once_and_name_no_service(objects) -> None:
    models = served_models(objects)
    assert set(models) == {"team-a", "team-b"} and len(set(models.values())) == 2
    found = boards(objects)
    assert set(found) == {"deepseek-vllm.json", "deepseek-gpu.json"}  # one of each on the cluster
    text = json.dumps(found)
    for namespace, model in models.items():
        assert f'\\"{namespace}\\"' not in text and model not in text


def test_every_service_on_the_cluster_gets_its_panels_through_the_variables(objects) -> None:
    found = boards(objects)
    for namespace, model in served_models(objects).items():
        scope = promql.Scope(namespace=namespace, model_name=model)
        values = {"namespace": namespace, "model_name": model}
        for key, expected in (
            ("deepseek-vllm.json", promql.vllm_panels),
            ("deepseek-gpu.json", promql.gpu_panels),
        ):
            board = found[key]
            variables = {v["name"] for v in board["templating"]["list"]}
            assert all(
                v["type"] == "query" and v["query"].startswith("label_values(")
                for v in board["templating"]["list"]
            )
            panels = {p["title"]: p["targets"][0]["expr"] for p in board["panels"]}
            assert {set(re.findall(r"\$(\w+)", q)) <= variables for q in panels.values()} == {True}
            assert {t: interpolate(q, values) for t, q in panels.items()} == expected(scope), (key, namespace)
