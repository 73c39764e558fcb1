"""``python -m envtool_node.fixgen``: a node without envtool brings its prefix to the lock
with the installer it has (micromamba, mamba or conda), as ``envtool fix --here`` would, and
answers the same one ``envtool.fix-node/1`` line.

Run by the prefix's own python from the folder the controller's payload was unpacked into
(``--dir``: ``wanted.json``, the lock's packages for this platform with their hashes, and
``explicit.txt``, the same as conda's ``@EXPLICIT`` list with each archive's MD5). The plan:
the prefix's records (conda's and pip's, read as the export reads them) against the lock's.
With ``--apply``: the installer makes a new generation ``P.envtool-gen-N`` from the list (it
checks each archive's MD5), the generation is stamped, its records compared with the lock
(name, version, build, sha256 and md5 where both have one) and its python must import torch
from it; then ``P`` is switched in one step and older generations pruned (generations.py,
envtool's own code). Anything before the switch removes the generation; a run killed
mid-install leaves one without a stamp, which the next fix (envtool's or this) removes.
A lock with pip packages is refused for the apply (an explicit list cannot carry them), as
is a cache: both need envtool on the node. Python 3.9, standard library only.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from . import generations as gens
from .export import ExportError, export_prefix
from .schema import FIX_NODE
from .stamp import SCHEMA, STAMP

MAX_TEXT = 400  # the controller's reader's bound on a text field
MAX_WANTED = 64 * 1024 * 1024
OUTPUT_TAIL = 4096


class FixError(Exception):
    """This node's fix failed; its answer says why."""


