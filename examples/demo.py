"""``make demo``: envtool finding a drifted node, on one machine, in about a minute.

Builds a local conda channel whose python and pytorch are this interpreter and its torch
(tests/fixtures/runtime.py: the records describe what really runs), locks an environment,
installs it into three prefixes (one of them drifted: an older pytorch build, an older NCCL,
`pip install torch` on top, and another torch on its PYTHONPATH), starts three OpenSSH sshd
"nodes" on loopback addresses, each with its own prefix, runs `envtool verify` over ssh and
shows the report; then `envtool doctor` as a new lab member runs it on their own machine
(node1's prefix); then stops the nodes and removes everything.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures import sshnodes  # noqa: E402
from fixtures.channel import build_channel, realistic_packages  # noqa: E402
from fixtures.prefixes import add_dist_info  # noqa: E402
from fixtures.runtime import (  # noqa: E402
    DRIFTED_BUILD,
    LAB_ENV,
    SP,
    TORCH_SPEC,
    other_torch,
    runtime_packages,
    torch_version,
)

ENV = LAB_ENV
VIRTUAL = 'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'
BIN = Path(sys.executable).parent


def envtool(work: Path, *args: str, check: bool = True) -> int:
    """Run the envtool CLI in ``work``, its output shown."""
    print(f"$ envtool {' '.join(args)}", flush=True)
    return subprocess.run([str(BIN / "envtool"), *args], cwd=work, check=check).returncode


def main() -> int:
    if not sshnodes.available():
        print("make demo needs OpenSSH's sshd (apt-get install openssh-server)", file=sys.stderr)
        return 2
    if torch_version() is None:
        print("make demo needs torch in envtool's environment (make .venv)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="envtool-demo-"))
    cluster = None
    try:
        channel = build_channel(work / "channel", realistic_packages() + runtime_packages())
        (work / "virtual-packages.yml").write_text(VIRTUAL)
        env = ENV.format(channel=channel.as_uri())
        drifted = env.replace(TORCH_SPEC, DRIFTED_BUILD).replace("nccl=2.18.3.1", "nccl=2.16.5.1")
        (work / "environment.yml").write_text(drifted)
        envtool(work, "lock", "--lockfile", "drifted.lock.yml")
        envtool(
            work,
            "install",
            "--allow-insecure-url",
            "--lockfile",
            "drifted.lock.yml",
            "--prefix",
            "node3-env",
        )
        add_dist_info(work / "node3-env", "torch", "2.3.0", sp=SP)  # pip install torch
        other_torch(work / "src", "1.13.1")  # a torch checkout on node3's PYTHONPATH
        (work / "environment.yml").write_text(env)
        envtool(work, "lock")
        for node in ("node1", "node2"):
            envtool(work, "install", "--allow-insecure-url", "--prefix", f"{node}-env")
        envs = [{"CONDA_PREFIX": str(work / f"node{i}-env")} for i in (1, 2, 3)]
        envs[2]["PYTHONPATH"] = str(work / "src")
        cluster = sshnodes.start_cluster(work / "ssh", envs)
        print(
            "\nthree sshd nodes on 127.0.0.2-4; node3 was installed from another spec, "
            "has pip's torch on top and another torch on its PYTHONPATH\n",
            flush=True,
        )
        code = envtool(
            work,
            "verify",
            "--hosts",
            "node[1-3]",
            "-F",
            str(cluster.ssh_config),
            "--min-gpus",
            "0",
            check=False,
        )
        print(f"\nenvtool verify exited {code} (1: findings of severity error)")
        print("\nwhat a new lab member runs on their own machine (here: node1's prefix):\n")
        doctor = envtool(
            work, "doctor", "--prefix", str(work / "node1-env"), "--min-gpus", "0", check=False
        )
        print(f"\nenvtool doctor exited {doctor} (0: every step passed)")
        return 0 if code == 1 and doctor == 0 else 1
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
