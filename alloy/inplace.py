"""The in-place Tensor methods, bound onto Tensor by install(): the augmented operators (+=, -=, ... >>=), PyTorch's
`_` methods (add_, clamp_, zero_, fill_, copy_, ...), __setitem__, masked_fill_, index_put_, index_add_/copy_/fill_
(and their out-of-place forms), addcmul/addcdiv, uniform_/normal_, detach_ and `.data`. Each computes the
out-of-place result from the tensor's current value and hands it to assign.assign (see alloy/assign.py)."""
from __future__ import annotations
import math
from alloy import autograd, dtype as dt
from alloy.assign import assign, current, setitem_value, check_leaf

def apply_in_place(t, fn, name: str, cast_any: bool = False):
  """t takes the value fn(t's current value), in place, and is returned (the `_` methods, and the functionals'
  inplace=True): PyTorch's refusals (a leaf that requires grad, a value autograd saved) come with it."""
  return assign(t, fn(current(t)), name, cast_any)

def _inplace(name: str, fn, cast_any: bool = False):
  def method(self, *args, **kw): return apply_in_place(self, lambda v: fn(v, *args, **kw), name, cast_any)
  method.__name__ = name
  method.__doc__ = f"In place: self = {getattr(fn, '__name__', name)}(self, ...), cast to self's dtype."
  return method

# (in-place name, out-of-place Tensor method)
OPERATORS = {"__iadd__": "__add__", "__isub__": "__sub__", "__imul__": "__mul__", "__itruediv__": "__truediv__",
             "__ifloordiv__": "__floordiv__", "__imod__": "__mod__", "__ipow__": "__pow__", "__iand__": "__and__",
             "__ior__": "__or__", "__ixor__": "__xor__", "__ilshift__": "__lshift__", "__irshift__": "__rshift__"}
METHODS = ("add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "neg", "abs", "exp", "exp2", "log", "log2", "sqrt",
           "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "erf", "sigmoid", "relu", "floor", "ceil", "round", "trunc",
           "sign", "square", "clamp", "clip", "lerp", "masked_fill", "logical_not", "addcmul", "addcdiv",
           "index_put", "index_add", "index_copy", "index_fill", "eq", "ne", "lt", "le", "gt", "ge")
ALIASES = {"subtract_": "sub", "multiply_": "mul", "divide_": "div", "true_divide_": "div", "negative_": "neg",
           "bitwise_and_": "__and__", "bitwise_or_": "__or__", "bitwise_xor_": "__xor__", "bitwise_not_": "__invert__",
           "bitwise_left_shift_": "__lshift__", "bitwise_right_shift_": "__rshift__", "fmod_": "remainder"}

def norm_dim(dim, ndim: int, what: str) -> int:
  try: return range(max(ndim, 1))[dim]
  except (IndexError, TypeError):
    raise IndexError(f"{what}: dim {dim!r} is out of range for a tensor with {ndim} dimensions") from None

def _index_key(self, dim: int, index): return (slice(None),) * norm_dim(dim, self.ndim, "index") + (index,)

def _check_index_source(self, dim, index, source, what):
  from alloy.tensor import Tensor
  d = norm_dim(dim, self.ndim, what)
  n = index.numel() if isinstance(index, Tensor) else len(index)
  if getattr(index, "ndim", 1) > 1: raise IndexError(f"{what}: index should be at most 1-D, got shape {index.shape}")
  if isinstance(source, Tensor):
    want = self.shape[:d] + (n,) + self.shape[d + 1:]
    if source.ndim and source.shape != want:
      raise IndexError(f"{what}: source of shape {source.shape} does not fit: expected {want} for index of length {n} along dim {d}")
    if source.dtype != self.dtype: raise RuntimeError(f"{what}: source has dtype {source.dtype.name}, self has {self.dtype.name}; they must match")

