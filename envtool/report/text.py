"""Text from nodes and files, made safe to show: every character that is not printable (C0 and
C1 controls, ESC, CR, bidi overrides and other format characters, line and paragraph
separators, lone surrogates) is written as its escape, so no string can move the cursor,
clear the screen, hide text, reorder a line, break a JSON or XML document, or fail to
encode. Tables show it as rich ``Text``, so ``[markup]`` is never interpreted either."""

from __future__ import annotations

from collections.abc import Sequence


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with each unprintable character replaced by its escape (``\\x1b``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def visible_all(texts: Sequence[str]) -> tuple[str, ...]:
    """Each of ``texts`` made visible."""
    return tuple(visible(t) for t in texts)
