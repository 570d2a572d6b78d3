"""The user API: a lazy, NumPy/PyTorch-style Tensor. Nothing runs until a value is needed.

Longer than the house's 400 lines on purpose: it is one class, the whole user-facing API, in sections that each read
alone (creation, host access, movement, elementwise, reductions, linear algebra, then the module-level functions).
Splitting one class across mixin files would make a reader chase the method order instead; op groups that grow a
machinery of their own (indexing.py already) move out.
"""
from __future__ import annotations
import collections, math, numbers
from typing import Sequence
import numpy as np
from alloy import dtype as dt
from alloy.dtype import DType
from alloy.helpers import prod, all_same, remember
from alloy.ir.node import Node, moved
from alloy.ir.ops import Op
from alloy.ir.symbolic import INT32_MAX
from alloy.ir.view import ShapeTracker, View
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import canonical_device, default_device, unsupported_dtype
from alloy.engine.realize import buffer_view as _buffer_view
from alloy.realize_tensors import buffer_of, copy_to, realize as _realize
from alloy.engine.watch import watchers
from alloy import dlpack, autograd
from alloy.assign import note_view
from alloy.indexing import getitem
from alloy.scalar import Scalar, cast_number as _cast_scalar, plain

MaxResult = collections.namedtuple("MaxResult", ["values", "indices"])
# The constants of recent `tensor (op) number`s by (number, dtype, shape), at most RECENT_CONSTANTS: a loop's step
# (x * 1.0001 + 1) finds its constants' nodes alive and at hand, where it would make them anew (a Node's key is 4x the
# lookup) and the schedule would sign them again. Zeros are not kept: 0.0 and -0.0 are equal keys but two constants.
_recent_constants: dict = {}
RECENT_CONSTANTS = 64

_VIEW_METHODS = ("reshape", "permute", "shrink")   # the movement ops whose result is a view of its input, as PyTorch's

def _norm_axis(axis: int, ndim: int, what="dimension") -> int:
  if type(axis) is int and -ndim <= axis < ndim: return axis % ndim   # the common case, without the checks below
  axis = plain(axis)
  if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
    raise TypeError(f"{what} must be an int, got {type(axis).__name__}")
  if not -max(ndim, 1) <= axis < max(ndim, 1):
    raise IndexError(f"{what} {axis} is out of range for a tensor with {ndim} dimensions "
                     f"(expected to be in range of [{-max(ndim,1)}, {max(ndim,1)-1}])")
  return axis % max(ndim, 1)
norm_axis = _norm_axis   # public: the op modules beside this one (gathering, ordering, ...) check dims the same way

_broadcasts: dict = {}   # shapes -> their broadcast shape: a graph broadcasts the same few pairs again and again

def broadcast_shape(*shapes: tuple) -> tuple:
  try:
    if (hit := _broadcasts.get(shapes)) is not None: return hit
  except TypeError: return _broadcast_shape(shapes)   # a list among them: no cache
  return remember(_broadcasts, shapes, _broadcast_shape(shapes))

def _broadcast_shape(shapes: tuple) -> tuple:
  if all(s == shapes[0] for s in shapes[1:]): return tuple(shapes[0])
  nd = max(len(s) for s in shapes)
  padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
  out = []
  for dims in zip(*padded):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1:
      raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)

def _infer_shape_and_dtype(data) -> np.ndarray:
  if isinstance(data, np.ndarray): return data
  try: arr = np.array(data)
  except ValueError as e: raise ValueError(f"cannot build a tensor from ragged nested sequences: {e}") from None
  if arr.dtype == object: raise TypeError(f"cannot build a tensor from {type(data).__name__} holding non-numbers")
  return arr

def _check_dtype(device: str, d: DType) -> None:
  if (why := unsupported_dtype(device, d.name)): raise TypeError(f"{d.name} is not supported on {device}: {why}")

