"""What this service deployed last time, read by the program itself, so that ``pulumi up``, the
Automation API and another program using the component all refuse what cannot be done in place.

The service's own registered outputs from the stack's last update are read through the engine's
builtin invoke ``pulumi:pulumi:readStackResourceOutputs`` (pulumi/pulumi
``pkg/resource/deploy/builtins.go``: every resource of the named stack's latest snapshot, by URN,
as ``{type, outputs}``), before the service registers itself in this update, so its entry is still
the previous one. No stack output needs exporting: a component in someone else's program finds
its own entry by type and name. Offline (the render, the testing kit) the mocks answer with no
resources, which is a first deployment, unless a test supplies previous outputs.
"""

from __future__ import annotations

from typing import Any

import pulumi

from deepseek_eks.settings import PROJECT, ComputeMode

READ_STACK_RESOURCE_OUTPUTS = "pulumi:pulumi:readStackResourceOutputs"
COMPUTE_MODE_OUTPUT = "computeMode"
"""The output that records the mode a service was deployed with (components/build.py)."""
WEIGHTS_VOLUME_OUTPUT = "weightsVolume"
"""The output that records what the pods' weights volume holds (Mountpoint's prefix, the EBS
snapshot); a change of it gets volume objects of its own (serving/weights.py weights_object_name)."""
WEIGHTS_LOCATION_OUTPUT = "weightsLocation"
"""The output that records where the deployed vLLM reads its weights (``s3://bucket/prefix``)."""


def stack_reference_name() -> str:
    """This stack, fully qualified (``organization/project/stack``; a DIY backend's organization
    is ``organization``)."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def _is_own(urn: str, type_token: str, name: str) -> bool:
    """``urn:pulumi:<stack>::<project>::<parent types $>type::name`` names this service."""
    parts = urn.split("::")
    return len(parts) >= 4 and parts[-1] == name and parts[-2].split("$")[-1] == type_token


def previous_outputs(type_token: str, name: str) -> dict[str, Any] | None:
    """The outputs the service ``name`` of ``type_token`` registered in this stack's last update;
    None for a first deployment (or where the stack cannot be read, said as a warning)."""
    try:
        result = pulumi.runtime.invoke(READ_STACK_RESOURCE_OUTPUTS, {"stackName": stack_reference_name()})
    except Exception as error:  # the engine could not read the stack: say so, assume nothing deployed
        pulumi.log.warn(
            f"DeepSeekService {name!r}: could not read this stack's previous state ({error}); the checks "
            "that compare an update with the deployed service (computeMode) are skipped this run"
        )
        return None
    resources = (result.value or {}).get("outputs") or {}
    found = [
        entry.get("outputs") or {}
        for urn, entry in resources.items()
        if isinstance(entry, dict) and _is_own(str(urn), type_token, name)
    ]
    return dict(found[0]) if len(found) == 1 else None


def deployed_mode(outputs: dict[str, Any] | None) -> str | None:
    """The compute mode recorded in a service's or stack's outputs; None when there is none."""
    value = (outputs or {}).get(COMPUTE_MODE_OUTPUT)
    return value if isinstance(value, str) and value else None


def switch_refusal(
    stack: str, deployed: str | None, wanted: str, *, setting: str | None = None, override: str | None = None
) -> str | None:
    """Why ``stack``, deployed with ``deployed`` (None: nothing deployed, or no record of it),
    must not be updated to ``wanted`` in place; None when the update may go ahead. ``setting`` and
    ``override`` spell the two settings as the user wrote them (config keys by default)."""
    if deployed is None or deployed == wanted:
        return None
    setting = setting or f"{PROJECT}:computeMode"
    override = override or f"{PROJECT}:cluster.allowComputeModeSwitch true"
    return (
        f"{setting} is {wanted!r} but stack {stack!r} is deployed with {deployed!r}; "
        "switching in place fails (the NodePools, StorageClass and IngressClass keep their Kubernetes "
        "names under new URNs, so their creation fails with AlreadyExists)"
        + (
            " and turning Auto Mode off terminates every Auto Mode node and deletes its load balancers"
            if deployed == ComputeMode.AUTO_MODE
            else ""
        )
        + f". Keep {deployed!r} on this stack; to move, deploy a new stack with {setting.split(':')[-1]} "
        f"{wanted!r}, check it "
        f"serves, move traffic to its endpoint, then destroy {stack!r} "
        f"(`python -m automation diff --stack {stack} --set computeMode={wanted}` shows what the switch "
        f"would replace). Nothing was changed. Only for a migration you have prepared: {override}."
    )
