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


def test_a_device_is_read_only_up_to_the_limit() -> None:
    with pytest.raises(InputError, match="larger than 1024 bytes"):
        yamlio.read_text(Path("/dev/zero"), "environment file", limit=1024)


def test_a_real_lock_is_well_inside_the_budget(shared_data: Path) -> None:
    doc = yamlio.load_file(shared_data / "real" / "drdmannturb.conda-lock.yml", "lockfile")
    assert len(doc["package"]) > 100
