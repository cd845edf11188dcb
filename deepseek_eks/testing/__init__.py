"""Test a Pulumi program that uses ``DeepSeekService`` offline, with no cloud and no Pulumi CLI.

``Mocks`` is a ``pulumi.runtime.Mocks`` that answers every resource and invoke the component makes
with the outputs the cloud would compute (ids, ARNs, the cluster's kubeconfig, availability zones),
made up deterministically; a resource type or invoke it does not know fails loudly, naming it.
``run`` runs a zero-argument function as a Pulumi program under those mocks and returns what it
registered. These are the mocks the project's own offline render and tests use
(``deepseek_eks.testing.mocks``).

    from deepseek_eks.testing import run

    resources = run(my_program, config={"aws:region": "eu-west-1"})
    buckets = [r for r in resources if r.type == "aws:s3/bucket:Bucket"]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from deepseek_eks.testing.mocks import REGION, Recorded, RecordingMocks, UnmockedError, run_with_mocks

__all__ = ["Mocks", "Recorded", "UnmockedError", "run"]


class Mocks(RecordingMocks):
    """Strict recording mocks for programs using ``DeepSeekService``: after a run, ``resources``
    lists every registration (``Recorded``: ``.type``, ``.name``, ``.inputs``, ``.provider``, ...)
    and ``invokes`` every invoke. To answer resources of your own program too, subclass it and
    return from ``new_resource``/``call`` for your types, deferring to ``super()`` for the rest."""


def run(
    program: Callable[[], object],
    *,
    stack: str = "dev",
    config: Mapping[str, object] | None = None,
    project: str = "test",
    mocks: Mocks | None = None,
) -> list[Recorded]:
    """Run ``program`` as a Pulumi program (project ``project``, stack ``stack``) under ``mocks``
    (default: a fresh ``Mocks`` for ``aws:region``) and return the resources it registered, in order.

    ``config`` is the stack's config: full keys (``aws:region``) or keys of your project
    (``apiKey`` -> ``<project>:apiKey``); values are text, or structured values given as Python
    objects (sent as JSON, as the engine sends them). An exception the program raises, directly or
    inside an ``apply``, is raised here."""
    values = {
        (key if ":" in key else f"{project}:{key}"): value if isinstance(value, str) else json.dumps(value)
        for key, value in (config or {}).items()
    }

    if mocks is None:  # invokes answer for the program's region (availability zones, ARNs)
        mocks = Mocks(region=values.get("aws:region", REGION))

    def outputs() -> dict[str, Any]:
        program()
        return {}

    run_with_mocks(outputs, mocks, project=project, stack=stack, config=values, secret_keys=[])
    return list(mocks.resources)
