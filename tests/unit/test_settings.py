"""Settings: defaults, parsing of Pulumi's string config, and every rule with its exact message."""

from __future__ import annotations

import json

import pytest

from deepseek_eks.settings import (
    CapacityType,
    ComputeMode,
    EndpointScheme,
    RoutingKind,
    ScalingSignal,
    SettingsError,
    WeightsSource,
    parse_settings,
)
from deepseek_eks.sizing import Quantization
from tests.upstream import vllm_auth_prefixes

P = "deepseek-eks:"


def problems(config: dict, secret_keys=()) -> dict[str, str]:
    with pytest.raises(SettingsError) as info:
        parse_settings(config, secret_keys)
    return {p.key: p.message for p in info.value.problems}


def test_defaults_match_design_table() -> None:
    s = parse_settings({})
    assert s.compute_mode is ComputeMode.AUTO_MODE
    assert s.model.quantization is Quantization.AUTO
    assert s.model.max_model_len == 32768
    assert s.model.min_full_length_sequences == 1
    assert s.model.repository is None
    assert s.gpu.capacity_types == [CapacityType.SPOT, CapacityType.ON_DEMAND]
    assert s.autoscaling.signal is ScalingSignal.GPU_UTILIZATION
    assert (s.autoscaling.min_replicas, s.autoscaling.max_replicas) == (1, 3)
    assert s.autoscaling.target_gpu_utilization == 50
    assert s.autoscaling.queue_depth_per_replica == 5
    assert s.endpoint.scheme is EndpointScheme.INTERNAL
    assert s.endpoint.allowed_cidrs == []
    assert s.weights.source is WeightsSource.HUGGINGFACE
    assert s.region == "us-east-1"


def test_values_arrive_as_pulumi_strings() -> None:
    """Pulumi hands every value to the program as a string; lists as JSON."""
    s = parse_settings(
        {
            f"{P}computeMode": "karpenter",
            f"{P}model.variant": "r1-671b",
            f"{P}model.maxModelLen": "16384",
            f"{P}gpu.instanceFamilies": '["p5", "p5en"]',
            f"{P}gpu.capacityTypes": '["on-demand"]',
            f"{P}autoscaling.signal": "router-queue",
            f"{P}autoscaling.minReplicas": "0",
            f"{P}routing.kind": "llm-d",
            f"{P}endpoint.scheme": "internet-facing",
            f"{P}endpoint.allowedCidrs": '["203.0.113.0/24"]',
            f"{P}endpoint.certificateArn": "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-1234",
            "aws:region": "us-west-2",
        }
    )
    assert s.compute_mode is ComputeMode.KARPENTER
    assert s.model.variant.value == "r1-671b"
    assert s.model.max_model_len == 16384
    assert s.gpu.instance_families == ["p5", "p5en"]
    assert s.gpu.capacity_types == [CapacityType.ON_DEMAND]
    assert s.autoscaling.min_replicas == 0
    assert s.autoscaling.signal is ScalingSignal.ROUTER_QUEUE
    assert s.routing.kind is RoutingKind.LLM_D
    assert s.endpoint.allowed_cidrs == ["203.0.113.0/24"]
    assert s.region == "us-west-2"


def test_path_style_object_config_is_flattened() -> None:
    """`pulumi config set --path model.variant x` stores an object under `model`."""
    s = parse_settings({f"{P}model": '{"variant": "r1-distill-llama-8b", "maxModelLen": 8192}'})
    assert s.model.variant.value == "r1-distill-llama-8b"
    assert s.model.max_model_len == 8192


def test_comma_separated_lists_for_command_line_overrides() -> None:
    s = parse_settings({f"{P}gpu.instanceFamilies": "g6, g6e"})
    assert s.gpu.instance_families == ["g6", "g6e"]


def test_three_invalid_values_are_reported_together() -> None:
    found = problems(
        {
            f"{P}model.variant": "r1-distill-qwen-3b",
            f"{P}autoscaling.targetGpuUtilization": "150",
            f"{P}endpoint.scheme": "public",
        }
    )
    assert set(found) == {
        f"{P}model.variant",
        f"{P}autoscaling.targetGpuUtilization",
        f"{P}endpoint.scheme",
    }
    assert "r1-distill-qwen-1.5b" in found[f"{P}model.variant"]
    assert "less than or equal to 100" in found[f"{P}autoscaling.targetGpuUtilization"]
    assert "'internal' or 'internet-facing'" in found[f"{P}endpoint.scheme"]


