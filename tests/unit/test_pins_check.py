"""`python -m automation pins --check` (guardrails/pins.py) against a fake PyPI and Go module proxy
on 127.0.0.1: no test here reaches the network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deepseek_eks.guardrails import pins
from deepseek_eks.guardrails.pins import DriftTarget, Registries, Upstream

ROOT = Path(__file__).resolve().parents[2]


class FakeRegistry:
    """PyPI's JSON API under /pypi and a GOPROXY under /go, from dictionaries the test fills in;
    anything else answers 404. Module paths are stored as the test spells them in the URL, so a
    module with capitals is found only under its case-escaped path."""

    def __init__(self) -> None:
        self.routes: dict[str, bytes] = {}
        self.requests: list[str] = []
        routes, requests = self.routes, self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                requests.append(self.path)
                body = routes.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"not found")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def pypi(self) -> str:
        return f"{self.url}/pypi"

    @property
    def goproxy(self) -> str:
        return f"{self.url}/go"

    def project(self, name: str, releases: dict[str, bool]) -> None:
        """A PyPI project whose releases map to 'yanked'."""
        data = {
            "releases": {v: [{"filename": f"{name}-{v}.tar.gz", "yanked": y}] for v, y in releases.items()}
        }
        self.routes[f"/pypi/{name}/json"] = json.dumps(data).encode()

    def module(
        self, escaped: str, listed: list[str], served: list[str] = (), mods: dict[str, str] | None = None
    ) -> None:
        """A module under its escaped path: @v/list, .info of listed and served versions, .mod files."""
        self.routes[f"/go/{escaped}/@v/list"] = "".join(f"{v}\n" for v in listed).encode()
        for version in {*listed, *served}:
            self.routes[f"/go/{escaped}/@v/{version}.info"] = json.dumps({"Version": version}).encode()
        for version, text in (mods or {}).items():
            self.routes[f"/go/{escaped}/@v/{version}.mod"] = text.encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeRegistry]:
    registry = FakeRegistry()
    yield registry
    registry.close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: connection refused, at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def check(fake: FakeRegistry, target: DriftTarget, go: str | None = "go1.26.8") -> pins.Drift:
    return pins.check_drift(target, Registries(fake.pypi, fake.goproxy, timeout=5), go)


# --- versions and the proxy's spelling of module paths -------------------------------------------


def test_module_paths_are_case_escaped_as_the_goproxy_protocol_says() -> None:
    assert (
        pins.escape_module_path("github.com/NVIDIA/k8s-device-plugin")
        == "github.com/!n!v!i!d!i!a/k8s-device-plugin"
    )
    assert pins.escape_module_path("sigs.k8s.io/karpenter") == "sigs.k8s.io/karpenter"


def test_versions_order_as_their_registries_do() -> None:
    ordered = ["v1.14.1", "v1.15.0-rc.1", "v1.15.0", "v1.15.2", "v1.16.0"]
    assert sorted(reversed(ordered), key=pins._order(pins.semver_key)) == ordered
    assert pins.pep440_prerelease("0.35.0rc1") and pins.pep440_prerelease("0.35.0.dev3")
    assert not pins.pep440_prerelease("0.34.0") and not pins.pep440_prerelease("0.34.0.post1")
    assert pins.pep440_key("0.34.0") > pins.pep440_key("0.33.10") > pins.pep440_key("0.33.9")
    key = pins.go_version_key
    assert key("1.26.10") > key("go1.26.9") > key("1.26.8") > key("1.26") and key("1.27") > key("1.26.10")
    assert pins.is_pseudo("v4.0.0-20260115033456-f47bc2d6f199") and not pins.is_pseudo("v4.34.2")


def test_go_mod_parsing_reads_the_go_line_requires_and_tools() -> None:
    go_line, requires, tools = pins.parse_go_mod(
        "module x\n\ngo 1.26.6\n\ntool sigs.k8s.io/karpenter/kwok\n\nrequire a.b/c v1.2.3\n"
        "require (\n\tsigs.k8s.io/karpenter v1.14.1 // indirect\n)\n"
    )
    assert go_line == "1.26.6"
    assert requires == {"a.b/c": "v1.2.3", "sigs.k8s.io/karpenter": "v1.14.1"}
    assert tools == ["sigs.k8s.io/karpenter/kwok"]


# --- PyPI ------------------------------------------------------------------------------------------


def test_pypi_pin_behind_current_and_what_does_not_count(fake: FakeRegistry) -> None:
    # 0.35.0rc1 is a pre-release and 0.36.0 is yanked: neither is the newest release.
    fake.project("vllm", {"0.33.0": False, "0.34.0": False, "0.35.0rc1": False, "0.36.0": True})
    upstream = Upstream("pypi", "vllm")
    behind = check(fake, DriftTarget("image", "vllm/vllm-openai", "v0.33.0", upstream))
    assert (behind.status, behind.newest) == ("behind", "0.34.0")
    current = check(fake, DriftTarget("image", "vllm/vllm-openai", "v0.34.0", upstream))
    assert (current.status, current.newest) == ("current", "0.34.0")


# --- the Go module proxy ---------------------------------------------------------------------------


def test_a_module_with_capitals_is_asked_for_by_its_escaped_path_and_past_an_incomplete_list(
    fake: FakeRegistry,
) -> None:
    # The proxy lists v0.17.4 only but serves newer versions by name, with v0.19.2 missing.
    fake.module(
        "github.com/!n!v!i!d!i!a/k8s-device-plugin",
        ["v0.17.4"],
        served=["v0.18.0", "v0.18.1", "v0.19.0", "v0.19.1", "v0.19.3"],
    )
    target = DriftTarget(
        "chart", "nvidia-device-plugin", "0.18.0", Upstream("go", "github.com/NVIDIA/k8s-device-plugin")
    )
    drift = check(fake, target)
    assert (drift.status, drift.newest) == ("behind", "v0.19.3")
    assert "take v0.19.3" in drift.detail
    assert pins._styled(drift) == "0.19.3"  # spelled as the chart pin is
    assert not [r for r in fake.requests if "NVIDIA" in r]


def karpenter(fake: FakeRegistry, core_go: str) -> DriftTarget:
    """Karpenter's chart as versions.py maps it: released by the provider module, built by the
    twin from the core module the provider's go.mod requires."""
    fake.module(
        "github.com/aws/karpenter-provider-aws",
        ["v1.14.1", "v1.15.0"],
        mods={
            "v1.15.0": "module github.com/aws/karpenter-provider-aws\n\ngo 1.26.6\n\n"
            "require sigs.k8s.io/karpenter v1.15.0\n"
        },
    )
    fake.module(
        "sigs.k8s.io/karpenter",
        ["v1.14.1", "v1.15.0"],
        mods={"v1.15.0": f"module sigs.k8s.io/karpenter\n\ngo {core_go}\n"},
    )
    return DriftTarget("chart", "karpenter", "1.14.1", pins.CHART_UPSTREAMS["karpenter"])


