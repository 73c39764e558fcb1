"""The words of ``envtool explain``: who wrote a line, what each sign's line says, and what
evidence would settle a failure whose cause the logs do not establish. Every value taken
from a log is made visible (report/text.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from envtool.joblog.origin import Origin
from envtool.joblog.scan import Event
from envtool.joblog.signs import Sign
from envtool.judge import xid_catalog
from envtool.judge.findings import Finding
from envtool.judge.kinds import Kind
from envtool.report.text import visible

NOT_ATTRIBUTED = "not attributed"
SHORT_TIMEOUT_MS = 1_000  # a timeout below a second is shorter than collectives take


def where(o: Origin) -> str:
    """``node3 (rank 2, GPU 0)``, ``rank 8``, or ``not attributed``."""
    said = [
        f"{name} {n}"
        for name, n in (
            ("rank", o.rank),
            ("local rank", o.local_rank),
            ("task", o.task),
            ("GPU", o.gpu),
        )
        if n is not None
    ]
    if o.host:
        return visible(o.host) + (f" ({', '.join(said)})" if said else "")
    return ", ".join(said) or NOT_ATTRIBUTED


def _mib(size: str | None) -> str:
    return f" ({int(size) / 2**20:.1f} MiB)" if size and size.isdigit() else ""


def _cuda(found: str | None) -> str:
    if not found or not found.isdigit():
        return ""
    n = int(found)
    return f" (found version {n}: it supports CUDA {n // 1000}.{n % 1000 // 10} at most)"


_PLAIN: dict[Sign, str] = {
    Sign.ECC: "CUDA error: uncorrectable ECC error encountered (the GPU's memory is faulty)",
    Sign.NO_KERNEL_IMAGE: "CUDA error: no kernel image is available for execution on the device",
    Sign.SIGBUS: "a process died of SIGBUS (signal 7)",
    Sign.GLOO_LOOPBACK: "torch could not resolve the hostname to a local address and gloo fell "
    "back to the loopback address: the other nodes cannot reach this rank",
    Sign.NCCL_ERROR: "an NCCL error (NCCL's own `Last error` and WARN lines say what failed)",
    Sign.WATCHDOG_STACK: "the ProcessGroupNCCL watchdog's stack (checkTimeout, "
    "ncclCommWatchdog) without its timeout line",
    Sign.SIGABRT: "a process aborted (SIGABRT)",
    Sign.ABORTED: "a process group was aborted",
    Sign.ELASTIC: "torchelastic reported a failed worker",
    Sign.EXCEPTION: "a Python exception",
}
_SAID: dict[Sign, Callable[[Callable[[str], str | None]], str]] = {
    Sign.ARCH_UNSUPPORTED: lambda g: (
        f"torch warns the GPU's {g('capability')} is not compatible with its build"
    ),
    Sign.ARCH_LIST: lambda g: f"this torch supports {g('list')}",
    Sign.DRIVER_OLD: lambda g: f"torch: the NVIDIA driver is too old{_cuda(g('found'))}",
    Sign.SHM: lambda g: _shm(g),
    Sign.IFNAME: lambda g: (
        f"gloo found no interface named {g('interface')} (GLOO_SOCKET_IFNAME)"
        if g("interface")
        else f"NCCL {g('transport')}: no interface found (NCCL_SOCKET_IFNAME)"
    ),
    Sign.GLOO_TIMEOUT: lambda g: f"gloo: a {g('op')} timed out (after {g('timeout_ms')} ms)",
    Sign.GLOO_CLOSED: lambda g: (
        f"gloo: peer {g('peer')}:{g('port')} closed the connection (that rank exited first)"
    ),
    Sign.MISMATCH: lambda g: (
        f"NCCL: collective mismatch with peer {g('peer')}: local size "
        f"{g('local')}, remote size {g('remote')}"
        if g("peer")
        else "NCCL: collective mismatch"
    ),
    Sign.IB_QP: lambda g: f"NCCL: {g('call')} failed ({g('error') or 'no error given'})",
    Sign.IB_REG_MR: lambda g: f"NCCL: {g('call')} failed: Cannot allocate memory (ENOMEM)",
    Sign.SOCKET: lambda g: (
        f"connect to {g('peer')}:{g('port')} failed: {g('error')}"
        if g("peer")
        else f"a connect failed: {g('error')}"
    ),
    Sign.CUDA_ERROR: lambda g: f"CUDA error: {g('error') or 'out of memory'}",
    Sign.NCCL_WARN: lambda g: f"NCCL WARN {g('message')}",
    Sign.INIT_INCOMPLETE: lambda g: (
        f"NCCL began its init in {g('processes')} process(es) and "
        "the log ends before it says Init COMPLETE"
    ),
    Sign.WATCHDOG: lambda g: (
        g("fr")
        or (  # a flight-recorder dump's place says itself
            f"watchdog: {g('op')} SeqNum={g('seq')} timed out"
            + (f" (Timeout(ms)={g('timeout_ms')})" if g("timeout_ms") else "")
        )
    ),
    Sign.IB_DEVICE: lambda g: f"NCCL's IB devices: {g('devices')}",
    Sign.RAS_DEAD: lambda g: f"NCCL RAS: {_ras_who(g)} is considered dead (unreachable)",
    Sign.RAS_MISSING: lambda g: (
        f"NCCL RAS: communicator {g('comm')} misses rank(s) {g('ranks')}"
        if g("ranks")
        else f"NCCL RAS: {_ras_who(g)} did not answer"
    ),
    Sign.RAS_ERROR: lambda g: f"NCCL RAS: {_ras_who(g)} reported {g('error') or 'an error'}",
    Sign.XID: lambda g: _xid(g),
    Sign.IB_COMPLETION: lambda g: (
        f"NCCL: an IB work completion from peer {g('peer') or '?'} with status "
        f"{g('status')}{_WC.get(g('status') or '', '')}"
    ),
}
# ibv_wc_status (verbs.h): the codes NCCL's completion errors carry most
_WC: dict[str, str] = {
    "4": " (local protection error)",
    "5": " (flushed: after an earlier error on that queue pair)",
    "10": " (remote access error)",
    "12": " (transport retry counter exceeded: the peer or the path to it stopped answering)",
    "13": " (RNR retry counter exceeded: the peer's receiver was not ready)",
}


def _ras_who(g: Callable[[str], str | None]) -> str:
    """``rank 3 (process 4100 on node 10.0.0.3, GPU 1)``, or the process alone."""
    process = f"process {g('pid')} on node {g('peer')}, GPU {g('gpus')}"
    return f"rank {g('rank')} ({process})" if g("rank") else process


def _shm(g: Callable[[str], str | None]) -> str:
    segment = g("segment") or ""
    if segment.startswith("/torch_"):
        return f"torch could not allocate its shared-memory file {segment}: no space left"
    if segment:
        return f"NCCL could not create {segment}{_mib(g('size'))}"
    if g("worker"):
        return "a DataLoader worker died of a bus error; torch: insufficient shared memory"
    return "no space left on device in /dev/shm"


def _xid(g: Callable[[str], str | None]) -> str:
    code, sub = int(g("xid") or 0), g("sub") or ""
    said = xid_catalog.meaning(code, sub)
    action = xid_catalog.resolution(code, sub).value
    return (
        f"the NVIDIA driver: Xid {code} on GPU {g('pci')}"
        + (f" ({said})" if said else "")
        + f"; first action: {action}"
    )


def differs(f: Finding) -> str:
    """``NCCL version 2.18.3 on node3; 2.19.3 on the others``, or each value with its hosts."""
    if f.spread:
        said = "; ".join(f"{v} on {', '.join(h)}" for v, h in f.spread)
    else:
        said = f"{f.actual} on {', '.join(f.hosts)}; {f.expected} on the other hosts"
    return visible(f"{f.subject}: {said}")  # every value is a log's


def what(e: Event) -> str:
    """What the line of ``e`` says, in a few words."""
    if (said := _SAID.get(e.sign)) is not None:
        return visible(said(e.get))
    return _PLAIN.get(e.sign, e.sign.value)


_NEEDS: dict[Sign, tuple[str, ...]] = {
    Sign.SIGBUS: (
        "the size of /dev/shm where the rank ran (`df -h /dev/shm` in its container; "
        "`envtool verify` says `shm-small`)",
        "what the rank was doing: the log lines before it",
    ),
    Sign.IB_REG_MR: (
        "`ulimit -l` inside the launched process: RDMA needs it unlimited "
        "(`envtool verify`: `memlock-low`)",
    ),
    Sign.SOCKET: (
        "the interface NCCL chose (`NCCL_DEBUG=INFO`: its `NET/Socket : Using` and "
        "`Bootstrap : Using` lines)",
        "the node's interfaces and routes to the peer (`envtool verify`: "
        "`socket-ifname-unmatched`)",
    ),
    Sign.CUDA_ERROR: (
        "the node's kernel log (Xid records) and GPU state: `envtool verify` reads both",
        "a rerun with `CUDA_LAUNCH_BLOCKING=1`",
    ),
    Sign.NCCL_WARN: ("the lines around it from every rank with `NCCL_DEBUG=INFO`",),
    Sign.INIT_INCOMPLETE: (
        "the log past this point from every rank (a job that stops here hangs in NCCL's init)",
        "the node's facts: `envtool verify --allreduce node` (P2P, interfaces, IB ports)",
    ),
    Sign.WATCHDOG: (
        "the log of every rank: a rank that reported no timeout, or a lower "
        "SeqNum, is the one behind",
        "a flight-recorder dump (`TORCH_NCCL_TRACE_BUFFER_SIZE`)",
    ),
    Sign.RAS_DEAD: (
        "that node's own log and kernel log: why its process stopped answering (`envtool "
        "collect` gathers both; `envtool verify` there reads its GPUs and Xid records)",
        "whether the process still runs on that node (`py-spy dump --pid PID` if it does)",
    ),
    Sign.RAS_ERROR: ("that rank's own log with `NCCL_DEBUG=INFO`: its WARN line says what failed",),
    Sign.GLOO_TIMEOUT: (
        "the log of every rank: a rank that reported no timeout is the one behind",
        "what that rank did before it (a long step, a data-loading stall, a `barrier()` only "
        "some ranks call)",
    ),
    Sign.NCCL_ERROR: (
        "a rerun with `NCCL_DEBUG=INFO`: NCCL's `Last error:` line and its WARN say what failed",
    ),
    Sign.WATCHDOG_STACK: (
        "the watchdog's line above this stack (`Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=..., OpType=...)`)",
        "the log of every rank",
    ),
}
_CAUSE_NEEDS: dict[Kind, str] = {
    Kind.GPU_ECC: "the node and GPU: the job's node list (`sacct -j JOB -o NodeList`) and that "
    "node's ECC counters (`nvidia-smi -q -d ECC`, or `envtool verify`)",
    Kind.COLLECTIVE_MISMATCH: "which setting differs: each node's NCCL version and NCCL_* "
    "variables (`NCCL_DEBUG_SUBSYS=ENV`, or `envtool verify`)",
    Kind.IB_QP_ERROR: "why the HCA fails: `ibv_devinfo`, `show_gids`, the MOFED versions of "
    "host and container",
    Kind.GPU_XID: "the node whose kernel log this is, where no journal line names it: "
    "`envtool verify` there reads the same records (`gpu-xid`)",
    Kind.SHM_SMALL: "to confirm: the size of /dev/shm where it ran (`df -h /dev/shm`; "
    "`envtool verify` says `shm-small`)",
}


_NEEDS[Sign.RAS_MISSING] = _NEEDS[Sign.RAS_DEAD]


def needs(
    sign: Sign, silent: Sequence[int] = (), on: Sequence[tuple[int, str]] = ()
) -> tuple[str, ...]:
    """What would settle a failure whose first line is of ``sign``; for a timeout, the
    ranks that reported none (``silent``, ``on`` their hosts) first: one of them is behind."""
    said = _NEEDS.get(sign, ("the job's first error: the lines before this from every rank",))
    if sign not in (Sign.WATCHDOG, Sign.GLOO_TIMEOUT) or not silent:
        return said
    hosts = dict(on)
    ranks = ", ".join(f"{r} ({visible(hosts[r])})" if r in hosts else str(r) for r in silent[:8])
    more = f" and {len(silent) - 8} more" if len(silent) > 8 else ""
    return (
        f"what rank{'s' if len(silent) > 1 else ''} {ranks}{more} did then: no timeout from "
        f"{'them' if len(silent) > 1 else 'it'}, and the rank that fell behind, hung or failed "
        "first is among those (its own lines; `py-spy dump --pid` while a job hangs)",
        *said[1:],  # the first: every rank's log, which this one names
    )


def cause_needs(kind: Kind, lead: Event) -> tuple[str, ...]:
    """What the log leaves open about a named cause (the node, where it does not say)."""
    said = _CAUSE_NEEDS.get(kind)
    if kind is Kind.GPU_ECC and lead.origin.host:
        said = "that node's ECC counters and Xid records (`envtool verify`)"
    return (said,) if said else ()


def _ranges(ranks: Sequence[int]) -> str:
    """``0-6,15``."""
    out: list[str] = []
    for r in sorted(set(ranks)):
        if out and (last := out[-1].rpartition("-")[2]) and int(last) == r - 1:
            out[-1] = f"{out[-1].partition('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ",".join(out)


def _who(origins: Sequence[Origin]) -> str:
    """``node1 (ranks 0-5); node2 (ranks 6,8-10)``: the ranks by host, else each origin."""
    by_host: dict[str | None, list[int]] = {}
    others: list[str] = []
    for o in origins:
        if o.rank is None:
            others.append(where(o))
        else:
            by_host.setdefault(o.host, []).append(o.rank)
    parts = []
    for host, ranks in sorted(by_host.items(), key=lambda p: min(p[1])):
        said = f"rank{'s' if len(set(ranks)) > 1 else ''} {_ranges(ranks)}"
        parts.append(f"{visible(host)} ({said})" if host else said)
    return "; ".join(parts + sorted(set(others)))


def timeouts(
    waits: Sequence[Event], silent: Sequence[int], on: Sequence[tuple[int, str]] = ()
) -> str:
    """``rank 3: ALLREDUCE SeqNum=1, Timeout(ms)=1 (ran 90 ms)``; gloo's ``ranks 0-6: gloo
    recv, Timeout(ms)=10000``; the ranks that said none, with their hosts where known."""
    groups: dict[tuple[str | None, str | None, str | None], list[Event]] = {}
    for e in waits:
        groups.setdefault((e.get("op"), e.get("seq"), e.get("timeout_ms")), []).append(e)
    parts = []
    for (op, seq, t), said in groups.items():
        if seq is None and said[0].sign is Sign.GLOO_TIMEOUT:
            parts.append(f"{_who([e.origin for e in said])}: gloo {op}, Timeout(ms)={t}")
            continue
        ran = {where(e.origin) + (f" (ran {e.get('ran_ms')} ms)" if e.get("ran_ms") else "")
               for e in said}  # fmt: skip
        parts.append(f"{'; '.join(sorted(ran))}: {op} SeqNum={seq}, Timeout(ms)={t}")
    if silent:
        hosts = dict(on)
        named = [f"{r} ({visible(hosts[r])})" if r in hosts else str(r) for r in silent[:32]]
        parts.append(f"no timeout from rank{'s' if len(silent) > 1 else ''} " + ", ".join(named))
    shortest = min((int(t) for _, _, t in groups if t and t.isdigit()), default=None)
    if shortest is not None and shortest < SHORT_TIMEOUT_MS:
        parts.append(
            f"the timeout is {shortest} ms, shorter than collectives take: check the "
            "timeout the job sets (init_process_group(timeout=...))"
        )
    return visible("; ".join(parts))
