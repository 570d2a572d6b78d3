"""What a jitted function changes besides what it returns (alloy/jit.py): its Tensor arguments changed in place (a
parameter update, `p -= lr * p.grad`), and the `.grad` of its leaf arguments (set by backward, reset by
`p.grad = None`). A capture realizes the new values with the results; a replay rebinds the arguments to them.

A leaf argument's `.grad` present at the call is an input as well (backward adds into it): it is bound per call, so
it must be present on every replay exactly when it was at capture.
"""
from __future__ import annotations
import weakref
from alloy import autograd
from alloy.engine.watch import Watcher

class State:
  """The arguments' nodes and grads when the call starts; changes() tells what the function changed."""
  def __init__(self, tensors: list):
    self.tensors = tensors
    self.nodes = [t.node for t in tensors]
    self.grads = [_grad_node(t) for t in tensors]

  def changes(self) -> tuple[list, list]:
    """([(kind, argument index)], [the new Tensors]): kind "value" (the argument itself), "grad" (its .grad, a new
    Tensor) or "no grad" (its .grad set to None: no Tensor)."""
    kinds, new = [], []
    for i, t in enumerate(self.tensors):
      if t.node is not self.nodes[i]:
        kinds.append(("value", i)); new.append(t)
      g = _grad_node(t)
      if g is not self.grads[i]:
        if g is None: kinds.append(("no grad", i))
        else: kinds.append(("grad", i)); new.append(t.grad)
    return kinds, new

def _grad_node(t):
  g = t.grad if isinstance(t._ag, autograd.Leaf) else None
  return None if g is None else g.node

def grad_inputs(tensors: list) -> list:
  """Indices of the leaf arguments whose .grad is present now: implicit inputs of the call."""
  return [i for i, t in enumerate(tensors) if isinstance(t._ag, autograd.Leaf) and t._ag.grad is not None]

def with_grads(tensors: list, which: list, name: str) -> list:
  """The replay's inputs: the Tensor arguments, then the .grads that were inputs at capture."""
  check_no_new_grads(tensors, which, name)
  return list(tensors) + grads_of(tensors, which, name)

def grads_of(tensors: list, which: list, name: str) -> list:
  """The .grad Tensors of the arguments `which` for a replay; each must be there, as it was at capture."""
  from alloy.jit import JitError
  out = []
  for i in which:
    ag = tensors[i]._ag
    if not isinstance(ag, autograd.Leaf) or ag.grad is None:
      raise JitError(f"jit {name}: Tensor argument {i} had a .grad at capture and has none now; a replay adds into the .grad it "
                     f"captured (zero it with p.grad.zero_() rather than p.grad = None outside the function, or reset inside it)")
    out.append(ag.grad)
  return out

def check_no_new_grads(tensors: list, which: list, name: str) -> None:
  """A .grad that appeared since capture would be ignored by the replay (it was not an input then)."""
  from alloy.jit import JitError
  for i in grad_inputs(tensors):
    if i not in which:
      raise JitError(f"jit {name}: Tensor argument {i} has a .grad it did not have at capture; the replay would not add into it. "
                     f"Keep .grad present (or absent) across calls as it was on the captured call")

class Watch(Watcher):
  """What a captured function changes in place or gives a .grad (weakly: a temporary that is gone is fine)."""
  def __init__(self): self.seen: dict = {}
  def changed(self, obj) -> None: self.seen.setdefault(id(obj), weakref.ref(obj))
  def check(self, name: str, tensors: list, outs: list) -> None: check_changed(name, self.seen, tensors, outs)

def check_changed(name: str, changed: dict, tensors: list, outs: list) -> None:
  """What the function changed must be its arguments (or what it returns): a replay cannot change anything else."""
  from alloy.jit import JitError
  mine = {id(t) for t in tensors} | {id(t._ag) for t in tensors if t._ag is not None} | {id(t) for t in outs}
  for k, ref in changed.items():
    if k in mine or (obj := ref()) is None: continue   # gone: a temporary of the function
    if isinstance(obj, autograd.Leaf):
      raise JitError(f"jit {name}: backward sets the .grad of a tensor that is not an argument (reached through a closure or self); "
                     f"a replay would not set it: pass the parameters as arguments")
    raise JitError(f"jit {name}: the function changes in place a tensor of shape {obj.shape} that is not an argument (reached through a "
                   f"closure or self); a replay would not change it: pass it as an argument")

def apply(kinds: list, tensors: list, new: list) -> None:
  """Rebind the arguments (and their .grad) to a replay's new values."""
  it = iter(new)
  for kind, i in kinds:
    t = tensors[i]
    if kind == "value":
      t.node = next(it).node
      autograd.bump(t)
    elif kind == "grad": t._ag.grad = next(it)
    else: t._ag.grad = None
