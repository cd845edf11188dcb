"""``python -m automation preview|up|refresh|destroy`` end to end against a recording stand-in
for the Pulumi CLI (tests/unit/pulumi_standin.py) and a local stand-in for AWS STS: the real
Automation API SDK drives it, so what is checked is the argv Pulumi would get and what a user
sees (preview before up, confirmation, the policy pack, --json, exit codes, live progress)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit import pulumi_standin as standin

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
URN = f"urn:pulumi:dev::deepseek-eks::deepseek-eks:index:Inference${DEPLOYMENT}::inference"
NODEPOOL = "urn:pulumi:dev::deepseek-eks::aws:eks/nodeGroup:NodeGroup::gpu"


@pytest.fixture(scope="module")
def sts() -> Iterator[str]:
    with standin.sts_server() as url:
        yield url


def preview_events() -> list[dict[str, Any]]:
    return [
        standin.prelude(),
        standin.pre(
            "update",
            NODEPOOL,
            "aws:eks/nodeGroup:NodeGroup",
            detailed={"scalingConfig.maxSize": "update", "labels.tier": "add"},
        ),
        standin.pre(
            "replace",
            URN,
            DEPLOYMENT,
            detailed={"metadata.name": "update-replace", "spec.replicas": "update"},
            keys=["metadata.name"],
        ),
        standin.policy("no-public-endpoint", "the endpoint is internal [ok]", URN, "advisory"),
        standin.summary({"update": 1, "replace": 1, "same": 40}),
    ]


def up_events(sleep: float = 0) -> list[dict[str, Any]]:
    return [
        standin.prelude(),
        standin.pre("update", NODEPOOL, "aws:eks/nodeGroup:NodeGroup"),
        standin.done("update", NODEPOOL, "aws:eks/nodeGroup:NodeGroup"),
        standin.pre("replace", URN, DEPLOYMENT),
        standin.diag("Waiting for app ReplicaSet to be available (0/1 Pods available)", URN),
        standin.diag("weights in [/models/r1] are [secret] until loaded", URN),
        {**standin.diag("Deployment initialization complete", URN), "sleep": sleep},
        standin.done("replace", URN, DEPLOYMENT),
        standin.summary({"update": 1, "replace": 1, "same": 40}, seconds=3),
    ]


SCENARIO: dict[str, Any] = {
    "preview": {"events": preview_events()},
    "up": {"events": up_events()},
    "preview_refresh": {
        "events": [
            standin.pre("refresh", NODEPOOL, "aws:eks/nodeGroup:NodeGroup"),
            standin.summary({"refresh": 1}),
        ]
    },
    "refresh": {"events": [standin.summary({"same": 41})]},
    "preview_destroy": {"events": [standin.pre("delete", URN, DEPLOYMENT), standin.summary({"delete": 1})]},
    "destroy": {
        "events": [
            standin.pre("delete", URN, DEPLOYMENT),
            standin.done("delete", URN, DEPLOYMENT),
            standin.summary({"delete": 1}),
        ]
    },
    "outputs": {"endpointUrl": "http://internal-x.elb.amazonaws.com", "apiKey": "sk-live"},
    "secret_outputs": ["apiKey"],
}


@pytest.fixture
def pulumi(tmp_path: Path, sts: str) -> Any:
    """A runner of ``python -m automation`` with the stand-in first on PATH."""

    def reachable(args: tuple[str, ...]) -> list[str]:
        """`up` refuses the example stacks' private-only API (test_exposure.py): give it the
        deployer's egress address, as a user would."""
        if args and args[0] == "up":
            return [*args, "--set", "cluster.publicAccessCidrs=203.0.113.7/32"]
        return list(args)

    class Runner:
        scenario: dict[str, Any] = json.loads(json.dumps(SCENARIO))

        def env(self) -> dict[str, str]:
            self.log, extra = standin.install(tmp_path / "bin", self.scenario)
            return {**standin.aws_env(sts), **extra, "COLUMNS": "200"}

        def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "automation", *reachable(args)],
                cwd=ROOT,
                env=self.env(),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=120,
            )

        def run_on_terminal(self, *args: str, answer: str) -> tuple[int, str, str]:
            """Run with stdin a pseudo-terminal (the user types ``answer``)."""
            master, slave = pty.openpty()
            proc = subprocess.Popen(
                [sys.executable, "-m", "automation", *reachable(args)],
                cwd=ROOT,
                env=self.env(),
                stdin=slave,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            os.close(slave)
            os.write(master, answer.encode() + b"\n")
            out, err = proc.communicate(timeout=120)
            os.close(master)
            return proc.returncode, out, err

        def calls(self) -> list[list[str]]:
            return standin.calls(self.log)

        def operations(self) -> list[list[str]]:
            return [c for c in self.calls() if c[0] in ("preview", "up", "refresh", "destroy")]

    return Runner()


def test_up_yes_previews_first_and_shows_the_property_diff(pulumi: Any) -> None:
    done = pulumi.run("up", "--stack", "dev", "--yes", "--skip-preflight")
    assert done.returncode == 0, done.stderr
    ops = pulumi.operations()
    assert [c[0] for c in ops] == ["preview", "up"]  # --yes does not skip the preview
    assert "--skip-preview" in ops[1]  # the SDK's own flag: the preview already ran, ours
    out = done.stdout
    assert out.index("Preview of `up`") < out.index("done in")
    # which fields change, and which one forces the replacement
    assert "~ scalingConfig.maxSize" in out and "+ labels.tier" in out
    assert "~ metadata.name  (forces replacement)" in out
    assert "~ spec.replicas\n" in out
    assert "Changes: 1 to replace, 1 to update; 40 unchanged" in out
    # violations as Pulumi prints them: level, pack/policy, message, resource
    assert "[advisory]  deepseek-eks/no-public-endpoint  the endpoint is internal [ok]" in out
    assert f"resource: {URN}" in out
    assert "endpointUrl            http://internal-x.elb.amazonaws.com" in out
    assert "sk-live" not in out + done.stderr and "apiKey                 [secret]" in out


def test_policy_pack_runs_by_default_and_opting_out_is_loud(pulumi: Any) -> None:
    from deepseek_eks.automation.api import policy_pack_dir

    assert pulumi.run("preview", "--stack", "dev").returncode == 0
    (preview,) = pulumi.operations()
    assert preview[preview.index("--policy-pack") + 1] == str(policy_pack_dir())
    assert (policy_pack_dir() / "PulumiPolicy.yaml").is_file()
    done = pulumi.run("up", "--stack", "dev", "--yes", "--skip-preflight")
    assert all("--policy-pack" in c for c in pulumi.operations())  # the up's preview and the up
    done = pulumi.run("preview", "--stack", "dev", "--no-policy-pack")
    assert done.returncode == 0
    assert "--policy-pack" not in pulumi.operations()[0]
    assert "warning: --no-policy-pack" in done.stderr


def test_passthrough_flags_reach_pulumi(pulumi: Any) -> None:
    done = pulumi.run(
        "preview", "--stack", "dev", "--diff", "--target", URN, "--target", NODEPOOL,
        "--refresh", "--parallel", "4", "--expect-no-changes",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (argv,) = pulumi.operations()
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--target"] == [URN, NODEPOOL]
    assert {"--diff", "--refresh", "--expect-no-changes"} <= set(argv)
    assert argv[argv.index("--parallel") + 1] == "4"


@pytest.mark.parametrize("command", ["up", "refresh", "destroy"])
def test_no_terminal_and_no_yes_refuses_before_anything(pulumi: Any, command: str) -> None:
    extra = ["--skip-preflight"] if command == "up" else []
    done = pulumi.run(command, "--stack", "dev", *extra, stdin="y\n")
    assert done.returncode == 2
    assert "no terminal to ask on: pass --yes" in done.stderr
    assert pulumi.operations() == []


@pytest.mark.parametrize(
    ("command", "answer", "applied"),
    [("up", "y", True), ("up", "n", False), ("destroy", "yes", True), ("refresh", "", False)],
)
def test_terminal_confirmation_after_the_preview(
    pulumi: Any, command: str, answer: str, applied: bool
) -> None:
    extra = ["--skip-preflight"] if command == "up" else []
    code, _, err = pulumi.run_on_terminal(command, "--stack", "dev", *extra, answer=answer)
    preview = {"up": "preview", "refresh": "refresh", "destroy": "destroy"}[command]
    ops = pulumi.operations()
    assert ops[0][0] == preview and ("--preview-only" in ops[0] or command == "up")
    assert f"Do you want to {command} stack resources as shown above? [y/N]" in err
    if applied:
        assert code == 0, err
        assert [c[0] for c in ops] == [preview, command]
    else:
        assert code == 2 and f"`{command}` cancelled: nothing was changed" in err
        assert len(ops) == 1


@pytest.mark.parametrize("command", ["preview", "up", "refresh", "destroy", "outputs"])
def test_json_is_one_document_and_nothing_else(pulumi: Any, command: str) -> None:
    extra = {"up": ["--yes", "--skip-preflight"], "refresh": ["--yes"], "destroy": ["--yes"]}.get(command, [])
    done = pulumi.run(command, "--stack", "dev", "--json", *extra)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # the whole of stdout is one document
    if command == "outputs":
        assert doc == {"apiKey": "[secret]", "endpointUrl": "http://internal-x.elb.amazonaws.com"}
        return
    assert doc["operation"] == command and doc["stack"] == "dev"
    assert doc["applied"] is (command != "preview")
    if command in ("preview", "up"):
        replace = next(c for c in doc["changes"] if c["op"] == "replace")
        assert {"path": "metadata.name", "kind": "update", "forces_replacement": True} in replace[
            "properties"
        ]
        assert doc["policy_violations"][0]["enforcement_level"] == "advisory"
    if command == "up":
        assert [t["op"] for t in doc["timings"]] == ["update", "replace"]
        assert "Preview of `up`" in done.stderr and "done in" in done.stderr  # human text: stderr
    if command == "destroy":
        assert doc["outputs"] == {} and doc["changes"][0]["op"] == "delete"


def test_failed_operation_is_exit_1_and_json_still_one_document(pulumi: Any) -> None:
    pulumi.scenario["preview"] = {
        "events": [standin.policy("no-public-endpoint", "public NLB", URN), standin.summary({})],
        "exit": 255,
        "stderr": "error: preview failed: 1 mandatory policy violation",
    }
    done = pulumi.run("preview", "--stack", "dev", "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["exit_code"] == 1 and "`pulumi preview` failed" in doc["error"]
    assert "[mandatory]  deepseek-eks/no-public-endpoint  public NLB" in done.stderr  # shown even so


def test_destroy_needs_no_sizing_plan(pulumi: Any) -> None:
    # Today's settings no longer size (a 671B on T4s), but the state can still be destroyed.
    sets = ["--set", "model.variant=r1-671b", "--set", "gpu.instanceFamilies=g4dn"]
    assert pulumi.run("plan", "--stack", "dev", *sets).returncode == 1
    done = pulumi.run("destroy", "--stack", "dev", "--yes", *sets)
    assert done.returncode == 0, done.stderr
    assert [c[0] for c in pulumi.operations()] == ["destroy", "destroy"]
    assert "--preview-only" in pulumi.operations()[0]
    assert not any("--run-program=true" in c for c in pulumi.operations())


def test_progress_shows_rollout_status_elapsed_time_and_is_markup_safe(pulumi: Any) -> None:
    pulumi.scenario["up"] = {"events": up_events(sleep=2.5)}
    done = pulumi.run("up", "--stack", "dev", "--yes", "--skip-preflight", "--progress-interval", "1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "MarkupError" not in done.stderr and "Traceback" not in done.stderr
    assert re.search(
        r"inference: Waiting for app ReplicaSet to be available \(0/1 Pods available\) \(\d+s\)", out
    )
    assert "inference: weights in [/models/r1] are [secret] until loaded" in out
    # the wait is visible while it lasts: a heartbeat with the step, its elapsed time and status
    assert re.search(
        r"\.\.\. still working \(\d+s\): inference [12]s \(weights in \[/models/r1\] are \[secret\]", out
    )
    assert re.search(r"replaced  kubernetes:apps/v1:Deployment inference \([23]s\)", out)
    assert "done in 3s: 1 replaced, 1 updated" in out and "slowest steps:" in out


def test_exit_codes_survive_a_pipe(pulumi: Any) -> None:
    env = pulumi.env()
    infeasible = "--set model.variant=r1-671b --set gpu.instanceFamilies=g4dn"
    for cmd, expected in (
        (f"{sys.executable} -m automation plan --stack dev --json {infeasible}", 1),
        (f"{sys.executable} -m automation plan --stack dev --json", 0),
        (f"{sys.executable} -m automation up --stack dev --skip-preflight < /dev/null", 2),
        (f"{sys.executable} -m automation preview --stack nosuch", 2),
    ):
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {cmd} | head -1"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == expected, (cmd, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_usage_error_under_json_is_still_one_document(pulumi: Any) -> None:
    done = pulumi.run("preview", "--stack", "dev", "--json", "--parallel", "many")
    assert done.returncode == 2 and "--parallel: invalid int value" in done.stderr
    assert json.loads(done.stdout)["exit_code"] == 2


def test_each_warning_is_shown_once_per_command(pulumi: Any) -> None:
    """The CLI shows the stack's settings warnings before anything runs; the program logs them
    again on each of its runs (up's preview, then the update), and may log warnings of its own:
    each appears once, the engine's colour directives aside."""
    from deepseek_eks.automation.api import read_config
    from deepseek_eks.components.build import size
    from deepseek_eks.settings import parse_settings
    from deepseek_eks.settings.model import DOCKER_HUB_WARNING

    config = read_config("dev", {})
    # The plan's own warnings: the summary shows them, and the program logs them on each run.
    (planned, *_) = size(parse_settings(config.values, config.secret_keys, "dev")).warnings
    stack = "urn:pulumi:dev::deepseek-eks::pulumi:pulumi:Stack::deepseek-eks-dev"
    own = "DeepSeekService 'deepseek': switching compute mode as allowed."
    logged = [
        standin.diag(f"<{{%reset%}}>{DOCKER_HUB_WARNING}<{{%reset%}}>\n", stack, "warning"),
        standin.diag(f"<{{%reset%}}>{own}<{{%reset%}}>\n", stack, "warning"),
        standin.diag(f"<{{%reset%}}>{planned}<{{%reset%}}>\n", stack, "warning"),
    ]
    pulumi.scenario["preview"] = {"events": [*preview_events()[:-1], *logged, preview_events()[-1]]}
    pulumi.scenario["up"] = {"events": [*up_events()[:-1], *logged, up_events()[-1]]}
    done = pulumi.run("up", "--stack", "dev", "--yes", "--skip-preflight")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert said.count("image.registry is unset") == 1, said
    assert said.count(own) == 1, said
    assert said.count(planned) == 1, said
    assert "%reset%" not in said
