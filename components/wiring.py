"""The ``DeepSeekService`` arguments that wire it to other infrastructure, and how they may be Outputs.

A wiring argument (an id, ARN, CIDR or DNS name of something the service attaches to) may be a
``pulumi.Input``: a VPC id from another stack, subnet ids from ``aws.ec2.Subnet`` resources. The
settings validator (``settings.parse_settings``) needs values, and the sizing plan reads none of
these, so the component validates a copy of its arguments in which each Output is replaced by a
*placeholder* that is valid for its field, plans from that, and hands the resources the Output
itself (``wired``). Once the Outputs are known (``Output.apply``: at ``up``, and at preview where
they are known there), the arguments are validated again with the real values by the same
validator, so a bad value raises the same message, naming the service and the argument path.

What an unknown value means until then: a CIDR counts as one narrow network (never world-open), a
list's length is the one given (or 2, the least a subnet list may hold, for an Output of a whole
list), and an ARN as in the service's region. Every other argument decides the plan's shape
(variant, quantization, families, replicas, signal, compute mode, region, ...) and must be plain.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from deepseek_eks.settings import Settings

from .build import arg

UNKNOWN = "<Output, not yet known>"
"""How a message shows a value that is an Output at construction."""

Path = tuple[str, ...]
"""A wiring argument: (group, field), e.g. ("network", "vpc_id")."""


def _partition(region: str) -> str:
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def _hex_id(prefix: str, base: int) -> Callable[[int, str], str]:
    # 17 hex digits: the longest EC2 id form, which the settings' patterns accept.
    return lambda i, _region: f"{prefix}-{base + i:017x}"


def _kms_arn(i: int, region: str) -> str:
    return f"arn:{_partition(region)}:kms:{region}:000000000000:key/00000000-0000-0000-0000-{i:012x}"


def _cert_arn(i: int, region: str) -> str:
    # The service's region: the real ARN's region is checked against it once known.
    return (
        f"arn:{_partition(region)}:acm:{region}:000000000000:certificate/{i:08x}-0000-0000-0000-000000000000"
    )


def _cidr(base: int) -> Callable[[int, str], str]:
    # TEST-NET-1 (RFC 5737) /32s: one address each, so an unknown CIDR never counts as world-open.
    return lambda i, _region: f"192.0.{base}.{i % 256}/32"


@dataclass(frozen=True)
class Wire:
    """How one wiring argument may be deferred."""

    placeholder: Callable[[int, str], str]
    """A value valid for the field (index in a list, the service's region)."""
    many: bool = False
    """A list of Inputs."""
    whole: bool = False
    """Also an Output of the whole list (its length is then unknown to the plan: 2 placeholders)."""


WIRING: dict[Path, Wire] = {
    ("network", "vpc_id"): Wire(_hex_id("vpc", 0)),
    ("network", "private_subnet_ids"): Wire(_hex_id("subnet", 0x100), many=True, whole=True),
    ("network", "public_subnet_ids"): Wire(_hex_id("subnet", 0x200), many=True, whole=True),
    ("network", "load_balancer_subnet_ids"): Wire(_hex_id("subnet", 0x300), many=True, whole=True),
    ("endpoint", "allowed_cidrs"): Wire(_cidr(2), many=True),
    ("endpoint", "certificate_arn"): Wire(_cert_arn),
    ("endpoint", "hostname"): Wire(lambda i, _r: f"output-{i}.invalid"),
    ("endpoint", "hosted_zone_id"): Wire(lambda i, _r: f"Z0OUTPUT{i}"),
    ("cluster", "public_access_cidrs"): Wire(_cidr(3), many=True),
    ("cluster", "private_access_cidrs"): Wire(_cidr(4), many=True),
    ("cluster", "admin_role_arns"): Wire(
        lambda i, r: f"arn:{_partition(r)}:iam::000000000000:role/output-{i}", many=True
    ),
    ("cluster", "private_access_security_group_ids"): Wire(_hex_id("sg", 0x100), many=True),
    ("cluster", "secrets_kms_key_arn"): Wire(_kms_arn),
    ("weights", "kms_key_arn"): Wire(_kms_arn),
}
"""Every settings field that may be an Output; all others are plain."""

# existing_cluster.node_role_name and node_security_group_ids are not settings: they go to the
# resources as given, Outputs included (components/service.py _scope).


def deferred(value: object) -> bool:
    """Whether ``value`` cannot be read now: an Output, or an awaitable that will give one."""
    return isinstance(value, pulumi.Output) or inspect.isawaitable(value)


@dataclass
class Split:
    """Args with every deferred wiring value replaced by a placeholder, and the deferred values."""

    literal: dict[str, Any]
    deferred: dict[tuple[str, str, int | None], pulumi.Input[Any]]
    """(group, field, index or None for the whole value) -> the Input given."""
    problems: list[tuple[str, str]]
    """Deferred values where a plain one is required: (the argument as written, why)."""
    placeholders: set[str] = field(default_factory=set)
    """The placeholders put in ``literal`` (a message shows them as ``UNKNOWN``)."""

    def shown(self, value: Any) -> Any:
        """``value`` as a message shows it: each placeholder as ``UNKNOWN`` (not yet known)."""
        if isinstance(value, list | tuple):
            return [self.shown(v) for v in value]
        if not isinstance(value, str):
            return value
        for placeholder in self.placeholders:  # also inside a message that lists the values
            value = value.replace(placeholder, UNKNOWN)
        return value


def split(args: Mapping[str, Any], region: str) -> Split:
    """Take the Outputs out of ``args`` (see the module docstring)."""
    literal = dict(args)
    found: dict[tuple[str, str, int | None], pulumi.Input[Any]] = {}
    problems: list[tuple[str, str]] = []
    placeholders: set[str] = set()
    for key, value in args.items():
        if isinstance(value, dict):
            group = {}
            for name, item in value.items():
                kept = _split_field(key, name, item, region, found, problems, placeholders)
                if kept is not _DROPPED:
                    group[name] = kept
            literal[key] = group
        elif deferred(value) and key not in ("hf_token", "api_key", "grafana_admin_password"):
            problems.append((arg(key), PLAIN_REQUIRED))
            del literal[key]  # refused above: the validator should not read it too
    return Split(literal, found, problems, placeholders)


_DROPPED = object()  # a refused Output, left out of the args the validator reads

PLAIN_REQUIRED = (  # why an argument that is not a wiring field cannot be an Output
    "must be a plain value, not an Output: it decides the sizing plan or the resources' shape "
    "(only ids, ARNs, CIDRs and names that wire the service to other infrastructure may be Outputs)"
)


def _split_field(
    group: str,
    name: str,
    value: Any,
    region: str,
    found: dict[tuple[str, str, int | None], pulumi.Input[Any]],
    problems: list[tuple[str, str]],
    placeholders: set[str],
) -> Any:
    wire = WIRING.get((group, name))
    if group == "existing_cluster" and name in ("node_role_name", "node_security_group_ids"):
        return value  # passed to the resources as given
    if wire is None:
        if deferred(value) or (isinstance(value, list | tuple) and any(deferred(v) for v in value)):
            problems.append((arg(group, name), PLAIN_REQUIRED))
            return _DROPPED
        return value
    if deferred(value):
        if wire.many and not wire.whole:
            problems.append(
                (
                    arg(group, name),
                    "give a list (its items may be Outputs), not an Output of a list: each item is "
                    "a resource of its own, so their number must be known",
                )
            )
            return _DROPPED
        found[(group, name, None)] = value
        made = [wire.placeholder(i, region) for i in range(2 if wire.many else 1)]
        placeholders.update(made)
        return made if wire.many else made[0]
    if wire.many and isinstance(value, list | tuple):
        items = list(value)
        for i, item in enumerate(items):
            if deferred(item):
                found[(group, name, i)] = item
                items[i] = wire.placeholder(i, region)
                placeholders.add(items[i])
        return items
    return value


def resolved_args(
    literal: Mapping[str, Any], values: Mapping[tuple[str, str, int | None], Any]
) -> dict[str, Any]:
    """``literal`` with each placeholder replaced by the value its Output resolved to."""
    # Copied along the paths only: other values may be Outputs, which cannot be deep-copied.
    args = {key: dict(value) if isinstance(value, dict) else value for key, value in literal.items()}
    for (group, name, index), value in values.items():
        if index is None:
            args[group][name] = value
        else:
            args[group][name] = [*args[group][name]]
            args[group][name][index] = value
    return args


def wired(
    settings: Settings,
    split_args: Split,
    check: Callable[[dict[str, Any]], None],
) -> Settings:
    """``settings`` (validated with placeholders) with each placeholder replaced by its Output, which
    resolves only after ``check`` accepted the real arguments, so every resource that receives one
    waits for the check, and a bad value fails the deployment with the validator's message.

    The copy is made with ``model_copy(update=...)``, which does not validate: its wiring fields
    hold ``pulumi.Input`` values where the model types say ``str``. Only ``build_service``, which
    passes them to resources untouched, reads it; the plan is made from ``settings``."""
    if not split_args.deferred:
        return settings
    keys = list(split_args.deferred)

    def checked(values: list[Any]) -> list[Any]:
        check(resolved_args(split_args.literal, dict(zip(keys, values, strict=True))))
        return values

    resolved = pulumi.Output.all(*split_args.deferred.values()).apply(checked)
    updates: dict[str, dict[str, Any]] = {}
    for n, (group, name, index) in enumerate(keys):
        value = resolved[n]  # an Output's item, after the check
        fields = updates.setdefault(group, {})
        if index is None:
            fields[name] = value
        else:
            current = fields.setdefault(name, list(getattr(getattr(settings, group), name)))
            current[index] = value
    return settings.model_copy(
        update={
            group: getattr(settings, group).model_copy(update=fields) for group, fields in updates.items()
        }
    )
