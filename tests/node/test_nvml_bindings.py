"""The node's ctypes NVML (probes/envtool_node/nvml.py, nvml_device.py) against NVIDIA's own
Python bindings, nvidia-ml-py (module ``pynvml``, a test dependency only: the node package
never imports it). Every ctypes Structure is compared with pynvml's field by field (names in
order, ctypes types, offsets, sizeof); every constant with pynvml's; every NVML function the
node names must be one pynvml looks up (``_nvmlGetFunctionPointer("nvml...")``), and every call
the node makes (driven through a recording stand-in of the library) must have the argument
count and pointee types of pynvml's own call. The stub tests (test_gpus_nvml.py) check that
the calls run; these check that they are the calls NVIDIA's bindings make."""

from __future__ import annotations

import ast
import ctypes
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO, require

from envtool_node import gpu_device, nvml, nvml_device

NODE = REPO / "probes" / "envtool_node"
# envtool's structure → pynvml's. ProcessInfoV3 (the 535 drivers' nvmlProcessInfo_t with
# usedGpuCcProtectedMemory) is laid out as pynvml's nvmlProcessDetail_v1_t: pynvml's own
# c_nvmlProcessInfo_v3_t is v2's layout, which nvml.processes passes on every other driver.
STRUCTS = {
    nvml.ProcessInfoV2: "c_nvmlProcessInfo_v2_t",
    nvml.ProcessInfoV3: "c_nvmlProcessDetail_v1_t",
    nvml_device.PciInfo: "nvmlPciInfo_t",
    nvml_device.MemoryV1: "c_nvmlMemory_t",
    nvml_device.MemoryV2: "c_nvmlMemory_v2_t",
    nvml_device.FabricInfo: "c_nvmlGpuFabricInfo_t",
    nvml_device.Utilization: "c_nvmlUtilization_t",
}
# Where envtool follows nvml.h and pynvml does not (same offset, same structure size).
HEADER_TYPES = {
    ("FabricInfo", "status"): "nvmlReturn_t is a C enum (int); pynvml binds enums as c_uint",
    ("FabricInfo", "state"): "nvml.h: typedef unsigned char nvmlGpuFabricState_t; pynvml c_uint",
}
# Names the node calls that pynvml reaches another way: nvml.h #defines nvmlInit as
# nvmlInit_v2; pynvml's nvmlInit calls nvmlInitWithFlags(0), the same initialisation.
NOT_IN_PYNVML = {"nvmlInit_v2": "nvmlInitWithFlags"}


@pytest.fixture(scope="module")
def pynvml() -> ModuleType:
    found = importlib.util.find_spec("pynvml") is not None
    require(found, "nvidia-ml-py is not installed (pip install -e '.[test]')")
    return importlib.import_module("pynvml")


def _type(t: Any) -> Any:
    """A ctypes type as something comparable: arrays by element and length."""
    if issubclass(t, ctypes.Array):
        return (_type(t._type_), t._length_)
    if t is ctypes.c_void_p or issubclass(t, ctypes._Pointer):
        return "pointer"
    return t


def _layout(struct: Any) -> list[tuple[str, Any, int]]:
    return [(name, _type(t), getattr(struct, name).offset) for name, t, *_ in struct._fields_]


def test_every_structure_is_laid_out_as_in_pynvml(pynvml: ModuleType) -> None:
    """Field names in order, ctypes types, offsets and sizeof; a structure added to the node
    side without its pynvml counterpart in STRUCTS fails here too."""
    defined = {v for m in (nvml, nvml_device) for v in vars(m).values()
               if isinstance(v, type) and issubclass(v, ctypes.Structure)}  # fmt: skip
    assert defined == set(STRUCTS), "give each new structure its pynvml counterpart"
    for ours, name in STRUCTS.items():
        theirs = getattr(pynvml, name)
        assert ctypes.sizeof(ours) == ctypes.sizeof(theirs), ours.__name__
        assert ctypes.alignment(ours) == ctypes.alignment(theirs), ours.__name__
        mine, other = _layout(ours), _layout(theirs)
        assert [(n, o) for n, _, o in mine] == [(n, o) for n, _, o in other], ours.__name__
        for (field, t, _), (_, u, _) in zip(mine, other, strict=True):
            if (ours.__name__, field) in HEADER_TYPES:
                assert t != u  # still a deliberate difference: else drop it from the list
            else:
                assert t == u, (ours.__name__, field)


