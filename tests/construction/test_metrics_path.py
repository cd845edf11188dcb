"""The autoscaling path survives the nodes it runs on (issue 31 §4), as rendered for every example
stack: Prometheus, prometheus-adapter and KEDA's operator and metrics server each keep a replica
through a drain or a lost node, and a metrics gap is an error that KEDA turns into "keep what
runs", never a 0 that scales in.

Every expectation is taken from reference/upstream/metrics-path-facts.json (what KEDA, the HPA
controller and the charts do, read from their source), not from the program's own constants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks import promql
from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components.monitoring.autoscaling import fallback_replicas
from deepseek_eks.guardrails.manifest_gate import check, schema_dir
from deepseek_eks.settings import parse_settings
from tests.conftest import stack_config

ROOT = Path(__file__).parents[2]
FACTS = json.loads((ROOT / "reference/upstream/metrics-path-facts.json").read_text())
CHARTS = FACTS["charts"]
STACKS = ("dev", "prod", "r1")
HOSTNAME = "kubernetes.io/hostname"

# Signals and schedules that put KEDA in charge on the dev stack, beside the prod and r1 files.
SCHEDULE = json.dumps([{"start": "0 8 * * *", "end": "0 18 * * *", "replicas": 2}])
KEDA_VARIANTS: dict[str, dict[str, Any]] = {
    "queue-depth": {"autoscaling__signal": "queue-depth"},
    "combined": {"autoscaling__signal": "combined"},
    "kv-cache": {"autoscaling__signal": "kv-cache"},
    "concurrency": {"autoscaling__signal": "concurrency"},
    "schedule-only": {"autoscaling__schedule": SCHEDULE},
}


def _render(stack: str, **overrides: Any) -> tuple[Rendered, str]:
    config = stack_config(stack, **overrides)
    version = parse_settings(config.values, config.secret_keys, config.stack).kubernetes_version
    return render(config), version


@pytest.fixture(scope="module")
def stacks() -> dict[str, tuple[Rendered, str]]:
    return {stack: _render(stack) for stack in STACKS}


@pytest.fixture(scope="module")
def scaled_objects(stacks) -> dict[str, tuple[dict[str, Any], str]]:
    """Every ScaledObject the stacks and the KEDA variants of dev render, by name."""
    found = {}
    renders = {**stacks, **{f"dev-{name}": _render("dev", **o) for name, o in KEDA_VARIANTS.items()}}
    for name, (rendered, version) in renders.items():
        for obj in rendered.objects():
            if obj["kind"] == "ScaledObject":
                found[name] = (obj, version)
    assert {"prod", "r1"} | {f"dev-{v}" for v in KEDA_VARIANTS} <= found.keys()
    return found


def _values(rendered: Rendered, release: str) -> dict[str, Any]:
    values: dict[str, Any] = rendered.helm[release]["values"]
    return values


def _survives_one_lost_node(replicas: int, max_unavailable: int) -> bool:
    """A budget that lets a drain take at most ``max_unavailable`` of ``replicas`` pods still
    leaves one serving, and ``replicas`` on distinct nodes lose at most one to a lost node."""
    return replicas >= 2 and replicas - max_unavailable >= 1


def _spreads_over_nodes(constraints: list[dict[str, Any]], pod_labels: dict[str, str]) -> bool:
    return any(
        c["topologyKey"] == HOSTNAME
        and c["whenUnsatisfiable"] == "DoNotSchedule"
        and c["maxSkew"] == 1
        and c["labelSelector"] == {"matchLabels": pod_labels}
        for c in constraints
    )


# ---- the pods of the metrics path --------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_keeps_a_replica_through_a_drain_or_a_lost_node(stacks, stack: str) -> None:
    chart = CHARTS["kube-prometheus-stack"]
    # Why the program sets them: one replica and no budget by default.
    assert chart["replicas"]["default"] == 1 and chart["pdb"]["default"]["enabled"] is False
    prometheus = _values(stacks[stack][0], "kube-prometheus-stack")["prometheus"]
    spec = prometheus["prometheusSpec"]
    replicas = spec["replicas"]
    # "hard": required anti-affinity on the chart's topology key, whose default is the hostname.
    assert spec["podAntiAffinity"] == "hard"
    topology_key = chart["anti_affinity"]["topology_key"]["default"]
    assert spec.get("podAntiAffinityTopologyKey", topology_key) == HOSTNAME
    budget = prometheus["podDisruptionBudget"]
    assert budget["enabled"] is True and "maxUnavailable" not in budget
    assert _survives_one_lost_node(replicas, replicas - budget["minAvailable"])
    assert budget["minAvailable"] >= 1
    # No do-not-disrupt on Prometheus: a second replica covers voluntary disruption.
    assert "karpenter.sh/do-not-disrupt" not in json.dumps(spec.get("podMetadata", {}))


@pytest.mark.parametrize("stack", STACKS)
def test_the_adapter_keeps_a_replica_through_a_drain_or_a_lost_node(stacks, stack: str) -> None:
    chart = CHARTS["prometheus-adapter"]
    assert chart["replicas"]["default"] == 1 and chart["pdb"]["default"]["enabled"] is False
    release_name = "prometheus-adapter"  # the helm dict is keyed by release name
    values = _values(stacks[stack][0], release_name)
    budget = values["podDisruptionBudget"]
    assert budget["enabled"] is True
    # The template writes both fields when both are set, which policy/v1 refuses; the chart's
    # minAvailable default is unset, so ours must not set it beside maxUnavailable.
    assert chart["pdb"]["default"]["minAvailable"] is None and "minAvailable" not in budget
    assert _survives_one_lost_node(values["replicas"], budget["maxUnavailable"])
    selector = dict(chart["selector_labels"]["labels"], **{"app.kubernetes.io/instance": release_name})
    assert _spreads_over_nodes(values["topologySpreadConstraints"], selector)


@pytest.mark.parametrize("stack", ["prod", "r1"])
def test_keda_operator_and_metrics_server_keep_a_replica_through_a_drain_or_a_lost_node(
    stacks, stack: str
) -> None:
    chart = CHARTS["keda"]
    values = _values(stacks[stack][0], "keda")
    assert values["crds"] == {"install": True}
    pods = chart["pod_labels"]
    for replicas_key, budget_key, facts_key, labels in (
        ("operator", "operator", "operator", pods["operator"]),
        ("metricsServer", "metricServer", "metrics_server", pods["metrics_server"]),
    ):
        assert chart[f"{facts_key}_replicas"]["default"] == 1
        budget = values["podDisruptionBudget"][budget_key]
        assert set(budget) == {"maxUnavailable"}, budget_key  # a field the chart's PDB template reads
        replicas = values[replicas_key]["replicaCount"]
        assert _survives_one_lost_node(replicas, budget["maxUnavailable"]), replicas_key
        assert _spreads_over_nodes(values["topologySpreadConstraints"][replicas_key], labels), replicas_key


@pytest.fixture(scope="module")
def dev_on_gpu() -> tuple[Rendered, str]:
    """dev on the adapter's metric alone (gpu-utilization, no seasonal floor): an HPA of ours."""
    return _render("dev", autoscaling__signal="gpu-utilization", autoscaling__seasonal="false")


