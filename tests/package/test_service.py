"""DeepSeekService from typed args: the same validation as the stack settings, the same resources,
outputs as attributes with secrets kept secret."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from deepseek_eks.components import DeepSeekService, DeepSeekServiceArgs
from deepseek_eks.components.placement import PLACEMENT_KEYS
from deepseek_eks.components.service import camel, service_settings
from deepseek_eks.components.service_args import GpuArgs, ModelArgs, ScalingArgs, WeightsArgs
from deepseek_eks.promql import ADAPTER_GPU_METRIC
from deepseek_eks.settings import PROJECT, Settings, SettingsError, parse_settings
from deepseek_eks.settings.model import _GROUPS
from deepseek_eks.testing.mocks import RecordingMocks, run_with_mocks
from tests.conftest import stack_config

PROD_AS_ARGS: DeepSeekServiceArgs = {
    "create_aws_provider": True,  # as the stack program does
    "region": "us-east-1",
    "compute_mode": "karpenter",
    "model": ModelArgs(variant="r1-distill-llama-70b", max_model_len=32768, min_full_length_sequences=2),
    "gpu": GpuArgs(instance_families=["g6e"], capacity_types=["spot", "on-demand"]),
    "autoscaling": ScalingArgs(
        signal="concurrency", seasonal=True, target_kv_cache_usage=0.4, min_replicas=2, max_replicas=4
    ),
    # Pulumi.prod.yaml streams the weights from the project's bucket (a cold start of minutes).
    "weights": WeightsArgs(source="s3"),
    "api_key": "not-a-real-key",
}


def run_service(args: DeepSeekServiceArgs, stack: str = "prod") -> tuple[RecordingMocks, dict[str, Any]]:
    mocks = RecordingMocks(region="us-east-1")
    outputs: dict[str, Any] = {}

    def program() -> dict[str, Any]:
        service = DeepSeekService("deepseek", args)
        outputs.update({name: getattr(service, name) for name in DeepSeekService.__annotations__})
        return outputs

    resolved = run_with_mocks(program, mocks, project=PROJECT, stack=stack, config={}, secret_keys=[])
    return mocks, resolved


@pytest.mark.parametrize("group", sorted(_GROUPS))
def test_args_have_every_setting_of_each_group(group: str) -> None:
    """The typed args cannot drift from the settings model: same fields, in snake_case."""
    args_type = DeepSeekServiceArgs.__annotations__[group]
    assert set(args_type.__annotations__) == set(_GROUPS[group].model_fields)


def test_top_level_args_are_the_settings_fields() -> None:
    settings_fields = set(Settings.model_fields) - {
        "stack",
        "warnings",
        "deploy_blockers",
        "first_run_blockers",
    }  # findings, not inputs
    assert set(DeepSeekServiceArgs.__annotations__) - set(PLACEMENT_KEYS) == settings_fields


def test_bad_args_are_all_reported_at_once_as_the_args_write_them() -> None:
    with pytest.raises(SettingsError) as error:
        service_settings(
            {
                "model": {"max_model_len": 10, "variant": "r2"},
                "autoscaling": {"signal": "vibes", "max_replica": 3},  # type: ignore[typeddict-unknown-key]
                "compute_mode": "fargate",
                "colour": "blue",  # type: ignore[typeddict-unknown-key]
                "endpoint": {"scheme": "internet-facing"},
            },
            "dev",
            "chat",
        )
    text = str(error.value)
    assert text.startswith("8 invalid setting(s) of DeepSeekService 'chat' (stack 'dev'):")
    for shown in (
        'model={"max_model_len": ...} = 10',
        'model={"variant": ...} = "r2"',
        'autoscaling={"signal": ...} = "vibes"',
        'autoscaling={"max_replica": ...}: unknown setting; did you mean autoscaling={"max_replicas": ...}',
        'compute_mode=... = "fargate"',
        "colour=...: unknown setting",
        'endpoint={"allowed_cidrs": ...} = []: required when endpoint={"scheme": ...} is internet-facing',
        'endpoint={"certificate_arn": ...} = null: required when endpoint={"scheme": ...} is internet-facing',
    ):
        assert shown in text, shown
    assert f"{PROJECT}:" not in text and "maxModelLen" not in text and "endpoint.scheme" not in text


def test_a_stack_files_errors_keep_the_stack_file_spelling() -> None:
    with pytest.raises(SettingsError) as error:
        parse_settings({f"{PROJECT}:autoscaling.maxReplica": 3, f"{PROJECT}:computeMode": "x"})
    text = str(error.value)
    assert f"{PROJECT}:autoscaling.maxReplica: unknown setting" in text
    assert f'{PROJECT}:computeMode = "x"' in text


def test_args_render_what_the_equivalent_stack_config_renders(construct) -> None:
    """prod's stack file as args: the same resources with the same inputs, and the same outputs."""
    mocks, outputs = run_service(PROD_AS_ARGS)
    stack = construct(stack_config("prod", secrets={"apiKey": "not-a-real-key"}))

    def inputs(m: RecordingMocks) -> dict[tuple[str, str], Any]:
        return {(r.type, r.name): r.inputs for r in m.resources}

    assert inputs(mocks) == inputs(stack.mocks)
    for key, value in stack.outputs.items():
        assert outputs[_snake(key)] == value, key


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def test_secrets_stay_secret() -> None:
    _, outputs = run_service(PROD_AS_ARGS)
    assert outputs["kubeconfig"] == outputs["grafana_admin_password"] == "[secret]"
    assert outputs["curl"] != "[secret]" and "not-a-real-key" not in outputs["curl"]


