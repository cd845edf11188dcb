"""Every vLLM command line the render starts is one the pinned vLLM accepts, and drains.

The command lines are read from the rendered workloads themselves (container ``args``, or the
``vllm serve`` in the LeaderWorkerSet leader's shell script) and checked against the flags of
``vllm serve`` in the released 0.33.0 wheel (``reference/upstream/vllm-0.33.0/serve-flags.json``):
each flag exists, is not deprecated, has a value exactly when it takes one, and the value is one of
its ``choices``. ``--shutdown-timeout`` (default 0: abort every request on SIGTERM, FACTS.md) must
be the plan's drain budget and fit, with the preStop pause, in the pod's grace period; the ALB
must keep a draining target's streams as long.
"""

from __future__ import annotations

import shlex
from functools import cache
from typing import Any

import pytest

from deepseek_eks.automation.render import Rendered, render
from tests.conftest import stack_config
from tests.upstream import serving_facts, vllm_serve_flags

CASES = {
    "dev": ("dev", ()),
    "dev-s3": ("dev", (("weights__source", "s3"),)),
    "dev-drain-override": ("dev", (("endpoint__drainSeconds", "120"),)),
    "prod": ("prod", ()),
    "prod-s3": ("prod", (("weights__source", "s3"),)),
    "r1": ("r1", ()),
    "r1-huggingface": ("r1", (("weights__source", "huggingface"),)),
    "r1-p5en": ("r1", (("gpu__instanceFamilies", "p5en"),)),
    "awq-on-t4": (
        "dev",
        (
            ("gpu__instanceFamilies", "g4dn"),
            ("model__quantization", "awq-int4"),
            ("model__repository", "org/awq-checkpoint"),
        ),
    ),
}


@cache
def rendered(case: str) -> Rendered:
    name, overrides = CASES[case]
    return render(stack_config(name, **dict(overrides)))


def pod_specs(r: Rendered) -> list[dict[str, Any]]:
    specs = []
    for obj in r.objects():
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "vllm":
            specs.append(obj["spec"]["template"]["spec"])
        if obj["kind"] == "LeaderWorkerSet":
            specs.append(obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"])
    return specs


def serve_args(container: dict[str, Any]) -> list[str]:
    """The arguments of ``vllm serve``: the container args, or the words after ``vllm serve`` in
    the shell script of a multi-node leader (up to the end of that command)."""
    if "args" in container:
        return list(container["args"])
    words = shlex.split(container["command"][-1])
    start = next(i for i in range(len(words) - 1) if words[i : i + 2] == ["vllm", "serve"]) + 2
    end = next((i for i in range(start, len(words)) if words[i] in ("&&", ";", "||")), len(words))
    return words[start:end]


def parse(args: list[str]) -> dict[str, str | None]:
    """``--flag value`` pairs checked against the parser of the pinned vLLM."""
    flags = vllm_serve_flags()
    parsed: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        assert flag in flags, f"{flag} is not a flag of vllm serve 0.33.0"
        spec = flags[flag]
        assert not spec["deprecated"], f"{flag} is deprecated in vLLM 0.33.0"
        if spec["takes_value"]:
            assert i + 1 < len(args) and not args[i + 1].startswith("--"), f"{flag} needs a value"
            value: str | None = args[i + 1]
            if spec["choices"] is not None:
                assert value in spec["choices"], f"{flag} {value}: not one of {spec['choices']}"
            i += 2
        else:
            value = None
            i += 1
        assert flag not in parsed, f"{flag} given twice"
        parsed[flag] = value
    return parsed


@pytest.mark.parametrize("case", list(CASES))
def test_every_flag_exists_in_the_pinned_vllm_and_is_current(case: str) -> None:
    specs = pod_specs(rendered(case))
    assert specs, "no vLLM server in the render"
    for spec in specs:
        args = serve_args(spec["containers"][0])
        parse(args)
        # plan.json says what really runs (the model may be the staged S3 copy instead)
        assert without_model(args) == without_model(rendered(case).plan["vllm_args"])


def without_model(args: list[str]) -> list[str]:
    i = args.index("--model")
    return args[:i] + args[i + 2 :]


@pytest.mark.parametrize("case", list(CASES))
def test_shutdown_drains_for_the_planned_budget_within_the_grace_period(case: str) -> None:
    r = rendered(case)
    drain = r.plan["drain_seconds"]
    ingress = next(o for o in r.objects() if o["kind"] == "Ingress")
    attributes = ingress["metadata"]["annotations"]["alb.ingress.kubernetes.io/target-group-attributes"]
    deregistration = int(
        dict(kv.split("=") for kv in attributes.split(","))["deregistration_delay.timeout_seconds"]
    )
    for spec in pod_specs(r):
        container = spec["containers"][0]
        timeout = parse(serve_args(container))["--shutdown-timeout"]
        assert timeout is not None and int(timeout) == drain > 0  # 0 would abort every stream
        pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        # The grace period covers the preStop hook and then the SIGTERM drain (Pod Lifecycle).
        assert serving_facts()["kubernetes_termination"]["grace_period_includes_prestop"]
        assert pause + int(timeout) < spec["terminationGracePeriodSeconds"]
        # The ALB keeps a draining target's connections while vLLM finishes them.
        limit = serving_facts()["alb_target_group"]["deregistration_delay_max_s"]
        assert deregistration == min(limit, pause + drain)


def test_the_stack_drain_setting_reaches_vllm() -> None:
    assert rendered("dev-drain-override").plan["drain_seconds"] == 120
    args = rendered("dev-drain-override").plan["vllm_args"]
    assert args[args.index("--shutdown-timeout") + 1] == "120"
