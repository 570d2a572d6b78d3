"""Lazy graph nodes: immutable and hash-consed, so equal subgraphs are one object."""
from __future__ import annotations
import weakref
from alloy.dtype import DType
from alloy.ir.ops import Op

class Node:
  __slots__ = ("op", "src", "arg", "dtype", "shape", "key", "__weakref__")
  _table: "weakref.WeakValueDictionary[tuple, Node]" = weakref.WeakValueDictionary()

  def __new__(cls, op: Op, src: tuple = (), arg=None, dtype: DType = None, shape: tuple = ()):
    akey = id(arg) if op is Op.BUFFER else (repr(arg), type(arg)) if op is Op.CONST else arg
    key = (op, tuple(id(s) for s in src), akey, dtype, shape)
    if (hit := Node._table.get(key)) is not None: return hit
    self = super().__new__(cls)
    self.op, self.src, self.arg, self.dtype, self.shape, self.key = op, src, arg, dtype, shape, key
    Node._table[key] = self
    return self

  def __repr__(self):
    return f"Node({self.op.name}, {self.dtype.name}, {self.shape}{', ' + str(self.arg) if self.op not in (Op.BUFFER, Op.VIEW) else ''})"

  def toposort(self) -> list["Node"]:
    seen, order = set(), []
    stack = [(self, False)]
    while stack:
      n, done = stack.pop()
      if done: order.append(n); continue
      if id(n) in seen: continue
      seen.add(id(n))
      stack.append((n, True))
      stack.extend((s, False) for s in reversed(n.src))
    return order
