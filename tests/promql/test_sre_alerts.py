"""Alerts an SRE would keep and dashboards every service can use (issue 32 §4), run in real
Prometheus (``promtool test rules``):

- the GPU XID alerts split by NVIDIA's Xid catalog (``reference/upstream/nvidia-xid-catalog.json``,
  read here, not the module's constants) and fire on a change of the last XID, not on the gauge's
  value, which dcgm-exporter never resets (NVIDIA/dcgm-exporter#500);
- ``VllmNoTargetsUp`` is quiet while the autoscaler wants zero replicas;
- ``VllmReplicasAtMax`` needs the queue or the time to first token over its SLO;
- the dashboards' Grafana variables pick any service's namespace and served model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from deepseek_eks.promql import (
    DCGM_GPU_UTIL,
    DCGM_XID,
    KSM_HPA_CURRENT,
    KSM_HPA_DESIRED,
    KSM_HPA_MAX,
    VLLM_QUEUE_TIME,
    VLLM_RUNNING,
    VLLM_TTFT,
    VLLM_WAITING,
    XID_APP_ACTIONS,
    XID_RESET_ACTIONS,
    XID_WINDOW,
    Scope,
    Slo,
    alerts,
    dashboards,
    gpu_panels,
    vllm_panels,
)
from tests.promql.promtool import (
    dcgm_series,
    require_promtool,
    run_rule_test,
    series,
    vllm_histogram,
    vllm_labels,
    vllm_series,
    xid_series,
)

ROOT = Path(__file__).resolve().parents[2]
CATALOG = json.loads((ROOT / "reference" / "upstream" / "nvidia-xid-catalog.json").read_text())
SCOPE = Scope(namespace="deepseek", model_name="r1-distill-qwen-7b")
OTHER = Scope(namespace="research", model_name="r1-distill-llama-70b")
HPA = "keda-hpa-vllm"
ALERTS = {a.name: a for a in alerts(SCOPE, Slo(), hpa_name=HPA)}
OURS = ("deepseek", "vllm-a", "vllm")


def rule_group() -> dict:
    return {
        "name": "vllm",
        "rules": [
            {"alert": a.name, "expr": a.expr, "for": a.for_, "labels": {"severity": a.severity}}
            for a in ALERTS.values()
        ],
    }


def node_ip(index: int) -> str:
    return f"10.42.{1 + index // 200}.{10 + index % 200}"


def hostname(ip: str) -> str:
    return "ip-" + ip.replace(".", "-") + ".ec2.internal"


def gpu_kw(index: int, gpu: int = 0, workload: tuple[str, str, str] | None = OURS) -> dict:
    """One GPU per node, each node its own dcgm-exporter pod."""
    return {
        "gpu": gpu,
        "node_ip": node_ip(index),
        "exporter_pod": f"dcgm-exporter-{index:05d}",
        "workload": workload,
    }


def alert_test(inputs: list[dict], checks: list[tuple[str, str, list[dict]]]) -> dict:
    return {
        "interval": "1m",
        "input_series": inputs,
        "alert_rule_test": [{"eval_time": t, "alertname": n, "exp_alerts": exp} for t, n, exp in checks],
    }


# ---- 1. GPU XID alerts: NVIDIA's immediate action decides the alert --------------------------


def catalog_classes() -> dict[str, dict]:
    """Alert name -> {severity, codes}, from the vendored catalog."""
    out = {}
    for cls in CATALOG["classes"].values():
        codes = [c["code"] for c in CATALOG["codes"] if c["immediate_action"] in cls["immediate_actions"]]
        out[cls["alert"]] = {"severity": cls["severity"], "codes": codes}
    return out


def test_the_catalog_file_gives_each_code_one_immediate_action_and_its_source() -> None:
    assert CATALOG["catalog"]["url"] == "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
    assert CATALOG["catalog"]["column"] == "Resolution Bucket (Immediate Action)"
    codes = [c["code"] for c in CATALOG["codes"]]
    assert len(codes) == len(set(codes))
    not_alerted = {c for cs in CATALOG["not_alerted"]["by_immediate_action"].values() for c in cs}
    assert not not_alerted & set(codes)
    # Rows of the page itself (its opening rows, as stored): 8, 11, 13 are RESTART_APP.
    by_code = {c["code"]: c["immediate_action"] for c in CATALOG["codes"]}
    assert by_code[8] == by_code[11] == by_code[13] == "RESTART_APP"
    assert by_code[79] == "RESTART_BM" and by_code[95] == by_code[119] == "RESET_GPU"
    # The module names the same buckets (its codes are checked by running the alerts below).
    assert tuple(CATALOG["classes"]["reset"]["immediate_actions"]) == XID_RESET_ACTIONS
    assert tuple(CATALOG["classes"]["application"]["immediate_actions"]) == XID_APP_ACTIONS


def test_each_alerted_xid_raises_the_alert_of_its_catalog_class_and_no_other(tmp_path: Path) -> None:
    """Every code of the catalog file, and some it leaves out (43 and 63 IGNORE, 48 and 74 a
    workflow), each on its own GPU, changes from 0 at minute 20: at minute 25 each alerted code is
    in exactly the alert its immediate action names, with that alert's severity."""
    require_promtool()
    classes = catalog_classes()
    assert set(classes) == {"GpuXidError", "GpuXidApplicationError"} <= set(ALERTS)
    for name, cls in classes.items():
        assert ALERTS[name].severity == cls["severity"], name
    others = CATALOG["not_alerted"]["by_immediate_action"]
    quiet = [43, 63, 48, 74]
    assert {43, 63} <= set(others["IGNORE"]) and others["WORKFLOW_XID_48"] == [48]
    texts = {c["code"]: c["description"] for c in CATALOG["codes"]}
    inputs, expected = [], {name: [] for name in classes}
    for index, code in enumerate([*texts, *quiet]):
        kw = gpu_kw(index)
        inputs += [
            xid_series(0, "No Error", "0x19 stale", **kw),
            xid_series(code, texts.get(code, "Unknown Error"), "_x20 " + f"{code}x10", **kw),
        ]
        for name, cls in classes.items():
            if code in cls["codes"]:
                labels = {
                    "severity": cls["severity"],
                    "Hostname": hostname(node_ip(index)),
                    "gpu": "0",
                    "exported_pod": "vllm-a",
                    "err_code": str(code),
                    "err_msg": texts[code],
                }
                expected[name].append({"exp_labels": labels})
    assert sum(len(v) for v in expected.values()) == len(texts)  # every catalog code is alerted once
    checks = [("25m", name, exp) for name, exp in expected.items()]
    checks += [("19m", name, []) for name in expected]  # nothing before the change
    run_rule_test(tmp_path, [rule_group()], [alert_test(inputs, checks)])


