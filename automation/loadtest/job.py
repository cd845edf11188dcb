"""The load test as a Kubernetes Job inside the cluster, next to the service it measures.

The tester's source files travel in a ConfigMap and run on the pinned official Python image;
nothing is built or pushed. Its one dependency, httpx, is pip-installed as the pod starts into an
emptyDir on PYTHONPATH (the root filesystem stays read-only), so the pod needs egress to PyPI;
``--image`` names an image that already has httpx instead, and then nothing is installed. The API
key, when the stack has one, comes from the Secret the vLLM pods read (optional, so a key-less
stack works too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepseek_eks.components.secrets import API_KEY_KEY, API_KEY_SECRET
from deepseek_eks.components.versions import LOADTEST_IMAGE, LOADTEST_PACKAGES

from .cli import API_KEY_ENV

NAME = "vllm-loadtest"
APP_DIR = "/app"
DEPS_DIR = "/deps"  # emptyDir: the pip-installed httpx
TMP_DIR = "/tmp"  # emptyDir: pip's scratch space
SCRATCH_LIMIT = "128Mi"
RUN_AS = 65534  # "nobody" in the Debian-based Python image
_AUTOMATION = Path(__file__).resolve().parent.parent
# (file under automation/, ConfigMap key) for every module the tester imports.
SOURCES = (
    ("stats.py", "stats.py"),
    ("loadtest/__init__.py", "loadtest-init.py"),
    ("loadtest/__main__.py", "loadtest-main.py"),
    ("loadtest/runner.py", "loadtest-runner.py"),
    ("loadtest/cli.py", "loadtest-cli.py"),
)


def command(args: list[str], image: str | None) -> list[str]:
    """The container command: the tester with ``args``, after installing LOADTEST_PACKAGES unless
    ``image`` is a prebuilt one. Arguments pass through "$@", so no shell quoting applies."""
    tester = ["python", "-m", "automation.loadtest"]
    if image is not None:
        return [*tester, *args]
    install = (
        "python -m pip install --quiet --no-cache-dir --disable-pip-version-check --no-deps "
        f"--only-binary=:all: --target {DEPS_DIR} " + " ".join(LOADTEST_PACKAGES)
    )
    return ["sh", "-c", f'{install} && exec {" ".join(tester)} "$@"', "loadtest", *args]


def manifests(
    args: list[str], namespace: str, deadline_s: int, image: str | None = None
) -> list[dict[str, Any]]:
    """A ConfigMap with the tester's code and a Job running it with ``args``; the Job gives up
    after ``deadline_s`` seconds. ``image``: one with httpx installed (default: the pinned Python
    image, which installs it from PyPI as it starts)."""
    data = {"automation-init.py": '"""The load tester, shipped alone."""\n'}
    data.update({key: (_AUTOMATION / path).read_text() for path, key in SOURCES})
    items = [{"key": "automation-init.py", "path": "automation/__init__.py"}]
    items += [{"key": key, "path": f"automation/{path}"} for path, key in SOURCES]
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "deepseek-eks"}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(labels)},
        "data": data,
    }
    container = {
        "name": "loadtest",
        "image": image or LOADTEST_IMAGE,
        "command": command(args, image),
        "env": [
            # The image's own site-packages come after these, so a prebuilt image's httpx is found.
            {"name": "PYTHONPATH", "value": APP_DIR if image else f"{APP_DIR}:{DEPS_DIR}"},
            {"name": "HOME", "value": TMP_DIR},
            {"name": "TMPDIR", "value": TMP_DIR},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {
                "name": API_KEY_ENV,
                "valueFrom": {"secretKeyRef": {"name": API_KEY_SECRET, "key": API_KEY_KEY, "optional": True}},
            },
        ],
        "resources": {
            "requests": {"cpu": "1", "memory": "512Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "code", "mountPath": APP_DIR, "readOnly": True},
            {"name": "deps", "mountPath": DEPS_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "backoffLimit": 0,  # a load test is not retried: a second run would skew the figures
            "activeDeadlineSeconds": deadline_s,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "code", "configMap": {"name": NAME, "items": items}},
                        {"name": "deps", "emptyDir": {"sizeLimit": SCRATCH_LIMIT}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": SCRATCH_LIMIT}},
                    ],
                },
            },
        },
    }
    return [config_map, job]
