"""The landing layer (gdsstore.engine.landing): an address table of a local directory, a web server (nginx)
and any other backend lands in one buffer whose items are the bytes of numpy slices of the sources."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from servers.nginx import NginxServer, nginx_binary

import gdsstore
from gdsstore.engine.backend import Backend, ByteRange, backend_for
from gdsstore.engine.landing import ALIGN, AddressTable, Landed, land, land_objects, slot_layout
from gdsstore.engine.localfs import LocalBackend

SIZES = {"a": 100, "b": 0, "c/d": 5000, "e": 70_000}


def _fill(root: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    data = {}
    for key, n in SIZES.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        data[key] = rng.integers(0, 256, n, dtype=np.uint8)
        (root / key).write_bytes(data[key].tobytes())
    os.chmod(root, 0o755)
    return data


class _Plain(LocalBackend):
    """A local directory seen as a backend with no batched reads of its own: Backend.land's default."""

    lands_on_device = False

    def land(self, table, alloc, free, *, device=None, room=None, where="land()"):  # type: ignore[no-untyped-def]
        return land_objects(self, table, alloc, free, where)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, np.ndarray], NginxServer | None]]:
    root = tmp_path_factory.mktemp("land")
    data = _fill(root)
    srv = NginxServer(str(root)) if nginx_binary() is not None else None
    try:
        yield root, data, srv
    finally:
        if srv is not None:
            srv.close()


@pytest.fixture(params=["local", "objects", "http"])
def backend(request: pytest.FixtureRequest, site: tuple[Path, dict[str, np.ndarray], NginxServer | None]) -> Backend:
    root, _, srv = site
    if request.param == "local":
        return LocalBackend(str(root))
    if request.param == "objects":
        return _Plain(str(root))
    if srv is None:
        pytest.skip("nginx is not installed here")
    return backend_for(srv.url(""))


def _bytes(landed: Landed, i: int) -> bytes | None:
    v = landed.view(i)
    return None if v is None else bytes(v)


def test_slot_layout_is_aligned_and_in_order() -> None:
    offsets, total = slot_layout(np.array([1, -1, 64, 65, 0]))
    assert offsets.tolist() == [0, 64, 64, 128, 256] and total == 256
    assert (offsets % ALIGN == 0).all()


@pytest.mark.parametrize("into", ["host", "pinned"])
def test_whole_objects_land_as_their_bytes(
    backend: Backend, site: tuple[Path, dict[str, np.ndarray], NginxServer | None], into: str
) -> None:
    _, data, _ = site
    keys = [*SIZES, "missing", "a"]
    landed = land(backend, AddressTable(keys), into=into)  # type: ignore[arg-type]
    assert landed.sizes.tolist() == [*SIZES.values(), -1, 100]
    for i, key in enumerate(keys):
        assert _bytes(landed, i) == (None if key == "missing" else data[key].tobytes())
    assert (landed.offsets[landed.present] % ALIGN == 0).all()
    landed.release()


def test_ranges_are_clamped_as_zarr_says(
    backend: Backend, site: tuple[Path, dict[str, np.ndarray], NginxServer | None]
) -> None:
    _, data, _ = site
    brs = [ByteRange("range", 10, 20), ByteRange("offset", 4990), ByteRange("suffix", 7), ByteRange("range", 60, 500),
           None, ByteRange("range", 5, 9)]
    keys = ["a", "c/d", "e", "a", "b", "missing"]
    landed = land(backend, AddressTable.from_ranges(keys, brs))
    for i, (key, br) in enumerate(zip(keys, brs)):
        if key == "missing":
            assert landed.view(i) is None
            continue
        src = data[key]
        a, n = br.resolve(src.size) if br is not None else (0, src.size)
        assert _bytes(landed, i) == src[a : a + n].tobytes(), (key, br)


