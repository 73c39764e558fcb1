"""The only module that imports ``docker``: build an image from the lock, tag, push."""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from envtool import image_channels, private, proc, wheel_cache
from envtool.cluster import bundle
from envtool.errors import EnvtoolError, InputError
from envtool.lock import lockfile

REPO_URL = "https://github.com/envtool/envtool"


class BuildError(EnvtoolError):
    """``docker build`` failed (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class BuildOptions:
    """What ``envtool build`` was asked to do."""

    lock_path: Path
    tag: str | None = None
    base: str | None = None
    builder: str | None = None
    network: str | None = None
    no_cache: bool = False
    push: bool = False
    env_name: str = "ddp"
    platform: str = "linux-64"
    builder_python: str = "3.11"
    target: str | None = None  # a Dockerfile stage ("builder": the single-stage equivalent)
    install_args: tuple[str, ...] = ()  # more for the builder's envtool install
    extra_labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BuildResult:
    """The image that was built."""

    tag: str
    image_id: str
    seconds: float
    labels: tuple[tuple[str, str], ...]
    pushed: bool


def source_root() -> Path:
    """The folder holding Dockerfile, envtool/ and probes/envtool_node/."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "Dockerfile").is_file():
        raise EnvtoolError(f"{root}: no Dockerfile beside the envtool package")
    return root


def _git_revision(root: Path) -> str:
    try:
        out = proc.run(["git", "-C", str(root), "rev-parse", "HEAD"], timeout=10, check=False)
    except proc.ProcessError:  # no git
        return "unknown"
    return out.stdout.strip() or "unknown"


