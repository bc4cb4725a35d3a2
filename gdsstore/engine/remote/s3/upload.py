"""S3 uploads through the native core: one PUT, or a multipart upload above ``remote.multipart_threshold``
(aborted where it fails); many objects in one call, the GIL released (docs/remote.md)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.engine.remote.s3.client import S3Client
from gdsstore.engine.remote.writer import host_bytes

__all__ = ["s3_upload", "s3_upload_many"]

#: S3's largest single PUT: a create-only upload (``If-None-Match: *``) above ``remote.multipart_threshold`` is
#: one PUT up to this (object_store completes multipart uploads unconditionally).
_MAX_PUT = 5 << 30


def s3_upload(
    client: S3Client, bucket: str, key: str, buf: Any, *, exclusive: bool = False, device: int | None = None
) -> None:
    """Upload ``buf`` (host or device) as ``s3://bucket/key`` (:func:`s3_upload_many` of one). ``device``: the
    CUDA device the bytes came from when ``buf`` is already a host copy (for the trace)."""
    b = as_io_buffer(buf, writable=False, where="S3.put()")
    err = s3_upload_many(client, bucket, [key], [host_bytes(b)], [exclusive],
                         device=b.device if device is None else device)[0]
    if err is not None:
        raise err


def s3_upload_many(client: S3Client, bucket: str, keys: Sequence[str], bufs: Sequence[Any],
                   exclusive: Sequence[bool], *, device: int | None = None) -> list[BaseException | None]:
    """Upload ``bufs[i]`` (host or device) as ``s3://bucket/keys[i]``, each atomic on its own: one PUT, or
    above ``remote.multipart_threshold`` a multipart upload in parts of ``remote.multipart_chunksize`` (a
    create-only one, ``exclusive``: one PUT with ``If-None-Match``, up to 5 GiB). One call of the native core
    per mode (one buffer: the only one, or all joined); each item's error or None."""
    s = policy.settings()
    datas = [host_bytes(as_io_buffer(x, writable=False, where="S3.put()")) for x in bufs]
    errors: list[BaseException | None] = [None] * len(keys)
    store = client.core_store(bucket) if keys else None
    for create in (False, True):
        t0 = time.perf_counter()
        idx = [i for i in range(len(keys)) if bool(exclusive[i]) == create]
        for i in [i for i in idx if create and len(datas[i]) > _MAX_PUT]:
            errors[i] = ValueError(f"PUT s3://{bucket}/{keys[i]}: a create-only upload is one PUT, at most 5 GiB "
                                   f"({len(datas[i])} bytes given); write it without exclusive=")
            idx.remove(i)
        if not idx:
            continue
        buffer: Any = datas[idx[0]] if len(idx) == 1 else b"".join(datas[i] for i in idx)
        starts = itertools.accumulate((len(datas[i]) for i in idx), initial=0)
        failed = core.write_objects(
            store, [f"PUT s3://{bucket}/{keys[i]}" for i in idx], [keys[i] for i in idx], buffer,
            [(a, len(datas[i])) for a, i in zip(starts, idx)], create=create,
            threshold=_MAX_PUT if create else s.remote_multipart_threshold, part_size=s.remote_multipart_chunksize,
            retry=RetryPolicy.from_settings(s), concurrency=s.remote_wave_concurrency, timeout=core.request_timeout(s),
        )
        for i, err in zip(idx, failed, strict=True):
            errors[i] = err
        _trace_writes([len(datas[i]) for i in idx], time.perf_counter() - t0, f"s3://{bucket}/{keys[idx[0]]}",
                      device, s, create)
    return errors


def _trace_writes(sizes: list[int], seconds: float, url: str, device: int | None, s: policy.Settings,
                  create: bool) -> None:
    """One row per shape of a batch of uploads (one PUT, multipart; create-only: one PUT at any size). The
    reason never holds an object's size (that is the trace's byte column: one row per size otherwise)."""
    if not _trace.active():
        return
    limit = policy.fmt_bytes(s.remote_multipart_threshold)
    sender = f"native core, GIL released (remote.wave_concurrency {s.remote_wave_concurrency})"
    copied = "device buffer copied to host, " if device is not None else ""
    for large in (False, True):
        mine = [n for n in sizes if (n > s.remote_multipart_threshold) == large]
        if not mine:
            continue
        if create and large:
            how = "single PUT (create-only: If-None-Match, up to 5 GiB)"
        elif large:
            parts = policy.fmt_bytes(s.remote_multipart_chunksize)
            how = f"multipart upload (> remote.multipart_threshold {limit}, parts of {parts})"
        else:
            how = f"single PUT (<= remote.multipart_threshold {limit})"
        _trace.record("write", "s3", f"{copied}{how}; {sender}", sum(mine), seconds * len(mine) / len(sizes),
                      url if len(sizes) == 1 else url.rsplit("/", 1)[0] + "/", device, requests=len(mine))
