"""What a jitted function changes besides what it returns (alloy/jit.py): its Tensor arguments changed in place (a
parameter update, `p -= lr * p.grad`), and the `.grad` of its leaf arguments (set by backward, reset by
`p.grad = None`). A capture realizes the new values with the results; a replay rebinds the arguments to them.

A leaf argument's `.grad` present at the call is an input as well (backward adds into it): it is bound per call, so
it must be present on every replay exactly when it was at capture.

Tensors the function changes in place without being passed them (a module's weights and an optimizer's state,
reached through a closure or `self`) are *implicit* state: the value each had when the call began must be a computed
buffer (it is then bound per replay, as an argument is, from the tensor's value then), and the replay rebinds it to
its new value. A Tensor it returns counts where the call before changed that same object in place (a cache it
updates and returns), else it is a temporary the function made. The jit holds them (strongly) as long as its capture
lives. Leaves reached that way get their .grad set per replay as backward left it; backward may not add into a .grad
such a leaf already had (a replay could not bind it): zero the grads inside the step (opt.zero_grad()) or after it.

A replay rebinds the live views of what it changes as assign does eagerly, and makes its returned Tensors what the
capture's were (view_links): an argument returned is that argument, a view stays a view of its base.
"""
from __future__ import annotations
import weakref
from alloy import autograd
from alloy.assign import note_view, rebind_views, view_again
from alloy.ir.node import views_a_buffer
from alloy.ir.ops import Op
from alloy.engine import realize as engine
from alloy.engine.watch import Watcher

class State:
  """The arguments' nodes and grads when the call starts; changes() tells what the function changed."""
  def __init__(self, tensors: list):
    self.tensors = tensors
    self.nodes = [t.node for t in tensors]
    self.grads = [_grad_node(t) for t in tensors]
    self.implicit: list = []   # Tensors and Leaves the function changed without being passed them (Watch.implicit)

  def changes(self) -> tuple[list, list]:
    """([(kind, index)], [the new Tensors]): kind "value" (the argument itself), "grad" (its .grad, a new Tensor)
    or "no grad" (its .grad set to None: no Tensor); an index past the arguments is one of the implicit state."""
    kinds, new = [], []
    for i, t in enumerate(self.tensors):
      if t.node is not self.nodes[i]:
        kinds.append(("value", i)); new.append(t)
      g = _grad_node(t)
      if g is not self.grads[i]:
        if g is None: kinds.append(("no grad", i))
        else: kinds.append(("grad", i)); new.append(t.grad)
    for k, obj in enumerate(self.implicit, len(self.tensors)):
      if not isinstance(obj, autograd.Leaf): kinds.append(("value", k)); new.append(obj)
      elif obj.grad is None: kinds.append(("no grad", k))
      else: kinds.append(("grad", k)); new.append(obj.grad)
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
  """What a captured function changes in place or gives a .grad, told before each change (the watchers' `changed`):
  per object (weakly: a temporary that is gone is fine) its value (a Leaf: its .grad) before the first change, in order."""
  def __init__(self): self.seen: dict = {}
  def changed(self, obj) -> None:
    seen = self.seen.get(id(obj))
    if seen is None or seen[0]() is not obj:
      self.seen[id(obj)] = (weakref.ref(obj), obj.grad if isinstance(obj, autograd.Leaf) else obj.node)

  def alive(self) -> dict:
    """What was changed and is still alive, weakly, by id."""
    return {k: ref for k, (ref, _) in self.seen.items() if ref() is not None}

  def implicit(self, name: str, tensors: list, outs: list, before: dict) -> list:
    """[(Tensor, its node at the call) or (Leaf, None)]: what the function changed besides its arguments, still alive;
    refused where a replay could not bind it (see the module docstring). A returned Tensor counts only where the
    call before changed that same object (alive(), `before`): else it is a temporary the function made."""
    from alloy.jit import JitError
    made = {id(t) for t in outs if (ref := before.get(id(t))) is None or ref() is not t}
    mine = {id(t) for t in tensors} | {id(t._ag) for t in tensors if t._ag is not None} | made
    found = []
    for k, (ref, entry) in self.seen.items():
      if k in mine or (obj := ref()) is None: continue   # gone: a temporary of the function
      if isinstance(obj, autograd.Leaf):
        if entry is not None:
          raise JitError(f"jit {name}: backward adds into the .grad a tensor reached through a closure or self had when the call began; "
                         f"a replay could not bind it: clear the grads inside the function before backward (opt.zero_grad()), "
                         f"or after the update, or pass the tensor as an argument")
        found.append((obj, None))
      elif views_a_buffer(entry): found.append((obj, entry))
      elif entry.op is Op.BUFFER: found.append((obj, engine.buffer_view(entry.arg, entry.shape)))
      else:
        raise JitError(f"jit {name}: the function changes in place a tensor of shape {obj.shape} that is not an argument (reached through "
                       f"a closure or self) and whose value was not computed when the call began (made inside the function, or changed "
                       f"lazily before it); a replay could not bind it: realize it before the call, or pass it as an argument")
    return found

def apply(kinds: list, targets: list, new: list) -> None:
  """Rebind the arguments and the implicit state (and their .grad) to a replay's new values; targets: the Tensor
  arguments, then the implicit Tensors and Leaves."""
  it = iter(new)
  for kind, i in kinds:
    t = targets[i]
    if kind == "value":
      t.node = next(it).node
      autograd.bump(t)
      rebind_views(t)   # views that outlive the call (made before it, returned by it) show the new value, as eagerly
    else:
      leaf = t if isinstance(t, autograd.Leaf) else t._ag
      leaf.grad = next(it) if kind == "grad" else None

def view_links(outs: list, targets: list) -> list:
  """Per returned Tensor: (("target" or "out", index), [(how, args) from the Tensor up to that base]) where it is a
  view of an argument, of the implicit state or of another returned Tensor; with no steps where it is an argument
  itself; else None."""
  known = {id(t): ("out", k) for k, t in enumerate(outs)}
  known.update({id(t): ("target", i) for i, t in enumerate(targets) if not isinstance(t, autograd.Leaf)})
  links = []
  for t in outs:
    steps, x = [], t
    while (at := known.get(id(x))) is None or (x is t and at[0] == "out"):
      if (b := getattr(x, "_base", None)) is None: break
      steps.append((b[1], b[2]))
      x = b[0]
    links.append((at, steps) if at is not None and (steps or at[0] == "target") else None)
  return links

def link_views(links: list, results: list, targets: list) -> None:
  """A replay's returned Tensors as the capture's were (view_links): an argument returned is that argument, and a
  view is made a view of its base again, so a later change of either reaches the other, as eagerly."""
  for k, link in enumerate(links):
    if link is not None and not link[1]: results[k] = targets[link[0][1]]
  for t, link in zip(results, links):
    if link is None or not link[1]: continue
    (kind, i), steps = link
    base = targets[i] if kind == "target" else results[i]
    with autograd.no_grad():
      for how, args in reversed(steps[1:]): base = view_again(base, how, args)
    note_view(base, t, *steps[0])
