"""Read-only AWS checks run before ``pulumi up``: can this account and region host this stack's plan?

A deployment that fails 20 minutes in on a missing credential, an instance type no zone offers or a
GPU vCPU quota of zero wastes a control plane's creation time and leaves half a stack to clean up.
These checks ask AWS the same questions first, with describe/get calls only (nothing is created or
changed), and return one ``Check`` row per finding for a table or JSON.

Order matters: without credentials nothing else can be asked, and without an enabled region every
other answer is an error, so either stops the run. Later checks report their own errors as rows.
No Pulumi import: the Automation API CLI and plain tests both call ``run_preflight``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.exceptions import ConnectionError as AwsConnectionError
from rich.table import Table
from rich.text import Text

from deepseek_eks.components.serving.weights import weights_addons
from deepseek_eks.settings import CapacityType, ComputeMode, Settings, s3_location
from deepseek_eks.sizing.catalog import InstanceCatalog, instance_catalog
from deepseek_eks.sizing.planner import SizingPlan
from deepseek_eks.sizing.quotas import QUOTA_SERVICE_CODE, quota_for, quota_needs
from deepseek_eks.sizing.refresh import refresh_hardware

# Fail fast on a bad network instead of botocore's long default retry/timeouts: a preflight that
# hangs is worse than one that says "could not reach".
_CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 3, "mode": "standard"})

# EKS refuses a cluster whose subnets do not span two zones.
MIN_CLUSTER_ZONES = 2


class Status(StrEnum):
    """A StrEnum (a ``str`` and an ``Enum``, as settings' enums are): ``str(Status.FAIL) == "fail"``."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """One finding: ``detail`` says what was found and, for warn/fail, what to do about it."""

    name: str
    status: Status
    detail: str


# ---------------------------------------------------------------------------------------------- helpers


def _error(err: BaseException) -> str:
    """A short ``Code: message`` for an AWS error, without the botocore boilerplate."""
    if isinstance(err, ClientError):
        info = err.response.get("Error", {})
        code = info.get("Code") or str(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
        message = info.get("Message") or ""
        return f"{code}: {message}".rstrip(": ") if message else code
    return str(err)


def _error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _join(names: Iterable[str]) -> str:
    return ", ".join(names)


def _number(value: float) -> str:
    """Quotas come back as floats (``64.0``); people read ``64``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# Failures to reach AWS at all (DNS, proxy, timeouts): not a verdict on the credentials.
NETWORK_ERRORS = (AwsConnectionError, HTTPClientError)
CREDENTIALS = "credentials"
API_ACCESS = "api-access"
# Exit code of a missing prerequisite (the CLI contract: 3 for missing AWS credentials).
EXIT_MISSING_PREREQUISITE = 3
EXIT_INVALID_SETTINGS = 2


def aws_session(settings: Settings) -> boto3.Session:
    """A boto3 session with the stack's ``aws:profile`` and ``aws:assumeRoles`` (assumed in order,
    as the Pulumi AWS provider does), so preflight asks the account ``pulumi up`` deploys to."""
    aws = settings.aws
    session = boto3.Session(profile_name=aws.profile, region_name=settings.region)
    for role in aws.assume_roles:
        sts = session.client("sts", region_name=settings.region, config=_CLIENT_CONFIG)
        request: dict[str, Any] = {
            "RoleArn": role.role_arn,
            "RoleSessionName": role.session_name or "deepseek-eks-preflight",
        }
        if role.external_id:
            request["ExternalId"] = role.external_id
        if role.duration_seconds:
            request["DurationSeconds"] = role.duration_seconds
        credentials = sts.assume_role(**request)["Credentials"]
        session = boto3.Session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            region_name=settings.region,
        )
    return session


def _check_account(settings: Settings, account: str) -> Check | None:
    """``aws:allowedAccountIds``/``aws:forbiddenAccountIds``, as the provider enforces them."""
    aws = settings.aws
    if aws.allowed_account_ids and account not in aws.allowed_account_ids:
        return Check(
            "account",
            Status.FAIL,
            f"account {account} is not in aws:allowedAccountIds ({_join(aws.allowed_account_ids)}): "
            "use other credentials (aws:profile) or fix the list.",
        )
    if account in aws.forbidden_account_ids:
        return Check(
            "account", Status.FAIL, f"account {account} is in aws:forbiddenAccountIds: use other credentials."
        )
    return None


def _credentials_failure(err: BaseException, region: str) -> Check:
    """The one row shown when no AWS call can be made, with the fix for each cause."""
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        detail = (
            "no AWS credentials found: run `aws configure` (or `aws sso login`), set AWS_PROFILE, "
            "or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
        )
    elif isinstance(err, ProfileNotFound):
        detail = f"{err}: fix AWS_PROFILE or create the profile with `aws configure --profile <name>`."
    elif isinstance(err, NETWORK_ERRORS):
        # Not a credentials verdict: a failed operation (exit 1), not a missing prerequisite.
        return Check(
            "network",
            Status.FAIL,
            f"could not reach AWS STS in {region} ({err}): check the network or proxy, "
            "and that aws:region is a real region.",
        )
    elif isinstance(err, ClientError):
        detail = (
            f"AWS rejected the credentials ({_error(err)}): refresh them (`aws sso login`, new keys "
            "or a fresh session token) and retry."
        )
    else:
        detail = f"could not use the AWS credentials ({_error(err)}): check `aws sts get-caller-identity`."
    return Check(CREDENTIALS, Status.FAIL, detail)


# ----------------------------------------------------------------------------------------------- checks


def _check_region(ec2: Any, region: str) -> Check:
    try:
        regions = ec2.describe_regions(AllRegions=False)["Regions"]
    except (BotoCoreError, ClientError) as err:
        return Check(
            "region",
            Status.FAIL,
            f"could not list the account's regions from {region} ({_error(err)}): "
            "enable the region in the account settings or pick another aws:region.",
        )
    # AllRegions=False already leaves out regions the account has not opted in to; the status is
    # checked too so an emulator (moto lists every region) or a pending opt-in gives the same answer.
    found = {r["RegionName"]: r.get("OptInStatus", "opt-in-not-required") for r in regions}
    if region not in found:
        return Check(
            "region",
            Status.FAIL,
            f"{region} is not among this account's enabled regions: set aws:region to one of "
            f"{_join(sorted(found)[:6])}, … or enable it in the account settings.",
        )
    if found[region] == "not-opted-in":
        return Check(
            "region",
            Status.FAIL,
            f"{region} is an opt-in region this account has not enabled: enable it under "
            "Account > AWS Regions or pick another aws:region.",
        )
    return Check("region", Status.PASS, f"{region} is enabled for this account.")


def cluster_zones(ec2: Any, settings: Settings) -> tuple[list[str], list[str]]:
    """The zones GPU nodes can land in, and the problems found on the way (empty when none).

    A new VPC takes the first ``network.availabilityZones`` standard zones in name order, as
    components/platform/network.py does; your own VPC uses the zones of its private subnets.
    """
    network = settings.network
    if not network.vpc_id:
        answer = ec2.describe_availability_zones(
            Filters=[
                {"Name": "state", "Values": ["available"]},
                {"Name": "opt-in-status", "Values": ["opt-in-not-required"]},
            ]
        )
        names = sorted(z["ZoneName"] for z in answer["AvailabilityZones"])
        problems = []
        if len(names) < network.availability_zones:
            problems.append(
                f"{settings.region} has only {len(names)} available zone(s), "
                f"network.availabilityZones asks for {network.availability_zones}"
            )
        return names[: network.availability_zones], problems

    zones: set[str] = set()
    problems = []
    # One call per subnet: EC2 fails a whole request when any one id is unknown, and a stack has
    # only a handful of subnets.
    for subnet_id in network.private_subnet_ids:
        try:
            subnets = ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"]
        except ClientError as err:
            if _error_code(err) != "InvalidSubnetID.NotFound":
                raise
            subnets = []
        if not subnets:
            problems.append(f"subnet {subnet_id} does not exist in {settings.region}")
            continue
        subnet = subnets[0]
        if subnet["VpcId"] != network.vpc_id:
            problems.append(f"subnet {subnet_id} is in {subnet['VpcId']}, not network.vpcId {network.vpc_id}")
            continue
        zones.add(subnet["AvailabilityZone"])
    return sorted(zones), problems


def _check_zones(ec2: Any, settings: Settings) -> tuple[Check, list[str]]:
    try:
        zones, problems = cluster_zones(ec2, settings)
    except (BotoCoreError, ClientError) as err:
        return Check(
            "zones",
            Status.FAIL,
            f"could not read zones or subnets ({_error(err)}).",
        ), []
    own_vpc = bool(settings.network.vpc_id)
    if not problems and len(zones) < MIN_CLUSTER_ZONES:
        problems.append(f"the private subnets span only {_join(zones) or 'no zone'}")
    if problems:
        fix = (
            "list private subnets of network.vpcId in at least two zones in network.privateSubnetIds"
            if own_vpc
            else "lower network.availabilityZones or pick another aws:region"
        )
        return Check("zones", Status.FAIL, f"{'; '.join(problems)}: {fix}."), zones
    where = f"the private subnets of {settings.network.vpc_id} are in" if own_vpc else "the new VPC spans"
    return Check("zones", Status.PASS, f"{where} {_join(zones)}."), zones


def offered_zones(ec2: Any, instance_type: str) -> set[str]:
    """Every zone of the client's region that offers ``instance_type``."""
    zones: set[str] = set()
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": [instance_type]}],
    )
    for page in pages:
        zones |= {o["Location"] for o in page.get("InstanceTypeOfferings", [])}
    return zones


