"""Ctrl-C (SIGINT) during lock, install and verify: exit 130, nothing half-written left
behind, no process left on the nodes."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Project, require
from fixtures import faulty, sshnodes
from fixtures.fake_micromamba import make_fake_micromamba

ENVTOOL = str(Path(sys.executable).parent / "envtool")


def _interrupt_when(
    argv: list[str],
    cwd: Path,
    marker: str,
    timeout: float = 60,
    before: Callable[[], None] = lambda: None,
) -> tuple[int, str]:
    """Start envtool, wait until a process of its own whose command line holds ``marker``
    runs, call ``before``, SIGINT. Its own: found by an environment tag its children inherit,
    so another test's process with the same marker (a concurrent pip) cannot trigger it."""
    tag = f"interrupts-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "ENVTOOL_TEST_TAG": tag}
    run = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    end = time.monotonic() + timeout
    while time.monotonic() < end and run.poll() is None:
        mine = sshnodes.processes_with_env("ENVTOOL_TEST_TAG", {tag}).values()
        if any(marker in line for line in mine):
            break
        time.sleep(0.02)
    assert run.poll() is None, f"envtool ended before {marker!r} ran"
    before()
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    return run.returncode, err.decode()


def test_interrupted_lock_keeps_the_old_lock(project: Project, tmp_path: Path) -> None:
    try:
        import conda_lock  # noqa: F401
    except ImportError:
        require(False, "conda-lock is not installed")
    exe = make_fake_micromamba(tmp_path / "bin")
    assert project.run("lock")[0] == 0
    before = project.lock.read_bytes()
    project.env.write_text(project.env.read_text().replace("  - numpy\n", "  - numpy>=1.20\n"))
    code, err = _interrupt_when(
        [
            ENVTOOL,
            "lock",
            "--solver",
            "conda-lock",
            "--conda",
            str(exe),
            "--cache-dir",
            str(project.cache),
        ],
        project.root,
        "conda-lock lock",
    )
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert project.lock.read_bytes() == before
    assert [p.name for p in project.root.iterdir() if p.name.endswith(".tmp")] == []
    time.sleep(0.3)
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(exe) not in ps  # conda-lock and its solver were killed with envtool


def _pip_project(root: Path) -> Path:
    """A project whose lock has conda packages and one pip entry (from a local index)."""
    from fixtures.channel import build_channel, realistic_packages
    from fixtures.wheels import make_wheel, simple_index

    channel = build_channel(root / "channel", realistic_packages(python_exe=sys.executable))
    index = simple_index(root, [make_wheel(root / "files", "tiny-dist", "1.0")])
    proj = root / "proj"
    proj.mkdir()
    (proj / "virtual-packages.yml").write_text(
        'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'
    )
    (proj / "environment.yml").write_text(
        f"channels: [{channel.as_uri()}]\npip-repositories: [{index}]\n"
        "dependencies: [python=3.9, pip, {pip: [tiny-dist==1.0]}]\n"
    )
    subprocess.run(
        [ENVTOOL, "lock", "--cache-dir", str(root / "c")], cwd=proj, check=True, capture_output=True
    )
    return proj


def _install(proj: Path, prefix: Path) -> list[str]:
    return [
        ENVTOOL,
        "install",
        "--allow-insecure-url",
        "--prefix",
        str(prefix),
        "--cache-dir",
        str(proj.parent / "c"),
    ]


def test_interrupted_install_removes_the_new_prefix(tmp_path: Path) -> None:
    proj = _pip_project(tmp_path / "w")
    prefix = tmp_path / "env"
    code, err = _interrupt_when(_install(proj, prefix), proj, "--require-hashes")
    assert code == 130, err
    assert "Traceback" not in err
    assert not prefix.exists()  # the half-made prefix is removed, not left half-built


