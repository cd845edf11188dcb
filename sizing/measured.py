"""A load test's measured points, and the replica model refitted to them.

``python -m automation loadtest --out FILE`` (or ``vllm bench serve`` read back with
``--from-vllm-bench``) writes a report whose ``points`` are closed-loop measurements of one replica:
concurrency, output tokens/s and the mean prompt and output tokens of the completed requests. This
module reads them and refits the replica model's efficiencies (``sizing/fit.py``) to them on the
plan's own hardware, each point at its own lengths. Every command that answers with the replica model
can then answer with the user's measurement: ``python -m automation simulate --calibration`` and
``python -m sizing capacity --load-test``.

Not to be confused with ``python -m sizing --calibration``: that file is the runtime memory
overhead read from a vLLM start-up log (``sizing/calibration.py``), and each reader names the other
when handed the wrong one.
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..components.versions import VLLM_IMAGE, VLLM_RELEASE
from ..promql import VLLM_GENERATION_TOKENS, VLLM_PREEMPTIONS, VLLM_PROMPT_TOKENS, VLLM_PROMPT_TOKENS_CACHED
from .catalog import instance_catalog
from .fit import Point, fit_points
from .memory import KvCacheDtype, Quantization
from .performance import (
    LENGTH_DISTRIBUTIONS,
    PLAN_OUTPUT_TOKENS,
    PLAN_PROMPT_TOKENS,
    Hardware,
    PerformanceError,
    SchedulerLimits,
    hardware,
    length_distribution,
)

# The arrivals of a point the refit can time: ``concurrency`` clients back to back (the load
# tester's --arrivals closed; vllm bench serve's --max-concurrency at --request-rate inf). An open
# loop's concurrency is the mean in flight by Little's law, rounded: 0.3 reads as 1 client,
# 2.5 as 2, and the refit would take the replica's speed from the wrong count.
CLOSED_LOOP = "closed"

# The server's counters a run is checked against, and the key of each in a point's ``server``.
SERVER_COUNTERS = {
    VLLM_GENERATION_TOKENS: "generation_tokens",
    VLLM_PREEMPTIONS: "preemptions",
    VLLM_PROMPT_TOKENS: "prompt_tokens",
    VLLM_PROMPT_TOKENS_CACHED: "prompt_tokens_cached",
}

# A point's ``server``: what the server's own counters rose by during the run (its /metrics, read
# before and after by the load tester or the Job: perf/loadtest/probe.py), beside the output
# tokens the test received. More generated than received beyond this share: other traffic.
SHARED_TOLERANCE = 0.05
# Prompt tokens the prefix cache served beyond this share: the point skipped that much prefill.
CACHED_TOLERANCE = 0.05


def server_problems(server: Mapping[str, Any]) -> list[str]:
    """Why a point's speed may not be the replica's own on new requests, by the server's counters
    over the run (``server``): it generated more tokens than the test received (other requests
    shared it), it preempted sequences (recomputation the replica model does not time), or its
    prefix cache served part of the prompts (prefill skipped)."""

    def number(key: str) -> float | None:
        value = server.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    if any((value := number(key)) is not None and value < 0 for key in SERVER_COUNTERS.values()):
        return [
            "the server's counters fell during the run: it restarted, so the point spans a restart "
            "(a cold start, and requests cut); run it again"
        ]
    problems = []
    generated, received = number("generation_tokens"), number("client_output_tokens")
    if generated is not None and received is not None and generated > received * (1 + SHARED_TOLERANCE):
        problems.append(
            f"the server generated {generated:,.0f} output tokens during the run and the test received "
            f"{received:,.0f}: other requests shared the replica (the load balancer or the router still "
            "send it traffic, or requests failed), so this point is slower than the replica alone; "
            "measure it while it serves nothing else"
        )
    if preempted := number("preemptions"):
        problems.append(
            f"the server preempted {preempted:,.0f} times during the run: its KV cache ran out and vLLM "
            "recomputed the preempted requests, which the replica model does not time; lower "
            "--concurrency or the lengths"
        )
    cached, prompts = number("prompt_tokens_cached"), number("prompt_tokens")
    if cached and prompts and cached > CACHED_TOLERANCE * prompts:
        problems.append(
            f"vLLM's prefix cache served {cached / prompts:.0%} of the prompt tokens: that prefill was "
            "skipped, so this point is faster than the replica on new prompts"
        )
    return problems


class LoadTestReportError(ValueError):
    """A file given as a load-test report is not one, or one of its points is unusable."""


# What a load-test report records of the replica it measured (its ``config``), beside the served
# model: each setting the replica model's answer depends on, under its plan.json name. python -m
# automation loadtest takes each as the flag of the same name (--max-num-seqs, ...) or all of them
# from --stack; the in-cluster Job records them through vllm bench serve's --metadata, which
# --from-vllm-bench reads back (as text: the whole numbers are parsed there).
WHOLE_NUMBER_SETTINGS = ("max_num_seqs", "tensor_parallel_size", "pipeline_parallel_size")
REPLICA_SETTINGS = (*WHOLE_NUMBER_SETTINGS, "instance_type", "quantization", "kv_cache_dtype")
# The values a report may record: the settings' own (model.quantization resolved, as plan.json
# says it; model.kvCacheDtype).
RECORDED_QUANTIZATIONS = tuple(q.value for q in Quantization if q is not Quantization.AUTO)
RECORDED_KV_CACHE_DTYPES = tuple(d.value for d in KvCacheDtype)


# What a report records of the server it measured beside its settings: the vLLM release, as the
# server answers GET /version (reference/upstream/vllm-0.33.0/version-route.json). Measured, not
# given: the load tester asks the server, the in-cluster Job asks it before vllm bench serve runs.
VLLM_VERSION_KEY = "vllm_version"
# How a user records it where the load balancer routes only /v1 (components/serving/vllm.py).
RECORD_VERSION = (
    "python -m automation loadtest records it from the server's GET /version, which the load balancer "
    "does not route: run the load test through kubectl port-forward, or in the cluster (--as-job)"
)

# How a user measures one replica: a load balancer or Service spreads a test's connections over
# every ready replica (kube-proxy picks an endpoint at random per connection; kubectl
# port-forward pins one pod: reference/upstream/service-traffic-spread.json).
MEASURE_ONE = (
    "load test one replica: through kubectl port-forward svc/vllm 8000:80 (kubectl forwards to one of "
    "the Service's pods) or at one pod's address"
)


def spreads_over_replicas(url: str) -> bool:
    """Whether a load test at ``url`` may reach several replicas: a host name other than this
    machine's (a load balancer's, the vllm Service's) spreads connections over every ready one;
    a loopback address (a port-forward) or an IP address (one pod's own) reaches one."""
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host != "localhost"
    return False


# How a user records every setting of the replica under test at once.
RECORD_ALL = "python -m automation loadtest --stack NAME records them all from the stack's plan"

# The settings a refit compares with the replica it answers for (ReplicaSetup.differences).
_ENGINE_SETTINGS = ("tensor_parallel_size", "pipeline_parallel_size", "quantization", "kv_cache_dtype")


def _engine_settings(hw: Hardware) -> dict[str, object]:
    """``hw``'s values of _ENGINE_SETTINGS, as a report records them."""
    values = (hw.tensor_parallel, hw.pipeline_parallel, hw.quantization.value, hw.kv_cache_dtype.value)
    return dict(zip(_ENGINE_SETTINGS, values, strict=True))


def setting_flag(key: str) -> str:
    """The load tester's flag for the replica setting ``key`` (one of REPLICA_SETTINGS)."""
    return f"--{key.replace('_', '-')}"


def vllm_version_problem(value: object) -> str | None:
    """Why ``value`` cannot be what a vLLM server reported at GET /version, or None: its
    ``__version__``, a short string ("0.33.0", or "dev" from a source tree)."""
    if not isinstance(value, str) or not value.strip() or len(value) > 64 or value != value.strip():
        return "must be the vLLM release the server reported at GET /version, e.g. 0.33.0"
    return None


def public_release(version: str) -> str:
    """A reported vLLM version without its local label (``0.33.0+cu130``: 0.33.0), as
    VLLM_RELEASE names the release deployed."""
    return version.partition("+")[0]


def replica_setting_problem(key: str, value: object) -> str | None:
    """Why ``value`` cannot be the measured replica's ``key`` (one of REPLICA_SETTINGS), or None:
    the one check behind the load tester's flags, a Job's record and a report's config."""
    if key in WHOLE_NUMBER_SETTINGS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"must be a whole number, at least 1 (the replica's {setting_flag(key)})"
    elif key == "instance_type":
        if not isinstance(value, str) or value not in instance_catalog().instances:
            return (
                "not a GPU instance type of the catalog; give the EC2 type the replica under test "
                "runs on (the plan's instance type, e.g. g6e.12xlarge)"
            )
    elif key == "quantization":
        if value not in RECORDED_QUANTIZATIONS:
            return f"must be one of {', '.join(RECORDED_QUANTIZATIONS)} (the plan's quantization)"
    elif key == "kv_cache_dtype":
        if value not in RECORDED_KV_CACHE_DTYPES:
            return f"must be one of {', '.join(RECORDED_KV_CACHE_DTYPES)} (the stack's model.kvCacheDtype)"
    else:
        raise KeyError(key)
    return None


@dataclass(frozen=True)
class ReplicaSetup:
    """What a report says of the replica it measured (each None where it does not say): the
    REPLICA_SETTINGS."""

    max_num_seqs: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    instance_type: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    # The vLLM release the server reported (VLLM_VERSION_KEY); a measurement, not a setting.
    vllm_version: str | None = None
    # Where the load test sent its requests (the report's config.url), where it says.
    url: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], where: str) -> ReplicaSetup:
        """The settings ``config`` records (a report's ``config``, named ``where``); a
        LoadTestReportError naming the first that is not one."""
        for key in REPLICA_SETTINGS:
            value = config.get(key)
            if value is not None and (problem := replica_setting_problem(key, value)):
                raise LoadTestReportError(f"{where}: config.{key} {value!r}: {problem}")
        version = config.get(VLLM_VERSION_KEY)
        if version is not None and (problem := vllm_version_problem(version)):
            raise LoadTestReportError(f"{where}: config.{VLLM_VERSION_KEY} {version!r}: {problem}")
        url = config.get("url")
        return cls(
            **{key: config.get(key) for key in REPLICA_SETTINGS},
            vllm_version=version,
            url=url if isinstance(url, str) else None,
        )

    def release(self) -> str | None:
        """The vLLM release recorded, without a local version label (``0.33.0+cu130``: 0.33.0),
        as VLLM_RELEASE names the deployed one; None where the report does not say."""
        return None if self.vllm_version is None else public_release(self.vllm_version)

    def differences(self, hw: Hardware) -> list[tuple[str, object, object]]:
        """The recorded settings other than ``hw``'s replica has, as (setting, recorded, hw's),
        --max-num-seqs and the instance type aside (the refit runs under the first and checks
        the second's GPUs)."""
        return [
            (key, getattr(self, key), value)
            for key, value in _engine_settings(hw).items()
            if getattr(self, key) not in (None, value)
        ]

    def unrecorded(self) -> list[str]:
        """The settings the report does not record, --max-num-seqs and the instance type aside
        (each has its own note)."""
        return [key for key in _ENGINE_SETTINGS if getattr(self, key) is None]


