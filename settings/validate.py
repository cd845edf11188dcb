"""Validating stack settings: ``parse_settings`` (the raw config map Pulumi hands a program,
``"<namespace>:<key>" -> value``, values as strings or already typed) and ``settings_from_values``
(the component's Python values) return ``Settings`` (settings/model.py) or raise ``SettingsError``
listing every problem at once: unknown keys, each group's fields, and the rules across fields and
groups, among them who can reach what (settings/exposure.py).

Pure: no Pulumi import.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from deepseek_eks.sizing import KvCacheDtype, Quantization, instance_catalog, model_catalog
from deepseek_eks.sizing.checkpoints import catalogued_variant, known_checkpoint, prequantized_format
from deepseek_eks.sizing.planner import STAGED_SOURCES, served_quantization

from .arns import arn_problem
from .exposure import api_access, endpoint_access
from .model import (
    _GROUPS,
    _REGION,
    _UNSET,
    AWS,
    AWS_KEYS,
    DEFAULT_CONCURRENCY_SHARE,
    DEFAULT_KUBERNETES_VERSION,
    DEFAULT_REGION,
    DOCKER_HUB_WARNING,
    PROJECT,
    S3_SCHEME,
    SEASONAL_RETENTION_S,
    SECRET_KEYS,
    SUPPORTED_KUBERNETES_VERSIONS,
    AutoscalingSettings,
    AwsSettings,
    ClusterSettings,
    ComputeMode,
    EndpointScheme,
    EndpointSettings,
    LoadBalancerKind,
    ModelSettings,
    NetworkSettings,
    ObservabilitySettings,
    Problem,
    RoutingKind,
    RoutingSettings,
    ScalingSignal,
    Settings,
    SettingsError,
    WeightsSettings,
    WeightsSource,
    _capacity_reservation_problems,
    _Group,
    known_keys,
    prometheus_retention_s,
)
from .names import (
    bucket_name_problem,
    hf_repo_id_problem,
    region_problem,
    stack_name_problems,
    vpc_range_problem,
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

    cross, warnings = _cross_field_problems(groups, invalid)
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
    problems += _arn_problems(groups, aws_settings, region, invalid)
    problems += _capacity_reservation_problems(groups.get("gpu"), compute_mode)
    problems += _weights_problems(groups["weights"], compute_mode, invalid)
    api_key_set = "apiKey" in flat or "apiKey" in (secrets or {})
    endpoint_fields = {f.alias for f in EndpointSettings.model_fields.values() if f.alias}
    exposure = endpoint_access(
        groups["endpoint"],
        region,
        api_key_set,
        f"{PROJECT}:",
        {k for k in endpoint_fields if _usable(invalid, f"endpoint.{k}")},
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


def _arn_problems(
    groups: Mapping[str, Any], aws_settings: AwsSettings, region: str, invalid: set[str]
) -> list[Problem]:
    """Keys, certificates and roles from another region or partition (settings/arns.py)."""
    cluster: ClusterSettings = groups["cluster"]
    given: list[tuple[str, str | None, bool]] = [
        ("cluster.secretsKmsKeyArn", cluster.secrets_kms_key_arn, True),
        ("weights.kmsKeyArn", groups["weights"].kms_key_arn, True),
        # Its region is endpoint_access's rule (settings/exposure.py); its partition is judged here.
        ("endpoint.certificateArn", groups["endpoint"].certificate_arn, False),
    ]
    given += [(f"cluster.adminRoleArns[{i}]", arn, False) for i, arn in enumerate(cluster.admin_role_arns)]
    out = [
        Problem(f"{PROJECT}:{key}", arn, why)
        for key, arn, in_region in given
        if arn
        and _usable(invalid, key.split("[", 1)[0])
        and (why := arn_problem(arn, region, regional=in_region))
    ]
    out += [
        Problem(f"aws:assumeRoles[{i}].roleArn", role.role_arn, why)
        for i, role in enumerate(aws_settings.assume_roles)
        if (why := arn_problem(role.role_arn, region, regional=False))
    ]
    return out


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


def _usable(invalid: set[str], *keys: str) -> bool:
    """A cross-field rule runs when every setting it reads is valid."""
    return not invalid.intersection(keys)


def _cross_field_problems(groups: Mapping[str, Any], invalid: set[str]) -> tuple[list[Problem], list[str]]:
    """Rules that involve two settings, each run when the settings it reads are valid (even if
    another field of the same group is not), and the warnings for valid but risky values."""
    out: list[Problem] = []
    warnings: list[str] = []
    p = f"{PROJECT}:"
    auto: AutoscalingSettings = groups["autoscaling"]
    above_max = (
        ("minReplicas", auto.min_replicas, f"greater than autoscaling.maxReplicas ({auto.max_replicas})"),
        (
            "warmSpareNodes",
            auto.warm_spare_nodes,
            f"more than autoscaling.maxReplicas ({auto.max_replicas}): the GPU pool's limit is sized "
            "for maxReplicas, so the extra spares could never get a node",
        ),
    )
    for key, value, message in above_max:
        if _usable(invalid, f"autoscaling.{key}", "autoscaling.maxReplicas") and value > auto.max_replicas:
            out.append(Problem(f"{p}autoscaling.{key}", value, message))
    if _usable(invalid, "autoscaling.schedule", "autoscaling.maxReplicas"):
        # A cron trigger's desiredReplicas is a metric of the HPA KEDA owns, and the HPA bounds
        # every recommendation by maxReplicas without a word (kubernetes
        # pkg/controller/podautoscaler/horizontal.go normalizeDesiredReplicas): a floor above it
        # is never what was asked for.
        out += [
            Problem(
                f"{p}autoscaling.schedule[{i}].replicas",
                floor.replicas,
                f"above autoscaling.maxReplicas ({auto.max_replicas}): the HPA would cap the floor "
                "there; lower the floor or raise autoscaling.maxReplicas",
            )
            for i, floor in enumerate(auto.schedule or [])
            if floor.replicas > auto.max_replicas
        ]
    out += _scale_from_zero_problems(auto, groups["routing"], invalid)
    if _usable(invalid, "autoscaling.signal"):
        warnings += _signal_warnings(auto)
    endpoint: EndpointSettings = groups["endpoint"]
    usable = _usable(invalid, "endpoint.scheme", "endpoint.allowedCidrs")
    if usable and endpoint.scheme is EndpointScheme.INTERNET_FACING and not endpoint.allowed_cidrs:
        out.append(
            Problem(
                f"{p}endpoint.allowedCidrs",
                [],
                "required when endpoint.scheme is internet-facing: list the client CIDRs",
            )
        )
    warnings += _load_balancer_subnet_warnings(groups["network"], endpoint)
    model: ModelSettings = groups["model"]
    if _usable(invalid, "model.variant", "model.maxModelLen"):
        spec = model_catalog()[model.variant.value]
        if model.max_model_len > spec.max_position_embeddings:
            out.append(
                Problem(
                    f"{p}model.maxModelLen",
                    model.max_model_len,
                    f"above {model.variant.value}'s max_position_embeddings ({spec.max_position_embeddings})",
                )
            )
    awq = _usable(invalid, "model.quantization") and model.quantization is Quantization.AWQ_INT4
    no_known_checkpoint = known_checkpoint(model.variant.value, Quantization.AWQ_INT4.value) is None
    if awq and _usable(invalid, "model.repository") and not model.repository and no_known_checkpoint:
        out.append(
            Problem(
                f"{p}model.repository",
                None,
                "required with model.quantization awq-int4: name a pre-quantized AWQ "
                "checkpoint (Hugging Face repo id)",
            )
        )
    out += _kv_cache_dtype_problems(model, groups["gpu"].instance_families, invalid)
    out += _repository_variant_problems(model, invalid)
    out += _prequantized_repository_problems(model, invalid)
    repository = model.repository
    hf_repository = repository and not repository.startswith(S3_SCHEME)
    hf_repository = hf_repository and _usable(invalid, "model.repository")
    if hf_repository and (why := hf_repo_id_problem(str(repository))):
        out.append(Problem(f"{p}model.repository", repository, f"as a Hugging Face repo id {why}"))
    obs: ObservabilitySettings = groups["observability"]
    if _usable(invalid, "observability.prometheusRetention") and int(obs.prometheus_retention[:-1]) == 0:
        out.append(
            Problem(
                f"{p}observability.prometheusRetention",
                obs.prometheus_retention,
                "must be more than zero (Prometheus would keep nothing); e.g. 15d",
            )
        )
    out += _seasonal_problems(auto, obs, invalid)
    out += _s3_repository_problems(model, groups["weights"], invalid)
    out += _weights_kms_problems(groups["weights"], invalid)
    out += _security_option_problems(groups["cluster"], groups["weights"], endpoint)
    out += _network_problems(groups["network"], endpoint, invalid)
    if _usable(invalid, "image.registry") and not groups["image"].registry:
        warnings.append(DOCKER_HUB_WARNING)
    return out, warnings


def _seasonal_problems(
    auto: AutoscalingSettings, obs: ObservabilitySettings, invalid: set[str]
) -> list[Problem]:
    """autoscaling.seasonal reads last week's demand from Prometheus: a shorter retention would
    leave that trigger reading nothing, without a word, so the floor would silently be yesterday's
    alone."""
    if not _usable(invalid, "autoscaling.seasonal", "observability.prometheusRetention") or not auto.seasonal:
        return []
    if prometheus_retention_s(obs.prometheus_retention) >= SEASONAL_RETENTION_S:
        return []
    days = SEASONAL_RETENTION_S // 86_400
    return [
        Problem(
            f"{PROJECT}:autoscaling.seasonal",
            True,
            f"needs observability.prometheusRetention of at least {days}d to read last week's demand "
            f"(it is {obs.prometheus_retention}): raise observability.prometheusRetention to {days}d or "
            "more, or set autoscaling.seasonal false",
        )
    ]


def _kv_cache_dtype_problems(
    model: ModelSettings, families: Iterable[str], invalid: set[str]
) -> list[Problem]:
    """model.kvCacheDtype fp8 needs FP8 tensor cores on every GPU the pool may launch (compute
    capability 8.9 or newer: L4, L40S, H100, H200, B200; sizing/catalog.py ``GpuArch.fp8``)."""
    if not _usable(invalid, "model.kvCacheDtype", "gpu.instanceFamilies"):
        return []
    if model.kv_cache_dtype is not KvCacheDtype.FP8:
        return []
    catalog = instance_catalog()
    lacking: dict[str, str] = {}
    for family in families:
        for instance in catalog.in_families([family]):
            if not instance.arch.fp8:
                lacking[family] = instance.gpu_model
    if not lacking:
        return []
    named = ", ".join(f"{f} ({gpu})" for f, gpu in lacking.items())
    keep = [f for f in families if f not in lacking]
    fix = f"remove {', '.join(lacking)} from gpu.instanceFamilies" + (
        "" if keep else " (allow g6, g6e, p5, p5e, p5en or p6-b200)"
    )
    return [
        Problem(
            f"{PROJECT}:model.kvCacheDtype",
            model.kv_cache_dtype.value,
            f"fp8 needs GPUs with FP8 tensor cores; gpu.instanceFamilies allows {named}, which have none: "
            f"{fix}, or set model.kvCacheDtype auto",
        )
    ]


def _scale_from_zero_problems(
    auto: AutoscalingSettings, routing: RoutingSettings, invalid: set[str]
) -> list[Problem]:
    """Only the router's queue has a value while no replica runs: every other signal is a metric of
    the vLLM pods (or their GPUs), so at zero replicas nothing would ever ask for one. Hence
    ``minReplicas 0`` needs ``router-queue``, and ``router-queue`` needs the router."""
    p = f"{PROJECT}:"
    out: list[Problem] = []
    with_router = routing.kind is RoutingKind.LLM_D
    signal_usable = _usable(invalid, "autoscaling.signal")
    router_queue = auto.signal is ScalingSignal.ROUTER_QUEUE
    if (
        _usable(invalid, "autoscaling.minReplicas")
        and signal_usable
        and auto.min_replicas == 0
        and not router_queue
    ):
        fix = "" if with_router else " and routing.kind llm-d"
        out.append(
            Problem(
                f"{p}autoscaling.minReplicas",
                0,
                f"0 needs autoscaling.signal router-queue{fix}: with {auto.signal.value} the metric "
                "lives in the vLLM pods, so once none runs nothing would start one and the endpoint "
                f"would answer 503. Set autoscaling.signal router-queue{fix}, or autoscaling."
                "minReplicas 1",
            )
        )
    if signal_usable and _usable(invalid, "routing.kind") and router_queue and not with_router:
        out.append(
            Problem(
                f"{p}autoscaling.signal",
                auto.signal.value,
                f"router-queue needs routing.kind llm-d (routing.kind is {routing.kind.value}): the "
                "queue it reads is the router's. Set routing.kind llm-d, or choose another "
                "autoscaling.signal (queue-depth, concurrency, kv-cache, combined, gpu-utilization)",
            )
        )
    return out


def _repository_variant_problems(model: ModelSettings, invalid: set[str]) -> list[Problem]:
    """A repository the catalogs know to hold another variant's weights: the plan would size the
    pods, GPUs and cache for ``model.variant`` while vLLM loaded the other model (the 70B's 131 GiB
    on the 7B's one L4), failing only when the first pod ran out of memory."""
    if not (_usable(invalid, "model.repository", "model.variant") and model.repository):
        return []
    holds = catalogued_variant(model.repository)
    if holds is None or holds == model.variant.value:
        return []
    return [
        Problem(
            f"{PROJECT}:model.repository",
            model.repository,
            f"holds the weights of {holds} (sizing/data/models.json, checkpoints.json), not of "
            f"model.variant {model.variant.value}: set model.variant {holds}, or name a repository "
            f"of {model.variant.value}'s weights",
        )
    ]


def _prequantized_repository_problems(model: ModelSettings, invalid: set[str]) -> list[Problem]:
    """A catalogued pre-quantized checkpoint holds one format: vLLM refuses to start when
    ``--quantization`` names another (vllm/config/model.py ``ModelConfig._verify_quantization``)."""
    if not (_usable(invalid, "model.repository") and _usable(invalid, "model.quantization")):
        return []
    held = prequantized_format(model.variant.value, model.repository)
    spec = model_catalog()[model.variant.value]
    wanted = served_quantization(model.quantization, spec, model.repository).value
    if held is None or held == wanted:
        return []
    return [
        Problem(
            f"{PROJECT}:model.quantization",
            model.quantization.value,
            f"model.repository {model.repository} holds {held} weights (sizing/data/checkpoints.json) and "
            f"vLLM refuses to serve them as {wanted}: set model.quantization {held}, or name a "
            f"repository with {wanted} weights",
        )
    ]


def s3_location(repository: str) -> tuple[str, str] | None:
    """``s3://bucket[/prefix]`` -> ``(bucket, prefix)``, the one place an s3:// repository is taken
    apart; None for a Hugging Face repo id. The prefix is "" for the whole bucket, else it ends in
    exactly one "/": Mountpoint's ``--prefix`` must (awslabs/mountpoint-s3 doc/CONFIGURATION.md),
    and it keeps IAM's ``prefix*`` from matching a sibling (``r1`` would match ``r1-old/``)."""
    if not repository.startswith(S3_SCHEME):
        return None
    bucket, _, prefix = repository.removeprefix(S3_SCHEME).partition("/")
    prefix = prefix.rstrip("/")
    return bucket, f"{prefix}/" if prefix else ""


def _s3_repository_problems(
    model: ModelSettings, weights: WeightsSettings, invalid: set[str]
) -> list[Problem]:
    """An s3:// repository is the user's own bucket, read in place: vLLM streams it (``s3``) or
    Mountpoint mounts it (``s3-mountpoint``). The other sources cannot read it, and the source is
    never switched for the user."""
    if not _usable(invalid, "model.repository") or not model.repository:
        return []
    location = s3_location(model.repository)
    if location is None:
        return []
    key, repository = f"{PROJECT}:model.repository", model.repository
    if why := bucket_name_problem(location[0]):
        return [Problem(key, repository, f"the bucket name {why} (S3 bucket naming rules)")]
    # No IAM wildcard from a setting.
    # The bucket and prefix become IAM resources (arn:...:bucket/prefix*) and an s3:prefix
    # condition, where * and ? are wildcards: s3://bucket/* would grant every object of the
    # bucket, not a folder named "*".
    if any(c in location[1] for c in "*?"):
        return [
            Problem(
                key,
                repository,
                "the prefix contains '*' or '?', which IAM reads as a wildcard in the reader's "
                "policy (s3://bucket/* would grant the whole bucket): give the folder itself, such "
                "as s3://bucket/deepseek/r1, or s3://bucket for the whole bucket",
            )
        ]
    segments = location[1].removesuffix("/").split("/")
    if location[1] and any(segment in ("", ".", "..") for segment in segments):
        return [
            Problem(
                key,
                repository,
                "the prefix has an empty, '.' or '..' path segment (such as '//'): S3 keeps them "
                "literally, so it names other objects than the folder meant; write it as "
                "s3://bucket/folder/subfolder",
            )
        ]
    if not _usable(invalid, "weights.source"):
        return []
    if weights.source is WeightsSource.HUGGINGFACE:
        return [
            Problem(
                key,
                repository,
                "an s3:// repository needs weights.source s3 (vLLM streams it) or s3-mountpoint "
                "(mounted read-only), but weights.source is huggingface (also when unset), "
                "which downloads a Hugging Face repo id: set weights.source, or give a Hugging Face repo id",
            )
        ]
    if weights.source is WeightsSource.EBS_SNAPSHOT:
        # automation/bake.py fills the volume with `hf download` from an instance that has no
        # instance profile: it can neither read a bucket nor be given one without a new role.
        return [
            Problem(
                key,
                repository,
                "weights.source ebs-snapshot cannot use an s3:// repository: `automation "
                "bake-weights` downloads from Hugging Face on an instance with no AWS role; set "
                "weights.source s3 or s3-mountpoint to read your bucket, or give the Hugging Face repo id",
            )
        ]
    return []


def _weights_problems(weights: WeightsSettings, compute_mode: str, invalid: set[str]) -> list[Problem]:
    """``weights.snapshotId`` and ``weights.fastSnapshotRestore`` belong to ``ebs-snapshot``, which
    needs the id; on Auto Mode it also needs fast snapshot restore (see the message)."""
    p = f"{PROJECT}:weights."
    if not _usable(invalid, "weights.source"):
        return []
    out = []
    snapshot = weights.source is WeightsSource.EBS_SNAPSHOT
    if snapshot and not weights.snapshot_id and _usable(invalid, "weights.snapshotId"):
        out.append(
            Problem(
                f"{p}snapshotId",
                _UNSET,
                "required with weights.source ebs-snapshot: run `python -m automation bake-weights "
                "--stack <stack>`, which makes the snapshot and saves its id here",
            )
        )
    if not snapshot:
        for key, default in (("snapshot_id", None), ("fast_snapshot_restore", False)):
            if getattr(weights, key) != default:
                alias = WeightsSettings.model_fields[key].alias
                out.append(
                    Problem(
                        f"{p}{alias}",
                        getattr(weights, key),
                        "only applies to weights.source ebs-snapshot; remove it or change the source",
                    )
                )
    auto_mode = compute_mode == ComputeMode.AUTO_MODE.value
    if (
        snapshot
        and auto_mode
        and not weights.fast_snapshot_restore
        and _usable(invalid, "weights.fastSnapshotRestore")
    ):
        # Volumes from a snapshot load each block from S3 on first read at an unpublished rate. The
        # EBS CSI driver can ask for a provisioned initialization rate (aws-ebs-csi-driver
        # docs/parameters.md volumeInitializationRate); Auto Mode's provisioner documents none.
        out.append(
            Problem(
                f"{p}fastSnapshotRestore",
                False,
                "weights.source ebs-snapshot on computeMode auto-mode needs true: Auto Mode's EBS "
                "provisioner has no provisioned initialization rate, so without fast snapshot "
                "restore a replica would read its weights at an unknown rate; or use computeMode "
                "karpenter, or weights.source s3",
            )
        )
    return out


# Below this GPU target one busy replica asks for more than four (100 / target): see _signal_warnings.
LOW_GPU_TARGET = 25


def _signal_warnings(auto: AutoscalingSettings) -> list[str]:
    """A GPU target so low that light traffic fills the fleet, and settings the chosen signal does
    not read. (Scale to zero is refused unless the router's queue can wake the service:
    ``_scale_from_zero_problems``.) Warnings, not errors: ``--set autoscaling.signal=...``
    switches the signal for one run and should keep the stack's other tuning. Only a changed value
    is reported: the engine passes Pulumi.yaml's default for every key, so an unset key cannot be
    told from one set to its default."""
    low_target = []
    gpu_signal = auto.signal in (ScalingSignal.GPU_UTILIZATION, ScalingSignal.COMBINED)
    if gpu_signal and auto.target_gpu_utilization < LOW_GPU_TARGET:
        # The HPA asks for ceil(replicas x utilization / target) (Kubernetes HPA algorithm
        # details): one GPU busy with a single stream, near 100 %, already asks for 100 / target.
        asked = math.ceil(100 / auto.target_gpu_utilization)
        low_target.append(
            f"{PROJECT}:autoscaling.targetGpuUtilization is {auto.target_gpu_utilization}: one GPU "
            f"busy with a single request asks the HPA for {asked} replicas, so light traffic holds "
            f"the fleet near autoscaling.maxReplicas ({auto.max_replicas}); targets of "
            f"{LOW_GPU_TARGET} or more scale with the load"
        )
    unused = []
    if auto.signal is ScalingSignal.QUEUE_DEPTH and auto.target_gpu_utilization != 50:
        unused.append(("targetGpuUtilization", "gpu-utilization or combined"))
    if auto.signal is ScalingSignal.GPU_UTILIZATION and auto.queue_depth_per_replica != 5:
        unused.append(("queueDepthPerReplica", "queue-depth or combined"))
    kv_signals = (ScalingSignal.KV_CACHE, ScalingSignal.CONCURRENCY)
    if auto.signal not in kv_signals and auto.target_kv_cache_usage != 0.85:
        unused.append(("targetKvCacheUsage", "kv-cache or concurrency"))
    share_signals = (ScalingSignal.CONCURRENCY, ScalingSignal.ROUTER_QUEUE)
    # The seasonal triggers hold their demand at the same per-replica share.
    share_read = auto.signal in share_signals or auto.seasonal
    if not share_read and auto.target_concurrency_share != DEFAULT_CONCURRENCY_SHARE:
        unused.append(("targetConcurrencyShare", "concurrency, router-queue or autoscaling.seasonal"))
    return low_target + [
        f"{PROJECT}:autoscaling.{key} has no effect with autoscaling.signal {auto.signal.value} "
        f"(only with {signals})"
        for key, signals in unused
    ]


# Customer-managed KMS key for the weights.
def _weights_kms_problems(weights: WeightsSettings, invalid: set[str]) -> list[Problem]:
    """The key is used only where the weights are in S3; elsewhere it would be silently ignored."""
    if not weights.kms_key_arn or not _usable(invalid, "weights.source"):
        return []
    if weights.source in STAGED_SOURCES:
        return []
    return [
        Problem(
            f"{PROJECT}:weights.kmsKeyArn",
            weights.kms_key_arn,
            f"only applies with weights.source s3 or s3-mountpoint (it is {weights.source.value}): "
            "remove it or change the source",
        )
    ]


# Created KMS key, ALB access logs.
def _security_option_problems(
    cluster: ClusterSettings, weights: WeightsSettings, endpoint: EndpointSettings
) -> list[Problem]:
    """A created key and a given one for the same use contradict each other; access-log settings
    that would change nothing are refused rather than ignored."""
    out = []
    if cluster.create_kms_key:
        for key, arn in (
            ("cluster.secretsKmsKeyArn", cluster.secrets_kms_key_arn),
            ("weights.kmsKeyArn", weights.kms_key_arn),
        ):
            if arn:
                out.append(
                    Problem(
                        f"{PROJECT}:{key}",
                        arn,
                        f"contradicts {PROJECT}:cluster.createKmsKey true (that key would be used "
                        "instead): remove one of the two",
                    )
                )
    if endpoint.access_logs_days is not None and not endpoint.access_logs:
        out.append(
            Problem(
                f"{PROJECT}:endpoint.accessLogsDays",
                endpoint.access_logs_days,
                f"has no effect without {PROJECT}:endpoint.accessLogs true: set that or remove this",
            )
        )
    if endpoint.access_logs and endpoint.load_balancer is LoadBalancerKind.NLB:
        out.append(
            Problem(
                f"{PROJECT}:endpoint.accessLogs",
                True,
                f"applies to the ALB only ({PROJECT}:endpoint.loadBalancer is nlb, whose access logs "
                "cover TLS listeners alone): use the alb or remove endpoint.accessLogs",
            )
        )
    return out


# Load-balancer-only subnets.
def _load_balancer_subnet_problems(network: NetworkSettings) -> list[Problem]:
    """Load-balancer subnets must be their own: one that is also a pod subnet would admit its pods."""
    key, lb = f"{PROJECT}:network.loadBalancerSubnetIds", network.load_balancer_subnet_ids
    if not lb:
        return []
    shared = sorted(set(lb) & (set(network.private_subnet_ids) | set(network.public_subnet_ids)))
    if shared:
        return [
            Problem(
                key,
                shared,
                "also listed in network.privateSubnetIds or network.publicSubnetIds: give subnets "
                "no node or pod uses, so the NetworkPolicy can admit the load balancer alone",
            )
        ]
    if len(lb) < 2:
        return [Problem(key, lb, "list at least 2 subnets in different AZs (an ALB needs two)")]
    return []


def _load_balancer_subnet_warnings(network: NetworkSettings, endpoint: EndpointSettings) -> list[str]:
    """Your VPC with an internal endpoint and no load-balancer subnets: the policy can only admit
    the private subnets, where every pod of the cluster has its address too (VPC CNI)."""
    if not network.vpc_id or network.load_balancer_subnet_ids:
        return []
    if endpoint.scheme is EndpointScheme.INTERNET_FACING:
        return []
    return [
        f"{PROJECT}:network.loadBalancerSubnetIds is not set: the internal load balancer takes "
        "addresses in your private subnets, which are also pod subnets, so port 8000 admits every "
        "pod there; give 2+ small private subnets that only load balancers use (they are named on "
        "the Ingress or Service)"
    ]


def _network_problems(
    network: NetworkSettings, endpoint: EndpointSettings, invalid: set[str]
) -> list[Problem]:
    p = f"{PROJECT}:network."
    out = []
    private, public = network.private_subnet_ids, network.public_subnet_ids
    both = sorted(set(private) & set(public))
    if both and _usable(invalid, "network.privateSubnetIds", "network.publicSubnetIds"):
        out.append(Problem(f"{p}publicSubnetIds", both, "also listed in network.privateSubnetIds"))
    if network.vpc_id:
        if len(private) < 2 and _usable(invalid, "network.privateSubnetIds"):
            out.append(
                Problem(
                    f"{p}privateSubnetIds",
                    private,
                    "with network.vpcId, list at least 2 distinct private subnets in different AZs",
                )
            )
        internet_facing = endpoint.scheme is EndpointScheme.INTERNET_FACING
        if (
            internet_facing
            and len(public) < 2
            and _usable(invalid, "network.publicSubnetIds", "endpoint.scheme")
        ):
            out.append(
                Problem(
                    f"{p}publicSubnetIds",
                    public,
                    "an internet-facing endpoint in your VPC needs at least 2 distinct public subnets",
                )
            )
        # Pulumi passes Pulumi.yaml's defaults as config too, so only a changed value is a mistake.
        for key in ("vpc_cidr", "availability_zones", "nat_gateway_per_zone"):
            if getattr(network, key) != NetworkSettings.model_fields[key].default:
                alias = NetworkSettings.model_fields[key].alias
                out.append(
                    Problem(
                        f"{p}{alias}",
                        getattr(network, key),
                        "only applies to the VPC the program creates; remove it when network.vpcId is set",
                    )
                )
        out += _load_balancer_subnet_problems(network)
    else:
        for key in ("private_subnet_ids", "public_subnet_ids", "load_balancer_subnet_ids"):
            if getattr(network, key):
                alias = NetworkSettings.model_fields[key].alias
                out.append(Problem(f"{p}{alias}", getattr(network, key), "needs network.vpcId"))
        prefix = int(network.vpc_cidr.split("/")[1])
        if _usable(invalid, "network.vpcCidr") and (why := vpc_range_problem(network.vpc_cidr)):
            out.append(Problem(f"{p}vpcCidr", network.vpc_cidr, why))
        if not 16 <= prefix <= 20 and _usable(invalid, "network.vpcCidr"):
            out.append(
                Problem(
                    f"{p}vpcCidr",
                    network.vpc_cidr,
                    "must be a /16 to /20: pods take VPC addresses, so GPU nodes need large subnets",
                )
            )
    return out
