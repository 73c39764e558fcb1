"""``--plot FILE``: a PNG of busbw against message size, from nccl-tests logs and the probe."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from conftest import REPO, require, run_main

from envtool.cli import main


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        require(False, "matplotlib is not installed (pip install 'envtool[plot]')")


def test_real_nccl_tests_log_is_plotted(shared_data: Path, tmp_path: Path) -> None:
    _matplotlib()
    log = shared_data / "real" / "nccl-tests" / "issue290-8xh100-single-node-nvls.txt"
    png = tmp_path / "busbw.png"
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(log), "--plot", str(png)))
    assert code == 0, err
    assert "476.53" in out and f"wrote {png}" in err
    assert _png_size(png) == (960, 540)  # 8 x 4.5 in at 120 dpi
    assert not list(tmp_path.glob("*.tmp"))


def test_probe_plot_of_a_gloo_all_reduce(tmp_path: Path) -> None:
    _matplotlib()
    require("torch" in sys.modules or _has_torch(), "torch is not installed")
    png = tmp_path / "probe.png"
    code, out, err = run_main(
        main,
        REPO,
        [],
        (
            "probe",
            "--prefix",
            sys.prefix,
            "-b",
            "1K",
            "-e",
            "64K",
            "-f",
            "4",
            "-n",
            "2",
            "-w",
            "1",
            "--plot",
            str(png),
        ),
    )
    assert code == 0, out + err
    assert _png_size(png)[0] == 960


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_plot_needs_the_all_reduce_and_rows(tmp_path: Path) -> None:
    code, _, err = run_main(
        main, tmp_path, [], ("probe", "--no-allreduce", "--plot", str(tmp_path / "x.png"))
    )
    assert code == 2 and "--no-allreduce" in err
    empty = tmp_path / "empty.log"
    empty.write_text("# nThread 1 nGpus 1\n#\n")
    code, _, err = run_main(
        main, tmp_path, [], ("nccl-tests", str(empty), "--plot", str(tmp_path / "y.png"))
    )
    assert code in (1, 2) and "Traceback" not in err and not (tmp_path / "y.png").exists()


def test_without_matplotlib_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envtool.errors import InputError
    from envtool.nccl import parse as nccl
    from envtool.report import plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like
    row = f"{1024:12d}  {256:12d}  float  sum  -1" + "  10.0  0.10  0.10  0" * 2
    run = nccl.parse(row + "\n", "x")
    with pytest.raises(InputError, match=r"envtool\[plot\]"):
        plot.busbw_png(run, tmp_path / "z.png", 1 << 28)
