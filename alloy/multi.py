"""Sharded tensors: one logical tensor held as one Tensor per device, split along one axis or replicated (the model:
tinygrad's multi-device Tensor and JAX's sharding, kept small).

`t.shard(devices, axis=None)` (or `shard(t, devices, axis)`) gives a ShardedTensor: axis None copies t to every
device (replicated), an int splits it there into equal parts, part k on devices[k]. Operations run on every shard,
and where one needs data of another device the collective it needs is inserted (alloy/collectives.py):
- elementwise ops with Python numbers, or with another ShardedTensor on the same devices; a replicated operand
  meeting one split along an axis it spans is sliced locally (no communication), two split along different axes
  gather one first (all-gather);
- a reduction (sum, mean, max, min) over axes that leave the split axis runs per shard and stays split; one over
  the split axis reduces each shard, then all-reduces (sum, max or min): the result is replicated;
- matmul (`@`, right operand 2-D): rows split -> rows split; right operand split by columns -> columns split; the
  contraction split (either side; a replicated side is sliced locally) -> per-shard partial products, all-reduced;
- views that keep the split axis whole: permute/transpose/T, reshape/flatten;
- `.to(device)` and `.numpy()` gather (shards to one device, concatenated); `.gather()` all-gathers to replicated.

Autograd goes through the per-shard ops and the collectives' adjoints. A replicated ShardedTensor that requires grad
holds one leaf per device; its `.grad` is the all-reduce (sum) of the leaves' gradients, since a replicated value
used by the shards of a split computation gets a partial gradient on each device (the adjoint of replication is a
sum). `.backward()` of a replicated scalar starts from one replica: the others are the same value, reached
through the all-reduces that made them.
"""
from __future__ import annotations
import math
import numpy as np
from alloy import collectives
from alloy.realize_tensors import realize
from alloy.runtime.registry import canonical_device, default_device
from alloy.tensor import Tensor, broadcast_shape, cat, norm_axis

def devices_of(devices, like: str | None = None) -> tuple[str, ...]:
  """Canonical names of `devices`: a list of names, or a count n (devices 0..n-1 of the kind of the device `like`,
  the tensor being sharded; else of the default device's kind)."""
  if isinstance(devices, int):
    if devices < 1: raise ValueError(f"shard: {devices} devices; give at least 1")
    kind = (like or default_device()).partition(":")[0]
    devices = [f"{kind}:{i}" for i in range(devices)]
  if isinstance(devices, str): devices = [d for d in devices.split(",") if d]
  names = tuple(canonical_device(d) for d in devices)
  if not names: raise ValueError("shard: no devices given")
  if len(set(names)) != len(names): raise ValueError(f"shard: a device appears twice among {list(names)}")
  return names

def _part(t: Tensor, axis: int, k: int, n: int) -> Tensor:
  size = t.shape[axis] // n
  return t.shrink(tuple((k * size, (k + 1) * size) if i == axis else (0, s) for i, s in enumerate(t.shape)))

def shard(t: Tensor, devices, axis: int | None = None) -> "ShardedTensor":
  """t split along axis into one equal part per device (axis None: a copy on every device)."""
  if isinstance(t, ShardedTensor):
    return t.reshard(axis) if devices_of(devices, t.devices[0]) == t.devices else shard(t.to(t.devices[0]), devices, axis)
  devs = devices_of(devices, t.device)
  if axis is None: return ShardedTensor([t if t.device == d else t.to(d) for d in devs], None)
  ax = norm_axis(axis, t.ndim)
  if t.shape[ax] % len(devs):
    raise ValueError(f"shard: axis {ax} of size {t.shape[ax]} does not split evenly over {len(devs)} devices")
  return ShardedTensor([_part(t, ax, k, len(devs)).to(d) for k, d in enumerate(devs)], ax)

_ELEMENTWISE = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu", "silu",
                "abs", "sign", "neg", "reciprocal", "square", "floor", "ceil", "round", "trunc", "cast", "float", "half",
                "bfloat16", "double", "int", "long", "bool", "contiguous", "detach", "clone", "leaky_relu", "clip", "clamp",
                "isnan", "isfinite", "logical_not", "erf", "softplus", "pow", "maximum", "minimum"}

