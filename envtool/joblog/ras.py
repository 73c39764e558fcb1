"""NCCL's RAS client text (``ncclras``, or ``VERBOSE STATUS`` sent to port 28028; NCCL 2.24 and
later), saved while a job hung: the processes RAS considers dead or that did not answer, the
ranks a communicator misses, the ranks that reported an error, and the monitor's
``PEER_DEAD`` events. Its lines carry meaning from the block header above them (``DEAD``,
``INCOMPLETE``, ``#0-0 (hash) ERROR``), so it is read with a little state. Pure.

The formats are NCCL's own (src/ras/client_support.cc, src/ras/peers.cc of NVIDIA/nccl at
v2.24.3-1 6aae379, v2.26.2-1 f44ac75, v2.29.2-1 ebd1e92): a node is the numeric address RAS
saw (never a host name), a process its pid, a GPU its CUDA device (``0 (NVML 4)``).
"""

from __future__ import annotations

import re

from envtool.joblog.signs import Detail, Sign

_NODE = r"(\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]{2,39})"
_GPUS = r"(\d{1,4}(?:,\d{1,4}){0,63}(?: \(NVML [\d,]{1,200}\))?)"
_PROCESS = re.compile(rf"Process (\d{{1,10}}) on node {_NODE} managing GPUs? {_GPUS}")
_RANK = re.compile(
    rf"^Rank (\d{{1,9}})(?: reported (.{{1,40}}?))? -- GPU {_GPUS} managed by process "
    rf"(\d{{1,10}}) on node {_NODE}"
)
_MISSING = re.compile(r"^The missing ranks?: ([\d, ]{1,2000})")
_COMM = re.compile(r"^#\d{1,6}-\d{1,6} \(([0-9a-f]{1,16})\) (INCOMPLETE|ERROR|MISMATCH)$")
_REPORTED = re.compile(r"^\d{1,9} ranks reported (.{1,40})$")
_MONITOR = re.compile(r"^\[[\d: -]{8,30}\] (PEER_DEAD|PEER_TIMEOUT_DEAD|PEER_UNRESPONSIVE): ")
_BLOCKS = {"DEAD": Sign.RAS_DEAD, "INCOMPLETE": Sign.RAS_MISSING}
_SECTIONS = ("Job summary", "Errors", "Warnings", "TIMEOUT")
_HEADER_CHARS = 16  # the block and section headers are shorter


class Reader:
    """One file's RAS lines, fed in order: each line's sign and values, or None."""

    def __init__(self) -> None:
        self.block: Sign | None = None  # the sign the block's bare lines carry
        self.comm = ""  # the communicator's hash, in a #g-c block
        self.error = ""  # the error a "N ranks reported E" line gave the lines below it

    def feed(self, text: str) -> tuple[Sign, Detail] | None:
        """``text``: the line with its prefixes and leading blanks off. Cheap for a line that
        is no RAS line (most of a job's log): a look at its first character and length."""
        first = text[:1]
        if first == "[" and "PEER_" in text:
            if (m := _MONITOR.match(text)) is not None and (p := _PROCESS.search(text)):
                sign = Sign.RAS_MISSING if m.group(1) == "PEER_UNRESPONSIVE" else Sign.RAS_DEAD
                return sign, _process(p, m.group(1))
            return None
        if len(text) <= _HEADER_CHARS:
            head = text.rstrip()
            if head in _BLOCKS:
                self.block, self.comm, self.error = _BLOCKS[head], "", ""
                return None
            if head in _SECTIONS:
                self.block = None
                return None
            if not head:
                return None
        if first == "#" and (c := _COMM.match(text.rstrip())) is not None:
            self.comm, self.error = c.group(1), ""
            self.block = {"INCOMPLETE": Sign.RAS_MISSING, "ERROR": Sign.RAS_ERROR}.get(c.group(2))
            return None
        return self._detail(text)

    def _detail(self, text: str) -> tuple[Sign, Detail] | None:
        if self.block is None:
            return None
        if (r := _REPORTED.match(text)) is not None:
            self.error = r.group(1)
            return None
        if self.block is not Sign.RAS_ERROR and (p := _PROCESS.match(text)):
            return self.block, _process(p, "dead" if self.block is Sign.RAS_DEAD else "missing")
        if (r := _RANK.match(text)) is not None:
            error = r.group(2) or self.error
            detail = (("rank", r.group(1)), ("gpus", r.group(3)), ("pid", r.group(4)),
                      ("peer", r.group(5)), ("comm", self.comm))  # fmt: skip
            return self.block, detail + ((("error", error),) if error else ())
        if self.block is Sign.RAS_MISSING and (m := _MISSING.match(text)) is not None:
            return self.block, (("ranks", " ".join(m.group(1).replace(",", " ").split())),
                                ("comm", self.comm))  # fmt: skip
        return None


def _process(m: re.Match[str], state: str) -> Detail:
    return (("pid", m.group(1)), ("peer", m.group(2)), ("gpus", m.group(3)), ("state", state))
