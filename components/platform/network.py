"""The VPC: a new one across 2-3 AZs (private subnets for nodes and pods, small private subnets
for internal load balancers only, public ones for internet-facing load balancers, one NAT gateway,
an S3 gateway endpoint), or the ids of your own."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from ..serving.buckets import private_bucket
from .iam_policies import flow_logs_policy, service_trust_policy

FLOW_LOG_RETENTION_DAYS = 365
ACCESS_LOGS_DAYS = 90
"""How long ALB access logs are kept unless endpoint.accessLogsDays says otherwise."""
ACCESS_LOGS_PREFIX = "alb"
"""Where in the bucket the ALB writes (it adds AWSLogs/<account>/... itself)."""
# Who writes ALB access logs into the bucket: in the regions that have one, the regional Elastic
# Load Balancing account (hashicorp/terraform-provider-aws internal/service/elb/
# service_account_data_source.go, the aws_elb_service_account table, after the ELB User Guide's);
# in regions launched from August 2022 on, the log-delivery service principal instead (ELB User
# Guide, Application Load Balancers, enable-access-logging.html).
# Facts: reference/upstream/alb-access-logs-facts.json.
ELB_ACCOUNTS = {
    "af-south-1": "098369216593",
    "ap-east-1": "754344448648",
    "ap-northeast-1": "582318560864",
    "ap-northeast-2": "600734575887",
    "ap-northeast-3": "383597477331",
    "ap-south-1": "718504428378",
    "ap-southeast-1": "114774131450",
    "ap-southeast-2": "783225319266",
    "ap-southeast-3": "589379963580",
    "ca-central-1": "985666609251",
    "cn-north-1": "638102146993",
    "cn-northwest-1": "037604701340",
    "eu-central-1": "054676820928",
    "eu-north-1": "897822967062",
    "eu-south-1": "635631232127",
    "eu-west-1": "156460612806",
    "eu-west-2": "652711504416",
    "eu-west-3": "009996457667",
    "me-south-1": "076674570225",
    "sa-east-1": "507241528517",
    "us-east-1": "127311923021",
    "us-east-2": "033677994240",
    "us-gov-east-1": "190560391635",
    "us-gov-west-1": "048591011584",
    "us-west-1": "027434742980",
    "us-west-2": "797873946194",
}
ELB_LOG_DELIVERY_PRINCIPAL = "logdelivery.elasticloadbalancing.amazonaws.com"


@dataclass(frozen=True)
class SubnetPlan:
    """CIDRs of the subnets of one new VPC."""

    private: list[str]
    public: list[str]
    load_balancer: list[str]
    """Private subnets where only internal load balancers take addresses (no nodes, no pods)."""


def associated_cidrs(primary: str, associations: Any) -> list[str]:
    """The VPC's primary block and every block associated with it (EC2 DescribeVpcs
    ``CidrBlockAssociationSet``, which lists the primary too), in that order, without duplicates;
    blocks being disassociated or that failed are left out."""
    blocks = [primary]
    for association in associations or []:
        state = invoke_field(association, "state")
        block = invoke_field(association, "cidr_block")
        if block and state in (None, "associated", "associating"):
            blocks.append(block)
    return list(dict.fromkeys(blocks))


def invoke_field(value: Any, name: str) -> Any:
    """A field of an invoke result's nested object: typed (snake_case attribute) or, as an Output
    invoke may hand it over, a plain dict (either spelling)."""
    if isinstance(value, dict):
        camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
        return value.get(name, value.get(camel))
    return getattr(value, name, None)


def plan_subnets(vpc_cidr: str, zones: int) -> SubnetPlan:
    """Split the VPC into quarters: one large private subnet per AZ (pods take VPC addresses, so
    nodes need room), and the last quarter cut into four: small public subnets for internet-facing
    load balancers, and the fourth cut again into one small private subnet per AZ for internal
    load balancers. Those keep the ALB's or NLB's addresses out of the pod subnets, so the
    NetworkPolicy can admit the load balancer without admitting every pod (VPC CNI gives pods
    addresses of the node subnets)."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    quarters = list(vpc.subnets(prefixlen_diff=2))
    if not 2 <= zones <= 3:
        raise ValueError(f"zones must be 2 or 3, got {zones}")
    last = list(quarters[3].subnets(prefixlen_diff=2))
    load_balancer = list(last[3].subnets(prefixlen_diff=2))
    return SubnetPlan(
        private=[str(q) for q in quarters[:zones]],
        public=[str(p) for p in last[:zones]],
        load_balancer=[str(b) for b in load_balancer[:zones]],
    )


