"""Keep secrets out of repr, messages, logs and the trace.

URLs shown to people go through :func:`redact_url` (userinfo dropped, query values masked except a
short allow-list of harmless WebHDFS parameters). Text that may quote a request (an exception from a
client library) goes through :class:`Scrubber`, which masks every secret string a transport knows it
sent: header values, tokens, query strings of presigned URLs.
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "Scrubber", "install_log_filter", "redact_url"]

MASK = "***"

# Query parameters that never carry secrets and make a URL easier to read when shown.
_SAFE_PARAMS = frozenset({"op", "offset", "length", "user.name", "overwrite", "noredirect", "recursive", "partNumber"})


def redact_url(url: str) -> str:
    """``url`` without credentials: no userinfo, and every query value but harmless ones masked.

    Examples:
        >>> redact_url("https://u:pw@host/b/k?X-Amz-Signature=abc&op=OPEN")
        'https://host/b/k?X-Amz-Signature=***&op=OPEN'
    """
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, v if k in _SAFE_PARAMS else MASK) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


# Every secret any transport of this process knows; the log filter masks them in library logs.
_KNOWN: set[str] = set()
_KNOWN_LOCK = threading.Lock()

# Loggers of the client libraries that print request lines, headers or signing material at DEBUG.
_LIBRARY_LOGGERS = (
    "urllib3.connectionpool", "urllib3.connection", "urllib3.response", "urllib3.util.retry",
    "botocore.endpoint", "botocore.auth", "botocore.httpsession", "botocore.hooks", "botocore.parsers",
    "botocore.awsrequest", "botocore.credentials", "botocore.retryhandler", "botocore.utils",
    "botocore.client", "botocore.regions", "botocore.signers", "gdsstore.remote",
)
_QUERY_VALUE = re.compile(r"([?&])([^=&\s\"'#]+)=([^&\s\"'#]*)")
_HEADER_VALUE = re.compile(
    r"((?:authorization|x-amz-security-token|x-amz-credential|cookie)['\"]?\s*[:=]\s*b?['\"]?)[^'\",}\n]+",
    re.IGNORECASE,
)
_filter_installed = False


def _mask_query(m: re.Match[str]) -> str:
    key = m.group(2)
    return m.group(0) if unquote_plus(key) in _SAFE_PARAMS else f"{m.group(1)}{key}={MASK}"


def scrub_text(text: str) -> str:
    """Mask every known secret, query values (but harmless ones) and credential headers in ``text``."""
    with _KNOWN_LOCK:
        known = sorted(_KNOWN, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _QUERY_VALUE.sub(_mask_query, text)
    return _HEADER_VALUE.sub(lambda m: m.group(1) + MASK, text)


class _RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:
            return True
        clean = scrub_text(msg)
        if clean != msg:
            record.msg, record.args = clean, ()
        return True


def install_log_filter() -> None:
    """Mask secrets in the DEBUG logs of urllib3 and botocore (they print URLs and signed headers).

    Filters run only for records that are emitted, so this costs nothing with DEBUG off.
    """
    global _filter_installed
    if _filter_installed:
        return
    _filter_installed = True
    f = _RedactingFilter("gdsstore-secrets")
    for name in _LIBRARY_LOGGERS:
        logging.getLogger(name).addFilter(f)


class Scrubber:
    """Masks known secret strings in text (exception messages from client libraries)."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets: list[str] = []
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str | None) -> None:
        # Very short strings would mask innocent text; real secrets are long.
        if secret and len(secret) >= 4 and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)
            with _KNOWN_LOCK:
                _KNOWN.add(secret)
            install_log_filter()

    def add_url(self, url: str) -> None:
        """Register the secret parts of ``url``: userinfo and each query value that is not harmless."""
        parts = urlsplit(url)
        if "@" in parts.netloc:
            self.add(parts.netloc.rsplit("@", 1)[0])
        if parts.query:
            self.add(parts.query)
            for piece in parts.query.split("&"):
                k, _, v = piece.partition("=")
                if unquote_plus(k) not in _SAFE_PARAMS:
                    self.add(v)  # as sent (percent-encoded) and as a library may print it (decoded)
                    self.add(unquote_plus(v))

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, MASK)
        return text

    def __repr__(self) -> str:
        return f"Scrubber({len(self._secrets)} secrets)"
