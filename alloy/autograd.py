"""Reverse-mode autograd with PyTorch's interface: requires_grad, .grad, backward, no_grad/enable_grad, and the
functional grad/value_and_grad (JAX and MLX style).

tensor.py records at its few primitives (elementwise, views, reductions, contiguous, the cumsum window) and indexing.py at GATHER; only
when an input requires grad and grad mode is on: the result's `_ag` is a `GradNode` (the rule, the parent
tensors, what the rule needs). A leaf that requires grad holds a `Leaf` there, with its `.grad`. Every composite
op (matmul, softmax, var, ...) is differentiable through its primitives. The backward pass is lazy alloy ops, so it
fuses like forward work; nothing in it realizes. Not yet: higher-order gradients (create_graph), retain_grad on
non-leaves, hooks, and a gradient through a copy to another device (to() cuts the graph).
"""
from __future__ import annotations
import contextlib, functools, math, threading
from alloy.helpers import toposort
from alloy.ir.ops import Op

_state = threading.local()

def is_grad_enabled() -> bool: return getattr(_state, "enabled", True)
def set_grad_enabled(mode: bool) -> None: _state.enabled = bool(mode)

class _GradMode(contextlib.ContextDecorator):
  mode = True
  def __enter__(self):
    self.prev = is_grad_enabled()
    set_grad_enabled(self.mode)
  def __exit__(self, *exc): set_grad_enabled(self.prev)

class no_grad(_GradMode):
  """Ops inside record no graph (a context manager or a decorator)."""
  mode = False

class enable_grad(_GradMode):
  """Turns recording back on inside a no_grad block."""
  mode = True

class Leaf:
  """What a leaf tensor that requires grad holds: its accumulated gradient."""
  __slots__ = ("grad",)
  def __init__(self): self.grad = None

class GradNode:
  """One recorded op: rule(out, g, *args) gives the gradient of each parent (None for no gradient). `node` is the
  output's graph node as recorded: a realize rebinds the tensor to its buffer, and rules read the op's sources."""
  __slots__ = ("rule", "parents", "args", "freed", "node")
  def __init__(self, rule, parents, args, node):
    self.rule, self.parents, self.args, self.freed, self.node = rule, parents, args, False, node

def record(out, rule, parents: tuple, *args):
  """Attach rule to out when grad mode is on and the output is a float; called once some parent requires grad."""
  if not is_grad_enabled() or not out.dtype.is_float: return out
  if out._ag is not None: out = out._new(out.node)   # a primitive that returned its input as is: a new tensor
  out._ag = GradNode(rule, tuple(p if p is not None and p._ag is not None else None for p in parents), args, out.node)
  return out

def check_requires_grad(t) -> None:
  if not t.dtype.is_float: raise RuntimeError(f"only tensors of floating point dtype can require gradients, got {t.dtype.name}")

# ---- rules: each returns one gradient (or None) per parent, from the output tensor and the gradient g of it

def _where(c, a, b):
  from alloy.tensor import where
  return where(c, a, b)

def ew_rule(out, g, op):
  n = out.node
  x = [out._new(s) for s in n.src]
  a = x[0]
  if op is Op.ADD: return g, g
  if op is Op.SUB: return g, -g
  if op is Op.MUL: return g * x[1], g * a
  if op is Op.DIV: return g / x[1], -g * out / x[1]
  if op is Op.NEG: return (-g,)
  if op is Op.EXP: return (g * out,)
  if op is Op.EXP2: return (g * out * math.log(2),)
  if op is Op.LOG: return (g / a,)
  if op is Op.LOG2: return (g / (a * math.log(2)),)
  if op is Op.SQRT: return (g / (out * 2),)
  if op is Op.RSQRT: return (g * out * out * out * -0.5,)
  if op is Op.RECIP: return (-g * out * out,)
  if op is Op.SIN: return (g * a.cos(),)
  if op is Op.COS: return (-g * a.sin(),)
  if op is Op.TAN: return (g * (1 + out * out),)
  if op is Op.TANH: return (g * (1 - out * out),)
  if op is Op.ERF: return (g * (2 / math.sqrt(math.pi)) * (-(a * a)).exp(),)
  if op is Op.ABS: return (g * a.sign(),)
  if op is Op.CAST: return (g.cast(a.dtype) if a.dtype.is_float else None,)
  if op in (Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC): return (g * 0,)
  if op is Op.WHERE: return None, _where(a, g, 0), _where(a, 0, g)
  if op in (Op.MAX, Op.MIN):
    b = x[1]
    win = a > b if op is Op.MAX else a < b
    tie = a == b
    half = g * 0.5
    return _where(win, g, _where(tie, half, 0)), _where(win | tie, _where(tie, half, 0), g)
  if op is Op.POW:
    b = x[1]
    ga = g * b * a.pow(b - 1)
    # PyTorch's rule: d/db of 0 ** b is 0 for b >= 0 (not nan from log 0)
    gb = _where((a == 0) & (b >= 0), 0, g * out * a.log())
    return ga, gb
  raise RuntimeError(f"autograd: no gradient rule for the elementwise op {op.name}")