def test_error_text_has_key_value_and_allowed() -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings({f"{P}computeMode": "fargate"}, stack="qa")
    text = str(info.value)
    assert text.splitlines()[0] == "1 invalid setting(s) of stack 'qa':"
    assert 'deepseek-eks:computeMode = "fargate": allowed: auto-mode, karpenter' in text


@pytest.mark.parametrize(
    ("family", "suggestion"),
    [("g4", "g4dn"), ("p4", "p4d or p4de"), ("p6", "p6-b200"), ("g6x", "g6 or g6e")],
)
def test_unreal_gpu_family_is_rejected_with_real_names(family: str, suggestion: str) -> None:
    found = problems({f"{P}gpu.instanceFamilies": f'["g6", "{family}"]'})
    message = found[f"{P}gpu.instanceFamilies[1]"]
    assert f"did you mean {suggestion}?" in message


def test_min_above_max_replicas() -> None:
    found = problems({f"{P}autoscaling.minReplicas": "4", f"{P}autoscaling.maxReplicas": "2"})
    assert found == {f"{P}autoscaling.minReplicas": "greater than autoscaling.maxReplicas (2)"}


def without_docker_hub(warnings: tuple[str, ...]) -> tuple[str, ...]:
    """The warnings other than the anonymous Docker Hub pull one (image.registry unset: every stack
    here; tested in tests/unit/test_image_pulls.py)."""
    return tuple(w for w in warnings if not w.startswith(f"{P}image.registry is unset"))


def test_routing_defaults_to_none() -> None:
    assert parse_settings({}).routing.kind is RoutingKind.NONE
    found = problems({f"{P}routing.kind": "llm-x"})
    assert set(found) == {f"{P}routing.kind"} and "'none' or 'llm-d'" in found[f"{P}routing.kind"]


@pytest.mark.parametrize("signal", ["gpu-utilization", "queue-depth", "combined", "kv-cache", "concurrency"])
def test_scale_to_zero_needs_the_router_queue(signal: str) -> None:
    """Every signal but router-queue is a metric of the vLLM pods: at zero nothing would wake them."""
    found = problems({f"{P}autoscaling.minReplicas": "0", f"{P}autoscaling.signal": signal})
    message = found[f"{P}autoscaling.minReplicas"]
    assert set(found) == {f"{P}autoscaling.minReplicas"}
    # Both settings and the fix named.
    assert message.startswith(
        f"0 needs autoscaling.signal router-queue and routing.kind llm-d: with {signal}"
    )
    assert "or autoscaling.minReplicas 1" in message
    # With the router already there, only the signal is the fix.
    found = problems(
        {f"{P}autoscaling.minReplicas": "0", f"{P}autoscaling.signal": signal, f"{P}routing.kind": "llm-d"}
    )
    message = found[f"{P}autoscaling.minReplicas"]
    assert message.startswith(f"0 needs autoscaling.signal router-queue: with {signal}")


def test_the_router_queue_needs_the_router() -> None:
    for extra in ({}, {f"{P}autoscaling.minReplicas": "0"}):
        found = problems({f"{P}autoscaling.signal": "router-queue", **extra})
        assert set(found) == {f"{P}autoscaling.signal"}, found  # minReplicas 0 is not the problem here
        message = found[f"{P}autoscaling.signal"]
        assert message.startswith("router-queue needs routing.kind llm-d (routing.kind is none)")
        assert "Set routing.kind llm-d, or choose another autoscaling.signal" in message
    s = parse_settings(
        {
            f"{P}autoscaling.signal": "router-queue",
            f"{P}autoscaling.minReplicas": "0",
            f"{P}routing.kind": "llm-d",
        }
    )
    assert (s.autoscaling.min_replicas, s.autoscaling.signal, s.routing.kind) == (0, "router-queue", "llm-d")
    # No warning that the service will not wake: with the router's queue, it does.
    assert without_docker_hub(s.warnings) == ()
    # The router-queue trigger's per-replica target is targetConcurrencyShare of the plan's batch.
    shared = {
        f"{P}autoscaling.signal": "router-queue",
        f"{P}routing.kind": "llm-d",
        f"{P}autoscaling.targetConcurrencyShare": "0.5",
    }
    assert without_docker_hub(parse_settings(shared).warnings) == ()


