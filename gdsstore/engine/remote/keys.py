"""Keys under a remote root: every segment percent-encoded whole (:func:`key_to_url_path`), and a key a server
would decode into a path outside the root refused before any request (:func:`check_remote_key`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote, unquote

from gdsstore.engine.backend import check_key
from gdsstore.engine.keys import plain_keys

__all__ = ["check_header_values", "check_remote_key", "key_to_url_path", "plain_remote_keys"]


def check_remote_key(key: str, where: str) -> str:
    """:func:`~gdsstore.engine.backend.check_key`, then the same check on the key as a server would
    decode it once more (``%2e%2e`` → ``..``, ``..%2f`` → ``../``): a remote key must not name a path
    outside the root however the server decodes it.

    Raises:
        ValueError: naming ``where``, the key and what it decodes to.
    """
    check_key(key, where)
    decoded = unquote(key, errors="replace") if "%" in key else key
    if decoded != key:
        try:
            check_key(decoded, where)
        except ValueError:
            raise ValueError(
                f"{where}: invalid key {key!r}: a server decodes it to {decoded!r}, a path with '.', '..' or "
                "empty segments (outside the root); rename the key"
            ) from None
    return key


def plain_remote_keys(keys: Sequence[str]) -> bool:
    """Whether :func:`check_remote_key` accepts every key as it is (:func:`~gdsstore.engine.keys.plain_keys`,
    and no ``%`` a server would decode); False: check them one by one."""
    return plain_keys(keys, ("%",))


def key_to_url_path(key: str, where: str) -> str:
    """The URL path of ``key`` under a root: every segment percent-encoded whole (UTF-8).

    Examples:
        >>> key_to_url_path("a b/c#1?v=%/é", "example")
        'a%20b/c%231%3Fv%3D%25/%C3%A9'
    """
    check_remote_key(key, where)
    return "/".join(quote(seg, safe="") for seg in key.split("/"))


def check_header_values(headers: Mapping[str, str], where: str) -> None:
    """Refuse header names or values with CR, LF or NUL (they would inject headers or requests)."""
    for k, v in headers.items():
        if any(c in f"{k}{v}" for c in "\r\n\x00"):
            raise ValueError(f"{where}: header {k!r} has a CR, LF or NUL character; remove it")
