"""The KV-cache and scheduled-floor signals as rendered: one KEDA ScaledObject (KEDA owns the HPA
whenever a queue, KV-cache or schedule trigger is used), valid against the vendored KEDA CRD
schema, cron trigger metadata exactly the keys KEDA's cron scaler reads, and read back by the
simulator as the same autoscaler."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from deepseek_eks import promql
from deepseek_eks.automation.render import render
from deepseek_eks.components.build import size
from deepseek_eks.guardrails.manifest_gate import check, schema_dir
from deepseek_eks.perf.simulate.stack import (
    CONCURRENCY_TOTAL,
    CRON,
    KV_TOTAL,
    SEASONAL,
    autoscaler_from_objects,
)
from deepseek_eks.settings import SettingsError, parse_settings
from tests.conftest import stack_config
from tests.upstream import hpa_sync_period_s

ROOT = Path(__file__).parents[2]
CRON_FACTS = json.loads((ROOT / "reference/upstream/hpa-keda-controllers.json").read_text())["keda"][
    "cron_scaler"
]
SCHEDULE = json.dumps(
    [
        {"start": "30 7 * * MON-FRI", "end": "0 19 * * MON-FRI", "timezone": "Europe/Paris", "replicas": 2},
        {"start": "0 10 * * SAT", "end": "0 14 * * SAT", "replicas": 1},
    ]
)


def _objects(**overrides: str) -> tuple[list[dict], str]:
    """dev's render with ``overrides``; without the seasonal floor dev sets, unless asked for, so
    each test sees the triggers of the signal it is about."""
    config = stack_config("dev", **{"autoscaling__seasonal": "false", **overrides})
    version = parse_settings(config.values, config.secret_keys, config.stack).kubernetes_version
    return render(config).objects(), version


@pytest.fixture(scope="module")
def kv_and_schedule() -> tuple[list[dict], str]:
    return _objects(
        autoscaling__signal="kv-cache", autoscaling__schedule=SCHEDULE, autoscaling__targetKvCacheUsage="0.8"
    )


def test_kv_cache_and_schedule_render_one_valid_scaled_object(kv_and_schedule) -> None:
    objects, version = kv_and_schedule
    kinds = [o["kind"] for o in objects]
    assert kinds.count("ScaledObject") == 1 and "HorizontalPodAutoscaler" not in kinds
    scaled = next(o for o in objects if o["kind"] == "ScaledObject")
    assert check(scaled, version, schema_dir()) == []
    kv, first, second = scaled["spec"]["triggers"]
    assert kv["type"] == "prometheus" and promql.VLLM_KV_CACHE_USAGE in kv["metadata"]["query"]
    assert float(kv["metadata"]["threshold"]) == 0.8
    for trigger in (first, second):
        assert trigger["type"] == "cron"
        assert sorted(trigger["metadata"]) == sorted(CRON_FACTS["metadata"])
    assert first["metadata"]["timezone"] == "Europe/Paris" and first["metadata"]["desiredReplicas"] == "2"
    assert second["metadata"]["timezone"] == "UTC"  # the default


def test_the_simulator_reads_the_rendered_triggers(kv_and_schedule) -> None:
    objects, _ = kv_and_schedule
    spec = autoscaler_from_objects(objects, "kv-cache")
    assert [m.measures for m in spec.metrics] == [KV_TOTAL, CRON, CRON]
    assert spec.metrics[1].schedule is not None and spec.metrics[1].schedule.replicas == 2


def test_a_schedule_alone_puts_keda_in_charge_of_gpu_utilization() -> None:
    objects, version = _objects(autoscaling__signal="gpu-utilization", autoscaling__schedule=SCHEDULE)
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    assert len(scaled) == 1 and not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    types = [t["type"] for t in scaled[0]["spec"]["triggers"]]
    assert types == ["prometheus", "cron", "cron"]
    assert promql.DCGM_GPU_UTIL in scaled[0]["spec"]["triggers"][0]["metadata"]["query"]
    assert check(scaled[0], version, schema_dir()) == []


def test_bad_schedule_and_kv_target_are_reported_together_with_their_keys() -> None:
    bad = json.dumps(
        [
            {"start": "0 25 * * *", "end": "0 18 * *", "timezone": "Mars/Olympus", "replicas": 2},
            {"start": "0 8 * * *", "end": "0 18 * * *", "replicas": 0},
        ]
    )
    config = stack_config(
        "dev",
        autoscaling__schedule=bad,
        autoscaling__targetKvCacheUsage="1.0",
        autoscaling__signal="kv-cache",
    )
    with pytest.raises(SettingsError) as caught:
        parse_settings(config.values, config.secret_keys, config.stack)
    text = str(caught.value)
    for key, why in [
        ("autoscaling.schedule[0].start", "hour '25' is outside 0-23"),
        ("autoscaling.schedule[0].end", "expected 5"),
        ("autoscaling.schedule[0].timezone", "unknown time zone 'Mars/Olympus'"),
        ("autoscaling.schedule[1].replicas", "greater than or equal to 1"),
        ("autoscaling.targetKvCacheUsage", "less than 1"),
    ]:
        assert f"deepseek-eks:{key}" in text and why in text, key


def test_component_users_set_the_same_settings_in_python_spelling() -> None:
    from deepseek_eks.components.service import service_settings

    floor = {"start": "0 8 * * *", "end": "0 18 * * *", "replicas": 2}
    args = {"autoscaling": {"signal": "kv-cache", "target_kv_cache_usage": 0.8, "schedule": [floor]}}
    auto = service_settings(args, "dev").autoscaling  # type: ignore[arg-type]
    assert auto.target_kv_cache_usage == 0.8 and auto.schedule and auto.schedule[0].timezone == "UTC"
    with pytest.raises(SettingsError, match=r'autoscaling=\{"schedule": \.\.\.\}\[0\]\.start'):
        service_settings({"autoscaling": {"schedule": [{**floor, "start": "0 28 * * *"}]}}, "dev")  # type: ignore[arg-type]


def test_concurrency_renders_a_valid_scaled_object_at_a_share_of_the_planned_batch() -> None:
    objects, version = _objects(
        autoscaling__signal="concurrency",
        autoscaling__targetConcurrencyShare="0.55",  # neither the default 0.7 nor dev's own 0.6
        autoscaling__targetKvCacheUsage="0.75",
    )
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    assert len(scaled) == 1 and not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    assert check(scaled[0], version, schema_dir()) == []
    trigger, kv = scaled[0]["spec"]["triggers"]
    # Beside it, the KV cache: the capacity that binds first when outputs are long.
    assert (
        promql.VLLM_KV_CACHE_USAGE in kv["metadata"]["query"] and float(kv["metadata"]["threshold"]) == 0.75
    )
    query = trigger["metadata"]["query"]
    assert promql.VLLM_RUNNING in query and promql.VLLM_WAITING in query
    # The threshold is per replica: the share of the --max-num-seqs the vLLM container runs with.
    vllm = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm")
    args = next(
        c["args"]
        for c in vllm["spec"]["template"]["spec"]["containers"]
        if "--max-num-seqs" in c.get("args", [])
    )
    max_num_seqs = int(args[args.index("--max-num-seqs") + 1])
    assert float(trigger["metadata"]["threshold"]) == pytest.approx(0.55 * max_num_seqs, abs=0.01)
    spec = autoscaler_from_objects(objects, "concurrency")
    assert [m.measures for m in spec.metrics] == [CONCURRENCY_TOTAL, KV_TOTAL]
    assert spec.metrics[0].target == float(trigger["metadata"]["threshold"])


@pytest.mark.parametrize(("share", "why"), [("0", "greater than 0"), ("1.5", "less than or equal to 1")])
def test_a_concurrency_share_outside_0_to_1_is_refused_by_its_key(share: str, why: str) -> None:
    config = stack_config("dev", autoscaling__signal="concurrency", autoscaling__targetConcurrencyShare=share)
    with pytest.raises(SettingsError) as caught:
        parse_settings(config.values, config.secret_keys, config.stack)
    assert "deepseek-eks:autoscaling.targetConcurrencyShare" in str(caught.value) and why in str(caught.value)


def test_a_concurrency_share_without_the_concurrency_signal_is_named_as_unused() -> None:
    config = stack_config(
        "dev",
        autoscaling__signal="gpu-utilization",
        autoscaling__seasonal="false",
        autoscaling__targetConcurrencyShare="0.5",
    )
    settings = parse_settings(config.values, config.secret_keys, config.stack)
    assert any("autoscaling.targetConcurrencyShare has no effect" in w for w in settings.warnings)


def test_component_users_set_the_concurrency_share_in_python_spelling() -> None:
    from deepseek_eks.components.service import service_settings

    args = {"autoscaling": {"signal": "concurrency", "target_concurrency_share": 0.6}}
    auto = service_settings(args, "dev").autoscaling  # type: ignore[arg-type]
    assert auto.signal.value == "concurrency" and auto.target_concurrency_share == 0.6
    with pytest.raises(SettingsError, match=r'autoscaling=\{"target_concurrency_share": \.\.\.\} = 1\.6'):
        service_settings({"autoscaling": {"target_concurrency_share": 1.6}}, "dev")  # type: ignore[arg-type]


def test_the_concurrency_signal_uses_the_kv_target_without_a_warning() -> None:
    config = stack_config("dev", autoscaling__signal="concurrency", autoscaling__targetKvCacheUsage="0.4")
    settings = parse_settings(config.values, config.secret_keys, config.stack)
    assert not [w for w in settings.warnings if "targetKvCacheUsage" in w]
    scaled = next(o for o in render(config).objects() if o["kind"] == "ScaledObject")
    assert [t["metadata"]["threshold"] for t in scaled["spec"]["triggers"]][1] == "0.4"
    queue = stack_config("dev", autoscaling__signal="queue-depth", autoscaling__targetKvCacheUsage="0.4")
    warned = parse_settings(queue.values, queue.secret_keys, queue.stack).warnings
    assert any("targetKvCacheUsage has no effect" in w and "kv-cache or concurrency" in w for w in warned)


# ---- autoscaling.seasonal ------------------------------------------------------------------------


def test_seasonal_adds_yesterdays_and_last_weeks_demand_one_start_up_ahead() -> None:
    """Two more prometheus triggers beside the signal's, valid against KEDA's schema, each reading
    the demand of one period back over the next start-up (the plan's, plus the query's one-minute
    step and one HPA sync, by which the floor can act late, rounded up to the step) at the
    concurrency signal's per-replica target; the simulator reads the same windows back from the
    rendered queries."""
    config = stack_config("dev", autoscaling__signal="concurrency", autoscaling__seasonal="true")
    settings = parse_settings(config.values, config.secret_keys, config.stack)
    objects = render(config).objects()
    (scaled,) = [o for o in objects if o["kind"] == "ScaledObject"]
    assert check(scaled, settings.kubernetes_version, schema_dir()) == []
    triggers = {t["name"]: t for t in scaled["spec"]["triggers"]}
    day, week = triggers["seasonal-day"], triggers["seasonal-week"]
    startup = size(settings).startup_seconds
    windows = {}
    for trigger in (day, week):
        meta = trigger["metadata"]
        assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
        assert meta["threshold"] == triggers["concurrency"]["metadata"]["threshold"]
        # Never empty (KEDA would hold the replicas on the error): no history reads 0.
        assert meta["query"].endswith(" or vector(0)") and meta["ignoreNullValues"] == "false"
        lead, offset = (int(x) for x in re.search(r"\[(\d+)s:1m\] offset (\d+)s", meta["query"]).groups())
        # A rise of yesterday's demand shows at the subquery's next minute, and the HPA acts on it
        # at its next sync (kube-controller-manager's default period, from its source).
        reaction = 60 + hpa_sync_period_s()
        assert startup + reaction <= lead < startup + reaction + 60 and lead % 60 == 0
        windows[trigger["name"]] = (offset + lead, lead)
    assert windows == {
        "seasonal-day": (86_400, windows["seasonal-day"][1]),
        "seasonal-week": (604_800, windows["seasonal-week"][1]),
    }
    spec = autoscaler_from_objects(objects, "seasonal")
    assert [m.measures for m in spec.metrics] == [CONCURRENCY_TOTAL, KV_TOTAL, SEASONAL, SEASONAL]
    assert [m.window for m in spec.metrics[2:]] == [windows["seasonal-day"], windows["seasonal-week"]]


def test_seasonal_alone_puts_keda_in_charge_and_closes_its_namespace() -> None:
    objects, _ = _objects(autoscaling__signal="gpu-utilization", autoscaling__seasonal="true")
    assert not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    (scaled,) = [o for o in objects if o["kind"] == "ScaledObject"]
    assert [t["name"] for t in scaled["spec"]["triggers"]] == [
        "gpu-utilization",
        "seasonal-day",
        "seasonal-week",
    ]
    keda_policies = [
        o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == "keda"
    ]
    assert keda_policies, "KEDA runs, so its namespace is closed like the signals' that need it"


def test_seasonal_needs_a_retention_that_holds_last_week() -> None:
    config = stack_config("dev", autoscaling__seasonal="true", observability__prometheusRetention="7d")
    with pytest.raises(SettingsError) as caught:
        parse_settings(config.values, config.secret_keys, config.stack)
    text = str(caught.value)
    assert "deepseek-eks:autoscaling.seasonal" in text and "observability.prometheusRetention" in text
    assert "at least 8d" in text and "(it is 7d)" in text
    for fine in ("8d", "2w", "192h"):
        ok = stack_config("dev", autoscaling__seasonal="true", observability__prometheusRetention=fine)
        assert parse_settings(ok.values, ok.secret_keys, ok.stack).autoscaling.seasonal


def test_seasonal_reads_the_concurrency_share_so_setting_it_is_no_unused_warning() -> None:
    config = stack_config(
        "dev",
        autoscaling__signal="gpu-utilization",
        autoscaling__seasonal="true",
        autoscaling__targetConcurrencyShare="0.5",
    )
    warnings = parse_settings(config.values, config.secret_keys, config.stack).warnings
    assert not [w for w in warnings if "targetConcurrencyShare" in w]


def test_component_users_turn_seasonal_on_in_python_spelling() -> None:
    from deepseek_eks.components.service import service_settings

    auto = service_settings({"autoscaling": {"seasonal": True}}, "dev").autoscaling  # type: ignore[arg-type]
    assert auto.seasonal is True


def test_seasonal_with_router_queue_counts_demand_at_the_router() -> None:
    """router-queue may leave no replica running: then the demand waits at the router, so the
    floor reads the router's gauges as the signal does, not vLLM's, which had no pod to count."""
    objects, _ = _objects(
        routing__kind="llm-d",
        autoscaling__signal="router-queue",
        autoscaling__minReplicas="0",
        autoscaling__seasonal="true",
    )
    (scaled,) = [o for o in objects if o["kind"] == "ScaledObject"]
    triggers = {t["name"]: t["metadata"]["query"] for t in scaled["spec"]["triggers"]}
    for name in ("seasonal-day", "seasonal-week"):
        assert promql.ROUTER_QUEUE in triggers[name] and "vllm:" not in triggers[name]
        assert promql.seasonal_window(triggers[name]) is not None  # the simulator reads it back
