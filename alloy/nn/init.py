"""nn.init: PyTorch's initializers with its distributions, gains and fan rules. Each draws from alloy's random
stream (alloy.manual_seed) and gives the tensor the value through parameter.rebind, under no_grad."""
from __future__ import annotations
import math
from alloy.tensor import Tensor
from alloy.autograd import no_grad
from alloy.nn.parameter import rebind
from alloy.special import erfinv
from alloy import linalg

def calculate_gain(nonlinearity: str, param=None) -> float:
  linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid")
  if nonlinearity in linear: return 1.0
  if nonlinearity == "tanh": return 5.0 / 3
  if nonlinearity == "relu": return math.sqrt(2.0)
  if nonlinearity == "leaky_relu":
    slope = 0.01 if param is None else param
    if isinstance(slope, bool) or not isinstance(slope, (int, float)): raise ValueError(f"negative_slope {slope} is not a valid number")
    return math.sqrt(2.0 / (1 + slope ** 2))
  if nonlinearity == "selu": return 3.0 / 4
  raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")

def calculate_fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
  """fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field (PyTorch's rule)."""
  if t.ndim < 2: raise ValueError(f"fan in and fan out need a tensor of at least 2 dimensions, got shape {tuple(t.shape)}")
  receptive = math.prod(t.shape[2:])
  return t.shape[1] * receptive, t.shape[0] * receptive

def _fan(t: Tensor, mode: str) -> int:
  if mode not in ("fan_in", "fan_out"): raise ValueError(f"mode {mode!r} is not supported, use 'fan_in' or 'fan_out'")
  fan_in, fan_out = calculate_fan_in_and_fan_out(t)
  return fan_in if mode == "fan_in" else fan_out

def _draw(t: Tensor, value: Tensor) -> Tensor:
  # realized now: a lazy draw would be recomputed (the whole random generator) in every kernel that reads the weight
  with no_grad(): return rebind(t, value.cast(t.dtype).realize())

def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
  return _draw(t, Tensor.rand(*t.shape, device=t.device) * (b - a) + a)
def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
  return _draw(t, Tensor.randn(*t.shape, device=t.device) * std + mean)
def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
  """A normal truncated to [a, b], by the inverse CDF of a uniform over the kept range (as PyTorch draws it)."""
  def cdf(x): return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
  lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
  u = Tensor.rand(*t.shape, dtype="float32", device=t.device) * (2 * hi - 2 * lo) + (2 * lo - 1)
  x = erfinv(u.clamp(-1 + 1e-7, 1 - 1e-7)) * (std * math.sqrt(2.0)) + mean
  return _draw(t, x.clamp(a, b))
def constant_(t: Tensor, val: float) -> Tensor: return _draw(t, Tensor.full(t.shape, val, dtype=t.dtype, device=t.device))
def zeros_(t: Tensor) -> Tensor: return constant_(t, 0.0)
def ones_(t: Tensor) -> Tensor: return constant_(t, 1.0)
def eye_(t: Tensor) -> Tensor:
  if t.ndim != 2: raise ValueError(f"eye_ needs a 2-D tensor, got shape {tuple(t.shape)}")
  return _draw(t, Tensor.eye(*t.shape, dtype=t.dtype, device=t.device))
def orthogonal_(t: Tensor, gain: float = 1.0) -> Tensor:
  """torch.nn.init.orthogonal_: t flattened to (rows, the rest) takes the Q of a Gaussian matrix's QR (of its
  transpose where it is wide), its columns' signs those of R's diagonal, times gain: orthonormal rows or columns."""
  if t.ndim < 2: raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape {tuple(t.shape)}")
  if t.numel() == 0: return t
  rows = t.shape[0]
  cols = t.numel() // rows
  g = Tensor.randn(max(rows, cols), min(rows, cols), dtype="float32" if t.dtype.itemsize < 8 else t.dtype, device=t.device)
  q, r = linalg.qr(g)
  q = q * r.diagonal(0, -2, -1).sign()
  return _draw(t, (q.T if rows < cols else q).reshape(t.shape) * gain)

def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
  if t.numel() == 0: return t
  fan_in, fan_out = calculate_fan_in_and_fan_out(t)
  bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
  return uniform_(t, -bound, bound)
def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
  if t.numel() == 0: return t
  fan_in, fan_out = calculate_fan_in_and_fan_out(t)
  return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
  if t.numel() == 0: return t   # nothing to draw (and a fan of 0 has no bound): PyTorch's no-op (nn.Linear(0, n))
  bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode))
  return uniform_(t, -bound, bound)
def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
  if t.numel() == 0: return t
  return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode)))

def default_weight_and_bias_(weight: Tensor, bias: Tensor | None) -> None:
  """PyTorch's reset_parameters of Linear and the convolutions: kaiming_uniform(a=sqrt(5)) on the weight, which
  is uniform(+-1/sqrt(fan_in)), and the bias uniform(+-1/sqrt(fan_in))."""
  kaiming_uniform_(weight, a=math.sqrt(5))
  if bias is not None:
    fan_in, _ = calculate_fan_in_and_fan_out(weight)
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    uniform_(bias, -bound, bound)
