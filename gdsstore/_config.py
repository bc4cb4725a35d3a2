"""The ``gdsstore`` settings: one donfig ``Config``, one table of keys.

Every key has one name, one environment variable (``GDSSTORE_<KEY>``; nested keys use a double
underscore, ``GDSSTORE_REMOTE__MAX_ATTEMPTS``), one default and one row in ``docs/settings.md``.
Values are validated where they are used, by :mod:`gdsstore.policy`, so a bad value set through
any channel (code, env, YAML) fails with a message naming the key.
"""

from __future__ import annotations

import os

from donfig import Config

__all__ = ["DEFAULTS", "config"]


def _default_threads() -> int:
    # Measured: one thread leaves most of the page cache / NVMe bandwidth unused (kvikio's default of 1
    # gives 6.3 GB/s where 16 give 45); more than 16 adds contention without throughput.
    return max(1, min(16, os.cpu_count() or 1))


DEFAULTS: dict[str, object] = {
    # "auto": cuFile when its whole probe passes for the file, POSIX otherwise (with the reason);
    # "on": never cuFile; "off": cuFile required for device buffers (error if unusable).
    "compat_mode": "auto",
    # Under "auto", when a cuFile handle registers but nvidia-fs is not loaded (cuFile would run its
    # compat mode: its own pread and copy loop), "cufile" keeps the cuFile route and "posix" takes
    # gdsstore's POSIX route instead (measured on the H200, 1 GiB warm: 45.7-49.8 GB/s against
    # 42.3-45.3 for cuFile's compat path in the same three runs).
    "cufile_without_nvfs": "cufile",
    # Device reads/writes smaller than this go the POSIX route: cuFile's per-call overhead dominates.
    "gds_threshold": 1 << 20,
    # Requests are split into pieces of this size, run in parallel on the engine's thread pool.
    # Measured on the GPU machine (1 GiB warm, 16 threads): 8 MiB beats 4 MiB by ~10% on both routes.
    "task_size": 8 << 20,
    "num_threads": _default_threads(),
    # Size of one pinned, page-aligned bounce buffer (one per in-flight piece on the POSIX device route).
    "bounce_buffer_size": 8 << 20,
    "direct_io_read": False,
    "direct_io_write": False,
    # Local atomic writes (GDSStore.set) fsync the temp file before the rename.
    "fsync": False,
    # Seconds allowed for the out-of-process cuFile driver probe (driver_open can hang; see DESIGN.md).
    "cufile_probe_timeout": 30.0,
    # Bound on cached registered cuFile handles (each holds an open file descriptor).
    "cufile_handle_cache_size": 128,
    # cuFile's own counters (the nvfs/posix split in the trace) need stats level >= 3. When cufile.json
    # leaves them off, gdsstore opens the driver with a copy of it that sets only profile.cufile_stats.
    # 0 leaves cufile.json untouched.
    "cufile_stats_level": 3,
    "remote": {
        "max_attempts": 5,
        "retry_status": [408, 429, 500, 502, 503, 504],
        "timeout": 60.0,
        "connect_timeout": 10.0,
        "concurrency": _default_threads(),
        # Largest range one request asks for. A read is split into remote.concurrency ranges of
        # size/concurrency, kept between task_size and this: every request costs Python (GIL) work, so
        # fewer, larger ranges scale better across threads (measured, 1 GiB over loopback into cupy,
        # 16 threads: 8 MiB ranges 9.6 GB/s, 32 MiB ranges 20.3 GB/s).
        "max_range_size": 32 << 20,
        # Ranged GETs over plain http:// use gdsstore's minimal keep-alive client (less Python per
        # request under the GIL than urllib3 + http.client); False: urllib3 for every request.
        "fast_http": True,
        "backoff_base": 0.1,
        "backoff_max": 5.0,
        # S3 writes switch from one PUT to a multipart upload above this size.
        "multipart_threshold": 64 << 20,
        "multipart_chunksize": 16 << 20,
    },
}

config = Config("gdsstore", defaults=[DEFAULTS])
