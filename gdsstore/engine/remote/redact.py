"""Keep secrets out of repr, messages, logs and the trace.

URLs shown to people go through :func:`redact_url` (userinfo dropped, query values masked except a
short allow-list of harmless WebHDFS parameters). Text that may quote a request (an exception from a
client library) goes through :class:`Scrubber`, which masks every secret string a transport knows it
sent: header values, tokens, userinfo, plus every query value and credential header it finds by pattern.

Memory and time are bounded: a transport registers its long-lived secrets (keys, tokens, header values)
once; per-request material (a presigned URL's signature) is never registered, because the query and
header patterns mask it wherever it is quoted. Registration is O(1) (an insertion-ordered dict), and
each registry keeps at most a fixed number of secrets (the oldest go first).
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "MAX_SECRETS", "Scrubber", "install_log_filter", "known_secret_count", "redact_url", "scrub_text"]

MASK = "***"

# Query parameters that never carry secrets and make a URL easier to read when shown.
_SAFE_PARAMS = frozenset({"op", "offset", "length", "user.name", "overwrite", "noredirect", "recursive", "partNumber"})


def redact_url(url: str) -> str:
    """``url`` without credentials: no userinfo, and every query value but harmless ones masked.

    Examples:
        >>> redact_url("https://u:pw@host/b/k?X-Amz-Signature=abc&op=OPEN")
        'https://host/b/k?X-Amz-Signature=***&op=OPEN'
    """
    if url.startswith(("http://", "https://")) and "@" not in url and "?" not in url and "#" not in url:
        return url  # nothing to mask (the common case, once per chunk of a wave)
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, v if k in _SAFE_PARAMS else MASK) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


# Every secret any transport of this process knows (insertion-ordered, bounded); the log filter masks
# them in library logs.
_KNOWN: dict[str, None] = {}
_KNOWN_LOCK = threading.Lock()
#: At most this many secrets per registry: the oldest are forgotten first (they also stay masked by
#: the query/header patterns wherever they appear as a query value or credential header).
MAX_SECRETS = 1024

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


def _remember(registry: dict[str, None], secret: str) -> bool:
    """Add ``secret`` to a bounded, insertion-ordered registry in O(1); whether it was new."""
    if secret in registry:
        return False
    registry[secret] = None
    if len(registry) > MAX_SECRETS:
        del registry[next(iter(registry))]
    return True


def _mask(text: str, secrets: list[str]) -> str:
    # Longest first, so a secret that contains another is masked whole (sorted only on this rare path:
    # text is scrubbed when an error or a DEBUG record is produced, not per request).
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _QUERY_VALUE.sub(_mask_query, text)
    return _HEADER_VALUE.sub(lambda m: m.group(1) + MASK, text)


def scrub_text(text: str) -> str:
    """Mask every known secret, query values (but harmless ones) and credential headers in ``text``."""
    with _KNOWN_LOCK:
        known = list(_KNOWN)
    return _mask(text, known)


def known_secret_count() -> int:
    """How many secrets the process-wide registry holds (bounded by :data:`MAX_SECRETS`)."""
    with _KNOWN_LOCK:
        return len(_KNOWN)


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
    """Masks secrets in text (exception messages from client libraries): the strings registered with
    :meth:`add` (bounded, O(1) each), every query value but harmless ones, and credential headers."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets: dict[str, None] = {}
        self._lock = threading.Lock()
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str | None) -> None:
        """Register one secret string (O(1); at most :data:`MAX_SECRETS` are kept, oldest dropped)."""
        # Very short strings would mask innocent text; real secrets are long.
        if not secret or len(secret) < 4:
            return
        with self._lock:
            new = _remember(self._secrets, secret)
        if new:
            with _KNOWN_LOCK:
                _remember(_KNOWN, secret)
            install_log_filter()

    def add_url(self, url: str) -> None:
        """Register the secret parts of ``url``: userinfo and each query value that is not harmless."""
        if "@" not in url and "?" not in url:
            return  # no userinfo, no query: nothing secret
        parts = urlsplit(url)
        if "@" in parts.netloc:
            self.add(parts.netloc.rsplit("@", 1)[0])
        if parts.query:  # its values, not the whole query: that differs per request (offset, length)
            for piece in parts.query.split("&"):
                k, _, v = piece.partition("=")
                if unquote_plus(k) not in _SAFE_PARAMS:
                    self.add(v)  # as sent (percent-encoded) and as a library may print it (decoded)
                    self.add(unquote_plus(v))

    def __call__(self, text: str) -> str:
        with self._lock:
            secrets = list(self._secrets)
        return _mask(text, secrets)

    def __len__(self) -> int:
        return len(self._secrets)

    def __repr__(self) -> str:
        return f"Scrubber({len(self._secrets)} secrets)"
