"""The vLLM image pulled onto each new GPU node while its GPUs register (Karpenter mode).

Karpenter's GPU node is Ready about a minute before the device plugin advertises
``nvidia.com/gpu``, and only then is a vLLM replica scheduled there and its image pull started. A
DaemonSet on the same GPU nodes (the service's node selector and tolerations) starts that pull once
the node is Ready: its one container runs the vLLM image idle, so by the time the replica arrives the
multi-GB image is on the node, or the rest of it is (sizing/startup.py IMAGE_PULL_HIDDEN_S, which the
plan's startup_breakdown counts). It holds no GPU, asks for next to nothing (within the DaemonSet
reserve of sizing/nodes.py), serves nothing and talks to nothing. Karpenter does not count
DaemonSet pods when it judges a node empty, so it keeps no node alive.
"""

from __future__ import annotations

from typing import Any

from ..serving.vllm import (
    CHECKOV_SKIPS,
    Workload,
    checkov_annotations,
    container_security_context,
    pod_security_context,
)

IMAGE_PREPULL = "vllm-image-prepull"
# The idle container that keeps the vLLM image on a node asks for next to nothing.
IMAGE_HOLDER_RESOURCES = {
    "requests": {"cpu": "10m", "memory": "16Mi"},
    "limits": {"cpu": "10m", "memory": "16Mi"},
}


def image_holder(image: str, resources: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A container of the vLLM image that only sleeps: its node pulls the image and keeps it in
    use (kubelet's image garbage collection removes only unused images). Pulled as the server is
    (IfNotPresent, by tag), so the server's own pull finds it there."""
    return {
        "name": "image",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "infinity"],
        "resources": {k: dict(v) for k, v in resources.items()},
        "securityContext": container_security_context(),
    }


def holder_pod_spec(workload: Workload) -> dict[str, Any]:
    """What a pod that only holds something on the service's GPU nodes sets (an image, or a warm
    node): the replica's node selector and tolerations, no service account token or service
    links, no grace period (there is nothing to finish) and the hardened pod context."""
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(workload.node_selector),
        "tolerations": [dict(t) for t in workload.tolerations],
        "terminationGracePeriodSeconds": 0,
        "securityContext": pod_security_context(),
    }


def prepull_daemonset(workload: Workload) -> dict[str, Any]:
    """One idle pod of the vLLM image on each of the service's GPU nodes."""
    labels = {**workload.labels, "app.kubernetes.io/name": IMAGE_PREPULL}
    skips = {k: v for k, v in CHECKOV_SKIPS.items() if k in ("CKV_K8S_15", "CKV_K8S_43")} | {
        "CKV_K8S_8": "an idle image holder serves nothing: there is no endpoint to probe",
        "CKV_K8S_9": "an idle image holder serves nothing: there is no endpoint to probe",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": IMAGE_PREPULL,
            "namespace": workload.namespace,
            "labels": labels,
            # Pulumi does not wait for it: its pods finish pulling minutes after nodes appear, and
            # with no GPU node yet there is nothing to wait for.
            "annotations": {**checkov_annotations(skips), "pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": IMAGE_PREPULL}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    **holder_pod_spec(workload),
                    "containers": [image_holder(workload.image, IMAGE_HOLDER_RESOURCES)],
                },
            },
        },
    }


def closed_network_policy(workload: Workload, app_name: str) -> dict[str, Any]:
    """The pods labelled ``app.kubernetes.io/name: app_name`` accept nothing and reach nothing
    (their images are pulled by the node, not the pod)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": app_name, "namespace": workload.namespace, "labels": workload.labels},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": app_name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }
