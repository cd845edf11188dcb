"""The vLLM service under the mock engine: arguments from the plan, the manifest gate for every
variant, multi-node replicas, weights from S3, the endpoint and its policies."""

from __future__ import annotations

import json
import math

import pytest

from deepseek_eks.automation.render import Rendered, render
from deepseek_eks.components import SizingError
from deepseek_eks.guardrails.manifest_gate import check, schema_dir
from deepseek_eks.settings import SettingsError
from deepseek_eks.sizing.catalog import model_catalog
from deepseek_eks.sizing.checkpoints import pinned_revision
from tests.conftest import stack_config
from tests.upstream import (
    cold_start_facts,
    karpenter_image_pull_s,
    mountpoint_csi_facts,
    nlb_facts,
    serving_facts,
)
from tests.upstream_platform import platform_facts


# A family list that fits each variant (stack: prod, Karpenter), cheapest first.
def staged_prefix(variant: str) -> str:
    """Where the stager puts a variant: a prefix of the commit the catalog pins, when it pins one
    (sizing/data/revisions.json), so two revisions never share a prefix."""
    revision = pinned_revision(variant, model_catalog()[variant].hf_repo)
    return f"{variant}/{revision}/" if revision else f"{variant}/"


VARIANTS = {
    "r1-distill-qwen-1.5b": "g6",
    "r1-distill-qwen-7b": "g6,g5",
    "r1-distill-llama-8b": "g6e",
    "r1-distill-qwen-14b": "g6e",
    "r1-distill-qwen-32b": "g6e",
    "r1-distill-llama-70b": "g6e,p5",
    "r1-671b": "p5en",
}


def workload(rendered: Rendered) -> dict:
    kinds = [
        o for o in rendered.objects()
        if o["kind"] in ("Deployment", "LeaderWorkerSet") and o["metadata"]["name"] == "vllm"
    ]  # fmt: skip
    assert len(kinds) == 1
    return kinds[0]


def server(obj: dict) -> dict:
    spec = obj["spec"]
    pod = (
        spec["template"]["spec"]
        if obj["kind"] == "Deployment"
        else spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    )
    return pod["containers"][0]


def pod_of(obj: dict) -> dict:
    """The serving pod spec (the Deployment's, or the LeaderWorkerSet leader's)."""
    spec = obj["spec"]
    return (
        spec["template"]["spec"]
        if obj["kind"] == "Deployment"
        else spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    )


def weights_volume(rendered: Rendered) -> tuple[list[str], dict]:
    """vLLM's arguments and the volume mounted, read-only, at the directory ``--model`` names."""
    obj = workload(rendered)
    container = server(obj)
    args = container["args"] if "args" in container else container["command"][-1].split()
    model = args[args.index("--model") + 1]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == model)
    assert mount["readOnly"] is True
    return args, next(v for v in pod_of(obj)["volumes"] if v["name"] == mount["name"])


def gate(rendered: Rendered) -> list[str]:
    return [p for obj in rendered.objects() for p in check(obj, "1.34", schema_dir())]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_renders_valid_objects_with_the_plans_exact_args(variant: str) -> None:
    # Weights from Hugging Face: the plan's vllm_args name the Hub id, while with Pulumi.prod.yaml's
    # weights.source s3 the container's --model is the bucket's prefix instead.
    rendered = render(
        stack_config(
            "prod",
            model__variant=variant,
            gpu__instanceFamilies=VARIANTS[variant],
            weights__source="huggingface",
        )
    )
    assert gate(rendered) == []
    obj = workload(rendered)
    assert obj["kind"] == "Deployment"
    container = server(obj)
    assert container["args"] == rendered.plan["vllm_args"]
    resources = container["resources"]
    gpus = str(rendered.plan["tensor_parallel_size"])
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == gpus
    assert resources["requests"]["cpu"] == rendered.plan["cpu_request"]
    assert resources["requests"]["memory"] == rendered.plan["memory_request"]
    assert "replicas" not in obj["spec"]  # the autoscaler owns it


def test_r1_on_p5_is_a_leader_worker_set_of_two_nodes() -> None:
    rendered = render(stack_config("r1"))
    assert gate(rendered) == []
    obj = workload(rendered)
    assert obj["kind"] == "LeaderWorkerSet"
    template = obj["spec"]["leaderWorkerTemplate"]
    assert template["size"] == rendered.plan["nodes_per_replica"] == 2
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    script = leader["command"][-1]
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in script
    assert "--distributed-executor-backend ray" in script
    assert "ray start --address=" in worker["command"][-1]
    for container in (leader, worker):
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "startupProbe" in leader and "startupProbe" not in worker
    assert "lws" in rendered.helm and rendered.helm["lws"]["version"] == "0.10.0"
    service = next(o for o in rendered.objects() if o["kind"] == "Service")
    assert service["spec"]["selector"]["deepseek-eks/role"] == "leader"


