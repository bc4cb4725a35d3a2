"""The device memory budget without a GPU: accounting of gdsstore's allocations, which allocator a call
uses, trimming the private pool when the last call returns, and windows sized to fit the budget.
Host stand-ins take the place of CuPy's allocators and pools (the bookkeeping is the same)."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gdsstore
from gdsstore.gpu import execute, memory, nvcomp, plan


class Mem:
    """What an allocator returns: a pointer and its device."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes, self.ptr, self.device_id = nbytes, 4096, 0


class Pool:
    """A stand-in for cupy.cuda.MemoryPool: blocks it made stay held until free_all_blocks."""

    def __init__(self) -> None:
        self.total = 0
        self.frees = 0

    def malloc(self, nbytes: int) -> Mem:
        self.total += nbytes
        return Mem(nbytes)

    def total_bytes(self) -> int:
        return self.total

    def free_all_blocks(self) -> None:
        self.frees += 1
        self.total = 0


class DefaultPool(Pool):
    pass


def _budget() -> tuple[memory.DeviceBudget, list[Pool]]:
    made: list[Pool] = []

    def make() -> Pool:
        made.append(Pool())
        return made[-1]

    return memory.DeviceBudget(private_pool=make, wrap=lambda mem, owner, n: owner), made


def test_allocations_are_counted_until_freed() -> None:
    b, _ = _budget()
    user = Pool()
    b.enter(b.resolve(user.malloc, DefaultPool()))
    x = b.allocate(100)
    y = b.allocate(50)
    assert (b.live, b.peak) == (150, 150)
    del x
    gc.collect()
    assert (b.live, b.peak) == (50, 150)
    assert b.reset_peak() == 150 and b.peak == 50
    del y
    b.leave(1 << 30)
    assert b.live == 0 and b.active == 0


def test_a_chosen_allocator_is_used_as_it_is_and_never_trimmed() -> None:
    b, made = _budget()
    rmm_like = Pool()  # RMM's rmm_cupy_allocator, a PyTorch-shared pool, the user's own MemoryPool
    assert b.resolve(rmm_like.malloc, DefaultPool()) == rmm_like.malloc
    b.enter(rmm_like.malloc)
    keep = b.allocate(1 << 20)
    b.leave(1 << 30)
    assert rmm_like.total == 1 << 20 and rmm_like.frees == 0 and not made  # gdsstore freed nothing of it
    del keep


def test_cupys_default_pool_is_replaced_by_the_private_pool_trimmed_when_idle() -> None:
    b, made = _budget()
    default = DefaultPool()
    base = b.resolve(default.malloc, default)
    assert len(made) == 1 and base == made[0].malloc
    assert b.resolve(b.allocate, default) == made[0].malloc  # nested calls keep the outer allocator
    b.enter(base)
    b.enter(base)  # two calls at once: only the last one out trims
    x = b.allocate(64 << 20)
    del x
    b.leave(1 << 30)
    assert made[0].frees == 0 and made[0].total == 64 << 20
    b.leave(1 << 30)  # idle share of 1 GiB is 32 MiB: 64 MiB held is freed
    assert made[0].frees == 1 and b.held() == 0
    assert default.total == 0  # the user's default pool never grew


def test_small_pools_are_kept_within_the_idle_share() -> None:
    b, made = _budget()
    default = DefaultPool()
    base = b.resolve(default.malloc, default)
    b.enter(base)
    del_me = b.allocate(8 << 20)
    del del_me
    b.leave(1 << 30)
    assert made[0].frees == 0 and b.held() == 8 << 20 <= memory.idle_bytes(1 << 30)


def test_trim_drops_the_cached_nvcomp_codecs() -> None:
    nvcomp._codecs[(1, "zstd", None)] = object()
    b, _ = _budget()
    b.trim(0)
    assert not nvcomp._codecs


def test_is_default_pool_compares_the_bound_pool() -> None:
    default, other = DefaultPool(), Pool()
    assert memory.is_default_pool(default.malloc, default)
    assert not memory.is_default_pool(other.malloc, default)
    assert not memory.is_default_pool(lambda n: None, default)


def test_measured_windows_size_the_next_ones() -> None:
    memory.forget_learned()
    key = ("read", "zstd", True, 4 << 20)
    assert memory.learned_cost(key, 3.0) == 3.0  # nothing measured: the model
    memory.observe(key, 900 << 20, 400 << 20)
    memory.observe(key, 700 << 20, 400 << 20)  # the largest ratio is kept
    assert memory.learned_cost(key, 3.0) == pytest.approx(2.25)
    memory.observe(key, 0, 0)  # nothing to learn from
    assert memory.learned_cost(key, 3.0) == pytest.approx(2.25)
    memory.forget_learned()


