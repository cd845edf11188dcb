"""Who can reach what: the cluster API (from the deployer) and the inference endpoint (from clients).

Pure rules over validated setting groups, called by ``parse_settings``. They return problems
(refused), warnings, and deploy blockers: settings that are valid offline (``render`` and ``plan``
must keep working on the example stacks) but with which ``pulumi up`` would create a VPC and a
cluster, about 15 billed minutes, and then time out on every Kubernetes object.

Facts relied on, snapshotted in ``reference/upstream/endpoint-access-facts.json``:
- the security group EKS creates for a cluster admits inbound traffic from itself only (EKS User
  Guide, sec-group-reqs), so a private endpoint answers nothing outside the cluster unless a rule
  admits 443 from the deployer;
- with public access off, the API server receives requests only from within the cluster's VPC
  (EKS API Reference, VpcConfigRequest.endpointPublicAccess);
- the AWS Load Balancer Controller admits 0.0.0.0/0 when ``inbound-cidrs`` is unset
  (v3.5.0 docs/guide/ingress/annotations.md), and redirects HTTP to HTTPS with ``ssl-redirect``;
- ACM certificates are regional: a load balancer uses a certificate of its own region.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cidrs import describe_world_open
from .model import (
    ClusterSettings,
    EndpointAuth,
    EndpointScheme,
    EndpointSettings,
    LoadBalancerKind,
    NetworkSettings,
    Problem,
)

PUBLIC_ACCESS_FIX = (
    "pulumi config set cluster.publicAccessCidrs <your egress IP>/32 (curl -s https://checkip.amazonaws.com)"
)


@dataclass
class Exposure:
    """What the rules found: refusals, warnings and deployment blockers."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    deploy_blockers: list[str] = field(default_factory=list)
    first_run_blockers: list[str] = field(default_factory=list)


def api_access(cluster: ClusterSettings, network: NetworkSettings, prefix: str) -> Exposure:
    """Can the machine that runs ``pulumi up`` reach the EKS API it creates?

    Reachable: a public endpoint limited to ``cluster.publicAccessCidrs`` (the deployer's egress
    IP), or a private endpoint with 443 admitted from ``cluster.privateAccessCidrs`` /
    ``privateAccessSecurityGroupIds`` (a runner inside, or routed to, the VPC). A VPC this stack
    creates has no route from anywhere on its first run, so private access alone works only once
    you have connected it (peering, Transit Gateway, VPN): refused on a first deployment.
    """
    found = Exposure()
    key = f"{prefix}cluster.publicAccessCidrs"
    if opened := describe_world_open(cluster.public_access_cidrs):
        found.problems.append(
            Problem(
                key,
                cluster.public_access_cidrs,
                f"{opened}: the Kubernetes API would be open to the internet; list only the CIDRs "
                f"you deploy from ({PUBLIC_ACCESS_FIX}; docs/security.md, Nothing opened)",
            )
        )
    if opened := describe_world_open(cluster.private_access_cidrs):
        found.problems.append(
            Problem(
                f"{prefix}cluster.privateAccessCidrs",
                cluster.private_access_cidrs,
                f"{opened}; list only the networks you deploy from (pulumi config set "
                "cluster.privateAccessCidrs <runner CIDR>; docs/security.md, Nothing opened)",
            )
        )
    private_sources = cluster.private_access_cidrs or cluster.private_access_security_group_ids
    if cluster.public_access_cidrs:
        return found
    if not private_sources:
        found.deploy_blockers.append(
            f"{key} is empty and no cluster.privateAccessCidrs / privateAccessSecurityGroupIds are set: "
            "the EKS API endpoint is private and its security group admits only the cluster itself, "
            "so `pulumi up` could create the VPC and cluster but reach no Kubernetes API. Fix: "
            f"{PUBLIC_ACCESS_FIX}; or, from inside your own VPC (network.vpcId), set "
            "cluster.privateAccessCidrs or cluster.privateAccessSecurityGroupIds to the runner's"
        )
    elif not network.vpc_id:
        found.first_run_blockers.append(
            "cluster.privateAccessCidrs / privateAccessSecurityGroupIds admit networks to the private "
            "API endpoint of a VPC this stack creates: on the first `pulumi up` nothing routes into "
            f"that VPC yet. Bootstrap with {key} ({PUBLIC_ACCESS_FIX}), connect your network to the "
            "VPC (output vpcId), then remove the public CIDRs"
        )
    return found


