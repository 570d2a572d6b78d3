"""t[idx] = v, the in-place operators (+=, ...) and PyTorch's `_` methods (add_, clamp_, zero_, copy_, index_put_, ...).

alloy's tensors are lazy values: an in-place op computes the new value from lazy ops (a where over the written
positions, fused like any other work) and rebinds the Tensor to it (`assign`). Buffers are never written, so a
tensor that read the old value keeps it. Each change bumps the tensor's version (autograd's saved-tensor check).

Views, as PyTorch's: a basic index (ints, slices, None, ...), reshape/view/flatten/squeeze/unsqueeze, permute/
transpose/T, split/chunk and detach() give a tensor that remembers its base (`_base`: base, how, its arguments, the
base's version then), and the base remembers its live views (`_views`, weak references). An in-place change to a
view writes through to its base, recursively, and reads the base's current value first, so `v = t[0]; v += 1`
changes t as in PyTorch; an in-place change to a tensor rebinds each of its live views (and theirs) to the view of
its new value, so `v = t[1:]; t += 1; v` shows the new values, and the view's graph follows. A view shares its
base's version counter, as PyTorch's views share their storage's: a product that saved v refuses to backward after
t changed. Only views are rebound: any other tensor that read t keeps the value it read. expand() results, pads and
flips are not views here (PyTorch: expand is a view it refuses to write; flip and pad copy). A @jit replay rebinds
the views of what it changes too, and links the views it returns to their bases (jit_state.py).

Writing at advanced indices (integer tensors or lists, boolean masks) reads a device index tensor back, as
__getitem__ does, and then costs O(written tensor) work: the host inverts the index (which source row lands on each
target) and the new value is one gather and one where. A boolean mask with a value that does not depend on the
count of True (a scalar, a row) is a where with no read back. index_put_(accumulate=True) adds one such layer per
repeat of the most repeated index, or, past MAX_LAYERS repeats, one scatter-add of the values (alloy/scatter_sum.py:
sorted by index on the device, O(n log^2 n) for n indices).
"""
from __future__ import annotations
import weakref
import numpy as np
from alloy import dtype as dt, autograd
from alloy import realize_tensors
from alloy.engine.watch import watchers
from alloy.scalar import plain
from alloy.indexing import basic_key, getitem

MAX_LAYERS = 8   # index_put_(accumulate=True): past this many repeats of one index, one scatter-add instead of a layer per repeat

def _tensor_cls():
  from alloy.tensor import Tensor
  return Tensor

def can_cast(src, dst) -> bool:
  """PyTorch's rule for an in-place op's result: no float into an integer tensor, nothing but bool into a bool one."""
  if dst.is_bool: return src.is_bool
  return not (src.is_float and not dst.is_float)

def check_leaf(t, what: str) -> None:
  """PyTorch refuses an in-place change to a leaf that requires grad (or to a view of one) while grad mode is on."""
  if not autograd.is_grad_enabled(): return
  x, view = t, False
  while True:
    if isinstance(x._ag, autograd.Leaf):
      kind = "a view of a leaf tensor" if view else "a leaf tensor"
      raise RuntimeError(f"{what}: {kind} that requires grad ({x.dtype.name}, shape {x.shape}) is being used in an in-place operation; "
                         f"do it under alloy.no_grad() (a parameter update), or change a copy (x = x + ...)")
    b = getattr(x, "_base", None)
    if b is None or b[1] == "detach": return
    x, view = b[0], True

def current(t):
  """t's value as PyTorch would see it now, as a new Tensor: a view whose base changed since is read from the base again."""
  b = getattr(t, "_base", None)
  if b is None or autograd.version(b[0]) == b[3]: return autograd.snapshot(t)
  base, how, args, _ = b
  return view_again(current(base), how, args)

def view_again(base, how: str, args):
  """base viewed as note_view recorded a view of it (how, args): a new view of base."""
  if how == "detach": return base.detach()
  if how == "index": return index_view(base, args, getitem(base, args))
  return base._view(how, *args)

