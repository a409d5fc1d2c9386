"""The live cluster's certificates and kubeconfig, made fresh for every run (nothing is committed).

One self-signed CA signs the API server's serving certificate and the one client certificate every component
and helm use (``O=system:masters``: the built-in superuser group, Kubernetes "Authenticating", X509 client
certificates). The service-account key pair signs the tokens the API server issues; it is required even though
every Mailmesh pod opts out of token automounting.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Names the API server answers to: loopback for every local client, and the in-cluster names a pod would use
#: (the first address of the service range, 10.96.0.1, is the ``kubernetes`` Service).
SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
SERVER_IPS = ("127.0.0.1", "10.96.0.1")
VALIDITY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files :func:`make_pki` wrote."""

    ca: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256: accepted for serving, client and service-account signing keys (ES256), and quick to make.
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    return path


def _name(common: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def make_pki(directory: Path) -> Pki:
    """Write a CA, the API server's certificate, the admin client certificate and the service-account keys."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("mailmesh-live-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        stem: str, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> None:
        key = _key()
        builder = _builder(subject, ca_name, key).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(directory / f"{stem}.key", key)

    (directory / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVER_IPS]
    leaf("apiserver", _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)
    leaf("admin", _name("mailmesh-live-admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, [])
    sa_key = _write_key(directory / "sa.key", _key())
    sa_pub = directory / "sa.pub"
    sa_pub.write_bytes(
        serialization.load_pem_private_key(sa_key.read_bytes(), None)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return Pki(
        ca=directory / "ca.crt",
        server_cert=directory / "apiserver.crt",
        server_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=sa_key,
        sa_pub=sa_pub,
    )


def write_kubeconfig(path: Path, server: str, pki: Pki) -> Path:
    """A kubeconfig for ``server`` as the admin client (helm, the controllers and kwok all use it)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "live", "cluster": {"server": server, "certificate-authority": str(pki.ca)}}],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
            }
        ],
        "contexts": [{"name": "live", "context": {"cluster": "live", "user": "admin"}}],
        "current-context": "live",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
