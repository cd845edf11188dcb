"""Every cluster name a shipped stack's render dials (``<service>.<namespace>.svc[.cluster.local]``,
in its objects and its Helm values: KEDA's and the adapter's Prometheus, the weights stager's and
the tests' vLLM) is answered by the real CoreDNS (twin/coredns.py, EKS's v1.12.4) with the address
of a Service that exists, on the port the name is dialled on.

The Services are the render's own and the charts' (``reference/upstream/chart-workloads.json``:
read from each pinned chart's templates with the values this project sets), each created in the
namespace the render installs its chart in; the twin's API server gives them their addresses.
A name that points at no Service, the wrong namespace or a port the Service lacks fails here.

Skips without the programs (``twin/build.sh coredns``); under DEEPSEEK_EKS_REQUIRE_LWS=1 (CI, once
it has built them, in the same slot as the LeaderWorkerSet controller) fails instead.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepseek_eks.automation.stackfile import stack_names
from deepseek_eks.twin import missing_binaries
from deepseek_eks.twin.binaries import TIER0
from deepseek_eks.twin.check import load_render
from deepseek_eks.twin.coredns import Dns, running_coredns
from deepseek_eks.twin.server import Api, running_twin
from tests.twin.conftest import render_stack, require_binaries
from tests.upstream import UPSTREAM

REQUIRED_BY = "DEEPSEEK_EKS_REQUIRE_LWS"
CLUSTER_NAME = re.compile(
    r"(?:\b(https?)://)?\b([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?(?::(\d+))?\b"
)
# The port a URL without one is dialled on (RFC 9110 4.2.1, 4.2.2).
DEFAULT_PORTS = {"http": 80, "https": 443}


def dialled_names(render: Path) -> set[tuple[str, str, int | None]]:
    """(service, namespace, port) of every cluster name in the render's files: the port written, or
    in the render's objects and outputs a URL scheme's default, else None. A Helm value's URL
    without a port gets none: a chart may add the port from a value of its own
    (prometheus-adapter 5.3.0 runs ``--prometheus-url=<prometheus.url>:<prometheus.port>``, as
    tests/data/chart_objects.json records it rendered)."""
    found = set()
    for path in sorted(render.rglob("*")):
        if path.suffix not in (".yaml", ".json"):
            continue
        helm_value = path.parent.name == "helm"
        for m in CLUSTER_NAME.finditer(path.read_text()):
            default = None if helm_value else DEFAULT_PORTS.get(m[1] or "")
            found.add((m[2], m[3], int(m[4]) if m[4] else default))
    return found


def chart_services(render: Path) -> list[dict[str, Any]]:
    """The charts' Services (chart-workloads.json), in the namespace the render installs each chart in."""
    releases = {}
    for path in sorted((render / "helm").glob("*.yaml")):
        release = yaml.safe_load(path.read_text())
        releases[release["chart"]] = release["namespace"]
    services = []
    for known in json.loads((UPSTREAM / "chart-workloads.json").read_text())["services"].values():
        if known["chart"] not in releases:
            continue
        ports = [
            {"name": f"p{p['port']}", "port": p["port"], "targetPort": p["targetPort"]}
            for p in known["ports"]
        ]
        services.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": known["name"], "namespace": releases[known["chart"]]},
                "spec": {"selector": known["selector"], "ports": ports},
            }
        )
    return services


class Cluster:
    def __init__(self, api: Api, dns: Dns, folder: Path) -> None:
        self.api, self.dns, self.folder = api, dns, folder

    def create(self, obj: dict[str, Any]) -> None:
        reply = self.api.apply(obj, dry_run=False)
        assert reply.ok, f"{obj['kind']} {obj['metadata']['name']}: {reply.message}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    require_binaries(
        missing_binaries((*TIER0, "coredns")),
        "CoreDNS and the twin",
        "run `twin/build.sh coredns`",
        REQUIRED_BY,
    )
    with tempfile.TemporaryDirectory(prefix="twin-names-") as tmp, running_twin() as api:
        folder = Path(tmp)
        with running_coredns(api, folder) as dns:
            yield Cluster(api, dns, folder)


@pytest.mark.parametrize("stack", stack_names())
def test_every_cluster_name_a_stack_dials_is_a_service_coredns_answers(cluster: Cluster, stack: str) -> None:
    render = render_stack(stack, "karpenter", cluster.folder / stack)
    objects = load_render(render)[0]
    services = [o for o in objects if o["kind"] == "Service"] + chart_services(render)
    for namespace in sorted({s["metadata"]["namespace"] for s in services}):
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for service in services:
        cluster.create(service)
    names = dialled_names(render)
    assert names, "the render dials no cluster name: the scan found nothing to judge"
    for name, namespace, port in sorted(names, key=str):
        stored = cluster.api.call("GET", f"/api/v1/namespaces/{namespace}/services/{name}")
        answer = cluster.dns.pod_lookup(f"{name}.{namespace}.svc", "default")
        assert answer is not None, f"{name}.{namespace}.svc: no such Service, CoreDNS answers NXDOMAIN"
        assert answer == [stored.body["spec"]["clusterIP"]]
        if port is not None:
            assert port in {p["port"] for p in stored.body["spec"]["ports"]}, (
                f"{name}.{namespace}: no port {port}"
            )


def test_a_name_of_no_service_is_not_answered(cluster: Cluster) -> None:
    """The check above can fail: CoreDNS gives a name with no Service behind it nothing."""
    assert cluster.dns.pod_lookup("prometheus.monitoring.svc", "default") is None
