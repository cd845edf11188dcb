"""A stand-in for each ready vLLM pod's ``/metrics`` and for dcgm-exporter on each GPU node, driven
by the replica model, for the twin's Prometheus to scrape.

The model: steady state per tick plus one transient, a fluid backlog. ``set_state`` takes the
arrival rate the scenario sends and the ready pods; the load balancer's round robin splits it
evenly (the ALB default: perf/simulate/stack.py ``routing``), so each pod sees ``lambda /
n`` requests/s. For that rate the replica model (sizing/performance.py ``planning_state``: the
plan's workload, hardware and scheduler limits, through perf/simulate/replica.py) gives, at each
integer concurrency up to what the replica runs at once, the requests/s it completes; the
running sequences are the concurrency that completes ``lambda / n`` (interpolated between
integers, so a gauge can read 0.4), which is Little's law over the model's service time. Then:

- ``vllm:num_requests_running``: those sequences.
- ``vllm:num_requests_waiting``: 0 below the replica's saturated rate (the model is deterministic:
  a slot is free whenever a request arrives); above it, the requests that arrive in excess during
  one request's service at a full batch, ``(lambda / n - mu) x service``. An overloaded queue has
  no steady state (it grows for as long as the overload lasts): so the stand-in also keeps a
  backlog per pod across calls, its share of the arrivals beyond what it completes at saturation,
  in scenario seconds (``compression``), drained at that rate once its share is under it; the pod
  then waits ``max(that convention, its backlog)`` with a full batch. Without it a burst's queue would
  vanish the instant the load falls, and scale-in would start a drain too early.
- ``vllm:kv_cache_usage_perc``: the blocks those sequences hold on average on the plan's
  workload (``resident_tokens``: prompt + a whole mean output for exponential lengths, as
  ``steady_state`` sizes the batch), counted as the simulator counts them (perf/simulate/engine.py
  ``kv_cache_usage``).
- ``DCGM_FI_DEV_GPU_UTIL`` per GPU of the pod: the simulator's point sample
  (engine.py ``gpu_utilization_sample``: 100 while a sequence runs, else 0), served as its
  expectation over the instants a collection may fall on: busy a fraction ``min(1, running)`` of
  the time. A pod still loading its weights holds its GPUs and reads 0, as in the simulator.

What it is not: no arrival randomness (a real queue waits below saturation too), no warm-up,
preemption or request-length spread (the simulator's engine.py models those), no histograms (TTFT,
queue time): only the four series the autoscaling signals read."""

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
        # loop's time compression): the backlog grows and drains in scenario seconds.
        self.compression = compression
        self._clock = clock
        # Per ready pod, the requests queued beyond what it serves (a fluid model, see set_state).
        self._backlog: dict[PodRef, float] = {}
        self._last: float | None = None
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
        # A request's time in the batch at full load: its output at the full batch's token interval.
        self.service_s = PLAN_OUTPUT_TOKENS * states[-1].itl_s
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

    def pod_values(self, pod_rps: float) -> PodValues:
        """The values one replica serves at ``pod_rps`` requests/s (see the module's model)."""
        if pod_rps <= 0:
            return IDLE
        rps = self._rps
        if pod_rps >= rps[-1]:
            running = float(self.max_running)
            waiting = (pod_rps - rps[-1]) * self.service_s
        else:
            c = next(i for i in range(1, len(rps)) if rps[i] >= pod_rps)
            running = c - 1 + (pod_rps - rps[c - 1]) / (rps[c] - rps[c - 1])
            waiting = 0.0
        tokens = round(
            running * resident_tokens(PLAN_PROMPT_TOKENS, PLAN_OUTPUT_TOKENS, PLAN_EXPONENTIAL_LENGTHS)
        )
        kv = kv_cache_usage(tokens, math.ceil(running), self.limits.kv_cache_tokens)
        busy = min(1.0, running)
        util = busy * gpu_utilization_sample(1) + (1 - busy) * gpu_utilization_sample(0)
        return PodValues(running, waiting, kv, util)

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
            # Each pod's backlog carries over between calls: its share of the arrivals beyond
            # what it completes at saturation queues up in its own vLLM, and drains at that rate
            # once its share is under it. A queue stays in the pod that took it (the load balancer
            # routes on arrival; vLLM never hands a waiting request to another replica), so a pod
            # that turns ready later starts empty, and a burst's queue outlives the burst.
            now = self._clock()
            if self._last is not None and self._ready:
                elapsed = (now - self._last) * self.compression
                share = self._arrival_rps / len(self._ready)
                for pod in self._ready:
                    queued = self._backlog.get(pod, 0.0) + (share - self.saturated_rps) * elapsed
                    self._backlog[pod] = max(0.0, queued)
            self._last = now
            self._backlog = {p: q for p, q in self._backlog.items() if p in ready}
            self._arrival_rps = max(0.0, float(arrival_rps))
            self._ready = tuple(ready)
            self._followers = {w: lead for w, lead in (followers or {}).items() if lead in self._ready}
            self._loading = tuple(p for p in loading if p not in ready and p not in self._followers)

    def drain_seconds(self) -> float:
        """Clock seconds until the longest queue now held empties at its pod's saturated rate with
        no more arrivals (what a scale-in must wait for beyond its stabilization window)."""
        with self._lock:
            longest = max(self._backlog.values(), default=0.0)
        return longest / self.saturated_rps / self.compression

    def _snapshot(self) -> tuple[dict[PodRef, PodValues], tuple[PodRef, ...]]:
        with self._lock:
            ready, loading, rate = self._ready, self._loading, self._arrival_rps
            backlog = dict(self._backlog)
            followers = dict(self._followers)
        per_pod = self.pod_values(rate / len(ready)) if ready else IDLE
        values = {}
        for pod in ready:
            queued = backlog.get(pod, 0.0)
            if queued > 0:
                # A backlog keeps the pod's batch full and its queue waiting.
                full = self.pod_values(max(rate / len(ready), self.saturated_rps))
                values[pod] = PodValues(
                    full.running, max(full.waiting, queued), full.kv_cache_usage, full.gpu_utilization
                )
            else:
                values[pod] = per_pod
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
