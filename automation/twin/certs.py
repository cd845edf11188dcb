"""Throw-away certificates for a twin on 127.0.0.1: a CA, the API server's serving certificate, an
admin client certificate (group ``system:masters``, which RBAC always allows) and the
service-account signing key pair."""

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


def generate(folder: Path) -> Certificates:
    """Write a fresh set of certificates and keys into ``folder``."""
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
            )
        )
    )
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("deepseek-eks-twin-ca")
    ca = _issue(ca_name, ca_key, None)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    sans.append(x509.DNSName("localhost"))
    server_auth = [ExtendedKeyUsageOID.SERVER_AUTH]
    serving = _issue(_name("kube-apiserver"), serving_key, (ca_name, ca_key), server_auth, sans)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_auth = [ExtendedKeyUsageOID.CLIENT_AUTH]
    client = _issue(_name("twin-admin", "system:masters"), client_key, (ca_name, ca_key), client_auth)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    files.ca.write_bytes(ca.public_bytes(pem))
    files.serving_cert.write_bytes(serving.public_bytes(pem))
    files.serving_key.write_bytes(_key_pem(serving_key))
    files.client_cert.write_bytes(client.public_bytes(pem))
    files.client_key.write_bytes(_key_pem(client_key))
    files.service_account_key.write_bytes(_key_pem(sa_key))
    files.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return files
