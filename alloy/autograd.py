"""Reverse-mode autograd with PyTorch's interface: requires_grad, .grad, backward, no_grad/enable_grad (the functional
grad/value_and_grad, JAX and MLX style, are grad_transforms.py's).

tensor.py records at its few primitives (elementwise, views, reductions, contiguous, the cumsum window) and indexing.py at GATHER; only
when an input requires grad and grad mode is on: the result's `_ag` is a `GradNode` (the rule, snapshots of the
parents, what the rule needs). A leaf that requires grad holds a `Leaf` there, with its `.grad`. Every composite
op (matmul, softmax, var, ...) is differentiable through its primitives. The backward pass is lazy alloy ops, so it
fuses like forward work; nothing in it realizes.

The graph is one of GradNodes and Leafs, not of Tensors: an in-place op (alloy/assign.py) rebinds a Tensor to a
new node, so a GradNode keeps a snapshot of each parent (its node and its `_ag` when the op ran) and backward walks
the `_ag` objects. Each Tensor has a version, bumped by every in-place change; a GradNode notes the versions of the
tensors its rule reads (PyTorch's saved tensors) and backward refuses one changed since, naming it.
create_graph=True runs the rules with recording on, so gradients are differentiable again. A copy to another
device (to()) copies its gradient back, through the host as the forward does.
"""
from __future__ import annotations
import contextlib, math, threading
from alloy.helpers import toposort
from alloy.ir.ops import Op
from alloy.engine.watch import watchers

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
  """What a leaf tensor that requires grad holds: its accumulated gradient, and the hooks registered on it."""
  __slots__ = ("grad", "hooks", "__weakref__")
  def __init__(self): self.grad, self.hooks = None, None

class GradNode:
  """One recorded op: rule(out, g, *args) gives the gradient of each parent (None for no gradient). parents are
  snapshots (Tensors holding the parent's node and `_ag` as they were), node the output's node; saved lists
  saved_entry()s for the tensors whose values the rule reads; grad is kept only after retain_grad()."""
  __slots__ = ("rule", "parents", "args", "freed", "node", "device", "saved", "grad", "retain", "hooks", "group")
  def __init__(self, rule, parents, args, out):
    self.rule, self.parents, self.args, self.freed = rule, parents, args, False
    self.node, self.device, self.saved, self.grad, self.retain, self.hooks = out.node, out.device, (), None, False, None
    self.group = None
  def output(self):
    """The output as the op made it, a Tensor whose graph is this node (the rules' `out`)."""
    from alloy.tensor import Tensor
    t = Tensor.__new__(Tensor)
    t.node, t.device, t._ag = self.node, self.device, self
    return t
  def name(self) -> str:
    """The op, as an error names it: "exp", "max reduction", "reshape", "gather"."""
    a = self.args[0] if self.args else None
    if self.rule is ew_rule: return a.name.lower()
    if self.rule is reduce_rule: return f"{a.name.lower()} reduction"
    if self.rule is view_rule: return a
    return self.rule.__name__.replace("_rule", "")

def version(t) -> int:
  box = getattr(t, "_version", None)
  return box[0] if box else 0

def counter(t) -> list:
  """t's version counter, a [count] a GradNode can hold without holding t (t may be gone when backward checks)."""
  box = getattr(t, "_version", None)
  if box is None: box = t._version = [0]
  return box

def bump(t) -> None: counter(t)[0] += 1

def snapshot(t):
  """A Tensor holding t's node and graph as they are now: what a GradNode keeps of a parent that may change in place."""
  s = t._new(t.node)
  s._ag = t._ag
  return s

def record(out, rule, parents: tuple, *args):
  """Attach rule to out when grad mode is on and the output is a float; called once some parent requires grad."""
  if not is_grad_enabled() or not out.dtype.is_float: return out
  if out._ag is not None: out = out._new(out.node)   # a primitive that returned its input as is: a new tensor
  ag = out._ag = GradNode(rule, tuple(snapshot(p) if p is not None and p._ag is not None else None for p in parents), args, out)
  saved = _saved_tensors(rule, args, parents, out)
  if saved: ag.saved = tuple(saved_entry(t, what) for t, what in saved)
  return out

_SAVES_OUTPUT = {Op.EXP, Op.EXP2, Op.SQRT, Op.RSQRT, Op.RECIP, Op.TAN, Op.TANH}
_SAVES_INPUTS = {Op.LOG, Op.LOG2, Op.SIN, Op.COS, Op.ERF, Op.ABS, Op.MAX, Op.MIN}

