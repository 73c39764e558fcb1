"""``envtool explain`` on what else a failed job leaves (synthetic, each said so): the NCCL
header lines of every rank compared across hosts, a kernel log with the driver's Xid records
(and the framing trick of issue 33, text inside another kernel message), NCCL's IB completion
errors, folders (an ``envtool collect`` folder: its node named by the folder), torchelastic
``error.json`` files. Formats: NCCL's own lines (``init.cc``'s ``NCCL version``,
``net_ib.cc``'s ``Got completion from peer``), the driver's ``NVRM: Xid (PCI:...)``,
torch's ``elastic/multiprocessing/errors/error_handler.py`` (``{"message": {"message",
"extraInfo": {"py_callstack", "timestamp"}}}``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_main

from envtool.cli import main
from envtool.protocol import collect_record, explain_report


def _explain(tmp_path: Path, *paths: Path) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_main(main, tmp_path, [], ("explain", *map(str, paths), "--format", "json"))
    assert out, err
    explain_report.loads(out, "out")  # the strict reader takes what was written
    return code, json.loads(out), err


def _header(hosts: dict[str, str], ifname: str = "eth0") -> list[str]:
    """What each rank's NCCL_DEBUG=INFO init prints (synthetic), ``hosts``: host -> version."""
    lines = []
    for task, (host, version) in enumerate(hosts.items()):
        nccl = f"{task}: {host}:{4100 + task}:{4100 + task} [0] NCCL INFO"
        lines += [
            f"{nccl} NCCL version {version}",
            f"{nccl} cudaDriverVersion 12020",
            f"{nccl} NCCL_SOCKET_IFNAME set by environment to {ifname}",
            f"{nccl} NET/Socket : Using [0]{ifname}:10.0.0.{task + 1}<0>",
            f"{nccl} comm 0x55d0 rank {task} nranks {len(hosts)} cudaDev 0 - Init COMPLETE",
        ]
    return lines


def test_the_host_whose_nccl_differs_is_named(tmp_path: Path) -> None:
    hosts = {"node01": "2.19.3+cuda11.8", "node02": "2.19.3+cuda11.8", "node03": "2.18.3+cuda11.8"}
    log = tmp_path / "job.log"
    log.write_text("\n".join(_header(hosts)) + "\n")
    code, doc, _ = _explain(tmp_path, log)
    assert code == 1 and doc["status"] == "differs"  # no failure, yet the ranks differ
    (f,) = doc["findings"]
    assert (f["finding"]["kind"], f["finding"]["subject"], f["finding"]["hosts"]) == (
        "differs-from-majority", "NCCL version", ["node03"],
    )  # fmt: skip
    assert "2.18.3+cuda11.8 on node03; 2.19.3+cuda11.8 on the other hosts" in f["finding"]["actual"]
    assert f["evidence"][0]["line"] == 11  # node03's own line, then one of the majority's
    # with a watchdog timeout, the differing host is the cause, the timeout beside it
    timeout = ("1: [rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective "
               "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
               "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.")  # fmt: skip
    log.write_text("\n".join([*_header(hosts), timeout]) + "\n")
    code, doc, _ = _explain(tmp_path, log)
    assert code == 1 and doc["status"] == "cause"
    assert [f["finding"]["kind"] for f in doc["findings"]] == [
        "differs-from-majority", "collective-timeout",
    ]  # fmt: skip


def test_the_same_header_everywhere_is_no_finding(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join(_header({f"node0{i}": "2.19.3+cuda11.8" for i in (1, 2)})) + "\n")
    code, doc, _ = _explain(tmp_path, log)
    assert code == 0 and doc["status"] == "no-failure" and doc["findings"] == []


