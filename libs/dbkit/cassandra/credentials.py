"""Cassandra login credentials, from the configuration (driver-free: store configurations import it).

With ``authenticator: PasswordAuthenticator`` in cassandra.yaml every connection logs in; the driver sends
the name and password with SASL PLAIN (cassandra-driver docs "Security": ``PlainTextAuthProvider``), so
the CQL connection should be TLS or stay on a trusted network. The password comes from an environment
variable or, better, a file (a mounted Kubernetes Secret): it is read once at start and never logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Credentials", "credentials_from"]


@dataclass(frozen=True)
class Credentials:
    """A Cassandra role and its password (kept out of ``repr``, so out of logs and tracebacks)."""

    username: str
    password: str = field(repr=False)


def credentials_from(username: str, password: str, password_file: str) -> Credentials | None:
    """The credentials a store's settings give: None without a username (no authenticator).

    ``password`` wins over ``password_file``, whose first line (without its line break) is the password.
    """
    if not username:
        if password or password_file:
            raise ValueError("a Cassandra password is set but no username")
        return None
    if not password and password_file:
        lines = Path(password_file).read_text(encoding="utf-8").splitlines()
        password = lines[0] if lines else ""
    if not password:
        raise ValueError("a Cassandra username is set but no password (nor password file)")
    return Credentials(username, password)