def index_put(self, indices, values, accumulate: bool = False):
  """torch.index_put: self with self[indices] = values (+= with accumulate, each repeated index adding)."""
  from alloy.tensor import Tensor
  if not isinstance(indices, (tuple, list)): raise TypeError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
  if isinstance(values, Tensor) and values.dtype != self.dtype:
    raise RuntimeError(f"index_put: values have dtype {values.dtype.name}, self has {self.dtype.name}; they must match")
  return setitem_value(self, tuple(indices), values, accumulate, "index_put")

def index_add(self, dim, index, source, alpha=1):
  _check_index_source(self, dim, index, source, "index_add")
  return setitem_value(self, _index_key(self, dim, index), source if alpha == 1 else source * alpha, True, "index_add")

def index_copy(self, dim, index, source):
  _check_index_source(self, dim, index, source, "index_copy")
  return setitem_value(self, _index_key(self, dim, index), source, False, "index_copy")

def index_fill(self, dim, index, value): return setitem_value(self, _index_key(self, dim, index), value, False, "index_fill")

def addcmul(self, tensor1, tensor2, value=1): return self + value * tensor1 * tensor2 if value != 1 else self + tensor1 * tensor2
def addcdiv(self, tensor1, tensor2, value=1): return self + value * (tensor1 / tensor2) if value != 1 else self + tensor1 / tensor2

def setitem(self, key, value) -> None:
  """self[key] = value: every index __getitem__ takes; the value broadcasts and is cast to self's dtype, as in PyTorch."""
  check_leaf(self, "setitem")
  b = getattr(value, "_base", None)
  # x[i] op= y: the view x[i] was changed in place and already wrote itself through to x
  if b is not None and b[0] is self and b[1] == "index" and b[2] is key and b[3] == autograd.version(self): return
  assign(self, setitem_value(current(self), key, value), "setitem", cast_any=True)

def fill_(self, value):
  from alloy.tensor import Tensor
  if isinstance(value, Tensor) and value.ndim: raise RuntimeError(f"fill_: expected a 0-d value tensor, got shape {value.shape}")
  v = value if isinstance(value, Tensor) else Tensor(value, device=self.device)
  return assign(self, v.cast(self.dtype)._broadcast_to(self.shape), "fill_", cast_any=True)

def zero_(self): return fill_(self, 0)
def copy_(self, src, non_blocking=False):
  from alloy.tensor import Tensor
  if not isinstance(src, Tensor): raise TypeError(f"copy_: expected a Tensor, got {type(src).__name__}")
  return assign(self, src.to(self.device), "copy_", cast_any=True)
def uniform_(self, a=0.0, b=1.0): return assign(self, self.rand_like() * (b - a) + a, "uniform_")
def normal_(self, mean=0.0, std=1.0): return assign(self, self.randn_like() * std + mean, "normal_")
def clamp_min_(self, m): return assign(self, current(self).clamp(min=m), "clamp_min_")
def clamp_max_(self, m): return assign(self, current(self).clamp(max=m), "clamp_max_")

def detach_(self):
  if isinstance(getattr(self, "_base", None), tuple) and self._base[1] != "detach":
    raise RuntimeError("detach_: cannot detach a view in place; use detach()")
  self._ag = None
  return self

def _data_get(self): return self.detach()
def _data_set(self, value):
  """t.data = other: t takes other's value; its graph stays, as PyTorch's .data assignment."""
  from alloy.tensor import Tensor
  if not isinstance(value, Tensor): raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
  self.node = value.to(self.device).node
  autograd.bump(self)

