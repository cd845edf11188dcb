"""cluster.secretsKmsKeyArn: EKS envelope-encrypts Kubernetes Secrets with your KMS key.

pulumi-eks' Cluster takes the key as ``encryptionConfigKeyArn`` (its ``cluster.py``: "KMS Key ARN
to use with the encryption configuration for the cluster"); without the setting none is given.
"""

from __future__ import annotations

import pytest

from deepseek_eks.settings import SettingsError, parse_settings
from tests.conftest import stack_config

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_the_key_reaches_the_cluster(construct) -> None:
    run = construct(stack_config("dev", cluster__secretsKmsKeyArn=KEY))
    (cluster,) = run.mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["encryptionConfigKeyArn"] == KEY
    (plain,) = construct(stack_config("dev")).mocks.of_type("eks:index:Cluster")
    assert "encryptionConfigKeyArn" not in plain.inputs


@pytest.mark.parametrize(
    "value",
    ["alias/eks", "arn:aws:kms:us-east-1:123456789012:alias/eks", "1234abcd-12ab-34cd-56ef-1234567890ab"],
)
def test_anything_but_a_key_arn_is_refused(value: str) -> None:
    with pytest.raises(SettingsError) as raised:
        parse_settings({"deepseek-eks:cluster.secretsKmsKeyArn": value})
    assert "deepseek-eks:cluster.secretsKmsKeyArn" in str(raised.value)
    assert "must be a KMS key ARN" in str(raised.value)
