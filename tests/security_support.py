"""Test credentials: a throw-away CA and certificates (the ``cryptography`` package), and tokens.

One leaf certificate per call, valid as server and as client (``serverAuth`` and ``clientAuth``), for
``127.0.0.1`` and ``MESH_NAME`` — the name a mesh that shares one certificate sets as
``MAILMESH_TLS_SERVER_NAME``. Keys are EC P-256: quick to generate on a loaded test machine.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["MESH_NAME", "Pki", "TlsPaths", "make_pki"]

MESH_NAME = "mailmesh.test"
"""The DNS name in every leaf certificate besides 127.0.0.1."""


@dataclass(frozen=True)
class TlsPaths:
    """A certificate, its key and the CA that signed it, as files."""

    cert: Path
    key: Path
    ca: Path

    def env(self, *, server_name: str = "") -> dict[str, str]:
        """The ``MAILMESH_TLS_*`` variables for these files."""
        out = {
            "MAILMESH_TLS_CERT": str(self.cert),
            "MAILMESH_TLS_KEY": str(self.key),
            "MAILMESH_TLS_CA": str(self.ca),
        }
        if server_name:
            out["MAILMESH_TLS_SERVER_NAME"] = server_name
        return out


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class Pki:
    """A CA in ``directory`` that issues leaf certificates on demand."""

    def __init__(self, directory: Path, ca_name: str = "mailmesh test CA") -> None:
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(_name(ca_name))
            .issuer_name(_name(ca_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.ca_path = directory / f"{ca_name.replace(' ', '-')}.pem"
        self.ca_path.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str) -> TlsPaths:
        """A leaf certificate ``name`` for 127.0.0.1 and :data:`MESH_NAME`, written next to the CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName(MESH_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        paths = TlsPaths(self.directory / f"{name}.crt", self.directory / f"{name}.key", self.ca_path)
        paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths.key.write_bytes(_pem_key(key))
        paths.key.chmod(0o600)
        return paths


def make_pki(directory: Path) -> Pki:
    """A fresh CA in ``directory``."""
    return Pki(directory)