def test_internet_facing_needs_allowed_cidrs_and_internal_takes_them_as_extra_sources() -> None:
    found = problems({f"{P}endpoint.scheme": "internet-facing"})
    assert found[f"{P}endpoint.allowedCidrs"].startswith("required when endpoint.scheme is internet-facing")
    # An internal endpoint admits the VPC plus these (a peered network, a VPN): see test_exposure.py.
    assert parse_settings({f"{P}endpoint.allowedCidrs": '["10.0.0.0/8"]'}).endpoint.allowed_cidrs == [
        "10.0.0.0/8"
    ]


def test_bad_cidr() -> None:
    found = problems(
        {f"{P}endpoint.scheme": "internet-facing", f"{P}endpoint.allowedCidrs": '["10.0.0.1/8"]'}
    )
    assert "host bits set; the network is 10.0.0.0/8" in found[f"{P}endpoint.allowedCidrs[0]"]


def test_max_model_len_above_the_models_context() -> None:
    found = problems({f"{P}model.variant": "r1-671b", f"{P}model.maxModelLen": "200000"})
    assert found == {f"{P}model.maxModelLen": "above r1-671b's max_position_embeddings (163840)"}
    # The distills' limit is 131072 (models.json), so the same value is checked per variant.
    found = problems({f"{P}model.maxModelLen": "140000"})
    assert found == {f"{P}model.maxModelLen": "above r1-distill-qwen-7b's max_position_embeddings (131072)"}


def test_awq_needs_a_repository() -> None:
    found = problems({f"{P}model.quantization": "awq-int4"})
    assert "pre-quantized AWQ" in found[f"{P}model.repository"]


def test_a_catalogued_checkpoint_under_another_quantization_names_both_settings() -> None:
    fp8_checkpoint = "neuralmagic/DeepSeek-R1-Distill-Llama-70B-FP8-dynamic"  # the former name
    base = {f"{P}model.variant": "r1-distill-llama-70b", f"{P}model.repository": fp8_checkpoint}
    message = problems({**base, f"{P}model.quantization": "awq-int4"})[f"{P}model.quantization"]
    assert fp8_checkpoint in message and "set model.quantization fp8" in message
    assert "as bf16" in problems({**base, f"{P}model.quantization": "bf16"})[f"{P}model.quantization"]
    # auto is the served checkpoint's own format: the catalogued repository's.
    assert parse_settings(base).model.repository == fp8_checkpoint
    assert parse_settings({**base, f"{P}model.quantization": "fp8"}).model.repository == fp8_checkpoint


def _catalogued_repositories() -> list[tuple[str, str]]:
    """(variant, repository) for every repository the catalogs name: each variant's own, each
    pre-quantized checkpoint and each of its former names."""
    from deepseek_eks.sizing import model_catalog
    from deepseek_eks.sizing.checkpoints import prequantized_repositories

    return [
        (variant, spec.hf_repo) for variant, spec in model_catalog().items()
    ] + prequantized_repositories()


@pytest.mark.parametrize(("holds", "repository"), _catalogued_repositories())
def test_a_catalogued_repository_of_another_variant_is_refused_naming_both(
    holds: str, repository: str
) -> None:
    from deepseek_eks.sizing import model_catalog

    other = next(v for v in model_catalog() if v != holds)
    for given in (repository, repository.upper()):
        found = problems({f"{P}model.variant": other, f"{P}model.repository": given})
        message = found[f"{P}model.repository"]
        assert f"holds the weights of {holds}" in message and f"set model.variant {holds}" in message
        assert f"not of model.variant {other}" in message
    # Under its own variant the same repository is no such problem.
    try:
        own = parse_settings({f"{P}model.variant": holds, f"{P}model.repository": repository})
    except SettingsError as error:
        assert all("holds the weights of" not in p.message for p in error.problems)
    else:
        assert own.model.repository == repository