def test_an_xid_alert_follows_the_change_not_the_gauge(tmp_path: Path) -> None:
    """The gauge keeps 79 after the window: the alert resolves. A GPU that already held 79 when a
    new vLLM pod got it, an exporter restart (back to 0, a new exporter pod label), and a change on
    another namespace's GPU raise nothing."""
    require_promtool()
    window = int(XID_WINDOW.removesuffix("m"))
    changed = gpu_kw(0)
    inputs = [
        xid_series(0, "No Error", "0x4 stale", **changed),
        xid_series(79, "GPU has fallen off the bus", "_x5 79x40", **changed),
        # A stale 79 seen first by an old pod, then by its successor on the same GPU.
        xid_series(
            79,
            "GPU has fallen off the bus",
            "79x10 stale",
            **gpu_kw(1, workload=(*OURS[:1], "vllm-old", "vllm")),
        ),
        xid_series(
            79,
            "GPU has fallen off the bus",
            "_x11 79x29",
            **gpu_kw(1, workload=(*OURS[:1], "vllm-new", "vllm")),
        ),
        # The exporter restarts at minute 20: the value is 0 again, under a new exporter pod.
        xid_series(79, "GPU has fallen off the bus", "79x19 stale", **gpu_kw(2)),
        xid_series(0, "No Error", "_x20 0x20", **(gpu_kw(2) | {"exporter_pod": "dcgm-exporter-restarted"})),
        # Another namespace's vLLM GPU.
        xid_series(0, "No Error", "0x4 stale", **gpu_kw(3, workload=("research", "vllm-a", "vllm"))),
        xid_series(
            95, "Uncontained ECC error", "_x5 95x35", **gpu_kw(3, workload=("research", "vllm-a", "vllm"))
        ),
    ]
    firing = [
        {
            "exp_labels": {
                "severity": "critical",
                "Hostname": hostname(node_ip(0)),
                "gpu": "0",
                "exported_pod": "vllm-a",
                "err_code": "79",
                "err_msg": "GPU has fallen off the bus",
            }
        }
    ]
    checks = [
        ("4m", "GpuXidError", []),
        ("6m", "GpuXidError", firing),
        (f"{5 + window - 1}m", "GpuXidError", firing),
        (f"{5 + window + 1}m", "GpuXidError", []),
        ("30m", "GpuXidError", []),
        ("30m", "GpuXidApplicationError", []),
    ]
    run_rule_test(
        tmp_path,
        [rule_group()],
        [
            {
                **alert_test(inputs, checks),
                # The gauge still says 79 long after: the old alert would still fire.
                "promql_expr_test": [
                    {
                        "expr": f'{DCGM_XID}{{Hostname="{hostname(node_ip(0))}"}} > 0',
                        "eval_time": "30m",
                        "exp_samples": [
                            {
                                "labels": xid_series(79, "GPU has fallen off the bus", "", **changed)[
                                    "series"
                                ],
                                "value": 79,
                            }
                        ],
                    }
                ],
            }
        ],
    )


