"""The simulator's HPA controller against the worked examples of the Kubernetes documentation
(kubernetes/website content/en/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale.md,
"Algorithm details", "Scaling policies", "Stabilization window", "Default Behavior") and KEDA's
documented activation and cooldown (keda-docs reference/scaledobject-spec.md). Every expected
number below is computed by hand from the quoted text, never taken from the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eks.perf.simulate.hpa import (
    Behavior,
    HorizontalController,
    KedaActivation,
    PodSample,
    external_average_value_replicas,
    pods_metric_replicas,
)

# An HPA with a behavior object and nothing in it: every API default filled in.
DEFAULTS = Behavior.from_spec({})
UPSTREAM = json.loads(
    (Path(__file__).parents[2] / "reference/upstream/hpa-keda-controllers.json").read_text()
)


def running(*values: float | None) -> list[PodSample]:
    return [PodSample("Running", value=v) for v in values]


# "if the current metric value is 200m, and the desired value is 100m, the number of replicas
# will be doubled, since 200.0 / 100.0 == 2.0 If the current value is instead 50m, you'll halve
# the number of replicas, since 50.0 / 100.0 == 0.5."
@pytest.mark.parametrize(("value", "expected"), [(0.200, 8), (0.050, 2)])
def test_ratio_doubles_or_halves_replicas(value: float, expected: int) -> None:
    assert pods_metric_replicas(4, running(value, value, value, value), 0.100, DEFAULTS) == expected


# "The control plane skips any scaling action if the ratio is sufficiently close to 1.0 (within
# a globally-configurable tolerance, 0.1 by default)."
@pytest.mark.parametrize(
    ("value", "expected"),
    [(108.0, 10), (92.0, 10), (115.0, 12), (85.0, 9)],  # ratios 1.08 / 0.92 stay; 1.15 / 0.85 move
)
def test_tolerance_of_ten_percent(value: float, expected: int) -> None:
    assert pods_metric_replicas(10, running(*[value] * 10), 100.0, DEFAULTS) == expected
    assert external_average_value_replicas(10, value * 10, 100.0, DEFAULTS) == expected


# "If there were any missing metrics, the control plane recomputes the average more
# conservatively, assuming those pods were consuming 100% of the desired value in case of a
# scale down, and 0% in case of a scale up." and "pods ... not yet ready ... set aside".
def test_missing_pods_damp_scale_up() -> None:
    # 2 pods at 150 (target 100) and 2 without samples: ratio 1.5 would ask ceil(1.5*2)=3 of the
    # measured pods; re-averaged with 0 for the missing: (150+150+0+0)/4 = 75 -> ratio 0.75 flips
    # direction, so the controller keeps the current 4.
    assert pods_metric_replicas(4, running(150.0, 150.0, None, None), 100.0, DEFAULTS) == 4
    # 2 at 300 and 2 missing: (300+300+0+0)/4 = 150 -> ratio 1.5 -> ceil(1.5*4) = 6.
    assert pods_metric_replicas(4, running(300.0, 300.0, None, None), 100.0, DEFAULTS) == 6


def test_missing_pods_damp_scale_down() -> None:
    # 2 pods at 20 (target 100), 2 missing counted at the target: (20+20+100+100)/4 = 60 ->
    # ratio 0.6 -> ceil(0.6*4) = 3 (not ceil(0.2*2) = 1).
    assert pods_metric_replicas(4, running(20.0, 20.0, None, None), 100.0, DEFAULTS) == 3


def test_deleting_pods_are_dropped_not_counted_at_zero() -> None:
    # groupPods (v1.34.12): a pod with a deletionTimestamp is "ignored": its sample is removed and
    # never re-added, unlike a Pending pod ("unready"), counted at 0 when scaling up.
    assert "never re-added" in UPSTREAM["kubernetes"]["group_pods"]["deleting_or_failed"]
    deleting = [*running(200.0, 200.0), PodSample("Running", deleting=True, value=0.0)]
    deleting += [PodSample("Running", deleting=True)]
    # Only the two live pods count: ratio 2.0 -> ceil(2.0 * 2) = 4.
    assert pods_metric_replicas(2, deleting, 100.0, DEFAULTS) == 4
    pending = [*running(200.0, 200.0), PodSample("Pending"), PodSample("Pending")]
    # Pending pods at 0: (200 + 200 + 0 + 0) / 4 = 100 -> within tolerance: keep 2.
    assert pods_metric_replicas(2, pending, 100.0, DEFAULTS) == 2


def test_pending_pods_count_as_zero_only_when_scaling_up() -> None:
    pods = [*running(200.0, 200.0), PodSample("Pending"), PodSample("Pending")]
    # (200+200+0+0)/4 = 100 -> ratio 1.0 -> within tolerance after re-averaging: keep 4.
    assert pods_metric_replicas(4, pods, 100.0, DEFAULTS) == 4
    pods = [*running(50.0, 50.0), PodSample("Pending"), PodSample("Running", deleting=True)]
    # Scale down ignores them: ratio 0.5 over the 2 measured pods -> ceil(0.5*2) = 1.
    assert pods_metric_replicas(4, pods, 100.0, DEFAULTS) == 1


def test_no_samples_is_a_failed_metric_and_blocks_scale_down() -> None:
    assert pods_metric_replicas(3, [PodSample("Pending")] * 3, 100.0, DEFAULTS) is None
    hpa = HorizontalController(1, 10, Behavior.from_spec({"scaleDown": {"stabilizationWindowSeconds": 0}}))
    assert hpa.reconcile(0.0, 5, [2, None]) == 5  # the failed metric might be the one that holds load
    assert hpa.reconcile(15.0, 5, [7, None]) == 7  # scale-up still allowed


# "Scaling policies": scale down with Pods 4/60 s and Percent 10/60 s. "if there are 80 replicas
# and the target has to be scaled down to 10 replicas then during the first step 8 replicas will
# be reduced. In the next iteration when the number of replicas is 72, 10% of the pods is 7.2 but
# the number is rounded up to 8. ... When the number of replicas falls below 40 the first policy
# (Pods) is applied and 4 replicas will be reduced at a time."
DOC_SCALE_DOWN = Behavior.from_spec(
    {
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 60},
                {"type": "Percent", "value": 10, "periodSeconds": 60},
            ],
        }
    }
)


def test_doc_scale_down_policies_80_to_10() -> None:
    hpa = HorizontalController(1, 100, DOC_SCALE_DOWN)
    assert hpa.reconcile(0.0, 80, [10]) == 72  # 8 removed (10 % of 80)
    assert hpa.reconcile(15.0, 72, [10]) == 72  # the 60 s period still holds the 8 removed
    assert hpa.reconcile(61.0, 72, [10]) == 64  # 72 -> 7.2, "rounded up to 8"
    replicas, t = 64, 61.0
    history = []
    while replicas > 10:
        t += 61.0
        replicas = hpa.reconcile(t, replicas, [10])
        history.append(replicas)
    # 64 -> 57 (6.4 -> 7), 57 -> 51 (5.7 -> 6), 51 -> 45 (5.1 -> 6), 45 -> 40 (4.5 -> 5); then
    # 10 % is at most 4, so 4 at a time: 36, 32, 28, 24, 20, 16, 12, and 12 -> 10.
    assert history == [57, 51, 45, 40, 36, 32, 28, 24, 20, 16, 12, 10]


def test_select_policy_min_and_disabled() -> None:
    rules = {
        "stabilizationWindowSeconds": 0,
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 60},
            {"type": "Percent", "value": 10, "periodSeconds": 60},
        ],
    }
    # "By setting the value to Min which would select the policy which allows the smallest change"
    hpa = HorizontalController(1, 100, Behavior.from_spec({"scaleDown": {**rules, "selectPolicy": "Min"}}))
    assert hpa.reconcile(0.0, 80, [10]) == 76  # 4 pods is the smaller change than 8
    # "Setting the value to Disabled completely disables scaling in that direction."
    disabled = Behavior.from_spec({"scaleDown": {**rules, "selectPolicy": "Disabled"}})
    hpa = HorizontalController(1, 100, disabled)
    assert hpa.reconcile(0.0, 80, [10]) == 80


# "Default Behavior": scale up "4 pods or a 100% of the currently running replicas may at most be
# added every 15 seconds"; "For scaling down the stabilization window is 300 seconds".
def test_default_scale_up_is_4_pods_or_100_percent_per_15s() -> None:
    hpa = HorizontalController(1, 100, DEFAULTS)
    assert hpa.reconcile(0.0, 1, [20]) == 5  # max(1 + 4, 1 * 2)
    assert hpa.reconcile(15.0, 5, [20]) == 10  # max(5 + 4, 5 * 2)
    assert hpa.reconcile(30.0, 10, [20]) == 20  # max(14, 20)


# "Stabilization window": "all desired states from the past 5 minutes will be considered ...
# the highest value" is used when scaling down.
def test_default_scale_down_stabilization_300s() -> None:
    hpa = HorizontalController(1, 100, DEFAULTS)
    assert hpa.reconcile(0.0, 10, [10]) == 10
    assert hpa.reconcile(15.0, 10, [2]) == 10  # 10 was recommended within the last 300 s
    assert hpa.reconcile(290.0, 10, [3]) == 10
    assert hpa.reconcile(301.0, 10, [3]) == 3  # the 10 (t=0, t=15 gave 2) left the window; max(2, 3)


def test_scale_up_stabilization_takes_the_lowest_recommendation() -> None:
    hpa = HorizontalController(1, 100, Behavior.from_spec({"scaleUp": {"stabilizationWindowSeconds": 60}}))
    assert hpa.reconcile(0.0, 2, [2]) == 2
    assert hpa.reconcile(15.0, 2, [8]) == 2  # min(2, 8) within 60 s
    # The 2 aged out; the default scale-up policies then allow max(2 + 4, 2 * 2) = 6 at once.
    assert hpa.reconcile(75.0, 2, [8]) == 6


def test_min_max_and_scaled_to_zero() -> None:
    hpa = HorizontalController(2, 5, DEFAULTS)
    assert hpa.reconcile(0.0, 9, [9]) == 5
    assert hpa.reconcile(15.0, 1, [1]) == 2
    assert hpa.reconcile(30.0, 0, [4]) == 0  # replicas 0 with minReplicas > 0: HPA does not act


def test_keda_activation_and_cooldown() -> None:
    keda = KedaActivation(min_replica_count=0, polling_interval_s=15, cooldown_s=300)
    assert keda.poll(0.0, 0, active=False) == 0
    assert keda.poll(15.0, 0, active=True) == 1  # from zero to max(minReplicaCount, 1)
    assert keda.poll(30.0, 3, active=False) == 3  # inactive for 15 s only
    assert keda.poll(314.0, 3, active=False) == 3  # 299 s < cooldownPeriod
    assert keda.poll(315.0, 3, active=False) == 0  # 300 s without activity: to zero
    # "activationThreshold ... ignored when minReplicaCount >= 1": never to zero.
    keda = KedaActivation(min_replica_count=1, polling_interval_s=15, cooldown_s=300)
    assert keda.poll(10_000.0, 2, active=False) == 2


# An HPA without spec.behavior takes normalizeDesiredReplicas (horizontal.go v1.34.12): no
# per-period policies, one sync may go up to max(scaleUpLimitFactor x current,
# scaleUpLimitMinimum); scale-down keeps the highest recommendation of the last 300 s.
def test_no_behavior_takes_the_legacy_path() -> None:
    legacy = UPSTREAM["kubernetes"]["legacy_path"]
    factor, minimum = legacy["scaleUpLimitFactor"], legacy["scaleUpLimitMinimum"]
    window = UPSTREAM["kubernetes"]["controller_flag_defaults"][
        "HorizontalPodAutoscalerDownscaleStabilizationWindow_s"
    ]
    assert Behavior.from_spec(None).legacy and not DEFAULTS.legacy
    hpa = HorizontalController(1, 100, Behavior.from_spec(None))
    assert hpa.reconcile(0.0, 1, [50]) == int(max(factor * 1, minimum))  # 4, not 5 (defaulted)
    assert hpa.reconcile(15.0, 4, [50]) == int(max(factor * 4, minimum))  # 8, not 12
    assert hpa.reconcile(30.0, 8, [50]) == 16
    # No per-period memory: the defaulted behavior would allow 4 pods or 100 % per 15 s too, but
    # the legacy cap applies per sync, here from 16 straight to 32.
    assert hpa.reconcile(45.0, 16, [50]) == 32
    hpa = HorizontalController(1, 100, Behavior.from_spec(None))
    assert hpa.reconcile(0.0, 6, [6]) == 6
    assert hpa.reconcile(15.0, 6, [2]) == 6  # 6 was recommended within the window
    assert hpa.reconcile(window - 1, 6, [2]) == 6
    assert hpa.reconcile(window + 1, 6, [2]) == 2  # the 6 of t=0 aged out; nothing caps the step
