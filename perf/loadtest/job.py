"""The load test as a Kubernetes Job inside the cluster, run by the pinned vLLM image's own
``vllm bench serve`` (a maintained generator, next to the service it measures), and the conversion
of its result into the simulator's calibration points.

Flags and result fields are vLLM 0.33.0's (reference/upstream/vllm-bench-serve/): the Job runs
``vllm bench serve --backend openai-chat --endpoint /v1/chat/completions`` on the ``random``
dataset with ``--save-result`` into an emptyDir, then prints the result JSON on one log line after
``RESULT_MARKER``, so ``kubectl logs job/vllm-loadtest > bench.log`` carries it out of the finished
pod and ``python -m automation loadtest --from-vllm-bench bench.log`` turns it into ``points``.

``vllm bench serve`` builds its random prompts with the model's tokenizer (``main_async`` loads
``--tokenizer``), so the pod needs the tokenizer files: from the Hugging Face Hub (egress to
huggingface.co) or a path the image has. The API key, when the stack has one, comes from the
Secret the vLLM pods read, as ``OPENAI_API_KEY`` (what vllm bench serve sends, optional).

The service's namespace is closed by default (``default-deny``), and vLLM admits port 8000 only
from the load balancer's subnets and Prometheus. So the Job comes with two NetworkPolicies: one
lets its pod resolve names, download the tokenizer (443) and reach vLLM's pods on 8000; the other
lets vLLM admit it. The egress peer selects vLLM's pods with the vLLM Service's own selector, so
the EKS network-policy agent, which judges a Service's ClusterIP before DNAT, admits the Service
address too (the ``loadtest-*`` flows of ``components/required_flows.json``). Delete them with the
Job (``kubectl delete -f`` the same output).
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from deepseek_eks.components.egress import egress_rules
from deepseek_eks.components.serving.secrets import API_KEY_KEY, API_KEY_SECRET
from deepseek_eks.components.serving.vllm import APP, selector_labels
from deepseek_eks.components.versions import VLLM_IMAGE, VLLM_IMAGE_DIGEST, image_reference
from deepseek_eks.sizing.measured import (
    REPLICA_SETTINGS,
    SERVER_COUNTERS,
    VLLM_VERSION_KEY,
    WHOLE_NUMBER_SETTINGS,
    server_problems,
    setting_flag,
    spreads_over_replicas,
    vllm_version_problem,
)
from deepseek_eks.sizing.planner import VLLM_PORT

from . import probe
from .runner import (
    LoadTestConfig,
    LoadTestError,
    check_replica_setting,
    point_lengths,
    point_warnings,
)

NAME = "vllm-loadtest"
RESULTS_DIR = "/results"  # emptyDir: --result-dir
RESULT_FILE = "result.json"
TMP_DIR = "/tmp"  # emptyDir: HOME and caches (the tokenizer download, vLLM's and Triton's caches)
SCRATCH_LIMIT = "1Gi"
RUN_AS = 10001  # as the vLLM pods (deepseek_eks/components/serving/vllm.py RUN_AS_USER)
RESULT_MARKER = "VLLM_BENCH_RESULT "
# vllm bench serve reads the key from this variable (endpoint_request_func.py, _get_headers).
BENCH_API_KEY_ENV = "OPENAI_API_KEY"
# The result's ``model_id`` is --model, the tokenizer's repository (what the random dataset needs),
# not the name the stack serves under; the Job records that under this metadata key.
SERVED_MODEL_KEY = "served_model_name"
# The Job asks the server it tests about itself with the load tester's own probe (probe.py: its
# source runs as python3 -c, the vLLM image having Python but not this package), handed over in
# this variable: the release before the run, appended to --metadata so the result records the
# server's release and not the client's; its counters before and after, printed on one marked
# line. A probe that fails prints nothing, and the run goes on unrecorded rather than failing.
PROBE_ENV = "DEEPSEEK_EKS_PROBE"
COUNTERS_MARKER = "DEEPSEEK_EKS_SERVER_COUNTERS "
# Where read_bench_result puts the counters line's readings in the result it returns.
COUNTERS_KEY = "deepseek_eks_server_counters"


def bench_args(
    config: LoadTestConfig, tokenizer: str | None, namespace: str | None = None, seed: int | None = None
) -> list[str]:
    """``vllm bench serve``'s arguments for ``config`` and the model's ``tokenizer`` (None:
    unknown), for a Job in ``namespace`` (its URL is checked against the Job's policies); a
    LoadTestError naming every option it cannot express. ``seed``: the one the user gave; None
    leaves it to the container (``command``), a fresh one each run."""
    problems = []
    if namespace is not None and (problem := url_problem(config.url, namespace)):
        problems.append(problem)
    if tokenizer is None:
        problems.append(
            f"--model {config.model!r} is not a catalog variant, so the Job's tokenizer is unknown: "
            "give --tokenizer with its Hugging Face repository or a path in the image"
        )
    if config.arrivals.mode not in ("closed", "poisson"):
        problems.append(
            f"--arrivals {config.arrivals.mode}: the Job (vllm bench serve) runs closed (--max-concurrency) "
            "or poisson (--request-rate) arrivals; use one of those, or run it locally without --as-job"
        )
    if config.max_requests is None or config.duration_s is not None:
        problems.append(
            "--duration: vllm bench serve stops after a request count; give --requests N (and no --duration)"
        )
    if config.lengths.distribution != "fixed":
        problems.append("--lengths exponential: the Job's random dataset uses fixed lengths; drop --lengths")
    if problems or tokenizer is None:
        raise LoadTestError("; ".join(problems))
    args = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
    args += ["--base-url", config.url, "--model", tokenizer, "--served-model-name", config.model]
    args += ["--tokenizer", tokenizer, "--dataset-name", "random"]
    args += ["--random-input-len", str(config.lengths.prompt_tokens)]
    # No --random-range-ratio: vLLM 0.33.0's default 0.0 keeps every request at exactly these
    # lengths (vllm/benchmarks/datasets/datasets.py lines 1900-1907; definitions.json
    # "random_range_ratio"), so the points read back are fixed-length (sizing/measured.py).
    args += ["--random-output-len", str(config.lengths.output_tokens)]
    args += ["--num-prompts", str(config.max_requests)]
    if seed is not None:
        args += ["--seed", str(seed)]
    if config.arrivals.mode == "closed":
        args += ["--max-concurrency", str(config.arrivals.concurrency)]  # --request-rate stays inf
    else:
        args += ["--request-rate", str(config.arrivals.rate_rps), "--burstiness", "1.0"]  # Poisson
    if config.ignore_eos:
        args.append("--ignore-eos")
    if config.goodput_ms:
        args += ["--goodput", *(f"{k}:{v:g}" for k, v in config.goodput_ms)]
    args += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99"]
    args += ["--save-result", "--result-dir", RESULTS_DIR, "--result-filename", RESULT_FILE, "--disable-tqdm"]
    # Recorded in the result as top-level strings (main_async; result-fields.json "metadata"), so
    # the converted report says what it measured. One --metadata, and the last flag: its
    # nargs="*" keeps only the last occurrence's values, and the container's command appends the
    # server's release to it (``command``).
    args += ["--metadata", *(f"{key}={value}" for key, value in _recorded(config).items())]
    return args


def _recorded(config: LoadTestConfig) -> dict[str, str]:
    """What the Job records of the replica under test: the name it serves, where it was reached
    (``url``: a refit warns of a Service's, sizing/measured.py spreads_over_replicas), and each of
    its settings (REPLICA_SETTINGS) given."""
    recorded = {SERVED_MODEL_KEY: config.model, "url": config.url}
    for key in REPLICA_SETTINGS:
        if (value := getattr(config, key)) is not None:
            recorded[key] = str(value)
    return recorded


def command(args: list[str]) -> list[str]:
    """The container command: the server's release read (the probe on ``args``' --base-url) and
    appended to the closing --metadata, its counters read, vllm bench serve with ``args`` ("$@",
    so no shell quoting applies), its counters read again; then the readings and the saved
    result, each on one marked log line."""
    if "--metadata" not in args or any(a.startswith("--") for a in args[args.index("--metadata") + 1 :]):
        raise ValueError("bench_args must end with --metadata: the server's release is appended to it")
    result = f"{RESULTS_DIR}/{RESULT_FILE}"
    # The random dataset draws its token ids from --seed (vllm/benchmarks/datasets/datasets.py
    # RandomDataset), and vLLM caches prompt blocks across requests by default: a rerun with the
    # last run's seed would send the prompts still in the cache. So a fresh seed each run (the
    # clock's seconds), unless --seed in ``args`` (the user's, later on the line) overrides it.
    probe_ = f'python3 -c "${PROBE_ENV}"'
    counters = f'{probe_} counters "$url" ' + " ".join(f'"{name}"' for name in SERVER_COUNTERS)
    script = (
        f'url=$1; shift; v=$({probe_} version "$url") || v=; b=$({counters}) || b=; '
        f'vllm bench serve --seed "$(date +%s)" "$@" ${{v:+"{VLLM_VERSION_KEY}=$v"}} && {{ '
        f"a=$({counters}) || a=; "
        f'printf "%s{{\\"before\\": %s, \\"after\\": %s}}\\n" "{COUNTERS_MARKER}" '
        f'"${{b:-null}}" "${{a:-null}}"; '
        f'printf "%s%s\\n" "{RESULT_MARKER}" "$(cat {result})"; }}'
    )
    return ["sh", "-c", script, "loadtest", args[args.index("--base-url") + 1], *args]


JOB_LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "deepseek-eks"}


def pod_address(url: str) -> bool:
    """Whether ``url`` is one pod's own address on vLLM's port (``http://10.0.3.7:8000``), which the
    Job's policies admit (their egress peer is vLLM's pods on that port) and which takes every
    connection to that one pod."""
    parts = urlsplit(url)
    try:
        ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return False
    return parts.scheme == "http" and parts.port == VLLM_PORT


def one_pod_url(namespace: str) -> str:
    """The --url of one ready endpoint of the vllm Service, as a shell command substitution: the
    Service's EndpointSlices name its pods' addresses (leaders only, for a multi-node replica),
    starting and terminating pods too, marked by conditions.ready (discovery/v1), hence the
    filter."""
    return (
        f"--url http://$(kubectl -n {namespace} get endpointslices -l kubernetes.io/service-name={APP} "
        "-o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{\"\\n\"}{end}' "
        f"| head -1):{VLLM_PORT}"
    )


def url_problem(url: str, namespace: str) -> str | None:
    """Why the Job's policies would not let it reach ``url`` (None: they do): they admit vLLM's
    in-cluster Service, its pods on vLLM's port and HTTPS, not plain HTTP to anything else."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" or (parts.scheme == "http" and host in _service_names(namespace)):
        return None
    if pod_address(url):
        return None
    return (
        f"--url {url}: the Job's NetworkPolicies let it reach only the vLLM Service of namespace "
        f"{namespace} (http://{APP}.{namespace}.svc.cluster.local), one of its pods on port {VLLM_PORT} "
        "(http://<pod address>:8000) or an HTTPS endpoint; give one of those, or run the load test "
        "locally against any other address"
    )


def _service_names(namespace: str) -> set[str]:
    return {APP, f"{APP}.{namespace}", f"{APP}.{namespace}.svc", f"{APP}.{namespace}.svc.cluster.local"}


# Why a load test through the vllm Service (or a load balancer) is not one replica's: kube-proxy
# sends each new connection to one of the Service's ready endpoints at random (its iptables mode,
# the default on Linux: kubernetes pkg/proxy/iptables/proxier.go at v1.34.12, a "-m statistic
# --mode random" rule per endpoint; reference/upstream/service-traffic-spread.json), and a load
# balancer shares them out over its targets, so the Job's connections spread over every replica
# ready during the run.
SPREAD = (
    "a Service or load balancer sends each of the Job's connections to one of its ready pods (the vllm "
    "Service's kube-proxy at random), so the result is the sum of every replica ready during the run, "
    "which a refit takes for one replica's speed; and the test's own load may start another replica"
)


def spread_problem(url: str) -> str | None:
    """Why a Job aimed at ``url`` may measure more than one replica (a host name: SPREAD), or None
    (one pod's own address)."""
    return SPREAD if spreads_over_replicas(url) else None


def network_policies(namespace: str) -> list[dict[str, Any]]:
    """The two NetworkPolicies the Job needs in the service's closed namespace (module docstring)."""
    vllm_pods = {"podSelector": {"matchLabels": selector_labels()}}
    job_pods = {"podSelector": {"matchLabels": dict(JOB_LABELS)}}
    port = [{"port": VLLM_PORT, "protocol": "TCP"}]

    def policy(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(JOB_LABELS)},
            "spec": {"podSelector": {"matchLabels": selector}, **spec},
        }

    return [
        policy(
            NAME,
            dict(JOB_LABELS),
            policyTypes=["Ingress", "Egress"],
            ingress=[],
            egress=[*egress_rules(pod_identity=False, https=True), {"to": [vllm_pods], "ports": port}],
        ),
        policy(
            f"{APP}-from-loadtest",
            selector_labels(),
            policyTypes=["Ingress"],
            ingress=[{"from": [job_pods], "ports": port}],
        ),
    ]