def test_interrupted_install_into_an_existing_prefix_leaves_it_marked(tmp_path: Path) -> None:
    from envtool.lock.prefixes import INCOMPLETE_MARKER

    proj = _pip_project(tmp_path / "w")
    prefix = tmp_path / "env"
    marker = prefix / INCOMPLETE_MARKER
    subprocess.run(_install(proj, prefix), cwd=proj, check=True, capture_output=True)
    assert prefix.is_dir() and not marker.exists()
    code, err = _interrupt_when(_install(proj, prefix), proj, "--require-hashes")
    assert code == 130, err
    assert "Traceback" not in err
    text = marker.read_text()  # the conda step kept it; the pip step was cut short
    assert "install did not finish; re-run envtool install" in text
    assert f"lock: {proj / 'conda-lock.yml'}" in text and "started: 20" in text
    done = subprocess.run(_install(proj, prefix), cwd=proj, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()  # a whole install removes it


def test_failed_pip_step_into_an_existing_prefix_leaves_it_marked(tmp_path: Path) -> None:
    from envtool.lock.prefixes import INCOMPLETE_MARKER

    proj = _pip_project(tmp_path / "w")
    prefix = tmp_path / "env"
    subprocess.run(_install(proj, prefix), cwd=proj, check=True, capture_output=True)
    lock = proj / "conda-lock.yml"
    lines = lock.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "tiny_dist" in line or "tiny-dist" in line)
    j = next(j for j in range(start, len(lines)) if "sha256:" in lines[j])
    lines[j] = lines[j].split("sha256:")[0] + "sha256: '" + "2" * 64 + "'"
    lock.write_text("\n".join(lines) + "\n")
    failed = subprocess.run(_install(proj, prefix), cwd=proj, capture_output=True, text=True)
    assert failed.returncode == 1 and "pip install failed" in failed.stderr, failed.stderr
    assert (prefix / INCOMPLETE_MARKER).is_file()
    assert (prefix / "conda-meta").is_dir()  # the prefix itself is kept, only marked


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[faulty.InterruptLab]:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    lab = faulty.interrupt_lab(tmp_path_factory.mktemp("interrupt-lab"))
    try:
        yield lab
    finally:
        for pid in lab.node_side():  # a failed test must not leave its sleep for an hour
            os.kill(pid, signal.SIGKILL)
        lab.cluster.stop()


def _interrupt_verify(
    lab: faulty.InterruptLab,
    cwd: Path,
    hosts: str,
    ready: Callable[[list[str]], bool],
    *extra: str,
) -> float:
    """SIGINT `envtool verify` once ``ready`` holds for the node side's command lines; the
    seconds until nothing of it is left on the nodes (asserted: within 10 s)."""
    argv = [ENVTOOL, "verify", "--hosts", hosts, "-F", str(lab.cluster.ssh_config), "--no-lock"]

    def wait_until_ready() -> None:
        end = time.monotonic() + 120
        while not ready(list(lab.node_side().values())) and time.monotonic() < end:
            time.sleep(0.05)
        assert ready(list(lab.node_side().values())), lab.node_side()

    code, err = _interrupt_when(
        [*argv, "--min-gpus", "0", *extra],
        cwd,
        "envtool_node",
        timeout=120,
        before=wait_until_ready,
    )
    interrupted = time.monotonic()
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    while (lab.node_side() or lab.bundle_dirs()) and time.monotonic() - interrupted < 10:
        time.sleep(0.05)
    assert lab.node_side() == {}, "left on the nodes after 10 s"
    assert lab.bundle_dirs() == []
    return time.monotonic() - interrupted


def test_interrupted_verify_leaves_no_process_on_the_nodes(
    lab: faulty.InterruptLab, tmp_path: Path
) -> None:
    def hung(node_side: list[str]) -> bool:
        return lab.hang in node_side

    assert _interrupt_verify(lab, tmp_path, "node1,node2", hung) < 5


def test_interrupted_allreduce_stops_the_ranks_on_the_node(
    lab: faulty.InterruptLab, tmp_path: Path
) -> None:
    require(importlib.util.find_spec("torch") is not None, "torch is not installed")

    def ranks_run(node_side: list[str]) -> bool:  # both ranks, started directly on the node
        return sum(" -m envtool_node.allreduce --worker" in a for a in node_side) == 2

    sweep = "-b 1M -e 1M -n 1000000 -w 1 --nproc 2 --backend gloo"
    extra = ("--allreduce", "node", "--allreduce-args", sweep, "--timeout", "120")
    assert _interrupt_verify(lab, tmp_path, "node1", ranks_run, *extra) < 10


def _node_script_run(
    tmp_path: Path, python_body: str, shell: str, path: str = ""
) -> tuple[set[str], Path]:
    """The node script started by ``sh -c SHELL`` ($1: the script, $2: the bundle), with a
    fake python in CONDA_PREFIX and its own TMPDIR; returns (TMPDIR values, bundle dir root)."""
    from envtool.cluster import bundle as node_bundle
    from envtool.cluster.nodescript import node_script
    from envtool.cluster.options import FanoutOptions

    prefix, tmp = tmp_path / "env", tmp_path / "tmp"
    faulty._fake_python(prefix, python_body)
    tmp.mkdir()
    bundle = tmp_path / "bundle.tgz"
    bundle.write_bytes(node_bundle.payload("0123abcd"))  # the run's token line, then the tar
    script = node_script(FanoutOptions(timeout=300))
    subprocess.run(
        ["sh", "-c", shell, "sh", script, str(bundle)],
        env={
            **os.environ,
            "CONDA_PREFIX": str(prefix),
            "TMPDIR": str(tmp),
            "PATH": path + os.environ["PATH"],
        },
        check=True,
        timeout=30,
    )
    return {str(tmp)}, tmp


