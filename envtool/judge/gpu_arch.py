"""Which device capabilities a torch build has kernels for (pure).

``torch.cuda.get_arch_list()`` lists the build's cubins (``sm_XY``) and the PTX it carries
(``compute_XY``). A cubin for X.Y runs on capability X.Z with Z >= Y only (binary
compatibility holds within one major, never across: CUDA C++ Programming Guide, "Binary
Compatibility"); an arch-specific cubin (``sm_90a``) runs on X.Y exactly; PTX for X.Y is
compiled by the driver for any capability >= X.Y ("PTX Compatibility"). Nothing else runs:
"no kernel image is available for execution on the device" at the first kernel.
"""

from __future__ import annotations

import re

_ARCH = re.compile(r"(sm|compute)_(\d+)([af]?)")


def capability(text: str) -> tuple[int, int] | None:
    """``"9.0"`` → (9, 0); None when it is not MAJOR.MINOR."""
    major, dot, minor = text.partition(".")
    return (int(major), int(minor)) if dot and major.isdigit() and minor.isdigit() else None


def _arch(entry: str) -> tuple[str, tuple[int, int], str] | None:
    m = _ARCH.fullmatch(entry)
    if m is None:
        return None
    number = int(m.group(2))
    return m.group(1), (number // 10, number % 10), m.group(3)


def cuda_arches(arch_list: tuple[str, ...]) -> tuple[str, ...]:
    """The CUDA entries of an arch list (a ROCm build's ``gfx90a`` is none of them)."""
    return tuple(a for a in arch_list if _arch(a) is not None)


def covers(arch_list: tuple[str, ...], cap: tuple[int, int]) -> bool:
    """Whether a build with ``arch_list`` has a kernel image for capability ``cap``."""
    for entry in arch_list:
        parsed = _arch(entry)
        if parsed is None:
            continue
        kind, (major, minor), suffix = parsed
        if kind == "compute" and not suffix and cap >= (major, minor):
            return True
        if kind == "sm" and suffix == "a" and cap == (major, minor):
            return True
        if kind == "sm" and suffix != "a" and cap[0] == major and cap[1] >= minor:
            return True
    return False
