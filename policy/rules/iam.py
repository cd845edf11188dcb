"""Least-privilege IAM: no wildcard actions, Resource '*' only for documented read and listener calls,
no broad AWS managed policy, no PassRole on any role, trust policies that name who may assume a role;
and the reading of policy conditions (which keys and operators narrow who a statement applies to)
that the bucket rules share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from deepseek_eks.settings import cidrs as _CIDRS

from .base import Props, as_list, get_in, open_to_world, platform_fact, policy_document

# Allow statements may use "Resource": "*" only where components/platform/iam_policies.py documents it:
# read actions (Describe/List/Get), which take no resource-level permissions, and the load
# balancer controller's listener and rule calls (see load_balancer_controller_policy there).
READ_VERBS = ("Describe", "List", "Get")
STAR_RESOURCE_EXCEPTIONS = frozenset(
    {
        "elasticloadbalancing:CreateListener",
        "elasticloadbalancing:CreateRule",
        "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:DeleteRule",
        "elasticloadbalancing:AddListenerCertificates",
        "elasticloadbalancing:ModifyListener",
        "elasticloadbalancing:ModifyRule",
        "elasticloadbalancing:RemoveListenerCertificates",
        "elasticloadbalancing:SetRulePriorities",
    }
)
POLICY_DOCUMENT_INPUTS = {
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/policy:Policy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
    "aws:s3/bucketPolicy:BucketPolicy": "policy",
    "aws:sqs/queuePolicy:QueuePolicy": "policy",
}
# Actions that return the data itself, not metadata about it: on "Resource": "*" they read every
# object, secret, key or parameter the account holds, so the Describe/List/Get exception never
# covers them (names as in the AWS Service Authorization Reference; compared case-insensitively,
# as IAM compares actions).
DATA_READ_ACTIONS = frozenset(
    action.lower()
    for action in (
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:GetObjectAttributes",
        "secretsmanager:GetSecretValue",
        "secretsmanager:BatchGetSecretValue",
        "kms:Decrypt",
        "kms:ReEncryptFrom",
        "ssm:GetParameter",
        "ssm:GetParameters",
        "ssm:GetParametersByPath",
        "ssm:GetParameterHistory",
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:Scan",
        "sqs:ReceiveMessage",
        "logs:GetLogEvents",
        "logs:FilterLogEvents",
    )
)
TYPED_DATA_SERVICES = frozenset({"secretsmanager", "ssm", "kms", "dynamodb"})
POLICY_ARN_INPUTS = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "policyArn",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment": "policyArn",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment": "policyArn",
    "aws:iam/policyAttachment:PolicyAttachment": "policyArn",
    "aws:iam/role:Role": "managedPolicyArns",
    "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive": "policyArns",
    "aws:iam/userPolicyAttachmentsExclusive:UserPolicyAttachmentsExclusive": "policyArns",
    "aws:iam/groupPolicyAttachmentsExclusive:GroupPolicyAttachmentsExclusive": "policyArns",
}


# How IAM evaluates a Condition block (IAM User Guide, "IAM JSON policy elements: Condition
# operators" and "Conditions with multiple context keys or values"): operators, and keys under one
# operator, are ANDed, the values of one key ORed; a key absent from the request makes a plain
# operator false but an ``...IfExists`` operator true, and ``ForAllValues:`` true; a ``Not``
# operator matches everything but its values. So a statement is narrowed to some callers only by a
# positive test of a key that says who calls or from where, with values that do not match anyone.

# Global condition keys that say who makes a request, or from which network or resource (IAM User
# Guide, "AWS global condition context keys": properties of the principal, of the network, of the
# resource and of the request's source). Others (aws:SecureTransport, aws:UserAgent, aws:Referer,
# aws:CurrentTime...) let any caller through.
IDENTITY_CONDITION_KEYS = frozenset(
    key.lower()
    for key in (
        "aws:SourceIp",
        "aws:VpcSourceIp",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "aws:PrincipalAccount",
        "aws:PrincipalArn",
        "aws:PrincipalOrgID",
        "aws:PrincipalOrgPaths",
        "aws:PrincipalServiceName",
        "aws:SourceAccount",
        "aws:SourceArn",
        "aws:SourceOrgID",
        "aws:SourceOrgPaths",
        "aws:SourceOwner",
        "aws:userid",
        "aws:username",
    )
)
POSITIVE_OPERATORS = frozenset(
    {"stringequals", "stringequalsignorecase", "stringlike", "arnequals", "arnlike", "ipaddress"}
)
LIKE_OPERATORS = frozenset({"stringlike", "arnlike"})
# Prefixes every ID of a kind shares: ``vpce-*`` is any VPC endpoint of any account, ``o-*`` any
# organization.
GENERIC_ID_PREFIXES = frozenset({"", "vpce", "vpc", "o", "arn", "arn:aws"})


def condition_elements(condition: Any) -> list[tuple[str, str, list[Any]]]:
    """(operator, key, values) of every test in a Condition block."""
    if not isinstance(condition, Mapping):
        return []
    return [
        (str(operator), str(key), as_list(values))
        for operator, tests in condition.items()
        if isinstance(tests, Mapping)
        for key, values in tests.items()
    ]


def condition_operator(operator: str) -> tuple[str, str, bool]:
    """(set qualifier, base operator, IfExists) of ``ForAnyValue:StringLikeIfExists`` and the like,
    lower case."""
    qualifier, _, base = operator.lower().rpartition(":")
    exists = base.endswith("ifexists")
    return qualifier, base.removesuffix("ifexists"), exists


def _narrow_value(value: Any, like: bool) -> bool:
    """True when one condition value names particular callers: not a pattern matching everything
    and, for the Like operators, not a pattern that only repeats what every ID of a kind starts
    with (``vpce-*``, ``arn:aws:iam::*:role/x`` names any account's role)."""
    text = str(value)
    if not text or matches_everything(text):
        return False
    if not like:
        return True
    literal = re.split(r"[*?]", text, maxsplit=1)[0]
    if literal.startswith("arn:"):
        parts = literal.split(":")
        # The account (or, for S3, the bucket name) must be spelled out before any wildcard.
        return len(parts) >= 6 and (parts[4] != "" or parts[5] != "")
    return literal.rstrip("-:") not in GENERIC_ID_PREFIXES


def narrowing_test(operator: str, key: str, values: list[Any]) -> bool:
    """Whether one condition test admits only some callers (see the section comment)."""
    qualifier, base, if_exists = condition_operator(operator)
    if key.lower() not in IDENTITY_CONDITION_KEYS or base not in POSITIVE_OPERATORS:
        return False
    if if_exists or qualifier == "forallvalues" or not values:
        return False
    if base == "ipaddress":
        cidrs = [str(v) for v in values]
        return not _CIDRS.parse(cidrs)[1] and open_to_world(cidrs) is None
    return all(_narrow_value(v, base in LIKE_OPERATORS) for v in values)


def narrows_who(condition: Any) -> bool:
    """True when a Condition block admits only some callers: one of its tests (they are ANDed)
    narrows them."""
    return any(narrowing_test(*element) for element in condition_elements(condition))


def unnarrowed(statement: Mapping[str, Any]) -> str:
    """`` with no condition`` or `` (its condition <tests> does not narrow who)`` for a message."""
    elements = condition_elements(get_in(statement, "Condition"))
    if not elements:
        return " with no condition"
    tests = "; ".join(f"{op} {key} {values}" for op, key, values in elements)
    return f" (its condition {tests} does not narrow who: it admits any caller)"


WILDCARDS = "*?"
PASS_ROLE = "iam:PassRole"
# The actions that assume a role: a trust policy allowing one of them to everyone lets any AWS
# account in (sts:AssumeRole, AssumeRoleWithWebIdentity, AssumeRoleWithSAML; TagSession and
# SetSourceIdentity ride along with them).
ASSUME_ROLE_ACTIONS = ("sts:AssumeRole", "sts:AssumeRoleWithWebIdentity", "sts:AssumeRoleWithSAML")


def _wild(value: str) -> bool:
    return any(c in value for c in WILDCARDS)


def matches_everything(value: str) -> bool:
    """True for a pattern of wildcards alone with a ``*`` in it (``*``, ``**``, ``?*``): it matches
    every string, as ``"Resource": "*"`` does."""
    return bool(value) and "*" in value and set(value) <= set(WILDCARDS)


def iam_matches(pattern: str, value: str) -> bool:
    """Whether an IAM pattern matches ``value`` as IAM matches actions: ``*`` any run of
    characters, ``?`` any one character, letters compared case-insensitively (IAM User Guide,
    "IAM JSON policy elements: Action")."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL) is not None


def _star_resource_allowed(actions: list[str]) -> bool:
    return all(
        not any(iam_matches(a, data) for data in DATA_READ_ACTIONS)
        and (a in STAR_RESOURCE_EXCEPTIONS or a.split(":", 1)[-1].startswith(READ_VERBS))
        for a in actions
    )


def wildcard_arn(resource: str) -> bool:
    """True when an ARN's resource name (after the account field, up to the first ``/`` or ``:``)
    holds a wildcard: ``arn:aws:s3:::*`` or ``arn:aws:s3:::bucket*`` match every bucket, or every
    bucket sharing a prefix, where ``arn:aws:s3:::bucket/*`` names one bucket's objects and
    ``arn:aws:ec2:*:*:instance/*`` one resource type; for data services the name after the type
    (``secret:*``, ``parameter/*``) counts as well."""
    parts = resource.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        return False
    segments = re.split(r"[/:]", parts[5])
    if _wild(segments[0]):
        return True
    # Where the ARN names a resource type first (secret:, parameter/, key/, table/), a name that
    # opens with a wildcard matches every secret, parameter, key or table of the account.
    return parts[2] in TYPED_DATA_SERVICES and len(segments) > 1 and segments[1].startswith(("*", "?"))


def passes_any_role(resource: str) -> bool:
    """True when an ``iam:PassRole`` resource matches roles by pattern from the first character of
    their name: ``*``, ``arn:aws:iam::*:role/*``, ``role/?*``, ``role/service-role/*``. Passing any
    role of the account to a service the holder controls (an instance, a function, a pod) lends it
    that role's permissions, an administrator's included. A name with a literal prefix
    (``role/KarpenterNodeRole-*``) or an exact ARN is the holder's own choice and passes."""
    if matches_everything(resource):
        return True
    parts = resource.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        return False
    service, name = parts[2], parts[5]
    if service.lower() != "iam" and not _wild(service):
        return False
    if name[:1] in WILDCARDS or not name:
        return True
    kind, _, rest = name.partition("/")
    if kind.lower() != "role" and not _wild(kind):
        return False
    role = rest.rsplit("/", 1)[-1]
    return not role or role[0] in WILDCARDS


def _managed_policies() -> dict[str, Mapping[str, Any]]:
    """The AWS managed policies the pack refuses, by name (facts.json aws_managed_policies, from
    reference/upstream/aws-managed-policies.json)."""
    return {str(p["name"]): p for p in as_list(platform_fact("aws_managed_policies", "too_broad"))}


def too_broad_managed_policy(arn: str) -> str | None:
    """Why attaching the managed policy ``arn`` grants too much, or None: the AWS managed policies
    of facts.json (AdministratorAccess, PowerUserAccess, the job-function/SystemAdministrator,
    NetworkAdministrator, DatabaseAdministrator and DataScientist policies, IAMFullAccess,
    AmazonS3ReadOnlyAccess), and by name any ``AdministratorAccess*`` or ``*FullAccess`` policy:
    each grants a whole service or the whole account. Matched on the name after the last ``/``, so
    a job-function policy is caught under its real path (``policy/job-function/...``) and any other."""
    name = arn.rsplit("/", 1)[-1]
    if known := _managed_policies().get(name):
        return str(known["why"])
    if name.startswith("AdministratorAccess"):
        return "administrator access"
    if name.endswith("FullAccess"):
        return "every action of a service"
    return None


def wildcard_problems(document: Mapping[str, Any]) -> list[str]:
    """Wildcard actions (``*`` or ``?``), ``Resource: "*"`` outside the documented exceptions,
    wildcard ARNs and ``iam:PassRole`` on any role, in Allow statements (a Deny with a wildcard
    only narrows access)."""
    problems = []
    for index, statement in enumerate(as_list(document.get("Statement"))):
        if get_in(statement, "Effect") != "Allow":
            continue
        label = get_in(statement, "Sid") or f"#{index}"
        if "NotAction" in statement or "NotResource" in statement:
            problems.append(f"statement {label}: NotAction/NotResource in an Allow grants everything else")
        actions = [str(a) for a in as_list(get_in(statement, "Action"))]
        if wild := [a for a in actions if _wild(a)]:
            problems.append(f"statement {label}: wildcard action(s) {', '.join(wild)}")
        resources = [str(r) for r in as_list(get_in(statement, "Resource"))]
        if any(matches_everything(r) for r in resources) and not _star_resource_allowed(actions):
            others = [a for a in actions if not _star_resource_allowed([a])]
            problems.append(
                f'statement {label}: "Resource": "*" for {", ".join(others)} (not a documented exception)'
            )
        if wild_arns := [r for r in resources if wildcard_arn(r)]:
            problems.append(
                f"statement {label}: wildcard ARN(s) {', '.join(wild_arns)} match resources by pattern: "
                "name each bucket, queue or key"
            )
        passes = [a for a in actions if iam_matches(a, PASS_ROLE)]
        if passes and (any_role := [r for r in resources if passes_any_role(r)]):
            problems.append(
                f"statement {label}: {', '.join(passes)} on {', '.join(any_role)} lets the holder hand any "
                "role of the account, an administrator's too, to a service it controls: name the role's ARN"
            )
    return problems


def open_trust_problems(document: Mapping[str, Any]) -> list[str]:
    """Allow statements of a role's trust policy that let everyone (Principal ``*``, or ``AWS``
    ``*``) assume it with no condition that narrows who: any AWS account could take the role."""
    return [
        f'statement {get_in(statement, "Sid") or f"#{index}"}: lets everyone (Principal "*") assume the '
        f"role{unnarrowed(statement)}: name the principals, or add aws:PrincipalOrgID/aws:PrincipalAccount"
        for index, statement in enumerate(as_list(document.get("Statement")))
        if get_in(statement, "Effect") == "Allow"
        and is_everyone(get_in(statement, "Principal"))
        and any(
            iam_matches(a, t)
            for a in map(str, as_list(get_in(statement, "Action")))
            for t in ASSUME_ROLE_ACTIONS
        )
        and not narrows_who(get_in(statement, "Condition"))
    ]


def no_wildcard_iam(token: str, props: Props) -> list[str]:
    documents: list[tuple[str, Any]] = []
    if token in POLICY_DOCUMENT_INPUTS:
        documents.append((POLICY_DOCUMENT_INPUTS[token], props.get(POLICY_DOCUMENT_INPUTS[token])))
    if token == "aws:iam/role:Role":
        for index, inline in enumerate(as_list(props.get("inlinePolicies"))):
            documents.append((f"inlinePolicies[{index}].policy", get_in(inline, "policy")))
    problems: list[str] = []
    if token in POLICY_ARN_INPUTS:
        where = POLICY_ARN_INPUTS[token]
        problems.extend(
            f"{where} {arn} grants wildcard access ({why}): attach a least-privilege policy"
            for arn in map(str, as_list(props.get(where)))
            if (why := too_broad_managed_policy(arn))
        )
    for where, raw in documents:
        document = policy_document(raw)
        if document is not None:
            problems.extend(f"{where}: {p}" for p in wildcard_problems(document))
    if token == "aws:iam/role:Role" and (trust := policy_document(props.get("assumeRolePolicy"))) is not None:
        problems.extend(f"assumeRolePolicy: {p}" for p in open_trust_problems(trust))
    return problems


def is_everyone(principal: Any) -> bool:
    """Principal ``*``, or an ``AWS`` principal with a wildcard (``*``, ``arn:aws:iam::*:root``)."""
    if isinstance(principal, str):
        return _wild(principal)
    return isinstance(principal, Mapping) and any(_wild(str(p)) for p in as_list(principal.get("AWS")))
