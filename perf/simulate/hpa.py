"""The Kubernetes HorizontalPodAutoscaler controller and KEDA's scale-to-zero loop, as pure
functions of time, replicas and metric values.

Read from upstream, not invented:
- kubernetes/kubernetes ``pkg/controller/podautoscaler/replica_calculator.go``:
  ``calcPlainMetricReplicas`` / ``groupPods`` (Pods metrics: pending and deleting pods ignored,
  pods without a sample "missing", re-averaged at 0 when scaling up and at the target when
  scaling down; no change when the re-averaged ratio is within tolerance or flips direction) and
  ``GetExternalPerPodMetricReplicas`` (External AverageValue: ``ceil(total / target)`` unless
  ``total / (target * statusReplicas)`` is within tolerance).
- ``pkg/controller/podautoscaler/horizontal.go`` (v1.34.12): an HPA whose ``spec.behavior`` is nil
  (the API leaves it nil: ``SetDefaults_HorizontalPodAutoscalerBehavior`` only fills a behavior
  that exists) takes the legacy path ``normalizeDesiredReplicas``: ``stabilizeRecommendation``
  (the max of the recommendations of the last ``--horizontal-pod-autoscaler-downscale-
  stabilization``, 300 s) then ``convertDesiredReplicasWithRules`` (at most
  ``calculateScaleUpLimit`` = max(``scaleUpLimitFactor`` 2 x current, ``scaleUpLimitMinimum`` 4)
  per sync, no per-period policies). Facts in reference/upstream/hpa-keda-controllers.json.
  ``reconcileAutoscaler`` (no scaling while the
  target has 0 replicas and minReplicas > 0; out-of-range replicas are brought to min/max),
  ``computeReplicasForMetrics`` (the max over metrics; a failed metric blocks scale-down only),
  ``stabilizeRecommendationWithBehaviors`` (scale-up takes the min, scale-down the max of the
  recommendations inside each window), ``maybeInitScaleDownStabilizationWindow``,
  ``convertDesiredReplicasWithBehaviorRate`` with ``calculateScaleUpLimitWithScalingRules`` /
  ``calculateScaleDownLimitWithBehaviors`` (period start = current - added + removed in the
  period; Percent rounds up when adding and truncates when removing; ``selectPolicy``).
- ``pkg/apis/autoscaling/v2/defaults.go``: behavior defaults (scale up: window 0, policies
  100 %/15 s and 4 pods/15 s, Max; scale down: policy 100 %/15 s, Max, window from
  ``--horizontal-pod-autoscaler-downscale-stabilization``, default 300 s).
- kube-controller-manager flags: ``--horizontal-pod-autoscaler-sync-period`` 15 s,
  ``--horizontal-pod-autoscaler-tolerance`` 0.1.
- KEDA (kedacore/keda ``pkg/scaling/executor/scale_scaledobjects.go``; keda-docs
  ``reference/scaledobject-spec.md``, ``concepts/scaling-deployments.md``): the operator polls
  every ``pollingInterval``; a trigger is active when its value is strictly above
  ``activationThreshold`` (default 0); from 0 replicas an active ScaledObject is scaled to
  ``max(minReplicaCount, 1)``; with ``minReplicaCount`` 0 it is scaled to 0 once no trigger was
  active for ``cooldownPeriod`` (default 300 s); activation is ignored when
  ``minReplicaCount`` >= 1. The HPA KEDA creates has ``minReplicas = max(minReplicaCount, 1)``
  and External metrics with the triggers' AverageValue targets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eks.components.monitoring.autoscaling import HPA_SYNC_PERIOD_S

SYNC_PERIOD_S = float(HPA_SYNC_PERIOD_S)
DEFAULT_TOLERANCE = 0.1
DEFAULT_DOWNSCALE_STABILIZATION_S = 300
MAX_PERIOD_S = 1800  # HPAScalingPolicy.periodSeconds upper bound (API validation)


class AutoscalerSpecError(ValueError):
    """A rendered autoscaler the simulator cannot read."""


@dataclass(frozen=True)
class Policy:
    kind: str  # "Pods" or "Percent"
    value: int
    period_s: int


@dataclass(frozen=True)
class ScalingRules:
    stabilization_s: int
    select: str  # "Max", "Min" or "Disabled"
    policies: tuple[Policy, ...]
    tolerance: float = DEFAULT_TOLERANCE


def _rules(raw: Mapping[str, Any] | None, *, up: bool) -> ScalingRules:
    raw = raw or {}
    if raw.get("policies"):
        policies = tuple(Policy(p["type"], int(p["value"]), int(p["periodSeconds"])) for p in raw["policies"])
    elif up:
        policies = (Policy("Percent", 100, 15), Policy("Pods", 4, 15))
    else:
        policies = (Policy("Percent", 100, 15),)
    for p in policies:
        if p.kind not in ("Pods", "Percent") or p.value <= 0 or not 0 < p.period_s <= MAX_PERIOD_S:
            raise AutoscalerSpecError(f"unsupported scaling policy {p}")
    window = raw.get("stabilizationWindowSeconds")
    if window is None:
        window = 0 if up else DEFAULT_DOWNSCALE_STABILIZATION_S
    select = raw.get("selectPolicy") or "Max"
    if select not in ("Max", "Min", "Disabled"):
        raise AutoscalerSpecError(f"unsupported selectPolicy {select!r}")
    tolerance = raw.get("tolerance")
    return ScalingRules(
        int(window), select, policies, DEFAULT_TOLERANCE if tolerance is None else float(tolerance)
    )


# horizontal.go (v1.34.12) scaleUpLimitFactor / scaleUpLimitMinimum: the legacy path's cap.
LEGACY_SCALE_UP_FACTOR = 2.0
LEGACY_SCALE_UP_MINIMUM = 4.0


@dataclass(frozen=True)
class Behavior:
    """An HPA's scaling rules; ``legacy`` when the HPA has no ``spec.behavior`` at all."""

    scale_up: ScalingRules
    scale_down: ScalingRules
    legacy: bool = False

    @classmethod
    def from_spec(cls, raw: Mapping[str, Any] | None) -> Behavior:
        """``spec.behavior`` of an autoscaling/v2 HPA, API defaults filled in; ``None`` (no
        behavior) is the controller's legacy path, not the defaulted behavior."""
        if raw is None:
            return cls(_rules(None, up=True), _rules(None, up=False), legacy=True)
        return cls(_rules(raw.get("scaleUp"), up=True), _rules(raw.get("scaleDown"), up=False))