def test_args_take_the_typed_path_not_the_config_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 item 8: args reach the validator as Python values (``settings_from_values``), not
    as an engine config map parsed back (``parse_settings``): that front end may fail and the
    service still validates; the stack program's path is the config map (URNs: test_urn_aliases)."""

    def config_map_front_end(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("args went through the config-map parser")

    import deepseek_eks.components.service as service_module
    import deepseek_eks.settings.validate as validate_module

    monkeypatch.setattr(validate_module, "parse_settings", config_map_front_end)
    monkeypatch.setattr(service_module, "parse_settings", config_map_front_end, raising=False)
    args = {k: v for k, v in PROD_AS_ARGS.items() if k != "api_key"}  # a secret needs a running program
    args["aws"] = {"assume_roles": [{"role_arn": "arn:aws:iam::123456789012:role/d"}]}
    settings = service_settings(args, "prod")  # type: ignore[arg-type]
    assert settings.model.variant.value == "r1-distill-llama-70b"
    assert settings.aws.assume_roles[0].role_arn == "arn:aws:iam::123456789012:role/d"
    with pytest.raises(SettingsError) as error:
        service_settings({"model": "r1-671b", "autoscaling": {"max_replica": 3}}, "prod", "chat")  # type: ignore[typeddict-item]
    text = str(error.value)
    assert "model=...: must be a dict of its settings" in text
    assert 'autoscaling={"max_replica": ...}: unknown setting; did you mean' in text


def test_camel_is_the_config_spelling() -> None:
    assert camel("min_full_length_sequences") == "minFullLengthSequences"
    assert camel("grafana") == "grafana"


def test_args_and_settings_together_are_refused() -> None:
    def program() -> dict[str, Any]:
        DeepSeekService("x", {"compute_mode": "karpenter"}, settings=Settings())
        return {}

    with pytest.raises(Exception, match="either args or settings"):
        run_with_mocks(program, RecordingMocks(), project=PROJECT, stack="dev", config={}, secret_keys=[])


def _joining(args: DeepSeekServiceArgs, with_provider: bool = True) -> RecordingMocks:
    import pulumi_kubernetes as k8s

    mocks = RecordingMocks()

    def program() -> dict[str, Any]:
        opts = None
        if with_provider:
            provider = k8s.Provider("existing", kubeconfig="{}")
            opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
        DeepSeekService("team-a", args, opts)
        return {}

    config = {"aws:region": "us-east-1"}
    run_with_mocks(program, mocks, project=PROJECT, stack="dev", config=config, secret_keys=[])
    return mocks


JOIN: DeepSeekServiceArgs = {
    "existing_cluster": {"cluster_name": "platform"},
    "autoscaling": {"signal": "queue-depth"},
    "network": {
        "vpc_id": "vpc-0a1b2c3d4e5f60718",
        "private_subnet_ids": ["subnet-0a1b2c3d", "subnet-0b1b2c3d"],
    },
}
KARPENTER_JOIN: DeepSeekServiceArgs = {
    **JOIN,
    "compute_mode": "karpenter",
    "existing_cluster": {"cluster_name": "platform", "node_role_name": "KarpenterNodeRole-platform"},
}


def test_joining_needs_the_clusters_kubernetes_provider() -> None:
    with pytest.raises(Exception, match="Kubernetes provider as this component's provider"):
        _joining(JOIN, with_provider=False)


def test_joining_needs_the_clusters_vpc() -> None:
    message = r"'team-a': existing_cluster=\{...\}: set network=\{\"vpc_id\": ...\} and"
    with pytest.raises(Exception, match=message):
        _joining({"existing_cluster": {"cluster_name": "platform"}, "autoscaling": {"signal": "queue-depth"}})


def test_joining_a_karpenter_cluster_needs_its_node_role() -> None:
    with pytest.raises(Exception, match=r"existing_cluster\.node_role_name: required with computeMode"):
        _joining({**JOIN, "compute_mode": "karpenter"})


def test_node_security_groups_are_refused_under_auto_mode() -> None:
    joined = {"cluster_name": "platform", "node_security_group_ids": ["sg-0a1b2c3d4e5f60718"]}
    with pytest.raises(Exception, match=r'"node_security_group_ids": ...\}: karpenter mode only'):
        _joining({**JOIN, "existing_cluster": joined})  # type: ignore[typeddict-item]


def _manifests(mocks: RecordingMocks, kind: str) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in mocks.resources
        if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind
    }


