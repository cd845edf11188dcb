"""``twin check``: one stack's render against the real API server.

Every ``kubernetes/*.yaml`` object is server-side applied with ``dryRun=All`` and
``fieldValidation=Strict`` (after the CRDs of reference/schemas are installed), and each workload's
pod template is dry-run created as a Pod in its namespace so PodSecurity admission judges it under
the namespace labels we set. The objects later admission reads (namespaces, service accounts,
priority and runtime classes, CRDs) are created for real first: a dry-run namespace does not exist
for the next request. With a previous render, that one is applied for real first, so the new one
is judged as the update ``pulumi up`` would send (immutable fields, CEL transition rules).
"""

from __future__ import annotations

import base64
import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.testing.mocks import SECRET_MASK

from .crds import crd_objects
from .server import Api, Reply, TwinError, running_twin

# Created for real before the rest is dry-run: what admission of later objects looks up.
PREREQUISITES = ("Namespace", "CustomResourceDefinition", "PriorityClass", "RuntimeClass", "ServiceAccount")
# Never created for real (not even from --previous): a webhook or aggregated API with no server
# behind it would make the API server fail every later request it covers. Dry-run only.
DRY_RUN_ONLY = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService")
# Where each workload kind keeps its pod template(s), by role.
POD_TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "Deployment": {"pod": ("spec", "template")},
    "StatefulSet": {"pod": ("spec", "template")},
    "DaemonSet": {"pod": ("spec", "template")},
    "ReplicaSet": {"pod": ("spec", "template")},
    "Job": {"pod": ("spec", "template")},
    "CronJob": {"pod": ("spec", "jobTemplate", "spec", "template")},
    "LeaderWorkerSet": {
        "leader": ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        "worker": ("spec", "leaderWorkerTemplate", "workerTemplate"),
    },
}
HELM_NOTE = (
    "{n} Helm release(s) not checked ({names}): their charts cannot be templated offline "
    "(no chart repository is reachable), so only the objects the program itself renders are judged"
)
ESTABLISH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Finding:
    """One object the server refused (or warned about under PodSecurity), with its message."""

    subject: str
    message: str


@dataclass
class CheckReport:
    """What the server said about a render: accepted count, findings (fail), notes (say only)."""

    accepted: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings and self.accepted > 0


def subject(obj: dict[str, Any]) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), as the findings name objects."""
    meta = obj.get("metadata") or {}
    parts = [obj.get("kind", "?"), meta.get("namespace"), meta.get("name", "?")]
    return "/".join(p for p in parts if p)


def load_render(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The Kubernetes objects and Helm release names of one stack's render directory."""
    kubernetes = folder / "kubernetes"
    if not kubernetes.is_dir():
        raise ValueError(
            f"{folder} is not a stack's render: expected {kubernetes}/*.yaml; render one with "
            "`python -m automation render --stack STACK` and pass build/rendered/STACK"
        )
    objects = [yaml.safe_load(p.read_text()) for p in sorted(kubernetes.glob("*.yaml"))]
    helm = sorted(p.stem for p in (folder / "helm").glob("*.yaml"))
    return objects + helm_namespaces(folder, objects), helm


