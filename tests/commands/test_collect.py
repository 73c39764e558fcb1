"""``envtool collect`` on temp folders: the layout and collect.json, the kernel lines since the
job's start (from a kernel log file the test writes, never this machine's), hostile job ids
and host names refused, symlinks and FIFOs left out with their reason, a second run replacing
the host folder, nothing left behind when writing fails, and (as root, an Epilog) the files
given to the job's user, a file of another user's refused."""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
import stat
from pathlib import Path

import pytest
from conftest import require
from fixtures.kernel_log import Record, write_kmsg

from envtool.cli import main
from envtool.gather import folder, kernel
from envtool.gather.copy import HostFolder
from envtool.protocol import collect_record, verify_report

SINCE = 1_800_000_000.0
JOB_UID = 43210  # a user with no passwd entry: the Epilog's SLURM_JOB_UID


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment: job 4242 on node7, no Slurm or torch variables of the runner's;
    DEST and a folder of the job's files under ``tmp_path``."""
    for name in list(os.environ):
        if name.startswith(("SLURM_", "TORCH", "SLURMD_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURMD_NODENAME", "node7")
    (tmp_path / "dest").mkdir()
    (tmp_path / "job").mkdir()
    return tmp_path


def _dump(path: Path, rank: int) -> bytes:
    data = pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [{"rank": rank}]}, 2)
    path.write_bytes(data)
    return data


def _kernel_log(path: Path, since: float) -> Path:
    """Two records before the job's start, two after (seconds since this machine's boot)."""
    at = since - kernel.boot_epoch()
    return write_kmsg(path, [Record("before the job", at - 20), Record("also before", at - 10),
                             Record("NVRM: Xid (PCI:0000:3b:00): 79, fallen", at + 10),
                             Record("after the job's start", at + 20)])  # fmt: skip


def _collect(root: Path, *args: str, since: float = SINCE) -> int:
    log = _kernel_log(root / "kmsg", since)
    fr = str(root / "job" / "trace_")
    return main(["collect", "--dest", str(root / "dest"), "--fr", fr, "--kernel-log", str(log),
                 "--since", str(since), "--no-preflight", *args])  # fmt: skip


def _record(root: Path, host: str = "node7") -> collect_record.CollectRecord:
    path = root / "dest" / "4242" / host / "collect.json"
    return collect_record.loads(path.read_text(), str(path))