class Tensor:
  # _ag: None, or autograd's Leaf or GradNode; _version: a [count] of in-place changes (autograd.bump); _base: what this is a view
  # of, _views: weak references to the views of this (assign.py)
  __slots__ = ("node", "device", "_ag", "_version", "_base", "_views", "__weakref__")
  _seed, _rng_counter = 0, 0

  def __init__(self, data, dtype=None, device: str | None = None, requires_grad: bool = False):
    self._ag = None
    self._build(data, dtype, device)
    if requires_grad: self.requires_grad_()
  def _build(self, data, dtype, device):
    device = canonical_device(device) if device is not None else default_device()
    dtype = dt.to_dtype(dtype) if dtype is not None else None
    if isinstance(data, Node):
      _check_dtype(device, data.dtype)
      self.node, self.device = data, device
      return
    if isinstance(data, Tensor):
      t = data.to(device).cast(dtype or data.dtype)
      self.node, self.device = t.node, t.device
      return
    if isinstance(data, (bool, int, float, np.bool_, np.integer, np.floating, Scalar)) and not isinstance(data, np.ndarray):
      d = dtype or (dt.to_dtype(data.dtype) if isinstance(data, np.generic) else dt.result_type([], [data]))
      _check_dtype(device, d)
      self.node, self.device = Node(Op.CONST, (), _cast_scalar(data, d), d, ()), device
      return
    arr = _infer_shape_and_dtype(data)
    if dtype is None:
      if arr.dtype == np.float64 and not isinstance(data, np.ndarray): dtype = dt.default_float
      elif arr.dtype == np.int64 and not isinstance(data, np.ndarray): dtype = dt.default_int
      else: dtype = dt.to_dtype(arr.dtype)
    _check_dtype(device, dtype)
    if arr.dtype.kind == "f" and dtype.is_int:
      raise TypeError(f"cannot build an {dtype.name} tensor from floating-point data; cast it explicitly")
    storage = dt.to_numpy_array(arr, dtype)
    buf = Buffer(device, storage.size, dtype).copyin(storage.reshape(-1))
    self.node = _buffer_view(buf, storage.shape)
    self.device = device

  # ---- properties
  @property
  def shape(self) -> tuple: return self.node.shape
  @property
  def dtype(self) -> DType: return self.node.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return prod(self.shape)
  def size(self, dim=None):
    return self.shape if dim is None else self.shape[_norm_axis(dim, self.ndim)]
  def dim(self) -> int: return self.ndim
  def nelement(self) -> int: return self.numel()
  def element_size(self) -> int: return self.dtype.itemsize
  def clone(self) -> "Tensor":   # values never change in place: sharing the node is a copy
    t = self._new(self.node)
    return t if self._ag is None else autograd.record(t, autograd.identity_rule, (self,))
  def detach(self) -> "Tensor":   # a new tensor holds no graph; an in-place change to it writes through, as in PyTorch
    return note_view(self, self._new(self.node), "detach", None)
  # ---- autograd (alloy/autograd.py)
  @property
  def requires_grad(self) -> bool: return self._ag is not None
  @requires_grad.setter
  def requires_grad(self, v: bool): self.requires_grad_(v)
  def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
    if not requires_grad:
      if isinstance(self._ag, autograd.GradNode): raise RuntimeError("requires_grad_(False) is only for leaf tensors; use detach()")
      self._ag = None
    elif self._ag is None:
      autograd.check_requires_grad(self)
      self._ag = autograd.Leaf()
    return self
  @property
  def is_leaf(self) -> bool: return not isinstance(self._ag, autograd.GradNode)
  @property
  def grad(self) -> "Tensor | None": return self._ag.grad if self._ag is not None else None   # a non-leaf's only after retain_grad()
  @grad.setter
  def grad(self, g):
    if not isinstance(self._ag, autograd.Leaf):
      if g is None: return
      raise RuntimeError("grad can be set only on a leaf tensor that requires grad")
    if g is not None and (not isinstance(g, Tensor) or g.shape != self.shape):
      raise RuntimeError(f"grad: expected a Tensor of shape {self.shape}, got {getattr(g, 'shape', type(g).__name__)}")
    if watchers.on_changed:   # as backward tells it, a @jit capture carries the .grad over; told with None first, since a
      self._ag.grad = None    # set replaces the .grad and does not depend on the one the call began with
      watchers.changed(self._ag)
    self._ag.grad = g
  def backward(self, gradient=None, retain_graph=None, create_graph=False) -> None: autograd.backward(self, gradient, retain_graph, create_graph)
  def register_hook(self, hook): return autograd.register_hook(self, hook)
  def retain_grad(self) -> None: autograd.retain_grad(self)
  @property
  def retains_grad(self) -> bool: return isinstance(self._ag, autograd.GradNode) and self._ag.retain
  def view_as(self, other: "Tensor") -> "Tensor": return self.reshape(other.shape)
  reshape_as = view_as
  def expand_as(self, other: "Tensor") -> "Tensor": return self.expand(other.shape)
  def masked_fill(self, mask: "Tensor", value) -> "Tensor": return where(mask, value, self)
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __iter__(self):
    if not self.shape: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))
  def __repr__(self):
    """The values, as NumPy prints them (abbreviated past 1000 elements), then dtype and device: it realizes, as
    PyTorch's does. Where the value cannot be read here (inside a @jit capture) it says why instead."""
    try: values = np.array2string(self.numpy(), separator=", ", threshold=1000, edgeitems=3, prefix="Tensor(")
    except Exception as e: return f"<Tensor {self.shape} {self.dtype.name} on {self.device}: not readable here ({type(e).__name__}: {e})>"
    return f"Tensor({values}, dtype={self.dtype.name}, device={self.device})"
  def __format__(self, spec: str) -> str:
    if self.ndim == 0: return format(self.item(), spec)
    if spec: raise TypeError(f"format spec {spec!r} needs a 0-d tensor, this one has shape {self.shape}")
    return repr(self)
  # NumPy defers its operators to ours (np.float64(2) * t is a Tensor); np.exp(t) and the like raise TypeError
  __array_ufunc__ = None
  def __reduce__(self):
    """pickle and copy.deepcopy: by value, on the same device."""
    return (_rebuild, (self.numpy(), self.dtype.name, self.device))
  @property
  def T(self) -> "Tensor":   # a valid order by construction: permute's checks left out where there is one to reverse
    n = len(self.node.shape)
    return self._view("permute", tuple(range(n - 1, -1, -1))) if n > 1 else self.permute(tuple(range(n)))
  @property
  def mT(self) -> "Tensor": return self.transpose(-2, -1)

  # ---- creation
  @staticmethod
  def full(shape, fill_value, dtype=None, device=None) -> "Tensor":
    shape = _size_arg(shape, "full")
    d = dt.to_dtype(dtype) if dtype is not None else dt.result_type([], [fill_value])
    t = Tensor(_cast_scalar(fill_value, d), dtype=d, device=device)
    return t.reshape((1,) * len(shape)).expand(shape) if shape else t
  @staticmethod
  def zeros(*shape, dtype=None, device=None): return Tensor.full(shape, 0, dtype or dt.default_float, device)
  @staticmethod
  def ones(*shape, dtype=None, device=None): return Tensor.full(shape, 1, dtype or dt.default_float, device)
  @staticmethod
  def empty(*shape, dtype=None, device=None): return Tensor.zeros(*shape, dtype=dtype, device=device).contiguous()
  @staticmethod
  def arange(start, end=None, step=1, dtype=None, device=None) -> "Tensor":
    if end is None: start, end = 0, start
    if step == 0: raise ValueError("arange: step must be nonzero")
    d = dt.to_dtype(dtype) if dtype is not None else dt.result_type([], [start, end, step])
    n = max(0, math.ceil((end - start) / step))
    idx = _index_tensor(n, device)
    # values (or the steps to them) past int32 are computed in the 64-bit dtype: an int32 index times step would wrap
    if d.is_float or (d.itemsize == 8 and max(abs(start), abs(step) * n, abs(start + n * step)) > INT32_MAX): idx = idx.cast(d)
    return (idx * step + start).cast(d)
  @staticmethod
  def linspace(start, end, steps, dtype=None, device=None) -> "Tensor":
    if steps < 0: raise ValueError("linspace: steps must be non-negative")
    d = dt.to_dtype(dtype) if dtype is not None else dt.default_float
    if d.is_bool: raise TypeError("linspace: dtype bool is not supported (as in PyTorch); use a number dtype")
    if steps == 1: return Tensor.full((1,), start, d, device)
    step = (end - start) / (steps - 1)
    idx = _index_tensor(steps, device).cast(dt.float32 if d != dt.float64 else d)
    # from both ends, as torch does, so the last value is exactly `end`
    half = steps // 2
    lo = start + idx * step
    hi = end - (steps - 1 - idx) * step
    return where(idx < half, lo, hi).cast(d)
  @staticmethod
  def eye(n, m=None, dtype=None, device=None) -> "Tensor":
    n = plain(n)
    m = n if m is None else plain(m)
    for what, v in (("n", n), ("m", m)):
      if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0: raise ValueError(f"eye: {what} must be a non-negative int, got {v!r}")
    n, m = int(n), int(m)
    r, c = _index_tensor(n, device).reshape(n, 1), _index_tensor(m, device).reshape(1, m)
    return (r == c).cast(dt.to_dtype(dtype) if dtype is not None else dt.default_float)
  @staticmethod
  def manual_seed(seed: int = 0):
    Tensor._seed, Tensor._rng_counter = int(seed) & 0xFFFFFFFF, 0
  @staticmethod
  def next_rng_key() -> np.ndarray:
    """The key of the next random tensor, (seed, counter) as 2 uint32; advances the counter."""
    key = np.array([Tensor._seed, Tensor._rng_counter], dtype=np.uint32)
    Tensor._rng_counter += 1
    return key
  @staticmethod
  def _random_bits(shape, device=None) -> "Tensor":
    """uint32 random bits from threefry-2x32 keyed by (seed, call counter), counter = element index."""
    shape = _size_arg(shape, "a random tensor")
    n = prod(shape)
    key = Tensor(Tensor.next_rng_key(), device=device)
    if watchers.on_rng_key: watchers.rng_key(key)   # the jit's capture: a key is an input a replay refreshes
    ctr = _index_tensor(n, device).cast(dt.uint32)
    k0, k1 = key[0].reshape(1).expand(n), key[1].reshape(1).expand(n)
    x0, _ = _threefry2x32(ctr, Tensor.zeros(n, dtype=dt.uint32, device=device), k0, k1)
    return x0.reshape(shape)
  @staticmethod
  def rand(*shape, dtype=None, device=None) -> "Tensor":
    d = dt.to_dtype(dtype) if dtype is not None else dt.default_float
    if not d.is_float: raise TypeError(f"rand: dtype must be floating point, got {d.name}")
    u = (Tensor._random_bits(shape, device) >> 8).cast(dt.float32) * (1.0 / (1 << 24))
    return u.cast(d)
  @staticmethod
  def randn(*shape, dtype=None, device=None) -> "Tensor":
    d = dt.to_dtype(dtype) if dtype is not None else dt.default_float
    if not d.is_float: raise TypeError(f"randn: dtype must be floating point, got {d.name}")
    shape = _shape_arg(shape)
    u = Tensor.rand(2, *shape, device=device)
    r = (1.0 - u[0]).log().mul(-2.0).sqrt()
    return (r * (u[1] * (2 * math.pi)).cos()).cast(d)
  @staticmethod
  def randint(low, high=None, size=(), dtype=None, device=None) -> "Tensor":
    if high is None: low, high = 0, low
    if high <= low: raise ValueError(f"randint: low ({low}) must be less than high ({high})")
    d = dt.to_dtype(dtype) if dtype is not None else dt.default_int
    # floor(bits * range / 2**32) in exact integer arithmetic (no float64, which not every device has)
    bits = Tensor._random_bits(size, device).cast(dt.uint64)
    return ((bits * (high - low)) >> 32).cast(dt.int64).add(low).cast(d)
  def zeros_like(self, dtype=None, device=None): return Tensor.zeros(*self.shape, dtype=dtype or self.dtype, device=device or self.device)
  def ones_like(self, dtype=None, device=None): return Tensor.ones(*self.shape, dtype=dtype or self.dtype, device=device or self.device)
  def full_like(self, v, dtype=None, device=None): return Tensor.full(self.shape, v, dtype=dtype or self.dtype, device=device or self.device)
  def empty_like(self, dtype=None, device=None): return Tensor.empty(*self.shape, dtype=dtype or self.dtype, device=device or self.device)
  def rand_like(self, dtype=None, device=None): return Tensor.rand(*self.shape, dtype=dtype or self.dtype, device=device or self.device)
  def randn_like(self, dtype=None, device=None): return Tensor.randn(*self.shape, dtype=dtype or self.dtype, device=device or self.device)
  # PyTorch's new_*: a new tensor of the given shape with this one's dtype and device unless told otherwise
  def new_zeros(self, *size, dtype=None, device=None): return Tensor.zeros(*size, dtype=dtype or self.dtype, device=device or self.device)
  def new_ones(self, *size, dtype=None, device=None): return Tensor.ones(*size, dtype=dtype or self.dtype, device=device or self.device)
  def new_empty(self, *size, dtype=None, device=None): return Tensor.empty(*size, dtype=dtype or self.dtype, device=device or self.device)
  def new_full(self, size, v, dtype=None, device=None): return Tensor.full(size, v, dtype=dtype or self.dtype, device=device or self.device)
  def new_tensor(self, data, dtype=None, device=None): return Tensor(data, dtype=dtype or self.dtype, device=device or self.device)
  def type_as(self, other: "Tensor") -> "Tensor": return self.cast(other.dtype)

  # ---- realization and host access
  def realize(self) -> "Tensor":
    _realize([self])
    return self
  def contiguous(self) -> "Tensor":
    # a contiguous view of a value that is always stored as it is (a buffer, a fused attention's output) reads it in place
    if self.node.op is Op.VIEW and self.node.src[0].op in (Op.BUFFER, Op.ATTENTION) and self.node.arg.is_contiguous: return self
    if self.node.op is Op.CONTIGUOUS: return self   # already stored once: a second CONTIGUOUS would not lower
    t = self._new(Node(Op.CONTIGUOUS, (self.node,), None, self.dtype, self.shape))
    return t if self._ag is None else autograd.record(t, autograd.identity_rule, (self,))
  def numpy(self) -> np.ndarray:
    buf = buffer_of(self)
    out = buf.numpy()
    if self.dtype is dt.bfloat16: out = dt.bfloat16_bits_to_float32(out)
    return out.reshape(self.shape)
  def tolist(self):
    return self.numpy().tolist()
  def item(self):
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(()).item()
  def __bool__(self):
    if self.numel() != 1: raise ValueError(f"the truth value of a tensor with shape {self.shape} is ambiguous")
    return bool(self.item())
  def __float__(self): return float(self.item())
  def __int__(self): return int(self.item())
  def __array__(self, dtype=None, copy=None): return self.numpy() if dtype is None else self.numpy().astype(dtype)
  def to(self, device=None, dtype=None) -> "Tensor":
    if isinstance(device, (DType, type)) or (isinstance(device, str) and device in dt.DTYPES): device, dtype = None, device
    t = self
    if device is not None and canonical_device(device) != self.device:
      dev = canonical_device(device)
      buf = copy_to(self, dev)   # no host round trip where the devices allow it; a @jit capture replays it
      t = Tensor(_buffer_view(buf, self.shape), device=dev)
      if self._ag is not None: t = autograd.record(t, autograd.to_rule, (self,), self.device)   # the gradient goes back
    return t.cast(dtype) if dtype is not None else t
  def cpu(self): return self.to("CPU")
  def cuda(self, device=None): return self.to("CUDA" if device is None else f"CUDA:{device}")
  def astype(self, dtype) -> "Tensor": return self.cast(dtype)
  def __dlpack_device__(self) -> tuple: return dlpack.device_of(self.device)
  def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
    """Zero-copy export of a CPU or CUDA tensor's buffer (alloy/dlpack.py). The device first finishes the work
    writing it, so the consumer's stream, whichever it is, sees the values."""
    dlpack.device_of(self.device)
    if copy: raise BufferError("__dlpack__(copy=True) is not supported: export shares the buffer; call .clone() on the consumer's side")
    return dlpack.export(buffer_of(self, share=True), self.shape, self.device)

  # ---- internals
  def _new(self, node: Node) -> "Tensor":
    if node.dtype is not self.node.dtype: _check_dtype(self.device, node.dtype)
    t = Tensor.__new__(Tensor)   # same device, already canonical: skip the rest of the constructor
    t.node, t.device, t._ag = node, self.device, None
    return t
  def _view(self, method: str, *args, note: bool = True) -> "Tensor":
    """self through a movement op; a view of self (note_view) where PyTorch's is one, unless note is False (a step
    inside an op that notes its result as a view itself)."""
    t = self._new(moved(self.node, method, *args))
    if self._ag is not None: t = autograd.record(t, autograd.view_rule, (self,), method, args, self.node.shape)
    if note and method in _VIEW_METHODS: note_view(self, t, method, args)
    return t
  def _const(self, v, d: DType | None = None, shape: tuple = ()) -> "Tensor":
    d = d or self.node.dtype
    return self._new(Node(Op.CONST, (), _cast_scalar(v, d), d, shape))
  def _operands(self, other, reverse=False, op_name="op"):
    """Broadcast two operands and promote them to a common dtype (Python scalars are weak)."""
    if isinstance(other, Tensor):
      if other.device != self.device:
        raise ValueError(f"{op_name}: expected both tensors on the same device, got {self.device} and {other.device}")
      n, m = self.node, other.node
      if n.dtype is m.dtype and n.shape == m.shape: return (other, self) if reverse else (self, other)   # nothing to promote or broadcast
      d = dt.promote_types(n.dtype, m.dtype)
      a, b = self.cast(d), other.cast(d)
    else:
      if isinstance(other, (list, tuple, np.ndarray)): other = Tensor(other, device=self.device); return self._operands(other, reverse, op_name)
      d = dt.result_type([self.node.dtype], [other])
      a, b = self.cast(d), self._const(other, d, self.node.shape)   # the constant takes our shape: no broadcast
      return (b, a) if reverse else (a, b)
    if reverse: a, b = b, a
    shape = broadcast_shape(a.shape, b.shape)
    return a._broadcast_to(shape), b._broadcast_to(shape)
  def _broadcast_to(self, shape) -> "Tensor":
    return self if self.node.shape == shape else self.expand(shape)   # expand puts the leading 1s in
  def _ew(self, op: Op, *srcs: "Tensor", dtype: DType | None = None) -> "Tensor":
    n = self.node
    t = self._new(Node(op, (n, *[s.node for s in srcs]), None, dtype or n.dtype, n.shape))
    if self._ag is None:
      for s in srcs:
        if s._ag is not None: break
      else: return t
    return autograd.record(t, autograd.ew_rule, (self, *srcs), op)

  # ---- movement (views; launch nothing)
  def reshape(self, *shape) -> "Tensor":
    shape = _shape_arg(shape)
    if (new := _reshapes.get(key := (self.node.shape, shape))) is None: new = remember(_reshapes, key, _reshape_target(*key))
    return self._reshaped(new)
  view = reshape
  def _reshaped(self, shape: tuple) -> "Tensor":
    """reshape for shapes computed here, already known to fit: no argument checks."""
    return self if shape == self.node.shape else self._view("reshape", shape)
  def permute(self, *order) -> "Tensor":
    if (o := _permutes.get(key := (len(self.node.shape), _shape_arg(order)))) is None: o = remember(_permutes, key, _permute_order(*key))
    return self._view("permute", o)
  def transpose(self, dim0=-2, dim1=-1) -> "Tensor":
    if self.ndim < 2 and (dim0, dim1) == (-2, -1): return self
    a, b = _norm_axis(dim0, self.ndim), _norm_axis(dim1, self.ndim)
    order = list(range(self.ndim))
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  def expand(self, *shape) -> "Tensor":
    if (hit := _expands.get(key := (self.node.shape, _shape_arg(shape)))) is None: hit = remember(_expands, key, _expand_target(*key))
    src, shape = hit
    t = self._reshaped(src)
    return t if shape == src else t._view("expand", shape)
  def squeeze(self, dim=None) -> "Tensor":
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = {_norm_axis(d, self.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))
  def unsqueeze(self, dim) -> "Tensor":
    d = _norm_axis(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def flatten(self, start_dim=0, end_dim=-1) -> "Tensor":
    if self.ndim == 0: return self.reshape(1)
    s, e = _norm_axis(start_dim, self.ndim), _norm_axis(end_dim, self.ndim)
    if s > e: raise ValueError(f"flatten: start_dim ({start_dim}) comes after end_dim ({end_dim})")
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def pad(self, pad_width, value=0) -> "Tensor":
    """NumPy-style ((before, after), ...) per axis, with a constant value."""
    pw = tuple(tuple(plain(x) for x in p) for p in pad_width)
    if len(pw) != self.ndim or any(len(p) != 2 or p[0] < 0 or p[1] < 0 for p in pw):
      raise ValueError(f"pad: expected {self.ndim} non-negative (before, after) pairs for shape {self.shape}, got {pad_width}")
    t = self._view("pad", pw)
    if value == 0: return t
    inside = Tensor.ones(*self.shape, dtype=dt.bool_, device=self.device)._view("pad", pw)
    return where(inside, t, value)
  def shrink(self, arg) -> "Tensor": return self._view("shrink", tuple(tuple(plain(x) for x in a) for a in arg))
  def flip(self, *dims) -> "Tensor":
    """flip(0, 1) or flip((0, 1)), as PyTorch takes either."""
    given = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    dims = {_norm_axis(d, self.ndim) for d in given}
    if len(dims) != len(given): raise ValueError(f"flip: dims {tuple(given)} name a dimension more than once")
    return self._view("stride", tuple(-1 if i in dims else 1 for i in range(self.ndim)))
  def repeat(self, *sizes) -> "Tensor":
    sizes = _shape_arg(sizes)
    if len(sizes) < self.ndim: raise ValueError(f"repeat: {len(sizes)} sizes given for a tensor with {self.ndim} dims")
    base = (1,) * (len(sizes) - self.ndim) + self.shape
    t = self.reshape(tuple(x for s in base for x in (1, s)))
    t = t.expand(tuple(x for r, s in zip(sizes, base) for x in (r, s)))
    return t.reshape(tuple(r * s for r, s in zip(sizes, base)))
  def split(self, split_size, dim=0) -> list["Tensor"]:
    split_size = plain(split_size)
    d = _norm_axis(dim, self.ndim)
    n = self.shape[d]
    if isinstance(split_size, int) and split_size < (1 if n else 0):
      raise ValueError(f"split: split_size must be positive (0 only for an empty dimension), got {split_size} for a dimension of size {n}")
    if isinstance(split_size, int) and split_size == 0: return [self]
    sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else []) if isinstance(split_size, int) else list(split_size)
    if sum(sizes) != n: raise ValueError(f"split: sizes {sizes} don't add up to {n} along dim {dim}")
    out, start = [], 0
    for s in sizes:
      out.append(self.shrink(tuple((start, start + s) if i == d else (0, x) for i, x in enumerate(self.shape))))
      start += s
    return out
  def chunk(self, chunks, dim=0) -> list["Tensor"]:
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
      raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    n = self.shape[_norm_axis(dim, self.ndim)]
    return self.split(max(1, math.ceil(n / chunks)), dim)
  def cat(self, *others, dim=0) -> "Tensor": return cat([self, *others], dim)

  def __getitem__(self, idx) -> "Tensor": return assign.index_view(self, idx, getitem(self, idx))

  # ---- type
  def cast(self, dtype) -> "Tensor":
    if dtype is self.node.dtype: return self
    d = dt.to_dtype(dtype)
    return self if d is self.node.dtype else self._ew(Op.CAST, dtype=d)
  def bitcast(self, dtype) -> "Tensor":
    d = dt.to_dtype(dtype)
    if d.itemsize != self.dtype.itemsize:
      raise TypeError(f"bitcast from {self.dtype.name} ({self.dtype.itemsize} bytes) to {d.name} ({d.itemsize} bytes) needs equal sizes")
    return self if d == self.dtype else self._ew(Op.BITCAST, dtype=d)
  def float(self): return self.cast(dt.float32)
  def half(self): return self.cast(dt.float16)
  def double(self): return self.cast(dt.float64)
  def int(self): return self.cast(dt.int32)
  def long(self): return self.cast(dt.int64)
  def bool(self): return self.cast(dt.bool_)
  def bfloat16(self): return self.cast(dt.bfloat16)

  # ---- elementwise
  def _binary(self, op: Op, other, reverse=False, name="op", out_dtype=None) -> "Tensor":
    n = self.node
    if n.dtype.kind == "f" and (type(other) is float or type(other) is int):
      # float tensor (op) Python number, the commonest case: what _operands does for it, without the calls
      if (c := _recent_constants.get(key := (other, n.dtype, n.shape))) is None:
        c = Node(Op.CONST, (), float(other), n.dtype, n.shape)
        if other != 0:
          if len(_recent_constants) >= RECENT_CONSTANTS: _recent_constants.clear()
          _recent_constants[key] = c
      t = self._new(Node(op, (c, n) if reverse else (n, c), None, out_dtype or n.dtype, n.shape))
      return t if self._ag is None else autograd.record(t, autograd.ew_rule, (None, self) if reverse else (self, None), op)
    a, b = self._operands(other, reverse, name)
    return a._ew(op, b, dtype=out_dtype)
  def add(self, o, alpha=1): return self._binary(Op.ADD, o if alpha == 1 else o * alpha, name="add")
  def sub(self, o, alpha=1): return self._binary(Op.SUB, o if alpha == 1 else o * alpha, name="sub")
  def mul(self, o): return self._binary(Op.MUL, o, name="mul")
  def div(self, o, rounding_mode=None):
    if rounding_mode not in (None, "floor", "trunc"):
      raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    if rounding_mode == "floor": return self.floor_divide(o)
    if rounding_mode == "trunc": return (self / o).trunc() if self._float_div_ok(o) else self._trunc_div(o)
    a, b = self._operands(o, op_name="div")
    if not a.dtype.is_float: a, b = a.cast(dt.default_float), b.cast(dt.default_float)
    return a._ew(Op.DIV, b)
  def _float_div_ok(self, o): return self.dtype.is_float or (isinstance(o, float)) or (isinstance(o, Tensor) and o.dtype.is_float)
  def _trunc_div(self, o):
    a, b = self._operands(o, op_name="div")
    q = a.floor_divide(b)
    return where((q * b != a) & ((a < 0) ^ (b < 0)), q + 1, q)
  def floor_divide(self, o, reverse=False):
    a, b = self._operands(o, reverse, "floor_divide")
    if a.dtype.is_bool: raise TypeError("floor_divide is not defined for bool tensors")
    _check_int_divisor(a, o, reverse, "floor_divide")
    return a._ew(Op.IDIV, b)
  def remainder(self, o, reverse=False):
    a, b = self._operands(o, reverse, "remainder")
    if a.dtype.is_bool: raise TypeError("remainder is not defined for bool tensors")
    _check_int_divisor(a, o, reverse, "remainder")
    return a._ew(Op.MOD, b)
  def pow(self, o, reverse=False):
    a, b = self._operands(o, reverse, "pow")
    if not reverse and not a.dtype.is_float and isinstance(o, (int, np.integer)) and o < 0:
      raise ValueError(f"pow: integers to negative integer powers are not allowed ({a.dtype.name} tensor ** {o}), as in PyTorch")
    if a.dtype.is_bool: a, b = a.cast(dt.int64), b.cast(dt.int64)
    # x ** 2 is x * x: the same correctly rounded value (and wraparound), one multiply instead of pow, as PyTorch does
    if not reverse and isinstance(o, (int, float)) and not isinstance(o, bool) and o == 2: return a * a
    return a._ew(Op.POW, b)
  def maximum(self, o): return self._binary(Op.MAX, o, name="maximum")
  def minimum(self, o): return self._binary(Op.MIN, o, name="minimum")
  def _bitwise(self, op, o, reverse=False):
    a, b = self._operands(o, reverse, op.name.lower())
    if a.dtype.is_float: raise TypeError(f"bitwise {op.name.lower()} needs bool or integer tensors, got {a.dtype.name}")
    return a._ew(op, b)
  def __add__(self, o): return self._binary(Op.ADD, o, name="add")
  def __radd__(self, o): return self._binary(Op.ADD, o, True, name="add")
  def __sub__(self, o): return self._binary(Op.SUB, o, name="sub")
  def __rsub__(self, o): return self._binary(Op.SUB, o, True, name="sub")
  def __mul__(self, o): return self._binary(Op.MUL, o, name="mul")
  def __rmul__(self, o): return self._binary(Op.MUL, o, True, name="mul")
  def __truediv__(self, o): return self.div(o)
  def __rtruediv__(self, o):
    a, b = self._operands(o, True, "div")
    if not a.dtype.is_float: a, b = a.cast(dt.default_float), b.cast(dt.default_float)
    return a._ew(Op.DIV, b)
  def __floordiv__(self, o): return self.floor_divide(o)
  def __rfloordiv__(self, o): return self.floor_divide(o, reverse=True)
  def __mod__(self, o): return self.remainder(o)
  def __rmod__(self, o): return self.remainder(o, reverse=True)
  def __pow__(self, o): return self.pow(o)
  def __rpow__(self, o): return self.pow(o, reverse=True)
  def neg(self): return -self
  def __neg__(self):
    if self.dtype.is_bool: raise TypeError("negation of a bool tensor is not supported; use ~ (logical not) instead")
    return self._ew(Op.NEG)
  def __pos__(self): return self
  def __and__(self, o): return self._bitwise(Op.AND, o)
  def __rand__(self, o): return self._bitwise(Op.AND, o, True)
  def __or__(self, o): return self._bitwise(Op.OR, o)
  def __ror__(self, o): return self._bitwise(Op.OR, o, True)
  def __xor__(self, o): return self._bitwise(Op.XOR, o)
  def __rxor__(self, o): return self._bitwise(Op.XOR, o, True)
  def __lshift__(self, o): return self._bitwise(Op.SHL, o)
  def __rshift__(self, o): return self._bitwise(Op.SHR, o)
  def __invert__(self):
    if self.dtype.is_float: raise TypeError(f"~ (bitwise not) needs bool or integer tensors, got {self.dtype.name}")
    return self._ew(Op.NOT)
  def logical_not(self): return self.cast(dt.bool_)._ew(Op.NOT)
  def isnan(self): return self != self if self.dtype.is_float else self.zeros_like(dtype=dt.bool_)
  def isinf(self): return self.abs() == float("inf") if self.dtype.is_float else self.zeros_like(dtype=dt.bool_)
  def isfinite(self): return (self - self) == 0 if self.dtype.is_float else self.ones_like(dtype=dt.bool_)   # inf - inf is nan
  def nonzero(self, as_tuple=False):
    """The indices of the non-zero elements, (count, ndim) int64; reads the tensor back, since the count is data."""
    where_nz = np.argwhere(self.numpy())
    if as_tuple: return tuple(Tensor(where_nz[:, k].astype(np.int64), device=self.device) for k in range(max(self.ndim, 1)))
    return Tensor(where_nz.astype(np.int64), device=self.device)
  def _cmp(self, op, o, reverse=False):
    a, b = self._operands(o, reverse, "comparison")
    return a._ew(op, b, dtype=dt.bool_)
  def __lt__(self, o): return self._cmp(Op.CMPLT, o)
  def __le__(self, o): return self._cmp(Op.CMPLE, o)
  def __gt__(self, o): return self._cmp(Op.CMPLT, o, True)
  def __ge__(self, o): return self._cmp(Op.CMPLE, o, True)
  def __eq__(self, o): return self._cmp(Op.CMPEQ, o)
  def __ne__(self, o): return self._cmp(Op.CMPNE, o)
  eq, ne, lt, le = __eq__, __ne__, __lt__, __le__
  def gt(self, o): return self.__gt__(o)
  def ge(self, o): return self.__ge__(o)
  __hash__ = object.__hash__

  def where(self, condition, other) -> "Tensor":
    """PyTorch's Tensor.where: self where condition holds, other elsewhere (see where(condition, x, y))."""
    return where(condition, self, other)
  def clamp(self, min=None, max=None):
    if min is None and max is None: raise ValueError("clamp: at least one of min and max must be given")
    t = self
    if min is not None: t = t.maximum(min)
    if max is not None: t = t.minimum(max)
    return t
  clip = clamp
  def _float_unary(self, op: Op) -> "Tensor":
    t = self if self.dtype.is_float else self.cast(dt.default_float)
    return t._ew(op)
  def abs(self): return self._new(self.node) if self.dtype.is_bool or self.dtype.is_unsigned else self._ew(Op.ABS)
  def sign(self):
    if self.dtype.is_bool: return self._new(self.node)
    return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
  def exp(self): return self._float_unary(Op.EXP)
  def exp2(self): return self._float_unary(Op.EXP2)
  def log(self): return self._float_unary(Op.LOG)
  def log2(self): return self._float_unary(Op.LOG2)
  def sqrt(self): return self._float_unary(Op.SQRT)
  def rsqrt(self): return self._float_unary(Op.RSQRT)
  def reciprocal(self): return self._float_unary(Op.RECIP)
  def sin(self): return self._float_unary(Op.SIN)
  def cos(self): return self._float_unary(Op.COS)
  def tan(self): return self._float_unary(Op.TAN)
  def tanh(self): return self._float_unary(Op.TANH)
  def erf(self): return self._float_unary(Op.ERF)
  def _activation(self, fn) -> "Tensor":
    """fn(self) for an activation of several steps: integers as the default float; 16-bit floats computed in float32
    and rounded once, as PyTorch's kernels compute them, not rounded after every step (which also costs a conversion
    pair a step where it is a matmul's epilogue)."""
    t = self if self.dtype.is_float else self.cast(dt.default_float)
    inner = _accumulator(t.dtype)
    return fn(t) if inner is t.dtype else fn(t.cast(inner)).cast(t.dtype)
  def sigmoid(self): return self._activation(lambda t: (1 + (-t).exp()).reciprocal())
  def relu(self): return where(self < 0, 0, self)   # NaN and -0.0 pass through, as in PyTorch
  def gelu(self, approximate="none"):
    if approximate == "tanh": return self._activation(lambda t: 0.5 * t * (1 + (math.sqrt(2 / math.pi) * (t + 0.044715 * t * t * t)).tanh()))
    return self._activation(lambda t: 0.5 * t * (1 + (t * (1 / math.sqrt(2))).erf()))
  def silu(self): return self._activation(lambda t: t * (1 + (-t).exp()).reciprocal())
  def _round_op(self, op):
    return self._new(self.node) if not self.dtype.is_float else self._ew(op)   # a new tensor: an in-place change to it leaves self
  def floor(self): return self._round_op(Op.FLOOR)
  def ceil(self): return self._round_op(Op.CEIL)
  def round(self): return self._round_op(Op.ROUND)
  def trunc(self): return self._round_op(Op.TRUNC)
  def square(self): return self * self
  def lerp(self, end, weight): return self + (end - self) * weight

  # ---- reductions
  def _axes(self, dim) -> tuple:
    ndim = len(self.node.shape)
    # dims of plain ints are checked once per ndim (a traced number is baked by _norm_axis, not by hashing it here)
    plain_dims = type(dim) is int or type(dim) is tuple and _ONLY_INT.issuperset(map(type, dim))
    if plain_dims and (hit := _axes_of.get((ndim, dim))) is not None: return hit
    return remember(_axes_of, (ndim, dim), _axes_for(ndim, dim)) if plain_dims else _axes_for(ndim, dim)
  def _reduce(self, op: Op, dim, keepdim: bool) -> "Tensor":
    axes = self._axes(dim)
    if self.ndim == 0: return self
    if (shapes := _reduced.get(key := (self.node.shape, axes))) is None: shapes = remember(_reduced, key, _reduced_shapes(*key))
    if self._ag is not None:
      with autograd.no_grad(): t = self.detach()._reduce(op, dim, keepdim)
      return autograd.record(t, autograd.reduce_rule, (self,), op, axes, shapes[0], self.shape, self.detach())
    t = self._new(Node(Op.REDUCE, (self.node,), (op, axes), self.dtype, shapes[0]))   # a long one is split by the schedule (schedule/split.py)
    return t if keepdim else t._reshaped(shapes[1])
  def sum(self, dim=None, keepdim=False, dtype=None):
    d = dt.to_dtype(dtype) if dtype is not None else (dt.int64 if self.dtype.is_int or self.dtype.is_bool else self.dtype)
    acc = _accumulator(d)
    return self.cast(acc)._reduce(Op.ADD, dim, keepdim).cast(d)
  def prod(self, dim=None, keepdim=False, dtype=None):
    d = dt.to_dtype(dtype) if dtype is not None else (dt.int64 if self.dtype.is_int or self.dtype.is_bool else self.dtype)
    acc = _accumulator(d)
    return self.cast(acc)._reduce(Op.MUL, dim, keepdim).cast(d)
  def mean(self, dim=None, keepdim=False, dtype=None):
    d = dt.to_dtype(dtype) if dtype is not None else self.dtype
    if not d.is_float: raise TypeError(f"mean: input dtype must be floating point, got {d.name}; pass dtype= or cast first")
    n = prod(self.shape[a] for a in self._axes(dim))
    s = self.cast(d).sum(dim, keepdim, dtype=_accumulator(d))   # a 16-bit sum can overflow where the mean does not
    return (s / n if n else s * float("nan")).cast(d)
  def _check_nonempty(self, name, dim):
    for a in self._axes(dim):
      if self.shape[a] == 0: raise IndexError(f"{name}: cannot reduce over dim {a} of size 0 in shape {self.shape}")
  def amax(self, dim=None, keepdim=False): self._check_nonempty("amax", dim); return self._reduce(Op.MAX, dim, keepdim)
  def amin(self, dim=None, keepdim=False): self._check_nonempty("amin", dim); return self._reduce(Op.MIN, dim, keepdim)
  def max(self, dim=None, keepdim=False):
    if dim is None or isinstance(dim, (tuple, list)): return self.amax(dim, keepdim)
    if isinstance(dim, Tensor): return self.maximum(dim)
    return MaxResult(self.amax(dim, keepdim), self.argmax(dim, keepdim))
  def min(self, dim=None, keepdim=False):
    if dim is None or isinstance(dim, (tuple, list)): return self.amin(dim, keepdim)
    if isinstance(dim, Tensor): return self.minimum(dim)
    return MaxResult(self.amin(dim, keepdim), self.argmin(dim, keepdim))
  def _arg_extreme(self, dim, keepdim, largest: bool) -> "Tensor":
    if dim is None: return self.flatten()._arg_extreme(0, False, largest).reshape(() if not keepdim else (1,) * self.ndim)
    a = _norm_axis(dim, self.ndim)
    if self.ndim == 0: return Tensor.zeros((), dtype=dt.int64, device=self.device)   # PyTorch: the one element's index
    self._check_nonempty("argmax" if largest else "argmin", a)
    m = self.amax(a, keepdim=True) if largest else self.amin(a, keepdim=True)
    n = self.shape[a]
    idx = _index_tensor(n, self.device).reshape(tuple(n if i == a else 1 for i in range(self.ndim)))
    hit = (self == m) | (self != self)   # a NaN wins, as in torch
    return where(hit, idx, n).amin(a, keepdim).cast(dt.int64)
  def argmax(self, dim=None, keepdim=False): return self._arg_extreme(dim, keepdim, True)
  def argmin(self, dim=None, keepdim=False): return self._arg_extreme(dim, keepdim, False)
  def any(self, dim=None, keepdim=False): return self.cast(dt.bool_)._reduce(Op.MAX, dim, keepdim)
  def all(self, dim=None, keepdim=False): return self.cast(dt.bool_)._reduce(Op.MIN, dim, keepdim)
  def var(self, dim=None, keepdim=False, correction=1, unbiased=None):
    if unbiased is not None: correction = 1 if unbiased else 0
    out = self.dtype if self.dtype.is_float else dt.default_float
    t = self.cast(_accumulator(out))
    n = prod(t.shape[a] for a in t._axes(dim))
    d = t - t.mean(dim, keepdim=True)
    # PyTorch divides by max(0, n - correction): a sum over zero degrees of freedom is inf (or nan where it is 0)
    return ((d * d).sum(dim, keepdim) / max(0, n - correction)).cast(out)
  def std(self, dim=None, keepdim=False, correction=1, unbiased=None): return self.var(dim, keepdim, correction, unbiased).sqrt()
  def _stable_max(self, dim):
    """The max along dim, subtracted before exp so it cannot overflow; 0 where there is nothing to take the max of
    (an empty dim: PyTorch gives an empty softmax and a logsumexp of -inf there, not an error)."""
    if any(self.shape[a] == 0 for a in self._axes(dim)): return 0.0
    return self.amax(dim, keepdim=True)
  def _float_input(self, dtype=None) -> tuple["Tensor", DType]:
    """This tensor as the softmax family computes it (16-bit floats in float32, as PyTorch does), and the result's dtype."""
    out = dt.to_dtype(dtype) if dtype is not None else self.dtype if self.dtype.is_float else dt.default_float
    return self.cast(out).cast(_accumulator(out)), out
  def logsumexp(self, dim=None, keepdim=False):
    t, out_dtype = self._float_input()
    m = t._stable_max(dim)
    if isinstance(m, Tensor): m = where(m.abs() == float("inf"), 0, m)   # keep exp finite when a row is all +-inf
    out = (t - m).exp().sum(dim, keepdim=True).log() + m
    return (out if keepdim else out.squeeze(t._axes(dim)) if t.ndim else out).cast(out_dtype)
  def softmax(self, dim=-1, dtype=None):
    t, out_dtype = self._float_input(dtype)
    e = (t - t._stable_max(dim)).exp()
    return (e * e.sum(dim, keepdim=True).reciprocal()).cast(out_dtype)   # one division per row: a divide costs 5x a multiply
  def log_softmax(self, dim=-1, dtype=None):
    t, out_dtype = self._float_input(dtype)
    s = t - t._stable_max(dim)
    return (s - s.exp().sum(dim, keepdim=True).log()).cast(out_dtype)
  def cumsum(self, dim=0, dtype=None):
    a = _norm_axis(dim, self.ndim)
    if self.ndim == 0: return self.reshape(1).cumsum(0, dtype=dtype).reshape(())
    d = dt.to_dtype(dtype) if dtype is not None else (dt.int64 if self.dtype.is_int or self.dtype.is_bool else self.dtype)
    t = self.cast(d).transpose(a, -1)
    n = t.shape[-1]
    if n == 0: return self.cast(d)
    # window view: out[..., j] = sum_k xp[..., j + k] with xp zero-padded by n-1 on the left
    xp = t.pad(((0, 0),) * (t.ndim - 1) + ((n - 1, 0),))
    win = xp._window(n)
    return win.sum(-1).transpose(a, -1)
  def _window(self, n: int) -> "Tensor":
    """(..., 2n-1) -> (..., n, n) with element [..., j, k] = self[..., j + k]."""
    if self._ag is not None:
      return autograd.record(self.detach()._window(n), autograd.window_rule, (self,), n, self.shape)
    lead = self.shape[:-1]
    t = self.reshape(prod(lead), 2 * n - 1) if lead else self.reshape(1, 2 * n - 1)
    t = t.contiguous() if not (t.node.op is Op.VIEW and t.node.arg.is_contiguous) else t
    base = t.node.src[0] if t.node.op is Op.VIEW else t.node
    st = ShapeTracker.contiguous(base.shape).reshape((prod(lead) if lead else 1, 2 * n - 1))
    st = ShapeTracker(st.views[:-1] + (View.create((st.shape[0], n, n), (2 * n - 1, 1, 1), 0),))
    w = self._new(Node(Op.VIEW, (base,), st, self.dtype, st.shape))
    return w.reshape(lead + (n, n))

  # ---- linear algebra
  def matmul(self, other: "Tensor") -> "Tensor":
    if not isinstance(other, Tensor): raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
    a, b = self, other
    if a.ndim == 0 or b.ndim == 0: raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes {a.shape} and {b.shape}")
    if a.device != b.device: raise ValueError(f"matmul: expected both tensors on the same device, got {a.device} and {b.device}")
    d = dt.promote_types(a.dtype, b.dtype)
    a, b = a.cast(d), b.cast(d)
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a: a = a.reshape(1, -1)
    if squeeze_b: b = b.reshape(-1, 1)
    if a.shape[-1] != b.shape[-2]:
      raise ValueError(f"matmul: shapes {self.shape} and {other.shape} are not aligned: {a.shape[-1]} (dim -1) != {b.shape[-2]} (dim -2)")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    n, k, m = a.shape[-2], a.shape[-1], b.shape[-1]
    acc = _accumulator(d)
    if a._ag is None and b._ag is None and acc is d and k:   # nothing to record: the same graph from the nodes directly
      out = self._new(_matmul_node(a.node, b.node, batch, n, k, m))
    else:
      x = a._broadcast_to(batch + (n, k)).reshape(batch + (n, 1, k))
      y = b._broadcast_to(batch + (k, m)).transpose(-1, -2).reshape(batch + (1, m, k))
      out = (x.cast(acc) * y.cast(acc))._reduce(Op.ADD, -1, False).cast(d) if k else Tensor.zeros(*(batch + (n, m)), dtype=d, device=self.device)
    if squeeze_a: out = out.squeeze(-2)
    if squeeze_b: out = out.squeeze(-1)
    return out
  __matmul__ = matmul
  def __rmatmul__(self, other): return Tensor(other, device=self.device).matmul(self)
  def dot(self, other: "Tensor") -> "Tensor":
    if self.ndim != 1 or other.ndim != 1: raise ValueError(f"dot: expected 1-D tensors, got shapes {self.shape} and {other.shape}")
    return self.matmul(other)