def endpoint_access(
    endpoint: EndpointSettings, region: str, api_key_set: bool, prefix: str, usable: set[str]
) -> Exposure:
    """The inference endpoint: authentication, TLS, who may connect, the DNS name.

    ``usable``: the endpoint settings that validated (a rule runs only on valid inputs)."""
    found = Exposure()
    p = f"{prefix}endpoint."
    public = endpoint.scheme is EndpointScheme.INTERNET_FACING
    keyless = endpoint.auth is EndpointAuth.NONE
    if {"scheme", "auth"} <= usable and public and keyless:
        found.problems.append(
            Problem(
                f"{p}auth",
                endpoint.auth.value,
                "an internet-facing endpoint needs an API key: remove endpoint.auth (a key is generated "
                "when apiKey is unset) or make endpoint.scheme internal",
            )
        )
    if "auth" in usable and keyless and api_key_set:
        found.problems.append(
            Problem(
                f"{p}auth",
                endpoint.auth.value,
                "contradicts apiKey, which is set: remove apiKey (pulumi config rm apiKey) or endpoint.auth",
            )
        )
    elif "auth" in usable and keyless and not public:
        found.warnings.append(
            f"{p}auth is none: anything that can reach the internal endpoint can use the model "
            "without a key (the NetworkPolicy still admits only the load balancer and Prometheus)"
        )
    if {"scheme", "certificateArn"} <= usable and public and not endpoint.certificate_arn:
        found.problems.append(
            Problem(
                f"{p}certificateArn",
                None,
                "required when endpoint.scheme is internet-facing: the API key would cross the internet "
                "in plain HTTP. Request or import an ACM certificate in this region and set its ARN",
            )
        )
    if "certificateArn" in usable and endpoint.certificate_arn:
        cert_region = endpoint.certificate_arn.split(":")[3]
        if cert_region != region:
            found.problems.append(
                Problem(
                    f"{p}certificateArn",
                    endpoint.certificate_arn,
                    f"is in {cert_region}, but the load balancer is in aws:region {region}: ACM "
                    f"certificates are regional, use one issued or imported in {region}",
                )
            )
    # World-open allowed CIDRs are refused on an internal endpoint too (docs/configuration.md): the
    # internal load balancer admits them from every network routed to the VPC (peerings, VPN,
    # Transit Gateway, Direct Connect), and a set that covers a sixteenth of the internet is no list
    # of clients there either. Private ranges (RFC 1918, 100.64.0.0/10) are no share of the public
    # space, so "every private network" stays allowed.
    opened = describe_world_open(endpoint.allowed_cidrs)
    if {"scheme", "allowedCidrs"} <= usable and opened:
        where = (
            "the inference API would be open to the whole internet"
            if public
            else "the internal load balancer would admit them from every network routed to the VPC"
        )
        found.problems.append(
            Problem(
                f"{p}allowedCidrs",
                endpoint.allowed_cidrs,
                f"{opened}: {where}; list only your clients' CIDRs "
                "(pulumi config set endpoint.allowedCidrs <client CIDR>; docs/security.md, "
                "Nothing opened)",
            )
        )
    if {"hostname", "hostedZoneId"} <= usable and bool(endpoint.hostname) != bool(endpoint.hosted_zone_id):
        missing = "hostedZoneId" if endpoint.hostname else "hostname"
        found.problems.append(
            Problem(
                f"{p}{missing}",
                None,
                "endpoint.hostname and endpoint.hostedZoneId go together: the record is created in that "
                "Route 53 zone",
            )
        )
    nlb = endpoint.load_balancer is LoadBalancerKind.NLB
    if {"loadBalancer", "auth"} <= usable and nlb and not keyless:
        # vllm 0.33.0 entrypoints/serve/middleware/authenticate.py GUARDED_PREFIX: the key guards only
        # /v1, /v2, /inference and /cohere, and an NLB (L4) forwards every path.
        found.problems.append(
            Problem(
                f"{p}loadBalancer",
                endpoint.load_balancer.value,
                "nlb forwards every path and vLLM checks the API key only under /v1 (and /v2, "
                "/inference, /cohere), so /tokenize, /metrics and /invocations would answer without "
                "it: use alb (the default) for a keyed endpoint, or set endpoint.auth none for a "
                "private, keyless NLB",
            )
        )
    return found
