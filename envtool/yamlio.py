"""YAML in and out, keeping the line of every mapping key and list item for error messages."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from envtool.errors import InputError

try:
    _Loader: type[Any] = yaml.CSafeLoader
    _Dumper: type[Any] = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader
    _Dumper = yaml.SafeDumper


class LineDict(dict[Any, Any]):
    """A mapping that remembers its own line and each key's line (1-based)."""

    line: int = 0
    key_lines: dict[Any, int]


class LineList(list[Any]):
    """A list that remembers its own line and each item's line (1-based)."""

    line: int = 0
    item_lines: list[int]


def line_of(container: object, key: object = None) -> int:
    """The line of ``container[key]`` (or of the container when key is None), 0 if unknown."""
    if key is not None and isinstance(container, LineDict):
        return container.key_lines.get(key, container.line)
    if isinstance(key, int) and isinstance(container, LineList) and key < len(container.item_lines):
        return container.item_lines[key]
    return getattr(container, "line", 0)


MAX_NODES = 500_000  # values in a document, each alias counted as used (a 460 KB lock: 33,000)
MAX_DEPTH = 64  # nesting
MAX_TEXT = 64 * 2**20  # bytes in any file envtool reads


class _TooBig(Exception):
    def __init__(self, why: str, node: yaml.Node) -> None:
        super().__init__(why)
        self.why, self.node = why, node


class _Budget:
    """How many more values a document may build (a YAML alias bomb stops here)."""

    def __init__(self) -> None:
        self.left = MAX_NODES

    def spend(self, node: yaml.Node, depth: int) -> None:
        self.left -= 1
        if self.left < 0:
            why = f"more than {MAX_NODES} values once its aliases are expanded"
            raise _TooBig(why, node)
        if depth > MAX_DEPTH:
            raise _TooBig(f"nested deeper than {MAX_DEPTH} levels", node)


def _build(node: yaml.Node, constructor: Any, budget: _Budget, depth: int = 0) -> Any:
    budget.spend(node, depth)
    if isinstance(node, yaml.MappingNode):
        out = LineDict()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = _build(key_node, constructor, budget, depth + 1)
            if isinstance(key, (dict, list)):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a scalar", key_node.start_mark
                )
            out[key] = _build(value_node, constructor, budget, depth + 1)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LineList(_build(item, constructor, budget, depth + 1) for item in node.value)
        seq.line = node.start_mark.line + 1
        seq.item_lines = [item.start_mark.line + 1 for item in node.value]
        return seq
    try:
        return constructor.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:  # a 5000-digit int, a date 2024-13-01
        raise yaml.constructor.ConstructorError(
            None, None, _unreadable(node, exc), node.start_mark
        ) from None


def _unreadable(node: yaml.Node, exc: Exception) -> str:
    """Why a scalar could not be made a value (Python's own words name its limits)."""
    if node.tag.endswith(":int"):
        return f"a whole number of {len(str(node.value))} characters, too long to read"
    return f"{str(node.value)[:40]!r} cannot be read as {node.tag.rpartition(':')[2]}: {exc}"


def loads(text: str, path: object) -> Any:
    """Parse one YAML document; a syntax error becomes an InputError naming ``path:line``."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        return None if node is None else _build(node, loader, _Budget())
    except _TooBig as exc:
        raise InputError(f"{path}:{exc.node.start_mark.line + 1}: YAML {exc.why}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        problem = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"{path}:{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    finally:
        loader.dispose()


STDIN = "-"


def _readable(fd: int, path: Path, what: str, limit: int) -> None:
    """A regular file over ``limit`` is refused by its size, a device (``/dev/zero``, a disk)
    at once: nothing is read. Pipes (``<(cmd)``) are read, bounded."""
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise InputError(f"{path}: {what} is larger than {limit} bytes")
    if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
        raise InputError(f"{path}: {what} is a device, not a file")


def read_text(path: Path, what: str, limit: int = MAX_TEXT) -> str:
    """Read a UTF-8 text file of at most ``limit`` bytes (counted while reading, so a device
    or a pipe cannot feed it forever); anything else is an InputError naming the file.
    ``-`` is standard input, wherever a file is read (``./-`` is a file of that name)."""
    try:
        if str(path) == STDIN:
            stream = getattr(sys.stdin, "buffer", None)  # a text stdin (embedding, tests) too
            data = stream.read(limit + 1) if stream else sys.stdin.read(limit + 1).encode()
            path = Path("<stdin>")
        else:
            with path.open("rb") as fh:
                _readable(fh.fileno(), path, what, limit)
                data = fh.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"{path}: {what} is larger than {limit} bytes")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: {what} is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror}") from None


def load_file(path: Path, what: str) -> Any:
    """Read and parse a YAML file."""
    return loads(read_text(path, what), path)


def dumps(data: Any) -> str:
    """Block-style YAML in the order given (how conda-lock writes its files)."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000
    )
    return text


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file and a rename: never a partial file."""
    write_atomic_bytes(path, text.encode("utf-8"))


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` through a uniquely named temp file beside ``path`` and a rename (never
    a partial file; two writers never share a temp name); a symlink at ``path`` is replaced,
    not followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        mode = path.lstat().st_mode & 0o777 if path.is_file() and not path.is_symlink() else 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