def test_a_release_the_local_go_cannot_build_is_held_with_the_reason(fake: FakeRegistry) -> None:
    drift = check(fake, karpenter(fake, "1.26.9"), go="go1.26.8")
    assert (drift.status, drift.newest) == ("held", "v1.15.0")
    assert "sigs.k8s.io/karpenter@v1.15.0: go 1.26.9" in drift.detail and "go1.26.8" in drift.detail


def test_the_same_release_is_due_once_the_local_go_can_build_it(fake: FakeRegistry) -> None:
    drift = check(fake, karpenter(fake, "1.26.9"), go="go1.26.9")
    assert drift.status == "behind" and "take v1.15.0" in drift.detail
    assert "the twin then builds sigs.k8s.io/karpenter@v1.15.0 (go 1.26.9)" in drift.detail


def test_without_a_go_command_a_built_release_is_not_called_takeable(fake: FakeRegistry) -> None:
    drift = check(fake, karpenter(fake, "1.26.9"), go=None)
    assert drift.status == "held" and "no go command found" in drift.detail


def test_a_held_minor_leaves_only_patches_of_the_pinned_minor_due(fake: FakeRegistry) -> None:
    upstream = Upstream("go", "k8s.io/kubernetes", hold_minor="the clusters run 1.34")
    fake.module("k8s.io/kubernetes", ["v1.34.12", "v1.35.0"])
    held = check(fake, DriftTarget("twin-go", "twin/go/kubernetes", "v1.34.12", upstream))
    assert held.status == "held" and "newer minor v1.35.0 held: the clusters run 1.34" in held.detail
    fake.module("k8s.io/kubernetes", ["v1.34.12", "v1.34.13", "v1.35.0"])
    behind = check(fake, DriftTarget("twin-go", "twin/go/kubernetes", "v1.34.12", upstream))
    assert behind.status == "behind" and "take v1.34.13" in behind.detail


