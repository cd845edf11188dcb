"""The real prometheus-adapter (v0.12.0) and KEDA (operator and metrics apiserver, v2.20.2) against
the twin, each in its own network namespace of the loop's bridge (netns.py), configured as the
render's Helm releases configure them.

For each program this applies what its chart installs that the program needs to run: the release's
namespace, the ServiceAccounts of its Deployments, the RBAC objects exactly as ``helm template``
renders them for the stack (tests/data/chart_objects.json, matched by the digest of the rendered
values), the Services the APIServices route through and the APIService registrations. It then
asks a token for each ServiceAccount (TokenRequest) and starts the binary with the args of the
chart's Deployment, so the rendered RBAC is what authorizes it.

What differs from a cluster is returned as ``Started.rewrites`` (the loop lists them): Services
without a selector whose Endpoints/EndpointSlice hold the program's namespace address, cluster DNS
replaced by ``/etc/netns/<ns>/hosts``, in-cluster config replaced by a kubeconfig, certificates the
twin makes instead of KEDA's cert rotation, one replica each, no admission webhooks.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from deepseek_eks.automation.stackfile import PROJECT_ROOT

from .binaries import require_binaries
from .capacity import install_crd_files
from .chart_release import (
    Release,
    account_kubeconfig,
    apply_object,
    chart_release,
    install_accounts_and_rbac,
)
from .check import load_render
from .netns import Netns, Network, service_names
from .programs import Program
from .server import Api, TwinError, _stop, _tail

ADAPTER, KEDA = "prometheus-adapter", "keda"
WHICH = (ADAPTER, KEDA)
KEDA_CRDS = PROJECT_ROOT / "reference" / "upstream" / "keda-2.20.2" / "crds"
AVAILABLE_TIMEOUT_S = 240.0  # a cold start of an aggregated API server on a busy 2-core machine
# The APIService each chart registers, and the Deployment (by its container's command) serving it.
# prometheus-community/helm-charts @ e6e041b6 (prometheus-adapter-5.3.0)
#   charts/prometheus-adapter/templates/custom-metrics-apiservice.yaml
# kedacore/charts @ cbb9bb8c (keda 2.20.2) keda/templates/metrics-server/apiservice.yaml
CUSTOM_METRICS = "v1beta1.custom.metrics.k8s.io"
EXTERNAL_METRICS = "v1beta1.external.metrics.k8s.io"
# The KEDA binaries by the command their chart Deployment runs (keda/templates/manager/deployment.yaml
# "/keda", metrics-server/deployment.yaml "/keda-adapter", webhooks/deployment.yaml
# "/keda-admission-webhooks", kedacore/charts @ cbb9bb8c).
KEDA_COMMANDS = {"/keda": "keda-operator", "/keda-adapter": "keda-metrics-apiserver"}


@dataclass
class Started:
    """The programs started (by name, with their logs) and what differs from a cluster."""

    programs: dict[str, Program]
    rewrites: list[str] = field(default_factory=list)


def adapter_config(values: dict[str, Any]) -> dict[str, Any]:
    """The adapter's config.yaml as the chart's ConfigMap builds it from ``rules``
    (prometheus-community/helm-charts @ e6e041b6 charts/prometheus-adapter/templates/configmap.yaml:
    ``rules`` = the default rules when ``rules.default`` + ``rules.custom``; ``externalRules`` =
    ``rules.external``; ``resourceRules`` = ``rules.resource``; each only when set)."""
    rules = values.get("rules") or {}
    if rules.get("existing"):
        raise TwinError(
            "prometheus-adapter rules.existing (a ConfigMap of its own) is not supported by the twin"
        )
    if rules.get("default"):
        # The chart's built-in rule set is not transcribed here; no stack renders it.
        raise TwinError("prometheus-adapter rules.default=true is not supported by the twin")
    config: dict[str, Any] = {}
    if rules.get("custom"):
        config["rules"] = rules["custom"]
    if rules.get("external"):
        config["externalRules"] = rules["external"]
    if rules.get("resource"):
        config["resourceRules"] = rules["resource"]
    return config


# --- certificates ---------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def keda_certificates(folder: Path, namespace: str, services: Sequence[str]) -> bytes:
    """``ca.crt``, ``tls.crt``, ``tls.key`` in ``folder``, as KEDA's cert rotation writes them into
    its cert dir (github.com/kedacore/keda/v2@v2.20.2 pkg/certificates/certificate_manager.go: CA
    "KEDA"/"KEDAORG", one certificate for the operator's and the metrics server's Services under
    every name ``getDNSNames`` lists, server and client auth; pkg/metricsservice/utils/tls.go reads
    those three files). Returns the CA in PEM (the APIService's caBundle)."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "KEDA"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "KEDAORG"),
        ]
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names = [
        n
        for s in services
        for n in (s, f"{s}.{namespace}", f"{s}.{namespace}.svc", f"{s}.{namespace}.svc.cluster.local")
    ]
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.crt").write_bytes(ca.public_bytes(pem))
    (folder / "tls.crt").write_bytes(cert.public_bytes(pem))
    (folder / "tls.key").write_bytes(_pem_key(key))
    return ca.public_bytes(pem)


