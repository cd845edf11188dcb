"""Every Pod Identity role can be assumed only by the one service account of this cluster it is
for; the load balancer controller's tag conditions name this cluster; nodes pull from ECR only.

Facts come from ``reference/upstream/eks-iam-facts.json`` (EKS User Guide, AWS Load Balancer
Controller v3.5.0 source); the roles, associations and add-ons are the ones the program builds
under the mock engine.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepseek_eks.automation.render import Construction
from deepseek_eks.testing.mocks import ACCOUNT_ID
from tests.conftest import stack_config
from tests.upstream import UPSTREAM

FACTS = json.loads((UPSTREAM / "eks-iam-facts.json").read_text())
TAGS = FACTS["pod_identity_session_tags"]
ROLE = "aws:iam/role:Role"


CASES = {
    "prod": ("prod", {}),  # Karpenter: its controller, the load balancer controller, the EBS add-on
    "r1": ("r1", {}),  # weights from S3: vLLM's reader and the stager
    "dev-s3": ("dev", {"weights__source": "s3"}),  # Auto Mode
}


@pytest.fixture(scope="module", params=sorted(CASES))
def run(request: pytest.FixtureRequest, construct_module) -> Construction:
    stack, overrides = CASES[request.param]
    return construct_module(stack_config(stack, **overrides))  # type: ignore[no-any-return]


def _pod_identity_trust(role: Any) -> dict[str, Any] | None:
    (statement, *more) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    if statement["Principal"] != {"Service": TAGS["trust_principal"]}:
        return None
    assert not more and statement["Action"] == TAGS["trust_actions"]
    return statement  # type: ignore[no-any-return]


def _cluster_arn(run: Construction) -> str:
    region = run.mocks.region
    name = run.outputs["clusterName"]
    return FACTS["pod_identity_cluster_arn_format"]["value"].format(
        partition="aws", region=region, account=ACCOUNT_ID, name=name
    )


def _associated(run: Construction) -> dict[str, tuple[str, str]]:
    """Role ARN -> (namespace, service account) of each Pod Identity association, the EKS add-ons'
    included (they associate in the add-on's namespace)."""
    out = {
        r.inputs["roleArn"]: (r.inputs["namespace"], r.inputs["serviceAccount"])
        for r in run.mocks.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    ebs = FACTS["ebs_csi_addon_service_account"]["value"]
    for addon in run.mocks.of_type("aws:eks/addon:Addon"):
        for association in addon.inputs.get("podIdentityAssociations", []):
            assert association["serviceAccount"] == ebs["name"]
            out[association["roleArn"]] = (ebs["namespace"], ebs["name"])
    return out


def test_each_pod_identity_role_trusts_only_its_service_account_of_this_cluster(run: Construction) -> None:
    associated = _associated(run)
    trusted = {r.state["arn"]: t for r in run.mocks.of_type(ROLE) if (t := _pod_identity_trust(r))}
    assert trusted, "no Pod Identity role"
    assert set(trusted) == set(associated), "every Pod Identity role is associated, and only those"
    key = "aws:RequestTag/{}".format
    for arn, statement in trusted.items():
        namespace, service_account = associated[arn]
        assert statement["Condition"] == {
            "StringEquals": {
                key("eks-cluster-arn"): _cluster_arn(run),
                key("kubernetes-namespace"): namespace,
                key("kubernetes-service-account"): service_account,
            }
        }
        tags = {k.removeprefix("aws:RequestTag/") for k in statement["Condition"]["StringEquals"]}
        assert tags <= set(TAGS["value"]), "only tags EKS Pod Identity sets"


def test_load_balancer_controller_tag_conditions_name_this_cluster(construct_module) -> None:
    run = construct_module(stack_config("prod"))
    (policy,) = [
        json.loads(r.inputs["policy"])
        for r in run.mocks.of_type("aws:iam/rolePolicy:RolePolicy")
        if "aws-load-balancer-controller" in r.name
    ]
    tag = FACTS["elbv2_cluster_tag"]["value"]["key"]
    cluster = run.outputs["clusterName"]
    conditioned = 0
    for statement in policy["Statement"]:
        for operator, keys in statement.get("Condition", {}).items():
            for condition_key, value in keys.items():
                if condition_key.endswith(f"Tag/{tag}"):
                    conditioned += 1
                    # Presence checks (Null) only for the request tag a retag may not touch.
                    if operator == "Null":
                        assert condition_key.startswith("aws:RequestTag/") and value == "true"
                    else:
                        assert (operator, value) == ("StringEquals", cluster), statement["Sid"]
    assert conditioned >= 6


def test_nodes_get_ecr_pull_only(construct_module) -> None:
    run = construct_module(stack_config("prod"))
    attached = {
        r.inputs["policyArn"].rsplit("/", 1)[-1]
        for r in run.mocks.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("capacity-node-")
    }
    ecr = {p for p in attached if "ContainerRegistry" in p}
    assert ecr == {FACTS["node_role_ecr_policy"]["value"]}
