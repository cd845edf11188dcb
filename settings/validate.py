"""Validating stack settings: ``parse_settings`` (the raw config map Pulumi hands a program,
``"<namespace>:<key>" -> value``, values as strings or already typed) and ``settings_from_values``
(the component's Python values) return ``Settings`` (settings/model.py) or raise ``SettingsError``
listing every problem at once: unknown keys (with the nearest known one), each group's fields, and
the rules across fields and groups (settings/consistency.py), among them who can reach what
(settings/exposure.py).

Pure: no Pulumi import.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from .consistency import all_valid, arn_problems, cross_field_problems, weights_problems
from .exposure import api_access, endpoint_access
from .model import (
    _GROUPS,
    _REGION,
    _UNSET,
    AWS,
    AWS_KEYS,
    DEFAULT_KUBERNETES_VERSION,
    DEFAULT_REGION,
    PROJECT,
    SECRET_KEYS,
    SUPPORTED_KUBERNETES_VERSIONS,
    AwsSettings,
    ComputeMode,
    EndpointSettings,
    Problem,
    Settings,
    SettingsError,
    _capacity_reservation_problems,
    _Group,
    known_keys,
)
from .names import (
    region_problem,
    stack_name_problems,
)


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


# Real Pulumi packages whose names are close to ``aws``: their config is theirs, not a typo.
OTHER_PROVIDERS = frozenset({"awsx", "aws-native", "eks"})


def _looks_like(namespace: str, target: str) -> bool:
    """A misspelling of ``target``: other case, ``_`` for ``-``, or a small edit distance."""
    if namespace in OTHER_PROVIDERS:
        return False
    a, b = _normal(namespace), _normal(target)
    return _edit_distance(a, b) <= (2 if len(b) > 4 else 1)


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _split_key(full_key: str) -> tuple[str, str] | None:
    """``ns:name`` or Pulumi's old ``ns:config:name`` (config.ParseKey) -> ``(ns, name)``."""
    parts = full_key.split(":")
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3 and parts[1] == "config":
        return parts[0], parts[2]
    return None


def _decode_object(value: Any) -> Any:
    """A group given with ``--path`` reaches the program as JSON text (engine) or a dict."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _is_default(group: str, field_alias: str, value: Any) -> bool:
    """Whether ``value`` is that field's default. The engine writes Pulumi.yaml's defaults into
    a group's object for every key the stack set flat (merge by path), so a flat key wins over
    an object value that is the default; any other object value is the user's."""
    cls = _GROUPS[group]
    try:
        parsed = cls.model_validate({field_alias: value})
    except ValidationError:
        return False
    return bool(parsed == cls())


@dataclass
class _Collected:
    """The project namespace's settings by dotted key, and which of them are secret."""

    values: dict[str, Any]
    secret: set[str]
    problems: list[Problem]


def _collect(config: Mapping[str, Any], secret_keys: set[str]) -> tuple[_Collected, dict[str, Any]]:
    """Split the engine's config map: this project's settings (both forms merged), the ``aws:*``
    ones, and problems for keys in namespaces that look like either."""
    problems: list[Problem] = []
    flat: dict[str, Any] = {}
    flat_secret: set[str] = set()
    objects: dict[str, tuple[dict[str, Any], bool]] = {}
    aws: dict[str, Any] = {}
    for full_key, value in sorted(config.items()):
        split = _split_key(full_key)
        secret = full_key in secret_keys
        if split is None:
            problems.append(Problem(full_key, value, "not a config key: use <namespace>:<name>", hidden=True))
            continue
        namespace, name = split
        if namespace == AWS:
            aws[name] = (value, secret)
            continue
        if namespace != PROJECT:
            for target in (PROJECT, AWS):
                if _looks_like(namespace, target):
                    problems.append(
                        Problem(
                            full_key,
                            None,
                            f"unknown namespace {namespace!r}; did you mean {target}:{name}?",
                            hidden=True,
                        )
                    )
            continue  # other namespaces (kubernetes:..., pulumi:...) belong to their providers
        if name in _GROUPS:
            decoded = _decode_object(value)
            if not isinstance(decoded, dict):
                problems.append(
                    Problem(
                        f"{PROJECT}:{name}",
                        value,
                        f"must be a mapping of {name}.* settings; set each as its own key "
                        f"instead (pulumi config set {name}.<key> <value>)",
                        hidden=True,
                    )
                )
                continue
            if secret:  # a --secret value inside the group: the engine marks the whole key
                problems.append(
                    Problem(
                        f"{PROJECT}:{name}",
                        None,
                        f"holds a secret value, but no {name}.* setting is a secret: set it without --secret",
                        hidden=True,
                    )
                )
                continue
            objects[name] = (decoded, secret)
        else:
            flat[name] = value
            if secret:
                flat_secret.add(name)
    for group, (obj, secret) in objects.items():
        for field_alias, value in obj.items():
            key = f"{group}.{field_alias}"
            if key in flat:
                if field_alias in _aliases(group) and _is_default(group, field_alias, value):
                    continue
                problems.append(
                    Problem(
                        f"{PROJECT}:{key}",
                        None,
                        f"given twice, as {PROJECT}:{key} and inside {PROJECT}:{group} "
                        "(--path form): keep one",
                        hidden=True,
                    )
                )
                continue
            flat[key] = value
            if secret:
                flat_secret.add(key)
    return _Collected(flat, flat_secret, problems), aws


