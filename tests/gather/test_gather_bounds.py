"""envtool/gather's parts: a node's bounds (what is over is left out and listed, never
dropped), the kernel log's records since a moment (dmesg's form too), the job's start as
scontrol and the variables write it, and collect.json's strict reader."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from envtool.errors import InputError
from envtool.gather import kernel, names, node, since
from envtool.gather.find import Candidate
from envtool.gather.plan import Limits, plan
from envtool.protocol import collect_record

SMALL = Limits(file_bytes=100, node_bytes=250, files=3, kernel_bytes=60)


def _c(name: str, size: int, kind: str = "fr-dump", refused: str | None = None) -> Candidate:
    return Candidate(f"/tmp/{name}", kind, size, 1.0, refused)


def test_each_bound_leaves_out_what_is_over_it_and_says_so() -> None:
    found = [_c("d0", 90), _c("d1", 101), _c("d2", 90), _c("d3", 90), _c("e", 10, "error-json"),
             _c("link", 1, refused="a symlink (never followed)")]  # fmt: skip
    chosen = plan(found, SMALL, (0, 0))
    assert [(t.origin, t.rel) for t in chosen.takes] == \
        [("/tmp/e", "error/0-error.json"), ("/tmp/d0", "fr/d0"), ("/tmp/d2", "fr/d2")]  # fmt: skip
    why = dict(chosen.left_out)
    assert why["/tmp/d1"] == "101 bytes: over the 100 bytes bound of one file"
    assert why["/tmp/d3"] == "over the 3 files a node's folder holds"
    assert why["/tmp/link"] == "a symlink (never followed)"
    assert len(chosen.left_out) == 3  # every candidate is taken or listed


def test_the_node_bound_counts_what_envtool_wrote_first() -> None:
    chosen = plan([_c("d0", 90), _c("d1", 90)], SMALL, (1, 100))
    assert [t.origin for t in chosen.takes] == ["/tmp/d0"]
    assert dict(chosen.left_out)["/tmp/d1"] == "90 bytes: over the 250 bytes a node's folder holds"


def test_two_dumps_of_one_name_keep_the_first() -> None:
    a = Candidate("/a/trace_0", "fr-dump", 1, 1.0, None)
    b = Candidate("/b/trace_0", "fr-dump", 1, 1.0, None)
    chosen = plan([b, a], Limits(), (0, 0))
    assert [t.origin for t in chosen.takes] == ["/a/trace_0"]
    assert chosen.left_out == (("/b/trace_0", "the same name as /a/trace_0, already taken as "
                                              "fr/trace_0"),)  # fmt: skip


def test_bounds_on_real_files_list_every_file_left_out(tmp_path: Path) -> None:
    (tmp_path / "dest").mkdir()
    for n, size in enumerate((60, 120, 60, 60, 60)):
        (tmp_path / f"trace_{n}").write_bytes(b"x" * size)
    log = tmp_path / "kmsg"
    log.write_text("".join(f"6,{n},{n},-;record number {n:04d}\n" for n in range(10)))
    who = names.Who("7", "nodeA", names.owner({}))
    request = node.Request(tmp_path / "dest", who, 0.0, (str(tmp_path / "trace_"),), (),
                           str(log), SMALL)  # fmt: skip
    record = node.collect(request, {}, None).record
    assert [f.path for f in record.files] == ["kernel.log", "fr/trace_0", "fr/trace_2"]
    left = {Path(e.origin).name: e.why for e in record.left_out}
    assert left["trace_1"].endswith("over the 100 bytes bound of one file")
    assert left["trace_3"] == left["trace_4"] == "over the 3 files a node's folder holds"
    assert left["kmsg"] == "8 oldest records since the start: over the bound kept of the kernel log"
    kept = (tmp_path / "dest" / "7" / "nodeA" / "kernel.log").read_text()
    assert kept.splitlines() == ["6,8,8,-;record number 0008", "6,9,9,-;record number 0009"]


def test_dmesg_records_are_one_line_each_and_dated() -> None:
    text = "<4>[   10.500000] first\n               continued\n<6>[   20.000000] second\njunk\n"
    records = list(kernel.dmesg_lines(text))
    assert records == [(10.5, "<4>[   10.500000] first\\x0a               continued"),
                       (20.0, "<6>[   20.000000] second")]  # fmt: skip
    kept = kernel.since_boot(records, 15.0, 1 << 20)
    assert (kept.lines, kept.before) == (("<6>[   20.000000] second",), 1)


def test_a_kernel_log_named_on_purpose_is_never_replaced_by_this_machines(tmp_path: Path) -> None:
    log = kernel.read(None, str(tmp_path / "missing"), 1 << 20)
    assert log.lines == () and log.why is not None and "missing" in log.why


def test_the_start_scontrol_says_and_epoch_seconds() -> None:
    line = "JobId=12 JobName=wrap UserId=alice(1000) StartTime=2026-01-02T03:04:05 EndTime=Unknown"
    assert since.start_time(line) == datetime(2026, 1, 2, 3, 4, 5).timestamp()
    assert since.start_time("JobId=12 StartTime=Unknown") is None
    assert since.epoch("1714557600.25", "--since") == 1714557600.25
    for bad in ("-1", "1e9", "yesterday", "1.2.3", ""):
        with pytest.raises(InputError):
            since.epoch(bad, "--since")


def test_a_user_not_root_owns_what_they_collect_whatever_the_variables_say() -> None:
    who = names.owner({"SLURM_JOB_UID": "0", "SLURM_JOB_USER": "bob"}, euid=1234)
    assert (who.uid, who.user, who.chown) == (1234, "bob", False)
    with pytest.raises(InputError):
        names.owner({"SLURM_JOB_UID": "12a"}, euid=0)


def test_the_record_reader_refuses_what_is_not_collect_1(tmp_path: Path) -> None:
    record = collect_record.CollectRecord(
        "n1", "9", "alice", 1.0, "--since", 2.0,
        (collect_record.CollectedFile("fr/trace_0", "/tmp/trace_0", 3, "ab", "fr-dump"),),
        (collect_record.LeftOut("/tmp/x", "a symlink (never followed)"),), ("e",),
    )  # fmt: skip
    text = collect_record.dumps(record)
    assert collect_record.loads(text, "c.json") == record
    doc = json.loads(text)
    assert doc["files"][0]["from"] == "/tmp/trace_0" and doc["schema"] == "envtool.collect/1"
    for bad in ({**doc, "extra": 1}, {**doc, "schema": "envtool.collect/2"},
                {**doc, "files": [{**doc["files"][0], "path": "../../etc/passwd"}]},
                {**doc, "files": [{**doc["files"][0], "kind": "core"}]}):  # fmt: skip
        with pytest.raises(InputError, match=r"c\.json: not an envtool\.collect/1 record"):
            collect_record.loads(json.dumps(bad), "c.json")
