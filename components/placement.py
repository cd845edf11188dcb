"""Where a ``DeepSeekService`` goes, as opposed to what it is: the arguments that are not stack
settings. Each is declared here once; tools/generate_settings.py writes them into
``DeepSeekServiceArgs`` (components/service_args.py) beside the settings, and
``components/service.py`` (``_scope``) reads them.

Docstrings are one line each: Python 3.13 strips the indentation of longer ones and 3.11 does not,
which would make the generated schema depend on the interpreter.
"""

# No ``from __future__ import annotations``: Pulumi's analyzer reads these annotations at runtime.

from collections.abc import Sequence
from typing import TypedDict

import pulumi


class ExistingClusterArgs(TypedDict, total=False):
    """An EKS cluster to join: Auto Mode, or running Karpenter (its provider is the component's)."""

    cluster_name: str
    """The cluster's name (plain: it names the service's resources and detects collisions)."""
    node_role_name: pulumi.Input[str]
    """Nodes' IAM role: Auto Mode's (GPU nodes needing more disk) or Karpenter's (karpenter: required)."""
    node_security_group_ids: Sequence[pulumi.Input[str]]
    """karpenter: security groups of the GPU nodes (default: the EKS-managed cluster security group)."""


class PlacementArgs(TypedDict, total=False):
    """The arguments of ``DeepSeekServiceArgs`` that say where the service goes."""

    existing_cluster: ExistingClusterArgs
    """Join this cluster instead of creating a VPC and a cluster."""
    namespace: str
    """The inference namespace the service creates (default: the service's name)."""
    install_shared_addons: bool
    """Install the cluster-wide add-ons (default: only with a cluster of its own); README explains."""
    create_aws_provider: bool
    """Create the service's own AWS provider from region and aws (default: use yours, opts.providers)."""


PLACEMENT_KEYS = tuple(PlacementArgs.__annotations__)
"""Where the service goes, not stack settings (see ``service_scope``)."""
