"""The archive reader's errors (each also the builtin a user would catch, as in :mod:`gdsstore.errors`)."""

from __future__ import annotations

from gdsstore.errors import GDSStoreError

__all__ = ["ArchiveChangedError", "ChunkDecodeError"]


class ChunkDecodeError(GDSStoreError, ValueError):
    """A stored chunk is corrupt or truncated; the message names its file and offset."""


class ArchiveChangedError(GDSStoreError, OSError):
    """A referenced file changed (size or modification time) since its references were made."""