def test_exact_ranges_land_without_size_lookups(
    backend: Backend, site: tuple[Path, dict[str, np.ndarray], NginxServer | None]
) -> None:
    _, data, _ = site
    starts, stops = np.array([0, 100, 69_000]), np.array([50, 4100, 70_000])
    landed = land(backend, AddressTable(["a", "c/d", "e"], starts, stops, exact=True))
    assert [_bytes(landed, i) for i in range(3)] == [
        data["a"][0:50].tobytes(), data["c/d"][100:4100].tobytes(), data["e"][69_000:].tobytes()]


def test_an_object_not_of_its_expected_size_is_refused(backend: Backend) -> None:
    landed = land(backend, AddressTable(["a", "missing"], expect=np.array([100, 100])))
    assert landed.sizes.tolist() == [100, -1]
    with pytest.raises(OSError, match=r"100|99|101"):
        land(backend, AddressTable(["a"], expect=np.array([99])))
    with pytest.raises(OSError, match=r"100|101"):
        land(backend, AddressTable(["a"], expect=np.array([101])))


@pytest.mark.parametrize("plain", [False, True])
def test_a_short_local_read_is_refused_with_the_key(tmp_path: Path, plain: bool) -> None:
    (tmp_path / "x").write_bytes(b"0123456789")
    b = _Plain(str(tmp_path)) if plain else LocalBackend(str(tmp_path))
    table = AddressTable(["x"], np.array([4]), np.array([30]), exact=True)  # says the range lies inside
    if plain:  # a backend without exact reads clamps: 6 bytes
        assert _bytes(land(b, table), 0) == b"456789"
        return
    with pytest.raises(OSError, match=r"short read of 'x': 6 of 26 bytes at offset 4"):
        land(b, table)


def test_a_gpu_landing_without_a_gpu_lands_in_host_memory(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"abc")
    landed = land(backend_for(str(tmp_path)), AddressTable(["x"]), into="pinned")
    assert landed.dev is None and landed.pinned is None and _bytes(landed, 0) == b"abc"


def test_the_store_backend_lands_through_its_one_function(tmp_path: Path) -> None:
    (tmp_path / "k").write_bytes(b"hello")
    backend = gdsstore.GDSStore(str(tmp_path)).backend
    assert _bytes(land(backend, AddressTable(["k"])), 0) == b"hello"


def test_items_land_in_the_callers_region_or_a_buffer_of_their_own(
    backend: Backend, site: tuple[Path, dict[str, np.ndarray], NginxServer | None]
) -> None:
    """``into`` a host array of the caller's: the items land in its first bytes, laid out by slot_layout,
    and nothing beyond it is written; a region too small for them leaves it untouched."""
    _, data, _ = site
    starts, stops = np.array([0, 100, 69_000]), np.array([50, 4100, 70_000])
    table = AddressTable(["a", "c/d", "e"], starts, stops, exact=True)
    slots, total = slot_layout(stops - starts)
    whole = np.full(64 + total + 64, 7, dtype=np.uint8)
    landed = land(backend, table, into=whole[64 : 64 + total])
    assert np.may_share_memory(landed.host, whole) and landed.offsets.tolist() == slots.tolist()
    for i, (key, a, b) in enumerate(zip(["a", "c/d", "e"], starts.tolist(), stops.tolist())):
        assert bytes(whole[64 + slots[i] : 64 + slots[i] + b - a]) == data[key][a:b].tobytes()
    assert (whole[:64] == 7).all() and (whole[64 + total :] == 7).all()
    small = np.full(total - 1, 7, dtype=np.uint8)
    landed = land(backend, table, into=small)
    assert not np.may_share_memory(landed.host, small) and (small == 7).all()
    assert [_bytes(landed, i) for i in range(3)] == [data[k][a:b].tobytes() for k, a, b in zip(
        ["a", "c/d", "e"], starts.tolist(), stops.tolist())]


