"""Warm spare GPU capacity (``autoscaling.warmSpareNodes``): placeholder pods at a negative priority
that hold GPU nodes and are preempted by vLLM replicas (pure manifests, no resources created).

Each placeholder asks for exactly what one vLLM pod asks for (GPUs, CPU, memory) on the same GPU
nodes, so when the scheduler evicts one, a replica pod fits in its place at once; the evicted
placeholder goes pending and the node autoscaler (Karpenter, or Auto Mode's) launches a node for it,
which becomes the next warm spare. Beside the pause container that holds the resources, an idle
container runs the vLLM image, so the warm node has pulled it too. The vLLM pods set no priority
class: their priority is 0, above the placeholders' ``WARM_SPARE_PRIORITY``, so the scheduler
always preempts a placeholder for them (Kubernetes "Pod Priority and Preemption"), and
``preemptionPolicy: Never`` keeps placeholders from ever evicting anything themselves.
"""

from __future__ import annotations

from typing import Any

from deepseek_eks.sizing import SizingPlan

from ..serving.vllm import (
    CHECKOV_SKIPS,
    COMPILE_CACHE_RESOURCES,
    Workload,
    checkov_annotations,
    container_security_context,
    pod_share,
    server_container,
)
from ..versions import PAUSE_IMAGE, PAUSE_IMAGE_DIGEST, image_reference
from .image_prepull import IMAGE_HOLDER_RESOURCES, holder_pod_spec, image_holder

WARM_SPARE = "gpu-warm-spare"
WARM_SPARE_PRIORITY = -10


def priority_class(labels: dict[str, str], prefix: str = "") -> dict[str, Any]:
    """The placeholders' PriorityClass, cluster-scoped: ``prefix`` keeps two services' apart."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": prefix + WARM_SPARE, "labels": labels},
        "value": WARM_SPARE_PRIORITY,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": "Placeholder pods holding warm GPU nodes; any vLLM replica preempts them.",
    }


def placeholder_deployment(
    plan: SizingPlan, workload: Workload, nodes: int, priority_class_name: str = WARM_SPARE
) -> dict[str, Any]:
    """``nodes`` placeholder pods, each shaped like one vLLM pod, on the GPU nodes: together their
    containers ask for what a vLLM pod's do (the plan's request, GPUs and disk of the server)."""
    # The idle vLLM-image container asks for what the compile-cache sidecar will, where there is one.
    holder = COMPILE_CACHE_RESOURCES if plan.compile_cache else IMAGE_HOLDER_RESOURCES
    resources = server_container(plan, workload)["resources"]
    cpu, memory = pod_share(plan, holder["requests"])
    resources = {
        "requests": {**resources["requests"], "cpu": cpu, "memory": memory},
        "limits": {**resources["limits"], "memory": memory},
    }
    labels = {**workload.labels, "app.kubernetes.io/name": WARM_SPARE}
    # The idle container of the vLLM image is pulled like the server (IfNotPresent, by tag).
    skips = {k: v for k, v in CHECKOV_SKIPS.items() if k in ("CKV_K8S_15", "CKV_K8S_43")} | {
        "CKV_K8S_8": "a placeholder serves nothing: there is no endpoint to probe",
        "CKV_K8S_9": "a placeholder serves nothing: there is no endpoint to probe",
        "CKV_K8S_11": "requests mirror a vLLM pod's, which has no CPU limit (see the vLLM Deployment)",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": WARM_SPARE,
            "namespace": workload.namespace,
            "labels": labels,
            # Best effort: Pulumi does not wait for spare GPU capacity (spot may have none).
            "annotations": {**checkov_annotations(skips), "pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "replicas": nodes,
            "selector": {"matchLabels": {"app.kubernetes.io/name": WARM_SPARE}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Evicted at once: there is nothing to drain.
                    **holder_pod_spec(workload),
                    "priorityClassName": priority_class_name,
                    "containers": [
                        {
                            "name": "hold",
                            "image": image_reference(PAUSE_IMAGE, digest=PAUSE_IMAGE_DIGEST),
                            "imagePullPolicy": "Always",  # a few hundred kB
                            "resources": resources,
                            "securityContext": container_security_context(),
                        },
                        # vLLM's own image, idle: the warm node pulls it and keeps it in use, so a
                        # replica that takes the placeholder's place skips the image stage as well
                        # as the node's (sizing/planner.py warm_node_startup_breakdown).
                        image_holder(workload.image, holder),
                    ],
                },
            },
        },
    }
