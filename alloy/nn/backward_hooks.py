"""Module backward hooks, PyTorch's full ones: register_full_backward_pre_hook's hook(module, grad_output) runs when
the gradients of a call's outputs are known and may return new ones; register_full_backward_hook's
hook(module, grad_input, grad_output) runs when those of its positional tensor arguments are, and may return new ones.

A call of a module with such hooks passes its tensor arguments through identity nodes of one autograd GradGroup and
its tensor outputs (after its forward hooks) through another (autograd.group_identities): backward reaches every
member of a group before any of their parents, so each group's callback sees all of its gradients at once, final,
and what it returns is what flows on. grad_input holds None for an argument that does not require grad, grad_output
for an output no gradient reached; a call none of whose arguments requires grad runs the full hooks with the output
gradients, as PyTorch's does."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.autograd import GradGroup, group_identities

class BackwardHookCall:
  """One call of a module with backward hooks: wraps its arguments and outputs, and runs the hooks in backward."""
  def __init__(self, module):
    self.module, self.grad_output, self.arg_slots, self.member_slots = module, None, [], []
    self.inputs = GradGroup(self._inputs_done)

  def wrap_arguments(self, args: tuple) -> tuple:
    self.arg_slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[i] for i in self.arg_slots]
    wrapped = group_identities(tensors, self.inputs)
    self.member_slots = [k for k, (t, w) in enumerate(zip(tensors, wrapped)) if w is not t]   # the arguments that require grad
    out = list(args)
    for i, w in zip(self.arg_slots, wrapped): out[i] = w
    return tuple(out)

  def wrap_outputs(self, out):
    single = isinstance(out, Tensor)
    items = [out] if single else list(out) if isinstance(out, (tuple, list)) else None
    if items is None: return out   # not tensors: nothing to hook
    slots = [i for i, t in enumerate(items) if isinstance(t, Tensor)]
    self.n_outputs = len(slots)
    group = GradGroup(self._outputs_done)
    wrapped = group_identities([items[i] for i in slots], group)
    self.output_members = [k for k, (i, w) in enumerate(zip(slots, wrapped)) if w is not items[i]]
    for i, w in zip(slots, wrapped): items[i] = w
    if not group.members: return out   # no output requires grad: backward never comes here
    return items[0] if single else type(out)(items)

  def _outputs_done(self, grads: list) -> list:
    grad_output = [None] * self.n_outputs
    for k, g in zip(self.output_members, grads): grad_output[k] = g
    grad_output = tuple(grad_output)
    for hook, _ in list(self.module._backward_pre_hooks.values()):
      if (r := hook(self.module, grad_output)) is not None: grad_output = tuple(r) if isinstance(r, (tuple, list)) else (r,)
    self.grad_output = grad_output
    if not self.member_slots: self._run_full_hooks([None] * len(self.arg_slots))   # no argument will be reached
    return [grad_output[k] for k in self.output_members]

  def _inputs_done(self, grads: list) -> list:
    grad_input = [None] * len(self.arg_slots)
    for k, g in zip(self.member_slots, grads): grad_input[k] = g
    grad_input = self._run_full_hooks(grad_input)
    return [grad_input[k] for k in self.member_slots]

  def _run_full_hooks(self, grad_input: list) -> list:
    for hook, _ in list(self.module._backward_hooks.values()):
      r = hook(self.module, tuple(grad_input), self.grad_output)
      if r is not None:
        r = list(r) if isinstance(r, (tuple, list)) else [r]
        if len(r) != len(grad_input):
          raise RuntimeError(f"backward hook of {type(self.module).__name__}: returned {len(r)} gradients for {len(grad_input)} inputs")
        grad_input = r
    return grad_input
