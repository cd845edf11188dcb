"""Who can reach the cluster API and the endpoint (settings/exposure.py, settings/cidrs.py,
settings/names.py), checked against the upstream facts in reference/upstream/ and the render."""

from __future__ import annotations

import ipaddress
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from deepseek_eks.automation.render import construct, render
from deepseek_eks.settings import SettingsError, cidrs, parse_settings
from deepseek_eks.settings.cidrs import WORLD_OPEN_SHARE, coverage, public_coverage, world_open
from tests.conftest import stack_config

ROOT = Path(__file__).resolve().parents[2]
FACTS = json.loads((ROOT / "reference/upstream/endpoint-access-facts.json").read_text())
NAMES = json.loads((ROOT / "reference/upstream/name-rules.json").read_text())
P = "deepseek-eks:"
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234"
KEY_SECRET = ("Secret", "vllm-api-key")
PUBLIC = {f"{P}endpoint.scheme": "internet-facing", f"{P}endpoint.allowedCidrs": "198.51.100.0/24"}


def problems(config: dict[str, Any], stack: str = "dev") -> dict[str, str]:
    with pytest.raises(SettingsError) as info:
        parse_settings(config, stack=stack)
    return {p.key: p.message for p in info.value.problems}


# ------------------------------------------------------------------ world-open means the union


def test_a_union_of_halves_is_as_open_as_slash_zero() -> None:
    assert world_open(["0.0.0.0/1", "128.0.0.0/1"]) and world_open(["0.0.0.0/0"])
    assert coverage(["0.0.0.0/1", "0.0.0.0/2"]) == {4: 0.5}  # overlaps counted once
    assert not world_open(["10.0.0.0/8", "198.51.100.0/24"])
    assert world_open(["::/1", "8000::/1"])


def test_world_open_unions_are_refused_for_the_api_and_the_endpoint() -> None:
    halves = '["0.0.0.0/1", "128.0.0.0/1"]'
    found = problems(
        {
            f"{P}cluster.publicAccessCidrs": halves,
            f"{P}endpoint.scheme": "internet-facing",
            f"{P}endpoint.allowedCidrs": halves,
            f"{P}endpoint.certificateArn": CERT,
        }
    )
    assert "together admit 100% of IPv4" in found[f"{P}cluster.publicAccessCidrs"]
    assert "together admit 100% of IPv4" in found[f"{P}endpoint.allowedCidrs"]


# Six blocks, 49.2 % of IPv4 and almost none of it private or reserved: what the review found
# accepted under the old line (half of the whole family).
SIX_BLOCKS = ["128.0.0.0/2", "64.0.0.0/3", "32.0.0.0/4", "16.0.0.0/5", "48.0.0.0/6", "52.0.0.0/7"]
PUBLIC_SPACE = json.loads((ROOT / "reference/upstream/public-address-space.json").read_text())


def test_six_blocks_under_half_of_ipv4_are_open_to_the_world() -> None:
    assert round(coverage(SIX_BLOCKS)[4], 3) == 0.492  # under the old line of 0.5
    assert public_coverage(SIX_BLOCKS)[4] > Fraction(1, 2)  # more than half of every public host
    found = problems(
        {
            f"{P}cluster.publicAccessCidrs": json.dumps(SIX_BLOCKS),
            **PUBLIC,
            f"{P}endpoint.allowedCidrs": json.dumps(SIX_BLOCKS),
            f"{P}endpoint.certificateArn": CERT,
        }
    )
    for key in ("cluster.publicAccessCidrs", "endpoint.allowedCidrs"):
        message = found[f"{P}{key}"]
        assert "of IPv4's public addresses (the world-open line is 1/16 of them, 6.25 %)" in message
        assert f"pulumi config set {key} " in message and "--path" not in message  # the flat fix


def test_the_line_is_a_sixteenth_of_the_public_space() -> None:
    """Thirteen public /8s pass, fourteen do not (1/16 of the public space is 13.8 /8s)."""
    eighths = [f"{a}.0.0.0/8" for a in (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15)]
    assert not world_open(eighths[:13]) and world_open(eighths)
    assert parse_settings({f"{P}cluster.publicAccessCidrs": json.dumps(eighths[:13])})
    assert "cluster.publicAccessCidrs" in " ".join(
        problems({f"{P}cluster.publicAccessCidrs": json.dumps(eighths)})
    )
    assert Fraction(1, 16) == WORLD_OPEN_SHARE and "1/16" in PUBLIC_SPACE["line"]["share"]


