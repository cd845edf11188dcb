"""Offline render: run the real program (``build``) under the recording mocks and write what it
would create: Kubernetes objects, Helm releases, AWS resources and the sizing plan.

Layout: ``DIR/<stack>/kubernetes/*.yaml`` one object per file,
``DIR/<stack>/helm/<release>.yaml``, ``DIR/<stack>/aws.json``, ``DIR/<stack>/plan.json``,
plus ``DIR/<stack>/outputs.json`` (the stack outputs). Secrets are masked everywhere; a
re-render of the same config is byte-identical.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pulumi.runtime import rpc

from deepseek_eks.components import BuildResult, build, size
from deepseek_eks.settings import parse_settings
from deepseek_eks.settings.pulumi_source import load_settings
from deepseek_eks.sizing import SizingPlan
from deepseek_eks.sizing.stack_cost import StackCost
from deepseek_eks.testing.mocks import SECRET_MASK as MASK
from deepseek_eks.testing.mocks import ProgramLog, Recorded, RecordingMocks, run_with_mocks

from .costing import whole_stack_cost
from .stackfile import SECRET_PLACEHOLDER, StackConfig

HELM_TOKENS = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
AWS_PREFIXES = ("aws:", "eks:")

# Apply order for the kinds we render; others sort after these, alphabetically.
KIND_ORDER = ("Namespace", "CustomResourceDefinition", "ServiceAccount", "Secret", "ConfigMap")


@dataclass
class Rendered:
    """Everything one stack renders to, in memory."""

    stack: str
    sizing: SizingPlan
    kubernetes: dict[str, dict[str, Any]] = field(default_factory=dict)  # file name -> object
    helm: dict[str, dict[str, Any]] = field(default_factory=dict)  # release -> description
    aws: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    stack_cost: StackCost | None = None  # the whole-stack cost (automation/costing.py)
    # What the program logged as warnings (the settings' warnings among them), for the command to show.
    warnings: tuple[str, ...] = ()

    @property
    def plan(self) -> dict[str, Any]:
        cost = self.stack_cost.to_dict() if self.stack_cost else {}
        return {**self.sizing.to_dict(), **cost}

    def objects(self) -> list[dict[str, Any]]:
        return list(self.kubernetes.values())


def _masker(secret_values: list[str]):
    needles = sorted({v for v in secret_values if v and v != SECRET_PLACEHOLDER}, key=len, reverse=True)

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            for needle in needles:
                value = value.replace(needle, MASK)
            return value
        if isinstance(value, dict):
            return {k: mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    return mask


def _mask_all(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_all(v) for v in value]
    return MASK


def unwrap_secrets(value: Any) -> Any:
    """Replace every Pulumi secret in recorded inputs by the mask, keeping map keys visible."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return _mask_all(value.get("value"))
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value


