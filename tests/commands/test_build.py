"""``envtool build`` and ``verify --transport docker`` on a real private Docker engine."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import VIRTUAL_CUDA, Project, require, run_main, serve
from fixtures import dockerd
from fixtures.channel import build_channel, realistic_packages
from fixtures.runtime import python_packages

from envtool.cli import main

# The image holds the base image's python and no torch: the lock pins that python and no
# pytorch (a locked pytorch that does not import is a runtime finding); the older lock differs
# in its nccl.
ENV = """\
name: ddp
channels: [{channel}]
dependencies: [python={python}, cudatoolkit=11.8, nccl={nccl}, pip]
"""
ENVTOOL = str(Path(sys.executable).parent / "envtool")
CACHE = Path(os.environ.get("ENVTOOL_TEST_CACHE", Path.home() / ".cache" / "envtool-tests"))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dockerd.Engine, str]]:
    """A private dockerd with the debootstrap base image imported."""
    require(dockerd.available(), "docker.io and debootstrap are not installed")
    eng = dockerd.start_engine(tmp_path_factory.mktemp("docker"))
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = eng.host
    try:
        yield eng, dockerd.base_image(eng, CACHE)
    finally:
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old
        eng.stop()


@pytest.fixture(scope="module")
def project(
    tmp_path_factory: pytest.TempPathFactory, engine: tuple[dockerd.Engine, str]
) -> Iterator[Project]:
    """A channel whose python is the base image's interpreter, served over HTTP; two locks."""
    query = (
        "import os, platform as p, sys; print(p.python_version(), os.path.realpath(sys.executable))"
    )
    out = _docker("run", "--rm", engine[1], "python3", "-c", query)
    assert out.returncode == 0, out.stderr
    version, executable = out.stdout.split()
    short = ".".join(version.split(".")[:2])
    root = tmp_path_factory.mktemp("imgproj")
    pkgs = realistic_packages() + python_packages(version, executable)
    channel = build_channel(root / "channel", pkgs)
    with serve(channel) as url:
        proj = Project(root / "proj", channel, root / "cache")
        proj.root.mkdir()
        (proj.root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
        for lock, nccl in (("conda-lock.yml", "2.18.3.1"), ("cpu.lock.yml", "2.16.5.1")):
            proj.write_env(ENV.format(channel=url, python=short, nccl=nccl))
            code, _, err = proj.run("lock", "--lockfile", lock)
            assert code == 0, err
        proj.write_env(ENV.format(channel=url, python=short, nccl="2.18.3.1"))
        yield proj


def _build(proj: Project, base: str, *extra: str) -> tuple[int, str, str]:
    return run_main(
        main,
        proj.root,
        [],
        (
            "build",
            "--base",
            base,
            "--builder-image",
            base,
            "--network",
            "host",
            "--allow-insecure-url",
            *extra,
        ),  # the tests' channel is http on loopback
    )


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=300, check=False
    )


def _verify(proj: Project, *argv: str) -> tuple[int, str, str]:
    return run_main(main, proj.root, [], ("verify", "--transport", "docker", "--hosts", "image",
                                          "--min-gpus", "0", *argv))  # fmt: skip


def _grants_memlock(image: str) -> bool:
    """Whether this engine can give a container ``--ulimit memlock=-1`` (this project's
    sandboxed dockerd cannot: runc's 'error setting rlimit type 8'; a root dockerd can)."""
    run = ("run", "--rm", "--network", "none", "--ulimit", "memlock=-1", image, "true")
    return _docker(*run).returncode == 0


def _limits(out: str) -> list[tuple[str, str, str]]:
    return [(f["kind"], f["actual"], f["hint"]) for f in json.loads(out)["findings"]
            if f["severity"] != "info"]  # fmt: skip


