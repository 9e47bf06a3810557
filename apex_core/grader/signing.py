"""The installation's signing key and its HMAC signatures: one piece of code for everything the
judge vouches for (the grade cache's entries, the baseline records, the ledger of gradings).

The key is 32 random bytes in ``<cache dir>/signing-key`` (``KEY_FILE``), created 0600 on first
use. A key file that others may read or that is not the user's own is replaced, which voids
everything signed with it: whoever could read it could have signed. The cache directory is never a
results folder, and a confined solution does not see it (``sandbox.py``); an unconfined one runs
with the user's rights and could read it, which is why unconfined gradings are flagged and never
integrated.

A signed file is ``{"mac": HMAC-SHA256(key, name + "\\n" + body), "body": body}``. ``name`` says
what the body is and where it belongs (a cache key, a task and solution hash): a body signed for
one name does not verify under another, so a signed file copied or moved elsewhere reads as absent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from apex_core.storage import atomic_write_text

KEY_FILE = "signing-key"
KEY_BYTES = 32


class Signer:
    """Signs and verifies bodies under the key kept in ``root`` (read once, created on first use)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._secret: bytes | None = None

    def key(self) -> bytes | None:
        """The signing key; None where it can be neither read nor created (then nothing is signed)."""
        if self._secret is None:
            self._secret = _load_key(self.root / KEY_FILE)
        return self._secret

    def sign(self, name: str, body: str) -> str | None:
        key = self.key()
        if key is None:
            return None
        return hmac.new(key, f"{name}\n{body}".encode(), hashlib.sha256).hexdigest()

    def read(self, path: Path, name: str) -> str | None:
        """The body of the signed file at ``path`` (signed for ``name``), or None if it is absent,
        unreadable, unsigned, edited or signed for another name or with another key."""
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            body, mac = entry["body"], entry["mac"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        expected = self.sign(name, body) if isinstance(body, str) and isinstance(mac, str) else None
        if expected is None or not hmac.compare_digest(expected, mac):
            return None
        return body

    def write(self, path: Path, name: str, body: str) -> bool:
        """Write ``body`` signed for ``name`` at ``path``, atomically; False where no key can be had."""
        mac = self.sign(name, body)
        if mac is None:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"mac": mac, "body": body}), durable=False)  # a lost entry is graded again
        return True


def _load_key(path: Path) -> bytes | None:
    """The key at ``path`` if only this user can read and write it, else a new one put there (0600).

    Two processes creating it at once agree: the first link wins and the other reads it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            key = handle.read(KEY_BYTES + 1)
        if info.st_uid == os.geteuid() and not info.st_mode & 0o077 and len(key) == KEY_BYTES:
            return key
        replace = True  # others could read it, or wrote it: a new key voids what they could sign
    except FileNotFoundError:
        replace = False
    except OSError:
        replace = True
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        key = secrets.token_bytes(KEY_BYTES)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        try:
            if replace:
                os.replace(temporary, path)
                return key
            try:
                os.link(temporary, path)
                return key
            except FileExistsError:
                return _load_key(path) if path.is_file() and not path.is_symlink() else None
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return None