@dataclass(frozen=True)
class Measurement:
    """One measured point of a load test: the mean requests in flight, the output tokens/s, and
    the mean prompt and output tokens of its completed requests (``lengths_stated`` False where
    the report carries none and the planning lengths stand in for them)."""

    concurrency: int
    output_tokens_per_s: float
    prompt_tokens: float
    output_tokens: float
    lengths_stated: bool
    source: str
    # The point's requests had lengths drawn exponentially around those means (the report's
    # ``length_distribution``), not all the same.
    exponential_lengths: bool = False
    # The served model the load test asked for (the report's ``config.model``: a stack serves
    # under its model.variant), where the report says.
    model: str | None = None
    # The replica's settings while it was measured (the report's ``config``), where it says.
    setup: ReplicaSetup = field(default_factory=ReplicaSetup)
    # How its requests arrived (the point's ``arrivals``; absent: closed, as reports before
    # 2026-12-06 were calibrated): only a closed loop holds ``concurrency`` streams throughout.
    arrivals: str = CLOSED_LOOP
    # What the server counted during the run (the point's ``server``: server_problems), if read.
    server: Mapping[str, Any] = field(default_factory=dict)

    @property
    def max_num_seqs(self) -> int | None:
        return self.setup.max_num_seqs

    @property
    def instance_type(self) -> str | None:
        return self.setup.instance_type


