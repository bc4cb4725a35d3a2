"""S3's configuration, resolved once by botocore (endpoint, addressing style, region, credentials) and mapped to
the native core's store of a bucket (:meth:`S3Client.core_options`), which sends every request. How, and the
storage options: docs/remote.md ("S3 configuration: resolved once, by botocore")."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gdsstore import policy
from gdsstore._optional import require
from gdsstore.engine.remote import core
from gdsstore.engine.remote.redact import remember
from gdsstore.errors import RemoteIOError

__all__ = ["S3Client", "S3Target", "get_s3_client", "parse_s3_url"]

# fsspec/s3fs options with no meaning here (no listings cache, no instance cache, sync only).
_IGNORED_OPTIONS = frozenset({
    "skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths", "default_block_size",
    "default_fill_cache", "default_cache_type", "cache_regions", "loop", "asynchronous",
})
_OPTION_NAMES = frozenset({
    "key", "secret", "token", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
    "profile", "anon", "endpoint_url", "region_name", "addressing_style", "verify", "client_kwargs",
    "config_kwargs", "use_ssl", "requester_pays", "s3_additional_kwargs", "version_aware", "session",
}) | _IGNORED_OPTIONS
#: s3_additional_kwargs the core applies to uploads (object_store's server-side encryption options).
_ENCRYPTION = {"ServerSideEncryption": "aws_server_side_encryption", "SSEKMSKeyId": "aws_sse_kms_key_id",
               "BucketKeyEnabled": "aws_sse_bucket_key_enabled"}
# The key botocore presigns to show where a bucket's requests go (nothing is sent for it).
_PROBE_KEY = "gdsstore-probe/x"
_UNRESERVED = "-_.~"


def parse_s3_url(url: str) -> tuple[str, str]:
    """``"s3://bucket/a/b"`` → ``("bucket", "a/b")``; ``ValueError`` for another URL or no bucket."""
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
    """A digest of what botocore reads besides the options (every ``AWS_*`` variable; the path, size and mtime
    of the shared files): in the key of the cached sessions and clients, so a change is seen by the next one."""
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
    """The process-wide :class:`S3Client` for these options, the remote timeouts and the AWS environment; one
    made in another environment is replaced, not kept beside (objects opened with it keep it)."""
    s = policy.settings()
    key = json.dumps([options, s.remote_connect_timeout, s.remote_timeout], sort_keys=True, default=repr)
    env = _aws_environment()
    held = _clients.get(key)
    if held is None or held[0] != env:
        held = _clients[key] = (env, S3Client(options))
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
    other = sorted(set(extra or {}) - set(_ENCRYPTION))
    if other:
        raise TypeError(f"S3: s3_additional_kwargs {other} are not supported (uploads go through gdsstore's native "
                        f"core, which applies {sorted(_ENCRYPTION)}); set the others with a bucket policy or "
                        "default, or drop them")
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
    """A botocore S3 client built from storage options (it resolves, the core sends), and the native core's
    stores of its buckets."""

    def __init__(self, options: dict[str, Any]) -> None:
        require("botocore", purpose="S3 (s3:// URLs)")  # a missing botocore names the extra to install
        from botocore import UNSIGNED
        from botocore.config import Config
        from botocore.credentials import Credentials

        s = policy.settings()
        o = _check_options(dict(options))
        client_kwargs = dict(o.pop("client_kwargs", None) or {})
        config_kwargs = dict(o.pop("config_kwargs", None) or {})
        self.requester_pays = bool(o.pop("requester_pays", False))
        self.version_aware = bool(o.pop("version_aware", False))
        encryption = o.pop("s3_additional_kwargs", None) or {}
        self._encryption = {_ENCRYPTION[k]: str(v).lower() if isinstance(v, bool) else str(v)
                            for k, v in encryption.items()}
        if "use_ssl" in o:
            client_kwargs.setdefault("use_ssl", bool(o.pop("use_ssl")))
        self._session = _session_from(o)
        key = o.pop("key", None) or o.pop("aws_access_key_id", None)
        secret = o.pop("secret", None) or o.pop("aws_secret_access_key", None)
        token = o.pop("token", None) or o.pop("aws_session_token", None)
        remember(key, secret, token)
        self._anon = bool(o.pop("anon", False))
        self._static = Credentials(key, secret, token) if key and secret else None
        s3_cfg = dict(config_kwargs.pop("s3", None) or {})
        if o.get("addressing_style"):
            s3_cfg["addressing_style"] = o.pop("addressing_style")
        # HeadBucket for the region, botocore's one request, is asked once: a failure leaves the client's region.
        cfg: dict[str, Any] = {"signature_version": UNSIGNED if self._anon else "s3v4", "s3": s3_cfg,
                               "retries": {"total_max_attempts": 1}, "connect_timeout": s.remote_connect_timeout,
                               "read_timeout": s.remote_timeout, **config_kwargs}
        self._verify: bool | str = o.pop("verify", True)
        region = o.pop("region_name", None) or client_kwargs.pop("region_name", None)
        endpoint = o.pop("endpoint_url", None) or client_kwargs.pop("endpoint_url", None)
        self.region_given = region is not None
        self._create: dict[str, Any] = {
            "endpoint_url": endpoint, "aws_access_key_id": key, "aws_secret_access_key": secret,
            "aws_session_token": token, "verify": self._verify, "config": Config(**cfg), **client_kwargs,
        }
        # Until a bucket's region is known: the given one, else botocore's (AWS_DEFAULT_REGION, the profile's,
        # or us-east-1); HeadBucket answers from there with the bucket's region.
        self.client = self._make(region)
        self._targets: dict[str, S3Target] = {}
        self._fork_pid = os.getpid()

    def _make(self, region: str | None) -> Any:
        with _session_lock:  # botocore sessions are not thread-safe; the clients they make are
            return self._session.create_client("s3", region_name=region, **self._create)

    def _client_for(self, bucket: str) -> Any:
        """The botocore client that signs for ``bucket``'s region: ``region_name``, else the bucket's own
        (``HeadBucket``'s ``x-amz-bucket-region``)."""
        if self._fork_pid != os.getpid():  # botocore clients hold urllib3 pools: a forked child makes its own
            self._fork_pid = os.getpid()
            self.client = self._make(self.client.meta.region_name)
        if self.region_given or not bucket:
            return self.client
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            meta = self.client.head_bucket(Bucket=bucket).get("ResponseMetadata", {})
        except ClientError as exc:  # AWS answers 301/403 from another region, with the header
            meta = exc.response.get("ResponseMetadata", {})
        except BotoCoreError:
            return self.client  # unreachable now: the requests themselves will say why
        region = (meta.get("HTTPHeaders") or {}).get("x-amz-bucket-region") or self.client.meta.region_name
        return self.client if region == self.client.meta.region_name else self._make(region)

    def target(self, bucket: str) -> S3Target:
        """Where botocore sends the requests of ``bucket`` (its region: the bucket's), read once off the URL
        botocore presigns for a probe key; ``RemoteIOError`` where the core cannot send them."""
        if bucket not in self._targets:
            params: dict[str, Any] = {"Bucket": bucket, "Key": _PROBE_KEY}
            if self.requester_pays:
                params["RequestPayer"] = "requester"
            c = self._client_for(bucket)
            target = S3Target.from_probe(str(c.generate_presigned_url("get_object", Params=params, ExpiresIn=60)),
                                         bucket, c.meta.region_name)
            if target is None:
                raise RemoteIOError(
                    f"S3: botocore signs the requests of bucket {bucket!r} for another service than s3 (S3 Express, "
                    "Outposts?), which gdsstore's native core cannot send; use an s3 endpoint")
            self._targets[bucket] = target
        return self._targets[bucket]

    def core_options(self, bucket: str) -> dict[str, str]:
        """object_store's options for ``bucket``: where botocore sends its requests (:meth:`target`), the
        credentials botocore holds now (refreshed as they near their end), requester pays and server-side
        encryption. ``PermissionError``: no credentials at hand (and not ``anon``)."""
        creds = None if self._anon else self._static or self._session.get_credentials()
        if creds is None and not self._anon:
            raise PermissionError(f"S3 s3://{bucket}: no AWS credentials found (pass key=/secret=, a profile, "
                                  "or anon=True)")
        o = {**self.target(bucket).core_options(bucket), **self._encryption}
        if self.requester_pays:
            o["aws_request_payer"] = "true"
        frozen = creds.get_frozen_credentials() if creds is not None else None
        if frozen is None or not frozen.access_key:
            o["aws_skip_signature"] = "true"
            return o
        o["aws_access_key_id"], o["aws_secret_access_key"] = frozen.access_key, frozen.secret_key
        if frozen.token:
            o["aws_session_token"] = frozen.token
        return o

    def core_store(self, bucket: str) -> Any:
        """The native core's store of ``bucket`` with the credentials of this moment (a new store for new ones)."""
        s = policy.settings()
        return core.s3_store(self.core_options(bucket), connect_timeout=s.remote_connect_timeout,
                             pool_idle=s.remote_wave_concurrency, verify=self._verify)

    def core_root(self, bucket: str) -> core.CoreRoot:
        """The native core's root of ``bucket`` (paths are object keys)."""
        return core.CoreRoot(lambda: self.core_store(bucket), f"s3://{bucket}/")


@dataclass(frozen=True, slots=True)
class S3Target:
    """Where botocore sends the requests of one bucket, read off the URL it presigned for a probe key (its whole
    resolution: endpoint, addressing style, region, dual-stack, FIPS, ``use_ssl``): the presigned ``url``; the
    ``endpoint`` (scheme, host and path prefix; the bucket's own host where virtual-hosted); ``path_style``
    (the bucket is the first segment after it); the ``region`` signed for (unsigned: the client's)."""

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
        return cls(url, f"{parts.scheme}://{parts.netloc}{prefix.rstrip('/')}", path_style, region)

    def core_options(self, bucket: str) -> dict[str, str]:
        """object_store's location options: key ``k`` goes to ``{endpoint}/{bucket}/{k}`` (path style) or
        ``{endpoint}/{k}`` (virtual-hosted), the URL botocore builds."""
        return {
            "aws_bucket": bucket, "aws_region": self.region, "aws_endpoint": self.endpoint,
            "aws_virtual_hosted_style_request": "false" if self.path_style else "true",
        }


def _after_fork_in_child() -> None:
    global _session_lock
    _session_lock = threading.Lock()  # another thread may have held it at the fork
    _clients.clear()  # each S3Client also rebuilds its botocore clients on first use in the child


os.register_at_fork(after_in_child=_after_fork_in_child)