def _aliases(group: str) -> set[str]:
    return {f.alias for f in _GROUPS[group].model_fields.values() if f.alias}


def _key_problems(collected: _Collected) -> list[Problem]:
    """Unknown keys (values never shown: a misspelt secret must not be echoed) and secrets."""
    p = f"{PROJECT}:"
    known = known_keys()
    lowered = {_normal(k.replace(".", "")): k for k in known}
    out = []
    for key in collected.values:
        if key in known:
            continue
        near = difflib.get_close_matches(key, known, n=2)
        exact = lowered.get(_normal(key.replace(".", "")))
        if exact and exact not in near:
            near = [exact, *near][:2]
        hint = f"did you mean {' or '.join(near)}?" if near else f"known keys: {', '.join(known)}"
        out.append(Problem(f"{p}{key}", None, f"unknown setting; {hint}", hidden=True))
    for key in collected.values:
        if key in SECRET_KEYS and key not in collected.secret:
            out.append(
                Problem(
                    f"{p}{key}",
                    None,
                    f"must be a secret: run `pulumi config rm {key}` then "
                    f"`pulumi config set --secret {key} <value>`",
                    hidden=True,
                )
            )
        elif key in collected.secret and key in known and key not in SECRET_KEYS:
            out.append(
                Problem(
                    f"{p}{key}",
                    None,
                    f"is not a secret setting (only {', '.join(SECRET_KEYS)} are): set it without --secret",
                    hidden=True,
                )
            )
    return out


def _aws_settings(aws: Mapping[str, tuple[Any, bool]]) -> tuple[str, AwsSettings, list[Problem]]:
    """``aws:region`` and the provider settings this program passes on; any other ``aws:*`` key
    is refused, because the explicit provider would silently not use it."""
    problems: list[Problem] = []
    region_value, region_secret = aws.get("region", (DEFAULT_REGION, False))
    region = region_value if isinstance(region_value, str) else str(region_value)
    if not _REGION.fullmatch(region):
        problems.append(
            Problem("aws:region", region, "not an AWS region name (e.g. us-east-1)", hidden=region_secret)
        )
        region = DEFAULT_REGION
    elif why := region_problem(region):
        problems.append(Problem("aws:region", region, why, hidden=region_secret))
        region = DEFAULT_REGION
    raw: dict[str, Any] = {}
    for name, (value, secret) in aws.items():
        if name == "region":
            continue
        if name not in AWS_KEYS or secret:
            supported = ", ".join(f"aws:{k}" for k in AWS_KEYS)
            why = "is a secret here; none of the supported aws:* keys is" if secret else "is not used"
            problems.append(
                Problem(
                    f"aws:{name}",
                    None,
                    f"{why} by this program's explicit AWS provider and preflight "
                    f"(supported: {supported}); remove it, or use AWS_* environment variables",
                    hidden=True,
                )
            )
            continue
        raw[name] = _decode_object(value) if name == "assumeRoles" else value
    settings = AwsSettings()
    try:
        settings = AwsSettings.model_validate(raw)
    except ValidationError as e:
        problems += _problems(e, "aws:", raw)
    if settings.allowed_account_ids and settings.forbidden_account_ids:
        # The provider declares each ConflictsWith the other (hashicorp/terraform-provider-aws
        # internal/provider/provider.go, bridged by pulumi-aws): `up` would fail at the provider.
        problems.append(
            Problem(
                "aws:forbiddenAccountIds",
                settings.forbidden_account_ids,
                "is set with aws:allowedAccountIds, and the AWS provider accepts only one of the "
                "two: remove aws:forbiddenAccountIds (the allow list already refuses every other account)",
            )
        )
    return region, settings, problems


