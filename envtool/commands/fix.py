"""``envtool fix``: the drifted nodes back to the lock. A verify first (or a saved report),
then each node's own plan (``envtool fix --here`` there: add, replace, remove so its prefix is
exactly the lock), printed with what a package install cannot fix; only with ``--apply``
(asked once on a terminal, ``--yes`` for scripts) each node that differs is fixed (a canary
first where asked, then the rest in parallel) and every node verified again: before → after.

``--here`` is what runs on a node: the lock the payload carried (or ``--lockfile -``, on
stdin), one ``envtool.fix-node/1`` line out."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from envtool.cluster import fix_payload, remote_fix
from envtool.cluster import hosts as hostlist
from envtool.cluster.hosts import Host
from envtool.cluster.options import FanoutOptions
from envtool.cluster.remote_fix import NodeArgs
from envtool.commands import verify as verify_command
from envtool.commands.verify import VerifyArgs
from envtool.errors import EXIT_OK, EXIT_PROBLEMS, EnvtoolError, InputError
from envtool.fix import answer, apply
from envtool.fix.apply import FixOptions
from envtool.lock import install, pkgcache, stamp
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
    push: bool = False  # --cache DIR filled here, then sent to each node over the transport


def here(lock_arg: str, options: FixOptions, rollback: bool, pushed: bool = False) -> int:
    """What a node runs: its plan (and with ``apply`` the fix), one JSON line; 1 on failure.
    ``pushed``: the cache is the controller's, sent over the transport (said so)."""
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
            if options.apply and options.shared_cache:  # the controller filled it: read, not made
                options = replace(options, shared_cache=pkgcache.checked_dir(
                    options.shared_cache, create=False))  # fmt: skip
            outcome = apply.rollback(options) if rollback else apply.run(options)
            stamp = read_stamp(str(options.prefix)) or {}
            rec = answer.record(outcome, str(options.prefix), stamp=stamp.get("lock_sha256", ""))
            if pushed and options.shared_cache is not None:  # a private folder, gone after
                said = rec.source.replace(f"the cache {options.shared_cache}", "the cache pushed")
                rec = replace(rec, source=said)
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
    hosts = hostlist.resolve(args.verify.hosts_spec)
    fan = args.verify.fanout
    this = stamp.lock_hash(args.verify.lock_path)
    before = _before(args)
    with tempfile.TemporaryDirectory(prefix="envtool-fix-") as folder:
        payload = Path(folder) / "payload.tar"
        node = replace(args.node, size=_payload(args, payload))
        if node.rollback:
            return _rollback(args, hosts, before, node, payload)
        plans = remote_fix.run_all(hosts, fan, replace(node, apply=False), payload)
        drifted = [h for h in hosts if plans[h.label].changes or plans[h.label].error]
        if not node.apply or not drifted:
            fix_text.show_plan(before, plans, args.fmt, this, applied=False)
            return EXIT_OK if not any(p.error for p in plans.values()) else EXIT_PROBLEMS
        todo = [h for h in drifted if not plans[h.label].error]
        fix_text.show_plan(before, plans, args.fmt, this, applied=True)
        if todo and not fix_text.confirm(len(todo), args.yes):
            return EXIT_PROBLEMS
        if node.cache and todo:
            node = _fill(args, node, payload)
        done = _fix(todo, fan, node, payload, args.canary)
    after = document(verify_command.decide(args.verify))
    fix_text.show_result(before, after, plans, done, args.fmt)
    failed = any(r.error for r in done.values()) or len(done) < len(todo)
    return EXIT_PROBLEMS if failed or not fix_text.matches(after, plans) else EXIT_OK


def _payload(args: FixArgs, out: Path, shared: Path | None = None) -> int:
    """The tar every node reads (cluster/fix_payload.py), with ``shared``'s packages of the
    lock when pushed; its size."""
    lock_path = args.verify.lock_path
    assert lock_path is not None
    return fix_payload.write(lock_path, args.node.platform, out, bool(args.node.mirrors), shared)


def _fix(
    todo: list[Host], fan: FanoutOptions, node: NodeArgs, payload: Path, canary: int
) -> dict[str, FixRecord]:
    """Each node fixed: the first ``canary`` first, the rest only if none of those failed."""
    done: dict[str, FixRecord] = {}
    first, rest = todo[:canary], todo[canary:]
    if first:
        done |= remote_fix.run_all(first, fan, node, payload)
    if not any(done[h.label].error for h in first):  # a failed canary stops the rest
        done |= remote_fix.run_all(rest, fan, node, payload)
    return done


def _fill(args: FixArgs, node: NodeArgs, payload: Path) -> NodeArgs:
    """``--cache DIR`` filled here from the lock's URLs before any node reads it; with
    ``--push``, its packages of the lock put in the payload (the node reads them as its
    cache)."""
    lock_path = args.verify.lock_path
    assert lock_path is not None
    shared = pkgcache.checked_dir(Path(node.cache), create=True)
    options = install.InstallOptions(lock_path, shared, node.platform, mirrors=node.mirrors,
                                     allow_insecure_url=node.allow_insecure_url)  # fmt: skip
    fix_text.show_filled(shared, install.fill_cache(options, shared), args.fmt)
    if not args.push:
        return node
    return replace(node, size=_payload(args, payload, shared), push=True)


def _rollback(args: FixArgs, hosts: list[Host], before: VerifyDocument, node: NodeArgs,
              payload: Path) -> int:  # fmt: skip
    """Every node switched back to its previous generation (asked once, as --apply is)."""
    if not fix_text.confirm(len(hosts), args.yes, "roll back"):
        return EXIT_PROBLEMS
    done = remote_fix.run_all(hosts, args.verify.fanout, node, payload)
    after = document(verify_command.decide(args.verify))
    fix_text.show_result(before, after, done, done, args.fmt, "rolled back")
    return EXIT_PROBLEMS if any(r.error for r in done.values()) else EXIT_OK