def test_an_uncatalogued_repository_is_taken_as_the_variants_own() -> None:
    assert parse_settings({f"{P}model.repository": "my-org/r1-qwen-7b-finetune"}).model.repository


@pytest.mark.parametrize("source", ["s3", "s3-mountpoint"])
def test_s3_repository_is_your_own_bucket_read_by_s3_or_s3_mountpoint(source: str) -> None:
    s = parse_settings({f"{P}model.repository": "s3://my-bucket/r1", f"{P}weights.source": source})
    assert s.model.repository == "s3://my-bucket/r1"
    assert s.weights.source is WeightsSource(source)


@pytest.mark.parametrize("source", [None, "huggingface"])
def test_s3_repository_with_huggingface_is_refused_and_the_source_is_not_switched(source: str | None) -> None:
    """huggingface downloads a repo id: the s3:// URI would reach vLLM as one. The user picks the
    source; the settings never switch it."""
    config = {f"{P}model.repository": "s3://my-bucket/r1"}
    if source:
        config[f"{P}weights.source"] = source
    found = problems(config)
    assert set(found) == {f"{P}model.repository"}
    message = found[f"{P}model.repository"]
    assert "needs weights.source s3" in message and "s3-mountpoint" in message
    assert "weights.source is huggingface" in message and "give a Hugging Face repo id" in message


def test_s3_repository_with_ebs_snapshot_is_refused_because_baking_downloads_from_hugging_face() -> None:
    from deepseek_eks.automation.bake import bake_script

    found = problems(
        {
            f"{P}computeMode": "karpenter",
            f"{P}model.repository": "s3://my-bucket/r1",
            f"{P}weights.source": "ebs-snapshot",
            f"{P}weights.snapshotId": "snap-0123456789abcdef0",
        }
    )
    assert set(found) == {f"{P}model.repository"}
    message = found[f"{P}model.repository"]
    assert "weights.source ebs-snapshot cannot use an s3:// repository" in message
    assert "set weights.source s3 or s3-mountpoint" in message
    # The reason: the bake instance only runs `hf download` (it has no AWS role). When baking learns
    # to copy from S3, this fails and the refusal above should become support.
    script = bake_script("s3://my-bucket/r1", "vol-0123456789abcdef0")
    assert "hf download" in script and "aws s3" not in script and "boto3" not in script


@pytest.mark.parametrize(
    ("repository", "location"),
    [
        ("s3://my-bucket", ("my-bucket", "")),
        ("s3://my-bucket/", ("my-bucket", "")),
        ("s3://my-bucket/deepseek/r1", ("my-bucket", "deepseek/r1/")),
        ("s3://my-bucket/deepseek/r1/", ("my-bucket", "deepseek/r1/")),
        ("s3://my-bucket/deepseek/r1//", ("my-bucket", "deepseek/r1/")),
        ("deepseek-ai/DeepSeek-R1", None),
    ],
)
def test_s3_location_is_one_bucket_and_a_prefix_ending_in_one_slash(
    repository: str, location: tuple | None
) -> None:
    from deepseek_eks.settings import s3_location

    assert s3_location(repository) == location
    if location:  # every spelling the settings accept parses
        parse_settings({f"{P}model.repository": repository, f"{P}weights.source": "s3"})


@pytest.mark.parametrize("repository", ["s3://my-bucket//r1", "s3://my-bucket/a//b", "s3://my-bucket/a/../b"])
def test_s3_prefix_with_an_empty_or_dot_segment_is_refused(repository: str) -> None:
    found = problems({f"{P}model.repository": repository, f"{P}weights.source": "s3"})
    assert set(found) == {f"{P}model.repository"}
    assert "empty, '.' or '..' path segment" in found[f"{P}model.repository"]
    assert "s3://bucket/folder/subfolder" in found[f"{P}model.repository"]


def test_repository_format() -> None:
    found = problems({f"{P}model.repository": "not a repo"})
    assert "Hugging Face repo id (owner/name) or an s3://bucket/prefix" in found[f"{P}model.repository"]


def test_unknown_key_gets_a_suggestion() -> None:
    found = problems({f"{P}model.maxModelLength": "8192"})
    assert found == {f"{P}model.maxModelLength": "unknown setting; did you mean model.maxModelLen?"}


