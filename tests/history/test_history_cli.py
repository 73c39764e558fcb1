"""``envtool verify --history --metrics-file``, then ``envtool history``, ``history diff``,
``history prune`` and ``envtool metrics``, end to end on this machine (``--transport local``,
the real node script): night 1 the prefix is missing (``env-missing``), night 2 it exists
(the node changed between runs), so the timeline says env-missing cleared at night 2."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main


def _verify(tmp_path: Path, prefix: Path, *extra: str) -> tuple[int, str, str]:
    return run_main(main, tmp_path, [], (
        "verify", "--transport", "local", "--hosts", "localhost", "--no-lock", "--prefix",
        str(prefix), "--min-gpus", "0", "--format", "json", *extra))  # fmt: skip


def test_two_nights_then_the_timeline_the_diff_and_the_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, prom = tmp_path / "state" / "history.sqlite", tmp_path / "tf" / "envtool.prom"
    monkeypatch.setenv("ENVTOOL_HISTORY", str(store))  # a store named: recorded by default
    prefix = tmp_path / "env"
    code, out, err = _verify(tmp_path, prefix, "--metrics-file", str(prom))
    assert code == 1 and "env-missing" in out, err
    assert 'kind="env-missing"' in prom.read_text()
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    os.symlink(sys.executable, prefix / "bin" / "python")
    _verify(tmp_path, prefix, "--metrics-file", str(prom))
    assert 'kind="env-missing"' not in prom.read_text()
    _verify(tmp_path, prefix, "--no-record")  # not recorded: two runs in the store

    code, out, err = run_main(main, tmp_path, [], ("history", "--format", "json"))
    assert code == 0, err
    doc = json.loads(out)
    assert [r["command"] for r in doc["runs"]] == ["verify", "verify"]
    [life] = [f for f in doc["findings"] if f["kind"] == "env-missing"]
    night1, night2 = (r["at"] for r in doc["runs"])
    assert (life["host"], life["first_seen"], life["cleared_at"]) == ("localhost", night1, night2)
    assert doc["last_good"] == {}  # an error each night (night 2: a prefix without torch)
    code, out, _ = run_main(main, tmp_path, [], ("history", "--host", "localhost"))
    assert "last good run of localhost: none recorded" in out, out
    code, out, _ = run_main(main, tmp_path, [], ("history",))
    said = " ".join(out.split())
    assert code == 0 and "history: 2 runs (ids 1–2," in said and "env-missing" in said, out

    code, out, _ = run_main(main, tmp_path, [], ("history", "diff", "1", "2"))
    assert code == 0 and "localhost cleared env-missing" in " ".join(out.split()), out
    code, out, _ = run_main(main, tmp_path, [], ("metrics", "--run", "1"))
    assert code == 0 and 'envtool_finding{host="localhost",kind="env-missing"' in out, out
    code, out, _ = run_main(main, tmp_path, [], ("history", "prune", "--keep-days", "0"))
    assert code == 0 and "2 runs older than 0 days removed" in out


def test_a_store_that_cannot_be_written_never_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x\n")
    code, out, err = _verify(tmp_path, tmp_path / "env", "--history",
                             str(tmp_path / "a-file" / "h.sqlite"))  # fmt: skip
    assert code == 1 and "env-missing" in out  # the verdict as without --history
    assert "envtool: history not recorded:" in err and "Traceback" not in err


def test_history_without_a_store_is_one_line(tmp_path: Path) -> None:
    code, _, err = run_main(main, tmp_path, [], ("history", "--history", str(tmp_path / "no")))
    assert code == 2 and "does not exist (record a run first)" in err