def note_view(base, view, how: str, args):
  """view is base viewed by how/args (PyTorch's view ops): it writes through to base, and base's changes reach it."""
  box = autograd.counter(base)
  view._base, view._version = (base, how, args, box[0]), box   # one version for the base and its views, as PyTorch's storage has
  views = getattr(base, "_views", None)
  if views is None: views = base._views = []
  elif len(views) >= 16 and len(views) & (len(views) - 1) == 0: views[:] = [r for r in views if r() is not None]   # dead ones out, as it doubles
  views.append(weakref.ref(view))
  return view

def rebind_views(t, skip=None) -> None:
  """t changed: each live view of t but skip (the view whose write reached t) takes the view of t's new value."""
  views = getattr(t, "_views", None)
  if not views: return
  live = [r for r in views if (v := r()) is not None and v._base is not None and v._base[0] is t]
  t._views = live
  for ref in tuple(live):   # a copy: a view of t made while rebinding is current already
    v = ref()
    if v is None or v is skip: continue
    with autograd.enable_grad() if v._ag is not None or autograd.is_grad_enabled() else autograd.no_grad():
      new = current(v)   # v's base is at a newer version than v noted: v is read from it again
    v.node = new.node   # its version is t's: already bumped
    if not isinstance(v._ag, autograd.Leaf): v._ag = new._ag   # a view made a leaf itself (requires_grad_) stays one
    b = v._base
    v._base = (b[0], b[1], b[2], autograd.version(t))
    rebind_views(v)

def _write_back(base, how: str, args, new):
  """The base's new value once its view (base viewed by how/args) takes the value new."""
  if how == "detach": return new
  if how == "reshape": return new.reshape(base.shape)
  if how == "permute": return new.permute(tuple(sorted(range(len(args[0])), key=lambda i: args[0][i])))
  if how == "shrink": return setitem_value(base, tuple(slice(b, e) for b, e in args[0]), new)
  return setitem_value(base, args, new)

def assign(t, new, what: str, cast_any: bool = False, keep_grad: bool = False, from_view=None):
  """Rebind t to the value new (broadcast to t's shape, cast to its dtype), through its base when t is a view, and
  t's views to the views of it (but from_view, the view whose write this is)."""
  Tensor = _tensor_cls()
  if not keep_grad: check_leaf(t, what)
  if not isinstance(new, Tensor): new = Tensor.full(t.shape, new, device=t.device)
  if new.device != t.device: raise ValueError(f"{what}: expected a value on {t.device}, got one on {new.device}")
  if new.shape != t.shape:
    from alloy.tensor import broadcast_shape
    try: ok = broadcast_shape(new.shape, t.shape) == t.shape
    except ValueError: ok = False
    if not ok: raise RuntimeError(f"{what}: the result's shape {new.shape} doesn't match the shape {t.shape} of the tensor changed in place")
    new = new._broadcast_to(t.shape)
  if not cast_any and not can_cast(new.dtype, t.dtype):
    raise RuntimeError(f"{what}: result type {new.dtype.name} can't be cast to the desired output type {t.dtype.name}")
  new = new.cast(t.dtype)
  b = getattr(t, "_base", None)
  if b is not None:
    base, how, args, _ = b
    assign(base, _write_back(current(base), how, args, new), what, True, keep_grad or how == "detach", t)
  if watchers.on_changed: watchers.changed(t)   # before the change: the jit's capture keeps the value t had
  t.node = new.node
  realize_tensors.realize_later(t)   # computed with the next realize: a loop of in-place updates starts from computed values
  if autograd.is_grad_enabled() and not keep_grad:
    if new._ag is None and t._ag is not None:   # a value that no longer depends on the graph (fill_): it keeps requiring grad
      new = autograd.record(new._new(new.node), autograd.no_gradient_rule, (autograd.snapshot(t),))
    t._ag = new._ag
  autograd.bump(t)
  if isinstance(t._ag, autograd.GradNode) and t._ag is new._ag and t._ag.saved:   # what the op saved of its output is now t
    mine = getattr(new, "_version", None)
    t._ag.saved = tuple(autograd.saved_entry(t, e[2]) if e[0] is mine else e for e in t._ag.saved)
  if b is not None: t._base = (b[0], b[1], b[2], autograd.version(b[0]))
  rebind_views(t, from_view)
  return t

