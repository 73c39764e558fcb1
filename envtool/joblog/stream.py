"""A log's lines, read in one pass with a bound: at most ``CHUNK`` bytes read at a time and
``LINE_CAP`` bytes kept of any line (the rest of a longer line is counted, not kept), so a
many-GB log or a 100 MB line costs the same memory as a small one. Bytes that are not UTF-8
become U+FFFD; NUL and other control characters stay in the text, to be shown escaped."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 1 << 20  # bytes read at once
LINE_CAP = 64 * 1024  # bytes kept of one line
SNIFF = 64 * 1024  # bytes of the head looked at to tell a log from binary data
_BINARY = 0.3  # more than this share of the head NUL, control or not UTF-8: not a log


@dataclass(frozen=True)
class RawLine:
    """One line: its 1-based number, its text (at most LINE_CAP bytes of it), its length."""

    number: int
    text: str
    length: int  # bytes, without the newline
    odd: bool  # it held NUL bytes or bytes that are not UTF-8

    @property
    def cut(self) -> bool:
        """Whether the line was longer than what was kept of it."""
        return self.length > LINE_CAP


def binary_at(head: bytes) -> int | None:
    """The offset of the first odd byte when ``head`` reads as binary data, not text."""
    if not head:
        return None
    text = head.decode("utf-8", "replace")
    odd = [
        i for i, ch in enumerate(text) if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b")
    ]
    if len(odd) <= _BINARY * len(text):
        return None
    return len(text[: odd[0]].encode("utf-8", "replace"))


def _line(number: int, data: bytes, length: int) -> RawLine:
    if data.endswith(b"\r"):
        data, length = data[:-1], length - 1
    text = data.decode("utf-8", "replace")
    return RawLine(number, text, length, b"\0" in data or "\ufffd" in text)


def lines(stream: BinaryIO, head: bytes = b"", cap: int = LINE_CAP) -> Iterator[RawLine]:
    """Every line of ``head`` (what was read of the stream already) and then ``stream`` (the
    end of the last one is not a line)."""
    number, kept, length = 0, b"", 0
    for chunk in itertools.chain((head,), iter(lambda: stream.read(CHUNK), b"")):
        parts = chunk.split(b"\n")
        for part in parts[:-1]:
            number += 1
            whole = kept + part[: max(cap - len(kept), 0)]
            yield _line(number, whole, length + len(part))
            kept, length = b"", 0
        tail = parts[-1]
        if len(kept) < cap:
            kept += tail[: cap - len(kept)]
        length += len(tail)
    if length:
        yield _line(number + 1, kept, length)