def _norm(name: str, manager: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower() if manager == "pip" else name


def _label(p: dict[str, Any]) -> str:
    if p["manager"] == "pip":
        return f"{p['name']}=={p['version']}"
    return f"{p['name']}={p['version']}={p['build']}"


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["version"] != b["version"]:
        return False
    if a["manager"] == "pip":
        return True
    digests = [k for k in ("sha256", "md5") if a.get(k) and b.get(k)]
    return a["build"] == b["build"] and all(a[k] == b[k] for k in digests)


def changes(wanted: list[dict[str, Any]], have: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What makes ``have`` the lock: add, replace, remove, by manager and name."""
    want = {(p["manager"], _norm(p["name"], p["manager"])): p for p in wanted}
    got = {(p["manager"], _norm(p["name"], p["manager"])): p for p in have}
    out = []
    for key in sorted(set(want) | set(got), key=lambda k: (k[1], k[0])):
        a, b = want.get(key), got.get(key)
        if a is not None and b is not None and _same(a, b):
            continue
        action = "add" if b is None else "remove" if a is None else "replace"
        named = a or b
        assert named is not None
        out.append({"action": action, "name": named["name"], "manager": key[0],
                    "before": _label(b) if b else "", "after": _label(a) if a else ""})  # fmt: skip
    return out


def _have(prefix: Path) -> list[dict[str, Any]]:
    try:
        return list(export_prefix(str(prefix))["packages"])
    except ExportError as exc:
        raise FixError(str(exc)) from None


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    half = (MAX_TEXT - 3) // 2
    return f"{text[:half]} … {text[-(MAX_TEXT - 3 - half) :]}"


def record(prefix: Path, todo: Sequence[dict[str, str]], **done: Any) -> dict[str, Any]:
    """A fix-node/1 answer (the fields FixRecord reads, every text within its bound)."""
    stamp = _stamp_of(prefix)
    doc: dict[str, Any] = {"schema": FIX_NODE, "prefix": _clip(str(prefix)),
                           "changes": [{k: _clip(v) for k, v in c.items()} for c in todo],
                           "applied": False, "generation": "", "switch": "", "removed": [],
                           "kept_in_use": [], "unread": 0, "error": "", "stamp": stamp,
                           "source": ""}  # fmt: skip
    doc.update(done)
    return doc


def _stamp_of(prefix: Path) -> str:
    from .stamp import read

    found = read(str(prefix))
    return found["lock_sha256"] if found else ""


@contextmanager
def _one_fix(prefix: Path) -> Iterator[None]:
    """envtool's own lock of a prefix's fix (lock/filelock.py: the same file, held by flock,
    removed at the end): an envtool fix and this one never run on one prefix at once."""
    path = prefix.parent / f".{prefix.name}.envtool-fix.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            busy = f"{prefix}: another envtool fix of it is running (pid {holder})"
            raise FixError(busy) from None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with suppress(OSError):
            path.unlink()
        os.close(fd)


def _run(argv: list[str], log: Path, what: str, env: dict[str, str]) -> None:
    with open(log, "wb") as out:
        code = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                              env=env, check=False).returncode  # fmt: skip
    if code != 0:
        with open(log, "rb") as fh:
            fh.seek(max(0, log.stat().st_size - OUTPUT_TAIL))
            lines = fh.read().decode(errors="replace").strip().splitlines()
        raise FixError(f"{what} failed (exit {code}): {(lines or ['no output'])[-1]}")


def _clean_env() -> dict[str, str]:
    """This run's environment without the variables that would point a python elsewhere."""
    drop = ("PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX", "CONDA_DEFAULT_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _check(target: Path, wanted: list[dict[str, Any]], log: Path) -> None:
    left = changes(wanted, _have(target))
    if left:
        names = ", ".join(c["name"] for c in left[:5])
        raise FixError(f"{target}: the new generation is not the lock ({names})")
    if not any(p["name"] == "pytorch" for p in wanted):
        return
    code = "import os, torch; print(os.path.abspath(torch.__file__))"
    _run([str(target / "bin" / "python"), "-c", code], log, "its python importing torch",
         _clean_env())  # fmt: skip
    loaded = log.read_text(errors="replace").strip().splitlines()[-1:]
    inside = (str(target) + "/", str(target.resolve()) + "/")
    if not loaded or not loaded[0].startswith(inside):
        raise FixError(f"{target}: its python does not import torch from it ({loaded})")


def _stamp(target: Path, meta: dict[str, Any]) -> None:
    fields = ("lock_sha256", "lock", "platform", "envtool", "installed")
    body = {"schema": SCHEMA, **{k: str(meta[k]) for k in fields}}
    tmp = target / (STAMP + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, target / STAMP)


def apply(prefix: Path, meta: dict[str, Any], folder: Path, args: argparse.Namespace,
          todo: list[dict[str, str]]) -> dict[str, Any]:  # fmt: skip
    """The new generation made by the installer, checked, switched to; older ones pruned."""
    wanted = meta["packages"]
    tool = Path(args.installer).name
    pip = [p for p in wanted if p["manager"] == "pip"]
    if pip:
        raise FixError(f"the lock holds {len(pip)} pip packages, which {tool}'s explicit list "
                       "cannot install: put envtool on the node (--node-envtool)")  # fmt: skip
    if meta.get("credentials"):
        raise FixError(f"the lock's channel takes a credential, which {tool} would "
                       "write into the prefix's records: put envtool on the node")  # fmt: skip
    if meta.get("mirrored"):
        raise FixError(f"--channel-mirror is applied by envtool's installer, not by {tool}: "
                       "put envtool on the node (--node-envtool)")  # fmt: skip
    with _one_fix(prefix):
        now = gens.current(prefix)
        left = gens.stale(prefix, now)
        for stale in left:
            gens.remove(stale)
        removed = [p.name for p in left]
        if now is not None:
            (now.path / gens.PENDING).unlink(missing_ok=True)
        target = gens.next_path(prefix)
        log = folder / "installer.log"
        try:
            _run([args.installer, "create", "-y", "-q", "-p", str(target), "--file",
                  str(folder / "explicit.txt")], log, tool, _clean_env())  # fmt: skip
            (target / gens.PENDING).write_text("envtool fix: not switched to yet\n")
            _stamp(target, meta)
            _check(target, wanted, log)
            was = now.path.name if now is not None else gens.path_of(prefix, 0).name
            (target / gens.PREVIOUS).write_text(was + "\n")
            how = gens.switch(prefix, target, args.allow_gap)
            (target / gens.PENDING).unlink()
        except BaseException:
            if target.exists() and gens.current(prefix) != gens.Generation(0, target):
                gens.remove(target)
            raise
        gone, kept, unread = gens.prune(prefix, args.keep, skip=os.getpid())
    conda = sum(p["manager"] == "conda" for p in wanted)
    return record(prefix, todo, applied=True, generation=target.name, switch=how,
                  removed=removed + gone, unread=unread,
                  kept_in_use=[f"{n} (pids {', '.join(map(str, p))})" for n, p in kept],
                  source=f"{conda} conda packages: installed by {tool} from the lock's URLs "
                  "(each archive's MD5 checked by it, each record against the lock's "
                  "sha256 after)")  # fmt: skip


def _meta(folder: Path) -> dict[str, Any]:
    path = folder / "wanted.json"
    if path.stat().st_size > MAX_WANTED:
        raise FixError(f"{path}: over {MAX_WANTED >> 20} MiB")
    meta = json.loads(path.read_text())
    if not isinstance(meta, dict) or not isinstance(meta.get("packages"), list):
        raise FixError(f"{path}: not the lock's packages")
    return meta


def fix(args: argparse.Namespace) -> dict[str, Any]:
    """This node's answer: its plan, and with ``--apply`` or ``--rollback`` what it did."""
    prefix = Path(args.prefix).absolute()
    gens.check_writable(prefix)
    if args.rollback:
        back = gens.roll_back(prefix)
        if back is None:
            return record(prefix, [])
        return record(prefix, [], applied=True, generation=back[0], switch=back[1])
    if not (prefix / "conda-meta").is_dir():
        raise FixError(f"{prefix}: not a conda environment (no conda-meta/)")
    gens.current(prefix)  # P a link to anything but its generations: refused before a plan
    folder = Path(args.dir)
    meta = _meta(folder)
    todo = changes(meta["packages"], _have(prefix))
    if not args.apply or not todo:
        return record(prefix, todo)
    if args.cache:
        tool = Path(args.installer).name
        raise FixError(f"--cache is read by envtool's installer: this node has only {tool}; "
                       "put envtool on it, or fix without --cache")  # fmt: skip
    return apply(prefix, meta, folder, args, todo)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="envtool_node.fixgen")
    p.add_argument("--prefix", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--installer", required=True)
    p.add_argument("--keep", type=int, default=1)
    for flag in ("--apply", "--rollback", "--allow-gap", "--cache"):
        p.add_argument(flag, action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """One fix-node/1 line on stdout; 1 when the fix failed (said in its ``error``)."""
    args = _parser().parse_args(argv)
    try:
        doc = fix(args)
    except (FixError, gens.GenerationError, OSError, ValueError) as exc:
        doc = record(Path(args.prefix), [], error=_clip(str(exc)))
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    return 1 if doc["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