def test_secrets_must_be_pulumi_secrets() -> None:
    found = problems({f"{P}hfToken": "hf_plaintext"})
    assert "pulumi config set --secret hfToken" in found[f"{P}hfToken"]
    s = parse_settings({f"{P}hfToken": "x"}, secret_keys=[f"{P}hfToken"], secrets={"hfToken": "OUT"})
    assert s.hf_token == "OUT"


def test_secret_values_never_appear_in_errors_or_dumps() -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings({f"{P}apiKey": "sk-very-secret"})
    assert "sk-very-secret" not in str(info.value)
    s = parse_settings({f"{P}apiKey": "x"}, [f"{P}apiKey"], secrets={"apiKey": "sk-very-secret"})
    assert "sk-very-secret" not in repr(s)
    assert "sk-very-secret" not in s.model_dump_json()


def test_other_namespaces_are_left_to_their_providers() -> None:
    s = parse_settings({"aws:profile": "dev", "kubernetes:context": "x"})
    assert s.compute_mode is ComputeMode.AUTO_MODE


def test_region_and_kubernetes_version() -> None:
    found = problems({"aws:region": "useast1", f"{P}kubernetesVersion": "1.20"})
    assert "not an AWS region name" in found["aws:region"]
    assert found[f"{P}kubernetesVersion"].startswith("allowed: 1.32, 1.33, 1.34 ")


def test_plan_request_carries_the_settings() -> None:
    s = parse_settings(
        {
            f"{P}model.variant": "r1-distill-llama-70b",
            f"{P}gpu.instanceFamilies": "g6e",
            f"{P}gpu.capacityTypes": "on-demand",
            f"{P}autoscaling.maxReplicas": "4",
        }
    )
    r = s.plan_request()
    assert (r.variant, r.families, r.capacity_types, r.max_replicas) == (
        "r1-distill-llama-70b",
        ("g6e",),
        ("on-demand",),
        4,
    )


def test_bring_your_own_vpc_rules() -> None:
    found = problems({f"{P}network.vpcId": "vpc-0123456789abcdef0", f"{P}network.vpcCidr": "10.1.0.0/16"})
    assert found[f"{P}network.privateSubnetIds"].startswith(
        "with network.vpcId, list at least 2 distinct private subnets"
    )
    assert "only applies to the VPC the program creates" in found[f"{P}network.vpcCidr"]
    found = problems({f"{P}network.privateSubnetIds": '["subnet-0123456789abcdef0"]'})
    assert found == {f"{P}network.privateSubnetIds": "needs network.vpcId"}
    s = parse_settings(
        {
            f"{P}network.vpcId": "vpc-0123456789abcdef0",
            f"{P}network.privateSubnetIds": '["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]',
        }
    )
    assert s.network.vpc_id == "vpc-0123456789abcdef0"


def test_internet_facing_in_your_own_vpc_needs_public_subnets() -> None:
    found = problems(
        {
            f"{P}network.vpcId": "vpc-0123456789abcdef0",
            f"{P}network.privateSubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
            f"{P}endpoint.scheme": "internet-facing",
            f"{P}endpoint.allowedCidrs": "198.51.100.0/24",
            f"{P}endpoint.certificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
        }
    )
    assert set(found) == {f"{P}network.publicSubnetIds"}


def test_vpc_cidr_size_and_admin_role_format() -> None:
    found = problems(
        {f"{P}network.vpcCidr": "10.0.0.0/24", f"{P}cluster.adminRoleArns": "arn:aws:iam::1:user/x"}
    )
    assert "must be a /16 to /20" in found[f"{P}network.vpcCidr"]
    assert f"{P}cluster.adminRoleArns[0]" in found


# ------------------------------------------------------- issue 10, item 7: accepted but wrong before


@pytest.mark.parametrize("value", ["10" + "0" * 30, str(2**31), "5001", 10**30])
def test_replicas_have_an_upper_bound(value) -> None:
    found = problems({f"{P}autoscaling.maxReplicas": value})
    assert "less than or equal to 5000" in found[f"{P}autoscaling.maxReplicas"]