@dataclass
class NetworkInputs:
    """Inputs of ``Network``."""

    cluster_name: str
    """EKS cluster name, for the subnet discovery tags."""
    region: str
    """AWS region (for the S3 endpoint's service name)."""
    tags: dict[str, str]
    """Tags on every resource."""
    vpc_cidr: str = "10.42.0.0/16"
    """CIDR of the new VPC (ignored when ``vpc_id`` is given)."""
    availability_zones: int = 3
    """How many AZs the new VPC spans (ignored when ``vpc_id`` is given)."""
    vpc_id: pulumi.Input[str] | None = None
    """Bring your own VPC: its id."""
    private_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    """Bring your own VPC: private subnets for nodes."""
    public_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    """Bring your own VPC: public subnets for internet-facing load balancers."""
    load_balancer_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    """Bring your own VPC: private subnets only internal load balancers use (no pods)."""
    nat_gateway_per_zone: bool = False
    """The VPC the program creates: one NAT gateway per AZ instead of one for all."""
    flow_logs: bool = False
    """VPC flow logs (all traffic) to a CloudWatch log group, for the VPC created or yours."""
    access_logs_days: int | None = None
    """ALB access logs: a bucket for them, whose objects expire after this many days (None: none)."""


class Network(pulumi.ComponentResource):
    """A VPC for the cluster, or a thin wrapper around the ids of an existing one."""

    vpc_id: pulumi.Output[str]
    """The VPC's id."""
    vpc_cidr: pulumi.Output[str]
    """The VPC's primary CIDR."""
    vpc_cidrs: pulumi.Output[list[str]]
    """Every CIDR block of the VPC: the primary and, in your own VPC, its associated ones (nodes and
    pods may sit in secondary blocks, e.g. with custom networking); what NetworkPolicies name."""
    private_subnet_ids: pulumi.Output[list[str]]
    """Subnets for nodes and internal load balancers."""
    public_subnet_ids: pulumi.Output[list[str]]
    """Subnets for internet-facing load balancers (may be empty for your own VPC)."""
    private_subnet_cidrs: pulumi.Output[list[str]]
    """CIDRs of the private subnets (where an internal load balancer gets its addresses)."""
    public_subnet_cidrs: pulumi.Output[list[str]]
    """CIDRs of the public subnets (where an internet-facing load balancer gets its addresses)."""
    load_balancer_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Subnets to name on the Ingress or Service of an internal load balancer: your
    ``load_balancer_subnet_ids``; empty for the VPC the program creates, whose load-balancer
    subnets alone carry the controller's discovery tag."""
    internal_load_balancer_cidrs: pulumi.Output[list[str]]
    """CIDRs an internal load balancer takes its addresses from: the load-balancer subnets, or,
    in your VPC without ``load_balancer_subnet_ids``, the private subnets (settings warn)."""
    access_logs_bucket: pulumi.Output[str] | None
    """The bucket the ALB writes its access logs to (None without ``access_logs_days``)."""

    def __init__(self, name: str, args: NetworkInputs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:Network", name, None, opts)
        if args.vpc_id:
            self.vpc_id = pulumi.Output.from_input(args.vpc_id)
            vpc = aws.ec2.get_vpc_output(id=args.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self))
            self.vpc_cidr = vpc.cidr_block
            self.vpc_cidrs = pulumi.Output.all(vpc.cidr_block, vpc.cidr_block_associations).apply(
                lambda v: associated_cidrs(v[0], v[1])
            )
            # Lists of Inputs or an Output of the list (components/wiring.py), as the subnets' ids.
            self.private_subnet_ids = _ids(args.private_subnet_ids)
            self.public_subnet_ids = _ids(args.public_subnet_ids)
            self.private_subnet_cidrs = self._cidrs_of(args.private_subnet_ids or [])
            self.public_subnet_cidrs = self._cidrs_of(args.public_subnet_ids or [])
            # An Output of the whole list stays one (components/wiring.py); its manifests resolve it.
            self.load_balancer_subnet_ids = args.load_balancer_subnet_ids or []
            self.internal_load_balancer_cidrs = (
                self._cidrs_of(self.load_balancer_subnet_ids)
                if self.load_balancer_subnet_ids
                else self.private_subnet_cidrs
            )
        else:
            self._create(name, args)
        if args.flow_logs:
            self._flow_logs(name, args)
        self.access_logs_bucket = None
        if args.access_logs_days is not None:
            self.access_logs_bucket = self._access_logs(name, args, args.access_logs_days)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "vpcCidr": self.vpc_cidr,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    def _create(self, name: str, args: NetworkInputs) -> None:
        child = pulumi.ResourceOptions(parent=self)
        plan = plan_subnets(args.vpc_cidr, args.availability_zones)
        zones = aws.get_availability_zones_output(
            state="available",
            filters=[
                aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])
            ],
            opts=pulumi.InvokeOutputOptions(parent=self),
        ).names
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**args.tags, "Name": name},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**args.tags, "Name": name}, opts=child
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**args.tags, "Name": f"{name}-public"},
            opts=child,
        )
        # Only load balancers live in the public subnets, with their own addresses.
        public = self._tier(
            name, "public", plan.public, zones, vpc, [public_rt], {"kubernetes.io/role/elb": "1"}, args
        )
        # One NAT gateway by default, not one per AZ: nodes only pull images and weights through
        # it, and a second or third would add ~$65 a month each to an otherwise idle stack. With
        # nat_gateway_per_zone each AZ gets its own (in its public subnet) and its private subnets
        # route through it, so losing one AZ does not cut the others off (AWS VPC User Guide, NAT
        # gateways: a NAT gateway is zonal; create one per AZ for zone independence).
        nat_zones = len(public) if args.nat_gateway_per_zone else 1
        private_rts = [self._nat_route_table(name, i, public[i], vpc, igw, args) for i in range(nat_zones)]
        # The internal-elb discovery tag only on the load-balancer subnets (AWS Load Balancer
        # Controller subnet auto-discovery; EKS Auto Mode's controller reads the same tag), so
        # internal load balancers never take addresses where pods live.
        private_tags = {"karpenter.sh/discovery": args.cluster_name}
        private = self._tier(name, "private", plan.private, zones, vpc, private_rts, private_tags, args)
        lb_tags = {"kubernetes.io/role/internal-elb": "1"}
        self._tier(name, "lb", plan.load_balancer, zones, vpc, private_rts, lb_tags, args)
        # S3 traffic (weights, image layers from ECR's S3) skips the NAT gateway: free and faster.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags={**args.tags, "Name": f"{name}-s3"},
            opts=child,
        )
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        self.vpc_cidrs = vpc.cidr_block.apply(lambda c: [c])
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private]).apply(list)
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public]).apply(list)
        self.private_subnet_cidrs = pulumi.Output.from_input(list(plan.private))
        self.public_subnet_cidrs = pulumi.Output.from_input(list(plan.public))
        self.load_balancer_subnet_ids = []
        self.internal_load_balancer_cidrs = pulumi.Output.from_input(list(plan.load_balancer))

    def _flow_logs(self, name: str, args: NetworkInputs) -> None:
        """All of the VPC's traffic to a CloudWatch log group kept a year, written by a role only
        the flow-logs service can assume, allowed to write that group only (pulumi-aws FlowLog,
        CloudWatch example: principal vpc-flow-logs.amazonaws.com, the logs:* write actions)."""
        child = pulumi.ResourceOptions(parent=self)
        group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs", retention_in_days=FLOW_LOG_RETENTION_DAYS, tags=args.tags, opts=child
        )
        role = aws.iam.Role(
            f"{name}-flow-logs",
            assume_role_policy=json.dumps(service_trust_policy("vpc-flow-logs.amazonaws.com")),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-flow-logs",
            role=role.id,
            policy=group.arn.apply(lambda arn: json.dumps(flow_logs_policy(log_group_arn=arn))),
            opts=child,
        )
        aws.ec2.FlowLog(
            f"{name}-flow-logs",
            vpc_id=self.vpc_id,
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_destination=group.arn,
            iam_role_arn=role.arn,
            tags=args.tags,
            opts=child,
        )

    def _access_logs(self, name: str, args: NetworkInputs, days: int) -> pulumi.Output[str]:
        """A private bucket the ALB may write its logs to, under ACCESS_LOGS_PREFIX/AWSLogs/<this
        account>/ only. SSE-S3: the only server-side encryption ALB access logs support (ELB User
        Guide, enable-access-logging.html). Kept when the stack goes (audit records); its
        objects expire after ``days``."""
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        partition = aws.get_partition_output(opts=invoke).partition
        bucket = private_bucket(
            f"{name}-access-logs",
            child,
            force_destroy=False,
            tags=args.tags,
            grants=lambda arn: pulumi.Output.all(account, partition).apply(
                lambda v: access_log_writers(arn, args.region, account_id=v[0], partition=v[1])
            ),
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-access-logs",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-access-logs",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=f"{ACCESS_LOGS_PREFIX}/"),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=days),
                )
            ],
            opts=child,
        )
        return bucket.bucket

    def _nat_route_table(
        self,
        name: str,
        zone: int,
        public_subnet: aws.ec2.Subnet,
        vpc: aws.ec2.Vpc,
        igw: aws.ec2.InternetGateway,
        args: NetworkInputs,
    ) -> aws.ec2.RouteTable:
        """A NAT gateway in ``public_subnet`` and the private route table through it; zone 0 keeps
        the names the single NAT gateway always had, so turning the option on only adds."""
        suffix = "" if zone == 0 else f"-{zone}"
        child = pulumi.ResourceOptions(parent=self)
        eip = aws.ec2.Eip(
            f"{name}-nat{suffix}", domain="vpc", tags={**args.tags, "Name": f"{name}-nat{suffix}"}, opts=child
        )
        nat = aws.ec2.NatGateway(
            f"{name}-nat{suffix}",
            allocation_id=eip.id,
            subnet_id=public_subnet.id,
            tags={**args.tags, "Name": f"{name}-nat{suffix}"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
        )
        return aws.ec2.RouteTable(
            f"{name}-private{suffix}",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags={**args.tags, "Name": f"{name}-private{suffix}"},
            opts=child,
        )

    def _cidrs_of(self, subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]) -> pulumi.Output[list[str]]:
        """The CIDR of each of your own subnets, read from EC2 (an Output of the list: once known)."""
        if not isinstance(subnet_ids, Sequence):  # an Output (or awaitable) of the whole list
            return pulumi.Output.from_input(subnet_ids).apply(self._cidrs_of)  # type: ignore[arg-type]
        opts = pulumi.InvokeOutputOptions(parent=self)
        return pulumi.Output.all(
            *[aws.ec2.get_subnet_output(id=i, opts=opts).cidr_block for i in subnet_ids]
        ).apply(list)

    def _tier(
        self,
        name: str,
        tier: str,
        cidrs: list[str],
        zones: pulumi.Output[list[str]],
        vpc: aws.ec2.Vpc,
        route_tables: list[aws.ec2.RouteTable],
        tier_tags: dict[str, str],
        args: NetworkInputs,
    ) -> list[aws.ec2.Subnet]:
        """One subnet per AZ, no public IPs on launch, the i-th on the i-th route table (or the
        only one)."""
        child = pulumi.ResourceOptions(parent=self)
        subnets = []
        for i, cidr in enumerate(cidrs):
            subnet = aws.ec2.Subnet(
                f"{name}-{tier}-{i}",
                vpc_id=vpc.id,
                cidr_block=cidr,
                availability_zone=zones[i],
                map_public_ip_on_launch=False,
                tags={**args.tags, "Name": f"{name}-{tier}-{i}", **tier_tags},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-{tier}-{i}",
                subnet_id=subnet.id,
                route_table_id=route_tables[i % len(route_tables)].id,
                opts=child,
            )
            subnets.append(subnet)
        return subnets


def _ids(ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None) -> pulumi.Output[list[str]]:
    """Subnet ids given as a list of Inputs or an Input of a list, as one Output of the list."""
    return pulumi.Output.from_input(ids or []).apply(list)  # type: ignore[arg-type]


def access_log_writers(
    bucket_arn: str, region: str, *, account_id: str, partition: str
) -> list[dict[str, Any]]:
    """The bucket-policy statement letting Elastic Load Balancing write this account's ALB logs
    under ACCESS_LOGS_PREFIX (the object key it writes: <prefix>/AWSLogs/<account>/...)."""
    elb_account = ELB_ACCOUNTS.get(region)
    principal = (
        {"AWS": f"arn:{partition}:iam::{elb_account}:root"}
        if elb_account
        else {"Service": ELB_LOG_DELIVERY_PRINCIPAL}
    )
    return [
        {
            "Sid": "ElbWritesAccessLogs",
            "Effect": "Allow",
            "Principal": principal,
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/{ACCESS_LOGS_PREFIX}/AWSLogs/{account_id}/*",
        }
    ]