def test_build_run_inspect_and_verify(
    engine: tuple[dockerd.Engine, str], project: Project, tmp_path: Path
) -> None:
    """A fresh image from the lock passes build's own check and README's CI gate, started as
    a job's container (issue 37: Docker's bare 64 MiB /dev/shm failed every image)."""
    _, base = engine
    code, out, err = _build(project, base, "-t", "lab/ddp:test", "--verify")
    assert code == 0, out + err[-3000:]
    assert "built lab/ddp:test" in out and "lab/ddp:test passed its check" in out
    assert "containers started with: docker run --shm-size=1g" in out
    run = _docker("run", "--rm", "--network", "none", "lab/ddp:test")
    assert run.returncode == 0, run.stderr
    facts = json.loads(run.stdout)
    assert facts["schema"] == "envtool.gpu-facts/1"
    assert facts["prefix"] == "/opt/conda/envs/ddp" or facts["executable"]
    assert _docker("run", "--rm", "lab/ddp:test", "id", "-u").stdout.strip() == "1000"
    labels = json.loads(_docker("inspect", "lab/ddp:test").stdout)[0]["Config"]["Labels"]
    lock_sha = hashlib.sha256((project.root / "conda-lock.yml").read_bytes()).hexdigest()
    assert labels["io.envtool.lockfile.sha256"] == lock_sha
    assert labels["org.opencontainers.image.source"].startswith("https://")
    # README's CI recipe, JUnit beside the JSON report
    junit = tmp_path / "verify-junit.xml"
    code, out, err = _verify(project, "--image", "lab/ddp:test", "--format", "json",
                             "--junit", str(junit))  # fmt: skip
    assert code == 0, out + err
    doc = json.loads(out)
    locked = (project.root / "conda-lock.yml").read_text().count("manager: conda")
    assert doc["hosts"][0]["packages"] == locked and _limits(out) == []
    assert doc["hosts"][0]["limits"]["shm_bytes"] == 2**30  # the container's, as a job's
    refused = [u for u in doc["unchecked"] if u.startswith("docker run --ulimit=memlock=-1")]
    if _grants_memlock(base):
        assert "--ulimit=memlock=-1" in doc["docker_run"] and not refused
    else:  # said, and the image judged under the engine's own memlock, not failed for it
        assert "--ulimit=memlock=-1" not in doc["docker_run"]
        assert refused and "the Docker engine refused it" in refused[0]
    assert doc["docker_run"][0] == "--shm-size=1g" and "--network=none" in doc["docker_run"]
    xml = junit.read_text()
    assert 'failures="0"' in xml and '<property name="docker_run" value="--shm-size=1g ' in xml


def test_what_the_runtime_sets_is_the_runtime_s_finding(
    engine: tuple[dockerd.Engine, str], project: Project
) -> None:
    """The same image under a 64 MiB /dev/shm: shm-small with docker run's option and its
    fix, never the image's; a running container keeps its /dev/shm: recreate it."""
    _, base = engine
    code, _, err = _build(project, base, "-t", "lab/ddp:test")
    assert code == 0, err[-3000:]
    code, out, err = _verify(project, "--image", "lab/ddp:test", "--format", "json",
                             "--docker-run-arg", "--shm-size=64m")  # fmt: skip
    assert code == 1, out + err
    ((kind, actual, hint),) = _limits(out)
    assert (kind, actual) == ("shm-small", "64 MiB (set by docker run --shm-size=64m: the "
                              "runtime's, not the image's)")  # fmt: skip
    assert hint.startswith("start the container with --shm-size=1g (or --ipc=host)")
    assert json.loads(out)["docker_run"][0] == "--shm-size=64m"
    # a limit the user asked for and the engine cannot grant: one finding, with its fix
    code, out, err = _verify(project, "--image", "lab/ddp:test", "--format", "json",
                             "--docker-run-arg=--ulimit=memlock=-1")  # fmt: skip
    if _grants_memlock(base):
        assert code == 0, out + err
    else:
        assert code == 1, out + err
        ((kind, actual, hint),) = _limits(out)
        assert kind == "unreachable" and "error setting rlimit type 8" in actual
        assert "cannot raise the container's memlock limit" in hint
    for shm, expect in (("", 1), ("--shm-size=2g", 0)):  # Docker's default 64 MiB; 2 GiB
        name = f"envtool-shm-{os.getpid()}-{expect}"
        started = _docker("run", "-d", "--rm", "--network", "none", *([shm] if shm else []),
                          "--name", name, "lab/ddp:test", "sleep", "300")  # fmt: skip
        assert started.returncode == 0, started.stderr
        try:
            code, out, err = _verify(project, "--container", name, "--format", "json")
        finally:
            _docker("rm", "-f", name)
        assert code == expect, out + err
        if expect:
            ((kind, actual, hint),) = _limits(out)
            assert (kind, actual) == ("shm-small", "64 MiB (the running container's, as it "
                                      "was started)")  # fmt: skip
            assert hint.startswith("recreate the container with docker run --shm-size=1g")
        else:
            assert _limits(out) == [] and json.loads(out)["docker_run"] == []  # docker exec


