"""CustomResourceDefinitions for the twin, built from the vendored schema extracts
(reference/schemas: each entry's group, version, kind, plural, scope and its openAPIV3Schema file),
so the real API server runs the upstream schemas' structural checks and CEL rules."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..manifest_gate import schema_dir


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
                "metadata": {"name": f"{plural}.{group}"},
                "spec": {
                    "group": group,
                    "names": names,
                    "scope": scope,
                    "versions": [
                        {
                            "name": v["version"],
                            "served": v.get("served", True),
                            "storage": v["version"] == storage[0],
                            "schema": {"openAPIV3Schema": json.loads((root / v["file"]).read_text())},
                        }
                        for v in versions
                    ],
                },
            }
        )
    return crds