def manifests(
    args: list[str], namespace: str, deadline_s: int, image: str | None = None
) -> list[dict[str, Any]]:
    """The Job running ``vllm bench serve`` with ``args``, and the NetworkPolicies it needs; it
    gives up after ``deadline_s`` seconds. ``image``: another image with vLLM (default: the pinned
    vLLM image)."""
    labels = JOB_LABELS
    container = {
        "name": "loadtest",
        "image": image or image_reference(VLLM_IMAGE, digest=VLLM_IMAGE_DIGEST),
        "command": command(args),
        "env": [
            {"name": "HOME", "value": TMP_DIR},
            {"name": "HF_HOME", "value": f"{TMP_DIR}/hf"},
            {"name": "XDG_CACHE_HOME", "value": f"{TMP_DIR}/.cache"},
            {"name": "TMPDIR", "value": TMP_DIR},
            {"name": PROBE_ENV, "value": Path(probe.__file__).read_text()},
            {
                "name": BENCH_API_KEY_ENV,
                "valueFrom": {"secretKeyRef": {"name": API_KEY_SECRET, "key": API_KEY_KEY, "optional": True}},
            },
        ],
        # vllm bench serve is one asyncio process (aiohttp): one core for it, one for imports
        # and the tokenizer; the vLLM package imports torch, hence the memory.
        "resources": {
            "requests": {"cpu": "2", "memory": "4Gi"},
            "limits": {"cpu": "2", "memory": "4Gi"},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "results", "mountPath": RESULTS_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "backoffLimit": 0,  # a load test is not retried: a second run would skew the figures
            "activeDeadlineSeconds": deadline_s,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "results", "emptyDir": {"sizeLimit": "64Mi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": SCRATCH_LIMIT}},
                    ],
                },
            },
        },
    }
    return [*network_policies(namespace), job]


