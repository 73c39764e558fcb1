"""The POSIX sh a node runs: the run's token and the bundle from stdin → private temp dir → the
node package → cleanup.

It picks the environment's python (``--prefix``, else the lock's env name under conda's env
dirs, else ``$CONDA_PREFIX``), runs ``python -B -m envtool_node`` under ``timeout`` from the
temp dir, stops it if the connection goes away, and exits with the codes in
protocol/schemas.py when it cannot (with a marker line on stderr where a path matters).
"""

from __future__ import annotations

import shlex

from envtool.cluster.options import FanoutOptions
from envtool.errors import InputError
from envtool.lock.prefixes import ENV_DIRS
from envtool.protocol import schemas

NODE_VAR = '"${SLURMD_NODENAME:-$(hostname)}"'  # what {node} in --prefix becomes on the node


def quote(value: str) -> str:
    """``value`` as one word for a POSIX shell, or for csh/tcsh (single quotes, and ``'\''``
    for a quote inside, mean the same in both): the one quoting of everything that reaches
    a shell on a node. A NUL or a line break cannot be passed through a remote shell."""
    if "\0" in value or "\n" in value or "\r" in value:
        raise InputError(f"{value!r}: a NUL or a line break cannot reach a node's shell")
    return shlex.quote(value)


def remote_command(script: str) -> str:
    """What ssh is given to run: the script under ``sh -c``, whatever the login shell is (bash,
    dash, tcsh: ssh hands the command to it, so the script never reaches it unquoted)."""
    return f"exec sh -c {quote(script)}"


_NO_PYTHON_IN = '"no bin/python in ${py%/bin/python}"'  # --prefix: what was looked at
_LOOKED = '"$m"'  # an env name: where it was looked for (set by the search)


def _missing(looked_for: str) -> str:
    """sh that says no environment was found (what was looked for, as the node expanded it:
    a marker line envtool reads, then a line for people) and exits."""
    return (
        f"{{ printf '%s %s %s\\n' {schemas.MARKER} {schemas.PART_ENV_MISSING} {looked_for} >&2; "
        f"echo envtool: {looked_for} >&2; exit {schemas.EXIT_ENV_MISSING}; }}"
    )


def _python_choice(options: FanoutOptions) -> str:
    """sh that sets $py to the environment's interpreter on the node, or exits saying what it
    looked for: with --prefix or a lock's env name no other python stands in for it (its
    torch would "load" in the environment's place); only without either (--no-lock) is the
    node's python3 probed."""
    if options.prefix:
        parts = (options.prefix.rstrip("/") + "/bin/python").split("{node}")
        chosen = "py=" + NODE_VAR.join(quote(p) for p in parts)
        return f'{chosen}; [ -x "$py" ] || {_missing(_NO_PYTHON_IN)}'
    conda = '"${CONDA_PREFIX:-/nonexistent}/bin/python"'
    first = 'py=; for c in {}; do if [ -x "$c" ]; then py=$c; break; fi; done; '
    if not options.env_name:
        return (
            first.format(conda)
            + '[ -n "$py" ] || py=$(command -v python3 || command -v python); '
            + '[ -n "$py" ] || { echo "envtool: no python on this node" >&2; '
            + f"exit {schemas.EXIT_NO_PYTHON}; }}"
        )
    name = quote(options.env_name)
    dirs = ", ".join(ENV_DIRS)
    looked = (
        f'm="no environment \'"{name}"\' in {dirs}"; '
        '[ -n "${CONDA_PREFIX:-}" ] && m="$m, nor in \\$CONDA_PREFIX ($CONDA_PREFIX)" || '
        'm="$m (\\$CONDA_PREFIX is unset)"; '
    )
    loop = " ".join([*(f'"{d}/"{name}"/bin/python"' for d in ENV_DIRS), conda])
    return first.format(loop) + f'[ -n "$py" ] || {{ {looked}{_missing(_LOOKED)}; }}'