def labels_for(lock_path: Path, platform: str, root: Path) -> dict[str, str]:
    """OCI annotations plus the lockfile's sha256 and content hash: which lock made the image."""
    data = lockfile.read(lock_path)
    return {
        "org.opencontainers.image.source": REPO_URL,
        "org.opencontainers.image.revision": _git_revision(root),
        "org.opencontainers.image.created": datetime.now(timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "org.opencontainers.image.title": "envtool environment",
        "io.envtool.lockfile.sha256": hashlib.sha256(lock_path.read_bytes()).hexdigest(),
        "io.envtool.lock.content-hash": data.metadata.hash_for(platform) or "",
        "io.envtool.lock.platform": platform,
    }


def default_tag(env_name: str, labels: dict[str, str]) -> str:
    """``envtool/<env-name>:<lock-hash-prefix>``."""
    digest = labels["io.envtool.lock.content-hash"] or labels["io.envtool.lockfile.sha256"]
    return f"envtool/{env_name}:{digest[:12]}"


def _source_digest(root: Path, python: str) -> str:
    digest = hashlib.sha256(python.encode())
    sources = [*(root / "envtool").rglob("*.py"), *(root / "probes" / "envtool_node").glob("*.py")]
    pins = sorted((root / "requirements").glob("*.txt"))
    for path in sorted([root / "pyproject.toml", *pins, *sources]):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _wheels(root: Path, into: Path, python: str) -> None:
    """The wheels, from a cache keyed by envtool's source and the pins: an unchanged tree
    gives identical bytes, so Docker's layer cache holds across builds. The cache is checked
    as a bundle dir is (wheel_cache): the user's, its wheels' sha256 recorded when written."""
    folder = wheel_cache.root() / _source_digest(root, python)
    wheel_cache.filled(folder, lambda tmp: _fetch_wheels(root, tmp, python))
    wheel_cache.copy_checked(folder, into, "/src/wheels")


def _pip_failed(step: str, exc: proc.ProcessError) -> BuildError:
    """One line: pip's hash refusal names the wheel, anything else pip's last line."""
    err = exc.result.stderr if exc.result else ""
    if "DO NOT MATCH THE HASHES" in err:
        lines = [ln.strip() for ln in err.splitlines() if " from " in ln and "==" in ln]
        what = lines[0].split(" (from ")[0] if lines else "a wheel"
        return BuildError(
            f"cannot fetch the wheels for the builder: {what} does not match the sha256 "
            f"pinned in requirements/{step}.txt (refused, nothing installed)"
        )
    return BuildError(f"cannot fetch the wheels for the builder: {exc}")


def _fetch_wheels(root: Path, into: Path, python: str) -> None:
    """envtool's wheel and the wheels of what ``envtool install`` needs, for the builder's
    Python on x86_64, fetched here (the build itself then needs no package index): every
    one pinned with its sha256 in requirements/ (pip --require-hashes), envtool's own wheel
    built by the pinned setuptools only."""
    import sys

    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    fetch = [*pip, "download", "--require-hashes", "--no-deps", "--only-binary=:all:"]
    pins = root / "requirements"
    with private.tempdir("envtool-backend-") as backend:
        try:
            proc.run([*fetch, "--dest", str(backend), "-r", str(pins / "backend.txt")], timeout=600)
        except proc.ProcessError as exc:
            raise _pip_failed("backend", exc) from None
        try:  # no index: the build's isolated environment gets the checked setuptools only
            proc.run(
                [*pip, "wheel", "--no-deps", "--no-index", "--find-links", str(backend),
                 "--wheel-dir", str(into), str(root)],
                timeout=600,
                env={"SOURCE_DATE_EPOCH": "315532800", "PIP_FIND_LINKS": str(backend),
                     "PIP_NO_INDEX": "1"},
            )  # fmt: skip
        except proc.ProcessError as exc:
            raise BuildError(f"cannot build envtool's wheel for the builder: {exc}") from None
    target = ["--python-version", python]
    for platform in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"):
        target += ["--platform", platform]
    try:
        proc.run(
            [*fetch, *target, "--dest", str(into), "-r", str(pins / "builder.txt")], timeout=600
        )
    except proc.ProcessError as exc:
        raise _pip_failed("builder", exc) from None


def _context(options: BuildOptions, root: Path, into: Path) -> tuple[str, ...]:
    """The build context: Dockerfile, the node package, the checked wheels, the lock (and the
    archives behind channel credentials, fetched here); the install arguments it needs."""
    shutil.copy2(root / "Dockerfile", into / "Dockerfile")
    bundle.copy_package(into)  # a private temp dir of ours
    (into / "wheels").mkdir()
    _wheels(root, into / "wheels", options.builder_python)
    insecure = "--allow-insecure-url" in options.install_args
    return image_channels.prepare(options.lock_path, options.platform, into, insecure)


def _client() -> Any:
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as exc:
        raise InputError(
            f"no Docker engine: {str(exc).splitlines()[0]} (set DOCKER_HOST)"
        ) from None
    return client


def _build_args(options: BuildOptions) -> dict[str, str]:
    args = {"ENV_NAME": options.env_name, "PLATFORM": options.platform}
    if options.install_args:
        args["INSTALL_ARGS"] = " ".join(options.install_args)
    if options.base:
        args["BASE_IMAGE"] = options.base
    if options.builder:
        args["BUILDER_IMAGE"] = options.builder
    return args


def _stream(
    client: Any,
    context: Path,
    tag: str,
    options: BuildOptions,
    labels: dict[str, str],
    on_line: Callable[[str], None],
) -> str:
    responses: list[Any] = []  # the build's HTTP response, kept by a requests session hook

    def keep(response: Any, *_args: Any, **_kwargs: Any) -> Any:
        responses.append(response)
        return response

    client.api.hooks["response"].append(keep)
    try:
        chunks = client.api.build(
            path=str(context),
            tag=tag,
            buildargs=_build_args(options),
            labels=labels,
            network_mode=options.network,
            nocache=options.no_cache,
            forcerm=True,
            rm=True,
            decode=True,
            pull=False,
            target=options.target,
        )
        return _consume(chunks, on_line)
    finally:
        client.api.hooks["response"].remove(keep)
        # On Ctrl-C the stream is left mid-build: closing its connection makes dockerd cancel
        # the build (it kills and removes the running step's container; no tag is made).
        for response in responses:
            response.close()


def _consume(chunks: Any, on_line: Callable[[str], None]) -> str:
    """The image id from the build's JSON stream; an error chunk becomes a BuildError."""
    image_id, last = "", ""
    for chunk in chunks:
        if "errorDetail" in chunk or "error" in chunk:
            detail = chunk.get("errorDetail", {}).get("message") or chunk.get("error", "")
            raise BuildError(
                f"docker build failed: {' '.join(str(detail).split())[:400]}"
                + (f" (after: {last[:200]})" if last else "")
            )
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            last = text
            on_line(text)
        aux = chunk.get("aux") or {}
        if "ID" in aux:
            image_id = str(aux["ID"])
    if not image_id:
        raise BuildError("docker build ended without an image id")
    return image_id


def build(options: BuildOptions, on_line: Callable[[str], None]) -> BuildResult:
    """Build (and optionally push) the image of ``options.lock_path``."""
    import docker

    start = time.monotonic()
    root = source_root()
    labels = {**labels_for(options.lock_path, options.platform, root), **options.extra_labels}
    tag = options.tag or default_tag(options.env_name, labels)
    client = _client()
    with private.tempdir("envtool-build-") as tmp:
        more = _context(options, root, tmp)
        if more:
            options = replace(options, install_args=(*options.install_args, *more))
        try:
            image_id = _stream(client, tmp, tag, options, labels, on_line)
        except docker.errors.APIError as exc:
            raise BuildError(f"docker build failed: {exc.explanation or exc}") from None
    if options.push:
        _push(client, tag, on_line)
    return BuildResult(
        tag, image_id, time.monotonic() - start, tuple(sorted(labels.items())), options.push
    )


def push(tag: str, on_line: Callable[[str], None]) -> None:
    """Push a built tag (``build --verify --push``: only once the image passed its check)."""
    _push(_client(), tag, on_line)


def _push(client: Any, tag: str, on_line: Callable[[str], None]) -> None:
    repository, _, version = tag.rpartition(":")
    for chunk in client.api.push(repository, tag=version, stream=True, decode=True):
        if "error" in chunk:
            raise BuildError(f"docker push {tag} failed: {chunk['error']}")
        if chunk.get("status"):
            on_line(str(chunk["status"]))


def inspect_labels(tag: str) -> dict[str, str]:
    """The labels of a local image (what `docker inspect` shows)."""
    import docker

    try:
        image = _client().images.get(tag)
    except docker.errors.ImageNotFound:
        raise InputError(f"no image {tag}") from None
    return dict(image.labels or {})