def read_bench_result(text: str, name: str) -> dict[str, Any]:
    """The result JSON of vllm bench serve from ``text``: the file --save-result wrote, or the
    Job's log (its last ``RESULT_MARKER`` line, with the server's counters of its last
    ``COUNTERS_MARKER`` line under COUNTERS_KEY). A LoadTestError naming ``name`` if neither."""
    try:
        data = json.loads(text)
    except ValueError:
        marked = [line for line in text.splitlines() if line.startswith(RESULT_MARKER)]
        if not marked:
            raise LoadTestError(
                f"--from-vllm-bench {name}: neither a vllm bench serve result JSON nor a Job log with a "
                f"{RESULT_MARKER.strip()} line (kubectl logs job/{NAME} > FILE)"
            ) from None
        try:
            data = json.loads(marked[-1][len(RESULT_MARKER) :])
        except ValueError as error:
            raise LoadTestError(f"--from-vllm-bench {name}: the result line is not JSON ({error})") from None
    if not isinstance(data, dict):
        raise LoadTestError(f"--from-vllm-bench {name}: expected one JSON object, got {type(data).__name__}")
    counters = [line for line in text.splitlines() if line.startswith(COUNTERS_MARKER)]
    if counters:
        try:
            readings = json.loads(counters[-1][len(COUNTERS_MARKER) :])
        except ValueError as error:
            raise LoadTestError(
                f"--from-vllm-bench {name}: the counters line is not JSON ({error})"
            ) from None
        data[COUNTERS_KEY] = readings if isinstance(readings, dict) else {}
    return data


