"""A load test records the vLLM release the server it measured runs, as the server reports it
(GET /version, reference/upstream/vllm-0.33.0/version-route.json), and a refit says when that is
not the release this checkout deploys, or when the report does not say."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from deepseek_eks import promql
from deepseek_eks.components.versions import VLLM_RELEASE
from deepseek_eks.perf.loadtest import cli, job, probe
from deepseek_eks.perf.loadtest.fake_server import Pacing, ServerLog, serve
from deepseek_eks.perf.loadtest.runner import Arrivals, Lengths, LoadTestConfig, run
from deepseek_eks.sizing import PlanRequest, SizingPlan, plan
from deepseek_eks.sizing.cli import main as sizing_main
from deepseek_eks.sizing.measured import REPLICA_SETTINGS, SERVER_COUNTERS

UPSTREAM = Path(__file__).parents[2] / "reference" / "upstream"
# What vLLM 0.33.0's server answers at GET /version, read from its wheel.
VERSION_ROUTE = json.loads((UPSTREAM / "vllm-0.33.0" / "version-route.json").read_text())
BENCH_FIELDS = json.loads((UPSTREAM / "vllm-bench-serve" / "result-fields.json").read_text())


ONE_CLIENT = Arrivals("closed", concurrency=1)


def local_run(
    version: object,
    arrivals: Arrivals = ONE_CLIENT,
    requests: int = 1,
    metrics: Callable[[ServerLog], str] | None = None,
) -> dict:
    """``requests`` short requests (one closed-loop client by default) on the fake server, whose
    GET /version answers ``version`` and GET /metrics ``metrics``'s text (None: not found, as
    through the load balancer)."""

    async def go() -> dict:
        async with serve(Pacing(ttft_s=0.0, itl_s=0.001), version=version, metrics=metrics) as (url, _):
            config = LoadTestConfig(
                url=url,
                model="fake",
                arrivals=arrivals,
                lengths=Lengths(prompt_tokens=8, output_tokens=3),
                max_requests=requests,
                timeout_s=10,
            )
            return await run(config)

    return asyncio.run(go())


def test_the_local_load_test_records_the_release_the_server_reports() -> None:
    answered = local_run(VERSION_ROUTE["response"])
    assert answered["config"]["vllm_version"] == VERSION_ROUTE["response"]["version"]
    assert "vllm_version_unknown" not in answered
    assert f"vLLM           {VERSION_ROUTE['response']['version']}, as the server reports it" in (
        "\n".join(cli.summary_lines(answered))
    )
    # Through the load balancer (only /v1 routed) the route is not found: the run goes on, the
    # report records no release and says why, and the summary how to record it.
    unrouted = local_run(None)
    assert unrouted["requests"]["completed"] == 1
    assert unrouted["config"]["vllm_version"] is None
    assert unrouted["vllm_version_unknown"] == "GET /version answered 404"
    summary = "\n".join(cli.summary_lines(unrouted))
    assert "release not recorded (GET /version answered 404)" in summary and "port-forward" in summary
    # An answer that is not a release is not recorded as one.
    assert local_run({"version": ""})["config"]["vllm_version"] is None
    # Another release than this checkout deploys is said beside it.
    other = local_run({"version": "0.1.0"})
    assert f"0.1.0, as the server reports it (this checkout deploys {VLLM_RELEASE})" in "\n".join(
        cli.summary_lines(other)
    )


# A stand-in for the image's `vllm` console script: `vllm bench serve ARGS` saves its --metadata
# in the result file as vLLM 0.33.0 does (result-fields.json "metadata": the last --metadata's
# KEY=VALUE items, split at the first '=', stripped, as top-level fields), plus the fields the
# conversion needs.
STAND_IN = """
import json, sys
args = sys.argv[1:]
assert args[:2] == ["bench", "serve"], args
value = lambda flag: args[args.index(flag) + 1]
last = max(i for i, a in enumerate(args) if a == "--metadata")
items = []
for a in args[last + 1:]:
    if a.startswith("--"):
        break
    items.append(a)
