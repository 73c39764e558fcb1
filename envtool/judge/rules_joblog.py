"""The rows of the findings table (rules.py) for what only a failed job's log shows
(``envtool explain``, judge/explain.py). Same columns as rules.py: check, severity, lenient;
cause; fix line; docs' fix; what it explains away. The causes a log names that verify also
finds (`shm-small`, `gpu-ecc-uncorrectable`, ...) keep their own rows."""

from __future__ import annotations

from envtool.judge.kinds import Check, Kind, Rule, Severity

# fmt: off
JOBLOG_RULES: dict[Kind, Rule] = {
    Kind.COLLECTIVE_TIMEOUT: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "`envtool explain`: a rank's ProcessGroupNCCL watchdog reported `WorkNCCL(SeqNum=N, "
        "OpType=X, ... Timeout(ms)=T)`, or gloo `Timed out waiting Tms for recv operation`: "
        "a collective did not finish in time. A timeout is "
        "what the other ranks see of a rank that failed, hung or fell behind, so it is never "
        "named as the cause: the finding lists which ranks reported which SeqNum and OpType "
        "with the timeout, and the ranks the logs name that reported none",
        "find the rank that never reached that collective: its own log (all ranks' logs), or "
        "a flight-recorder dump",
        "read the log of the rank that reported no timeout or the lowest SeqNum; a "
        "flight-recorder dump (`TORCH_NCCL_TRACE_BUFFER_SIZE`) names the collective each "
        "rank was in",
    ),
    Kind.COLLECTIVE_MISMATCH: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "`envtool explain`: NCCL's `collective mismatch error, local size A remote size B` "
        "with a peer: the two ranks disagree on a collective, which NCCL's maintainers trace "
        "to a version or configuration mismatch between them (an `NCCL_*` variable set on "
        "one node only, two NCCL versions). Which setting differs is not in that line",
        "make NCCL and its NCCL_* settings the same on both nodes (NCCL_DEBUG_SUBSYS=ENV "
        "prints them; envtool verify compares them)",
        "run both nodes with one NCCL and the same `NCCL_*` variables (`envtool verify` "
        "compares them: `version-mismatch`, `nccl-env-differs`)",
    ),
    Kind.IB_QP_ERROR: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "`envtool explain`: `ibv_modify_qp` or `ibv_create_qp` failed in NCCL's IB transport "
        "on the HCA NCCL's `NET/IB : Using` line names: that port cannot carry a queue pair "
        "(a MOFED in the container unlike the host's, a port down, a RoCE GID it cannot use)",
        "leave the HCA out (NCCL_IB_HCA=^{subject}) to confirm; compare MOFED host vs "
        "container (ibv_devinfo, show_gids)",
        "exclude the HCA with `NCCL_IB_HCA=^DEV` to confirm it; compare the MOFED versions "
        "of host and container (`ibv_devinfo`, `show_gids`)",
    ),
    Kind.IB_COMPLETION_ERROR: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "`envtool explain`: NCCL's `NET/IB : Got completion from peer P with error N` (or "
        "`status=N`): a work request on an IB/RoCE queue pair failed; 12 (transport retry "
        "counter exceeded) and 13 (RNR retry) mean the peer or the path to it stopped "
        "answering: a port or cable down, a switch, the peer's process gone. The host that "
        "reports it is one end; the peer is the other",
        "check the IB ports and links of {subject} and of the reporting node (ibstat, "
        "`envtool verify`: ib-port-down)",
        "check both ends' ports (`ibstat`, `envtool verify`: `ib-port-down`, "
        "`ib-rate-differs`) and the switch between them",
    ),
    Kind.CAUSE_NOT_ESTABLISHED: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "`envtool explain`: the logs show a failure but not its cause (only timeouts, a "
        "teardown, an error that several causes give): the finding names the failure line "
        "that comes first by precedence and the evidence that would settle it; never a guess "
        "dressed as a cause (exit 4)",
        "",
        "collect what the finding asks for (a rank's whole log, `NCCL_DEBUG=INFO`, the "
        "node's facts from `envtool verify`) and run `envtool explain` again",
    ),
}
# fmt: on
