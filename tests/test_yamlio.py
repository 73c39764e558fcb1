"""envtool/yamlio.py: every YAML and text file envtool reads is bounded while it is read."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from envtool import yamlio
from envtool.errors import InputError


def _bomb() -> str:
    """The "billion laughs": nine levels of nine aliases, a few hundred bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_stops_at_the_value_budget() -> None:
    start = time.monotonic()
    with pytest.raises(InputError, match=r"^x\.yml:1: YAML more than 500000 values"):
        yamlio.loads(_bomb(), "x.yml")
    assert time.monotonic() - start < 10  # bounded (about 0.5 s here), not 100 s


def test_nesting_is_bounded() -> None:
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        yamlio.loads("[" * 100 + "]" * 100, "deep.yml")
    assert yamlio.loads("[" * 10 + "]" * 10, "ok.yml") == [[[[[[[[[[]]]]]]]]]]


def test_a_real_lock_is_well_inside_the_budget(shared_data: Path) -> None:
    doc = yamlio.load_file(shared_data / "real" / "drdmannturb.conda-lock.yml", "lockfile")
    assert len(doc["package"]) > 100


def test_a_device_or_an_oversized_file_is_refused_before_reading(tmp_path: Path) -> None:
    """/dev/zero is a device (refused at once, was read to the 64 MiB bound first); a sparse
    file over the bound is refused by its size; a pipe is still read (``<(cmd)``)."""
    import os

    read_text = yamlio.read_text
    with pytest.raises(InputError, match=r"^/dev/zero: lockfile is a device, not a file$"):
        read_text(Path("/dev/zero"), "lockfile")
    big = tmp_path / "big.yml"
    with big.open("wb") as fh:
        fh.truncate(2**30)
    with pytest.raises(InputError, match=f"^{big}: lockfile is larger than 1024 bytes$"):
        read_text(big, "lockfile", limit=1024)
    read, write = os.pipe()
    os.write(write, b"version: 1\n")
    os.close(write)
    try:
        assert read_text(Path(f"/proc/self/fd/{read}"), "lockfile") == "version: 1\n"
    finally:
        os.close(read)