def test_no_efa_is_requested_that_the_image_cannot_use_and_the_plan_says_so() -> None:
    """The vllm/vllm-openai image has no libfabric or aws-ofi-nccl: NCCL would fall back to TCP
    sockets under EFA devices. The render requests none and the plan warns instead."""
    rendered = render(stack_config("r1"))
    template = workload(rendered)["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        for container in template[role]["spec"]["containers"]:
            for kind in ("requests", "limits"):
                assert not any("efa" in name for name in container["resources"][kind]), container["resources"]
            assert not any(e["name"].startswith(("FI_", "NCCL_NET")) for e in container["env"])
    assert rendered.plan["efa_required"] is False
    assert any("TCP sockets, not EFA" in w for w in rendered.plan["warnings"])
    # Two replicas at the floor: no single-replica notice either.
    single_node = stack_config("r1", gpu__instanceFamilies="p5en", autoscaling__minReplicas=2)
    assert not render(single_node).plan["warnings"]


def test_both_nodes_of_a_replica_stay_in_one_zone() -> None:
    lws = serving_facts()["leaderworkerset_exclusive_topology"]
    obj = workload(render(stack_config("r1")))
    assert obj["metadata"]["annotations"][lws["annotation"]] == "topology.kubernetes.io/zone"


def test_exclusive_zones_cap_the_replicas_of_a_multi_node_plan() -> None:
    """One replica per zone (LWS exclusive topology), and a rollout at the maximum surges one more
    group into a free zone: as many replicas as zones is refused at plan time, a single-node plan
    is not limited."""
    with pytest.raises(SizingError, match=r"autoscaling.maxReplicas = 3: .* 3 zones"):
        render(stack_config("r1", autoscaling__maxReplicas=3))
    with pytest.raises(SizingError, match="at most 1"):
        render(stack_config("r1", network__availabilityZones=2, autoscaling__maxReplicas=2))
    assert render(stack_config("r1", gpu__instanceFamilies="p5en", autoscaling__maxReplicas=4))


@pytest.mark.parametrize("stack", ["dev", "prod", "r1"])
def test_no_voluntary_disruption_moves_a_serving_pod(stack: str) -> None:
    key = serving_facts()["karpenter_do_not_disrupt"]
    obj = workload(render(stack_config(stack)))
    spec = obj["spec"]
    templates = (
        [spec["template"]]
        if obj["kind"] == "Deployment"
        else [spec["leaderWorkerTemplate"]["leaderTemplate"], spec["leaderWorkerTemplate"]["workerTemplate"]]
    )
    for template in templates:
        assert template["metadata"]["annotations"][key["pod_annotation"]] == key["value"]


@pytest.mark.parametrize(
    ("stack", "fact"),
    [("dev", "eks_auto_mode_readiness_gate"), ("prod", "aws_load_balancer_controller_readiness_gate")],
)
def test_the_namespace_opts_into_its_load_balancers_readiness_gate(stack: str, fact: str) -> None:
    gate = serving_facts()[fact]
    rendered = render(stack_config(stack))
    ns = next(
        o for o in rendered.objects() if o["kind"] == "Namespace" and o["metadata"]["name"] == "deepseek"
    )
    assert ns["metadata"]["labels"][gate["namespace_label"]] == gate["value"]
    other = next(
        f
        for f in ("eks_auto_mode_readiness_gate", "aws_load_balancer_controller_readiness_gate")
        if f != fact
    )
    assert serving_facts()[other]["namespace_label"] not in ns["metadata"]["labels"]
    ing = next(o for o in rendered.objects() if o["kind"] == "Ingress")
    assert ing["metadata"]["annotations"]["alb.ingress.kubernetes.io/target-type"] == "ip"


def test_r1_on_p5en_is_a_single_deployment_with_tp8() -> None:
    rendered = render(stack_config("r1", gpu__instanceFamilies="p5en"))
    obj = workload(rendered)
    assert obj["kind"] == "Deployment"
    args = server(obj)["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "8"
    assert args[args.index("--pipeline-parallel-size") + 1] == "1"
    assert "lws" not in rendered.helm and "aws-efa-k8s-device-plugin" not in rendered.helm


def test_pods_are_hardened_and_drain_gracefully() -> None:
    rendered = render(stack_config("dev"))
    obj = workload(rendered)
    pod = obj["spec"]["template"]["spec"]
    container = pod["containers"][0]
    ctx = container["securityContext"]
    assert ctx["runAsNonRoot"] and ctx["readOnlyRootFilesystem"] and not ctx["allowPrivilegeEscalation"]
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    plan = rendered.plan
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pause > 0 and pause + plan["drain_seconds"] < pod["terminationGracePeriodSeconds"]
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == "/health"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= plan["startup_probe_seconds"]
    assert "initialDelaySeconds" not in container["readinessProbe"]
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert {"nvidia.com/gpu": "1"}.items() <= container["resources"]["limits"].items()
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["nodeSelector"] == {"deepseek-eks/node-role": "gpu-inference"}  # every GPU pool labels so


def test_shm_grows_with_tensor_parallelism() -> None:
    rendered = render(stack_config("prod"))  # 70B, TP 4
    pod = workload(rendered)["spec"]["template"]["spec"]
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["sizeLimit"] == "14Gi"


def test_endpoint_is_internal_by_default_with_health_check_and_long_idle_timeout() -> None:
    rendered = render(stack_config("dev"))
    ing = next(o for o in rendered.objects() if o["kind"] == "Ingress")
    ann = ing["metadata"]["annotations"]
    assert ann["alb.ingress.kubernetes.io/scheme"] == "internal"
    assert ann["alb.ingress.kubernetes.io/healthcheck-path"] == "/health"
    idle = int(ann["alb.ingress.kubernetes.io/load-balancer-attributes"].split(",")[0].split("=")[1])
    assert idle > rendered.plan["drain_seconds"]
    # The controller's default when unset is 0.0.0.0/0 (endpoint-access-facts.json): the VPC instead.
    assert ann["alb.ingress.kubernetes.io/inbound-cidrs"] == "10.42.0.0/16"
    assert ing["spec"]["ingressClassName"] == "alb"
    assert json.loads(ann["alb.ingress.kubernetes.io/listen-ports"]) == [{"HTTP": 80}]


def test_internet_facing_endpoint_is_restricted_and_tls_with_a_certificate() -> None:
    cert = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab"
    rendered = render(
        stack_config(
            "dev",
            endpoint__scheme="internet-facing",
            endpoint__allowedCidrs="198.51.100.0/24,203.0.113.0/24",
            endpoint__certificateArn=cert,
        )
    )
    ann = next(o for o in rendered.objects() if o["kind"] == "Ingress")["metadata"]["annotations"]
    assert ann["alb.ingress.kubernetes.io/scheme"] == "internet-facing"
    assert ann["alb.ingress.kubernetes.io/inbound-cidrs"] == "198.51.100.0/24,203.0.113.0/24"
    assert ann["alb.ingress.kubernetes.io/certificate-arn"] == cert
    assert json.loads(ann["alb.ingress.kubernetes.io/listen-ports"]) == [{"HTTP": 80}, {"HTTPS": 443}]
    assert ann["alb.ingress.kubernetes.io/ssl-redirect"] == "443"  # port 80 only redirects
    assert rendered.outputs["endpointUrl"] == "" or rendered.outputs["endpointUrl"].startswith("https://")


@pytest.mark.parametrize("scheme", ["internal", "internet-facing"])
def test_network_policy_admits_the_load_balancer_subnets_not_the_vpc(scheme: str) -> None:
    """The ALB's addresses live in the subnets the controller discovers by tag for its scheme."""
    tag = {"internal": "kubernetes.io/role/internal-elb", "internet-facing": "kubernetes.io/role/elb"}[scheme]
    cert = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234"
    extra = (
        {"endpoint__allowedCidrs": "198.51.100.0/24", "endpoint__certificateArn": cert}
        if scheme == "internet-facing"
        else {}
    )
    rendered = render(stack_config("dev", endpoint__scheme=scheme, **extra))
    subnets = [r["inputs"] for r in rendered.aws if r["type"] == "aws:ec2/subnet:Subnet"]
    policy = next(
        o for o in rendered.objects() if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "vllm"
    )["spec"]
    admitted = [
        peer["ipBlock"]["cidr"] for rule in policy["ingress"] for peer in rule["from"] if "ipBlock" in peer
    ]
    assert sorted(admitted) == sorted(s["cidrBlock"] for s in subnets if tag in s["tags"])
    assert "10.42.0.0/16" not in admitted


def test_your_own_vpc_admits_your_subnets() -> None:
    rendered = render(
        stack_config(
            "dev",
            network__vpcId="vpc-0123456789abcdef0",
            network__privateSubnetIds="subnet-0aaaaaaaaaaaaaaa1,subnet-0aaaaaaaaaaaaaaa2",
        )
    )
    policy = next(
        o for o in rendered.objects() if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "vllm"
    )["spec"]
    admitted = [
        peer["ipBlock"]["cidr"] for rule in policy["ingress"] for peer in rule["from"] if "ipBlock" in peer
    ]
    assert len(admitted) == 2 and all(c.startswith("10.20.") and c.endswith("/20") for c in admitted)


def test_disruption_budget_only_with_more_than_one_replica() -> None:
    assert any(o["kind"] == "PodDisruptionBudget" for o in render(stack_config("dev")).objects())
    single = render(stack_config("dev", autoscaling__maxReplicas=1))
    assert not any(o["kind"] == "PodDisruptionBudget" for o in single.objects())


def test_s3_weights_bucket_is_private_encrypted_and_staged_before_vllm(construct) -> None:
    run = construct(stack_config("dev", weights__source="s3"))
    sse = run.mocks.of_type(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    rule = sse[0].inputs["rules"][0]["applyServerSideEncryptionByDefault"]
    assert rule["sseAlgorithm"] == "AES256"
    block = run.mocks.of_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")[0].inputs
    assert all(
        block[k]
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    policies = {
        r.name: json.loads(r.inputs["policy"]) for r in run.mocks.of_type("aws:iam/rolePolicy:RolePolicy")
    }
    reader = policies["inference-reader"]["Statement"][1]
    stager = policies["inference-stager"]["Statement"][1]
    prefix = staged_prefix("r1-distill-qwen-7b")
    assert reader["Action"] == ["s3:GetObject"] and reader["Resource"].endswith(f"/{prefix}*")
    assert "s3:PutObject" in stager["Action"]
    associations = {
        r.inputs["serviceAccount"]
        for r in run.mocks.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    assert associations == {"vllm", "weights-stager"}
    deployment = run.mocks.of_type("kubernetes:apps/v1:Deployment")[0].inputs
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--model") + 1].startswith("s3://") and args[args.index("--model") + 1].endswith(
        f"/{prefix}"
    )
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    job = run.mocks.of_type("kubernetes:batch/v1:Job")[0].inputs
    assert "--bucket" in job["spec"]["template"]["spec"]["containers"][0]["args"]
    maps = {r.inputs["metadata"]["name"]: r.inputs for r in run.mocks.of_type("kubernetes:core/v1:ConfigMap")}
    script = maps["weights-stager"]["data"]["stage_weights.py"]
    assert "def upload(" in script


def test_api_key_reaches_vllm_only_through_the_secret() -> None:
    rendered = render(stack_config("dev", secrets={"apiKey": "sk-live-abc123", "hfToken": "hf_xyz789"}))
    env = {e["name"]: e for e in server(workload(rendered))["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "vllm-api-key", "key": "api-key"}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}
    everything = json.dumps([rendered.objects(), rendered.helm, rendered.aws, rendered.outputs])
    assert "sk-live-abc123" not in everything and "hf_xyz789" not in everything
    assert "Authorization: Bearer $(pulumi stack output --show-secrets apiKey)" in rendered.outputs["curl"]


def test_outputs_name_the_model_and_a_working_request() -> None:
    rendered = render(stack_config("dev"))
    assert rendered.outputs["servedModelName"] == "r1-distill-qwen-7b"
    assert rendered.outputs["inClusterUrl"] == "http://vllm.deepseek.svc.cluster.local"
    curl = rendered.outputs["curl"]
    assert curl.startswith("curl -s http://vllm.deepseek.svc.cluster.local/v1/chat/completions")
    assert '"model": "r1-distill-qwen-7b"' in curl


def test_pulumi_does_not_wait_on_service_endpoints_and_gives_staging_its_time() -> None:
    from deepseek_eks.components.serving.weights import stage_seconds

    rendered = render(stack_config("dev"))
    svc = next(o for o in rendered.objects() if o["kind"] == "Service")
    assert svc["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    r1 = render(stack_config("r1")).sizing
    # 641 GiB down and up again at 0.046 GiB/s, plus node, image and margin: hours, not 10 minutes.
    assert r1.weights_download_gib == 0  # replicas stream from S3; only the stager downloads
    assert stage_seconds(r1) == int(2 * 688_586_727_753 / 2**30 / 0.046) + (90 + 60) + 6 * 60 + 600
    assert stage_seconds(r1) > 8 * 3600


def test_stager_streams_so_its_disk_fits_an_ordinary_node() -> None:
    rendered = render(stack_config("r1"))
    job = next(o for o in rendered.objects() if o["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "--stream" in container["args"]
    disk = job["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"]
    assert disk == "20Gi"  # one shard at a time, not the 641 GiB checkpoint


def test_leader_waits_for_every_worker_before_starting_vllm(monkeypatch) -> None:
    """The leader's inline wait really loops until the group's nodes have joined Ray."""
    import shlex
    import sys
    import time
    import types

    rendered = render(stack_config("r1"))
    leader = workload(rendered)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    script = leader["command"][-1]
    assert script.index("ray start --head") < script.index("ray.nodes()") < script.index("exec vllm serve")
    words = shlex.split(script)  # as sh splits the line
    start = next(i for i in range(len(words)) if words[i : i + 2] == ["python3", "-c"])
    code, count = words[start + 2], words[start + 3]
    assert count == "2" and words[start + 4] == "&&"
    joined = iter([1, 1, 2])  # nodes alive at each poll
    polls: list[int] = []

    def nodes() -> list[dict]:
        polls.append(1)
        return [{"Alive": True}] * next(joined)

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(init=lambda address: None, nodes=nodes))
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    monkeypatch.setattr(sys, "argv", ["-c", count])
    exec(code, {})
    assert len(polls) == 3


@pytest.mark.parametrize("source", ["huggingface", "s3"])
def test_pulumi_waits_for_the_plans_cold_start_of_each_weights_source(source: str) -> None:
    from deepseek_eks.components.serving.inference import rollout_timeouts

    rendered = render(stack_config("prod", weights__source=source))
    stages = rendered.plan["startup_breakdown"]
    timeouts = rollout_timeouts(rendered.sizing)
    seconds = int(timeouts.create.removesuffix("s"))
    assert timeouts.update == timeouts.create
    # Every stage of a cold start fits, and the container's own stages with the probe's margin.
    assert seconds >= stages["node"] + stages["image"] + rendered.plan["startup_probe_seconds"]
    assert seconds == rendered.plan["rollout_seconds"]


@pytest.mark.parametrize("stack", ["dev", "r1"])
def test_mountpoint_weights_are_a_read_only_static_volume_of_the_staged_prefix(construct, stack: str) -> None:
    facts = mountpoint_csi_facts()
    run = construct(stack_config(stack, weights__source="s3-mountpoint"))
    rendered = render(stack_config(stack, weights__source="s3-mountpoint"))
    assert gate(rendered) == []
    variant = rendered.plan["variant"]
    (volume,) = [o for o in rendered.objects() if o["kind"] == "PersistentVolume"]
    (claim,) = [o for o in rendered.objects() if o["kind"] == "PersistentVolumeClaim"]
    csi = volume["spec"]["csi"]
    assert csi["driver"] == facts["driver_name"]["value"]
    assert set(csi["volumeAttributes"]) <= set(facts["volume_attributes"]["value"])
    # Pod-level credentials: the vLLM service account's own read-only Pod Identity role.
    assert csi["volumeAttributes"]["authenticationSource"] == facts["authentication_source_pod"]["value"]
    assert (
        volume["spec"]["accessModes"]
        == claim["spec"]["accessModes"]
        == facts["read_only_access_modes"]["value"]
    )
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
    options = volume["spec"]["mountOptions"]
    keys = {o.split("=")[0].split(" ")[0] for o in options}
    assert keys <= set(facts["mount_option_keys"]["value"]) and "read-only" in keys
    assert f"prefix {staged_prefix(variant)}" in options
    assert volume["spec"]["claimRef"] == {"namespace": "deepseek", "name": claim["metadata"]["name"]}
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    # vLLM reads the mounted directory with its default loader: no streamer, no download.
    args, volume_source = weights_volume(rendered)
    assert volume_source["persistentVolumeClaim"] == {
        "claimName": claim["metadata"]["name"],
        "readOnly": True,
    }
    assert "runai_streamer" not in args and "s3://" not in " ".join(args)
    # The driver comes as the EKS add-on, at a pinned version; the stager fills the bucket first.
    (addon,) = [a.inputs for a in run.mocks.of_type("aws:eks/addon:Addon")
                if a.inputs["addonName"] == facts["eks_addon_name"]["value"]]  # fmt: skip
    assert addon["addonVersion"].startswith("v2.")
    assert run.mocks.of_type("kubernetes:batch/v1:Job")
    policies = {
        r.name: json.loads(r.inputs["policy"]) for r in run.mocks.of_type("aws:iam/rolePolicy:RolePolicy")
    }
    reader = policies["inference-reader"]["Statement"]
    assert [s["Action"] for s in reader] == [["s3:ListBucket"], ["s3:GetObject"]]
    assert reader[1]["Resource"].endswith(f"/{staged_prefix(variant)}*")
    # vLLM itself makes no AWS call: its NetworkPolicy lets out no Pod Identity agent traffic.
    (policy,) = [
        o for o in rendered.objects() if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "vllm"
    ]
    agent = serving_facts()["eks_pod_identity_agent"]
    assert agent["ipv4"] not in json.dumps(policy["spec"]["egress"])
    assert rendered.plan["weights_download_gib"] == 0


SNAPSHOT = "snap-0123456789abcdef0"


@pytest.mark.parametrize(
    ("stack", "mode", "fast_restore"),
    [("dev", "auto-mode", "true"), ("dev", "karpenter", "false"), ("r1", "karpenter", "false")],
)
def test_snapshot_weights_give_each_pod_a_volume_restored_from_the_baked_snapshot(
    construct, stack: str, mode: str, fast_restore: str
) -> None:
    config = stack_config(
        stack,
        computeMode=mode,
        weights__source="ebs-snapshot",
        weights__snapshotId=SNAPSHOT,
        weights__fastSnapshotRestore=fast_restore,
    )
    rendered = render(config)
    assert gate(rendered) == []
    by_kind = {
        o["kind"]: o for o in rendered.objects() if o["apiVersion"].startswith("snapshot.storage.k8s.io/")
    }
    content, snapshot, snapshot_class = by_kind["VolumeSnapshotContent"], by_kind["VolumeSnapshot"], by_kind[
        "VolumeSnapshotClass"]  # fmt: skip
    # Pre-provisioned: the content names the baked snapshot and the VolumeSnapshot, which names it back.
    assert content["spec"]["source"] == {"snapshotHandle": SNAPSHOT}
    assert content["spec"]["volumeSnapshotRef"] == {
        "name": snapshot["metadata"]["name"],
        "namespace": "deepseek",
    }
    assert snapshot["spec"]["source"] == {"volumeSnapshotContentName": content["metadata"]["name"]}
    # Destroying the stack never deletes the snapshot bake-weights made.
    assert content["spec"]["deletionPolicy"] == snapshot_class["deletionPolicy"] == "Retain"
    driver = {"auto-mode": "ebs.csi.eks.amazonaws.com", "karpenter": "ebs.csi.aws.com"}[mode]
    assert snapshot_class["driver"] == content["spec"]["driver"] == driver
    (storage_class,) = [
        o for o in rendered.objects()
        if o["kind"] == "StorageClass" and o["metadata"]["name"] != "gp3-encrypted"
    ]  # fmt: skip
    assert storage_class["provisioner"] == driver
    params = storage_class["parameters"]
    assert params["encrypted"] == "true" and params["type"] == "gp3"
    # gp3 limits (EBS user guide): throughput at most 1000 MiB/s and 0.25 MiB/s per provisioned IOPS.
    assert int(params["throughput"]) <= 1000 and int(params["throughput"]) <= int(params["iops"]) / 4
    if fast_restore == "true":
        assert "volumeInitializationRate" not in params  # it would override fast snapshot restore
    else:
        # The plan's estimate reads at the provisioned initialization rate (100-300 MiB/s, EC2 API).
        assert 100 <= int(params["volumeInitializationRate"]) <= 300
        assert rendered.plan["startup_breakdown"]["weights"] == math.ceil(
            rendered.sizing.checkpoint_gib / (int(params["volumeInitializationRate"]) / 1024)
        )
    args, volume_source = weights_volume(rendered)
    claim = volume_source["ephemeral"]["volumeClaimTemplate"]
    assert claim["spec"]["dataSource"] == {
        "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot["metadata"]["name"]
    }  # fmt: skip
    assert claim["spec"]["storageClassName"] == storage_class["metadata"]["name"]
    requested = int(claim["spec"]["resources"]["requests"]["storage"].removesuffix("Gi"))
    assert requested == rendered.plan["weights_volume_gib"] >= rendered.sizing.checkpoint_gib
    assert "s3://" not in " ".join(args) and "runai_streamer" not in args
    assert not [o for o in rendered.objects() if o["kind"] == "Job"]  # bake-weights, not a stager, fills it
    run = construct(config)
    (addon,) = [
        a.inputs
        for a in run.mocks.of_type("aws:eks/addon:Addon")
        if a.inputs["addonName"] == "snapshot-controller"
    ]
    assert addon["addonVersion"].startswith("v8.")
    # Fast snapshot restore is priced per zone-hour ($0.75, EBS pricing), in each of the VPC's 3 zones.
    expected = 0.75 * 3 if fast_restore == "true" else 0.0
    assert rendered.plan["fast_snapshot_restore_hourly_usd"] == expected


@pytest.mark.parametrize(("stack", "spares"), [("dev", 1), ("prod", 2)])
def test_warm_spares_hold_gpu_nodes_shaped_like_a_replica_pod_and_always_yield(
    stack: str, spares: int
) -> None:
    rendered = render(stack_config(stack, autoscaling__warmSpareNodes=spares))
    assert gate(rendered) == []
    (klass,) = [o for o in rendered.objects() if o["kind"] == "PriorityClass"]
    (spare,) = [
        o
        for o in rendered.objects()
        if o["kind"] == "Deployment" and o["metadata"]["name"] == klass["metadata"]["name"]
    ]
    pod = spare["spec"]["template"]["spec"]
    assert spare["spec"]["replicas"] == spares and pod["priorityClassName"] == klass["metadata"]["name"]
    # Pods without a priority class get priority 0 when no class is the global default (Kubernetes
    # "Pod Priority and Preemption"): every vLLM pod outranks a placeholder and preempts it, and a
    # placeholder never preempts anything.
    assert klass["value"] < 0 and klass["globalDefault"] is False and klass["preemptionPolicy"] == "Never"
    obj = workload(rendered)
    vllm_pod = pod_of(obj)
    assert "priorityClassName" not in vllm_pod
    # Same shape and place as one vLLM pod: evicting one frees exactly what a replica pod needs.
    assert running_requests(pod) == running_requests(vllm_pod)
    assert running_requests(vllm_pod)[:2] == (
        cpu_millicores(rendered.plan["cpu_request"]),
        memory_mib(rendered.plan["memory_request"]),
    )
    assert pod["nodeSelector"] == vllm_pod["nodeSelector"] and pod["tolerations"] == vllm_pod["tolerations"]
    assert (
        int(pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
        == rendered.plan["tensor_parallel_size"]
    )
    # The warm node also pulls vLLM's image and keeps it in use, so a replica there skips the pull.
    holders = [c for c in pod["containers"] if c["image"] == server(obj)["image"]]
    assert len(holders) == 1 and "nvidia.com/gpu" not in holders[0]["resources"]["requests"]
    assert rendered.plan["warm_node_startup_breakdown"]["image"] == 0
    # Priced: the nodes they hold (one each: these replicas fill a node), at the plan's node price,
    # and counted in the whole stack's price at the floor.
    assert rendered.plan["replicas_per_node"] == rendered.plan["nodes_per_replica"] == 1
    node_price = rendered.plan["replica_hourly_usd"]
    assert rendered.plan["warm_spare_hourly_usd"] == pytest.approx(node_price * spares, abs=1e-3)
    without = render(stack_config(stack)).plan
    assert rendered.plan["stack_hourly_usd_at_min"] == pytest.approx(
        without["stack_hourly_usd_at_min"] + node_price * spares, abs=1e-3
    )
    assert rendered.plan["stack_hourly_usd_at_max"] == pytest.approx(
        without["stack_hourly_usd_at_max"], abs=1e-3
    )
    (closed,) = [
        o
        for o in rendered.objects()
        if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == klass["metadata"]["name"]
    ]
    assert closed["spec"]["ingress"] == [] and closed["spec"]["egress"] == []


@pytest.mark.parametrize(("stack", "mode"), [("prod", None), ("r1", None), ("dev", "karpenter")])
def test_karpenter_gpu_nodes_pull_the_vllm_image_while_their_gpus_register(
    stack: str, mode: str | None
) -> None:
    """Karpenter's GPU node is Ready about a minute before nvidia.com/gpu appears and the replica
    can be scheduled there (cold-start-facts.json image_prepull): a DaemonSet on the same nodes
    starts the image pull at Ready, and the plan's image stage counts only the rest."""
    rendered = render(stack_config(stack, **({"computeMode": mode} if mode else {})))
    assert gate(rendered) == []
    obj = workload(rendered)
    vllm_pod = pod_of(obj)
    (prepull,) = [o for o in rendered.objects() if o["kind"] == "DaemonSet"]
    pod = prepull["spec"]["template"]["spec"]
    # On exactly the replica's nodes: its selector and its tolerations (the GPU taint).
    assert pod["nodeSelector"] == vllm_pod["nodeSelector"] and pod["tolerations"] == vllm_pod["tolerations"]
    assert prepull["metadata"]["namespace"] == obj["metadata"]["namespace"]
    # The server's own image, pulled the way the server pulls it, and nothing else on the node.
    (holder,) = pod["containers"]
    assert not pod.get("initContainers")
    assert (holder["image"], holder["imagePullPolicy"]) == (
        server(obj)["image"],
        server(obj)["imagePullPolicy"],
    )
    assert "nvidia.com/gpu" not in holder["resources"]["requests"]
    assert cpu_millicores(holder["resources"]["requests"]["cpu"]) <= 10
    assert pod["automountServiceAccountToken"] is False
    # It talks to nothing: the node pulls the image, not the pod.
    (closed,) = [
        o
        for o in rendered.objects()
        if o["kind"] == "NetworkPolicy"
        and o["spec"]["podSelector"] == {"matchLabels": prepull["spec"]["selector"]["matchLabels"]}
    ]
    assert closed["spec"]["ingress"] == [] and closed["spec"]["egress"] == []
    assert set(closed["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    # The plan counts the pull less the GPU registration it overlaps.
    registration_s = cold_start_facts()["karpenter_gpu_registration"]["gpu_registration_s"]
    assert rendered.plan["startup_breakdown"]["image"] == pytest.approx(
        karpenter_image_pull_s() - registration_s, abs=1.5
    )
    assert rendered.plan["image_prepull"] is True


def test_auto_mode_runs_no_image_prepull() -> None:
    """Auto Mode's published node figure ends with the pod scheduled: no overlap is counted, and no
    DaemonSet is run for one."""
    rendered = render(stack_config("dev"))
    assert not [o for o in rendered.objects() if o["kind"] == "DaemonSet"]
    assert rendered.plan["image_prepull"] is False


def test_no_warm_spares_by_default() -> None:
    rendered = render(stack_config("dev"))
    assert not [o for o in rendered.objects() if o["kind"] == "PriorityClass"]
    assert rendered.plan["warm_spare_hourly_usd"] == 0


@pytest.mark.parametrize(("stack", "mode"), [("dev", "auto-mode"), ("dev", "karpenter"), ("r1", "karpenter")])
def test_nlb_endpoint_is_an_internal_service_limited_to_the_vpc(stack: str, mode: str) -> None:
    facts = nlb_facts()
    rendered = render(
        stack_config(stack, computeMode=mode, endpoint__loadBalancer="nlb", endpoint__auth="none")
    )
    assert gate(rendered) == []
    assert not [o for o in rendered.objects() if o["kind"] == "Ingress"]
    (nlb,) = [o for o in rendered.objects() if o["kind"] == "Service" and o["spec"]["type"] == "LoadBalancer"]
    klass = {"auto-mode": facts["eks_auto_mode"], "karpenter": facts["aws_load_balancer_controller"]}[mode]
    assert nlb["spec"]["loadBalancerClass"] == klass["load_balancer_class"]
    annotations = nlb["metadata"]["annotations"]
    documented = set(facts["aws_load_balancer_controller"]["service_annotations"]) | {"pulumi.com/skipAwait"}
    # One listener-attributes annotation per <protocol>-<port> of a listener.
    listener = facts["listener_attributes"]["annotation"]
    documented |= {listener.format(protocol=p["protocol"], port=p["port"]) for p in nlb["spec"]["ports"]}
    assert set(annotations) <= documented
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] == "ip"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-healthcheck-path"] == "/health"
    # The controllers default to 0.0.0.0/0: an internal NLB is limited to the VPC explicitly.
    assert facts["aws_load_balancer_controller"]["default_source_range_ipv4"] == "0.0.0.0/0"
    (vpc,) = [r["inputs"] for r in rendered.aws if r["type"] == "aws:ec2/vpc:Vpc"]
    assert nlb["spec"]["loadBalancerSourceRanges"] == [vpc["cidrBlock"]]
    # Targets see the NLB's own addresses (the NetworkPolicy admits its subnets), and drain as long
    # as a stream may run, within the NLB's limit.
    attributes = dict(
        kv.split("=")
        for kv in annotations["service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"].split(
            ","
        )
    )
    assert attributes[facts["nlb_target_group"]["preserve_client_ip_attribute"]] == "false"
    assert (
        int(attributes["deregistration_delay.timeout_seconds"])
        <= facts["nlb_target_group"]["deregistration_delay_max_s"]
    )
    assert nlb["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    if rendered.plan["nodes_per_replica"] > 1:
        assert nlb["spec"]["selector"]["deepseek-eks/role"] == "leader"


def test_a_keyless_nlb_takes_the_vpc_the_allowed_cidrs_and_tls_and_never_faces_the_internet() -> None:
    arn = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1234"
    rendered = render(
        stack_config(
            "dev",
            endpoint__loadBalancer="nlb",
            endpoint__auth="none",
            endpoint__allowedCidrs="198.51.100.0/24",
            endpoint__certificateArn=arn,
        )
    )
    (nlb,) = [o for o in rendered.objects() if o["kind"] == "Service" and o["spec"]["type"] == "LoadBalancer"]
    annotations = nlb["metadata"]["annotations"]
    (vpc,) = [r["inputs"] for r in rendered.aws if r["type"] == "aws:ec2/vpc:Vpc"]
    assert nlb["spec"]["loadBalancerSourceRanges"] == [vpc["cidrBlock"], "198.51.100.0/24"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == arn
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443"
    assert nlb["spec"]["ports"][0]["port"] == 443
    # internet-facing needs a key, and a key cannot guard an NLB's every route: no such stack renders
    with pytest.raises(SettingsError):
        render(
            stack_config(
                "dev",
                endpoint__loadBalancer="nlb",
                endpoint__scheme="internet-facing",
                endpoint__allowedCidrs="198.51.100.0/24",
                endpoint__certificateArn=arn,
            )
        )


def test_the_download_cache_is_node_disk_that_karpenter_puts_on_the_nvme_raid() -> None:
    """Hugging Face downloads land in a disk-backed emptyDir, which the kubelet keeps under its
    root directory: on Karpenter GPU nodes that is the instance-store RAID0 (platform facts)."""
    fact = platform_facts()["karpenter"]["instance_store_policy"]
    assert "kubelet" in fact["effect"] and fact["value"] == "RAID0"
    rendered = render(stack_config("prod", weights__source="huggingface"))
    (node_class,) = [
        o for o in rendered.objects() if o["kind"] == "EC2NodeClass" and "gpu" in o["metadata"]["name"]
    ]
    assert node_class["spec"]["instanceStorePolicy"] == fact["value"]
    container = server(workload(rendered))
    hf_home = next(e["value"] for e in container["env"] if e["name"] == "HF_HOME")
    mount = max(
        (m for m in container["volumeMounts"] if hf_home.startswith(m["mountPath"].rstrip("/") + "/")),
        key=lambda m: len(m["mountPath"]),
    )
    volume = next(v for v in pod_of(workload(rendered))["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in volume and volume["emptyDir"].get("medium") != "Memory"
    size = int(volume["emptyDir"]["sizeLimit"].removesuffix("Gi"))
    assert size >= rendered.plan["checkpoint_gib"]


# --------------------------------------------------- weights already in your bucket (model.repository)

OWN_BUCKET = "acme-models"


def own_bucket(source: str, repository: str = f"s3://{OWN_BUCKET}/deepseek/r1-7b", **extra) -> Rendered:
    return render(stack_config("dev", weights__source=source, model__repository=repository, **extra))


def reader_policy(rendered: Rendered) -> list[dict]:
    """vLLM's role's statements; it must be the only role policy touching S3."""
    policies = {
        r["name"]: json.loads(r["inputs"]["policy"])
        for r in rendered.aws
        if r["type"] == "aws:iam/rolePolicy:RolePolicy"
    }
    s3 = {name for name, policy in policies.items() if "s3:" in json.dumps(policy)}
    assert s3 == {"inference-reader"}
    return policies["inference-reader"]["Statement"]


@pytest.mark.parametrize("source", ["s3", "s3-mountpoint"])
def test_own_bucket_creates_no_bucket_no_stager_and_outputs_your_bucket(source: str) -> None:
    rendered = own_bucket(source)
    types = {r["type"] for r in rendered.aws}
    assert not {t for t in types if t.startswith("aws:s3/")}  # no bucket, policy, encryption...
    assert not [o for o in rendered.objects() if o["kind"] == "Job"]
    assert not [o for o in rendered.objects() if o["metadata"]["name"] == "weights-stager"]
    roles = {r["name"] for r in rendered.aws if r["type"] == "aws:iam/role:Role"}
    assert "inference-reader" in roles and "inference-stager" not in roles
    associations = {
        r["inputs"]["serviceAccount"]
        for r in rendered.aws
        if r["type"] == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    }
    assert associations == {"vllm"}
    assert rendered.outputs["weightsBucket"] == OWN_BUCKET
    assert rendered.plan["repository"] == f"s3://{OWN_BUCKET}/deepseek/r1-7b"
    assert gate(rendered) == []


@pytest.mark.parametrize(
    ("repository", "prefix"),
    [
        (f"s3://{OWN_BUCKET}/deepseek/r1-7b", "deepseek/r1-7b/"),
        (f"s3://{OWN_BUCKET}/deepseek/r1-7b/", "deepseek/r1-7b/"),
        (f"s3://{OWN_BUCKET}", ""),
        (f"s3://{OWN_BUCKET}/", ""),
    ],
)
def test_own_bucket_reader_may_only_list_and_read_that_prefix(repository: str, prefix: str) -> None:
    statements = reader_policy(own_bucket("s3", repository))
    bucket_arn = f"arn:aws:s3:::{OWN_BUCKET}"
    assert [s["Action"] for s in statements] == [["s3:ListBucket"], ["s3:GetObject"]]
    assert all(s["Effect"] == "Allow" for s in statements)
    listing, objects = statements
    assert listing["Resource"] == bucket_arn
    # A prefix is listed only under itself (no IfExists: tests/unit/test_weights_iam.py); the whole
    # bucket, when that is what model.repository names, without a condition.
    if prefix:
        assert listing["Condition"] == {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}}
    else:
        assert "Condition" not in listing
    assert objects["Resource"] == f"{bucket_arn}/{prefix}*"


def test_own_bucket_arn_is_in_the_accounts_partition(monkeypatch) -> None:
    from deepseek_eks.testing import mocks

    govcloud = {
        "partition": "aws-us-gov",
        "dnsSuffix": "amazonaws.com",
        "reverseDnsPrefix": "com.amazonaws",
        "id": "aws-us-gov",
    }
    monkeypatch.setitem(mocks.INVOKES, "aws:index/getPartition:getPartition", lambda a, r: govcloud)
    statements = reader_policy(own_bucket("s3"))
    assert statements[0]["Resource"] == f"arn:aws-us-gov:s3:::{OWN_BUCKET}"
    assert statements[1]["Resource"] == f"arn:aws-us-gov:s3:::{OWN_BUCKET}/deepseek/r1-7b/*"


@pytest.mark.parametrize(
    ("repository", "uri"),
    [
        (f"s3://{OWN_BUCKET}/deepseek/r1-7b", f"s3://{OWN_BUCKET}/deepseek/r1-7b/"),
        (f"s3://{OWN_BUCKET}", f"s3://{OWN_BUCKET}/"),
    ],
)
def test_own_bucket_is_streamed_by_vllm_from_your_uri(repository: str, uri: str) -> None:
    rendered = own_bucket("s3", repository)
    container = server(workload(rendered))
    args = container["args"]
    assert args[args.index("--model") + 1] == uri
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AWS_REGION"] == "us-east-1"
    # vLLM itself calls S3 with its Pod Identity credentials: the agent is reachable.
    (policy,) = [
        o for o in rendered.objects() if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "vllm"
    ]
    assert serving_facts()["eks_pod_identity_agent"]["ipv4"] in json.dumps(policy["spec"]["egress"])


def test_streamed_config_and_tokenizer_land_on_a_writable_volume() -> None:
    """vLLM pulls the prefix's config and tokenizer files into $VLLM_ASSETS_CACHE/model_streamer
    (falling back to $XDG_CACHE_HOME/vllm/assets, then ~/.cache/vllm/assets) and the safetensors
    index into a temporary directory, read from vLLM 0.33.0's source (reference/upstream). The root
    filesystem is read-only, so both must be on a mounted emptyDir."""
    from tests.upstream import vllm_object_storage_facts

    facts = vllm_object_storage_facts()
    assert facts["object_storage_schemes"]["value"][0] == "s3://"
    rendered = own_bucket("s3")
    obj = workload(rendered)
    container = server(obj)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    first, xdg, home = facts["assets_cache_default"]["value"]
    assert (first, xdg.split("/")[0], home.split("/")[0]) == ("VLLM_ASSETS_CACHE", "XDG_CACHE_HOME", "HOME")
    if first in env:
        assets = env[first]
    elif "XDG_CACHE_HOME" in env:
        assets = env["XDG_CACHE_HOME"] + xdg.removeprefix("XDG_CACHE_HOME")
    else:
        assets = env["HOME"] + home.removeprefix("HOME")
    tmp = env.get("TMPDIR", "/tmp")
    volumes = {v["name"]: v for v in pod_of(obj)["volumes"]}
    for path in (f"{assets}/model_streamer", tmp):
        mount = max(
            (m for m in container["volumeMounts"] if f"{path}/".startswith(m["mountPath"].rstrip("/") + "/")),
            key=lambda m: len(m["mountPath"]),
        )
        assert not mount.get("readOnly") and "emptyDir" in volumes[mount["name"]], path


@pytest.mark.parametrize(
    ("repository", "prefix_option"),
    [(f"s3://{OWN_BUCKET}/deepseek/r1-7b", "prefix deepseek/r1-7b/"), (f"s3://{OWN_BUCKET}/", None)],
)
def test_own_bucket_is_mounted_by_mountpoint_at_your_prefix(
    repository: str, prefix_option: str | None
) -> None:
    rendered = own_bucket("s3-mountpoint", repository)
    (volume,) = [o for o in rendered.objects() if o["kind"] == "PersistentVolume"]
    assert volume["spec"]["csi"]["volumeAttributes"]["bucketName"] == OWN_BUCKET
    options = volume["spec"]["mountOptions"]
    prefixes = [o for o in options if o.startswith("prefix")]
    assert prefixes == ([prefix_option] if prefix_option else [])  # the whole bucket: no --prefix
    assert "read-only" in options
    args, _ = weights_volume(rendered)
    assert args[args.index("--model") + 1] == "/weights" and "runai_streamer" not in args
    statements = reader_policy(rendered)
    assert (
        statements[1]["Resource"]
        == f"arn:aws:s3:::{OWN_BUCKET}/{prefix_option.split()[1] if prefix_option else ''}*"
    )


def cpu_millicores(quantity: str) -> int:
    return int(quantity.removesuffix("m")) if quantity.endswith("m") else int(float(quantity) * 1000)


def memory_mib(quantity: str) -> int:
    units = {"Mi": 1, "Gi": 1024}
    return int(quantity[:-2]) * units[quantity[-2:]]


def running_requests(pod: dict) -> tuple[int, int, int]:
    """(CPU millicores, memory MiB, GPUs) the scheduler counts for a pod while it runs: its
    containers and its sidecars (init containers that keep running) together (Kubernetes "Sidecar
    containers": resource sharing within containers)."""
    running = [
        *pod["containers"],
        *(c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"),
    ]
    requests = [c.get("resources", {}).get("requests", {}) for c in running]
    return (
        sum(cpu_millicores(r.get("cpu", "0m")) for r in requests),
        sum(memory_mib(r.get("memory", "0Mi")) for r in requests),
        sum(int(r.get("nvidia.com/gpu", "0")) for r in requests),
    )


def _vllm_role_statements(rendered: Rendered) -> list[dict]:
    """vLLM's Pod Identity role's statements ([] when it has none)."""
    for r in rendered.aws:
        if r["type"] == "aws:iam/rolePolicy:RolePolicy" and r["name"] == "inference-reader":
            return list(json.loads(r["inputs"]["policy"])["Statement"])
    return []


def _compile_cache_containers(pod: dict) -> dict[str, dict]:
    return {c["name"]: c for c in pod.get("initContainers", []) if "compile_cache.py" in json.dumps(c)}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_replicas_restore_and_save_vllms_compile_cache_in_the_weights_bucket(stack: str) -> None:
    """vLLM 0.33.0 keeps its compiled graphs under $VLLM_CACHE_ROOT/torch_compile_cache and Triton's
    kernels where TRITON_CACHE_DIR says: an init container restores exactly those directories from
    the project's bucket before vLLM starts, a sidecar saves them, and vLLM's role may write only
    the cache's own prefix (EKS guide: pre-warm the torch.compile cache on new nodes)."""
    from deepseek_eks.components.serving.scripts.compile_cache import CACHE_DIRS

    facts = cold_start_facts()["vllm_0_33_0_compile_cache"]
    rendered = render(stack_config(stack))
    assert rendered.plan["compile_cache"] is True
    pod = pod_of(workload(rendered))
    containers = _compile_cache_containers(pod)
    restore, save = containers["compile-cache-restore"], containers["compile-cache-save"]
    # The restore runs to completion before vLLM; the sidecar keeps running beside it (native sidecar).
    assert "restartPolicy" not in restore and save["restartPolicy"] == "Always"
    # ... and it runs before the sidecar starts, so what the sidecar saves is never restored over.
    names = [c["name"] for c in pod["initContainers"]]
    assert names.index(restore["name"]) < names.index(save["name"])
    env = {e["name"]: e["value"] for e in server(workload(rendered))["env"] if "value" in e}
    home = env["HOME"]
    # What the script keeps is where vLLM and Triton write, on the volume vLLM's HOME is.
    assert f"{env['VLLM_CACHE_ROOT']}/torch_compile_cache" == f"{home}/{CACHE_DIRS[0]}"
    assert "torch_compile_cache" in facts["cache_dir"]["quote"]
    assert env["TRITON_CACHE_DIR"] == f"{home}/{CACHE_DIRS[1]}"
    assert list(CACHE_DIRS) == facts["cached_dirs"]
    home_volume = next(
        m["name"] for m in server(workload(rendered))["volumeMounts"] if m["mountPath"] == home
    )
    for c in (restore, save):
        assert {"name": home_volume, "mountPath": home} in c["volumeMounts"]
        assert c["image"] == server(workload(rendered))["image"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
    bucket, prefix = restore["args"][restore["args"].index("--bucket") + 1], restore["args"][3]
    assert restore["args"][:4] == ["--bucket", bucket, "--prefix", prefix]
    assert f"s3://{bucket}/" in " ".join(server(workload(rendered))["args"])  # the weights' bucket
    weights_prefix = staged_prefix(rendered.plan["variant"])
    assert not prefix.startswith(weights_prefix) and not weights_prefix.startswith(prefix)
    (script,) = [
        o for o in rendered.objects()
        if o["kind"] == "ConfigMap" and "compile_cache.py" in o.get("data", {})
    ]  # fmt: skip
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount = next(m for m in restore["volumeMounts"] if m["mountPath"] == "/scripts")
    assert volumes[mount["name"]]["configMap"]["name"] == script["metadata"]["name"]
    # vLLM's role: read and write the cache's prefix, list it, and still only read the weights.
    statements = _vllm_role_statements(rendered)
    writes = [st for st in statements if "s3:PutObject" in st["Action"]]
    granted = f"compile-cache/{rendered.plan['variant']}/"
    assert [st["Resource"] for st in writes] == [f"arn:aws:s3:::{bucket}/{granted}*"]
    assert any(
        st["Action"] == ["s3:ListBucket"]
        and f"{granted}*" in st.get("Condition", {}).get("StringLike", {}).get("s3:prefix", [])
        for st in statements
    )
    # The pods keep theirs in a folder of the variant's prefix named for the image and the vLLM
    # arguments: vLLM starts a new cache directory when either changes, and a restore downloads
    # everything under its prefix, so what an upgrade left behind stays out of later starts.
    assert prefix.startswith(granted) and prefix.count("/") == granted.count("/") + 1
    resized = render(stack_config(stack, model__maxModelLen="16384"))
    restore_of = lambda r: _compile_cache_containers(pod_of(workload(r)))["compile-cache-restore"]["args"][3]  # noqa: E731
    assert restore_of(resized).startswith(granted) and restore_of(resized) != prefix
    assert restore_of(render(stack_config(stack))) == prefix  # the same config, the same folder
    assert not any("s3:DeleteObject" in st["Action"] for st in statements)
    # The sidecar's requests come out of the plan's: the pod as a whole still fits the node.
    assert running_requests(pod)[:2] == (
        cpu_millicores(rendered.plan["cpu_request"]),
        memory_mib(rendered.plan["memory_request"]),
    )
    assert gate(rendered) == []


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [("dev", {"weights__source": "huggingface"}), ("dev", {"weights__source": "s3-mountpoint"}), ("r1", {})],
)
def test_no_compile_cache_where_the_pods_cannot_keep_one(stack: str, overrides: dict) -> None:
    rendered = render(stack_config(stack, **overrides))
    assert rendered.plan["compile_cache"] is False
    assert not _compile_cache_containers(pod_of(workload(rendered)))
    assert not [o for o in rendered.objects() if "compile_cache.py" in o.get("data", {})]
    assert not any("s3:PutObject" in st["Action"] for st in _vllm_role_statements(rendered))


def test_the_dev_stack_starts_a_replica_in_four_minutes_on_a_new_node_and_two_on_a_warm_one() -> None:
    """The goal of the example stacks' cold start: 240 s on a new node, 120 s where a warm spare
    node is held, each the sum of its cited stages."""
    plan = render(stack_config("dev")).plan
    assert plan["startup_seconds"] == sum(plan["startup_breakdown"].values()) <= 240
    assert plan["warm_node_startup_seconds"] == sum(plan["warm_node_startup_breakdown"].values()) <= 120
