"""A strict, recording Pulumi mocks class: runs ``build()`` with no cloud and no CLI.

Every resource registration is recorded with its inputs. Computed outputs (ids, ARNs, names,
endpoints, kubeconfig) are made up per type token, deterministically, so a re-render is
byte-identical. A type or invoke this class does not know fails loudly instead of returning
``{}``: a silent empty answer would hide a wrong token or a missing mock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks
from pulumi.runtime.mocks import MockMonitor

from deepseek_eks.components.deployed_state import READ_STACK_RESOURCE_OUTPUTS

ACCOUNT_ID = "123456789012"
SECRET_MASK = "[secret]"  # what every secret value becomes in a render
REGION = "us-east-1"


@dataclass(frozen=True)
class Recorded:
    """One registered resource: its type token, logical name, inputs and the state returned."""

    type: str
    name: str
    inputs: dict[str, Any]
    state: dict[str, Any]
    custom: bool
    urn: str = ""
    parent: str = ""  # the parent's URN; "" for the stack's own children
    aliases: tuple[str, ...] = ()  # every old URN this resource answers to (its own + inherited)
    # input name -> URNs of the resources whose outputs fed it (what a policy pack sees as
    # property dependencies)
    dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The provider reference (``<provider urn>::<id>``) of a custom resource; "" for the default
    # provider (the SDK sends none) and for components.
    provider: str = ""


def _short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


# Realistic id prefixes of EC2 resources (the rest get "<name>-<hash>").
ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc-",
    "aws:ec2/subnet:Subnet": "subnet-",
    "aws:ec2/internetGateway:InternetGateway": "igw-",
    "aws:ec2/routeTable:RouteTable": "rtb-",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc-",
    "aws:ec2/eip:Eip": "eipalloc-",
    "aws:ec2/natGateway:NatGateway": "nat-",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce-",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt-",
}


def resource_id(token: str, name: str) -> str:
    prefix = ID_PREFIXES.get(token)
    return f"{prefix}{_short_hash(token + name, 17)}" if prefix else f"{name}-{_short_hash(token + name)}"


@dataclass(frozen=True)
class MockContext:
    """What an output function knows: the registration, its id and the stack's region."""

    args: MockResourceArgs
    id: str
    region: str

    @property
    def inputs(self) -> dict[str, Any]:
        return self.args.inputs

    def physical_name(self) -> str:
        """The name AWS would auto-name the resource with (the input name if one was given)."""
        return str(self.inputs.get("name") or f"{self.args.name}-{_short_hash(self.args.name, 7)}")


def _cluster(ctx: MockContext) -> dict[str, Any]:
    name = ctx.inputs.get("name", ctx.args.name)
    endpoint = f"https://{_short_hash(name, 32).upper()}.gr7.{ctx.region}.eks.amazonaws.com"
    token_exec = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": ["eks", "get-token", "--cluster-name", name],
    }
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": endpoint, "certificate-authority-data": "LS0tLS1CRUdJTg=="}}
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {"exec": token_exec}}],
    }
    auto_mode = bool((ctx.inputs.get("autoMode") or {}).get("enabled"))
    return {
        "kubeconfig": kubeconfig,
        "kubeconfigJson": json.dumps(kubeconfig),
        "clusterSecurityGroupId": f"sg-{_short_hash(name + 'cluster', 17)}",
        "nodeSecurityGroupId": f"sg-{_short_hash(name + 'node', 17)}",
        "autoModeNodeRoleName": f"{name}-auto-mode-node" if auto_mode else "",
        "oidcIssuer": f"oidc.eks.{ctx.region}.amazonaws.com/id/{_short_hash(name, 32).upper()}",
    }


