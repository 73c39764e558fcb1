"""The metrics file, checked by the real ``promtool check metrics`` (Debian's prometheus),
with host names and subjects that carry quotes, backslashes, braces and line feeds; the
bound on finding series per host; and one end to end: a real ``prometheus-node-exporter``
serves the textfile folder on loopback, a real ``prometheus`` scrapes it, and a PromQL query
returns the finding (tests/../shared/RECIPES.md's recipe), and every query of docs/'s Grafana
dashboard runs there."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import require
from fixtures import promtool

from envtool.errors import InputError
from envtool.history import metrics
from envtool.protocol.verify_report import AllReduceEntry, FindingEntry, HostEntry, VerifyDocument

HOSTILE = 'node"3\\x{y}\nz'


def _doc(findings: int = 1) -> VerifyDocument:
    sweep = tuple((8 << i, 412.5 * i / 22) for i in range(23))  # 8 B to 32 MiB by 2
    ar = AllReduceEntry("nccl", 8, 412.5, 0, None, sizes=sweep)
    hosts = (HostEntry("node1", True, None, 1.0, (), 10, None, ar),
             HostEntry(HOSTILE, True, None, 1.0, (), 10, None, None),
             HostEntry("node4", False, "unreachable", 1.0, (), None, None, None))  # fmt: skip
    found = tuple(FindingEntry("version-differs", "error", f'nccl "{i}"\n}}', "a", "b", "fix",
                               (HOSTILE,)) for i in range(findings))  # fmt: skip
    return VerifyDocument("conda-lock.yml", 3.5, False, hosts, found, lock_sha256="c" * 64)


def test_promtool_accepts_the_file_with_hostile_labels() -> None:
    text = metrics.text(metrics.snapshot(_doc(), 1764720000.0))
    ran = promtool.check(text)
    assert ran.returncode == 0 and ran.stdout + ran.stderr == "", ran.stdout + ran.stderr
    assert 'host="node\\"3\\\\x{y}\\nz"' in text  # quote, backslash, line feed escaped
    assert 'envtool_check_ok{host="node4",check="reachable"} 0' in text
    assert 'envtool_check_ok{host="node4",check="lock"}' not in text  # not answered: unchecked
    assert 'envtool_check_ok{host="node1",check="lock"} 1' in text
    assert (
        'envtool_allreduce_busbw_bytes_per_second{host="node1",bytes="peak"} 412500000000' in text
    )
    assert 'envtool_lock_info{lock_sha256="' + "c" * 64 + '"} 1' in text
    sized = [
        line
        for line in text.splitlines()
        if line.startswith('envtool_allreduce_busbw_bytes_per_second{host="node1",bytes="')
        and "peak" not in line
    ]
    assert len(sized) == metrics.MAX_SIZES  # the 8 largest of the 23 sizes run
    assert sized[-1] == ('envtool_allreduce_busbw_bytes_per_second{host="node1",'
                         'bytes="33554432"} 412500000000')  # fmt: skip


def test_finding_series_are_bounded_per_host_and_the_count_keeps_them_all() -> None:
    text = metrics.text(metrics.snapshot(_doc(findings=500), 0.0))
    assert text.count("envtool_finding{") == metrics.MAX_FINDINGS
    assert 'envtool_findings{host="node\\"3\\\\x{y}\\nz",severity="error"} 500' in text
    assert promtool.check(text).returncode == 0


def test_the_file_is_a_prom_file_written_whole(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"reads only \*\.prom files"):
        metrics.write(tmp_path / "envtool.txt", "x 1\n")
    target = tmp_path / "envtool.prom"
    metrics.write(target, metrics.text(metrics.snapshot(_doc(), 0.0)))
    assert [p.name for p in tmp_path.iterdir()] == ["envtool.prom"]  # no temp file left


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _running(argv: list[str], log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_real_prometheus_scrapes_the_finding_from_node_exporter(tmp_path: Path) -> None:
    exporter, prom = shutil.which("prometheus-node-exporter"), shutil.which("prometheus")
    require(exporter is not None and prom is not None,
            "prometheus and prometheus-node-exporter are not installed (apt-get install "
            "prometheus prometheus-node-exporter)")  # fmt: skip
    assert exporter is not None and prom is not None
    folder = tmp_path / "textfile"
    folder.mkdir()
    metrics.write(folder / "envtool.prom", metrics.text(metrics.snapshot(_doc(), time.time())))
    ne, pp = _port(), _port()
    (tmp_path / "prom.yml").write_text(
        "global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: node\n"
        f'    static_configs: [{{targets: ["127.0.0.1:{ne}"]}}]\n'
    )
    with (
        _running([exporter, f"--web.listen-address=127.0.0.1:{ne}", "--collector.disable-defaults",
                  "--collector.textfile", f"--collector.textfile.directory={folder}"],
                 tmp_path / "ne.log"),
        _running([prom, f"--config.file={tmp_path / 'prom.yml'}",
                  f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{pp}"], tmp_path / "prom.log"),
    ):  # fmt: skip
        api = f"http://127.0.0.1:{pp}/api/v1/query?query="
        found: list[dict[str, object]] = []
        end = time.monotonic() + 60
        while not found and time.monotonic() < end:
            time.sleep(1)
            try:
                with urllib.request.urlopen(api + "envtool_finding", timeout=5) as answer:
                    found = json.load(answer)["data"]["result"]
            except OSError:
                continue
        panels = {title: _ask(api + urllib.parse.quote(expr)) for title, expr in _dashboard()}
    assert found, (tmp_path / "prom.log").read_text()[-2000:]
    assert all(status == "success" for status, _ in panels.values()), panels
    assert panels["Findings now"][1] and panels["Hosts with an error finding"][1], panels
    labels = found[0]["metric"]
    assert isinstance(labels, dict)
    assert labels["host"] == HOSTILE and labels["kind"] == "version-differs"
    assert labels["subject"] == 'nccl "0"\n}'


def _dashboard() -> list[tuple[str, str]]:
    """docs/'s Grafana dashboard: each panel's title and query, its ``$host`` variable at
    "All" (the dashboard's allValue)."""
    path = Path(__file__).resolve().parents[2] / "docs" / "prometheus" / "dashboard.json"
    doc = json.loads(path.read_text())
    (host,) = [v for v in doc["templating"]["list"] if v["name"] == "host"]
    return [(p["title"], t["expr"].replace("$host", host["allValue"])) for p in doc["panels"]
            for t in p["targets"]]  # fmt: skip


def _ask(url: str) -> tuple[str, list[object]]:
    """Prometheus's status and result for one instant query (an error: its status)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            doc = json.load(answer)
    except urllib.error.HTTPError as exc:
        return f"{exc.code}: {exc.read()[:200]!r}", []
    return str(doc["status"]), list(doc["data"]["result"])


def test_a_terminal_sequence_in_a_label_never_reaches_the_terminal() -> None:
    """A subject a node made (a package name, a GPU's) with ESC and CR in it: U+FFFD in the
    file and in ``envtool metrics``'s output, which promtool still accepts."""
    f = FindingEntry("version-differs", "error", "nccl\x1b[2J\r\x07", "a", "b", "fix", ("node1",))
    doc = VerifyDocument(None, 1.0, False, _doc().hosts[:1], (f,))
    text = metrics.text(metrics.snapshot(doc, 0.0))
    assert 'subject="nccl\ufffd[2J\ufffd\ufffd"' in text
    assert not any(ch in text for ch in "\x1b\r\x07")
    assert promtool.check(text).returncode == 0
