"""Start the real etcd and kube-apiserver on 127.0.0.1 (free ports, fresh certificates, a temporary
folder), wait until the API server is ready, and stop both, always, when the block ends.

The API server may bind another local address instead (the autoscaling loop's bridge, where the
programs in network namespaces reach it) and take further flags (``--enable-aggregator-routing``)."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from . import certs
from .binaries import require_binaries

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 180.0  # a cold start on a busy 2-core machine takes tens of seconds
FIELD_MANAGER = "deepseek-eks-twin"


class TwinError(RuntimeError):
    """The twin did not start, or stopped answering (the message has its log tail)."""


@dataclass(frozen=True)
class Reply:
    """One API answer: status, decoded body, and the ``Warning`` headers (RFC 7234 299 texts)."""

    status: int
    body: dict[str, Any]
    warnings: list[str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        return str(self.body.get("message") or self.body)


@dataclass(frozen=True)
class Resource:
    """Where a kind lives on the server."""

    path: str  # /api/v1 or /apis/<group>/<version>
    plural: str
    namespaced: bool


def _warnings(response: httpx.Response) -> list[str]:
    out = []
    for value in response.headers.get_list("warning"):
        # `299 - "text"`: keep the text only.
        code, _, rest = value.partition(" - ")
        out.append(rest.strip().strip('"') if code.strip() == "299" else value)
    return out


@dataclass
class Api:
    """A small Kubernetes REST client (httpx), enough for applies, creates and discovery."""

    http: httpx.Client
    resources: dict[tuple[str, str], Resource] = field(default_factory=dict)
    # The twin's certificates (CA, admin client): what a controller run beside it needs for its
    # kubeconfig (twin/capacity.py). None for an Api not made by running_twin.
    certificates: certs.Certificates | None = None

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Reply:
        """One request; never raises on an HTTP error status (the caller reports it)."""
        content = None if body is None else json.dumps(body)
        response = self.http.request(
            method, path, content=content, params=params, headers={"Content-Type": content_type}
        )
        try:
            decoded = response.json()
        except ValueError:
            decoded = {"message": response.text}
        return Reply(
            response.status_code,
            decoded if isinstance(decoded, dict) else {"items": decoded},
            _warnings(response),
        )

    def discover(self) -> None:
        """Refresh the kind -> resource map from the server's discovery documents."""
        found: dict[tuple[str, str], Resource] = {}
        versions = [("v1", "/api/v1")]
        for group in self.call("GET", "/apis").body.get("groups", []):
            versions += [(v["groupVersion"], f"/apis/{v['groupVersion']}") for v in group["versions"]]
        for api_version, path in versions:
            for r in self.call("GET", path).body.get("resources", []):
                if "/" not in r["name"]:  # not a subresource
                    found[(api_version, r["kind"])] = Resource(path, r["name"], r["namespaced"])
        self.resources = found

    def url(self, obj: dict[str, Any]) -> str | None:
        """The object's REST path, or None when the server serves no such kind."""
        resource = self.resources.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if resource is None:
            return None
        meta = obj.get("metadata") or {}
        scope = f"/namespaces/{meta.get('namespace') or 'default'}" if resource.namespaced else ""
        return f"{resource.path}{scope}/{resource.plural}/{meta.get('name', '')}"

    def apply(self, obj: dict[str, Any], dry_run: bool) -> Reply:
        """Server-side apply with strict field validation (``dryRun=All`` when ``dry_run``): a create
        when the object is new, an update of the one there otherwise."""
        url = self.url(obj)
        if url is None:
            api_version, kind = obj.get("apiVersion"), obj.get("kind")
            return Reply(404, {"message": f"the server serves no {kind} in {api_version}"}, [])
        params = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict", "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.call("PATCH", url, obj, "application/apply-patch+yaml", params)


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORTS_FLOOR = 10000  # above the well-known and most registered service ports
_handed_out: set[int] = set()
# Its own generator: a test that seeds the random module must not make two processes pick alike.
_ports = random.SystemRandom()


