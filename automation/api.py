"""The importable Automation API: deploy, preview, refresh, destroy and read any stack of this
project from Python, with the same program (``__main__.py`` -> ``build()``) ``pulumi up`` runs.

Every operation validates the settings and sizes the stack first, offline, so a bad
configuration fails in milliseconds; then it checks for the Pulumi CLI and AWS credentials and
says in one sentence how to fix a missing one.

    from deepseek_eks.automation import api

    outputs = api.up("dev", overrides={"model.variant": "r1-distill-llama-8b"}, yes=True)
    print(outputs["endpointUrl"])
    api.destroy("dev", yes=True)

``up`` always previews first (with the project's policy pack unless ``RunOptions(policy_packs=[])``)
and shows the changes; ``up``, ``refresh`` and ``destroy`` need ``yes=True`` or a ``confirm``
callback on the ``Orchestrator``. ``destroy`` works from the stack's state alone.

What each call raises (the CLI maps them to its exit codes): ``StackFileError`` (no such stack
file, or one not shaped like Pulumi's: 2), ``SettingsError`` (invalid settings: 2),
``SizingError`` (no feasible plan: 1) and ``AutomationError`` (``exit_code``: 3 for a missing
Pulumi CLI or AWS credentials, 2 for an unknown Pulumi stack, a missing ``yes`` or a declined
confirmation, 1 for a failed Pulumi operation or an unreachable AWS).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import yaml

from deepseek_eks.components import size
from deepseek_eks.components.deployed_state import deployed_mode, switch_refusal
from deepseek_eks.components.service import PROGRAM_SERVICE_NAME, refuse_on_multi_node
from deepseek_eks.settings import PROJECT, Settings, SettingsError, parse_settings
from deepseek_eks.sizing import SizingPlan

from .interrupts import RECOVERY, graceful_interrupts
from .progress import ChangeSet, plain_message
from .stackfile import PROJECT_ROOT, StackConfig, read_stack, stack_document

INSTALL_PULUMI = (
    "The Pulumi CLI is not installed: install it with `curl -fsSL https://get.pulumi.com | sh` "
    "(or see https://www.pulumi.com/docs/iac/download-install/) and run the command again."
)
NO_CREDENTIALS = (
    "No AWS credentials found: run `aws configure` or `aws sso login`, or set AWS_PROFILE "
    "(or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), then run the command again."
)


class Operation(StrEnum):
    PREVIEW = "preview"
    UP = "up"
    REFRESH = "refresh"
    DESTROY = "destroy"

    @property
    def changes_resources(self) -> bool:
        return self in (Operation.UP, Operation.DESTROY)


class AutomationError(RuntimeError):
    """A failure with one sentence for the user and the exit code the CLI returns."""

    def __init__(self, message: str, exit_code: int = 3):
        super().__init__(message)
        self.exit_code = exit_code


# The part of ``pulumi.automation.Stack`` the orchestration uses: preview/up/refresh/destroy
# (keyword arguments) and outputs(). Tests pass a recording fake with the same methods.
StackLike = Any


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["model.variant=r1-671b", ...]`` -> ``{"model.variant": "r1-671b"}``."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AutomationError(f"--set {item!r}: expected key.path=value, e.g. model.variant=r1-671b", 2)
        overrides[key.strip()] = value
    return overrides


@dataclass
class Prepared:
    """A stack's validated settings and sizing plan, before anything touches Pulumi or AWS."""

    stack: str
    config: StackConfig
    settings: Settings
    plan: SizingPlan
    overrides: dict[str, str] = field(default_factory=dict)


def prepare(
    stack: str, overrides: dict[str, str] | None = None, project_dir: Path = PROJECT_ROOT
) -> Prepared:
    """Read the stack file, apply ``--set`` overrides, validate and size: raises
    ``StackFileError`` / ``SettingsError`` / ``SizingError`` with every problem, or
    ``ServiceError`` for a plan the program would refuse to build, offline."""
    overrides = overrides or {}
    config = read_config(stack, overrides, project_dir)
    settings = parse_settings(config.values, config.secret_keys, stack)
    plan = size(settings)
    # What the program would refuse to build is refused here too, not planned and priced.
    refuse_on_multi_node(PROGRAM_SERVICE_NAME, settings, plan)
    return Prepared(stack, config, settings, plan, overrides)


