"""What the block device under a local file is (NVMe, virtio, rotational), read once per device.

The policy cuts cold reads by it (``gdsstore.policy.decide_local_read``): a rotational disk, or
a virtual disk that says it is one, serves one sequential stream better than many interleaved
pieces. Facts come from sysfs (``/sys/dev/block/MAJ:MIN``, the whole disk for a partition) and are
cached per ``st_dev``; a file on no block device (tmpfs, overlay, NFS, FUSE) gives kind
``"unknown"``.

Examples:
    >>> import os
    >>> facts = storage_facts(os.stat(".").st_dev)
    >>> facts.kind in ("nvme", "ssd", "rotational", "unknown")
    True
"""

from __future__ import annotations

import functools
import os

# The facts are an input of the policy's decisions, so their type lives there (as CuFileProbeResult does).
from gdsstore.policy import StorageFacts, StorageKind

__all__ = ["StorageFacts", "StorageKind", "facts_from_sysfs", "read_text", "storage_facts"]

_SYS_DEV_BLOCK = "/sys/dev/block"


def read_text(path: str) -> str | None:
    """The text of a small file such as a sysfs or procfs entry, stripped; ``None`` where it cannot be read
    (a kernel without the entry, no permission)."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def facts_from_sysfs(block_dir: str) -> StorageFacts:
    """Facts of the block device whose sysfs folder is ``block_dir`` (a partition's: its disk's).

    Args:
        block_dir: e.g. ``/sys/dev/block/254:0`` (a link to ``/sys/devices/.../block/vda``).

    Returns:
        The facts; kind ``"unknown"`` when the folder has no ``queue/rotational``.
    """
    real = os.path.realpath(block_dir)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)  # .../block/vda/vda1 -> .../block/vda
    name = os.path.basename(real)
    rotational = read_text(os.path.join(real, "queue", "rotational"))
    if rotational is None:
        return StorageFacts("unknown", name)
    virtio = "/virtio" in real
    kind: StorageKind
    if rotational == "1":
        kind = "rotational"
    elif name.startswith("nvme"):
        kind = "nvme"
    else:
        kind = "ssd"
    return StorageFacts(kind, name, virtio)


@functools.cache
def storage_facts(st_dev: int) -> StorageFacts:
    """Facts of the device ``st_dev`` (``os.stat(path).st_dev``), read from sysfs once per device.

    Args:
        st_dev: the device number of a file.

    Returns:
        The facts; kind ``"unknown"`` for anonymous devices (major 0: tmpfs, overlay, NFS) or
        where sysfs is not mounted.
    """
    major, minor = os.major(st_dev), os.minor(st_dev)
    if major == 0:
        return StorageFacts("unknown")
    return facts_from_sysfs(f"{_SYS_DEV_BLOCK}/{major}:{minor}")
