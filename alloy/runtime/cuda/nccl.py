"""Collectives between CUDA:k devices through NCCL (see runtime/collective.py for what each computes), by ctypes.

The library: $ALLOY_NCCL (a path to libnccl.so.2) if set, else the `nvidia-nccl-cu13` (or -cu12) wheel's
nvidia/nccl/lib/libnccl.so.2 on sys.path, else the one next to torch's libraries, else the system's. One process drives
every GPU, so the communicators come from ncclCommInitAll (one per set of devices, kept) and each collective issues
one call per rank inside ncclGroupStart/ncclGroupEnd (a single thread calling ranks one by one without a group would
deadlock). Each rank's call is enqueued on its device's stream, the one alloy's kernels and copies run on, so it starts
after the work queued before it and nothing waits on the host; the outputs then carry an event recorded after it
(CUDADevice.mark_written), which host reads and the encoder's books wait on. A communicator of one rank is legal, so a
single GPU exercises this binding and its stream ordering.
"""
from __future__ import annotations
import ctypes, ctypes.util, functools, os, sys
from pathlib import Path
from alloy import dtype as dt
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device

# ncclDataType_t and ncclRedOp_t (nccl.h)
NCCL_DTYPES = {dt.int8: 0, dt.uint8: 1, dt.bool_: 1, dt.int32: 2, dt.uint32: 3, dt.int64: 4, dt.uint64: 5, dt.float16: 6,
               dt.float32: 7, dt.float64: 8, dt.bfloat16: 9}
NCCL_OPS = {"sum": 0, "max": 2, "min": 3}

class NCCLError(RuntimeError):
  """An NCCL call failed; the message names the call and NCCL's reason."""

def candidates() -> list[str]:
  """Where libnccl.so.2 may be, in the order they are tried (the last, a bare name, is the system loader's find)."""
  found = [p for p in (os.environ.get("ALLOY_NCCL"),) if p]
  for entry in sys.path:
    found += [str(Path(entry) / "nvidia" / "nccl" / "lib" / "libnccl.so.2"), str(Path(entry) / "torch" / "lib" / "libnccl.so.2")]
    found += sorted(str(p) for p in Path(entry).glob("nvidia/nccl*/lib/libnccl.so*"))   # other wheels' layouts
  if (system := ctypes.util.find_library("nccl")): found.append(system)
  return found

@functools.lru_cache(None)
def library() -> ctypes.CDLL:
  """The loaded NCCL, with the signatures used here; raises RuntimeError saying where it looked."""
  tried = candidates()
  path = next((p for p in tried if os.path.isfile(p) or "/" not in p), None)
  if path is None:
    raise RuntimeError("NCCL not found: `pip install nvidia-nccl-cu13` (or set ALLOY_NCCL to libnccl.so.2); looked in "
                       + ", ".join(tried[:4]) + (", ..." if len(tried) > 4 else ""))
  lib = ctypes.CDLL(path)
  vp, sz, i32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
  signatures = {"ncclGetVersion": [ctypes.POINTER(i32)], "ncclCommInitAll": [ctypes.POINTER(vp), i32, ctypes.POINTER(i32)],
                "ncclCommDestroy": [vp], "ncclGroupStart": [], "ncclGroupEnd": [],
                "ncclAllReduce": [vp, vp, sz, i32, i32, vp, vp], "ncclAllGather": [vp, vp, sz, i32, vp, vp],
                "ncclReduceScatter": [vp, vp, sz, i32, i32, vp, vp], "ncclBroadcast": [vp, vp, sz, i32, i32, vp, vp]}
  for name, args in signatures.items():
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = args, i32
  lib.ncclGetErrorString.argtypes, lib.ncclGetErrorString.restype = [i32], ctypes.c_char_p
  lib.path = path
  return lib

def check(result: int, what: str) -> None:
  if result != 0:
    raise NCCLError(f"{what} failed: NCCL error {result} ({library().ncclGetErrorString(result).decode()})")

def version() -> str:
  """NCCL's version, "2.32.3" (needs no GPU)."""
  v = ctypes.c_int()
  check(library().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
  code = v.value
  return f"{code // 10000}.{code // 100 % 100}.{code % 100}" if code >= 10000 else f"{code // 1000}.{code // 100 % 10}.{code % 100}"

_comms: dict[tuple, ctypes.Array] = {}   # device indices in rank order -> their communicators

def communicators(indices: tuple[int, ...]) -> ctypes.Array:
  """One communicator per device of `indices` (rank = position), made once per set by ncclCommInitAll."""
  if (comms := _comms.get(indices)) is None:
    comms = (ctypes.c_void_p * len(indices))()
    check(library().ncclCommInitAll(comms, len(indices), (ctypes.c_int * len(indices))(*indices)), f"ncclCommInitAll({list(indices)})")
    _comms[indices] = comms
  return comms

def _dtype(b: Buffer, what: str) -> int:
  if (code := NCCL_DTYPES.get(b.dtype)) is None: raise TypeError(f"{what}: NCCL has no {b.dtype.name} type")
  return code

def _group(what: str, ins: list[Buffer], outs: list[Buffer], call) -> None:
  """call(lib, rank, input pointer, output pointer, comm, stream) for every rank inside one NCCL group, on each
  device's stream after its queued work; then each output remembers an event recorded after the collective."""
  lib, devices = library(), [get_device(b.device) for b in outs]
  comms = communicators(tuple(d.index for d in devices))
  pointers = [(i.handle, o.handle) for i, o in zip(ins, outs)]   # allocated before the group: cuMemAlloc may not go inside
  for d in devices: d.activate()
  check(lib.ncclGroupStart(), "ncclGroupStart")
  try:
    for rank, (d, (src, dst)) in enumerate(zip(devices, pointers)):
      with d.submitting: check(call(lib, rank, src, dst, comms[rank], int(d.stream)), f"{what} on {d.name}")
  finally: check(lib.ncclGroupEnd(), f"{what}: ncclGroupEnd")
  for d, o in zip(devices, outs):
    d.activate()
    d.mark_written((o.handle,))

def _op(b: Buffer, op: str) -> int:
  return NCCL_OPS["max" if b.dtype is dt.bool_ and op == "sum" else op]   # bools travel as bytes: their sum is an or

def all_reduce(ins: list[Buffer], outs: list[Buffer], op: str) -> None:
  t, n, o = _dtype(ins[0], "all_reduce"), ins[0].size, _op(ins[0], op)
  _group("ncclAllReduce", ins, outs, lambda lib, r, s, d, c, st: lib.ncclAllReduce(s, d, n, t, o, c, st))

def all_gather(ins: list[Buffer], outs: list[Buffer]) -> None:
  t, n = _dtype(ins[0], "all_gather"), ins[0].size
  _group("ncclAllGather", ins, outs, lambda lib, r, s, d, c, st: lib.ncclAllGather(s, d, n, t, c, st))

def reduce_scatter(ins: list[Buffer], outs: list[Buffer], op: str) -> None:
  t, n, o = _dtype(ins[0], "reduce_scatter"), outs[0].size, _op(ins[0], op)
  _group("ncclReduceScatter", ins, outs, lambda lib, r, s, d, c, st: lib.ncclReduceScatter(s, d, n, t, o, c, st))

def broadcast(ins: list[Buffer], outs: list[Buffer], root: int) -> None:
  t, n = _dtype(ins[0], "broadcast"), ins[0].size
  _group("ncclBroadcast", ins, outs, lambda lib, r, s, d, c, st: lib.ncclBroadcast(s, d, n, t, root, c, st))