# What installing Karpenter with a cluster registers (components/platform/karpenter.py _install_controller).
CONTROLLER_TYPES = (
    "aws:eks/cluster:Cluster",
    "aws:eks/nodeGroup:NodeGroup",
    "aws:eks/addon:Addon",
    "aws:sqs/queue:Queue",
    "aws:cloudwatch/eventRule:EventRule",
    "aws:iam/role:Role",
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ec2/vpc:Vpc",
)


def test_joining_a_karpenter_cluster_adds_only_the_services_node_class_and_pools() -> None:
    mocks = _joining(KARPENTER_JOIN)
    assert not [r.type for r in mocks.resources if r.type in CONTROLLER_TYPES]
    releases = [r.inputs["chart"] for r in mocks.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert "karpenter" not in releases and "aws-load-balancer-controller" not in releases
    classes = _manifests(mocks, "EC2NodeClass")
    assert set(classes) == {"team-a-gpu-inference"}
    spec = classes["team-a-gpu-inference"]["spec"]
    assert spec["role"] == "KarpenterNodeRole-platform"
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0a1b2c3d"}, {"id": "subnet-0b1b2c3d"}]
    assert spec["securityGroupSelectorTerms"] == [{"tags": {"aws:eks:cluster-name": "platform"}}]
    pools = _manifests(mocks, "NodePool")
    # The GPU pool and its on-demand floor; no general CPU pool: the cluster has its own.
    assert set(pools) == {"team-a-gpu-inference", "team-a-gpu-inference-floor"}
    for pool in pools.values():
        assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "team-a-gpu-inference"
    template = pools["team-a-gpu-inference"]["spec"]["template"]
    deployment = next(iter(_manifests(mocks, "Deployment").values()))
    selector = deployment["spec"]["template"]["spec"]["nodeSelector"]
    assert selector.items() <= template["metadata"]["labels"].items()


def test_the_joined_karpenter_clusters_singletons_come_only_with_shared_addons() -> None:
    def singletons(mocks: RecordingMocks) -> set[str]:
        charts = {r.inputs["chart"] for r in mocks.resources if r.type == "kubernetes:helm.sh/v3:Release"}
        classes = {f"StorageClass/{n}" for n in _manifests(mocks, "StorageClass")}
        return (charts & {"nvidia-device-plugin", "kube-prometheus-stack", "keda"}) | classes

    assert singletons(_joining(KARPENTER_JOIN)) == set()
    shared = _joining({**KARPENTER_JOIN, "install_shared_addons": True})
    assert singletons(shared) == {
        "nvidia-device-plugin",
        "kube-prometheus-stack",
        "keda",
        "StorageClass/gp3-encrypted",
    }


def test_joined_gpu_nodes_take_the_given_security_groups() -> None:
    groups = ["sg-0a1b2c3d4e5f60718", "sg-0b1b2c3d4e5f60718"]
    joined = {**KARPENTER_JOIN["existing_cluster"], "node_security_group_ids": groups}
    mocks = _joining({**KARPENTER_JOIN, "existing_cluster": joined})  # type: ignore[typeddict-item]
    spec = _manifests(mocks, "EC2NodeClass")["team-a-gpu-inference"]["spec"]
    assert spec["securityGroupSelectorTerms"] == [{"id": g} for g in groups]


def test_a_service_without_shared_addons_scales_on_gpu_utilization_through_the_clusters_adapter() -> None:
    """The adapter rule another service installed serves every namespace (tests/promql), so this
    service makes only its HPA on the adapter's metric, and no adapter of its own."""
    mocks = _joining({**JOIN, "autoscaling": {"signal": "gpu-utilization"}})
    charts = [r.inputs["chart"] for r in mocks.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert "prometheus-adapter" not in charts
    hpa = next(r.inputs for r in mocks.resources if r.type.startswith("kubernetes:autoscaling/v2:"))
    assert hpa["metadata"]["namespace"] == "team-a"
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == ADAPTER_GPU_METRIC


def test_aws_provider_args_reach_the_settings() -> None:
    role = "arn:aws:iam::123456789012:role/deployer"
    settings = service_settings(
        {
            "region": "eu-west-1",
            "aws": {
                "profile": "platform",
                "assume_roles": [{"role_arn": role, "session_name": "deepseek"}],
                "allowed_account_ids": ["123456789012"],
            },
        },
        "dev",
    )
    assert settings.region == "eu-west-1"
    assert settings.aws.profile == "platform"
    assert [(r.role_arn, r.session_name) for r in settings.aws.assume_roles] == [(role, "deepseek")]
    assert settings.aws.allowed_account_ids == ["123456789012"]


def test_two_services_with_clusters_of_their_own_share_a_program() -> None:
    """Each creates its own VPC and cluster, named after the service: no URN or name collides."""
    from collections import Counter

    mocks = RecordingMocks()

    def program() -> dict[str, Any]:
        DeepSeekService("team-a", {"compute_mode": "auto-mode"})
        DeepSeekService("team-b", {"compute_mode": "karpenter"})
        return {}

    run_with_mocks(program, mocks, project=PROJECT, stack="dev", config={}, secret_keys=[])
    urns = Counter(r.urn for r in mocks.resources)
    assert [u for u, n in urns.items() if n > 1] == []
    clusters = [r.inputs["name"] for r in mocks.resources if r.type == "eks:index:Cluster"]
    assert sorted(clusters) == ["team-a-dev", "team-b-dev"]
    queues = [r.inputs["name"] for r in mocks.resources if r.type == "aws:sqs/queue:Queue"]
    assert queues == ["team-b-dev-karpenter"]


def test_a_multi_node_service_installs_the_leader_worker_set_controller_only_with_shared_addons() -> None:
    """LeaderWorkerSet is a cluster-wide controller (one Helm release "lws" in lws-system): the
    service with the shared add-ons installs it, another would collide with that release."""
    r1: DeepSeekServiceArgs = {
        **KARPENTER_JOIN,
        "model": {"variant": "r1-671b", "max_model_len": 32768},
        "gpu": {"instance_families": ["p5"], "capacity_types": ["on-demand"]},
    }

    def lws(mocks: RecordingMocks) -> tuple[list[str], int]:
        releases = [r.inputs["name"] for r in mocks.resources if r.type == "kubernetes:helm.sh/v3:Release"]
        sets = [r for r in mocks.resources if r.type.endswith("LeaderWorkerSet")]
        return [n for n in releases if n == "lws"], len(sets)

    assert lws(_joining(r1)) == ([], 1)
    assert lws(_joining({**r1, "install_shared_addons": True})) == (["lws"], 1)


def test_two_services_with_every_cluster_scoped_feature_keep_their_objects_apart() -> None:
    """Warm spares (a PriorityClass) and snapshot weights (a VolumeSnapshotClass, a StorageClass,
    a VolumeSnapshotContent) are cluster-scoped: each service names its own. The snapshot
    controller add-on is the cluster's: only the service with the shared add-ons installs it."""
    from collections import Counter

    import pulumi_kubernetes as k8s

    from deepseek_eks.automation.render import HELM_TOKENS, kubernetes_manifest

    mocks = RecordingMocks()
    args: DeepSeekServiceArgs = {
        **JOIN,
        "autoscaling": {"signal": "queue-depth", "max_replicas": 2, "warm_spare_nodes": 1},
        "weights": {
            "source": "ebs-snapshot",
            "snapshot_id": "snap-0a1b2c3d4e5f60718",
            "fast_snapshot_restore": True,
        },
    }

    def program() -> dict[str, Any]:
        provider = k8s.Provider("existing", kubeconfig="{}")
        opts = pulumi.ResourceOptions(providers={"kubernetes": provider})
        DeepSeekService("team-a", {**args, "install_shared_addons": True}, opts)
        DeepSeekService("team-b", args, opts)
        return {}

    run_with_mocks(program, mocks, project=PROJECT, stack="dev", config={}, secret_keys=[])
    cluster_scoped = Counter(
        (m["kind"], m["metadata"]["name"])
        for r in mocks.resources
        if r.type.startswith("kubernetes:") and r.type not in HELM_TOKENS and r.custom
        for m in [kubernetes_manifest(r)]
        if not m["metadata"].get("namespace")
    )
    assert [key for key, n in cluster_scoped.items() if n > 1] == []
    # An EKS add-on exists once per cluster: the snapshot controller comes with team A's shared add-ons.
    addons = [
        (r.inputs["clusterName"], r.inputs["addonName"])
        for r in mocks.resources
        if r.type == "aws:eks/addon:Addon"
    ]
    assert addons == [("platform", "snapshot-controller")]
    kinds = {kind for kind, _ in cluster_scoped}
    assert {"PriorityClass", "VolumeSnapshotClass", "StorageClass", "VolumeSnapshotContent"} <= kinds
    spares = [
        kubernetes_manifest(r)
        for r in mocks.resources
        if r.type == "kubernetes:apps/v1:Deployment" and r.inputs["metadata"]["name"] == "gpu-warm-spare"
    ]
    assert sorted(s["spec"]["template"]["spec"]["priorityClassName"] for s in spares) == [
        "team-a-gpu-warm-spare",
        "team-b-gpu-warm-spare",
    ]


def test_joining_auto_mode_needs_the_node_role_when_the_plan_needs_a_larger_disk() -> None:
    """The 70B distill needs more node disk than Auto Mode's built-in NodeClass (80 GiB): the
    service then makes a NodeClass, which cannot be valid without the node role."""
    big = {**JOIN, "model": {"variant": "r1-distill-llama-70b"}, "gpu": {"instance_families": ["g6e"]}}
    message = r'existing_cluster=\{"node_role_name": ...\}: required here: the plan needs'
    with pytest.raises(Exception, match=message):
        _joining(big)  # type: ignore[arg-type]
    joined = {**JOIN["existing_cluster"], "node_role_name": "platform-auto-mode-node"}
    (node_class,) = _manifests(_joining({**big, "existing_cluster": joined}), "NodeClass").values()  # type: ignore[typeddict-item]
    assert node_class["spec"]["role"] == "platform-auto-mode-node"


def test_the_plans_warnings_are_logged_at_preview_in_the_args_spelling() -> None:
    """A family the node pool never launches, one replica at the floor: what `automation plan`
    warns a stack's user about, the component says at preview and up, named as the args wrote it."""
    from deepseek_eks.testing.mocks import ProgramLog

    args: DeepSeekServiceArgs = {
        **PROD_AS_ARGS,
        "gpu": GpuArgs(instance_families=["g6e", "p5"], capacity_types=["spot", "on-demand"]),
        "autoscaling": ScalingArgs(signal="concurrency", min_replicas=1, max_replicas=4),
    }
    log = ProgramLog()
    run_with_mocks(
        lambda: {"variant": DeepSeekService("deepseek", args).variant},
        RecordingMocks(region="us-east-1"),
        project=PROJECT,
        stack="prod",
        config={},
        secret_keys=[],
        log=log,
    )
    said = [w for w in log.warnings if w.startswith("DeepSeekService 'deepseek': ")]
    left_out = 'gpu={"instance_families": ...} lists p5, but the node pool never launches it'
    assert any(left_out in w for w in said)
    assert any('autoscaling={"min_replicas": ...} = 1: whenever one replica' in w for w in said)
    assert not any("gpu.instanceFamilies" in w or "autoscaling.minReplicas" in w for w in said)


def test_a_seasonal_floor_on_a_prometheus_the_service_does_not_install_is_warned() -> None:
    """The week trigger needs 8 days of samples in the Prometheus it queries; a service that joins
    a cluster without installing the shared add-ons cannot set that retention, so it is told whose
    counts. One that installs them is not."""
    import pulumi_kubernetes as k8s

    from deepseek_eks.testing.mocks import ProgramLog

    def warnings(args: DeepSeekServiceArgs) -> list[str]:
        def program() -> dict[str, Any]:
            provider = k8s.Provider("existing", kubeconfig="{}")
            DeepSeekService("team-a", args, pulumi.ResourceOptions(providers={"kubernetes": provider}))
            return {}

        log = ProgramLog()
        config = {"aws:region": "us-east-1"}
        run_with_mocks(
            program, RecordingMocks(), project=PROJECT, stack="dev", config=config, secret_keys=[], log=log
        )
        return [w for w in log.warnings if "last week's requests" in w]

    seasonal: DeepSeekServiceArgs = {**JOIN, "autoscaling": {"signal": "concurrency", "seasonal": True}}
    (said,) = warnings(seasonal)
    assert said.startswith("DeepSeekService 'team-a': autoscaling={\"seasonal\": ...}")
    assert "install_shared_addons is false" in said and "at least 8d" in said
    assert warnings({**seasonal, "install_shared_addons": True}) == []
    assert warnings(JOIN) == []