def _group_settings(group: str, raw: dict[str, Any]) -> tuple[_Group, list[Problem], set[str]]:
    """Validate one group field by field: the invalid fields are reported and take their
    defaults, so the cross-field rules can still run on the valid ones."""
    cls = _GROUPS[group]
    try:
        return cls.model_validate(raw), [], set()
    except ValidationError as e:
        problems = _problems(e, f"{PROJECT}:{group}.", raw)
        invalid = {str(err["loc"][0]) for err in e.errors() if err["loc"]}
        partial = {k: v for k, v in raw.items() if k not in invalid}
        return cls.model_validate(partial), problems, {f"{group}.{k}" for k in invalid}


def parse_settings(
    config: Mapping[str, Any],
    secret_keys: Iterable[str] = (),
    stack: str = "dev",
    secrets: Mapping[str, object] | None = None,
) -> Settings:
    """Validate a raw Pulumi config map into ``Settings``; raise ``SettingsError`` with all problems.

    ``config`` is what the engine hands a program (``automation/stackfile.py`` builds the same
    map offline): full keys (``deepseek-eks:model.variant``, ``aws:region``), values as text or
    typed; a group set with ``--path`` is one key (``deepseek-eks:model``) holding a JSON object.
    ``secrets`` maps ``hfToken``/``apiKey``/``grafanaAdminPassword`` to the secret Outputs the
    caller read.
    """
    secret_keys = set(secret_keys)
    collected, aws = _collect(config, secret_keys)
    return _validated(collected, aws, stack, secrets)


def settings_from_values(
    values: Mapping[str, Any],
    aws: Mapping[str, Any],
    stack: str,
    secrets: Mapping[str, object],
) -> Settings:
    """The typed path to ``Settings`` (the ``DeepSeekService`` component's): ``values`` by setting,
    as ``known_keys`` names them (``computeMode``, ``model.maxModelLen``), holding Python values;
    ``aws`` the ``aws:*`` values by name (``region``, ``assumeRoles``) as Python objects;
    ``secrets`` the secret Outputs by their key (``apiKey``). No config map and no text decoding:
    the same validator as ``parse_settings`` from its typed stage on, the same problems (keyed
    as in a stack file; a front end respells them, ``SettingsError(spelling=...)``)."""
    collected = _Collected(dict(values), set(), [])
    return _validated(collected, {k: (v, False) for k, v in aws.items()}, stack, secrets)


