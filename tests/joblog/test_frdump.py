"""Flight-recorder dumps (joblog/frdump.py) read as plain data, never unpickled: real dumps
made here by a 2-rank torchrun job with gloo (torch's own ``_dump_fr_trace``, three
all-reduces each), a straggler made from them (rank 1's third all-reduce marked not finished,
rank 0's dump cut after its second: the only changes), and a malicious pickle that would run
a command: refused with its byte, nothing run (issue 34)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require, run_main

from envtool.cli import main
from envtool.errors import InputError
from envtool.joblog import frdump

JOB = """\
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
time.sleep(2)  # the recorder retires an entry once its work is seen done, on its own thread
data = torch._C._distributed_c10d._dump_fr_trace()
with open(os.path.join(sys.argv[1], "fr_trace_rank_%d" % dist.get_rank()), "wb") as fh:
    fh.write(data)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real dumps, one per rank, of a healthy 2-rank gloo job."""
    has_torch = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
    require(has_torch.returncode == 0, "torch is not installed (make test installs it)")
    folder = tmp_path_factory.mktemp("fr")
    script = folder / "job.py"
    script.write_text(JOB)
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "100", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          str(script), str(folder)], env=env, capture_output=True, text=True,
                         timeout=180)  # fmt: skip
    require(run.returncode == 0 and (folder / "fr_trace_rank_1").exists(),
            f"this torch cannot dump a gloo flight record: {run.stderr[-300:]}")  # fmt: skip
    return folder


def _explain(tmp_path: Path, *paths: Path) -> tuple[int, str, str]:
    return run_main(main, tmp_path, [], ("explain", *map(str, paths)))


def test_healthy_dumps_show_no_failure(dumps: Path, tmp_path: Path) -> None:
    """(A dump taken the moment a collective ends can still show it not retired: the job
    waits 2 s before dumping, as a dump at a timeout is taken long after.)"""
    paths = sorted(dumps.glob("fr_trace_rank_*"))
    doc = frdump.load(str(paths[0]), paths[0].read_bytes())
    where = frdump.position(str(paths[0]), doc)
    assert (where.rank, where.pending, where.last) == (0, None, 3)  # three all-reduces, done
    code, out, _ = _explain(tmp_path, *paths)
    assert code == 0 and out.startswith("no failure"), out


def test_the_rank_behind_is_named_from_the_dumps(dumps: Path, tmp_path: Path) -> None:
    """Rank 1 still in its third all-reduce, rank 0 only through its second (it never
    scheduled the third): rank 0 is behind, the lowest SeqNum, named as the one to look at."""
    for rank in (0, 1):
        doc = pickle.loads((dumps / f"fr_trace_rank_{rank}").read_bytes())  # our own file
        if rank == 0:
            doc["entries"] = [e for e in doc["entries"] if e["collective_seq_id"] <= 2]
        else:
            last = max(doc["entries"], key=lambda e: e["collective_seq_id"])
            last.update(retired=False, state="started")
        (tmp_path / f"fr_trace_rank_{rank}").write_bytes(pickle.dumps(doc))
    code, out, _ = _explain(tmp_path, tmp_path / "fr_trace_rank_0", tmp_path / "fr_trace_rank_1")
    flat = " ".join(out.split())
    assert code == 4, out  # a rank waited, the dumps alone do not say why
    assert "collective-timeout" in flat and "SeqNum=3" in flat
    assert "finished up to SeqNum=2, never reached SeqNum=3" in flat
    assert "rank 0" in flat


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/envtool-frdump-pwned",))


def test_a_malicious_pickle_runs_nothing(tmp_path: Path) -> None:
    proof = Path("/tmp/envtool-frdump-pwned")
    proof.unlink(missing_ok=True)
    evil = tmp_path / "fr_trace_rank_0"
    evil.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Boom()]}))
    code, _, err = _explain(tmp_path, evil)
    assert code == 2 and err.count("\n") == 1 and "refused, nothing run" in err, err
    assert "posix.system" in err or "os.system" in err
    assert not proof.exists()
    with pytest.raises(InputError, match="at byte"):
        frdump.load("x", evil.read_bytes())


@pytest.mark.parametrize("data", [b"\x80\x04garbage", b"\x80\x04" + pickle.dumps([1])[2:],
                                  pickle.dumps("a string")])  # fmt: skip
def test_broken_or_foreign_pickles_are_one_line(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fr_trace_rank_3"
    path.write_bytes(data)
    code, _, err = _explain(tmp_path, path)
    assert code == 2 and err.count("\n") == 1 and str(path) in err, err