def test_node_script_stops_the_probe_once_its_parent_is_gone(tmp_path: Path) -> None:
    # the parent starts the script, lets it reach the probe, and exits (as sshd's session does)
    env, tmp = _node_script_run(
        tmp_path, "exec sleep 3172", 'sh -c "$1" < "$2" >/dev/null 2>&1 & sleep 0.5'
    )
    assert "sleep 3172" in sshnodes.processes_with_env("TMPDIR", env).values()
    assert _left_after(env, 5.0) == {}
    assert list(tmp.glob("envtool.*")) == []


def test_node_script_over_ssh_never_starts_the_probe_once_its_session_is_gone(
    tmp_path: Path,
) -> None:
    # the parent exits before the script starts (an interrupted verify whose ssh session died
    # while the node's shell was being started): the script's parent is 1 from its first line,
    # no watchdog could tell, and the probe must not start at all (it would run unwatched).
    # The script is exec'd 0.5 s after its parent left: started at once, it could read $PPID
    # while that parent was still there (the suite saw it once under load).
    marker = tmp_path / "started"
    env, tmp = _node_script_run(
        tmp_path, f"touch {marker}; exec sleep 3173",
        '((sleep 0.5; exec sh -c "$1" < "$2" >/dev/null 2>&1) &) ; true',
    )  # fmt: skip
    assert _left_after(env, 5.0) == {}
    assert not marker.exists()
    assert list(tmp.glob("envtool.*")) == []


def _left_after(env: set[str], seconds: float) -> dict[int, str]:
    """The node script's processes still there after ``seconds`` (then killed)."""
    end = time.monotonic() + seconds
    while sshnodes.processes_with_env("TMPDIR", env) and time.monotonic() < end:
        time.sleep(0.05)
    left = sshnodes.processes_with_env("TMPDIR", env)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


# A `timeout` that, like GNU timeout signalled while it forks its command, leaves at once on
# SIGTERM without passing it on: its command runs on in the process group it made.
HASTY_TIMEOUT = f"""#!{sys.executable}
import os, signal, subprocess, sys
os.setpgid(0, 0)
args = sys.argv[1:]
while args[0].startswith("-"):
    args = args[2:] if args[0] == "-k" else args[1:]
child = subprocess.Popen(args[1:])
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
sys.exit(child.wait())
"""


def test_node_script_stops_the_probe_even_when_timeout_left_it_behind(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "timeout").write_text(HASTY_TIMEOUT)
    (bin_dir / "timeout").chmod(0o755)
    env, _ = _node_script_run(
        tmp_path, "exec sleep 3173", 'sh -c "$1" < "$2" >/dev/null 2>&1 & sleep 0.5',
        path=f"{bin_dir}:",
    )  # fmt: skip
    assert "sleep 3173" in sshnodes.processes_with_env("TMPDIR", env).values()
    assert _left_after(env, 5.0) == {}  # the probe too: the script signals timeout's group


def test_node_script_leaves_nothing_after_a_normal_run(tmp_path: Path) -> None:
    env, tmp = _node_script_run(tmp_path, 'echo "{}"', 'sh -c "$1" < "$2" >/dev/null')
    assert sshnodes.processes_with_env("TMPDIR", env) == {}  # no watchdog, no `sleep 1`
    assert list(tmp.glob("envtool.*")) == []


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_interrupted_local_verify_stops_its_probe_at_once(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    # `timeout` moves the probe into a process group of its own: killing the node script's
    # group alone left it running (and envtool waiting on its pipes) until the deadline
    prefix, tmp = tmp_path / "hung-env", tmp_path / "tmp"
    faulty._fake_python(prefix, "exec sleep 4177")
    (prefix / "conda-meta").mkdir()
    tmp.mkdir()
    env = {**os.environ, "CONDA_PREFIX": str(prefix), "TMPDIR": str(tmp)}
    argv = [ENVTOOL, "verify", "--transport", "local", "--hosts", "localhost", "--no-lock"]
    run = subprocess.Popen(
        [*argv, "--min-gpus", "0", "--timeout", "120"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + 60
        while "sleep 4177" not in sshnodes.processes_with_env("TMPDIR", {str(tmp)}).values():
            assert time.monotonic() < end and run.poll() is None, "the probe never ran"
            time.sleep(0.02)
        start = time.monotonic()
        run.send_signal(sig)  # SIGTERM: scancel, kill, a CI job's timeout
        _, err = run.communicate(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        if run.poll() is None:
            run.kill()
        left = sshnodes.processes_with_env("TMPDIR", {str(tmp)})
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert run.returncode == code, err
    said = b"terminated (SIGTERM)" if sig == signal.SIGTERM else b"interrupted"
    assert err.strip().splitlines() == [b"envtool: error: " + said], err
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert left == {}
    assert list(tmp.glob("envtool.*")) == []  # the node script's trap removed its bundle
