"""The functional forms of autograd, JAX and MLX style: value_and_grad(f) and grad(f) give f's gradient with respect
to chosen arguments, nested to any order (an inner gradient stays differentiable)."""
from __future__ import annotations
import functools
from alloy.autograd import enable_grad, grad_of, identity_rule, is_grad_enabled, record

def _argnums(argnums, n: int) -> tuple:
  nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
  for k in nums:
    if not -n <= k < n: raise ValueError(f"argnums {argnums} is out of range for a function called with {n} arguments")
  return nums

def value_and_grad(f, argnums=0):
  """f of Tensors returning a scalar Tensor -> a function giving (f's value, its gradient w.r.t. args[argnums]);
  a tuple of gradients when argnums is a tuple. Nested (grad(grad(f))), the inner gradient is differentiable."""
  @functools.wraps(f)
  def wrapper(*args, **kw):
    from alloy.tensor import Tensor
    nums = _argnums(argnums, len(args))
    args, nested = list(args), False
    for k in nums:
      if not isinstance(args[k], Tensor): raise TypeError(f"grad: argument {k} must be a Tensor, got {type(args[k]).__name__}")
      if args[k]._ag is not None and is_grad_enabled():   # inside an outer grad: keep the path to its argument
        args[k], nested = record(args[k]._new(args[k].node), identity_rule, (args[k],)), True
      else: args[k] = args[k].detach().requires_grad_()
    with enable_grad(): out = f(*args, **kw)
    if not isinstance(out, Tensor) or out.numel() != 1:
      raise TypeError(f"grad: f must return a scalar Tensor, got {getattr(out, 'shape', type(out).__name__)}")
    found = grad_of(out, [args[k] for k in nums], create_graph=nested, allow_unused=True) if out._ag is not None else [None] * len(nums)
    grads = [g if g is not None else args[k].detach().zeros_like() for g, k in zip(found, nums)]
    return (out if nested else out.detach()), (grads[0] if isinstance(argnums, int) else tuple(grads))
  return wrapper

def grad(f, argnums=0):
  """f of Tensors returning a scalar Tensor -> a function giving its gradient w.r.t. args[argnums]."""
  vg = value_and_grad(f, argnums)
  @functools.wraps(f)
  def wrapper(*args, **kw): return vg(*args, **kw)[1]
  return wrapper
