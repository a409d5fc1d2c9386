"""Node key files: 64 hex characters of a secp256k1 private key, mode 0600 (geth ``crypto.LoadECDSA`` /
``SaveECDSA``, the ``nodekey`` file of a geth or status-go data directory).

A node keeps its key across restarts so that its enode URL — which peers and static-node lists refer to —
stays the same. Writes are atomic (temporary file + rename) and the file is never readable by others.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import ClassVar

from devp2p.errors import DevP2PError, DisconnectReason
from wakucodec import secp
from wakucodec.errors import CodecError

__all__ = ["NodeKeyError", "generate_node_key", "load_node_key", "load_or_create_node_key", "save_node_key"]

log = logging.getLogger(__name__)

_KEY_MODE = 0o600


class NodeKeyError(DevP2PError, ValueError):
    """A node key file that is missing, unreadable, or does not hold a valid key."""

    disconnect_reason: ClassVar[DisconnectReason | None] = None


def generate_node_key() -> bytes:
    """Return a fresh random 32-byte private key."""
    return secp.generate_private_key()


def load_node_key(path: str | os.PathLike[str]) -> bytes:
    """Read a hex node key (surrounding whitespace and an optional ``0x`` prefix allowed).

    Logs a warning when the file is readable by group or others.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="ascii").strip()
        mode = stat.S_IMODE(file.stat().st_mode)
    except (OSError, UnicodeDecodeError) as err:
        raise NodeKeyError(f"cannot read node key {file}: {err}") from err
    if mode & 0o077:
        log.warning("node key %s has mode %o; it should be 600", file, mode)
    text = text.removeprefix("0x")
    try:
        return secp.validate_private_key(bytes.fromhex(text))
    except (ValueError, CodecError) as err:
        raise NodeKeyError(f"node key {file} is not 64 hex characters of a valid key") from err


def save_node_key(path: str | os.PathLike[str], key: bytes) -> None:
    """Write ``key`` as hex with mode 0600, atomically (an existing file is replaced)."""
    secp.validate_private_key(key)
    file = Path(path)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _KEY_MODE)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(key.hex())
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _KEY_MODE)  # O_CREAT's mode is masked by the umask; make it exact
        os.replace(tmp, file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_or_create_node_key(path: str | os.PathLike[str]) -> bytes:
    """Load the key at ``path``, or generate one and save it there if the file does not exist."""
    file = Path(path)
    if file.exists():
        return load_node_key(file)
    key = generate_node_key()
    file.parent.mkdir(parents=True, exist_ok=True)
    save_node_key(file, key)
    log.info("generated a new node key in %s", file)
    return key
