"""The example stacks and programs a user copies are deployable after setting only their access
CIDR (cluster.publicAccessCidrs): what they warn about then is only what each one decided on
purpose, listed here with the reason, so a new warning in a shipped example fails until it is
fixed or decided."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deepseek_eks.automation.api import read_config
from deepseek_eks.automation.render import render
from deepseek_eks.settings import parse_settings
from deepseek_eks.testing.mocks import ProgramLog
from tests.examples import COMPUTE_MODES, run_existing_cluster_example

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name.split(".")[1] for p in ROOT.glob("Pulumi.*.yaml"))
ACCESS = {"cluster.publicAccessCidrs": "203.0.113.7/32"}  # a deployer's egress address (TEST-NET-3)

# Each warning a shipped stack keeps once its access CIDR is set: (what it starts with, why it is
# the right thing to ship).
DOCKER_HUB = (
    "deepseek-eks:image.registry is unset",
    "the registry that ends it is the user's own: an ECR pull-through cache of Docker Hub needs the "
    "user's Docker Hub access token in Secrets Manager, a mirror is theirs too; each stack file says "
    "what to set",
)
ONE_REPLICA = (
    "autoscaling.minReplicas = 1: whenever one replica is all there is",
    "one replica is the stack's purpose: dev is the cheapest service that works, r1 costs $110/h a "
    "replica; each stack file says what a second one buys",
)
TWO_NODES = (
    "one replica spans 2 nodes and NCCL between them runs over TCP sockets",
    "the full model on p5 needs two nodes a replica; the stack file names p5en, one node a replica, "
    "where H200 capacity is available",
)
UNSURE = (
    "the replica model is unsure of r1-distill-llama-70b on 4x L40S",
    "prod's setup is the one the replica model's worst held-out measurement ran on (a vendor's "
    "64-stream figure 45 % under the model): until the user's load test of one replica replaces the "
    "model's figure, the plan's replicas and price may be optimistic, and the user should know",
)
KEPT = {
    "dev": [DOCKER_HUB, ONE_REPLICA],
    "prod": [DOCKER_HUB, UNSURE],
    "r1": [DOCKER_HUB, TWO_NODES, ONE_REPLICA],
}


def _warnings(stack: str) -> list[str]:
    """Everything plan and render warn about for the stack with its access CIDR set: the settings'
    warnings and refusals, the plan's warnings and what the program logs."""
    config = read_config(stack, ACCESS)
    settings = parse_settings(config.values, config.secret_keys, stack)
    rendered = render(config)
    found = [
        *settings.warnings,
        *settings.deploy_blockers,
        *settings.first_run_blockers,
        *rendered.sizing.warnings,
        *rendered.warnings,
    ]
    return list(dict.fromkeys(found))


def test_every_shipped_stack_is_listed() -> None:
    assert set(STACKS) == set(KEPT)


@pytest.mark.parametrize("stack", STACKS)
def test_a_shipped_stack_warns_only_about_what_it_decided(stack: str) -> None:
    found = _warnings(stack)
    unexplained = [w for w in found if not any(w.startswith(start) for start, _ in KEPT[stack])]
    assert not unexplained, f"Pulumi.{stack}.yaml with only its access CIDR set warns: {unexplained}"
    missing = [start for start, _ in KEPT[stack] if not any(w.startswith(start) for w in found)]
    assert not missing, f"no longer warned, drop it from KEPT: {missing}"


@pytest.mark.parametrize("stack", STACKS)
def test_the_registry_a_stack_file_shows_is_one_the_settings_take(stack: str) -> None:
    """The commented-out image.registry line is what the user uncomments: valid once filled in,
    and the Docker Hub warning gone then."""
    text = (ROOT / f"Pulumi.{stack}.yaml").read_text()
    (line,) = re.findall(r"^\s*# (deepseek-eks:image\.registry: .*)$", text, re.MULTILINE)
    registry = line.split(": ", 1)[1].replace("<account>", "123456789012")
    config = read_config(stack, {**ACCESS, "image.registry": registry})
    settings = parse_settings(config.values, config.secret_keys, stack)
    assert not [w for w in settings.warnings if w.startswith(DOCKER_HUB[0])]


# What examples/existing-cluster keeps, per service, in the component's argument spelling.
EXAMPLE_KEPT = (
    ('image={"registry": ...} is unset', DOCKER_HUB[1]),
    (
        'network={"load_balancer_subnet_ids": ...} is not set',
        "the example joins the user's own VPC: which subnets only load balancers use is the user's "
        "network to decide, and the warning says what to create and set",
    ),
    (
        'autoscaling={"min_replicas": ...} = 1: whenever one replica is all there is',
        "each team's service is the cheapest that works, one replica at the floor; the example says "
        "so above the services, and the warning says what a second replica buys",
    ),
)


# team-b serves prod's 70B on g6e, the setup UNSURE is about.
EXAMPLE_KEPT_BY_TEAM = {"team-a": EXAMPLE_KEPT, "team-b": (*EXAMPLE_KEPT, UNSURE)}


@pytest.mark.parametrize("compute_mode", COMPUTE_MODES)
def test_the_example_program_warns_only_about_what_it_decided(compute_mode: str) -> None:
    """examples/existing-cluster joins a cluster (no access CIDR to set); each of its two services
    warns, once, about what the example leaves to the user on purpose, and nothing else."""
    log = ProgramLog()
    run_existing_cluster_example(compute_mode, log)
    for team, kept in EXAMPLE_KEPT_BY_TEAM.items():
        said = [w for w in log.warnings if w.startswith(f"DeepSeekService {team!r}: ")]
        for phrase, _ in kept:
            assert len([w for w in said if phrase in w]) == 1, (team, phrase, said)
        assert len(said) == len(kept), said
    assert all(w.startswith("DeepSeekService 'team-") for w in log.warnings), log.warnings