def test_dev_without_keda_installs_no_keda(dev_on_gpu) -> None:
    # On the adapter's metric the path is Prometheus and the adapter, both covered above.
    assert "keda" not in dev_on_gpu[0].helm


# ---- a metrics gap never scales in -------------------------------------------------------------


def test_keda_reads_an_empty_prometheus_result_as_0_unless_told_otherwise() -> None:
    scaler = FACTS["keda"]["prometheus_scaler"]
    assert scaler["metadata_key"] == "ignoreNullValues" and scaler["default"] is True
    assert "0" in scaler["empty_result"]["ignoreNullValues_true"]
    assert "error" in scaler["empty_result"]["ignoreNullValues_false"]


def _prometheus_triggers(scaled: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]


def test_every_prometheus_trigger_turns_an_empty_result_into_an_error(scaled_objects) -> None:
    key = FACTS["keda"]["prometheus_scaler"]["metadata_key"]
    for name, (scaled, _) in scaled_objects.items():
        triggers = _prometheus_triggers(scaled)
        assert triggers, name
        for trigger in triggers:
            # Upstream's default is true (an empty result reads 0), so the value must be there.
            assert trigger["metadata"].get(key) == "false", (name, trigger["name"])


def test_every_prometheus_query_is_empty_on_a_gap_and_0_only_without_vllm_pods(scaled_objects) -> None:
    for name, (scaled, _) in scaled_objects.items():
        namespace = scaled["metadata"]["namespace"]
        guard = promql.zero_without_targets(promql.Scope(namespace=namespace, model_name="any"))
        for trigger in _prometheus_triggers(scaled):
            query = trigger["metadata"]["query"]
            if promql.seasonal_window(query) is not None:
                # A seasonal floor reads 0 without history: a floor of 0 never scales anything
                # in, since the HPA takes the largest metric and the signal's own triggers
                # (guarded as below) hold the count through a gap.
                assert query.endswith(" or vector(0)"), (name, query)
                continue
            assert query.endswith(f" or {guard}"), (name, query)
            assert "or vector(0)" not in query, (name, query)  # 0 whenever the series are missing


