"""The Optimizer base: parameter groups, per-parameter state, and the fused update every optimizer's step() runs.

A step updates the parameters a few at a time: the parameters of a group that have a gradient are split into
chunks of one device, dtype and step count (at most PARAMS_PER_KERNEL each, so a kernel's buffers stay within every
device's binding limit), and each chunk is one flat vector: the update reads the chunk's values, gradients and state
as one concatenation and writes one new flat vector per quantity (one kernel each: the parameters, and each state
tensor). All chunks realize together, then every parameter and state tensor is rebound to its slice of the new
vectors (parameter.rebind), so the next step's concatenation reads one buffer per quantity. State stays on the
device; the host never reads a value.

The hyper-parameters and the step-dependent factors (learning rate, bias corrections) are Python numbers in the
update's expression, which the schedule lifts into kernel arguments: a learning-rate schedule or Adam's step count
reuses the compiled kernels. An update keeps its distinct numbers within the schedule's MAX_KERNEL_VARS (8) per
kernel by folding them on the host first (Adam's lr / bias_correction1, for one).
"""
from __future__ import annotations
from alloy.tensor import Tensor, cat
from alloy.autograd import no_grad, enable_grad
from alloy.engine.realize import realize as realize_all
from alloy.nn.parameter import rebind
from alloy.jit import JitError, capturing

PARAMS_PER_KERNEL = 8

class _Required:
  def __repr__(self): return "<required parameter>"
required = _Required()

def flat(tensors: list[Tensor]) -> Tensor:
  """The tensors' values as one vector, in order."""
  parts = [t.reshape(-1) for t in tensors]
  return parts[0] if len(parts) == 1 else cat(parts)

def unflat(vector: Tensor, like: list[Tensor]) -> list[Tensor]:
  """Slices of vector shaped as the tensors of `like` (flat's inverse)."""
  out, start = [], 0
  for t in like:
    n = t.numel()
    out.append(vector.shrink(((start, start + n),)).reshape(t.shape))
    start += n
  return out

class Optimizer:
  """Holds param_groups (dicts of 'params' and hyper-parameters) and state (parameter -> dict); a subclass gives
  `state_names` (the per-parameter state tensors) and `update(group, step, values, grads, state)`, which returns the
  new flat values and the new flat state, by name."""
  state_names: tuple = ()

  def __init__(self, params, defaults: dict):
    self.defaults, self.state, self.param_groups = dict(defaults), {}, []
    if isinstance(params, Tensor): raise TypeError("params must be an iterable of Tensors or of dicts, got a Tensor (wrap it in a list)")
    groups = list(params)
    if not groups: raise ValueError("optimizer got an empty parameter list")
    if not isinstance(groups[0], dict): groups = [{"params": groups}]
    for g in groups: self.add_param_group(g)

  def add_param_group(self, group: dict) -> None:
    if not isinstance(group, dict): raise TypeError(f"a parameter group must be a dict, got {type(group).__name__}")
    params = group["params"]
    params = [params] if isinstance(params, Tensor) else list(params)
    for p in params:
      if not isinstance(p, Tensor): raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
      if not p.is_leaf: raise ValueError("can't optimize a non-leaf Tensor (one computed from others); pass the leaves")
      if not p.requires_grad: raise ValueError(f"optimizing a tensor of shape {tuple(p.shape)} that does not require grad")
    seen = {id(p) for g in self.param_groups for p in g["params"]}
    if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
      raise ValueError("some parameters appear in more than one parameter group (or twice in one)")
    filled = {**self.defaults, **group, "params": params}
    for k, v in filled.items():
      if v is required: raise ValueError(f"parameter group didn't specify a value of the required optimization parameter {k}")
    self.check_hyperparameters(filled)
    self.param_groups.append(filled)

  def check_hyperparameters(self, group: dict) -> None:
    if group.get("lr", 0) < 0: raise ValueError(f"Invalid learning rate: {group['lr']}")

  def zero_grad(self, set_to_none: bool = True) -> None:
    for g in self.param_groups:
      for p in g["params"]:
        if p.grad is not None: p.grad = None if set_to_none else p.grad.zeros_like()

  def step(self, closure=None):
    """One update of every parameter that has a gradient; closure, if given, recomputes and returns the loss first."""
    if capturing():
      raise JitError(f"{type(self).__name__}.step() inside @jit is not supported yet: parameters are updated by rebinding them to new "
                     "buffers, and a replay would read them as they were at capture; call step() outside the jitted function")
    loss = None
    if closure is not None:
      with enable_grad(): loss = closure()
    with no_grad():
      pending = []   # (params, {name: new flat vector}) per chunk
      for group in self.param_groups:
        for chunk in self._chunks(group):
          step = self.state.get(chunk[0], {}).get("step", 0) + 1
          state = {name: flat([self._state_tensor(p, name) for p in chunk]) for name in self.state_names}
          grads = flat([p.grad.cast(p.dtype) if p.grad.dtype is not p.dtype else p.grad for p in chunk])
          new_values, new_state = self.update(group, step, flat(chunk), grads, state, step == 1)
          pending.append((chunk, step, new_values, new_state))
      realize_all([t for _, _, v, s in pending for t in (v, *s.values())])
      for chunk, step, new_values, new_state in pending:
        for p, v in zip(chunk, unflat(new_values, chunk)): rebind(p, v)
        slices = {name: unflat(t, chunk) for name, t in new_state.items()}
        for i, p in enumerate(chunk):
          st = self.state.setdefault(p, {})
          st["step"] = step
          for name, parts in slices.items(): st[name] = parts[i]
    return loss

  def _chunks(self, group: dict) -> list[list[Tensor]]:
    by_key: dict = {}
    for p in group["params"]:
      if p.grad is None: continue
      by_key.setdefault((p.device, p.dtype, self.state.get(p, {}).get("step", 0)), []).append(p)
    return [ps[i:i + PARAMS_PER_KERNEL] for ps in by_key.values() for i in range(0, len(ps), PARAMS_PER_KERNEL)]

  def _state_tensor(self, p: Tensor, name: str) -> Tensor:
    t = self.state.get(p, {}).get(name)
    return t if t is not None else Tensor.zeros(*p.shape, dtype=p.dtype, device=p.device)

  def update(self, group: dict, step: int, values: Tensor, grads: Tensor, state: dict, first: bool):
    raise NotImplementedError(f"{type(self).__name__} defines no update()")

  def __repr__(self):
    lines = [f"{type(self).__name__} ("]
    for i, g in enumerate(self.param_groups):
      lines.append(f"Parameter Group {i}")
      lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
    return "\n".join(lines + [")"])
