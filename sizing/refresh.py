"""Check the bundled GPU instance catalog's hardware facts against EC2's own DescribeInstanceTypes.

The bundled catalog is a snapshot; AWS corrects GPU memory figures and adds EFA to sizes over time,
and a sizing decision made on a stale figure is silently wrong. Only hardware is refreshed here:
prices and regional offerings come from other sources with their own dates. Nothing here imports
Pulumi, so the check can run from a plain CLI or test without a stack.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError

from .catalog import GPU_ARCHS, InstanceCatalog, InstanceType, cuda_memory_table, gpu_memory_key

# DescribeInstanceTypes rejects more names than this in one request.
MAX_NAMES_PER_CALL = 100

# The error EC2 answers with when any one of the requested names is unknown, failing the whole request.
_UNKNOWN_TYPE_ERROR = "InvalidInstanceType"

# Hardware fields compared with EC2, in the order drifts are reported.
_HARDWARE_FIELDS: tuple[str, ...] = (
    "gpu_model",
    "gpu_count",
    "gpu_memory_mib",
    "vcpu",
    "memory_mib",
    "efa_supported",
    "network_baseline_gbps",
    "network_peak_gbps",
)


@dataclass(frozen=True)
class Drift:
    """One disagreement between the bundled catalog and EC2, kept so a human can judge which is right.

    ``field`` is an InstanceType field name, or ``"missing"`` (EC2 does not know the type; ``bundled``
    is True and ``live`` None) or ``"gpu_info"`` (EC2 reports no GPU for it).
    """

    instance_type: str
    field: str
    bundled: object
    live: object

    def __str__(self) -> str:
        if self.field == "missing":
            return f"{self.instance_type}: in the bundled catalog, but EC2 does not know this instance type"
        return f"{self.instance_type} {self.field}: bundled {self.bundled}, EC2 says {self.live}"


def ec2_client(region: str) -> Any:
    """A plain EC2 client; kept here so callers (and tests) need no boto3 import of their own."""
    return boto3.client("ec2", region_name=region)


def _chunks(names: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(names), size):
        yield list(names[start : start + size])


def _describe(ec2: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """Describe ``names``; unknown ones are left out rather than failing the lot.

    EC2 rejects a whole request when one name is unknown, and its message listing them is not a
    contract, so the request is split in halves until the unknown names stand alone: a few extra
    calls only when something is wrong, one call per chunk otherwise.
    """
    if not names:
        return {}
    try:
        found: dict[str, dict[str, Any]] = {}
        for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=names):
            for info in page.get("InstanceTypes", []):
                found[info["InstanceType"]] = info
        return found
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != _UNKNOWN_TYPE_ERROR:
            raise
        if len(names) == 1:
            return {}
        half = len(names) // 2
        return _describe(ec2, names[:half]) | _describe(ec2, names[half:])


def _with_live_hardware(bundled: InstanceType, info: dict[str, Any]) -> tuple[InstanceType, list[Drift]]:
    """``bundled`` with EC2's hardware figures, plus drifts for the figures deliberately not taken.

    A GPU model the sizing engine has no architecture for, or a type EC2 says has no GPU at all,
    would break sizing downstream; those keep the bundled values and are reported instead.
    """
    held_back: list[Drift] = []
    gpu_model, gpu_count, gpu_memory_mib = bundled.gpu_model, bundled.gpu_count, bundled.gpu_memory_mib
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    if not gpus:
        held_back.append(Drift(bundled.name, "gpu_info", f"{gpu_count}x {gpu_model}", None))
    else:
        gpu_count = int(gpus[0]["Count"])
        gpu_memory_mib = int(gpus[0]["MemoryInfo"]["SizeInMiB"])
        model = str(gpus[0]["Name"])
        if model in GPU_ARCHS:
            gpu_model = model
        elif model != bundled.gpu_model:
            held_back.append(Drift(bundled.name, "gpu_model", bundled.gpu_model, model))
    # The network card pods use: the default one (types with several cards list each of them).
    network = info.get("NetworkInfo", {})
    cards = network.get("NetworkCards") or [{}]
    card = cards[int(network.get("DefaultNetworkCardIndex", 0))]
    # CUDA's figure follows the GPU model (EC2's memory figure is never the budget).
    cuda = cuda_memory_table().get(gpu_memory_key(gpu_model, gpu_memory_mib))
    live = replace(
        bundled,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        gpu_memory_mib=gpu_memory_mib,
        cuda_memory_mib=cuda["cuda_total_mib"] if cuda else bundled.cuda_memory_mib,
        vcpu=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(info["MemoryInfo"]["SizeInMiB"]),
        efa_supported=bool(network.get("EfaSupported", False)),
        network_baseline_gbps=float(card.get("BaselineBandwidthInGbps", bundled.network_baseline_gbps)),
        network_peak_gbps=float(card.get("PeakBandwidthInGbps", bundled.network_peak_gbps)),
    )
    return live, held_back


def refresh_hardware(catalog: InstanceCatalog, ec2_client: Any) -> tuple[InstanceCatalog, list[Drift]]:
    """Take EC2's hardware figures over the bundled ones, and say where they differed.

    Returns the refreshed catalog and the drifts, in catalog order. Types EC2 does not return are
    kept as bundled (a retired or mistyped name should not silently vanish from sizing) and are
    reported as missing.
    """
    names = list(catalog.instances)
    live: dict[str, dict[str, Any]] = {}
    for chunk in _chunks(names, MAX_NAMES_PER_CALL):
        live |= _describe(ec2_client, chunk)

    instances: dict[str, InstanceType] = {}
    drifts: list[Drift] = []
    for name, bundled in catalog.instances.items():
        info = live.get(name)
        if info is None:
            instances[name] = bundled
            drifts.append(Drift(name, "missing", True, None))
            continue
        live_type, held_back = _with_live_hardware(bundled, info)
        for key in _HARDWARE_FIELDS:
            if getattr(live_type, key) != getattr(bundled, key):
                drifts.append(Drift(name, key, getattr(bundled, key), getattr(live_type, key)))
        drifts.extend(held_back)
        instances[name] = live_type

    region = ec2_client.meta.region_name
    today = datetime.now(UTC).date().isoformat()
    source = f"EC2 DescribeInstanceTypes in {region} ({today})"
    if len(live) < len(names):
        source += f"; types EC2 did not return: {catalog.hardware_source}"
    return replace(catalog.replace_instances(instances), hardware_source=source), drifts
