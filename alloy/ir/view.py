"""Views: how a logical shape maps onto a flat buffer (strides, offset, and a mask for padding).

A ShapeTracker is a stack of views; a reshape that no single view can express pushes a new one.
Every movement op is a pure function ShapeTracker -> ShapeTracker and launches nothing.
"""
from __future__ import annotations
from dataclasses import dataclass
import functools
from alloy.helpers import prod, strides_for_shape
from alloy.ir import symbolic as sym

# Views and trackers are interned: one object per distinct value, so identity is equality and hashing them
# (they key every graph node and several caches) costs no Python call.

@dataclass(frozen=True, eq=False)
class View:
  def __reduce__(self): return (View.create, (self.shape, self.strides, self.offset, self.mask))
  shape: tuple[int, ...]
  strides: tuple[int, ...]
  offset: int = 0
  mask: tuple[tuple[int, int], ...] | None = None   # valid [begin, end) per axis; elsewhere the value is 0

  @staticmethod
  @functools.lru_cache(None)
  def create(shape, strides=None, offset=0, mask=None) -> "View":
    shape = tuple(shape)
    strides = strides_for_shape(shape) if strides is None else tuple(0 if s == 1 else st for s, st in zip(shape, strides))
    if mask is not None:
      mask = tuple((max(0, b), min(s, e)) for (b, e), s in zip(mask, shape))
      if any(b >= e for b, e in mask): strides, offset, mask = (0,) * len(shape), 0, tuple((0, 0) for _ in shape)
      elif all(b == 0 and e == s for (b, e), s in zip(mask, shape)): mask = None
    return _interned_view(shape, tuple(strides), offset, mask)

  @property
  def contiguous(self) -> bool:
    if (c := self.__dict__.get("_contiguous")) is None:   # asked on every realize: compute once per view
      c = self.offset == 0 and self.mask is None and self.strides == strides_for_shape(self.shape)
      object.__setattr__(self, "_contiguous", c)
    return c

  def index(self, idxs: list) -> tuple[sym.Expr, sym.Cond]:
    flat, valid = sym.Const(self.offset), sym.Cond()
    for i, (idx, st) in enumerate(zip(idxs, self.strides)):
      if st: flat = flat + idx * st
      if self.mask is not None:
        b, e = self.mask[i]
        valid = valid & sym.in_range(idx, b, e)
    return flat, valid

  def permute(self, order) -> "View":
    return View.create(tuple(self.shape[i] for i in order), tuple(self.strides[i] for i in order), self.offset,
                       tuple(self.mask[i] for i in order) if self.mask else None)

  def expand(self, shape) -> "View":
    mask = None
    if self.mask:
      mask = tuple(m if s == ns else ((0, ns) if m != (0, 0) else (0, 0)) for m, s, ns in zip(self.mask, self.shape, shape))
    return View.create(shape, tuple(st if s == ns else 0 for st, s, ns in zip(self.strides, self.shape, shape)), self.offset, mask)

  def shrink(self, arg) -> "View":
    """Keep [b, e) of each axis."""
    offset = self.offset + sum(b * st for (b, _), st in zip(arg, self.strides))
    mask = tuple((max(0, mb - b), min(me - b, e - b)) for (mb, me), (b, e) in zip(self.mask, arg)) if self.mask else None
    return View.create(tuple(e - b for b, e in arg), self.strides, offset, mask)

  def pad(self, arg) -> "View":
    """Add `before` and `after` zeros around each axis."""
    if all(b == 0 and a == 0 for b, a in arg): return self
    shape = tuple(s + b + a for s, (b, a) in zip(self.shape, arg))
    old = self.mask or tuple((0, s) for s in self.shape)
    mask = tuple((mb + b, me + b) for (mb, me), (b, _) in zip(old, arg))
    offset = self.offset - sum(b * st for (b, _), st in zip(arg, self.strides))
    return View.create(shape, self.strides, offset, mask)

  def stride(self, steps) -> "View":
    """Every k-th element of each axis; negative k walks backwards."""
    shape, strides, offset, mask = [], [], self.offset, []
    for i, (s, st, k) in enumerate(zip(self.shape, self.strides, steps)):
      b, e = self.mask[i] if self.mask else (0, s)
      if k < 0:
        offset += (s - 1) * st
        st, b, e, k = -st, s - e, s - b, -k
      shape.append((s + k - 1) // k)
      strides.append(st * k)
      mask.append(((b + k - 1) // k, (e + k - 1) // k))
    return View.create(tuple(shape), tuple(strides), offset, tuple(mask) if self.mask else None)

  def reshape(self, new_shape) -> "View | None":
    """A single view with the new shape, or None when one view can't express it."""
    if self.shape == new_shape: return self
    if self.contiguous: return View.create(new_shape)
    if self.mask is not None and any(b >= e for b, e in self.mask):
      # nothing valid: stays all padding; a 0-d view has no axis to carry that mask, so it goes on a view of its own
      return View.create(new_shape, mask=tuple((0, 0) for _ in new_shape)) if new_shape else None
    if self.mask is not None:
      # only dims of size 1 added or removed keep a mask intact
      if tuple(s for s in self.shape if s != 1) != tuple(s for s in new_shape if s != 1): return None
    # match groups of old axes onto groups of new axes with equal products; each old group must be mergeable
    old = [(s, st, (self.mask[i] if self.mask else (0, s))) for i, (s, st) in enumerate(zip(self.shape, self.strides)) if s != 1]
    strides, mask, oi = [], [], 0
    new_nonone = [s for s in new_shape if s != 1]
    new_strides, new_mask, ni = [], [], 0
    while ni < len(new_nonone):
      group_new, group_old = [new_nonone[ni]], []
      if oi >= len(old): return None
      group_old.append(old[oi])
      pn, po = new_nonone[ni], old[oi][0]
      ni += 1; oi += 1
      while pn != po:
        if pn < po:
          if ni >= len(new_nonone): return None
          group_new.append(new_nonone[ni]); pn *= new_nonone[ni]; ni += 1
        else:
          if oi >= len(old): return None
          group_old.append(old[oi]); po *= old[oi][0]; oi += 1
      # the old group must be contiguous among itself to be re-split
      for (_, st1, _), (s2, st2, _) in zip(group_old, group_old[1:]):
        if st1 != st2 * s2: return None
      if self.mask is not None and (len(group_old) != 1 or len(group_new) != 1): return None
      inner = group_old[-1][1]
      acc = []
      for s in reversed(group_new):
        acc.append(inner); inner *= s
      new_strides += list(reversed(acc))
      new_mask += [group_old[0][2]] if self.mask is not None else []
    if oi != len(old): return None
    it, mit = iter(new_strides), iter(new_mask)
    strides = tuple(next(it) if s != 1 else 0 for s in new_shape)
    mask = tuple(next(mit) if s != 1 else (0, 1) for s in new_shape) if self.mask is not None else None
    return View.create(new_shape, strides, self.offset, mask)

@functools.lru_cache(None)
def _interned_view(shape, strides, offset, mask) -> View: return View(shape, strides, offset, mask)

_trackers: dict = {}

def _memoized(method):
  """Movement ops repeat every training step on the same trackers: answer a repeat from a cache (which also
  hands back the same tracker object, so the next op's lookup is an identity hit)."""
  cached = functools.lru_cache(maxsize=1 << 14)(method)
  @functools.wraps(method)
  def call(self, arg):
    try: return cached(self, arg)
    except TypeError: return method(self, arg)   # an unhashable argument (a list): no cache
  return call

@dataclass(frozen=True, eq=False)
class ShapeTracker:
  views: tuple[View, ...]

  def __new__(cls, views: tuple):
    if (hit := _trackers.get(views)) is None: hit = _trackers[views] = object.__new__(cls)
    return hit
  def __reduce__(self): return (ShapeTracker, (self.views,))

  @staticmethod
  def contiguous(shape) -> "ShapeTracker": return ShapeTracker((View.create(tuple(shape)),))
  @property
  def shape(self) -> tuple[int, ...]: return self.views[-1].shape
  @property
  def is_contiguous(self) -> bool: return len(self.views) == 1 and self.views[0].contiguous
  def size(self) -> int: return prod(self.shape)

  def _with_last(self, v: View) -> "ShapeTracker": return ShapeTracker(self.views[:-1] + (v,))
  @_memoized
  def permute(self, order): return self._with_last(self.views[-1].permute(order))
  @_memoized
  def expand(self, shape): return self._with_last(self.views[-1].expand(tuple(shape)))
  @_memoized
  def shrink(self, arg): return self._with_last(self.views[-1].shrink(arg))
  @_memoized
  def pad(self, arg): return self._with_last(self.views[-1].pad(arg))
  @_memoized
  def stride(self, steps): return self._with_last(self.views[-1].stride(steps))
  @_memoized
  def reshape(self, shape) -> "ShapeTracker":
    shape = tuple(shape)
    if (v := self.views[-1].reshape(shape)) is not None: return self._with_last(v)
    return ShapeTracker(self.views + (View.create(shape),))

  def index(self, idxs: list) -> tuple[sym.Expr, sym.Cond]:
    """Flat buffer index and validity for a logical index of this tracker's shape."""
    flat, valid = self.views[-1].index(idxs)
    for view in reversed(self.views[:-1]):
      unraveled = []
      for s, st in zip(view.shape, strides_for_shape(view.shape)):
        unraveled.append(sym.mod(sym.div(flat, st), s) if st else sym.Const(0))
      f2, v2 = view.index(unraveled)
      flat, valid = f2, valid & v2
    return flat, valid

  def compose(self, other: "ShapeTracker") -> "ShapeTracker":
    """Apply `other` (a view over this tracker's output) on top of this tracker."""
    out = self
    for v in other.views:
      # a single contiguous view maps row-major positions to themselves, so it can be dropped
      out = ShapeTracker((v,)) if len(out.views) == 1 and out.views[0].contiguous else ShapeTracker(out.views + (v,))
    return out.simplify()

  def simplify(self) -> "ShapeTracker":
    """Merge the top view into the one below when the lower one is contiguous."""
    views = list(self.views)
    while len(views) >= 2 and views[-2].contiguous and prod(views[-2].shape) >= 0:
      views = views[:-2] + [views[-1]]
    return ShapeTracker(tuple(views))