def test_image_with_a_changed_package_is_named(
    engine: tuple[dockerd.Engine, str], project: Project
) -> None:
    _, base = engine
    code, _, err = _build(project, base, "--lockfile", "cpu.lock.yml", "-t", "lab/ddp:old")
    assert code == 0, err[-3000:]
    code, out, _ = run_main(
        main,
        project.root,
        [],
        (
            "verify",
            "--transport",
            "docker",
            "--image",
            "lab/ddp:old",
            "--hosts",
            "image",
            "--min-gpus",
            "0",
            "--format",
            "json",
        ),
    )
    assert code == 1
    found = [(f["kind"], f["subject"]) for f in json.loads(out)["findings"]]
    assert ("version-differs", "nccl") in found  # the older lock's nccl in the image


def test_default_tag_cache_hit_and_failed_build(
    engine: tuple[dockerd.Engine, str], project: Project
) -> None:
    _, base = engine
    code, out, err = _build(project, base)
    assert code == 0, err[-3000:]
    assert "built envtool/ddp:" in out
    assert "Using cache" in err  # unchanged lock: every layer from the cache
    before, dirs = _docker("ps", "-aq").stdout.split(), _build_dirs()
    code, _, err = _build(project, "local/does-not-exist:1")
    assert code == 1 and "docker build failed" in err and err.count("\n") >= 1
    assert _docker("ps", "-aq").stdout.split() == before  # forcerm: no container left
    assert _build_dirs() <= dirs  # nor the temp context dir


def _build_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("envtool-build-*"))


def _containers() -> list[str]:
    return _docker("ps", "-aq").stdout.split()