def index_view(t, key, out):
  """getitem's result; a basic index (no integer tensors or masks) makes it a view of t."""
  if out is t: return out
  idx = key if isinstance(key, tuple) else (key,)
  if basic_key(idx) is not None: return note_view(t, out, "index", key)   # the commonest index, at once
  for i in idx:
    if _is_advanced(plain(i)): return out
  return note_view(t, out, "index", key)

def _is_advanced(i) -> bool:
  return isinstance(i, (_tensor_cls(), list, np.ndarray)) or isinstance(i, (bool, np.bool_))

def _value(t, v, what: str):
  Tensor = _tensor_cls()
  if isinstance(v, Tensor):
    if v.device != t.device: raise ValueError(f"{what}: the value is on {v.device}, the tensor on {t.device}")
    return v.cast(t.dtype)
  if isinstance(v, (list, tuple, np.ndarray)): return Tensor(np.asarray(v), device=t.device).cast(t.dtype)
  return Tensor(v, device=t.device).cast(t.dtype)

def _fit(v, shape: tuple, what: str):
  """v broadcast to shape, leading size-1 dims dropped first (PyTorch's rule for the value of an indexed write)."""
  from alloy.tensor import broadcast_shape
  while v.ndim > len(shape) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
  try: ok = v.ndim <= len(shape) and broadcast_shape(v.shape, shape) == tuple(shape)
  except ValueError: ok = False
  if not ok:
    raise ValueError(f"{what}: shape mismatch: a value of shape {v.shape} cannot be broadcast to the indexing result of shape {tuple(shape)}")
  return v._broadcast_to(shape)

# ---- writing at basic indices: where the index's gradient would land

def _place(t, key: tuple, v, what: str):
  """t with t[key] (a basic index) replaced by v. The placement is the index's own backward (pads, strides and
  reshapes: linear), applied to v and to a True mask."""
  from alloy.indexing import getitem
  from alloy.tensor import Tensor, where
  probe = Tensor.zeros(*t.shape, device=t.device)
  probe._ag = autograd.Leaf()
  with autograd.enable_grad(): y = getitem(probe, key)
  v = _fit(v, y.shape, what)
  if not isinstance(y._ag, autograd.GradNode): return v   # the whole tensor
  def unview(g):
    ag = y._ag
    while isinstance(ag, autograd.GradNode):
      (g,) = ag.rule(ag.output(), g, *ag.args)
      ag = ag.parents[0]._ag
    return g
  with autograd.no_grad(): mask = unview(Tensor.full(y.shape, True, dtype=dt.bool_, device=t.device))
  return where(mask, unview(v), t)

# ---- writing at advanced indices