result = {"duration": 10.0, "completed": 4, "failed": 0, "output_throughput": 40.0, "max_concurrency": 1}
result["total_output_tokens"] = 400
result["seed_seen"] = int([args[i + 1] for i, a in enumerate(args) if a == "--seed"][-1])  # the last
result.update({k.strip(): v.strip() for k, v in (item.split("=", 1) for item in items)})
with open(value("--result-dir") + "/" + value("--result-filename"), "w") as out:
    json.dump(result, out)
"""


@pytest.mark.parametrize("answers", [True, False], ids=["server-answers", "no-version-route"])
def test_the_job_asks_the_server_its_release_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: bool
) -> None:
    """The Job's container command, run by a real sh with the stand-in on PATH against a server
    answering GET /version as vLLM 0.33.0 does: the release reaches the result's metadata and the
    converted report's config. A server that does not answer leaves the run going, unrecorded.
    The random prompts' seed is fresh each run (the clock's), or the one given."""
    assert "split at the first '='" in BENCH_FIELDS["metadata"]
    monkeypatch.setattr(job, "RESULTS_DIR", str(tmp_path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "vllm"
    stand_in.write_text(f"#!{sys.executable}\n{STAND_IN}")
    stand_in.chmod(0o755)
    # The command calls python3, as the image has it: here, this interpreter.
    (bin_dir / "python3").symlink_to(sys.executable)

    async def go() -> tuple[int | None, str, str]:
        version = VERSION_ROUTE["response"] if answers else None
        readings = iter(range(1, 10))  # each GET /metrics: 1000 more tokens than the last

        def rising(log: ServerLog) -> str:
            return SAMPLE.sub(
                lambda m: (
                    f"{m['name']}{{{m['labels']}}} {1000.0 * next(readings)}"
                    if m["name"] == promql.VLLM_GENERATION_TOKENS and 'engine="0"' in m["labels"]
                    else m[0]
                ),
                EXPOSITION,
            )

        async with serve(Pacing(), version=version, metrics=rising if answers else None) as (url, _):
            config = LoadTestConfig(
                url=url,
                model="r1-distill-qwen-7b",
                arrivals=Arrivals("closed", concurrency=1),
                max_requests=4,
            )
            seed = None if answers else 7
            args = job.bench_args(config, "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", seed=seed)
            (pod,) = [d for d in job.manifests(args, "deepseek", 600) if d["kind"] == "Job"]
            container = pod["spec"]["template"]["spec"]["containers"][0]
            argv = container["command"]
            given = {e["name"]: e["value"] for e in container["env"] if "value" in e}  # the probe among them
            env = {**os.environ, **given, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
            process = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
            )
            out, err = await process.communicate()
            return process.returncode, out.decode(), err.decode()

    returncode, out, err = asyncio.run(go())
    assert returncode == 0, err
    result = job.read_bench_result(out, "job.log")
    if answers:  # no --seed given: the container's clock
        assert abs(result["seed_seen"] - time.time()) < 600
    else:
        assert result["seed_seen"] == 7
    assert result["served_model_name"] == "r1-distill-qwen-7b"  # the flags' metadata kept
    report = job.calibration_from_bench(result, "job.log")
    (point,) = report["points"]
    if answers:
        assert report["config"]["vllm_version"] == VERSION_ROUTE["response"]["version"]
        # The counters read before and after the run: 1000 generated against the 400 received.
        assert point["server"]["generation_tokens"] == 1000 and point["server"]["client_output_tokens"] == 400
        assert any("other requests shared the replica" in w for w in point["warnings"])
    else:
        assert "vllm_version" not in result and "vllm_version" not in report["config"]
        assert "server" not in point  # no /metrics answered: nothing read


def refit_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict) -> tuple[int, str]:
    """python -m sizing capacity for the 7B on g6 with a load-test report of its own planned
    replica whose config adds ``config``: the exit code and stderr."""
    sized = plan(PlanRequest("r1-distill-qwen-7b", ("g6",)))
    assert isinstance(sized, SizingPlan)
    deployed = {key: sized.to_dict()[key] for key in REPLICA_SETTINGS}
    report = tmp_path / "loadtest.json"
    point = {"concurrency": 4, "output_tokens_per_s": 100.0, "prompt_tokens": 500, "output_tokens": 1162}
    report.write_text(json.dumps({"config": {**deployed, **config}, "points": [point]}))
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    code = sizing_main([*argv, "--ttft-slo", "5", "--load-test", str(report)])
    return code, capsys.readouterr().err


def test_a_refit_warns_of_another_release_and_notes_an_unsaid_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = refit_messages(tmp_path, capsys, {"vllm_version": "0.1.0"})
    assert code == 0
    assert "warning: --load-test" in err and "the load test's server ran vLLM 0.1.0" in err
    assert f"this checkout deploys {VLLM_RELEASE}" in err and "Load test the release deployed" in err
    # The release deployed, a local build label aside (as wheels built for another CUDA carry):
    # nothing said of the release.
    for same in (VLLM_RELEASE, f"{VLLM_RELEASE}+cu130"):
        code, err = refit_messages(tmp_path, capsys, {"vllm_version": same})
        assert code == 0 and "vLLM" not in err, err
    # A report that does not say: taken as the release deployed, and said, with how to record it.
    code, err = refit_messages(tmp_path, capsys, {})
    assert code == 0
    assert f"does not say which vLLM release the server ran: taken as {VLLM_RELEASE}" in err
    assert "port-forward" in err
    # A recorded value that is no release is refused, named as the report's.
    code, err = refit_messages(tmp_path, capsys, {"vllm_version": " 0.33.0"})
    assert code == 2 and "config.vllm_version ' 0.33.0'" in err


SPREAD_FACTS = json.loads((UPSTREAM / "service-traffic-spread.json").read_text())
SERVICE_URL = "http://vllm.deepseek.svc.cluster.local"
JOB = ["--arrivals", "closed", "--concurrency", "8", "--requests", "10", "--as-job"]


def test_the_job_measures_one_replica_not_the_service_s_spread(capsys: pytest.CaptureFixture[str]) -> None:
    """Through the vllm Service kube-proxy spreads the Job's connections over every ready pod at
    random (reference snapshot of its iptables rules), so the result would be several replicas'
    sum: refused for a stack that keeps several (prod's minReplicas 2), warned otherwise, and a
    pod's own address measures one."""
    assert "--mode random" in SPREAD_FACTS["kube_proxy_iptables"]["fact"]
    prod = ["--stack", "prod", "--instance-type", "g6e.12xlarge", *JOB]
    assert cli.main([*prod, "--url", SERVICE_URL]) == 2
    err = capsys.readouterr().err
    assert "stack prod keeps at least 2 replicas (autoscaling.minReplicas)" in err
    assert "get endpointslices -l kubernetes.io/service-name=vllm" in err  # how to name one pod
    label = SPREAD_FACTS["endpointslice_service_label"]["fact"]
    assert "kubernetes.io/service-name=vllm" in label
    assert cli.main([*prod, "--url", "http://10.0.3.7:8000"]) == 0
    captured = capsys.readouterr()
    (pod,) = [d for d in yaml.safe_load_all(captured.out) if d["kind"] == "Job"]
    args = pod["spec"]["template"]["spec"]["containers"][0]["command"]
    assert args[args.index("--base-url") + 1] == "http://10.0.3.7:8000"
    assert "warning" not in captured.err
    # dev keeps one replica: the Service is one replica's while no other starts, and said so.
    assert cli.main(["--stack", "dev", "--instance-type", "g6.xlarge", *JOB, "--url", SERVICE_URL]) == 0
    assert "warning: --url http://vllm.deepseek.svc.cluster.local: a Service or load balancer" in (
        capsys.readouterr().err
    )
    # An HTTPS load balancer (the Job's policies admit HTTPS) spreads the same way: refused for prod.
    assert cli.main([*prod, "--url", "https://internal-k8s-deepseek.us-east-1.elb.amazonaws.com"]) == 2
    assert "keeps at least 2 replicas" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "noted"),
    [
        ("http://localhost:8000", False),  # a port-forward: kubectl pins it to one pod
        ("http://127.0.0.1:8000", False),
        ("http://10.0.3.7:8000", False),  # one pod's own address
        ("https://internal-k8s-deepseek.us-east-1.elb.amazonaws.com", True),  # the load balancer
        (SERVICE_URL, True),
    ],
)
def test_a_local_run_through_a_balancer_is_noted(url: str, noted: bool) -> None:
    assert "the first" in SPREAD_FACTS["kubectl_port_forward_service"]["fact"]
    assert (cli.spread_note(url) is not None) is noted


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        (SERVICE_URL, True),
        ("https://internal-k8s-deepseek.us-east-1.elb.amazonaws.com", True),
        ("http://localhost:8000", False),
        ("http://10.0.3.7:8000", False),
    ],
)
def test_a_refit_warns_of_a_report_measured_through_a_balancer(
    url: str, warned: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report whose requests went to a load balancer's or Service's name may be several
    replicas' sum: every refit says so, naming the URL and how to measure one."""
    code, err = refit_messages(tmp_path, capsys, {"url": url, "vllm_version": VLLM_RELEASE})
    assert code == 0
    assert (f"the load test ran against {url}, a load balancer's or Service's name" in err) is warned
    assert ("kubectl port-forward svc/vllm" in err) is warned


def test_an_open_loop_point_is_refused_by_every_refit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An open loop's concurrency is the mean in flight, rounded (Little's law): a Poisson run at
    0.3 in flight reads as one client, and the refit would take the replica's speed from that
    count. The point says how it arrived, locally and from vllm bench serve (a finite
    --request-rate is open loop: serve.py's request generator), and the refit refuses it."""

    open_point = local_run(None, Arrivals("poisson", rate_rps=20.0), requests=4)["points"][0]
    assert open_point["arrivals"] == "poisson"
    code, err = refit_messages_with_point(tmp_path, capsys, open_point)
    assert code == 2 and "measured open loop" in err and "--arrivals closed" in err
    # vllm bench serve: the Job's poisson mode (a finite rate) and a run with no rate and no cap.
    poisson = {"duration": 10.0, "completed": 4, "output_throughput": 40.0, "request_rate": 2.0}
    assert (
        job.calibration_from_bench(poisson | {"max_concurrency": 4}, "r")["points"][0]["arrivals"]
        == "poisson"
    )
    burst = {"duration": 10.0, "completed": 4, "output_throughput": 40.0, "request_rate": "inf"}
    assert (
        job.calibration_from_bench(burst | {"max_concurrency": None, "latencies": [5.0] * 4}, "r")["points"][
            0
        ]["arrivals"]
        == "all-at-once"
    )
    closed = job.calibration_from_bench(burst | {"max_concurrency": 4}, "r")["points"][0]
    assert closed["arrivals"] == "closed"
    assert 'written as the string "inf"' in BENCH_FIELDS["request_rate_inf"]


def refit_messages_with_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], point: dict
) -> tuple[int, str]:
    """python -m sizing capacity for the 7B on g6 with a report holding ``point`` (its lengths
    set to the planning ones, its rate kept)."""
    report = tmp_path / "point.json"
    point = {**point, "prompt_tokens": 500, "output_tokens": 1162}
    report.write_text(json.dumps({"config": {"vllm_version": VLLM_RELEASE}, "points": [point]}))
    argv = ["capacity", "--variant", "r1-distill-qwen-7b", "--families", "g6", "--rate", "0.5"]
    code = sizing_main([*argv, "--ttft-slo", "5", "--load-test", str(report)])
    return code, capsys.readouterr().err