# Cleanup on every exit: stop the watchdog, stop the probe if it still runs (the script was
# signalled), remove the temp dir. A trapped signal exits, so the EXIT trap runs.
# The probe is stopped twice over: `timeout` itself, and its process group (-$k: `timeout`
# makes one of its own), which still holds the probe if the signal came while `timeout` was
# forking it: `timeout` then leaves at once and its child would run on, orphaned. The group
# first: the script's EXIT trap stops the watchdog as soon as `timeout` has left, which could
# fall between the two kills (CI saw the probe left behind when `timeout` came first).
_STOP = '{ kill -TERM -"$k"; kill -TERM "$k"; } 2>/dev/null'
# The watchdog ($w, below) is stopped, its sleep killed, then it: no signal to it can be lost
# or left a sleep behind. A TERM to a loop that trapped it was lost when it came before the
# subshell had set its trap, and one between `sleep 1 &` and `s=$!` left that sleep running
# after the script had ended (CI saw both). Only while $w is still this shell's child (its
# ppid is $$): a $w reaped earlier could name another process by now.
_END_WATCHDOG = (
    '[ -z "$w" ] || { q=; read -r q < "/proc/$w/stat"; q=${q##*") "}; q=${q#* }; '
    'if [ "${q%% *}" = "$$" ] && kill -STOP "$w"; then c=; '
    'read -r c < "/proc/$w/task/$w/children"; kill -KILL $c "$w"; fi; } 2>/dev/null; '
)
_TRAPS = (
    f'trap \'{_END_WATCHDOG}[ -z "$k" ] || {_STOP}; [ -z "$x" ] || rm -rf "$x"\' EXIT; '
    "trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 140' USR2; "
)  # USR2: how envtool stops an srun step (srun passes it on; TERM it makes the tasks' KILL)
# Without a pty, nothing tells a command that its ssh connection is gone: sshd's session
# process (this script's parent) exits and the script runs on, reparented. So a background
# loop reads the script's parent from /proc/$$/stat once a second (builtins only, no fork),
# and once it is no longer $PPID sends SIGTERM to the probe (`timeout` passes it to its own
# process group: python and what it started). Reading our own stat works for any parent
# (slurmstepd runs as root; /proc may hide other users' processes) and catches a parent
# that died before the loop began. SIGTERM is sent again each second while the probe runs
# (at most 10 times): a parent already gone when the loop began makes the first one race the
# subshell's `exec timeout` (sh only notes a caught signal, and exec drops the note), and
# only a later one reaches `timeout`, which passes it on. Not watched: PPID 0 or 1 (docker
# exec, docker run), and systems without /proc. The loop holds none of the session's file
# descriptors (the session would wait for them) and the EXIT trap ends it and its sleep
# (_END_WATCHDOG): a normal run is not delayed and leaves nothing.
_WATCHDOG = (
    'if [ "${pp:-0}" -gt 1 ] 2>/dev/null && [ -r "/proc/$$/stat" ]; then ('
    ' while read -r q < "/proc/$$/stat"; do'
    ' q=${q##*") "}; q=${q#* }; [ "${q%% *}" = "$pp" ] || break;'
    " sleep 1; done;"
    f' n=0; while kill -0 $$ 2>/dev/null && kill -0 "$k" 2>/dev/null && [ $n -lt 10 ]; do'
    f" {_STOP}; n=$((n+1)); sleep 1; done"
    " ) </dev/null >/dev/null 2>&1 & w=$!; fi; "
)


def _refuse(message: str, code: int) -> str:
    return f'{{ echo "envtool: {message}" >&2; exit {code}; }}'