def test_private_and_reserved_space_is_no_share_of_the_internet() -> None:
    private = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "224.0.0.0/4"]
    assert public_coverage(private) == {4: 0}
    # a quarter of IPv4 that holds two non-public /8s is 28 % of the public space: world-open now
    assert world_open(["0.0.0.0/2", "10.0.0.0/8"]) and not world_open(["0.0.0.0/5"])
    assert world_open(["::/1", "8000::/1"]) and not world_open(["2600::/12", "fc00::/7", "fe80::/10"])


def test_the_public_space_is_the_iana_registries_less_what_is_not_globally_reachable() -> None:
    v4 = PUBLIC_SPACE["ipv4"]
    listed = {*v4["not_globally_reachable"]["blocks"], *v4["multicast"]["blocks"]}
    assert set(cidrs.NOT_PUBLIC_IPV4) == listed - {"255.255.255.255/32"}  # inside 240.0.0.0/4
    assert cidrs.public_size(4) == v4["public_addresses"]
    v6 = PUBLIC_SPACE["ipv6"]
    assert v6["global_unicast"]["block"] == cidrs.PUBLIC_IPV6
    assert set(cidrs.NOT_PUBLIC_IPV6) == set(v6["not_globally_reachable_inside_2000::/3"]["blocks"])
    # Python's own list (3.11's ipaddress) is inside ours; multicast is what it calls global.
    for network in ipaddress.IPv4Network._constants._private_networks:  # type: ignore[attr-defined]
        assert public_coverage([str(network)]) == {4: 0}, network
    assert ipaddress.ip_address("224.0.0.1").is_global and public_coverage(["224.0.0.0/4"]) == {4: 0}


def test_world_open_allowed_cidrs_are_refused_on_an_internal_endpoint_too() -> None:
    """docs/configuration.md: world-open sets are refused in endpoint.allowedCidrs, whatever the
    scheme; an internal load balancer admits them from every network routed to the VPC."""
    found = problems({f"{P}endpoint.allowedCidrs": json.dumps(SIX_BLOCKS)})
    message = found[f"{P}endpoint.allowedCidrs"]
    assert "every network routed to the VPC" in message and "config set endpoint.allowedCidrs " in message
    every_private = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"]
    assert parse_settings({f"{P}endpoint.allowedCidrs": json.dumps(every_private)})


# ------------------------------------------------------------------ the cluster API on the first run


def test_the_default_private_endpoint_blocks_a_deployment_and_names_the_fix() -> None:
    """EKS's cluster security group admits inbound only from itself, so a private endpoint with no
    443 rule is unreachable from any deployer (reference/upstream/endpoint-access-facts.json)."""
    inbound = [
        r for r in FACTS["eks_cluster_security_group_default_rules"]["rules"] if r["type"] == "Inbound"
    ]
    assert [r["source"] for r in inbound] == ["Self"]
    settings = parse_settings({})
    [blocker] = settings.deploy_blockers
    assert "pulumi config set cluster.publicAccessCidrs " in blocker and "--path" not in blocker
    assert parse_settings({f"{P}cluster.publicAccessCidrs": "203.0.113.7/32"}).deploy_blockers == ()


def test_private_access_in_your_own_vpc_is_reachable_and_admits_443_on_the_cluster_group() -> None:
    own_vpc = {
        "network__vpcId": "vpc-0123456789abcdef0",
        "network__privateSubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
        "cluster__privateAccessCidrs": "10.8.0.0/16",
        "cluster__privateAccessSecurityGroupIds": "sg-0123456789abcdef0",
    }
    config = stack_config("dev", **own_vpc)
    settings = parse_settings(config.values, config.secret_keys, config.stack)
    assert settings.deploy_blockers == () and settings.first_run_blockers == ()
    run = construct(config)
    cluster = run.mocks.of_type("eks:index:Cluster")[0]
    rules = run.mocks.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert {(r.inputs.get("cidrIpv4"), r.inputs.get("referencedSecurityGroupId")) for r in rules} == {
        ("10.8.0.0/16", None),
        (None, "sg-0123456789abcdef0"),
    }
    for rule in rules:
        assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == (
            "tcp",
            443,
            443,
        )
        # the group EKS made for this cluster (pulumi-eks clusterSecurityGroupId)
        assert rule.inputs["securityGroupId"] == cluster.state["clusterSecurityGroupId"]


def test_private_access_to_a_vpc_this_stack_creates_is_refused_on_the_first_run_only() -> None:
    settings = parse_settings({f"{P}cluster.privateAccessCidrs": "10.8.0.0/16"})
    assert settings.deploy_blockers == ()
    [first] = settings.first_run_blockers
    assert "nothing routes into" in first and "cluster.publicAccessCidrs" in first


