"""A failed job's logs joined with the nodes' facts (a saved ``envtool verify`` report): the
verify findings on the hosts the logs blame, and the one that explains the log's event named
as its cause where the logs alone did not establish one (a hang on the node whose
``NCCL_SOCKET_IFNAME`` matches nothing, a SIGBUS on the node with a 64 MiB /dev/shm). Pure.

No node speaks for another: a verify finding is joined only on a host the logs name, or,
where the logs name no host at all, said as the report's (``the logs name no host``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from envtool.joblog.signs import Sign
from envtool.judge.explain import Explained, JobVerdict, Status
from envtool.protocol.verify_report import FindingEntry, VerifyDocument

_HANG = frozenset({
    "socket-ifname-unmatched", "rendezvous-unreachable", "rendezvous-loopback",
    "rendezvous-unresolvable", "rendezvous-address-differs", "gloo-loopback", "gpu-busy",
    "gpu-xid", "gpu-unreadable", "gpu-fabric-not-ready", "gpu-nvlink-down", "ib-port-down",
    "ib-hca-missing", "version-differs", "differs-from-majority", "version-mismatch",
    "nccl-env-differs", "two-nccls", "shm-small", "memlock-low", "clock-skew",
})  # fmt: skip
_GPU = frozenset({"gpu-xid", "gpu-ecc-uncorrectable", "gpu-unreadable", "gpu-busy",
                  "gpu-row-remap", "driver-too-old", "cuda-version-mismatch"})  # fmt: skip
_CONNECT = frozenset({"socket-ifname-unmatched", "rendezvous-unreachable",
                      "rendezvous-loopback", "rendezvous-unresolvable", "gloo-loopback",
                      "rendezvous-address-differs"})  # fmt: skip
_MISMATCH = frozenset({"version-differs", "differs-from-majority", "nccl-env-differs",
                       "version-mismatch", "two-nccls"})  # fmt: skip
# what only NCCL uses: /dev/shm, RDMA, its own variables (gloo's timeouts are not theirs)
_NCCL_ONLY = frozenset({"shm-small", "memlock-low", "ib-port-down", "ib-hca-missing",
                        "nccl-env-differs", "two-nccls"})  # fmt: skip
# the verify kinds that explain a failure line of each sign (the log's event, the node's fact)
EXPLAINS: dict[Sign, frozenset[str]] = {
    Sign.SHM: frozenset({"shm-small"}),
    Sign.SIGBUS: frozenset({"shm-small"}),
    Sign.IB_REG_MR: frozenset({"memlock-low"}),
    Sign.IB_QP: frozenset({"ib-port-down", "ib-hca-missing", "peermem-missing"}),
    Sign.IB_COMPLETION: frozenset({"ib-port-down", "ib-rate-differs"}),
    Sign.SOCKET: _CONNECT,
    Sign.GLOO_LOOPBACK: frozenset({"gloo-loopback", "rendezvous-loopback"}),
    Sign.IFNAME: frozenset({"socket-ifname-unmatched"}),
    Sign.CUDA_ERROR: _GPU,
    Sign.ECC: frozenset({"gpu-ecc-uncorrectable", "gpu-xid", "gpu-row-remap"}),
    Sign.XID: _GPU,  # an application's Xid: a hardware one is a cause of its own
    Sign.MISMATCH: _MISMATCH,
    Sign.NCCL_WARN: _HANG,
    Sign.NCCL_ERROR: _HANG,
    Sign.INIT_INCOMPLETE: _HANG,
    Sign.WATCHDOG: _HANG,
    Sign.WATCHDOG_STACK: _HANG,
    Sign.GLOO_TIMEOUT: _HANG - _NCCL_ONLY,
    Sign.RAS_DEAD: _HANG | _GPU,
    Sign.RAS_MISSING: _HANG | _GPU,
    Sign.RAS_ERROR: _HANG | _GPU,
}


@dataclass(frozen=True)
class Joined:
    """A verify finding beside the logs' verdict: ``cause`` (it explains the log's event),
    ``confirms`` (the logs named the same), or ``beside`` (another finding on a blamed host)."""

    role: str
    report: str  # the report's file
    finding: FindingEntry
    unattributed: bool = False  # the logs name no host: the report's host, not the logs'


# causes a log names that are themselves what a node's fact gives: a verify finding that
# explains them is the deeper cause (a port down on the IB peer, two NCCL versions)
_SYMPTOMS = frozenset({Sign.IB_COMPLETION, Sign.IB_QP, Sign.MISMATCH})


def peer_hosts(lead: Explained, reports: Sequence[tuple[str, VerifyDocument]]) -> set[str]:
    """The hosts whose interfaces (as their verify reports read them) hold the address the
    lead line names as its peer (``Got completion from peer 10.0.0.3``)."""
    peer = (lead.lead.get("peer") or "").strip("[]")
    if not peer:
        return set()
    out = set()
    for _, doc in reports:
        for h in doc.hosts:
            links = h.network.interfaces if h.network is not None else ()
            if any(a.split("/")[0] == peer for i in links for a in i.addresses):
                out.add(h.host)
    return out


def blamed(verdict: JobVerdict) -> tuple[str, ...]:
    """The hosts the verdict's findings and their evidence name."""
    hosts = {h for f in verdict.findings for h in f.finding.hosts}
    hosts |= {e.origin.host for f in verdict.findings for e in f.evidence if e.origin.host}
    hosts |= {host for _, host in verdict.silent_on}  # a rank that reported no timeout
    return tuple(sorted(hosts))


def join(
    verdict: JobVerdict, reports: Sequence[tuple[str, VerifyDocument]], named: Sequence[str]
) -> tuple[JobVerdict, tuple[Joined, ...]]:
    """The verdict (a cause named from a report where the logs had none) and the joined
    findings; ``named``: every host the logs name."""
    if not reports or not verdict.findings:
        return verdict, ()
    lead: Explained = verdict.findings[0]
    want = EXPLAINS.get(lead.lead.sign, frozenset())
    hosts = (set(blamed(verdict)) or set(named)) | peer_hosts(lead, reports)
    deeper = verdict.status is not Status.CAUSE or lead.lead.sign in _SYMPTOMS
    out: list[Joined] = []
    for source, doc in reports:
        for f in doc.findings:
            on = set(f.hosts) & hosts if hosts else set(f.hosts)
            if not on:
                continue
            f = replace(f, hosts=tuple(sorted(on)))
            if f.kind == lead.finding.kind.value and verdict.status is Status.CAUSE:
                role = "confirms"
            elif f.kind in want and f.severity == "error" and deeper:
                role = "cause"
            elif hosts:
                role = "beside"
            else:  # the logs name no host: only what explains their event is joined
                continue
            out.append(Joined(role, source, f, not hosts))
    order = {"cause": 0, "confirms": 1, "beside": 2}
    out.sort(key=lambda j: order[j.role])
    if out and out[0].role == "cause":
        verdict = replace(verdict, status=Status.CAUSE)
        out = [out[0]] + [replace(j, role="beside") if j.role == "cause" else j for j in out[1:]]
    return verdict, tuple(out)
