"""Few large zstd chunks decoded by the host's threads and nvCOMP at once (``gdsstore.gpu.decode_split``), on the
CPU: the scheduling with real threads, and the landing with numpy arrays posing as device memory (as in
``test_decode_raw.py``: the nvCOMP call is numcodecs decoding each item into the same output slot, the
host-to-device copy a numpy copy). Every chunk must be decoded exactly once, by one decoder, into its own slot,
and read back as numcodecs decodes it."""

from __future__ import annotations

import itertools
import threading
import types
from collections import Counter
from typing import Any

import numcodecs
import numpy as np
import pytest
from zarr.codecs import BytesCodec, ZstdCodec

import gdsstore
from gdsstore.engine import landing
from gdsstore.gpu import codecs as gcodecs
from gdsstore.gpu import decode as gdecode
from gdsstore.gpu import decode_split as gsplit
from gdsstore.gpu import execute as gexec
from gdsstore.gpu import nvcomp, nvcomp_capi, staging
from gdsstore.gpu import pipeline as gpipe
from gdsstore.gpu import windows as gwindows
from gdsstore.policy import Decision
from gpu_pipeline.test_fast_path import _spec

MIB = 1 << 20


def test_queue_hands_each_chunk_out_once() -> None:
    q = gsplit.SplitQueue(10)
    assert q.take_front(3) == [0, 1, 2]
    assert [q.take_back(), q.take_back()] == [9, 8]
    assert q.rest() == range(3, 8)
    assert q.take_front(100) == [3, 4, 5, 6, 7]
    assert q.take_back() is None and q.take_front(1) == []


def test_device_share_stops_at_a_chunk_only_the_host_can_take() -> None:
    frames = [np.array([MIB] * 64)] * 3 + [None, np.array([MIB] * 64)]
    assert gsplit.device_share(frames, [64 * MIB] * 5, threads=0) == 3
    assert gsplit.device_share(frames, [64 * MIB] * 5, threads=4) <= 3


def _run(
    n: int, threads: int, share: Any, device: bool = True, fail: bool = False
) -> tuple[gsplit.SplitRun, Counter[int]]:
    counts: Counter[int] = Counter()
    lock = threading.Lock()

    def host(i: int) -> None:
        with lock:
            counts[i] += 1

    def dev(ids: list[int]) -> None:
        if fail:
            raise RuntimeError("nvCOMP refused")
        with lock:
            counts.update(ids)

    run = gsplit.run_split(n, threads, host, dev if device else None, share)
    return run, counts


def test_run_split_decodes_every_chunk_once_with_both_decoders() -> None:
    n = 64
    frames = [np.array([16 * MIB])] * n  # 64 chunks of 16 MiB on a device of 60 MB/s a frame: both decoders get some

    def share(rest: range) -> int:
        return gsplit.device_share(frames[rest.start : rest.stop], [16 * MIB] * len(rest), 4, frame_rate=60e6)

    first = share(range(n))
    assert 0 < first < n
    run, counts = _run(n, 4, share)
    assert counts == Counter(range(n))
    assert sorted(run.device + run.host) == list(range(n))
    assert run.device[:first] == list(range(first)) and run.host  # the device's batch from the front, the host's from the back
    assert run.device_failed is None


def test_run_split_host_alone_without_nvcomp() -> None:
    run, counts = _run(12, 3, lambda rest: len(rest), device=False)
    assert counts == Counter(range(12)) and run.device == [] and sorted(run.host) == list(range(12))


def test_run_split_failed_device_batch_goes_to_the_host() -> None:
    run, counts = _run(8, 2, lambda rest: 3 if rest.start == 0 else 0, fail=True)
    assert counts == Counter(range(8)) and run.device == [] and sorted(run.host) == list(range(8))
    assert run.device_failed == "nvCOMP failed (RuntimeError)"


def test_run_split_device_alone_takes_all_with_no_host_threads() -> None:
    run, counts = _run(5, 0, lambda rest: len(rest))
    assert counts == Counter(range(5)) and run.device == list(range(5)) and run.host == []


def test_a_host_failure_is_raised_after_the_workers_stop() -> None:
    def host(i: int) -> None:
        if i == 6:
            raise ValueError("corrupt chunk 6")

    with pytest.raises(ValueError, match="corrupt chunk 6"):
        gsplit.run_split(8, 2, host, lambda ids: None, lambda rest: 2 if rest.start == 0 else 0)


