"""The cold-start model: how long a replica takes from the autoscaler's ask to its first answer on
a new node, stage by stage (node, image, weights, engine), each rate from a published figure.

``SizingPlan.startup_breakdown`` (sizing/planner.py) applies these to a plan; the simulator, the
twin loop and the component's budgets (readiness, Pulumi's wait, the stager Job's deadline) read
the same figures from here, so one number serves every place that times a start.
"""

from __future__ import annotations

import math

# Stages, each from a published figure (the facts, each quoting its source:
# reference/upstream/cold-start-facts.json).
# Node, by compute mode:
# - auto-mode: "the GPU node was provisioned in 30 seconds", from the pod's Nominated event
#   (eks-auto-mode/compute) to Scheduled on the new node, which needs nvidia.com/gpu advertised
#   (EKS user guide, ml-inference-load-serve-model, awsdocs/amazon-eks-user-guide@049f82e5, a
#   g6e.4xlarge; one published run).
# - karpenter: launches take 30-90 s (Karpenter troubleshooting.md), and nvidia.com/gpu appears about
#   a minute after the node is Ready (cloudpilot-ai/karpenter-provider-gcp#148: measured on GCP; no
#   figure per EC2 GPU family was found), before which Karpenter does not count the node initialized
#   (aws/karpenter-provider-aws#1914): 90 + 60. Facts: cold-start-facts.json karpenter_gpu_registration.
KARPENTER_LAUNCH_S = 90
GPU_REGISTRATION_S = 60
NODE_READY_S = {"auto-mode": 30, "karpenter": KARPENTER_LAUNCH_S + GPU_REGISTRATION_S}
# Image, by compute mode (settings' computeMode values), both with SOCI parallel pull/unpack:
# - auto-mode: EKS Auto Mode turns on SOCI parallel pull for G and P instances (EKS user guide,
#   ml-node-pools; since its November 19, 2025 change, on those with local NVMe: facts
#   auto_mode_soci), and pulled the 8.8 GB AWS DLC vLLM image in ~48 s on g6e.4xlarge (EKS user
#   guide, ml-inference-load-serve-model); at that rate per GB, our ~12 GB image: 48 x 12 / 8.8.
# - karpenter: the GPU EC2NodeClass turns on nodeadm's FastImagePull feature gate
#   (components/platform/nodepools.py SOCI_NODE_CONFIG), which on the pinned AL2023 release (after
#   v20250821) runs containerd on the SOCI snapshotter in parallel pull/unpack mode on any node
#   with 4 vCPUs and 7 GiB (awslabs/amazon-eks-ami nodeadm/internal/containerd/config.go
#   UseSOCISnapshotter). Measured on AL2023 with it: a 10,778,400,361-byte AWS DLC vLLM image in
#   59.813 s, against 1m52.33s without (aws-samples/karpenter-blueprints
#   blueprints/soci-snapshotter/README.md at 48a21049; from ECR, on nodes of more than 8 Gbps);
#   at that rate, our ~12 GB image. Facts: reference/upstream/cold-start-facts.json.
SOCI_PULL_GB_PER_S = 8.8 / 48
# A pull without SOCI, as on nodes whose class does not turn it on (the stager Job may run on any
# node): 15-20 GB images take 4-6 min per instance with standard pulls (AWS ML blog "Reducing
# container cold start times using SOCI index on DLAMI and DLC", 2026); the upper end.
STANDARD_PULL_S = 360
AL2023_SOCI_PULL_GB_PER_S = 10_778_400_361 / 1e9 / 59.813
VLLM_IMAGE_COMPRESSED_GB = 12
IMAGE_PULL_S = {
    "auto-mode": math.ceil(VLLM_IMAGE_COMPRESSED_GB / SOCI_PULL_GB_PER_S),
    "karpenter": math.ceil(VLLM_IMAGE_COMPRESSED_GB / AL2023_SOCI_PULL_GB_PER_S),
}
# What of the pull a replica does not wait for, by compute mode. On Karpenter's nodes the image
# pre-pull DaemonSet (components/platform/image_prepull.py) starts pulling the vLLM image once the
# node is Ready, which is while the device plugin registers the GPUs (the node "may show as ready
# but still require about a minute to allocate GPU resources", karpenter_gpu_registration); the
# replica is scheduled only when nvidia.com/gpu appears, and its own pull of the same image finds
# it pulled or waits for the rest (AL2023's kubelet pulls in parallel, nodeadm
# internal/kubelet/config.go ``SerializeImagePulls: false``; containerd's CRI lets one pull fetch
# and unpack a layer while others wait for it, v1.7.29 ``unpackDuplicationSuppressor``). Auto
# Mode's published node figure runs from Nominated to the pod Scheduled on the node, with no split
# at Ready, so no overlap is claimed there and no DaemonSet runs.
# Facts: cold-start-facts.json image_prepull.
IMAGE_PULL_HIDDEN_S = {"auto-mode": 0, "karpenter": GPU_REGISTRATION_S}
# Weights. Hugging Face downloads: a 10.4 GB model took 3-5 min to stage through a pod (EKS user
# guide, ml-inference-load-serve-model), ~50 MB/s. S3 with the Run:ai streamer: the same guide's
# g6e.4xlarge (20 Gbps) loaded the 10.4 GB in 5.02 s ("Model loading took ... 5.02 seconds"):
# ~1.93 GiB/s, the cited streamer rate (the instance's network is not in the catalog, so it is
# not taken as a second bound). Loading from the node's gp3 disk: its baseline 125 MiB/s,
# doubled for the page cache.
HF_DOWNLOAD_GIB_PER_S = 0.046
S3_STREAM_GIB_PER_S = 10_420_633_176 / 5.023344 / 2**30
# That rate is one streaming process's. A replica of several GPUs runs one process per GPU, and two
# more bounds apply:
# - The node's network: the default card's peak bandwidth (catalog network_peak_gbps, from EC2
#   DescribeInstanceTypes). "Up to" sizes reach it on network I/O credits, for "a limited time,
#   typically from 5 to 60 minutes", and an instance has the most credits at launch (EC2 user
#   guide, "Amazon EC2 instance network bandwidth"): a new node's first minutes are at the peak.
#   S3 through the VPC's gateway endpoint is traffic within the Region, which "can utilize the
#   full network bandwidth" (same page).
# - Without distributed streaming every process reads every file: vLLM 0.33.0's runai_streamer
#   passes is_distributed=False unless --model-loader-extra-config sets {"distributed": true}
#   (vllm/model_executor/model_loader/runai_streamer_loader.py ``RunaiModelStreamerLoader``,
#   weight_utils.py ``runai_safetensors_weights_iterator``), and runai-model-streamer 0.15.7 then
#   keeps its own distributed mode off (distributed_streamer.py ``set_is_distributed``). The NIC
#   carries the checkpoint once per GPU. With it, the processes of one node divide the files and
#   broadcast their shares to each other over NCCL (runai-model-streamer docs/src/usage.md,
#   "Distributed streaming", local mode), so each GPU also receives (n-1)/n of the checkpoint over
#   its interconnect, at the share of the link NCCL reaches there (performance.py). That needs
#   staging buffers of twice the largest tensor on each GPU (same section).
# Facts: reference/upstream/cold-start-facts.json runai_distributed_streaming.
DISTRIBUTED_STREAMING_STAGING_TENSORS = 2
DISK_LOAD_GIB_PER_S = 0.25
# vLLM's default safetensors loader read Llama-3-8B (~15 GB) in 48.0 s even from a local gp3 volume
# (NVIDIA blog "Reducing cold start latency ... Run:ai Model Streamer", g5.12xlarge): ~0.29 GiB/s.
# Reading through Mountpoint, or from a snapshot volume restored with fast snapshot restore (fully
# initialised at creation, EBS user guide "Initialize Amazon EBS volumes"), the loader is the limit.
DEFAULT_LOADER_GIB_PER_S = 15e9 / 48.0 / 2**30
# A volume created from a snapshot without fast snapshot restore fetches each block from S3 on
# first read; the default rate is unpublished ("fluctuates"), so take the floor of the EBS
# Provisioned Rate for Volume Initialization, 100 MiB/s (EC2 API CreateVolume
# VolumeInitializationRate, valid 100-300 MiB/s), which the snapshot StorageClass sets
# (components/serving/weights.py ``snapshot_weights``: aws-ebs-csi-driver's volumeInitializationRate
# parameter, docs/parameters.md, v1.64.0).
SNAPSHOT_INIT_RATE_MIBPS = 100
SNAPSHOT_INIT_GIB_PER_S = SNAPSHOT_INIT_RATE_MIBPS / 1024
# The engine stage: torch.compile, then CUDA graph capture, memory profiling and warm-up.
# - torch.compile: 53-80 s uncached for 60-640 GB models; with the compiled artifacts fetched from
#   S3 onto a new node, 16 s (65 s without) for a 67 GB model at TP 2 on p5.48xlarge (EKS user
#   guide, ml-inference-fast-model-loading, "Pre-warm torch.compile cache on new nodes"). Those
#   are p5 figures, taken for every instance type: vLLM 0.33.0 sets TORCHINDUCTOR_COMPILE_THREADS=1
#   whenever it is imported (vllm/env_override.py; facts vllm_0_33_0_compile_cache.compile_threads),
#   so Inductor compiles on one thread and a node's vCPU count (4 on a g6.xlarge, 192 on a p5) does
#   not change it; only a core's speed would.
# - CUDA graph capture, which no cache removes, takes a time per graph per layer: each graph is one
#   warm-up and one captured forward pass over the rank's layers (vllm/v1/worker/gpu_model_runner.py
#   ``_warmup_and_capture``, one warm-up in vLLM 0.9.1 and 0.33.0 alike). Fitted on
#   vllm-project/vllm#19824's ~60 s for Llama-70B (80 layers) at TP 8 (June 2025), when vLLM 0.9.1
#   captured 67 piecewise graphs whatever ``--max-num-seqs`` was (reference/upstream/vllm-0.33.0/
#   FACTS.md): 60 / (67 x 80) s. Not fitted on, vllm-project/vllm#20264's 17 s for a 3B model
#   (28 layers, 67 graphs, same month), which this predicts at 21 s. vLLM 0.33.0 captures far
#   fewer by default: sizes up to twice ``--max-num-seqs``, a full graph besides for each decode
#   size (sizing/performance.py ``default_cuda_graph_count``; its own log line says capture
#   "usually takes 5~20 seconds").
# - the rest, which no cache removes either (process start, memory profiling, KV cache, API server,
#   first answer): vllm#20264's 59 s from start to first answer less its 0.9 s of weights and its
#   34.11 s "init engine" (compile and capture): 24 s.
# The uncached start is the slow end of both; with the cache (``compile_cache``: vLLM's
# torch.compile and Triton caches restored from the weights bucket before vLLM starts and saved
# there by the first replica, components/serving/vllm.py), torch.compile costs the cached 16 s.
# Facts: reference/upstream/cold-start-facts.json.
COMPILE_UNCACHED_S = 80
COMPILE_CACHED_S = 16
CAPTURE_S_PER_GRAPH_LAYER = 60 / (67 * 80)
ENGINE_REST_S = 24
STARTUP_MARGIN = 1.5
MIN_STARTUP_S = 300
# Scheduling retries, a spot capacity miss and a second instance type on top of a cold start.
ROLLOUT_SLACK_S = 300


