"""Every nccl-tests collective named; logs of several collectives read (issue 25, item 4).

The fixtures are built here from two real logs in ../shared/data (their SOURCES.md):

- ``gpu/nccl-tests-all_reduce_perf-h100-1gpu.txt``: nccl-tests 2.19.6 exactly as it prints a
  run (one rank), from ``# nccl-tests version`` and ``# Collective test starting:
  all_reduce_perf`` to ``# Collective test concluded: all_reduce_perf`` (``writeDeviceReport``
  and ``writeResultFooter`` in NVIDIA/nccl-tests src/util.cu; the two name lines since commit
  dafb704, v2.16.7).
- ``real/nccl-tests/orcd-2node-16xb200-ndr-ib.txt``: 16 ranks, an nccl-tests that prints no
  name line; the all_reduce run of a real Slurm log that ran ten collectives one after another.

Another collective's run is that log as the other binary prints the same sweep: its name on
the two name lines, and in each row the count, redop, root, busbw and in-place #wrong as
``src/<name>.cu`` computes them (``*GetCollByteCount``: the per-rank count, rounded down to
16 bytes, and the size it gives; ``*GetBw``: busbw from algbw; the op's name or ``none``, the
root 0 or -1 from ``*RunTest``; ``reportErrors = in_place ? 0 : 1`` for sendrecv and
alltoall; rows laid out by ``writeBenchmarkLinePreamble``/``Body``; nccl-tests commit
a0b82b2). Sizes, times, algbw, the header, devices and trailer stay the real ones; each
field keeps its real right edge. The results were checked by hand against the other runs of
that real Slurm log (mit-orcd/orcd-benchmarks, b200-nodes/out-nccl-2node/
nccl-2node-5500-5501-19791438.out: e.g. all_gather ``1048576 16384 float none -1``, reduce
root 0, sendrecv's in-place ``N/A``, hypercube's empty redop). A log of several runs is the
runs concatenated, as a batch script running the binaries one by one writes them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main
from envtool.commands import verify
from envtool.errors import InputError
from envtool.nccl import collective
from envtool.nccl.parse import parse
from envtool.report.nccl_summary import collective_lines, wrong_line
from envtool.report.nccl_text import format_run

H100 = ("gpu", "nccl-tests-all_reduce_perf-h100-1gpu.txt")  # 2.19.6, named, one rank
ORCD = ("real", "nccl-tests", "orcd-2node-16xb200-ndr-ib.txt")  # no name line, 16 ranks
SPLIT = {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter", "hypercube"}
NO_OP = {"all_gather", "alltoall", "broadcast", "gather", "scatter"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
NO_IN_PLACE_CHECK = {"sendrecv", "alltoall"}
ONCE = {"broadcast", "reduce", "sendrecv", "hypercube"}  # busbw = algbw
SEVERAL = ("sendrecv", "all_reduce", "all_gather", "broadcast", "alltoall", "reduce_scatter")


def _real(shared_data: Path, where: tuple[str, ...]) -> str:
    return shared_data.joinpath(*where).read_text()


def _float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr (src/util.cu)."""
    for spec in (".2f", ".1f", ".0f"):
        text = f"{value:{width}{spec}}"
        if len(text) <= width:
            return text
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def _factor(name: str, n: int) -> float:
    if name == "all_reduce":
        return 2 * (n - 1) / n
    return 1.0 if name in ONCE else (n - 1) / n


