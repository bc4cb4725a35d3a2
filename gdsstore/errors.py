"""Every exception gdsstore raises of its own, in one tree.

Each class also subclasses the builtin a user would already catch, as obstore's ``obstore.exceptions``
does: an I/O failure is an :class:`OSError`, a bad setting a :class:`ValueError`. Missing objects and
refused access are the builtins themselves (:class:`FileNotFoundError`, :class:`PermissionError`,
:class:`FileExistsError`, :class:`IsADirectoryError`), as zarr and fsspec expect.

Examples:
    >>> from gdsstore.errors import GDSStoreError, RangeMismatchError, RemoteIOError
    >>> issubclass(RangeMismatchError, RemoteIOError) and issubclass(RemoteIOError, OSError)
    True
    >>> issubclass(RangeMismatchError, GDSStoreError)
    True
"""

from __future__ import annotations

__all__ = [
    "ArchiveChangedError",
    "ChunkDecodeError",
    "CuFileError",
    "CuFileRequiredError",
    "GDSStoreError",
    "GPUUnavailableError",
    "MissingOptionalDependencyError",
    "RangeMismatchError",
    "RangeNotSupportedError",
    "RemoteIOError",
    "SettingError",
    "TransientError",
]


class GDSStoreError(Exception):
    """Base of every gdsstore exception (each also subclasses a builtin)."""


class SettingError(GDSStoreError, ValueError):
    """A setting's value cannot be used; the message names the key, its environment variable and the value."""


class CuFileError(GDSStoreError, OSError):
    """A cuFile call failed; the message names the call, the file and cuFile's status."""


class CuFileRequiredError(GDSStoreError, RuntimeError):
    """``compat_mode="off"`` asks for cuFile but a step of its probe failed."""


class RemoteIOError(GDSStoreError, OSError):
    """A remote operation failed for good (after retries, or for a reason retries cannot fix)."""


class TransientError(GDSStoreError, OSError):
    """A failure worth retrying: retryable status, truncated body, reset connection (internal to retries).

    ``retry_after``: seconds the server asked to wait (``Retry-After`` on a 429/503), or None.
    """

    def __init__(self, *args: object, retry_after: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after = retry_after


class StaleConnectionError(TransientError):
    """The server closed a kept-alive connection as a request went out on it, before any answer: a race every
    HTTP client meets on reused connections (internal to retries: retried at once, on another connection,
    without using up one of ``remote.max_attempts``)."""


class RangeMismatchError(RemoteIOError):
    """A response is not the byte range that was asked for, or the object changed between two ranges."""


class RangeNotSupportedError(RangeMismatchError):
    """The server answered a partial ``Range`` request with the whole object (``200``)."""


class MissingOptionalDependencyError(GDSStoreError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the ``pip install`` that brings it.

    A ``ModuleNotFoundError`` (hence an ``ImportError``), so code that already catches those keeps working.
    """


class GPUUnavailableError(GDSStoreError, RuntimeError):
    """CuPy imports but no CUDA device can be used: GPU buffers cannot be allocated here."""


class ChunkDecodeError(GDSStoreError, ValueError):
    """An archive's stored chunk is corrupt or truncated; the message names its file (or URL) and offset."""


class ArchiveChangedError(GDSStoreError, OSError):
    """A file that virtual references point at changed (size, modification time or ETag) since they were opened."""
