"""``--allreduce pairs`` and ``bisect``: rounds of two-node all-reduces.

``pairs``: every pair of nodes once. Each round is a perfect matching (the circle method: N-1
rounds for an even N, N rounds with one node resting for an odd N), so every node is busy
once per round and a slow node or link shows in the pairs it is part of.

``bisect``, when the question is only "which node": the first round of ``pairs`` halves the
nodes into pairs at once; each node of a slow or failed pair (and a node that rested) is then
paired with a node of a fast pair (judge/pairs.next_round), so the slow node is the one whose
second pair is slow too: two rounds for any N with one slow node (three when it rested in the
first), against N-1. A slow link between two nodes that never meet is not seen.

Each pair is launched exactly as ``--allreduce cluster`` launches a job (torchrun, c10d
rendezvous on the pair's first node; the pairs of a round on ports PORT, PORT+1, ...), with
the node told to run the all-reduce only; the pairs of a round run at once, and each round
has the verify deadline: a hung pair costs its round, never the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from envtool.cluster import survey
from envtool.cluster.hosts import Host
from envtool.cluster.options import FanoutOptions
from envtool.judge import pairs as judge
from envtool.judge.gpu import GpuPolicy
from envtool.protocol.schemas import CAUSE_PORT_TAKEN
from envtool.protocol.types import AllReduceResult, HostReport, PairRun, PairsRun


def rounds(count: int) -> list[list[tuple[int, int]]]:
    """The circle method over ``count`` nodes (indices): each round a perfect matching,
    every pair exactly once; with an odd count one node rests each round."""
    order: list[int | None] = list(range(count)) + ([None] if count % 2 else [])
    size = len(order)
    out = []
    for _ in range(size - 1):
        pairs = []
        for i in range(size // 2):
            a, b = order[i], order[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        out.append(sorted(pairs))
        order = [order[0], order[-1], *order[1:-1]]  # rotate all but the first
    return out


def _result(reports: list[HostReport]) -> tuple[AllReduceResult | None, str, str]:
    """Rank 0's result of a pair, checked against both members' answers (one rank 0, the other
    a member of the same backend, an even number of ranks), or one line on why there is none;
    and the node whose answer carried it (no node speaks for another)."""
    said = [(r.host, r.allreduce) for r in reports if r.allreduce is not None]
    results = [(host, a) for host, a in said if not a.member and not a.error]
    members = [a for _, a in said if a.member]
    if len(results) > 1:
        return None, f"{' and '.join(h for h, _ in results)} each report rank 0's result", ""
    if results:
        by, result = results[0]
        if not members:
            why = _why([r for r in reports if r.host != by]) or "no answer"
            return None, f"{by} reports a result its partner took no part in ({why})"[:300], by
        if result.nranks < 2 or result.nranks % 2 or members[0].backend != result.backend:
            return None, f"{by} reports {result.nranks} {result.backend} ranks for two nodes", by
        return result, "", by
    failed = [(host, a.error) for host, a in said if not a.member and a.error]
    if failed:
        return None, failed[0][1], failed[0][0]
    return None, _why(reports) or "no rank reported a result", ""


def _why(reports: list[HostReport]) -> str:
    why = [f"{r.host}: {r.failure.detail}" for r in reports if r.failure is not None]
    why += [f"{r.host}: {p.detail}" for r in reports for p in r.problems]
    if not why:
        why = [
            f"{r.host}: {r.allreduce.error}" for r in reports if r.allreduce and r.allreduce.error
        ]
    return "; ".join(why)[:300]


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass(frozen=True)
class How:
    """How every pair is launched: the fan-out options, the all-reduce's arguments, the first
    rendezvous port and the rendezvous host asked for (used only when it is this machine)."""

    fan: FanoutOptions
    args: tuple[str, ...]
    port: int
    rdzv_host: str = ""
    on_round: Callable[[str], None] = lambda what: None  # told as each round starts

    def endpoint(self, first: Host, slot: int) -> str:
        """Where the ``slot``-th pair of a round meets: its first node, or ``rdzv_host`` when
        that names this machine (every node on one machine, as the test Slurm cluster runs;
        no node name resolves there), on PORT + slot (pairs of one round never share one)."""
        host = self.rdzv_host if self.rdzv_host in LOOPBACK else first.name
        return f"{host}:{self.port + slot}"


def _one(pair: tuple[Host, Host], number: int, slot: int, how: How) -> PairRun:
    a, b = pair
    start = time.monotonic()
    node = survey.node_args([a, b], "cluster", how.args, how.fan.timeout, how.endpoint(a, slot))
    # before --allreduce's own; the pair's first node hosts its rendezvous store
    options = replace(how.fan, node_args=("--allreduce-only", *node), rdzv_host=a.label)
    reports = survey.survey([a, b], options)
    result, error, by = _result(reports)
    # the partner's own figures of the same run: the pair's figure is checked at both ends
    echo = [r.allreduce.peak_busbw for r in reports
            if r.host != by and r.allreduce is not None and r.allreduce.member]  # fmt: skip
    taken = [r for r in reports if r.allreduce is not None and r.allreduce.cause]
    if taken:  # the pair's store could not be envtool's: that, not the pair, is the finding
        ar = taken[0].allreduce
        error, by, cause = ar.error if ar else error, taken[0].host, CAUSE_PORT_TAKEN
    else:
        cause = ""
    seconds = time.monotonic() - start
    partner = echo[0] if echo and result is not None else None
    return PairRun(a.label, b.label, number, result, error, seconds, by, cause, partner)


def _round(pairs: list[tuple[Host, Host]], number: int, how: How) -> list[PairRun]:
    """The pairs of one round, at once."""
    names = ", ".join(f"{a.label} <-> {b.label}" for a, b in pairs)
    how.on_round(f"pairs: round {number}: {names}")
    results: list[PairRun | None] = [None] * len(pairs)

    def run(slot: int) -> None:
        results[slot] = _one(pairs[slot], number, slot, how)

    threads = [
        threading.Thread(target=run, args=(slot,), daemon=True) for slot in range(len(pairs))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def measure(
    hosts: Sequence[Host], how: How, plan: list[list[tuple[int, int]]] | None = None
) -> PairsRun:
    """The pairs of ``plan`` (default: every pair of ``hosts``), round after round, the pairs
    of a round at once."""
    start = time.monotonic()
    plan = rounds(len(hosts)) if plan is None else plan
    done: list[PairRun] = []
    for number, matching in enumerate(plan, start=1):
        done += _round([(hosts[i], hosts[j]) for i, j in matching], number, how)
    return PairsRun(tuple(done), len(plan), time.monotonic() - start)


def more(
    run: PairsRun, plan: list[list[tuple[str, str]]], hosts: Sequence[Host], how: How
) -> PairsRun:
    """``run`` with the rounds of ``plan`` (pairs of targets) after its own."""
    start = time.monotonic()
    by_target = {h.label: h for h in hosts}
    done, number = list(run.pairs), run.rounds
    for matching in plan:
        number += 1
        done += _round([(by_target[a], by_target[b]) for a, b in matching], number, how)
    return PairsRun(tuple(done), number, run.seconds + time.monotonic() - start)


def confirm(
    run: PairsRun, suspects: Sequence[tuple[str, str]], hosts: Sequence[Host], how: How
) -> PairsRun:
    """Each suspect pair measured again, alone (one round each): its figure replaces the
    one it had beside the other pairs of its round."""
    start = time.monotonic()
    by_target = {h.label: h for h in hosts}
    pairs, rounds = list(run.pairs), run.rounds
    for a, b in suspects:
        rounds += 1
        how.on_round(f"pairs: round {rounds}: {a} <-> {b} (again, alone)")
        again = _one((by_target[a], by_target[b]), rounds, 0, how)
        pairs = [again if (p.a, p.b) == (a, b) else p for p in pairs]
    return PairsRun(tuple(pairs), rounds, run.seconds + time.monotonic() - start)


def run(
    mode: str, answered: Sequence[Host], how: How, policy: GpuPolicy,
    links: judge.Ceilings | None = None,
) -> PairsRun:  # fmt: skip
    """``pairs``: every pair, round by round; ``bisect``: one matching, then each suspect
    beside a good node (judge/pairs.next_round) until the slow node is named. A pair that was
    slow beside the others of its round is measured once more, alone. ``links``: each node's
    most credible busbw (judge/pairs.ceilings), so no inflated figure steers the rounds."""
    if mode == "bisect":
        done = measure(answered, how, rounds(len(answered))[:1])
        labels = [h.label for h in answered]
        while done.rounds < len(answered) and (
            step := judge.next_round(done, policy, labels, links)
        ):
            done = more(done, [step], answered, how)
    else:
        done = measure(answered, how)
    suspects = judge.suspect_links(done, policy, links)
    return confirm(done, suspects, answered, how) if suspects else done