@pytest.mark.parametrize("value", ["١٠", "1_000", "0x10", True, "2.5", "+"])
def test_numbers_are_ascii_whole_numbers(value) -> None:
    assert f"{P}autoscaling.maxReplicas" in problems({f"{P}autoscaling.maxReplicas": value})


def test_booleans_are_pulumis_true_and_false_only() -> None:
    assert parse_settings({f"{P}observability.grafana": "False"}).observability.grafana is False
    for value in ("yes", "on", "1", "t"):
        assert f"{P}observability.grafana" in problems({f"{P}observability.grafana": value})


def test_region_is_ascii() -> None:
    assert "aws:region" in problems({"aws:region": "us-east-١"})


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        ("2001:db8::/32", "IPv6 is not supported here"),
        ("203.0.113.7", "needs a prefix length"),
        ("10.0.0.0/255.0.0.0", "not an IPv4 CIDR block"),
        ("١.2.3.4/32", "not an IPv4 CIDR block"),
    ],
)
def test_alb_cidrs_are_ipv4_with_a_prefix(cidr: str, message: str) -> None:
    found = problems(
        {f"{P}endpoint.scheme": "internet-facing", f"{P}endpoint.allowedCidrs": json.dumps([cidr])}
    )
    assert message in found[f"{P}endpoint.allowedCidrs[0]"]


def test_the_same_subnet_twice_is_not_two_subnets() -> None:
    found = problems(
        {
            f"{P}network.vpcId": "vpc-0123456789abcdef0",
            f"{P}network.privateSubnetIds": '["subnet-0123456789abcdef0", "subnet-0123456789abcdef0"]',
        }
    )
    assert "listed twice" in found[f"{P}network.privateSubnetIds"]


def test_world_open_cidrs_are_refused() -> None:
    found = problems(
        {
            f"{P}endpoint.scheme": "internet-facing",
            f"{P}endpoint.allowedCidrs": '["0.0.0.0/0"]',
            f"{P}endpoint.certificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234",
            f"{P}cluster.publicAccessCidrs": '["0.0.0.0/0"]',
        }
    )
    assert "100% of IPv4" in found[f"{P}endpoint.allowedCidrs"]
    assert "100% of IPv4" in found[f"{P}cluster.publicAccessCidrs"]


def test_settings_the_signal_does_not_read_warn() -> None:
    s = parse_settings(
        {f"{P}autoscaling.signal": "queue-depth", f"{P}autoscaling.targetGpuUtilization": "70"}
    )
    assert without_docker_hub(s.warnings) == (
        f"{P}autoscaling.targetGpuUtilization has no effect with autoscaling.signal queue-depth "
        "(only with gpu-utilization or combined)",
    )
    combined = {f"{P}autoscaling.signal": "combined", f"{P}autoscaling.targetGpuUtilization": "70"}
    assert without_docker_hub(parse_settings(combined).warnings) == ()


def test_cross_field_rule_reported_with_another_invalid_field_in_the_group() -> None:
    found = problems(
        {
            f"{P}autoscaling.minReplicas": "4",
            f"{P}autoscaling.maxReplicas": "2",
            f"{P}autoscaling.targetGpuUtilization": "500",
        }
    )
    assert set(found) == {f"{P}autoscaling.minReplicas", f"{P}autoscaling.targetGpuUtilization"}


def test_long_values_are_cut_in_messages() -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings({f"{P}model.variant": "x" * 500})
    assert "x" * 56 + "..." in str(info.value) and "x" * 100 not in str(info.value)


def test_secret_value_of_a_known_key_is_never_shown() -> None:
    with pytest.raises(SettingsError) as info:
        parse_settings({f"{P}model.repository": "not a repo SECRETVALUE"}, {f"{P}model.repository"})
    assert "SECRETVALUE" not in str(info.value)


# ------------------------------------------------------------------------ item 8: aws:* provider config


def test_aws_provider_settings_are_read_and_others_refused() -> None:
    s = parse_settings(
        {
            "aws:profile": "deploy",
            "aws:assumeRoles": '[{"roleArn": "arn:aws:iam::123456789012:role/deploy", "duration": "1h"}]',
            "aws:allowedAccountIds": '["123456789012"]',
        }
    )
    assert s.aws.profile == "deploy" and s.aws.allowed_account_ids == ["123456789012"]
    assert s.aws.assume_roles[0].duration_seconds == 3600
    found = problems({"aws:skipCredentialsValidation": "true", "aws:secretKey": "AKIASECRET"})
    assert "not used by this program's explicit AWS provider" in found["aws:secretKey"]
    with pytest.raises(SettingsError) as info:
        parse_settings({"aws:secretKey": "AKIASECRET"})
    assert "AKIASECRET" not in str(info.value)


