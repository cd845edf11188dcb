"""``python -m automation capacity``: how a stack's replica bounds compare with what a load needs,
and whether the stack takes the bounds offered (``sizing/capacity.py`` sizes the load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepseek_eks.components import SizingError
from deepseek_eks.components.service import ServiceError
from deepseek_eks.settings import SettingsError

from .stackfile import StackConfig, config_set_command


def replan_refusal(
    stack: str, overrides: dict[str, str], project_dir: Path, sized: Any, proposed: dict[str, int]
) -> str | None:
    """Why ``stack``, with the ``proposed`` settings besides its ``overrides``, would not take
    the answer: it would not build (a replica per zone...), or its plan would change replica (the
    instance type and packing are chosen for maxReplicas), so the answer no longer holds. None
    when it takes it."""
    from .api import prepare

    changed = {**overrides, **{k: str(v) for k, v in proposed.items()}}
    try:
        replanned = prepare(stack, changed, project_dir).plan
    except (SettingsError, SizingError, ServiceError) as error:
        return " ".join(str(error).split())

    def replica(plan: Any) -> tuple[str, int, int, int]:
        return plan.instance_type, plan.tensor_parallel_size, plan.chosen.replicas_per_node, plan.max_num_seqs

    if replica(replanned) != replica(sized):
        settings = " and ".join(f"{k} {v}" for k, v in proposed.items())
        return (
            f"with {settings} the plan serves from {replanned.instance_type} "
            f"(TP {replanned.tensor_parallel_size}, {replanned.chosen.replicas_per_node} per node, "
            f"max_num_seqs {replanned.max_num_seqs}), not this answer's {sized.instance_type}; "
            f"rerun with {' '.join(f'--set {k}={v}' for k, v in proposed.items())}"
        )
    return None


def capacity_changes(
    config: StackConfig, min_replicas: int, max_replicas: int, cap: Any
) -> list[dict[str, Any]]:
    """How the stack's replica bounds compare with what the load needs: one entry per bound that
    differs, with why and the command that sets it in the form ``config``'s stack file keeps it
    (None for a floor above need, which is the user's to keep: a second replica survives a node
    failure)."""
    changes = []
    if max_replicas < cap.max_replicas:
        changes.append(
            {
                "setting": "autoscaling.maxReplicas",
                "stack": max_replicas,
                "needed": cap.max_replicas,
                "why": f"maxReplicas {max_replicas} is below the {cap.max_replicas} the peak rate needs: "
                "at the peak, p95 TTFT exceeds the SLO",
                "command": config_set_command(config, "autoscaling.maxReplicas", cap.max_replicas),
            }
        )
    elif max_replicas > cap.max_replicas:
        changes.append(
            {
                "setting": "autoscaling.maxReplicas",
                "stack": max_replicas,
                "needed": cap.max_replicas,
                "why": f"maxReplicas {max_replicas} is above the {cap.max_replicas} the peak rate needs: "
                "headroom for a busier peak (the autoscaler adds replicas only under load)",
                "command": None,
            }
        )
    if min_replicas < cap.min_replicas:
        changes.append(
            {
                "setting": "autoscaling.minReplicas",
                "stack": min_replicas,
                "needed": cap.min_replicas,
                "why": f"minReplicas {min_replicas} is below the {cap.min_replicas} the baseline rate needs: "
                "at that rate the fleet waits on a cold start to meet the SLO",
                "command": config_set_command(config, "autoscaling.minReplicas", cap.min_replicas),
            }
        )
    elif min_replicas > cap.min_replicas:
        changes.append(
            {
                "setting": "autoscaling.minReplicas",
                "stack": min_replicas,
                "needed": cap.min_replicas,
                "why": f"minReplicas {min_replicas} is above the {cap.min_replicas} the baseline rate needs: "
                "it pays for replicas the SLO does not need (keep it if it is for availability: a "
                f"second replica serves while a node is replaced); "
                f"{config_set_command(config, 'autoscaling.minReplicas', cap.min_replicas)} lowers it",
                "command": None,
            }
        )
    return changes
