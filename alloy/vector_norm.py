"""norm (torch.norm) and vector_norm (torch.linalg.vector_norm): both with vector-norm semantics.

torch.norm is ambiguous for a 2-tuple dim; as PyTorch itself does for numeric p there, alloy always takes the
vector norm over the dims given (all dims for dim=None): 'fro' is the 2-norm over them, inf the largest |x|, -inf
the smallest, 0 the count of non-zeros, any other p (sum |x|^p)^(1/p). 'nuc' (a matrix norm) raises. 16-bit floats
are summed in float32. Gradients as PyTorch's: 0 where x is 0 (also for p < 1 and a zero norm), ties of the inf
norms split evenly.
"""
from __future__ import annotations
from alloy import dtype as dt, autograd
from alloy.tensor import Tensor, where

def _pnorm_rule(out, g, x, p, dims, keep_shape):
  norm, gk = out.reshape(keep_shape), g.reshape(keep_shape)
  ratio = x.abs() / where(norm == 0, 1, norm)
  scale = ratio if p == 2 else ratio.pow(p - 1)
  return (where(x == 0, 0, gk * x.sign() * scale),)

def _zero_rule(out, g, x): return (x.zeros_like(),)

def vector_norm(input: Tensor, ord=2, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
  """torch.linalg.vector_norm."""
  if not isinstance(input, Tensor): raise TypeError(f"vector_norm: expected a Tensor, got {type(input).__name__}")
  if dtype is not None: input = input.cast(dtype)
  if not input.dtype.is_float: raise TypeError(f"norm: expected a floating point tensor, got {input.dtype.name}")
  if isinstance(ord, bool) or not isinstance(ord, (int, float)): raise ValueError(f"norm: unsupported order {ord!r}")
  dims = input._axes(dim) if input.ndim else ()
  acc = dt.float32 if input.dtype in (dt.float16, dt.bfloat16) else input.dtype
  x = input.detach().cast(acc)
  if ord in (float("inf"), float("-inf")):
    for a in dims:
      if input.shape[a] == 0: raise IndexError(f"norm: the {ord} norm of an empty dim {a} (shape {input.shape}) is undefined")
    a = input.cast(acc).abs()   # through autograd: amax/amin's rule splits ties evenly
    return (a.amax(dim, keepdim) if ord > 0 else a.amin(dim, keepdim)).cast(input.dtype)
  if ord == 0: out = (x != 0).cast(acc).sum(dim, keepdim)
  elif ord == 1: out = x.abs().sum(dim, keepdim)
  elif ord == 2: out = (x * x).sum(dim, keepdim).sqrt()
  else: out = x.abs().pow(ord).sum(dim, keepdim).pow(1.0 / ord)
  out = out.cast(input.dtype)
  if input._ag is None: return out
  if ord == 0: return autograd.record(out, _zero_rule, (input,), input.detach())
  keep_shape = tuple(1 if a in dims else s for a, s in enumerate(input.shape))
  return autograd.record(out, _pnorm_rule, (input,), input.detach(), ord, dims, keep_shape)

def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
  """torch.norm, as vector norms (see the module's note): p 'fro', inf, -inf, 0 or any number."""
  if p == "nuc": raise NotImplementedError("norm: the nuclear norm ('nuc') needs singular values, which alloy does not compute yet")
  if isinstance(p, str) and p != "fro": raise ValueError(f"norm: unknown order {p!r} (expected 'fro', 'nuc' or a number)")
  return vector_norm(input, 2 if p == "fro" else p, dim, keepdim, dtype)