def test_touching_ranges_share_a_request_up_to_max_request(tmp_path: Path) -> None:
    """A wave joins touching ranges of one object into one request, unless that request would carry more than
    the table's ``max_request``: ranges cut to that size stay as many requests, all in flight."""
    if nginx_binary() is None:
        pytest.skip("nginx is not installed here")
    os.chmod(tmp_path, 0o755)
    data = np.random.default_rng(3).integers(0, 256, 8192, dtype=np.uint8)
    (tmp_path / "o").write_bytes(data.tobytes())
    srv = NginxServer(str(tmp_path), access_log=True)
    try:
        backend = backend_for(srv.url(""))
        starts = np.arange(0, 8192, 1024)
        for most, gets in ((None, 1), (1024, 8), (2048, 4)):
            before = len(srv.requests())
            table = AddressTable(["o"] * 8, starts, starts + 1024, exact=True, max_request=most)
            landed = land(backend, table)
            assert b"".join(_bytes(landed, i) or b"" for i in range(8)) == data.tobytes()
            sent = [r for r in srv.requests()[before:] if r.startswith("GET ")]
            assert len(sent) == gets, (most, sent)
    finally:
        srv.close()


def test_items_in_several_buffers_are_one_landed() -> None:
    """A landing in several buffers (a window's decoded chunks: each decoder's output, a landing of one
    buffer taken whole) locates every item where it lies: its bytes, its address, absent ones as such."""
    one = Landed(np.arange(200, dtype=np.uint8), [0, 64, 128], [10, -1, 3])
    other = np.arange(50, 90, dtype=np.uint8)
    many = Landed.empty(6)
    assert many.absent.tolist() == list(range(6)) and many.nbytes == 0
    many.add(other, [4, 0], [5, 0], [7, 0])  # an empty item is present: a chunk of no bytes
    many.take(one, [1, 3, 5])  # one's items 0 and 2 become 1 and 5; its absent item 1 stays absent here as 3
    kept = np.zeros(8, dtype=np.uint8)
    many.hold(kept)  # a buffer kept alive with the items, holding none of them
    want = {0: b"", 1: bytes(range(10)), 4: bytes(range(55, 62)), 5: bytes(range(128, 131))}
    assert many.present.tolist() == sorted(want) and many.absent.tolist() == [2, 3]
    for i in range(6):
        v, h = many.item(i), many.view(i)
        assert (v is None) == (h is None) == (i not in want)
        if v is not None and h is not None:
            assert bytes(v) == bytes(h) == want[i]
    base = {0: other.ctypes.data, 1: one.host.ctypes.data, 4: other.ctypes.data + 5, 5: one.host.ctypes.data + 128}
    assert many.ptrs().tolist() == [base.get(i, 0) for i in range(6)]
    assert many.nbytes == 20 and many.all_bytes() == [want.get(i) for i in range(6)]
    assert any(b is kept for b in many.buffers)
    with pytest.raises(ValueError, match="several buffers"):
        _ = many.host
    with pytest.raises(ValueError, match="several buffers"):
        many.sub([0], [1])
    with pytest.raises(ValueError, match="one buffer"):
        one.add(other, [0], [0], [1])
    assert one.ptrs().tolist() == [one.host.ctypes.data, 0, one.host.ctypes.data + 128]


def test_a_landing_of_several_buffers_takes_another_of_several() -> None:
    """take() of a landing in several buffers keeps each item in its own buffer (blosc's groups into a window's)."""
    a, b = np.arange(10, dtype=np.uint8), np.arange(100, 120, dtype=np.uint8)
    inner = Landed.empty(3)
    inner.add(a, [2], [1], [4])
    inner.add(b, [0], [10], [2])
    outer = Landed.empty(5)
    outer.take(inner, [4, 0, 1])
    assert [None if v is None else bytes(v) for v in map(outer.item, range(5))] == [
        None, bytes([1, 2, 3, 4]), None, None, bytes([110, 111])
    ]
    assert outer.ptrs().tolist() == [0, a.ctypes.data + 1, 0, 0, b.ctypes.data + 10]
