"""The policy pack's rules as pure functions over (type token, inputs), so they run in unit tests
and over the offline render without the policy server; ``policy/__main__.py`` wraps them for
``pulumi preview --policy-pack policy``. One module per concern: ``exposure`` (who can reach the
service), ``nodes`` (IMDSv2, GPU NodePools), ``pins``, ``storage`` (encryption, TLS-only and private
buckets), ``iam``, ``secrets``, ``rbac`` and ``workloads`` (host access, container privileges), on
``base`` (what a rule sees, and the helpers that read inputs). This module lists them as the pack
enforces them.

A resource rule answers the violations of one resource; a stack rule sees every resource (type,
inputs, URN and which resources fed each input) and answers (URN, message) pairs. Messages name the
offending field and the fix. No Pulumi code: besides the standard library, the rules use only
settings/cidrs.py (the one definition of a world-open CIDR set), so the pack and ``python -m policy
check`` start without loading the SDK, the providers or the component.
"""

from __future__ import annotations

from .base import Resource, ResourceRule, StackRule
from .exposure import (
    api_key_when_exposed,
    class_endpoint_not_open_to_world,
    cluster_endpoint_private_or_limited,
    endpoint_not_open_to_world,
    endpoint_tls_when_exposed,
    no_world_open_ingress,
    world_open_ingress_sets,
)
from .iam import no_wildcard_iam
from .nodes import gpu_nodepool_guarded, imdsv2_hop_limit_one
from .pins import pinned_versions
from .rbac import rbac_least_privilege
from .secrets import no_plaintext_secrets
from .storage import buckets_encrypted_tls_only, buckets_not_public, encrypted_volumes
from .workloads import container_least_privilege, no_host_access

RESOURCE_RULES: tuple[ResourceRule, ...] = (
    ResourceRule(
        "endpoint-not-open-to-world",
        "An internet-facing load balancer lists allowed client CIDRs, none of them the whole internet.",
        endpoint_not_open_to_world,
    ),
    ResourceRule(
        "cluster-endpoint-private-or-limited",
        "The EKS API endpoint is private, or public only to listed CIDRs.",
        cluster_endpoint_private_or_limited,
    ),
    ResourceRule(
        "imdsv2-hop-limit-1",
        "Node classes and launch templates require IMDSv2 with a hop limit of 1.",
        imdsv2_hop_limit_one,
    ),
    ResourceRule(
        "pinned-versions",
        "Images, AMI aliases and Helm charts are pinned (no latest, no missing tag or version).",
        pinned_versions,
    ),
    ResourceRule(
        "gpu-nodepool-guarded",
        "GPU NodePools cap their GPUs and neither expire nor consolidate nodes under serving replicas.",
        gpu_nodepool_guarded,
    ),
    ResourceRule(
        "encrypted-volumes", "EBS volumes, node disks and StorageClasses are encrypted.", encrypted_volumes
    ),
    ResourceRule(
        "no-wildcard-iam",
        "IAM policies grant no wildcard actions, and Resource '*' only for documented read/listener calls.",
        no_wildcard_iam,
    ),
    ResourceRule(
        "no-plaintext-secrets",
        "Kubernetes objects and Helm values carry no literal secrets (env, args, ConfigMaps, values).",
        no_plaintext_secrets,
    ),
    ResourceRule(
        "no-world-open-ingress",
        "No security group admits the whole internet (0.0.0.0/0, ::/0, or a union of CIDRs as open).",
        no_world_open_ingress,
    ),
    ResourceRule(
        "no-host-access",
        "No pod is privileged or uses hostPath/hostNetwork/hostPID/hostIPC, but the allow-listed exporters.",
        no_host_access,
    ),
)

STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "s3-encrypted-tls-only",
        "Every S3 bucket has server-side encryption and a policy denying non-TLS requests.",
        buckets_encrypted_tls_only,
    ),
    StackRule(
        "api-key-when-exposed",
        "vLLM requires an API key (from a Secret) when its endpoint is internet-facing.",
        api_key_when_exposed,
    ),
    StackRule(
        "tls-when-exposed",
        "An internet-facing endpoint serves HTTPS (a certificate), and plain HTTP only as a redirect.",
        endpoint_tls_when_exposed,
    ),
    StackRule(
        "class-endpoint-not-open-to-world",
        "An Ingress made internet-facing by its IngressClassParams lists allowed CIDRs, none world-open.",
        class_endpoint_not_open_to_world,
    ),
    StackRule(
        "no-world-open-ingress-sets",
        "Standalone ingress rules of one security group and port range do not add up to the whole internet.",
        world_open_ingress_sets,
    ),
    StackRule(
        "rbac-least-privilege",
        "Roles grant no wildcard verb or resource, no escalate/bind/impersonate, exec or token minting, no "
        "cluster-wide Secrets read; bindings hand cluster-admin or anything to all users to no one.",
        rbac_least_privilege,
    ),
    StackRule(
        "container-least-privilege",
        "No container adds capabilities beyond Pod Security Baseline, allows privilege escalation, runs "
        "seccomp-unconfined or with an unmasked /proc.",
        container_least_privilege,
    ),
    StackRule(
        "s3-not-public",
        "Every S3 bucket blocks public access (all four flags) and no ACL or policy grants everyone.",
        buckets_not_public,
    ),
)


def violations(resources: list[Resource]) -> list[tuple[str, str, str]]:
    """(rule, URN or name, message) of every violation in ``resources``, all rules applied."""
    found: list[tuple[str, str, str]] = []
    for resource in resources:
        for rule in RESOURCE_RULES:
            found.extend(
                (rule.name, resource.urn or resource.name, m)
                for m in rule.check(resource.type, resource.props)
            )
    for stack_rule in STACK_RULES:
        found.extend((stack_rule.name, urn, m) for urn, m in stack_rule.check(resources))
    return found


__all__ = ["RESOURCE_RULES", "STACK_RULES", "Resource", "ResourceRule", "StackRule", "violations"]
