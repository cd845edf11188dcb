"""The one required-flows table (``required_flows.json``): every connection the product needs on a
cluster, and some it must never allow, each with its reason. The NetworkPolicies are built per
concern (``network_policies.py``, ``serving/vllm.py``); this table is what checks them, read by the
tests' NetworkPolicy evaluator and by the tools that check a cluster or a load-test Job."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

EndpointKind = Literal["pod", "service", "host"]


@dataclass(frozen=True)
class FlowEnd:
    """One end of a flow: a workload's pod, a Service reached by its ClusterIP, or a host."""

    kind: EndpointKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class Flow:
    """A connection from ``source`` to ``dest`` on ``port``: ``required`` ones must be admitted,
    the others refused."""

    id: str
    source: FlowEnd
    dest: FlowEnd
    port: int
    protocol: str
    required: bool
    reason: str
    routing: str | None = None
    """The routing.kind a render must have for the flow to apply (None: every render)."""

    def applies_to(self, routing: str) -> bool:
        return self.routing is None or self.routing == routing


def _end(raw: dict[str, str]) -> FlowEnd:
    ((kind, name),) = raw.items()
    if kind not in ("pod", "service", "host"):
        raise ValueError(f"required_flows.json: unknown endpoint kind {kind!r}")
    return FlowEnd(kind, name)  # type: ignore[arg-type]  # checked just above


@cache
def required_flows() -> tuple[Flow, ...]:
    """Every flow of the table, in its order."""
    data = json.loads(resources.files(__package__).joinpath("required_flows.json").read_text())
    hosts = set(data["hosts"])
    flows = []
    for raw in data["flows"]:
        flow = Flow(
            raw["id"],
            _end(raw["from"]),
            _end(raw["to"]),
            int(raw["port"]),
            raw["protocol"],
            bool(raw["required"]),
            raw["reason"],
            raw.get("routing"),
        )
        for end in (flow.source, flow.dest):
            if end.kind == "host" and end.name not in hosts:
                raise ValueError(f"required_flows.json: flow {flow.id} names unknown host {end.name!r}")
        flows.append(flow)
    return tuple(flows)