# -- landing, with host memory as the device -------------------------------------------------------------------


@pytest.fixture
def host_device(monkeypatch: pytest.MonkeyPatch) -> dict[str, Counter[int]]:
    """nvCOMP as numcodecs over each item (counting the output offsets it decoded into, and per call whether
    it asked for the frames' exact scratch), copies as numpy."""
    seen: dict[str, Counter[int]] = {"nvcomp_items": Counter(), "h2d": Counter(), "exact_scratch": Counter()}

    def decode_into(
        fmt: str, src: Any, s_off: list[int], s_len: list[int], out: Any, o_off: list[int], o_len: list[int],
        exact_scratch: bool = False,
    ) -> None:
        assert fmt == "zstd"
        calls = seen["exact_scratch"]
        calls[len(calls)] = int(exact_scratch)  # call number -> 1 where it asked
        for a, m, b, n in zip(s_off, s_len, o_off, o_len):
            dec = numcodecs.Zstd().decode(bytes(src[a : a + m]))
            assert len(dec) == n  # one frame per item: its size is the frame's own
            out[b : b + n] = np.frombuffer(dec, np.uint8)
            seen["nvcomp_items"][b] += 1

    def host_to_device(out: Any, out_offset: int, host: Any, offset: int, n: int, after: Any) -> None:
        out[out_offset : out_offset + n] = host.host[offset : offset + n]
        seen["h2d"][out_offset] += 1

    monkeypatch.setattr(gcodecs, "_cupy", lambda: types.SimpleNamespace(empty=np.empty, uint8=np.uint8, asarray=np.asarray))
    monkeypatch.setattr(staging, "to_device", lambda st: st.host.copy())
    monkeypatch.setattr(nvcomp, "decode_batch_into", decode_into)
    monkeypatch.setattr(  # host buffers (the CPU codec's fallback) keep their CPU route
        nvcomp,
        "route_codec",
        lambda fmt, device, **kw: Decision("gpu-decode" if device else "cpu-codec", "test"),
    )
    monkeypatch.setattr(gsplit, "host_to_device", host_to_device)
    monkeypatch.setattr(gsplit, "caller_event", lambda out: None)
    return seen


def _raw_frame_without_size(data: bytes) -> bytes:
    """A zstd frame of one raw block that declares no content size (numcodecs always declares it)."""
    return bytes.fromhex("28b52ffd0058") + ((len(data) << 3) | 1).to_bytes(3, "little") + data


def _chunks(shape: tuple[int, int]) -> tuple[list[bytes], list[bytes | None]]:
    """Chunks of float32 values: pzstd-like ones (many frames: the model gives them to the device), plain
    numcodecs ones (one frame), one whose last frame declares no size (the host's), and a missing one."""
    rng = np.random.default_rng(7)
    z = numcodecs.Zstd(level=1)
    raws = [np.round(rng.standard_normal(shape), 1).astype("f4").tobytes() for _ in range(9)]
    stored: list[bytes | None] = []
    for i, r in enumerate(raws):
        if i < 4:  # many small frames (the device's), one of them empty
            cuts = [0, 100, 100, *range(256, len(r), 256), len(r)]
            stored.append(b"".join(bytes(z.encode(r[a:b])) for a, b in itertools.pairwise(cuts)))
        elif i == 4:
            stored.append(bytes(z.encode(r[:-40])) + _raw_frame_without_size(r[-40:]))
        else:
            stored.append(bytes(z.encode(r)))
    stored[7] = None
    return raws, stored


def _chain() -> gdecode.CodecChain:
    codecs = gpipe.GDSCodecPipeline.from_codecs([BytesCodec(), ZstdCodec(level=1)]).codecs
    return gdecode.CodecChain.of(codecs).split("few large chunks (test)")


