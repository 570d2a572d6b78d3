"""Collectives between CPU:k devices (see runtime/collective.py for what each computes), on the host.

Each CPU:k device has its own queue, so the inputs are read only once the entries writing them have run
(allocator.readable) and the outputs written only once every entry queued on their device has (the queue books
writers, not readers, and a @jit replay writes the same outputs on every call while the last call's kernels may
still read them): the collective sits in every device's order as a queued launch would. Reductions fold the ranks left to right in the
buffers' dtype (bfloat16, which NumPy lacks, in float32, rounded once at the end), and every rank gets
the same array, so the replicas stay bit-identical. The host waits for the inputs: a CPU collective is a sync point.
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device

_FOLD = {"sum": np.add, "max": np.maximum, "min": np.minimum}

def _read(b: Buffer) -> np.ndarray:
  """b's elements, read in place once the entry writing them has run."""
  return np.frombuffer(get_device(b.device).allocator.readable(b.handle, b.nbytes), dtype=b.dtype.np)

def _write(b: Buffer, values: np.ndarray) -> None:
  allocator = get_device(b.device).allocator
  allocator.wait_readers()   # a replay's earlier readers of b included
  np.frombuffer(allocator.writable(b.handle, b.nbytes), dtype=b.dtype.np)[:] = values

def _reduce(arrays: list[np.ndarray], dtype: dt.DType, op: str) -> np.ndarray:
  fold = _FOLD[op]
  if dtype is dt.bfloat16:   # NumPy has no bfloat16: folded in float32, rounded once
    acc = dt.bfloat16_bits_to_float32(arrays[0])
    for a in arrays[1:]: fold(acc, dt.bfloat16_bits_to_float32(a), out=acc)
    return dt.float32_to_bfloat16_bits(acc)
  acc = arrays[0].copy()
  for a in arrays[1:]: fold(acc, a, out=acc)
  return acc

def all_reduce(ins: list[Buffer], outs: list[Buffer], op: str) -> None:
  total = _reduce([_read(b) for b in ins], ins[0].dtype, op)
  for b in outs: _write(b, total)

def all_gather(ins: list[Buffer], outs: list[Buffer]) -> None:
  whole = np.concatenate([_read(b) for b in ins])
  for b in outs: _write(b, whole)

def reduce_scatter(ins: list[Buffer], outs: list[Buffer], op: str) -> None:
  total = _reduce([_read(b) for b in ins], ins[0].dtype, op)
  n = outs[0].size
  for k, b in enumerate(outs): _write(b, total[k * n:(k + 1) * n])

def broadcast(ins: list[Buffer], outs: list[Buffer], root: int) -> None:
  values = _read(ins[root]).copy()   # a copy: an output may be the root's input
  for b in outs: _write(b, values)