def test_the_header_types_are_nvml_h_s(pynvml: ModuleType) -> None:
    fabric = dict((n, t) for n, t, *_ in nvml_device.FabricInfo._fields_)
    assert fabric["state"] is ctypes.c_ubyte and fabric["status"] is ctypes.c_int
    assert pynvml.c_nvmlGpuFabricInfo_t.state.offset == nvml_device.FabricInfo.state.offset


def _camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def test_every_constant_is_pynvml_s(pynvml: ModuleType) -> None:
    assert nvml.INSUFFICIENT_SIZE == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value == nvml.NOT_AVAILABLE
    assert nvml.DRIVER_BUFFER == pynvml.NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
    assert nvml_device.TEXT_BUFFER == pynvml.NVML_DEVICE_NAME_V2_BUFFER_SIZE
    assert nvml_device.TEXT_BUFFER == pynvml.NVML_DEVICE_UUID_V2_BUFFER_SIZE
    assert nvml_device.UNCORRECTED == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert nvml_device.VOLATILE == pynvml.NVML_VOLATILE_ECC
    assert nvml_device.AGGREGATE == pynvml.NVML_AGGREGATE_ECC
    assert nvml_device.ENABLED == pynvml.NVML_FEATURE_ENABLED == pynvml.NVML_DEVICE_MIG_ENABLE
    assert nvml_device.NVLINK_MAX_LINKS == pynvml.NVML_NVLINK_MAX_LINKS
    assert pynvml.nvmlMemory_v2 == nvml_device.MEMORY_V2
    for code, state in enumerate(nvml_device.FABRIC_STATES):
        name = "NVML_GPU_FABRIC_STATE_" + state.upper().replace(" ", "_")
        assert getattr(pynvml, name) == code, name
    assert nvml_device.FABRIC_NOT_SUPPORTED == pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
    assert nvml_device.FABRIC_COMPLETED == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
    for code, mode in enumerate(gpu_device.COMPUTE_MODES):
        assert getattr(pynvml, "NVML_COMPUTEMODE_" + mode.upper()) == code, mode
    for name, bit in gpu_device.CLOCK_EVENTS:  # the same bits under either name
        assert getattr(pynvml, "nvmlClocksEventReason" + _camel(name)) == bit, name
        assert getattr(pynvml, "nvmlClocksThrottleReason" + _camel(name)) == bit, name


def _pynvml_calls(pynvml: ModuleType) -> dict[str, list[list[Any]]]:
    """Each function pynvml looks up → the argument shapes of each call it makes of it: a
    ctypes type (``byref(x)`` or ``c_uint(...)``, x assigned a ctypes type's instance in the
    same def: every type it is assigned), "null" (None), or "any"."""
    calls: dict[str, list[list[Any]]] = {}
    for fdef in ast.walk(ast.parse(Path(pynvml.__file__).read_text())):
        if not isinstance(fdef, ast.FunctionDef):
            continue
        pointers: dict[str, set[str]] = {}
        made: dict[str, set[Any]] = {}
        for node in ast.walk(fdef):
            if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
                continue
            value, var = node.value, node.targets[0].id
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                if value.func.id == "_nvmlGetFunctionPointer":
                    pointers.setdefault(var, set()).add(ast.literal_eval(value.args[0]))
                elif isinstance(getattr(pynvml, value.func.id, None), type):
                    made.setdefault(var, set()).add(getattr(pynvml, value.func.id))
        for node in ast.walk(fdef):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                for name in pointers.get(node.func.id, ()):
                    calls.setdefault(name, []).append([_shape(a, made, pynvml) for a in node.args])
    return calls


def _shape(arg: ast.expr, made: dict[str, set[Any]], pynvml: ModuleType) -> Any:
    if isinstance(arg, ast.Constant) and arg.value is None:
        return "null"
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name):
        if arg.func.id == "byref" and isinstance(arg.args[0], ast.Name):
            return ("byref", frozenset(_type(t) for t in made.get(arg.args[0].id, ())))
        made_here = getattr(pynvml, arg.func.id, None)
        if isinstance(made_here, type) and issubclass(made_here, ctypes._SimpleCData):
            return ("value", frozenset({made_here}))
    return "any"


def _fits(recorded: list[Any], shapes: list[Any]) -> bool:
    if len(recorded) != len(shapes):
        return False
    for (kind, ours), theirs in zip(recorded, shapes, strict=True):
        if theirs == "null" and kind != "null":
            return False
        typed = isinstance(theirs, tuple) and theirs[1]
        if typed and (kind != theirs[0] or ours not in theirs[1]):
            return False
    return True


