"""Heading anchors as Python-Markdown's ``toc`` extension makes them (its ``slugify``)."""

from __future__ import annotations

import re
import unicodedata


def slugify(title: str) -> str:
    """``"5. libcufile ≥ 1.16 and /proc/modules"`` -> ``"5-libcufile-116-and-procmodules"``."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_title).strip().lower())
