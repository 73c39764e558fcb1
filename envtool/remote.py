"""Fan-out: the probe bundle on many hosts at once, bounded and with per-host deadlines.

Every transport reduces to one argv per host whose stdin receives the bundle (a gzipped tar
of ``probes/``) and whose stdout is one JSON document. The node side is a short POSIX sh
script: unpack into a private temp dir (removed on exit), pick the environment's python,
run ``node.py`` under ``timeout``, stop it if the connection goes away. Concurrency is a
thread pool of ``proc.run`` calls: each thread waits on one ssh process, so the pool is
bounded by ``--fanout`` like clush's.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from envtool import proc
from envtool.errors import InputError
from envtool.hosts import Host

TRANSPORTS = ("ssh", "local", "docker", "slurm")
NODE_VAR = '"${SLURMD_NODENAME:-$(hostname)}"'  # what {node} in --prefix becomes on the node
# Conda's usual env dirs, searched on the node for the env named in environment.yml.
ENV_DIRS = (
    "$HOME/miniforge3/envs",
    "$HOME/mambaforge/envs",
    "$HOME/miniconda3/envs",
    "$HOME/anaconda3/envs",
    "$HOME/.conda/envs",
    "/opt/conda/envs",
    "/opt/miniforge3/envs",
)


@dataclass(frozen=True)
class FanoutOptions:
    """How to reach the hosts and how long to wait."""

    transport: str = "ssh"
    fanout: int = 64
    connect_timeout: float = 10.0
    timeout: float = 120.0
    ssh_config: Path | None = None
    ssh_options: tuple[str, ...] = ()
    strict_host_keys: bool = True
    prefix: str | None = None  # the env prefix on the nodes; None: search by env_name
    env_name: str = ""
    node_args: tuple[str, ...] = ()  # passed to node.py
    docker_target: str = ""  # container name (docker exec) or image (docker run)
    docker_run: bool = False
    bundle_dir: str = ""  # a shared folder holding probes/ instead of the bundle on stdin
    slurm_args: tuple[str, ...] = ()  # --partition/--time for an srun outside an allocation


@dataclass(frozen=True)
class HostResult:
    """What one host gave back."""

    host: Host
    ok: bool
    stdout: str = ""
    error: str = ""
    seconds: float = 0.0
    returncode: int = 0
    extra: dict[str, str] = field(default_factory=dict)


def _python_choice(options: FanoutOptions) -> str:
    """sh that sets $py to the environment's interpreter on the node."""
    if options.prefix:
        parts = (options.prefix.rstrip("/") + "/bin/python").split("{node}")
        return "py=" + NODE_VAR.join(shlex.quote(p) for p in parts)
    candidates = []
    if options.env_name:
        candidates = [f'"{d}/{options.env_name}/bin/python"' for d in ENV_DIRS]
    candidates.append('"${CONDA_PREFIX:-/nonexistent}/bin/python"')
    loop = " ".join(candidates)
    return (
        f'py=; for c in {loop}; do if [ -x "$c" ]; then py=$c; break; fi; done; '
        '[ -n "$py" ] || py=$(command -v python3 || command -v python)'
    )


# Cleanup on every exit: stop the watchdog, stop the probe if it still runs (the script was
# signalled), remove the temp dir. A trapped signal exits, so the EXIT trap runs.
_TRAPS = (
    'trap \'[ -z "$w" ] || kill "$w" 2>/dev/null; [ -z "$k" ] || kill -TERM "$k" 2>/dev/null; '
    '[ -z "$x" ] || rm -rf "$x"\' EXIT; '
    "trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; "
)
# Without a pty, nothing tells a command that its ssh connection is gone: sshd's session
# process (this script's parent) exits and the script runs on, reparented. So a background
# loop reads the script's parent from /proc/$$/stat once a second (builtins only, no fork),
# and once it is no longer $PPID sends SIGTERM to the probe (`timeout` passes it to its own
# process group: python and what it started). Reading our own stat works for any parent
# (slurmstepd runs as root; /proc may hide other users' processes) and catches a parent
# that died before the loop began. Not watched: PPID 0 or 1 (docker exec, docker run), and
# systems without /proc. The loop holds none of the session's file descriptors (the session
# would wait for them) and the EXIT trap ends it and its sleep: a normal run is not delayed.
_WATCHDOG = (
    'if [ "${pp:-0}" -gt 1 ] 2>/dev/null && [ -r "/proc/$$/stat" ]; then ('
    " trap 'kill \"$s\" 2>/dev/null; exit 0' TERM; s=;"
    ' while read -r q < "/proc/$$/stat"; do'
    ' q=${q##*") "}; q=${q#* }; [ "${q%% *}" = "$pp" ] || break;'
    ' sleep 1 & s=$!; wait "$s"; done;'
    ' kill -0 $$ 2>/dev/null && kill -TERM "$k" 2>/dev/null'
    " ) </dev/null >/dev/null 2>&1 & w=$!; fi; "
)