@pytest.mark.parametrize("threads", [1, 3])
def test_split_lands_every_chunk_in_its_slot(
    host_device: dict[str, Counter[int]], threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gsplit, "DEVICE_ROUND_FLOOR", 0.0)  # rounds of tiny frames as quick as they are small
    raws, stored = _chunks((64, 32))
    st = landing.from_host_buffers(
        [None if b is None else np.frombuffer(b, np.uint8) for b in stored], pinned=False
    )
    with gdsstore.config.set({"num_threads": threads}), gdsstore.trace() as t:
        raw = gdecode.decode_on_device(_chain(), [_spec((64, 32))] * 9, st)
    assert raw.item(7) is None
    for i in (0, 1, 2, 3, 4, 5, 6, 8):
        assert bytes(raw.item(i)) == raws[i] == bytes(numcodecs.Zstd().decode(stored[i]))
    # each chunk decoded once: by nvCOMP (one item per frame, at its place in the chunk's slot) or by the host
    items, copies = host_device["nvcomp_items"], host_device["h2d"]
    assert all(c == 1 for c in items.values()) and all(c == 1 for c in copies.values())
    slots = {int(raw.offsets[i]): i for i in range(9) if i != 7}
    by_device = {i for off, i in slots.items() if off in items}
    by_host = {slots[off] for off in copies}
    assert by_device.isdisjoint(by_host) and by_device | by_host == set(slots.values())
    assert 4 in by_host  # a frame without a content size: only the host can place it
    asked = host_device["exact_scratch"]
    assert asked[0] == 1 and sum(asked.values()) == 1  # the first nvCOMP call learns the frames' scratch, no other
    for i in by_device:  # every frame of a device chunk was one nvCOMP item
        table = gsplit.chunk_frames(np.frombuffer(stored[i] or b"", np.uint8), len(raws[i]))
        assert table is not None
        assert {int(raw.offsets[i]) + d for d in table.decoded_offsets.tolist()} <= set(items)
    routes = {ev.route for ev in t.events if ev.op == "decode"}
    assert by_device and by_host and routes == {"gpu-decode", "cpu-codec"}  # both decoders took chunks


