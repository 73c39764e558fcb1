"""``envtool doctor --fix`` (issue 35 item 6): this machine's prefix, installed from an older
lock (nccl 2.16.5.1), brought to the lock first (a new generation, switched in one step),
then every step of doctor passes on it; a prefix that matches is left alone."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_main
from fixtures.sshnodes import free_port

from envtool.cli import main
from envtool.lock.install import InstallOptions, install


def _doctor(lock: Path, prefix: Path, cwd: Path) -> tuple[int, str, str]:
    ports = ("--master-port", str(free_port()), "--rdzv-port", str(free_port()))
    args = ("doctor", "--lockfile", str(lock), "--prefix", str(prefix), "--fix", "--no-ddp",
            "--min-gpus", "0", "--allow-insecure-url", *ports)  # fmt: skip
    return run_main(main, cwd, [], args)


def test_doctor_fix_then_the_steps(locks: dict[str, Path], tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    install(InstallOptions(locks["old"], prefix, allow_stale=True, allow_insecure_url=True))
    code, out, err = _doctor(locks["new"], prefix, locks["new"].parent)
    said = " ".join(out.split())
    assert code == 0, out + err
    assert "fix (this machine): replace nccl=2.16.5.1=h0800d71_0 → nccl=2.18.3.1" in said, out
    assert f"{prefix} → env.envtool-gen-1 (exchange); installed from this lock" in said
    assert os.readlink(prefix) == "env.envtool-gen-1"
    packages = next(line for line in out.splitlines() if line.split()[1:2] == ["packages"])
    assert packages.startswith("✓") and "(installed from this lock)" in packages, out + err
    code, out, _ = _doctor(locks["new"], prefix, locks["new"].parent)
    assert code == 0 and "matches the lock: nothing to fix" in " ".join(out.split())
    assert os.readlink(prefix) == "env.envtool-gen-1"  # left alone