class Chain:
    def __init__(self, fmt: str | None, staged: bool) -> None:
        self.fmt, self.staged = fmt, staged

    def device_plan(self) -> tuple[str | None, bool, str]:
        return self.fmt, False, ""

    def device_staged(self) -> bool:
        return self.staged


@pytest.mark.parametrize("budget", [16 << 20, 128 << 20, 256 << 20, 1 << 30, 4 << 30])
@pytest.mark.parametrize("fmt, staged", [("zstd", True), ("gzip", False), (None, True), ("-", False)])
def test_device_windows_fit_any_budget(budget: int, fmt: str | None, staged: bool) -> None:
    memory.forget_learned()
    with gdsstore.config.set({"gpu.memory_budget": budget}):
        limit, key = execute.window_bytes(Chain(fmt, staged), True, 4 << 20)  # type: ignore[arg-type]
        assert key is not None
        gpu = fmt not in (None, "-")
        cost = plan.read_cost(decoded_on_gpu=gpu, staged_on_gpu=staged, stored_ratio=1.0)
        assert limit * cost <= budget
        memory.observe(key, budget // 2, limit)  # a window took half the budget: the next ones double
        again, _ = execute.window_bytes(Chain(fmt, staged), True, 4 << 20)  # type: ignore[arg-type]
        assert again * (budget / 2 / limit) <= budget
    memory.forget_learned()


def test_host_windows_ignore_the_budget() -> None:
    assert execute.window_bytes(Chain("zstd", False), False) == (plan.WINDOW_BYTES, None)  # type: ignore[arg-type]


def test_the_budget_setting_is_validated() -> None:
    with gdsstore.config.set({"gpu.memory_budget": 1 << 20}), pytest.raises(ValueError, match=r"gpu\.memory_budget"):
        memory.budget_bytes()
    with gdsstore.config.set({"gpu.memory_budget": "268435456"}):
        assert memory.budget_bytes() == 256 << 20


def test_windows_are_cut_by_the_limit_of_their_moment() -> None:
    limits = iter([25, 25, 100])
    ws = plan.Windows([10] * 8, lambda: next(limits))
    got = [ws.next() for _ in range(4)]
    assert [w.items for w in got if w] == [range(0, 2), range(2, 4), range(4, 8)]
    assert got[2] is not None and (got[2].nbytes, got[2].limit) == (40, 100) and got[3] is None
    big = plan.Windows([50, 5], lambda: 10)
    assert big.next() == plan.Window(range(0, 1), 50, 10)  # an item larger than the limit: alone


@given(sizes=st.lists(st.integers(0, 100), max_size=40), limit=st.integers(1, 300))
def test_fixed_limit_windows_are_split_windows(sizes: list[int], limit: int) -> None:
    ws = plan.Windows(sizes, lambda: limit)
    assert [w.items for w in iter(ws.next, None)] == plan.split_windows(sizes, limit)


def test_budget_stats_without_a_gpu() -> None:
    stats = memory.budget_stats()
    assert stats["budget"] == 1 << 30 and stats["active"] == 0


def test_a_small_last_window_teaches_nothing() -> None:
    memory.forget_learned()
    key = ("read", "zstd", True, 4 << 20)
    memory.observe(key, 200 << 20, 4 << 20, limit=300 << 20)  # one chunk after the full windows
    assert memory.learned_cost(key, 3.0) == 3.0
    memory.observe(key, 600 << 20, 250 << 20, limit=300 << 20)
    assert memory.learned_cost(key, 3.0) == pytest.approx(2.4)
    memory.forget_learned()


def test_only_the_gpus_allocated_on_are_trimmed() -> None:
    b, made = _budget()
    default = DefaultPool()
    b.enter(b.resolve(default.malloc, default))
    x = b.allocate(64 << 20)
    del x
    assert b.devices == {0}
    entered: list[int] = []

    class Dev:
        def __init__(self, d: int) -> None:
            self.d = d

        def __enter__(self) -> None:
            entered.append(self.d)

        def __exit__(self, *exc: object) -> None:
            return None

    b.leave(1 << 30, [Dev(d) for d in sorted(b.devices)])
    assert entered == [0] and made[0].frees == 1
