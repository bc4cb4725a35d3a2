"""The S3 transport: botocore for credentials, signing and the object API; ranged GETs on the fast
HTTP transport.

botocore resolves credentials the standard way (explicit keys, env, shared profile, web identity,
instance role), signs with SigV4, and runs HEAD/LIST/PUT/multipart/DELETE. For the data path a GET
URL is presigned once per opened object (one signature, about 0.1 ms) and its ranges are read with
:class:`~gdsstore.engine.remote.http_transport.HTTPClient`, whose bodies land in place through
``http.client.readinto``; botocore's ``get_object`` would add its own response layer per range.
Nothing of a presigned URL is kept for masking (the query pattern masks it wherever it is quoted),
so the cost of a request does not grow with the number of objects a process has read.
Retries of botocore calls go through :mod:`gdsstore.engine.remote.retry` too (botocore's own retries
are switched off), so there is one retry policy.

Without ``region_name``, each bucket's region is asked once (``HeadBucket``'s ``x-amz-bucket-region``)
before anything is signed for it, and requests to that bucket are signed for that region.

Where a bucket's requests go is botocore's resolution alone (the options, ``AWS_ENDPOINT_URL(_S3)``, the
profile's ``endpoint_url`` or ``services`` section, the region's endpoint rules, the addressing style): it is
read once per bucket off the URL botocore presigns for a probe key (:class:`S3Target`), and the native core's
store and the pure-Python signer are both built from that URL, so no transport sends a request where
botocore would not. Sessions and clients are cached per AWS environment (:func:`_aws_environment`).

Storage options (s3fs-compatible names where they exist):

- ``key``/``secret``/``token`` (or ``aws_access_key_id``/``aws_secret_access_key``/``aws_session_token``),
  ``profile``, ``anon`` (unsigned requests to public buckets),
- ``endpoint_url``, ``region_name``, ``addressing_style`` (``"path"``/``"virtual"``/``"auto"``),
- ``verify`` (``True``/``False``/CA bundle path), ``use_ssl`` (``False``: plain HTTP to AWS's
  endpoints), ``client_kwargs``, ``config_kwargs`` (passed to botocore's ``create_client`` and ``Config``),
- ``requester_pays`` (``RequestPayer="requester"`` on every request), ``s3_additional_kwargs`` (added
  to every upload: ``{"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": ...}``, ``ACL``...),
- ``version_aware``: a read pins the object's ``VersionId`` (a replaced object is still read whole,
  from the version that was opened) instead of failing on a changed ETag,
- ``session``: a ``botocore.session.Session`` to take credentials and configuration from (an
  aiobotocore session is refused: use its botocore equivalent or pass keys),
- fsspec's generic options, accepted and ignored (gdsstore keeps no listings or instance caches):
  ``skip_instance_cache``, ``use_listings_cache``, ``listings_expiry_time``, ``max_paths``,
  ``default_block_size``, ``default_fill_cache``, ``default_cache_type``, ``cache_regions``, ``loop``,
  ``asynchronous`` (only ``False``).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore._optional import require
from gdsstore.engine.backend import Backend, BatchResult, ObjectInfo, check_key
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.remote.http_transport import (
    HTTPClient,
    HTTPSource,
    check_remote_key,
    get_client,
    retry_after,
)
from gdsstore.engine.remote.reader import Body, FirstRange, RangeRequest
from gdsstore.engine.remote.redact import Scrubber
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy, TransientError
from gdsstore.engine.remote.wave import WaveReads

__all__ = [
    "S3Backend", "S3Client", "S3Source", "S3Target", "core_store", "get_s3_client", "parse_s3_url", "s3_upload", "s3_upload_many",
]

# A presigned GET stays valid this long; re-presigned well before it expires.
_PRESIGN_SECONDS = 3600
_PRESIGN_REFRESH = 2700

# fsspec/s3fs options with no meaning here (no listings cache, no instance cache, sync only).
_IGNORED_OPTIONS = frozenset(
    {
        "skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths", "default_block_size",
        "default_fill_cache", "default_cache_type", "cache_regions", "loop", "asynchronous",
    }
)
_OPTION_NAMES = frozenset(
    {
        "key", "secret", "token", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
        "profile", "anon", "endpoint_url", "region_name", "addressing_style", "verify", "client_kwargs",
        "config_kwargs", "use_ssl", "requester_pays", "s3_additional_kwargs", "version_aware", "session",
    }
) | _IGNORED_OPTIONS
_NOT_FOUND = frozenset({"404", "NoSuchKey", "NoSuchBucket", "NotFound"})
_DENIED = frozenset(
    {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "AllAccessDisabled"}
)
_EXISTS = frozenset({"412", "PreconditionFailed", "ConditionalRequestConflict"})


def parse_s3_url(url: str) -> tuple[str, str]:
    """``"s3://bucket/a/b"`` → ``("bucket", "a/b")``.

    Raises:
        ValueError: not an ``s3://`` URL or no bucket.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"S3: not an s3://bucket/key URL: {url!r}")
    if "@" in parts.netloc:
        raise ValueError("S3: credentials in the URL are not accepted; pass key=/secret= storage options")
    return parts.netloc, parts.path.lstrip("/")


# Sessions per profile and clients per options, each with the fingerprint of the environment it was made in.
_sessions: dict[str | None, tuple[bytes, Any]] = {}
_session_lock = threading.Lock()
_clients: dict[str, tuple[bytes, S3Client]] = {}

# Where botocore looks for shared configuration when the variable is unset.
_SHARED_FILES = (("AWS_CONFIG_FILE", "~/.aws/config"), ("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"))


