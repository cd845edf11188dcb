"""Give this vLLM pod a ReplicaSet deletion cost when its node is on-demand (or reserved).

Runs once, as the vLLM pod's init container, with the standard library only (the vLLM image's
Python). A ReplicaSet scaling down deletes pods with a lower
``controller.kubernetes.io/pod-deletion-cost`` first, once state and readiness are equal
(kubernetes/kubernetes pkg/controller/controller_utils.go ActivePodsWithRanks.Less), but that cost
is read from each pod object and a Deployment's template is shared: so each pod sets its own, from
its node's ``karpenter.sh/capacity-type`` label (Karpenter and EKS Auto Mode both set it). Then a
scale-down removes spot replicas before on-demand ones, and the on-demand floor keeps its pods.

Best effort: on any error it says so and exits 0, so a pod never fails to serve because of it.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
KEPT_CAPACITY_TYPES = ("on-demand", "reserved")
"""Capacity types whose pods a scale-down should remove last."""
KEPT_COST = "1000"
"""Any cost above the default 0 ranks a pod after every spot pod (which keeps 0)."""
TOKEN_DIR = "/var/run/secrets/deletion-cost"

Request = Callable[[str, str, dict[str, Any] | None], dict[str, Any]]
"""(method, path, JSON body or None) -> the JSON answer of the Kubernetes API."""


def api_client(host: str, port: str, token_dir: str = TOKEN_DIR) -> Request:
    """Calls to the API server with the pod's projected token, verified against the cluster CA."""
    with open(os.path.join(token_dir, "token"), encoding="utf-8") as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=os.path.join(token_dir, "ca.crt"))
    base = f"https://{host}:{port}"

    def request(method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/merge-patch+json"
        req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, context=context, timeout=10) as answer:
            result: dict[str, Any] = json.loads(answer.read())
            return result

    return request


def set_cost(request: Request, *, namespace: str, pod: str, node: str) -> str | None:
    """The cost given to ``pod`` (None: its node is spot or unlabelled, it keeps the default)."""
    labels = request("GET", f"/api/v1/nodes/{node}", None).get("metadata", {}).get("labels", {})
    if labels.get(CAPACITY_TYPE) not in KEPT_CAPACITY_TYPES:
        return None
    patch = {"metadata": {"annotations": {DELETION_COST: KEPT_COST}}}
    request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}", patch)
    return KEPT_COST


def main() -> int:
    env = os.environ
    try:
        request = api_client(env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"])
        cost = set_cost(request, namespace=env["POD_NAMESPACE"], pod=env["POD_NAME"], node=env["NODE_NAME"])
    except Exception as error:  # best effort by design: never block serving
        print(f"deletion-cost: not set ({type(error).__name__}: {error})", file=sys.stderr)
        return 0
    print(f"deletion-cost: {cost or 'default (spot or unlabelled node)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
