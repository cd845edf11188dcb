"""Data at rest and in transit: EBS volumes, node disks and StorageClasses are encrypted; every S3
bucket has server-side encryption, a policy denying non-TLS requests, and blocks public access (all
four flags, no ACL or policy granting everyone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import (
    KARPENTER_NODECLASS_GROUP,
    Props,
    Resource,
    as_list,
    get_in,
    is_kind,
    object_name,
    policy_document,
    truthy,
)
from .iam import condition_elements, condition_operator, iam_matches, is_everyone, narrows_who, unnarrowed

EBS_PROVISIONERS = ("ebs.csi.aws.com", "ebs.csi.eks.amazonaws.com", "kubernetes.io/aws-ebs")


def encrypted_volumes(token: str, props: Props) -> list[str]:
    if is_kind(token, "storage.k8s.io", "StorageClass") and props.get("provisioner") in EBS_PROVISIONERS:
        if not truthy(get_in(props, "parameters", "encrypted")):
            name = object_name(props)
            return [f"StorageClass {name} makes unencrypted EBS volumes: set parameters.encrypted 'true'"]
        return []
    if is_kind(token, KARPENTER_NODECLASS_GROUP, "EC2NodeClass"):
        mappings, where = as_list(get_in(props, "spec", "blockDeviceMappings")), "spec.blockDeviceMappings"
    elif token == "aws:ec2/launchTemplate:LaunchTemplate":
        mappings, where = as_list(props.get("blockDeviceMappings")), "blockDeviceMappings"
    elif token == "aws:ebs/volume:Volume":
        return [] if truthy(props.get("encrypted")) else ["EBS volume is not encrypted: set encrypted true"]
    else:
        return []
    return [
        f"{where}[{i}].ebs.encrypted is not true: encrypt the volume"
        for i, mapping in enumerate(mappings)
        if get_in(mapping, "ebs") is not None and not truthy(get_in(mapping, "ebs", "encrypted"))
    ]


SECURE_TRANSPORT = "aws:securetransport"


def _false(value: Any) -> bool:
    """A Bool condition value IAM reads as false: JSON false or the string "false" in any case
    ("False " with a space, "no" or "0" is no boolean and never matches)."""
    return value is False or (isinstance(value, str) and value.lower() == "false")


def insecure_transport_flaw(statement: Any) -> str | None:
    """Why a Deny statement on ``aws:SecureTransport`` does not refuse every request made without
    TLS, "" when it does, None when it is no such statement. It must deny everyone (Principal
    ``*``), at least ``s3:GetObject``, on ``Bool`` (or ``BoolIfExists``) ``aws:SecureTransport``
    ``false`` alone: any other value never matches (the key is a boolean) and any other test is
    ANDed with it, so requests without TLS that fail that test are let through."""
    if not isinstance(statement, Mapping) or statement.get("Effect") != "Deny":
        return None
    elements = condition_elements(statement.get("Condition"))
    tls = [(op, key, values) for op, key, values in elements if key.lower() == SECURE_TRANSPORT]
    if not tls:
        return None
    flaws = []
    for operator, _, values in tls:
        _, base, _ = condition_operator(operator)
        if base != "bool":
            flaws.append(
                f"tests aws:SecureTransport with {operator}, which never matches a request without TLS"
            )
        elif not values or not all(_false(v) for v in values):
            shown = ", ".join(repr(v) for v in values)
            flaws.append(f"compares aws:SecureTransport to {shown}: only false matches a request without TLS")
    if others := [f"{op} {key}" for op, key, _ in elements if key.lower() != SECURE_TRANSPORT]:
        flaws.append(f"also requires {', '.join(others)}, so requests without TLS that fail it are allowed")
    if "NotPrincipal" in statement or not is_everyone(statement.get("Principal")):
        flaws.append('denies only some principals: set Principal "*"')
    actions = [str(a) for a in as_list(statement.get("Action"))]
    not_actions = [str(a) for a in as_list(statement.get("NotAction"))]
    covers_reads = (
        any(iam_matches(a, "s3:GetObject") for a in actions)
        if "Action" in statement
        else not any(iam_matches(a, "s3:GetObject") for a in not_actions)
    )
    if not covers_reads:
        flaws.append("does not deny s3:GetObject")
    return "; ".join(flaws)


def tls_only_problems(document: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """(whether a statement of the policy refuses requests without TLS, why each statement that
    tries to falls short)."""
    found, flaws = False, []
    for index, statement in enumerate(as_list(document.get("Statement"))):
        flaw = insecure_transport_flaw(statement)
        if flaw == "":
            found = True
        elif flaw:
            flaws.append(f"statement {get_in(statement, 'Sid') or f'#{index}'} {flaw}")
    return found, flaws


def _feeds(resource: Resource, bucket: Resource) -> bool:
    """``resource`` names ``bucket`` in its ``bucket`` input (by dependency, or by the bucket's name)."""
    if bucket.urn and bucket.urn in resource.property_dependencies.get("bucket", ()):
        return True
    name = bucket.props.get("bucket")
    return bool(name) and resource.props.get("bucket") == name


def buckets_encrypted_tls_only(resources: list[Resource]) -> list[tuple[str, str]]:
    problems = []
    for bucket in (r for r in resources if r.type in BUCKET_TYPES):
        related = [r for r in resources if r is not bucket and _feeds(r, bucket)]
        encrypted = bool(bucket.props.get("serverSideEncryptionConfiguration")) or any(
            r.type.endswith(
                (":BucketServerSideEncryptionConfiguration", ":BucketServerSideEncryptionConfigurationV2")
            )
            for r in related
        )
        tls_only, flaws = False, list[str]()
        for holder in [bucket, *(r for r in related if r.type == "aws:s3/bucketPolicy:BucketPolicy")]:
            document = policy_document(holder.props.get("policy")) if holder.props.get("policy") else None
            if document is not None:
                found, why = tls_only_problems(document)
                tls_only, flaws = tls_only or found, [*flaws, *why]
        label = bucket.name or bucket.urn
        if not encrypted:
            problems.append((bucket.urn, f"bucket {label} has no server-side encryption configuration"))
        if not tls_only:
            because = f": its policy's {'; '.join(flaws)}" if flaws else ""
            problems.append(
                (
                    bucket.urn,
                    f"bucket {label} has no policy denying requests without TLS (aws:SecureTransport false)"
                    + because,
                )
            )
    return problems


BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
BUCKET_ACL_TYPES = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
# The four switches of S3 Block Public Access (aws:s3/bucketPublicAccessBlock inputs); each left
# off lets one path to a public bucket open (ACLs set, ACLs honoured, policies set, policies honoured).
PUBLIC_ACCESS_FLAGS = ("blockPublicAcls", "ignorePublicAcls", "blockPublicPolicy", "restrictPublicBuckets")
# Canned ACLs that grant the AllUsers group (S3 User Guide, Canned ACL), and the grantee groups
# that mean everyone or every AWS account.
PUBLIC_CANNED_ACLS = frozenset({"public-read", "public-read-write"})
PUBLIC_GRANTEE_GROUPS = ("/global/AllUsers", "/global/AuthenticatedUsers")


def public_statements(document: Mapping[str, Any]) -> list[str]:
    """Labels of the Allow statements that grant anyone (Principal "*") with no condition that
    narrows who: none, or one whose tests admit any caller (``aws:SecureTransport``, ``IpAddress
    aws:SourceIp 0.0.0.0/0``, ``StringLike aws:SourceVpce *``, an ``...IfExists`` test)."""
    return [
        str(get_in(statement, "Sid") or f"#{index}") + unnarrowed(statement)
        for index, statement in enumerate(as_list(document.get("Statement")))
        if get_in(statement, "Effect") == "Allow"
        and is_everyone(get_in(statement, "Principal"))
        and not narrows_who(get_in(statement, "Condition"))
    ]


def _public_acl(resource: Resource) -> str | None:
    acl = resource.props.get("acl")
    if acl in PUBLIC_CANNED_ACLS:
        return f"acl {acl}"
    for grant in as_list(get_in(resource.props, "accessControlPolicy", "grants")):
        uri = str(get_in(grant, "grantee", "uri") or "")
        if uri.endswith(PUBLIC_GRANTEE_GROUPS):
            return f"a grant to {uri}"
    return None


def buckets_not_public(resources: list[Resource]) -> list[tuple[str, str]]:
    """Every bucket blocks public access with all four flags, and no ACL or policy makes it public."""
    problems = []
    for bucket in (r for r in resources if r.type in BUCKET_TYPES):
        related = [r for r in resources if r is not bucket and _feeds(r, bucket)]
        label = bucket.name or bucket.urn
        blocks = [r for r in related if r.type == PUBLIC_ACCESS_BLOCK]
        if not blocks:
            problems.append(
                (
                    bucket.urn,
                    f"bucket {label} has no BucketPublicAccessBlock: add one with all four flags true",
                )
            )
        elif off := [f for f in PUBLIC_ACCESS_FLAGS if not any(truthy(b.props.get(f)) for b in blocks)]:
            problems.append(
                (bucket.urn, f"bucket {label}'s BucketPublicAccessBlock leaves {', '.join(off)} off")
            )
        for holder in [bucket, *(r for r in related if r.type in BUCKET_ACL_TYPES)]:
            if why := _public_acl(holder):
                problems.append((holder.urn, f"bucket {label} is public through {why}: make it private"))
        for holder in [bucket, *(r for r in related if r.type == BUCKET_POLICY)]:
            problems.extend(_public_policy(holder, f"bucket {label}'s policy"))
    # A policy for a bucket this stack does not create (named by a literal) makes that bucket public
    # just the same.
    attached = {r.urn for b in resources if b.type in BUCKET_TYPES for r in resources if _feeds(r, b)}
    for policy in (r for r in resources if r.type == BUCKET_POLICY and r.urn not in attached):
        problems.extend(_public_policy(policy, f"the policy of bucket {policy.props.get('bucket')}"))
    return problems


BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"


def _public_policy(holder: Resource, what: str) -> list[tuple[str, str]]:
    document = policy_document(holder.props.get("policy")) if holder.props.get("policy") else None
    if document is None or not (public := public_statements(document)):
        return []
    return [
        (
            holder.urn,
            f'{what} grants everyone (Principal "*") in statement {", ".join(public)}: name the '
            "principals, or narrow them with aws:PrincipalOrgID, aws:SourceVpce or aws:SourceIp",
        )
    ]
