"""Naming one rate-limited node: ``verify --allreduce pairs`` and ``bisect`` against the
whole-cluster run.

N sshd nodes, each in its own network namespace with its own hostname (tests/fixtures/netns.py,
root needed), node 3's link limited with ``tc tbf``; a prefix installed from a channel that
describes this interpreter and its torch. Then, on the same nodes, ``verify --allreduce
cluster`` (one ring over all nodes: does it finish, and does it name anyone?), ``verify
--allreduce pairs`` and ``verify --allreduce bisect`` (rounds, wall time, what each names).

    sudo .venv/bin/python bench/bench_pairs.py [--nodes 4] [--rate 200mbit]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures import netns  # noqa: E402
from fixtures.channel import build_channel, realistic_packages  # noqa: E402
from fixtures.runtime import ENV, runtime_packages  # noqa: E402

ENVTOOL = str(Path(sys.executable).parent / "envtool")
ARGS = "-b 256K -e 2M -f 2 -n 2 -w 1 --backend gloo"  # every node is this machine (one GPU at most)


def _verify(work: Path, lab: netns.Lab, count: int, mode: str) -> tuple[float, dict[str, object]]:
    argv = [ENVTOOL, "verify", "--hosts", f"node[1-{count}]", "-F", str(lab.cluster.ssh_config),
            "--min-gpus", "0", "--allreduce", mode, "--allreduce-args", ARGS,
            "--timeout", "120", "--format", "json"]  # fmt: skip
    if mode == "cluster":
        argv += ["--rdzv-endpoint", "node1:29400"]
    start = time.monotonic()
    out = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=1800, check=False)
    return time.monotonic() - start, json.loads(out.stdout)


def _named(doc: dict[str, object]) -> str:
    findings = doc["findings"]
    assert isinstance(findings, list)
    errors = [f"{f['kind']} {','.join(f['hosts'])}" for f in findings if f["severity"] == "error"]
    return "; ".join(errors) or "nothing"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rate", default="200mbit")
    args = parser.parse_args()
    if not netns.available():
        print("needs root, iproute2, unshare and sshd", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="envtool-bench-pairs-") as tmp:
        work = Path(tmp)
        channel = build_channel(work / "channel", realistic_packages() + runtime_packages())
        (work / "environment.yml").write_text(ENV.format(channel=channel.as_uri()))
        subprocess.run([ENVTOOL, "lock"], cwd=work, check=True, capture_output=True)
        prefix = work / "env"
        subprocess.run([ENVTOOL, "install", "--allow-insecure-url", "--prefix", str(prefix)],
                       cwd=work, check=True, capture_output=True)  # fmt: skip
        with netns.lab(work / "lab", args.nodes, {"CONDA_PREFIX": str(prefix)}) as lab:
            lab.limit_node(3, args.rate)
            cluster_s, cluster = _verify(work, lab, args.nodes, "cluster")
            pairs_s, pairs = _verify(work, lab, args.nodes, "pairs")
            bisect_s, bisect = _verify(work, lab, args.nodes, "bisect")
    print(f"nodes: {args.nodes}, node3 limited to {args.rate}, sweep {ARGS}")
    print(f"whole cluster: {cluster_s:6.1f} s, names: {_named(cluster)}")
    print(f"pairs:         {pairs_s:6.1f} s, {pairs['rounds']} rounds, names: {_named(pairs)}")
    print(f"bisect:        {bisect_s:6.1f} s, {bisect['rounds']} rounds, names: {_named(bisect)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