# --- objects --------------------------------------------------------------------------------


def service_objects(
    name: str, namespace: str, ports: list[dict[str, Any]], endpoint_ports: list[dict[str, Any]], address: str
) -> list[dict[str, Any]]:
    """A Service ``name`` with the chart's ports and no selector, its Endpoints and an
    EndpointSlice (what kube-apiserver's aggregator resolves with --enable-aggregator-routing:
    k8s.io/apiserver v0.34.12 pkg/util/proxy/proxy.go ResolveEndpoint reads the slices labelled
    kubernetes.io/service-name and takes the port of the Service port's name) holding ``address``."""
    meta = {"name": name, "namespace": namespace}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"type": "ClusterIP", "ports": ports},
    }
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": meta,
        "subsets": [{"addresses": [{"ip": address}], "ports": endpoint_ports}],
    }
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-twin",
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": "deepseek-eks-twin",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": endpoint_ports,
    }
    return [service, endpoints, slice_]


def _container_port(deployment: dict[str, Any], port: int | str) -> int:
    """A container port of the Deployment by number or name (a Service's targetPort)."""
    if isinstance(port, int):
        return port
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for p in container.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
    raise TwinError(f"Deployment {deployment['metadata']['name']} has no container port named {port}")


def _endpoint_ports(deployment: dict[str, Any], ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": p["name"],
            "port": _container_port(deployment, p.get("targetPort", p["port"])),
            "protocol": p.get("protocol", "TCP"),
        }
        for p in ports
    ]


def apiservice_available(api: Api, name: str) -> tuple[bool, str]:
    """Whether the APIService ``name`` has condition Available=True, and that condition's message."""
    body = api.call("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{name}").body
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Available":
            return condition.get("status") == "True", str(condition.get("message") or condition.get("reason"))
    return False, "no Available condition yet"


# --- launching --------------------------------------------------------------------------------


def _env(container: dict[str, Any], namespace: str, pod: str) -> dict[str, str]:
    """The container's env, the downward-API fields resolved as the kubelet would for a pod
    ``namespace/pod`` (only metadata.name and metadata.namespace are used by these charts)."""
    out: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            out[item["name"]] = str(item["value"])
            continue
        field_path = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field_path == "metadata.namespace":
            out[item["name"]] = namespace
        elif field_path == "metadata.name":
            out[item["name"]] = pod
        else:
            raise TwinError(
                f"env {item['name']} of {container['name']}: {item.get('valueFrom')} "
                "is not supported by the twin"
            )
    return out


def _mounted(arg: str, mounts: dict[str, Path]) -> str:
    """``arg`` with a container path under a volume mount replaced by the local folder for it."""
    flag, sep, value = arg.partition("=")
    target = value if sep else arg
    for mount, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
        root = mount.rstrip("/")
        if target == root or target.startswith(root + "/"):
            replaced = str(local) + target[len(root) :]
            return f"{flag}={replaced}" if sep else replaced
    return arg