def _aws_environment() -> bytes:
    """A digest of what botocore reads besides the options: every ``AWS_*`` variable (endpoints, profile,
    region, keys) and the path, size and mtime of the shared config and credentials files.

    Part of the key of the cached sessions and clients, so a changed variable or file is seen by the next
    client made, and never silently replaced by what an earlier client resolved.
    """
    import hashlib

    parts: list[object] = [*sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))]
    for var, default in _SHARED_FILES:
        path = os.path.expanduser(os.environ.get(var) or default)
        try:
            st = os.stat(path)
            parts.append((path, st.st_size, st.st_mtime_ns))
        except OSError:
            parts.append((path, None))
    return hashlib.sha256(repr(parts).encode()).digest()  # a digest: no second copy of secrets in memory


def _session(profile: str | None) -> Any:
    """One botocore session per profile and environment: creating one loads its data files (~0.1 s), and a
    session keeps the configuration and credentials it first read, so a changed environment needs a new one."""
    import botocore.session

    env = _aws_environment()
    with _session_lock:
        held = _sessions.get(profile)
        if held is None or held[0] != env:
            held = _sessions[profile] = (env, botocore.session.Session(profile=profile))
        return held[1]


def get_s3_client(options: dict[str, Any]) -> S3Client:
    """The process-wide :class:`S3Client` for these options, the current remote settings and the current
    AWS environment (:func:`_aws_environment`).

    Clients are cached (they hold connection pools); the key lives only in this process's memory. A client
    made in another environment is replaced, not kept beside the new one; objects opened with it keep it.
    """
    s = policy.settings()
    key = json.dumps(
        [options, s.remote_connect_timeout, s.remote_timeout, s.remote_concurrency], sort_keys=True, default=repr
    )
    env = _aws_environment()
    with _session_lock:
        held = _clients.get(key)
    if held is None or held[0] != env:
        c = S3Client(options)
        with _session_lock:
            held = _clients.get(key)
            if held is None or held[0] != env:
                held = _clients[key] = (env, c)
    return held[1]


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    """Refuse unknown names and meaningless values; drop the generic fsspec options we ignore."""
    unknown = sorted(set(options) - _OPTION_NAMES)
    if unknown:
        raise TypeError(f"S3: unknown storage options {unknown}; known: {sorted(_OPTION_NAMES)}")
    if options.get("asynchronous"):
        raise ValueError("S3: asynchronous=True is not supported (gdsstore's S3 calls are synchronous); drop it")
    extra = options.get("s3_additional_kwargs")
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"S3: s3_additional_kwargs must be a dict, got {type(extra).__name__}")
    return {k: v for k, v in options.items() if k not in _IGNORED_OPTIONS}


def _session_from(o: dict[str, Any]) -> Any:
    """The botocore session: the ``session`` option, else one per ``profile``."""
    given = o.pop("session", None)
    profile = o.pop("profile", None)
    if given is None:
        return _session(profile)
    import botocore.session

    if not isinstance(given, botocore.session.Session) or type(given).__module__.startswith("aiobotocore"):
        raise TypeError(
            f"S3: session must be a botocore.session.Session, got {type(given).__module__}.{type(given).__name__}; "
            "pass botocore.session.Session(profile=...) or key=/secret= instead"
        )
    return given


