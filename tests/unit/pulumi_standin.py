"""A recording stand-in for the Pulumi CLI, for driving ``python -m automation`` end to end.

:func:`install` writes an executable ``pulumi`` (a small Python script) into a folder the test
puts first on PATH. It logs every argv to a JSON-lines file, answers the calls the Automation
API makes (read from pulumi/automation/_local_workspace.py and _stack.py of the installed SDK:
``version``, ``stack select``/``init``, ``stack output --json [--show-secrets]``, ``stack history``,
``preview``/``up``/``refresh``/``destroy`` and their ``--preview-only`` forms) and fails loudly
(exit 99) on any other call. For an operation it writes engine events, one JSON object a line,
to the ``--event-log`` file the SDK tails, in the shape ``pulumi.automation.events`` parses
(``preludeEvent``, ``resourcePreEvent``, ``diagnosticEvent``, ``resOutputsEvent``,
``policyEvent``, ``summaryEvent``, then ``cancelEvent``, which ends the SDK's tailing).

It reports CLI version 3.200.0: the SDK reads events from that file for CLIs up to 3.205 and
over gRPC after (``Stack._setup_event_log``), and the file is what a stand-in can write.

A scenario (JSON file, ``PULUMI_STANDIN_SCENARIO``) says per operation (``preview``, ``up``,
``refresh``, ``destroy``, ``preview_refresh``, ``preview_destroy``) which events to write, how
long to sleep before each (``"sleep": s`` next to the event) and the exit code.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCRIPT = r"""#!{python}
import json, os, sys, time

