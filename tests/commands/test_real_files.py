"""Every real file in ../shared/data/real is read, or refused with a message that says what
the file is: locks, exports, nccl-tests logs, collect_env reports, a channel's repodata,
nvidia-smi captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED, run_main

from envtool.cli import main

REAL = SHARED / "data" / "real"
FILES = sorted(
    p.relative_to(REAL).as_posix()
    for p in (REAL.rglob("*") if REAL.is_dir() else ())
    if p.is_file() and p.name != "SOURCES.md"
)
REFUSED = {
    "collect_env/": "PyTorch's collect_env report",
    "rattler-pytorch-channel/": "a conda channel's repodata.json",
    "nvidia-smi/": "an nvidia-smi capture",
}


def test_the_corpus_is_there(shared_data: Path) -> None:
    assert len(FILES) >= 12, FILES


@pytest.mark.parametrize("name", FILES)
def test_each_real_file_is_read_or_named(shared_data: Path, tmp_path: Path, name: str) -> None:
    path = str(shared_data / "real" / name)
    if name.startswith("nccl-tests/"):
        code, out, err = run_main(main, tmp_path, [], ("nccl-tests", path, "--format", "json"))
        assert code == 0 and '"truncated": false' in out, err
        return
    code, out, err = run_main(main, tmp_path, [], ("check", path))
    refused = next((why for prefix, why in REFUSED.items() if name.startswith(prefix)), None)
    if refused is None:
        assert code == 0 and out.startswith("consistent: "), out + err
    else:
        assert code == 2 and err.count("\n") == 1 and refused in err, err
