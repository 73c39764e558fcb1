"""Who wrote a line: the launcher prefixes taken off and what they, or NCCL's own header, say.

``srun --label`` writes ``N: `` (the task, padded), OpenMPI's ``--tag-output``
``[JOB,RANK]<stderr>:``, torchrun ``[rank3]:`` (torch's C++ log) or ``[default0]:`` (its
``--tee`` label: the role and the local rank), pdsh and dshbak ``node01: `` or
``10.10.23.10: ``; they stack (``10.10.23.10: 0: ...``). NCCL begins its own lines with
``host:pid:tid [dev]``: ``dev`` is the CUDA device, not the rank. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HOST = r"(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][A-Za-z0-9-]{0,62}\d[A-Za-z0-9.-]{0,190}"
_MPIRUN = re.compile(r"\[\d{1,9},(\d{1,9})\]<std(?:out|err)>: ?")
_SRUN = re.compile(r" *(\d{1,7}): ")
_TORCHRUN = re.compile(r"\[(rank|default)(\d{1,9})\]:? ?")
_PDSH = re.compile(rf"({_HOST}): ")
_NCCL = re.compile(r"([^\s:\[\]]{1,253}):(\d{1,10}):\d{1,10} \[(\d{1,4})\] ")
_MAX_PREFIXES = 4  # stacked launchers: pdsh over srun over torchrun is three


@dataclass(frozen=True)
class Origin:
    """What a line's prefixes and NCCL header say of its writer (None: not said)."""

    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    task: int | None = None  # srun --label's task number
    gpu: int | None = None  # NCCL's [dev]: the CUDA device of the thread
    pid: int | None = None
    via: tuple[str, ...] = ()  # what said so: "srun --label", "pdsh", "nccl header", ...

    @property
    def attributed(self) -> bool:
        """Whether anything names the writer."""
        return bool(self.via)


NOBODY = Origin()


def strip(line: str) -> tuple[str, Origin]:
    """The line without its launcher prefixes (leading blanks off too), and its origin."""
    text = line.lstrip()
    host = rank = local = task = None
    via: list[str] = []
    for _ in range(_MAX_PREFIXES):
        first = text[:1]
        m = None
        if first == "[":
            if m := _MPIRUN.match(text):
                rank, name = int(m.group(1)), "mpirun --tag-output"
            elif m := _TORCHRUN.match(text):
                if m.group(1) == "rank":
                    rank = int(m.group(2))
                else:
                    local = int(m.group(2))
                name = "torchrun"
        elif first.isdigit() and (m := _SRUN.match(text)):
            task, name = int(m.group(1)), "srun --label"
        elif (
            first.isalnum()
            and ": " in text[:256]
            and not _NCCL.match(text)
            and (m := _PDSH.match(text))
        ):
            if m.group(1).endswith(("Error", "Warning")):
                m = None
            else:
                host, name = host or m.group(1), "host prefix"
        if m is None:
            break
        via.append(name)
        text = text[m.end() :].lstrip()
    gpu = pid = None
    if m := _NCCL.match(text):
        host, pid, gpu = host or m.group(1), int(m.group(2)), int(m.group(3))
        via.append("nccl header")
    if not via:
        return text, NOBODY
    return text, Origin(host, rank, local, task, gpu, pid, tuple(via))
