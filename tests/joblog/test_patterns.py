"""What one line is a sign of (joblog/patterns.py), for the messages gloo, torch's shared
memory and torchelastic write: each line below is the message as its source writes it, copied
from a run here (torch 2.13.0 CPU, gloo, torchrun: tests/cluster/test_explain_lab.py makes
them) or, where marked, from the strings in torch's own libraries."""

from __future__ import annotations

import pytest

from envtool.joblog.origin import Origin
from envtool.joblog.patterns import classify
from envtool.joblog.scan import Event
from envtool.joblog.signs import Sign
from envtool.report.explain_words import timeouts

GLOO = "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp"


@pytest.mark.parametrize(
    ("line", "sign", "detail"),
    [
        (f"RuntimeError: {GLOO}/unbound_buffer.cc:78] Timed out waiting 10000ms for recv "
         "operation to complete", Sign.GLOO_TIMEOUT, {"timeout_ms": "10000", "op": "recv"}),
        (f"RuntimeError: {GLOO}/unbound_buffer.cc:129] Timed out waiting 10000ms for send "
         "operation to complete", Sign.GLOO_TIMEOUT, {"timeout_ms": "10000", "op": "send"}),
        (f"RuntimeError: [enforce fail at {GLOO}/device.cc:84] ifa != nullptr. Unable to find "
         "address for: eth9", Sign.IFNAME, {"interface": "eth9"}),
        # NCCL's bootstrap and socket transport (src/bootstrap.cc, net_socket.cc WARN lines)
        ("node3:4100:4100 [0] bootstrap.cc:77 NCCL WARN Bootstrap : no socket interface found",
         Sign.IFNAME, {"transport": "Bootstrap"}),
        ("node3:4100:4190 [0] NCCL WARN NET/Socket : no interface found", Sign.IFNAME,
         {"transport": "NET/Socket"}),
        ("RuntimeError: unable to allocate shared memory(shm) for file "
         "</torch_4305_1155230677_0>: No space left on device (28)", Sign.SHM,
         {"segment": "/torch_4305_1155230677_0"}),
        # ATen's MapAllocator: "unable to write to file <%s>" (in libtorch_cpu.so 2.13 too)
        ("RuntimeError: unable to write to file </torch_18693_3_0>: No space left on device (28)",
         Sign.SHM, {"segment": "/torch_18693_3_0"}),
        # torch/csrc/DataLoader.cpp: a DataLoader worker's SIGBUS handler (libtorch_python.so)
        ("ERROR: Unexpected bus error encountered in worker. This might be caused by "
         "insufficient shared memory (shm).", Sign.SHM, {"worker": "bus error"}),
        ("rank      : 7 (local_rank: 1)", Sign.ELASTIC_RANK, {"rank": "7", "local_rank": "1"}),
        # rank 0 of the lab's 16-rank job: its peer exited after its own timeout, first
        (f"RuntimeError: {GLOO}/pair.cc:553] Connection closed by peer [10.77.56.11]:4496. "
         "This is typically caused by a remote worker crashing.", Sign.GLOO_CLOSED,
         {"peer": "10.77.56.11", "port": "4496"}),
    ],
)  # fmt: skip
def test_a_line_is_its_sign(line: str, sign: Sign, detail: dict[str, str]) -> None:
    found = classify(line)
    assert found is not None and found[0] is sign
    assert {k: v for k, v in found[1] if k in detail} == detail


@pytest.mark.parametrize(
    "line",
    [
        "unable to write to file </torch_1_2_3>: Permission denied (13)",  # not a full shm
        "Unable to find addressbook",
        "rank 7 (local_rank: 1) restarted",  # not elastic's block
    ],
)
def test_near_misses_are_not_those_signs(line: str) -> None:
    found = classify(line)
    assert found is None or found[0] not in (Sign.SHM, Sign.IFNAME, Sign.ELASTIC_RANK)


def _gloo(rank: int, host: str, op: str) -> Event:
    detail = (("timeout_ms", "10000"), ("op", op))
    return Event(Sign.GLOO_TIMEOUT, "job.log", rank, "", Origin(host, rank, via=("x",)), detail)


def test_gloo_timeouts_are_said_by_host_and_rank_range() -> None:
    waits = [_gloo(r, "node1", "recv") for r in (0, 1, 2, 5, 4, 3)]
    waits += [_gloo(r, "node2", "send") for r in (8, 10)]
    said = timeouts(waits, [7], [(7, "node2")])
    assert said == (
        "node1 (ranks 0-5): gloo recv, Timeout(ms)=10000; node2 (ranks 8,10): gloo send, "
        "Timeout(ms)=10000; no timeout from rank 7 (node2)"
    )


def test_every_rank_that_waited_counts_not_only_the_lines_kept() -> None:
    """40 ranks time out (more than the 16 lines of a sign a file keeps), rank 40 does not:
    it alone is the one that reported nothing (explain's "no timeout from rank 40")."""
    from envtool.joblog.scan import scan
    from envtool.joblog.stream import RawLine
    from envtool.judge import explain

    text = [f"[rank{r}]: RuntimeError: {GLOO}/unbound_buffer.cc:78] Timed out waiting 10000ms "
            "for recv operation to complete" for r in range(40)]  # fmt: skip
    text.append("[rank40]: step 1 ok")
    lines = [RawLine(n, t, len(t), False) for n, t in enumerate(text, 1)]
    assert explain.decide([scan("job.log", lines)]).silent == (40,)
