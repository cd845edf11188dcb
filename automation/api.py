"""The importable Automation API: deploy, preview, refresh, destroy and read any stack of this
project from Python, with the same program (``__main__.py`` -> ``build()``) ``pulumi up`` runs.

Every operation validates the settings and sizes the stack first, offline, so a bad
configuration fails in milliseconds; then it checks for the Pulumi CLI and AWS credentials and
says in one sentence how to fix a missing one.

    from automation import api

    outputs = api.up("dev", overrides={"model.variant": "r1-distill-llama-8b"}, yes=True)
    print(outputs["endpointUrl"])
    api.destroy("dev", yes=True)

What each call raises (the CLI maps them to its exit codes): ``StackFileError`` (no such stack
file, or one not shaped like Pulumi's: 2), ``SettingsError`` (invalid settings: 2),
``SizingError`` (no feasible plan: 1) and ``AutomationError`` (``exit_code``: 3 for a missing
Pulumi CLI or AWS credentials, 2 for an unknown Pulumi stack or a missing ``yes``, 1 for a failed
Pulumi operation or an unreachable AWS).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from deepseek_eks.components import size
from deepseek_eks.settings import PROJECT, Settings, parse_settings
from deepseek_eks.sizing import SizingPlan

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
    ``StackFileError`` / ``SettingsError`` / ``SizingError`` with every problem, offline."""
    overrides = overrides or {}
    config = read_config(stack, overrides, project_dir)
    settings = parse_settings(config.values, config.secret_keys, stack)
    return Prepared(stack, config, settings, size(settings), overrides)


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
def effective_config_file(prepared: Prepared, project_dir: Path) -> Iterator[Path]:
    """The stack file with the ``--set`` overrides applied (where the stack has each setting:
    flat or inside its ``--path`` object), in a temporary file: overrides apply to this run only
    and never rewrite the stack file. Secrets and encryption settings are copied as they are."""
    data = stack_document(prepared.config)
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-") as tmp:
        path = Path(tmp) / f"Pulumi.{prepared.stack}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=True))
        yield path


def open_stack(stack: str, project_dir: Path, *, create: bool = True) -> StackLike:
    """The stack of this project's program (a local program: the very ``__main__.py``).

    ``create=False`` only selects: reading outputs must never create an empty stack, so an
    unknown name is an ``AutomationError`` (exit 2) naming the stack."""
    from pulumi import automation as auto

    try:
        if create:
            return auto.create_or_select_stack(stack_name=stack, work_dir=str(project_dir))
        return auto.select_stack(stack_name=stack, work_dir=str(project_dir))
    except FileNotFoundError:  # the SDK shells out to `pulumi version` first
        raise AutomationError(INSTALL_PULUMI) from None
    except auto.StackNotFoundError:
        raise AutomationError(
            f"no Pulumi stack named {stack!r} in this backend: check `pulumi stack ls`", 2
        ) from None


Printer = Callable[[str], None]


@dataclass
class Orchestrator:
    """Runs one operation in the safe order: validate and size (offline) -> Pulumi CLI -> AWS
    credentials -> preflight (up only) -> the Automation API call -> summary."""

    project_dir: Path = PROJECT_ROOT
    opener: Callable[[str, Path], StackLike] = open_stack
    check_cli: Callable[[], str] = require_pulumi_cli
    check_credentials: Callable[[Settings], str] = require_aws_credentials
    preflight: Callable[[Settings, SizingPlan], list[Any]] | None = None
    print: Printer = print
    on_event: Callable[[Any], Any] | None = None

    def run(
        self,
        operation: Operation,
        stack: str,
        overrides: dict[str, str] | None = None,
        *,
        yes: bool = False,
        skip_preflight: bool = False,
    ) -> dict[str, Any]:
        """Run ``operation`` on ``stack``; returns the stack outputs (``{name: value}``)."""
        prepared = prepare(stack, overrides, self.project_dir)
        from deepseek_eks.sizing.cli import summary_lines

        for line in summary_lines(prepared.plan):
            self.print(line)
        self.check_cli()
        for warning in prepared.settings.warnings:
            self.print(f"warning: {warning}")
        self.check_credentials(prepared.settings)
        if operation is Operation.UP and not skip_preflight and self.preflight is not None:
            from .preflight import Status

            checks = self.preflight(prepared.settings, prepared.plan)
            failed = [c for c in checks if c.status is Status.FAIL]
            if failed:
                detail = "; ".join(f"{c.name}: {c.detail}" for c in failed)
                raise AutomationError(f"Preflight failed ({detail}). Fix it or pass --skip-preflight.", 1)
        if operation.changes_resources and not yes:
            raise AutomationError(
                f"`{operation.value}` changes real AWS resources: pass --yes (or yes=True) to go ahead.", 2
            )
        stack_obj = self.opener(stack, self.project_dir)
        if operation in (Operation.PREVIEW, Operation.UP):
            from .mode_switch import refuse_switch

            refuse_switch(stack, outputs_of(stack_obj), prepared.settings.compute_mode.value)
        with effective_config_file(prepared, self.project_dir) as config_file:
            kwargs: dict[str, Any] = {"config_file": str(config_file)}
            # Structured engine events when a progress display is attached, the CLI's text otherwise.
            if self.on_event is not None:
                kwargs["on_event"] = self.on_event
            else:
                kwargs["on_output"] = self.print
            try:
                getattr(stack_obj, operation.value)(**kwargs)
            except Exception as e:  # the Automation API raises CommandError with the CLI's output
                from pulumi.automation.errors import CommandError

                if isinstance(e, CommandError):
                    tail = "\n".join(str(e).strip().splitlines()[-5:])
                    raise AutomationError(f"`pulumi {operation.value}` failed:\n{tail}", 1) from None
                raise
        if operation is Operation.DESTROY:
            return {}
        return outputs_of(stack_obj)


def outputs_of(stack: StackLike) -> dict[str, Any]:
    """Stack outputs as plain values, secrets masked."""
    return {k: ("[secret]" if v.secret else v.value) for k, v in stack.outputs().items()}


def _orchestrator(**kwargs: Any) -> Orchestrator:
    from .preflight import run_preflight

    return Orchestrator(preflight=run_preflight, **kwargs)


def up(
    stack: str, overrides: dict[str, str] | None = None, *, yes: bool = False, **kwargs: Any
) -> dict[str, Any]:
    """Deploy ``stack`` (preflight first); returns its outputs."""
    skip = kwargs.pop("skip_preflight", False)
    return _orchestrator(**kwargs).run(Operation.UP, stack, overrides, yes=yes, skip_preflight=skip)


def preview(stack: str, overrides: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Show what ``up`` would change; returns the current outputs."""
    return _orchestrator(**kwargs).run(Operation.PREVIEW, stack, overrides)


def refresh(stack: str, overrides: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Reconcile the stack's state with AWS; returns its outputs."""
    return _orchestrator(**kwargs).run(Operation.REFRESH, stack, overrides)


def destroy(stack: str, *, yes: bool = False, **kwargs: Any) -> dict[str, Any]:
    """Delete every resource of ``stack``."""
    return _orchestrator(**kwargs).run(Operation.DESTROY, stack, yes=yes)


def outputs(stack: str, project_dir: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The stack's current outputs (secrets masked); needs the CLI, not AWS. Never creates a
    stack: an unknown name raises ``AutomationError`` (exit 2)."""
    require_pulumi_cli()
    return outputs_of(open_stack(stack, project_dir, create=False))
