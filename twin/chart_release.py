"""A Helm release of the render as the twin installs it: the chart objects ``helm template``
renders for the release's values (tests/data/chart_objects.json, matched by the digest of the
rendered values), its ServiceAccounts and RBAC applied as rendered, and a kubeconfig with a token of
one of those ServiceAccounts, so that the chart's own RBAC is what authorizes a program run beside
the twin (prometheus-adapter and KEDA: metrics_programs.py; the LWS manager: lws.py)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from .server import Api, TwinError

CHART_OBJECTS = PROJECT_ROOT / "tests" / "data" / "chart_objects.json"
CHARTS = PROJECT_ROOT / "reference" / "upstream" / "helm-charts"
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TOKEN_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Release:
    """One Helm release of the render: its namespace, values (chart defaults under the rendered
    ones) and the objects ``helm template`` renders for them (RBAC and workloads)."""

    name: str
    namespace: str
    values: dict[str, Any]
    objects: list[dict[str, Any]]

    def deployments(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == "Deployment"]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _digest(values: Any) -> str:
    # As tools/chart_objects.py records it (tests/chart_objects.py values_digest).
    return hashlib.sha256(json.dumps(values, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def chart_release(render: Path, release: str) -> Release:
    """``release`` of the render (``helm/<release>.yaml``) with the chart objects ``helm template``
    rendered for exactly its values; ``TwinError`` when the fixture holds no such rendering."""
    path = render / "helm" / f"{release}.yaml"
    if not path.exists():
        raise TwinError(f"the render {render} installs no {release} release ({path} is missing)")
    helm = yaml.safe_load(path.read_text())
    values = helm.get("values") or {}
    fixture = json.loads(CHART_OBJECTS.read_text())
    digest = _digest(values)
    entry = next(
        (e for e in fixture["releases"] if e["release"] == release and e["values_sha256"] == digest), None
    )
    if entry is None:
        raise TwinError(
            f"{CHART_OBJECTS.name} holds no `helm template` of {release} with the values of {path}: "
            "regenerate it with tools/chart_objects.py"
        )
    defaults_path = CHARTS / f"{helm['chart']}-{helm['version']}" / "values.yaml"
    defaults = yaml.safe_load(defaults_path.read_text()) if defaults_path.exists() else {}
    return Release(release, str(helm["namespace"]), _merge(defaults or {}, values), entry["objects"])


def ensure_namespace(api: Api, name: str) -> None:
    """Namespace ``name``, created when absent."""
    # Created only when absent: an apply by the twin's field manager would take away the labels a
    # render's own apply of the namespace (same manager) has set.
    if api.call("GET", f"/api/v1/namespaces/{name}").status == 404:
        reply = api.call(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        if not reply.ok and reply.status != 409:
            raise TwinError(f"namespace {name} was refused ({reply.status}): {reply.message}")


def apply_object(api: Api, obj: dict[str, Any]) -> None:
    """``obj`` applied server-side; ``TwinError`` naming it when refused."""
    reply = api.apply(obj, dry_run=False)
    if not reply.ok:
        meta = obj["metadata"]
        raise TwinError(
            f"{obj['kind']} {meta.get('namespace', '')}/{meta['name']} was refused "
            f"({reply.status}): {reply.message}"
        )


def token(api: Api, namespace: str, account: str) -> str:
    """A token of the ServiceAccount (TokenRequest, authentication.k8s.io/v1)."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    reply = api.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", body)
    if not reply.ok:
        raise TwinError(f"no token for {namespace}/{account} ({reply.status}): {reply.message}")
    return str(reply.body["status"]["token"])


def account_kubeconfig(api: Api, server: str, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig to ``server`` with the twin's CA and a token of ``namespace/account``."""
    if api.certificates is None:
        raise TwinError("this Api was not made by running_twin: no CA for a kubeconfig")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "twin", "cluster": {"server": server, "certificate-authority": str(api.certificates.ca)}}
        ],
        "users": [{"name": account, "user": {"token": token(api, namespace, account)}}],
        "contexts": [
            {"name": "twin", "context": {"cluster": "twin", "user": account, "namespace": namespace}}
        ],
        "current-context": "twin",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def install_accounts_and_rbac(api: Api, release: Release, deployments: list[dict[str, Any]]) -> None:
    """The release's namespace, the ServiceAccount of each of ``deployments`` and the release's
    RBAC objects as ``helm template`` renders them, applied to the twin."""
    ensure_namespace(api, release.namespace)
    for deployment in deployments:
        account = deployment["spec"]["template"]["spec"].get("serviceAccountName") or "default"
        apply_object(
            api,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": release.namespace},
            },
        )
    for obj in release.objects:
        if obj["kind"] in RBAC_KINDS:
            if obj["metadata"].get("namespace"):
                ensure_namespace(api, obj["metadata"]["namespace"])
            apply_object(api, obj)
