"""Keep secrets out of repr, messages, logs and the trace: URLs shown go through :func:`redact_url`, text that
may quote a request (an exception, a DEBUG record of urllib3 or botocore) through :func:`scrub_text`. Long-lived
secrets are registered once (:func:`remember`, at most :data:`MAX_SECRETS`); per-request material (a presigned
URL's signature) never is: the query and header patterns mask it wherever it is quoted.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "MAX_SECRETS", "known_secret_count", "redact_url", "remember", "remember_url", "scrub_text"]

MASK = "***"
#: At most this many secrets are kept: the oldest are forgotten first (they also stay masked by the
#: query/header patterns wherever they appear as a query value or credential header).
MAX_SECRETS = 1024

# Query parameters that never carry secrets and make a URL easier to read when shown.
_SAFE_PARAMS = frozenset({"op", "offset", "length", "user.name", "overwrite", "noredirect", "recursive", "partNumber"})
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
# Every secret the transports of this process registered (insertion-ordered, bounded).
_known: dict[str, None] = {}
_lock = threading.Lock()


def redact_url(url: str) -> str:
    """``url`` without credentials: no userinfo, and every query value but harmless ones masked.

    Examples:
        >>> redact_url("https://u:pw@host/b/k?X-Amz-Signature=abc&op=OPEN")
        'https://host/b/k?X-Amz-Signature=***&op=OPEN'
    """
    if url.startswith(("http://", "https://")) and "@" not in url and "?" not in url and "#" not in url:
        return url  # nothing to mask (the common case, once per chunk of a wave)
    parts = urlsplit(url)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, v if k in _SAFE_PARAMS else MASK) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, query, ""))


def _mask_query(m: re.Match[str]) -> str:
    key = m.group(2)
    return m.group(0) if unquote_plus(key) in _SAFE_PARAMS else f"{m.group(1)}{key}={MASK}"


def scrub_text(text: str) -> str:
    """Mask every registered secret, query values (but harmless ones) and credential headers in ``text``."""
    with _lock:
        # Longest first, so a secret that contains another is masked whole (sorted only on this rare path:
        # text is scrubbed when an error or a DEBUG record is made, not per request).
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _QUERY_VALUE.sub(_mask_query, text)
    return _HEADER_VALUE.sub(lambda m: m.group(1) + MASK, text)


def remember(*secrets: str | None) -> None:
    """Register secret strings for :func:`scrub_text` and the library logs (O(1) each; at most
    :data:`MAX_SECRETS` are kept). Strings under 4 characters are not: they would mask innocent text."""
    for secret in secrets:
        if not secret or len(secret) < 4:
            continue
        with _lock:
            if secret in _known:
                continue
            _known[secret] = None
            if len(_known) > MAX_SECRETS:
                del _known[next(iter(_known))]
        _install_log_filter()


def remember_url(url: str) -> None:
    """Register the secret parts of ``url``: userinfo and each query value that is not harmless (its values,
    not the whole query: that differs per request), as sent (percent-encoded) and as a library prints it."""
    if "@" not in url and "?" not in url:
        return
    parts = urlsplit(url)
    if "@" in parts.netloc:
        remember(parts.netloc.rsplit("@", 1)[0])
    for piece in parts.query.split("&") if parts.query else ():
        k, _, v = piece.partition("=")
        if unquote_plus(k) not in _SAFE_PARAMS:
            remember(v, unquote_plus(v))


def known_secret_count() -> int:
    """How many secrets the registry holds (bounded by :data:`MAX_SECRETS`)."""
    with _lock:
        return len(_known)


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


@functools.cache
def _install_log_filter() -> None:
    """Mask secrets in the DEBUG logs of urllib3 and botocore (they print URLs and signed headers), once.
    Filters run only for records that are emitted: this costs nothing with DEBUG off."""
    f = _RedactingFilter("gdsstore-secrets")
    for name in _LIBRARY_LOGGERS:
        logging.getLogger(name).addFilter(f)
