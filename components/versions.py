"""Every chart, image and AMI the program installs, pinned in one place.

Keep these in step with the CRD schemas the manifest gate validates against (the project's
reference ``schemas/index.json``: Karpenter 1.14.x, KEDA 2.20.x, prometheus-operator 0.93.x,
LeaderWorkerSet 0.10.x). Bumping a pin is a reviewed change: nothing here says ``latest``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChartPin:
    """A Helm chart at an exact version."""

    chart: str
    """Chart name, or the full ``oci://`` reference for OCI charts."""
    repository: str | None
    """Classic Helm repository URL; None for OCI charts."""
    version: str
    """Exact chart version."""


# Karpenter's own OCI chart; it installs its CRDs (NodePool, NodeClaim, EC2NodeClass) on first
# install. 1.14.1 matches the NodePool/EC2NodeClass schemas the gate uses.
KARPENTER = ChartPin("oci://public.ecr.aws/karpenter/karpenter", None, "1.14.1")

# NVIDIA device plugin: AL2023 accelerated AMIs ship the driver and container toolkit but not
# the plugin that advertises nvidia.com/gpu to the kubelet.
NVIDIA_DEVICE_PLUGIN = ChartPin(
    "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.18.0"
)

# AWS Load Balancer Controller (Karpenter mode only; Auto Mode has its own ALB controller).
# aws/eks-charts stable/aws-load-balancer-controller/Chart.yaml (5239609, 2026-08-03): chart 3.5.0,
# controller v3.5.0; its IAM policy is in iam_policies.load_balancer_controller_policy.
AWS_LOAD_BALANCER_CONTROLLER = ChartPin(
    "aws-load-balancer-controller", "https://aws.github.io/eks-charts", "3.5.0"
)

# EKS-optimized AL2023 AMI release for Karpenter's EC2NodeClass (never @latest: a new AMI would
# roll every GPU node). Karpenter picks the accelerated (NVIDIA) variant of this release for GPU
# instance types and the image matching the cluster's Kubernetes minor. v20260714 is an
# awslabs/amazon-eks-ami release whose notes (CHANGELOG.md) list AL2023 x86_64 standard and nvidia
# images for Kubernetes 1.30-1.36, so every minor settings.SUPPORTED_KUBERNETES_VERSIONS allows.
AL2023_AMI_RELEASE = "v20260714"
AL2023_AMI_ALIAS = f"al2023@{AL2023_AMI_RELEASE}"

# Instance types of the small system node group that runs controllers in Karpenter mode.
SYSTEM_NODE_INSTANCE_TYPES = ("m7i.large", "m6i.large")

# vLLM OpenAI-compatible server. 0.33.0 is the newest release whose metric names the project's
# PromQL is written against (vllm:kv_cache_usage_perc, vllm:inter_token_latency_seconds); the
# image bundles Ray (multi-node) and the Run:ai model streamer (S3 loading).
VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"
# Its digest: none could be read here (no registry is reachable and no upstream record of the
# v0.33.0 manifest digest was found), so the tag stays the pin; set this to "sha256:<hex>" once it
# is read from Docker Hub (`docker buildx imagetools inspect vllm/vllm-openai:v0.33.0`), and every
# pull then names the digest too (image_reference).
VLLM_IMAGE_DIGEST: str | None = None
# The vLLM release that image runs: its tag without the leading "v". The server reports the same
# string at GET /version (reference/upstream/vllm-0.33.0/version-route.json), which a load test
# records, so a refit can tell a measurement of another release (sizing/measured.py).
VLLM_RELEASE = VLLM_IMAGE.rpartition(":v")[2]
# A bare Docker Hub reference (no registry host) means docker.io (distribution/reference).
DOCKER_HUB = "docker.io"


def image_reference(image: str, registry: str | None = None, digest: str | None = None) -> str:
    """``image`` (a Docker Hub reference) pulled from ``registry`` instead of Docker Hub when one is
    given (a mirror or an ECR pull-through cache keeps Docker Hub's repository path under its own
    host and prefix), pinned by ``digest`` when one is known (``name:tag@sha256:...``)."""
    path = image.removeprefix(f"{DOCKER_HUB}/")
    reference = f"{registry.rstrip('/')}/{path}" if registry else image
    return f"{reference}@{digest}" if digest else reference


# llm-d's router (routing.kind llm-d): rendered as manifests after the Gateway API Inference
# Extension's standalone chart at this release (components/serving/router.py says why not the
# chart); its two images are the chart's values (config/charts/standalone/values.yaml at v1.5.0,
# commit df9f8909; reference/upstream/llm-d/README.md). The proxy's image is on Docker Hub, so
# image.registry applies to it as to vLLM's.
# Not a ChartPin: the chart is not installed, only followed.
LLM_D_ROUTER_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/standalone"
LLM_D_ROUTER_RELEASE = "v1.5.0"
EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
ROUTER_PROXY_IMAGE = "docker.io/envoyproxy/envoy:distroless-v1.33.2"

# LeaderWorkerSet controller for multi-node replicas; 0.10.0 matches the LWS CRD schema the
# manifest gate validates against.
LEADER_WORKER_SET = ChartPin("oci://registry.k8s.io/lws/charts/lws", None, "0.10.0")