# ---- per-metric proposals (replica_calculator.go) ---------------------------------------------


@dataclass(frozen=True)
class PodSample:
    """One pod of the scale target as the HPA sees it."""

    phase: str  # "Pending", "Running"
    deleting: bool = False
    value: float | None = None  # the metric sample; None: no sample (missing)


def _within(ratio: float, rules_up: ScalingRules, rules_down: ScalingRules) -> bool:
    # Per-direction tolerance (HPAConfigurableTolerance); both default to the cluster flag.
    if ratio >= 1.0:
        return ratio - 1.0 <= rules_up.tolerance
    return 1.0 - ratio <= rules_down.tolerance


def pods_metric_replicas(
    current: int, pods: Sequence[PodSample], target: float, behavior: Behavior
) -> int | None:
    """Proposal for a Pods metric with an AverageValue target; None when no pod has a sample
    (the controller's "did not receive metrics for targeted pods" error)."""
    samples: list[float] = []
    missing = 0
    unready = 0
    for pod in pods:
        if pod.deleting:
            continue  # groupPods: ignored, its sample removed and never re-added
        if pod.phase != "Running":
            unready += 1
        elif pod.value is None:
            missing += 1
        else:
            samples.append(pod.value)
    if not samples:
        return None
    up, down = behavior.scale_up, behavior.scale_down
    ratio = sum(samples) / len(samples) / target
    scale_up_with_unready = unready > 0 and ratio > 1.0
    if not scale_up_with_unready and missing == 0:
        if _within(ratio, up, down):
            return current
        return math.ceil(ratio * len(samples))
    filled = list(samples)
    filled += [0.0 if ratio >= 1.0 else target] * missing
    if scale_up_with_unready:
        filled += [0.0] * unready
    new_ratio = sum(filled) / len(filled) / target
    if _within(new_ratio, up, down) or (ratio > 1.0 > new_ratio) or (ratio < 1.0 < new_ratio):
        return current
    proposal = math.ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
        return current
    return proposal


def external_average_value_replicas(
    status_replicas: int, total: float, target: float, behavior: Behavior
) -> int:
    """Proposal for an External metric with an AverageValue target (what KEDA feeds its HPA)."""
    if status_replicas > 0:
        ratio = total / (target * status_replicas)
        if _within(ratio, behavior.scale_up, behavior.scale_down):
            return status_replicas
    return math.ceil(total / target)


# ---- the controller (horizontal.go) ----------------------------------------------------------