def node_launches_in_turn(nodes_per_replica: int) -> int:
    """Node launches a replica on a new node waits for, one after the other: a replica on several
    nodes waits for two (its leader's node, then its workers', which LWS makes only once the leader
    is bound: ``SizingPlan.startup_breakdown``), a single-node replica for one."""
    return 2 if nodes_per_replica > 1 else 1


def stage_mode(compute_mode: str) -> str:
    """The compute mode whose node and image figures apply: Karpenter's for any other value."""
    return compute_mode if compute_mode in NODE_READY_S else "karpenter"


def image_wait_seconds(compute_mode: str) -> int:
    """What is left of the image pull once a new node's GPUs are registered (``IMAGE_PULL_HIDDEN_S``)."""
    mode = stage_mode(compute_mode)
    return max(0, IMAGE_PULL_S[mode] - IMAGE_PULL_HIDDEN_S[mode])


def node_and_image_seconds(compute_mode: str) -> int:
    """From a new node's launch to its container starting: the node, then what is left of the pull."""
    return NODE_READY_S[stage_mode(compute_mode)] + image_wait_seconds(compute_mode)


def engine_seconds(*, cached: bool, capture_seconds: float) -> int:
    """The engine stage: torch.compile (the cached figure where the compile cache is restored), CUDA
    graph capture (``capture_seconds``) and the rest of start-up to the first answer."""
    compile_s = COMPILE_CACHED_S if cached else COMPILE_UNCACHED_S
    return compile_s + math.ceil(capture_seconds) + ENGINE_REST_S