def test_another_major_s_legacy_tags_are_not_this_pin_s_releases(fake: FakeRegistry) -> None:
    """Prometheus 3 is released as module v0.3xx.y; the module's v2.x+incompatible and v1.x tags
    are Prometheus 2 and 1, never newer releases of the pin."""
    upstream = Upstream("go", "github.com/prometheus/prometheus", same_major="Prometheus 3 is v0.3xx")
    fake.module("github.com/prometheus/prometheus", ["v0.314.0", "v1.8.2", "v2.5.0+incompatible"])
    current = check(fake, DriftTarget("twin-go", "twin/go/prometheus", "v0.314.0", upstream))
    assert current.status == "current" and current.newest == "v0.314.0"
    assert "other majors left out: Prometheus 3 is v0.3xx" in current.detail
    fake.module("github.com/prometheus/prometheus", ["v0.314.0", "v0.315.0", "v1.8.2"])
    behind = check(fake, DriftTarget("twin-go", "twin/go/prometheus", "v0.314.0", upstream))
    assert behind.status == "behind" and "take v0.315.0" in behind.detail


def test_a_module_the_proxy_does_not_serve_is_a_manual_step_not_a_pass(fake: FakeRegistry) -> None:
    drift = check(fake, DriftTarget("chart", "lws", "0.10.0", Upstream("go", "sigs.k8s.io/lws")))
    assert drift.status == "not-served" and "manual step" in drift.detail
    manual = check(fake, DriftTarget("chart", "kube-prometheus-stack", "88.5.3", None, "helm-charts tags"))
    assert manual.status == "manual" and "manual step: helm-charts tags" in manual.detail


def test_goproxy_lists_fall_through_as_the_go_command_does(fake: FakeRegistry) -> None:
    fake.module("sigs.k8s.io/kwok", ["v0.8.0"])
    target = DriftTarget("twin-go", "twin/go/kwok", "v0.8.0", Upstream("go", "sigs.k8s.io/kwok"))
    down = closed_port_url()
    # "|": on to the next proxy after any error; ",": only after a 404 or 410.
    assert (
        pins.check_drift(target, Registries(fake.pypi, f"{down}|{fake.goproxy}", 5), "go1.26.8").status
        == "current"
    )
    assert (
        pins.check_drift(target, Registries(fake.pypi, f"{down},{fake.goproxy}", 5), "go1.26.8").status
        == "unreachable"
    )
    assert (
        pins.check_drift(target, Registries(fake.pypi, f"{fake.url}/nothing,{fake.goproxy}", 5), None).status
        == "current"
    )
    off = pins.check_drift(target, Registries(fake.pypi, "off", 5), None)
    assert off.status == "not-served" and "names no module proxy" in off.detail


# --- the command -----------------------------------------------------------------------------------