def read_config(
    stack: str, overrides: dict[str, str] | None, project_dir: Path = PROJECT_ROOT
) -> StackConfig:
    """The stack's config as the engine would see it, with ``--set`` overrides applied."""
    config = read_stack(stack, project_dir)
    return config.with_overrides(dict(overrides), PROJECT) if overrides else config


def require_pulumi_cli() -> str:
    path = shutil.which("pulumi")
    if path is None:
        raise AutomationError(INSTALL_PULUMI)
    return path


def require_aws_credentials(settings: Settings) -> str:
    """The caller's account id, with the stack's ``aws:profile``/``aws:assumeRoles``; a
    one-sentence error when there are no usable credentials (exit 3) or AWS cannot be reached
    (exit 1: a network failure is not a credentials problem)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ProfileNotFound

    from .preflight import NETWORK_ERRORS, aws_session

    region = settings.region
    try:
        session = aws_session(settings)
        return str(session.client("sts", region_name=region).get_caller_identity()["Account"])
    except (NoCredentialsError, ProfileNotFound) as e:
        detail = f" ({e})" if isinstance(e, ProfileNotFound) else ""
        raise AutomationError(NO_CREDENTIALS.replace("found:", f"found{detail}:")) from None
    except NETWORK_ERRORS as e:
        raise AutomationError(
            f"Could not reach AWS STS in {region} ({e}): check the network or proxy, then retry.", 1
        ) from None
    except (ClientError, BotoCoreError) as e:
        raise AutomationError(
            f"AWS rejected the credentials in {region}: {e}. Refresh them and retry."
        ) from None


@contextmanager
def effective_config_file(stack: str, config: StackConfig) -> Iterator[Path]:
    """The stack file with the ``--set`` overrides applied (where the stack has each setting:
    flat or inside its ``--path`` object), in a temporary file: overrides apply to this run only
    and never rewrite the stack file. Secrets and encryption settings are copied as they are."""
    data = stack_document(config)
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-") as tmp:
        path = Path(tmp) / f"Pulumi.{stack}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=True))
        yield path


# With this set to 1 the project's ``__main__.py`` runs in this process as an Automation API inline
# program (the CLI reaches the SDK's language server with ``--client``) instead of under the CLI's
# Python language host: for engines without that host, such as the twin's (docs/verification-engine.md).
INLINE_PROGRAM_ENV = "DEEPSEEK_EKS_INLINE_PROGRAM"


def project_program(project_dir: Path) -> Callable[[], None]:
    """The project's ``__main__.py`` as an inline program: the file ``pulumi up`` runs, unchanged."""
    import runpy

    def program() -> None:
        runpy.run_path(str(project_dir / "__main__.py"))

    return program


def open_stack(stack: str, project_dir: Path, *, create: bool = True) -> StackLike:
    """The stack of this project's program (a local program: the very ``__main__.py``; an inline
    one running that file with ``DEEPSEEK_EKS_INLINE_PROGRAM=1``).

    ``create=False`` only selects: reading outputs must never create an empty stack, so an
    unknown name is an ``AutomationError`` (exit 2) naming the stack."""
    from pulumi import automation as auto

    from deepseek_eks.policy import pack_env

    # The Pulumi CLI starts the policy pack (PulumiPolicy.yaml names no virtualenv) with the first
    # python on PATH: this interpreter, which has pulumi-policy, goes first.
    opts = auto.LocalWorkspaceOptions(env_vars=pack_env({"PATH": os.environ.get("PATH", "")}))
    try:
        if create and os.environ.get(INLINE_PROGRAM_ENV) == "1":
            from .stackfile import project_name

            opts.work_dir = str(project_dir)  # Pulumi.yaml and the stack files stay the project's
            return auto.create_or_select_stack(
                stack_name=stack,
                project_name=project_name(project_dir),
                program=project_program(project_dir),
                opts=opts,
            )
        if create:
            return auto.create_or_select_stack(stack_name=stack, work_dir=str(project_dir), opts=opts)
        return auto.select_stack(stack_name=stack, work_dir=str(project_dir), opts=opts)
    except FileNotFoundError:  # the SDK shells out to `pulumi version` first
        raise AutomationError(INSTALL_PULUMI) from None
    except auto.StackNotFoundError:
        raise AutomationError(
            f"no Pulumi stack named {stack!r} in this backend: check `pulumi stack ls`", 2
        ) from None
    except auto.CommandError as e:  # e.g. not logged in to a backend
        tail = "\n".join(str(e).strip().splitlines()[-3:])
        raise AutomationError(f"could not open the Pulumi stack {stack!r}:\n{tail}", 1) from None


