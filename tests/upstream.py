"""Loaders for the upstream facts snapshotted in ``reference/upstream`` (see its README).

Tests compare the render with these files, which were read from the upstream projects' own
releases, so a test never checks a fact against the project's own constant."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.guardrails.manifest_gate import schema_dir
from deepseek_eks.guardrails.pins import HELM_CHARTS, helm_chart_snapshot

UPSTREAM = Path(__file__).resolve().parent.parent / "reference" / "upstream"


@cache
def vllm_serve_flags(version: str = "0.33.0") -> dict[str, dict[str, Any]]:
    """``--flag -> {choices, deprecated, dest, takes_value}`` of ``vllm serve`` in that release."""
    data: dict[str, dict[str, Any]] = json.loads(
        (UPSTREAM / f"vllm-{version}" / "serve-flags.json").read_text()
    )
    return data


@cache
def vllm_quantization_check(version: str = "0.33.0") -> dict[str, Any]:
    """How vLLM reconciles ``--quantization`` with a checkpoint's own quantization_config
    (``ModelConfig._verify_quantization``): whether a mismatch refuses to start, and which methods may
    claim a checkpoint for another flag value."""
    data: dict[str, Any] = json.loads((UPSTREAM / f"vllm-{version}" / "quantization-check.json").read_text())
    return data


@cache
def vllm_metric_names(version: str = "0.33.0") -> frozenset[str]:
    lines = (UPSTREAM / f"vllm-{version}" / "metric-names.txt").read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@cache
def eks_ami_release_tags() -> frozenset[str]:
    """Release tags of awslabs/amazon-eks-ami (``vYYYYMMDD``)."""
    lines = (UPSTREAM / "amazon-eks-ami-release-tags.txt").read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip())


@cache
def karpenter_cloudformation(version: str = "1.14") -> dict[str, Any]:
    """Karpenter's official getting-started CloudFormation template (CFN tags loaded as plain data)."""

    class _Loader(yaml.SafeLoader):
        pass

    def _tag(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]

    _Loader.add_multi_constructor("!", _tag)
    data: dict[str, Any] = yaml.load(
        (UPSTREAM / f"karpenter-{version}-cloudformation.yaml").read_text(), Loader=_Loader
    )
    return data


@cache
def cuda_gpu_memory_gib() -> dict[str, float]:
    """Lowest CUDA total observed per GPU model in public logs (``cuda/gpu-memory-observed.json``);
    GPUs seen only through nvidia-smi get that total less the driver reservation recorded there."""
    data = json.loads((UPSTREAM / "cuda" / "gpu-memory-observed.json").read_text())
    reserve_mib = data["driver_reservation_mib"]["value"]
    out: dict[str, float] = {}
    for gpu, seen in data["observations"].items():
        cuda = [o["cuda_total_gib"] for o in seen if "cuda_total_gib" in o]
        smi = [o["nvidia_smi_total_mib"] for o in seen if "nvidia_smi_total_mib" in o]
        out[gpu] = min(cuda) if cuda else (min(smi) - reserve_mib) / 1024
    return out


@cache
def model_configs() -> dict[str, dict[str, Any]]:
    """config.json architecture fields per Hugging Face repo (``model-configs.json``)."""
    data: dict[str, dict[str, Any]] = json.loads((UPSTREAM / "model-configs.json").read_text())["models"]
    return data


@cache
def vllm_auth_prefixes(version: str = "0.33.0") -> dict[str, Any]:
    """vLLM's API-key scope: ``guarded_prefixes`` (the only paths the key protects) and routes
    seen answering without it."""
    data: dict[str, Any] = json.loads((UPSTREAM / f"vllm-{version}" / "auth-prefixes.json").read_text())
    return data


@cache
def vllm_object_storage_facts(version: str = "0.33.0") -> dict[str, Any]:
    """How vLLM loads an ``s3://`` model: where it pulls config and tokenizer files to."""
    path = UPSTREAM / f"vllm-{version}" / "object-storage-model.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@cache
def serving_facts() -> dict[str, Any]:
    """Pod Identity agent address, DNS on Auto Mode, readiness-gate labels, ALB limits, Karpenter
    and LeaderWorkerSet annotation keys, each with its source (``serving-facts.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / "serving-facts.json").read_text())
    return data


@cache
def cold_start_facts() -> dict[str, Any]:
    """Published cold-start figures: the EKS guide's node, SOCI image pull and Run:ai streamer
    load, the standard pull's range (``cold-start-facts.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / "cold-start-facts.json").read_text())
    return data


def hpa_sync_period_s() -> int:
    """kube-controller-manager's default --horizontal-pod-autoscaler-sync-period, in seconds, as
    read from its source (``hpa-keda-controllers.json``)."""
    data = json.loads((UPSTREAM / "hpa-keda-controllers.json").read_text())
    return int(data["kubernetes"]["controller_flag_defaults"]["HorizontalPodAutoscalerSyncPeriod_s"])