def run_pins(*args: str, pypi: str, goproxy: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, pins.PYPI_ENV: pypi, "GOPROXY": goproxy}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "automation",
            "pins",
            "--check",
            "--go-version",
            "go1.26.8",
            "--timeout",
            "5",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def rows(stdout: str) -> dict[str, list[str]]:
    header, *lines = stdout.splitlines()
    assert header.split() == ["KIND", "NAME", "PINNED", "NEWEST", "STATUS", "DETAIL"]
    return {
        line.split()[1]: line.split()
        for line in lines
        if len(line.split()) > 4 and not line.startswith("NOT")
    }


def serve_every_pin_as_current(fake: FakeRegistry) -> list[DriftTarget]:
    targets = pins.drift_targets()
    for target in targets:
        if target.upstream is None:
            continue
        if target.upstream.registry == "pypi":
            fake.project(target.upstream.package, {target.version.removeprefix("v"): False})
        else:
            version = target.version if target.version.startswith("v") else f"v{target.version}"
            fake.module(pins.escape_module_path(target.upstream.package), [version])
    return targets


def test_the_command_passes_strict_when_every_served_pin_is_current(fake: FakeRegistry) -> None:
    targets = serve_every_pin_as_current(fake)
    done = run_pins("--strict", pypi=fake.pypi, goproxy=fake.goproxy)
    assert done.returncode == 0, done.stdout + done.stderr
    table = rows(done.stdout)
    assert {t.name for t in targets} <= table.keys()  # one row per pin, none left out
    assert table["vllm/vllm-openai"][4] == "current"
    assert table["vllm/vllm-openai@digest"][2:5] == ["none", "-", "manual"]  # the digest: a manual step
    # What no registry serves is listed as a manual step, not counted as a pass.
    assert table["kube-prometheus-stack"][4] == "manual"
    assert "NOT CHECKED (manual" in done.stdout and "kube-prometheus-stack" in done.stdout.splitlines()[-1]


def test_the_command_reports_a_pin_behind_and_fails_only_when_strict(fake: FakeRegistry) -> None:
    serve_every_pin_as_current(fake)
    from deepseek_eks.components import versions

    pinned = versions.VLLM_IMAGE.rsplit(":v", 1)[1]
    major, minor, _ = pinned.split(".")
    newer = f"{major}.{int(minor) + 1}.0"
    fake.project("vllm", {pinned: False, newer: False})
    done = run_pins(pypi=fake.pypi, goproxy=fake.goproxy)
    assert done.returncode == 0, done.stderr
    assert rows(done.stdout)["vllm/vllm-openai"][3:5] == [f"v{newer}", "behind"]
    assert ", 1 behind," in done.stdout
    strict = run_pins("--strict", pypi=fake.pypi, goproxy=fake.goproxy)
    assert strict.returncode == 1 and "behind" in strict.stderr


def test_an_unreachable_registry_is_reported_per_pin_and_fails_only_when_strict() -> None:
    down = closed_port_url()
    done = run_pins(pypi=down, goproxy=down)
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert table["vllm/vllm-openai"][4] == "unreachable"
    assert table["keda"][4] == "unreachable"
    assert "unreachable: " in done.stdout and "NOT CHECKED (unreachable" in done.stdout
    assert run_pins("--strict", pypi=down, goproxy=down).returncode == 1


# --- coverage of the inventory ---------------------------------------------------------------------


def test_every_twin_module_and_every_inventory_pin_has_a_row() -> None:
    targets = pins.drift_targets()
    twin = [t for t in targets if t.kind == "twin-go"]
    assert {t.name for t in twin} == {
        f"twin/go/{p.parent.name}" for p in (ROOT / "twin" / "go").glob("*/go.mod")
    }
    assert all(t.upstream is not None for t in twin), [t.manual for t in twin if t.upstream is None]
    names = {t.name for t in targets}
    inventory = pins.collect_pins()
    assert {p.name for p in inventory if p.kind in ("chart", "image", "ami", "sdk")} <= names
    assert {p.source.split()[0] for p in inventory if p.kind == "crd-schema"} <= names
    # Each pin has a registry to ask or says where to look by hand.
    assert all(t.upstream is not None or t.manual for t in targets)


# --- image digests and EKS add-ons: manual steps, never a silent pass (issue 37 §3) -----------------


