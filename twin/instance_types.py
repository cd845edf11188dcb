"""The instance-type file Karpenter's kwok provider reads (``INSTANCE_TYPES_FILE_PATH``), generated
from the project's GPU catalog (sizing/data/gpu_instances.json) for one render.

The format is the provider's own (reference/upstream/karpenter-kwok/facts.json
``instance_type_file``): a list of ``{name, offerings, architecture, operatingSystems, resources}``,
each offering ``{Price, Available, Requirements}``. The provider turns every single-valued ``In``
requirement of an offering into a Node label and registers its key as well known
(``offering_labels``), so each offering carries the labels Karpenter's AWS provider would put on
such a node (``karpenter.k8s.aws/instance-gpu-count`` and the rest): the render's NodePool
requirements on them are then matched as on AWS.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

from deepseek_eks.automation.stackfile import PROJECT_ROOT
from deepseek_eks.sizing.catalog import InstanceType, instance_catalog
from deepseek_eks.sizing.nodes import VM_MEMORY_OVERHEAD

UPSTREAM = PROJECT_ROOT / "reference" / "upstream" / "karpenter-kwok"
AWS = "karpenter.k8s.aws"
# EKS Auto Mode runs Karpenter inside and labels its nodes with the same instance labels under its
# own domain (EKS User Guide, "Create a Node Pool for EKS Auto Mode", supported labels; the
# program's Auto Mode NodePools require them: components/platform/nodepools.py label_prefix).
# Karpenter admits a NodePool requirement on a custom label only when the instance type defines it
# (facts.json undefined_well_known_labels), so the twin's rehearsal of an Auto Mode pool gives its
# instance types both domains.
AUTO_MODE = "eks.amazonaws.com"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
GPU_RESOURCE = "nvidia.com/gpu"
# Capacity types an offering can have here: `reserved` needs a capacity reservation, which a kwok
# provider has no way to model, so a pool admitting it simply never gets that offering.
CAPACITY_TYPES = ("spot", "on-demand")


@cache
def facts() -> dict[str, Any]:
    """reference/upstream/karpenter-kwok/facts.json: what the provider reads and does, with sources."""
    loaded: dict[str, Any] = json.loads((UPSTREAM / "facts.json").read_text())
    return loaded


def aws_labels(instance: InstanceType) -> dict[str, str]:
    """The ``karpenter.k8s.aws/*`` labels Karpenter's AWS provider sets on a node of ``instance``
    (their meaning: facts.json ``aws_instance_type_labels``, AWS provider docs v1.14)."""
    match = re.fullmatch(r"([a-z]+)(\d+)[a-z]*", instance.family.split("-")[0])
    if match is None:
        raise ValueError(f"cannot read the category and generation of family {instance.family!r}")
    labels = {
        f"{AWS}/instance-category": match[1],
        f"{AWS}/instance-generation": match[2],
        f"{AWS}/instance-family": instance.family,
        f"{AWS}/instance-size": instance.name.split(".", 1)[1],
        f"{AWS}/instance-cpu": str(instance.vcpu),
        f"{AWS}/instance-memory": str(instance.memory_mib),
        f"{AWS}/instance-gpu-count": str(instance.gpu_count),
        f"{AWS}/instance-gpu-manufacturer": "nvidia",
        f"{AWS}/instance-gpu-memory": str(instance.gpu_memory_mib),
        f"{AWS}/instance-gpu-name": instance.gpu_model.lower(),
    }
    if instance.instance_storage_gb:
        labels[f"{AWS}/instance-local-nvme"] = str(instance.instance_storage_gb)
    return labels


def _offerings(labels: dict[str, str], zones: list[str], on_demand_usd: float) -> list[dict[str, Any]]:
    spot_ratio = float(facts()["spot_price_ratio"]["value"])
    out = []
    for zone in zones:
        for capacity_type in CAPACITY_TYPES:
            price = on_demand_usd * (spot_ratio if capacity_type == "spot" else 1.0)
            fixed = {CAPACITY_TYPE: capacity_type, ZONE: zone} | labels
            requirements = [{"key": k, "operator": "In", "values": [v]} for k, v in fixed.items()]
            out.append({"Price": round(price, 6), "Available": True, "Requirements": requirements})
    return out


def _entry(
    name: str, labels: dict[str, str], resources: dict[str, str], zones: list[str], usd: float
) -> dict[str, Any]:
    return {
        "name": name,
        "offerings": _offerings(labels, zones, usd),
        "architecture": "amd64",  # every type here is x86 (the catalog has no Graviton GPU type)
        "operatingSystems": ["linux"],
        "resources": resources,
    }


def auto_mode_labels(labels: dict[str, str]) -> dict[str, str]:
    """``labels`` plus each ``karpenter.k8s.aws/`` one again under Auto Mode's domain."""
    prefix = f"{AWS}/"
    extra = {f"{AUTO_MODE}/{k[len(prefix) :]}": v for k, v in labels.items() if k.startswith(prefix)}
    return labels | extra


def gpu_instance_types(
    region: str,
    zones: list[str],
    ephemeral_storage: dict[str, str] | None = None,
    *,
    auto_mode: bool = False,
) -> list[dict[str, Any]]:
    """Every catalog GPU type offered in ``region`` with an On-Demand price, in every zone, spot
    and on-demand. Memory is what Karpenter's AWS provider counts as capacity (EC2's figure less
    its VM overhead); ``ephemeral_storage`` is the node's per type (the node class decides it)."""
    out = []
    for instance in sorted(instance_catalog().instances.values(), key=lambda i: i.name):
        usd = instance.on_demand_usd_per_hour.get(region)
        if not instance.offered_in_region.get(region) or usd is None:
            continue  # Karpenter could never launch it there (p5e: Capacity Blocks only)
        resources = {
            "cpu": str(instance.vcpu),
            "memory": f"{math.floor(instance.memory_mib * (1 - VM_MEMORY_OVERHEAD))}Mi",
            GPU_RESOURCE: str(instance.gpu_count),
        }
        if ephemeral_storage and instance.name in ephemeral_storage:
            resources["ephemeral-storage"] = ephemeral_storage[instance.name]
        labels = aws_labels(instance)
        out.append(
            _entry(instance.name, auto_mode_labels(labels) if auto_mode else labels, resources, zones, usd)
        )
    return out


def general_instance_types(zones: list[str]) -> list[dict[str, Any]]:
    """A few CPU types for the render's general pool, with the labels AWS's provider documents
    (facts.json ``general_instance_types``; one is of generation 5, which the general pool's
    ``instance-generation Gt 5`` must refuse). Priced by the upstream kwok generator's rule."""
    out = []
    for name, spec in facts()["general_instance_types"]["types"].items():
        labels = {k: v for k, v in spec["labels"].items() if k.startswith(f"{AWS}/")}
        out.append(_entry(name, labels, spec["resources"], zones, float(spec["on_demand_usd"])))
    return out


def instance_types_file(
    path: Path,
    region: str,
    zones: list[str],
    ephemeral_storage: dict[str, str] | None = None,
    *,
    auto_mode: bool = False,
) -> list[dict[str, Any]]:
    """Write the provider's instance-type file for ``region``/``zones`` (``auto_mode``: the GPU
    types also carry Auto Mode's labels); returns its entries."""
    entries = gpu_instance_types(region, zones, ephemeral_storage, auto_mode=auto_mode)
    entries += general_instance_types(zones)
    path.write_text(json.dumps(entries, indent=1))
    return entries
