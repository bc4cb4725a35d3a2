"""Local files: :class:`LocalFile`, with the cuFile and POSIX routes chosen per operation by the policy,
and :class:`LocalWriteFile`, the writer :func:`gdsstore.open` returns (a temporary file, published on close)."""

from __future__ import annotations

import os
import stat as stat_mod
import threading
from concurrent.futures import Future, wait
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import bounce, cuda, posix
from gdsstore.engine import cufile as _cufile
from gdsstore.engine.buffers import IOBuffer, as_io_buffer, check_request
from gdsstore.engine.file import BaseFile, WriteGuard
from gdsstore.engine.pool import completed, run_pieces

if TYPE_CHECKING:
    from gdsstore.engine.atomic import AtomicWriter

__all__ = ["MODES", "LocalFile", "LocalWriteFile", "check_mode"]

#: The modes :func:`gdsstore.open` takes for a local path.
MODES = ("rb", "r+b", "wb", "xb", "ab")
_USE_LOCAL = ("; use 'rb' (read), 'r+b' (update in place), 'wb' (replace), 'xb' (create, fails if the file exists) "
              "or 'ab' (append)")

# How LocalFile opens a path in place. gdsstore.open's writers ("wb", "xb", "ab") are LocalWriteFile:
# a LocalFile on a temporary file ("xb"), published on close.
_FLAGS = {
    "rb": os.O_RDONLY,
    "r+b": os.O_RDWR,
    "wb": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
    "xb": os.O_RDWR | os.O_CREAT | os.O_EXCL,
}


def check_mode(mode: str, where: str, modes: tuple[str, ...] = MODES, use: str = _USE_LOCAL) -> str:
    """``mode`` if it is one of ``modes`` (default: those :func:`gdsstore.open` takes for a local path), else a
    ValueError naming them (``use``: what to say instead, for remote objects)."""
    if mode not in modes:
        raise ValueError(f"{where}: unsupported mode {mode!r}{use}")
    return mode


def _host_read(fd: int, b: IOBuffer, off: int, n: int, base: int) -> int:
    return posix.pread_full(fd, b.host_slice(off, off + n), base + off)


def _host_write(fd: int, b: IOBuffer, off: int, n: int, base: int) -> int:
    return posix.pwrite_full(fd, b.host_slice(off, off + n), base + off)


def _cufile_read(handle: Any, b: IOBuffer, off: int, n: int, base: int) -> int:
    done = 0
    with cuda.on_device(b.device):  # cuFile works in the current context: the buffer's GPU
        while done < n:
            got = int(handle.read(b.ptr, n - done, base + off + done, off + done))
            if got == 0:
                break
            done += got
    return done


def _cufile_write(handle: Any, b: IOBuffer, off: int, n: int, base: int) -> int:
    done = 0
    with cuda.on_device(b.device):
        while done < n:
            done += int(handle.write(b.ptr, n - done, base + off + done, off + done))
    return done


def _stretch_read(open_stream: Any, b: IOBuffer, off: int, n: int, base: int, piece: int) -> int:
    """Read one stretch in order, ``piece`` bytes a call, on a descriptor of its own (cold reads)."""
    fd, own = open_stream(base + off, n)
    try:
        done = 0
        while done < n:
            want = min(piece, n - done)
            got = posix.pread_full(fd, b.host_slice(off + done, off + done + want), base + off + done)
            done += got
            if got < want:
                break
        return done
    finally:
        if own:
            os.close(fd)


def _split(total: int, piece: int) -> list[tuple[int, int]]:
    return [(start, min(piece, total - start)) for start in range(0, total, piece)]