argv = sys.argv[1:]
log = os.environ["PULUMI_STANDIN_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(argv) + "\n")
# The SDK puts --non-interactive first on every call (pulumi/automation/_cmd.py).
if argv[:1] == ["--non-interactive"]:
    argv = argv[1:]
scenario = json.load(open(os.environ["PULUMI_STANDIN_SCENARIO"]))

def flag(name):
    return argv[argv.index(name) + 1] if name in argv else None

if argv == ["version"]:
    print("v3.200.0")
    sys.exit(0)
if argv[:2] in (["stack", "select"], ["stack", "init"]):
    sys.exit(0)
if argv[:3] == ["stack", "output", "--json"]:
    outputs = scenario.get("outputs", {{}})
    secret = set(scenario.get("secret_outputs", []))
    shown = "--show-secrets" in argv
    print(json.dumps({{k: (v if shown or k not in secret else "[secret]") for k, v in outputs.items()}}))
    sys.exit(0)
if argv[:3] == ["stack", "history", "--json"]:
    print(json.dumps([{{"kind": argv[0], "startTime": "2026-01-01T00:00:00.000000Z", "message": "",
                       "environment": {{}}, "config": {{}}, "result": "succeeded",
                       "endTime": "2026-01-01T00:00:01.000000Z"}}]))
    sys.exit(0)
if argv and argv[0] in ("preview", "up", "refresh", "destroy"):
    name = argv[0]
    if name in ("refresh", "destroy") and "--preview-only" in argv:
        name = "preview_" + name
    plan = scenario.get(name)
    if plan is None:
        print(f"pulumi stand-in: the scenario has no {{name!r}}", file=sys.stderr)
        sys.exit(99)
    event_log = flag("--event-log")
    sequence = 0
    with open(event_log, "a") as out:
        for step in plan.get("events", []):
            time.sleep(step.get("sleep", 0))
            event = {{k: v for k, v in step.items() if k != "sleep"}}
            event.update(sequence=sequence, timestamp=int(time.time()))
            sequence += 1
            out.write(json.dumps(event) + "\n")
            out.flush()
        last = {{"sequence": sequence, "timestamp": int(time.time()), "cancelEvent": {{}}}}
        out.write(json.dumps(last) + "\n")
    for line in plan.get("stdout", []):
        print(line)
    if plan.get("exit", 0):
        print(plan.get("stderr", "error: update failed"), file=sys.stderr)
    sys.exit(plan.get("exit", 0))
print(f"pulumi stand-in: unknown call {{argv}}", file=sys.stderr)
sys.exit(99)
"""


def install(folder: Path, scenario: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    """Write ``folder/pulumi`` and the scenario; returns the argv log and the env to run with."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "pulumi"
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (folder / "scenario.json").write_text(json.dumps(scenario))
    log = folder / "argv.jsonl"
    log.write_text("")
    env = {
        "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_STANDIN_LOG": str(log),
        "PULUMI_STANDIN_SCENARIO": str(folder / "scenario.json"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    return log, env


def calls(log: Path) -> list[list[str]]:
    """Every argv the stand-in was called with, in order (without the SDK's leading
    ``--non-interactive``)."""
    out = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [c[1:] if c[:1] == ["--non-interactive"] else c for c in out]


# -- engine events (the JSON the CLI writes; field names as pulumi.automation.events reads) ----
def step_meta(
    op: str, urn: str, type_: str, detailed: dict[str, str] | None = None, keys: list[str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"op": op, "urn": urn, "type": type_, "provider": ""}
    if detailed:
        meta["diffs"] = sorted({path.split(".")[0] for path in detailed})
        meta["detailedDiff"] = {p: {"diffKind": kind, "inputDiff": True} for p, kind in detailed.items()}
    if keys:
        meta["keys"] = keys
    return meta


def pre(op: str, urn: str, type_: str, **kw: Any) -> dict[str, Any]:
    return {"resourcePreEvent": {"metadata": step_meta(op, urn, type_, **kw), "planning": False}}


def done(op: str, urn: str, type_: str) -> dict[str, Any]:
    return {"resOutputsEvent": {"metadata": step_meta(op, urn, type_), "planning": False}}


def diag(message: str, urn: str = "", severity: str = "info") -> dict[str, Any]:
    return {
        "diagnosticEvent": {
            "urn": urn,
            "prefix": "",
            "message": message,
            "color": "raw",
            "severity": severity,
            "ephemeral": severity.startswith("info"),
        }
    }


def policy(name: str, message: str, urn: str, level: str = "mandatory") -> dict[str, Any]:
    return {
        "policyEvent": {
            "resourceUrn": urn,
            "message": message,
            "color": "raw",
            "policyName": name,
            "policyPackName": "deepseek-eks",
            "policyPackVersion": "0.1.0",
            "policyPackVersionTag": "0.1.0",
            "enforcementLevel": level,
        }
    }


def summary(changes: dict[str, int], seconds: int = 1) -> dict[str, Any]:
    return {
        "summaryEvent": {
            "maybeCorrupt": False,
            "durationSeconds": seconds,
            "resourceChanges": changes,
            "PolicyPacks": {},
        }
    }


def prelude() -> dict[str, Any]:
    return {"preludeEvent": {"config": {"aws:region": "us-east-1"}}}


# -- AWS STS, for the CLI's credentials check (AWS_ENDPOINT_URL_STS points boto3 here) ---------
# GetCallerIdentity's answer in the STS Query API's XML, as botocore parses it.
IDENTITY = b"""<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/t</Arn><UserId>AIDAT</UserId>
<Account>123456789012</Account></GetCallerIdentityResult>
<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>"""


class _Sts(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.end_headers()
        self.wfile.write(IDENTITY)

    def log_message(self, *_: Any) -> None:
        pass


@contextmanager
def sts_server() -> Iterator[str]:
    """A local STS that answers GetCallerIdentity; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def aws_env(sts: str) -> dict[str, str]:
    """Test credentials and the local STS, with nothing of the caller's AWS or Pulumi setup."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PULUMI_"))}
    env.update(
        AWS_ACCESS_KEY_ID="AKIATEST",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_ENDPOINT_URL_STS=sts,
        AWS_EC2_METADATA_DISABLED="true",
        PULUMI_CONFIG_PASSPHRASE="test-only",
    )
    return env


def rollout(urn: str, wait_s: float) -> list[dict[str, Any]]:
    """An ``up`` that replaces a Deployment and waits ``wait_s`` on each rollout stage, with the
    messages pulumi-kubernetes logs (reference/upstream/pulumi-kubernetes-await.json)."""
    deployment = "kubernetes:apps/v1:Deployment"
    nodepool = "urn:pulumi:dev::deepseek-eks::kubernetes:karpenter.sh/v1:NodePool::gpu"
    return [
        prelude(),
        pre("update", nodepool, "kubernetes:karpenter.sh/v1:NodePool"),
        done("update", nodepool, "kubernetes:karpenter.sh/v1:NodePool"),
        pre("replace", urn, deployment),
        diag('Waiting for Pod "deepseek/inference-7c9f" to be scheduled', urn),
        {**diag("Waiting for app ReplicaSet to be available (0/1 Pods available)", urn), "sleep": wait_s},
        {**diag('Waiting for Pod "deepseek/inference-7c9f" to be ready', urn), "sleep": wait_s},
        {**diag("Deployment initialization complete", urn), "sleep": wait_s},
        done("replace", urn, deployment),
        summary({"update": 1, "replace": 1, "same": 40}, seconds=int(3 * wait_s) + 1),
    ]


def demo(argv: list[str], wait_s: float = 20.0) -> int:
    """Run ``python -m automation ARGV`` against the stand-in, an ``up`` with long waits (for a
    terminal recording): ``python -m tests.unit.pulumi_standin up --stack dev --yes``."""
    import subprocess
    import tempfile

    urn = (
        "urn:pulumi:dev::deepseek-eks::deepseek-eks:index:Inference$kubernetes:apps/v1:Deployment::inference"
    )
    scenario = {
        "preview": {"events": [prelude(), pre("replace", urn, "kubernetes:apps/v1:Deployment",
                                               detailed={"spec.template.spec.containers[0].image": "update",
                                                         "spec.selector": "update-replace"}),
                               summary({"replace": 1, "same": 41})]},
        "up": {"events": rollout(urn, wait_s)},
        "outputs": {"endpointUrl": "http://internal-deepseek.elb.amazonaws.com", "apiKey": "k"},
        "secret_outputs": ["apiKey"],
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, sts_server() as sts:
        _, extra = install(Path(tmp), scenario)
        env = {**aws_env(sts), **extra}
        root = Path(__file__).resolve().parents[2]
        return subprocess.call([sys.executable, "-m", "automation", *argv], cwd=root, env=env)


if __name__ == "__main__":
    sys.exit(demo(sys.argv[1:], float(os.environ.get("STANDIN_WAIT_S", "20"))))
