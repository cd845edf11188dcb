"""Stacks that validate offline but would fail during `up`, be silently not honoured, or cost a
fortune unseen: each is refused with its rule and fix, or warned, and no credential is echoed.

Every rule is checked against the other system's own rule, snapshotted in
``reference/upstream/settings-rules.json`` and ``name-rules.json`` (with their sources), never
against this project's constants.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from deepseek_eks.settings import SettingsError, parse_settings
from deepseek_eks.sizing import plan

ROOT = Path(__file__).resolve().parents[2]
RULES = json.loads((ROOT / "reference/upstream/settings-rules.json").read_text())
NAMES = json.loads((ROOT / "reference/upstream/name-rules.json").read_text())
P = "deepseek-eks:"
KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"


def refusal(config: dict[str, str], stack: str = "dev") -> dict[str, str]:
    """Each refused key and its message (the whole error text must name it too)."""
    with pytest.raises(SettingsError) as info:
        parse_settings(config, stack=stack)
    return {p.key: p.shown() for p in info.value.problems}


# --- Prometheus retention inside Go's duration range ------------------------------------------


@pytest.mark.parametrize("unit", ["h", "d", "w", "y"])
def test_retention_is_refused_exactly_past_the_longest_duration_prometheus_parses(unit: str) -> None:
    rule = RULES["prometheus_retention_duration"]
    longest = rule["max_nanoseconds"] // rule["unit_nanoseconds"][unit]
    key = f"{P}observability.prometheusRetention"
    if longest >= 99999:  # the setting's five digits cannot reach the limit in this unit
        assert parse_settings({key: f"99999{unit}"}).observability.prometheus_retention == f"99999{unit}"
        return
    assert parse_settings({key: f"{longest}{unit}"}).observability.prometheus_retention == f"{longest}{unit}"
    message = refusal({key: f"{longest + 1}{unit}"})[key]
    assert f"at most {longest}{unit}" in message and "15d" in message


def test_the_review_retentions_are_refused() -> None:
    key = f"{P}observability.prometheusRetention"
    for value in ("300y", "99999y"):
        assert key in refusal({key: value})


# --- the stack name labels every Kubernetes object ---------------------------------------------


def label_value_ok(value: str) -> bool:
    rule = NAMES["kubernetes_label_value"]
    return len(value) <= rule["max"] and re.fullmatch(rule["regex"], value) is not None


@pytest.mark.parametrize("stack", ["a" * 63, "a" * 64, "prod_", "prod-", "_prod", "team_a-prod"])
def test_stack_names_that_are_not_label_values_are_refused(stack: str) -> None:
    if label_value_ok(stack) and not stack.startswith("_"):
        assert parse_settings({}, stack=stack).stack == stack
        return
    message = refusal({}, stack=stack)["stack name"]
    assert "label" in message or "EKS" in message
    assert "pulumi stack rename" in message


# --- schedule floors ------------------------------------------------------------------------------


def schedule(start: str, replicas: int = 1) -> dict[str, str]:
    floor = {"start": start, "end": "0 18 * * *", "replicas": replicas}
    return {f"{P}autoscaling.schedule": json.dumps([floor])}


def test_a_floor_above_max_replicas_is_refused_not_silently_capped() -> None:
    assert RULES["hpa_max_replicas_bound"]["behaviour"].startswith("every recommendation is bounded")
    config = {**schedule("0 8 * * *", 4), f"{P}autoscaling.maxReplicas": "3"}
    message = refusal(config)[f"{P}autoscaling.schedule[0].replicas"]
    assert "autoscaling.maxReplicas (3)" in message
    config[f"{P}autoscaling.maxReplicas"] = "4"
    assert parse_settings(config).autoscaling.schedule[0].replicas == 4  # type: ignore[index]


@pytest.mark.parametrize(
    ("start", "fires"),
    [
        ("0 8 31 2 *", False),
        ("0 8 30 2 *", False),
        ("0 8 31 4,6,9,11 *", False),
        ("0 8 29 2 *", True),  # leap years, within robfig's five-year search
        ("0 8 31 * *", True),
        ("0 8 31 2 MON", True),  # both day fields restricted: ORed, so every Monday of February
        ("0 8 30 2 */2", True),  # a stepped weekday is not '*': ORed too
    ],
)
def test_a_cron_that_never_fires_is_refused(start: str, fires: bool) -> None:
    rule = RULES["robfig_cron_day_matching"]
    assert rule["and_when_either_is_star"] is True and rule["year_limit"] >= 4
    key = f"{P}autoscaling.schedule[0].start"
    if fires:
        parse_settings(schedule(start))
    else:
        assert "never fires" in refusal(schedule(start))[key]


# --- partitions and regions ---------------------------------------------------------------------


def test_only_the_standard_partitions_regions_are_accepted() -> None:
    for partition, regions in NAMES["eks_regions"]["by_partition"].items():
        for region in regions:
            if partition == "aws":
                assert parse_settings({"aws:region": region}).region == region
            else:
                message = refusal({"aws:region": region})["aws:region"]
                assert f"{partition} partition" in message and "us-east-1" in message


def kms(region: str, partition: str = "aws") -> str:
    return f"arn:{partition}:kms:{region}:123456789012:key/{KEY_ID}"


@pytest.mark.parametrize(
    ("key", "extra"),
    [("cluster.secretsKmsKeyArn", {}), ("weights.kmsKeyArn", {f"{P}weights.source": "s3"})],
)
def test_kms_keys_must_be_in_the_stacks_region_and_partition(key: str, extra: dict[str, str]) -> None:
    rules = RULES["arn_region_rules"]
    assert "kms" in rules["regional_services"]
    assert "same AWS Region as the cluster" in rules["eks_secrets_kms_key_same_region"]["text"]
    base = {"aws:region": "eu-west-1", **extra}
    parse_settings({**base, f"{P}{key}": kms("eu-west-1")})
    message = refusal({**base, f"{P}{key}": kms("us-east-1")})[f"{P}{key}"]
    assert "us-east-1" in message and "eu-west-1" in message
    message = refusal({**base, f"{P}{key}": kms("eu-west-1", "aws-cn")})[f"{P}{key}"]
    assert "aws-cn partition" in message


def test_roles_and_certificates_from_another_partition_are_refused() -> None:
    gov_role = "arn:aws-us-gov:iam::123456789012:role/Admin"
    problems = refusal(
        {
            f"{P}cluster.adminRoleArns": json.dumps(["arn:aws:iam::123456789012:role/Ok", gov_role]),
            f"{P}endpoint.certificateArn": f"arn:aws-cn:acm:us-east-1:123456789012:certificate/{KEY_ID}",
            "aws:assumeRoles": json.dumps([{"roleArn": gov_role}]),
        }
    )
    assert set(problems) == {
        f"{P}cluster.adminRoleArns[1]",
        f"{P}endpoint.certificateArn",
        "aws:assumeRoles[0].roleArn",
    }
    assert all("partition" in message for message in problems.values())


# --- your own bucket's name ---------------------------------------------------------------------


def bad_bucket_names() -> list[str]:
    rule = NAMES["s3_bucket_name"]
    low, high = rule["length"]
    return [
        "a" * (low - 1),
        "a" * (high + 1),
        "Models",
        "my_models",
        "-models",
        "models-",
        "my..models",
        "192.168.5.4",
        *(f"{prefix}models" for prefix in rule["reserved_prefixes"]),
        *(f"models{suffix}" for suffix in rule["reserved_suffixes"]),
    ]


@pytest.mark.parametrize("bucket", bad_bucket_names())
def test_an_s3_repository_in_a_bucket_s3_would_refuse_is_refused(bucket: str) -> None:
    config = {f"{P}model.repository": f"s3://{bucket}/r1", f"{P}weights.source": "s3"}
    assert f"{P}model.repository" in refusal(config)


def test_a_valid_bucket_name_is_accepted() -> None:
    config = {f"{P}model.repository": "s3://acme.models-1/r1", f"{P}weights.source": "s3"}
    assert parse_settings(config).model.repository == "s3://acme.models-1/r1"


# --- provider settings ---------------------------------------------------------------------------


def test_allowed_and_forbidden_accounts_together_are_refused() -> None:
    assert RULES["aws_provider_account_lists_conflict"]["conflicting"] == [
        "allowed_account_ids",
        "forbidden_account_ids",
    ]
    config = {"aws:allowedAccountIds": '["123456789012"]', "aws:forbiddenAccountIds": '["123456789012"]'}
    assert "aws:allowedAccountIds" in refusal(config)["aws:forbiddenAccountIds"]
    parse_settings({"aws:allowedAccountIds": '["123456789012"]'})


# --- no credential is echoed ---------------------------------------------------------------------


def credentials() -> list[str]:
    formats = RULES["credential_formats"]
    body = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    return [
        formats["huggingface_user_access_token_prefix"] + body[:34],
        "AKIA" + "IOSFODNN7EXAMPLE"[: formats["aws_access_key_id_length"] - 4],
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"[: formats["aws_secret_access_key_length"] - 30],
        *(prefix + body for prefix in formats["github_token_prefixes"]),
    ]


@pytest.mark.parametrize("secret", credentials())
def test_a_credential_pasted_into_a_setting_is_refused_without_being_printed(secret: str) -> None:
    for key in ("model.repository", "gpu.instanceFamilies", "endpoint.hostname"):
        with pytest.raises(SettingsError) as info:
            parse_settings({f"{P}{key}": secret})
        text = str(info.value)
        assert f"{P}{key}" in text
        assert secret not in text and secret[4:20] not in text


def test_ordinary_bad_values_are_still_shown() -> None:
    repo = "deepseek-ai/DeepSeek-R1-Distill-Llama-70B-AWQ-INT4-GEMM-extra/x"
    assert repo[:40] in str(refusal({f"{P}model.repository": repo}))


# --- legal but extreme --------------------------------------------------------------------------


def test_a_ceiling_that_costs_thousands_an_hour_is_warned_with_its_price() -> None:
    settings = parse_settings({f"{P}autoscaling.maxReplicas": "5000"})
    sized = plan(settings.plan_request())
    hourly = sized.to_dict()["hourly_usd_at_max"]
    assert hourly > 1000
    (warning,) = [w for w in sized.warnings if "autoscaling.maxReplicas = 5000" in w]
    assert f"${hourly:,.0f}/h" in warning
    default = plan(parse_settings({}).plan_request())
    assert not [w for w in default.warnings if "autoscaling.maxReplicas =" in w]


def test_a_gpu_target_that_one_busy_replica_exceeds_many_times_is_warned() -> None:
    low = parse_settings({f"{P}autoscaling.targetGpuUtilization": "1", f"{P}autoscaling.maxReplicas": "50"})
    (warning,) = [w for w in low.warnings if "targetGpuUtilization" in w]
    assert f"{math.ceil(100 / 1)} replicas" in warning and "(50)" in warning
    assert not [w for w in parse_settings({}).warnings if "targetGpuUtilization" in w]
