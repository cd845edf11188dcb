"""Time compression for the twin loop: one twin second stands for ``factor`` cluster seconds.

The compression goes through the controllers' own settings, never through a model of them: the
render's autoscaler behavior windows and policy periods, KEDA's polling and cooldown, Karpenter's
``consolidateAfter`` are divided (``compress_objects``), and the plan's start-up stages are played by
kwok's stage delays (``kwok_loop_stages``), a node taking no pod until its launch is over
(``LAUNCH_TAINT``). Every rewrite is returned as a line for the loop's report.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from .capacity import kwok_stages


def scaled(seconds: float, factor: int, floor: int) -> int:
    """``seconds`` divided by ``factor``, rounded, and not under ``floor`` (an API's minimum)."""
    return max(floor, round(seconds / factor))


def compress_behavior(
    behavior: dict[str, Any], factor: int, where: str, rewrites: list[str]
) -> dict[str, Any]:
    """An HPA ``behavior`` with its stabilization windows and policy periods divided by ``factor``
    (periods at least 1 s: the API's minimum, autoscaling/v2 HPAScalingPolicy)."""
    out = copy.deepcopy(behavior)
    for direction in ("scaleUp", "scaleDown"):
        rules = out.get(direction)
        if not rules:
            continue
        if "stabilizationWindowSeconds" in rules:
            before = int(rules["stabilizationWindowSeconds"])
            rules["stabilizationWindowSeconds"] = scaled(before, factor, 0)
            after = rules["stabilizationWindowSeconds"]
            rewrites.append(f"{where} {direction}.stabilizationWindowSeconds {before} -> {after}")
        for policy in rules.get("policies") or []:
            before = int(policy["periodSeconds"])
            policy["periodSeconds"] = scaled(before, factor, 1)
            rewrites.append(
                f"{where} {direction} policy {policy['type']}={policy['value']} periodSeconds "
                f"{before} -> {policy['periodSeconds']}"
            )
    return out


def compress_objects(objects: list[dict[str, Any]], factor: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The render's autoscaler and NodePools with their controller timings divided by ``factor``,
    and a line per rewrite."""
    rewrites: list[str] = []
    out = []
    for obj in objects:
        kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
        if kind == "HorizontalPodAutoscaler" and obj["spec"].get("behavior"):
            obj = copy.deepcopy(obj)
            obj["spec"]["behavior"] = compress_behavior(
                obj["spec"]["behavior"], factor, f"HPA/{name}", rewrites
            )
        elif kind == "ScaledObject":
            obj = copy.deepcopy(obj)
            spec = obj["spec"]
            config = (spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
            if config.get("behavior"):
                config["behavior"] = compress_behavior(
                    config["behavior"], factor, f"ScaledObject/{name}", rewrites
                )
            # KEDA's defaults when unset: pollingInterval 30 s, cooldownPeriod 300 s
            # (kedacore/keda v2.20.2 apis/keda/v1alpha1/scaledobject_types.go).
            for key, default in (("pollingInterval", 30), ("cooldownPeriod", 300)):
                before = int(spec.get(key, default))
                spec[key] = scaled(before, factor, 1)
                rewrites.append(f"ScaledObject/{name} {key} {before} -> {spec[key]}")
        elif kind == "NodePool" and (obj["spec"].get("disruption") or {}).get("consolidateAfter"):
            obj = copy.deepcopy(obj)
            disruption = obj["spec"]["disruption"]
            before_s = duration_s(disruption["consolidateAfter"])
            if before_s is not None:
                disruption["consolidateAfter"] = f"{scaled(before_s, factor, 1)}s"
                after = disruption["consolidateAfter"]
                rewrites.append(f"NodePool/{name} consolidateAfter {duration_text(before_s)} -> {after}")
        out.append(obj)
    return out, rewrites


def duration_s(text: str) -> float | None:
    """A Karpenter duration (``10m``, ``1h30m``, ``Never``) in seconds; None for ``Never``."""
    if text == "Never":
        return None
    total, number = 0.0, ""
    units = {"h": 3600, "m": 60, "s": 1}
    for char in text:
        if char.isdigit() or char == ".":
            number += char
        else:
            total += float(number) * units[char]
            number = ""
    return total


def duration_text(seconds: float) -> str:
    return f"{seconds:.0f}s"


# A node is launching until kwok's node-initialize stage ends its launch: this startup taint, put on
# by Karpenter at registration (NodePool ``startupTaints``; sigs.k8s.io/karpenter v1.14.1
# pkg/controllers/nodeclaim/lifecycle/registration.go syncNode, in the same patch that lifts its
# unregistered taint) and taken off by that stage, keeps pods off a node before it could run them.
# On EKS no pod can be: the Node object appears only when its kubelet registers, after the
# instance boots, and a GPU pod fits only once the device plugin advertises nvidia.com/gpu; both are
# in the plan's node stage. A kwok node, made by Karpenter's kwok provider with its whole capacity
# and no condition, is otherwise schedulable at once (the node lifecycle controller taints a node
# only for a Ready condition that is False or Unknown: k8s.io/kubernetes v1.34
# pkg/controller/nodelifecycle doNoScheduleTaintingPass).
LAUNCH_TAINT = {"key": "twin.deepseek-eks.io/launching", "effect": "NoSchedule"}


def with_launch_taint(nodepools: list[dict[str, Any]], rewrites: list[str]) -> list[dict[str, Any]]:
    """``nodepools`` with ``LAUNCH_TAINT`` among their startup taints (each rewrite listed)."""
    out = []
    for pool in nodepools:
        pool = copy.deepcopy(pool)
        template = pool["spec"]["template"]["spec"]
        template["startupTaints"] = [*(template.get("startupTaints") or []), dict(LAUNCH_TAINT)]
        rewrites.append(
            f"NodePool/{pool['metadata']['name']} startupTaints + {LAUNCH_TAINT['key']}:"
            f"{LAUNCH_TAINT['effect']} (no pod on a node until kwok has played its launch)"
        )
        out.append(pool)
    return out


# When a node's launch, and a bound pod's start, end: written by kwok the first time it sees the
# node (made by Karpenter's kwok provider at its launch) or the pod (once bound), as that instant
# plus the compressed delay. kwok cancels a resource's pending stage and starts its delay again on
# every update it sees (sigs.k8s.io/kwok v0.8.0 pkg/kwok/controllers/node_controller.go preprocess
# and addStageJob; pod_controller.go the same), so a fixed delay would count from the last update:
# for a node, Karpenter's registration, about a twin second after its launch (30 s on a cluster's
# clock). A ``durationFrom`` that yields a time is that time less now
# (pkg/utils/lifecycle/value_duration_from.go), however often the delay is started again.
LAUNCH_ENDS = "twin.deepseek-eks.io/launch-ends"
READY_AT = "twin.deepseek-eks.io/ready-at"
# Go's layout for RFC 3339 with nanoseconds, the form value_duration_from.go parses (time.RFC3339Nano).
_GO_TIME_LAYOUT = "2006-01-02T15:04:05.000000000Z07:00"


def _annotation_key(annotation: str) -> str:
    return f'.metadata.annotations["{annotation}"]'


def _stamp(stage: dict[str, Any], name: str, annotation: str, delay_s: float) -> dict[str, Any]:
    """A stage selecting what ``stage`` selects that has no ``annotation`` yet, and writing it at
    once: the time ``delay_s`` from now (kwok renders templates with sprig's ``now``,
    ``dateModify`` and ``date``: pkg/utils/gotpl/funcs.go)."""
    selector = copy.deepcopy(stage["spec"]["selector"])
    selector["matchExpressions"].append({"key": _annotation_key(annotation), "operator": "DoesNotExist"})
    when = f'{{{{ now | dateModify "{int(delay_s * 1000)}ms" | date "{_GO_TIME_LAYOUT}" | Quote }}}}'
    return {
        "apiVersion": stage["apiVersion"],
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": copy.deepcopy(stage["spec"]["resourceRef"]),
            "selector": selector,
            "next": {
                "patches": [{"root": "metadata", "template": f"annotations:\n  {annotation}: {when}\n"}]
            },
        },
    }


def _at_stamp(stage: dict[str, Any], annotation: str) -> dict[str, Any]:
    """``stage`` for resources ``annotation`` is on, delayed until the time it holds."""
    stage = copy.deepcopy(stage)
    spec = stage["spec"]
    spec["selector"]["matchExpressions"].append({"key": _annotation_key(annotation), "operator": "Exists"})
    spec["delay"] = {"durationFrom": {"jq": {"expression": _annotation_key(annotation)}}}
    return stage


def _launch_ends(stage: dict[str, Any]) -> dict[str, Any]:
    """kwok's node-initialize stage made the end of a node's launch: it applies once Karpenter has
    registered the node (``LAUNCH_TAINT`` on it), and with the Ready status it takes the taint off
    (kwok v0.8.0: ``next.patches`` replace ``statusTemplate``, pkg/apis/internalversion/conversion.go;
    a ``json`` patch rendered from a template, pkg/utils/lifecycle/next.go computePatch)."""
    stage = copy.deepcopy(stage)
    spec = stage["spec"]
    key = LAUNCH_TAINT["key"]
    spec["selector"]["matchExpressions"].append(
        {
            "key": f'.spec.taints.[] | select( .key == "{key}" ) | .effect',
            "operator": "In",
            "values": [LAUNCH_TAINT["effect"]],
        }
    )
    status = spec["next"].pop("statusTemplate")
    remove = (
        "{{ range $i, $taint := .spec.taints }}{{ if eq $taint.key "
        f'"{key}"'
        " }}\n- op: test\n  path: /spec/taints/{{ $i }}/key\n  value: "
        f'"{key}"'
        "\n- op: remove\n  path: /spec/taints/{{ $i }}\n{{ end }}{{ end }}"
    )
    spec["next"]["patches"] = [
        {"subresource": "status", "root": "status", "template": status},
        {"type": "json", "template": remove},
    ]
    return stage


# kwok's stage played with a delay, the stage of ours that stamps when it ends, and its annotation.
_TIMED = {"node-initialize": ("node-launch", LAUNCH_ENDS), "pod-ready": ("pod-start", READY_AT)}


def kwok_loop_stages(folder: Path, node_delay_s: float, pod_delay_s: float) -> tuple[list[Path], list[str]]:
    """kwok's vendored lifecycle with a node turning Ready and schedulable ``node_delay_s`` after
    kwok first sees it (its launch: see ``LAUNCH_TAINT``), or once Karpenter has registered it if
    that is later, and a bound pod turning Ready ``pod_delay_s`` after kwok first sees it bound (the
    plan's image pull, weights and engine start), both compressed (see ``LAUNCH_ENDS``). The
    stamping stages are ours; the others kwok's, changed as the rewrites say."""
    out, rewrites = [], []
    delays = {"node-initialize": node_delay_s, "pod-ready": pod_delay_s}
    for path in kwok_stages():
        original = yaml.safe_load(path.read_text())
        name = original["metadata"]["name"]
        stages = [original]
        if name == "node-initialize":
            stages = [_launch_ends(original)]
            rewrites.append(
                f"kwok stage {name}: applies once Karpenter has registered the node and lifts "
                f"{LAUNCH_TAINT['key']}"
            )
        if name in _TIMED:
            stamp_name, annotation = _TIMED[name]
            delay_s = delays[name]
            # The stamp selects what kwok's own stage does: a node from its creation, before registration.
            stages = [_stamp(original, stamp_name, annotation, delay_s), _at_stamp(stages[0], annotation)]
            kind = original["spec"]["resourceRef"]["kind"].lower()
            rewrites.append(
                f"kwok stage {name}: {delay_s:.1f} s after kwok first sees the {kind} (the plan's "
                f"start-up, compressed; stage {stamp_name} writes the time in {annotation})"
            )
        for stage in stages:
            target = folder / f"stage-{stage['metadata']['name']}.yaml"
            target.write_text(yaml.safe_dump(stage))
            out.append(target)
    return out, rewrites