def _prune(value: Any) -> Any:
    """Drop unset (None) fields the SDK passes through, and give back integers their type (the
    engine's wire format carries every number as a double)."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def kubernetes_manifest(record: Recorded) -> dict[str, Any]:
    """The Kubernetes object a ``kubernetes:<group>/<version>:<Kind>`` registration applies."""
    _, api, kind = record.type.split(":", 2)
    group, version = api.split("/", 1) if "/" in api else ("core", api)
    inputs = unwrap_secrets(record.inputs)
    body = _prune({k: v for k, v in inputs.items() if k not in ("apiVersion", "kind")})
    manifest: dict[str, Any] = {
        "apiVersion": version if group == "core" else f"{group}/{version}",
        "kind": kind,
    }
    manifest.update(body)
    if kind == "Secret":
        for key in ("data", "stringData"):
            if key in manifest:
                manifest[key] = {k: MASK for k in manifest[key]}
    return manifest


def _file_name(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(
            f"{manifest['kind']} has no metadata.name: give every Kubernetes object an explicit "
            "name so renders are stable"
        )
    scope = meta.get("namespace", "cluster")
    return re.sub(r"[^a-z0-9.-]", "-", f"{manifest['kind']}-{scope}-{name}".lower()) + ".yaml"


def _kind_rank(manifest: dict[str, Any]) -> tuple[int, str]:
    kind = manifest["kind"]
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def _helm_release(record: Recorded) -> tuple[str, dict[str, Any]]:
    i = unwrap_secrets(record.inputs)
    name = i.get("name") or record.name
    repo = (i.get("repositoryOpts") or {}).get("repo")
    return name, _prune(
        {
            "chart": i.get("chart"),
            "repository": repo,
            "version": i.get("version"),
            "namespace": i.get("namespace"),
            # Helm creates the namespace itself (`helm install --create-namespace`): nothing else
            # in the render does, and what the program puts in it (a NetworkPolicy) needs it.
            "create_namespace": True if i.get("createNamespace") else None,
            "values": i.get("values") or {},
        }
    )


@dataclass
class Construction:
    """One run of ``build`` under mocks: what it registered, returned and exported (unmasked)."""

    mocks: RecordingMocks
    result: BuildResult
    outputs: dict[str, Any]
    log: ProgramLog


def run_stack_program(
    program: Callable[[], dict[str, Any]],
    mocks: RecordingMocks,
    config: StackConfig,
    log: ProgramLog | None = None,
) -> dict[str, Any]:
    """Run ``program`` under ``mocks`` as the stack ``config`` describes (project, stack, config
    values and secret keys); returns its resolved outputs. What it logs goes to ``log`` (kept, not
    printed: the command decides what to show, once)."""
    return run_with_mocks(
        program,
        mocks,
        project=config.project,
        stack=config.stack,
        config=config.values,
        secret_keys=config.secret_keys,
        log=log if log is not None else ProgramLog(),
    )


def construct(config: StackConfig) -> Construction:
    """Run ``build`` for ``config`` under fresh strict recording mocks, reading settings through
    the same Pulumi config loader ``pulumi up`` uses."""
    mocks = RecordingMocks(region=config.values.get("aws:region", "us-east-1"))
    holder: dict[str, BuildResult] = {}

    def program() -> dict[str, Any]:
        holder["result"] = build(load_settings())
        return holder["result"].outputs

    log = ProgramLog()
    outputs = run_stack_program(program, mocks, config, log)
    return Construction(mocks, holder["result"], outputs, log)


def render(config: StackConfig) -> Rendered:
    """Run ``build`` for ``config`` under mocks and collect what it creates, secrets masked.

    Raises ``SettingsError`` or ``SizingError`` when the stack cannot be built.
    """
    # Validate settings and size first so errors surface plainly, not from inside the engine.
    settings = parse_settings(config.values, config.secret_keys, config.stack)
    size(settings)
    run = construct(config)
    mask = _masker([config.values[k] for k in config.secret_keys])
    rendered = Rendered(
        stack=config.stack,
        sizing=run.result.plan,
        outputs=mask(run.outputs),
        stack_cost=whole_stack_cost(settings, run.result.plan),
        warnings=run.log.warnings,
    )
    manifests = []
    for record in run.mocks.resources:
        if record.type in HELM_TOKENS:
            name, release = _helm_release(record)
            if name in rendered.helm:
                raise ValueError(f"two Helm releases named {name!r}")
            rendered.helm[name] = mask(release)
        elif record.type.startswith("kubernetes:"):
            manifests.append(mask(kubernetes_manifest(record)))
        elif record.type.startswith(AWS_PREFIXES):
            rendered.aws.append(
                {
                    "type": record.type,
                    "name": record.name,
                    "inputs": mask(_prune(unwrap_secrets(record.inputs))),
                }
            )
    for manifest in sorted(manifests, key=lambda m: (_kind_rank(m), _file_name(m))):
        file_name = _file_name(manifest)
        if file_name in rendered.kubernetes:
            raise ValueError(f"two Kubernetes objects render to {file_name}")
        rendered.kubernetes[file_name] = manifest
    rendered.aws.sort(key=lambda r: (r["type"], r["name"]))
    return rendered


def _yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, width=100)


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False) + "\n"


def write(rendered: Rendered, out_dir: Path) -> Path:
    """Write ``rendered`` under ``out_dir/<stack>``, replacing an earlier render of that stack."""
    root = out_dir / rendered.stack
    if root.exists():
        shutil.rmtree(root)
    (root / "kubernetes").mkdir(parents=True)
    (root / "helm").mkdir()
    for file_name, manifest in rendered.kubernetes.items():
        (root / "kubernetes" / file_name).write_text(_yaml(manifest))
    for name, release in sorted(rendered.helm.items()):
        (root / "helm" / f"{name}.yaml").write_text(_yaml(release))
    (root / "aws.json").write_text(json.dumps(rendered.aws, indent=2, sort_keys=True) + "\n")
    (root / "plan.json").write_text(_json(rendered.plan))
    (root / "outputs.json").write_text(json.dumps(rendered.outputs, indent=2, sort_keys=True) + "\n")
    return root