def _setting(result: dict[str, Any], key: str, flag: str, given: str | None, name: str) -> str | None:
    """A setting of the measured replica: given as ``flag``, or recorded in the result by the Job's
    --metadata; a LoadTestError when the two disagree (one of them is not this run's)."""
    recorded = result.get(key)
    recorded = None if recorded is None else str(recorded)
    if given is not None and recorded is not None and given != recorded:
        raise LoadTestError(
            f"--from-vllm-bench {name}: the result records {key}={recorded}, but {flag} {given} was given; "
            f"drop {flag} or convert the result of the run that had {given}"
        )
    return given if given is not None else recorded


def _replica_settings(
    result: dict[str, Any], name: str, given: Mapping[str, Any], fallback: Mapping[str, Any]
) -> dict[str, Any]:
    """The measured replica's settings (sizing/measured.py REPLICA_SETTINGS): each given as its
    flag or recorded in the result by the Job's --metadata, else ``fallback``'s (--stack's plan),
    checked, and named by where it came from when it is wrong."""
    settings: dict[str, Any] = {}
    for key in REPLICA_SETTINGS:
        flag = setting_flag(key)
        value: Any = _setting(result, key, flag, None if given.get(key) is None else str(given[key]), name)
        if value is None:
            if fallback.get(key) is not None:
                settings[key] = fallback[key]
            continue
        where = flag if given.get(key) is not None else f"--from-vllm-bench {name}: the result's {key}"
        if key in WHOLE_NUMBER_SETTINGS:
            try:
                value = int(value)
            except ValueError:
                raise LoadTestError(f"{where} {value!r} is not a whole number") from None
        check_replica_setting(key, value, where)
        settings[key] = value
    return settings