def test_other_providers_namespaces_are_not_typos() -> None:
    assert parse_settings({"awsx:foo": "x", "eks:bar": "y", "kubernetes:context": "z"}).region == "us-east-1"
    assert "awx:region" in problems({"awx:region": "us-west-2"})


def test_weights_sources_are_the_sizing_engines_one_enum_and_plain_strings_still_work() -> None:
    from deepseek_eks.sizing import PlanError, PlanRequest
    from deepseek_eks.sizing import WeightsSource as SizingWeightsSource
    from deepseek_eks.sizing.planner import WEIGHTS_SOURCES

    assert WeightsSource is SizingWeightsSource  # defined once, in sizing/planner.py
    assert list(WEIGHTS_SOURCES) == ["huggingface", "s3", "s3-mountpoint", "ebs-snapshot"]
    # A plain string (what YAML and the sizing CLI pass) is accepted and stored as its member.
    request = PlanRequest("r1-distill-llama-8b", ("g6e",), weights_source="s3")  # type: ignore[arg-type]
    assert request.weights_source is WeightsSource.S3 and request.weights_source == "s3"
    assert f"{request.weights_source}" == "s3"
    with pytest.raises(PlanError, match="weights source 'nfs': expected one of huggingface, s3,"):
        PlanRequest("r1-distill-llama-8b", ("g6e",), weights_source="nfs")  # type: ignore[arg-type]
    mounted = parse_settings({f"{P}weights.source": "s3-mountpoint"})
    assert mounted.weights.source is WeightsSource.S3_MOUNTPOINT


def test_ebs_snapshot_needs_a_snapshot_id_and_says_how_to_make_one() -> None:
    found = problems({f"{P}weights.source": "ebs-snapshot", f"{P}computeMode": "karpenter"})
    assert set(found) == {f"{P}weights.snapshotId"}
    assert "python -m automation bake-weights" in found[f"{P}weights.snapshotId"]


@pytest.mark.parametrize(
    "bad", ["snap-123", "vol-0123456789abcdef0", "snap-0123456789ABCDEF0", "snap-０１２３４５６７８"]
)
def test_snapshot_id_pattern_is_ascii_lowercase_hex(bad: str) -> None:
    config = {
        f"{P}weights.source": "ebs-snapshot",
        f"{P}computeMode": "karpenter",
        f"{P}weights.snapshotId": bad,
    }
    assert "snap-0123456789abcdef0" in problems(config)[f"{P}weights.snapshotId"]


def test_snapshot_settings_belong_to_ebs_snapshot() -> None:
    found = problems(
        {f"{P}weights.snapshotId": "snap-0123456789abcdef0", f"{P}weights.fastSnapshotRestore": "true"}
    )
    assert set(found) == {f"{P}weights.snapshotId", f"{P}weights.fastSnapshotRestore"}
    assert all("only applies to weights.source ebs-snapshot" in m for m in found.values())


def test_ebs_snapshot_on_auto_mode_needs_fast_snapshot_restore() -> None:
    snapshot = {f"{P}weights.source": "ebs-snapshot", f"{P}weights.snapshotId": "snap-0123456789abcdef0"}
    found = problems(snapshot)
    assert (
        "Auto Mode's EBS provisioner has no provisioned initialization rate"
        in found[f"{P}weights.fastSnapshotRestore"]
    )
    settings = parse_settings({**snapshot, f"{P}weights.fastSnapshotRestore": "true"})
    assert settings.plan_request().fast_snapshot_restore is True
    karpenter = parse_settings({**snapshot, f"{P}computeMode": "karpenter"})
    assert karpenter.weights.snapshot_id == "snap-0123456789abcdef0"