class _Function:
    """One function of the recording library: its calls kept, a scripted answer returned."""

    def __init__(self, lib: _Library, name: str) -> None:
        self.lib, self.name, self.restype = lib, name, None

    def __call__(self, *args: Any) -> Any:
        lib = self.lib
        lib.calls.append((self.name, [lib.shape(a) for a in args]))
        if self.name == "nvmlErrorString":
            return b"Not Supported"
        if self.name in lib.failing:
            return lib.pynvml.NVML_ERROR_NOT_SUPPORTED
        if self.name == "nvmlDeviceGetCount_v2":
            args[0]._obj.value = 1
        if self.name.startswith("nvmlDeviceGetComputeRunningProcesses"):
            args[1]._obj.value = 1  # one process: first the count, then its entry
            if args[2] is None:
                return lib.pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        if self.name == "nvmlDeviceGetNvLinkState" and args[1].value > 0:
            return lib.pynvml.NVML_ERROR_INVALID_ARGUMENT  # past the device's last link
        return lib.pynvml.NVML_SUCCESS


class _Library:
    """A libnvidia-ml whose every function exists (but ``missing``) and records its calls,
    each argument as a shape: our structures named by pynvml's."""

    def __init__(self, pynvml: ModuleType, missing: set[str], failing: set[str]) -> None:
        self.pynvml, self.missing, self.failing = pynvml, missing, failing
        self.calls: list[tuple[str, list[Any]]] = []

    def __getattr__(self, name: str) -> _Function:
        if not name.startswith("nvml") or name in self.missing:
            raise AttributeError(name)
        return _Function(self, name)

    def shape(self, arg: Any) -> tuple[str, Any]:
        if arg is None:
            return ("null", None)
        if type(arg).__name__ == "CArgObject":
            ours = type(arg._obj)
            return (
                "byref",
                getattr(self.pynvml, STRUCTS[ours]) if ours in STRUCTS else _type(ours),
            )
        return ("value", type(arg))


def _names_in(path: Path) -> set[str]:
    """The NVML function names a source file spells out."""
    texts = (n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant))
    return {s for s in texts if isinstance(s, str) and s[:4] == "nvml" and s.isidentifier()}


def test_every_call_is_one_pynvml_makes(
    pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node's whole read (nvml.body: init, driver, count, handle, every field, the
    processes, shutdown), run three times against a recording library: everything there,
    then the older drivers' fallbacks (no _v3 processes, no memory _v2, no clock events),
    then the 535 drivers' process layout. Each call's name is one pynvml looks up, with the
    argument count and pointee types of one of pynvml's calls of it."""
    names = _names_in(NODE / "nvml.py") | _names_in(NODE / "nvml_device.py")
    shapes = _pynvml_calls(pynvml)
    looked_up = set(shapes)
    assert names - looked_up == set(NOT_IN_PYNVML)
    assert set(NOT_IN_PYNVML.values()) <= looked_up
    calls = _drive(pynvml, monkeypatch)
    # asked with hasattr only (which process layout the driver fills), never called
    asked = {"nvmlDeviceGetConfComputeMemSizeInfo", "nvmlDeviceGetRunningProcessDetailList"}
    assert {name for name, _ in calls} == names - asked
    for name, recorded in calls:
        if name in NOT_IN_PYNVML:
            assert recorded == []  # nvmlInit_v2(void): nvmlInitWithFlags(0) without its flags
            continue
        assert any(_fits(recorded, s) for s in shapes[name]), (name, recorded, shapes[name])


def _drive(pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any]]]:
    runs = (
        (set(), set()),
        ({"nvmlDeviceGetComputeRunningProcesses_v3"},
         {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetCurrentClocksEventReasons"}),
        ({"nvmlDeviceGetRunningProcessDetailList"}, set()),
    )  # fmt: skip
    calls: list[tuple[str, list[Any]]] = []
    for missing, failing in runs:
        lib = _Library(pynvml, missing, failing)
        monkeypatch.setattr(nvml.ctypes, "CDLL", lambda _path, lib=lib: lib)
        answer = nvml.body("libnvidia-ml.so.1")
        monkeypatch.undo()
        assert answer["why"] is None and len(answer["devices"]) == 1, answer
        assert len(answer["processes"]) == 1
        calls += lib.calls
    return calls