def _check_offering(ec2: Any, instance_type: str, zones: Sequence[str], cheapest: bool) -> Check:
    name = f"offering {instance_type}"
    try:
        offered = offered_zones(ec2, instance_type) & set(zones)
    except (BotoCoreError, ClientError) as err:
        return Check(name, Status.WARN, f"could not read where {instance_type} is offered ({_error(err)}).")
    if len(offered) >= MIN_CLUSTER_ZONES:
        return Check(name, Status.PASS, f"offered in {_join(sorted(offered))}.")
    if len(offered) == 1:
        (zone,) = offered
        return Check(
            name,
            Status.WARN,
            f"only in {zone}: one AZ outage stops every replica; allow more gpu.instanceFamilies "
            "or use subnets in zones that offer it.",
        )
    if cheapest:
        # The plan's vLLM arguments and cost assume this type; none of the cluster's zones has it.
        return Check(
            name,
            Status.FAIL,
            f"{instance_type}, the plan's instance type, is offered in none of {_join(zones)}: "
            "choose other gpu.instanceFamilies, other subnets or another aws:region.",
        )
    return Check(
        name,
        Status.WARN,
        f"offered in none of {_join(zones)}: the node pool will never launch it.",
    )


def _check_gpu_facts(ec2: Any, plan: SizingPlan) -> tuple[Check, InstanceCatalog | None]:
    """Compare the bundled facts of the plan's types with EC2; the plan was sized on the former."""
    bundled = instance_catalog()
    wanted = {n: bundled.instances[n] for n in plan.instance_types if n in bundled.instances}
    try:
        refreshed, drifts = refresh_hardware(bundled.replace_instances(wanted), ec2)
    except (BotoCoreError, ClientError) as err:
        return Check(
            "gpu facts", Status.WARN, f"could not read EC2 DescribeInstanceTypes ({_error(err)})."
        ), None
    if drifts:
        return Check(
            "gpu facts",
            Status.WARN,
            f"EC2 disagrees with the bundled catalog ({'; '.join(str(d) for d in drifts)}): the plan "
            "may rest on stale figures; compare with `python -m sizing --variant … --families … "
            "--refresh-hardware` and update sizing/data/gpu_instances.json.",
        ), refreshed
    return Check(
        "gpu facts",
        Status.PASS,
        f"bundled hardware facts of {len(wanted)} plan type(s) match EC2 DescribeInstanceTypes.",
    ), refreshed