def _accept_axis(fn):
  """NumPy spelling: reductions take axis= as well as dim=."""
  def wrapper(self, *args, axis=None, **kw):
    if axis is not None: kw["dim"] = axis
    return fn(self, *args, **kw)
  wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
  return wrapper
for _name in ("sum", "prod", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "any", "all", "var", "std",
              "logsumexp", "softmax", "log_softmax", "cumsum"):
  setattr(Tensor, _name, _accept_axis(getattr(Tensor, _name)))

# ---- module-level helpers and functions

def _shape_arg(shape) -> tuple:
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = shape[0]
  if isinstance(shape, int): shape = (shape,)
  out = tuple(shape)
  if _ONLY_INT.issuperset(map(type, out)): return out   # all plain ints (no bool), checked without a Python frame per entry
  out = tuple(plain(s) for s in out)
  for s in out:
    if not isinstance(s, (int, np.integer)) or isinstance(s, bool): raise TypeError(f"shape entries must be ints, got {out}")
  return tuple(int(s) for s in out)

# Shape ops' checked answers by (the tensor's shape or ndim, the arguments as _shape_arg gives them): a graph repeats
# the same few shapes, so each is checked once (helpers.remember bounds them)
_ONLY_INT = frozenset((int,))
_reshapes: dict = {}
_axes_of: dict = {}    # (ndim, dim) -> Tensor._axes's answer
_reduced: dict = {}    # (shape, axes) -> (the shape with those axes kept as 1s, without them)
_permutes: dict = {}
_expands: dict = {}