def helm_namespaces(folder: Path, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The namespaces Helm releases create themselves (``create_namespace`` in their render file),
    which no rendered object declares: on a cluster they exist before anything the program puts
    there (it depends on the release), so the twin creates them too."""
    declared = {o["metadata"]["name"] for o in objects if o.get("kind") == "Namespace"}
    out: list[dict[str, Any]] = []
    for path in sorted((folder / "helm").glob("*.yaml")):
        release = yaml.safe_load(path.read_text()) or {}
        name = release.get("namespace")
        if release.get("create_namespace") and name and name not in declared:
            declared.add(name)
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return out


def _rank(obj: dict[str, Any]) -> int:
    kind = obj.get("kind", "")
    return PREREQUISITES.index(kind) if kind in PREREQUISITES else len(PREREQUISITES)


def _unmasked(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret's masked ``data`` values as valid base64: the render never holds the real value,
    and the mask itself is not base64, which the server would (rightly) refuse."""
    if obj.get("kind") != "Secret" or not obj.get("data"):
        return obj
    obj = copy.deepcopy(obj)
    placeholder = base64.b64encode(b"masked-by-render").decode()
    obj["data"] = {k: placeholder if v == SECRET_MASK else v for k, v in obj["data"].items()}
    return obj


def pods_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Each pod template of a workload as the Pod its controller would create."""
    out = []
    for role, path in POD_TEMPLATES.get(obj.get("kind", ""), {}).items():
        template: Any = obj
        for key in path:
            template = (template or {}).get(key)
        if not template:
            continue
        meta = obj.get("metadata") or {}
        template_meta = template.get("metadata") or {}
        pod_meta = {"name": f"{meta.get('name')}-{role}", "namespace": meta.get("namespace") or "default"}
        pod_meta |= {k: template_meta[k] for k in ("labels", "annotations") if k in template_meta}
        spec = template.get("spec", {})
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})
    return out


class _Judge:
    """Applies objects and records what the server says."""

    def __init__(self, api: Api, report: CheckReport, label: str = "") -> None:
        self.api, self.report, self.label = api, report, label

    def send(self, obj: dict[str, Any], dry_run: bool, what: str | None = None) -> bool:
        reply: Reply = self.api.apply(_unmasked(obj), dry_run)
        name = f"{self.label}{what or subject(obj)}"
        if not reply.ok:
            self.report.findings.append(Finding(name, f"rejected ({reply.status}): {reply.message}"))
            return False
        for warning in reply.warnings:
            if "PodSecurity" in warning:
                self.report.findings.append(Finding(name, f"PodSecurity warning: {warning}"))
            else:
                self.report.notes.append(f"{name}: server warning: {warning}")
        self.report.accepted += 1
        return True

    def apply_all(self, objects: list[dict[str, Any]], dry_run: bool) -> None:
        """Prerequisites for real, the rest with ``dry_run``, then each workload's pods (dry run)."""
        ordered = sorted(objects, key=_rank)
        for obj in ordered:
            kind = obj.get("kind")
            real = kind in PREREQUISITES or (not dry_run and kind not in DRY_RUN_ONLY)
            if not self.send(obj, dry_run=not real):
                continue
            if kind == "Namespace":
                # kube-controller-manager makes each namespace's `default` account; the plain twin runs none,
                # and ServiceAccount admission refuses a pod whose account does not exist.
                account = {"name": "default", "namespace": obj["metadata"]["name"]}
                default_sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account}
                self.api.apply(default_sa, dry_run=False)
            if kind == "CustomResourceDefinition":
                wait_established(self.api, obj["metadata"]["name"])
                self.api.discover()
        for obj in ordered:
            for pod in pods_of(obj):
                self.send(pod, dry_run=True, what=f"Pod of {subject(obj)} ({pod['metadata']['name']})")


def wait_established(api: Api, name: str) -> None:
    """Block until the CRD ``name`` serves its kinds."""
    deadline = time.monotonic() + ESTABLISH_TIMEOUT_S
    while time.monotonic() < deadline:
        crd = api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").body
        conditions = (crd.get("status") or {}).get("conditions") or []  # null until the first one
        status = {c["type"]: c["status"] for c in conditions}
        if status.get("Established") == "True":
            return
        time.sleep(0.2)
    raise TwinError(f"CRD {name} not established within {ESTABLISH_TIMEOUT_S:.0f} s")


def install_crds(api: Api, report: CheckReport) -> None:
    """Create the CRDs of every vendored schema; a refused one is a finding (a schema the real
    server cannot take would make every check of its kind meaningless)."""
    judge = _Judge(api, report, "CRD from reference/schemas: ")
    for crd in crd_objects():
        if judge.send(crd, dry_run=False):
            wait_established(api, crd["metadata"]["name"])
    report.accepted = 0  # count the render's objects only
    api.discover()


def judge_render(api: Api, render: Path, previous: Path | None = None) -> CheckReport:
    """Check ``render`` on a running twin (CRDs installed here); see the module docstring."""
    report = CheckReport()
    install_crds(api, report)
    if report.findings:
        return report
    if previous is not None:
        before, _ = load_render(previous)
        baseline = CheckReport()
        _Judge(api, baseline, "previous render: ").apply_all(before, dry_run=False)
        report.findings += baseline.findings
        now = {subject(o) for o in load_render(render)[0]}
        report.notes += [f"{s}: deleted by the upgrade" for s in sorted({subject(o) for o in before} - now)]
    objects, helm = load_render(render)
    _Judge(api, report).apply_all(objects, dry_run=True)
    if helm:
        report.notes.append(HELM_NOTE.format(n=len(helm), names=", ".join(helm)))
    return report


def check_render(render: Path, previous: Path | None = None) -> CheckReport:
    """Start a twin, judge ``render`` (against ``previous`` when given) and stop it."""
    load_render(render)  # a bad directory fails before anything starts
    if previous is not None:
        load_render(previous)
    with running_twin() as api:
        return judge_render(api, render, previous)