def _quota_value(quotas: Any, code: str) -> float:
    """The account's applied value, or AWS's default where the account has never had one applied."""
    try:
        answer = quotas.get_service_quota(ServiceCode=QUOTA_SERVICE_CODE, QuotaCode=code)
    except ClientError as err:
        if _error_code(err) != "NoSuchResourceException":
            raise
        answer = quotas.get_aws_default_service_quota(ServiceCode=QUOTA_SERVICE_CODE, QuotaCode=code)
    return float(answer["Quota"]["Value"])


def _check_quotas(quotas: Any, settings: Settings, plan: SizingPlan, node_vcpu: int) -> list[Check]:
    family = plan.chosen.instance.family
    max_replicas = settings.autoscaling.max_replicas
    replica_vcpu = node_vcpu * plan.nodes_per_replica
    allowed = list(dict.fromkeys(settings.gpu.capacity_types))  # settings order, no repeats
    needed = quota_needs(family, node_vcpu, plan.nodes_per_replica, max_replicas, tuple(allowed))[0].vcpus

    if any(quota_for(c, family) is None for c in allowed):
        return [
            Check(
                f"quota {family}",
                Status.WARN,
                f"no known EC2 vCPU quota for the {family} family: check its quota in the Service "
                f"Quotas console; {needed} vCPUs are needed.",
            )
        ]

    values: dict[CapacityType, float | None] = {}
    errors: dict[CapacityType, str] = {}
    for capacity in allowed:
        code, _ = quota_for(capacity, family) or ("", "")
        try:
            values[capacity] = _quota_value(quotas, code)
        except (BotoCoreError, ClientError) as err:
            values[capacity], errors[capacity] = None, _error(err)

    checks = []
    for capacity in allowed:
        code, quota_name = quota_for(capacity, family) or ("", "")
        name = f"quota {capacity.value} {code}"
        value = values[capacity]
        if value is None:
            # Reading quotas needs servicequotas:GetServiceQuota, which deploying does not: warn only.
            checks.append(
                Check(
                    name,
                    Status.WARN,
                    f"could not read {quota_name} ({errors[capacity]}): check it in the Service Quotas "
                    f"console; {needed} vCPUs are needed.",
                )
            )
            continue
        have = _number(value)
        if value >= needed:
            checks.append(
                Check(
                    name,
                    Status.PASS,
                    f"{quota_name} is {have} vCPUs, {needed} needed "
                    f"({node_vcpu} × {plan.nodes_per_replica} node(s) × maxReplicas {max_replicas}).",
                )
            )
            continue
        increase = f"request an increase of {quota_name} ({code}) to {needed} in the Service Quotas console"
        replicas = int(value // replica_vcpu)
        if replicas >= 1:
            # Deploying works; the autoscaler just cannot reach its ceiling.
            checks.append(
                Check(
                    name,
                    Status.WARN,
                    f"{quota_name} is {have} vCPUs, {needed} needed: maxReplicas {max_replicas} will stop "
                    f"at {replicas} replica(s); {increase}.",
                )
            )
            continue
        # Not one replica fits. Karpenter falls back to the other allowed capacity type, so that is
        # only a warning while the other quota is not known to be short as well.
        others = [c for c in allowed if c is not capacity]
        fallback = [c for c in others if values[c] is None or (values[c] or 0) >= replica_vcpu]
        status = Status.WARN if fallback else Status.FAIL
        tail = f"; {fallback[0].value} capacity can still launch it" if fallback else ""
        checks.append(
            Check(
                name,
                status,
                f"{quota_name} is {have} vCPUs, {needed} needed and {replica_vcpu} for a single "
                f"replica: {increase}{tail}.",
            )
        )
    return checks


def _check_bucket(s3: Any, bucket: str, region: str) -> Check:
    try:
        answer = s3.head_bucket(Bucket=bucket)
    except (BotoCoreError, ClientError) as err:
        return Check(
            "weights bucket",
            Status.FAIL,
            f"bucket {bucket} not found or not accessible ({_error(err)}): fix model.repository, create "
            "the bucket, or grant this identity s3:ListBucket on it.",
        )
    bucket_region = answer.get("BucketRegion") or answer.get("ResponseMetadata", {}).get(
        "HTTPHeaders", {}
    ).get("x-amz-bucket-region")
    if bucket_region and bucket_region != region:
        # Streaming hundreds of GiB across regions is slow and billed per GiB.
        return Check(
            "weights bucket",
            Status.WARN,
            f"bucket {bucket} is in {bucket_region}, the cluster in {region}: copy the weights to a "
            f"bucket in {region} to avoid slow, billed cross-region loads.",
        )
    return Check("weights bucket", Status.PASS, f"bucket {bucket} exists and this identity can reach it.")


# The SSM parameter Karpenter reads to resolve an ``al2023@<release>`` alias for one Kubernetes
# minor, architecture and variant (aws/karpenter-provider-aws v1.14.1
# pkg/providers/amifamily/al2023.go, AL2023.resolvePath).
AL2023_AMI_PARAMETER = (
    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/"
    "amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{release}/image_id"
)
# What the Karpenter-mode node pools launch: NVIDIA images for GPU nodes, standard ones for the
# general pool (x86_64 only: every pool requires amd64).
KARPENTER_AMI_VARIANTS = (("x86_64", "nvidia"), ("x86_64", "standard"))


def pinned_ami_release() -> str:
    """The AL2023 release components/versions.py pins (imported late: ``components`` loads Pulumi)."""
    from deepseek_eks.components.versions import AL2023_AMI_RELEASE

    return AL2023_AMI_RELEASE


def ami_parameter_names(kubernetes_version: str, release: str) -> list[str]:
    """The SSM parameters of an AL2023 release that Karpenter-mode nodes need."""
    return [
        AL2023_AMI_PARAMETER.format(k8s=kubernetes_version, arch=arch, variant=variant, release=release)
        for arch, variant in KARPENTER_AMI_VARIANTS
    ]


def _check_ami_release(ssm: Any, kubernetes_version: str, release: str) -> Check:
    """Karpenter launches no node when the alias's SSM parameters do not exist in the region."""
    names = ami_parameter_names(kubernetes_version, release)
    try:
        answer = ssm.get_parameters(Names=names)
    except (BotoCoreError, ClientError) as err:
        return Check(
            "ami release",
            Status.WARN,
            f"could not read the AMI parameters of al2023@{release} ({_error(err)}): grant this identity "
            "ssm:GetParameters on /aws/service/eks/* to verify it.",
        )
    missing = [n for n in names if n in set(answer.get("InvalidParameters", []))]
    if missing:
        return Check(
            "ami release",
            Status.FAIL,
            f"al2023@{release} has no AMI for Kubernetes {kubernetes_version} here (SSM {_join(missing)} "
            "not found): Karpenter would launch no node. Pin a release in components/versions.py that "
            "exists for this Kubernetes version, or change kubernetesVersion.",
        )
    images = _join(sorted(p["Value"] for p in answer.get("Parameters", [])))
    return Check(
        "ami release",
        Status.PASS,
        f"al2023@{release} resolves for Kubernetes {kubernetes_version} ({images}).",
    )


# ---------------------------------------------------------------------------------------------- public


def _check_addon(eks: Any, name: str, version: str, kubernetes_version: str) -> Check:
    """EKS offers the pinned add-on version for the cluster's Kubernetes minor (add-on versions
    carry an EKS build suffix that only this API lists)."""
    check = f"add-on {name}"
    try:
        pages = eks.get_paginator("describe_addon_versions").paginate(
            addonName=name, kubernetesVersion=kubernetes_version
        )
        offered = [v["addonVersion"] for page in pages for a in page["addons"] for v in a["addonVersions"]]
    except (BotoCoreError, ClientError) as err:
        return Check(check, Status.WARN, f"could not list the versions EKS offers ({_error(err)}).")
    if version in offered:
        return Check(check, Status.PASS, f"{version} is offered for Kubernetes {kubernetes_version}.")
    return Check(
        check,
        Status.FAIL,
        f"{version} (components/versions.py) is not offered for Kubernetes {kubernetes_version}; "
        f"EKS offers {_join(offered[:5]) or 'none'}: pin one of those.",
    )


def run_preflight(
    settings: Settings,
    plan: SizingPlan,
    session: boto3.Session | None = None,
    *,
    quotas_client: Any = None,
    ssm_client: Any = None,
) -> list[Check]:
    """Run every check in order and return their rows; never raises for AWS errors."""
    region = settings.region
    access = api_access_check(settings)
    try:
        session = session or aws_session(settings)
        sts = session.client("sts", region_name=region, config=_CLIENT_CONFIG)
        identity = sts.get_caller_identity()
    except (BotoCoreError, ClientError) as err:
        return [*access, _credentials_failure(err, region)]
    checks = [
        *access,
        Check(CREDENTIALS, Status.PASS, f"account {identity['Account']} as {identity['Arn']}."),
    ]
    account_check = _check_account(settings, str(identity["Account"]))
    if account_check:
        return [*checks, account_check]  # every later answer would be about the wrong account

    ec2 = session.client("ec2", region_name=region, config=_CLIENT_CONFIG)
    region_check = _check_region(ec2, region)
    checks.append(region_check)
    if region_check.status is Status.FAIL:
        return checks  # every other call would fail the same way

    zones_check, zones = _check_zones(ec2, settings)
    checks.append(zones_check)
    if zones:  # without zones the offering rows would only repeat the zones failure
        checks += [_check_offering(ec2, t, zones, t == plan.instance_type) for t in plan.instance_types]

    facts_check, refreshed = _check_gpu_facts(ec2, plan)
    checks.append(facts_check)

    # Quotas count vCPUs: EC2's figure when the refresh got one, the plan's catalog otherwise.
    chosen = plan.chosen.instance
    node_vcpu = refreshed.instances[chosen.name].vcpu if refreshed else chosen.vcpu
    try:
        quotas = quotas_client or session.client("service-quotas", region_name=region, config=_CLIENT_CONFIG)
    except BotoCoreError as err:
        checks.append(Check("quota", Status.WARN, f"could not create a Service Quotas client ({err})."))
    else:
        checks += _check_quotas(quotas, settings, plan, node_vcpu)

    if settings.compute_mode is ComputeMode.KARPENTER:  # Auto Mode picks its own AMIs
        ssm = ssm_client or session.client("ssm", region_name=region, config=_CLIENT_CONFIG)
        checks.append(_check_ami_release(ssm, settings.kubernetes_version, pinned_ami_release()))

    addons = weights_addons(settings.weights.source)
    if addons:
        eks = session.client("eks", region_name=region, config=_CLIENT_CONFIG)
        checks += [_check_addon(eks, n, v, settings.kubernetes_version) for n, v in addons.items()]

    own = s3_location(settings.model.repository or "")
    if own:
        s3 = session.client("s3", region_name=region, config=_CLIENT_CONFIG)
        checks.append(_check_bucket(s3, own[0], region))
    return checks


def api_access_check(settings: Settings) -> list[Check]:
    """Whether the deployer can reach the cluster API the stack creates (settings/exposure.py):
    fail when nothing could, warn when only a network routed to a VPC created by this stack could
    (true once you have connected it, never on the first run); no row when the settings admit the
    deployer (public CIDRs, or private access in your own VPC)."""
    if settings.deploy_blockers:
        return [Check(API_ACCESS, Status.FAIL, " ".join(settings.deploy_blockers))]
    if settings.first_run_blockers:
        return [Check(API_ACCESS, Status.WARN, " ".join(settings.first_run_blockers))]
    return []


def exit_code(checks: Iterable[Check]) -> int:
    """2 when the settings make the cluster API unreachable (fix the settings), 3 when no
    credentials could be used (a missing prerequisite), 1 when any other check failed; warnings
    alone do not stop a deployment."""
    failed = [c for c in checks if c.status is Status.FAIL]
    if any(c.name == API_ACCESS for c in failed):
        return EXIT_INVALID_SETTINGS
    if any(c.name == CREDENTIALS for c in failed):
        return EXIT_MISSING_PREREQUISITE
    return 1 if failed else 0


_STYLES = {Status.PASS: "bold green", Status.WARN: "bold yellow", Status.FAIL: "bold red"}


def render_table(checks: Iterable[Check]) -> Table:
    table = Table(title="preflight", show_lines=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row(check.name, Text(check.status.value, style=_STYLES[check.status]), check.detail)
    return table


def as_json(checks: Iterable[Check]) -> list[dict[str, str]]:
    return [{"name": c.name, "status": c.status.value, "detail": c.detail} for c in checks]
