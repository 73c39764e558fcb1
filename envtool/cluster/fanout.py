"""The bounded fan-out: the bundle on many hosts at once, each with its own deadline.

Concurrency is a thread pool of ``proc.run`` calls: each thread waits on one transport
process, so the pool is bounded by ``--fanout`` like clush's. What comes back is each host's
raw ``Answer`` (exit code and streams); protocol/answers.py says what it means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from envtool.cluster import proc
from envtool.cluster.hosts import Host
from envtool.cluster.options import FanoutOptions
from envtool.cluster.transports import argv_for
from envtool.errors import InputError
from envtool.protocol.types import Answer, Outcome


def _one(host: Host, options: FanoutOptions, bundle: bytes) -> Answer:
    start = time.monotonic()
    deadline = options.timeout + options.connect_timeout + 5.0
    try:
        result = proc.run(argv_for(host, options), input=bundle, timeout=deadline, check=False)
    except proc.ProcessError as exc:  # past the deadline (stopped), or it never started
        out = exc.result
        outcome = Outcome.TIMED_OUT if out is not None else Outcome.CANNOT_START
        seconds = time.monotonic() - start
        return Answer(
            host.target, None, out.stdout if out else "", out.stderr if out else "", seconds,
            outcome, str(exc),
        )  # fmt: skip
    seconds = time.monotonic() - start
    return Answer(host.target, result.returncode, result.stdout, result.stderr, seconds)


def run_all(
    hosts: Sequence[Host],
    options: FanoutOptions,
    bundle: bytes,
    on_done: Callable[[Answer], None] | None = None,
) -> list[Answer]:
    """Run the bundle on every host, ``fanout`` at a time; answers in the hosts' order."""
    if options.fanout < 1:
        raise InputError("--fanout must be at least 1")
    answers: dict[Host, Answer] = {}
    pool = ThreadPoolExecutor(max_workers=min(options.fanout, max(1, len(hosts))))
    try:
        futures = {pool.submit(_one, h, options, bundle): h for h in hosts}
        for future in as_completed(futures):
            answer = future.result()
            answers[futures[future]] = answer
            if on_done is not None:
                on_done(answer)
    except BaseException:  # Ctrl-C: stop queued hosts, kill the running transports
        pool.shutdown(wait=False, cancel_futures=True)
        proc.kill_all()
        raise
    pool.shutdown()
    return [answers[h] for h in hosts]
