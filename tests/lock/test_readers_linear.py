"""Lock readers take time linear in their input; odd metadata is a one-line error (issue 24)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from envtool.errors import InputError
from envtool.lock import explicit, lockfile
from envtool.lock.locked import LockedPackage, _merge, read_entries

SHA = "ab" * 32
URL = "https://files.example/six-1.16.0-py2.py3-none-any.whl"


def test_a_6_mb_pip_continuation_is_read_in_linear_time() -> None:
    # each continued line was added to the text so far, copying it again: 6.4 MB took 248 s
    lines = [f"# pip six @ {URL} \\"] + [f"# pip --hash=sha256:{SHA} \\"] * 75_000
    text = "@EXPLICIT\n" + "\n".join(lines) + f"\n# pip --hash=sha256:{SHA}\n"
    assert len(text) > 6_000_000
    start = time.monotonic()
    (pkg,) = explicit.parse(text, Path("explicit.txt"), "linux-64")
    assert time.monotonic() - start < 3
    assert (pkg.name, pkg.sha256) == ("six", SHA)


def test_an_error_in_a_huge_pip_line_stays_one_short_line() -> None:
    text = "@EXPLICIT\n" + f"# pip six @ {URL} \\\n" + "# pip --bad \\\n" * 50_000 + "# pip x\n"
    with pytest.raises(InputError, match=r"explicit.txt:2: expected '--hash") as caught:
        explicit.parse(text, Path("explicit.txt"), "linux-64")
    assert len(str(caught.value)) < 400 and "\n" not in str(caught.value)


def _entry(category: str) -> dict[str, object]:
    return {
        "name": "six",
        "version": "1.16.0",
        "manager": "conda",
        "platform": "linux-64",
        "dependencies": {"python": ""},
        "url": "https://conda.anaconda.org/conda-forge/noarch/six-1.16.0-pyhd8ed1ab_0.conda",
        "hash": {"md5": "a" * 32, "sha256": SHA},
        "category": category,
        "optional": category != "main",
    }


def test_one_package_in_40000_categories_merges_in_linear_time() -> None:
    # the categories were re-sorted into a new tuple at every entry: 16,000 took 100 s
    one = read_entries(Path("conda-lock.yml"), [_entry("main")])[0]
    parsed = [
        LockedPackage(**{**one.__dict__, "categories": (f"c{i:05d}",)}) for i in range(40_000)
    ]
    start = time.monotonic()
    (pkg,) = _merge(Path("conda-lock.yml"), list(range(40_000)), parsed)
    assert time.monotonic() - start < 1
    assert len(pkg.categories) == 40_000 and pkg.categories[0] == "c00000"
    entries = [_entry(c) for c in ("main", "dev", "b")]
    assert read_entries(Path("l.yml"), entries)[0].categories == ("b", "dev", "main")
    with pytest.raises(InputError, match="duplicate entry for six"):
        read_entries(Path("conda-lock.yml"), [*entries, entries[1]])


LOCK = """version: 1
metadata:
  content_hash:
    linux-64: x
  channels: []
  platforms: [linux-64]
  sources: {sources}
package: []
"""


@pytest.mark.parametrize(
    ("sources", "kind"),
    [
        ("5", "a number"),
        ("abc", "a string"),
        ("{a: 1}", "a mapping"),
        ("true", "true/false"),
        ("[environment.yml, 5]", "a list holding a number"),
        ("[[a], null]", "a list holding a list and null"),
    ],
)
def test_metadata_sources_of_any_other_type_is_a_one_line_error(sources: str, kind: str) -> None:
    # 'sources: 5' was a TypeError (internal error, exit 3); 'abc' became ('a', 'b', 'c')
    with pytest.raises(InputError) as caught:
        lockfile.parse(LOCK.format(sources=sources), Path("conda-lock.yml"))
    assert str(caught.value) == (
        f"conda-lock.yml:7: metadata 'sources' must be a list of file names, not {kind}"
    )


def test_metadata_sources_as_conda_lock_writes_them() -> None:
    for sources, found in (("[environment.yml]", ("environment.yml",)), ("[]", ()), ("", ())):
        lock = lockfile.parse(LOCK.format(sources=sources), Path("conda-lock.yml"))
        assert lock.metadata.sources == found