def _saved_tensors(rule, args, parents, out) -> list:
  """The tensors whose values the rule reads, as PyTorch saves them for backward: an in-place change to one after
  the op makes backward refuse (the values here are snapshots, but code that relies on it would differ from PyTorch)."""
  if rule is ew_rule:
    op, ps = args[0], [p for p in parents]
    if op in _SAVES_OUTPUT: return [(out, "its output")]
    if op in _SAVES_INPUTS: return [(p, f"its input {i}") for i, p in enumerate(ps) if p is not None]
    if op is Op.MUL:   # each factor is saved for the other's gradient
      return [(ps[1 - i], f"its input {1 - i}") for i in range(2) if ps[i] is not None and ps[i]._ag is not None and ps[1 - i] is not None]
    if op is Op.DIV: return [(p, f"its input {i}") for i, p in enumerate(ps) if p is not None] + [(out, "its output")]
    if op is Op.POW: return [(p, f"its input {i}") for i, p in enumerate(ps) if p is not None] + [(out, "its output")]
    if op is Op.MOD and len(ps) > 1 and ps[1] is not None and ps[1]._ag is not None:   # the divisor's gradient reads both
      return [(p, f"its input {i}") for i, p in enumerate(ps) if p is not None]
    if op is Op.WHERE and ps[0] is not None: return [(ps[0], "its condition")]
    return []
  if rule is reduce_rule and args[0] in (Op.MAX, Op.MIN, Op.MUL): return [(parents[0], "its input 0"), (out, "its output")]
  return []

def saved_entry(t, what: str) -> tuple:
  """(t's version counter, its count now, what the op saved it as, t's dtype and shape for the error)."""
  box = counter(t)
  return (box, box[0], what, f"{t.dtype.name} tensor of shape {t.shape}")

def check_saved(ag) -> None:
  for box, v, what, desc in ag.saved:
    if box[0] != v:
      raise RuntimeError(f"backward: one of the tensors needed for gradient computation has been modified by an in-place operation: "
                         f"the {desc} that {ag.name()} saved ({what}) is at version {box[0]}; expected version {v}. "
                         f"Change a copy instead (x = x + 1 rather than x += 1), or compute it again")

def no_gradient_rule(out, g): return (None,)

def check_requires_grad(t) -> None:
  if not t.dtype.is_float: raise RuntimeError(f"only tensors of floating point dtype can require gradients, got {t.dtype.name}")

# ---- rules: each returns one gradient (or None) per parent, from the output tensor and the gradient g of it

def _where(c, a, b):
  from alloy.tensor import where
  return where(c, a, b)

def ew_rule(out, g, op):
  n = out.node
  x = [p if p is not None else out._new(s) for p, s in zip(out._ag.parents, n.src)]   # the parents: create_graph differentiates through them
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
  if op is Op.MOD: return g, -g * (a / x[1]).floor()   # a - floor(a / b) * b (remainder: floor division's), as PyTorch
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
  x = out._ag.parents[0]
  g = g.reshape(keep_shape)
  if op is Op.ADD: return (g.expand(in_shape),)
  if op in (Op.MAX, Op.MIN):
    hit = x == out.reshape(keep_shape).expand(in_shape)   # the gradient splits evenly among ties (PyTorch's amax)
    count = hit.cast(g.dtype).sum(axes, keepdim=True)
    return (_where(hit, (g / count).expand(in_shape), 0),)
  if op is Op.MUL: return (_prod_grad(x, g.expand(in_shape), axes),)
  raise RuntimeError(f"autograd: no gradient rule for the reduction {op.name}")

def _prod_grad(x, g, axes):
  """d prod / dx_i, exact at zeros as PyTorch's: the product of the others. A slice with no zero takes prod / x_i;
  with one zero, the zero takes the product of the non-zeros and the rest 0; with two or more, every entry 0."""
  zero = x == 0
  zeros = zero.cast(g.dtype).sum(axes, keepdim=True).expand(x.shape)
  x1 = _where(zero, 1, x)
  rest = x1.prod(axes, keepdim=True).expand(x.shape)   # the product of the slice's non-zeros
  return g * _where(zeros == 0, rest / x1, _where(zero & (zeros == 1), rest, 0))

