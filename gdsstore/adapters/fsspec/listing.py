"""What the ``gds`` filesystem's ``info``, ``ls`` and ``find`` answer, from the engine's listings.

Object stores have no directory objects: a prefix with keys under it is a directory, and one listing
of a whole prefix (sizes included) replaces a walk of listings and a HEAD per entry.
"""

from __future__ import annotations

from typing import Any

from gdsstore.engine.backend import Backend, ObjectInfo


def info_dict(name: str, oi: ObjectInfo) -> dict[str, Any]:
    """fsspec's info of one entry: ``{"name", "size", "type"}`` (``mtime`` where known)."""
    out: dict[str, Any] = {"name": name, "size": oi.size if oi.type == "file" else 0, "type": oi.type}
    if oi.mtime is not None:
        out["mtime"] = oi.mtime
    return out


def path_info(backend: Backend, key: str, path: str) -> dict[str, Any]:
    """The info of ``path`` (``key`` of ``backend``); a prefix with keys under it is a directory."""
    try:
        oi = backend.info(key)
    except FileNotFoundError:
        if key and backend.listable and next(iter(backend.list_dir(key.rstrip("/"))), None) is not None:
            return {"name": path, "size": 0, "type": "directory"}
        raise FileNotFoundError(f"GDSFileSystem.info(): no such file or directory: {path!r}") from None
    return info_dict(path, oi)


def dir_entries(backend: Backend, key: str, path: str, detail: bool) -> list[Any]:
    """The entries directly under the directory ``path``: infos (``detail``) or paths; the sizes and
    types come from the listing itself (S3: no HEAD per entry). Empty for a file or an empty directory."""
    if not backend.listable:
        return []
    prefix = path if path.endswith("/") or not path else path + "/"
    if detail:
        return [info_dict(prefix + oi.key.rpartition("/")[2], oi) for oi in backend.list_dir_info(key.rstrip("/"))]
    names = [n.rstrip("/") for n in backend.list_dir(key.rstrip("/"))]
    return [prefix + n for n in names if n]


def find_in_listing(
    backend: Backend, key: str, path: str, maxdepth: int | None, withdirs: bool, detail: bool
) -> dict[str, Any]:
    """fsspec's ``find`` of the directory ``path`` (``key`` of ``backend``) from one flat listing of
    its prefix: ``{path: info}``, directories included with ``withdirs``; empty when nothing is under it."""
    prefix = path if path.endswith("/") or not path else path + "/"
    path = path.rstrip("/")
    key = key.rstrip("/")
    files: list[str] = []
    infos: dict[str, ObjectInfo] = {}
    dirs: set[str] = set()
    # One listing that carries the sizes (S3: no HEAD per object when detail is asked for).
    listing = backend.list_info if detail else backend.list
    for entry in listing(f"{key}/" if key else ""):
        entry_key = entry.key if isinstance(entry, ObjectInfo) else entry
        parts = (entry_key[len(key) + 1 :] if key else entry_key).split("/")
        if maxdepth is None or len(parts) <= maxdepth:
            files.append(prefix + "/".join(parts))
            if isinstance(entry, ObjectInfo):
                infos[files[-1]] = entry
        if withdirs:
            top = len(parts) - 1 if maxdepth is None else min(len(parts) - 1, maxdepth)
            dirs.update(prefix + "/".join(parts[: i + 1]) for i in range(top))
    out: dict[str, Any] = {}
    if not files and not dirs:
        return out
    if withdirs and key:
        out[path] = {"name": path, "size": 0, "type": "directory"}
    for d in dirs:
        out[d] = {"name": d, "size": 0, "type": "directory"}
    if detail:
        out.update({f: info_dict(f, infos[f]) for f in files})
    else:
        out.update({f: {} for f in files})
    return out
