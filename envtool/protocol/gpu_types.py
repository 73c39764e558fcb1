"""The cards under the environment as the node read them without torch (envtool.gpus/1):
frozen dataclasses, read once by protocol/gpu_fields.py. A value the node could not read is
None, and the device's ``unread`` says why; nothing is guessed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NvLink:
    """One NVLink of a GPU and whether it is up."""

    link: int
    up: bool


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as NVML or nvidia-smi report it."""

    index: int
    name: str
    uuid: str = ""
    pci_bus_id: str = ""
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    capability: str = ""
    ecc_mode: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: bool | None = None
    mig_mode: bool | None = None
    compute_mode: str | None = None
    clock_events: tuple[str, ...] | None = None  # the active reasons only
    nvlinks: tuple[NvLink, ...] | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    utilization_gpu: int | None = None  # percent busy over the last sample period
    pstate: str | None = None  # the performance state, P0 (most) to P15 (least)
    unread: tuple[tuple[str, str], ...] = ()  # field → why it could not be read
    error: str = ""  # the driver lists it but cannot open it: the tool's words ("GPU is lost")


@dataclass(frozen=True)
class GpuProcess:
    """A process holding a GPU's memory before this run's ranks started (not this run's)."""

    gpu_uuid: str
    pid: int
    name: str
    user: str | None = None  # None: the pid is not visible (another PID namespace)
    used_mib: int | None = None


@dataclass(frozen=True)
class XidEvent:
    """The driver's records of one Xid code on one GPU since boot: how many, the last and the
    first (its message, seconds since boot, /dev/kmsg sequence number: None from dmesg).
    ``sub``: what the code's resolution also turns on (the ``fatal``/``nonfatal`` of NVLink5
    Xids 144-150, the recovery action ``0x2`` of an Xid 154, ``unnumbered``: a GPU fallen off
    the bus printed without an Xid number). A node before these fields sent one event per
    record: count 1, its first record its last."""

    xid: int
    pci: str
    text: str
    seconds: float | None = None
    sub: str = ""
    count: int = 1
    seq: int | None = None
    first_text: str = ""  # "": the last record is the only one said
    first_seconds: float | None = None
    first_seq: int | None = None


@dataclass(frozen=True)
class XidLog:
    """The kernel log's Xid events, or why it could not be read; which log was read, how many
    records, how many named the driver without being its records (``ignored``: userspace's,
    or another message quoting the driver), how many Xid records no room was left for
    (``dropped``), and why the read stopped early (``partial``), if it did."""

    read: bool = False
    why: str | None = None
    events: tuple[XidEvent, ...] = ()
    source: str = ""
    records: int = 0
    ignored: int = 0
    dropped: int = 0
    partial: str | None = None


@dataclass(frozen=True)
class GpuLayer:
    """Every GPU of a node, the processes holding them, and the Xid events since boot."""

    source: str  # nvml | nvidia-smi | none
    driver: str | None = None
    why: str | None = None  # source none: why nothing could be read
    seconds: float = 0.0
    devices: tuple[GpuDevice, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    xid: XidLog = XidLog()

    def held(self, device: GpuDevice) -> tuple[GpuProcess, ...]:
        """The processes holding ``device``."""
        return tuple(p for p in self.processes if p.gpu_uuid and p.gpu_uuid == device.uuid)
