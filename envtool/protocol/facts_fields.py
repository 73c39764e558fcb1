"""The facts part of a node's document (envtool.gpu-facts/1: the interpreter, torch, CUDA,
the devices torch sees, what the process really loaded) read strictly into NodeFacts; the one
reader, used by documents.read_node and by this machine's own probe (cluster/local.py)."""

from __future__ import annotations

from typing import Any

from envtool.protocol import gpu_fields, schemas
from envtool.protocol.fields import (
    MAX_INT,
    Malformed,
    count,
    identifier,
    integer,
    listing,
    mapping,
    string,
)
from envtool.protocol.types import Device, Library, NetPlugin, NodeFacts, Runtime

MAX_DEVICES, MAX_ENV, MAX_NOTES = 64, 200, 20
MAX_PATHS, MAX_LIBRARIES, MAX_PLUGINS, PATH_LIMIT = 100, 64, 16, 1000

__all__ = ["read_facts", "read_runtime"]


def _device(item: Any) -> Device:
    doc = mapping(item, "a device entry")
    memory = doc.get("total_memory")
    sane = isinstance(memory, int) and not isinstance(memory, bool) and 0 <= memory <= MAX_INT
    return Device(
        integer(doc, "index"),
        string(doc, "name") or "",
        string(doc, "capability") or "",
        memory if sane and isinstance(memory, int) else 0,
        string(doc, "uuid") or "",
        doc["bf16"] if isinstance(doc.get("bf16"), bool) else None,
    )


def _library(item: Any) -> Library:
    doc = mapping(item, "a library entry")
    return Library(
        string(doc, "kind", 20) or "?",
        string(doc, "path", PATH_LIMIT) or "",
        string(doc, "version", 40),
        string(doc, "linked_from", PATH_LIMIT),
    )


def _plugin(item: Any) -> NetPlugin:
    if isinstance(item, str):  # a node package from before the search said where
        return NetPlugin(item[:PATH_LIMIT])
    doc = mapping(item, "a net plugin entry")
    return NetPlugin(string(doc, "path", PATH_LIMIT) or "", string(doc, "found", 20) or "")


def _paths(value: Any, what: str) -> tuple[str, ...]:
    items = listing(value, what)[:MAX_PATHS]
    if not all(isinstance(p, str) for p in items):
        raise Malformed(f"{what} must be a list of strings")
    return tuple(p[:PATH_LIMIT] for p in items)


def read_runtime(value: Any) -> Runtime | None:
    """The runtime part of the gpu facts (None in a probe from before it)."""
    if value is None:
        return None
    doc = mapping(value, "the runtime")
    torch = mapping(doc.get("torch") or {}, "runtime.torch")
    return Runtime(
        string(doc, "implementation", 40) or "",
        string(doc, "executable", PATH_LIMIT) or "",
        string(doc, "sys_prefix", PATH_LIMIT) or "",
        string(doc, "real_prefix", PATH_LIMIT) or "",
        string(doc, "user_site", PATH_LIMIT),
        _paths(doc.get("path"), "runtime.path"),
        string(torch, "file", PATH_LIMIT),
        string(torch, "real_file", PATH_LIMIT),
        string(torch, "entry", PATH_LIMIT),
        string(torch, "git_version", 80),
        tuple(_library(x) for x in listing(doc.get("libraries"), "libraries")[:MAX_LIBRARIES]),
        tuple(_plugin(x) for x in listing(doc.get("net_plugins"), "net_plugins")[:MAX_PLUGINS]),
    )


def read_facts(value: Any) -> NodeFacts:
    """envtool.gpu-facts/1 → NodeFacts."""
    doc = mapping(value, "the gpu facts")
    if doc.get("schema") != schemas.FACTS:
        raise Malformed(str(doc.get("error") or "not a gpu-facts document")[:300])
    devices = listing(doc.get("devices"), "devices")
    env = mapping(doc.get("env") or {}, "env")
    notes = listing(doc.get("notes"), "notes")
    return NodeFacts(
        hostname=string(doc, "hostname") or "",
        python=string(doc, "python") or "",
        torch=string(doc, "torch"),
        cuda=string(doc, "cuda"),
        cuda_available=doc.get("cuda_available") is True,
        device_count=count(doc, "device_count", 0),
        devices=tuple(_device(d) for d in devices[:MAX_DEVICES]),
        driver=string(doc, "driver"),
        cudnn=string(doc, "cudnn"),
        nccl=string(doc, "nccl"),
        glibc=string(doc, "glibc"),
        env=tuple(sorted((str(k)[:100], str(v)[:4000]) for k, v in list(env.items())[:MAX_ENV])),
        notes=tuple(str(n)[:300] for n in notes[:MAX_NOTES]),
        runtime=read_runtime(doc.get("runtime")),
        machine_id=identifier(doc, "machine_id"),
        boot_id=identifier(doc, "boot_id"),
        arch_list=gpu_fields.read_arch_list(doc.get("arch_list")),
    )
