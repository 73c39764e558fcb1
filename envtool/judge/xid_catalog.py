"""What each Xid means and what to do first about it: NVIDIA's Xid catalog, in one place.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer, A100 to GB200),
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, its table "Xids" and
column "Resolution Bucket (Immediate Action)"; the NVLink5 Xids 144-150 from its sheet "XID
144-150 Decode" (each unit's error is Fatal or Non-fatal: the driver prints the word). Codes
1-13 were read on that page (2026); the rest transcribed from a machine-read copy of the
catalog's spreadsheet (leptonai/gpud components/accelerator/nvidia/xid/catalog_generated.go,
generated 2025-10-29 from the same page). The older catalog (docs.nvidia.com/deploy/
xid-errors/, Volta and before) gives causes, not actions.

Buckets as the catalog names them, and what envtool makes of each (``Resolution``):
RESTART_APP and the application workflows WORKFLOW_XID_13/31 → restart the application (the
node is fine); IGNORE and WORKFLOW_XID_45 (cleanup after another Xid: that one decides) →
nothing to do; RESET_GPU, WORKFLOW_XID_48 (double-bit ECC), WORKFLOW_NVLINK_ERR (74) and a
Fatal NVLink5 Xid → reset the GPU; RESTART_BM (79: fallen off the bus, which no GPU reset
brings back) and RESTART_VM → reboot the node; CHECK_MECHANICALS (54) → check the board's power
cables; UPDATE_SWFW (78) → update the driver and firmware; CONTACT_SUPPORT, every code the
catalog lists as unused, and any code not in this table → drain and contact NVIDIA support.
Xid 154 carries the recovery action the driver itself asks for (NVML's
nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and
reset). Codes 162-172 came after the spreadsheet's buckets; envtool's choice is marked.
"""

from __future__ import annotations

from enum import Enum


class Resolution(str, Enum):
    """What is done first about an Xid, worst last (``rank``)."""

    IGNORE = "ignore"
    RESTART_APP = "restart-app"
    RESET_GPU = "reset-gpu"
    UPDATE_DRIVER = "update-driver"
    CHECK_POWER = "check-power"
    CONTACT_SUPPORT = "contact-support"
    REBOOT = "reboot-node"

    @property
    def rank(self) -> int:
        """0 for nothing to do; the highest for a node reboot."""
        return list(Resolution).index(self)

    @property
    def drains(self) -> bool:
        """The node is drained for it (the admin acts, not the application)."""
        return self.rank >= Resolution.RESET_GPU.rank


_I, _A, _R = Resolution.IGNORE, Resolution.RESTART_APP, Resolution.RESET_GPU
_S, _B = Resolution.CONTACT_SUPPORT, Resolution.REBOOT