def streamed_weights_seconds(
    weights_gib: float, *, ranks: int, network_peak_gbps: float, link_gib_s: float | None
) -> float:
    """Seconds to stream ``weights_gib`` from S3 into the GPUs of one node: one streaming process
    per GPU (``ranks``) at the cited per-process rate, within the node's network; with distributed
    streaming (``link_gib_s``, the rate each GPU receives the others' shares at), the processes
    divide the files and broadcast their shares, and the slower of reading and broadcasting rules."""
    network_gib_s = network_peak_gbps * 1e9 / 8 / 2**30
    if link_gib_s is None:
        return weights_gib / min(S3_STREAM_GIB_PER_S, network_gib_s / ranks)
    read = weights_gib / min(ranks * S3_STREAM_GIB_PER_S, network_gib_s)
    broadcast = weights_gib * (ranks - 1) / ranks / link_gib_s
    return max(read, broadcast)


def startup_probe_seconds(*, group_wait_s: int, weights_s: int, uncached_engine_s: int) -> int:
    """How long a replica may take from container start to healthy: a multi-node replica's wait for
    its workers, the weights and the uncached engine stage (the first replica compiles), with
    ``STARTUP_MARGIN``, and never under ``MIN_STARTUP_S``."""
    work = group_wait_s + weights_s + uncached_engine_s
    return max(MIN_STARTUP_S, math.ceil(work * STARTUP_MARGIN))


def rollout_seconds(compute_mode: str, *, startup_probe_s: int) -> int:
    """How long Pulumi waits for a new replica: a GPU node and what is left of the image pull before
    the (leader's) container starts, its start-up budget, then ``ROLLOUT_SLACK_S``."""
    return node_and_image_seconds(compute_mode) + startup_probe_s + ROLLOUT_SLACK_S
