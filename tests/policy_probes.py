"""Hostile inputs for the policy pack: each probe is a small stack (the resources as the pack sees
them), what it does wrong, and the one rule that must refuse it.

The pack guards other programs too (a platform team runs it on every stack), so the probes are
written by hand the way another program could register them: IAM policies, roles and trust
policies, bucket policies, security groups and load balancers, pods, RBAC objects, Helm releases,
and look-alikes of the objects the pack allows for a known chart. tests/rendered/test_policy_probes.py
runs the pack over each and requires exactly its rule to fire (so a probe does not pass by accident
through another rule), and over stacks this program renders with hostile settings.

Each probe is otherwise clean: a bucket has encryption, a TLS-only policy and a public access block;
an internet-facing endpoint has TLS; every image is pinned.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deepseek_eks.policy.rules import Resource

# Six blocks, 64.0.0.0 to 189.255.255.255: 49.2 % of IPv4 (under the old "half of IPv4" line) and
# most of its public space.
NEAR_WORLD = ["64.0.0.0/2", "128.0.0.0/3", "160.0.0.0/4", "176.0.0.0/5", "184.0.0.0/6", "188.0.0.0/7"]
HALVES = ["0.0.0.0/1", "128.0.0.0/1"]
ACCOUNT = "123456789012"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ROLE = "aws:iam/role:Role"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_V2 = "aws:s3/bucketV2:BucketV2"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
SG = "aws:ec2/securityGroup:SecurityGroup"
SG_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE_K8S = "kubernetes:rbac.authorization.k8s.io/v1:Role"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SERVICE = "kubernetes:core/v1:Service"
RELEASE = "kubernetes:helm.sh/v3:Release"
CHART = "kubernetes:helm.sh/v4:Chart"


@dataclass(frozen=True)
class Probe:
    name: str
    what: str
    rule: str
    resources: tuple[Resource, ...]


def _urn(token: str, name: str) -> str:
    return f"urn:pulumi:probe::hostile::{token}::{name}"


def res(token: str, props: dict[str, Any], name: str = "probe", **deps: str) -> Resource:
    return Resource(token, props, _urn(token, name), name, {k: (v,) for k, v in deps.items()})


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def role_policy(*statements: dict[str, Any]) -> tuple[Resource, ...]:
    return (res(ROLE_POLICY, {"role": "app", "policy": policy(*statements)}),)


def attached(arn: str) -> tuple[Resource, ...]:
    return (res(ATTACHMENT, {"role": "app", "policyArn": arn}),)


def trust(*statements: dict[str, Any]) -> tuple[Resource, ...]:
    return (res(ROLE, {"assumeRolePolicy": policy(*statements)}),)


TLS_DENY = {
    "Sid": "DenyInsecureTransport",
    "Effect": "Deny",
    "Principal": "*",
    "Action": "s3:*",
    "Resource": ["arn:aws:s3:::probe-bucket", "arn:aws:s3:::probe-bucket/*"],
    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
}


def bucket_stack(*statements: dict[str, Any], kind: str = BUCKET) -> tuple[Resource, ...]:
    """An encrypted, access-blocked bucket whose policy holds ``statements``."""
    bucket = res(kind, {"bucket": "probe-bucket"}, "bucket")
    on = {"bucket": bucket.urn}
    flags = dict.fromkeys(
        ("blockPublicAcls", "ignorePublicAcls", "blockPublicPolicy", "restrictPublicBuckets"), True
    )
    return (
        bucket,
        res(
            SSE,
            {
                "bucket": "probe-bucket",
                "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}],
            },
            "sse",
            **on,
        ),
        res(PAB, {"bucket": "probe-bucket", **flags}, "pab", **on),
        res(BUCKET_POLICY, {"bucket": "probe-bucket", "policy": policy(*statements)}, "policy", **on),
    )


def tls_deny(**changes: Any) -> dict[str, Any]:
    return {**TLS_DENY, **changes}


def public_read(condition: dict[str, Any] | None = None, principal: Any = "*") -> dict[str, Any]:
    statement = {
        "Sid": "Read",
        "Effect": "Allow",
        "Principal": principal,
        "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::probe-bucket/*",
    }
    return {**statement, "Condition": condition} if condition else statement


def pod(
    *containers: dict[str, Any], kind: str = DEPLOYMENT, name: str = "app", **spec: Any
) -> tuple[Resource, ...]:
    props = {
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": list(containers), **spec},
            }
        },
    }
    return (res(kind, props, name),)


def container(name: str = "app", **security: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "image": "registry.example.com/app:1.2.3"}
    return {**found, "securityContext": security} if security else found


def cluster_role(
    *rules: dict[str, Any], name: str = "probe", kind: str = CLUSTER_ROLE
) -> tuple[Resource, ...]:
    meta = {"name": name} if kind == CLUSTER_ROLE else {"name": name, "namespace": "apps"}
    return (res(kind, {"metadata": meta, "rules": list(rules)}, name),)


def rule(groups: list[str], resources: list[str], verbs: list[str], **extra: Any) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs, **extra}


def binding(role: str, *subjects: dict[str, Any], kind: str = CLUSTER_ROLE_BINDING) -> tuple[Resource, ...]:
    meta = {"name": "probe"} if kind == CLUSTER_ROLE_BINDING else {"name": "probe", "namespace": "apps"}
    props = {
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": list(subjects),
    }
    return (res(kind, props),)


def sa(name: str = "app") -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": "apps"}


def chart_child(chart: str, token: str, props: dict[str, Any]) -> tuple[Resource, ...]:
    """``props`` rendered by a v4 Chart of ``chart`` (the object is the Chart's child)."""
    parent = Resource(
        CHART, {"chart": chart, "version": "1.0.0", "namespace": "x"}, _urn(CHART, chart), chart
    )
    name = f"{chart}:{props['metadata']['name']}"
    child = Resource(
        token, props, f"urn:pulumi:probe::hostile::{CHART}${token}::{name}", name, parent=parent.urn
    )
    return (parent, child)


def ingress(scheme: str, cidrs: list[str]) -> tuple[Resource, ...]:
    annotations = {
        "alb.ingress.kubernetes.io/scheme": scheme,
        "alb.ingress.kubernetes.io/inbound-cidrs": ",".join(cidrs),
        "alb.ingress.kubernetes.io/certificate-arn": f"arn:aws:acm:us-east-1:{ACCOUNT}:certificate/abc",
        "alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS": 443}]',
    }
    return (
        res(
            INGRESS,
            {"metadata": {"name": "api", "namespace": "apps", "annotations": annotations}, "spec": {}},
        ),
    )