def _values(name: str, fields: list[str], n: int) -> list[str]:
    """A real all_reduce row's fields as ``<name>_perf`` prints the same size and time."""
    size, count = int(fields[0]), int(fields[1])
    word = size // count
    if name in SPLIT:  # (count / nranks) & ~(16 / word - 1) per rank
        count = (size // word // n) & ~(16 // word - 1)
        size = count * word * n
    new = [str(size), str(count), fields[2], fields[3], fields[4], *fields[5:]]
    if name in NO_OP:
        new[3] = "none"
    if name == "hypercube":
        new[3] = ""
    if name in ROOTED:
        new[4] = "0"
    for place in (5, 9):
        algbw = float(new[place + 1]) if size == int(fields[0]) else 0.0
        new[place + 1] = _float_str(algbw, 6).strip()
        new[place + 2] = _float_str(algbw * _factor(name, n), 6).strip()
    if name in NO_IN_PLACE_CHECK:
        new[12] = "N/A"
    return new


def _row(name: str, line: str, n: int) -> str:
    """The row with each field's right edge where the real one had it."""
    spans = [m.span() for m in re.finditer(r"\S+", line)]
    values = _values(name, line.split(), n)
    out, start = "", 0
    for (_, end), value in zip(spans, values, strict=True):
        out += value.rjust(end - start)
        start = end
    return out


def _as(name: str, text: str, n: int) -> str:
    """The real all_reduce run as ``<name>_perf`` prints it (all_reduce: the real one)."""
    if name == "all_reduce":
        return text
    out = []
    for line in text.splitlines():
        if line[:1] != "#" and line.split()[:1] and line.split()[0].isdigit():
            out.append(_row(name, line, n))
        else:
            out.append(line.replace("all_reduce_perf", f"{name}_perf"))
    return "\n".join(out) + "\n"


def _several(
    shared_data: Path, names: tuple[str, ...], where: tuple[str, ...] = H100, n: int = 1
) -> tuple[str, dict[str, tuple[int, int]]]:
    """A log of one run per name, in order, and each run's first and last line."""
    text, spans, line = "", {}, 1
    for name in names:
        run = _as(name, _real(shared_data, where), n)
        count = run.count("\n")
        spans[name] = (line, line + count - 1)
        text, line = text + run, line + count
    return text, spans


def test_a_log_of_several_collectives_reads_its_all_reduce_run_and_lists_the_others(
    shared_data: Path,
) -> None:
    text, spans = _several(shared_data, SEVERAL)
    run = parse(text, "batch.out")
    alone = parse(_real(shared_data, H100), "h100.txt")
    assert (run.collective, run.program) == ("all_reduce", "all_reduce_perf")
    assert run.lines == spans["all_reduce"]
    assert (run.rows, run.devices, run.avg_busbw, run.out_of_bounds) == (
        alone.rows, alone.devices, alone.avg_busbw, alone.out_of_bounds,
    )  # fmt: skip
    skipped = [(s.collective, s.program, (s.first_line, s.last_line), s.error) for s in run.skipped]
    assert skipped == [
        (name, f"{name}_perf", spans[name], None) for name in SEVERAL if name != "all_reduce"
    ]


@pytest.mark.parametrize("name", [c for c in collective.COLLECTIVES if c != "alltoallv"])
def test_a_run_of_each_collective_is_named_by_its_starting_line(
    shared_data: Path, name: str
) -> None:
    text = _as(name, _real(shared_data, H100), n=1)
    if name == "hypercube":  # its redop is "" (%6s): 12 fields under 13 column names
        with pytest.raises(InputError, match="row has 12 fields, expected 13"):
            parse(text, "one.txt")
        return
    run = parse(text, "one.txt")
    assert (run.collective, run.program, run.fits) == (name, f"{name}_perf", ())
    assert collective_lines(run) == [f"collective: {name} ({name}_perf)"]
    assert run.may_be_all_reduce is (name == "all_reduce")
    shown = format_run(run)  # the name lines laid out again, around the run
    assert shown.startswith(f"# Collective test starting: {name}_perf\n# nThread 1 nGpus 1 ")
    assert shown.endswith(f"\n# Collective test concluded: {name}_perf\n")
    again = parse(shown, "again.txt")
    assert (again.collective, again.program, again.fits) == (name, run.program, ())


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("sendrecv", "sendrecv"),
        ("all_reduce", "all_reduce"),
        ("all_gather", "all_gather"),
        ("reduce_scatter", "reduce_scatter"),
        ("reduce", "reduce"),
        ("broadcast", "broadcast"),
        ("alltoall", "alltoall"),
        ("gather", None),  # gather and scatter print the same columns, sizes and busbw
        ("scatter", None),
    ],
)
def test_without_a_name_line_the_rows_name_the_collective(
    shared_data: Path, name: str, named: str | None
) -> None:
    run = parse(_as(name, _real(shared_data, ORCD), n=16), "old.txt")
    assert run.program is None and run.nranks == 16
    assert run.collective == named
    assert run.fits == ((named,) if named else ("scatter", "gather"))
    shown = named or "scatter or gather"
    assert collective_lines(run) == [f"collective: {shown} (by its rows; the log names none)"]


def test_a_log_of_several_unnamed_runs_reads_its_all_reduce_run(shared_data: Path) -> None:
    names = (
        "sendrecv",
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "reduce",
        "broadcast",
        "alltoall",
        "gather",
        "scatter",
        "hypercube",
    )  # fmt: skip  (the real job's order)
    text, spans = _several(shared_data, names, ORCD, n=16)
    run = parse(text, "slurm.out")
    assert run.rows == parse(_real(shared_data, ORCD)).rows and run.lines == spans["all_reduce"]
    got = [(s.collective, s.fits, (s.first_line, s.last_line)) for s in run.skipped]
    assert got[:6] == [(c, (c,), spans[c]) for c in (*names[:6], "alltoall") if c != "all_reduce"]
    assert [g[:2] for g in got[6:8]] == [(None, ("scatter", "gather"))] * 2
    hypercube = run.skipped[-1]
    assert (hypercube.collective, hypercube.program) == (None, None)
    assert hypercube.error is not None and "row has 12 fields, expected 13" in hypercube.error


def test_two_all_reduce_runs_are_refused_by_line(shared_data: Path) -> None:
    text, spans = _several(shared_data, ("all_reduce", "all_gather", "all_reduce"))
    second = spans["all_gather"][1] + 1
    with pytest.raises(InputError) as caught:
        parse(text, "twice.out")
    assert str(caught.value) == (
        f"twice.out:{second}: a second all_reduce run (the first starts at line 1): "
        "one all_reduce run per input; split the log"
    )