def karpenter_image_pull_s() -> float:
    """Seconds to pull the ~12 GB vllm/vllm-openai image on a Karpenter AL2023 node with SOCI
    parallel mode, at the karpenter-blueprints measured rate (``cold-start-facts.json``)."""
    facts = cold_start_facts()
    blueprint = facts["karpenter_soci"]["blueprint"]
    gb_per_s = blueprint["image_size_bytes"] / 1e9 / blueprint["al2023_soci_pull_s"]
    return float(facts["vllm_openai_image_compressed_gb"]["gb"] / gb_per_s)


@cache
def network_policy_facts() -> dict[str, Any]:
    """Where the API server and its callbacks sit for NetworkPolicy on EKS: the default service
    CIDRs and the control plane's interfaces in the VPC (``network-policy-facts.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / "network-policy-facts.json").read_text())
    return data


@cache
def pulumi_config_facts() -> dict[str, Any]:
    """How the Pulumi engine reads stack config, and its YAML parser (see the file's sources)."""
    data: dict[str, Any] = json.loads((UPSTREAM / "pulumi-config" / "facts.json").read_text())
    return data


@cache
def mountpoint_csi_facts(version: str = "2.7.0") -> dict[str, Any]:
    """The Mountpoint for Amazon S3 CSI driver's name, volume attributes, pod-level credentials,
    read-only access mode and mount options (``mountpoint-s3-csi-driver-v<version>.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / f"mountpoint-s3-csi-driver-v{version}.json").read_text())
    return data


@cache
def lws_facts(version: str = "0.10.0") -> dict[str, Any]:
    """LeaderWorkerSet's headless Services, pod subdomains, leader address, rollout defaults and
    Available condition (``lws-v<version>.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / f"lws-v{version}.json").read_text())
    return data


@cache
def pulumi_kubernetes_await_facts() -> dict[str, Any]:
    """How pulumi-kubernetes waits for a custom resource (``pulumi-kubernetes-await.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / "pulumi-kubernetes-await.json").read_text())
    return data


@cache
def nlb_facts() -> dict[str, Any]:
    """NLB classes and Service annotations of the AWS Load Balancer Controller and EKS Auto Mode."""
    data: dict[str, Any] = json.loads((UPSTREAM / "nlb-facts.json").read_text())
    return data


@cache
def karpenter_well_known_aws_labels() -> frozenset[str]:
    """The ``karpenter.k8s.aws/*`` node labels Karpenter itself sets: the keys its NodePool CRD
    (v1.14, reference/schemas) allows in the otherwise restricted ``karpenter.k8s.aws`` domain."""
    text = (schema_dir() / "karpenter.sh_v1_NodePool.json").read_text()
    rule = re.search(r'label domain \\"karpenter\.k8s\.aws\\" is restricted",\s*"rule": "([^\n]+)"', text)
    if rule is None:
        raise AssertionError("the NodePool CRD no longer restricts the karpenter.k8s.aws domain")
    return frozenset(re.findall(r'\\"(karpenter\.k8s\.aws/[a-z-]+)\\"', rule[1]))


@dataclass(frozen=True)
class ChartDefaults:
    """A chart's default values (``helm-charts/<chart>-<version>/``, see its ``index.json``)."""

    folder: Path
    chart: dict[str, Any]
    """Its Chart.yaml (name, version, dependencies)."""
    values: dict[str, Any]
    """Its values.yaml."""
    schema: dict[str, Any] | None
    """Its values.schema.json, when the chart ships one."""


@cache
def helm_chart_defaults(chart: str, version: str) -> ChartDefaults:
    """The default values of ``chart`` at ``version``; FileNotFoundError when there is no snapshot."""
    folder = helm_chart_snapshot(chart, version)
    schema_file = folder / "values.schema.json"
    return ChartDefaults(
        folder=folder,
        chart=yaml.safe_load((folder / "Chart.yaml").read_text()),
        values=yaml.safe_load((folder / "values.yaml").read_text()) or {},
        schema=json.loads(schema_file.read_text()) if schema_file.exists() else None,
    )


@cache
def helm_chart_sources() -> dict[str, Any]:
    """``helm-charts/index.json``: where each snapshot came from."""
    data: dict[str, Any] = json.loads((HELM_CHARTS / "index.json").read_text())
    return data


def network_policy_controller() -> dict[str, Any]:
    """How the EKS network-policy controller resolves egress peers, Service ClusterIPs included
    (``network-policy-controller.json``)."""
    data: dict[str, Any] = json.loads((UPSTREAM / "network-policy-controller.json").read_text())
    return data


def chart_workloads() -> dict[str, Any]:
    """The pinned charts' pods and Services that the required flows start from or reach
    (``chart-workloads.json``), each with its source."""
    data: dict[str, Any] = json.loads((UPSTREAM / "chart-workloads.json").read_text())
    return data