def view_rule(out, g, method, args, in_shape):
  if method == "reshape": return (g.reshape(in_shape),)
  if method == "permute":
    order = args[0]
    return (g.permute(tuple(sorted(range(len(order)), key=lambda i: order[i]))),)
  if method == "expand":
    axes = tuple(i for i, (s, n) in enumerate(zip(in_shape, g.shape)) if s != n)
    return (g.sum(axes, keepdim=True) if axes else g,)
  if method == "pad": return (g.shrink(tuple((b, b + s) for (b, _), s in zip(args[0], in_shape))),)
  if method == "shrink": return (g._view("pad", tuple((b, s - e) for (b, e), s in zip(args[0], in_shape))),)
  if method == "stride":
    steps = args[0]   # forward: flip the negative axes, then every |k|-th; backward undoes them in reverse
    for ax, (k, s) in enumerate(zip(steps, in_shape)):
      k = abs(k)
      if k == 1: continue
      # every k-th element back in place: (n,) -> (n, 1) -> pad to (n, k) -> (n*k,) -> the first s
      n, pre, post = g.shape[ax], g.shape[:ax], g.shape[ax + 1:]
      g = g.reshape(pre + (n, 1) + post)._view("pad", ((0, 0),) * len(pre) + ((0, 0), (0, k - 1)) + ((0, 0),) * len(post))
      g = g.reshape(pre + (n * k,) + post)
      g = g.shrink(tuple((0, s) if i == ax else (0, d) for i, d in enumerate(g.shape)))
    if any(k < 0 for k in steps): g = g._view("stride", tuple(-1 if k < 0 else 1 for k in steps))
    return (g,)
  raise RuntimeError(f"autograd: no gradient rule for the view {method}")

def reduce_rule(out, g, op, axes, keep_shape, in_shape, x):
  g = g.reshape(keep_shape)
  if op is Op.ADD: return (g.expand(in_shape),)
  if op in (Op.MAX, Op.MIN):
    hit = x == out.reshape(keep_shape).expand(in_shape)   # the gradient splits evenly among ties (PyTorch's amax)
    count = hit.cast(g.dtype).sum(axes, keepdim=True)
    return (_where(hit, (g / count).expand(in_shape), 0),)
  if op is Op.MUL: return ((g * out.reshape(keep_shape)).expand(in_shape) / x,)
  raise RuntimeError(f"autograd: no gradient rule for the reduction {op.name}")

def identity_rule(out, g): return (g,)

def gather_rule(out, g, adv_pos, in_shape):
  """Scatter-add through one-hot masks: x's gradient at (s_1..s_m, rest) sums g[b, rest] over the index positions b
  whose indices are (s_1..s_m); repeated indices add up. Lazy, one reduction; its size is b * prod(s) * rest."""
  from alloy.tensor import Tensor
  idx = [out._new(n) for n in out.node.src[1:]]
  b_shape, m = idx[0].shape, len(adv_pos)
  nb, rest = len(b_shape), g.shape[len(idx[0].shape):]
  t = g.reshape(b_shape + (1,) * m + rest)
  for k, p in enumerate(adv_pos):
    s = in_shape[p]
    at = Tensor.arange(s, device=g.device).reshape((1,) * (nb + k) + (s,) + (1,) * (m - k - 1 + len(rest)))
    t = _where(idx[k].reshape(b_shape + (1,) * (m + len(rest))) == at, t, 0)
  if nb: t = t.sum(tuple(range(nb)))
  others = [i for i in range(len(in_shape)) if i not in adv_pos]
  perm = [adv_pos.index(i) if i in adv_pos else m + others.index(i) for i in range(len(in_shape))]
  return (t.permute(perm),)

