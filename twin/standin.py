"""A stand-in for each ready vLLM pod's ``/metrics`` and for dcgm-exporter on each GPU node, driven
by the replica model, for the twin's Prometheus to scrape.

The model: a fluid count of the requests in each pod. ``set_state`` takes the arrival rate the
scenario sends and the ready pods; the load balancer's round robin splits it evenly (the ALB
default: perf/simulate/stack.py ``routing``), so each pod receives ``lambda / n`` requests/s.
The replica model (sizing/performance.py ``planning_state``: the plan's workload, hardware and
scheduler limits, through perf/simulate/replica.py) gives, at each integer concurrency up to what
the replica runs at once, the requests/s it completes (interpolated between integers). A pod's
count ``N`` moves as arrivals minus completions, ``dN/dt = lambda / n - completed(min(N,
max_running))``, in scenario seconds (``compression``), between calls and up to each scrape. Below
saturation it settles where completions match arrivals, the concurrency of Little's law over the
model's service time; above it the batch stays full and the excess queues for as long as the
overload lasts, and drains at the saturated rate once the share falls under it. A step of load
thus builds up over about one request's service time, as requests arrive, and the last requests
run on after the load stops (the plan's lengths are exponential, so what remains of them is too:
the count decays as the fluid's does). Then:

- ``vllm:num_requests_running``: ``min(N, max_running)``.
- ``vllm:num_requests_waiting``: the rest, ``N - max_running`` when positive.
- ``vllm:kv_cache_usage_perc``: the blocks the running sequences hold on average on the plan's
  workload (``resident_tokens``: prompt + a whole mean output for exponential lengths, as
  ``steady_state`` sizes the batch), counted as the simulator counts them (perf/simulate/engine.py
  ``kv_cache_usage``).
- ``DCGM_FI_DEV_GPU_UTIL`` per GPU of the pod: the simulator's point sample
  (engine.py ``gpu_utilization_sample``: 100 while a sequence runs, else 0), served as its
  expectation over the instants a collection may fall on: busy a fraction ``min(1, running)`` of
  the time. A pod still loading its weights holds its GPUs and reads 0, as in the simulator.

The pods ready at the first call start in the steady state of their share (the simulator starts
its floor so; on a cluster the floor has served for long); under overload, with a full batch and
nothing queued yet. A pod that turns ready later starts empty, and a queue stays in the pod that
took it (vLLM never hands a waiting request to another replica).

What it is not: no arrival randomness (a real queue waits below saturation too), no warm-up,
preemption or lengths per request (the simulator's engine.py models those; the fluid follows their
means), no histograms (TTFT, queue time): only the four series the autoscaling signals read."""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.components.serving.router import EPP_METRICS_PORT, POOL_NAME, ROUTER
from deepseek_eks.perf.simulate.engine import gpu_utilization_sample, kv_cache_usage
from deepseek_eks.perf.simulate.replica import ReplicaModel, plan_limits, published_curve
from deepseek_eks.perf.simulate.run import _needs
from deepseek_eks.perf.simulate.stack import autoscaler_from_objects
from deepseek_eks.promql import ROUTER_INFO, ROUTER_QUEUE, ROUTER_RUNNING
from deepseek_eks.sizing.performance import (
    PLAN_EXPONENTIAL_LENGTHS,
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    planning_state,
    resident_tokens,
)

VLLM_CONTAINER = "vllm"
# vLLM's Prometheus stat logger labels every series with the served model name and the engine
# index (vllm-project/vllm vllm/v1/metrics/loggers.py PrometheusStatLogger: labelnames
# ["model_name", "engine"], values [model_config.served_model_name, str(engine_index)]; one engine,
# index 0, without data parallelism). Help texts from the same file.
VLLM_ENGINE = "0"
VLLM_HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
}
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
# dcgm-exporter's counters file line for the field (NVIDIA/dcgm-exporter 4.5.3-4.8.2, commit
# 691c92762eb551313c825f6efe4ceeee20982801, etc/default-counters.csv): gauge, "GPU utilization (in %).".
GPU_UTIL_HELP = "GPU utilization (in %)."
# The dcgm-exporter chart 4.8.2 (same commit, deployment/): the release "dcgm-exporter" in the
# rendered namespace (helm/dcgm-exporter.yaml) makes the Service and ServiceMonitor
# "dcgm-exporter" (_helpers.tpl fullname: the release name when it contains the chart name), the
# container "exporter" (templates/daemonset.yaml), the port "metrics" 9400 (templates/service.yaml,
# values.yaml service.port).
DCGM_RELEASE = "dcgm-exporter"
DCGM_CONTAINER = "exporter"
DCGM_PORT_NAME = "metrics"
DCGM_PORT = 9400


