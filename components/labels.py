"""Labels and tags every object of the project carries, so owners and costs can be traced."""

from __future__ import annotations

from deepseek_eks.settings import Settings

PART_OF = "deepseek-eks"


def common_labels(settings: Settings) -> dict[str, str]:
    """Kubernetes labels: recommended app.kubernetes.io keys plus stack and variant."""
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "deepseek-eks/stack": settings.stack,
        "deepseek-eks/variant": settings.model.variant.value,
    }


def aws_tags(settings: Settings) -> dict[str, str]:
    """AWS tags with the same meaning as ``common_labels``."""
    return {"project": PART_OF, "stack": settings.stack, "variant": settings.model.variant.value}