def test_an_nccl_variable_two_nodes_set_apart_is_one_finding_with_both(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    a = _header({"node01": "2.19.3"}, "eth0")
    b = [line.replace("node01", "node02").replace("0: ", "1: ") for line in _header(
        {"node01": "2.19.3"}, "ib0")]  # fmt: skip
    log.write_text("\n".join(a + b) + "\n")
    _, doc, _ = _explain(tmp_path, log)
    kinds = {(f["finding"]["kind"], f["finding"]["subject"]) for f in doc["findings"]}
    assert ("nccl-env-differs", "NCCL_SOCKET_IFNAME") in kinds
    assert ("differs-between-nodes", "NCCL's socket interfaces (NET/Socket)") in kinds


def test_a_kernel_logs_xid_79_is_the_cause_and_text_inside_a_message_is_not(
    tmp_path: Path,
) -> None:
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text(
        # what any user can make the kernel print (issue 33 item 1): not the driver's
        "[  100.123456] tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:3b:00): 79'\n"
        "[  101.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics "
        "Exception: ESR 0x405840=0x0\n"
    )
    code, doc, _ = _explain(tmp_path, dmesg)
    assert code == 4  # an application Xid alone: the job's own fault, not established
    assert doc["findings"][0]["evidence"][0]["line"] == 2
    with dmesg.open("a") as fh:  # the journal's form, naming its host
        fh.write("Dec 02 08:00:01 node07 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, "
                 "name=python, GPU has fallen off the bus.\n")  # fmt: skip
    code, doc, _ = _explain(tmp_path, dmesg)
    assert code == 1, doc["verdict"]
    (f, *_) = doc["findings"]
    assert (f["finding"]["kind"], f["finding"]["subject"], f["finding"]["hosts"]) == (
        "gpu-xid", "GPU 0000:3b:00", ["node07"],
    )  # fmt: skip
    assert f["evidence"][0]["line"] == 3 and "reboot" in f["finding"]["actual"]


def test_an_ib_completion_error_names_the_peer_and_the_hca(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "node2:55:60 [1] NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.2<0>\n"
        "node2:55:60 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.3<43594> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
        "::ffff:10.0.0.2 remoteGid ::ffff:10.0.0.3\n"
        "node2:55:60 [1] NCCL INFO transport/net.cc:1234 -> 6\n"
        "node1:44:44 [0] NCCL INFO [Service thread] Connection closed by localRank 0\n"
    )
    code, doc, _ = _explain(tmp_path, log)
    assert code == 1
    f = doc["findings"][0]
    assert (f["finding"]["kind"], f["finding"]["subject"], f["finding"]["hosts"]) == (
        "ib-completion-error", "peer 10.0.0.3", ["node2"],
    )  # fmt: skip
    assert "retry counter exceeded" in f["finding"]["actual"]


def _collect_folder(root: Path) -> Path:
    """An ``envtool collect`` folder of a 2-node job (synthetic): each node's collect.json,
    its kernel log, a torchelastic error.json on node2."""
    job = root / "4242"
    for host in ("node1", "node2"):
        (job / host / "error").mkdir(parents=True)
        record = collect_record.CollectRecord(host, "4242", "alice", 1764662000.0, "--since",
                                              1764662500.0, (), (), ())  # fmt: skip
        (job / host / "collect.json").write_text(collect_record.dumps(record))
        (job / host / "kernel.log").write_text("[  5.0] nvidia: loading out-of-tree module\n")
    error = {"message": {"message": "RuntimeError: CUDA error: uncorrectable ECC error "
                         "encountered\nCompile with `TORCH_USE_CUDA_DSA`",
                         "extraInfo": {"py_callstack": "Traceback (most recent call last):\n"
                                       '  File "train.py", line 10, in <module>\n',
                                       "timestamp": "1764662400"}}}  # fmt: skip
    (job / "node2" / "error" / "0-error.json").write_text(json.dumps(error))
    return job


def test_a_collect_folder_names_each_files_node(tmp_path: Path) -> None:
    job = _collect_folder(tmp_path)
    code, doc, _ = _explain(tmp_path, job)
    assert code == 1, doc["verdict"]
    f = doc["findings"][0]
    assert f["finding"]["kind"] == "gpu-ecc-uncorrectable" and f["finding"]["hosts"] == ["node2"]
    assert f["evidence"][0]["file"].endswith("node2/error/0-error.json")
    assert f["evidence"][0]["where"].startswith("node2")
    assert sorted(Path(e["path"]).name for e in doc["files"]) == [
        "0-error.json", "kernel.log", "kernel.log",
    ]  # fmt: skip


def test_a_folder_naming_another_host_than_its_collect_json_is_not_believed(
    tmp_path: Path,
) -> None:
    job = _collect_folder(tmp_path)
    said = (job / "node2" / "collect.json").read_text()
    (job / "node2" / "collect.json").write_text(said.replace('"node2"', '"node9"'))
    _, doc, _ = _explain(tmp_path, job)
    assert doc["findings"][0]["finding"]["hosts"] == []  # said by neither: not attributed


def test_an_error_json_that_is_not_one_is_read_as_a_log(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text('{"loss": 2.3}\n{"loss": "CUDA error: out of memory"}\n')
    code, doc, _ = _explain(tmp_path, odd)
    assert code == 4 and doc["findings"][0]["evidence"][0]["line"] == 2


def test_junit_names_the_cause_and_each_finding(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    job = _collect_folder(tmp_path)
    code, out, _ = run_main(main, tmp_path, [], ("explain", str(job), "--format", "junit"))
    assert code == 1
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    (case, *_) = suite.iter("testcase")
    failure = case.find("failure")
    assert case.get("name") == "verdict" and failure is not None
    assert failure.get("type") == "gpu-ecc-uncorrectable"
    assert "0-error.json:1 [node2" in (failure.text or "")
    log = tmp_path / "ok.log"
    log.write_text("step 1 loss 2.3\n")
    code, out, _ = run_main(main, tmp_path, [], ("explain", str(log), "--format", "junit"))
    suite = ET.fromstring(out).find("testsuite")
    assert code == 0 and suite is not None and suite.get("failures") == "0"


def test_a_header_value_with_terminal_escapes_is_shown_escaped(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    a = _header({"node01": "2.19.3", "node02": "2.19.3"}, "eth0")
    b = [line.replace("node01", "node03").replace("0: ", "2: ") for line in _header(
        {"node01": "2.19.3"}, "eth0\x1b[2J")]  # fmt: skip
    log.write_text("\n".join(a + b) + "\n")
    _, doc, _ = _explain(tmp_path, log)
    said = [f["finding"]["actual"] for f in doc["findings"]]
    assert said and all("\x1b" not in s for s in said) and any("\\x1b" in s for s in said)
