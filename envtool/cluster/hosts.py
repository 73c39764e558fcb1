"""Hosts files, node sets and Slurm node lists → validated ``Host`` values.

Every name is checked before it can reach a command line: a host name that ssh could read
as an option, or that a shell would interpret, is rejected with its file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from envtool.cluster import hostlist
from envtool.cluster.hostlist import planned_size, top_level
from envtool.errors import InputError, shown
from envtool.yamlio import STDIN, read_text

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
_EXPR = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._,/\[\]-]*$")  # "/": a step, in brackets only
_GROUP = re.compile(r"^@(?:[A-Za-z0-9_][A-Za-z0-9._-]*:)?[A-Za-z0-9_][A-Za-z0-9._-]*$")
_MAX_NAME = 253
_MAX_HOSTS = 100_000
_MAX_GROUPS = 8  # bracket groups in one pattern (r[1-2]n[1-4]); ClusterShell's nD folding is slow
MAX_EXPR = 4 * 2**20  # one node-set expression: 100,000 fragmented names fit
MAX_TEXT = 16 * 2**20  # a hosts list: 100,000 names of 253 characters fit


@dataclass(frozen=True)
class Host:
    """One node to probe."""

    name: str
    user: str | None = None
    port: int | None = None
    slots: int = 1
    origin: str = ""  # "hosts.txt:3", "--hosts", "SLURM_JOB_NODELIST"

    @property
    def target(self) -> str:
        """What ssh is given as destination: ``user@name`` or ``name``."""
        return f"{self.user}@{self.name}" if self.user else self.name

    @property
    def label(self) -> str:
        """The node as reports name it: ``user@name:port`` where a port was given (two sshd on
        one machine, each its own port, are two nodes)."""
        return f"{self.target}:{self.port}" if self.port else self.target


def _why_bad(name: str) -> str | None:
    if not name:
        return "empty name"
    if name.startswith("-"):
        return "starts with '-' (ssh would read it as an option)"
    if len(name) > _MAX_NAME:
        return f"longer than {_MAX_NAME} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "contains a control character"
    bad = sorted({c for c in name if c in " \t'\"`;$/\\|&<>(){}!*?~#%^=+,:@[]"})
    if bad:
        return f"contains {' '.join(repr(c) for c in bad)}"
    if name in (".", "..") or not _NAME.match(name):
        return "is not a host name"
    return None


def check_name(name: str, origin: str) -> str:
    """``name`` if it is a safe host name; else an InputError naming ``origin``."""
    why = _why_bad(name)
    if why:
        raise InputError(f"{origin}: bad host name {shown(name)}: {why}")
    return name


def _group(token: str, origin: str) -> str:
    """``@gpu`` (or ``@source:gpu``): the node set ClusterShell's configured group sources
    (groups.conf) give for it, as an expression, not yet expanded."""
    from ClusterShell.NodeSet import std_group_resolver
    from ClusterShell.NodeUtils import GroupResolverError

    source, _, name = token[1:].rpartition(":")
    try:
        found = std_group_resolver().group_nodes(name, namespace=source or None)
    except (GroupResolverError, OSError, ValueError) as exc:
        raise InputError(f"{origin}: node group {token!r}: {exc}") from None
    if not found:
        raise InputError(
            f"{origin}: node group {token!r} is not defined in ClusterShell's group sources "
            "(groups.conf); list its hosts or a node set instead"
        )
    return ",".join(found)


def _brackets_only(expr: str, chars: str) -> bool:
    """Each of ``chars`` in ``expr`` is inside a bracket group (``n[1-9/2]``)."""
    depth = 0
    for match in re.finditer(f"[][{re.escape(chars)}]", expr):  # not char by char: 4 MB
        ch = match.group()
        if ch in "[]":
            depth += 1 if ch == "[" else -1
        elif depth == 0:
            return False
    return True


def _expand(expr: str, origin: str) -> list[str]:
    """A node-set expression (``gpu[01-16],login1``, ``dummy26[1-100]``, ``r[1-2]n[1-4]``)
    read as Slurm's hostlist reads it (``hostlist``), in its order, each name once; its size
    counted before it is built."""
    if "[" not in expr and "," not in expr:
        return [expr]
    names: dict[str, None] = {}
    for item in _bounded_items(expr, origin):
        if item:  # "a,,b": Slurm skips the empty item
            names.update(dict.fromkeys(_item_names(item, expr, origin)))
    if len(names) > _MAX_HOSTS:
        raise InputError(
            f"{origin}: node set {shown(expr)} names {len(names)} hosts (max {_MAX_HOSTS})"
        )
    return list(names)


def _bounded_items(expr: str, origin: str) -> list[str]:
    """The items of ``expr`` once its length, characters, bracket groups and the number of
    names it plans are within bounds."""
    if len(expr) > MAX_EXPR:
        raise InputError(f"{origin}: a node set longer than {MAX_EXPR} characters")
    if not _EXPR.match(expr) or not _brackets_only(expr, "/"):
        raise InputError(f"{origin}: bad node set {shown(expr)}")
    items = top_level(expr)
    if max(item.count("[") for item in items) > _MAX_GROUPS:
        raise InputError(
            f"{origin}: node set {shown(expr)}: more than {_MAX_GROUPS} bracket groups"
        )
    try:
        planned = planned_size(expr)
    except ValueError as exc:
        raise InputError(f"{origin}: bad node set {shown(expr)}: {exc}") from None
    if planned > _MAX_HOSTS:
        raise InputError(
            f"{origin}: node set {shown(expr)} names {planned} hosts (max {_MAX_HOSTS})"
        )
    return items


def _item_names(item: str, expr: str, origin: str) -> list[str]:
    """One item's names as Slurm reads it; a step range (ClusterShell's syntax, which Slurm
    lacks) only where ClusterShell reads the same names."""
    try:
        pattern = hostlist.parse(item)
    except ValueError as exc:
        raise InputError(f"{origin}: bad node set {shown(expr)}: {exc}") from None
    names = list(hostlist.expand(pattern))
    if pattern.stepped:
        _same_as_clustershell(item, expr, pattern, names, origin)
    return names


def _same_as_clustershell(
    item: str, expr: str, pattern: hostlist.Pattern, names: list[str], origin: str
) -> None:
    """An InputError unless ClusterShell reads the stepped ``item`` as ``names``: where the
    two readings differ neither is sure, so the item is refused by name."""
    part = "" if item == expr else f": {shown(item, 60)}"
    unsure = f"{origin}: node set {shown(expr)}{part} is read two ways"
    fix = "list the numbers without a step (Slurm's syntax has none)"
    if pattern.digit_beside_a_bracket:  # ClusterShell's count can be 10**k times Slurm's
        raise InputError(
            f"{unsure}: ClusterShell takes a digit beside a bracket into the number, "
            f"Slurm into the name; {fix}"
        )
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    try:
        theirs = set(NodeSet(item))
    except (NodeSetException, ValueError) as exc:
        why = shown(str(exc), 100)
        raise InputError(f"{unsure}: ClusterShell refuses it: {why}; {fix}") from None
    if theirs != set(names):
        raise InputError(
            f"{unsure}: {len(names)} hosts by Slurm's rule, {len(theirs)} by ClusterShell's; {fix}"
        )


def _split_target(token: str, origin: str) -> tuple[str | None, str, int | None]:
    if token.startswith("@"):  # a node group, no user
        return None, token, None
    user, _, rest = token.partition("@") if "@" in token else (None, "", token)
    if user is not None and not _USER.match(user):
        raise InputError(f"{origin}: bad user name {user!r}")
    if rest.startswith("@"):  # user@@group (a group source's ':' is no port)
        return user, rest, None
    port = None
    if rest.count(":") == 1 and "]" not in rest.split(":")[1]:
        rest, _, port_text = rest.partition(":")
        # ASCII digits only: str.isdigit says yes to '²', on which int() raises
        if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
            raise InputError(f"{origin}: bad port {port_text!r}")
        port = int(port_text)
    return user, rest, port


def _slots(words: list[str], origin: str) -> int:
    slots = 1
    for word in words:
        key, sep, value = word.partition("=")
        if key not in ("slots", "max_slots") or not sep or not value.isdigit():
            raise InputError(f"{origin}: unexpected {word!r} (expected 'slots=N')")
        if key == "slots":
            slots = int(value)
    if slots < 1:
        raise InputError(f"{origin}: slots must be at least 1")
    return slots


def parse_line(line: str, origin: str) -> list[Host]:
    """One hosts-file line: ``[user@]host-or-nodeset[:port] [slots=N]``; comments stripped."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return []
    words = text.split()
    pieces = hostlist.top_level(words[0]) if ":" in words[0] else [words[0]]
    if len(pieces) > 1:  # ``a:2201,b:2202``: each its own [user@]nodeset[:port]
        rest = " ".join(words[1:])
        return [h for piece in pieces for h in parse_line(f"{piece} {rest}", origin)]
    user, expr, port = _split_target(words[0], origin)
    if expr.startswith("@"):
        if not _GROUP.match(expr):
            raise InputError(f"{origin}: bad node group {expr!r}")
        expr = _group(expr, origin)
    names = _expand(check_expr(expr, origin), origin)
    slots = _slots(words[1:], origin)
    return [Host(check_name(n, origin), user, port, slots, origin) for n in names]


