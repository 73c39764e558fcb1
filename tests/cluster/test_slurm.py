"""cluster/slurm.py: srun's labelled output re-joined into each task's text."""

from __future__ import annotations

from envtool.cluster import slurm


def test_srun_label_pieces_are_rejoined() -> None:
    doc = '{"node": "node7", "pad": "' + "x" * 2500 + '"}'
    pieces = [doc[i : i + 1024] for i in range(0, len(doc), 1024)]
    output = "\n".join(
        [
            *(f"1: {p}" for p in pieces[:2]),
            "0: garbage",
            f"1: {pieces[2]}",
            "1: a second line",
            '0: {"node": "node6"}',
        ]
    )
    texts = slurm.task_texts(output)
    assert texts["1"].splitlines() == [doc, "a second line"]
    assert texts["0"].splitlines() == ["garbage", '{"node": "node6"}']
