"""``envtool collect`` on a real Slurm cluster (slurmctld + 3 slurmd, tests/fixtures/slurm.py),
both ways docs/commands/collect.md gives: an ``srun --ntasks-per-node=1`` step of the job
(each task first writes its node's flight-recorder dump, a small real pickle, and a
torchelastic error.json, as a dying job leaves them), and the ``Epilog`` slurmd runs on each
node after the job (root, no PATH, none of the job's variables: the wrapper names them). Each
node's folder holds its own files; the kernel log is a file the test writes, never this
machine's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, require
from fixtures import slurm
from fixtures.kernel_log import Record, write_kmsg

from envtool.gather import kernel
from envtool.protocol import collect_record

NODES = ("node1", "node2", "node3")
TASK = """\
d={root}/tmp/$SLURMD_NODENAME
mkdir -p "$d/attempt_0"
{python} -c 'import pickle, sys; open(sys.argv[1], "wb").write(pickle.dumps(
    {{"version": "2.4", "entries": [{{"rank": int(sys.argv[2])}}]}}, 2))' \
    "$d/nccl_trace_rank_$SLURM_NODEID" "$SLURM_NODEID"
echo '{{"message": {{"message": "rank '$SLURM_NODEID' failed"}}}}' > "$d/attempt_0/error.json"
exec {python} -m envtool collect --dest {root}/srun --fr "$d/nccl_trace_rank_" \
    --error-file "$d/*/error.json" --kernel-log {kernel}
"""
EPILOG = """\
#!/bin/sh
export PATH={path} PYTHONPATH={pythonpath} SLURM_CONF={conf}
d={root}/tmp/$SLURMD_NODENAME
{python} -m envtool collect --dest {root}/epilog --fr "$d/nccl_trace_rank_" \
    --error-file "$d/*/error.json" --kernel-log {kernel} --no-preflight >> {root}/epilog.log 2>&1
echo "$SLURM_JOB_ID $SLURMD_NODENAME $? uid=$SLURM_JOB_UID" >> {root}/epilog.runs
exit 0
"""


@dataclass
class Lab:
    root: Path
    env: dict[str, str]
    kernel: Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require(slurm.available(), "Slurm is not installed (apt-get install slurmctld slurmd)")
    require(os.geteuid() == 0, "slurmd and its Epilog run as root here")
    root = tmp_path_factory.mktemp("collect")
    for sub in ("srun", "epilog", "tmp"):
        (root / sub).mkdir()
    # two records: one an hour before the job (or half this machine's uptime, on a machine
    # up for less than two hours: a record is never dated before its boot), one a minute
    # after its start (seconds since this machine's boot, as /dev/kmsg dates them)
    now = time.time() - kernel.boot_epoch()
    xid = Record("NVRM: Xid (PCI:0000:3b:00): 79, fallen", now + 60)
    before = Record("an hour before the job", now - min(3600.0, now / 2))
    log = write_kmsg(root / "kmsg", [before, xid])
    pythonpath = f"{REPO}:{REPO / 'probes'}"
    tools = ":".join(dict.fromkeys([str(Path(shutil.which("scontrol") or "/usr/bin/scontrol")
                                             .parent), "/usr/bin", "/bin"]))  # fmt: skip
    conf = root / "slurm" / "etc" / "slurm.conf"
    epilog = root / "epilog.sh"
    epilog.write_text(EPILOG.format(path=tools, pythonpath=pythonpath, conf=conf, root=root,
                                    python=sys.executable, kernel=log))  # fmt: skip
    epilog.chmod(0o755)
    cluster = slurm.start(root / "slurm", nodes=len(NODES), extra=f"Epilog={epilog}\n")
    env = {**os.environ, **cluster.env, "PYTHONPATH": pythonpath}
    try:
        yield Lab(root, env, log)
    finally:
        cluster.stop()


def _node_folders(dest: Path) -> tuple[str, dict[str, Path]]:
    (job,) = [p for p in dest.iterdir()]
    return job.name, {p.name: p for p in job.iterdir()}


def _check_node(folder: Path, job: str, started: float) -> collect_record.CollectRecord:
    record = collect_record.loads((folder / "collect.json").read_text(), str(folder))
    assert (record.host, record.job_id, record.errors, record.left_out) == \
        (folder.name, job, (), ())  # fmt: skip
    assert record.since is not None and started - 2 <= record.since <= time.time()
    rank = str(NODES.index(folder.name))  # SLURM_NODEID: node1 is 0
    paths = {f.path for f in record.files}
    assert {f"fr/nccl_trace_rank_{rank}", "error/0-error.json", "kernel.log"} <= paths
    assert f"rank {rank} failed" in (folder / "error" / "0-error.json").read_text()
    assert (folder / "fr" / f"nccl_trace_rank_{rank}").read_bytes()[:2] == b"\x80\x02"
    kept = (folder / "kernel.log").read_text()
    assert "Xid" in kept and "an hour before" not in kept
    return record


def test_an_srun_step_and_the_epilog_each_leave_every_nodes_folder(lab: Lab) -> None:
    started = time.time()
    task = TASK.format(root=lab.root, python=sys.executable, kernel=lab.kernel)
    out = subprocess.run(["srun", "-N3", "--ntasks-per-node=1", "sh", "-c", task], env=lab.env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("collected ") == 3, out.stdout
    job, folders = _node_folders(lab.root / "srun")
    assert sorted(folders) == list(NODES)
    for folder in folders.values():
        record = _check_node(folder, job, started)
        assert record.since_from in ("SLURM_JOB_START_TIME", "scontrol")
        assert "preflight.json" in {f.path for f in record.files}
        assert record.user == "root"
    deadline = time.monotonic() + 30  # slurmd runs the Epilog once the job has ended
    runs = lab.root / "epilog.runs"
    while time.monotonic() < deadline:
        if runs.exists() and len(runs.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    said = (lab.root / "epilog.log").read_text() if (lab.root / "epilog.log").exists() else ""
    assert sorted(runs.read_text().splitlines()) == \
        [f"{job} {n} 0 uid=0" for n in NODES], said  # fmt: skip
    epilog_job, folders = _node_folders(lab.root / "epilog")
    assert (epilog_job, sorted(folders)) == (job, list(NODES))
    for folder in folders.values():
        assert _check_node(folder, job, started).since_from == "scontrol"  # 22.05: no variable
    # explain reads the srun step's folder as it is: each node's files named by its folder,
    # the Xid 79 each node's kernel log holds the cause on all three, preflight.json joined
    code, out, err = _explain(lab.root / "srun" / job)
    assert code == 1, out + err
    doc = json.loads(out)
    lead = doc["findings"][0]
    assert (lead["finding"]["kind"], lead["finding"]["hosts"]) == ("gpu-xid", list(NODES)), out
    assert {Path(e["file"]).parent.name for e in lead["evidence"]} == set(NODES)
    assert sum(f["lines"] for f in doc["files"]) > 0


def _explain(folder: Path) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "envtool", "explain", str(folder), "--format",
                           "json"], capture_output=True, text=True, timeout=60)  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr
