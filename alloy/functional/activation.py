"""Activation functions with PyTorch's functional signatures, composed from alloy's elementwise primitives (so they
fuse with their neighbours and differentiate through the primitives' rules). `inplace=True` changes the input in place
through alloy/inplace.py, as PyTorch's does, and returns it."""
from __future__ import annotations
import math

def maybe_in_place(input, inplace: bool, op: str, fn):
  """fn(input); with inplace=True, input itself takes that value and is returned (alloy/inplace.py), refused where
  PyTorch refuses: a leaf that requires grad (or a view of one) while grad mode is on; a value an earlier op saved
  for its backward makes that backward raise, naming it."""
  if not inplace: return fn(input)
  from alloy.inplace import apply_in_place
  return apply_in_place(input, fn, op)

def _where(c, a, b):
  from alloy.tensor import where
  return where(c, a, b)

def relu(input, inplace=False): return maybe_in_place(input, inplace, "relu", lambda x: x.relu())
def relu6(input, inplace=False): return hardtanh(input, 0.0, 6.0, inplace)
def leaky_relu(input, negative_slope=0.01, inplace=False):
  return maybe_in_place(input, inplace, "leaky_relu", lambda x: _where(x > 0, x, x * negative_slope))
def _elu(x, alpha): return _where(x > 0, x, (x.minimum(0).exp() - 1) * alpha)   # exp of min(x, 0): no overflow on the branch not taken
def elu(input, alpha=1.0, inplace=False): return maybe_in_place(input, inplace, "elu", lambda x: _elu(x, alpha))
def selu(input, inplace=False):
  return maybe_in_place(input, inplace, "selu", lambda x: _elu(x, 1.6732632423543772848170429916717) * 1.0507009873554804934193349852946)
def celu(input, alpha=1.0, inplace=False):
  return maybe_in_place(input, inplace, "celu", lambda x: _where(x > 0, x, ((x / alpha).minimum(0).exp() - 1) * alpha))
def gelu(input, approximate="none"):
  if approximate not in ("none", "tanh"): raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
  return input.gelu(approximate)
def silu(input, inplace=False): return maybe_in_place(input, inplace, "silu", lambda x: x.silu())
def mish(input, inplace=False): return maybe_in_place(input, inplace, "mish", lambda x: x * softplus(x).tanh())
def sigmoid(input): return input.sigmoid()
def tanh(input): return input.tanh()
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
  if min_val > max_val: raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
  return maybe_in_place(input, inplace, "hardtanh", lambda x: x.clamp(min_val, max_val))
def hardsigmoid(input, inplace=False): return maybe_in_place(input, inplace, "hardsigmoid", lambda x: (x + 3).clamp(0.0, 6.0) / 6)
def hardswish(input, inplace=False): return maybe_in_place(input, inplace, "hardswish", lambda x: x * hardsigmoid(x))
def softplus(input, beta=1.0, threshold=20.0):
  """log(1 + exp(beta*x)) / beta, and x itself where beta*x > threshold (PyTorch's linear region)."""
  bx = input * beta
  soft = (bx.minimum(threshold).exp() + 1).log() / beta
  return _where(bx > threshold, input, soft)
def logsigmoid(input):
  # log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)): stable for large |x|
  return input.minimum(0) - ((-input.abs()).exp() + 1).log()
def softsign(input): return input / (input.abs() + 1)
def tanhshrink(input): return input - input.tanh()
def threshold(input, threshold, value, inplace=False):
  return maybe_in_place(input, inplace, "threshold", lambda x: _where(x > threshold, x, value))

def _softmax_dim(dim, ndim: int, op: str) -> int:
  if dim is not None: return dim
  return 0 if ndim in (0, 1, 3) else 1   # PyTorch's implicit choice (it warns; so should callers pass dim)

def softmax(input, dim=None, _stacklevel=3, dtype=None): return input.softmax(_softmax_dim(dim, input.ndim, "softmax"), dtype=dtype)
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
  return input.log_softmax(_softmax_dim(dim, input.ndim, "log_softmax"), dtype=dtype)
def softmin(input, dim=None, _stacklevel=3, dtype=None): return (-input).softmax(_softmax_dim(dim, input.ndim, "softmin"), dtype=dtype)

def glu(input, dim=-1):
  n = input.shape[dim]
  if n % 2: raise ValueError(f"glu: halving dimension {dim} needs an even size, got {n}")
  a, b = input.split(n // 2, dim)
  return a * b.sigmoid()

def normalize(input, p=2.0, dim=1, eps=1e-12):
  """input / max(||input||_p along dim, eps)."""
  if p == 2: n = (input * input).sum(dim, keepdim=True).sqrt()
  elif p == 1: n = input.abs().sum(dim, keepdim=True)
  elif p == math.inf: n = input.abs().amax(dim, keepdim=True)
  else: n = input.abs().pow(p).sum(dim, keepdim=True).pow(1.0 / p)
  return input / n.maximum(eps)

# PyTorch's in-place spellings: the functional with inplace=True
def prelu(input, weight):
  """max(0, x) + weight * min(0, x): one slope, or one per channel (dim 1; dim 0 of a 1-D input)."""
  if weight.numel() > 1:
    channels = input.shape[1] if input.ndim >= 2 else input.shape[0] if input.ndim == 1 else 1
    if weight.ndim != 1 or weight.numel() != channels:
      raise ValueError(f"prelu: {weight.numel()} slopes need an input with {weight.numel()} channels (dim 1), got shape {tuple(input.shape)}")
    if input.ndim >= 2: weight = weight.reshape((1, -1) + (1,) * (input.ndim - 2))
  elif weight.numel() == 1: weight = weight.reshape(())
  return _where(input >= 0, input, input * weight)

def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
  """Leaky ReLU whose negative slope is drawn uniformly from [lower, upper] per element while training (alloy's
  random stream), their mean (lower + upper) / 2 otherwise."""
  from alloy.tensor import Tensor
  if not training: return leaky_relu(input, (lower + upper) / 2, inplace)
  slope = Tensor.rand(*input.shape, device=input.device) * (upper - lower) + lower
  return maybe_in_place(input, inplace, "rrelu", lambda x: _where(x >= 0, x, x * slope.cast(x.dtype)))

def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
  """softmax((logits + g) / tau) for Gumbel noise g = -log(E), E ~ Exponential(1) (alloy's random stream); hard: the
  one-hot of its argmax in the forward, the soft sample's gradient in the backward (straight-through)."""
  from alloy.tensor import Tensor
  e = -((1.0 - Tensor.rand(*logits.shape, device=logits.device)).log())   # Exponential(1), never 0: rand is in [0, 1)
  y = ((logits - e.cast(logits.dtype).log()) / tau).softmax(dim)
  if not hard: return y
  d = dim % logits.ndim
  index = y.argmax(d, keepdim=True)
  one_hot = (Tensor.arange(logits.shape[d], device=logits.device).reshape([-1 if a == d else 1 for a in range(logits.ndim)]) == index).cast(y.dtype)
  from alloy import autograd   # exactly one_hot forward (one_hot - y + y rounds where a fused kernel reorders it), y's gradient back
  return autograd.record(one_hot, _straight_through, (y,)) if y._ag is not None else one_hot

def _straight_through(out, g): return (g,)

def relu_(input): return relu(input, inplace=True)
def leaky_relu_(input, negative_slope=0.01): return leaky_relu(input, negative_slope, inplace=True)
def elu_(input, alpha=1.0): return elu(input, alpha, inplace=True)
def selu_(input): return selu(input, inplace=True)
def celu_(input, alpha=1.0): return celu(input, alpha, inplace=True)
def hardtanh_(input, min_val=-1.0, max_val=1.0): return hardtanh(input, min_val, max_val, inplace=True)
def threshold_(input, threshold_value, value): return threshold(input, threshold_value, value, inplace=True)