class S3Client:
    """A botocore S3 client built from storage options, plus the fast HTTP client for GETs."""

    def __init__(self, options: dict[str, Any]) -> None:
        require("botocore", purpose="S3 (s3:// URLs)")  # a missing botocore names the extra to install
        from botocore import UNSIGNED
        from botocore.config import Config

        s = policy.settings()
        o = _check_options(dict(options))
        client_kwargs = dict(o.pop("client_kwargs", None) or {})
        config_kwargs = dict(o.pop("config_kwargs", None) or {})
        self.scrub = Scrubber()
        self.requester_pays = bool(o.pop("requester_pays", False))
        self.version_aware = bool(o.pop("version_aware", False))
        self.upload_kwargs: dict[str, Any] = dict(o.pop("s3_additional_kwargs", None) or {})
        if "use_ssl" in o:
            client_kwargs.setdefault("use_ssl", bool(o.pop("use_ssl")))
        session = _session_from(o)
        key = o.pop("key", None) or o.pop("aws_access_key_id", None)
        secret = o.pop("secret", None) or o.pop("aws_secret_access_key", None)
        token = o.pop("token", None) or o.pop("aws_session_token", None)
        for v in (key, secret, token):
            self.scrub.add(v)
        self._anon = bool(o.pop("anon", False))
        s3_cfg = dict(config_kwargs.pop("s3", None) or {})
        if o.get("addressing_style"):
            s3_cfg["addressing_style"] = o.pop("addressing_style")
        cfg: dict[str, Any] = {
            "signature_version": UNSIGNED if self._anon else "s3v4",
            "s3": s3_cfg,
            # One retry policy: ours (remote.retry), so botocore makes exactly one attempt per call.
            "retries": {"total_max_attempts": 1},
            "connect_timeout": s.remote_connect_timeout,
            "read_timeout": s.remote_timeout,
            "max_pool_connections": max(10, 2 * s.remote_concurrency),
        }
        cfg.update(config_kwargs)
        verify = o.pop("verify", True)
        region = o.pop("region_name", None) or client_kwargs.pop("region_name", None)
        endpoint = o.pop("endpoint_url", None) or client_kwargs.pop("endpoint_url", None)
        self.region_given = region is not None
        # What the native core cannot take (custom TLS, botocore-only knobs, pinned versions) goes the Python way.
        self._core_ok = verify is True and not client_kwargs and not config_kwargs and not self.version_aware
        self._session = session
        self._create: dict[str, Any] = {
            "endpoint_url": endpoint, "aws_access_key_id": key, "aws_secret_access_key": secret,
            "aws_session_token": token, "verify": verify, "config": Config(**cfg), **client_kwargs,
        }
        # Until a bucket's region is known: the given one, else botocore's (AWS_DEFAULT_REGION, the profile's,
        # or us-east-1); HeadBucket answers from there with the bucket's region.
        self.client = self._make(region)
        self._bucket_clients: dict[str, Any] = {}
        self._signers: dict[str, _QuerySigner | None] = {}
        self._targets: dict[str, S3Target | None] = {}
        self._fork_pid = os.getpid()
        self.http: HTTPClient = get_client(verify)
        self.retry_policy = RetryPolicy.from_settings(s)

    def _make(self, region: str | None) -> Any:
        with _session_lock:  # botocore sessions are not thread-safe; the clients they make are
            return self._session.create_client("s3", region_name=region, **self._create)

    def _check_fork(self) -> None:
        """botocore clients hold urllib3 pools: a forked child builds its own before its first call."""
        if self._fork_pid != os.getpid():
            self._fork_pid = os.getpid()
            self.client = self._make(self.client.meta.region_name)
            self._bucket_clients = {}

    def region_of(self, bucket: str) -> str:
        """The region requests to ``bucket`` are signed for: ``region_name``, else the bucket's own
        (``HeadBucket``'s ``x-amz-bucket-region``, asked once per bucket)."""
        return str(self.for_bucket(bucket).meta.region_name)

    def for_bucket(self, bucket: str) -> Any:
        """The botocore client that signs for ``bucket``'s region."""
        self._check_fork()
        if self.region_given or not bucket:
            return self.client
        c = self._bucket_clients.get(bucket)
        if c is None:
            region = self._discover_region(bucket)
            c = self.client if region == self.client.meta.region_name else self._make(region)
            c = self._bucket_clients.setdefault(bucket, c)
        return c

    def _discover_region(self, bucket: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            meta = self.client.head_bucket(Bucket=bucket).get("ResponseMetadata", {})
        except ClientError as exc:  # AWS answers 301/403 from another region, with the header
            meta = exc.response.get("ResponseMetadata", {})
        except BotoCoreError:
            return str(self.client.meta.region_name)  # unreachable now: the call itself will say why
        region = (meta.get("HTTPHeaders") or {}).get("x-amz-bucket-region")
        return str(region or self.client.meta.region_name)

    def call(self, op: str, what: str, **params: Any) -> Any:
        """Run one botocore operation with our retries; errors mapped to builtin exceptions."""
        if self.requester_pays:
            params.setdefault("RequestPayer", "requester")
        fn = getattr(self.for_bucket(str(params.get("Bucket", ""))), op)

        def attempt() -> Any:
            try:
                return fn(**params)
            except Exception as exc:
                raise self.map_error(exc, what) from None

        return RetryPolicy.from_settings().call(attempt, what)

    def map_error(self, exc: Exception, what: str) -> Exception:
        """botocore exception → FileNotFoundError / PermissionError / TransientError / RemoteIOError."""
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            label = f"{what}: {code or status}"
            if code in _NOT_FOUND or status == 404:
                return FileNotFoundError(f"{label}: no such bucket or key")
            if code in _DENIED or status in (401, 403):
                return PermissionError(f"{label}: access denied")
            if code in _EXISTS or status == 412:
                return FileExistsError(f"{label}: the key exists")
            if self.retry_policy.retryable_status(status) or code in ("SlowDown", "RequestTimeout", "InternalError"):
                headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders") or {}
                return TransientError(label, retry_after=retry_after(_Caseless(headers)))
            return RemoteIOError(label)
        if isinstance(exc, NoCredentialsError):
            return PermissionError(f"{what}: no AWS credentials found (pass key=/secret=, a profile, or anon=True)")
        text = self.scrub(f"{type(exc).__name__}: {exc}")
        if isinstance(exc, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError):
            return TransientError(f"{what}: {text}")
        if isinstance(exc, OSError | ValueError | TypeError):
            return type(exc)(f"{what}: {text}")
        return RemoteIOError(f"{what}: {text}")

    def presign_get(self, bucket: str, key: str, version_id: str | None = None) -> str:
        """A GET URL for ``key`` (of ``version_id``), valid for an hour; nothing of it is registered
        for masking (its query values are masked by pattern), so memory does not grow per object.

        Signed by this bucket's :class:`_QuerySigner` (SigV4 query signing, about 20 µs); botocore's
        ``generate_presigned_url`` (about 1 ms here: endpoint rules, parameter validation, events on
        every call) signs only the bucket's template and whatever the signer cannot shape.
        """
        signer = self._signer(bucket)
        url = signer.sign(key, version_id) if signer is not None else None
        return url or self._botocore_presign(bucket, key, version_id)

    def _botocore_presign(self, bucket: str, key: str, version_id: str | None) -> str:
        params: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if version_id:
            params["VersionId"] = version_id
        if self.requester_pays:
            params["RequestPayer"] = "requester"
        return str(
            self.for_bucket(bucket).generate_presigned_url("get_object", Params=params, ExpiresIn=_PRESIGN_SECONDS)
        )

    def _signer(self, bucket: str) -> _QuerySigner | None:
        """The bucket's signer, shaped like botocore's URL of the probe key (None: use botocore)."""
        self._check_fork()
        signer = self._signers.get(bucket)
        if signer is None and bucket not in self._signers:
            target = self.target(bucket)
            signer = None if target is None else _QuerySigner.from_template(
                target.url, _PROBE_KEY, self._credentials, self.requester_pays
            )
            self._signers[bucket] = signer
        return signer

    def target(self, bucket: str) -> S3Target | None:
        """Where botocore sends the requests of ``bucket`` (:class:`S3Target`), read once off the URL botocore
        presigns for a probe key; None where that URL has a shape the native core cannot reproduce."""
        self._check_fork()
        if bucket not in self._targets:
            url = self._botocore_presign(bucket, _PROBE_KEY, None)
            self._targets[bucket] = S3Target.from_probe(url, bucket, self.for_bucket(bucket).meta.region_name)
        return self._targets[bucket]

    def core_options(self, bucket: str) -> dict[str, str] | None:
        """object_store's options for ``bucket`` (the native core signs in the header with them): the endpoint,
        addressing style and signing region botocore resolved (:meth:`target`), the credentials botocore holds
        now. None where the core cannot take this client's configuration or no credentials are at hand."""
        if not self._core_ok:
            return None
        creds = self._credentials
        if creds is None and not self._anon:
            return None  # the Python way raises "no AWS credentials found"
        target = self.target(bucket)
        if target is None:
            return None
        o = target.core_options(bucket)
        if self.requester_pays:
            o["aws_request_payer"] = "true"
        if creds is None:
            o["aws_skip_signature"] = "true"
            return o
        frozen = creds.get_frozen_credentials()  # botocore refreshes expiring ones here
        o["aws_access_key_id"], o["aws_secret_access_key"] = frozen.access_key, frozen.secret_key
        if frozen.token:
            o["aws_session_token"] = frozen.token
        return o

    @property
    def core_writes(self) -> bool:
        """Whether uploads can go through the native core: what :meth:`core_options` takes, and no
        ``s3_additional_kwargs`` (encryption, ACL: botocore's upload arguments)."""
        return self._core_ok and not self.upload_kwargs

    @property
    def _credentials(self) -> Any:
        """botocore credentials (refreshed by botocore where they expire), or None (anonymous/none)."""
        if self._anon:
            return None
        c = self._create
        if c.get("aws_access_key_id") and c.get("aws_secret_access_key"):
            from botocore.credentials import Credentials

            return Credentials(c["aws_access_key_id"], c["aws_secret_access_key"], c.get("aws_session_token"))
        return self._session.get_credentials()

    @property
    def get_headers(self) -> dict[str, str]:
        """Headers every ranged GET sends (those the presigned URL signed)."""
        return {"x-amz-request-payer": "requester"} if self.requester_pays else {}


_UNRESERVED = "-_.~"
# The key botocore presigns to show where a bucket's requests go (nothing is sent for it).
_PROBE_KEY = "gdsstore-probe/x"


@dataclass(frozen=True, slots=True)
class S3Target:
    """Where botocore sends the requests of one bucket, read off the URL it presigned for a probe key.

    That URL is botocore's whole resolution (``endpoint_url``, ``AWS_ENDPOINT_URL(_S3)``, a profile's
    ``endpoint_url`` or ``services`` section, the region's endpoint rules, path or virtual-hosted style,
    dual-stack, FIPS, ``use_ssl``); every transport takes its requests' URLs and signing region from here.

    Attributes:
        url: the presigned URL of the probe key (the template of the pure-Python signer).
        endpoint: scheme, host and path prefix of the bucket's requests, without the bucket where it is in
            the path (``path_style``), else the bucket's own endpoint (virtual-hosted).
        path_style: the bucket is the first segment after ``endpoint``'s path.
        region: the region requests are signed for (the URL's credential scope; unsigned: the client's).
    """

    url: str
    endpoint: str
    path_style: bool
    region: str

    @classmethod
    def from_probe(cls, url: str, bucket: str, client_region: str) -> S3Target | None:
        """The target shown by ``url`` (botocore's presign of :data:`_PROBE_KEY` in ``bucket``); None when
        the URL does not end in the key or is signed for another service than ``s3``."""
        from urllib.parse import parse_qs, quote

        parts = urlsplit(url)
        quoted = quote(_PROBE_KEY, safe="/" + _UNRESERVED)
        if not parts.scheme or not parts.netloc or not parts.path.endswith("/" + quoted):
            return None
        prefix = parts.path[: len(parts.path) - len(quoted)]  # ends in "/"
        scope = (parse_qs(parts.query).get("X-Amz-Credential") or [""])[0].split("/")
        if len(scope) == 5 and scope[3] != "s3":
            return None  # another signing service (S3 Express, Outposts...): botocore signs, the core does not
        region = scope[2] if len(scope) == 5 else client_region
        bucket_dir = "/" + quote(bucket, safe=_UNRESERVED) + "/"
        path_style = prefix.endswith(bucket_dir)
        if path_style:
            prefix = prefix[: len(prefix) - len(bucket_dir) + 1]
        endpoint = f"{parts.scheme}://{parts.netloc}{prefix.rstrip('/')}"
        return cls(url, endpoint, path_style, region)

    def core_options(self, bucket: str) -> dict[str, str]:
        """object_store's location options: a request for key ``k`` goes to ``{endpoint}/{bucket}/{k}``
        (path style) or ``{endpoint}/{k}`` (virtual-hosted: object_store takes the endpoint as the bucket's
        own), the same URL botocore builds."""
        return {
            "aws_bucket": bucket, "aws_region": self.region, "aws_endpoint": self.endpoint,
            "aws_virtual_hosted_style_request": "false" if self.path_style else "true",
        }


class _QuerySigner:
    """AWS SigV4 query signing ("presigned URLs") for one bucket, without botocore's per-call machinery.

    The URL's shape (scheme, host, the path before the key, the region of the credential scope,
    addressing style) comes from one URL botocore presigned for a probe key: whatever botocore
    decided for the bucket (endpoint rules, virtual or path style, FIPS, dual-stack) is kept, and
    only the key, the time and the signature change. The signing key is derived once per day and
    region. :func:`tests.remote.test_s3_options` checks the signatures equal botocore's.
    """

    def __init__(self, base: str, prefix: str, region: str, credentials: Any, signed_headers: dict[str, str]) -> None:
        self._base = base  # scheme://netloc
        self._prefix = prefix  # the path before the key ("/bucket/" or "/")
        self._region = region
        self._credentials = credentials
        self._headers = signed_headers  # lower-case name -> value, sent with every GET
        self._keys: dict[tuple[str, str, str], bytes] = {}

    @classmethod
    def from_template(cls, url: str, probe: str, credentials: Any, requester_pays: bool) -> _QuerySigner | None:
        """A signer shaped like ``url`` (botocore's presign of ``probe``), or None when the template
        holds anything this signer does not reproduce (then botocore signs every URL)."""
        from urllib.parse import parse_qsl, quote

        parts = urlsplit(url)
        quoted = quote(probe, safe="/" + _UNRESERVED)
        if not parts.path.endswith(quoted):
            return None
        q = dict(parse_qsl(parts.query, keep_blank_values=True))
        if not q or credentials is None:
            return None  # anonymous: the plain URL needs no signer
        expected = {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
                    "X-Amz-Signature", "X-Amz-Security-Token"}
        headers = {"x-amz-request-payer": "requester"} if requester_pays else {}
        if set(q) - expected or q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            return None
        if q.get("X-Amz-SignedHeaders") != ";".join(["host", *sorted(headers)]):
            return None
        scope = q["X-Amz-Credential"].split("/")
        if len(scope) != 5 or scope[3] != "s3":
            return None
        base = f"{parts.scheme}://{parts.netloc}"
        return cls(base, parts.path[: len(parts.path) - len(quoted)], scope[2], credentials, headers)

    def _signing_key(self, secret: str, day: str) -> bytes:
        import hashlib
        import hmac

        k = self._keys.get((secret, day, self._region))
        if k is None:
            k = ("AWS4" + secret).encode()
            for part in (day, self._region, "s3", "aws4_request"):
                k = hmac.new(k, part.encode(), hashlib.sha256).digest()
            self._keys = {(secret, day, self._region): k}  # one day's key: nothing accumulates
        return k

    def sign(self, key: str, version_id: str | None, now: float | None = None) -> str | None:
        """The presigned GET URL of ``key``; None when no credentials are at hand now."""
        import hashlib
        import hmac
        from urllib.parse import quote

        creds = self._credentials.get_frozen_credentials() if self._credentials is not None else None
        if creds is None or not creds.access_key or not creds.secret_key:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        scope = f"{stamp[:8]}/{self._region}/s3/aws4_request"
        signed = ";".join(["host", *sorted(self._headers)])
        params = {
            "X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Credential": f"{creds.access_key}/{scope}",
            "X-Amz-Date": stamp, "X-Amz-Expires": str(_PRESIGN_SECONDS), "X-Amz-SignedHeaders": signed,
        }
        if creds.token:
            params["X-Amz-Security-Token"] = creds.token
        if version_id:
            params["versionId"] = version_id
        query = "&".join(
            f"{quote(k, safe=_UNRESERVED)}={quote(v, safe=_UNRESERVED)}" for k, v in sorted(params.items())
        )
        path = self._prefix + quote(key, safe="/" + _UNRESERVED)
        host = urlsplit(self._base).netloc
        headers = "".join(f"{k}:{v}\n" for k, v in sorted({"host": host, **self._headers}.items()))
        canonical = "\n".join(["GET", path, query, headers, signed, "UNSIGNED-PAYLOAD"])
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        sig = hmac.new(self._signing_key(creds.secret_key, stamp[:8]), to_sign.encode(), hashlib.sha256).hexdigest()
        return f"{self._base}{path}?{query}&X-Amz-Signature={sig}"


class _Caseless(dict[str, str]):
    """botocore's lower-cased response headers, read with any case."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


def _after_fork_in_child() -> None:
    global _session_lock
    _session_lock = threading.Lock()  # another thread may have held it at the fork
    _clients.clear()  # each S3Client also rebuilds its botocore clients on first use in the child


os.register_at_fork(after_in_child=_after_fork_in_child)


class S3Source:
    """One S3 object: HEAD through botocore, ranged GETs on a presigned URL through the HTTP client."""

    route = "s3"
    scheme = "s3"

    def __init__(self, client: S3Client, bucket: str, key: str) -> None:
        if not key or key.endswith("/"):
            raise ValueError(f"S3: no object key in s3://{bucket}/{key}")
        self._c = client
        self.bucket = bucket
        self.key = key
        self.url = f"s3://{bucket}/{key}"
        self._http: HTTPSource | None = None
        self._etag: str | None = None
        self._version_id: str | None = None
        self._signed_at = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3Source({self.url!r})"

    def stat(self) -> int:
        head = self._c.call("head_object", f"HEAD {self.url}", Bucket=self.bucket, Key=self.key)
        self._etag = head.get("ETag")
        if self._c.version_aware:
            self._version_id = head.get("VersionId")
        return int(head["ContentLength"])

    @property
    def etag(self) -> str | None:
        """The ETag of the version being read (None until HEAD or a first answer told it)."""
        return self._etag or (self._http.etag if self._http is not None else None)

    def core_target(self) -> tuple[Any, str, str] | None:
        """``(store, base URL, key)`` of this object for the native core; None where the client's settings
        keep the core off (:func:`core_store`)."""
        store = core_store(self._c, self.bucket)
        return None if store is None else (store, f"s3://{self.bucket}/", self.key)

    def _source(self) -> HTTPSource:
        with self._lock:
            now = time.monotonic()
            if self._http is None or now - self._signed_at > _PRESIGN_REFRESH:
                if self._http is not None:
                    self._etag = self._etag or self._http.etag  # the version the first answer pinned
                url = self._c.presign_get(self.bucket, self.key, self._version_id)
                self._http = HTTPSource(url, self._c.http, self._c.get_headers, scrub=self._c.scrub, scheme="s3",
                                        route="s3", register_url=False)
                self._http.pin_etag(self._etag)  # ranges of an object replaced mid-read fail, never mix
                self._signed_at = now
            return self._http

    def _pin_version(self, headers: Any) -> None:
        """version_aware: after the first answer, every range is asked of that version (re-presigned)."""
        vid = headers.get("x-amz-version-id")
        if self._c.version_aware and vid and self._version_id is None:
            with self._lock:
                self._version_id = vid
                self._signed_at = -1e9  # sign again, for this version

    def open_range(self, req: RangeRequest, size: int) -> Body:
        src = self._source()
        try:
            return src.open_range(req, size)
        except OSError as exc:
            raise type(exc)(str(exc).replace(src.url, self.url)) from None  # name s3://, not the presigned URL

    def open_first(self, nbytes: int, offset: int = 0) -> FirstRange:
        src = self._source()
        try:
            first = src.open_first(nbytes, offset)
        except OSError as exc:
            raise type(exc)(str(exc).replace(src.url, self.url)) from None
        self._pin_version(src.last_headers)
        return first


def core_store(client: S3Client, bucket: str) -> Any:
    """The native core's store of ``bucket`` with ``client``'s identity; None where the client's settings
    keep the core off. The options are looked up on every call (a few µs): botocore refreshes temporary
    credentials as they near their end, and the next request is signed with the new ones (a new store)."""
    opts = client.core_options(bucket)
    if opts is None:
        return None
    from gdsstore.engine.remote import core

    s = policy.settings()
    return core.s3_store(opts, connect_timeout=s.remote_connect_timeout, pool_idle=s.remote_wave_concurrency)


class S3Backend(WaveReads, Backend):
    """Objects under ``s3://bucket/prefix``: keys are relative to the prefix."""

    def __init__(self, root: str, storage_options: dict[str, Any] | None = None) -> None:
        self.bucket, prefix = parse_s3_url(root)
        self.prefix = prefix.strip("/")
        self._client = get_s3_client(dict(storage_options or {}))

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def client(self) -> S3Client:
        return self._client

    def _full(self, key: str, where: str) -> str:
        check_remote_key(key, where)
        return f"{self.prefix}/{key}" if self.prefix else key

    def source(self, key: str, where: str) -> S3Source:
        """The range source of ``key`` (one object)."""
        full = self._full(key, where)
        if not full or full.endswith("/"):
            raise FileNotFoundError(f"{where}: {key!r} is not an object key")
        return S3Source(self._client, self.bucket, full)

    def core_paths(self, keys: Sequence[str], where: str) -> tuple[Any, str, list[str | None]] | None:
        """``(store, base URL, object keys)`` of ``keys`` for the native core (:mod:`.core`); a key is None
        where it is refused or names no object (the Python way raises it in its place); None: the Python
        way reads them all."""
        store = core_store(self._client, self.bucket)
        if store is None:
            return None
        paths: list[str | None] = []
        for key in keys:
            try:
                full = self._full(key, where)
            except (TypeError, ValueError):
                full = ""
            paths.append(full if full and not full.endswith("/") else None)
        return store, f"s3://{self.bucket}/", paths

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile
        from gdsstore.engine.remote.writer import RemoteWriteFile, check_remote_mode

        where = "S3Backend.open()"
        full = self._full(key, where)
        if check_remote_mode(mode, where) == "rb":
            return RemoteFile(S3Source(self._client, self.bucket, full))
        return RemoteWriteFile(f"s3://{self.bucket}/{full}", lambda data, dev: s3_upload(self._client, self.bucket, full, data, device=dev))

    def info(self, key: str) -> ObjectInfo:
        full = self._full(key, "S3Backend.info()")
        if full == "" or key.endswith("/"):
            raise FileNotFoundError(f"S3Backend.info(): {key!r} is not an object key")
        head = self._client.call("head_object", f"HEAD s3://{self.bucket}/{full}", Bucket=self.bucket, Key=full)
        mtime = head.get("LastModified")
        return ObjectInfo(key, int(head["ContentLength"]), "file", mtime.timestamp() if mtime else None, head.get("ETag"))

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        full = self._full(key, "S3Backend.put()")
        s3_upload(self._client, self.bucket, full, buf, exclusive=exclusive)

    def put_batch(self, keys: Sequence[str], bufs: Sequence[Any], exclusive: Sequence[bool]) -> BatchResult:
        """:meth:`put` of many keys at once (each atomic on its own): one call of the native core, or
        botocore uploads on the engine pool (:func:`s3_upload_many`)."""
        out = BatchResult(len(keys))
        fulls: list[str] = []
        ok: list[int] = []
        for i, key in enumerate(keys):
            try:
                fulls.append(self._full(key, "S3Backend.put_batch()"))
                ok.append(i)
            except (TypeError, ValueError) as exc:
                out.errors[i] = exc
        errs = s3_upload_many(self._client, self.bucket, fulls, [bufs[i] for i in ok], [exclusive[i] for i in ok])
        for i, err in zip(ok, errs, strict=True):
            if err is not None:
                out.errors[i] = err
        return out

    def delete(self, key: str) -> None:
        full = self._full(key, "S3Backend.delete()")
        self._client.call("delete_object", f"DELETE s3://{self.bucket}/{full}", Bucket=self.bucket, Key=full)

    def delete_prefix(self, prefix: str) -> None:
        full = self._full(prefix, "S3Backend.delete_prefix()")
        if full and not full.endswith("/"):
            full += "/"
        keys = [self._abs(k) for k in self._iter(full, delimiter=None)]
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            self._client.call(
                "delete_objects", f"DELETE s3://{self.bucket}/{full}*", Bucket=self.bucket,
                Delete={"Objects": batch, "Quiet": True},
            )

    def _abs(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _iter(self, full_prefix: str, delimiter: str | None) -> Iterator[str]:
        """Keys (and with ``delimiter``, common prefixes ending in it) under ``full_prefix``, relative to
        the backend's root."""
        for key, _ in self._iter_sized(full_prefix, delimiter):
            yield key

    def _iter_sized(self, full_prefix: str, delimiter: str | None) -> Iterator[tuple[str, int | None]]:
        """``(key, size)`` for objects and ``(prefix/, None)`` for common prefixes, relative to the root."""
        base = f"{self.prefix}/" if self.prefix else ""
        token: str | None = None
        while True:
            params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
            if delimiter:
                params["Delimiter"] = delimiter
            if token:
                params["ContinuationToken"] = token
            page = self._client.call("list_objects_v2", f"LIST s3://{self.bucket}/{full_prefix}", **params)
            for obj in page.get("Contents", []):
                yield obj["Key"][len(base) :], int(obj.get("Size", 0))
            for cp in page.get("CommonPrefixes", []):
                yield cp["Prefix"][len(base) :], None
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def list(self, prefix: str = "") -> Iterator[str]:
        if prefix:
            check_key(prefix, "S3Backend.list()")
        full = self._abs(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        yield from self._iter(full, delimiter=None)

    def list_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Sizes come with the listing: no HEAD per object.
        if prefix:
            check_key(prefix, "S3Backend.list_info()")
        full = self._abs(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        for key, size in self._iter_sized(full, delimiter=None):
            yield ObjectInfo(key, size or 0, "file")

    def list_dir_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # Sizes come with the listing: no HEAD per entry.
        if prefix:
            check_key(prefix, "S3Backend.list_dir_info()")
        rel = prefix.rstrip("/")
        full = self._abs(rel + "/") if rel else (self.prefix + "/" if self.prefix else "")
        seen: set[str] = set()
        for k, size in self._iter_sized(full, delimiter="/"):
            key = k.rstrip("/")
            if key and key != rel and key not in seen:
                seen.add(key)
                yield ObjectInfo(key, size or 0, "file" if size is not None else "directory")

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        if prefix:
            check_key(prefix, "S3Backend.list_dir()")
        rel = prefix.rstrip("/")
        full = self._abs(rel + "/") if rel else (self.prefix + "/" if self.prefix else "")
        cut = len(rel) + 1 if rel else 0
        seen: set[str] = set()
        for k in self._iter(full, delimiter="/"):
            name = k[cut:].rstrip("/")
            if name and name not in seen:
                seen.add(name)
                yield name


def s3_upload(
    client: S3Client, bucket: str, key: str, buf: Any, *, exclusive: bool = False, device: int | None = None
) -> None:
    """Upload ``buf`` (host or device) as ``s3://bucket/key``: one PUT, or a multipart upload above
    ``remote.multipart_threshold`` (parts of ``remote.multipart_chunksize``), through the native core or
    botocore (:func:`gdsstore.policy.decide_write_transport`; the trace row says which and why).

    ``device``: the CUDA device the bytes came from when ``buf`` is already a host copy (for the trace).
    """
    from gdsstore.engine.remote.writer import host_bytes

    b = as_io_buffer(buf, writable=False, where="S3.put()")
    err = s3_upload_many(client, bucket, [key], [host_bytes(b)], [exclusive],
                         device=b.device if device is None else device)[0]
    if err is not None:
        raise err


def s3_upload_many(
    client: S3Client,
    bucket: str,
    keys: Sequence[str],
    bufs: Sequence[Any],
    exclusive: Sequence[bool],
    *,
    device: int | None = None,
) -> list[BaseException | None]:
    """Upload ``bufs[i]`` (host or device) as ``s3://bucket/keys[i]``, each atomic on its own; each item's
    error or None. Through the native core: one call per mode (``exclusive`` or not), every PUT in flight
    at once with the GIL released; through botocore: one upload per object on the engine pool."""
    from gdsstore.engine.remote.writer import host_bytes

    s = policy.settings()
    datas = [host_bytes(as_io_buffer(x, writable=False, where="S3.put()")) for x in bufs]
    errors: list[BaseException | None] = [None] * len(keys)
    groups: dict[tuple[str, bool], list[int]] = {}
    decisions: dict[tuple[str, bool], policy.Decision] = {}
    for i, data in enumerate(datas):
        multipart = len(data) > s.remote_multipart_threshold
        d = _write_decision(client, bucket, multipart=multipart, exclusive=bool(exclusive[i]), s=s)
        key = (d.route, bool(exclusive[i]))
        groups.setdefault(key, []).append(i)
        decisions[key] = d
    for (route, create), idx in groups.items():
        t0 = time.perf_counter()
        if route == "core":
            _core_uploads(client, bucket, keys, datas, idx, create, errors, s)
        else:
            _botocore_uploads(client, bucket, keys, datas, idx, exclusive, errors, s)
        _trace_writes(decisions[(route, create)], [len(datas[i]) for i in idx], time.perf_counter() - t0,
                      f"s3://{bucket}/{keys[idx[0]]}", device, s)
    return errors


def _write_decision(client: S3Client, bucket: str, *, multipart: bool, exclusive: bool,
                    s: policy.Settings) -> policy.Decision:
    from gdsstore.engine.remote import core

    missing = core.unavailable_reason()
    takes = client.core_writes
    if takes and s.remote_core != "off" and missing is None and not (exclusive and multipart):
        takes = core_store(client, bucket) is not None  # None: no credentials at hand (botocore says so)
    return policy.decide_write_transport(takes_core=takes, core_missing=missing,
                                         create_multipart=exclusive and multipart, s=s)


def _core_uploads(client: S3Client, bucket: str, keys: Sequence[str], datas: Sequence[Any], idx: list[int],
                  create: bool, errors: list[BaseException | None], s: policy.Settings) -> None:
    """One call of the native core for the items ``idx`` (one buffer: the only one, or all joined)."""
    from gdsstore.engine.remote import core

    if len(idx) == 1:
        buffer: Any = datas[idx[0]]
        spans = [(0, len(buffer))]
    else:
        buffer = b"".join(datas[i] for i in idx)
        ends = list(itertools.accumulate(len(datas[i]) for i in idx))
        spans = [(e - len(datas[i]), len(datas[i])) for i, e in zip(idx, ends, strict=True)]
    results = core.write_objects(
        core_store(client, bucket), [f"PUT s3://{bucket}/{keys[i]}" for i in idx], [keys[i] for i in idx],
        buffer, spans, create=create, threshold=s.remote_multipart_threshold,
        part_size=s.remote_multipart_chunksize, retry=RetryPolicy.from_settings(s),
        concurrency=s.remote_wave_concurrency, timeout=s.remote_timeout or 1e9,
    )
    for i, res in zip(idx, results, strict=True):
        errors[i] = res.error


def _botocore_uploads(client: S3Client, bucket: str, keys: Sequence[str], datas: Sequence[Any], idx: list[int],
                      exclusive: Sequence[bool], errors: list[BaseException | None], s: policy.Settings) -> None:
    """The items ``idx`` through botocore, one upload each, ``remote.concurrency`` at once."""
    from gdsstore.engine.pool import map_all

    def one(i: int) -> None:
        try:
            _botocore_upload(client, bucket, keys[i], datas[i], bool(exclusive[i]), s)
        except Exception as exc:
            errors[i] = exc

    if len(idx) == 1:
        one(idx[0])
    else:
        map_all(one, idx, s.remote_concurrency)


def _botocore_upload(client: S3Client, bucket: str, key: str, data: Any, exclusive: bool,
                     s: policy.Settings) -> None:
    what = f"PUT s3://{bucket}/{key}"
    cond: dict[str, Any] = {"IfNoneMatch": "*"} if exclusive else {}
    if len(data) <= s.remote_multipart_threshold:
        client.call("put_object", what, Bucket=bucket, Key=key, Body=bytes(data), **client.upload_kwargs, **cond)
    else:
        _multipart(client, bucket, key, memoryview(data), s, what, cond)


def _trace_writes(d: policy.Decision, sizes: list[int], seconds: float, url: str, device: int | None,
                  s: policy.Settings) -> None:
    """One row per route of a batch of uploads (one per object when they differ in shape)."""
    if not _trace.active():
        return
    limit = s.remote_multipart_threshold
    for multipart in (False, True):
        mine = [n for n in sizes if (n > limit) == multipart]
        if mine:
            reason = f"{_write_reason(multipart, device is not None, s)}; {d.reason}"
            _trace.record("write", "s3", reason, sum(mine), seconds * len(mine) / len(sizes),
                          url if len(sizes) == 1 else url.rsplit("/", 1)[0] + "/", device, requests=len(mine))


def _write_reason(multipart: bool, device: bool, s: policy.Settings) -> str:
    """The shape of an upload and why, never the object's size (that is the trace's byte column; a size
    here would make one trace row per distinct size)."""
    src = "device buffer copied to host, " if device else ""
    limit = policy.fmt_bytes(s.remote_multipart_threshold)
    if multipart:
        return f"{src}multipart upload (> remote.multipart_threshold {limit}, " \
               f"parts of {policy.fmt_bytes(s.remote_multipart_chunksize)})"
    return f"{src}single PUT (<= remote.multipart_threshold {limit})"


def _multipart(
    client: S3Client, bucket: str, key: str, data: memoryview, s: policy.Settings, what: str, cond: dict[str, Any]
) -> None:
    from gdsstore.engine.pool import run_pieces

    mpu = client.call("create_multipart_upload", what, Bucket=bucket, Key=key, **client.upload_kwargs)
    upload_id = mpu["UploadId"]
    size = len(data)
    chunk = s.remote_multipart_chunksize
    starts = list(range(0, size, chunk))
    etags: list[str] = [""] * len(starts)

    def part(i: int, a: int) -> Any:
        def run() -> int:
            body = bytes(data[a : a + chunk])
            r = client.call("upload_part", f"{what} part {i + 1}", Bucket=bucket, Key=key,
                            UploadId=upload_id, PartNumber=i + 1, Body=body)
            etags[i] = r["ETag"]
            return len(body)

        return run

    try:
        run_pieces([part(i, a) for i, a in enumerate(starts)], [min(chunk, size - a) for a in starts],
                   s.remote_concurrency).result()
        parts = [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]
        client.call("complete_multipart_upload", what, Bucket=bucket, Key=key, UploadId=upload_id,
                    MultipartUpload={"Parts": parts}, **cond)
    except BaseException:
        try:
            client.call("abort_multipart_upload", what, Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception:
            pass  # the original error matters more; lifecycle rules clean stale uploads
        raise