def test_a_baseline_takes_the_all_reduce_run_and_refuses_another_collective(
    shared_data: Path, tmp_path: Path
) -> None:
    text, _ = _several(shared_data, ("sendrecv", "all_reduce", "all_gather"), ORCD, n=16)
    log = tmp_path / "slurm.out"
    log.write_text(text)
    assert verify.baseline_busbw(log) == (239.87, ())  # the all_reduce run's, not sendrecv's 50.03
    gather = tmp_path / "all_gather.out"
    gather.write_text(_as("all_gather", _real(shared_data, H100), n=1))
    with pytest.raises(InputError) as caught:
        verify.baseline_busbw(gather)
    assert str(caught.value) == f"{gather}: an all_gather_perf log, not all_reduce"
    unnamed = tmp_path / "sendrecv.out"
    unnamed.write_text(_as("sendrecv", _real(shared_data, ORCD), n=16))
    with pytest.raises(InputError, match=r": a sendrecv log \(by its rows; it names no coll"):
        verify.baseline_busbw(unnamed)
    text, _ = _several(shared_data, ("sendrecv", "broadcast"))
    log.write_text(text)
    with pytest.raises(InputError) as caught:
        verify.baseline_busbw(log)
    assert str(caught.value) == (
        f"{log}: a sendrecv_perf log, not all_reduce (its other runs: broadcast_perf; "
        "none is all_reduce)"
    )


def test_the_command_names_the_collective_and_the_runs_it_skipped(
    shared_data: Path, tmp_path: Path
) -> None:
    text, spans = _several(shared_data, SEVERAL)
    log = tmp_path / "batch.out"
    log.write_text(text)
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(log)))
    assert code == 0  # stderr: the real log's one blank line inside its table, skipped
    assert err == f"{log}: skipped 1 line that is not nccl-tests output\n"
    first, last = spans["all_reduce"]
    read = f"collective: all_reduce (all_reduce_perf), lines {first}-{last} of a log of 6 runs"
    assert f"{read}\n" in out
    skipped = ", ".join(
        f"{c}_perf (lines {spans[c][0]}-{spans[c][1]})" for c in SEVERAL if c != "all_reduce"
    )
    assert f"skipped: {skipped}\n" in out
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log), "--format", "json"))
    doc = json.loads(out)
    assert (doc["collective"], doc["program"]) == ("all_reduce", "all_reduce_perf")
    assert doc["lines"] == [first, last]
    assert [s["program"] for s in doc["skipped_runs"]] == [
        f"{c}_perf" for c in SEVERAL if c != "all_reduce"
    ]
    assert doc["skipped_runs"][0] == {
        "collective": "sendrecv", "program": "sendrecv_perf", "first_line": 1,
        "last_line": spans["sendrecv"][1], "fits": [], "error": None,
    }  # fmt: skip


def test_a_single_log_of_another_collective_is_named_in_text_json_and_its_failure(
    shared_data: Path, tmp_path: Path
) -> None:
    text = _as("broadcast", _real(shared_data, ORCD), n=16)
    row = next(ln for ln in text.splitlines() if ln.split()[:1] == ["4194304"])
    bad = row[: row.rindex(" 0")] + " 7" + row[row.rindex(" 0") + 2 :]  # 7 wrong in place
    log = tmp_path / "bcast.out"
    log.write_text(text.replace(row, bad))
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(log)))
    assert code == 1
    assert "collective: broadcast (by its rows; the log names none)\n" in out
    assert err.endswith("the broadcast computed wrong results\n") and "all-reduce" not in err
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log), "--format", "json"))
    doc = json.loads(out)
    assert (doc["collective"], doc["collective_fits"]) == ("broadcast", ["broadcast"])
    assert doc["skipped_runs"] == [] and doc["lines"] is None
    run = parse(text, "bcast.out")
    assert wrong_line(run) is None


def test_real_all_reduce_logs_are_named_all_reduce(shared_data: Path) -> None:
    for path in [*(shared_data / "real" / "nccl-tests").glob("*.txt"), shared_data.joinpath(*H100)]:
        run = parse(path.read_text(), path.name)
        assert run.collective == "all_reduce" and run.skipped == () and run.lines is None, path


@pytest.mark.parametrize(
    ("program", "name"),
    [
        ("all_reduce_perf", "all_reduce"),
        ("all_reduce_perf_mpi", "all_reduce"),  # src/Makefile: NAME_SUFFIX=_mpi
        ("alltoallv_perf", "alltoallv"),
        ("reduce_scatter_perf.exe", "reduce_scatter"),  # the Windows build's argv[0]
        ("my_bench", None),
        ("all_reduce", None),
    ],
)
def test_the_binary_name_gives_the_collective(program: str, name: str | None) -> None:
    assert collective.from_program(program) == name