# vLLM 0.33.0's counters as prometheus_client exposes them (a _total and a _created series, one
# per engine), snapshotted with how it was produced.
EXPOSITION = (UPSTREAM / "vllm-0.33.0" / "counters-exposition.txt").read_text()
SAMPLE = re.compile(r"^(?P<name>[a-z:_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)


def test_the_probe_sums_each_counter_over_its_engines_and_skips_created() -> None:
    sums: dict[str, float] = {}
    for m in SAMPLE.finditer(EXPOSITION):
        sums[m["name"]] = sums.get(m["name"], 0.0) + float(m["value"])
    assert {n.removesuffix("_total") for n in SERVER_COUNTERS} <= set(
        (UPSTREAM / "vllm-0.33.0" / "metric-names.txt").read_text().split()
    )  # names the wheel defines
    assert set(SERVER_COUNTERS) <= set(sums)  # and exposes so
    assert probe.counter_totals(EXPOSITION, tuple(SERVER_COUNTERS)) == {n: sums[n] for n in SERVER_COUNTERS}
    assert any(n.endswith("_created") for n in sums)  # there, and not summed into a counter


def vllm_metrics(other_traffic: float = 0.0, preemptions_per_request: int = 0) -> Callable[[ServerLog], str]:
    """GET /metrics as vLLM would answer it: the snapshot's exposition with engine 0's counters at
    what the fake server has streamed (times 1 + ``other_traffic``, for requests the test did not
    send) and engine 1's at 0."""

    def make(log: ServerLog) -> str:
        streamed = sum(r.tokens for r in log.requests if r.last_token is not None)
        values = {
            promql.VLLM_GENERATION_TOKENS: streamed * (1 + other_traffic),
            promql.VLLM_PREEMPTIONS: preemptions_per_request * len(log.requests),
            promql.VLLM_PROMPT_TOKENS: 8.0 * len(log.requests),
            promql.VLLM_PROMPT_TOKENS_CACHED: 0.0,
        }

        def sample(m: re.Match) -> str:
            value = values.get(m["name"], float(m["value"])) if 'engine="0"' in m["labels"] else 0.0
            return f"{m['name']}{{{m['labels']}}} {value}"

        return SAMPLE.sub(sample, EXPOSITION)

    return make


def test_the_server_s_counters_show_what_else_the_replica_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The load tester reads the server's counters before and after the run: a point records what
    they rose by, beside what the test received, and each thing its speed should not include is
    a warning, at the run and at every refit: other requests served meanwhile, preemptions."""
    clean = local_run(None, requests=4, metrics=vllm_metrics())["points"][0]
    assert clean["server"]["generation_tokens"] == clean["server"]["client_output_tokens"] == 12
    assert clean["server"]["preemptions"] == 0 and not clean["warnings"]
    shared = local_run(None, requests=4, metrics=vllm_metrics(other_traffic=1.0))["points"][0]
    assert shared["server"]["generation_tokens"] == 24
    assert any("other requests shared the replica" in w for w in shared["warnings"])
    preempted = local_run(None, requests=4, metrics=vllm_metrics(preemptions_per_request=1))["points"][0]
    assert any("the server preempted 4 times" in w for w in preempted["warnings"])
    # Without /metrics (through the load balancer) the point has no server reading.
    assert "server" not in local_run(None, requests=1)["points"][0]
    for point, says in ((shared, "other requests shared the replica"), (preempted, "preempted 4 times")):
        code, err = refit_messages_with_point(tmp_path, capsys, point)
        assert code == 0 and f"the point at concurrency {point['concurrency']}: " in err and says in err
    code, err = refit_messages_with_point(tmp_path, capsys, clean)
    assert code == 0 and "warning" not in err
    # Counters that fell: the server restarted during the run, whatever else they say.
    restarted = {**clean, "server": {**clean["server"], "generation_tokens": -500, "preemptions": -2}}
    code, err = refit_messages_with_point(tmp_path, capsys, restarted)
    assert "it restarted" in err and "preempted" not in err