def identity_rule(out, g): return (g,)

def to_rule(out, g, device):
  """A copy to another device: the gradient is copied back (Tensor.to again, the copy the forward took)."""
  return (g.to(device),)

def gather_rule(out, g, adv_pos, in_shape):
  """x[idx_1..idx_m at adv_pos]: x's gradient adds each g[b, rest] at (idx_1[b]..idx_m[b], rest), repeated indices
  adding up: a scatter-add of g's slices at the flattened index (alloy/scatter_sum.py)."""
  from alloy.scatter_sum import scatter_add_slices
  idx = [out._new(n) for n in out.node.src[1:]]
  b_shape, m = idx[0].shape, len(adv_pos)
  s_shape = tuple(in_shape[p] for p in adv_pos)
  from alloy import dtype as dt
  wide = math.prod(s_shape) > dt.max_value(dt.int32)
  flat = idx[0].cast(dt.int64 if wide else dt.int32)
  for k in range(1, m): flat = flat * s_shape[k] + idx[k]   # row-major over the indexed dims
  rest = g.shape[len(b_shape):]
  n_b = math.prod(b_shape)
  t = scatter_add_slices(math.prod(s_shape), flat.reshape(n_b), g.reshape((n_b,) + rest)).reshape(s_shape + rest)
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

class GradGroup:
  """Identity nodes (group_identities) whose gradients go to one callback together, as a module's backward hooks
  take its inputs' or outputs' gradients. A member's parents are taken to be every member's (_parents), so backward
  reaches all members before any of their parents: when it has reached the last member in its walk, every member's
  gradient is final. fire(grads, one per member, None where none came) returns the gradients to pass on, one per
  member (None: the one that came)."""
  def __init__(self, fire): self.members, self.fire = [], fire

def group_identities(tensors: list, group: GradGroup) -> list:
  """Each tensor that requires grad through a new identity node of group (the others as they are)."""
  out = []
  for t in tensors:
    if t is None or t._ag is None or not is_grad_enabled(): out.append(t); continue
    w = record(t._new(t.node), identity_rule, (t,))
    w._ag.group = group
    group.members.append(w._ag)
    out.append(w)
  return out

def _parents(ag) -> list:
  if not isinstance(ag, GradNode): return []
  if ag.group is None: return [p._ag for p in ag.parents if p is not None]
  return [p._ag for m in ag.group.members for p in m.parents if p is not None]

def _run_hooks(ag, g):
  for hook in ag.hooks or ():
    r = hook(g)
    if r is not None:
      if getattr(r, "shape", None) != g.shape:
        raise RuntimeError(f"hook: a hook returned {getattr(r, 'shape', type(r).__name__)}, expected a Tensor of shape {g.shape}")
      g = r
  return g

def propagate(t, gradient, retain_graph: bool, create_graph: bool, targets: dict | None = None) -> dict:
  """Push gradient back from t through its graph. targets None: gradients accumulate into the leaves' .grad (and
  retained non-leaves'); else {id(ag): ag}: the gradients reaching those are returned by id and no .grad changes."""
  found: dict = {}
  with enable_grad() if create_graph else no_grad():
    grads = {id(t._ag): gradient}
    order = toposort(t._ag, _parents)[::-1]   # each after every node that uses it
    groups: dict = {}   # id(group) -> [members still to reach in this walk, {id(member): its gradient}]
    for ag in order:
      if isinstance(ag, GradNode) and ag.group is not None: groups.setdefault(id(ag.group), [0, {}])[0] += 1
    for ag in order:
      g = grads.pop(id(ag), None)
      if g is not None and ag.hooks: g = _run_hooks(ag, g)
      if isinstance(ag, GradNode) and ag.group is not None:
        left = groups[id(ag.group)]
        left[0] -= 1
        if g is not None: left[1][id(ag)] = g
        if not left[0]: _fire_group(ag.group, left[1], grads, found, targets, retain_graph)
        continue
      if g is None: continue
      if targets is not None and id(ag) in targets: found[id(ag)] = g
      if isinstance(ag, Leaf):
        if targets is None:
          if watchers.on_changed: watchers.changed(ag)   # before: the jit's capture sees whether backward adds into a .grad
          ag.grad = g if ag.grad is None else ag.grad + g
        continue
      _pass_on(ag, g, grads, targets, retain_graph)
  return found

