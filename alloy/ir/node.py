"""Lazy graph nodes: immutable and hash-consed, so equal subgraphs are one object."""
from __future__ import annotations
import itertools, weakref
from alloy.dtype import DType
from alloy.helpers import SweepAt, remember, toposort
from alloy.ir.ops import Op
from alloy.ir.view import ShapeTracker

# key -> weak reference to the live node with that key. A plain dict without death callbacks: a callback per
# node costs a Python call at every death, and graph building makes and drops a few nodes per op. Dead entries
# are swept when the table has doubled since the last sweep, so its size stays within twice the live nodes.
_table: dict = {}
_BUFFER, _CONST, _VIEW = Op.BUFFER, Op.CONST, Op.VIEW
_sweeps = SweepAt()

def _sweep() -> None:
  global _table
  _table = {k: r for k, r in _table.items() if r() is not None}
  _sweeps.swept(len(_table))

# (op, arg, dtype, shape, number of sources) -> an int naming it, a buffer's identity left out: the schedule cache
# keys graphs by these (a tuple of ints hashes and compares fast). Numbers are never reused, so dropping the table
# when it grows large costs cache misses, never a false match.
_signatures: dict = {}
_numbers = itertools.count()

def _signature(n: "Node") -> int:
  key = (n.op, None if n.op is _BUFFER else n.key[2], n.dtype, n.shape, len(n.src))
  if (sig := _signatures.get(key)) is None:
    if len(_signatures) >= 1 << 20: _signatures.clear()
    sig = _signatures[key] = next(_numbers)
  n.sig = sig
  return sig

_ANY_VALUE = object()   # in place of a constant's value: see constant_signature

def constant_signature(n: "Node", with_value: bool) -> int:
  """A constant's signature, or (with_value False) an int equal for constants of equal dtype and shape whatever
  their values, never equal to a signature: how the schedule cache keys a constant its kernel takes as an argument.
  Not kept on the node: the schedule keeps what it uses in n.sig."""
  key = (_CONST, n.key[2] if with_value else _ANY_VALUE, n.dtype, n.shape, 0)
  if (sig := _signatures.get(key)) is None:
    if len(_signatures) >= 1 << 20: _signatures.clear()
    sig = _signatures[key] = next(_numbers)
  return sig

class Node:
  __slots__ = ("op", "src", "arg", "dtype", "shape", "key", "sig", "structure", "__weakref__")

  def __new__(cls, op: Op, src: tuple = (), arg=None, dtype: DType = None, shape: tuple = ()):
    # Keys hold the ids of live sources (a node keeps its sources alive), so a stale entry's reference is dead.
    if not src:   # a source: a constant's key keeps -0.0 apart from 0.0 (equal as floats), repr only where that matters
      ids = ()
      akey = id(arg) if op is _BUFFER else ((repr(arg) if arg == 0 or arg != arg else arg), type(arg)) if op is _CONST else arg
    else:   # the ids of the sources spelled out for the usual one or two: tuple(map(id, src)) costs 4x as much
      ids = (id(src[0]),) if len(src) == 1 else (id(src[0]), id(src[1])) if len(src) == 2 else tuple([id(s) for s in src])
      akey = arg
    key = (op, ids, akey, dtype, shape)
    if (ref := _table.get(key)) is not None and (hit := ref()) is not None: return hit
    self = object.__new__(cls)
    self.op, self.src, self.arg, self.dtype, self.shape, self.key = op, src, arg, dtype, shape, key
    self.sig = None        # its signature (see _signature), made when a schedule first asks; a constant's is the
                           # schedule's (value-free where its kernels take it as an argument: see schedule/fusion.py)
    self.structure = None  # the schedule's name for its graph's structure, made when the eager path first asks (fusion.structure_of)
    if len(_table) >= _sweeps.at: _sweep()
    _table[key] = weakref.ref(self)
    return self

  @property
  def signature(self) -> int:
    """An int equal for nodes of equal op, arg, dtype, shape and source count (buffers: any buffer of that size)."""
    return self.sig if self.sig is not None else _signature(self)

  def __repr__(self):
    return f"Node({self.op.name}, {self.dtype.name}, {self.shape}{', ' + str(self.arg) if self.op not in (Op.BUFFER, Op.VIEW) else ''})"

  def toposort(self) -> list["Node"]: return toposort(self, lambda n: reversed(n.src))

def views_a_buffer(n: Node) -> bool:
  """Whether n reads a buffer through a view (any layout): a computed value."""
  return n.op is Op.VIEW and n.src[0].op is Op.BUFFER

# (a VIEW's tracker or another node's shape, method, args) -> (the tracker moved, its shape, whether it shows no
# padding, whether it is contiguous over a base of its shape): graph building moves the same trackers the same ways again and again
_moves: dict = {}

def _move(st: ShapeTracker, method: str, args: tuple) -> tuple:
  st = getattr(st, method)(*args)
  return st, st.shape, method != "pad" and all(v.mask is None for v in st.views), st.is_contiguous

def moved(n: Node, method: str, *args) -> Node:
  """n through a movement op (a ShapeTracker method: reshape, permute, ...): one VIEW over n's base (a view of a view
  composes), a constant of the new shape where no padding shows, or the base itself where the view is a no-op."""
  view = n.op is _VIEW
  base = n.src[0] if view else n
  try:
    if (hit := _moves.get(key := (n.arg if view else n.shape, method, args))) is None:
      hit = remember(_moves, key, _move(n.arg if view else ShapeTracker.contiguous(n.shape), method, args))
  except TypeError: hit = _move(n.arg if view else ShapeTracker.contiguous(n.shape), method, args)   # a list argument: no cache
  st, shape, unpadded, contiguous = hit
  if base.op is _CONST and unpadded: return Node(_CONST, (), base.arg, n.dtype, shape)   # stays one node (a padded constant is not one value)
  if contiguous and shape == base.shape and base.op is not _BUFFER: return base
  return Node(_VIEW, (base,), st, n.dtype, shape)
