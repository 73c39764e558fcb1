"""Lines read with a bound: a long line is cut and counted, odd bytes marked, binary told."""

from __future__ import annotations

import io

from envtool.joblog.stream import binary_at, lines


def test_lines_across_chunks_and_a_long_line() -> None:
    data = b"a\r\n" + b"x" * 3_000_000 + b"\nlast"
    got = list(lines(io.BytesIO(data[10:]), head=data[:10], cap=100))
    assert [(r.number, r.length, r.cut) for r in got] == [
        (1, 1, False),
        (2, 3_000_000, True),
        (3, 4, False),
    ]
    assert got[0].text == "a" and got[1].text == "x" * 100 and got[2].text == "last"


def test_odd_bytes_are_marked_not_fatal() -> None:
    (line,) = lines(io.BytesIO(b"ok\0 \xff\n"))
    assert line.odd and line.text == "ok\0 \ufffd"


def test_binary_is_told_from_text() -> None:
    assert binary_at(b"") is None and binary_at(b"plain text\x1b[0m\n" * 100) is None
    assert binary_at(b"log\n" + b"\0" * 100) == 4