def _ephemeral_range() -> tuple[int, int] | None:
    """The kernel's range for the local ports of outgoing connections (Linux; None elsewhere)."""
    try:
        low, high = (int(part) for part in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def free_port(address: str = LOOPBACK) -> int:
    """A port nothing listens on ``address`` now; the program binds it moments later.

    Chosen below the kernel's ephemeral range where there is room: a port picked by binding port 0
    lies inside it, and in the moments before the program binds it, any outgoing connection on the
    machine may be given it as its local port (CI lost etcd so on 2026-12-06: "bind: address
    already in use" on 58767). No port is handed out twice in this process either, so the ports of
    one start (etcd's client and peer) never coincide."""
    span = _ephemeral_range()
    if span is not None and span[0] - LISTEN_PORTS_FLOOR >= 1000:
        for port in _ports.sample(range(LISTEN_PORTS_FLOOR, span[0]), 64):
            if port in _handed_out:
                continue
            with socket.socket() as s:
                try:
                    s.bind((address, port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    while True:  # no room below the range (or not Linux): the kernel's pick
        with socket.socket() as s:
            s.bind((address, 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def lost_port_race(log: Path) -> bool:
    """Whether a program exited because another socket took its port first (worth one more try)."""
    return "address already in use" in _tail(log).lower()


def _start(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    try:
        return subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    finally:
        handle.close()  # the child has its own descriptor


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def _wait_ready(check: Any, processes: dict[str, tuple[subprocess.Popen[bytes], Path]], what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        for name, (process, log) in processes.items():
            if process.poll() is not None:
                code = process.returncode
                raise TwinError(
                    f"the twin did not start: {name} exited with {code} before {what}:\n{_tail(log)}"
                )
        with contextlib.suppress(httpx.HTTPError):
            if check():
                return
        time.sleep(0.5)
    name, (_, log) = list(processes.items())[-1]
    raise TwinError(
        f"the twin did not start: {what} not within {READY_TIMEOUT_S:.0f} s; {name} log:\n{_tail(log)}"
    )


PORT_ATTEMPTS = 3


def _ready_or_port_lost(
    check: Any, processes: dict[str, tuple[subprocess.Popen[bytes], Path]], what: str, *, last_attempt: bool
) -> bool:
    """Wait as ``_wait_ready`` does; False (the newest program stopped, to be started again on other
    ports) when it exited because another socket took its port in the moment after ``free_port``."""
    try:
        _wait_ready(check, processes, what)
    except TwinError:
        name, (process, log) = list(processes.items())[-1]
        if last_attempt or process.poll() is None or not lost_port_race(log):
            raise
        del processes[name]
        return False
    return True


@contextlib.contextmanager
def running_twin(address: str = LOOPBACK, extra_flags: Sequence[str] = ()) -> Iterator[Api]:
    """etcd + kube-apiserver for the duration of the block; both are stopped however it ends.

    The API server binds ``address`` (an address of this host; its serving certificate holds it)
    and gets ``extra_flags`` after its own. It always has the front proxy's request-header flags, so
    aggregated API servers (APIServices) can authenticate the users it proxies for.

    Raises ``BinariesMissing`` when they are not built, ``TwinError`` when they do not start."""
    binaries = require_binaries()
    processes: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    with tempfile.TemporaryDirectory(prefix="deepseek-eks-twin-") as temp:
        root = Path(temp)
        try:
            # generate(root) alone for the default: tests/engine/cluster.py wraps it with one argument.
            files = certs.generate(root) if address == LOOPBACK else certs.generate(root, address)
            for attempt in range(1, PORT_ATTEMPTS + 1):
                etcd_port, peer_port = free_port(), free_port()
                etcd_url = f"http://127.0.0.1:{etcd_port}"
                peer_url = f"http://127.0.0.1:{peer_port}"
                processes["etcd"] = (
                    _start(
                        [
                            str(binaries["etcd"]),
                            "--name=twin",
                            f"--data-dir={root / 'etcd'}",
                            f"--listen-client-urls={etcd_url}",
                            f"--advertise-client-urls={etcd_url}",
                            f"--listen-peer-urls={peer_url}",
                            f"--initial-advertise-peer-urls={peer_url}",
                            f"--initial-cluster=twin={peer_url}",
                            "--unsafe-no-fsync",
                            "--log-level=warn",
                        ],
                        root / "etcd.log",
                    ),
                    root / "etcd.log",
                )
                if _ready_or_port_lost(
                    lambda url=etcd_url: httpx.get(f"{url}/health", timeout=2).status_code == 200,
                    processes,
                    "etcd /health",
                    last_attempt=attempt == PORT_ATTEMPTS,
                ):
                    break
                shutil.rmtree(root / "etcd", ignore_errors=True)  # a fresh member on the next ports
            tls = ssl.create_default_context(cafile=str(files.ca))
            tls.load_cert_chain(str(files.client_cert), str(files.client_key))
            for attempt in range(1, PORT_ATTEMPTS + 1):
                api_port = free_port(address)
                processes["kube-apiserver"] = (
                    _start(
                        [
                            str(binaries["kube-apiserver"]),
                            f"--etcd-servers={etcd_url}",
                            f"--bind-address={address}",
                            f"--advertise-address={address}",
                            f"--secure-port={api_port}",
                            f"--tls-cert-file={files.serving_cert}",
                            f"--tls-private-key-file={files.serving_key}",
                            f"--client-ca-file={files.ca}",
                            f"--cert-dir={root / 'certs'}",
                            "--service-account-issuer=https://kubernetes.default.svc",
                            f"--service-account-key-file={files.service_account_pub}",
                            f"--service-account-signing-key-file={files.service_account_key}",
                            "--service-cluster-ip-range=10.96.0.0/16",
                            "--authorization-mode=RBAC",
                            "--enable-priority-and-fairness=false",
                            # The front proxy, as kubeadm sets it (kubernetes v1.34.12
                            # cmd/kubeadm/app/phases/controlplane/manifests.go): the aggregator's
                            # client certificate and the headers extension servers trust from it.
                            "--requestheader-username-headers=X-Remote-User",
                            "--requestheader-group-headers=X-Remote-Group",
                            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                            f"--requestheader-client-ca-file={files.front_proxy_ca}",
                            "--requestheader-allowed-names=front-proxy-client",
                            f"--proxy-client-cert-file={files.proxy_client_cert}",
                            f"--proxy-client-key-file={files.proxy_client_key}",
                            *extra_flags,
                        ],
                        root / "kube-apiserver.log",
                    ),
                    root / "kube-apiserver.log",
                )
                http = httpx.Client(base_url=f"https://{address}:{api_port}", verify=tls, timeout=60)
                ready = lambda client=http: client.get("/readyz").status_code == 200  # noqa: E731
                try:
                    up = _ready_or_port_lost(
                        ready, processes, "kube-apiserver /readyz", last_attempt=attempt == PORT_ATTEMPTS
                    )
                except BaseException:
                    http.close()
                    raise
                if up:
                    break
                http.close()
            with contextlib.closing(http):  # already open: the readiness check used it
                api = Api(http, certificates=files)
                api.discover()
                yield api
        finally:
            for process, _ in reversed(processes.values()):
                _stop(process)