def _mean_tokens(point: Mapping[str, Any], key: str) -> float | None:
    value = point.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < math.inf):
        raise ValueError(f"{key} must be a positive number, got {value!r}")
    return float(value)


def _measurement(point: Any, where: str, path: Path, model: str | None, setup: ReplicaSetup) -> Measurement:
    try:
        concurrency, rate = int(point["concurrency"]), float(point["output_tokens_per_s"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise LoadTestReportError(f"{where}: each point needs concurrency and output_tokens_per_s") from None
    raw = point["concurrency"]
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != concurrency or concurrency < 1:
        raise LoadTestReportError(
            f"{where}: a point's concurrency must be a whole number of streams, at least 1, got {raw!r}"
        )
    if not (math.isfinite(rate) and rate > 0):
        raise LoadTestReportError(
            f"{where}: point at concurrency {concurrency}: "
            f"output_tokens_per_s {point['output_tokens_per_s']!r}: "
            "a point must measure a positive output rate (no request completed?); rerun the load test "
            "and check its errors"
        )
    try:
        prompt, output = _mean_tokens(point, "prompt_tokens"), _mean_tokens(point, "output_tokens")
    except ValueError as error:
        raise LoadTestReportError(f"{where}: point at concurrency {concurrency}: {error}") from None
    distribution = point.get("length_distribution", LENGTH_DISTRIBUTIONS[0])
    if distribution not in LENGTH_DISTRIBUTIONS:
        raise LoadTestReportError(
            f"{where}: point at concurrency {concurrency}: length_distribution {distribution!r} is not "
            f"one of {', '.join(LENGTH_DISTRIBUTIONS)}"
        )
    if (prompt is None) != (output is None):
        raise LoadTestReportError(
            f"{where}: point at concurrency {concurrency} has only one of prompt_tokens and "
            "output_tokens; give both (the mean lengths of its requests) or neither"
        )
    return Measurement(
        concurrency,
        rate,
        prompt if prompt is not None else PLAN_PROMPT_TOKENS,
        output if output is not None else PLAN_OUTPUT_TOKENS,
        prompt is not None,
        str(point.get("source") or path.name),
        distribution == length_distribution(True),
        model,
        setup,
        str(point.get("arrivals", CLOSED_LOOP)),
        point["server"] if isinstance(point.get("server"), Mapping) else {},
    )


def read_load_test(path: Path, flag: str) -> tuple[Measurement, ...]:
    """Every point of a load-test report at ``path`` (one report, or a JSON list of them), each
    with its lengths; a point without lengths (a report written before 2026-12-06) is taken at the
    planning lengths and marked so. ``flag`` is the option that named the file, for the messages.
    Raises LoadTestReportError naming the file and what is wrong with it, including when it is the
    other kind of calibration (``python -m sizing calibrate``'s runtime overhead)."""
    where = f"{flag} {path}"
    try:
        data: Any = json.loads(path.read_text())
    except OSError as error:
        raise LoadTestReportError(f"{where}: {error.strerror or error}") from None
    except ValueError as error:
        raise LoadTestReportError(f"{where}: not JSON ({error})") from None
    reports = data if isinstance(data, list) else [data]
    if any(isinstance(r, dict) and "entries" in r and "points" not in r for r in reports):
        raise LoadTestReportError(
            f"{where} is a runtime-overhead calibration (written by python -m sizing calibrate from a "
            "vLLM log), not a load-test report: give it to python -m sizing --calibration. A load-test "
            "report comes from python -m automation loadtest --out FILE"
        )
    measured = tuple(
        _measurement(point, where, path, *_setup(report, where))
        for report in reports
        if isinstance(report, dict)
        for point in report.get("points", [])
    )
    if not measured:
        raise LoadTestReportError(
            f"{where}: no points (expected a load-test report: python -m automation loadtest --out FILE)"
        )
    return measured


def _setup(report: Mapping[str, Any], where: str) -> tuple[str | None, ReplicaSetup]:
    """The served model and the replica's settings a report's ``config`` records."""
    config = report.get("config")
    if not isinstance(config, Mapping):
        return None, ReplicaSetup()
    model = config.get("model")
    return (model if isinstance(model, str) and model else None), ReplicaSetup.from_config(config, where)


def _lengthless_warning(measurements: Sequence[Measurement], flag: str, path: Path) -> str | None:
    """The warning for points that state no lengths (taken at the planning lengths), or None
    when all do."""
    unstated = unstated_lengths(measurements)
    if not unstated:
        return None
    return (
        f"warning: {flag} {path}: the points at concurrency {', '.join(map(str, unstated))} state no "
        f"request lengths (a report from before 2026-12-06); the refit takes them at "
        f"{PLAN_PROMPT_TOKENS} in / {PLAN_OUTPUT_TOKENS} out. Rerun python -m automation loadtest "
        "(or --from-vllm-bench) to record the lengths measured."
    )


def _release_messages(measurements: Sequence[Measurement], where: str) -> tuple[str | None, str | None]:
    """A warning where the points were measured on another vLLM release than this checkout
    deploys (VLLM_RELEASE), and a note where they do not say which (each None where not)."""
    others = sorted({m.setup.release() for m in measurements} - {None, VLLM_RELEASE}, key=str)
    warning = note = None
    if others:
        warning = (
            f"warning: {where}: the load test's server ran vLLM {', '.join(map(str, others))} (its "
            f"report's config.{VLLM_VERSION_KEY}), and this checkout deploys {VLLM_RELEASE} "
            f"({VLLM_IMAGE}, components/versions.py): releases differ in speed (scheduler, kernels, "
            "CUDA graphs), and the refit takes that release's for this one's. Load test the release "
            "deployed"
        )
    if any(m.setup.vllm_version is None for m in measurements):
        note = (
            f"note: {where}: the load test does not say which vLLM release the server ran: taken as "
            f"{VLLM_RELEASE}, the one this checkout deploys ({RECORD_VERSION})"
        )
    return warning, note


def _server_warnings(measurements: Sequence[Measurement], where: str) -> list[str]:
    """A warning for each point whose server counted what its speed should not include
    (server_problems)."""
    return [
        f"warning: {where}: the point at concurrency {m.concurrency}: {problem}"
        for m in measurements
        for problem in server_problems(m.server)
    ]


def _spread_warning(measurements: Sequence[Measurement], where: str) -> str | None:
    """A warning where the report's requests went to an address that spreads them over every
    ready replica (spreads_over_replicas), or None."""
    urls = sorted({m.setup.url for m in measurements if m.setup.url and spreads_over_replicas(m.setup.url)})
    if not urls:
        return None
    return (
        f"warning: {where}: the load test ran against {', '.join(urls)}, a load balancer's or Service's "
        "name, which spreads requests over every ready replica: if more than one was ready, its points "
        f"are their sum, and the refit reads one replica that much faster. To measure one, {MEASURE_ONE}"
    )


def unstated_lengths(measurements: Sequence[Measurement]) -> list[int]:
    """The concurrencies of the points that state no lengths (taken at the planning lengths):
    what the commands warn about."""
    return [m.concurrency for m in measurements if not m.lengths_stated]


def _same_replica(hw: Hardware, instance_type: str | None) -> bool:
    """Whether ``hw``'s replica on ``instance_type`` is the same hardware to the replica model:
    the same GPUs (model and memory) and interconnect, with room for its tensor-parallel GPUs, as
    g6e.12xlarge and g6e.24xlarge for a TP-4 replica (they differ in CPUs and memory only)."""
    instance = instance_catalog().instances.get(instance_type or "")
    if instance is None or instance.gpu_count < hw.tensor_parallel:
        return False
    try:
        other = hardware(
            hw.model,
            hw.quantization,
            instance,
            hw.tensor_parallel,
            hw.pipeline_parallel,
            hw.efficiencies,
            hw.kv_cache_dtype,
        )
    except PerformanceError:
        return False
    return other == hw


def _assumed_setup(
    hw: Hardware, measurements: Sequence[Measurement], instance_type: str, limits: SchedulerLimits
) -> list[str]:
    """What the refit assumes about the measured replica: the instance type and --max-num-seqs a
    report does not record, taken as ``instance_type``'s and ``limits``'s (the plan's or the
    command's); and another size of ``hw``'s GPUs and interconnect, taken as the same replica,
    which it is only to the replica model; and a recorded --max-num-seqs other than ``limits``'s, a
    hint that the replica measured was deployed with other settings. One note each."""
    notes = []
    if any(m.instance_type is None for m in measurements):
        notes.append(
            f"the load test does not say which instance type it ran on: taken as {instance_type} "
            f"(record it with python -m automation loadtest --instance-type, or {RECORD_ALL})"
        )
    if any(m.max_num_seqs is None for m in measurements):
        notes.append(
            f"the load test does not say the replica's --max-num-seqs: taken as {limits.max_num_seqs} "
            f"(record it with python -m automation loadtest --max-num-seqs, or {RECORD_ALL})"
        )
    answered = _engine_settings(hw)
    unrecorded = [key for key in _ENGINE_SETTINGS if any(key in m.setup.unrecorded() for m in measurements)]
    if unrecorded:
        notes.append(
            "the load test does not say the replica's "
            + ", ".join(f"{key} (taken as {answered[key]})" for key in unrecorded)
            + f"; a replica deployed otherwise has another speed ({RECORD_ALL})"
        )
    caps = {m.max_num_seqs for m in measurements if m.max_num_seqs is not None}
    if others := sorted(caps - {limits.max_num_seqs}):
        notes.append(
            f"the load test's replica ran with --max-num-seqs {', '.join(map(str, others))} and the one "
            f"answered for has {limits.max_num_seqs}: its points are refitted under what they ran with. "
            "Right for a replica capped for the test; a replica deployed with other settings "
            "(model.kvCacheDtype, model.maxModelLen, model.minFullLengthSequences) is another replica, "
            "whose speed this is not"
        )
    recorded = {m.instance_type for m in measurements if m.instance_type is not None}
    sizes = sorted(recorded - {instance_type})
    if sizes:
        notes.append(
            f"the load test ran on {', '.join(sizes)}: taken as {instance_type}'s replica "
            f"({hw.gpus}x {hw.gpu.name}, the same interconnect); their vCPUs and memory differ, which "
            "the replica model does not see (tokenization and the API server run on the CPUs)"
        )
    return notes


def refit(
    hw: Hardware,
    limits: SchedulerLimits,
    measurements: Sequence[Measurement],
    source: str,
    instance_type: str | None = None,
) -> Hardware:
    """``hw`` with efficiencies refitted to the measured points, each at the mean lengths its
    requests had and their distribution, under the scheduler limits the replica ran with: the
    report's --max-num-seqs where it records one, else ``limits``'s (the plan's). The fit starts
    from the bundled efficiencies, so few points move only what they measure.

    Refuses points whose report names another served model than ``hw``'s variant, or another
    instance type than ``instance_type`` (the type ``hw`` is on, where the caller knows it): their
    speed is another model's or another machine's."""
    variant = hw.model.variant
    others = sorted({m.model for m in measurements if m.model is not None and m.model != variant})
    if others:
        raise LoadTestReportError(
            f"the load test measured {', '.join(others)} (its report's config.model), not "
            f"{variant}: the refit would take that model's speed for this one's. Load test a "
            f"replica serving {variant}"
        )
    open_loop = sorted({(m.concurrency, m.arrivals) for m in measurements if m.arrivals != CLOSED_LOOP})
    if open_loop:
        named = ", ".join(f"concurrency {c} ({arrivals} arrivals)" for c, arrivals in open_loop)
        raise LoadTestReportError(
            f"the points at {named} were measured open loop: their concurrency is the mean number of "
            "requests in flight, rounded to a whole number, not that many clients back to back, so the "
            "refit would take the replica's speed from the wrong count. Calibrate with closed-loop "
            "points: python -m automation loadtest --arrivals closed --concurrency N (or the Job's)"
        )
    differences = sorted({d for m in measurements for d in m.setup.differences(hw)}, key=str)
    if differences:
        ran = ", ".join(f"{key} {value}" for key, value, _ in differences)
        planned = ", ".join(f"{key} {value}" for key, _, value in differences)
        raise LoadTestReportError(
            f"the load test's replica ran with {ran} (its report's config), and the one answered for "
            f"has {planned}: another deployment, whose speed this is not. Load test a replica "
            f"deployed from this plan ({RECORD_ALL}), or answer for the settings it ran with"
        )
    if instance_type is not None:
        machines = sorted(
            {
                m.instance_type
                for m in measurements
                if m.instance_type not in (None, instance_type) and not _same_replica(hw, m.instance_type)
            }
        )
        if machines:
            raise LoadTestReportError(
                f"the load test ran on {', '.join(machines)} (its report's config.instance_type), not "
                f"{instance_type}, whose replica has other GPUs or another interconnect: the refit would "
                f"take that machine's speed for this one's. Load test a replica on {instance_type} (or "
                "a type with the same GPUs and interconnect), or size for the type it ran on"
            )
    points = [
        Point(
            f"c{m.concurrency}",
            hw,
            limits if m.max_num_seqs is None else replace(limits, max_num_seqs=m.max_num_seqs),
            m.concurrency,
            max(1, round(m.prompt_tokens)),
            max(1, round(m.output_tokens)),
            m.output_tokens_per_s,
            m.source,
            exponential_lengths=m.exponential_lengths,
        )
        for m in measurements
    ]
    return hw.with_efficiencies(fit_points(points, f"calibrated to {source}", hw.efficiencies))


@dataclass(frozen=True)
class Refitted:
    """A replica refitted to a load-test report, and what the command that asked must tell the
    user about it."""

    hardware: Hardware
    # Lines for stderr, each with its "warning: " or "note: " prefix and the report named: points
    # taken at the planning lengths, a measurement of another vLLM release, and settings (and the
    # release) of the measured replica taken as the plan's.
    messages: tuple[str, ...]


def refit_report(
    hw: Hardware,
    limits: SchedulerLimits,
    measurements: Sequence[Measurement],
    flag: str,
    path: Path,
    instance_type: str,
) -> Refitted:
    """``hw`` (on ``instance_type``, under ``limits``) refitted to the points of the report at
    ``path`` (given with ``flag``), as every command that takes a load test does it:
    ``python -m sizing capacity|throughput --load-test``, ``python -m automation capacity
    --load-test`` and ``simulate --calibration``. Raises LoadTestReportError naming the report when
    the refit refuses it (another model, another machine)."""
    where = f"{flag} {path}"
    try:
        refitted = refit(hw, limits, measurements, f"measured: {path.name}", instance_type)
    except LoadTestReportError as error:
        raise LoadTestReportError(f"{where}: {error}") from None
    other_release, unsaid_release = _release_messages(measurements, where)
    notes = [f"note: {where}: {note}" for note in _assumed_setup(hw, measurements, instance_type, limits)]
    messages = (
        _lengthless_warning(measurements, flag, path),
        _spread_warning(measurements, where),
        *_server_warnings(measurements, where),
        other_release,
        *notes,
        unsaid_release,
    )
    return Refitted(refitted, tuple(m for m in messages if m))