def test_a_process_that_knows_the_scratch_asks_no_nvcomp_call_for_it(
    host_device: dict[str, Counter[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gsplit, "DEVICE_ROUND_FLOOR", 0.0)
    raws, stored = _chunks((64, 32))
    most = max(len(r) for r in raws)  # the largest frame: the single-frame chunks' whole size
    monkeypatch.setattr(nvcomp_capi, "_seen", {("zstd", most): 1.5})
    st = landing.from_host_buffers(
        [None if b is None else np.frombuffer(b, np.uint8) for b in stored], pinned=False
    )
    with gdsstore.config.set({"num_threads": 3}):
        raw = gdecode.decode_on_device(_chain(), [_spec((64, 32))] * 9, st)
    assert all(bytes(raw.item(i)) == raws[i] for i in (0, 1, 2, 3, 4, 5, 6, 8))
    asked = host_device["exact_scratch"]
    assert asked and sum(asked.values()) == 0  # nvCOMP took chunks, and no call asked for the frames' scratch


def test_a_split_nvcomp_takes_no_part_in_learns_the_frames_scratch(
    host_device: dict[str, Counter[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the model gives nvCOMP none of a split read (its windows were planned at nvCOMP's scratch bound),
    nvCOMP parses the frames of a few chunks for the scratch they need while the host's threads decode them all:
    once, since the next read's windows are planned with what it learned."""
    monkeypatch.setattr(gsplit, "DEVICE_ROUND_FLOOR", 1e9)  # the host alone is always sooner
    monkeypatch.setattr(gsplit, "LEARN_CHUNKS", 3)
    monkeypatch.setattr(nvcomp_capi, "library", lambda: object())
    monkeypatch.setattr(nvcomp_capi, "_seen", {})
    asked: list[nvcomp_capi.DecodeTable] = []

    def learn(fmt: str, table: nvcomp_capi.DecodeTable) -> float:
        asked.append(table)
        nvcomp_capi._seen[(fmt, max(table.out_sizes))] = 1.5
        return 1.5

    monkeypatch.setattr(nvcomp_capi, "learn_scratch", learn)
    raws, stored = _chunks((64, 32))
    st = landing.from_host_buffers(
        [None if b is None else np.frombuffer(b, np.uint8) for b in stored], pinned=False
    )
    for _ in range(2):
        with gdsstore.config.set({"num_threads": 3}):
            raw = gdecode.decode_on_device(_chain(), [_spec((64, 32))] * 9, st)
        for i in (0, 1, 2, 3, 4, 5, 6, 8):
            assert bytes(raw.item(i)) == raws[i]
    assert not host_device["nvcomp_items"] and len(asked) == 1
    # the 3 chunks of the largest frames nvCOMP could take (5, 6, 8: one frame each), each decoding to its size
    table = asked[0]
    assert table.out_sizes == [len(raws[5])] * 3
    src = np.asarray(table.src)
    for a, m, n in zip(table.src_offsets, table.src_sizes, table.out_sizes):
        assert len(numcodecs.Zstd().decode(bytes(src[a : a + m]))) == n


def test_split_without_nvcomp_decodes_on_the_host(host_device: dict[str, Counter[int]]) -> None:
    raws, stored = _chunks((64, 32))
    st = landing.from_host_buffers(
        [None if b is None else np.frombuffer(b, np.uint8) for b in stored], pinned=False
    )
    present = st.present
    want = np.array([len(raws[i]) for i in present.tolist()], np.int64)
    chain = _chain()
    specs = [_spec((64, 32))] * 9

    def into(i: int, dst: np.ndarray) -> None:
        gdecode.decode_host_into(chain, specs, st, None, i, dst)

    got = gsplit.decode_split(st, present, want, into, threads=2, device=False)
    assert got.run.device == [] and sorted(got.run.host) == list(range(len(present)))
    assert not host_device["nvcomp_items"]
    for k, i in enumerate(present.tolist()):
        assert bytes(got.decoded.item(k)) == raws[i]


def test_decode_side_splits_few_large_zstd_chunks(
    host_device: dict[str, Counter[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few chunks per nvCOMP call: large ones stay with nvCOMP where the model says it finishes before a host
    thread could decode one of them (nvCOMP 6.0 on an H100), are split between both decoders on a slower
    device, small ones go to the CPU, and a setting of 0 keeps them all on the CPU."""
    monkeypatch.setattr(gwindows, "window_bytes", lambda chain, device, chunk_bytes=0, alone=False: 1 << 30)
    codecs = gpipe.GDSCodecPipeline.from_codecs([BytesCodec(), ZstdCodec(level=1)]).codecs
    chain = gdecode.CodecChain.of(codecs)
    with gdsstore.config.set({"gpu.host_decode_bytes": 0, "gpu.host_decode_chunks": 64}):  # (conftest: 0)
        alone = gexec.decode_side(chain, [16 * MIB] * 8)
        monkeypatch.setattr(gsplit, "DEVICE_FRAME_RATE", 60e6)  # nvCOMP's rate per frame before 6.0
        big = gexec.decode_side(chain, [16 * MIB] * 8)
        small = gexec.decode_side(chain, [1 * MIB] * 8)
        many = gexec.decode_side(chain, [256 << 10] * 1024)
        with gdsstore.config.set({"gpu.split_decode_bytes": 0}):
            off = gexec.decode_side(chain, [16 * MIB] * 8)
    assert big.split_reason is not None and "split between the CPU and nvCOMP" in big.split_reason
    assert not big.device_staged()  # the host's threads read the staged bytes
    assert alone is chain  # nvCOMP alone, staged on the device
    assert small.split_reason is None and small.host_reason is not None
    assert many is chain  # many small chunks: nvCOMP alone, as before
    assert off.split_reason is None and off.host_reason is not None


def test_chunks_stored_as_decoded_plan_no_decode_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A device read of 1 GiB of uncompressed 64 MiB chunks is one window at the default budget: nothing is
    decoded on the device, so no nvCOMP scratch is set aside beside it (it was: two windows of 512 MiB, each
    read after the other); zstd chunks of the same size still plan for the scratch (host twin: the device's
    free memory given as a number)."""
    monkeypatch.setattr(gwindows, "_device_free", lambda: 80 << 30)
    sizes = [64 << 20] * 16
    raw = gdecode.CodecChain.of([BytesCodec()])
    assert gwindows.read_windows(sizes, raw, True, 64 << 20) == [range(16)]
    assert len(gwindows.read_windows(sizes, gdecode.CodecChain.of([BytesCodec(), ZstdCodec()]), True, 64 << 20)) > 1
    with gdsstore.config.set({"gpu.memory_budget": 1 << 30}):  # under a small budget: windows as large as it allows
        assert [len(w) for w in gwindows.read_windows(sizes, raw, True, 64 << 20)] == [4, 4, 4, 4]  # were 8 of 2
