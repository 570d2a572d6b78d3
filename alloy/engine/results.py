"""Result buffers written again once everyone has dropped them: a repeated computation (a @jit replay, or an
eager realize of a small kernel) reuses the buffer and the nodes of a dropped result instead of making new ones."""
from __future__ import annotations
import sys
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.runtime.buffer import Buffer
from alloy.engine.values import values

def _refcounts(objs: tuple) -> list[int]:
  return [sys.getrefcount(o) for o in objs]

_probe = object()
_EXTRA_REFS = _refcounts((_probe,))[0] - 2   # what _refcounts itself adds: here only the module and the tuple hold _probe
del _probe

class Results:
  """The buffers recently made for one output, each with its BUFFER node and the VIEW nodes that Tensors hold:
  entries (buffer, base node, view, ...). A computation writes into an entry again, instead of making a new
  buffer and nodes, once nothing outside this table holds any of its objects: their reference counts are down to
  the table's own (the entry, the base node's hold on the buffer, the views' hold on the base). Whatever could still
  read the old values (a held result, a lazy tensor built on it, a node that remembers it as its value, another view
  of its buffer, a trace's buffer list) holds one of these objects, so held results keep their values and writing
  into a dropped one cannot be seen. The device runs launches in submission order, so work already queued that
  reads the old values runs first."""
  KEEP = 2   # entries kept: `y = f(x)` in a loop still holds the last result while the next call runs

  def __init__(self, size: int, dtype, device: str, layouts: list):
    self.size, self.dtype, self.device, self.layouts = size, dtype, device, layouts
    self.entries: list[tuple] = []
    self.unheld = [2 + _EXTRA_REFS, 1 + len(layouts) + _EXTRA_REFS] + [1 + _EXTRA_REFS] * len(layouts)

  def next(self) -> tuple:
    """An entry to write this call's values into: the most recently used of the dropped ones (its buffer is likely
    still in cache), else a new one."""
    entries = self.entries
    for k in range(len(entries) - 1, -1, -1):
      if _refcounts(entry := entries[k]) == self.unheld:
        if k != len(entries) - 1: entries.append(entries.pop(k))   # most recently used last
        for view in entry[2:]: values.forget(view)   # a copy a strided view was realized into holds the old values
        return entry
    buf = Buffer(self.device, self.size, self.dtype)
    base = Node(Op.BUFFER, (), buf, self.dtype, (self.size,))
    entry = (buf, base, *[Node(Op.VIEW, (base,), st, dtype, shape) for st, dtype, shape in self.layouts])
    entries.append(entry)
    if len(entries) > self.KEEP: entries.pop(0)   # all held by the user: stop watching the oldest
    return entry