def release(
    values: dict[str, Any], chart: str = "some-chart", namespace: str = "apps"
) -> tuple[Resource, ...]:
    props = {"chart": chart, "version": "1.0.0", "namespace": namespace, "name": chart, "values": values}
    return (res(RELEASE, props, chart),)


# KEDA's operator ClusterRole with the chart's default permissions (Secrets read cluster-wide),
# which the project's values turn off; and the LWS controller's role, which keeps that read (a
# CHART_ROLE_GRANTS entry).
KEDA_OPERATOR = {
    "metadata": {"name": "keda-operator"},
    "rules": [rule([""], ["secrets"], ["list", "watch"])],
}
LWS_MANAGER = {
    "metadata": {"name": "lws-manager-role"},
    "rules": [rule([""], ["secrets"], ["get", "list", "update", "watch"])],
}
DCGM = {
    "metadata": {"name": "dcgm-exporter", "namespace": "node-monitoring"},
    "spec": {
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "dcgm-exporter"}},
            "spec": {
                "containers": [
                    {
                        "name": "exporter",
                        "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.5.2-ubuntu22.04",
                        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}},
                    }
                ]
            },
        }
    },
}


def _with_caps(*caps: str) -> dict[str, Any]:
    spec = json.loads(json.dumps(DCGM))
    spec["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = list(caps)
    return spec


PROBES: tuple[Probe, ...] = (
    # --- IAM: PassRole, ? wildcards, broad managed policies, open trust
    Probe(
        "passrole-any-role",
        "iam:PassRole on role/* (any role of the account)",
        "no-wildcard-iam",
        role_policy(allow("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/*")),
    ),
    Probe("passrole-star", 'iam:PassRole on "*"', "no-wildcard-iam", role_policy(allow("iam:PassRole", "*"))),
    Probe(
        "passrole-any-account-role",
        "iam:PassRole on arn:aws:iam::*:role/?*",
        "no-wildcard-iam",
        role_policy(allow("iam:PassRole", "arn:aws:iam::*:role/?*")),
    ),
    Probe(
        "passrole-any-path",
        "iam:PassRole on every role under a path",
        "no-wildcard-iam",
        role_policy(allow("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/service-role/*")),
    ),
    Probe(
        "passrole-question-action",
        "iam:Pass?ole (a ? wildcard action) on one role",
        "no-wildcard-iam",
        role_policy(allow("iam:Pass?ole", f"arn:aws:iam::{ACCOUNT}:role/app")),
    ),
    Probe(
        "question-action-data-read",
        "s3:Get?bject (? wildcard) on one bucket's objects",
        "no-wildcard-iam",
        role_policy(allow("s3:Get?bject", "arn:aws:s3:::probe-bucket/*")),
    ),
    Probe(
        "question-action-star-resource",
        's3:Get?bject on "*" (looks like a read verb)',
        "no-wildcard-iam",
        role_policy(allow("s3:Get?bject", "*")),
    ),
    Probe(
        "star-star-resource",
        'ec2:TerminateInstances on "**" (same as "*")',
        "no-wildcard-iam",
        role_policy(allow("ec2:TerminateInstances", "**")),
    ),
    Probe(
        "question-bucket-arn",
        "a ? wildcard in a bucket ARN",
        "no-wildcard-iam",
        role_policy(allow("s3:GetObject", "arn:aws:s3:::probe-?ucket/*")),
    ),
    Probe(
        "system-administrator",
        "job-function/SystemAdministrator attached",
        "no-wildcard-iam",
        attached("arn:aws:iam::aws:policy/job-function/SystemAdministrator"),
    ),
    Probe(
        "network-administrator",
        "job-function/NetworkAdministrator attached",
        "no-wildcard-iam",
        attached("arn:aws:iam::aws:policy/job-function/NetworkAdministrator"),
    ),
    Probe(
        "database-administrator",
        "job-function/DatabaseAdministrator attached",
        "no-wildcard-iam",
        attached("arn:aws:iam::aws:policy/job-function/DatabaseAdministrator"),
    ),
    Probe(
        "data-scientist",
        "job-function/DataScientist attached",
        "no-wildcard-iam",
        attached("arn:aws:iam::aws:policy/job-function/DataScientist"),
    ),
    Probe(
        "power-user",
        "PowerUserAccess in a role's managedPolicyArns",
        "no-wildcard-iam",
        (res(ROLE, {"managedPolicyArns": ["arn:aws:iam::aws:policy/PowerUserAccess"]}),),
    ),
    Probe(
        "iam-full-access",
        "IAMFullAccess attached",
        "no-wildcard-iam",
        attached("arn:aws:iam::aws:policy/IAMFullAccess"),
    ),
    Probe(
        "s3-read-only-everything",
        "AmazonS3ReadOnlyAccess attached (reads every bucket)",
        "no-wildcard-iam",
        attached("arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"),
    ),
    Probe(
        "govcloud-admin",
        "AdministratorAccess in the GovCloud partition",
        "no-wildcard-iam",
        attached("arn:aws-us-gov:iam::aws:policy/AdministratorAccess"),
    ),
    Probe(
        "trust-everyone",
        'a trust policy letting Principal "*" assume the role',
        "no-wildcard-iam",
        trust({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}),
    ),
    Probe(
        "trust-no-op-condition",
        "a trust policy for everyone, conditioned on TLS only",
        "no-wildcard-iam",
        trust(
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "sts:AssumeRole",
                "Condition": {"Bool": {"aws:SecureTransport": "true"}},
            }
        ),
    ),
    # --- bucket policies whose conditions do nothing
    Probe(
        "tls-deny-not-boolean",
        "the TLS Deny compares aws:SecureTransport to 'no' (never matches)",
        "s3-encrypted-tls-only",
        bucket_stack(tls_deny(Condition={"Bool": {"aws:SecureTransport": "no"}})),
    ),
    Probe(
        "tls-deny-wrong-operator",
        "the TLS Deny tests aws:SecureTransport with StringEquals 'False '",
        "s3-encrypted-tls-only",
        bucket_stack(tls_deny(Condition={"StringEquals": {"aws:SecureTransport": "False "}})),
    ),
    Probe(
        "tls-deny-null",
        "the TLS Deny is Null aws:SecureTransport true (the key is always there)",
        "s3-encrypted-tls-only",
        bucket_stack(tls_deny(Condition={"Null": {"aws:SecureTransport": "true"}})),
    ),
    Probe(
        "tls-deny-anded",
        "the TLS Deny also requires StringLike aws:SourceVpce vpce-1* (ANDed)",
        "s3-encrypted-tls-only",
        bucket_stack(
            tls_deny(
                Condition={
                    "Bool": {"aws:SecureTransport": "false"},
                    "StringLike": {"aws:SourceVpce": "vpce-1*"},
                }
            )
        ),
    ),
    Probe(
        "tls-deny-one-principal",
        "the TLS Deny applies to one account only",
        "s3-encrypted-tls-only",
        bucket_stack(tls_deny(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:root"})),
    ),
    Probe(
        "tls-deny-list-only",
        "the TLS Deny covers s3:ListBucket, not object reads",
        "s3-encrypted-tls-only",
        bucket_stack(tls_deny(Action="s3:ListBucket")),
    ),
    Probe(
        "bucket-v2-no-tls",
        "a BucketV2 with no TLS-only policy",
        "s3-encrypted-tls-only",
        bucket_stack(public_read({"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}}), kind=BUCKET_V2),
    ),
    Probe(
        "public-source-vpce-star",
        'public read "conditioned" on StringLike aws:SourceVpce "*"',
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"StringLike": {"aws:SourceVpce": "*"}})),
    ),
    Probe(
        "public-source-vpce-prefix",
        "public read on StringLike aws:SourceVpce vpce-* (any endpoint)",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"StringLike": {"aws:SourceVpce": "vpce-*"}})),
    ),
    Probe(
        "public-source-ip-world",
        "public read on IpAddress aws:SourceIp 0.0.0.0/0",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}})),
    ),
    Probe(
        "public-source-ip-near-world",
        "public read on aws:SourceIp of six blocks (49 % of IPv4)",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"IpAddress": {"aws:SourceIp": NEAR_WORLD}})),
    ),
    Probe(
        "public-secure-transport",
        "public read on Bool aws:SecureTransport true",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"Bool": {"aws:SecureTransport": "true"}})),
    ),
    Probe(
        "public-if-exists",
        "public read on StringEqualsIfExists aws:SourceVpce (absent key passes)",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"StringEqualsIfExists": {"aws:SourceVpce": "vpce-0abc"}})),
    ),
    Probe(
        "public-negated",
        "public read on StringNotEquals aws:PrincipalAccount (everyone else)",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"StringNotEquals": {"aws:PrincipalAccount": ACCOUNT}})),
    ),
    Probe(
        "public-any-account-root",
        "public read to Principal AWS arn:aws:iam::*:root",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read(principal={"AWS": "arn:aws:iam::*:root"})),
    ),
    Probe(
        "public-any-account-arn",
        "public read on ArnLike aws:PrincipalArn arn:aws:iam::*:role/x",
        "s3-not-public",
        bucket_stack(TLS_DENY, public_read({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/reader"}})),
    ),
    Probe(
        "public-foreign-bucket",
        "a public policy for a bucket the stack does not create",
        "s3-not-public",
        (res(BUCKET_POLICY, {"bucket": "someone-elses-bucket", "policy": policy(public_read())}),),
    ),
    # --- security groups and load balancers open to (nearly) the world
    Probe(
        "sg-near-world",
        "a security group admitting six blocks (49 % of IPv4)",
        "no-world-open-ingress",
        (
            res(
                SG,
                {"ingress": [{"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": NEAR_WORLD}]},
            ),
        ),
    ),
    Probe(
        "sg-rules-add-up",
        "two ingress rules of one group, each under the line, together over it",
        "no-world-open-ingress-sets",
        tuple(
            res(
                SG_INGRESS,
                {"ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv4": c},
                c,
                securityGroupId="urn:sg",
            )
            for c in ("64.0.0.0/5", "72.0.0.0/5")
        ),
    ),
    Probe(
        "ingress-near-world",
        "an internet-facing ALB whose inbound-cidrs are six blocks",
        "endpoint-not-open-to-world",
        ingress("internet-facing", NEAR_WORLD),
    ),
    Probe(
        "internal-ingress-world",
        "an internal ALB admitting 0.0.0.0/1 and 128.0.0.0/1",
        "endpoint-not-open-to-world",
        ingress("internal", HALVES),
    ),
    Probe(
        "internal-service-world",
        "an internal NLB Service with loadBalancerSourceRanges 0.0.0.0/0",
        "endpoint-not-open-to-world",
        (
            res(
                SERVICE,
                {
                    "metadata": {
                        "name": "api",
                        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
                    },
                    "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["0.0.0.0/0"]},
                },
            ),
        ),
    ),
    Probe(
        "cluster-api-near-world",
        "the EKS API endpoint public to six blocks",
        "cluster-endpoint-private-or-limited",
        (
            res(
                "aws:eks/cluster:Cluster",
                {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": NEAR_WORLD}},
            ),
        ),
    ),
    # --- containers
    Probe(
        "cap-sys-admin",
        "a container adding SYS_ADMIN",
        "container-least-privilege",
        pod(container(capabilities={"add": ["SYS_ADMIN"]})),
    ),
    Probe(
        "cap-net-admin",
        "a container adding NET_ADMIN",
        "container-least-privilege",
        pod(container(capabilities={"add": ["NET_ADMIN"]})),
    ),
    Probe(
        "cap-all",
        "a container adding ALL",
        "container-least-privilege",
        pod(container(capabilities={"add": ["ALL"]})),
    ),
    Probe(
        "cap-spelled-cap",
        "an init container adding cap_sys_ptrace (prefix, lower case)",
        "container-least-privilege",
        pod(container(), initContainers=[container("init", capabilities={"add": ["cap_sys_ptrace"]})]),
    ),
    Probe(
        "privilege-escalation",
        "allowPrivilegeEscalation true",
        "container-least-privilege",
        pod(container(allowPrivilegeEscalation=True)),
    ),
    Probe(
        "seccomp-unconfined",
        "a pod seccomp profile Unconfined",
        "container-least-privilege",
        pod(container(), securityContext={"seccompProfile": {"type": "Unconfined"}}),
    ),
    Probe(
        "proc-unmasked",
        "procMount Unmasked",
        "container-least-privilege",
        pod(container(procMount="Unmasked")),
    ),
    Probe(
        "release-values-caps",
        "a Helm release whose values add SYS_ADMIN",
        "container-least-privilege",
        release({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
    ),
    Probe(
        "dcgm-look-alike",
        "a hand-written DaemonSet named like dcgm-exporter adding SYS_ADMIN (no chart)",
        "container-least-privilege",
        (res(DAEMONSET, DCGM, "dcgm-exporter"),),
    ),
    Probe(
        "dcgm-chart-more-caps",
        "dcgm-exporter's chart object adding NET_ADMIN besides SYS_ADMIN",
        "container-least-privilege",
        chart_child("dcgm-exporter", DAEMONSET, _with_caps("SYS_ADMIN", "NET_ADMIN")),
    ),
    Probe("privileged", "a privileged container", "no-host-access", pod(container(privileged=True))),
    Probe("host-network", "hostNetwork true", "no-host-access", pod(container(), hostNetwork=True)),
    Probe("host-pid", "hostPID true", "no-host-access", pod(container(), hostPID=True)),
    Probe(
        "host-path",
        "a hostPath volume of /",
        "no-host-access",
        pod(container(), volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
    ),
    Probe(
        "host-port",
        "a container hostPort",
        "no-host-access",
        pod({**container(), "ports": [{"containerPort": 8080, "hostPort": 8080}]}),
    ),
    Probe(
        "release-values-host-network",
        "a Helm release whose values set hostNetwork true",
        "no-host-access",
        release({"hostNetwork": True}),
    ),
    # --- RBAC
    Probe(
        "rbac-every-verb",
        "a ClusterRole with verbs *",
        "rbac-least-privilege",
        cluster_role(rule(["apps"], ["deployments"], ["*"])),
    ),
    Probe(
        "rbac-every-resource",
        "a ClusterRole on resources *",
        "rbac-least-privilege",
        cluster_role(rule([""], ["*"], ["list"])),
    ),
    Probe(
        "rbac-secrets-get",
        "a ClusterRole that gets every Secret",
        "rbac-least-privilege",
        cluster_role(rule([""], ["secrets"], ["get"])),
    ),
    Probe(
        "rbac-secrets-watch",
        "a ClusterRole that lists and watches Secrets",
        "rbac-least-privilege",
        cluster_role(rule([""], ["secrets"], ["list", "watch"])),
    ),
    Probe(
        "rbac-escalate",
        "a Role with escalate on roles",
        "rbac-least-privilege",
        cluster_role(rule(["rbac.authorization.k8s.io"], ["roles"], ["escalate"]), kind=ROLE_K8S),
    ),
    Probe(
        "rbac-bind",
        "a ClusterRole with bind on clusterroles",
        "rbac-least-privilege",
        cluster_role(rule(["rbac.authorization.k8s.io"], ["clusterroles"], ["bind"])),
    ),
    Probe(
        "rbac-impersonate",
        "a ClusterRole that impersonates users",
        "rbac-least-privilege",
        cluster_role(rule([""], ["users", "groups"], ["impersonate"])),
    ),
    Probe(
        "rbac-exec",
        "a Role that execs into pods",
        "rbac-least-privilege",
        cluster_role(rule([""], ["pods/exec"], ["create", "get"]), kind=ROLE_K8S),
    ),
    Probe(
        "rbac-node-proxy",
        "a ClusterRole on nodes/proxy (the kubelet API)",
        "rbac-least-privilege",
        cluster_role(rule([""], ["nodes/proxy"], ["get"])),
    ),
    Probe(
        "rbac-token",
        "a ClusterRole minting service account tokens",
        "rbac-least-privilege",
        cluster_role(rule([""], ["serviceaccounts/token"], ["create"])),
    ),
    Probe(
        "rbac-cluster-admin",
        "a ClusterRoleBinding of cluster-admin to a service account",
        "rbac-least-privilege",
        binding("cluster-admin", sa()),
    ),
    Probe(
        "rbac-namespace-cluster-admin",
        "a RoleBinding of cluster-admin in a namespace",
        "rbac-least-privilege",
        binding("cluster-admin", sa(), kind=ROLE_BINDING),
    ),
    Probe(
        "rbac-authenticated",
        "a ClusterRoleBinding to Group system:authenticated",
        "rbac-least-privilege",
        binding(
            "view", {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}
        ),
    ),
    Probe(
        "rbac-unauthenticated",
        "a ClusterRoleBinding to Group system:unauthenticated",
        "rbac-least-privilege",
        binding(
            "view",
            {"kind": "Group", "name": "system:unauthenticated", "apiGroup": "rbac.authorization.k8s.io"},
        ),
    ),
    Probe(
        "rbac-anonymous",
        "a RoleBinding to User system:anonymous",
        "rbac-least-privilege",
        binding(
            "view",
            {"kind": "User", "name": "system:anonymous", "apiGroup": "rbac.authorization.k8s.io"},
            kind=ROLE_BINDING,
        ),
    ),
    Probe(
        "rbac-all-service-accounts",
        "a ClusterRoleBinding to every service account",
        "rbac-least-privilege",
        binding(
            "view",
            {"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"},
        ),
    ),
    Probe(
        "keda-chart-default",
        "KEDA's chart with its default Secrets read (the project's values narrow it)",
        "rbac-least-privilege",
        chart_child("keda", CLUSTER_ROLE, KEDA_OPERATOR),
    ),
    Probe(
        "lws-look-alike",
        "a hand-written ClusterRole named lws-manager-role reading Secrets (no chart)",
        "rbac-least-privilege",
        (res(CLUSTER_ROLE, LWS_MANAGER, "lws-manager-role"),),
    ),
    Probe(
        "lws-chart-more",
        "LWS's ClusterRole with every verb on Secrets",
        "rbac-least-privilege",
        chart_child("lws", CLUSTER_ROLE, {**LWS_MANAGER, "rules": [rule([""], ["secrets"], ["*"])]}),
    ),
    Probe(
        "grant-other-chart",
        "lws-manager-role's grant claimed by another chart's object",
        "rbac-least-privilege",
        chart_child("not-lws", CLUSTER_ROLE, LWS_MANAGER),
    ),
    # --- the other rules, one probe each
    Probe(
        "imds-optional",
        "a launch template leaving IMDSv1 on",
        "imdsv2-hop-limit-1",
        (
            res(
                "aws:ec2/launchTemplate:LaunchTemplate",
                {"metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1}},
            ),
        ),
    ),
    Probe(
        "image-latest",
        "an image on the mutable tag latest",
        "pinned-versions",
        pod({"name": "app", "image": "registry.example.com/app:latest"}),
    ),
    Probe(
        "gpu-pool-unbounded",
        "a GPU NodePool with no GPU limit",
        "gpu-nodepool-guarded",
        (
            res(
                "kubernetes:karpenter.sh/v1:NodePool",
                {
                    "metadata": {"name": "gpu"},
                    "spec": {
                        "disruption": {"consolidationPolicy": "WhenEmpty"},
                        "template": {
                            "spec": {
                                "expireAfter": "Never",
                                "requirements": [
                                    {
                                        "key": "karpenter.k8s.aws/instance-family",
                                        "operator": "In",
                                        "values": ["p5"],
                                    }
                                ],
                            }
                        },
                    },
                },
            ),
        ),
    ),
    Probe(
        "unencrypted-volume",
        "an unencrypted EBS volume",
        "encrypted-volumes",
        (res("aws:ebs/volume:Volume", {"availabilityZone": "us-east-1a", "size": 100, "encrypted": False}),),
    ),
    Probe(
        "literal-token",
        "HF_TOKEN as a literal env value",
        "no-plaintext-secrets",
        pod(
            {
                "name": "app",
                "image": "registry.example.com/app:1.2.3",
                "env": [{"name": "HF_TOKEN", "value": "hf_x"}],
            }
        ),
    ),
    Probe(
        "vllm-keyless-exposed",
        "vLLM without an API key behind an internet-facing ALB",
        "api-key-when-exposed",
        (
            *ingress("internet-facing", ["198.51.100.0/24"]),
            *pod({"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}, name="vllm"),
        ),
    ),
    Probe(
        "plain-http-exposed",
        "an internet-facing ALB serving plain HTTP",
        "tls-when-exposed",
        (
            res(
                INGRESS,
                {
                    "metadata": {
                        "name": "api",
                        "namespace": "apps",
                        "annotations": {
                            "alb.ingress.kubernetes.io/scheme": "internet-facing",
                            "alb.ingress.kubernetes.io/inbound-cidrs": "198.51.100.0/24",
                        },
                    },
                    "spec": {},
                },
            ),
        ),
    ),
    Probe(
        "class-params-open",
        "an Ingress made internet-facing by its IngressClassParams, no CIDRs",
        "class-endpoint-not-open-to-world",
        (
            res(
                "kubernetes:elbv2.k8s.aws/v1beta1:IngressClassParams",
                {
                    "metadata": {"name": "public"},
                    "spec": {
                        "scheme": "internet-facing",
                        "certificateARNs": [f"arn:aws:acm:us-east-1:{ACCOUNT}:certificate/a"],
                    },
                },
                "params",
            ),
            res(
                "kubernetes:networking.k8s.io/v1:IngressClass",
                {
                    "metadata": {"name": "public"},
                    "spec": {
                        "controller": "ingress.k8s.aws/alb",
                        "parameters": {
                            "apiGroup": "elbv2.k8s.aws",
                            "kind": "IngressClassParams",
                            "name": "public",
                        },
                    },
                },
                "class",
            ),
            res(
                INGRESS,
                {"metadata": {"name": "api", "namespace": "apps"}, "spec": {"ingressClassName": "public"}},
            ),
        ),
    ),
)

# The objects the look-alike probes imitate, as their chart renders them: allowed.
ALLOWED: tuple[tuple[str, Callable[[], tuple[Resource, ...]]], ...] = (
    ("lws-manager-role as LWS's chart renders it", lambda: chart_child("lws", CLUSTER_ROLE, LWS_MANAGER)),
    ("dcgm-exporter as its chart renders it", lambda: chart_child("dcgm-exporter", DAEMONSET, DCGM)),
    (
        "a bucket read by one organization",
        lambda: bucket_stack(TLS_DENY, public_read({"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}})),
    ),
    (
        "a bucket read through one VPC endpoint",
        lambda: bucket_stack(TLS_DENY, public_read({"StringEquals": {"aws:SourceVpce": "vpce-0abc123"}})),
    ),
    (
        "a bucket read from one office",
        lambda: bucket_stack(TLS_DENY, public_read({"IpAddress": {"aws:SourceIp": "198.51.100.0/24"}})),
    ),
    (
        "a TLS Deny with BoolIfExists and a JSON false",
        lambda: bucket_stack(tls_deny(Condition={"BoolIfExists": {"aws:SecureTransport": False}})),
    ),
    (
        "PassRole of one role, and of a named prefix",
        lambda: role_policy(
            allow(
                "iam:PassRole",
                [f"arn:aws:iam::{ACCOUNT}:role/app", f"arn:aws:iam::{ACCOUNT}:role/KarpenterNodeRole-*"],
            )
        ),
    ),
    (
        "a trust policy for one organization",
        lambda: trust(
            {
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}},
            }
        ),
    ),
    (
        "a Role reading one named Secret",
        lambda: cluster_role(rule([""], ["secrets"], ["get"], resourceNames=["app-config"])),
    ),
    (
        "a namespaced Role reading Secrets",
        lambda: cluster_role(rule([""], ["secrets"], ["get", "list", "watch"]), kind=ROLE_K8S),
    ),
    (
        "a container adding NET_BIND_SERVICE (Baseline allows it)",
        lambda: pod(container(capabilities={"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]})),
    ),
)
