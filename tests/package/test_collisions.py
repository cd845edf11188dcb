"""Two services in one program: what both would create in one cluster fails at construction, naming
both services and the shared object; every error of the component names the service and the
argument as the Python user wrote it."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from deepseek_eks import DeepSeekService, DeepSeekServiceArgs, ServiceError, SettingsError, SizingError
from deepseek_eks.testing import run

NETWORK = {"vpc_id": "vpc-0a1b2c3d4e5f60718", "private_subnet_ids": ["subnet-0a1b2c3d", "subnet-0b1b2c3d"]}


def _joined(cluster: str = "platform", **extra: object) -> DeepSeekServiceArgs:
    return {"existing_cluster": {"cluster_name": cluster}, "network": NETWORK, **extra}  # type: ignore[typeddict-item]


def _two(first: DeepSeekServiceArgs, second: DeepSeekServiceArgs) -> None:
    def program() -> None:
        cluster = k8s.Provider("platform", kubeconfig="{}")
        opts = pulumi.ResourceOptions(providers={"kubernetes": cluster})
        DeepSeekService("team-a", first, opts)
        DeepSeekService("team-b", second, opts)

    run(program, config={"aws:region": "us-east-1"})


def test_both_installing_the_shared_addons_into_one_cluster_fails() -> None:
    with pytest.raises(ServiceError) as error:
        _two(_joined(install_shared_addons=True), _joined(install_shared_addons=True))
    text = str(error.value)
    assert text.startswith("DeepSeekService 'team-b': collides in cluster 'platform'")
    assert "the shared add-ons" in text and "would also be created by DeepSeekService 'team-a'" in text
    for shared in ("kube-prometheus-stack", "keda", "IngressClass alb", "StorageClass gp3-encrypted"):
        assert shared in text, shared


def test_sharing_a_namespace_fails() -> None:
    with pytest.raises(
        ServiceError,
        match=r"'team-b': collides in cluster 'platform': namespace 'ai' would "
        r"also be created by DeepSeekService 'team-a'",
    ):
        _two(_joined(namespace="ai"), _joined(namespace="ai"))


def test_a_namespace_of_the_shared_addons_fails() -> None:
    with pytest.raises(
        ServiceError, match=r"namespace 'monitoring' \(a shared add-on's\) would also be created"
    ):
        _two(_joined(namespace="monitoring"), _joined(install_shared_addons=True))


def test_well_scoped_services_and_other_clusters_construct_together() -> None:
    _two(_joined(install_shared_addons=True), _joined())  # own namespaces, one installs the add-ons
    _two(_joined("one", install_shared_addons=True), _joined("two", install_shared_addons=True))


def test_separate_programs_do_not_see_each_others_services() -> None:
    for _ in range(2):
        _two(_joined(install_shared_addons=True), _joined())


def _one(args: DeepSeekServiceArgs, name: str = "chat") -> None:
    def program() -> None:
        cluster = k8s.Provider("platform", kubeconfig="{}")
        DeepSeekService(name, args, pulumi.ResourceOptions(providers={"kubernetes": cluster}))

    run(program, config={"aws:region": "us-east-1"})


def test_unknown_keys_of_existing_cluster_are_refused_with_the_allowed_ones() -> None:
    args = _joined()
    args["existing_cluster"] = {"cluster_name": "platform", "node_role": "x"}  # type: ignore[typeddict-unknown-key]
    with pytest.raises(SettingsError) as error:
        _one(args)
    text = str(error.value)
    assert "of DeepSeekService 'chat'" in text
    assert "existing_cluster={\"node_role\": ...}: unknown key: did you mean 'node_role_name'?" in text
    assert "it takes cluster_name, node_role_name, node_security_group_ids" in text


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ({"gpu": {"families": ["g6"]}}, 'gpu={"families": ...}: unknown setting'),
        ({"aws": {"profil": "x"}, "create_aws_provider": True}, 'aws={"profil": ...}'),
        (
            {
                "aws": {"assume_roles": [{"role": "arn:aws:iam::123456789012:role/x"}]},
                "create_aws_provider": True,
            },
            'aws={"assume_roles": ...}',
        ),
    ],
    ids=["group", "aws", "assume-role-item"],
)
def test_unknown_keys_of_every_dict_arg_are_refused(args: DeepSeekServiceArgs, shown: str) -> None:
    with pytest.raises(SettingsError) as error:
        _one(args)
    assert "DeepSeekService 'chat'" in str(error.value) and shown in str(error.value)


def test_errors_after_the_settings_name_the_service() -> None:
    args = _joined()
    args["existing_cluster"] = {
        "cluster_name": "platform",
        "node_security_group_ids": ["sg-0a1b2c3d4e5f60718"],
    }
    with pytest.raises(
        ValueError, match=r"^DeepSeekService 'chat': existing_cluster=\{\"node_security_group_ids"
    ):
        _one(args)


def test_an_infeasible_plan_names_the_service_and_stays_a_sizing_error() -> None:
    args = _joined(model={"variant": "r1-distill-llama-70b"}, gpu={"instance_families": ["g4dn"]})
    with pytest.raises(
        SizingError, match=r"^DeepSeekService 'big': No feasible plan for r1-distill-llama-70b"
    ):
        _one(args, "big")