def _host_indices(x, adv: tuple, what: str):
  """adv (slices, Ellipsis, masks, integer arrays/tensors over x) -> [(dim, host int64 array)], with masks as the
  arrays of their True positions, negatives wrapped, bounds checked."""
  Tensor = _tensor_cls()
  dims = [np.ndim(i) if _is_mask(i) and not isinstance(i, Tensor) else i.ndim if _is_mask(i) else 0 if i is Ellipsis else 1 for i in adv]
  if sum(1 for i in adv if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
  if sum(dims) > x.ndim: raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
  out, d = [], 0
  for i, n in zip(adv, dims):
    if i is Ellipsis: d += x.ndim - sum(dims); continue
    if isinstance(i, slice): d += 1; continue
    if _is_mask(i):
      m = i.numpy() if isinstance(i, Tensor) else np.asarray(i, dtype=bool)
      if m.shape != x.shape[d:d + n]:
        raise IndexError(f"the shape of the mask {m.shape} at index {d} does not match the shape {x.shape[d:d + n]} "
                         f"of the indexed tensor {x.shape} there")
      out.extend((d + k, a.astype(np.int64)) for k, a in enumerate(np.nonzero(m)))
    else:
      if isinstance(i, Tensor):
        if i.device != x.device: raise ValueError(f"index tensor on {i.device} for a tensor on {x.device}")
        if not i.dtype.is_int: raise IndexError(f"tensors used as indices must be integer tensors, got {i.dtype.name}")
        a = i.numpy()   # read back, as __getitem__ does: bounds, and the inverse below
      else:
        a = np.asarray(i)
        if a.size and a.dtype.kind not in "iu": raise IndexError(f"{what}: indices must be integers, got {a.dtype}")
      a = a.astype(np.int64)
      size = x.shape[d]
      if a.size and (a.min() < -size or a.max() >= size):
        raise IndexError(f"index {a[(a < -size) | (a >= size)].flat[0]} is out of bounds for dimension {d} with size {size}")
      out.append((d, np.where(a < 0, a + size, a)))
    d += n
  return out

def _is_mask(i) -> bool:
  if isinstance(i, _tensor_cls()): return i.dtype.is_bool
  if isinstance(i, np.ndarray): return i.dtype == np.bool_
  return isinstance(i, list) and len(i) > 0 and all(isinstance(v, (bool, np.bool_)) for v in np.asarray(i, dtype=object).flat)

def _mask_where(x, adv: tuple, v, accumulate: bool):
  """x[mask] = v as one where, with no read back, when v does not depend on the number of True; else None."""
  from alloy.tensor import Tensor, where, broadcast_shape
  masks = [k for k, i in enumerate(adv) if _is_mask(i)]
  if len(masks) != 1 or any(not (i is Ellipsis or isinstance(i, slice)) for k, i in enumerate(adv) if k != masks[0]): return None
  m = adv[masks[0]]
  m = m if isinstance(m, Tensor) else Tensor(np.asarray(m, dtype=bool), device=x.device)
  if m.device != x.device: return None
  if Ellipsis in adv[:masks[0]]: d = x.ndim - m.ndim - sum(1 for i in adv[masks[0] + 1:] if i is not Ellipsis)
  else: d = masks[0]
  after = x.shape[d + m.ndim:]
  if m.shape != x.shape[d:d + m.ndim]: return None   # _host_indices raises the error
  while v.ndim and v.shape[0] == 1 and v.ndim > len(after): v = v.reshape(v.shape[1:])
  try:
    if v.ndim > len(after) or broadcast_shape(v.shape, after) != after: return None
  except ValueError: return None
  mb = m.reshape(m.shape + (1,) * len(after))
  return where(mb, x + v if accumulate else v, x)

def put_advanced(x, adv: tuple, v, accumulate: bool, what: str):
  """x with x[adv] = v (or += v, each repeat of an index adding once): adv holds full slices, one Ellipsis and
  advanced entries only (setitem_value has taken the basic ones out)."""
  from alloy.tensor import Tensor, where
  if (fast := _mask_where(x, adv, v, accumulate)) is not None: return fast
  found = _host_indices(x, adv, what)
  pos = [d for d, _ in found]
  arrays = np.broadcast_arrays(*[a for _, a in found])
  b_shape = arrays[0].shape if arrays else ()
  others = [k for k in range(x.ndim) if k not in pos]
  rest = tuple(x.shape[k] for k in others)
  adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
  nb, first = len(b_shape), pos[0]
  # NumPy's (and PyTorch's) layout of x[adv]: adjacent advanced dims where the first stood, else at the front
  r_shape = (x.shape[:first] + b_shape + x.shape[pos[-1] + 1:]) if adjacent else b_shape + rest
  v = _fit(v, r_shape, what)
  if adjacent and first: v = v.permute(tuple(range(first, first + nb)) + tuple(range(first)) + tuple(range(first + nb, len(r_shape))))
  n_b = int(np.prod(b_shape, dtype=np.int64))
  if n_b == 0: return x
  s_shape = tuple(x.shape[d] for d in pos)
  n_s = int(np.prod(s_shape, dtype=np.int64))
  v2 = v.reshape((n_b,) + rest)
  f = np.ravel_multi_index([a.reshape(-1) for a in arrays], s_shape)
  perm = tuple(pos.index(k) if k in pos else len(pos) + others.index(k) for k in range(x.ndim))
  def to_x(t): return t.reshape(s_shape + rest).permute(perm)   # (targets, rest) -> x's dim order
  hit_shape = tuple(x.shape[k] if k in pos else 1 for k in range(x.ndim))
  if not accumulate: layers = [f]
  else:
    order = np.argsort(f, kind="stable")
    fs = f[order]
    starts = np.r_[0, np.flatnonzero(np.diff(fs)) + 1]
    rank = np.arange(len(fs)) - np.repeat(starts, np.diff(np.r_[starts, len(fs)]))
    if rank.max() + 1 > MAX_LAYERS:   # many repeats: one scatter-add of the values' slices instead (alloy/scatter_sum.py)
      from alloy.scatter_sum import scatter_add_slices
      return x + to_x(scatter_add_slices(n_s, Tensor(f, device=x.device), v2).cast(x.dtype))
    layers = [(fs[rank == k], order[rank == k]) for k in range(rank.max() + 1)]
  out = x
  for layer in layers:
    inv, hit = np.zeros(n_s, np.int64), np.zeros(n_s, bool)
    if accumulate: inv[layer[0]], hit[layer[0]] = layer[1], True
    else: inv[layer], hit[layer] = np.arange(n_b), True   # NumPy assigns in order: the last repeat wins, as PyTorch's CPU does
    picked = to_x(v2[inv])
    h = Tensor(hit.reshape(s_shape), device=x.device).reshape(hit_shape)   # pos ascends: the same element order
    out = where(h, out + picked if accumulate else picked, out)
  return out

def setitem_value(t, key, v, accumulate: bool = False, what: str = "setitem"):
  """t with t[key] = v, as a new lazy value (t is not changed)."""
  v = _value(t, v, what)
  key = tuple(plain(i) for i in (key if isinstance(key, tuple) else (key,)))
  for i in key:
    if isinstance(i, (bool, np.bool_)): raise TypeError(f"{what}: a bool index ({i}) is not supported; use a mask tensor")
  if not any(_is_advanced(i) for i in key):
    if accumulate:
      from alloy.indexing import getitem
      v = getitem(t, key) + v
    return _place(t, key, v, what)
  # split: a basic index of t (advanced entries kept whole), then the advanced entries over its result
  basic, adv = [], []
  for i in key:
    if _is_advanced(i):
      n = (i.ndim if isinstance(i, _tensor_cls()) else np.ndim(i)) if _is_mask(i) else 1
      basic.extend([slice(None)] * n); adv.append(i)
    elif isinstance(i, (int, np.integer)): basic.append(i)
    elif i is None: basic.append(None); adv.append(slice(None))
    elif i is Ellipsis: basic.append(Ellipsis); adv.append(Ellipsis)
    else: basic.append(i); adv.append(slice(None))
  from alloy.indexing import getitem
  trivial = all(i is Ellipsis or (isinstance(i, slice) and i == slice(None)) for i in basic)
  x = t if trivial else getitem(t, tuple(basic))
  new_x = put_advanced(x, tuple(adv), v, accumulate, what)
  return new_x if trivial else _place(t, tuple(basic), new_x, what)