def bench_arrivals(result: Mapping[str, Any]) -> str:
    """How a vllm bench serve run sent its requests: ``closed`` (at most ``max_concurrency`` in
    flight, each sent when one ended: --request-rate inf, saved as the string "inf",
    result-fields.json "request_rate_inf"), ``poisson`` (a finite --request-rate), or
    ``all-at-once`` (no rate and no cap: every request at the start)."""
    rate = result.get("request_rate")
    unbounded = rate in ("inf", None) or (isinstance(rate, int | float) and math.isinf(rate))
    if not unbounded:
        return "poisson"
    return "closed" if result.get("max_concurrency") else "all-at-once"


def calibration_from_bench(
    result: dict[str, Any],
    name: str,
    given: Mapping[str, Any] | None = None,
    model: str | None = None,
    fallback: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A calibration report (``points`` as perf/simulate/replica.py load_calibration reads
    them) from a vllm bench serve result; fields per reference/upstream/vllm-bench-serve/result-fields.json.
    ``given``: the replica's settings given as flags (REPLICA_SETTINGS keys), ``model`` the served
    name given; each must agree with what the result records. ``fallback`` (``model`` and
    REPLICA_SETTINGS keys: --stack's plan) stands in for what neither says.

    The point's concurrency is the mean number of requests in flight by Little's law (the sum of
    ``latencies`` over ``duration``), as the local tester computes it; without ``latencies`` it is
    ``max_concurrency``. Its throughput is ``output_throughput`` (total output tokens / duration).
    """
    missing = [k for k in ("duration", "completed", "output_throughput") if k not in result]
    if missing:
        raise LoadTestError(
            f"--from-vllm-bench {name}: not a vllm bench serve result (no {', '.join(missing)})"
        )
    duration = float(result["duration"])
    latencies = [x for x in result.get("latencies") or [] if isinstance(x, int | float) and x > 0]
    if latencies and duration > 0:
        concurrency = max(1, round(sum(latencies) / duration))
    elif result.get("max_concurrency"):
        concurrency = int(result["max_concurrency"])
    else:
        raise LoadTestError(
            f"--from-vllm-bench {name}: no latencies and no max_concurrency, so the point has no "
            "concurrency; run vllm bench serve with --max-concurrency"
        )
    fallback = fallback or {}
    settings = _replica_settings(result, name, given or {}, fallback)
    served = _setting(result, SERVED_MODEL_KEY, "--model", model, name) or fallback.get("model")
    config = {"model": served, **settings} if served else settings
    if isinstance(result.get("url"), str):  # where the Job reached it (``_recorded``)
        config["url"] = result["url"]
    # The server's release, as the Job's probe read it (``command``); a result of a run without
    # it records none, and the refit notes that.
    if (release := result.get(VLLM_VERSION_KEY)) is not None:
        if (problem := vllm_version_problem(release)) is not None:
            where = f"--from-vllm-bench {name}: the result's {VLLM_VERSION_KEY}"
            raise LoadTestError(f"{where} {release!r}: {problem}")
        config[VLLM_VERSION_KEY] = release
    max_num_seqs = settings.get("max_num_seqs")
    # The configured cap bounds what was in flight; without one, vLLM's max_concurrent_requests
    # (requests active in the busiest one-second bucket) is an upper bound.
    peak = int(result.get("max_concurrency") or result.get("max_concurrent_requests") or concurrency)
    readings = result.get(COUNTERS_KEY) or {}
    output_total = result.get("total_output_tokens")
    server = probe.run_deltas(
        readings.get("before") or {},
        readings.get("after") or {},
        output_total if isinstance(output_total, int | float) else 0,
        SERVER_COUNTERS,
    )
    warnings = point_warnings(concurrency, peak, max_num_seqs) + server_problems(server)
    if result.get("failed"):
        warnings.append(f"{result['failed']} of {result['completed'] + result['failed']} requests failed")
    tokens_per_s = float(result["output_throughput"])
    # The mean lengths of the completed requests: vLLM 0.33.0's calculate_metrics sums
    # total_input_tokens (each request's prompt_len, which the chat client sets from the server's
    # usage.prompt_tokens) and total_output_tokens over successful requests only, beside
    # ``completed`` (vllm/benchmarks/serve.py lines 634-667 and 776-777,
    # vllm/benchmarks/lib/endpoint_request_func.py lines 487-490; definitions.json "lengths").
    prompt_total, output_total = result.get("total_input_tokens"), result.get("total_output_tokens")
    completed = result["completed"]
    lengths = (
        point_lengths(prompt_total, output_total, completed)
        if isinstance(completed, int)
        and isinstance(prompt_total, int | float)
        and isinstance(output_total, int | float)
        else {}
    )
    if not lengths:
        warnings.append(
            "no total_input_tokens/total_output_tokens over completed requests: the point states no "
            "lengths, and simulate --calibration takes it at the planning lengths"
        )
    summaries = {
        metric: {
            key: result[f"{key}_{metric}_ms"] / 1000
            for key in ("mean", "median", "p90", "p95", "p99")
            if isinstance(result.get(f"{key}_{metric}_ms"), int | float)
        }
        for metric in ("ttft", "tpot", "itl", "e2el")
    }
    goodput = result.get("request_goodput")
    return {
        "source": f"vllm bench serve ({result.get('backend')}, {name})",
        # What the Job (or the flags) recorded of the replica: sizing/measured.py reads it.
        "config": config,
        "elapsed_s": duration,
        "requests": {"completed": result["completed"], "failed": result.get("failed", 0)},
        "output_tokens_per_s": round(tokens_per_s, 3),
        "request_throughput_rps": result.get("request_throughput"),
        "request_goodput_rps": goodput
        if isinstance(goodput, int | float) and not math.isnan(goodput)
        else None,
        **{f"{metric}_s": s for metric, s in summaries.items() if s},
        "warnings": warnings,
        "points": [
            {
                "concurrency": concurrency,
                "output_tokens_per_s": round(tokens_per_s, 3),
                **lengths,
                "max_in_flight": peak,
                "arrivals": bench_arrivals(result),
                **({"server": server} if server else {}),
                "source": "vllm bench serve",
                "warnings": warnings,
            }
        ],
    }
