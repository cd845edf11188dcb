"""A private S3 bucket as the project makes them: default encryption, public access blocked,
ACLs off (bucket owner enforced) and a policy that refuses requests without TLS."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_aws as aws


def tls_only_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Deny any request to the bucket that does not use TLS."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:DeleteObject"],
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def bucket_encryption(kms_key_arn: pulumi.Input[str] | None) -> dict[str, Any]:
    """Default encryption: SSE-KMS with the given key, else SSE-S3."""
    if kms_key_arn:
        return {"sse_algorithm": "aws:kms", "kms_master_key_id": kms_key_arn}
    return {"sse_algorithm": "AES256"}


def private_bucket(
    name: str,
    opts: pulumi.ResourceOptions,
    *,
    force_destroy: bool,
    kms_key_arn: pulumi.Input[str] | None = None,
    grants: Callable[[str], pulumi.Input[list[dict[str, Any]]]] | None = None,
    tags: dict[str, str] | None = None,
) -> aws.s3.Bucket:
    """The bucket and its settings, all named ``name`` under ``opts``; ``grants`` adds the
    statements of the bucket policy that let someone in (given the bucket's ARN)."""
    bucket = aws.s3.Bucket(name, force_destroy=force_destroy, tags=tags, opts=opts)
    aws.s3.BucketServerSideEncryptionConfiguration(
        name,
        bucket=bucket.id,
        rules=[
            aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    **bucket_encryption(kms_key_arn)
                ),
                bucket_key_enabled=True,
            )
        ],
        opts=opts,
    )
    aws.s3.BucketPublicAccessBlock(
        name,
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=opts,
    )
    aws.s3.BucketOwnershipControls(
        name,
        bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=opts,
    )

    allowed: pulumi.Output[list[dict[str, Any]]] = bucket.arn.apply(lambda arn: grants(arn) if grants else [])

    def policy(arn: str, statements: list[dict[str, Any]]) -> str:
        document = tls_only_bucket_policy(arn)
        return json.dumps({**document, "Statement": [*document["Statement"], *statements]})

    aws.s3.BucketPolicy(
        name,
        bucket=bucket.id,
        policy=pulumi.Output.all(bucket.arn, allowed).apply(lambda v: policy(*v)),
        opts=opts,
    )
    return bucket