def node_script(options: FanoutOptions) -> str:
    """The POSIX sh the node runs: bundle from stdin → temp dir → node.py → cleanup."""
    limit = max(1, int(options.timeout))
    args = " ".join(shlex.quote(a) for a in options.node_args)
    if options.bundle_dir:  # the probes already sit on a filesystem every node mounts
        fetch = f"d={shlex.quote(options.bundle_dir)}; "
    else:
        fetch = (
            'x=$(mktemp -d "${TMPDIR:-/tmp}/envtool.XXXXXXXX") || exit 97; d=$x; '
            'tar -xzf - -C "$d" || exit 98; '
        )
    return (
        "umask 077; d=; x=; k=; w=; pp=$PPID; "
        f"{_TRAPS}{fetch}"
        f"{_python_choice(options)}; "
        '[ -n "$py" ] || { echo "envtool: no python on this node" >&2; exit 99; }; '
        '[ -x "$py" ] || { echo "envtool: no conda environment at ${py%/bin/python}'
        ' (no bin/python)" >&2; exit 96; }; '
        f'if command -v timeout >/dev/null 2>&1; then t="timeout -k 5 {limit}"; else t=; fi; '
        'p=$(cd "$(dirname "$py")/.." && pwd); '
        f'$t "$py" "$d/node.py" --prefix "$p" {args} & k=$!; '
        f"{_WATCHDOG}"
        'wait "$k"; r=$?; k=; exit "$r"'
    )


def _ssh_argv(host: Host, options: FanoutOptions, script: str) -> list[str]:
    argv = [
        "ssh",
        "-oBatchMode=yes",
        "-oForwardAgent=no",
        "-oForwardX11=no",
        f"-oConnectTimeout={max(1, int(options.connect_timeout))}",
    ]
    if not options.strict_host_keys:  # an explicit, documented opt-out only
        argv += ["-oStrictHostKeyChecking=no", "-oUserKnownHostsFile=/dev/null"]
    if options.ssh_config is not None:
        argv += ["-F", str(options.ssh_config)]
    if host.port:
        argv += ["-p", str(host.port)]
    for opt in options.ssh_options:
        argv.append(f"-o{opt}")
    return [*argv, "--", host.target, script]


def host_has_nvidia_gpus() -> bool:
    """An NVIDIA driver on this machine: containers then get ``--gpus all``."""
    return Path("/proc/driver/nvidia/version").exists()


def argv_for(host: Host, options: FanoutOptions) -> list[str]:
    """The command that runs the bundle on ``host`` through the chosen transport."""
    script = node_script(options)
    if options.transport == "ssh":
        return _ssh_argv(host, options, script)
    if options.transport == "local":
        return ["sh", "-c", script]
    if options.transport == "docker":
        if not options.docker_target:
            raise InputError("--transport docker needs --image IMAGE or --container NAME")
        if options.docker_run:
            gpus = ["--gpus", "all"] if host_has_nvidia_gpus() else []
            return [
                "docker",
                "run",
                "--rm",
                "-i",
                "--network",
                "none",
                *gpus,
                "--entrypoint",
                "sh",
                options.docker_target,
                "-c",
                script,
            ]
        return ["docker", "exec", "-i", options.docker_target, "sh", "-c", script]
    raise InputError(f"unknown transport {options.transport!r} (known: {', '.join(TRANSPORTS)})")


def _one(host: Host, options: FanoutOptions, bundle: bytes) -> HostResult:
    start = time.monotonic()
    deadline = options.timeout + options.connect_timeout + 5.0
    try:
        result = proc.run(argv_for(host, options), input=bundle, timeout=deadline, check=False)
    except proc.ProcessError as exc:
        out = exc.result
        return HostResult(
            host, False, out.stdout if out else "", str(exc), time.monotonic() - start, -9
        )
    seconds = time.monotonic() - start
    if result.returncode != 0:
        return HostResult(host, False, result.stdout, _failure(result), seconds, result.returncode)
    return HostResult(host, True, result.stdout, "", seconds)