class ShardedTensor:
  """shards: one Tensor per device (distinct devices, equal shapes); axis: where the logical tensor is split (the
  shards are its consecutive parts), or None: every shard holds the whole value."""
  __slots__ = ("shards", "axis")
  def __init__(self, shards, axis: int | None):
    shards = list(shards)
    if not shards or not all(isinstance(s, Tensor) for s in shards): raise TypeError("ShardedTensor: expected a list of Tensors, one per device")
    devices = [s.device for s in shards]
    if len(set(devices)) != len(devices): raise ValueError(f"ShardedTensor: a device appears twice among {devices}")
    for s in shards:
      if s.shape != shards[0].shape or s.dtype is not shards[0].dtype:
        raise ValueError(f"ShardedTensor: shards of {[(x.shape, x.dtype.name) for x in shards]}; they need one shape and dtype")
    if axis is not None and not 0 <= axis < shards[0].ndim: raise ValueError(f"ShardedTensor: axis {axis} for shards of shape {shards[0].shape}")
    self.shards, self.axis = shards, axis

  # ---- what it is
  @property
  def devices(self) -> tuple[str, ...]: return tuple(s.device for s in self.shards)
  @property
  def device(self) -> tuple[str, ...]: return self.devices
  @property
  def dtype(self): return self.shards[0].dtype
  @property
  def shape(self) -> tuple:
    s = self.shards[0].shape
    return s if self.axis is None else s[:self.axis] + (s[self.axis] * len(self.shards),) + s[self.axis + 1:]
  @property
  def ndim(self) -> int: return self.shards[0].ndim
  def numel(self) -> int: return math.prod(self.shape)
  def size(self, dim=None): return self.shape if dim is None else self.shape[norm_axis(dim, self.ndim)]
  def __len__(self): return self.shape[0]
  def __repr__(self):
    how = "replicated" if self.axis is None else f"split on axis {self.axis}"
    return f"<ShardedTensor {self.shape} {self.dtype.name} {how} over {', '.join(self.devices)}>"
  def _like(self, shards, axis="same") -> "ShardedTensor": return ShardedTensor(shards, self.axis if axis == "same" else axis)

  # ---- realizing and gathering
  def realize(self) -> "ShardedTensor":
    realize(self.shards)
    return self
  def numpy(self) -> np.ndarray:
    if self.axis is None: return self.shards[0].numpy()
    realize(self.shards)
    return np.concatenate([s.numpy() for s in self.shards], axis=self.axis)
  def item(self):
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.shards[0].item() if self.axis is None else self.numpy().reshape(()).item()
  def tolist(self): return self.numpy().tolist()
  def to(self, device) -> Tensor:
    """The whole value on one device (a Tensor): a replica, or the shards copied there and concatenated."""
    dev = canonical_device(device)
    if self.axis is None:
      here = [s for s in self.shards if s.device == dev]
      return here[0] if here else self.shards[0].to(dev)
    return cat([s if s.device == dev else s.to(dev) for s in self.shards], self.axis)
  def gather(self) -> "ShardedTensor":
    """Replicated: every device gets the whole value (an all-gather of the shards)."""
    if self.axis is None: return self
    return ShardedTensor(collectives.all_gather(self.shards, self.axis), None)
  def reshard(self, axis: int | None) -> "ShardedTensor":
    """The same value split along `axis` (None: replicated); from replicated each device keeps its part, no copy."""
    if axis is not None: axis = norm_axis(axis, self.ndim)
    if axis == self.axis: return self
    whole = self.gather()
    if axis is None: return whole
    if self.shape[axis] % len(self.shards):
      raise ValueError(f"reshard: axis {axis} of size {self.shape[axis]} does not split evenly over {len(self.shards)} devices")
    return ShardedTensor([_part(s, axis, k, len(self.shards)) for k, s in enumerate(whole.shards)], axis)

  # ---- elementwise
  def _peer(self, other, what: str) -> "ShardedTensor":
    if isinstance(other, ShardedTensor):
      if other.devices != self.devices:
        raise ValueError(f"{what}: sharded over {list(self.devices)} and {list(other.devices)}; shard both over the same devices")
      return other
    if isinstance(other, Tensor):
      raise ValueError(f"{what}: a ShardedTensor over {list(self.devices)} and a Tensor on {other.device}; shard the Tensor first "
                       f"(t.shard(devices) to replicate it)")
    return other

  def _split_as(self, axis: int, ndim: int) -> "ShardedTensor":
    """A replicated operand about to meet shards split on output axis `axis` (of ndim): each device keeps the part
    it needs where this operand spans that axis; where it broadcasts there (size 1 or absent) it stays whole."""
    mine = axis - (ndim - self.ndim)
    if mine < 0 or self.shape[mine] == 1: return self
    return self.reshard(mine)

  def _zip(self, fn, other, what: str) -> "ShardedTensor":
    other = self._peer(other, what)
    if not isinstance(other, ShardedTensor): return self._like([fn(s, other) for s in self.shards])
    ndim = len(broadcast_shape(self.shape, other.shape))
    a, b = self._out_axis(ndim), other._out_axis(ndim)
    x, y = self, other
    if a is not None and b is not None and a != b: y, b = other.gather(), None   # split two ways: gather one side
    if a is None and b is not None: x = self._split_as(b, ndim)
    elif b is None and a is not None: y = y._split_as(a, ndim)
    out = a if a is not None else b
    return ShardedTensor([fn(s, t) for s, t in zip(x.shards, y.shards)], out)

  def _out_axis(self, ndim: int) -> int | None: return None if self.axis is None else self.axis + ndim - self.ndim

  def __add__(self, o): return self._zip(lambda a, b: a + b, o, "add")
  def __radd__(self, o): return self._zip(lambda a, b: b + a, o, "add")
  def __sub__(self, o): return self._zip(lambda a, b: a - b, o, "sub")
  def __rsub__(self, o): return self._zip(lambda a, b: b - a, o, "sub")
  def __mul__(self, o): return self._zip(lambda a, b: a * b, o, "mul")
  def __rmul__(self, o): return self._zip(lambda a, b: b * a, o, "mul")
  def __truediv__(self, o): return self._zip(lambda a, b: a / b, o, "div")
  def __rtruediv__(self, o): return self._zip(lambda a, b: b / a, o, "div")
  def __pow__(self, o): return self._zip(lambda a, b: a ** b, o, "pow")
  def __neg__(self): return self._like([-s for s in self.shards])
  def __lt__(self, o): return self._zip(lambda a, b: a < b, o, "lt")
  def __gt__(self, o): return self._zip(lambda a, b: a > b, o, "gt")
  def __le__(self, o): return self._zip(lambda a, b: a <= b, o, "le")
  def __ge__(self, o): return self._zip(lambda a, b: a >= b, o, "ge")
  def __eq__(self, o): return self._zip(lambda a, b: a == b, o, "eq")
  def __ne__(self, o): return self._zip(lambda a, b: a != b, o, "ne")
  __hash__ = object.__hash__
  def __getattr__(self, name: str):
    if name in _ELEMENTWISE:
      def per_shard(*args, **kw):
        args = [self._peer(a, name) for a in args]
        if any(isinstance(a, ShardedTensor) for a in args):   # a binary method: the second operand goes through _zip
          (o,) = args
          return self._zip(lambda s, t: getattr(s, name)(t, **kw), o, name)
        return self._like([getattr(s, name)(*args, **kw) for s in self.shards])
      return per_shard
    raise AttributeError(f"ShardedTensor has no attribute {name!r} (sharded ops: elementwise, sum/mean/max/min, matmul, views "
                         f"that keep the split axis whole; .to(device) gives the whole Tensor on one device)")

  # ---- reductions
  def _axes(self, dim) -> tuple:
    dims = range(self.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(sorted({norm_axis(d, self.ndim) for d in dims}))
  def _reduce(self, method: str, op: str, dim, keepdim: bool) -> "ShardedTensor":
    axes = self._axes(dim)
    parts = [getattr(s, method)(axes, keepdim) for s in self.shards]
    if self.axis is None: return self._like(parts)
    if self.axis not in axes: return self._like(parts, self.axis if keepdim else self.axis - sum(a < self.axis for a in axes))
    return ShardedTensor(collectives.all_reduce(parts, op), None)
  def sum(self, dim=None, keepdim=False): return self._reduce("sum", "sum", dim, keepdim)
  def amax(self, dim=None, keepdim=False): return self._reduce("amax", "max", dim, keepdim)
  def amin(self, dim=None, keepdim=False): return self._reduce("amin", "min", dim, keepdim)
  def max(self, dim=None, keepdim=False): return self.amax(dim, keepdim)   # values only: indices of a split axis are not kept
  def min(self, dim=None, keepdim=False): return self.amin(dim, keepdim)
  def mean(self, dim=None, keepdim=False):
    n = math.prod(self.shape[a] for a in self._axes(dim))
    return self.sum(dim, keepdim) / n
  def var(self, dim=None, keepdim=False, correction=1):
    n = math.prod(self.shape[a] for a in self._axes(dim))
    d = self - self.mean(dim, keepdim=True)
    return (d * d).sum(dim, keepdim) / max(0, n - correction)
  def log_softmax(self, dim=-1):
    s = self - self.amax(dim, keepdim=True).detach()
    return s - s.exp().sum(dim, keepdim=True).log()
  def softmax(self, dim=-1):
    e = (self - self.amax(dim, keepdim=True).detach()).exp()
    return e / e.sum(dim, keepdim=True)

  # ---- views that keep the split axis whole
  def permute(self, *order) -> "ShardedTensor":
    order = tuple(order[0]) if len(order) == 1 and isinstance(order[0], (tuple, list)) else order
    order = tuple(norm_axis(o, self.ndim) for o in order)
    return self._like([s.permute(order) for s in self.shards], None if self.axis is None else order.index(self.axis))
  def transpose(self, dim0=-2, dim1=-1) -> "ShardedTensor":
    order = list(range(self.ndim))
    a, b = norm_axis(dim0, self.ndim), norm_axis(dim1, self.ndim)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> "ShardedTensor": return self.permute(tuple(reversed(range(self.ndim))))
  def reshape(self, *shape) -> "ShardedTensor":
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    if -1 in shape:
      known = math.prod(s for s in shape if s != -1)
      shape = tuple(self.numel() // known if s == -1 else s for s in shape)
    if math.prod(shape) != self.numel(): raise ValueError(f"reshape: {self.shape} into {shape}")
    if self.axis is None: return self._like([s.reshape(shape) for s in self.shards])
    before = math.prod(self.shape[:self.axis])
    for k in range(len(shape)):   # the output axis that is the split axis itself: same elements before it, same size
      if math.prod(shape[:k]) == before and shape[k] == self.shape[self.axis]:
        local = shape[:k] + (self.shards[0].shape[self.axis],) + shape[k + 1:]
        return self._like([s.reshape(local) for s in self.shards], k)
    raise NotImplementedError(f"reshape: {self.shape} split on axis {self.axis} into {shape} would cut the split axis; reshard first")
  def flatten(self, start_dim=0, end_dim=-1) -> "ShardedTensor":
    s, e = norm_axis(start_dim, self.ndim), norm_axis(end_dim, self.ndim)
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

  # ---- matmul
  def matmul(self, other) -> "ShardedTensor":
    b = self._peer(other, "matmul")
    if not isinstance(b, ShardedTensor): raise TypeError(f"matmul: expected a ShardedTensor, got {type(other).__name__}")
    if self.ndim < 2 or b.ndim != 2: raise NotImplementedError(f"matmul of sharded tensors: shapes {self.shape} and {b.shape}; the left "
                                                               f"needs 2 or more dims, the right exactly 2")
    a, ka = self, self.ndim - 1
    if a.axis == ka or b.axis == 0:   # the contraction is split: partial products, summed across devices
      a, b = a.reshard(ka), b.reshard(0)
      return ShardedTensor(collectives.all_reduce([x @ y for x, y in zip(a.shards, b.shards)], "sum"), None)
    if a.axis is not None and b.axis is not None: b = b.gather()
    out = a.axis if a.axis is not None else (None if b.axis is None else a.ndim - 1)
    return ShardedTensor([x @ y for x, y in zip(a.shards, b.shards)], out)
  __matmul__ = matmul
  def __rmatmul__(self, other): return self._peer(other, "matmul").matmul(self)

  # ---- autograd
  @property
  def requires_grad(self) -> bool: return any(s.requires_grad for s in self.shards)
  def requires_grad_(self, requires_grad: bool = True) -> "ShardedTensor":
    for s in self.shards: s.requires_grad_(requires_grad)
    return self
  @property
  def grad(self) -> "ShardedTensor | None":
    """The gradient, sharded as this tensor is; a replicated one's is the all-reduce of its replicas' gradients."""
    grads = [s.grad for s in self.shards]
    if all(g is None for g in grads): return None
    grads = [g if g is not None else s.detach().zeros_like() for g, s in zip(grads, self.shards)]
    return ShardedTensor(collectives.all_reduce(grads, "sum") if self.axis is None and len(grads) > 1 else grads, self.axis)
  @grad.setter
  def grad(self, g) -> None:
    if g is None:
      for s in self.shards: s.grad = None
      return
    g = self._peer(g, "grad").reshard(self.axis)
    for s, gs in zip(self.shards, g.shards): s.grad = gs
  def backward(self, gradient=None, retain_graph=None) -> None:
    """A replicated tensor backpropagates from one replica (the others are the same value); a split one from each
    shard, with its part of `gradient`."""
    if self.axis is None:
      return self.shards[0].backward(None if gradient is None else self._peer(gradient, "backward").shards[0], retain_graph)
    if gradient is None: raise RuntimeError(f"backward: a tensor split on axis {self.axis} needs gradient= (a ShardedTensor of its shape)")
    g = self._peer(gradient, "backward").reshard(self.axis)
    for k, (s, gs) in enumerate(zip(self.shards, g.shards)):
      s.backward(gs, retain_graph=True if k < len(self.shards) - 1 else retain_graph)
