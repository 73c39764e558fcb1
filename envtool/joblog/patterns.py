"""Which sign one line of a job's log is (signs.py), with the values it names: the
messages' own words (CUDA's error strings, torch's warnings and ``ProcessGroupNCCL`` watchdog
lines, NCCL's ``WARN`` lines, gloo's errors, torchelastic's failure block). Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from envtool.joblog import kernel
from envtool.joblog.signs import Detail, Sign


@dataclass(frozen=True)
class _Pattern:
    sign: Sign
    regex: re.Pattern[str]
    names: tuple[str, ...] = ()  # the groups' names in the detail
    when: Callable[[str], bool] | None = None
    needles: tuple[str, ...] = ()  # one of them must be in the line (a cheap test first)


def _p(
    sign: Sign,
    regex: str,
    *names: str,
    when: Callable[[str], bool] | None = None,
    needles: tuple[str, ...] = (),
) -> _Pattern:
    return _Pattern(sign, re.compile(regex), names, when, needles)


def _nccl_info(text: str) -> bool:
    return "NCCL INFO" in text


_BENIGN = ("Failed to open libibverbs", "No plugin found", "NET/Plugin")
_PATTERNS = (
    _p(Sign.ECC, r"uncorrectable ECC error encountered", needles=("ECC",)),
    _p(
        Sign.NO_KERNEL_IMAGE,
        r"no kernel image is available for execution on the device",
        needles=("kernel image",),
    ),
    _p(
        Sign.ARCH_UNSUPPORTED,
        r"with CUDA capability (sm_\w{1,8}) is not compatible with the "
        r"current PyTorch installation",
        "capability",
        needles=("capability",),
    ),
    _p(
        Sign.DRIVER_OLD,
        r"NVIDIA driver on your system is too old(?: \(found version (\d{1,9})\))?",
        "found",
        needles=("too old",),
    ),
    _p(
        Sign.DRIVER_OLD,
        r"CUDA driver version is insufficient for CUDA runtime version",
        needles=("insufficient",),
    ),
    _p(
        Sign.SHM,
        r"Error while creating shared memory segment (/dev/shm/[^\s()]{1,200})(?: \(size "
        r"(\d{1,20})\))?",
        "segment",
        "size",
        needles=("shared memory",),
    ),
    _p(
        Sign.SHM,
        r"failed to extend (/dev/shm/\S{1,200}) to (\d{1,20}) bytes",
        "segment",
        "size",
        needles=("failed to extend",),
    ),
    _p(  # torch's shared-memory file for a tensor (a DataLoader worker's batch)
        Sign.SHM,
        r"unable to (?:write to|allocate shared memory\(shm\) for) file <(/torch_[^>\s]{1,100})>"
        r".{0,40}No space left on device",
        "segment",
        needles=("unable to ",),
    ),
    _p(  # a DataLoader worker's SIGBUS, as torch says it
        Sign.SHM,
        r"(bus error) encountered in worker\. This might be caused by insufficient shared memory",
        "worker",
        needles=("bus error encountered",),
    ),
    _p(
        Sign.SHM,
        r"No space left on device",
        when=lambda t: "shm" in t or "fallocate" in t,
        needles=("No space",),
    ),
    _p(
        Sign.SIGBUS,
        r"Signal 7 \(SIGBUS\)|\bSIGBUS\b|\bBus error\b|exitcode[=:] ?-7\b",
        needles=("SIGBUS", "Bus error", "-7"),
    ),
    _p(
        Sign.GLOO_LOOPBACK,
        r"Unable to resolve hostname to a \(local\) address",
        needles=("resolve hostname",),
    ),
    _p(  # gloo's device (GLOO_SOCKET_IFNAME), NCCL's bootstrap and socket transport
        Sign.IFNAME,
        r"Unable to find address for: (\S{1,64})",
        "interface",
        needles=("Unable to find address",),
    ),
    _p(
        Sign.IFNAME,
        r"(Bootstrap|NET/Socket) : no (?:socket )?interface found",
        "transport",
        needles=("interface found",),
    ),
    _p(
        Sign.MISMATCH,
        r"peer (\S{1,100}?)<\d{1,6}> collective mismatch error, local size "
        r"(\d{1,20}) remote size (\d{1,20})",
        "peer",
        "local",
        "remote",
        needles=("mismatch",),
    ),
    _p(Sign.MISMATCH, r"collective mismatch", needles=("mismatch",)),
    _p(
        Sign.IB_QP,
        r"Call to (ibv_(?:modify|create)_qp)\w{0,20} failed(?: with error (.{1,80}))?",
        "call",
        "error",
        needles=("_qp",),
    ),
    _p(
        Sign.IB_COMPLETION,
        r"NET/IB ?: ?Got completion (?:from peer (\S{1,100}?)(?:<\d{1,6}>)? )?with "
        r"(?:error |status=)(\d{1,4})",
        "peer",
        "status",
        needles=("Got completion",),
    ),
    _p(
        Sign.IB_REG_MR,
        r"(ibv_reg_\w{1,20}) failed with error Cannot allocate memory",
        "call",
        needles=("ibv_reg_",),
    ),
    _p(
        Sign.SOCKET,
        r"Connect to (\S{1,100}?)<(\d{1,6})> failed ?: ?(No route to host|Connection "
        r"refused|Connection timed out|Network is unreachable)",
        "peer",
        "port",
        "error",
        needles=("Connect to",),
    ),
    _p(
        Sign.SOCKET,
        r"(No route to host|Connection refused|Network is unreachable)",
        "error",
        when=lambda t: "onnect" in t,
        needles=("No route", "refused", "unreachable"),
    ),
    _p(Sign.CUDA_ERROR, r"CUDA error: (.{1,120})", "error", needles=("CUDA error",)),
    _p(Sign.CUDA_ERROR, r"CUDA out of memory", needles=("out of memory",)),
    _p(
        Sign.BENIGN,
        r"NCCL WARN",
        when=lambda t: any(b in t for b in _BENIGN),
        needles=("NCCL WARN",),
    ),
    _p(Sign.NCCL_WARN, r"NCCL WARN (.{0,160})", "message", needles=("NCCL WARN",)),
    _p(
        Sign.WATCHDOG,
        r"WorkNCCL\(SeqNum=(\d{1,20}), OpType=(\w{1,40})[^)]{0,200}?Timeout\(ms\)="
        r"(\d{1,20})\)(?: ran for (\d{1,20}) milliseconds)?",
        "seq",
        "op",
        "timeout_ms",
        "ran_ms",
        needles=("WorkNCCL",),
    ),
    _p(
        Sign.GLOO_TIMEOUT,
        r"Timed out waiting (\d{1,20})ms for (send|recv) operation to complete",
        "timeout_ms",
        "op",
        needles=("Timed out waiting",),
    ),
    _p(  # gloo's pair.cc: the rank waited in a collective and its peer went away first
        Sign.GLOO_CLOSED,
        r"Connection closed by peer \[?([0-9a-fA-F.:]{2,45}?)\]?:(\d{1,6})",
        "peer",
        "port",
        needles=("Connection closed by peer",),
    ),
    _p(
        Sign.NCCL_ERROR,
        r"NCCL error in: |nccl(?:System|Internal|UnhandledCuda|Remote)Error",
        needles=("NCCL error", "Error"),
    ),
    _p(
        Sign.WATCHDOG_STACK,
        r"checkTimeout|ncclCommWatchdog|watchdogHandler|Watchdog caught",
        needles=("checkTimeout", "atchdog"),
    ),
    _p(
        Sign.SIGABRT,
        r"SIGABRT|Signal 6\b|terminate called after throwing|Aborted \(core dumped",
        needles=("SIGABRT", "Signal 6", "terminate called", "Aborted"),
    ),
    _p(
        Sign.ABORTED,
        r"ProcessGroupNCCL.{0,80}abort|NCCL operations have failed or timed out",
        needles=("abort", "timed out"),
    ),
    _p(
        Sign.ELASTIC,
        r"torch\.distributed\.elastic.{0,120}\[ERROR\]|ChildFailedError|Root Cause "
        r"\(first observed failure\)|Restarting workers|ProcessFailure\(",
        needles=("elastic", "ChildFailed", "Root Cause", "Restarting", "ProcessFailure"),
    ),
    _p(
        Sign.EXCEPTION,
        r"^Traceback \(most recent call last\)|^[\w.]{1,80}(?:Error|Exception):",
        needles=("Traceback", "Error", "Exception"),
    ),
    _p(
        Sign.ARCH_LIST,
        r"PyTorch install supports CUDA capabilities ((?:sm_\w+ ?){1,40})",
        "list",
        needles=("capabilities",),
    ),
    _p(
        Sign.IB_DEVICE,
        r"NET/IB : Using ((?:\[\d{1,3}\]\S{1,60} ?){1,32})",
        "devices",
        needles=("NET/IB",),
    ),
    _p(Sign.INIT_DONE, r"Init COMPLETE", needles=("Init COMPLETE",)),
    _p(  # torchelastic's "Failures:" / "Root Cause" block: one failed worker's rank
        Sign.ELASTIC_RANK,
        r"^rank +: (\d{1,9}) \(local_rank: (\d{1,9})\)",
        "rank",
        "local_rank",
        needles=("(local_rank: ",),
    ),
    *(
        _p(Sign.HEADER, regex, "key", "value", when=_nccl_info, needles=(needle,))
        for needle, regex in (
            ("NCCL version", r"(NCCL version) (\d{1,3}\.\d{1,3}\.\d{1,3}(?:\+cuda[\d.]{1,8})?)"),
            ("cudaDriverVersion", r"(cudaDriverVersion) (\d{1,9})"),
            ("Using network", r"(Using network) (\S.{0,60})"),
            ("NET/Socket", r"(NET/Socket) : Using ((?:\[\d{1,3}\]\S{1,160} ?){1,32})"),
            ("Bootstrap", r"(Bootstrap) : Using (\S{1,200})"),
            ("set by environment", r"(NCCL_[A-Z0-9_]{1,60}) set by environment to (.{0,200})"),
            ("NET/Plugin", r"(NET/Plugin) ?: ?(.{0,160}(?:Loaded|internal).{0,80})"),
        )
    ),
    _p(
        Sign.INIT,
        r"NCCL INFO (?:Bootstrap|NET/|Using network|cudaDriverVersion)",
        needles=("Bootstrap", "NET/", "Using network", "cudaDriverVersion"),
    ),
    _p(Sign.SHM_PATH, r"/dev/shm\b", needles=("/dev/shm",)),
)
# every needle in one regex: the needles a line holds pick the patterns tried, in order
_BY_NEEDLE: dict[str, tuple[int, ...]] = {}
for _i, _pattern in enumerate(_PATTERNS):
    for _needle in _pattern.needles:
        _BY_NEEDLE[_needle] = (*_BY_NEEDLE.get(_needle, ()), _i)
_TRIGGER = re.compile("|".join(re.escape(n) for n in sorted(_BY_NEEDLE, key=len, reverse=True)))
_RANK = re.compile(r"\[(?:PG [^\]]{0,80}?)?Rank (\d{1,9})\]|\blocal_rank[=:] ?(\d{1,9})")


def classify(text: str) -> tuple[Sign, Detail] | None:
    """The sign a line (its prefixes off) is, and what it names; None: nothing to say."""
    if "NVRM: " in text and (xid := kernel.driver_record(text)) is not None:
        return Sign.XID, xid
    held = _TRIGGER.findall(text)
    if not held:
        return None
    tried = (
        sorted({i for n in held for i in _BY_NEEDLE[n]}) if len(held) > 1 else _BY_NEEDLE[held[0]]
    )
    for p in (_PATTERNS[i] for i in tried):
        m = p.regex.search(text)
        if m is None or (p.when is not None and not p.when(text)):
            continue
        detail = [(n, v) for n, v in zip(p.names, m.groups(), strict=False) if v]
        if (r := _RANK.search(text)) is not None:
            detail.append(("rank" if r.group(1) else "local_rank", r.group(1) or r.group(2)))
        return p.sign, tuple(detail)
    return None
