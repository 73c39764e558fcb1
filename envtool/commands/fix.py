"""``envtool fix``: the drifted nodes back to the lock. A verify first (or a saved report),
then each node's own plan (``envtool fix --here`` there: add, replace, remove so its prefix is
exactly the lock), printed with what a package install cannot fix; only with ``--apply``
(asked once on a terminal, ``--yes`` for scripts) each node that differs is fixed (a canary
first where asked, then the rest in parallel) and every node verified again: before → after.

``--here`` is what runs on a node: the lock on stdin (``--lockfile -``), one
``envtool.fix-node/1`` line out."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from envtool.cluster import hosts as hostlist
from envtool.cluster import remote_fix
from envtool.cluster.hosts import Host
from envtool.cluster.remote_fix import NodeArgs
from envtool.commands import verify as verify_command
from envtool.commands.verify import VerifyArgs
from envtool.errors import EXIT_OK, EXIT_PROBLEMS, EnvtoolError, InputError
from envtool.fix import answer, apply
from envtool.fix.apply import FixOptions
from envtool.lock import stamp
from envtool.protocol import fix_record, verify_report
from envtool.protocol.fix_record import FixRecord
from envtool.protocol.verify_report import VerifyDocument
from envtool.report import fix_text
from envtool.report.verify import document
from envtool_node.stamp import read as read_stamp

MAX_LOCK = 64 * 1024 * 1024


@dataclass(frozen=True)
class FixArgs:
    """What ``envtool fix`` was asked to do."""

    verify: VerifyArgs  # the hosts, transport, prefix and lock, as verify takes them
    node: NodeArgs
    report: Path | None = None  # a saved verify report instead of a verify run now
    yes: bool = False
    canary: int = 0
    fmt: str = "text"


def here(lock_arg: str, options: FixOptions, rollback: bool) -> int:
    """What a node runs: its plan (and with ``apply`` the fix), one JSON line; 1 on failure."""
    with tempfile.TemporaryDirectory(prefix="envtool-fix-") as folder:
        lock = Path(folder) / "conda-lock.yml"
        try:
            if lock_arg == "-":
                data = sys.stdin.buffer.read(MAX_LOCK + 1)
                if len(data) > MAX_LOCK:
                    raise InputError(f"the lock on stdin is over {MAX_LOCK >> 20} MiB")
                lock.write_bytes(data)
            else:
                lock = Path(lock_arg)
            options = replace(options, lock_path=lock)
            outcome = apply.rollback(options) if rollback else apply.run(options)
            stamp = read_stamp(str(options.prefix)) or {}
            rec = answer.record(outcome, str(options.prefix), stamp=stamp.get("lock_sha256", ""))
        except EnvtoolError as exc:  # the node's own error: its answer, not a traceback
            rec = fix_record.failed(str(options.prefix), str(exc))
    sys.stdout.write(fix_record.dumps(rec))
    return EXIT_PROBLEMS if rec.error else EXIT_OK


def _before(args: FixArgs) -> VerifyDocument:
    if args.report is not None:
        return verify_report.read(args.report)
    return document(verify_command.decide(args.verify))


def run(args: FixArgs) -> int:
    """0 every node matches the lock (afterwards, with --apply); 1 otherwise."""
    if args.verify.lock_path is None:
        raise InputError("envtool fix needs the lock the nodes are brought to (--lockfile)")
    lock = args.verify.lock_path.read_bytes()
    hosts = hostlist.resolve(args.verify.hosts_spec)
    fan = args.verify.fanout
    this = stamp.lock_hash(args.verify.lock_path)
    before = _before(args)
    if args.node.rollback:
        return _rollback(args, hosts, before, lock, this)
    plans = remote_fix.run_all(hosts, fan, replace(args.node, apply=False), lock)
    drifted = [h for h in hosts if plans[h.label].changes or plans[h.label].error]
    if not args.node.apply or not drifted:
        fix_text.show_plan(before, plans, args.fmt, this, applied=False)
        return EXIT_OK if not any(p.error for p in plans.values()) else EXIT_PROBLEMS
    todo = [h for h in drifted if not plans[h.label].error]
    fix_text.show_plan(before, plans, args.fmt, this, applied=True)
    if todo and not fix_text.confirm(len(todo), args.yes):
        return EXIT_PROBLEMS
    done: dict[str, FixRecord] = {}
    first, rest = todo[: args.canary], todo[args.canary :]
    if first:
        done |= remote_fix.run_all(first, fan, args.node, lock)
    if not any(done[h.label].error for h in first):  # a failed canary stops the rest
        done |= remote_fix.run_all(rest, fan, args.node, lock)
    after = document(verify_command.decide(args.verify))
    fix_text.show_result(before, after, plans, done, args.fmt)
    failed = any(r.error for r in done.values()) or len(done) < len(todo)
    return EXIT_PROBLEMS if failed or not fix_text.matches(after, plans) else EXIT_OK


def _rollback(args: FixArgs, hosts: list[Host], before: VerifyDocument, lock: bytes,
              this: str) -> int:  # fmt: skip
    """Every node switched back to its previous generation (asked once, as --apply is)."""
    if not fix_text.confirm(len(hosts), args.yes, "roll back"):
        return EXIT_PROBLEMS
    done = remote_fix.run_all(hosts, args.verify.fanout, args.node, lock)
    after = document(verify_command.decide(args.verify))
    fix_text.show_result(before, after, done, done, args.fmt, "rolled back")
    return EXIT_PROBLEMS if any(r.error for r in done.values()) else EXIT_OK