def _command(container: dict[str, Any], binary: Path, mounts: dict[str, Path]) -> list[str]:
    """The container's command + args with the image's executable replaced by ``binary`` and
    mounted paths by local ones (the adapter's chart puts the executable first in ``args``)."""
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return [str(binary), *(_mounted(w, mounts) for w in words[1:])]


def adapter_flag(render: Path, flag: str) -> str | None:
    """The value the chart's Deployment gives prometheus-adapter's ``flag`` for this render."""
    container = _deployment(chart_release(render, ADAPTER))["spec"]["template"]["spec"]["containers"][0]
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return next((w.split("=", 1)[1] for w in words if w.startswith(f"{flag}=")), None)


def _replace_flag(command: list[str], flag: str, value: str) -> list[str]:
    """``--flag`` or ``--flag=...`` set to ``value`` (added when absent)."""
    out = [w for w in command if w != flag and not w.startswith(flag + "=")]
    return [*out, f"{flag}={value}"]


def _launch(ns: Netns, command: list[str], env: dict[str, str], log: Path) -> Program:
    handle = log.open("wb")
    try:
        process = subprocess.Popen(
            [*ns.prefix(), *command],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=os.environ | env,
        )
    finally:
        handle.close()
    return Program(process, log)


def _deployment(release: Release, command: str | None = None) -> dict[str, Any]:
    for deployment in release.deployments():
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        if command is None or (container.get("command") or [None])[0] == command:
            return deployment
    raise TwinError(f"the {release.name} chart objects have no Deployment running {command}")


def _prometheus_hosts(
    render: Path, adapter_values: dict[str, Any] | None, prometheus: Netns
) -> dict[str, str]:
    """The DNS names of the render's Prometheus URLs (the adapter's ``prometheus.url``, the
    ScaledObjects' prometheus triggers' ``serverAddress``) -> the Prometheus namespace's address,
    under every name cluster DNS gives a Service ``name.ns.svc``."""
    urls = []
    if adapter_values is not None:
        urls.append(str((adapter_values.get("prometheus") or {}).get("url", "")))
    objects, _ = load_render(render)
    for obj in objects:
        if obj.get("kind") == "ScaledObject":
            for trigger in obj["spec"].get("triggers", []):
                if trigger.get("type") == "prometheus":
                    urls.append(str(trigger["metadata"].get("serverAddress", "")))
    hosts: dict[str, str] = {}
    for url in urls:
        host = urlsplit(url).hostname
        if not host:
            continue
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(host)
            continue  # an address needs no name
        parts = host.split(".")
        names = service_names(parts[0], parts[1]) if len(parts) >= 2 else [host]
        hosts.update({n: prometheus.address for n in [host, *names]})
    return hosts


@contextlib.contextmanager
def metrics_programs(
    api: Api,
    net: Network,
    render: Path,
    folder: Path,
    which: Sequence[str],
    prometheus: Netns,
    adapter_flags: Mapping[str, str] | None = None,
) -> Iterator[Started]:
    """Start ``which`` (a subset of ``("prometheus-adapter", "keda")``) against the twin as the
    render's releases configure them, wait until their APIServices are Available, yield them; stop
    them however the block ends. The twin must listen on ``net.host_address`` with
    ``--enable-aggregator-routing=true``. Raises ``BinariesMissing`` when a binary is not built,
    ``TwinError`` (with the program's log tail) when one does not come up. ``adapter_flags``
    override the chart's prometheus-adapter flags (each override listed as a rewrite)."""
    unknown = set(which) - set(WHICH)
    if unknown:
        raise ValueError(f"unknown metrics programs {sorted(unknown)}; choose from {WHICH}")
    binaries = require_binaries(
        tuple(p for w in which for p in ((ADAPTER,) if w == ADAPTER else tuple(KEDA_COMMANDS.values())))
    )
    server = f"https://{net.host_address}:{api.http.base_url.port}"
    started = Started({})
    waits: list[tuple[str, str]] = []  # (APIService, program serving it)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        # Names first: a program resolves them from its first moments (the hosts files are
        # rewritten in place, so a namespace's bind mount sees later additions too).
        adapter_values = chart_release(render, ADAPTER).values if ADAPTER in which else None
        hosts = _prometheus_hosts(render, adapter_values, prometheus)
        net.set_hosts(hosts)
        for host in sorted({h for h in hosts if h.count(".") == 2 and h.endswith(".svc")}):
            name, namespace, _ = host.split(".")
            started.rewrites.append(
                f"Service {namespace}/{name} (Prometheus): its cluster DNS names resolve to "
                f"{prometheus.address} (netns {prometheus.name}) through /etc/netns/<ns>/hosts; "
                "no cluster DNS, no ClusterIP"
            )
        if ADAPTER in which:
            waits.append((CUSTOM_METRICS, ADAPTER))
            _start_adapter(api, net, render, folder, binaries, server, started, adapter_flags)
        if KEDA in which:
            waits.append((EXTERNAL_METRICS, "keda-metrics-apiserver"))
            _start_keda(api, net, render, folder, binaries, server, started)
        for apiservice, serving in waits:
            _wait_available(api, apiservice, started.programs, serving)
        yield started
    finally:
        for program in reversed(started.programs.values()):
            _stop(program.process)
        # An APIService left without its server makes the twin's discovery of that group fail
        # (kube-apiserver answers 503 for it); the twin may outlive this block.
        for apiservice, _ in waits:
            with contextlib.suppress(httpx.HTTPError):
                api.call("DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/{apiservice}")


