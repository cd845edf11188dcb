"""The load test as a Kubernetes Job inside the cluster, next to the service it measures.

The tester uses only the standard library, so its source files travel in a ConfigMap and run on
the pinned official Python image; nothing is built or pushed. The API key, when the stack has
one, comes from the Secret the vLLM pods read (optional, so a key-less stack works too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.secrets import API_KEY_KEY, API_KEY_SECRET
from components.versions import LOADTEST_IMAGE

from .cli import API_KEY_ENV

NAME = "vllm-loadtest"
APP_DIR = "/app"
RUN_AS = 65534  # "nobody" in the Debian-based Python image
_AUTOMATION = Path(__file__).resolve().parent.parent
# (file under automation/, ConfigMap key) for every module the tester imports.
SOURCES = (
    ("stats.py", "stats.py"),
    ("loadtest/__init__.py", "loadtest-init.py"),
    ("loadtest/__main__.py", "loadtest-main.py"),
    ("loadtest/http.py", "loadtest-http.py"),
    ("loadtest/runner.py", "loadtest-runner.py"),
    ("loadtest/cli.py", "loadtest-cli.py"),
)


def manifests(args: list[str], namespace: str, deadline_s: int) -> list[dict[str, Any]]:
    """A ConfigMap with the tester's code and a Job running it with ``args``; the Job gives up
    after ``deadline_s`` seconds."""
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
        "image": LOADTEST_IMAGE,
        "command": ["python", "-m", "automation.loadtest", *args],
        "env": [
            {"name": "PYTHONPATH", "value": APP_DIR},
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
        "volumeMounts": [{"name": "code", "mountPath": APP_DIR, "readOnly": True}],
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
                    "volumes": [{"name": "code", "configMap": {"name": NAME, "items": items}}],
                },
            },
        },
    }
    return [config_map, job]