def policy_pack_dir() -> Path:
    """The project's policy pack folder: ``policy.pack_dir()`` where the package provides it (the
    pack shipped inside the package), else this checkout's ``policy/`` folder."""
    try:
        from deepseek_eks import policy  # the checkout's policy/ or the wheel's deepseek_eks/policy
    except ImportError:  # not importable from here: the checkout's folder, if there is one
        finder = None
    else:
        finder = getattr(policy, "pack_dir", None)
    folder = Path(finder()) if callable(finder) else PROJECT_ROOT / "policy"
    if not (folder / "PulumiPolicy.yaml").is_file():
        raise AutomationError(
            f"The project's policy pack is missing ({folder} has no PulumiPolicy.yaml): reinstall "
            "deepseek-eks, or pass --no-policy-pack to run without it.",
            3,
        )
    return folder


@dataclass
class RunOptions:
    """Pulumi flags passed through to the operation (each only where Pulumi's command takes it).

    ``policy_packs`` defaults to the project's own pack on preview and up; an empty list turns
    it off (``--no-policy-pack``)."""

    diff: bool = False
    target: list[str] = field(default_factory=list)
    refresh: bool = False
    parallel: int | None = None
    expect_no_changes: bool = False
    policy_packs: list[str] | None = None

    def kwargs(self, operation: Operation) -> dict[str, Any]:
        """The Automation API keyword arguments of ``operation`` (its preview included)."""
        out: dict[str, Any] = {}
        if self.diff:
            out["diff"] = True
        if self.target:
            out["target"] = list(self.target)
        if self.parallel:
            out["parallel"] = self.parallel
        if self.refresh and operation in (Operation.PREVIEW, Operation.UP, Operation.DESTROY):
            out["refresh"] = True
        if self.expect_no_changes and operation in (Operation.PREVIEW, Operation.UP, Operation.REFRESH):
            out["expect_no_changes"] = True
        if operation in (Operation.PREVIEW, Operation.UP):
            packs = [str(policy_pack_dir())] if self.policy_packs is None else self.policy_packs
            if packs:
                out["policy_packs"] = packs
        return out


# The Automation API method that shows what an operation would do, without doing it.
PREVIEW_OF = {
    Operation.PREVIEW: "preview",
    Operation.UP: "preview",
    Operation.REFRESH: "preview_refresh",
    Operation.DESTROY: "preview_destroy",
}


@dataclass
class OperationResult:
    """What a run produced: the stack outputs, the preview's change set and each step's timing."""

    outputs: dict[str, Any]
    changes: ChangeSet
    timings: list[dict[str, Any]] = field(default_factory=list)
    applied: bool = False
    kept: list[dict[str, str]] = field(default_factory=list)
    """``destroy``: what it leaves in AWS (resources marked retainOnDelete), each with its type."""


class Progress(Protocol):
    """A live display of a running operation (``automation.progress.ProgressView``)."""

    def __call__(self, event: Any) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def timings(self) -> list[dict[str, Any]]: ...


Printer = Callable[[str], None]


def _print_changes(printer: Printer, changes: ChangeSet) -> None:
    for line in changes.lines():
        printer(line.plain)


