"""The rows of the findings table (rules.py) about the cards under the environment
(judge/gpu_health.py). Same columns as rules.py: check, severity, lenient; cause; fix line;
docs' fix; what it explains away. ``ACTIONS``: what an admin does about each kind (the quick
mode drains a node on the last three)."""

from __future__ import annotations

from enum import Enum

from envtool.judge.kinds import Check, Kind, Rule, Severity


class Action(str, Enum):
    """What an admin does about a finding."""

    FIX_ENV = "fix the environment"
    RESTART_APP = "restart the application"
    STOP_PROCESS = "stop a process"
    CONFIGURE = "change a GPU setting"
    RESET_GPU = "reset the GPU"
    DRAIN = "drain the node"
    REPLACE = "replace the part"


DRAINING = frozenset({Action.RESET_GPU, Action.DRAIN, Action.REPLACE})

_DRAIN = "drain the node; reset or replace {subject}"
_DRAIN_DOCS = ("drain the node (`scontrol update nodename=N state=drain reason=...`), reset the "
               "GPU (`nvidia-smi -r -i N`), replace it if the fault returns")  # fmt: skip

# fmt: off
GPU_RULES: dict[Kind, Rule] = {
    Kind.GPU_BUSY: Rule(
        Check.GPU, Severity.ERROR, None,
        "a GPU already held by processes that are not this run's (the node reads its GPUs "
        "before any rank starts): another user's job, a notebook, a leftover; the finding "
        "names each pid with its name, user and MiB. A policy's `foreign_memory_mib` allows "
        "that much per GPU. `preflight --quick --job-gpus` (a job's Prolog) judges only the "
        "job's GPUs; `--health` (a health check) never reports it",
        "",
        "stop the process, or use other GPUs (`CUDA_VISIBLE_DEVICES`)",
    ),
    Kind.GPU_ARCH_UNSUPPORTED: Rule(
        Check.GPU, Severity.ERROR, None,
        "torch's build has no kernel for the device's capability: `torch.cuda.get_arch_list()` "
        "holds no `sm_XY` of the same major and a minor at most the device's (an `sm_XYa` "
        "only its exact capability), and no `compute_XY` PTX at or below it. The first kernel "
        "fails with \"no kernel image is available for execution on the device\"",
        "",
        "install a torch built for that capability (sm_100/sm_120 need a CUDA >= 12.8 build)",
    ),
    Kind.GPU_ECC: Rule(
        Check.GPU, Severity.ERROR, None,
        "uncorrectable ECC errors on the GPU (volatile since the last reset, or aggregate over "
        "its life); a pending row remap or page retirement and the Xids of the same errors on "
        "that GPU follow from it",
        _DRAIN, _DRAIN_DOCS,
        frozenset({Kind.GPU_ROW_REMAP, Kind.GPU_RETIRED_PAGES}), by_subject=True,
    ),
    Kind.GPU_ROW_REMAP: Rule(
        Check.GPU, Severity.ERROR, None,
        "a row remap pending (a reset applies it) or a row remapping that failed (the GPU ran "
        "out of spare rows: replace it)",
        _DRAIN, _DRAIN_DOCS,
    ),
    Kind.GPU_RETIRED_PAGES: Rule(
        Check.GPU, Severity.ERROR, None,
        "memory pages waiting to be retired (GPUs before Ampere; a reset retires them)",
        _DRAIN, _DRAIN_DOCS,
    ),
    Kind.GPU_UNREADABLE: Rule(
        Check.GPU, Severity.ERROR, None,
        "the driver lists a GPU it cannot open: nvidia-smi prints \"Unable to determine the "
        "device handle for GPU 0000:xx:00.0: GPU is lost. Reboot the system to recover this "
        "GPU\" (or \"Unknown Error\") in its place and exits 15, NVML's handle call fails. "
        "The finding names its bus id and the tool's own words; nothing else is judged of that "
        "card, and no job can use it",
        "drain the node; reboot it to recover {subject} (reseat or replace it if it is lost "
        "again)",
        "drain the node, reboot it (`GPU is lost` needs a reboot), reseat or replace the GPU if "
        "it is lost again; `nvidia-bug-report.sh` for NVIDIA",
    ),
    Kind.GPU_XID: Rule(
        Check.GPU, Severity.ERROR, None,
        "the NVIDIA driver logged an Xid since boot whose first action in NVIDIA's Xid catalog "
        "is the admin's: reset the GPU (48, 62, 64, 74, 95, 119 and 120 GSP, 140, a Fatal "
        "NVLink5 144-150, ...), reboot the node (79 fallen off the bus, also when printed "
        "without its number), drain and contact support (unused or unknown codes), or what an "
        "Xid 154 asks for; one finding per GPU naming the deciding record (code, time since "
        "boot, kernel record number, text) and each code's count. Only the driver's own "
        "records count: a kernel record (facility 0) whose message begins with `NVRM: `; text "
        "anyone can make the kernel print inside another message, and records userspace "
        "writes to /dev/kmsg, are not. Not repeated for errors an ECC or row-remap finding on "
        "that GPU names",
        "", "drain the node (`scontrol update nodename=N state=drain reason=...`), then the "
        "catalog's action the fix line names: reset the GPU (`nvidia-smi -r -i N`), reboot "
        "the node, or contact NVIDIA support with `nvidia-bug-report.sh`'s log",
    ),
    Kind.GPU_XID_APP: Rule(
        Check.GPU, Severity.INFO, None,
        "the driver logged an Xid since boot that NVIDIA's catalog calls the application's "
        "(13 graphics engine exception, 31 memory page fault, 94 contained memory error, copy "
        "engine errors, ...: restart the application): a note about a past job, never a drain. "
        "Each (code, GPU) is counted apart from the hardware ones, so no flood of them hides a "
        "hardware Xid",
        "", "nothing for the node; restart the application, check it if it recurs",
    ),
    Kind.GPU_FABRIC: Rule(
        Check.GPU, Severity.ERROR, None,
        "on NVSwitch systems, the GPU's fabric registration is not Completed/Success (Fabric "
        "Manager down or still training): NCCL over NVLink fails or hangs",
        "start nvidia-fabricmanager on the node; drain it if the state does not complete",
        "`systemctl start nvidia-fabricmanager`; drain the node if it stays so",
    ),
    Kind.GPU_NVLINK_DOWN: Rule(
        Check.GPU, Severity.WARNING, None,
        "some of a GPU's NVLinks are down while others are up: traffic takes the slower path",
        "drain the node; reset {subject}, replace the part if the link stays down",
        "drain the node, reset the GPU, replace the link part if it stays down",
    ),
    Kind.GPU_PCIE_DEGRADED: Rule(
        Check.GPU, Severity.WARNING, None,
        "the PCIe link trained narrower than the card's maximum (x8 of x16: what was compared is "
        "the card's own current and maximum width), or below its maximum generation under "
        "real load (utilization and performance state: idle links downshift). A slot can be "
        "x8 by design (laptops, x8/x8 desktop boards, cloud VMs): the same narrow link on "
        "every node is a note (info), and where nodes differ the narrow ones are named",
        "compare {subject}'s slot with the others' (lspci -vv LnkCap/LnkSta): reseat it or "
        "its riser if the slot is wider than the link",
        "check the slot's width (`lspci -vv`: LnkCap, LnkSta); reseat the GPU or its riser "
        "where the slot is wider than the link",
    ),
    Kind.GPU_MIG: Rule(
        Check.GPU, Severity.WARNING, None,
        "MIG mode is on: torch sees MIG slices, not the whole GPU (a policy's `mig_allowed: "
        "true` accepts it)",
        "nvidia-smi -i N -mig 0 (then reset the GPU), or allow MIG in the policy",
        "`nvidia-smi -i N -mig 0` and a GPU reset, or `mig_allowed: true`",
    ),
    Kind.GPU_COMPUTE_MODE: Rule(
        Check.GPU, Severity.WARNING, None,
        "the compute mode is not Default: Exclusive_Process lets one process at a time use it "
        "(a second rank or a checker fails), Prohibited lets none",
        "nvidia-smi -i N -c DEFAULT",
        "`nvidia-smi -i N -c DEFAULT`",
    ),
    Kind.GPU_PERSISTENCE_OFF: Rule(
        Check.GPU, Severity.WARNING, None,
        "persistence mode is off: the driver tears the GPU down between jobs and each start "
        "pays its initialization (a policy's `persistence_required: false` accepts it)",
        "nvidia-smi -pm 1 (or enable nvidia-persistenced)",
        "`nvidia-smi -pm 1`, or `systemctl enable --now nvidia-persistenced`",
    ),
    Kind.GPU_SLOWDOWN: Rule(
        Check.GPU, Severity.WARNING, None,
        "clocks held down now by a hardware slowdown, thermal or power brake (HW or SW "
        "thermal): the slowest card paces every DDP step (a power cap or idle is not one)",
        "check cooling and power of {subject}; drain the node if it persists",
        "check cooling, fans and power supply; drain if it persists",
    ),
    Kind.GPU_MODEL_DIFFERS: Rule(
        Check.MAJORITY, Severity.ERROR, None,
        "a node's GPU model is not the other nodes' (V100s among A100s: the slowest card paces "
        "every step; a card below capability 8.0 is marked `(no bf16)`); its memory size and "
        "capability differ from the "
        "same cause and are not reported again on those nodes",
        "run on nodes of one GPU model (or accept it in the policy)",
        "pick nodes of one model; `accept: [gpu-model-differs]` if intended",
        frozenset({Kind.GPU_MEMORY_DIFFERS, Kind.GPU_CAPABILITY_DIFFERS}),
    ),
    Kind.GPU_MEMORY_DIFFERS: Rule(
        Check.MAJORITY, Severity.ERROR, None,
        "a node's GPU memory size (total MiB, exactly) is not the other nodes' (40 GB cards "
        "among 80 GB ones: the batch that fits one OOMs the other)",
        "run on nodes with one GPU memory size (or accept it in the policy)",
        "pick nodes of one memory size",
    ),
    Kind.GPU_CAPABILITY_DIFFERS: Rule(
        Check.MAJORITY, Severity.ERROR, None,
        "a node's GPU compute capability is not the other nodes'",
        "run on nodes of one GPU generation (or accept it in the policy)",
        "pick nodes of one generation",
    ),
    Kind.GPU_POLICY_UNMET: Rule(
        Check.GPU, Severity.ERROR, None,
        "the node's GPUs are not what the `--policy` file expects: its model (a part of "
        "every GPU's name), count per node, or memory size (MiB, exactly); it explains the "
        "same difference between nodes",
        "run on nodes the policy describes, or correct the policy",
        "use the nodes the policy describes, or correct the policy",
        frozenset({Kind.GPU_MODEL_DIFFERS, Kind.GPU_MEMORY_DIFFERS, Kind.GPU_CAPABILITY_DIFFERS,
                   Kind.GPU_COUNT_DIFFERS}),
        by_subject=True,
    ),
}
# fmt: on

