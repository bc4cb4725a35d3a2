"""The policy: every setting validated with a message naming it; every route with its reason."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import gdsstore
from gdsstore import policy
from gdsstore._config import DEFAULTS
from gdsstore.policy import CuFileProbeResult, CuFileRequiredError, decide_local

OK = CuFileProbeResult(True, "cuFile handle registered")
FAIL = CuFileProbeResult(False, "handle register failed: HANDLE_NOT_REGISTERED")


def test_defaults_are_valid_and_documented_values() -> None:
    s = policy.settings()
    assert s.compat_mode == "auto"
    cpus = len(os.sched_getaffinity(0))
    assert s.num_threads == max(1, min(16, cpus))  # the CPUs this process may run on
    assert s.num_threads > 1 or cpus == 1  # not kvikio's 1
    assert s.task_size == 8 << 20
    assert s.remote_max_attempts == 5
    assert 503 in s.remote_retry_status


@pytest.mark.parametrize(
    ("key", "bad", "match"),
    [
        ("compat_mode", "maybe", "compat_mode"),
        ("cufile_without_nvfs", "sometimes", "cufile_without_nvfs"),
        ("cufile_without_nvfs", 1, "cufile_without_nvfs"),
        ("gds_threshold", -1, "gds_threshold"),
        ("task_size", 0, "task_size"),
        ("task_size", -5, "task_size"),
        ("task_size", "big", "task_size"),
        ("num_threads", 0, "num_threads"),
        ("bounce_buffer_size", 100, "bounce_buffer_size"),
        ("pinned_memory_limit", 1000, "pinned_memory_limit"),
        ("gpu.memory_budget", 1 << 20, "gpu.memory_budget"),
        ("gpu.memory_budget", "lots", "gpu.memory_budget"),
        ("direct_io_read", "perhaps", "direct_io_read"),
        ("direct_io_write", 3, "direct_io_write"),
        ("fsync", [], "fsync"),
        ("cufile_probe_timeout", 0, "cufile_probe_timeout"),
        ("cufile_handle_cache_size", 0, "cufile_handle_cache_size"),
        ("cufile_stats_level", 4, "cufile_stats_level"),
        ("remote.max_attempts", 0, "remote.max_attempts"),
        ("remote.retry_status", [999], "remote.retry_status"),
        ("remote.retry_status", 5, "remote.retry_status"),
        ("remote.timeout", -1, "remote.timeout"),
        ("remote.connect_timeout", 0, "remote.connect_timeout"),
        ("remote.concurrency", 0, "remote.concurrency"),
        ("remote.max_range_size", 0, "remote.max_range_size"),
        ("remote.backoff_base", -1, "remote.backoff_base"),
        ("remote.backoff_max", "x", "remote.backoff_max"),
        ("remote.multipart_threshold", 1, "remote.multipart_threshold"),
        ("remote.multipart_chunksize", 1, "remote.multipart_chunksize"),
    ],
)
def test_every_setting_is_validated(key: str, bad: object, match: str) -> None:
    with pytest.raises(ValueError, match=match.replace(".", r"\.")), gdsstore.config.set({key: bad}):
        policy.settings()


def test_every_default_key_has_a_validation_case() -> None:
    def flat(d: dict[str, object], prefix: str = "") -> set[str]:
        out: set[str] = set()
        for k, v in d.items():
            out |= flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k}
        return out

    fields = {
        f.replace("remote_", "remote.", 1).replace("gpu_", "gpu.", 1) for f in policy.Settings.__dataclass_fields__
    }
    assert flat(DEFAULTS) == fields


@pytest.mark.parametrize(
    ("env", "value", "key", "expected"),
    [
        ("GDSSTORE_COMPAT_MODE", "on", "compat_mode", "on"),
        ("GDSSTORE_CUFILE_WITHOUT_NVFS", "POSIX", "cufile_without_nvfs", "posix"),
        ("GDSSTORE_TASK_SIZE", "1048576", "task_size", 1048576),
        ("GDSSTORE_NUM_THREADS", "3", "num_threads", 3),
        ("GDSSTORE_DIRECT_IO_READ", "true", "direct_io_read", True),
        ("GDSSTORE_REMOTE__MAX_ATTEMPTS", "7", "remote_max_attempts", 7),
        ("GDSSTORE_REMOTE__RETRY_STATUS", "[500, 503]", "remote_retry_status", (500, 503)),
        ("GDSSTORE_REMOTE__CONNECT_TIMEOUT", "2.5", "remote_connect_timeout", 2.5),
    ],
)
def test_env_variables_are_parsed(env: str, value: str, key: str, expected: object) -> None:
    code = f"from gdsstore import policy; print(repr(policy.settings().{key}))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, env: value}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr(expected)


def test_bad_env_value_fails_naming_the_key() -> None:
    code = "from gdsstore import policy; policy.settings()"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "GDSSTORE_COMPAT_MODE": "maybe"}, capture_output=True, text=True
    )
    assert out.returncode != 0
    assert "compat_mode" in out.stderr and "maybe" in out.stderr


def test_host_buffer_always_posix_with_reason() -> None:
    for mode in ("auto", "on", "off"):
        with gdsstore.config.set({"compat_mode": mode}):
            d = decide_local(device=False, nbytes=1 << 30, cufile=OK)
        assert (d.route, d.reason) == ("posix", "host buffer")


def test_compat_on_never_cufile() -> None:
    with gdsstore.config.set({"compat_mode": "on"}):
        d = decide_local(device=True, nbytes=1 << 30, cufile=OK)
    assert (d.route, d.reason) == ("posix", "compat_mode=on")


def test_compat_off_requires_cufile() -> None:
    with gdsstore.config.set({"compat_mode": "off"}):
        with pytest.raises(CuFileRequiredError, match="HANDLE_NOT_REGISTERED"):
            decide_local(device=True, nbytes=1 << 30, cufile=FAIL)
        d = decide_local(device=True, nbytes=16, cufile=OK)
    assert d.route == "cufile" and "compat_mode=off" in d.reason


def test_auto_falls_back_with_probe_reason() -> None:
    d = decide_local(device=True, nbytes=1 << 30, cufile=FAIL)
    assert (d.route, d.reason) == ("posix", FAIL.reason)
    d = decide_local(device=True, nbytes=1 << 30, cufile=None)
    assert d.route == "posix" and "not probed" in d.reason


def test_auto_threshold() -> None:
    with gdsstore.config.set({"gds_threshold": 16 << 10}):
        small = decide_local(device=True, nbytes=8 << 10, cufile=OK)
        big = decide_local(device=True, nbytes=16 << 10, cufile=OK)
    assert (small.route, small.reason) == ("posix", "below gds_threshold 16 KiB")
    assert big.route == "cufile"


def test_cufile_without_nvidia_fs() -> None:
    compat = CuFileProbeResult(True, "cuFile handle registered (no nvidia-fs)", nvfs=False)
    gds = CuFileProbeResult(True, "cuFile handle registered (nvidia-fs loaded)", nvfs=True)
    # Default: cuFile whenever its handle registers, compat mode or not.
    assert policy.settings().cufile_without_nvfs == "cufile"
    assert decide_local(device=True, nbytes=1 << 30, cufile=compat) == policy.Decision("cufile", compat.reason)
    with gdsstore.config.set({"cufile_without_nvfs": "posix"}):
        d = decide_local(device=True, nbytes=1 << 30, cufile=compat)
        assert d.route == "posix" and "without nvidia-fs" in d.reason and "cufile_without_nvfs=posix" in d.reason
        # nvidia-fs loaded, or not known: cuFile stays
        assert decide_local(device=True, nbytes=1 << 30, cufile=gds).route == "cufile"
        assert decide_local(device=True, nbytes=1 << 30, cufile=OK).route == "cufile"
        # compat_mode="off" still means cuFile, and below gds_threshold the threshold's reason wins
        with gdsstore.config.set({"compat_mode": "off"}):
            assert decide_local(device=True, nbytes=1 << 30, cufile=compat).route == "cufile"
        assert "gds_threshold" in decide_local(device=True, nbytes=4096, cufile=compat).reason


def test_remote_range_size_spreads_over_workers_within_bounds() -> None:
    with gdsstore.config.set({"task_size": 8 << 20, "remote.concurrency": 16, "remote.max_range_size": 32 << 20}):
        s = policy.settings()
        assert policy.remote_range_size(1 << 30, s) == 32 << 20  # capped: 32 requests, 2 per worker
        assert policy.remote_range_size(256 << 20, s) == 16 << 20  # one range per worker
        assert policy.remote_range_size(64 << 20, s) == 8 << 20  # never below task_size
        assert policy.remote_range_size(1, s) == 8 << 20
        reason = policy.decide_remote(scheme="http", device=True, nbytes=256 << 20, s=s).reason
        assert "ranges of 8 MiB-32 MiB, concurrency 16" in reason  # the bounds, not this read's size
        assert policy.decide_remote(scheme="http", device=True, nbytes=1 << 30, s=s).reason == reason


def test_fmt_bytes() -> None:
    assert policy.fmt_bytes(0) == "0 B"
    assert policy.fmt_bytes(8192) == "8 KiB"
    assert policy.fmt_bytes(1536) == "1.5 KiB"
    assert policy.fmt_bytes(1 << 30) == "1 GiB"


def test_a_device_operation_below_gds_threshold_needs_no_cufile_probe() -> None:
    s = policy.settings()
    assert not policy.needs_cufile_probe(device=True, s=s, nbytes=s.gds_threshold - 1)
    assert policy.needs_cufile_probe(device=True, s=s, nbytes=s.gds_threshold)
    assert policy.needs_cufile_probe(device=True, s=s)  # size unknown: probe
    small = policy.decide_local(device=True, nbytes=649, cufile=None, s=s)
    assert small == policy.Decision("posix", "below gds_threshold 1 MiB")
    with gdsstore.config.set({"compat_mode": "off"}):  # cuFile required: even a small write must probe
        assert policy.needs_cufile_probe(device=True, s=policy.settings(), nbytes=1)


def test_zarr_read_and_write_ladders_side_by_side() -> None:
    """The zarr pipeline's read and write routes are decided side by side from one set of facts: the same
    sharding and codec rules, and what only a write needs (the store's engine backend, one store, writable,
    no 0-d array) or only a read (zarr v2 filters) named in its own ladder."""
    from dataclasses import replace

    from gdsstore.policy import Decision, ZarrBatchFacts, decide_zarr_read, decide_zarr_write

    base = ZarrBatchFacts(sync=True, sharding="none")
    assert decide_zarr_read(base) == Decision("chunks", "whole chunk objects, batched")
    assert decide_zarr_write(base) == Decision("chunks", "chunks encoded as one batch, published in parallel")
    sharded = replace(base, sharding="sharded")
    assert decide_zarr_read(sharded) == Decision("shards", "sharded: batched index reads + coalesced inner-chunk ranges")
    assert decide_zarr_write(sharded).reason == "sharded: inner chunks encoded as one batch, each shard written once"
    for sharding, reason in (("outside", "codecs outside the sharding codec"), ("nested", "nested sharding")):
        for decide in (decide_zarr_read, decide_zarr_write):
            assert decide(replace(base, sharding=sharding)) == Decision("delegate", reason)
    no_sync = replace(sharded, sync=False)  # checked before the sharding
    assert decide_zarr_read(no_sync).reason == "a codec has no synchronous decode"
    assert decide_zarr_write(no_sync).reason == "a codec has no synchronous encode"
    elsewhere = replace(no_sync, not_store_path="bytes")  # checked first
    assert decide_zarr_read(elsewhere).reason == "byte getter bytes is not a store path"
    assert decide_zarr_write(elsewhere).reason == "byte setter bytes is not a store path"
    write_only = {
        "store MemoryStore has no gdsstore engine backend": {"store": "MemoryStore", "engine": False},
        "byte setters on more than one store": {"one_store": False},
        "store not writable (zarr's pipeline raises the error)": {"writable": False},
        "0-d array": {"zero_d": True},
    }
    for reason, facts in write_only.items():
        assert decide_zarr_write(replace(sharded, **facts)) == Decision("delegate", reason)
        assert decide_zarr_read(replace(sharded, **facts)).route == "shards"
    v2 = replace(base, v2_filters=True)
    assert decide_zarr_read(v2) == Decision("delegate", "zarr v2 filters")
    assert decide_zarr_write(v2).route == "chunks"
