"""The policy pack ``pulumi preview --policy-pack policy`` runs: every rule of policy/rules/,
mandatory, as a pulumi-policy resource or stack validation.

``python -m policy check FILE|-`` runs the same rules over a JSON list of resources without Pulumi
(policy/cli.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

# The Pulumi CLI runs this file with the pack folder as the working directory, under the Python that
# has deepseek_eks installed (editable from a checkout, or the wheel): the rules import from there.
from deepseek_eks.policy.rules import RESOURCE_RULES, STACK_RULES, Resource, ResourceRule, StackRule


def resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule.check(args.resource_type, dict(args.props)):
            report_violation(message, None)

    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def stack_policy(rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [
            Resource(
                type=r.resource_type,
                props=dict(r.props),
                urn=r.urn,
                name=r.name,
                property_dependencies={
                    key: tuple(dep.urn for dep in deps)
                    for key, deps in (r.property_dependencies or {}).items()
                },
                parent=r.parent.urn if r.parent is not None else "",
            )
            for r in args.resources
        ]
        for urn, message in rule.check(resources):
            report_violation(message, urn or None)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    return [*map(resource_policy, RESOURCE_RULES), *map(stack_policy, STACK_RULES)]


if __name__ == "__main__":
    if Path(sys.argv[0]).resolve() == Path(__file__).resolve():
        # ``python -m policy ...``: Pulumi's runner instead runs this file from its own
        # pulumi/policy/__main__.py (runpy), so argv[0] names that one.
        from deepseek_eks.policy.cli import main

        sys.exit(main(sys.argv[1:]))
    PolicyPack(name="deepseek-eks-guardrails", policies=policies())  # type: ignore[arg-type]