def _failure(result: proc.Result) -> str:
    lines = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
    why = lines[-1] if lines else "no message"
    known = {
        255: "ssh failed",
        124: "timed out on the node",
        137: "killed on the node",
        97: "cannot create a temp dir",
        98: "cannot unpack the probe bundle",
        99: "no python",
        96: "no environment",
    }
    label = known.get(result.returncode, f"exited {result.returncode}")
    return f"{label}: {why[:300]}"


def run_all(
    hosts: Sequence[Host],
    options: FanoutOptions,
    bundle: bytes,
    on_done: Callable[[HostResult], None] | None = None,
) -> list[HostResult]:
    """Run the bundle on every host, ``fanout`` at a time; results in the hosts' order."""
    if options.fanout < 1:
        raise InputError("--fanout must be at least 1")
    results: dict[Host, HostResult] = {}
    pool = ThreadPoolExecutor(max_workers=min(options.fanout, max(1, len(hosts))))
    try:
        futures = {pool.submit(_one, h, options, bundle): h for h in hosts}
        for future in as_completed(futures):
            res = future.result()
            results[futures[future]] = res
            if on_done is not None:
                on_done(res)
    except BaseException:  # Ctrl-C: stop queued hosts, kill the running ssh processes
        pool.shutdown(wait=False, cancel_futures=True)
        proc.kill_all()
        raise
    pool.shutdown()
    return [results[h] for h in hosts]


def _srun_argv(hosts: Sequence[Host], options: FanoutOptions) -> list[str]:
    from ClusterShell.NodeSet import NodeSet

    nodes = str(NodeSet.fromlist([h.name for h in hosts]))
    return [
        "srun",
        f"--nodes={len(hosts)}",
        "--ntasks-per-node=1",
        f"--nodelist={nodes}",
        "--input=all",
        "--label",
        "--kill-on-bad-exit=0",
        "--job-name=envtool-verify",
        *options.slurm_args,
        "sh",
        "-c",
        node_script(options),
    ]


def run_slurm(hosts: Sequence[Host], options: FanoutOptions, bundle: bytes) -> list[HostResult]:
    """One ``srun`` step, one task per node, the bundle broadcast on stdin (``--input=all``);
    answers are keyed by the node name each one reports (SLURMD_NODENAME)."""
    start = time.monotonic()
    deadline = options.timeout + options.connect_timeout + 30.0
    try:
        result = proc.run(_srun_argv(hosts, options), input=bundle, timeout=deadline, check=False)
        out, err, why = result.stdout, result.stderr, f"srun exited {result.returncode}"
    except proc.ProcessError as exc:
        out = exc.result.stdout if exc.result else ""
        err, why = (exc.result.stderr if exc.result else ""), str(exc)
    seconds = time.monotonic() - start
    answers = _by_node(out)
    last = [ln for ln in err.splitlines() if ln.strip()]
    detail = f"{why}: {last[-1][:300]}" if last else why
    return [
        HostResult(h, True, answers[h.name], "", seconds)
        if h.name in answers
        else HostResult(
            h, False, "", f"no answer from this node's srun task ({detail})", seconds, 1
        )
        for h in hosts
    ]


SRUN_CHUNK = 1024  # srun --label cuts a task's long lines into labelled pieces of this size


def _task_texts(output: str) -> dict[str, str]:
    """Each task's stdout, re-joined from srun's ``--label`` pieces."""
    texts: dict[str, list[str]] = {}
    cut: dict[str, bool] = {}  # whether the task's last piece was cut at SRUN_CHUNK
    for line in output.splitlines():
        task, sep, text = line.partition(": ")
        if not sep or not task.strip().isdigit():
            continue
        task = task.strip()
        pieces = texts.setdefault(task, [])
        if pieces and cut.get(task):
            pieces[-1] += text
        else:
            pieces.append(text)
        cut[task] = len(text) >= SRUN_CHUNK
    return {task: "\n".join(pieces) for task, pieces in texts.items()}


def _by_node(output: str) -> dict[str, str]:
    """Each node's JSON document, keyed by the "node" field it reports."""
    import json

    answers: dict[str, str] = {}
    for text in _task_texts(output).values():
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            try:
                node = json.loads(line).get("node")
            except (ValueError, AttributeError):
                continue
            if isinstance(node, str) and node not in answers:
                answers[node] = line
    return answers