@dataclass
class Orchestrator:
    """Runs one operation in the safe order: settings and sizing (offline; ``destroy`` needs
    neither) -> Pulumi CLI -> AWS credentials -> preflight (up only) -> a preview, shown ->
    confirmation (up, refresh, destroy) -> the operation with live progress -> outputs."""

    project_dir: Path = PROJECT_ROOT
    opener: Callable[[str, Path], StackLike] = open_stack
    check_cli: Callable[[], str] = require_pulumi_cli
    check_credentials: Callable[[Settings], str] = require_aws_credentials
    preflight: Callable[[Settings, SizingPlan], list[Any]] | None = None
    print: Printer = print
    on_event: Callable[[Any], Any] | None = None
    # Asked before up/refresh/destroy change anything, after the preview was shown; None means
    # no one can be asked, so only ``yes=True`` goes ahead.
    confirm: Callable[[Operation, ChangeSet], bool] | None = None
    show_changes: Callable[[ChangeSet], None] | None = None
    progress: Callable[[Operation], Progress] | None = None
    # Pulumi's own text output (``--diff``): where it goes.
    on_output: Printer | None = None
    # The warnings this operation has shown: the settings' (before anything runs), then each the
    # program logs, which it logs again on each of its runs (up's preview, then its update).
    _warned: set[str] = field(default_factory=set, init=False, repr=False)

    def run(
        self, operation: Operation, stack: str, overrides: dict[str, str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run ``operation`` on ``stack``; returns the stack outputs (``{name: value}``). Takes
        the keyword arguments of :meth:`run_detailed`."""
        return self.run_detailed(operation, stack, overrides, **kwargs).outputs

    def _settings(
        self, operation: Operation, stack: str, overrides: dict[str, str]
    ) -> tuple[StackConfig, Settings]:
        if operation is not Operation.DESTROY:
            prepared = prepare(stack, overrides, self.project_dir)
            from deepseek_eks.sizing.cli import summary_lines

            for line in summary_lines(prepared.plan):
                self.print(line)
            # The summary shows the plan's warnings; the program logs them again on each run.
            self._warned.update(prepared.plan.warnings)
            self.check_cli()
            for warning in prepared.settings.warnings:
                self._warn(warning)
            refuse_unreachable_api(prepared.settings, operation, self.print)
            self.check_credentials(prepared.settings)
            if operation is Operation.UP and self.preflight is not None and not self._skip_preflight:
                self._run_preflight(prepared)
            return prepared.config, prepared.settings
        # destroy deletes what the state holds and runs no program: today's settings need not
        # size (or even validate); only the AWS settings matter, for the credentials check.
        config = read_config(stack, overrides, self.project_dir)
        try:
            settings = parse_settings(config.values, config.secret_keys, stack)
        except SettingsError as error:
            self.print(
                f"warning: the stack's settings no longer validate ({error}); destroying from the state"
            )
            aws_only = {k: v for k, v in config.values.items() if k.startswith("aws:")}
            settings = parse_settings(aws_only, set(), stack)
        self.check_cli()
        self.check_credentials(settings)
        return config, settings

    def _run_preflight(self, prepared: Prepared) -> None:
        from .preflight import Status

        assert self.preflight is not None
        checks = self.preflight(prepared.settings, prepared.plan)
        failed = [c for c in checks if c.status is Status.FAIL]
        if failed:
            detail = "; ".join(f"{c.name}: {c.detail}" for c in failed)
            raise AutomationError(f"Preflight failed ({detail}). Fix it or pass --skip-preflight.", 1)

    def run_detailed(
        self,
        operation: Operation,
        stack: str,
        overrides: dict[str, str] | None = None,
        *,
        yes: bool = False,
        skip_preflight: bool = False,
        options: RunOptions | None = None,
    ) -> OperationResult:
        """``run``, returning the preview's changes and the step timings too."""
        options = options or RunOptions()
        self._skip_preflight = skip_preflight
        self._warned = set()
        confirmed = operation is Operation.PREVIEW or yes
        if not confirmed and self.confirm is None:
            raise AutomationError(
                f"`{operation.value}` changes real AWS resources: pass --yes (or yes=True) to go ahead.", 2
            )
        config, settings = self._settings(operation, stack, overrides or {})
        stack_obj = self.opener(stack, self.project_dir)
        if operation in (Operation.PREVIEW, Operation.UP):
            refuse_switch(stack, outputs_of(stack_obj), settings.compute_mode.value)
        if operation is Operation.UP and settings.first_run_blockers and first_deployment(stack_obj):
            raise AutomationError(" ".join(settings.first_run_blockers), 2)
        with (
            graceful_interrupts(self.print) as interrupts,
            effective_config_file(stack, config) as config_file,
        ):
            try:
                result = self._preview_then_apply(
                    stack_obj, operation, stack, confirmed, config_file, options
                )
            except AutomationError as error:
                if interrupts.signals:  # cancelled (or stopped) on request: say what to run next
                    raise AutomationError(f"{error}\n{RECOVERY.format(stack=stack)}", 1) from None
                raise
        if operation is not Operation.DESTROY:
            result.outputs = outputs_of(stack_obj)
        return result

    def _preview_then_apply(
        self,
        stack_obj: StackLike,
        operation: Operation,
        stack: str,
        confirmed: bool,
        config_file: Path,
        options: RunOptions,
    ) -> OperationResult:
        """The preview, shown; what destroy keeps; the confirmation; then the operation itself."""
        base = {"config_file": str(config_file), **options.kwargs(operation)}
        changes = self._preview(stack_obj, operation, base)
        result = OperationResult({}, changes)
        if operation is Operation.DESTROY:
            result.kept = kept_on_destroy(stack_obj)
            for line in kept_lines(result.kept):
                self.print(line)
        if operation is not Operation.PREVIEW:
            if not confirmed:
                assert self.confirm is not None
                if not self.confirm(operation, changes):
                    raise AutomationError(f"`{operation.value}` cancelled: nothing was changed.", 2)
            result.timings = self._apply(stack_obj, operation, base)
            result.applied = True
        return result

    def _call(self, stack_obj: StackLike, method: str, operation: Operation, kwargs: dict[str, Any]) -> None:
        try:
            getattr(stack_obj, method)(**kwargs)
        except Exception as e:  # the Automation API raises CommandError with the CLI's output
            from pulumi.automation.errors import CommandError

            if isinstance(e, CommandError):
                tail = "\n".join(str(e).strip().splitlines()[-5:])
                during = " (in its preview)" if method != operation.value else ""
                raise AutomationError(f"`pulumi {operation.value}` failed{during}:\n{tail}", 1) from None
            raise

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.print(f"warning: {message}")

    def _once(self, sink: Callable[[Any], Any]) -> Callable[[Any], None]:
        """``sink`` without the warning diagnostics this operation has shown already."""

        def forward(event: Any) -> None:
            diagnostic = event.diagnostic_event
            if diagnostic is not None and diagnostic.severity == "warning":
                message = plain_message(diagnostic.message)
                if message in self._warned:
                    return
                self._warned.add(message)
            sink(event)

        return forward

    def _preview(self, stack_obj: StackLike, operation: Operation, base: dict[str, Any]) -> ChangeSet:
        changes = ChangeSet()
        collect = self._once(changes)

        def on_event(event: Any) -> None:
            collect(event)
            if self.on_event is not None:  # an API user's callback gets every event
                self.on_event(event)

        kwargs = {**base, "on_event": on_event}
        if self.on_output is not None:
            kwargs["on_output"] = self.on_output
        try:
            self._call(stack_obj, PREVIEW_OF[operation], operation, kwargs)
        finally:  # a failed preview (a mandatory policy) still shows what it found
            (self.show_changes or (lambda c: _print_changes(self.print, c)))(changes)
        return changes

    def _apply(
        self, stack_obj: StackLike, operation: Operation, base: dict[str, Any]
    ) -> list[dict[str, Any]]:
        kwargs = dict(base)
        if self.on_output is not None:
            kwargs["on_output"] = self.on_output
        progress = self.progress(operation) if self.progress is not None else None
        if progress is not None:
            kwargs["on_event"] = self._once(progress)
        elif self.on_event is not None:
            kwargs["on_event"] = self.on_event
        elif "on_output" not in kwargs:
            kwargs["on_output"] = self.print
        if progress is not None:
            progress.start()
        try:
            self._call(stack_obj, operation.value, operation, kwargs)
        finally:
            if progress is not None:
                progress.stop()
        return progress.timings() if progress is not None else []


def outputs_of(stack: StackLike) -> dict[str, Any]:
    """Stack outputs as plain values, secrets masked."""
    return {k: ("[secret]" if v.secret else v.value) for k, v in stack.outputs().items()}


def refuse_switch(stack: str, outputs: dict[str, Any], wanted: str) -> None:
    """Raise ``AutomationError`` (exit 2: the settings) when ``stack``'s outputs record another
    compute mode than ``wanted`` (an in-place switch cannot work: automation/mode_switch.py)."""
    refusal = switch_refusal(stack, deployed_mode(outputs), wanted)
    if refusal:
        raise AutomationError(refusal, 2)


def _orchestrator(**kwargs: Any) -> Orchestrator:
    from .preflight import run_preflight

    return Orchestrator(preflight=run_preflight, **kwargs)


def up(
    stack: str,
    overrides: dict[str, str] | None = None,
    *,
    yes: bool = False,
    options: RunOptions | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Deploy ``stack`` (preflight, then a preview, then the update); returns its outputs."""
    skip = kwargs.pop("skip_preflight", False)
    return _orchestrator(**kwargs).run(
        Operation.UP, stack, overrides, yes=yes, skip_preflight=skip, options=options
    )


def preview(
    stack: str, overrides: dict[str, str] | None = None, *, options: RunOptions | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Show what ``up`` would change (the policy pack included); returns the current outputs."""
    return _orchestrator(**kwargs).run(Operation.PREVIEW, stack, overrides, options=options)


def refresh(
    stack: str,
    overrides: dict[str, str] | None = None,
    *,
    yes: bool = False,
    options: RunOptions | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Reconcile the stack's state with AWS (after showing what would change); returns its outputs."""
    return _orchestrator(**kwargs).run(Operation.REFRESH, stack, overrides, yes=yes, options=options)


def destroy(
    stack: str, *, yes: bool = False, options: RunOptions | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Delete every resource of ``stack``, from its state: today's settings need not size."""
    return _orchestrator(**kwargs).run(Operation.DESTROY, stack, yes=yes, options=options)


def outputs(stack: str, project_dir: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The stack's current outputs (secrets masked); needs the CLI, not AWS. Never creates a
    stack: an unknown name raises ``AutomationError`` (exit 2)."""
    require_pulumi_cli()
    from pulumi.automation.errors import CommandError

    opened = open_stack(stack, project_dir, create=False)
    try:
        return outputs_of(opened)
    except CommandError as error:  # not logged in to the stack's backend, no access, ...
        tail = "\n".join(str(error).strip().splitlines()[-3:])
        raise AutomationError(
            f"could not read stack {stack!r}'s outputs: log in to the backend that holds it (`pulumi "
            f"login`, or PULUMI_BACKEND_URL) and check `pulumi stack ls`:\n{tail}",
            1,
        ) from None


# What a kept resource needs to stay usable, said beside it in destroy's preview.
KEPT_BECAUSE = {
    "aws:s3/bucket:Bucket": "weights or logs you keep (weights.retainBucket, endpoint.accessLogs)",
    "aws:kms/key:Key": "the key that encrypts the kept weights bucket: kept so it stays readable "
    "(a deleted key's objects are unreadable once its 30-day deletion window ends)",
    "aws:kms/alias:Alias": "the kept key's name",
}


def kept_on_destroy(stack_obj: Any) -> list[dict[str, str]]:
    """The resources ``destroy`` leaves in place (``retainOnDelete`` in the stack's state), or []
    when the state cannot be exported (a fake or a stack never deployed)."""
    try:
        deployment = stack_obj.export_stack().deployment or {}
    except Exception:  # nothing exported: nothing known to keep
        return []
    return [
        {"type": r.get("type", ""), "urn": r.get("urn", ""), "id": str(r.get("id", ""))}
        for r in deployment.get("resources") or []
        if r.get("retainOnDelete") and r.get("custom", True)
    ]


def kept_lines(kept: list[dict[str, str]]) -> list[str]:
    """What destroy's preview says about the resources it keeps."""
    if not kept:
        return []
    lines = ["kept by destroy (retainOnDelete; delete them yourself when no longer needed):"]
    for r in kept:
        name = r["urn"].rsplit("::", 1)[-1]
        why = KEPT_BECAUSE.get(r["type"], "marked to outlive the stack")
        lines.append(f"  {r['type']} {name} {r['id']}: {why}")
    return lines


def refuse_unreachable_api(settings: Any, operation: Operation, say: Callable[[str], None]) -> None:
    """``up`` stops before creating anything when the settings leave the cluster API unreachable
    from the deployer (settings/exposure.py); other operations create nothing, so they only warn."""
    if operation is not Operation.UP:
        for blocker in settings.deploy_blockers:
            say(f"warning: `up` would refuse this stack: {blocker}")
    elif settings.deploy_blockers:
        raise AutomationError(" ".join(settings.deploy_blockers), 2)


def first_deployment(stack_obj: Any) -> bool:
    """A stack that has never been deployed has no ``clusterName`` output."""
    try:
        return "clusterName" not in stack_obj.outputs()
    except Exception:  # a stack that cannot report outputs has none to report
        return True
