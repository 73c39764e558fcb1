"""Real all_reduce_perf logs as people save them: launcher prefixes, stray lines, cut short.

Every case is built here from the real logs in ../shared/data/real/nccl-tests (SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main
from envtool.commands import verify
from envtool.errors import InputError
from envtool.nccl import lines, model
from envtool.nccl.model import NcclRun
from envtool.nccl.parse import parse
from envtool.report.nccl_text import format_run, reading_notes

ISSUE290 = "issue290-8xh100-single-node-nvls.txt"
ORCD = "orcd-2node-16xb200-ndr-ib.txt"
AUTODL = "autodl-2x2080ti-pcie-nop2p.txt"
GCP = "gcp-a3mega-2node-16xh100-tcpxo.txt"
REAL = (ISSUE290, ORCD, AUTODL, GCP)
SSH = "Warning: Permanently added 'node5501' (ED25519) to the list of known hosts."
TRACE = "+ srun --label --nodes=2 --ntasks-per-node=1 all_reduce_perf -b 1M -e 16G -f 4 -g 8"
INFO = "node5500:14465:14465 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.5<0>"


def _text(shared_data: Path, name: str) -> str:
    return (shared_data / "real" / "nccl-tests" / name).read_text()


def _same_table(got: NcclRun, want: NcclRun) -> None:
    for name in ("rows", "devices", "params", "nranks", "nccl_version", "avg_busbw"):
        assert getattr(got, name) == getattr(want, name), name
    assert got.out_of_bounds == want.out_of_bounds


def _cut_after(text: str, size: int) -> str:
    """The log up to and including the row of ``size`` bytes (a job killed there)."""
    kept = []
    for line in text.splitlines(keepends=True):
        kept.append(line)
        if line.split()[:1] == [str(size)]:
            return "".join(kept)
    raise AssertionError(f"no row of {size} bytes")


@pytest.mark.parametrize("name", REAL)
def test_real_logs_are_whole_and_fully_read(shared_data: Path, name: str) -> None:
    run = parse(_text(shared_data, name), name)
    assert (run.truncated, run.skipped_lines, run.columns) == (False, 0, 13)
    assert reading_notes(run) == []


LABELS = [
    ("0: ", "srun --label"),
    (" 0: ", "srun --label"),  # padded to the widest task number
    ("[1,0]<stdout>:", "mpirun --tag-output"),  # OpenMPI 4
    ("[prterun-n1-7@1,0]<stdout>: ", "mpirun --tag-output"),  # OpenMPI 5 (PRRTE)
]


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize(("label", "form"), LABELS)
def test_launcher_prefixes_are_stripped(
    shared_data: Path, name: str, label: str, form: str
) -> None:
    text = _text(shared_data, name)
    tagged = "".join(label + line for line in text.splitlines(keepends=True))
    assert lines.prefix_form(tagged.splitlines()) == form
    run = parse(tagged, name)
    _same_table(run, parse(text, name))
    assert (run.skipped_lines, run.truncated) == (0, False)


def test_other_ranks_and_the_batch_script_are_skipped_and_counted(shared_data: Path) -> None:
    text = _text(shared_data, ORCD)
    body = text.splitlines(keepends=True)
    # srun --label pads task numbers to the widest (16 tasks: " 0: " .. "15: ")
    labelled = [TRACE + "\n"] + [" 0: " + line for line in body]
    labelled.insert(5, f" 9: {INFO}\n")
    labelled.insert(30, "12: " + SSH + "\n")
    run = parse("".join(labelled), "slurm-19791438.out")
    _same_table(run, parse(text))
    assert run.skipped_lines == 3 and not run.truncated
    mpi = ["[1,0]<stdout>:" + line for line in body]
    mpi.insert(3, "[1,1]<stderr>:" + SSH + "\n")
    assert parse("".join(mpi)).skipped_lines == 1


def test_the_prefix_form_is_one_per_file(shared_data: Path) -> None:
    # a plain log: a stray "0: ..." line is not a label, and no row loses its first field
    text = _text(shared_data, AUTODL)
    stray = text.replace("# Using devices\n", "# Using devices\n0: hello from task 0\n")
    assert lines.prefix_form(stray.splitlines()) is None
    run = parse(stray)
    _same_table(run, parse(text))
    assert run.skipped_lines == 1


def test_stray_lines_are_skipped_counted_and_never_printed(shared_data: Path) -> None:
    text = _text(shared_data, ORCD)
    body = text.splitlines(keepends=True)
    body[25:25] = [f"{INFO}\n", "\n"]  # between two rows
    messy = "".join([f"{TRACE}\n", f"{SSH}\n", "\n", *body, "\n"])
    run = parse(messy, "messy.txt")
    _same_table(run, parse(text))
    assert (run.skipped_lines, run.truncated) == (6, False)
    assert format_run(run) == text  # the untouched log again: nothing stray, nothing invented
    assert reading_notes(run) == ["messy.txt: skipped 6 lines that are not nccl-tests output"]


def test_a_file_without_a_table_is_one_line_error(shared_data: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        parse(f"{TRACE}\n{SSH}\n\n{INFO}\n", "job.out")
    assert str(caught.value) == (
        "job.out:4: no nccl-tests data rows (4 of 4 lines not nccl-tests output)"
    )
    log = tmp_path / "job.out"
    log.write_text(f"{TRACE}\n{SSH}\n")
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(log)))
    assert code == 2 and out == "" and err.count("\n") == 1 and str(log) in err


def test_a_cut_log_is_truncated_and_gets_no_invented_trailer(shared_data: Path) -> None:
    text = _text(shared_data, GCP)
    whole = parse(text)
    cut = _cut_after(text, 536870912)  # killed after the 512M row
    run = parse(cut, "cut.txt")
    assert run.truncated and run.skipped_lines == 0
    assert run.rows == whole.rows[:27] and run.devices == whole.devices
    assert (run.avg_busbw, run.out_of_bounds) == (None, None)
    assert model.peak_busbw(run.rows) == 263.69  # from the rows it has, at >= 256M
    shown = format_run(run)
    assert shown == cut  # the log as it was: its header, its rows, no trailer
    assert "Out of bounds" not in shown and "Avg bus bandwidth" not in shown
    assert "33.6131" not in shown  # what a made-up average over the cut rows would say
    assert reading_notes(run)[0].startswith("cut.txt: truncated: no '# Avg bus bandwidth'")


def test_a_log_cut_inside_a_row_or_the_trailer(shared_data: Path) -> None:
    text = _text(shared_data, GCP)
    whole = parse(text)
    cut = _cut_after(text, 536870912)
    inside = cut + text[len(cut) :][:50]  # the 1G row, cut mid-line
    run = parse(inside)
    assert run.truncated and run.rows == whole.rows[:27] and run.skipped_lines == 1
    killed = inside + "\nsrun: error: ztan-mig-235z: task 0: Killed\n"
    assert parse(killed).skipped_lines == 2 and parse(killed).rows == whole.rows[:27]
    no_avg = text[: text.index("# Avg bus bandwidth")]  # cut between the two trailer lines
    run = parse(no_avg)
    assert run.truncated and run.out_of_bounds == 0 and run.avg_busbw is None
    assert run.rows == whole.rows
    assert format_run(run).endswith("  0\n# Out of bounds values : 0 OK\n")  # no "#" after


def test_a_log_without_a_header(shared_data: Path) -> None:
    text = _text(shared_data, ISSUE290)
    rows = [line for line in text.splitlines(keepends=True) if not line.startswith("#")]
    run = parse("".join(rows), "rows.txt")
    assert run.rows == parse(text).rows and run.truncated
    assert (run.params, run.devices, run.nranks) == ((), (), None)
    shown = format_run(run)
    assert "nThread" not in shown and "Using devices" not in shown and "iters" not in shown
    assert shown.splitlines()[0] == "#" and "Avg bus" not in shown
    run = parse("".join(rows) + text[text.index("# Out of bounds") :])
    assert not run.truncated and run.avg_busbw == 439.369
    assert format_run(run).endswith("0 OK\n# Avg bus bandwidth    : 439.369 \n#\n")


def test_cli_says_what_it_could_not_read(shared_data: Path, tmp_path: Path) -> None:
    cut = _cut_after(_text(shared_data, GCP), 1073741824)
    log = tmp_path / "cut.txt"
    log.write_text("".join("0: " + line for line in cut.splitlines(keepends=True)) + SSH + "\n")
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(log)))
    assert code == 0
    assert "Avg bus bandwidth" not in out and "Out of bounds" not in out
    assert (
        "the tool's average" not in out
        and "peak busbw 298.82 GB/s at 1G (sizes >= 256M: bandwidth-bound)" in out
    )
    assert "truncated" in err and "skipped 1 line that is not" in err
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(log), "--format", "json"))
    doc = json.loads(out)
    assert code == 0 and doc["truncated"] is True and doc["skipped_lines"] == 1
    assert (doc["avg_busbw"], doc["out_of_bounds"], doc["peak_busbw"]) == (None, None, 298.82)
    assert len(doc["rows"]) == 28 and doc["nranks"] == 16


def test_verify_baseline_reads_a_saved_log(shared_data: Path, tmp_path: Path) -> None:
    text = _text(shared_data, ORCD)
    log = tmp_path / "baseline.out"
    log.write_text(TRACE + "\n" + "".join("[1,0]<stdout>:" + ln for ln in text.splitlines(True)))
    assert verify.baseline_busbw(log) == (239.87, ())


def test_what_a_log_says_is_shown_as_text(shared_data: Path) -> None:
    text = _text(shared_data, AUTODL).replace("float", "fl\x1b[31moat", 1)
    shown = format_run(parse(text))
    assert "\x1b" not in shown and "fl\\x1b[31moat" in shown
