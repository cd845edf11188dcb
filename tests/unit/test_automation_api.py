"""The Automation API orchestration against a recording fake stack: order of calls, the config
each run sees, exit codes and the one-sentence errors. Real Pulumi runs are in
tests/integration and need the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepseek_eks.automation.api import (
    INSTALL_PULUMI,
    NO_CREDENTIALS,
    AutomationError,
    Operation,
    Orchestrator,
    parse_overrides,
    require_aws_credentials,
)
from deepseek_eks.settings import SettingsError, parse_settings

ROOT = Path(__file__).resolve().parents[2]


# The deployer's egress address: the example stacks' private-only API is refused by `up`.
REACHABLE = {"cluster.publicAccessCidrs": "203.0.113.7/32"}


@dataclass
class FakeOutput:
    value: Any
    secret: bool = False


@dataclass
class FakeStack:
    """Records each Automation API call and the stack config file each one was given."""

    calls: list[str]
    fail: Exception | None = None
    configs: list[dict] = field(default_factory=list)
    deployed: dict[str, FakeOutput] = field(default_factory=dict)  # outputs of an earlier `up`

    def _op(self, name: str, kwargs: dict[str, Any]) -> None:
        self.calls.append(f"stack.{name}")
        self.configs.append(yaml.safe_load(Path(kwargs["config_file"]).read_text()))
        if self.fail:
            raise self.fail

    def preview(self, **kwargs: Any) -> None:
        self._op("preview", kwargs)

    def up(self, **kwargs: Any) -> None:
        self._op("up", kwargs)

    def refresh(self, **kwargs: Any) -> None:
        self._op("refresh", kwargs)

    def destroy(self, **kwargs: Any) -> None:
        self._op("destroy", kwargs)

    def preview_refresh(self, **kwargs: Any) -> None:
        self._op("preview_refresh", kwargs)

    def preview_destroy(self, **kwargs: Any) -> None:
        self._op("preview_destroy", kwargs)

    def outputs(self) -> dict[str, FakeOutput]:
        self.calls.append("stack.outputs")
        return {
            "endpointUrl": FakeOutput("http://internal-x.elb.amazonaws.com"),
            "kubeconfig": FakeOutput("k", True),
            **self.deployed,
        }


@dataclass
class Check:
    name: str
    status: Any
    detail: str


def orchestrator(
    calls: list[str], stack: FakeStack, failing_preflight: bool = False, **kw: Any
) -> Orchestrator:
    from deepseek_eks.automation.preflight import Status

    def preflight(settings, plan):
        calls.append(f"preflight:{plan.instance_type}")
        return [
            Check("quota", Status.FAIL if failing_preflight else Status.PASS, "12 vCPUs needed, 8 allowed")
        ]

    printed: list[str] = []
    o = Orchestrator(
        project_dir=ROOT,
        opener=lambda name, path: calls.append(f"open:{name}") or stack,
        check_cli=lambda: calls.append("cli") or "/usr/bin/pulumi",
        check_credentials=lambda settings: calls.append(f"credentials:{settings.region}") or "123456789012",
        preflight=preflight,
        print=printed.append,
        **kw,
    )
    o.printed = printed  # type: ignore[attr-defined]
    return o


def test_up_runs_every_step_in_order_and_returns_masked_outputs() -> None:
    calls: list[str] = []
    stack = FakeStack(calls)
    o = orchestrator(calls, stack)
    overrides = {"model.variant": "r1-distill-llama-8b", "gpu.instanceFamilies": "g6e", **REACHABLE}
    outputs = o.run(Operation.UP, "dev", overrides, yes=True)
    assert calls == [
        "cli",
        "credentials:us-east-1",
        "preflight:g6e.xlarge",  # the plan of the overridden variant, not the stack file's
        "open:dev",
        "stack.outputs",  # the deployed computeMode, read before anything changes
        "stack.preview",  # up always previews first, --yes or not
        "stack.up",
        "stack.outputs",
    ]
    assert outputs == {"endpointUrl": "http://internal-x.elb.amazonaws.com", "kubeconfig": "[secret]"}
    assert any(line.startswith("variant        r1-distill-llama-8b") for line in o.printed)  # type: ignore[attr-defined]


def test_overrides_reach_pulumi_for_this_run_only() -> None:
    calls: list[str] = []
    stack = FakeStack(calls)
    before = (ROOT / "Pulumi.prod.yaml").read_text()
    orchestrator(calls, stack).run(
        Operation.PREVIEW, "prod", {"model.variant": "r1-distill-qwen-32b", "gpu.instanceFamilies": "[g6e]"}
    )
    config = stack.configs[0]["config"]
    assert config["deepseek-eks:model.variant"] == "r1-distill-qwen-32b"
    assert config["deepseek-eks:gpu.instanceFamilies"] == ["g6e"]
    assert config["deepseek-eks:computeMode"] == "karpenter"  # the rest of the stack file is kept
    assert (ROOT / "Pulumi.prod.yaml").read_text() == before


def test_preview_needs_no_yes_and_no_preflight_but_up_refresh_and_destroy_do() -> None:
    calls: list[str] = []
    orchestrator(calls, FakeStack(calls)).run(Operation.PREVIEW, "dev")
    assert not any(c.startswith("preflight") for c in calls)
    for operation in (Operation.UP, Operation.REFRESH, Operation.DESTROY):
        calls = []
        with pytest.raises(AutomationError) as info:
            orchestrator(calls, FakeStack(calls)).run(operation, "dev", REACHABLE, skip_preflight=True)
        assert info.value.exit_code == 2 and "--yes" in str(info.value)
        assert not any(c.startswith("open") for c in calls)  # nothing touched Pulumi


@pytest.mark.parametrize("operation", [Operation.PREVIEW, Operation.UP])
def test_a_compute_mode_switch_on_a_deployed_stack_is_refused_before_pulumi_runs(
    operation: Operation,
) -> None:
    """dev is deployed with auto-mode (its computeMode output); --set computeMode=karpenter would
    re-create its NodePools and StorageClass under new URNs and turn Auto Mode off."""
    calls: list[str] = []
    stack = FakeStack(calls, deployed={"computeMode": FakeOutput("auto-mode")})
    with pytest.raises(AutomationError) as info:
        orchestrator(calls, stack).run(operation, "dev", {"computeMode": "karpenter", **REACHABLE}, yes=True)
    message = str(info.value)
    assert info.value.exit_code == 2 and "deepseek-eks:computeMode" in message
    assert "new stack" in message and "diff --stack dev --set computeMode=karpenter" in message
    assert f"stack.{operation.value}" not in calls
    calls.clear()  # the mode it was deployed with goes ahead, and so does a first deployment
    orchestrator(calls, stack).run(operation, "dev", REACHABLE, yes=True)
    orchestrator(calls, FakeStack(calls)).run(
        operation, "dev", {"computeMode": "karpenter", **REACHABLE}, yes=True
    )
    assert calls.count(f"stack.{operation.value}") == 2


def test_failing_preflight_stops_before_pulumi_unless_skipped() -> None:
    calls: list[str] = []
    with pytest.raises(AutomationError) as info:
        orchestrator(calls, FakeStack(calls), failing_preflight=True).run(
            Operation.UP, "dev", REACHABLE, yes=True
        )
    assert info.value.exit_code == 1 and "quota: 12 vCPUs needed, 8 allowed" in str(info.value)
    assert "open:dev" not in calls
    calls = []
    orchestrator(calls, FakeStack(calls), failing_preflight=True).run(
        Operation.UP, "dev", REACHABLE, yes=True, skip_preflight=True
    )
    assert "stack.up" in calls and not any(c.startswith("preflight") for c in calls)


def test_invalid_settings_fail_before_any_tool_is_needed() -> None:
    calls: list[str] = []
    with pytest.raises(SettingsError):
        orchestrator(calls, FakeStack(calls)).run(
            Operation.UP, "dev", {"gpu.instanceFamilies": "g4"}, yes=True
        )
    assert calls == []


def test_missing_cli_is_one_sentence_after_the_plan() -> None:
    calls: list[str] = []

    def no_cli() -> str:
        raise AutomationError(INSTALL_PULUMI)

    o = orchestrator(calls, FakeStack(calls))
    o.check_cli = no_cli
    with pytest.raises(AutomationError) as info:
        o.run(Operation.UP, "dev", yes=True)
    assert str(info.value) == INSTALL_PULUMI and info.value.exit_code == 3
    assert o.printed and calls == []  # type: ignore[attr-defined]


def test_pulumi_command_error_becomes_exit_1() -> None:
    from pulumi.automation.errors import CommandError

    calls: list[str] = []
    stack = FakeStack(
        calls, fail=CommandError(type("R", (), {"stdout": "", "stderr": "boom", "code": 255})())
    )
    with pytest.raises(AutomationError) as info:
        orchestrator(calls, stack).run(Operation.REFRESH, "dev", yes=True)
    assert info.value.exit_code == 1 and "`pulumi refresh` failed" in str(info.value)


def test_up_refuses_a_stack_whose_api_the_deployer_cannot_reach_before_anything_runs() -> None:
    """The example stacks create a VPC and a private-only endpoint whose security group admits only
    itself (reference/upstream/endpoint-access-facts.json): `up` stops with exit 2 and the fix,
    before credentials, preflight or Pulumi; preview only warns."""
    calls: list[str] = []
    o = orchestrator(calls, FakeStack(calls))
    with pytest.raises(AutomationError) as info:
        o.run(Operation.UP, "dev", yes=True)
    assert info.value.exit_code == 2
    assert "cluster.publicAccessCidrs" in str(info.value) and "pulumi config set" in str(info.value)
    assert calls == ["cli"]
    calls.clear()
    o.run(Operation.PREVIEW, "dev")
    assert "stack.preview" in calls
    assert any("`up` would refuse" in line for line in o.printed)  # type: ignore[attr-defined]


def test_up_refuses_private_only_access_to_a_new_vpc_on_the_first_deployment_only() -> None:
    calls: list[str] = []
    private = {"cluster.privateAccessCidrs": "10.9.0.0/16"}
    with pytest.raises(AutomationError) as info:
        orchestrator(calls, FakeStack(calls)).run(Operation.UP, "dev", private, yes=True)
    assert info.value.exit_code == 2 and "nothing routes into" in str(info.value)
    assert "stack.up" not in calls

    class Deployed(FakeStack):
        def outputs(self) -> dict[str, FakeOutput]:
            return {**super().outputs(), "clusterName": FakeOutput("deepseek-dev")}

    calls = []
    orchestrator(calls, Deployed(calls)).run(Operation.UP, "dev", private, yes=True)
    assert "stack.up" in calls


def test_destroy_returns_no_outputs() -> None:
    calls: list[str] = []
    assert orchestrator(calls, FakeStack(calls)).run(Operation.DESTROY, "dev", yes=True) == {}
    assert calls[-1] == "stack.destroy"


def test_parse_overrides() -> None:
    assert parse_overrides(["model.variant=r1-671b", "gpu.instanceFamilies=[p5, p5en]"]) == {
        "model.variant": "r1-671b",
        "gpu.instanceFamilies": "[p5, p5en]",
    }
    with pytest.raises(AutomationError, match=r"expected key\.path=value"):
        parse_overrides(["model.variant"])


def test_missing_aws_credentials_is_one_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(AutomationError) as info:
        require_aws_credentials(parse_settings({}))
    assert str(info.value) == NO_CREDENTIALS


def test_cli_without_pulumi_prints_the_plan_then_one_sentence(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = str(tmp_path)  # no pulumi here
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "automation",
            "up",
            "--stack",
            "prod",
            "--set",
            "model.variant=r1-distill-qwen-32b",
            "--yes",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 3
    assert "variant        r1-distill-qwen-32b" in proc.stdout
    assert proc.stderr.strip().splitlines() == [f"error: {INSTALL_PULUMI}"]


def test_outputs_of_an_unknown_stack_selects_only_and_never_creates(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi import automation as auto
    from pulumi.automation._cmd import CommandResult

    from deepseek_eks.automation import api

    def create_or_select_stack(**_: Any) -> None:
        raise AssertionError("outputs must not create a stack")

    def select_stack(**kwargs: Any) -> None:
        raise auto.StackNotFoundError(CommandResult("", f"no stack named {kwargs['stack_name']}", 255))

    monkeypatch.setattr(auto, "create_or_select_stack", create_or_select_stack)
    monkeypatch.setattr(auto, "select_stack", select_stack)
    monkeypatch.setattr(api, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    with pytest.raises(AutomationError) as info:
        api.outputs("typo")
    assert info.value.exit_code == 2 and "no Pulumi stack named 'typo'" in str(info.value)


def test_network_failure_is_not_reported_as_rejected_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import EndpointConnectionError

    from deepseek_eks.automation import preflight

    class Unreachable:
        def client(self, *_: Any, **__: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://sts.us-east-1.amazonaws.com")

    monkeypatch.setattr(preflight, "aws_session", lambda settings: Unreachable())
    with pytest.raises(AutomationError) as info:
        require_aws_credentials(parse_settings({}))
    assert info.value.exit_code == 1
    assert "Could not reach AWS STS" in str(info.value) and "rejected" not in str(info.value)


def test_explicit_provider_gets_the_stacks_aws_settings() -> None:
    from deepseek_eks.automation.render import construct
    from tests.conftest import stack_config

    config = stack_config("dev")
    config.values["aws:profile"] = "deploy"
    config.values["aws:allowedAccountIds"] = '["123456789012"]'
    run = construct(config)
    (provider,) = [r for r in run.mocks.resources if r.type == "pulumi:providers:aws"]
    assert provider.inputs["profile"] == "deploy"
    assert json.loads(provider.inputs["allowedAccountIds"]) == ["123456789012"]


@dataclass
class RecordingStack(FakeStack):
    """FakeStack that also keeps the keyword arguments of every call."""

    kwargs: list[dict[str, Any]] = field(default_factory=list)

    def _op(self, name: str, kwargs: dict[str, Any]) -> None:
        self.kwargs.append({k: v for k, v in kwargs.items() if k not in ("config_file", "on_event")})
        super()._op(name, kwargs)


def test_policy_pack_is_the_packages_when_it_provides_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from deepseek_eks import policy
    from deepseek_eks.automation.api import RunOptions

    (tmp_path / "PulumiPolicy.yaml").write_text("runtime: python\n")
    monkeypatch.setattr(policy, "pack_dir", lambda: tmp_path, raising=False)
    calls: list[str] = []
    stack = RecordingStack(calls)
    orchestrator(calls, stack).run(Operation.UP, "dev", REACHABLE, yes=True, skip_preflight=True)
    assert [k.get("policy_packs") for k in stack.kwargs] == [[str(tmp_path)], [str(tmp_path)]]
    stack = RecordingStack([])
    orchestrator([], stack).run(Operation.PREVIEW, "dev", options=RunOptions(policy_packs=[]))
    assert "policy_packs" not in stack.kwargs[0]
    (tmp_path / "PulumiPolicy.yaml").unlink()
    with pytest.raises(AutomationError) as info:
        orchestrator([], RecordingStack([])).run(Operation.PREVIEW, "dev")
    assert info.value.exit_code == 3 and "--no-policy-pack" in str(info.value)


def test_confirmation_comes_after_the_preview_and_a_no_cancels() -> None:
    asked: list[str] = []
    calls: list[str] = []

    def confirm(operation: Operation, changes: Any) -> bool:
        asked.append(f"{operation.value} after {calls[-1]}")
        return False

    o = orchestrator(calls, FakeStack(calls), confirm=confirm)
    with pytest.raises(AutomationError) as info:
        o.run(Operation.DESTROY, "dev")
    assert asked == ["destroy after stack.preview_destroy"]
    assert info.value.exit_code == 2 and "stack.destroy" not in calls


def test_destroy_runs_from_the_state_when_the_settings_no_longer_validate() -> None:
    calls: list[str] = []
    o = orchestrator(calls, FakeStack(calls))
    assert o.run(Operation.DESTROY, "dev", {"gpu.instanceFamilies": "g4"}, yes=True) == {}
    assert calls[-2:] == ["stack.preview_destroy", "stack.destroy"]
    assert any("no longer validate" in line for line in o.printed)  # type: ignore[attr-defined]


def test_outputs_without_a_backend_login_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 §5: `outputs` without a login names what to do, not the CLI's raw error."""
    from pulumi.automation.errors import CommandError

    from deepseek_eks.automation import api

    class LoggedOut:
        def outputs(self) -> dict[str, Any]:
            raise CommandError(
                "code: 255\n stdout: \n stderr: error: PULUMI_ACCESS_TOKEN must be set for login"
            )

    monkeypatch.setattr(api, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    monkeypatch.setattr(api, "open_stack", lambda *a, **k: LoggedOut())
    with pytest.raises(api.AutomationError) as raised:
        api.outputs("dev")
    assert "pulumi login" in str(raised.value) and "PULUMI_ACCESS_TOKEN" in str(raised.value)
    assert raised.value.exit_code == 1