def test_render_warns_about_an_unreachable_api_but_still_renders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deepseek_eks.automation.cli import main

    assert main(["render", "--stack", "dev", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "dev" / "plan.json").exists()
    warned = capsys.readouterr().err
    assert "preflight and up refuse this stack" in warned and "cluster.publicAccessCidrs" in warned


# ------------------------------------------------------------------ the endpoint: key, TLS, sources


def test_an_internet_facing_endpoint_needs_tls_and_a_key() -> None:
    found = problems({**PUBLIC, f"{P}endpoint.auth": "none"})
    assert "required when endpoint.scheme is internet-facing" in found[f"{P}endpoint.certificateArn"]
    assert "needs an API key" in found[f"{P}endpoint.auth"]
    assert parse_settings({**PUBLIC, f"{P}endpoint.certificateArn": CERT}).endpoint.certificate_arn == CERT


def test_contradictions_and_wrong_regions_are_refused() -> None:
    found = problems({f"{P}endpoint.auth": "none", f"{P}apiKey": "k"})
    assert "contradicts apiKey" in found[f"{P}endpoint.auth"]
    elsewhere = CERT.replace("us-east-1", "eu-west-1")
    found = problems({f"{P}endpoint.certificateArn": elsewhere})
    assert "is in eu-west-1" in found[f"{P}endpoint.certificateArn"]
    assert "regional" in FACTS["acm_certificates_are_regional"]["statement"]
    found = problems({f"{P}endpoint.hostname": "llm.example.com"})
    assert "go together" in found[f"{P}endpoint.hostedZoneId"]


def test_keyless_internal_endpoint_is_a_warned_choice() -> None:
    settings = parse_settings({f"{P}endpoint.auth": "none"})
    assert any("endpoint.auth is none" in w for w in settings.warnings)


def test_a_key_is_generated_secret_and_never_printed_when_apikey_is_unset() -> None:
    rendered = render(stack_config("dev"))
    secret = next(
        o for o in rendered.objects() if o["kind"] == "Secret" and o["metadata"]["name"] == "vllm-api-key"
    )
    assert secret["stringData"]["api-key"] == "[secret]"
    container = next(o for o in rendered.objects() if o["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    key_env = next(e for e in container["env"] if e["name"] == "VLLM_API_KEY")
    assert key_env["valueFrom"]["secretKeyRef"]["name"] == "vllm-api-key"
    assert rendered.outputs["apiKey"] == "[secret]"
    assert "$(pulumi stack output --show-secrets apiKey)" in rendered.outputs["curl"]
    run = construct(stack_config("dev"))
    generated = run.mocks.named("api-secrets-api-key")
    assert generated.inputs["length"] >= 32 and generated.inputs["special"] is False
    assert run.outputs["curl"].count("mock-generated-password") == 0


def test_no_key_and_no_secret_with_auth_none() -> None:
    rendered = render(stack_config("dev", endpoint__auth="none"))
    assert not any(
        o["kind"] == "Secret" and o["metadata"]["name"] == "vllm-api-key" for o in rendered.objects()
    )
    assert "Authorization" not in rendered.outputs["curl"]


def ingress_annotations(**overrides: Any) -> dict[str, str]:
    rendered = render(stack_config("dev", **overrides))
    return next(o for o in rendered.objects() if o["kind"] == "Ingress")["metadata"]["annotations"]


def test_the_internal_alb_admits_the_vpc_and_the_allowed_cidrs_not_the_controllers_default() -> None:
    fact = FACTS["alb_inbound_cidrs"]
    ann = ingress_annotations(endpoint__allowedCidrs="198.51.100.0/24")
    cidrs = ann[fact["annotation"]].split(",")
    assert fact["default_ipv4"] not in cidrs  # the controller's default when the annotation is unset
    assert cidrs == ["10.42.0.0/16", "198.51.100.0/24"]
    assert "alb.ingress.kubernetes.io/security-groups" not in ann  # it would make inbound-cidrs ignored


def test_with_a_certificate_http_only_redirects_to_https() -> None:
    fact = FACTS["alb_ssl_redirect"]
    ann = ingress_annotations(endpoint__certificateArn=CERT)
    ports = json.loads(ann["alb.ingress.kubernetes.io/listen-ports"])
    assert ann[fact["annotation"]] == "443" and {"HTTPS": 443} in ports  # the redirect target exists
    assert ann["alb.ingress.kubernetes.io/certificate-arn"] == CERT


def test_hostname_creates_the_dns_record_the_certificate_needs() -> None:
    config = stack_config(
        "dev",
        endpoint__certificateArn=CERT,
        endpoint__hostname="llm.example.com",
        endpoint__hostedZoneId="Z0123456789ABCDEFGHIJ",
    )
    rendered = render(config)
    [record] = [r for r in rendered.aws if r["type"] == "aws:route53/record:Record"]
    assert record["inputs"]["name"] == "llm.example.com" and record["inputs"]["type"] == "CNAME"
    assert record["inputs"]["zoneId"] == "Z0123456789ABCDEFGHIJ"
    assert rendered.outputs["endpointUrl"] == "https://llm.example.com"
    assert rendered.outputs["curl"].startswith("curl -s https://llm.example.com/v1/")


# ------------------------------------------------------------------ names and values AWS would reject


def test_stack_names_that_make_invalid_eks_cluster_names_are_refused() -> None:
    rule = NAMES["eks_cluster_name"]
    longest = rule["max"] - len("deepseek-")
    # Such stack names are past the label-value limit too (tests/unit/test_hostile_settings.py);
    # the EKS rule is named only once the cluster name is past EKS's own limit.
    with pytest.raises(SettingsError) as at_limit:
        parse_settings({}, stack="a" * longest)
    assert f"EKS allows at most {rule['max']}" not in str(at_limit.value)
    with pytest.raises(SettingsError) as past:
        parse_settings({}, stack="a" * (longest + 1))
    assert f"EKS allows at most {rule['max']}" in str(past.value)
    assert not re.fullmatch(rule["pattern"].lstrip("^"), "deepseek-dev.x")
    assert "letters, digits" in problems({}, stack="dev.x")["stack name"]


def test_karpenter_queue_names_past_the_sqs_limit_are_refused() -> None:
    limit = NAMES["sqs_queue_name"]["max"]
    assert f"up to {limit} characters" in NAMES["sqs_queue_name"]["documentation"]
    stack = "a" * (limit - len("deepseek--karpenter") + 1)
    assert "SQS allows at most" in problems({f"{P}computeMode": "karpenter"}, stack=stack)["stack name"]
    parse_settings({}, stack=stack)  # Auto Mode creates no queue


def test_the_packaged_region_list_is_botocores() -> None:
    import botocore.session

    session = botocore.session.get_session()
    listed = {
        p: session.get_available_regions("eks", partition_name=p) for p in session.get_available_partitions()
    }
    packaged = json.loads((ROOT / "sizing/data/eks_regions.json").read_text())["regions_by_partition"]
    assert packaged == listed == NAMES["eks_regions"]["by_partition"]


def test_regions_are_the_ones_aws_lists() -> None:
    """Every region of the standard partition; the others are refused by name (their partition's
    names are not rendered: tests/unit/test_hostile_settings.py)."""
    for region in NAMES["eks_regions"]["by_partition"]["aws"]:
        assert parse_settings({"aws:region": region}).region == region
    assert "not an AWS region" in problems({"aws:region": "us-east-9"})["aws:region"]


def hub_accepts(repo_id: str) -> bool:
    """huggingface_hub 0.36.0's validate_repo_id, as snapshotted, plus owner/name."""
    rules = NAMES["huggingface_repo_id"]
    return (
        repo_id.count("/") == rules["max_slashes"]
        and re.match(rules["regex"], repo_id) is not None
        and not any(s in repo_id for s in rules["forbidden_substrings"])
        and not repo_id.endswith(rules["forbidden_suffix"])
    )


@pytest.mark.parametrize("repository", ["deepseek-ai", "deepseek-ai/x--y", "a/b.git", "a/..b", "a/-b"])
def test_hugging_face_ids_the_hub_refuses_are_refused(repository: str) -> None:
    assert not hub_accepts(repository)
    assert f"{P}model.repository" in problems({f"{P}model.repository": repository})


def test_hugging_face_ids_the_hub_accepts_are_accepted() -> None:
    # Each under the variant whose weights it holds (another variant's catalogued repository is
    # refused for that reason, not its form: test_settings.py).
    for variant, repository in (
        ("r1-671b", "deepseek-ai/DeepSeek-R1"),
        ("r1-distill-llama-70b", "casperhansen/deepseek-r1-distill-llama-70b-awq"),
        ("r1-distill-qwen-7b", "my-org/r1-qwen-7b.finetune_v2"),
    ):
        assert hub_accepts(repository)
        config = {f"{P}model.variant": variant, f"{P}model.repository": repository}
        assert parse_settings(config).model.repository == repository


def test_non_routable_vpc_ranges_and_zero_retention_are_refused() -> None:
    for cidr in ("127.0.0.0/16", "169.254.0.0/16", "224.0.0.0/16", "240.0.0.0/16", "0.0.0.0/16"):
        assert "not routable" in problems({f"{P}network.vpcCidr": cidr})[f"{P}network.vpcCidr"]
    assert (
        "more than zero"
        in problems({f"{P}observability.prometheusRetention": "0d"})[f"{P}observability.prometheusRetention"]
    )