ACTIONS: dict[Kind, Action] = {
    Kind.GPU_BUSY: Action.STOP_PROCESS,
    Kind.GPU_ARCH_UNSUPPORTED: Action.FIX_ENV,
    Kind.GPU_ECC: Action.RESET_GPU,
    Kind.GPU_ROW_REMAP: Action.RESET_GPU,
    Kind.GPU_RETIRED_PAGES: Action.RESET_GPU,
    Kind.GPU_XID: Action.DRAIN,
    Kind.GPU_UNREADABLE: Action.DRAIN,
    Kind.GPU_XID_APP: Action.RESTART_APP,
    Kind.GPU_FABRIC: Action.DRAIN,
    Kind.GPU_NVLINK_DOWN: Action.REPLACE,
    Kind.GPU_PCIE_DEGRADED: Action.REPLACE,
    Kind.GPU_MIG: Action.CONFIGURE,
    Kind.GPU_COMPUTE_MODE: Action.CONFIGURE,
    Kind.GPU_PERSISTENCE_OFF: Action.CONFIGURE,
    Kind.GPU_SLOWDOWN: Action.DRAIN,
    Kind.GPU_MODEL_DIFFERS: Action.FIX_ENV,
    Kind.GPU_MEMORY_DIFFERS: Action.FIX_ENV,
    Kind.GPU_CAPABILITY_DIFFERS: Action.FIX_ENV,
    Kind.GPU_POLICY_UNMET: Action.FIX_ENV,
}
