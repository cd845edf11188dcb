"""Pinned versions: images by tag or digest (no mutable tag), AMI aliases and Helm charts by version."""

from __future__ import annotations

from .base import KARPENTER_NODECLASS_GROUP, Props, as_list, containers, get_in, is_kind, kind_of, walk

# Tags that name a moving target instead of a release: ``latest`` (what a reference without a tag
# pulls) and the branch or channel names that registries republish on every build.
MUTABLE_TAGS = frozenset({"latest", "main", "master", "nightly", "stable", "edge", "dev"})


def unpinned_image(image: str) -> str | None:
    """Why an image reference is not pinned, or None (a digest, or a tag that names a release)."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag"
    tag = last.rsplit(":", 1)[1]
    if tag.lower() in MUTABLE_TAGS:
        return f"uses the mutable tag {tag}"
    return None


def pinned_versions(token: str, props: Props) -> list[str]:
    problems = []
    for path, container in containers(props):
        image = str(container.get("image") or "")
        if why := unpinned_image(image):
            problems.append(f"{path}.image {image!r} {why}: pin a version tag or digest")
    if is_kind(token, KARPENTER_NODECLASS_GROUP, "EC2NodeClass"):
        for index, term in enumerate(as_list(get_in(props, "spec", "amiSelectorTerms"))):
            alias = str(get_in(term, "alias") or "")
            if alias.endswith("@latest"):
                problems.append(
                    f"spec.amiSelectorTerms[{index}].alias {alias!r} follows every AMI release: pin it"
                )
    if kind_of(token) is not None and token.startswith("kubernetes:helm.sh/"):
        chart, version = str(props.get("chart") or ""), props.get("version")
        local = chart.startswith((".", "/"))
        if not local and (not version or str(version).lower() == "latest"):
            problems.append(f"Helm chart {chart!r} has no pinned version: set version")
        for path, key, value in walk(props.get("values") or {}):
            if key == "tag" and isinstance(value, str) and value.lower() in MUTABLE_TAGS:
                problems.append(f"values.{path} is {value!r}: pin the image tag")
    return problems
