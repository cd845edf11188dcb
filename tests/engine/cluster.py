"""What the existing-cluster example needs beyond the engine: the local kube-apiserver of Tier 0
(``deepseek_eks.twin``) with every vendored CRD installed, its kubeconfig, and the twin's stack
transform (``twin/providers/transform.py``: local stub Helm charts, no readiness waits).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import runpy
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from twin.providers.transform import register_twin_transform

# kube-controller-manager's controllers the engine tests need: without them a deleted namespace, an
# object deleted in the foreground, or a PersistentVolume(Claim) (the API server's
# StorageObjectInUseProtection admission puts a protection finalizer on each, which only these
# controllers lift once no pod uses it) never goes away, and the update or destroy waits forever.
CONTROLLERS = ",".join(
    (
        "namespace-controller",
        "garbage-collector-controller",
        "persistentvolume-protection-controller",
        "persistentvolumeclaim-protection-controller",
    )
)


@contextlib.contextmanager
def local_cluster(home: Path) -> Iterator[Path]:
    """Tier 0's etcd + kube-apiserver with the vendored CRDs, plus the kube-controller-manager
    controllers of ``CONTROLLERS``; yields an admin kubeconfig file."""
    server = pytest.importorskip("deepseek_eks.twin.server", reason="Tier 0 (twin/) is not in this tree")
    from deepseek_eks.twin import binaries, certs, crds

    captured: dict[str, Any] = {}
    generate = certs.generate

    def keep(folder: Path) -> Any:  # the certificates running_twin makes, for the kubeconfig
        captured["files"] = generate(folder)
        return captured["files"]

    try:
        manager = binaries.require_binaries(("kube-controller-manager",))["kube-controller-manager"]
        with mock.patch.object(certs, "generate", keep), server.running_twin() as api:
            for crd in crds.crd_objects():
                reply = api.apply(crd, dry_run=False)
                assert reply.ok, f"CRD {crd['metadata']['name']}: {reply.message}"
            _wait_established(api, [c["metadata"]["name"] for c in crds.crd_objects()])
            path = home / "kubeconfig"
            files = captured["files"]
            path.write_text(yaml.safe_dump(kubeconfig(str(api.http.base_url).rstrip("/"), files)))
            controllers = subprocess.Popen(
                [str(manager), f"--kubeconfig={path}", f"--controllers={CONTROLLERS}",
                 "--leader-elect=false", "--secure-port=0", f"--root-ca-file={files.ca}",
                 f"--service-account-private-key-file={files.service_account_key}"],
                stdout=(home / "kube-controller-manager.log").open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                yield path
            finally:
                controllers.terminate()
                controllers.wait(timeout=30)
    except binaries.BinariesMissing as e:
        if os.environ.get("DEEPSEEK_EKS_REQUIRE_ENGINE") == "1":
            pytest.fail(str(e))
        pytest.skip(str(e))


def _wait_established(api: Any, names: list[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            body = api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").body
            conditions = (body.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                pending.discard(name)
        time.sleep(0.5)
    assert not pending, f"CRDs not established: {sorted(pending)}"


def kubeconfig(server: str, files: Any) -> dict[str, Any]:
    """An admin kubeconfig for the twin, certificates inline (the Kubernetes provider reads text)."""

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "twin", "cluster": {"server": server, "certificate-authority-data": data(files.ca)}}
        ],
        "users": [
            {
                "name": "twin-admin",
                "user": {
                    "client-certificate-data": data(files.client_cert),
                    "client-key-data": data(files.client_key),
                },
            }
        ],
        "contexts": [{"name": "twin", "context": {"cluster": "twin", "user": "twin-admin"}}],
        "current-context": "twin",
    }


@contextlib.contextmanager
def stack_on_twin(home: Path, project_dir: Path, stack_name: str, kubeconfig_key: str = "") -> Iterator[Any]:
    """The program in ``project_dir`` as an inline-program stack on a fresh twin, with its stack
    file's settings; the twin's kubeconfig goes to the ``eks`` stand-in's cluster outputs and, with
    ``kubeconfig_key``, to that (secret) setting."""
    from pulumi import automation as auto

    from deepseek_eks.automation.stackfile import read_stack
    from tests.engine.engine import make_engine, require_binary, standin

    kubernetes = require_binary("pulumi-resource-kubernetes", "K8S_VERSION")
    engine = make_engine(home / "engine", {"pulumi-resource-kubernetes": kubernetes})
    config = read_stack(stack_name, project_dir)

    def program() -> None:
        register_twin_transform(home / "charts")
        runpy.run_path(str(project_dir / "__main__.py"))

    with local_cluster(home) as kubeconfig:
        engine.env[standin.KUBECONFIG_ENV] = str(kubeconfig)
        stack = engine.stack(config.project, stack_name, program)
        values = {
            key: auto.ConfigValue(value if isinstance(value, str) else json.dumps(value))
            for key, value in config.values.items()
            if key != kubeconfig_key
        }
        stack.set_all_config(values)
        if kubeconfig_key:
            stack.set_config(kubeconfig_key, auto.ConfigValue(kubeconfig.read_text(), secret=True))
        yield stack