def test_warm_spares_beyond_max_replicas_are_refused() -> None:
    found = problems({f"{P}autoscaling.warmSpareNodes": "4", f"{P}autoscaling.maxReplicas": "3"})
    assert "more than autoscaling.maxReplicas (3)" in found[f"{P}autoscaling.warmSpareNodes"]
    assert parse_settings({f"{P}autoscaling.warmSpareNodes": "3"}).plan_request().warm_spare_nodes == 3
    assert "autoscaling.warmSpareNodes" in problems({f"{P}autoscaling.warmSpareNodes": "-1"}).__repr__()


def test_nlb_with_an_api_key_is_refused_because_the_key_guards_only_some_routes() -> None:
    found = problems({f"{P}endpoint.loadBalancer": "nlb", f"{P}apiKey": "k"}, secret_keys=[f"{P}apiKey"])
    message = found[f"{P}endpoint.loadBalancer"]
    facts = vllm_auth_prefixes()
    # The message names what the key guards, per vLLM's own source, and routes it leaves open.
    assert all(prefix in message for prefix in facts["guarded_prefixes"])
    assert all(route in facts["unguarded_routes_seen"] for route in ("/tokenize", "/metrics", "/invocations"))
    assert "/tokenize" in message and "use alb" in message
    # A key is the default (generated when apiKey is unset), so nlb needs endpoint.auth none.
    assert f"{P}endpoint.loadBalancer" in problems({f"{P}endpoint.loadBalancer": "nlb"})
    keyless = parse_settings({f"{P}endpoint.loadBalancer": "nlb", f"{P}endpoint.auth": "none"})
    assert keyless.endpoint.load_balancer.value == "nlb"
    assert parse_settings({f"{P}apiKey": "k"}, [f"{P}apiKey"]).endpoint.load_balancer.value == "alb"


def test_a_group_that_is_not_a_mapping_names_the_flat_keys_as_the_fix() -> None:
    """Flat keys are the canonical form (docs/configuration.md); the nested form stays accepted."""
    message = problems({f"{P}model": "5"})[f"{P}model"]
    assert "pulumi config set model.<key> <value>" in message and "--path" not in message


def test_kv_cache_dtype_defaults_to_auto_and_fp8_reaches_the_plan_and_vllm() -> None:
    from deepseek_eks.sizing import KvCacheDtype, plan

    assert parse_settings({}).model.kv_cache_dtype is KvCacheDtype.AUTO
    s = parse_settings({f"{P}model.kvCacheDtype": "fp8", f"{P}gpu.instanceFamilies": '["g6"]'})
    assert s.model.kv_cache_dtype is KvCacheDtype.FP8
    fp8 = plan(s.plan_request())
    auto = plan(parse_settings({f"{P}gpu.instanceFamilies": '["g6"]'}).plan_request())
    args = fp8.vllm_args
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8" and "--kv-cache-dtype" not in auto.vllm_args
    # One byte an element instead of two: the same memory holds twice the tokens (to a token).
    assert abs(fp8.kv_cache_tokens - 2 * auto.kv_cache_tokens) <= 2
    assert fp8.to_dict()["kv_cache_dtype"] == "fp8" and auto.to_dict()["kv_cache_dtype"] == "auto"


@pytest.mark.parametrize(("families", "lacking"), [(["g5"], "g5 (A10G)"), (["g6", "p4d"], "p4d (A100)")])
def test_fp8_kv_cache_is_refused_on_gpus_without_fp8_tensor_cores(families: list[str], lacking: str) -> None:
    got = problems({f"{P}model.kvCacheDtype": "fp8", f"{P}gpu.instanceFamilies": json.dumps(families)})
    message = got[f"{P}model.kvCacheDtype"]
    assert lacking in message and "gpu.instanceFamilies" in message
    assert "set model.kvCacheDtype auto" in message


def test_fp8_kv_cache_is_accepted_on_every_fp8_family() -> None:
    families = ["g6", "g6e", "p5", "p5e", "p5en", "p6-b200"]
    s = parse_settings({f"{P}model.kvCacheDtype": "fp8", f"{P}gpu.instanceFamilies": json.dumps(families)})
    assert s.model.kv_cache_dtype.value == "fp8"
    assert problems({f"{P}model.kvCacheDtype": "int8"})[f"{P}model.kvCacheDtype"]