# ---- 2. VllmNoTargetsUp and an intended scale to zero -----------------------------------------

KSM = {
    "container": "kube-state-metrics",
    "job": "kube-state-metrics",
    "instance": "10.42.0.7:8080",
    "namespace": "deepseek",
    "horizontalpodautoscaler": HPA,
}
TARGET = {"pod": "vllm-a", "pod_ip": "10.42.2.9", "engine": None}
NO_TARGETS_FIRING = [
    {"exp_labels": {"severity": "critical", "namespace": "deepseek", "container": "vllm"}},
]


def test_no_targets_is_quiet_while_the_autoscaler_wants_zero_replicas(tmp_path: Path) -> None:
    """minReplicas 0: KEDA holds the workload at zero and the HPA reports 0 desired replicas
    (ScalingDisabled). No target (or a last one going down) is then the intent, not an outage; with
    replicas desired, or with another service's HPA at zero, the same series page."""
    require_promtool()
    gone = series("up", vllm_labels(**TARGET), "0x4 stale")  # the last pod scaled in at minute 5
    zero = series(KSM_HPA_DESIRED, KSM, "0x30")
    wanted = series(KSM_HPA_DESIRED, KSM, "2x30")
    theirs = series(KSM_HPA_DESIRED, KSM | {"namespace": "research"}, "0x30")
    down = series("up", vllm_labels(**TARGET), "0x30")
    name = "VllmNoTargetsUp"
    run_rule_test(
        tmp_path,
        [rule_group()],
        [
            alert_test([zero], [("10m", name, []), ("25m", name, [])]),
            alert_test([zero, gone], [("10m", name, []), ("25m", name, [])]),
            alert_test([zero, down], [("25m", name, [])]),
            alert_test([wanted], [("4m", name, []), ("10m", name, NO_TARGETS_FIRING)]),
            alert_test([wanted, down], [("10m", name, [{"exp_labels": {"severity": "critical"}}])]),
            alert_test([theirs], [("10m", name, NO_TARGETS_FIRING)]),
        ],
    )


# ---- 3. VllmReplicasAtMax: at max and over an SLO ---------------------------------------------

TTFT_BUCKETS = (0.5, 1, 2.5, 5, 10, 20)
QUEUE_BUCKETS = (1, 5, 10, 30, 60, 120)
PODS = ({"pod": "vllm-a", "pod_ip": "10.42.2.9"}, {"pod": "vllm-b", "pod_ip": "10.42.2.10"})


def hist(name: str, buckets: tuple, per_minute: dict) -> list[dict]:
    return [s for pod in PODS for s in vllm_histogram(name, buckets, per_minute, **pod)]


