"""Realizing Tensors: the front end's side of the engine's interface. The engine (engine/realize.py) takes nodes with
their device and hands back the nodes holding their values (views of buffers); here each tensor is rebound to its
answer. The tensors changed in place since the last realize (assign.py tells realize_later) are kept here too, and
computed along with the next realize, so a loop of in-place updates (a training loop reading only its loss) starts
each step from computed values."""
from __future__ import annotations
import weakref
from alloy.ir.node import views_a_buffer
from alloy.runtime.buffer import Buffer
from alloy.runtime.transfer import copy_buffer
from alloy.engine import realize as engine
from alloy.engine.watch import watchers

_pending: dict = {}   # id -> weak reference of each tensor changed in place, not yet computed

def realize_later(t) -> None:
  """Compute t (weakly held) along with the next realize."""
  _pending[id(t)] = weakref.ref(t)

def _take_pending() -> list:
  # a view of a buffer is computed already (an optimizer's parameters are slices of its update's vector): realizing it
  # would copy it
  out = [t for t in (ref() for ref in _pending.values()) if t is not None and not views_a_buffer(t.node)]
  _pending.clear()
  return out

def realize(tensors) -> None:
  """Compute the tensors, each device's together, and rebind each one to the node holding its value."""
  if _pending: tensors = list(tensors) + _take_pending()
  if len(tensors) == 1:
    t = tensors[0]
    t.node = engine.realize_one(t.node, t.device)
    return
  for t, n in zip(tensors, engine.realize_nodes([(t.node, t.device) for t in tensors])): t.node = n

def buffer_of(t, share: bool = False, host: bool = True) -> Buffer:
  """The contiguous buffer holding exactly t's elements, realizing (and copying) as needed: to read on the host or
  copy to another device. t takes its computed value but keeps its layout: a view of part of a buffer (an optimizer's
  parameter, a slice of its update's vector) is copied for the read alone, so a @jit replay binding t finds the layout
  it captured. share: t takes the copy too (DLPack hands out t's own buffer, the same one on every export). host=False:
  the caller's own work reads it and tells the watchers so (a collective, copy_to: a @jit capture replays it), not a host read."""
  if host and watchers.on_host_read: watchers.host_read(t)
  if _pending: realize([t])
  if not views_a_buffer(t.node): t.node = engine.realize_one(t.node, t.device)
  n = engine.stored(t.node, t.device)
  if share: t.node = n
  return n.src[0].arg

def copy_to(t, device: str) -> Buffer:
  """t's elements in a new buffer on another device (Tensor.to), by copy_buffer (runtime/transfer.py). The copy, not
  the host, reads t: the watchers are told it as a step, which a @jit capture replays in launch order on each call's
  buffers (into the same destination buffer every call, hence reused)."""
  src = buffer_of(t, host=False)
  dst = Buffer(device, src.size, src.dtype)
  copy_buffer(dst, src)
  if watchers.on_step: watchers.stepped(f"copy to {device}", _copy_again, [src, dst], 1)
  return dst

def _copy_again(ins: list, outs: list) -> None: copy_buffer(outs[0], ins[0], reused=True)