# code → (resolution, what it is, in the catalog's words). Codes absent: "unused" there.
# fmt: off
CATALOG: dict[int, tuple[Resolution, str]] = {
    8: (_A, "GPU stopped processing"), 11: (_A, "invalid or corrupted push buffer stream"),
    13: (_A, "graphics engine exception"), 14: (_I, "fake error (a test)"),
    25: (_A, "invalid or illegal push buffer stream"), 31: (_A, "GPU memory page fault"),
    32: (_A, "invalid or corrupted push buffer stream"), 37: (_I, "driver firmware error"),
    38: (_I, "driver firmware error"), 39: (_A, "copy engine exception"),
    40: (_A, "copy engine exception"), 41: (_A, "copy engine exception"),
    43: (_I, "GPU stopped processing"), 44: (_I, "graphics engine fault during context switch"),
    45: (_I, "preemptive cleanup after a previous error"),
    46: (_R, "GPU stopped processing"), 48: (_R, "double-bit ECC error"),
    54: (Resolution.CHECK_POWER, "auxiliary power is not connected to the GPU board"),
    60: (_A, "video processor exception"), 62: (_R, "internal micro-controller halt"),
    63: (_I, "GPU memory remapping event"), 64: (_R, "GPU memory remapping failure"),
    66: (_I, "illegal access by driver"), 67: (_I, "illegal access by driver"),
    68: (_A, "NVDEC0 exception"), 69: (_A, "graphics engine class error"),
    70: (_A, "copy engine 3 error"), 71: (_A, "copy engine 4 error"),
    72: (_A, "copy engine 5 error"), 74: (_R, "NVLink error"),
    75: (_A, "copy engine 6 error"), 76: (_A, "copy engine 7 error"),
    77: (_A, "copy engine 8 error"), 78: (Resolution.UPDATE_DRIVER, "vGPU start error"),
    79: (_B, "GPU has fallen off the bus"), 80: (_A, "corrupted data sent to GPU"),
    82: (_A, "NVJPG0 error"), 83: (_A, "NVDEC1 error"), 84: (_A, "NVDEC2 error"),
    85: (_A, "copy engine 9 error"), 86: (_A, "OFA exception"), 88: (_A, "NVDEC3 error"),
    89: (_A, "NVDEC4 error"), 92: (_I, "high single-bit ECC error rate"),
    93: (_I, "non-fatal violation of provisioned InfoROM wear limit"),
    94: (_A, "contained memory error"), 95: (_R, "uncontained memory error"),
    96: (_A, "NVDEC5 error"), 97: (_A, "NVDEC6 error"), 98: (_A, "NVDEC7 error"),
    99: (_A, "NVJPG1 error"), 100: (_A, "NVJPG2 error"), 101: (_A, "NVJPG3 error"),
    102: (_A, "NVJPG4 error"), 103: (_A, "NVJPG5 error"), 104: (_A, "NVJPG6 error"),
    105: (_A, "NVJPG7 error"), 106: (_I, "SMBPBI test message"),
    107: (_I, "SMBPBI test message (silent)"), 108: (_I, "NVLink remote translation error"),
    109: (_R, "context switch timeout"), 110: (_R, "security fault"),
    119: (_R, "GSP RPC timeout"), 120: (_R, "GSP error"), 121: (_I, "C2C error"),
    126: (_A, "copy engine 10 error"), 127: (_A, "copy engine 11 error"),
    128: (_A, "copy engine 12 error"), 129: (_A, "copy engine 13 error"),
    130: (_A, "copy engine 14 error"), 131: (_A, "copy engine 15 error"),
    132: (_A, "copy engine 16 error"), 133: (_A, "copy engine 17 error"),
    134: (_A, "copy engine 18 error"), 135: (_A, "copy engine 19 error"),
    136: (_R, "NVLink training failed"), 137: (_I, "NVLink privilege error"),
    139: (_A, "OFA1 error"), 140: (_R, "unrecovered ECC error"), 141: (_I, "CUDA fast path error"),
    142: (_S, "NVENC3 error"), 143: (_R, "GPU initialization error"),
    144: (_R, "NVLink SAW error"), 145: (_R, "NVLink RLW error"), 146: (_R, "NVLink TLW error"),
    147: (_R, "NVLink TREX error"), 148: (_R, "NVLink NVLPW_CTRL error"),
    149: (_R, "NVLink NETIR error"), 150: (_R, "NVLink MSE error"),
    151: (_B, "key rotation error"), 152: (_I, "DLA SMMU error"), 153: (_I, "DLA timeout"),
    154: (_I, "GPU recovery action changed"), 155: (_R, "NVLink software-defined error"),
    156: (_R, "resource retirement event"), 157: (_I, "resource retirement failure"),
    158: (_R, "GPU fatal timeout"), 159: (_S, "CHI non-data error"),
    160: (_I, "channel retirement event"), 161: (_I, "channel retirement failure"),
    # no bucket in the catalog yet: envtool's choice, from the code's meaning
    162: (_I, "power smoothing circuitry re-engaged"),
    163: (_I, "power smoothing circuitry disengaged"),
    164: (_I, "power smoothing circuitry low lifetime"),
    165: (_S, "power smoothing circuitry lifetime exhausted"),
    166: (_S, "NVLink encrypted traffic before the link was set up for it"),
    167: (_R, "PCIe fatal timeout"), 168: (_R, "reduced GPU memory capacity"),
    169: (_R, "internal micro-controller (SEC2) halt"), 170: (_S, "interrupt seen in CC mode"),
    171: (_R, "uncorrectable DRAM error"), 172: (_R, "uncorrectable SRAM error"),
}
# fmt: on
NVLINK5 = range(144, 151)
RECOVERY = {0: _I, 1: _R, 2: _B, 3: _S, 4: _R}  # Xid 154's "to 0xN": the driver's own ask
RECOVERY_WORDS = {0: "none", 1: "GPU reset", 2: "node reboot", 3: "drain P2P", 4: "drain and reset"}


def resolution(xid: int, sub: str = "") -> Resolution:
    """What is done first about Xid ``xid`` (``sub``: the record's severity word for 144-150,
    the recovery action for 154; ``unnumbered`` is 79's meaning without its number)."""
    if xid in NVLINK5 and sub == "nonfatal":
        return _I  # the decode sheet: a non-fatal unit error needs no action (or an Xid 154)
    if xid == 154:
        action = _action(sub)
        return _I if action is None else RECOVERY.get(action, _S)
    return CATALOG.get(xid, (_S, ""))[0]


def _action(sub: str) -> int | None:
    """Xid 154's recovery action (``0x2`` → 2); None when the record named none."""
    try:
        return int(sub, 16) if sub.startswith("0x") else None
    except ValueError:
        return None


def meaning(xid: int, sub: str = "") -> str:
    """The catalog's words for ``xid`` ("" for a code it does not list)."""
    action = _action(sub) if xid == 154 else None
    if action is not None:
        return f"the driver asks for: {RECOVERY_WORDS.get(action, sub)}"
    words = CATALOG.get(xid, (_S, ""))[1]
    return f"{words} ({sub})" if words and sub in ("fatal", "nonfatal") else words


def application(xid: int, sub: str = "") -> bool:
    """The application's Xid: restarting it is all there is to do."""
    return resolution(xid, sub) is Resolution.RESTART_APP