# The fluid is integrated in steps of at most this share of the shortest time constant it has (one
# request's service alone, ``1 / completed(1)``; completions grow no faster with the count than
# that), by Heun's method: well inside its stability bound, and within a few parts in a thousand
# of the exact curve.
STEP_SHARE_OF_TIME_CONSTANT = 0.1
# With no arrivals the fluid only tends to empty; below this many requests the pod is empty
# (its GPUs then read below 0.1 % busy anyway).
EMPTY_BELOW = 1e-3


@dataclass(frozen=True)
class PodRef:
    """A vLLM pod and the node it runs on."""

    namespace: str
    name: str
    node: str


@dataclass(frozen=True)
class PodValues:
    """What one pod's endpoints serve now."""

    running: float
    waiting: float
    kv_cache_usage: float
    gpu_utilization: float

    def as_dict(self) -> dict[str, float]:
        return {
            "vllm:num_requests_running": self.running,
            "vllm:num_requests_waiting": self.waiting,
            "vllm:kv_cache_usage_perc": self.kv_cache_usage,
            GPU_UTIL: self.gpu_utilization,
        }


IDLE = PodValues(0.0, 0.0, 0.0, gpu_utilization_sample(0))


def _objects(render: Path) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in sorted((render / "kubernetes").glob("*.yaml")):
        objects += [o for o in yaml.safe_load_all(path.read_text()) if o]
    return objects


