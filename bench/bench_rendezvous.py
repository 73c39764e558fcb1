"""The rendezvous check's cost (issue 28 item 3), measured on three nodes that each have their
own network namespace, hostname and /etc/hosts (as tests/fixtures/netns.py makes them), the
node side run as ``envtool_node.reach.check`` in each, all started together:

- healthy: each node's time in the check (resolution, the listener on the store's node, the
  connects), against its window (the most it may take);
- worst case: node3's own firewall drops what it sends to node1's port (iptables), so node3
  retries until the window closes and node1 listens for it as long: their times against the
  window.

Needs root, iproute2, unshare and iptables.

    python bench/bench_rendezvous.py [--window 10] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NODES = 3
PORT = 29400
CODE = (
    "import json, sys, time; sys.path.insert(0, {probes!r}); from envtool_node import reach; "
    "t = time.monotonic(); d = reach.check(reach.Ask('node1:{port}', {n}, {w}, sys.argv[1]), "
    "sys.argv[2]); d['took'] = time.monotonic() - t; print(json.dumps(d))"
)


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


class Lab:
    def __init__(self, root: Path) -> None:
        self.tag = f"rb{os.getpid() % 10000}"
        self.net = f"10.78.{os.getpid() % 200}"
        self.root = root

    def ns(self, i: int) -> str:
        return f"{self.tag}n{i}"

    def address(self, i: int) -> str:
        return f"{self.net}.{10 + i}"

    def up(self) -> None:
        _sh("ip", "link", "add", f"{self.tag}br", "type", "bridge")
        _sh("ip", "link", "set", f"{self.tag}br", "up")
        hosts = "".join(f"{self.address(i)} node{i}\n" for i in range(1, NODES + 1))
        for i in range(1, NODES + 1):
            _sh("ip", "netns", "add", self.ns(i))
            _sh("ip", "link", "add", f"{self.tag}v{i}", "type", "veth", "peer", "name", "eth0",
                "netns", self.ns(i))  # fmt: skip
            _sh("ip", "link", "set", f"{self.tag}v{i}", "master", f"{self.tag}br", "up")
            _sh("ip", "-n", self.ns(i), "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _sh("ip", "-n", self.ns(i), "link", "set", "eth0", "up")
            _sh("ip", "-n", self.ns(i), "link", "set", "lo", "up")
            (self.root / f"hosts{i}").write_text(f"127.0.0.1 localhost\n{hosts}")

    def down(self) -> None:
        for i in range(1, NODES + 1):
            subprocess.run(["ip", "netns", "del", self.ns(i)], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", f"{self.tag}br"], capture_output=True, check=False)

    def drop(self, op: str) -> None:
        _sh("ip", "netns", "exec", self.ns(3), "iptables", op, "OUTPUT", "-p", "tcp", "-d",
            self.address(1), "--dport", str(PORT), "-j", "DROP")  # fmt: skip

    def run(self, window: float) -> dict[str, dict[str, object]]:
        """Every node's check at once: its document and its time in it."""
        code = CODE.format(probes=str(REPO / "probes"), port=PORT, n=NODES, w=window)
        procs = {}
        for i in range(1, NODES + 1):
            role = "host" if i == 1 else "member"
            inner = (f"hostname node{i} && mount --bind {self.root / f'hosts{i}'} /etc/hosts "
                     f"&& exec {sys.executable} -c \"$0\" {role} node{i}")  # fmt: skip
            procs[f"node{i}"] = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(i), "unshare", "--uts", "--mount", "sh", "-c",
                 inner, code], stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        return {n: json.loads(p.communicate(timeout=window + 30)[0]) for n, p in procs.items()}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            lab.up()
            healthy = [lab.run(args.window) for _ in range(args.runs)]
            for docs in healthy:
                assert sorted(docs["node1"]["listen"]["peers"]) == ["node1", "node2", "node3"]
            lab.drop("-A")
            try:
                worst = lab.run(args.window)
            finally:
                lab.drop("-D")
        finally:
            lab.down()
    took = [float(d["took"]) for docs in healthy for d in docs.values()]
    print(f"window {args.window:g} s, {NODES} nodes, {args.runs} healthy runs")
    print(
        f"healthy: median {statistics.median(took) * 1000:.1f} ms per node, "
        f"max {max(took) * 1000:.1f} ms; max / window = {max(took) / args.window:.4f}"
    )
    for name in ("node1", "node3"):
        d = worst[name]
        print(
            f"blocked port, {name}: {float(d['took']):.2f} s in the check "
            f"(reach {d['reach']}), / window = {float(d['took']) / args.window:.3f}"
        )
    assert worst["node3"]["reach"]["ok"] is False
    assert "node3" not in worst["node1"]["listen"]["peers"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
