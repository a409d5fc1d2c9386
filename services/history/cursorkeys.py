"""Where the cursor secrets come from: ``HISTORY_CURSOR_SECRETS`` or ``HISTORY_CURSOR_SECRET_FILE``.

Start-up wiring (it reads, and may create, one file); problems are :class:`meshcore.ConfigError`, so the
process exits 2 with every reason listed. A created file holds one random 32-byte secret in hex, mode 0600;
its creation is logged as a warning, because every replica must share the secret or a cursor minted by one
is refused by the others.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from pathlib import Path

from meshcore import ConfigError
from services.history.config import Config, parse_secret

__all__ = ["GENERATED_SECRET_BYTES", "load_cursor_secrets", "read_secret_file"]

GENERATED_SECRET_BYTES = 32
_log = logging.getLogger(__name__)


def load_cursor_secrets(cfg: Config) -> tuple[bytes, ...]:
    """The secrets to use, first = signing: the env list if set, else the file (created if allowed)."""
    if cfg.cursor_secrets:
        return cfg.cursor_secrets
    path = cfg.cursor_secret_file
    if not path.exists():
        if not cfg.cursor_secret_autocreate:
            raise ConfigError(
                [
                    f"HISTORY_CURSOR_SECRET_FILE={path}: does not exist, HISTORY_CURSOR_SECRETS is empty and "
                    "HISTORY_CURSOR_SECRET_AUTOCREATE is false"
                ]
            )
        _create(path)
    return read_secret_file(path)


def read_secret_file(path: Path) -> tuple[bytes, ...]:
    """Parse one hex secret per line (blank lines and ``#`` comments ignored); at least one is required."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError([f"HISTORY_CURSOR_SECRET_FILE={path}: cannot read it: {err}"]) from err
    found: list[bytes] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            found.append(parse_secret(line))
        except ValueError as err:  # the reason never repeats the value
            problems.append(f"HISTORY_CURSOR_SECRET_FILE={path}: line {number}: {err}")
    if not found and not problems:
        problems.append(f"HISTORY_CURSOR_SECRET_FILE={path}: holds no secret")
    if problems:
        raise ConfigError(problems)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        _log.warning("cursor secret file %s is readable by group or others (mode %o)", path, mode & 0o777)
    return tuple(found)


def _create(path: Path) -> None:
    secret = secrets.token_bytes(GENERATED_SECRET_BYTES).hex()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another replica or process won the race; use its secret
    except OSError as err:
        raise ConfigError([f"HISTORY_CURSOR_SECRET_FILE={path}: cannot create it: {err}"]) from err
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(
                f"# history cursor secret, generated; every history replica must use the same\n{secret}\n"
            )
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:  # pragma: no cover - disk full and the like
        path.unlink(missing_ok=True)
        code = errno.errorcode.get(err.errno or 0, "")
        raise ConfigError([f"HISTORY_CURSOR_SECRET_FILE={path}: cannot write it: {code} {err}"]) from err
    _log.warning(
        "created cursor secret file %s with a random secret; every history replica must share it "
        "(or set HISTORY_CURSOR_SECRETS), otherwise cursors from one replica are refused by the others",
        path,
    )