def test_a_node_folder_holds_the_dumps_the_error_file_and_the_kernel_lines(
    job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dumps = {r: _dump(job / "job" / f"trace_{r}", r) for r in (0, 1)}
    (job / "job" / "error.json").write_text('{"message": {"message": "boom"}}')
    assert _collect(job, "--error-file", str(job / "job" / "*.json")) == 0
    host = job / "dest" / "4242" / "node7"
    record = _record(job)
    assert (record.host, record.job_id, record.since, record.since_from) == \
        ("node7", "4242", SINCE, "--since")  # fmt: skip
    kinds = {f.path: f.kind for f in record.files}
    assert kinds == {"kernel.log": "kernel-log", "error/0-error.json": "error-json",
                     "fr/trace_0": "fr-dump", "fr/trace_1": "fr-dump"}  # fmt: skip
    for f in record.files:
        data = (host / f.path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f.bytes, f.sha256)
    assert (host / "fr" / "trace_1").read_bytes() == dumps[1]
    lines = (host / "kernel.log").read_text().splitlines()
    assert [line.split(";", 1)[1] for line in lines] == \
        ["NVRM: Xid (PCI:0000:3b:00): 79, fallen", "after the job's start"]  # fmt: skip
    assert record.left_out == () and record.errors == ()
    assert sorted(p.name for p in (job / "dest" / "4242").iterdir()) == ["node7"]  # no .tmp
    for path in [job / "dest" / "4242", *host.rglob("*"), host]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path
    assert "collected 4 files" in capsys.readouterr().out


def test_a_symlink_or_a_fifo_is_left_out_with_its_reason(job: Path) -> None:
    secret = job / "secret"
    secret.write_text("not the job's")
    (job / "job" / "trace_0").symlink_to(secret)
    os.mkfifo(job / "job" / "trace_1")  # opened without blocking, and refused
    _dump(job / "job" / "trace_2", 2)
    assert _collect(job) == 0
    record = _record(job)
    left = {Path(e.origin).name: e.why for e in record.left_out}
    assert left == {"trace_0": "a symlink (never followed)", "trace_1": "not a regular file"}
    assert [f.path for f in record.files if f.kind == "fr-dump"] == ["fr/trace_2"]


@pytest.mark.parametrize("job_id", ["../x", "/", "..", ".", "a\nb", "a\0b", "-rf", "x/y", ""])
def test_a_hostile_job_id_is_refused_in_one_line(
    job: Path, job_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _collect(job, "--job-id", job_id) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "envtool: error:" in err
    assert list((job / "dest").iterdir()) == []


@pytest.mark.parametrize("host", ["../x", "a/b", "x\ny", ".hidden"])
def test_a_hostile_host_name_is_refused(
    job: Path, host: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", host)
    assert _collect(job) == 2
    assert "host name" in capsys.readouterr().err and list((job / "dest").iterdir()) == []


def test_no_job_id_or_no_dest_is_bad_input(
    job: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID")
    assert _collect(job) == 2
    assert "no job id" in capsys.readouterr().err
    assert main(["collect", "--dest", str(job / "nowhere"), "--job-id", "1", "--no-preflight"]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_a_job_folder_that_is_a_symlink_is_never_written_through(
    job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (job / "elsewhere").mkdir()
    (job / "dest" / "4242").symlink_to(job / "elsewhere")
    assert _collect(job) == 2
    assert "a symlink or not a folder" in capsys.readouterr().err
    assert list((job / "elsewhere").iterdir()) == []


def test_a_second_run_replaces_the_host_folder(job: Path) -> None:
    _dump(job / "job" / "trace_0", 0)
    assert _collect(job) == 0
    (job / "job" / "trace_0").unlink()
    new = _dump(job / "job" / "trace_9", 9)
    assert _collect(job) == 0
    host = job / "dest" / "4242" / "node7"
    assert sorted(p.name for p in (host / "fr").iterdir()) == ["trace_9"]
    assert (host / "fr" / "trace_9").read_bytes() == new
    assert sorted(p.name for p in (job / "dest" / "4242").iterdir()) == ["node7"]


def test_without_an_atomic_exchange_the_old_folder_is_moved_aside_first(
    job: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """NFS has no RENAME_EXCHANGE (an edge case this machine's filesystem cannot produce)."""
    assert _collect(job) == 0
    monkeypatch.setattr(folder, "_exchange", lambda fd, a, b: False)
    _dump(job / "job" / "trace_3", 3)
    assert _collect(job) == 0
    assert "(replaced, moved aside)" in capsys.readouterr().out
    assert sorted(p.name for p in (job / "dest" / "4242").iterdir()) == ["node7"]
    assert (job / "dest" / "4242" / "node7" / "fr" / "trace_3").exists()


def test_a_failed_write_leaves_nothing_behind(
    job: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk fills while the second dump is copied: exit 1, the temporary folder gone, and
    an earlier run's folder left as it was."""
    _dump(job / "job" / "trace_0", 0)
    assert _collect(job) == 0
    before = (job / "dest" / "4242" / "node7" / "collect.json").read_text()
    _dump(job / "job" / "trace_1", 1)
    real = HostFolder.copy

    def full(self: HostFolder, take: object) -> object:
        if str(take.origin).endswith("trace_1"):  # type: ignore[attr-defined]
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, take)  # type: ignore[arg-type]

    monkeypatch.setattr(HostFolder, "copy", full)
    capsys.readouterr()
    assert _collect(job) == 1
    assert "No space left on device (nothing left behind)" in capsys.readouterr().err
    assert sorted(p.name for p in (job / "dest" / "4242").iterdir()) == ["node7"]
    assert (job / "dest" / "4242" / "node7" / "collect.json").read_text() == before


def test_the_start_comes_from_slurm_else_from_the_files(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(job / "job"))  # no scontrol
    log = _kernel_log(job / "kmsg", SINCE)
    argv = ["collect", "--dest", str(job / "dest"), "--fr", str(job / "job" / "trace_"),
            "--kernel-log", str(log), "--no-preflight"]  # fmt: skip
    assert main(argv) == 0
    assert (_record(job).since, _record(job).since_from) == (None, "none")
    _dump(job / "job" / "trace_0", 0)
    os.utime(job / "job" / "trace_0", (SINCE + 5, SINCE + 5))
    assert main(argv) == 0
    assert (_record(job).since, _record(job).since_from) == (SINCE + 5, "files")
    kept = (job / "dest" / "4242" / "node7" / "kernel.log").read_text()
    assert "NVRM" in kept and "also before" not in kept  # records at -10 s and +10 s
    monkeypatch.setenv("SLURM_JOB_START_TIME", str(int(SINCE)))
    assert main(argv) == 0
    assert (_record(job).since, _record(job).since_from) == (SINCE, "SLURM_JOB_START_TIME")


def test_the_quick_verify_document_is_kept_whatever_it_found(job: Path) -> None:
    log = _kernel_log(job / "kmsg", SINCE)
    argv = ["collect", "--dest", str(job / "dest"), "--kernel-log", str(log), "--since", "0",
            "--fr", str(job / "job" / "trace_")]  # fmt: skip
    assert main(argv) == 0
    path = job / "dest" / "4242" / "node7" / "preflight.json"
    doc = verify_report.loads(path.read_text(), str(path))
    assert [h.host for h in doc.hosts] == ["node7"]
    assert "preflight.json" in [f.path for f in _record(job).files]


def test_as_root_the_files_are_the_job_users_and_another_users_file_is_refused(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Epilog: root collects for SLURM_JOB_UID. A dump that is a hard link to root's own
    file (a job's way to read what it may not) is left out; the job's own is taken."""
    require(os.geteuid() == 0, "the Epilog's case needs root")
    monkeypatch.setenv("SLURM_JOB_UID", str(JOB_UID))
    monkeypatch.setenv("SLURM_JOB_GID", str(JOB_UID))
    monkeypatch.setenv("SLURM_JOB_USER", "alice")
    shadow = job / "root-only"
    shadow.write_text("root's secret")
    os.link(shadow, job / "job" / "trace_0")
    _dump(job / "job" / "trace_1", 1)
    os.chown(job / "job" / "trace_1", JOB_UID, JOB_UID)
    assert _collect(job) == 0
    record = _record(job)
    assert record.user == "alice"
    assert [(Path(e.origin).name, e.why) for e in record.left_out] == \
        [("trace_0", f"owned by uid 0, not the job's user (uid {JOB_UID})")]  # fmt: skip
    job_folder = job / "dest" / "4242"
    for path in [job_folder, *job_folder.rglob("*")]:
        assert (path.stat().st_uid, path.stat().st_gid) == (JOB_UID, JOB_UID), path
    assert "root's secret" not in "".join(p.read_text() for p in job_folder.rglob("*.json"))


def test_a_job_folder_of_another_user_is_refused(
    job: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require(os.geteuid() == 0, "giving a folder to another user needs root")
    monkeypatch.setenv("SLURM_JOB_UID", str(JOB_UID))
    (job / "dest" / "4242").mkdir()
    os.chown(job / "dest" / "4242", JOB_UID + 1, JOB_UID + 1)
    assert _collect(job) == 2
    assert f"owned by uid {JOB_UID + 1}, not the job's user" in capsys.readouterr().err
    assert list((job / "dest" / "4242").iterdir()) == []
