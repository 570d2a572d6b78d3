"""Which node's value lives in which buffer: one table, owned here, read and written by the engine only.

IR nodes stay immutable: a computed node is entered by identity, with a weak reference whose callback drops the entry
when the node goes, so the buffer view it names (and the buffer) is held exactly as long as the node lives. A later
realize of a tensor whose node was computed (an equal expression elsewhere, a kernel's intermediate result) reads
the buffer instead of computing it again. `forgetting()` (the jit's capture) makes every node computed before count
as not computed, so the capture sees every kernel launched.
"""
from __future__ import annotations
import contextlib, threading, weakref
from alloy.ir.node import Node
from alloy.ir.ops import Op

class Values:
  def __init__(self):
    self.table: dict = {}   # id(node) -> (weak reference to it, generation, view of the buffer holding its value)
    self.generation = self.valid_from = 0
    self.lock = threading.Lock()

  def get(self, n: Node, device: str | None = None) -> Node:
    """The view of the buffer holding n's value if n was computed (on device, where one is named), else n. Nodes are
    shared between devices where nothing in them names one (a graph of constants), so the caller names the device."""
    entry = self.table.get(id(n))
    if entry is None or entry[1] < self.valid_from or entry[0]() is not n: return n
    view = entry[2]
    return view if device is None or (view.src[0].arg if view.op is Op.VIEW else view.arg).device == device else n

  def set(self, n: Node, view: Node) -> None:
    k, table = id(n), self.table
    def gone(ref, k=k):
      if (e := table.get(k)) is not None and e[0] is ref: del table[k]
    table[k] = (weakref.ref(n, gone), self.generation, view)

  def forget(self, n: Node) -> None:
    """n counts as not computed (its buffer is about to hold other values)."""
    self.table.pop(id(n), None)

  def __len__(self) -> int: return len(self.table)

  @contextlib.contextmanager
  def forgetting(self):
    """Inside, nodes computed before count as not computed."""
    with self.lock:
      saved = self.valid_from
      self.generation += 1
      self.valid_from = self.generation
    try: yield
    finally: self.valid_from = saved

values = Values()