@dataclass
class HorizontalController:
    """One HPA's state across syncs: recommendations and scale events, as the controller keeps."""

    min_replicas: int
    max_replicas: int
    behavior: Behavior
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    up_events: list[tuple[float, int]] = field(default_factory=list)
    down_events: list[tuple[float, int]] = field(default_factory=list)

    def reconcile(self, now: float, current: int, proposals: Sequence[int | None]) -> int:
        """Desired replicas after one sync. ``proposals``: one per metric, None for a failed one."""
        if current == 0 and self.min_replicas > 0:
            return current  # scaling disabled while the target is scaled to zero
        if current > self.max_replicas:
            desired = self.max_replicas
        elif current < self.min_replicas:
            desired = self.min_replicas
        else:
            valid = [p for p in proposals if p is not None]
            if not valid:
                return current
            proposal = max(valid)
            if len(valid) < len(proposals) and proposal < current:
                return current  # a failed metric may hide load: never scale down then
            if self.behavior.legacy:
                desired = self._legacy_normalize(now, current, proposal)
            else:
                self._init_down_window(now, current)
                stabilized = self._stabilize(now, current, proposal)
                desired = self._rate_limit(now, current, stabilized)
        if desired > current:
            self.up_events.append((now, desired - current))
        elif desired < current:
            self.down_events.append((now, current - desired))
        return desired

    def _legacy_normalize(self, now: float, current: int, proposal: int) -> int:
        """``normalizeDesiredReplicas``: the highest recommendation of the downscale window, then
        bounded by min/max and by max(2 x current, 4)."""
        cutoff = now - self.behavior.scale_down.stabilization_s
        self.recommendations = [r for r in self.recommendations if r[0] >= cutoff]
        stabilized = max([proposal, *(rec for _, rec in self.recommendations)])
        self.recommendations.append((now, proposal))
        limit = int(max(LEGACY_SCALE_UP_FACTOR * current, LEGACY_SCALE_UP_MINIMUM))
        return max(self.min_replicas, min(stabilized, self.max_replicas, limit))

    def _init_down_window(self, now: float, current: int) -> None:
        if not self.recommendations and self.behavior.scale_down.stabilization_s > 0:
            self.recommendations.append((now, current))

    def _stabilize(self, now: float, current: int, proposal: int) -> int:
        up_cutoff = now - self.behavior.scale_up.stabilization_s
        down_cutoff = now - self.behavior.scale_down.stabilization_s
        up_rec = down_rec = proposal
        for t, rec in self.recommendations:
            if t > up_cutoff:
                up_rec = min(up_rec, rec)
            if t > down_cutoff:
                down_rec = max(down_rec, rec)
        oldest = min(up_cutoff, down_cutoff)
        self.recommendations = [r for r in self.recommendations if r[0] > oldest]
        self.recommendations.append((now, proposal))
        return min(max(current, up_rec), down_rec)

    @staticmethod
    def _changed_within(events: list[tuple[float, int]], now: float, period_s: int) -> int:
        return sum(n for t, n in events if t > now - period_s)

    def _period_start(self, now: float, current: int, period_s: int) -> int:
        added = self._changed_within(self.up_events, now, period_s)
        removed = self._changed_within(self.down_events, now, period_s)
        return current - added + removed

    def _rate_limit(self, now: float, current: int, desired: int) -> int:
        if desired > current:
            limit = self._scale_up_limit(now, current)
            return min(desired, max(limit, current), self.max_replicas)
        if desired < current:
            limit = self._scale_down_limit(now, current)
            return max(desired, min(limit, current), self.min_replicas)
        return desired

    def _scale_up_limit(self, now: float, current: int) -> int:
        rules = self.behavior.scale_up
        if rules.select == "Disabled":
            return current
        proposals = []
        for p in rules.policies:
            start = self._period_start(now, current, p.period_s)
            if p.kind == "Pods":
                proposals.append(start + p.value)
            else:
                proposals.append(math.ceil(start * (1 + p.value / 100)))
        return min(proposals) if rules.select == "Min" else max(proposals)

    def _scale_down_limit(self, now: float, current: int) -> int:
        rules = self.behavior.scale_down
        if rules.select == "Disabled":
            return current
        proposals = []
        for p in rules.policies:
            start = self._period_start(now, current, p.period_s)
            if p.kind == "Pods":
                proposals.append(start - p.value)
            else:
                proposals.append(int(start * (1 - p.value / 100)))
        return max(proposals) if rules.select == "Min" else min(proposals)


@dataclass
class KedaActivation:
    """KEDA's own loop over a ScaledObject: 0 <-> 1 by activation, cooldown before 0."""

    min_replica_count: int
    polling_interval_s: float
    cooldown_s: float
    last_active: float = 0.0

    def poll(self, now: float, current: int, active: bool) -> int:
        """Replicas after one poll (unchanged when the HPA is in charge)."""
        if active:
            self.last_active = now
        if current == 0:
            return max(self.min_replica_count, 1) if active else 0
        if self.min_replica_count == 0 and not active and now - self.last_active >= self.cooldown_s:
            return 0
        if current < self.min_replica_count:
            return self.min_replica_count
        return current