def stretches(total: int, threads: int, task_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of one contiguous stretch per thread (none under ``task_size``).

    Examples:
        >>> stretches(10, 3, 1)
        [(0, 4), (4, 4), (8, 2)]
        >>> stretches(10, 3, 8)
        [(0, 8), (8, 2)]
    """
    return _split(total, max(task_size, -(-total // threads)))


class LocalFile(BaseFile):
    """A local file opened for parallel reads/writes into host or device buffers.

    Use :func:`gdsstore.open` rather than constructing this directly::

        with gdsstore.open("/data/x.bin") as f:
            n = f.read(cupy.empty(f.size, "u1"))
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "rb") -> None:
        where = "gdsstore.open()"
        self.path = os.fspath(path)
        #: The name trace rows give the file (a temporary file's writer names the file it publishes).
        self.trace_path = self.path
        if check_mode(mode, where) not in _FLAGS:
            raise ValueError(
                f"LocalFile(): opens a file in place ({', '.join(map(repr, _FLAGS))}); mode {mode!r} writes "
                f"through a temporary file: gdsstore.open({self.path!r}, {mode!r})"
            )
        self.mode = mode
        flags = _FLAGS[mode] | getattr(os, "O_CLOEXEC", 0)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if not (flags & os.O_CREAT):
                raise FileNotFoundError(f"{where}: no such file: {self.path!r}") from None
            st = None
        if st is not None and stat_mod.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{where}: {self.path!r} is a directory, not a file")
        self._fd = os.open(self.path, flags, 0o666)
        self._direct_fd = -1
        self._lock = threading.Lock()
        self._cufile_handle: _cufile.CuFileHandle | None = None
        self._cufile_reason: str | None = None
        self._cached_handle = False

    # -- basics -------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.path

    @property
    def url(self) -> str:
        return Path(os.path.abspath(self.path)).as_uri()

    @property
    def size(self) -> int:
        """Current size of the file in bytes."""
        self._check_open("size")
        return os.fstat(self._fd).st_size

    def fileno(self) -> int:
        return self._fd

    def _close(self) -> None:
        h = self._cufile_handle
        if h is not None:
            if self._cached_handle:
                _cufile.handle_cache.release(h)
            else:
                h.close()
        if self._direct_fd >= 0:
            os.close(self._direct_fd)
        os.close(self._fd)

    # -- routing ------------------------------------------------------------------------------------

    def _cufile_probe(self) -> tuple[policy.CuFileProbeResult, _cufile.CuFileHandle | None]:
        """The probe result for this file: driver, then handle registration (once per file object)."""
        with self._lock:
            if self._cufile_handle is not None:
                return self._registered(), self._cufile_handle
            if self._cufile_reason is not None:
                return policy.CuFileProbeResult(False, self._cufile_reason), None
            drv = _cufile.driver_probe()
            if not drv.ok:
                self._cufile_reason = drv.reason
                return drv, None
            if self.mode == "rb":
                got = _cufile.handle_cache.acquire(self.path, os.fstat(self._fd), os.O_RDONLY)
                self._cached_handle = True
            else:
                try:
                    got = _cufile.CuFileHandle(self.path, os.dup(self._fd))
                except _cufile.CuFileError as exc:
                    got = str(exc)
            if isinstance(got, str):
                self._cufile_reason = got
                return policy.CuFileProbeResult(False, got), None
            self._cufile_handle = got
            return self._registered(), got

    @staticmethod
    def _registered() -> policy.CuFileProbeResult:
        return policy.CuFileProbeResult(True, _cufile.registered_reason(), nvfs=_cufile.nvidia_fs_present())

    def _decide(self, buf: IOBuffer, nbytes: int, s: policy.Settings) -> tuple[policy.Decision, Any]:
        probe = None
        handle = None
        if policy.needs_cufile_probe(device=buf.is_device, s=s, nbytes=nbytes):
            probe, handle = self._cufile_probe()
        return policy.decide_local(device=buf.is_device, nbytes=nbytes, cufile=probe, s=s), handle

    def _direct(self) -> int:
        """An O_DIRECT descriptor for the bounce path, or -1 where the filesystem refuses it (tmpfs)."""
        if self._direct_fd == -1 and hasattr(os, "O_DIRECT"):
            flags = os.O_RDONLY if self.mode == "rb" else os.O_RDWR
            try:
                self._direct_fd = os.open(self.path, flags | os.O_DIRECT)
            except OSError:
                self._direct_fd = -2
        return self._direct_fd if self._direct_fd >= 0 else -1

    def _traced(self, op: str, d: policy.Decision, buf: IOBuffer) -> Any:
        return _trace.recorder(op, d.route, d.reason, self.trace_path, buf.device)

    def _read_plan(self, nbytes: int, offset: int, s: policy.Settings) -> policy.ReadPlan:
        """The policy's cut of a POSIX read: residency is probed only for large reads."""
        # Loaded on the first large read: `import gdsstore` stays as light as it was.
        from gdsstore import pagecache
        from gdsstore.engine import storage

        resident = None
        if policy.needs_residency_probe(nbytes, s):
            try:
                resident = pagecache.resident_fraction(self._fd, offset, nbytes)
            except OSError:  # a file system that cannot be mapped: cut as for a warm read
                resident = None
        facts = storage.storage_facts(os.fstat(self._fd).st_dev) if resident is not None else None
        return policy.decide_local_read(nbytes=nbytes, resident=resident, storage=facts, s=s)

    def _open_stream(self, offset: int, nbytes: int) -> tuple[int, bool]:
        """A descriptor of this file with its own readahead state (no ``POSIX_FADV_SEQUENTIAL``:
        measured slower on the virtio disk, see :func:`gdsstore.policy.decide_local_read`).

        Reopens through ``/proc/self/fd`` (the same inode even if the path was renamed since) and
        checks the inode; where that fails, the shared descriptor (right bytes, shared readahead).
        Returns ``(fd, whether the caller closes it)``.
        """
        try:
            fd = os.open(f"/proc/self/fd/{self._fd}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return self._fd, False
        mine, theirs = os.fstat(fd), os.fstat(self._fd)
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            os.close(fd)
            return self._fd, False
        return fd, True

    # -- reads --------------------------------------------------------------------------------------

    def pread(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Start reading ``size`` bytes (default: the buffer's size) at ``offset`` into ``buf``.

        Returns a future of the number of bytes read: fewer than ``size`` only at end of file.
        """
        where = "LocalFile.pread()"
        self._check_open("pread")
        b = as_io_buffer(buf, writable=True, where=where)
        size = check_request(where, b, size, offset)
        s = policy.settings()
        avail = max(0, min(size, os.fstat(self._fd).st_size - offset))
        if avail == 0:
            return completed(0)
        d, handle = self._decide(b, avail, s)
        plan = policy.ReadPlan(s.num_threads, s.task_size, False, "")
        if d.route == "posix" and not (b.is_device and s.direct_io_read):  # O_DIRECT: no page cache
            plan = self._read_plan(avail, offset, s)
            if plan.reason:
                d = policy.Decision(d.route, f"{d.reason}; {plan.reason}")
        on_done = self._traced("read", d, b)
        if d.route == "posix" and b.is_device:
            return self._posix_device_read(b, avail, offset, s, plan, on_done)  # cuts its own stretches
        if d.route == "cufile":
            assert b.device is not None
            cuda.current_event(b.device).synchronize()  # cuFile has no stream: the caller's kernels first
            pieces = _split(avail, s.task_size)
            return run_pieces(
                [partial(_cufile_read, handle, b, off, n, offset) for off, n in pieces],
                [n for _, n in pieces],
                s.num_threads,
                on_done,
            )
        if plan.stretches:
            pieces = stretches(avail, plan.threads, s.task_size)
            return run_pieces(
                [partial(_stretch_read, self._open_stream, b, off, n, offset, plan.piece) for off, n in pieces],
                [n for _, n in pieces],
                s.num_threads,
                on_done,
            )
        pieces = _split(avail, s.task_size)
        fd = self._fd
        return run_pieces(
            [partial(_host_read, fd, b, off, n, offset) for off, n in pieces],
            [n for _, n in pieces],
            s.num_threads,
            on_done,
        )

    def _posix_device_read(
        self,
        b: IOBuffer,
        total: int,
        offset: int,
        s: policy.Settings,
        plan: policy.ReadPlan,
        on_done: Any,
    ) -> Future[int]:
        assert b.device is not None
        device = b.device
        direct = self._direct() if s.direct_io_read else -1  # O_DIRECT reads: bypass the page cache
        slots = bounce.bounce_slots(s)
        # One contiguous stretch per thread (never under task_size), each through one slot: fewer
        # tasks to hand out, and a thread's slot stays in the CPU cache for the whole stretch (faster
        # than shorter stretches: docs/performance.md). A cold plan may ask for fewer threads, each
        # stretch then on a descriptor of its own (its own readahead).
        per_thread = -(-total // plan.threads)
        pieces = _split(total, max(s.task_size, -(-per_thread // slots.size) * slots.size))
        events: list[Any] = []
        ev_lock = threading.Lock()
        after = cuda.current_event(device)  # the copies wait for kernels the caller queued on this memory

        def make(off: int, n: int) -> Any:
            def piece() -> int:
                fd, own = self._open_stream(offset + off, n) if plan.stretches else (self._fd, False)
                try:
                    transfer = bounce.DeviceTransfer(fd, device, b.ptr + off, n, offset + off, slots, direct, after)
                    got, evs = bounce.read_to_device(transfer)
                finally:
                    if own:
                        os.close(fd)
                with ev_lock:
                    events.extend(evs)
                return got

            return piece

        def landed(n: int, exc: BaseException | None) -> None:
            for ev in events:
                if ev is not None:
                    ev.synchronize()  # the data is on the device before the future resolves
            if on_done:
                on_done(n, exc)

        return run_pieces([make(off, n) for off, n in pieces], [n for _, n in pieces], s.num_threads, landed)

    # -- writes -------------------------------------------------------------------------------------

    def pwrite(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Start writing ``size`` bytes (default: all) of ``buf`` at ``offset``; future of bytes written."""
        where = "LocalFile.pwrite()"
        self._check_open("pwrite")
        if not self.writable:
            raise PermissionError(f"{where}: {self.path!r} is open read-only (mode 'rb')")
        b = as_io_buffer(buf, writable=False, where=where)
        size = check_request(where, b, size, offset)
        if size == 0:
            return completed(0)
        s = policy.settings()
        d, handle = self._decide(b, size, s)
        pieces = _split(size, s.task_size)
        on_done = self._traced("write", d, b)
        expected = [n for _, n in pieces]
        fd = self._fd
        # The data the caller's queued kernels are still writing is copied after them, never before.
        after = cuda.current_event(b.device) if b.device is not None else None
        if after is not None and d.route == "cufile":
            after.synchronize()  # cuFile has no stream to order
        if d.route == "cufile":
            return run_pieces(
                [partial(_cufile_write, handle, b, off, n, offset) for off, n in pieces],
                expected,
                s.num_threads,
                on_done,
            )
        if b.is_device:
            assert b.device is not None
            dev = b.device
            slots = bounce.bounce_slots(s)
            direct = self._direct() if s.direct_io_write else -1
            return run_pieces(
                [
                    partial(
                        bounce.write_from_device,
                        bounce.DeviceTransfer(fd, dev, b.ptr + off, n, offset + off, slots, direct, after),
                    )
                    for off, n in pieces
                ],
                expected,
                s.num_threads,
                on_done,
            )
        return run_pieces(
            [partial(_host_write, fd, b, off, n, offset) for off, n in pieces],
            expected,
            s.num_threads,
            on_done,
        )

    def truncate(self, size: int) -> None:
        self._check_open("truncate")
        os.ftruncate(self._fd, size)

    def fsync(self) -> None:
        self._check_open("fsync")
        os.fsync(self._fd)


class LocalWriteFile(BaseFile):
    """A local file opened ``"wb"``, ``"xb"`` or ``"ab"`` by :func:`gdsstore.open`: the bytes go to a
    temporary file beside it (the engine's atomic writer), published whole by a clean
    :meth:`~gdsstore.engine.file.BaseFile.close`; an exception or an interrupt discards them
    (:class:`~gdsstore.engine.file.BaseFile`'s contract).

    ``"ab"`` appends: the temporary file starts as a copy of the file (the kernel copies it), and each
    write lands at the end of what is there, in the order of the calls, as with ``O_APPEND``; so
    ``offset`` must be 0 (open ``"r+b"`` to write at an offset).

    Use :func:`gdsstore.open` rather than constructing this directly::

        with gdsstore.open("/data/log.bin", "ab") as f:
            f.write(b"more")
    """

    def __init__(self, writer: AtomicWriter, mode: str) -> None:
        self.mode = mode
        self._writer = writer
        assert writer.file is not None
        self._file = writer.file
        self._file.trace_path = writer.path
        self._lock = threading.Lock()
        self._pending: set[Future[int]] = set()
        self._end = 0  # "ab": where the next write lands
        if mode == "ab":
            try:
                writer.copy_from(writer.path)
                os.fchmod(self._file.fileno(), stat_mod.S_IMODE(os.stat(writer.path).st_mode))  # the file's own
                self._end = self._file.size
            except FileNotFoundError:
                pass  # a new file: appending starts it
            except BaseException:
                writer.discard()
                raise
        self._guard = WriteGuard()

    @property
    def name(self) -> str:
        return self._writer.path

    @property
    def url(self) -> str:
        return Path(os.path.abspath(self._writer.path)).as_uri()

    @property
    def size(self) -> int:
        """Bytes in the file so far (with ``"ab"``: the old ones and the appended ones)."""
        self._check_open("size")
        return self._file.size

    def fileno(self) -> int:
        """The descriptor of the temporary file that receives the bytes."""
        return self._file.fileno()

    def pwrite(self, buf: Any, size: int | None = None, offset: int = 0) -> Future[int]:
        """Start writing ``size`` bytes (default: all) of ``buf`` at ``offset`` (``"ab"``: at the end)."""
        self._check_open("pwrite")
        if self.mode != "ab":
            return self._track(self._file.pwrite(buf, size, offset))
        where = "LocalWriteFile.pwrite()"
        if offset != 0:
            raise ValueError(
                f"{where}: {self.name!r} is open for appending (mode 'ab'): every write lands at the end of the "
                f"file, so `offset` must be 0, got {offset!r}; open it 'r+b' to write at an offset"
            )
        n = check_request(where, as_io_buffer(buf, writable=False, where=where), size, 0)
        with self._lock:  # each call takes the next stretch: appends land in call order
            at, self._end = self._end, self._end + n
        return self._track(self._file.pwrite(buf, n, at))

    def _track(self, fut: Future[int]) -> Future[int]:
        with self._lock:
            self._pending.add(fut)
        fut.add_done_callback(self._untrack)
        return fut

    def _untrack(self, fut: Future[int]) -> None:
        with self._lock:
            self._pending.discard(fut)

    def _settle(self) -> None:
        """Wait for the writes still running (a write interrupted in ``write()`` goes on in the pool):
        none may reach the descriptor after it is closed, and maybe reused by another file."""
        with self._lock:
            pending = list(self._pending)
        wait(pending)

    def truncate(self, size: int) -> None:
        self._check_open("truncate")
        with self._lock:
            self._file.truncate(size)
            self._end = size

    def fsync(self) -> None:
        self._check_open("fsync")
        self._file.fsync()

    def _close(self) -> None:
        self._settle()
        self._writer.commit()  # fsync (setting), publish, fsync the directory

    def _discard(self) -> None:
        try:
            self._settle()
        finally:
            self._writer.discard()
