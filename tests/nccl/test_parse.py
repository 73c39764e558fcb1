"""envtool/nccl/ against real all_reduce_perf logs, envtool's own layout, and garbage."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_main

from envtool.cli import main
from envtool.errors import InputError
from envtool.nccl import model
from envtool.nccl.model import NcclDevice, NcclResult, NcclRow, NcclRun
from envtool.nccl.parse import parse, parse_size
from envtool.report import nccl_text as nccl_format
from envtool_node import perf

MiB, GiB = 2**20, 2**30

# Figures stated in ../shared/data/real/SOURCES.md (and read off the files).
REAL: dict[str, dict[str, Any]] = {
    "issue290-8xh100-single-node-nvls.txt": dict(
        sizes=6, first=128 * MiB, last=4 * GiB, nranks=8, version=None,
        peak_oop=473.60, peak=476.53, avg=439.369, host="node005", name="NVIDIA H100 80GB HBM3",
    ),
    "orcd-2node-16xb200-ndr-ib.txt": dict(
        sizes=8, first=1 * MiB, last=16 * GiB, nranks=16, version="2.29.2+cuda13.1",
        peak_oop=239.87, peak=239.87, avg=109.041, host="node5500", name="NVIDIA B200",
    ),
    "autodl-2x2080ti-pcie-nop2p.txt": dict(
        sizes=28, first=8, last=1 * GiB, nranks=2, version=None,
        peak_oop=4.00, peak=4.00, avg=2.05774, host="autodl-container-xxxxx",
        name="NVIDIA GeForce RTX 2080 Ti",
    ),
    "gcp-a3mega-2node-16xh100-tcpxo.txt": dict(
        sizes=31, first=8, last=8 * GiB, nranks=16, version=None,
        peak_oop=338.82, peak=338.82, avg=70.742, host="ztan-mig-235z",
        name="NVIDIA H100 80GB HBM3",
    ),
}  # fmt: skip


def _real(shared_data: Path, name: str) -> tuple[str, NcclRun]:
    text = (shared_data / "real" / "nccl-tests" / name).read_text()
    return text, parse(text, name)


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_log_figures(shared_data: Path, name: str) -> None:
    want = REAL[name]
    _, run = _real(shared_data, name)
    sizes = [row.size for row in run.rows]
    assert (len(sizes), sizes[0], sizes[-1]) == (want["sizes"], want["first"], want["last"])
    assert sizes == sorted(sizes)
    assert run.nranks == want["nranks"] == len(run.devices)
    assert [d.rank for d in run.devices] == list(range(want["nranks"]))
    assert (run.devices[0].host, run.devices[0].name) == (want["host"], want["name"])
    assert run.nccl_version == want["version"]
    assert run.avg_busbw == want["avg"]
    assert run.out_of_bounds == 0
    assert model.peak_busbw(run.rows, in_place=False) == want["peak_oop"]
    assert model.peak_busbw(run.rows) == want["peak"]
    assert run.param_map["nThread"] == "1" and run.param_map["step"].endswith("(factor)")
    assert int(run.param_map["minBytes"]) == want["first"]
    assert all(r.type == "float" and r.redop == "sum" and r.root == -1 for r in run.rows)
    assert all(r.oop.wrong == 0 and r.ip.wrong == 0 for r in run.rows)
    assert all(r.count * 4 == r.size for r in run.rows)  # float32


def test_real_log_details(shared_data: Path) -> None:
    _, gcp = _real(shared_data, "gcp-a3mega-2node-16xh100-tcpxo.txt")
    assert {d.host for d in gcp.devices} == {"ztan-mig-235z", "ztan-mig-gq73"}
    assert gcp.devices[8] == NcclDevice(
        8, 0, 6733, "ztan-mig-gq73", 0, "0000:04:00", gcp.devices[8].name
    )
    _, h100 = _real(shared_data, "issue290-8xh100-single-node-nvls.txt")
    assert h100.devices[7].bus == "0xc1" and h100.param_map["iters"] == "2"
    assert len(model.large_rows(h100.rows)) == 5  # 128 MiB is below the 256 MiB line
    assert h100.rows[-1].oop == NcclResult(15870.0, 270.63, 473.60, 0)
    _, autodl = _real(shared_data, "autodl-2x2080ti-pcie-nop2p.txt")
    assert {r.oop.busbw for r in model.large_rows(autodl.rows)} == {4.00}  # the PCIe plateau
    assert model.peak_busbw(autodl.rows, min_bytes=64 * GiB) is None


@pytest.mark.parametrize("name", sorted(REAL))
def test_busbw_is_algbw_times_2_n_minus_1_over_n(shared_data: Path, name: str) -> None:
    _, run = _real(shared_data, name)
    assert run.nranks is not None
    factor = 2 * (run.nranks - 1) / run.nranks
    for row in run.rows:
        for part in (row.oop, row.ip):
            # both printed with %6.2f: each is off by at most 0.005 from the exact value
            expected = perf.busbw(part.algbw, run.nranks)
            assert abs(part.busbw - expected) <= 0.005 + 0.005 * factor + 1e-9, row


@pytest.mark.parametrize("name", sorted(REAL))
def test_algbw_is_size_over_time(shared_data: Path, name: str) -> None:
    _, run = _real(shared_data, name)
    for row in run.rows:
        for part in (row.oop, row.ip):
            half_step = 0.5 if part.time_us >= 10000 else 0.05 if part.time_us >= 100 else 0.005
            slack = 0.005 + part.algbw * half_step / part.time_us + 1e-9
            assert abs(perf.algbw(row.size, part.time_us) - part.algbw) <= slack, row


@pytest.mark.parametrize("name", sorted(REAL))
def test_tool_average_is_the_mean_over_both_placements(shared_data: Path, name: str) -> None:
    _, run = _real(shared_data, name)
    assert run.avg_busbw is not None
    assert abs(model.nccl_avg_busbw(run.rows) - run.avg_busbw) <= 0.005


@pytest.mark.parametrize("name", sorted(REAL))
def test_format_reproduces_real_rows_byte_for_byte(shared_data: Path, name: str) -> None:
    text, run = _real(shared_data, name)
    real_rows = [line for line in text.splitlines() if line.startswith(" ")]
    assert [nccl_format.format_row(row) for row in run.rows] == real_rows
    again = parse(nccl_format.format_run(run), "again")
    assert again.rows == run.rows and again.devices == run.devices
    assert (again.params, again.nranks, again.nccl_version) == (
        run.params,
        run.nranks,
        run.nccl_version,
    )
    assert (again.avg_busbw, again.out_of_bounds) == (run.avg_busbw, run.out_of_bounds)


def test_format_reproduces_an_untouched_real_log(shared_data: Path) -> None:
    # orcd is copied byte for byte from a Slurm log: header blanks and trailing '#' included
    text, run = _real(shared_data, "orcd-2node-16xb200-ndr-ib.txt")
    assert nccl_format.format_run(run) == text


def test_summary_is_json_ready(shared_data: Path) -> None:
    path = shared_data / "real" / "nccl-tests" / "issue290-8xh100-single-node-nvls.txt"
    code, out, err = run_main(main, REPO, [], ("nccl-tests", str(path), "--format", "json"))
    assert code == 0, err
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert doc["peak_busbw"] == 476.53 and doc["peak_busbw_oop"] == 473.60
    assert doc["avg_busbw"] == 439.369 and doc["nranks"] == 8 and doc["large_sizes"] == 5
    assert len(doc["rows"]) == 6 and len(doc["devices"]) == 8
    assert doc["rows"][0]["oop"] == {
        "time_us": 613.3, "algbw": 218.85, "busbw": 382.99, "wrong": 0,
        "max_error": None, "per_iter": None,  # columns of other nccl-tests eras
    }  # fmt: skip
    assert doc["wrong_total"] == 0 and doc["params"]["nGpus"] == "8"
    assert doc["truncated"] is False and doc["skipped_lines"] == 0


# ---------------------------------------------------------------- synthetic


def _row(size: int, time_us: float, nranks: int, wrong: int | None = 0) -> NcclRow:
    algbw = round(perf.algbw(size, time_us), 2)
    part = NcclResult(time_us, algbw, round(perf.busbw(algbw, nranks), 2), wrong)
    return NcclRow(size, size // 4, "float", "sum", -1, part, part)


DEVICES = (
    NcclDevice(0, 0, 4242, "gpu01", 0, "0x1b", "NVIDIA H100 80GB HBM3"),
    NcclDevice(1, 0, 4243, "gpu01", 1, "cpu", "cpu"),
)


def test_format_rows_round_trips() -> None:
    rows = [_row(8, 12.25, 2), _row(1 << 20, 279.5, 2, None), _row(17 << 30, 134289.0, 2, 3)]
    text = nccl_format.format_rows(rows, {"iters": 2}, devices=DEVICES, nccl_version="2.21.5")
    run = parse(text, "mine")
    assert run.rows == tuple(rows) and run.devices == DEVICES and run.nranks == 2
    assert run.nccl_version == "2.21.5" and run.param_map["iters"] == "2"
    assert run.param_map["maxBytes"] == str(17 << 30) and run.param_map["step"] == "131072(factor)"
    assert run.out_of_bounds == 2  # the checks (a size, a placement) that found wrong elements
    assert run.avg_busbw == float(f"{model.nccl_avg_busbw(rows):g}")
    assert "    N/A" in text.splitlines()[-5]


def test_format_rows_layout_matches_nccl_tests() -> None:
    part = NcclResult(568.7, 1.84, 3.46, 0)  # orcd's first row, out-of-place
    text = nccl_format.format_rows([NcclRow(1048576, 262144, "float", "sum", -1, part, part)], {})
    lines = text.splitlines()
    assert lines[0] == (
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0"
    )
    assert lines[1] == "#"  # no devices given: no "# Using devices" either
    assert lines[2].endswith("in-place          ") and len(lines[2]) == 116
    assert lines[3].split() == ["#", "size", "count", "type", "redop", "root"] + [
        "time", "algbw", "busbw", "#wrong"
    ] * 2  # fmt: skip
    assert lines[5] == (
        "     1048576        262144     float     sum      -1    568.7    1.84    3.46      0"
        "    568.7    1.84    3.46      0"
    )
    # envtool's own run: the trailer nccl-tests would print, computed from the rows
    assert lines[6:] == ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 3.46 ", "#"]


def test_format_refuses_what_would_not_parse_back() -> None:
    bad = NcclRow(8, 2, "float 16", "sum", -1, NcclResult(1, 0, 0, 0), NcclResult(1, 0, 0, 0))
    with pytest.raises(ValueError):
        nccl_format.format_row(bad)
    nan = NcclResult(float("nan"), 0, 0, 0)
    with pytest.raises(ValueError):
        nccl_format.format_row(NcclRow(8, 2, "float", "sum", -1, nan, nan))
    with pytest.raises(ValueError):
        nccl_format.format_rows([_row(8, 1.0, 2)], {"iters": "twenty"})


def test_random_rows_reach_a_fixed_point() -> None:
    # a property test without hypothesis (not in the venv): seeded, so reproducible
    rng = random.Random(20250303)
    for _ in range(200):
        nranks = rng.randint(1, 64)
        rows = [
            NcclRow(
                size, size // 4, rng.choice(["float", "half", "bfloat16", "int8"]),
                rng.choice(["sum", "prod", "max", "min", "avg"]), rng.randint(-1, nranks - 1),
                *(NcclResult(rng.uniform(0.01, 5e6), rng.uniform(0, 999.99),
                             rng.uniform(0, 999.99), rng.choice([None, 0, rng.randint(0, 10**9)]))
                  for _ in range(2)),
            )
            for size in sorted(rng.sample(range(0, 1 << 40), rng.randint(1, 8)))
        ]  # fmt: skip
        once = parse(nccl_format.format_rows(rows, {}), "random")
        for got, sent in zip(once.rows, rows, strict=True):
            assert (got.size, got.count, got.type, got.redop, got.root) == (
                sent.size, sent.count, sent.type, sent.redop, sent.root,
            )  # fmt: skip
            for a, b in ((got.oop, sent.oop), (got.ip, sent.ip)):
                assert a.wrong == b.wrong and abs(a.algbw - b.algbw) <= 0.005 + 1e-9
                assert abs(a.time_us - b.time_us) <= 0.5 and abs(a.busbw - b.busbw) <= 0.005 + 1e-9
        twice = parse(nccl_format.format_run(once), "again")
        assert twice.rows == once.rows and twice.avg_busbw == once.avg_busbw


def test_tolerated_extras() -> None:
    row = nccl_format.format_row(_row(8, 12.25, 2))
    text = "\r\n".join(
        [
            "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807",
            "# Collective test starting: all_reduce_perf",
            "gpu01:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
            row,
            row.replace("      0", "    N/A") + "  2025-03-03 10:00:00",
            "",
            "# Avg bus bandwidth    : 0 ",
        ]
    )
    run = parse(text)
    assert run.nccl_version == "2.28.7" and len(run.rows) == 2 and run.source == "<text>"
    assert run.rows[1].oop.wrong is None and run.nranks is None and run.params == ()
    assert parse("x [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + row).nccl_version == (
        "2.21.5+cuda12.4"
    )
    big_wrong = row[: -len("      0")] + "  1e+06"  # nccl-tests prints #wrong with %5g
    assert parse(big_wrong).rows[0].ip.wrong == 1_000_000


def test_probe_text_output_parses() -> None:
    from envtool.protocol.documents import read_allreduce

    part = {"time_us": 150.25, "algbw": 0.0034, "busbw": 0.0034, "wrong": 0}
    doc = {
        "schema": "envtool.allreduce/1", "backend": "gloo", "nranks": 2,
        "params": {"minbytes": 512, "maxbytes": 512, "stepfactor": 2, "iters": 20,
                   "warmup_iters": 5},
        "devices": [{"rank": r, "pid": 7, "host": "n1", "device": 0, "name": "cpu", "bus": "cpu"}
                    for r in range(2)],
        "rows": [{"size": 512, "count": 128, "type": "float", "redop": "sum", "root": -1,
                  "oop": part, "ip": part}],
        "wrong_total": 0, "avg_busbw": 0.0034,
    }  # fmt: skip
    run = parse(nccl_format.format_allreduce(read_allreduce(doc)), "probe")
    assert run.nranks == 2 and run.rows[0].oop == NcclResult(150.2, 0.0, 0.0, 0)
    assert run.avg_busbw == 0.0034 and run.param_map["minBytes"] == "512"


# ---------------------------------------------------------------- formulas and sizes


def test_bandwidth_formulas() -> None:
    assert perf.algbw(10**9, 1e6) == 1.0  # decimal GB per second
    assert perf.busbw(100.0, 8) == 175.0
    assert perf.busbw(100.0, 2) == 100.0
    assert perf.busbw(100.0, 1) == 0.0
    with pytest.raises(ValueError):
        perf.busbw(1.0, 0)
    with pytest.raises(ValueError):
        perf.algbw(8, 0.0)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("256M", 256 * MiB),
        ("8", 8),
        ("64K", 65536),
        ("1g", GiB),
        ("16GiB", 16 * GiB),
        (" 2MB ", 2 * MiB),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "-1M", "1.5G", "12Q", "1 0"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(InputError, match="not a size"):
        parse_size(text)


# ---------------------------------------------------------------- garbage

HEADER = (
    "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 "
    "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
)
ROW = "           8             2     float     sum      -1    12.25    0.00    0.00      0    12.00    0.00    0.00      0\n"  # noqa: E501


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("", 1, "empty input"),
        ("\n  \n\n", 1, "empty input"),
        ("\x00\x01\xff\xfe\x89PNG\r\n\x1a\n", 2, "no nccl-tests data rows (2 of 2 lines"),
        (HEADER, 3, "no nccl-tests data rows"),
        (HEADER + "#\n# Out of bounds values : 0 OK\n", 5, "no nccl-tests data rows"),
        ("The quick brown fox\njumps over the lazy dog\n", 2, "no nccl-tests data rows"),
        (HEADER + ROW + ROW[:60] + "\n" + ROW, 5, "row has 6 fields, expected 13"),
        (HEADER + ROW[:60] + "\n" + ROW, 4, "row has 6 fields, expected one of 12, 13, 21"),
        (HEADER + ROW.replace("12.25", "12,25"), 4, "time is not a non-negative number"),
        (HEADER + ROW.replace("12.25", "nan"), 4, "time is not a non-negative number"),
        (HEADER + ROW.replace("   12.00", "-12.00"), 4, "time is not a non-negative number"),
        (HEADER + ROW.replace("    0\n", " 0.5\n"), 4, "#wrong is not a whole count"),
        (HEADER + ROW.replace("    0\n", "1e999\n"), 4, "#wrong is not a non-negative number"),
        (HEADER + ROW.replace("12.25", "1e400"), 4, "time is not a non-negative number"),
        (HEADER + ROW.replace("-1", "x1"), 4, "root is not an integer"),
        (HEADER + "#  Rank  0 Group  0 Pid  1 on h device x\n" + ROW, 4, "bad device line"),
        (HEADER + ROW + "# Avg bus bandwidth    : lots\n", 5, "Avg bus bandwidth is not"),
        (HEADER + ROW + "# Avg bus bandwidth    :\n", 5, "no value after"),
        (HEADER + ROW + HEADER + ROW, 5, "a second all_reduce run (the first starts at line 1)"),
        ("# nThread\n" + ROW, 1, "bad '# nThread' header"),
        (ROW + "# Avg bus bandwidth    : 1 \n" + ROW, 3, "a row after '# Avg bus bandwidth'"),
        (ROW + "# Avg bus bandwidth : 1\n# Avg bus bandwidth : 2\n", 3, "a second 'Avg bus"),
        (ROW + "# Out of bounds values : lots\n", 2, "out-of-bounds count is not an integer"),
    ],
)
def test_garbage_is_one_line_input_error(text: str, line: int, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse(text, "log.txt")
    error = str(caught.value)
    assert "\n" not in error and error.startswith(f"log.txt:{line}: ")
    assert message in error
    assert caught.value.exit_code == 2


def test_damaged_real_log_names_the_line(shared_data: Path) -> None:
    text, _ = _real(shared_data, "issue290-8xh100-single-node-nvls.txt")
    lines = text.splitlines(keepends=True)
    assert lines[16].startswith("   268435456")
    damaged = "".join(lines[:16]) + lines[16][:70] + "\n" + "".join(lines[17:])
    with pytest.raises(InputError, match=r"^issue290\.txt:17: row has 7 fields"):
        parse(damaged, "issue290.txt")
    with pytest.raises(InputError, match=r"^cut\.txt:14: no nccl-tests data rows"):
        parse("".join(lines[:14]), "cut.txt")


def test_cli_reports_peak_apart_from_the_average(shared_data: Path, tmp_path: Path) -> None:
    from conftest import run_main

    from envtool.cli import main

    log = shared_data / "real" / "nccl-tests" / "issue290-8xh100-single-node-nvls.txt"
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log)))
    assert code == 0
    assert "peak busbw 476.53 GB/s at 4G (sizes >= 256M: bandwidth-bound)" in out
    assert "439.369" in out
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log), "--format", "json"))
    assert code == 0 and '"peak_busbw_oop": 473.6' in out
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"\x00\xff garbage")
    code, _, err = run_main(main, tmp_path, [], ("nccl-tests", str(junk)))
    assert code == 2 and err.count("\n") == 1


def test_cli_exits_1_when_the_log_counted_wrong_elements(shared_data: Path, tmp_path: Path) -> None:
    from conftest import run_main

    from envtool.cli import main

    text = (
        shared_data / "real" / "nccl-tests" / "issue290-8xh100-single-node-nvls.txt"
    ).read_text()
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("4294967296"))
    bad = (
        row[: row.rstrip().rfind(" ")]
        + " "
        + "3".rjust(len(row.rstrip()) - row.rstrip().rfind(" ") - 1)
    )
    log = tmp_path / "wrong.txt"
    log.write_text(text.replace(row, bad))
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log), "--format", "json"))
    assert code == 1 and '"wrong_total": 3' in out
