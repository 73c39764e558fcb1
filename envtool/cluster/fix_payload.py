"""What every node's fix reads on its stdin: one tar, read to its exact size into a private
folder (cluster/remote_fix.py: beside the node's prefix with ``--push``, else in its checked
``$TMPDIR``) and removed however the fix ends.

- ``conda-lock.yml``: the lock, for a node's ``envtool fix --here``;
- ``wanted.json`` and ``explicit.txt``: the lock's packages for the platform, with their
  hashes, and conda's ``@EXPLICIT`` list of them (each URL with its MD5), for a node without
  envtool that fixes its prefix with micromamba, mamba or conda (envtool_node/fixgen.py);
- ``envtool_node/``: the node package that runs it;
- with ``--push``, ``pkgs/``: the lock's packages from the filled cache (lock/pkgcache.py),
  its pip files in ``pkgs/pip/`` (lock/wheelcache.py).

No secret is written into it: a URL that takes a credential from an environment variable
stays out of the explicit list (the lock is sent as it is, with its ``${VAR}`` templates),
and the list's installer is refused for such a lock (it would write the credential into the
prefix's records)."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from envtool import __version__, environments
from envtool.cluster.bundle import PACKAGE, package_dir
from envtool.lock import lockfile, pkgcache, secrets, stamp, wheelcache
from envtool.models import Package


def _packages(
    packages: Sequence[Package], platform: str
) -> tuple[list[dict[str, str]], list[str], bool]:
    wanted, lines, secret = [], ["# platform: " + platform, "@EXPLICIT"], False
    for p in packages:
        wanted.append({"name": p.name, "version": p.version, "build": p.build,
                       "manager": p.manager, "md5": p.md5, "sha256": p.sha256})  # fmt: skip
        if p.manager != "conda":
            continue
        if secrets.used_vars(p.url):
            secret = True
            continue
        lines.append(f"{p.url}#{p.md5}" if p.md5 else p.url)
    return wanted, lines, secret


def write(
    lock_path: Path, platform: str, out: Path, mirrored: bool = False, shared: Path | None = None
) -> int:
    """The tar at ``out`` (with ``shared``: the lock's packages in that filled cache); its
    size in bytes (the node reads no more than that)."""
    packages = environments.from_lock(lockfile.read(lock_path), str(lock_path), platform).packages
    wanted, lines, secret = _packages(packages, platform)
    meta = {"lock_sha256": stamp.lock_hash(lock_path), "lock": lock_path.name,
            "platform": platform, "envtool": __version__,
            "installed": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "credentials": secret, "mirrored": mirrored, "packages": wanted}  # fmt: skip
    parts = {"wanted.json": json.dumps(meta, sort_keys=True).encode(),
             "explicit.txt": ("\n".join(lines) + "\n").encode()}  # fmt: skip
    for path in sorted(package_dir().glob("*.py")):
        parts[f"{PACKAGE}/{path.name}"] = path.read_bytes()
    with tarfile.open(out, "w") as tar:
        tar.add(lock_path, "conda-lock.yml")
        for name, data in parts.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
        if shared is not None:
            entries = [pkgcache.entry(p.name, p.version, p.build) for p in packages
                       if p.manager == "conda"]  # fmt: skip
            pkgcache.add_packages(tar, shared, entries)
            pip = [p for p in packages if p.manager == "pip"]
            for path, name in wheelcache.paths(pip, shared):  # checked by the node's install
                tar.add(path, name)
    return out.stat().st_size
