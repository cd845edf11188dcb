"""CustomResourceDefinitions for the twin, built from the vendored schema extracts
(reference/schemas: each entry's group, version, kind, plural, scope and its openAPIV3Schema file),
so the real API server runs the upstream schemas' structural checks and CEL rules."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from deepseek_eks.guardrails.manifest_gate import LENIENT_KINDS, schema_dir

# Extensions the API server adds when it publishes a CRD's OpenAPI (not part of a CRD's schema).
SERVED_OPENAPI_ONLY = ("x-kubernetes-group-version-kind", "x-kubernetes-selectable-fields")


def _open(node: Any) -> None:
    """Keep unknown fields in every object schema under ``node``."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node["x-kubernetes-preserve-unknown-fields"] = True
        for value in node.values():
            _open(value)
    elif isinstance(node, list):
        for value in node:
            _open(value)


def _schema(root: Path, entry: dict[str, Any]) -> dict[str, Any]:
    schema = json.loads((root / entry["file"]).read_text())
    # Not CRD schema language: the Auto Mode dump copied these from a server's published OpenAPI,
    # and the API server refuses a CRD schema carrying them.
    for key in SERVED_OPENAPI_ONLY:
        schema.pop(key, None)
    if (entry["group"], entry["kind"]) in LENIENT_KINDS:
        # The stale third-party schema lacks fields AWS documents (see manifest_gate.LENIENT_KINDS):
        # the twin keeps unknown fields there as the gate does, checking the fields it knows.
        _open(schema)
    return schema


def crd_objects(folder: Path | None = None) -> list[dict[str, Any]]:
    """One CRD per group and kind of the schema index, every indexed version in it."""
    root = folder or schema_dir()
    entries: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for entry in json.loads((root / "index.json").read_text())["schemas"]:
        entries[(entry["group"], entry["kind"])].append(entry)
    crds = []
    for (group, kind), versions in sorted(entries.items()):
        plural, scope = versions[0]["plural"], versions[0]["scope"]
        names = {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"}
        # The API server needs exactly one storage version; an index of one version may not say.
        storage = [v["version"] for v in versions if v.get("storage")] or [versions[0]["version"]]
        crds.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": f"{plural}.{group}",
                    "annotations": {k: v for e in versions for k, v in e.get("crd_annotations", {}).items()},
                },
                "spec": {
                    "group": group,
                    "names": names,
                    "scope": scope,
                    "versions": [
                        {
                            "name": v["version"],
                            "served": v.get("served", True),
                            "storage": v["version"] == storage[0],
                            "schema": {"openAPIV3Schema": _schema(root, v)},
                        }
                        for v in versions
                    ],
                },
            }
        )
    return crds