def window_rule(out, g, n, in_shape):
  """out[..., j, k] = x[..., j + k]: x's gradient sums g along each anti-diagonal. Padding row j of g to 2n and
  reading the rows back 2n-1 long puts g[j, k] at column j + k."""
  lead = in_shape[:-1]
  m = math.prod(lead) if lead else 1
  t = g.reshape(m, n, n)._view("pad", ((0, 0), (0, 0), (0, n))).reshape(m, 2 * n * n)
  t = t.shrink(((0, m), (0, n * (2 * n - 1)))).reshape(m, n, 2 * n - 1)
  return (t.sum(1).reshape(in_shape),)

# ---- the backward pass

def _parents(t) -> list:
  ag = t._ag
  return [p for p in ag.parents if p is not None] if isinstance(ag, GradNode) else []

def _topo(root) -> list:
  """Tensors from root to the leaves, each after every tensor that uses it."""
  return toposort(root, _parents)[::-1]

def backward(t, gradient=None, retain_graph=False) -> None:
  from alloy.tensor import Tensor
  if t._ag is None: raise RuntimeError("backward: this tensor does not require grad and has no graph (element 0 of tensors does not require grad)")
  if gradient is None:
    if t.numel() != 1: raise RuntimeError(f"backward: grad can be implicitly created only for scalar outputs; pass gradient= of shape {t.shape}")
    gradient = Tensor.ones(*t.shape, dtype=t.dtype, device=t.device)
  elif not isinstance(gradient, Tensor): gradient = Tensor(gradient, dtype=t.dtype, device=t.device)
  if gradient.shape != t.shape: raise RuntimeError(f"backward: gradient has shape {gradient.shape}, the output has shape {t.shape}")
  with no_grad():
    grads = {id(t): gradient.detach().cast(t.dtype)}
    for u in _topo(t):
      g = grads.pop(id(u), None)
      ag = u._ag
      if g is None: continue
      if isinstance(ag, Leaf):
        ag.grad = g if ag.grad is None else ag.grad + g
        continue
      if ag.freed:
        raise RuntimeError("backward: trying to backward through the graph a second time (its saved state was freed); "
                           "pass retain_graph=True to the first backward")
      recorded = u if u.node is ag.node else u._new(ag.node)
      for p, pg in zip(ag.parents, ag.rule(recorded, g, *ag.args)):
        if p is None or pg is None: continue
        if pg.shape != p.shape: pg = pg.reshape(p.shape)
        if pg.dtype is not p.dtype: pg = pg.cast(p.dtype)
        grads[id(p)] = pg if id(p) not in grads else grads[id(p)] + pg
      if not retain_graph: ag.freed = True

# ---- functional forms

def _argnums(argnums, n: int) -> tuple:
  nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
  for k in nums:
    if not -n <= k < n: raise ValueError(f"argnums {argnums} is out of range for a function called with {n} arguments")
  return nums

def value_and_grad(f, argnums=0):
  """f of Tensors returning a scalar Tensor -> a function giving (f's value, its gradient w.r.t. args[argnums]);
  a tuple of gradients when argnums is a tuple."""
  @functools.wraps(f)
  def wrapper(*args, **kw):
    from alloy.tensor import Tensor
    nums = _argnums(argnums, len(args))
    args = list(args)
    for k in nums:
      if not isinstance(args[k], Tensor): raise TypeError(f"grad: argument {k} must be a Tensor, got {type(args[k]).__name__}")
      args[k] = args[k].detach().requires_grad_()
    with enable_grad(): out = f(*args, **kw)
    if not isinstance(out, Tensor) or out.numel() != 1:
      raise TypeError(f"grad: f must return a scalar Tensor, got {getattr(out, 'shape', type(out).__name__)}")
    if out._ag is None: grads = [args[k].zeros_like() for k in nums]
    else:
      backward(out)
      grads = [args[k].grad if args[k].grad is not None else args[k].zeros_like() for k in nums]
    return out.detach(), (grads[0] if isinstance(argnums, int) else tuple(grads))
  return wrapper

def grad(f, argnums=0):
  """f of Tensors returning a scalar Tensor -> a function giving its gradient w.r.t. args[argnums]."""
  vg = value_and_grad(f, argnums)
  @functools.wraps(f)
  def wrapper(*args, **kw): return vg(*args, **kw)[1]
  return wrapper
