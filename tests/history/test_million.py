"""A history of a million runs (issue 36's bad input): ``envtool history`` walks the store's
cursors host by host (history/timeline.py), so its memory is the same for a million runs as
for a thousand; ``history diff`` and ``envtool metrics`` read the runs they name, not all.
The store (tests/fixtures/history_runs.py) holds a million one-host runs: node1's NCCL drift
present for 1,000 runs, then gone for 1,000, to the last (back 500 times)."""

from __future__ import annotations

import sys
from pathlib import Path

from fixtures import history_runs

SLACK_MIB = 40  # what a million runs may add to the peak of a thousand (measured: ~1)


def _envtool(*args: str) -> tuple[int, str, float]:
    """Exit code, stdout, and the process's own peak RSS in MiB."""
    return history_runs.peak([sys.executable, "-m", "envtool", *args])


def test_a_million_runs_cost_the_timeline_no_more_memory_than_a_thousand(
    tmp_path: Path,
) -> None:
    small, big = tmp_path / "small.sqlite", tmp_path / "big.sqlite"
    history_runs.one_host(small, 1_000)
    history_runs.one_host(big, 1_000_000)
    code, out_small, rss_small = _envtool("history", "--history", str(small))
    assert code == 0, out_small
    code, out, rss = _envtool("history", "--history", str(big))
    assert code == 0, out
    assert out.startswith("history: 1000000 runs (ids 1–1000000"), out
    (line,) = [ln for ln in out.splitlines() if "version-differs" in ln]
    assert line.split()[-3:] == ["still", "there", "500"], line  # gone 1,000 runs, back
    assert rss < rss_small + SLACK_MIB, (rss, rss_small)  # held: one host's findings
    code, out, rss_diff = _envtool("history", "--history", str(big), "diff", "1000", "1000000")
    assert code == 0 and "node1  new  version-differs nccl" in out, out
    code, out, rss_metrics = _envtool("metrics", "--history", str(big))
    assert code == 0 and "\nenvtool_run_timestamp_seconds 1000000\n" in out, out
    assert max(rss_diff, rss_metrics) < rss_small + SLACK_MIB, (rss_diff, rss_metrics)