def check_expr(expr: str, origin: str) -> str:
    """Reject what is dangerous before any node-set parsing: options, shell and control chars."""
    if "[" in expr or "," in expr:
        if expr.startswith("-") or not _EXPR.match(expr) or not _brackets_only(expr, "/"):
            why = _why_bad(expr.replace("[", "").replace("]", "").replace(",", "")) or "bad syntax"
            raise InputError(f"{origin}: bad host name {shown(expr)}: {why}")
        return expr
    return check_name(expr, origin)


def parse_text(text: str, source: str) -> list[Host]:
    """A whole hosts file (MPI hostfile style); duplicates are an error."""
    hosts: list[Host] = []
    seen: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        origin = f"{source}:{number}"
        for host in parse_line(line, origin):
            if host.label in seen:
                raise InputError(
                    f"{origin}: host {host.label} already listed at {seen[host.label]}"
                )
            seen[host.label] = origin
            hosts.append(host)
    if not hosts:
        raise InputError(f"{source}: no hosts listed")
    return hosts


def resolve(spec: str | None, environ: dict[str, str] | None = None) -> list[Host]:
    """``--hosts`` value → hosts: a file, ``-`` (stdin), a node set, or Slurm's node list."""
    env = os.environ if environ is None else environ
    if spec is None:
        nodelist = env.get("SLURM_JOB_NODELIST")
        if not nodelist:
            raise InputError(
                "no hosts: give --hosts FILE|NODESET|- (or run inside a Slurm "
                "allocation, which sets SLURM_JOB_NODELIST)"
            )
        return parse_text(nodelist, "SLURM_JOB_NODELIST")
    if spec == STDIN:  # read as every file is (yamlio.read_text: bounded, UTF-8 checked)
        return parse_text(read_text(Path(STDIN), "hosts list", MAX_TEXT), "<stdin>")
    if _node_set_syntax(spec):  # parsed as one, never looked up: too long for a file name
        return parse_text(spec, "--hosts")
    path = Path(spec)
    if _is_file(path):  # a device is refused by read_text, a pipe read (bounded)
        return parse_text(read_text(path, "hosts file", MAX_TEXT), str(path))
    if ("/" in spec and not _brackets_only(spec, "/")) or _file_name(spec):
        raise InputError(f"{shown(spec)}: no such hosts file")  # a path, or a file's name
    return parse_text(spec, "--hosts")


# Endings of a file's name that no host name has (a top-level domain is never one of these):
# ``--hosts hosts-typo.txt`` is a missing file, not a host called that.
FILE_ENDINGS = (".txt", ".hosts", ".list", ".lst", ".cfg", ".conf", ".nodes", ".csv", ".yml",
                ".yaml", ".json", ".ini")  # fmt: skip


def _file_name(spec: str) -> bool:
    return spec.lower().endswith(FILE_ENDINGS)


def _node_set_syntax(spec: str) -> bool:
    """Whether ``--hosts`` is a node set (``gpu[1,3]``, ``a,b``): brackets or commas, and no
    '/' outside brackets (which makes it a path)."""
    return ("[" in spec or "," in spec) and _brackets_only(spec, "/")


def _is_file(path: Path) -> bool:
    """``path`` exists and is not a folder (a file, a pipe, a device: read_text decides);
    False where the name cannot be one (too long, a loop)."""
    try:
        return path.exists() and not path.is_dir()
    except (OSError, ValueError):  # ENAMETOOLONG, ELOOP; a NUL byte
        return False