def test_the_fallback_never_scales_in_and_never_launches_the_fleet(scaled_objects) -> None:
    fallback_facts = FACTS["keda"]["fallback"]
    executor = FACTS["keda"]["executor_on_error"]
    for name, (scaled, version) in scaled_objects.items():
        spec = scaled["spec"]
        fallback = spec["fallback"]
        assert check(scaled, version, schema_dir()) == [], name  # spec.fallback in the vendored CRD
        assert fallback["behavior"] in fallback_facts["behaviors"]["enum"]
        # max(current replicas, fallback.replicas): never below what runs.
        assert fallback["behavior"] == "currentReplicasIfHigher"
        higher = fallback_facts["behaviors"]["currentReplicasIfHigher"]
        assert "max(current replicas, fallback.replicas)" in higher
        # Not 0: KEDA's executor would take an error for inactivity and scale a minReplicas-0
        # target to zero; not above minReplicaCount (or 1): a gap holds the fleet, it does not grow it.
        assert fallback["replicas"] >= executor["fallback_replicas_must_be_at_least"], name
        assert fallback["replicas"] <= max(spec["minReplicaCount"], 1), name
        assert fallback["failureThreshold"] == fallback_facts["docs_example_failureThreshold"]
        # KEDA refuses a fallback whose triggers are all cpu or memory (CheckFallbackValid).
        assert _prometheus_triggers(scaled), name


def test_a_minreplicas_0_stack_keeps_its_replicas_on_an_error() -> None:
    # Only autoscaling.signal router-queue (with routing.kind llm-d) may scale to zero: the
    # fallback its rendered ScaledObject gets.
    executor = FACTS["keda"]["executor_on_error"]
    assert fallback_replicas(0) == 1 >= executor["fallback_replicas_must_be_at_least"]
    rendered = render(
        stack_config(
            "dev", routing__kind="llm-d", autoscaling__signal="router-queue", autoscaling__minReplicas="0"
        )
    )
    (scaled,) = [o for o in rendered.objects() if o["kind"] == "ScaledObject"]
    assert scaled["spec"]["minReplicaCount"] == 0
    assert scaled["spec"]["fallback"]["replicas"] >= executor["fallback_replicas_must_be_at_least"]


def test_the_hpa_itself_holds_its_count_when_its_only_metric_fails(dev_on_gpu) -> None:
    """An HPA of ours (gpu-utilization) has no fallback to configure: with its one metric missing
    the controller keeps the current count, and an empty custom-metrics answer is an error."""
    hpa = FACTS["kubernetes_hpa"]
    assert "keeps the current replica count" in hpa["only_metric_fails"]
    assert "no metrics returned from custom metrics API" in hpa["empty_metric_list_is_an_error"]
    (ours,) = [o for o in dev_on_gpu[0].objects() if o["kind"] == "HorizontalPodAutoscaler"]
    assert [m["type"] for m in ours["spec"]["metrics"]] == ["Pods"]