def _arn_of(service: str, kind: str, regional: bool = True) -> OutputFn:
    def outputs(ctx: MockContext) -> dict[str, Any]:
        name = ctx.physical_name()
        region = ctx.region if regional else ""
        return {"arn": f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{kind}{name}", "name": name}

    return outputs


def _queue(ctx: MockContext) -> dict[str, Any]:
    name = ctx.physical_name()
    return {
        "arn": f"arn:aws:sqs:{ctx.region}:{ACCOUNT_ID}:{name}",
        "url": f"https://sqs.{ctx.region}.amazonaws.com/{ACCOUNT_ID}/{name}",
        "name": name,
    }


def _ec2(kind: str) -> OutputFn:
    def outputs(ctx: MockContext) -> dict[str, Any]:
        return {"arn": f"arn:aws:ec2:{ctx.region}:{ACCOUNT_ID}:{kind}/{ctx.id}"}

    return outputs


def _none(ctx: MockContext) -> dict[str, Any]:
    return {}


OutputFn = Callable[[MockContext], dict[str, Any]]
# Computed outputs by exact type token, for the cloud-side resources the program creates.
COMPUTED_OUTPUTS: dict[str, OutputFn] = {
    "eks:index:Cluster": _cluster,
    "aws:ec2/vpc:Vpc": _ec2("vpc"),
    "aws:ec2/subnet:Subnet": _ec2("subnet"),
    "aws:ec2/internetGateway:InternetGateway": _ec2("internet-gateway"),
    "aws:ec2/routeTable:RouteTable": _ec2("route-table"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": _none,
    "aws:ec2/eip:Eip": lambda ctx: {"allocationId": ctx.id, "publicIp": "198.51.100.10"},
    "aws:ec2/natGateway:NatGateway": _ec2("natgateway"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": _ec2("vpc-endpoint"),
    "aws:ec2/flowLog:FlowLog": _ec2("vpc-flow-log"),
    "aws:cloudwatch/logGroup:LogGroup": _arn_of("logs", "log-group:"),
    "aws:ec2/launchTemplate:LaunchTemplate": lambda ctx: {**_ec2("launch-template")(ctx), "latestVersion": 1},
    "aws:iam/role:Role": _arn_of("iam", "role/", regional=False),
    "aws:iam/rolePolicy:RolePolicy": _none,
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": _none,
    "aws:eks/accessEntry:AccessEntry": _none,
    "aws:eks/nodeGroup:NodeGroup": lambda ctx: {"status": "ACTIVE", **_arn_of("eks", "nodegroup/")(ctx)},
    "aws:eks/addon:Addon": lambda ctx: {"addonVersion": "v1.0.0-eksbuild.1"},
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": lambda ctx: {"associationId": f"a-{ctx.id}"},
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _ec2("security-group-rule"),
    "aws:route53/record:Record": lambda ctx: {"fqdn": ctx.inputs.get("name", "")},
    "aws:sqs/queue:Queue": _queue,
    "aws:sqs/queuePolicy:QueuePolicy": _none,
    "aws:cloudwatch/eventRule:EventRule": _arn_of("events", "rule/"),
    "aws:cloudwatch/eventTarget:EventTarget": _none,
    "aws:s3/bucket:Bucket": lambda ctx: {
        "bucket": (bucket := f"{ctx.args.name}-{_short_hash(ctx.args.name, 7)}"),
        "arn": f"arn:aws:s3:::{bucket}",
        "bucketRegionalDomainName": f"{bucket}.s3.{ctx.region}.amazonaws.com",
    },
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _none,
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _none,
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _none,
    "aws:s3/bucketPolicy:BucketPolicy": _none,
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": _none,
    "aws:kms/key:Key": lambda ctx: {
        "arn": f"arn:aws:kms:{ctx.region}:{ACCOUNT_ID}:key/{uuid.uuid5(uuid.NAMESPACE_URL, ctx.args.name)}",
        "keyId": str(uuid.uuid5(uuid.NAMESPACE_URL, ctx.args.name)),
    },
    "aws:kms/alias:Alias": lambda ctx: {
        "arn": f"arn:aws:kms:{ctx.region}:{ACCOUNT_ID}:{ctx.inputs.get('name', '')}"
    },
    # pulumi-random, computed locally by its provider: a fixed stand-in keeps renders stable.
    "random:index/randomPassword:RandomPassword": lambda ctx: {"result": "mock-generated-password-000000"},
}  # fmt: skip


def _zones(args: MockCallArgs, region: str) -> dict[str, Any]:
    names = [f"{region}{z}" for z in "abc"]
    return {"id": region, "names": names, "zoneIds": [f"use1-az{i}" for i in (1, 2, 4)], "groupNames": names}


EXISTING_SERVICE_CIDR = "10.96.0.0/16"

# Invokes the program may make, with realistic answers; any other invoke fails.
INVOKES: dict[str, Callable[[MockCallArgs, str], dict[str, Any]]] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": _zones,
    "aws:index/getCallerIdentity:getCallerIdentity": lambda a, r: {
        "accountId": ACCOUNT_ID,
        "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/deployer",
        "userId": "AIDAEXAMPLE",
        "id": ACCOUNT_ID,
    },
    # Your own VPC: its primary block and a secondary one (100.64.0.0/16, as EKS custom networking
    # gives pods); DescribeVpcs lists the primary among the associations too.
    "aws:ec2/getVpc:getVpc": lambda a, r: {
        "id": a.args["id"],
        "cidrBlock": "10.20.0.0/16",
        "cidrBlockAssociations": [
            {
                "associationId": "vpc-cidr-assoc-0a1b2c3d4e5f60001",
                "cidrBlock": "10.20.0.0/16",
                "state": "associated",
            },
            {
                "associationId": "vpc-cidr-assoc-0a1b2c3d4e5f60002",
                "cidrBlock": "100.64.0.0/16",
                "state": "associated",
            },
        ],
        "arn": f"arn:aws:ec2:{r}:{ACCOUNT_ID}:vpc/{a.args['id']}",
        "state": "available",
    },
    # An existing cluster, created with its own service CIDR (kubernetesNetworkConfig).
    "aws:eks/getCluster:getCluster": lambda a, r: {
        "id": a.args["name"],
        "name": a.args["name"],
        "arn": f"arn:aws:eks:{r}:{ACCOUNT_ID}:cluster/{a.args['name']}",
        "kubernetesNetworkConfigs": [{"ipFamily": "ipv4", "serviceIpv4Cidr": EXISTING_SERVICE_CIDR}],
        "status": "ACTIVE",
    },
    # Your own subnets: a /20 of 10.20.0.0/16 chosen from the id, so each subnet has its own.
    "aws:ec2/getSubnet:getSubnet": lambda a, r: {
        "id": a.args["id"],
        "cidrBlock": f"10.20.{16 * (int(_short_hash(a.args['id']), 16) % 16)}.0/20",
        "vpcId": "vpc-0123456789abcdef0",
        "arn": f"arn:aws:ec2:{r}:{ACCOUNT_ID}:subnet/{a.args['id']}",
    },
    "aws:index/getPartition:getPartition": lambda a, r: {
        "partition": "aws",
        "dnsSuffix": "amazonaws.com",
        "reverseDnsPrefix": "com.amazonaws",
        "id": "aws",
    },
}


class UnmockedError(RuntimeError):
    """A type token or invoke the mocks do not know: add it to the table with realistic outputs."""


class RecordingMocks(Mocks):
    """Strict mocks that record every resource and invoke (see module docstring)."""

    def __init__(self, region: str = REGION, previous: dict[str, dict[str, Any]] | None = None) -> None:
        """``previous``: the stack's last update as the engine's readStackResourceOutputs gives it
        (URN -> ``{type, outputs}``); none (the default) is a first deployment."""
        self.region = region
        self.resources: list[Recorded] = []
        self.invokes: list[MockCallArgs] = []
        self.previous = previous or {}

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict]:
        token = args.typ
        inputs = dict(args.inputs)
        if token.startswith("pulumi:providers:"):
            state = inputs
        elif token.startswith("deepseek-eks:"):
            state = {}  # our own components; their children register themselves
        elif token.startswith("kubernetes:"):
            state = {**inputs, "status": None}
        elif token in COMPUTED_OUTPUTS:
            ctx = MockContext(args, resource_id(token, args.name), self.region)
            state = {**inputs, **COMPUTED_OUTPUTS[token](ctx)}
        else:
            raise UnmockedError(
                f"no mock for resource type {token!r} ({args.name}): DeepSeekService never creates it, "
                "so it is your program's. Answer it in a subclass of deepseek_eks.testing.Mocks "
                "(override new_resource, return the outputs the real provider computes, defer to "
                "super() for the rest) and pass it as run(..., mocks=...)"
            )
        where: tuple[str, str, tuple[str, ...], dict[str, tuple[str, ...]]]
        where = getattr(_registering, "urns", ("", "", (), {}))
        urn, parent, aliases, dependencies = where
        self.resources.append(
            Recorded(
                token,
                args.name,
                inputs,
                state,
                bool(args.custom),
                urn,
                parent,
                aliases,
                dependencies,
                provider=args.provider or "",
            )
        )
        return resource_id(token, args.name), state

    def call(self, args: MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        self.invokes.append(args)
        if args.token == READ_STACK_RESOURCE_OUTPUTS:  # the engine's builtin (deployed_state.py)
            return {"name": args.args["stackName"], "outputs": self.previous}, []
        if args.token in INVOKES:
            return INVOKES[args.token](args, self.region), []
        raise UnmockedError(
            f"no mock for invoke {args.token!r}: DeepSeekService never calls it, so your program does. "
            "Answer it in a subclass of deepseek_eks.testing.Mocks (override call, defer to super() "
            "for the rest) and pass it as run(..., mocks=...)"
        )

    def of_type(self, token: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == token]

    def named(self, name: str) -> Recorded:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]


# The URN, parent and alias URNs of the registration being handled on this thread; the monitor
# sets it around ``Mocks.new_resource``, which only receives type, name and inputs.
_registering = threading.local()
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


class AliasRecordingMonitor(MockMonitor):
    """pulumi's mock monitor, also resolving each registration's aliases to URNs as the engine does.

    The SDK sends alias *specs* (name/type/parent, each defaulting to the resource's own) and
    leaves the aliases a child inherits from its parent's aliases to the engine
    (pulumi/pulumi ``sdk/python/lib/pulumi/runtime/resource.py`` ``prepare_aliases``; engine side
    ``pkg/resource/deploy/step_generator.go`` ``generateAliases``/``inheritedChildAlias``).
    """

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.alias_urns: dict[str, tuple[str, ...]] = {}
        self.names: dict[str, str] = {}

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives: the parent's whole type chain, without the root stack's type
        (pulumi/pulumi ``pkg/resource/deploy/step_generator.go`` ``generateURN``; the stock mock
        keeps only the parent's last type and keeps the stack's)."""
        if parent:
            parent_type = parent.split("::")[2]
            if parent_type != ROOT_STACK_TYPE:
                type_ = f"{parent_type}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_}::{name}"

    def _own_aliases(self, request: Any) -> list[str]:
        """The URN of each alias given on the resource itself."""
        own = list(request.aliasURNs)
        for alias in request.aliases:
            if alias.WhichOneof("alias") == "urn":
                own.append(alias.urn)
                continue
            spec = alias.spec
            parent = "" if spec.noParent else (spec.parentUrn or request.parent)
            own.append(self.make_urn(parent, spec.type or request.type, spec.name or request.name))
        return own

    def _aliases(self, request: Any) -> tuple[str, ...]:
        urns = self._own_aliases(request)
        # Under each old URN of the parent, the child (by its name and by each of its own aliases)
        # had an old URN too; a child named "<parent>-x" was named after the parent, so its old
        # name follows the parent's old name.
        parent_name = self.names.get(request.parent, "")
        candidates = [(request.type, request.name), *(_type_and_name(urn) for urn in urns)]
        for parent_alias in self.alias_urns.get(request.parent, ()):
            old_parent_name = parent_alias.rsplit("::", 1)[-1]
            for typ, name in candidates:
                if parent_name and name.startswith(parent_name):
                    name = old_parent_name + name[len(parent_name) :]
                urns.append(self.make_urn(parent_alias, typ, name))
        return tuple(sorted(set(urns)))

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        aliases = self._aliases(request)
        self.alias_urns[urn] = aliases
        self.names[urn] = request.name
        dependencies = {key: tuple(deps.urns) for key, deps in request.propertyDependencies.items()}
        _registering.urns = (urn, request.parent, aliases, dependencies)
        try:
            return super().RegisterResource(request)
        finally:
            _registering.urns = ("", "", (), {})


def _type_and_name(urn: str) -> tuple[str, str]:
    """The resource type and name a URN ends with (``urn:pulumi:stack::project::a$b::name``)."""
    qualified_type, name = urn.split("::", 3)[2:]
    return qualified_type.split("$")[-1], name


class ProgramLog(logging.Handler):
    """What a program logs under the mocks (``pulumi.log.warn`` and the rest), kept for the command
    to show once instead of written to stderr by each run: a command that renders a stack several
    times (``simulate --compare``, ``diff``, ``urns``) would otherwise repeat every warning."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[int, str]] = []
        self.logger = logging.Logger(f"deepseek-eks.program.{id(self)}")  # not in logging's tree
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warnings and errors logged, each once, in order."""
        return tuple(dict.fromkeys(m for level, m in self.records if level >= logging.WARNING))


def run_with_mocks(
    program: Callable[[], dict[str, Any]],
    mocks: RecordingMocks,
    *,
    project: str,
    stack: str,
    config: dict[str, str],
    secret_keys: list[str],
    secret_mask: str = SECRET_MASK,
    log: ProgramLog | None = None,
) -> dict[str, Any]:
    """Run ``program`` under ``mocks`` in a fresh Pulumi runtime and event loop.

    ``program`` returns the stack outputs; they come back resolved, each secret output replaced
    by ``secret_mask``. Global runtime state is reset before and after, so runs in one process do
    not leak into each other. What the program logs goes to ``log`` when given, else to Python's
    root logger (stderr), as under ``pulumi.runtime.set_mocks``.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    resolved: dict[str, Any] = {}

    async def collect(outputs: dict[str, Any]) -> None:
        for key, value in outputs.items():
            output = pulumi.Output.from_input(value)
            plain = await output.future()
            resolved[key] = secret_mask if await output.is_secret() else plain

    try:
        pulumi.runtime.settings.reset_options(project=project, stack=stack, preview=False)
        pulumi.runtime.set_mocks(
            mocks,
            project=project,
            stack=stack,
            preview=False,
            logger=log.logger if log is not None else None,
            monitor=AliasRecordingMonitor(mocks),
        )
        pulumi.runtime.set_all_config(config, secret_keys)

        @pulumi.runtime.test
        def _run() -> pulumi.Output:
            return pulumi.Output.from_input(asyncio.ensure_future(collect(program())))

        _run()
    finally:
        # A failed program leaves futures holding the error it raised here; their __del__ would
        # report it again ("exception was never retrieved") whenever the garbage collector runs, and
        # when that is inside compile() (an import), CPython 3.11 fails it with "SystemError: AST
        # constructor recursion depth mismatch".
        loop.set_exception_handler(lambda _loop, _context: None)
        pulumi.runtime.settings.reset_options()
        pulumi.runtime.set_all_config({}, [])
        loop.close()
        asyncio.set_event_loop(None)
    return resolved
