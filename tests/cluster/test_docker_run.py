"""cluster/docker_run.py: the options ``verify --image`` starts a container with (a job's, not
Docker's bare defaults), each ``--docker-run-arg`` checked against the allow-list, and which
option set each limit the judge words as the runtime's (issue 37)."""

from __future__ import annotations

import pytest

from envtool.cluster import docker_run
from envtool.errors import InputError
from envtool.judge.limits import Runtime

DEFAULTS = ("--shm-size=1g", "--ulimit=memlock=-1", "--ulimit=stack=67108864", "--network=none")


def test_the_defaults_are_nvidia_s_container_guidance() -> None:
    assert docker_run.options((), gpus=False) == DEFAULTS
    assert docker_run.options((), gpus=True) == (*DEFAULTS, "--gpus=all")
    assert docker_run.runtime(DEFAULTS) == Runtime(
        "docker-run", "--shm-size=1g", "--ulimit=memlock=-1", ""
    )


def test_an_option_replaces_the_default_of_its_name_in_place() -> None:
    chosen = docker_run.options(("--shm-size 64m", "--ulimit=nofile=4096:8192"), gpus=False)
    assert chosen == ("--shm-size=64m", *DEFAULTS[1:], "--ulimit=nofile=4096:8192")
    assert docker_run.runtime(chosen).shm == "--shm-size=64m"
    assert docker_run.runtime(chosen).nofile == "--ulimit=nofile=4096:8192"
    # a ulimit replaces only the ulimit of its name; the last one given wins
    chosen = docker_run.options(("--ulimit=memlock=1024", "--ulimit=memlock=2048"), gpus=True)
    assert chosen[1:3] == ("--ulimit=memlock=2048", "--ulimit=stack=67108864")
    assert chosen.count("--gpus=all") == 1


def test_an_ipc_mode_drops_the_default_shm_size() -> None:
    chosen = docker_run.options(("--ipc=host",), gpus=False)
    assert "--shm-size=1g" not in chosen and chosen[-1] == "--ipc=host"
    assert docker_run.runtime(chosen).shm == "--ipc=host"
    both = docker_run.options(("--ipc=private", "--shm-size=2g"), gpus=False)
    assert docker_run.runtime(both).shm == "--shm-size=2g"  # a private IPC's own /dev/shm


@pytest.mark.parametrize(
    "arg",
    [
        "--privileged",
        "-v=/:/host",
        "--volume=/:/host",
        "--entrypoint=sh",
        "--rm",
        "--shm-size=1g; rm -rf /",
        "--shm-size=1g --privileged",
        "--shm-size=$(id)",
        "--shm-size=",
        "--network=host\n--privileged",
        "--network=-x",
        "--ulimit=rtprio=99",
        "--ulimit=memlock",
        "--ulimit=memlock=lots",
        "--ipc=container:other",
        "--gpus=all,capabilities=compute;x",
        "--cap-add=SYS_ADMIN",
        "--env=LD_PRELOAD=/tmp/x.so",
        "",
    ],
)
def test_anything_off_the_allow_list_is_refused(arg: str) -> None:
    with pytest.raises(InputError) as caught:
        docker_run.options((arg,), gpus=False)
    assert "--docker-run-arg" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "arg",
    ["--network=host", "--gpus=2", "--gpus=device=GPU-1a2b", '--gpus="device=0,1"',
     "--runtime=nvidia", "--ulimit=stack=-1:-1", "--shm-size=8G", "--ipc=shareable"],
)  # fmt: skip
def test_the_allowed_options_pass_as_given(arg: str) -> None:
    assert arg in docker_run.options((arg,), gpus=False)


def test_a_default_ulimit_the_engine_refused_is_named_a_user_s_is_not() -> None:
    runc = (
        "docker: Error response from daemon: failed to create shim task: OCI runtime create "
        "failed: runc create failed: unable to start container process: error during container "
        "init: error setting rlimits for ready process: error setting rlimit type 8: operation "
        "not permitted: unknown"
    )  # what this project's sandboxed dockerd answers to --ulimit memlock=-1
    assert docker_run.refused_limit(runc) == "memlock"
    assert docker_run.refused_limit("exited 1: no space left") == ""
    assert docker_run.without_refused(DEFAULTS, (), [runc]) == "--ulimit=memlock=-1"
    assert docker_run.without_refused(DEFAULTS, ("--ulimit=memlock=-1",), [runc]) == ""
    assert docker_run.without_refused(DEFAULTS, (), ["ssh: connection refused"]) == ""
    nofile = runc.replace("type 8", "type 7")  # no nofile option given: nothing to drop
    assert docker_run.without_refused(DEFAULTS, (), [nofile]) == ""