def _wait_available(api: Api, apiservice: str, programs: dict[str, Program], serving: str) -> None:
    deadline = time.monotonic() + AVAILABLE_TIMEOUT_S
    message = ""
    while time.monotonic() < deadline:
        for name, program in programs.items():
            if program.process.poll() is not None:
                raise TwinError(
                    f"{name} exited with {program.process.returncode} before {apiservice} was Available:\n"
                    f"{_tail(program.log)}"
                )
        ok, message = apiservice_available(api, apiservice)
        if ok:
            return
        time.sleep(1.0)
    raise TwinError(
        f"APIService {apiservice} not Available within {AVAILABLE_TIMEOUT_S:.0f} s ({message}); "
        f"{serving} log:\n{_tail(programs[serving].log)}"
    )


def _start_adapter(
    api: Api,
    net: Network,
    render: Path,
    folder: Path,
    binaries: dict[str, Path],
    server: str,
    started: Started,
    flags: Mapping[str, str] | None = None,
) -> None:
    release = chart_release(render, ADAPTER)
    deployment = _deployment(release)
    name, ns_name = deployment["metadata"]["name"], release.namespace
    ns = net.namespace(ADAPTER)
    install_accounts_and_rbac(api, release, [deployment])
    # charts/prometheus-adapter/templates/service.yaml (e6e041b6): one port `https`,
    # service.port -> targetPort https.
    ports = [
        {
            "name": "https",
            "port": int(release.values["service"]["port"]),
            "protocol": "TCP",
            "targetPort": "https",
        }
    ]
    for obj in service_objects(name, ns_name, ports, _endpoint_ports(deployment, ports), ns.address):
        apply_object(api, obj)
    # charts/prometheus-adapter/templates/custom-metrics-apiservice.yaml (e6e041b6): registered when
    # rules.default or rules.custom; insecureSkipTLSVerify unless tls.enable or certManager.enabled.
    rules = release.values.get("rules") or {}
    if not (rules.get("default") or rules.get("custom")):
        raise TwinError(
            f"the render's {ADAPTER} has no custom rules: the chart registers no {CUSTOM_METRICS}"
        )
    spec: dict[str, Any] = {
        "service": {"name": name, "namespace": ns_name},
        "group": "custom.metrics.k8s.io",
        "version": "v1beta1",
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
    }
    if (release.values.get("tls") or {}).get("enable") or (release.values.get("certManager") or {}).get(
        "enabled"
    ):
        raise TwinError(f"{ADAPTER} tls.enable / certManager.enabled is not supported by the twin")
    spec["insecureSkipTLSVerify"] = True
    apply_object(
        api,
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": CUSTOM_METRICS},
            "spec": spec,
        },
    )
    # Files the chart mounts: the ConfigMap's config.yaml at /etc/adapter/, an emptyDir at /tmp.
    home = folder / ADAPTER
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.yaml").write_text(
        yaml.safe_dump(adapter_config(release.values), sort_keys=False)
    )
    pod = deployment["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: home / m["name"] for m in pod["containers"][0].get("volumeMounts") or []}
    account = pod.get("serviceAccountName") or "default"
    config = account_kubeconfig(api, server, ns_name, account, home / "kubeconfig")
    command = _command(pod["containers"][0], binaries[ADAPTER], mounts)
    # sigs.k8s.io/custom-metrics-apiserver v1.30.0 pkg/cmd/builder.go --lister-kubeconfig; the
    # delegated authn/authz kubeconfigs of k8s.io/apiserver's options: no in-cluster config here.
    for flag in ("--lister-kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig"):
        command = _replace_flag(command, flag, str(config))
    for flag, value in (flags or {}).items():
        was = next((a.split("=", 1)[1] for a in command if a.startswith(f"{flag}=")), "unset")
        command = _replace_flag(command, flag, value)
        started.rewrites.append(f"{ADAPTER} {flag} {was} -> {value}")
    net.set_hosts({n: ns.address for n in service_names(name, ns_name)})
    started.programs[ADAPTER] = _launch(ns, command, {"KUBECONFIG": str(config)}, home / f"{ADAPTER}.log")
    replicas = deployment["spec"].get("replicas", 1)
    started.rewrites += [
        f"Service {ns_name}/{name}: no selector; Endpoints and EndpointSlice {name}-twin hold {ns.address} "
        f"(netns {ns.name}), where {ADAPTER} runs; its cluster DNS names resolve there through "
        "/etc/netns/<ns>/hosts",
        f"{ADAPTER}: one process for the chart's {replicas} replicas; a kubeconfig with a "
        f"TokenRequest token of ServiceAccount {ns_name}/{account} to {server} instead of in-cluster "
        "config; the ConfigMap's config.yaml and the /tmp emptyDir as local files",
    ]


def external_metrics_apiservice(service: str, namespace: str, port: int, ca: bytes) -> dict[str, Any]:
    """KEDA's APIService for external.metrics.k8s.io, as keda/templates/metrics-server/apiservice.yaml
    renders it: service <operator.name>-metrics-apiserver in the release namespace, port
    service.portHttps; no caBundle in the template (the operator's cert rotation patches it in:
    --enable-apiservice-patching, cmd/operator/main.go v2.20.2), here the twin's CA."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": EXTERNAL_METRICS},
        "spec": {
            "service": {"name": service, "namespace": namespace, "port": port},
            "group": "external.metrics.k8s.io",
            "version": "v1beta1",
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "caBundle": base64.b64encode(ca).decode(),
        },
    }


def _start_keda(
    api: Api,
    net: Network,
    render: Path,
    folder: Path,
    binaries: dict[str, Path],
    server: str,
    started: Started,
) -> None:
    release = chart_release(render, KEDA)
    ns_name = release.namespace
    operator = _deployment(release, "/keda")
    metrics = _deployment(release, "/keda-adapter")
    operator_ns, metrics_ns = net.namespace("keda-operator"), net.namespace("keda-metrics")
    install_crd_files(api, KEDA_CRDS)
    install_accounts_and_rbac(api, release, [operator, metrics])
    operator_service, metrics_service = operator["metadata"]["name"], metrics["metadata"]["name"]
    # kedacore/charts @ cbb9bb8c keda/templates/manager/service.yaml: `metricsservice` 9666 -> 9666
    # (the `metrics` port only with prometheus.operator.enabled).
    operator_ports = [{"name": "metricsservice", "port": 9666, "protocol": "TCP", "targetPort": 9666}]
    # keda/templates/metrics-server/service.yaml: `https` service.portHttps -> portHttpsTarget and
    # prometheus.metricServer.portName port -> port.
    metric_server = release.values["prometheus"]["metricServer"]
    metrics_ports = [
        {
            "name": "https",
            "port": int(release.values["service"]["portHttps"]),
            "protocol": "TCP",
            "targetPort": int(release.values["service"]["portHttpsTarget"]),
            "appProtocol": "https",
        },
        {
            "name": str(metric_server["portName"]),
            "port": int(metric_server["port"]),
            "protocol": "TCP",
            "targetPort": int(metric_server["port"]),
        },
    ]
    for service, deployment, ports, ns in (
        (operator_service, operator, operator_ports, operator_ns),
        (metrics_service, metrics, metrics_ports, metrics_ns),
    ):
        endpoint_ports = [
            {k: v for k, v in p.items() if k != "appProtocol"} for p in _endpoint_ports(deployment, ports)
        ]
        for obj in service_objects(service, ns_name, ports, endpoint_ports, ns.address):
            apply_object(api, obj)
        net.set_hosts({n: ns.address for n in service_names(service, ns_name)})
        started.rewrites.append(
            f"Service {ns_name}/{service}: no selector; Endpoints and EndpointSlice {service}-twin "
            f"hold {ns.address} (netns {ns.name}); its cluster DNS names resolve there through "
            "/etc/netns/<ns>/hosts"
        )
    home = folder / KEDA
    ca = keda_certificates(home / "certs", ns_name, [operator_service, metrics_service])
    port = int(release.values["service"]["portHttps"])
    apply_object(api, external_metrics_apiservice(metrics_service, ns_name, port, ca))
    for role, deployment, ns in (
        ("keda-operator", operator, operator_ns),
        ("keda-metrics-apiserver", metrics, metrics_ns),
    ):
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        # The chart mounts the secret kedaorg-certs at /certs in both; here the twin's files.
        mounts = {
            m["mountPath"]: home / "certs"
            for m in container.get("volumeMounts") or []
            if m["name"] == "certificates"
        }
        account = pod.get("serviceAccountName") or "default"
        config = account_kubeconfig(api, server, ns_name, account, home / role / "kubeconfig")
        command = _command(container, binaries[role], mounts)
        env = _env(container, ns_name, f"{deployment['metadata']['name']}-twin") | {
            "KUBECONFIG": str(config),
            # What the pod's mounted service-account namespace file says; KEDA reads this variable
            # first (pkg/util/env_resolver.go GetClusterObjectNamespace, v2.20.2).
            "KEDA_CLUSTER_OBJECT_NAMESPACE": ns_name,
        }
        if role == "keda-operator":
            # One process: no leader election (cmd/operator/main.go --leader-elect); the twin's
            # certificates instead of the rotation into secret kedaorg-certs (--enable-cert-rotation);
            # the gRPC metrics service on 9666 (--metrics-service-bind-address, default ":9666").
            command = _replace_flag(command, "--leader-elect", "false")
            command = _replace_flag(command, "--enable-cert-rotation", "false")
            command = _replace_flag(command, "--metrics-service-bind-address", ":9666")
        else:
            # custom-metrics-apiserver's --lister-kubeconfig and k8s.io/apiserver's delegated
            # authn/authz kubeconfigs (cmd/adapter/main.go builds on the AdapterBase).
            for flag in ("--lister-kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig"):
                command = _replace_flag(command, flag, str(config))
        started.programs[role] = _launch(ns, command, env, home / role / f"{role}.log")
    started.rewrites += [
        "keda-operator: --leader-elect=false, --enable-cert-rotation=false: the twin makes the "
        f"certificates (one CA, one certificate for {operator_service} and {metrics_service}) instead "
        f"of secret kedaorg-certs, and sets the caBundle of APIService {EXTERNAL_METRICS} the "
        "operator would patch in; KEDA_CLUSTER_OBJECT_NAMESPACE for the service-account namespace file",
        "keda: the admission webhooks (Deployment keda-admission-webhooks) do not run and the chart's "
        "ValidatingWebhookConfiguration keda-admission is not registered",
        "keda-operator, keda-metrics-apiserver: one process each for the chart's replicas; "
        f"kubeconfigs with TokenRequest tokens of their ServiceAccounts to {server} instead of "
        "in-cluster config; KEDA's CRDs from the v2.20.2 module (config/crd/bases), as the chart "
        "installs them",
    ]
