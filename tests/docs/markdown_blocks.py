"""Fenced code blocks of a Markdown (MyST) page: the one parser the docs tests share.

Found on ``sys.path`` as pytest puts this folder there for its test modules (no package here).
"""

from __future__ import annotations

import re

__all__ = ["code_blocks"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


def code_blocks(text: str) -> list[tuple[str, int, str]]:
    """``(language, first line number (1-based) of the code, code)`` for every fenced block."""
    blocks: list[tuple[str, int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        lang = m.group("info").strip().split(" ")[0].lstrip(".").split("{")[0].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise AssertionError(f"unclosed code fence at line {i + 1}")
        blocks.append((lang, i + 2, "\n".join(body) + "\n"))
        i = j + 1
    return blocks