def install(Tensor) -> None:
  for name, out_of_place in OPERATORS.items(): setattr(Tensor, name, _inplace(name, getattr(Tensor, out_of_place)))
  for name, fn in (("addcmul", addcmul), ("addcdiv", addcdiv), ("index_put", index_put), ("index_add", index_add),
                   ("index_copy", index_copy), ("index_fill", index_fill)):
    setattr(Tensor, name, fn)
  for name in METHODS: setattr(Tensor, name + "_", _inplace(name + "_", getattr(Tensor, name), name.startswith(("index", "masked"))))
  for name, out_of_place in ALIASES.items(): setattr(Tensor, name, _inplace(name, getattr(Tensor, out_of_place)))
  Tensor.__setitem__ = setitem
  for fn in (fill_, zero_, copy_, uniform_, normal_, clamp_min_, clamp_max_, detach_, exponential_, geometric_, random_, fill_diagonal_,
             cauchy_, log_normal_, bernoulli_):
    setattr(Tensor, fn.__name__, fn)
  Tensor.data = property(_data_get, _data_set)

def exponential_(self, lambd: float = 1.0):
  """Draws from the exponential distribution of rate lambd: -log(1 - U) / lambd."""
  if lambd <= 0: raise ValueError(f"exponential_: lambd must be positive, got {lambd}")
  return assign(self, ((1.0 - self.rand_like()).log() * (-1.0 / lambd)).cast(self.dtype), "exponential_")
def geometric_(self, p: float):
  """Draws from the geometric distribution of success probability p (trials to the first success, from 1)."""
  if not 0 < p <= 1: raise ValueError(f"geometric_: p must be in (0, 1], got {p}")
  u = 1.0 - self.rand_like(dtype=dt.float32)   # in (0, 1]: its log is finite
  draws = (u.log() / math.log1p(-p)).ceil().maximum(1.0) if p < 1 else self.ones_like(dtype=dt.float32)
  return assign(self, draws.cast(self.dtype), "geometric_", cast_any=True)
def cauchy_(self, median: float = 0.0, sigma: float = 1.0):
  """Draws from the Cauchy distribution: median + sigma tan(pi (U - 1/2))."""
  if sigma <= 0: raise ValueError(f"cauchy_: sigma must be positive, got {sigma}")
  return assign(self, (((self.rand_like() - 0.5) * math.pi).tan() * sigma + median).cast(self.dtype), "cauchy_")
def log_normal_(self, mean: float = 1.0, std: float = 2.0):
  """Draws exp(N(mean, std^2))."""
  if std <= 0: raise ValueError(f"log_normal_: std must be positive, got {std}")
  return assign(self, (self.randn_like() * std + mean).exp().cast(self.dtype), "log_normal_")
def bernoulli_(self, p=0.5):
  """Draws 1 with probability p (a number, or a tensor of probabilities broadcast to self), else 0."""
  return assign(self, (self.rand_like(dtype=dt.float32) < p).cast(self.dtype), "bernoulli_", cast_any=True)
def random_(self, from_=0, to=None):
  """Integers drawn uniformly from [from_, to) (to None: [0, the dtype's largest + 1), floats up to 2^mantissa)."""
  if to is None: from_, to = 0, (from_ if from_ else _random_top(self.dtype))
  return assign(self, self.randint(from_, to, self.shape, device=self.device).cast(self.dtype), "random_", cast_any=True)
def _random_top(d) -> int:
  if d.is_float: return 1 << {2: 11, 4: 24, 8: 53}[d.itemsize]
  return int(dt.max_value(d)) + 1 if not d.is_bool else 2
def fill_diagonal_(self, fill_value, wrap: bool = False):
  """The main diagonal (entries whose indices are all equal) set to fill_value; every dim of one size past 2-D."""
  if wrap: raise NotImplementedError("fill_diagonal_: wrap=True is not supported yet")
  if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
    raise ValueError(f"fill_diagonal_: expects a matrix, or dims all of one size, got shape {self.shape}")
  from alloy.tensor import Tensor, where
  idx = [Tensor.arange(n, device=self.device).reshape(tuple(n if a == k else 1 for a in range(self.ndim))) for k, n in enumerate(self.shape)]
  on = idx[0] == idx[1]
  for i in idx[2:]: on = on & (i == idx[0])
  return assign(self, where(on, fill_value, current(self)).cast(self.dtype), "fill_diagonal_", cast_any=True)
