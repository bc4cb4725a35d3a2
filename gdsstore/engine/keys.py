"""The engine's rule for keys: ``/``-separated paths relative to a backend's root, checked before any I/O
so that nothing outside the root is ever read, written or deleted (remote transports add their URL
encoding on top: :mod:`gdsstore.engine.remote.keys`).

Examples:
    >>> check_key("c/0/1", "demo")
    'c/0/1'
    >>> plain_keys(["c/0/1", "a.zarr/c/0/2"]), plain_keys(["c/0/1", "c/../x"])
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["check_key", "plain_keys"]

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


#: What no key :func:`check_key` refuses lacks: a leading ``/`` or ``.``, a ``.`` after a ``/``, an empty
#: segment, a backslash (each key preceded by the NUL that joins them).
_SUSPECT = ("\x00/", "\x00.", "/.", "//", "\\")


def plain_keys(keys: Sequence[str], suspect: tuple[str, ...] = ()) -> bool:
    """Whether :func:`check_key` accepts every key as it is, from one scan of them all (a wave asks for
    thousands). False: some key holds a character that needs :func:`check_key` (or one of ``suspect``);
    it may still pass there.
    """
    try:
        joined = "\x00" + "\x00".join(keys)
    except TypeError:  # a key that is not a str
        return False
    if joined.count("\x00") != len(keys):  # a key with a NUL byte
        return False
    return not any(s in joined for s in (*_SUSPECT, *suspect))