def _vllm_container(objects: Sequence[Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """The namespace and container of the rendered vLLM workload (Deployment, or an LWS leader)."""
    for obj in objects:
        spec = obj.get("spec", {})
        if obj.get("kind") == "LeaderWorkerSet":
            pod = spec.get("leaderWorkerTemplate", {}).get("leaderTemplate", {}).get("spec", {})
        elif obj.get("kind") == "Deployment":
            pod = spec.get("template", {}).get("spec", {})
        else:
            continue
        for container in pod.get("containers", []):
            if container.get("name") == VLLM_CONTAINER:
                return obj["metadata"]["namespace"], container
    raise ValueError("the render has no vLLM workload (a container named vllm)")


def _served_model_name(container: Mapping[str, Any]) -> str:
    """``--served-model-name`` from the container's args, or from the shell script it runs (the
    671B leader's ``sh -c`` starts Ray first, then ``exec vllm serve ...``)."""
    args = [str(a) for a in container.get("args", [])]
    command = [str(c) for c in container.get("command", [])]
    if len(command) == 3 and command[0].endswith("sh") and command[1] == "-c":
        args += shlex.split(command[2])
    for i, arg in enumerate(args):
        if arg == "--served-model-name" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--served-model-name="):
            return arg.split("=", 1)[1]
    raise ValueError("the vLLM container sets no --served-model-name")


def _floor(objects: Sequence[Mapping[str, Any]]) -> int:
    """The autoscaler's floor: a ScaledObject's minReplicaCount (KEDA's default 0) or the HPA's
    minReplicas (default 1), read from the object (the simulator's model of its triggers is not
    needed for it, and does not model every trigger)."""
    for obj in objects:
        if obj.get("kind") == "ScaledObject":
            return int(obj["spec"].get("minReplicaCount", 0))
    for obj in objects:
        if obj.get("kind") == "HorizontalPodAutoscaler":
            return int(obj["spec"].get("minReplicas", 1))
    return autoscaler_from_objects(list(objects), "twin").floor


def _helm_namespace(render: Path, release: str) -> str:
    values = yaml.safe_load((render / "helm" / f"{release}.yaml").read_text())
    return str(values["namespace"])


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: Mapping[str, str], value: float) -> str:
    body = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {value!r}"


class StandIn:
    """The replica model behind every ready vLLM pod's metrics and each GPU node's dcgm-exporter."""

    def __init__(
        self,
        plan: Mapping[str, Any],
        *,
        namespace: str,
        model_name: str,
        floor: int,
        dcgm_namespace: str,
        podmonitor: tuple[str, str, str, str],
        compression: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        router: str | None = None,
    ) -> None:
        self.plan = plan
        # llm-d's router (routing.kind llm-d): its namespace, and the requests it holds in its
        # queue and has in flight (set by the scenario: see router_metrics).
        self.router = router
        self.router_queued = 0
        self.router_running = 0
        # One second of ``clock`` stands for ``compression`` seconds of the scenario (the twin
        # loop's time compression): the pods' counts move in scenario seconds.
        self.compression = compression
        self._clock = clock
        # Per ready pod, the requests in it, running and waiting (the module's fluid count).
        self._in_pod: dict[PodRef, float] = {}
        self._last: float | None = None
        self._started = False
        self.namespace = namespace
        self.model_name = model_name
        self.floor = floor
        self.dcgm_namespace = dcgm_namespace
        # (namespace, name, port name, port number) of the PodMonitor that selects the vLLM pods
        self.podmonitor = podmonitor
        # A replica on several nodes (an LWS group) is one pod a node, each holding that node's share.
        self.gpus_per_pod = int(plan["gpus_per_replica"]) // int(plan.get("nodes_per_replica", 1))
        # NVML's product name (nvmlDeviceGetName, e.g. "NVIDIA L4"); an approximation built from
        # the plan's GPU model, and no rendered query reads it.
        self.gpu_model_name = f"NVIDIA {plan['gpu_model']}"
        self.replica = ReplicaModel.from_plan(plan, published_curve(plan))
        assert self.replica.hardware is not None  # from_plan always carries hardware
        self.limits = plan_limits(plan)
        states = [
            planning_state(self.replica.hardware, self.limits, c)
            for c in range(1, self.limits.max_num_seqs + 1)
        ]
        # Sequences one replica runs at once (max_num_seqs, or fewer when the KV cache is the
        # limit), and the requests/s it completes at each concurrency up to there.
        self.max_running = states[-1].running
        self._rps = [0.0] + [s.requests_per_second for s in states[: self.max_running]]
        self.saturated_rps = states[-1].requests_per_second
        self._step_s = STEP_SHARE_OF_TIME_CONSTANT / self._rps[1]
        self._lock = threading.Lock()
        self._arrival_rps = 0.0
        self._ready: tuple[PodRef, ...] = ()
        self._loading: tuple[PodRef, ...] = ()
        self._followers: dict[PodRef, PodRef] = {}

    @classmethod
    def from_render(
        cls, render: Path, compression: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> StandIn:
        """The stand-in for an offline render: plan.json, the vLLM workload (namespace, served model
        name), the autoscaler's floor, the PodMonitor and dcgm-exporter's namespace."""
        plan = json.loads((render / "plan.json").read_text())
        objects = _objects(render)
        namespace, container = _vllm_container(objects)
        monitors = [o for o in objects if o.get("kind") == "PodMonitor" and o["metadata"]["name"] != ROUTER]
        if len(monitors) != 1:
            raise ValueError(f"expected one vLLM PodMonitor in the render, found {len(monitors)}")
        monitor = monitors[0]
        routers = [o for o in objects if o.get("kind") == "PodMonitor" and o["metadata"]["name"] == ROUTER]
        port = monitor["spec"]["podMetricsEndpoints"][0]["port"]
        number = next((p["containerPort"] for p in container.get("ports", []) if p.get("name") == port), port)
        return cls(
            plan,
            namespace=namespace,
            model_name=_served_model_name(container),
            floor=_floor(objects),
            dcgm_namespace=_helm_namespace(render, DCGM_RELEASE),
            podmonitor=(monitor["metadata"]["namespace"], monitor["metadata"]["name"], port, str(number)),
            compression=compression,
            clock=clock,
            router=routers[0]["metadata"]["namespace"] if routers else None,
        )

    # ---- the load and what it needs ---------------------------------------------------------

    def planned_rps(self) -> float:
        """The load the plan sizes one replica for: its saturated rate (plan.json
        ``requests_per_second``, "Requests/s one replica completes at saturation", computed here
        unrounded by the same model, ``steady_state`` at ``max_num_seqs``). The loop steps to a
        multiple of it: ``k x planned_rps()`` needs ``k`` replicas (never fewer than the floor)."""
        return self.saturated_rps

    def replicas_needed(self, arrival_rps: float) -> int:
        """Replicas this load needs by the simulator's rule for its oracle and reactive baseline
        (perf/simulate/run.py ``_needs``): the load's output tokens/s over one replica's
        saturated output tokens/s (the plan's throughput), rounded up, never below the
        autoscaler's floor; planned at load 1.0 (each replica at its saturated rate)."""
        tokens_per_step = [arrival_rps * PLAN_OUTPUT_TOKENS * 60.0]
        # A relative 1e-9 absorbs the float rounding of rate x tokens / rate (k x planned_rps()
        # must need exactly k replicas, not one more).
        saturated = self.replica.saturated_tokens_per_s() * (1 + 1e-9)
        return _needs(tokens_per_step, saturated, 1.0, self.floor, ahead=False)[0]

    def completed_rps(self, in_pod: float) -> float:
        """Requests/s one replica completes with ``in_pod`` requests in it: the model's rate at that
        concurrency (interpolated), the saturated rate once the batch is full."""
        if in_pod <= 0:
            return 0.0
        if in_pod >= self.max_running:
            return self.saturated_rps
        c = math.floor(in_pod)
        return self._rps[c] + (in_pod - c) * (self._rps[c + 1] - self._rps[c])

    def steady_count(self, pod_rps: float) -> float:
        """The requests in a replica that receives ``pod_rps`` requests/s once it has settled: the
        concurrency whose completions match them (Little's law over the model's service time);
        a full batch at or above saturation (then the queue grows without a steady state)."""
        rps = self._rps
        if pod_rps <= 0:
            return 0.0
        if pod_rps >= rps[-1]:
            return float(self.max_running)
        c = next(i for i in range(1, len(rps)) if rps[i] >= pod_rps)
        return c - 1 + (pod_rps - rps[c - 1]) / (rps[c] - rps[c - 1])

    def count_after(self, in_pod: float, pod_rps: float, seconds: float) -> float:
        """The requests in a replica ``seconds`` scenario seconds on, from ``in_pod``, while it
        receives ``pod_rps`` requests/s: ``dN/dt = pod_rps - completed_rps(N)``."""
        if seconds <= 0:
            return in_pod
        steps = max(1, math.ceil(seconds / self._step_s))
        h = seconds / steps
        n = in_pod
        for _ in range(steps):
            slope = pod_rps - self.completed_rps(n)
            guess = max(0.0, n + h * slope)
            n = max(0.0, n + h * (slope + pod_rps - self.completed_rps(guess)) / 2)
        return 0.0 if pod_rps <= 0 and n < EMPTY_BELOW else n

    def pod_values(self, in_pod: float) -> PodValues:
        """What one replica serves with ``in_pod`` requests in it (see the module's model)."""
        if in_pod <= 0:
            return IDLE
        running = min(in_pod, float(self.max_running))
        waiting = max(0.0, in_pod - self.max_running)
        tokens = round(
            running * resident_tokens(PLAN_PROMPT_TOKENS, PLAN_OUTPUT_TOKENS, PLAN_EXPONENTIAL_LENGTHS)
        )
        kv = kv_cache_usage(tokens, math.ceil(running), self.limits.kv_cache_tokens)
        busy = min(1.0, running)
        util = busy * gpu_utilization_sample(1) + (1 - busy) * gpu_utilization_sample(0)
        return PodValues(running, waiting, kv, util)

    def _advance(self) -> None:
        """Move every ready pod's count on to now, at the arrivals and pods set last (under the lock)."""
        now = self._clock()
        if self._last is not None and self._ready:
            elapsed = (now - self._last) * self.compression
            share = self._arrival_rps / len(self._ready)
            for pod in self._ready:
                self._in_pod[pod] = self.count_after(self._in_pod.get(pod, 0.0), share, elapsed)
        self._last = now

    def set_state(
        self,
        arrival_rps: float,
        ready: Sequence[PodRef],
        loading: Sequence[PodRef] = (),
        followers: Mapping[PodRef, PodRef] | None = None,
    ) -> None:
        """The scenario's load now and the pods serving it (``ready``: the load balancer's
        targets); ``loading`` pods hold GPUs (dcgm-exporter maps them) but serve nothing yet;
        ``followers`` maps each worker of a serving multi-node replica to its leader (in ``ready``):
        its GPUs run that replica's batch, and it serves no metrics of its own."""
        with self._lock:
            # What happened since the last call ran at the last call's load and pods.
            self._advance()
            self._arrival_rps = max(0.0, float(arrival_rps))
            if not self._started and ready:
                # The first pods: the steady state of their share (the module's docstring).
                self._started = True
                settled = self.steady_count(self._arrival_rps / len(ready))
                self._in_pod = {pod: settled for pod in ready}
            # A pod that left the load balancer takes its requests with it; a new one starts empty.
            self._in_pod = {pod: self._in_pod.get(pod, 0.0) for pod in ready}
            self._ready = tuple(ready)
            self._followers = {w: lead for w, lead in (followers or {}).items() if lead in self._ready}
            self._loading = tuple(p for p in loading if p not in ready and p not in self._followers)

    def drain_seconds(self) -> float:
        """Clock seconds until, with no more arrivals, the fullest pod is down to its last request
        (its queue drained at the saturated rate, then its batch run down): when the signals of a
        scale-in start to fall (what a scale-in must wait for beyond its stabilization window)."""
        with self._lock:
            self._advance()
            fullest = max(self._in_pod.values(), default=0.0)
        seconds = 0.0
        # The queue empties at the saturated rate; the batch then runs down as the fluid does.
        if fullest > self.max_running:
            seconds += (fullest - self.max_running) / self.saturated_rps
            fullest = float(self.max_running)
        while fullest > 1.0:
            fullest = self.count_after(fullest, 0.0, self._step_s)
            seconds += self._step_s
        return seconds / self.compression

    def _snapshot(self) -> tuple[dict[PodRef, PodValues], tuple[PodRef, ...]]:
        with self._lock:
            self._advance()
            ready, loading = self._ready, self._loading
            counts = dict(self._in_pod)
            followers = dict(self._followers)
        values = {pod: self.pod_values(counts.get(pod, 0.0)) for pod in ready}
        values.update({worker: values[leader] for worker, leader in followers.items()})
        values.update({p: IDLE for p in loading})
        return values, ready

    def values(self) -> dict[str, dict[str, float]]:
        """Pod name -> the metric values its endpoints serve now (a loading pod: all 0; only its
        GPUs are scraped, its vLLM endpoint is not a target yet)."""
        values, _ = self._snapshot()
        return {p.name: v.as_dict() for p, v in values.items()}

    # ---- exposition ---------------------------------------------------------------------------

    def vllm_metrics(self, namespace: str, name: str) -> str | None:
        """A ready pod's ``/metrics`` (the three gauges, Prometheus text format), or None."""
        values, ready = self._snapshot()
        pod = next((p for p in ready if (p.namespace, p.name) == (namespace, name)), None)
        if pod is None:
            return None
        v = values[pod]
        labels = {"engine": VLLM_ENGINE, "model_name": self.model_name}
        lines: list[str] = []
        for metric, value in (
            ("vllm:num_requests_running", v.running),
            ("vllm:num_requests_waiting", v.waiting),
            ("vllm:kv_cache_usage_perc", v.kv_cache_usage),
        ):
            lines += [f"# HELP {metric} {VLLM_HELP[metric]}", f"# TYPE {metric} gauge"]
            lines.append(_series(metric, labels, value))
        return "\n".join(lines) + "\n"

    def router_metrics(self) -> str | None:
        """The router's ``/metrics`` as the endpoint picker serves the three gauges the
        router-queue signal reads (GIE v1.5.0 pkg/epp/metrics/metrics.go, quoted in
        reference/upstream/llm-d/gie-v1.5.0/source-excerpts.json): the flow-control queue's size by
        ``fairness_id, priority, inference_pool, model_name, target_model_name``, the requests in
        flight by ``model_name``, and the info series set to 1 at start-up by ``commit, build_ref``.
        None without a router in the render."""
        if self.router is None:
            return None
        queue = {
            "fairness_id": "default",
            "priority": "0",
            "inference_pool": POOL_NAME,
            "model_name": self.model_name,
            "target_model_name": self.model_name,
        }
        series = [
            (ROUTER_QUEUE, queue, float(self.router_queued)),
            (ROUTER_RUNNING, {"model_name": self.model_name}, float(self.router_running)),
            (ROUTER_INFO, {"commit": "stand-in", "build_ref": "stand-in"}, 1.0),
        ]
        lines: list[str] = []
        for metric, labels, value in series:
            lines += [f"# TYPE {metric} gauge", _series(metric, labels, value)]
        return "\n".join(lines) + "\n"

    def _gpu_uuid(self, node: str, index: int) -> str:
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{index}')}"

    def dcgm_metrics(self, node: str) -> str | None:
        """A node's dcgm-exporter ``/metrics``: ``DCGM_FI_DEV_GPU_UTIL`` per GPU held by a vLLM
        pod there, as dcgm-exporter renders it in Kubernetes mode (NVIDIA/dcgm-exporter
        4.5.3-4.8.2, commit 691c92762eb551313c825f6efe4ceeee20982801:
        internal/pkg/rendermetrics/render_metrics.go gpuMetricsFormat: ``gpu``, ``UUID``,
        ``pci_bus_id``, ``device``, ``modelName``, ``Hostname`` (NODE_NAME: the chart's
        daemonset sets it from spec.nodeName; internal/pkg/hostname/hostname.go), then the
        attributes in key order; internal/pkg/transformation/kubernetes.go ``Process`` adds
        ``pod``, ``namespace``, ``container`` of the pod holding the GPU, ``pod_uid`` only with
        enablePodUID, which the render leaves false). None when no vLLM pod is on the node."""
        values, _ = self._snapshot()
        pods = sorted((p for p in values if p.node == node), key=lambda p: (p.namespace, p.name))
        if not pods:
            return None
        lines = [f"# HELP {GPU_UTIL} {GPU_UTIL_HELP}", f"# TYPE {GPU_UTIL} gauge"]
        index = 0
        for pod in pods:
            for _ in range(self.gpus_per_pod):
                labels = {
                    "gpu": str(index),
                    "UUID": self._gpu_uuid(node, index),
                    "pci_bus_id": f"00000000:{index:02X}:00.0",
                    "device": f"nvidia{index}",
                    "modelName": self.gpu_model_name,
                    "Hostname": node,
                    "container": VLLM_CONTAINER,
                    "namespace": pod.namespace,
                    "pod": pod.name,
                }
                lines.append(_series(GPU_UTIL, labels, values[pod].gpu_utilization))
                index += 1
        return "\n".join(lines) + "\n"

    @contextlib.contextmanager
    def serving(self, host: str, port: int) -> Iterator[str]:
        """Serve ``/vllm/<namespace>/<pod>/metrics`` and ``/dcgm/<node>/metrics`` on
        ``host:port`` (0: a free port) from a thread; yields the base URL."""
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                body: str | None = None
                if len(parts) == 4 and parts[0] == "vllm" and parts[3] == "metrics":
                    body = standin.vllm_metrics(parts[1], parts[2])
                elif len(parts) == 3 and parts[0] == "dcgm" and parts[2] == "metrics":
                    body = standin.dcgm_metrics(parts[1])
                elif parts == ["router", "metrics"]:
                    body = standin.router_metrics()
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # one line per scrape would drown the loop's own output

        server = http.server.ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, name="standin", daemon=True)
        thread.start()
        try:
            bound_host, bound_port = server.server_address[:2]
            yield f"http://{bound_host!s}:{bound_port}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

    def targets(self, base_host_port: str) -> list[dict[str, Any]]:
        """Prometheus file_sd groups: one per ready vLLM pod, one per GPU node's dcgm-exporter,
        all at ``base_host_port`` (the stand-in's server) with ``__metrics_path__`` choosing the
        pod or node, and the target labels the prometheus-operator's relabelling gives on a
        cluster (prometheus-operator/prometheus-operator pkg/prometheus/promcfg.go, commit
        002266347d12f6ee0ef0b4a774dfcc613d2d9547: a PodMonitor endpoint sets ``namespace``,
        ``container``, ``pod``, ``endpoint`` (the port's name) and ``job``
        ``<namespace>/<podmonitor>``; a ServiceMonitor endpoint on the endpoints role sets
        ``namespace``, ``service``, ``pod``, ``container``, ``endpoint`` and ``job`` the
        Service's name). ``instance`` would be the pod's IP:port; here it is ``<pod>:<port>``
        (an address rewrite: every target is the one stand-in server)."""
        values, ready = self._snapshot()
        mon_ns, mon_name, port_name, port_number = self.podmonitor
        groups: list[dict[str, Any]] = []
        for pod in sorted(ready, key=lambda p: (p.namespace, p.name)):
            groups.append(
                {
                    "targets": [base_host_port],
                    "labels": {
                        "__metrics_path__": f"/vllm/{pod.namespace}/{pod.name}/metrics",
                        "instance": f"{pod.name}:{port_number}",
                        "job": f"{mon_ns}/{mon_name}",
                        "namespace": pod.namespace,
                        "pod": pod.name,
                        "container": VLLM_CONTAINER,
                        "endpoint": port_name,
                    },
                }
            )
        for node in sorted({p.node for p in values}):
            exporter = f"{DCGM_RELEASE}-{node}"
            groups.append(
                {
                    "targets": [base_host_port],
                    "labels": {
                        "__metrics_path__": f"/dcgm/{node}/metrics",
                        "instance": f"{exporter}:{DCGM_PORT}",
                        "job": DCGM_RELEASE,
                        "namespace": self.dcgm_namespace,
                        "service": DCGM_RELEASE,
                        "pod": exporter,
                        "container": DCGM_CONTAINER,
                        "endpoint": DCGM_PORT_NAME,
                    },
                }
            )
        if self.router is not None:
            router_pod = f"{ROUTER}-standin"
            groups.append(
                {
                    "targets": [base_host_port],
                    "labels": {
                        "__metrics_path__": "/router/metrics",
                        "instance": f"{router_pod}:{EPP_METRICS_PORT}",
                        "job": f"{self.router}/{ROUTER}",
                        "namespace": self.router,
                        "pod": router_pod,
                        "container": "epp",
                        "endpoint": "metrics",
                    },
                }
            )
        return groups

    def address_rewrites(self) -> list[str]:
        """How these endpoints differ from a cluster's, for the loop's report."""
        return [
            "vLLM /metrics and dcgm-exporter: one stand-in HTTP server for every pod and node; "
            "file_sd targets carry the prometheus-operator's target labels, __metrics_path__ picks "
            "the pod (/vllm/<ns>/<pod>/metrics) or node (/dcgm/<node>/metrics), instance is "
            f"<pod>:<port> instead of the pod IP (dcgm-exporter pods named {DCGM_RELEASE}-<node>)",
            *(
                [
                    "llm-d's router: a STAND-IN, not the endpoint picker built from its Go module; it "
                    "serves the picker's queue, in-flight and info gauges (/router/metrics) with the "
                    "values the scenario sets, and its Deployment is not run"
                ]
                if self.router is not None
                else []
            ),
        ]
