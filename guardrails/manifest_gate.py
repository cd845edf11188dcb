"""The rendered-manifest gate: every Kubernetes object the program renders is validated by tools
nobody here wrote, and an object nothing can validate is a failure, not a pass.

- Built-in kinds: ``kubernetes-validate`` in strict mode (unknown fields rejected) at the
  stack's Kubernetes minor version.
- Custom resources: ``jsonschema`` against the upstream CRD schemas (``schemas/index.json`` in
  the project's reference folder), made strict the same way, plus the scope of ``metadata``.
- Every object: ``metadata.name`` is a DNS-1123 subdomain (neither tool checks it for CRs).
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepseek_eks.automation.stackfile import PROJECT_ROOT

if TYPE_CHECKING:  # the validators are imported where they run: the [twin] extra holds them
    import jsonschema

SCHEMA_DIR_ENV = "DEEPSEEK_EKS_CRD_SCHEMAS"
# Vendored in the repository (each index entry names its upstream repo, tag, commit and path), so a
# fresh clone checks every custom resource; the environment variable points at another set (a
# refreshed one under review) instead.
DEFAULT_SCHEMA_DIR = PROJECT_ROOT / "reference" / "schemas"
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# Schemas not strictified: the EKS Auto Mode NodeClass schema is a stale third-party dump that
# lacks fields AWS documents today (advancedNetworking, certificateBundles, ...); making it strict
# would reject valid objects. It still checks types and enums of the fields it knows.
LENIENT_KINDS = {("eks.amazonaws.com", "NodeClass")}


class CrdSchemasUnavailable(RuntimeError):
    """No CRD schema folder was given (or the one given has no index): custom resources cannot be
    checked, which is an error, never a pass."""


def schema_dir() -> Path:
    """Where the CRD schemas are: the repository's ``reference/schemas``, or ``$DEEPSEEK_EKS_CRD_SCHEMAS``."""
    override = os.environ.get(SCHEMA_DIR_ENV)
    path = Path(override) if override else DEFAULT_SCHEMA_DIR
    if not (path / "index.json").exists():
        raise CrdSchemasUnavailable(
            f"{SCHEMA_DIR_ENV}={path} has no index.json: point it at a CRD schema folder of the "
            "reference/schemas layout, or unset it to use the repository's copy"
        )
    return path


def strictify(schema: dict[str, Any]) -> dict[str, Any]:
    """Reject unknown fields as the API server's strict field validation does: add
    ``additionalProperties: false`` to every object schema that lists its properties and does not
    preserve unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
                and not node.get("x-kubernetes-embedded-resource")
            ):
                node["additionalProperties"] = False
            for key, value in node.items():
                for child in value.values() if key == "properties" else [value]:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(schema)
    return schema


@dataclass(frozen=True)
class CrdSchema:
    group: str
    version: str
    kind: str
    namespaced: bool
    validator: jsonschema.protocols.Validator


@cache
def _crd_schemas(directory: str) -> dict[tuple[str, str, str], CrdSchema]:
    import jsonschema

    root = Path(directory)
    index = json.loads((root / "index.json").read_text())
    out = {}
    for entry in index["schemas"]:
        text = (root / entry["file"]).read_text()
        # Go RE2 accepts a mid-pattern global flag; Python's re does not (PrometheusRule's
        # partial_response_strategy). Same meaning with the flag first.
        text = text.replace("^(?i)", "(?i)^")
        schema = json.loads(text)
        if (entry["group"], entry["kind"]) not in LENIENT_KINDS:
            schema = strictify(schema)
        key = (entry["group"], entry["version"], entry["kind"])
        out[key] = CrdSchema(
            entry["group"],
            entry["version"],
            entry["kind"],
            entry["scope"] == "Namespaced",
            jsonschema.Draft202012Validator(schema),
        )
    return out


def _path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(root)"


def check(obj: dict[str, Any], kubernetes_version: str, crd_dir: Path | None = None) -> list[str]:
    """Problems with one rendered object; empty when it is valid.

    Raises ``CrdSchemasUnavailable`` for a custom resource when ``crd_dir`` is None.
    """
    kind = obj.get("kind", "?")
    name = (obj.get("metadata") or {}).get("name", "")
    label = f"{kind}/{name or '?'}"
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    problems = []
    if not DNS1123_SUBDOMAIN.match(name or "") or len(name) > 253:
        problems.append(f"{label}: metadata.name {name!r} is not a DNS-1123 subdomain")
    try:
        kubernetes_validate.validate(obj, kubernetes_version, strict=True)
        return problems
    except kubernetes_validate.ValidationError as e:
        return [*problems, f"{label}: {_path(e)}: {e.message}"]
    except SchemaNotFoundError:
        pass  # not a built-in kind: a custom resource, checked below

    api_version = obj.get("apiVersion", "")
    group, _, version = api_version.rpartition("/")
    if crd_dir is None:
        raise CrdSchemasUnavailable(f"{label} ({api_version}) needs the CRD schemas")
    schema = _crd_schemas(str(crd_dir)).get((group, version, kind))
    if schema is None:
        return [
            *problems,
            f"{label}: no schema for {api_version} {kind}: an unvalidated object fails the gate",
        ]
    namespace = (obj.get("metadata") or {}).get("namespace")
    if schema.namespaced and not namespace:
        problems.append(f"{label}: {kind} is namespaced but has no metadata.namespace")
    if not schema.namespaced and namespace:
        problems.append(f"{label}: {kind} is cluster-scoped but sets metadata.namespace")
    for error in sorted(schema.validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        problems.append(f"{label}: {_path(error)}: {error.message}")
    return problems