def test_every_image_has_a_digest_row_that_says_what_is_pinned_and_what_to_do() -> None:
    from deepseek_eks.components import versions

    digests = {t.name: t for t in pins.drift_targets() if t.kind == "digest"}
    charts = {v.chart.rsplit("/", 1)[-1] for v in vars(versions).values() if isinstance(v, versions.ChartPin)}
    assert set(digests) == {"vllm/vllm-openai@digest", "registry.k8s.io/pause@digest"} | {
        f"{chart}@images" for chart in charts
    }
    assert all(t.upstream is None and t.manual for t in digests.values())  # reported as manual steps
    vllm = digests["vllm/vllm-openai@digest"]
    assert vllm.version == "none" and "pinned by tag only" in str(vllm.manual)
    assert "imagetools inspect vllm/vllm-openai:v0.33.0" in str(vllm.manual)
    pause = digests["registry.k8s.io/pause@digest"]
    assert pause.version == versions.PAUSE_IMAGE_DIGEST and "kubernetes/k8s.io" in str(pause.manual)
    assert "crane digest" in str(digests["keda@images"].manual)
    assert "by digest" in str(digests["karpenter@images"].manual)


def test_the_pause_image_is_pulled_by_the_digest_its_upstream_states() -> None:
    from deepseek_eks.components import versions
    from deepseek_eks.components.platform.warm_spare import placeholder_deployment  # noqa: F401

    facts = json.loads((ROOT / "reference/upstream/image-pulls.json").read_text())["pause_image_digest"]
    assert (facts["image"], facts["digest"]) == (versions.PAUSE_IMAGE, versions.PAUSE_IMAGE_DIGEST)
    source = (ROOT / "components/platform/warm_spare.py").read_text()
    assert "image_reference(PAUSE_IMAGE, digest=PAUSE_IMAGE_DIGEST)" in source


def test_karpenter_mode_add_ons_are_pinned_or_listed_as_manual_with_the_reason() -> None:
    from deepseek_eks.components import versions
    from deepseek_eks.settings.model import SUPPORTED_KUBERNETES_VERSIONS

    facts = json.loads((ROOT / "reference/upstream/eks-addon-versions.json").read_text())
    # CoreDNS: one build per supported minor, each the one the EKS User Guide's table names.
    assert set(versions.COREDNS_ADDON_VERSIONS) == set(SUPPORTED_KUBERNETES_VERSIONS)
    for minor, version in versions.COREDNS_ADDON_VERSIONS.items():
        assert facts["coredns"]["versions"][minor] == version
    addons = {t.name: t for t in pins.drift_targets() if t.kind == "addon"}
    assert {f"coredns@{m}" for m in SUPPORTED_KUBERNETES_VERSIONS} <= set(addons)
    for name in (versions.POD_IDENTITY_AGENT_ADDON, versions.EBS_CSI_ADDON):
        assert facts[name]["source"] is None and facts[name]["why"]
        assert addons[name].version == pins.UNPINNED
        assert "no version pinned" in str(addons[name].manual)
        assert f"describe-addon-versions --addon-name {name}" in str(addons[name].manual)


@pytest.mark.parametrize("minor", ["1.32", "1.34"])
def test_a_cluster_of_our_own_in_karpenter_mode_gets_the_pinned_coredns_of_its_minor(minor: str) -> None:
    from deepseek_eks.automation.render import render
    from deepseek_eks.components import versions
    from tests.conftest import stack_config

    rendered = render(stack_config("prod", computeMode="karpenter", kubernetesVersion=minor))
    addons = {
        r["inputs"]["addonName"]: r["inputs"].get("addonVersion")
        for r in rendered.aws
        if r["type"] == "aws:eks/addon:Addon"
    }
    assert addons[versions.COREDNS_ADDON] == versions.COREDNS_ADDON_VERSIONS[minor]
    assert addons[versions.POD_IDENTITY_AGENT_ADDON] is None and addons[versions.EBS_CSI_ADDON] is None