def _pass_on(ag: GradNode, g, grads: dict, targets, retain_graph: bool) -> None:
  """ag's gradient g through its rule into its parents' entries of grads."""
  if ag.retain and targets is None: ag.grad = g if ag.grad is None else ag.grad + g
  if ag.freed:
    raise RuntimeError(f"backward: trying to backward through the graph a second time (the saved state of {ag.name()} was freed); "
                       "pass retain_graph=True to the first backward")
  check_saved(ag)
  for p, pg in zip(ag.parents, ag.rule(ag.output(), g, *ag.args)):
    if p is None or pg is None: continue
    if pg.shape != p.shape: pg = pg.reshape(p.shape)
    if pg.dtype is not p.dtype: pg = pg.cast(p.dtype)
    k = id(p._ag)
    grads[k] = pg if k not in grads else grads[k] + pg
  if not retain_graph: ag.freed = True

def _fire_group(group: GradGroup, came: dict, grads: dict, found: dict, targets, retain_graph: bool) -> None:
  """The group's callback on its members' gradients, then each (or its replacement) passed on."""
  got = [came.get(id(m)) for m in group.members]
  new = group.fire(got)
  for m, g, r in zip(group.members, got, new):
    if r is not None:
      if g is not None and getattr(r, "shape", None) != g.shape:
        raise RuntimeError(f"backward hook: returned {getattr(r, 'shape', type(r).__name__)} for a gradient of shape {g.shape}")
      g = r
    if g is None: continue
    if targets is not None and id(m) in targets: found[id(m)] = g
    _pass_on(m, g, grads, targets, retain_graph)

def _seed(t, gradient):
  from alloy.tensor import Tensor
  if t._ag is None: raise RuntimeError("backward: this tensor does not require grad and has no graph (element 0 of tensors does not require grad)")
  if gradient is None:
    if t.numel() != 1: raise RuntimeError(f"backward: grad can be implicitly created only for scalar outputs; pass gradient= of shape {t.shape}")
    return Tensor.ones(*t.shape, dtype=t.dtype, device=t.device)
  if not isinstance(gradient, Tensor): gradient = Tensor(gradient, dtype=t.dtype, device=t.device)
  if gradient.shape != t.shape: raise RuntimeError(f"backward: gradient has shape {gradient.shape}, the output has shape {t.shape}")
  return gradient.cast(t.dtype)

def backward(t, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
  g = _seed(t, gradient)
  propagate(t, g if create_graph else g.detach(), create_graph if retain_graph is None else retain_graph, create_graph)

def grad_of(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False, allow_unused: bool = False) -> tuple:
  """torch.autograd.grad: the gradients of outputs (a Tensor) w.r.t. each of inputs, leaving every .grad as it is."""
  inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
  for i, x in enumerate(inputs):
    if x._ag is None: raise RuntimeError(f"grad: input {i} (shape {x.shape}) does not require grad")
  g = _seed(outputs, grad_outputs)
  found = propagate(outputs, g, create_graph if retain_graph is None else retain_graph, create_graph, {id(x._ag): x._ag for x in inputs})
  out = []
  for i, x in enumerate(inputs):
    if id(x._ag) not in found and not allow_unused:
      raise RuntimeError(f"grad: input {i} (shape {x.shape}) is not used to compute the output; pass allow_unused=True to get None for it")
    out.append(found.get(id(x._ag)))
  return tuple(out)

class HookHandle:
  """What register_hook returns: remove() unregisters the hook."""
  def __init__(self, ag, hook): self.ag, self.hook = ag, hook
  def remove(self) -> None:
    if self.ag.hooks and self.hook in self.ag.hooks: self.ag.hooks.remove(self.hook)

def register_hook(t, hook) -> HookHandle:
  """hook(grad) runs when the gradient of t is computed; a Tensor it returns replaces the gradient."""
  if t._ag is None:
    raise RuntimeError(f"register_hook: cannot register a hook on a tensor that does not require grad (shape {t.shape}, {t.dtype.name})")
  if t._ag.hooks is None: t._ag.hooks = []
  t._ag.hooks.append(hook)
  return HookHandle(t._ag, hook)

def retain_grad(t) -> None:
  if t._ag is None: raise RuntimeError(f"retain_grad: cannot retain the gradient of a tensor that does not require grad (shape {t.shape})")
  if isinstance(t._ag, GradNode): t._ag.retain = True
