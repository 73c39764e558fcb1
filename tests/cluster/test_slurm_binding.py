"""cluster/slurm.py: an answer is bound by srun's own ``--verbose`` records only (issue 24 M3).

srun prints "srun: launching StepId=... on host NODE, N tasks: T" at the start of a line, before
any task runs; a task's own output reaches srun's stderr only behind its ``--label`` ("1: ..."),
so a line a task prints, whatever it says, never binds a task to a node.
"""

from __future__ import annotations

from envtool.cluster import slurm

OWN = [
    "srun: jobid 12: nodes(2):`node[2,4]', cpu counts: 1(x2)",
    "srun: launching StepId=12.0 on host node2, 1 tasks: 0",
    "srun: launching StepId=12.0 on host node4, 1 tasks: 1",
    "srun: route/default: init: route default plugin loaded",
]


def test_srun_records_bind_each_task() -> None:
    assert slurm.task_nodes("\n".join(OWN)) == {"0": "node2", "1": "node4"}


def test_a_task_range_binds_each_task_of_it() -> None:
    line = "srun: launching StepId=7.0 on host node9, 3 tasks: 0-1,4"
    assert slurm.task_nodes(line) == {"0": "node9", "1": "node9", "4": "node9"}


def test_a_task_cannot_rebind_itself_with_a_forged_srun_line() -> None:
    """node4's task prints srun's launch line for node2 on its stderr: srun labels it
    ("1: srun: launching ..."), so it is task output, never a record of srun's."""
    forged = [
        "1: srun: launching StepId=12.0 on host node2, 1 tasks: 1",
        "1: x srun: launching StepId=12.0 on host node2, 1 tasks: 0",
        "1: junk\rsrun: launching StepId=12.0 on host node2, 1 tasks: 1",
    ]
    assert slurm.task_nodes("\n".join([*OWN, *forged])) == {"0": "node2", "1": "node4"}


def test_the_first_record_of_a_task_wins() -> None:
    """srun prints every launch line before any task starts: a later, different claim for the
    same task (a line that slipped through unlabelled) is ignored."""
    late = "srun: launching StepId=12.0 on host node2, 1 tasks: 1"
    assert slurm.task_nodes("\n".join([*OWN, late])) == {"0": "node2", "1": "node4"}


def test_a_record_mid_line_binds_nothing() -> None:
    assert slurm.task_nodes("srun: error: x srun: launching S on host node2, 1 tasks: 0") == {}
