"""The engine's rule for keys: ``/``-separated paths relative to a backend's root, checked before any I/O
so that nothing outside the root is ever read, written or deleted (remote transports add their URL
encoding on top: :mod:`gdsstore.engine.remote.keys`).

Examples:
    >>> check_key("c/0/1", "demo")
    'c/0/1'
"""

from __future__ import annotations

import re

__all__ = ["check_key"]

#: A backslash, a NUL byte, or an empty, ``.`` or ``..`` segment: one search instead of a split per key (a
#: read of 4,096 chunks checks 4,096 keys).
_BAD_KEY = re.compile(r"[\\\x00]|(?:^|/)\.{0,2}(?:/|$)")


def check_key(key: str, where: str) -> str:
    """Validate a relative key: no absolute paths, ``..``, ``.``, empty segments or NUL bytes.

    Raises:
        ValueError: naming ``where`` and the key.
    """
    if not isinstance(key, str):
        raise TypeError(f"{where}: key must be a str, got {type(key).__name__}")
    if key == "":
        return key
    if key.startswith("/") or _BAD_KEY.search(key.rstrip("/")):
        raise ValueError(f"{where}: invalid key {key!r}: keys are relative paths without '.', '..' or empty segments")
    return key
