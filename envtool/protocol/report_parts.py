"""Each host's node parts inside ``envtool.verify/1``: the GPUs, the network, the limits and
the rendezvous in the node's own shapes (each with its schema, read back by the very strict
reader that read it from the node), and the clock offset as ``[offset_s, bound_s]``.

verify_report.py writes a report's dataclass tree as JSON; ``extra`` gives what a part adds to
its dataclass's fields, ``read`` reads one part of a host back (None: absent, an older report).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from envtool.protocol import schemas
from envtool.protocol.fields import Malformed
from envtool.protocol.gpu_fields import SCHEMA as GPUS
from envtool.protocol.gpu_fields import read_gpus
from envtool.protocol.gpu_types import GpuDevice, GpuLayer
from envtool.protocol.limit_fields import read_limits
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_fields import read_network
from envtool.protocol.net_types import Network
from envtool.protocol.rdzv_fields import read_rendezvous
from envtool.protocol.rdzv_types import RendezvousCheck

# each part's type and the schema it carries in the report, as the node sent it
SCHEMAS: tuple[tuple[type, str], ...] = (
    (GpuLayer, GPUS),
    (Network, schemas.NETWORK),
    (Limits, schemas.LIMITS),
    (RendezvousCheck, schemas.RENDEZVOUS),
)
READERS: dict[str, Callable[[Any], Any]] = {
    "gpus": read_gpus,
    "network": read_network,
    "limits": read_limits,
    "rendezvous": read_rendezvous,
}
MAX_OFFSET = 1e9  # seconds: a clock further off than 30 years is no reading


def extra(value: object) -> dict[str, Any]:
    """What ``value``'s JSON object holds beside its fields' values: a part's schema, a GPU's
    unread fields as an object (name → why)."""
    if isinstance(value, GpuDevice):
        return {"unread": dict(value.unread)}
    schema = next((s for kind, s in SCHEMAS if isinstance(value, kind)), None)
    return {} if schema is None else {"schema": schema}


def read(host: dict[str, Any], key: str) -> Any:
    """The host's part ``key`` read strictly (None when absent); Malformed naming the part."""
    value = host.get(key)
    if value is None:
        return None
    try:
        return READERS[key](value)
    except Malformed as exc:
        raise Malformed(f"'{key}': {exc}") from None


def read_offset(host: dict[str, Any]) -> tuple[float, float] | None:
    """``clock_offset``: [offset_s, bound_s] (the node's clock minus the controller's, known
    to ± bound) or None."""
    value = host.get("clock_offset")
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) == 2
    if ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        offset, bound = float(value[0]), float(value[1])
        if math.isfinite(offset) and abs(offset) <= MAX_OFFSET and 0 <= bound <= MAX_OFFSET:
            return offset, bound
    raise Malformed("'clock_offset' must be [offset_s, bound_s] (bound >= 0) or null")