def test_replicas_at_max_needs_the_queue_or_ttft_over_its_slo(tmp_path: Path) -> None:
    require_promtool()
    at_max = [series(KSM_HPA_CURRENT, KSM, "3x30"), series(KSM_HPA_MAX, KSM, "3x30")]
    below = [series(KSM_HPA_CURRENT, KSM, "2x30"), series(KSM_HPA_MAX, KSM, "3x30")]
    fast = hist(VLLM_TTFT, TTFT_BUCKETS, {0.5: 20})
    slow = hist(VLLM_TTFT, TTFT_BUCKETS, {1: 2, 10: 18})  # p95 9.7 s > 5 s
    short_wait = hist(VLLM_QUEUE_TIME, QUEUE_BUCKETS, {1: 20})
    long_wait = hist(VLLM_QUEUE_TIME, QUEUE_BUCKETS, {1: 2, 60: 18})  # p95 58 s > 30 s
    firing = [{"exp_labels": {"severity": "warning", **KSM}}]
    name = "VllmReplicasAtMax"
    run_rule_test(
        tmp_path,
        [rule_group()],
        [
            alert_test(at_max + fast + long_wait, [("14m", name, []), ("25m", name, firing)]),
            alert_test(at_max + slow + short_wait, [("25m", name, firing)]),
            alert_test(at_max + fast + short_wait, [("25m", name, [])]),  # busy and serving well
            alert_test(below + slow + long_wait, [("25m", name, [])]),  # the autoscaler can still add
        ],
    )


# ---- 4. dashboards: one per cluster, every service through its variables ----------------------


def interpolate(query: str, values: dict[str, str]) -> str:
    """What Grafana sends Prometheus for single-value variables."""
    return re.sub(r"\$(\w+)", lambda m: values[m[1]], query)


def test_the_dashboards_hold_no_service_and_name_only_their_variables() -> None:
    for board in dashboards():
        names = [v.name for v in board.variables]
        assert "namespace" in names
        for query in [*board.panels.values(), *(v.selector for v in board.variables)]:
            assert set(re.findall(r"\$(\w+)", query)) <= set(names), query
            assert "deepseek" not in query and "r1-" not in query, query


def test_the_panels_with_a_services_values_are_that_services_queries() -> None:
    vllm, gpu = dashboards()
    for scope in (SCOPE, OTHER):
        values = {"namespace": scope.namespace, "model_name": scope.model_name}
        assert {t: interpolate(q, values) for t, q in vllm.panels.items()} == vllm_panels(scope)
        assert {t: interpolate(q, values) for t, q in gpu.panels.items()} == gpu_panels(scope)


def test_the_variables_offer_every_services_namespace_and_model(tmp_path: Path) -> None:
    """Two services on one cluster: the namespace variables list both, the model variable the one
    of the chosen namespace, and a panel with the second service's values shows its pods only."""
    require_promtool()
    vllm, gpu = dashboards()
    ns_var, model_var = vllm.variables
    (gpu_ns_var,) = gpu.variables
    inputs = [
        vllm_series(VLLM_RUNNING, "2x10", pod="vllm-a", pod_ip="10.42.2.9"),
        vllm_series(VLLM_WAITING, "1x10", pod="vllm-a", pod_ip="10.42.2.9"),
        vllm_series(
            VLLM_RUNNING,
            "5x10",
            pod="vllm-b",
            pod_ip="10.42.3.9",
            namespace="research",
            model_name=OTHER.model_name,
        ),
        vllm_series(
            VLLM_WAITING,
            "7x10",
            pod="vllm-b",
            pod_ip="10.42.3.9",
            namespace="research",
            model_name=OTHER.model_name,
        ),
        dcgm_series(DCGM_GPU_UTIL, "40x10", **gpu_kw(0)),
        dcgm_series(DCGM_GPU_UTIL, "90x10", **gpu_kw(1, workload=("research", "vllm-b", "vllm"))),
        dcgm_series(DCGM_GPU_UTIL, "10x10", **gpu_kw(2, workload=("embeddings", "embedder-0", "embedder"))),
    ]
    other = {"namespace": "research", "model_name": OTHER.model_name}
    tests = [
        (ns_var.promql(), [('{namespace="deepseek"}', 1), ('{namespace="research"}', 1)]),
        (interpolate(model_var.promql(), other), [(f'{{model_name="{OTHER.model_name}"}}', 1)]),
        (
            gpu_ns_var.promql(),
            [('{exported_namespace="deepseek"}', 1), ('{exported_namespace="research"}', 1)],
        ),
        (interpolate(vllm.panels["Requests waiting"], other), [('{pod="vllm-b"}', 7)]),
        (interpolate(gpu.panels["GPU utilization (%)"], other), [('{exported_pod="vllm-b",gpu="0"}', 90)]),
    ]
    run_rule_test(
        tmp_path,
        [],
        [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": "5m",
                        "exp_samples": [{"labels": lbls, "value": value} for lbls, value in samples],
                    }
                    for expr, samples in tests
                ],
            }
        ],
    )
