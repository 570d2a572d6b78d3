"""Collectives between buffers on several devices of one kind: all_reduce, all_gather, reduce_scatter, broadcast.

Each takes one Buffer per device (distinct devices, rank = position in the list) and writes one Buffer per device, in
rank order, as NCCL defines them on flat arrays (a @jit replay passes Borrowed buffers, runtime/buffer.py: the
handles bound that call):
- all_reduce(ins, outs, op): outs[k] = op over ranks of ins[j] (elementwise), for every k;
- all_gather(ins, outs): outs[k] = ins[0] ++ ins[1] ++ ... (each out N times an input);
- reduce_scatter(ins, outs, op): outs[k] = op over ranks of chunk k of ins[j] (each input N times an output);
- broadcast(src, outs, root): outs[k] = ins[root].
op is "sum", "max" or "min". The devices' kind picks the implementation: CUDA goes through NCCL (cuda/nccl.py),
enqueued on each device's stream after the work queued there (nothing waits on the host); CPU:k devices through a
host implementation (cpu/collective.py) that waits for each input's writer and each output's earlier users. Every
rank gets the same bits. A device kind with neither (METAL) raises NotImplementedError.
"""
from __future__ import annotations
import importlib
from alloy.runtime.buffer import Buffer

OPS = ("sum", "max", "min")
BACKENDS = {"CPU": "alloy.runtime.cpu.collective", "CUDA": "alloy.runtime.cuda.nccl"}

def _backend(what: str, buffers: list[Buffer]):
  kinds = {b.device.partition(":")[0] for b in buffers}
  if len(kinds) != 1:
    raise ValueError(f"{what}: buffers on {sorted({b.device for b in buffers})}: a collective runs between devices of one kind")
  kind = kinds.pop()
  if kind not in BACKENDS: raise NotImplementedError(f"{what}: no collectives on {kind} devices (they exist for {', '.join(BACKENDS)})")
  return importlib.import_module(BACKENDS[kind])

def _check(what: str, ins: list[Buffer], outs: list[Buffer], in_per_out: float, op: str | None = None):
  if op is not None and op not in OPS: raise ValueError(f"{what}: op {op!r}; choose one of {', '.join(OPS)}")
  if not ins or len(ins) != len(outs): raise ValueError(f"{what}: {len(ins)} inputs and {len(outs)} outputs; give one of each per device")
  devices = [b.device for b in outs]
  if len(set(devices)) != len(devices): raise ValueError(f"{what}: a device appears twice among {devices}")
  for k, (i, o) in enumerate(zip(ins, outs)):
    if i.device != o.device: raise ValueError(f"{what}: rank {k}'s input is on {i.device}, its output on {o.device}")
    if i.dtype is not ins[0].dtype or o.dtype is not ins[0].dtype:
      raise ValueError(f"{what}: every buffer must have one dtype; rank {k} has {i.dtype.name} -> {o.dtype.name}, rank 0 {ins[0].dtype.name}")
    if i.size != ins[0].size or i.size != o.size * in_per_out:
      raise ValueError(f"{what}: rank {k} has {i.size} input and {o.size} output elements; expected inputs of {ins[0].size} and "
                       f"outputs of {ins[0].size / in_per_out:g} elements")
  return _backend(what, ins + outs)

def all_reduce(ins: list[Buffer], outs: list[Buffer], op: str = "sum") -> None:
  _check("all_reduce", ins, outs, 1, op).all_reduce(ins, outs, op)

def all_gather(ins: list[Buffer], outs: list[Buffer]) -> None:
  _check("all_gather", ins, outs, 1 / len(ins) if ins else 1).all_gather(ins, outs)

def reduce_scatter(ins: list[Buffer], outs: list[Buffer], op: str = "sum") -> None:
  _check("reduce_scatter", ins, outs, len(ins), op).reduce_scatter(ins, outs, op)

def broadcast(ins: list[Buffer], outs: list[Buffer], root: int = 0) -> None:
  """outs[k] = ins[root]; only ins[root] is read (the others may be any buffers of the right size, or the outputs)."""
  if not 0 <= root < len(outs): raise ValueError(f"broadcast: root {root} is not a rank of {len(outs)}")
  _check("broadcast", ins, outs, 1).broadcast(ins, outs, root)
