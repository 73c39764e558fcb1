"""The bounded fan-out: the bundle on many hosts at once, each with its own deadline.

Concurrency is a thread pool of ``proc.run`` calls: each thread waits on one transport
process, so the pool is bounded by ``--fanout`` like clush's. What comes back is each host's
raw ``Answer`` (exit code and streams); protocol/answers.py says what it means.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from envtool import proc
from envtool.cluster.hosts import Host
from envtool.cluster.options import FanoutOptions
from envtool.cluster.transports import argv_for
from envtool.errors import InputError
from envtool.protocol.types import Answer, Outcome

_log = logging.getLogger("envtool")  # -v: each host's answer as it comes


def _outcome(answer: Answer) -> str:
    if answer.outcome is not None:
        return answer.outcome.value
    return f"exit {answer.returncode}"


def _one(host: Host, options: FanoutOptions, bundle: bytes) -> Answer:
    start, started = time.monotonic(), time.time()  # the wall clock bounds the node's clock
    deadline = options.timeout + options.connect_timeout + 5.0
    limits = (options.max_output, options.max_stderr)
    try:
        result = proc.run(
            argv_for(host, options), input=bundle, timeout=deadline, check=False, limits=limits
        )
    except proc.ProcessError as exc:  # past the deadline (stopped), or it never started
        out = exc.result
        outcome = Outcome.TIMED_OUT if out is not None else Outcome.CANNOT_START
        seconds = time.monotonic() - start
        return Answer(
            host.label, None, out.stdout if out else "", out.stderr if out else "", seconds,
            outcome, str(exc), started,
        )  # fmt: skip
    seconds = time.monotonic() - start
    if result.overflow:
        limit = dict(zip(("stdout", "stderr"), limits, strict=True))[result.overflow]
        why = f"printed more than {limit} bytes on {result.overflow}: stopped (--max-output)"
        return Answer(host.label, None, "", "", seconds, Outcome.OVERSIZED, why, started)
    return Answer(
        host.label, result.returncode, result.stdout, result.stderr, seconds, started=started
    )


DEFAULT_FANOUT = 64  # as clush
FILES_PER_HOST = 4  # a running transport holds its three pipes here, and one more in passing
RESERVED_FILES = 64  # envtool's own: modules, sockets, the terminal


def fd_budget() -> int:
    """How many hosts can run at once within this process's open-files limit; the soft limit
    is raised to the hard one first (allowed without privileges)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return max(1, (soft - RESERVED_FILES) // FILES_PER_HOST)


def effective_fanout(requested: int) -> int:
    """``--fanout`` (0: the default, 64 or what the open-files limit allows); a request the
    limit cannot hold is refused before anything starts."""
    budget = fd_budget()
    if requested == 0:
        return min(DEFAULT_FANOUT, budget)
    if requested > budget:
        raise InputError(
            f"--fanout {requested} needs about {requested * FILES_PER_HOST} open files and "
            f"ulimit -n is {proc.open_files_limit()}: use --fanout {budget} or less, or raise "
            "ulimit -n"
        )
    return requested


def run_all(
    hosts: Sequence[Host],
    options: FanoutOptions,
    bundle: bytes,
    on_done: Callable[[Answer], None] | None = None,
) -> list[Answer]:
    """Run the bundle on every host, ``fanout`` at a time; answers in the hosts' order."""
    if options.fanout < 0:
        raise InputError("--fanout must be at least 1")
    width = effective_fanout(options.fanout)
    answers: dict[Host, Answer] = {}
    pool = ThreadPoolExecutor(max_workers=min(width, max(1, len(hosts))))
    try:
        futures = {pool.submit(_one, h, options, bundle): h for h in hosts}
        for future in as_completed(futures):
            answer = future.result()
            answers[futures[future]] = answer
            _log.debug("%s: %s in %.1f s", answer.host, _outcome(answer), answer.seconds)
            if on_done is not None:
                on_done(answer)
    except BaseException:  # Ctrl-C: stop queued hosts, kill the running transports
        pool.shutdown(wait=False, cancel_futures=True)
        proc.kill_all()
        raise
    pool.shutdown()
    return [answers[h] for h in hosts]