def _shared(folder: str, digest: str) -> str:
    """sh that trusts a --bundle-dir only when it is the user's, nobody else can write it,
    it holds only the package, and the package is the one envtool sent (its sha256)."""
    bad = schemas.EXIT_BUNDLE_UNTRUSTED
    writable = '$(find "$d" "$d/envtool_node" -prune \\( -perm -002 -o -perm -020 \\))'
    return (
        f"d={quote(folder)}; "
        f'[ -O "$d" ] && [ -O "$d/envtool_node" ] || {_refuse("$d is not yours", bad)}; '
        f'[ -z "{writable}" ] || {_refuse("$d is writable by others", bad)}; '
        f'[ "$(ls -A "$d")" = envtool_node ] || {_refuse("$d holds other files", bad)}; '
        'h=$(cd "$d" && LC_ALL=C && export LC_ALL && cat envtool_node/*.py | sha256sum); '
        f'[ "${{h%% *}}" = {digest} ] || '
        f"{_refuse('the node package in $d is not the one envtool sent', bad)}; "
    )


# A temp dir in a TMPDIR that others can write and that is not sticky could be swapped
# ($tp: the TMPDIR checked; remote_fix.py's payload folder is made there too).
TMP_CHECK = (
    'tp=${TMPDIR:-/tmp}; [ -z "$(find "$tp" -prune -perm -002 ! -perm -1000)" ] || '
    + _refuse("TMPDIR $tp is writable by others and not sticky", schemas.EXIT_NO_TEMP_DIR)
    + "; "
)


def node_script(options: FanoutOptions) -> str:
    """The POSIX sh the node runs: token and bundle from stdin (bundle.payload) → temp dir →
    envtool_node → cleanup."""
    limit = max(1, int(options.timeout))
    args = " ".join(quote(a) for a in options.node_args)
    # The run's one private folder $x, which the EXIT trap removes: the bundle (unless shared)
    # and, as the probe's TMPDIR, $x/tmp: every temp file of the node side (torchrun's log
    # dir, the facts and result folders, torch's own) goes with it.
    # the run's token, the first line on stdin (never argv, which every local user reads in
    # /proc): the node's rendezvous greetings carry it, so nobody else's count (reach.py)
    # (the node package checks its form: no "!" here, which tcsh expands even in quotes)
    token = (
        'IFS= read -r v || v=; [ -n "$v" ] || '
        + _refuse("no run token on stdin", schemas.EXIT_NO_BUNDLE)
        + "; "
    )
    fetch = (
        f"{token}{TMP_CHECK}"
        'x=$(mktemp -d "$tp/envtool.XXXXXXXX") && mkdir "$x/tmp" || exit '
        f"{schemas.EXIT_NO_TEMP_DIR}; "
    )
    if options.bundle_dir:  # the package already sits on a filesystem every node mounts
        fetch += _shared(options.bundle_dir, options.bundle_digest)
    else:
        fetch += f'd=$x; tar -xzf - -C "$d" || exit {schemas.EXIT_NO_BUNDLE}; '
    # over ssh the script's parent is sshd's session: a parent of 1 means the connection was
    # gone before the script began (an interrupted verify), and nothing would stop the probe
    gone = '[ "$pp" -gt 1 ] 2>/dev/null || exit 129; ' if options.transport == "ssh" else ""
    return (
        f"umask 077; d=; x=; k=; w=; pp=$PPID; {gone}"
        f"{_TRAPS}{fetch}"
        f"{_python_choice(options)}; "
        f'if command -v timeout >/dev/null 2>&1; then t="timeout -k 5 {limit}"; else t=; fi; '
        # absolute paths: the package runs from the temp dir, a relative --prefix must not move
        'b=$(cd "$(dirname "$py")" && pwd) && py="$b/${py##*/}"; p=$(cd "$b/.." && pwd); '
        f'(cd "$d" && TMPDIR="$x/tmp" && {schemas.TOKEN_VAR}="$v" && export TMPDIR '
        f'{schemas.TOKEN_VAR} && exec $t "$py" -B -m envtool_node --prefix "$p" {args}) & k=$!; '
        f"{_WATCHDOG}"
        # dash reports a job killed by a signal ("Terminated") on stderr: with the connection
        # gone that write would kill this shell by SIGPIPE before its EXIT trap cleans up
        "trap '' PIPE; "
        'wait "$k"; r=$?; k=; exit "$r"'
    )