def _axes_for(ndim: int, dim) -> tuple:
  """The sorted axes a reduction over dim (None: all) of an ndim tensor takes, or the error of a bad dim."""
  if dim is None: return tuple(range(ndim))
  dims = dim if isinstance(dim, (tuple, list)) else (dim,)
  out = tuple(sorted({_norm_axis(d, ndim) for d in dims}))
  if len(out) != len(dims): raise ValueError(f"dim {dim} repeats a dimension")
  return out if ndim else ()   # a 0-d tensor takes dim 0 and -1, as PyTorch's does, and has no axis to reduce

def _reduced_shapes(shape: tuple, axes: tuple) -> tuple:
  """(shape with the axes kept as 1s, shape without them): a reduction's result with keepdim and without."""
  return tuple(1 if i in axes else s for i, s in enumerate(shape)), tuple(s for i, s in enumerate(shape) if i not in axes)

def _reshape_target(old: tuple, shape: tuple) -> tuple:
  """The shape reshape(shape) gives a tensor of shape old (-1 filled in), or the error of a shape that does not fit."""
  numel = prod(old)
  if shape.count(-1) > 1: raise ValueError(f"reshape: only one dimension can be -1, got {shape}")
  if -1 in shape:
    known = prod(s for s in shape if s != -1)
    if known == 0 or numel % known: raise ValueError(f"cannot reshape tensor of shape {old} into {shape}")
    shape = tuple(numel // known if s == -1 else s for s in shape)
  if any(s < 0 for s in shape): raise ValueError(f"reshape: invalid shape {shape}")
  if prod(shape) != numel: raise ValueError(f"cannot reshape tensor of shape {old} ({numel} elements) into shape {shape}")
  return shape

def _permute_order(ndim: int, order: tuple) -> tuple:
  """permute's order with negative dims resolved, or the error of one that is not a permutation of ndim dims."""
  if len(order) != ndim: raise ValueError(f"permute: got {len(order)} dims {order} for a tensor with {ndim} dims")
  order = tuple(_norm_axis(o, ndim) for o in order)
  if sorted(order) != list(range(ndim)): raise ValueError(f"permute: {order} is not a permutation of {ndim} dims")
  return order

def _expand_target(old: tuple, shape: tuple) -> tuple:
  """(old with leading 1s up to the target's dims, the target with -1 filled in) for expand(shape) of a tensor of
  shape old, or the error of a target old does not broadcast to."""
  if len(shape) < len(old): raise ValueError(f"expand: target shape {shape} has fewer dims than the tensor's {old}")
  src = (1,) * (len(shape) - len(old)) + old
  shape = tuple(s if n == -1 else n for s, n in zip(src, shape))
  for s, n in zip(src, shape):
    if s != n and s != 1: raise ValueError(f"expand: the size {s} of shape {old} must match {n} in {shape} (or be 1)")
  return src, shape

def _rebuild(values: np.ndarray, dtype: str, device: str) -> Tensor: return Tensor(values, dtype=dtype, device=device)

def from_dlpack(x, device=None) -> Tensor:
  """A Tensor holding a copy of a DLPack producer's values (NumPy, PyTorch, ...): a CUDA array is copied device to
  device on its GPU, a CPU array into a CPU buffer; `device` moves the result."""
  buf, shape, name = dlpack.import_array(x)
  t = Tensor(_buffer_view(buf, shape), device=name)
  return t.to(device) if device is not None else t

def _size_arg(shape, what: str) -> tuple:
  """The shape of a tensor being made: _shape_arg, and no negative size."""
  shape = _shape_arg(shape if isinstance(shape, (tuple, list)) else (shape,))
  if any(s < 0 for s in shape): raise ValueError(f"{what}: sizes must be non-negative, got shape {shape}")
  return shape

def _expanded(n: Node, shape: tuple) -> Node:
  """Tensor._broadcast_to on a node: the same views."""
  if n.shape == shape: return n
  if (hit := _expands.get(key := (n.shape, shape))) is None: hit = remember(_expands, key, _expand_target(*key))
  src, shape = hit
  if src != n.shape: n = moved(n, "reshape", src)
  return n if shape == src else moved(n, "expand", shape)

def _matmul_node(a: Node, b: Node, batch: tuple, n: int, k: int, m: int) -> Node:
  """The node Tensor.matmul's ops make for a @ b (batch + (n, k) @ batch + (k, m), accumulating in their dtype), made
  from the nodes: a matmul with no gradient to record pays for no Tensor, autograd check or view note per step (the
  eager matmul's graph building was half its host time)."""
  x = _expanded(moved(_expanded(a, batch + (n, k)), "reshape", batch + (n, 1, k)), batch + (n, m, k))
  order = tuple(range(len(batch))) + (len(batch) + 1, len(batch))
  y = moved(moved(_expanded(b, batch + (k, m)), "permute", order), "reshape", batch + (1, m, k))
  y = _expanded(y, batch + (n, m, k))
  axes = (len(batch) + 2,)
  if (shapes := _reduced.get(key := (x.shape, axes))) is None: shapes = remember(_reduced, key, _reduced_shapes(*key))
  r = Node(Op.REDUCE, (Node(Op.MUL, (x, y), None, a.dtype, x.shape),), (Op.ADD, axes), a.dtype, shapes[0])
  return moved(r, "reshape", shapes[1])

def _accumulator(d: DType) -> DType:
  """The dtype sums of d accumulate in: 16-bit floats in float32, as PyTorch does, so a long sum cannot overflow."""
  return dt.float32 if d in (dt.float16, dt.bfloat16) else d

def _check_int_divisor(a: Tensor, o, reverse: bool, what: str) -> None:
  """An integer division by a Python 0 raises at the call, as PyTorch's does; a divisor tensor holding 0 gives 0 (see
  docs/reliability.md): checking it would read the tensor back."""
  if not reverse and not a.dtype.is_float and isinstance(o, (int, np.integer)) and not isinstance(o, bool) and o == 0:
    raise ZeroDivisionError(f"{what}: integer division by zero")

def _index_tensor(n: int, device=None) -> Tensor:
  """0..n-1 as int32, computed where it is used (no buffer, O(n)); int64 from 2^31 elements, where n itself (argmax's
  sentinel) no longer fits int32."""
  n = plain(n)
  device = canonical_device(device) if device else default_device()
  return Tensor(Node(Op.ARANGE, (), None, dt.int32 if n <= INT32_MAX else dt.int64, (n,)), device=device)

def _rotl(x: Tensor, r: int) -> Tensor: return (x << r) | (x >> (32 - r))

def _threefry2x32(x0: Tensor, x1: Tensor, k0: Tensor, k1: Tensor):
  rot = (13, 15, 26, 6, 17, 29, 16, 24)
  k2 = k0 ^ k1 ^ 0x1BD11BDA
  ks = (k0, k1, k2)
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(5):
    for r in rot[(i % 2) * 4:(i % 2) * 4 + 4]:
      x0 = x0 + x1
      x1 = _rotl(x1, r) ^ x0
    x0 = x0 + ks[(i + 1) % 3]
    x1 = x1 + ks[(i + 2) % 3] + (i + 1)
  return x0, x1

def where(condition: Tensor, x, y) -> Tensor:
  """x where condition holds, y elsewhere (torch.where); x and y may be Python numbers."""
  if not isinstance(condition, Tensor): raise TypeError(f"where: the condition must be a Tensor, got {type(condition).__name__}")
  cond = condition if condition.dtype.is_bool else condition.cast(dt.bool_)
  tensors = [t for t in (x, y) if isinstance(t, Tensor)]
  scalars = [s for s in (x, y) if not isinstance(s, Tensor)]
  for t in tensors:
    if t.device != cond.device: raise ValueError(f"where: expected all tensors on {cond.device}, got {t.device}")
  d = dt.result_type([t.dtype for t in tensors], scalars)
  xs = [t.cast(d) if isinstance(t, Tensor) else cond._const(t, d) for t in (x, y)]
  shape = broadcast_shape(cond.shape, xs[0].shape, xs[1].shape)
  c, a, b = cond._broadcast_to(shape), xs[0]._broadcast_to(shape), xs[1]._broadcast_to(shape)
  return c._ew(Op.WHERE, a, b, dtype=d)

def cat(tensors: Sequence[Tensor], dim=0) -> Tensor:
  tensors = list(tensors)
  if not tensors: raise ValueError("cat: expected a non-empty list of tensors")
  ref = tensors[0]
  d = _norm_axis(dim, ref.ndim)
  for t in tensors[1:]:
    if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
      raise ValueError(f"cat: shapes {[tuple(t.shape) for t in tensors]} must match except in dim {d}")
    if t.device != ref.device: raise ValueError(f"cat: expected all tensors on {ref.device}, got {t.device}")
  out_dtype = dt.promote_types(*[t.dtype for t in tensors])
  total = sum(t.shape[d] for t in tensors)
  out, start = None, 0
  for t in tensors:
    n = t.shape[d]
    widths = tuple((start, total - start - n) if i == d else (0, 0) for i in range(t.ndim))
    part = t.cast(out_dtype).pad(widths)
    # select, not add: adding the zero padding would turn -0.0 into +0.0
    inside = Tensor.ones(*t.shape, dtype=dt.bool_, device=t.device).pad(widths)
    out = part if out is None else where(inside, part, out)
    start += n
  return out

def stack(tensors: Sequence[Tensor], dim=0) -> Tensor:
  tensors = list(tensors)
  if not tensors: raise ValueError("stack: expected a non-empty list of tensors")
  if not all_same(t.shape for t in tensors): raise ValueError(f"stack: all tensors must have the same shape, got {[t.shape for t in tensors]}")
  d = _norm_axis(dim, tensors[0].ndim + 1)
  return cat([t.unsqueeze(d) for t in tensors], d)

from alloy import assign, inplace, scatter   # noqa: E402  t[idx] = v, the in-place ops and the scatter family: methods bound there
inplace.install(Tensor)
scatter.install(Tensor)
