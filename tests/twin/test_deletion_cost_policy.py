"""The deletion-cost policy on the real kube-apiserver (issue 37 §3): the init container's service
account, with the Role the program renders (patch on every pod of the namespace) and a bound token
of its own pod, may set its pod's ``controller.kubernetes.io/pod-deletion-cost`` and nothing else.

The policy and binding are the ones ``components/serving/vllm.py`` renders; the token is a real
TokenRequest bound to a real Pod, so the API server fills in the pod name the policy checks."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deepseek_eks.components.serving.vllm import (
    APP,
    DELETION_COST_ANNOTATION,
    DELETION_COST_SCRIPT,
    deletion_cost_policy,
)
from deepseek_eks.twin.server import Api, Reply

# One namespace per test: the twin runs no namespace controller, so a deleted namespace never goes.
NAMESPACE = "deletion-cost-twin"
MERGE = "application/merge-patch+json"
ENFORCED_WITHIN_S = 60.0  # the policy plugin picks up a new binding from its informers


def _ok(reply: Reply) -> Reply:
    assert reply.ok, reply.message
    return reply


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": APP}},
        "spec": {
            "serviceAccountName": APP,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def _objects(namespace: str, with_policy: bool) -> list[dict[str, Any]]:
    rbac = "rbac.authorization.k8s.io/v1"
    meta = {"name": DELETION_COST_SCRIPT, "namespace": namespace}
    role = {"apiVersion": rbac, "kind": "Role", "metadata": meta}
    role["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    binding = {
        "apiVersion": rbac,
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DELETION_COST_SCRIPT},
        "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": namespace}],
    }
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": APP, "namespace": namespace}},
        role,
        binding,
        _pod(namespace, "own"),
        _pod(namespace, "other"),
    ]
    if with_policy:
        objects += list(deletion_cost_policy(namespace, f"twin-{DELETION_COST_SCRIPT}", {"app": APP}))
    return objects


def _as_pod(api: Api, namespace: str, pod: str) -> httpx.Client:
    """A client holding a token of the service account bound to ``pod`` (what the kubelet mounts)."""
    uid = _ok(api.call("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")).body["metadata"]["uid"]
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 600,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid},
        },
    }
    token = _ok(
        api.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{APP}/token", request)
    ).body["status"]["token"]
    assert api.certificates is not None
    tls = ssl.create_default_context(cafile=str(api.certificates.ca))
    return httpx.Client(
        base_url=str(api.http.base_url), verify=tls, timeout=30, headers={"Authorization": f"Bearer {token}"}
    )


def _patch(
    client: httpx.Client, pod: str, patch: dict[str, Any], namespace: str = NAMESPACE
) -> httpx.Response:
    return client.patch(
        f"/api/v1/namespaces/{namespace}/pods/{pod}",
        content=json.dumps(patch),
        headers={"Content-Type": MERGE},
    )


def _annotate(value: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {DELETION_COST_ANNOTATION: value}}}


@pytest.fixture
def cluster(twin: Api) -> Iterator[Api]:
    yield twin
    for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
        twin.call("DELETE", f"/apis/admissionregistration.k8s.io/v1/{kind}/twin-{DELETION_COST_SCRIPT}")


def _install(api: Api, namespace: str, with_policy: bool) -> None:
    api.discover()
    for obj in _objects(namespace, with_policy):
        _ok(api.apply(obj, dry_run=False))


def test_without_the_policy_the_role_lets_the_pod_change_any_pod(cluster: Api) -> None:
    """What the Role alone allows: the reason for the policy (and the control for the test below)."""
    namespace = f"{NAMESPACE}-role-only"
    _install(cluster, namespace, with_policy=False)
    with _as_pod(cluster, namespace, "own") as client:
        hijack = {"metadata": {"labels": {"app": "hijacked"}}}
        assert _patch(client, "other", hijack, namespace).status_code == 200


def test_the_policy_leaves_the_deletion_cost_of_its_own_pod_and_nothing_else(cluster: Api) -> None:
    _install(cluster, NAMESPACE, with_policy=True)
    with _as_pod(cluster, NAMESPACE, "own") as client:
        # Enforcement starts once the plugin has read the policy and its binding.
        deadline = time.monotonic() + ENFORCED_WITHIN_S
        while (denied := _patch(client, "other", _annotate("1000"))).status_code == 200:
            assert time.monotonic() < deadline, "the policy was never enforced"
            _ok(
                cluster.call(
                    "PATCH",
                    f"/api/v1/namespaces/{NAMESPACE}/pods/other",
                    {"metadata": {"annotations": None}},
                    MERGE,
                )
            )
            time.sleep(1)
        assert denied.status_code == 403 and "token was issued for" in denied.text, denied.text

        allowed = _patch(client, "own", _annotate("1000"))
        assert allowed.status_code == 200, allowed.text
        annotations = allowed.json()["metadata"]["annotations"]
        assert annotations[DELETION_COST_ANNOTATION] == "1000"
        assert _patch(client, "own", _annotate("1000")).status_code == 200  # idempotent

        refused = {
            "a label": {"metadata": {"labels": {"app": "hijacked"}}},
            "another annotation": {"metadata": {"annotations": {"x": "y"}}},
            "another cost": _annotate("-5"),
            "a finalizer": {"metadata": {"finalizers": ["example.com/hold"]}},
            "the spec": {"spec": {"activeDeadlineSeconds": 5}},
        }
        for what, patch in refused.items():
            answer = _patch(client, "own", patch)
            assert answer.status_code == 403, (what, answer.text)
            assert "ValidatingAdmissionPolicy" in answer.text, (what, answer.text)
        deleted = client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/own")
        assert deleted.status_code == 403  # RBAC: the Role grants patch only

    # Anyone else is not matched: the deployer (cluster-admin here) still labels the pod.
    _ok(
        cluster.call(
            "PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/own", {"metadata": {"labels": {"x": "y"}}}, MERGE
        )
    )
