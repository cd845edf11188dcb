"""Throw-away certificates for a twin on 127.0.0.1 (and any further addresses it listens on): a CA,
the API server's serving certificate, an admin client certificate (group ``system:masters``, which
RBAC always allows), the service-account signing key pair, and the front proxy's CA and client
certificate the aggregator presents to extension API servers (prometheus-adapter, KEDA's)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certificates:
    """PEM files of one twin."""

    ca: Path
    serving_cert: Path
    serving_key: Path
    client_cert: Path
    client_key: Path
    service_account_key: Path
    service_account_pub: Path
    front_proxy_ca: Path
    proxy_client_cert: Path
    proxy_client_key: Path


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    usage: list[x509.ObjectIdentifier] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def generate(folder: Path, *addresses: str) -> Certificates:
    """Write a fresh set of certificates and keys into ``folder``; the serving certificate holds
    127.0.0.1, ``localhost`` and each of ``addresses`` (IP addresses the API server binds)."""
    files = Certificates(
        *(
            folder / n
            for n in (
                "ca.crt",
                "apiserver.crt",
                "apiserver.key",
                "admin.crt",
                "admin.key",
                "sa.key",
                "sa.pub",
                "front-proxy-ca.crt",
                "front-proxy-client.crt",
                "front-proxy-client.key",
            )
        )
    )
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("deepseek-eks-twin-ca")
    ca = _issue(ca_name, ca_key, None)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses if a != "127.0.0.1"]
    sans.append(x509.DNSName("localhost"))
    server_auth = [ExtendedKeyUsageOID.SERVER_AUTH]
    serving = _issue(_name("kube-apiserver"), serving_key, (ca_name, ca_key), server_auth, sans)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_auth = [ExtendedKeyUsageOID.CLIENT_AUTH]
    client = _issue(_name("twin-admin", "system:masters"), client_key, (ca_name, ca_key), client_auth)
    # The aggregator's client identity towards extension API servers: kubeadm's names, a CA of its
    # own and CN front-proxy-client (kubernetes v1.34.12 cmd/kubeadm/app/constants/constants.go
    # FrontProxyClientCertCommonName), which --requestheader-allowed-names admits.
    proxy_ca_key = ec.generate_private_key(ec.SECP256R1())
    proxy_ca_name = _name("deepseek-eks-twin-front-proxy-ca")
    proxy_ca = _issue(proxy_ca_name, proxy_ca_key, None)
    proxy_key = ec.generate_private_key(ec.SECP256R1())
    proxy = _issue(_name("front-proxy-client"), proxy_key, (proxy_ca_name, proxy_ca_key), client_auth)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    files.ca.write_bytes(ca.public_bytes(pem))
    files.serving_cert.write_bytes(serving.public_bytes(pem))
    files.serving_key.write_bytes(_key_pem(serving_key))
    files.client_cert.write_bytes(client.public_bytes(pem))
    files.client_key.write_bytes(_key_pem(client_key))
    files.service_account_key.write_bytes(_key_pem(sa_key))
    files.front_proxy_ca.write_bytes(proxy_ca.public_bytes(pem))
    files.proxy_client_cert.write_bytes(proxy.public_bytes(pem))
    files.proxy_client_key.write_bytes(_key_pem(proxy_key))
    files.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return files