def _validated(
    collected: _Collected,
    aws: Mapping[str, tuple[Any, bool]],
    stack: str,
    secrets: Mapping[str, object] | None,
) -> Settings:
    """Every rule, over the values of each setting (``_collect`` or ``settings_from_values``)."""
    problems = collected.problems + _key_problems(collected)
    flat = collected.values
    region, aws_settings, aws_problems = _aws_settings(aws)
    problems += aws_problems

    groups: dict[str, Any] = {}
    invalid: set[str] = set()
    for group in _GROUPS:
        raw = {
            k.split(".", 1)[1]: v
            for k, v in flat.items()
            if k.split(".", 1)[0] == group and "." in k and k.split(".", 1)[1] in _aliases(group)
        }
        groups[group], group_problems, group_invalid = _group_settings(group, raw)
        problems += group_problems
        invalid |= group_invalid

    values: dict[str, Any] = {}
    compute_mode = flat.get("computeMode", ComputeMode.AUTO_MODE.value)
    try:
        values["compute_mode"] = ComputeMode(compute_mode)
    except (ValueError, TypeError):
        allowed = ", ".join(m.value for m in ComputeMode)
        problems.append(Problem(f"{PROJECT}:computeMode", compute_mode, f"allowed: {allowed}"))

    k8s = flat.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION)
    if k8s not in SUPPORTED_KUBERNETES_VERSIONS:
        problems.append(
            Problem(
                f"{PROJECT}:kubernetesVersion",
                k8s,
                f"allowed: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} "
                "(EKS minor versions this project is tested at)",
            )
        )
        k8s = DEFAULT_KUBERNETES_VERSION

    cross, warnings = cross_field_problems(groups, invalid)
    problems += cross
    karpenter = compute_mode == ComputeMode.KARPENTER.value
    problems += [
        Problem(
            "stack name",
            stack,
            f"{why}: use a stack name of at most 63 letters, digits, '-' and '_', beginning and "
            "ending with a letter or digit (pulumi stack rename)",
        )
        for why in stack_name_problems(stack, karpenter)
    ]
    problems += arn_problems(groups, aws_settings, region, invalid)
    problems += _capacity_reservation_problems(groups.get("gpu"), compute_mode)
    problems += weights_problems(groups["weights"], compute_mode, invalid)
    api_key_set = "apiKey" in flat or "apiKey" in (secrets or {})
    endpoint_fields = {f.alias for f in EndpointSettings.model_fields.values() if f.alias}
    exposure = endpoint_access(
        groups["endpoint"],
        region,
        api_key_set,
        f"{PROJECT}:",
        {k for k in endpoint_fields if all_valid(invalid, f"endpoint.{k}")},
    )
    access = api_access(groups["cluster"], groups["network"], f"{PROJECT}:")
    problems += exposure.problems + access.problems
    warnings += exposure.warnings
    # A value read from a secret (decrypted by the engine) is never shown, whatever the problem.
    problems = [replace(p, hidden=True) if _setting_of(p.key) in collected.secret else p for p in problems]
    if problems:
        raise SettingsError(problems, stack)
    secrets = secrets or {}
    return Settings(
        **values,
        **groups,
        kubernetes_version=k8s,
        region=region,
        aws=aws_settings,
        stack=stack,
        warnings=tuple(warnings),
        deploy_blockers=tuple(access.deploy_blockers),
        first_run_blockers=tuple(access.first_run_blockers),
        hf_token=secrets.get("hfToken"),
        api_key=secrets.get("apiKey"),
        grafana_admin_password=secrets.get("grafanaAdminPassword"),
    )


def _setting_of(key: str) -> str:
    """``deepseek-eks:gpu.instanceFamilies[0]`` -> ``gpu.instanceFamilies``."""
    return key.removeprefix(f"{PROJECT}:").split("[", 1)[0]


def _problems(error: ValidationError, prefix: str, raw: Mapping[str, Any]) -> list[Problem]:
    out = []
    for err in error.errors():
        loc = [str(p) for p in err["loc"]]
        field = loc[0] if loc else ""
        key = f"{prefix}{field}"
        for part in loc[1:]:
            key += f"[{part}]" if part.isdigit() else f".{part}"
        value = raw.get(field, _UNSET)
        if len(loc) > 1 and isinstance(err.get("input"), str | int):
            value = err["input"]
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch":
            message = _PATTERN_MESSAGES.get(field, "not in the expected format")
        elif err["type"] == "extra_forbidden":
            message = "unknown setting"
        out.append(Problem(key, value, message, hidden=err["type"] == "extra_forbidden"))
    return out


# Pattern errors said in words (pydantic would print the regular expression).
_PATTERN_MESSAGES = {
    "repository": "must be a Hugging Face repo id (owner/name) or an s3://bucket/prefix",
    "certificateArn": "must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)",
    "vpcId": "must be a VPC id like vpc-0123456789abcdef0",
    "privateSubnetIds": "must be a subnet id like subnet-0123456789abcdef0",
    "publicSubnetIds": "must be a subnet id like subnet-0123456789abcdef0",
    "privateAccessSecurityGroupIds": "must be a security group id like sg-0123456789abcdef0",
    "hostname": "must be a lowercase DNS name like llm.example.com",
    "hostedZoneId": "must be a Route 53 hosted zone id like Z0123456789ABCDEFGHIJ",
    "capacityReservationIds": "must be a capacity reservation id: cr-[0-9a-f]{17} (cr-0123456789abcdef0)",
    "adminRoleArns": "must be an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
    "secretsKmsKeyArn": "must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias",
    "kmsKeyArn": "must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias",
    "prometheusRetention": "must be a number and one unit of h, d, w or y (e.g. 15d)",
    "profile": "must be an AWS profile name (letters, digits and _.+@=,-)",
    "allowedAccountIds": "must be a 12-digit AWS account id",
    "forbiddenAccountIds": "must be a 12-digit AWS account id",
    "snapshotId": "must be an EBS snapshot id like snap-0123456789abcdef0",
    "assumeRoles": "must be a list of {roleArn, sessionName, externalId, duration} (duration like 1h)",
}