def _wait_for(condition: Callable[[], bool], seconds: float) -> float:
    """Poll until ``condition()``; the seconds it took (``seconds`` + 1 when it never held)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if condition():
            return time.monotonic() - start
        time.sleep(0.1)
    return seconds + 1


def _cancelled(before: list[str], tag: str) -> None:
    """The build stopped on the daemon: its container gone at once, no later step, no tag."""
    assert _wait_for(lambda: _containers() == before, 5) <= 5, _docker("ps", "-a").stdout
    assert _wait_for(lambda: _containers() != before, 4) > 4, "a later step started"
    assert _docker("image", "inspect", tag).returncode != 0  # the tag was never made


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, b"interrupted"), (signal.SIGTERM, 143, b"terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_cancels_the_build_on_the_daemon(
    engine: tuple[dockerd.Engine, str], project: Project, signum: int, code: int, said: bytes
) -> None:
    """Ctrl-C or SIGTERM (kill, a CI timeout) while a RUN step runs: the build is cancelled
    on the daemon, no container and no temp context dir is left (issue 24 L7)."""
    eng, base = engine
    before, dirs = _containers(), _build_dirs()
    tag = f"lab/ddp:interrupted-{os.getpid()}"
    argv = [ENVTOOL, "build", "--base", base, "--builder-image", base, "--network", "host",
            "--allow-insecure-url"]  # fmt: skip
    run = subprocess.Popen(
        [*argv, "--no-cache", "-t", tag],
        cwd=project.root,
        env={**os.environ, "DOCKER_HOST": eng.host},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    running: list[str] = []

    def a_step_runs() -> bool:
        running[:] = _docker("ps", "-q").stdout.split()
        return bool(running) or run.poll() is not None

    _wait_for(a_step_runs, 300)
    assert running and run.poll() is None, "no RUN step was caught running"
    run.send_signal(signum)
    _, err = run.communicate(timeout=60)
    assert run.returncode == code, err.decode()[-2000:]
    assert said in err and b"Traceback" not in err
    _cancelled(before, tag)
    assert _build_dirs() <= dirs  # the temp context dir is removed


def test_interrupted_stream_is_closed_at_once(
    engine: tuple[dockerd.Engine, str], project: Project
) -> None:
    """In-process, the KeyboardInterrupt Ctrl-C raises mid-stream: envtool closes the build's
    connection itself, not only when the process exits, so dockerd cancels the running step.
    (Left open, the step runs on and the next one starts: seen when the close was removed.)"""
    from envtool import image

    _, base = engine
    before = _containers()
    tag = f"lab/ddp:closed-{os.getpid()}"
    step = [""]

    def on_line(text: str) -> None:
        if text.startswith("Step "):
            step[0] = text.partition(" : ")[2]
        elif "Running in " in text and step[0].startswith("RUN "):
            raise KeyboardInterrupt  # what SIGINT raises while a RUN step runs

    options = image.BuildOptions(
        project.root / "conda-lock.yml", tag, base, base, "host", no_cache=True,
        install_args=("--allow-insecure-url",),
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt) as caught:  # keeps the frames (and any stream) alive
        image.build(options, on_line)
    assert step[0].startswith("RUN ") and caught.value is not None
    _cancelled(before, tag)


def test_ctrl_c_during_verify_in_a_container_leaves_no_container(
    engine: tuple[dockerd.Engine, str], tmp_path: Path
) -> None:
    """docker run's CLI passes the SIGTERM envtool sends on Ctrl-C to the container's shell
    (PID 1 there, so only its trap acts): the hung probe is stopped, --rm removes the rest."""
    eng, base = engine
    tag = f"lab/hung:{os.getpid()}"
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {base}\nRUN mkdir -p /hung/bin && printf '#!/bin/sh\\nexec sleep 4433\\n' "
        "> /hung/bin/python && chmod 755 /hung/bin/python\n"
    )
    made = _docker("build", "--network", "none", "-q", "-t", tag, str(context))
    assert made.returncode == 0, made.stderr
    before = _containers()
    argv = [ENVTOOL, "verify", "--transport", "docker", "--image", tag, "--hosts", "image"]
    run = subprocess.Popen(
        [*argv, "--prefix", "/hung", "--no-lock", "--min-gpus", "0", "--timeout", "120"],
        env={**os.environ, "DOCKER_HOST": eng.host},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def hung_probe_runs() -> bool:
        top = [c for c in _containers() if c not in before]
        return any("sleep 4433" in _docker("top", c).stdout for c in top)

    assert _wait_for(hung_probe_runs, 60) <= 60 and run.poll() is None
    start = time.monotonic()
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err.decode()[-2000:]
    gone = _wait_for(lambda: _containers() == before, 15)
    assert gone <= 15, _docker("ps", "-a").stdout  # the container stopped and was removed
    assert time.monotonic() - start < 20


def test_an_image_without_the_locked_environment_is_one_finding(
    engine: tuple[dockerd.Engine, str], tmp_path: Path
) -> None:
    """The base image has no env of the lock's name: one env-missing finding, and neither its
    python3 nor anything else is probed in its place (fixtures/absent.py)."""
    from fixtures import absent

    eng, base = engine
    proj = absent.project(tmp_path / "absent")
    argv = [ENVTOOL, "verify", "--transport", "docker", "--image", base, "--hosts", "image"]
    out = subprocess.run(
        [*argv, "--format", "json"], cwd=proj, env={**os.environ, "DOCKER_HOST": eng.host},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    absent.one_finding(json.loads(out.stdout), ["image"])


SECRET, PASSWORD = "tk-5ecret-in-build-7", "hunter2-build-5ecret"


def test_no_channel_secret_reaches_the_image_or_the_engine(
    engine: tuple[dockerd.Engine, str],
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lock made from a channel behind a password and an anaconda.org-style token: the
    build fetches those archives here, the image's records keep the ${VAR} templates, and
    neither secret is in the build's output, the image (every layer, its config and history,
    as `docker save` writes them) or anywhere in the engine's data root (issue 24 item 1)."""
    eng, base = engine
    monkeypatch.setenv("LAB_REPO_TOKEN", SECRET)
    monkeypatch.setenv("LAB_CHANNEL_PASSWORD", PASSWORD)
    site = tmp_path / "site"
    (site / "t" / SECRET).mkdir(parents=True)
    (site / "t" / SECRET / "lab").symlink_to(project.channel)
    tag = f"lab/ddp:secret-{os.getpid()}"
    proj = Project(tmp_path / "proj", project.channel, tmp_path / "cache")
    proj.root.mkdir()
    (proj.root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    with serve(site) as url:
        channel = f"http://bob:{PASSWORD}@{url.removeprefix('http://')}/t/{SECRET}/lab"
        proj.write_env(
            re.sub(r"channels: \[.*\]", f"channels: [{channel}]", project.env.read_text())
        )
        code, out, err = proj.run("lock")
        assert code == 0, err
        assert "/t/${LAB_REPO_TOKEN}/lab/linux-64/" in proj.lock.read_text()
        code, out2, err2 = _build(proj, base, "-t", tag)
    assert code == 0, err2[-3000:]
    said = out + err + out2 + err2
    assert SECRET not in said and PASSWORD not in said
    saved = subprocess.run(["docker", "save", tag], capture_output=True, timeout=300, check=True)
    assert len(saved.stdout) > 1 << 20
    assert SECRET.encode() not in saved.stdout and PASSWORD.encode() not in saved.stdout
    meta = _docker("history", "--no-trunc", tag).stdout + _docker("inspect", tag).stdout
    assert SECRET not in meta and PASSWORD not in meta
    show = "cat /opt/conda/envs/ddp/conda-meta/*.json"
    records = _docker("run", "--rm", "--network", "none", tag, "sh", "-c", show).stdout
    assert "http://bob:${LAB_CHANNEL_PASSWORD}@" in records
    assert "/t/${LAB_REPO_TOKEN}/lab/linux-64/" in records and "/src/channels" not in records
    anywhere = subprocess.run(
        ["grep", "-rlF", "-e", SECRET, "-e", PASSWORD, str(eng.root / "data")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert anywhere.stdout == "", anywhere.stdout  # no layer, config or cache of the engine
    urls = re.findall(r'"url": "([^"]+)"', records)  # each record names the locked URL
    lock = proj.lock.read_text()
    assert urls and sorted(urls) == sorted(re.findall(r"url: (\S+\.conda|\S+\.tar\.bz2)", lock))


def test_a_wheel_dropped_into_the_cache_stops_the_build(
    engine: tuple[dockerd.Engine, str],
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wheel in the build's wheel cache that envtool did not record: one line, exit 1, no
    build starts, no context dir is left (issue 24 item 8)."""
    import zipfile

    from envtool import image

    _, base = engine
    monkeypatch.setenv("ENVTOOL_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "build-wheels" / image._source_digest(image.source_root(), "3.11")
    folder.mkdir(parents=True, mode=0o700)
    with zipfile.ZipFile(folder / "envtool-0.1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("envtool/__init__.py", "")
    digest = hashlib.sha256((folder / "envtool-0.1.0-py3-none-any.whl").read_bytes()).hexdigest()
    (folder / "SHA256SUMS").write_text(f"{digest}  envtool-0.1.0-py3-none-any.whl\n")
    with zipfile.ZipFile(folder / "evil-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("evil.pth", "import os; os.system('touch /tmp/pwned')\n")
    before, dirs = _containers(), _build_dirs()
    tag = f"lab/ddp:tampered-{os.getpid()}"
    code, _, err = _build(project, base, "-t", tag)
    assert code == 1 and err.count("\n") == 1, err
    assert "evil-1.0-py3-none-any.whl" in err and "not a wheel envtool recorded" in err
    assert _docker("image", "inspect", tag).returncode != 0 and _containers() == before
    assert _build_dirs() <= dirs