# Prometheus operator, Prometheus, Grafana, node-exporter and kube-state-metrics. The
# ServiceMonitor, PodMonitor and PrometheusRule objects the project renders are validated
# against prometheus-operator 0.93.0's CRD schemas. 88.5.3 is shown to exist by
# prometheus-community/helm-charts tag kube-prometheus-stack-88.5.3 (ea930bae, 2026-08-21), the
# newest tag of the repository snapshot readable here (main at cf408a29, 2026-08-22). Newer releases
# exist upstream since (a review saw several majors newer), but no source of them is readable here:
# moving means reading that chart and re-vendoring its operator's CRD schemas (pins --check lists
# this chart as a manual step). 88.6.0, pinned once, has no tag or release.
KUBE_PROMETHEUS_STACK = ChartPin(
    "kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts", "88.5.3"
)
PROMETHEUS_ADAPTER = ChartPin(
    "prometheus-adapter", "https://prometheus-community.github.io/helm-charts", "5.3.0"
)
# dcgm-exporter 4.5.3-4.8.2 (chart 4.8.2): the release whose metric names and Kubernetes labels
# the project's PromQL is written against.
DCGM_EXPORTER = ChartPin("dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts", "4.8.2")
# KEDA 2.20.2: matches the ScaledObject schema the manifest gate validates against.
KEDA = ChartPin("keda", "https://kedacore.github.io/charts", "2.20.2")

# The in-cluster load test (python -m automation loadtest --as-job) runs `vllm bench serve` from
# VLLM_IMAGE (perf/loadtest/job.py), so it pins nothing of its own.

# Mountpoint for Amazon S3 CSI driver as an EKS add-on (weights.source s3-mountpoint). Driver v2.7.0
# (awslabs/mountpoint-s3-csi-driver CHANGELOG.md, tag v2.7.0) is the first major that takes
# credentials from the workload pod's own EKS Pod Identity association (docs/CONFIGURATION.md,
# "Pod-Level Credentials"); the EKS build suffix is the add-on's first for that release: confirm it
# with `aws eks describe-addon-versions --addon-name aws-mountpoint-s3-csi-driver`.
MOUNTPOINT_S3_CSI_ADDON = "aws-mountpoint-s3-csi-driver"
MOUNTPOINT_S3_CSI_ADDON_VERSION = "v2.7.0-eksbuild.1"

# CSI snapshot controller and the VolumeSnapshot CRDs as an EKS add-on (weights.source
# ebs-snapshot); Auto Mode does not include it but its storage is compatible with it (EKS User
# Guide, csi-snapshot-controller.html). v8.2.0 is the external-snapshotter release whose CRD
# schemas the manifest gate validates against (reference/schemas/index.json); confirm the build
# suffix with `aws eks describe-addon-versions --addon-name snapshot-controller`.
SNAPSHOT_CONTROLLER_ADDON = "snapshot-controller"
SNAPSHOT_CONTROLLER_ADDON_VERSION = "v8.2.0-eksbuild.1"

# The placeholder pods of autoscaling.warmSpareNodes run the Kubernetes pause image: they only hold
# resources. 3.10 (kubernetes/kubernetes build/pause/CHANGELOG.md) is the one kubeadm uses for
# Kubernetes 1.31 and later.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# Its digest, as the image promoter publishes it: kubernetes/k8s.io
# registry.k8s.io/images/k8s-staging-kubernetes/images.yaml (ecf019a8), `- name: pause`, dmap
# "sha256:ee6521f2...917a": ["3.10"] (the promoted manifest list). Facts: image-pulls.json.
PAUSE_IMAGE_DIGEST = "sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"

# EKS add-ons a cluster of our own gets in Karpenter mode (components/platform/karpenter.py; Auto
# Mode runs their equivalents itself). An add-on without a version gets the one EKS makes the
# default for the cluster's Kubernetes minor when it is created, and keeps it: pinned where an
# upstream source states a version that exists for each supported minor.
COREDNS_ADDON = "coredns"
# EKS User Guide, managing-coredns.html, "CoreDNS versions": "The following table lists the latest
# version of the Amazon EKS add-on type for each Kubernetes version": 1.34 and 1.33
# v1.12.4-eksbuild.1, 1.32 v1.11.4-eksbuild.24 (stored copy of docs.aws.amazon.com, read
# 2026-12-04; facts: reference/upstream/eks-addon-versions.json). Keyed by the cluster's minor:
# an add-on version is built for a range of minors, and the table gives one per minor.
COREDNS_ADDON_VERSIONS = {
    "1.32": "v1.11.4-eksbuild.24",
    "1.33": "v1.12.4-eksbuild.1",
    "1.34": "v1.12.4-eksbuild.1",
}
# No source available offline states an eks-pod-identity-agent or aws-ebs-csi-driver add-on build
# for Kubernetes 1.32-1.34 (the EKS User Guide pages for both say to list them with
# `aws eks describe-addon-versions`, which needs an account; the stored guide repository predates
# 1.32). Unpinned: EKS installs its default build for the minor, and `python -m automation pins
# --check` lists both as a manual step, with the command that reads the builds.
POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"
POD_IDENTITY_AGENT_ADDON_VERSION: str | None = None
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_ADDON_VERSION: str | None = None
