"""The Optimizer base: parameter groups, per-parameter state, and the fused update every optimizer's step() runs.

A step updates the parameters a few at a time: the parameters of a group that have a gradient are split into
chunks of one device, dtype and step count (at most PARAMS_PER_KERNEL each, so a kernel's buffers stay within every
device's binding limit; a parameter of ALONE_FROM elements or more is a chunk of its own, since reading a
concatenation costs a select per part and element, which only pays for small tensors), and each chunk is one flat
vector: the update reads the chunk's values, gradients and state
as one concatenation and writes one new flat vector per quantity (one kernel each: the parameters, and each state
tensor). All chunks realize together, then every parameter and state tensor takes its slice of the new vectors in
place (Tensor.copy_); while they stay those slices, the next step reads the vectors themselves (only the gradients
are concatenated). State stays on the device; the host never reads a value.

The hyper-parameters and the step-dependent factors (learning rate, bias corrections) are Python numbers in the
update's expression, which the schedule lifts into kernel arguments: a learning-rate schedule or Adam's step count
reuses the compiled kernels. An update keeps its distinct numbers within the schedule's MAX_KERNEL_VARS (8) per
kernel by folding them on the host first (Adam's lr / bias_correction1, for one). A per-parameter number that a step
changes by a rule of its own (NAdam's running product mu_product: `host_state`) is kept on the host and advanced each
step (`advance_host`), and the update reads it as one of those numbers.

Under @jit a whole step is captured: the parameters and state are changed in place, which the capture records as
state a replay rebinds (jit_state.py), every number of a group (lr, momentum, betas, eps, weight decay, ...) and the
step count are live numbers (jit.live: each replay reads them again, so a scheduler's new lr or a weight decay set
between calls reaches the replayed kernels, compiling nothing), and counting the step (and advancing host_state) is a
replay hook (jit.on_replay), run before the live numbers are read. What decides the update's code rather than its
numbers (`structure`: the flags, whether momentum or weight decay is 0) is guarded (jit.guard): a replay that finds
it changed runs the step normally and captures again, as it does after add_param_group or load_state_dict
(`generation`).
A capture of a parameter's first step (which creates its state) is refused.
"""
from __future__ import annotations
from alloy.tensor import Tensor, cat
from alloy.autograd import no_grad, enable_grad
from alloy.realize_tensors import realize as realize_all
from alloy.jit import JitError, capturing, guard, live, on_replay

PARAMS_PER_KERNEL = 8
ALONE_FROM = 1 << 16   # a parameter of this many elements or more is a chunk of its own

class _Required:
  def __repr__(self): return "<required parameter>"
required = _Required()

def flat(tensors: list[Tensor], like: list[Tensor] | None = None) -> Tensor:
  """The tensors' values as one vector, in order; a None among them (state not made yet) is zeros shaped as its
  tensor in `like`, and all None is one zero vector (no concatenation of constants)."""
  like = like or tensors
  if all(t is None for t in tensors): return Tensor.zeros(sum(t.numel() for t in like), dtype=like[0].dtype, device=like[0].device)
  parts = [(t if t is not None else Tensor.zeros(*s.shape, dtype=s.dtype, device=s.device)).reshape(-1) for t, s in zip(tensors, like)]
  return parts[0] if len(parts) == 1 else cat(parts)

def unflat(vector: Tensor, like: list[Tensor]) -> list[Tensor]:
  """Slices of vector shaped as the tensors of `like` (flat's inverse), each a value of its own rather than a view
  of the vector (an in-place change of a view would write through to the vector)."""
  out, start = [], 0
  for t in like:
    n = t.numel()
    part = vector.shrink(((start, start + n),)).reshape(t.shape)
    out.append(part._new(part.node))
    start += n
  return out

# hyper-parameters that may not be negative, with torch.optim's names for them in its errors
NON_NEGATIVE = {"eps": "epsilon", "weight_decay": "weight_decay", "momentum": "momentum", "alpha": "alpha", "lr_decay": "lr_decay",
                "initial_accumulator_value": "initial_accumulator_value", "momentum_decay": "momentum_decay"}

def _number(v) -> bool: return isinstance(v, (int, float)) and not isinstance(v, bool)

def _numbers(v) -> bool: return _number(v) or (type(v) in (tuple, list) and len(v) > 0 and all(_number(x) for x in v))

def live_numbers(group: dict) -> dict:
  """The group's numbers (and tuples of numbers: betas) as live numbers (jit.live), its other entries as they are."""
  out = {}
  for k, v in group.items():
    if k == "params" or not _numbers(v): out[k] = v
    elif _number(v): out[k] = live(lambda k=k: group[k], f"the hyper-parameter {k!r}")
    else: out[k] = type(v)(live(lambda k=k, i=i: group[k][i], f"the hyper-parameter {k!r}[{i}]") for i in range(len(v)))
  return out

class Optimizer:
  """Holds param_groups (dicts of 'params' and hyper-parameters) and state (parameter -> dict); a subclass gives
  `state_names` (the per-parameter state tensors), `zero_tested` (the hyper-parameters whose being 0 or not changes
  its code) and `update(group, h, step, values, grads, state, first)`, which returns the new flat values and the new
  flat state, by name: its code follows the group's flags, its numbers are h's (live under @jit)."""
  state_names: tuple = ()
  zero_tested: tuple = ()
  host_state: tuple = ()   # per-parameter numbers kept on the host (NAdam's mu_product), advanced by advance_host

  def __init__(self, params, defaults: dict):
    self.defaults, self.state, self.param_groups = dict(defaults), {}, []
    self.generation = 0   # counts add_param_group and load_state_dict, which a @jit capture of step() guards
    self._vectors: dict = {}   # (chunk, quantity) -> (its last flat vector, the nodes of its slices)
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
    self.generation += 1

  def check_hyperparameters(self, group: dict) -> None:
    """torch.optim's checks of the hyper-parameters a group has (a subclass adds its own): none negative, betas in [0, 1)."""
    if group.get("lr", 0) < 0: raise ValueError(f"Invalid learning rate: {group['lr']}")
    for key, name in NON_NEGATIVE.items():
      if key in group and group[key] < 0: raise ValueError(f"Invalid {name} value: {group[key]}")
    for i, b in enumerate(group.get("betas", ())):
      if not 0.0 <= b < 1.0: raise ValueError(f"Invalid beta parameter at index {i}: {b}")

  def zero_grad(self, set_to_none: bool = True) -> None:
    for g in self.param_groups:
      for p in g["params"]:
        if p.grad is not None: p.grad = None if set_to_none else p.grad.zeros_like()

  def step(self, closure=None):
    """One update of every parameter that has a gradient; closure, if given, recomputes and returns the loss first."""
    loss = None
    if closure is not None:
      with enable_grad(): loss = closure()
    with no_grad():
      pending = []   # (params, step, new flat values, {name: new flat state}) per chunk
      if capturing(): guard(lambda: self.generation, f"{type(self).__name__}'s groups and state (add_param_group, load_state_dict)")
      for i, group in enumerate(self.param_groups):
        if capturing(): guard(lambda group=group: self.structure(group), f"{type(self).__name__}'s parameter group {i}")
        h = live_numbers(group)
        for chunk in self._chunks(group):
          key = tuple(id(p) for p in chunk)
          step = self.state.get(chunk[0], {}).get("step", 0) + 1
          if step == 1 and capturing():
            raise JitError(f"{type(self).__name__}.step(): the first step of a parameter creates its state, which a @jit replay cannot "
                           f"repeat; take one step before the capture (a jitted function runs normally on its first call)")
          state = {name: self._vector(key, name, [self._state_tensor(p, name) for p in chunk], chunk) for name in self.state_names}
          grads = flat([p.grad.cast(p.dtype) if p.grad.dtype is not p.dtype else p.grad for p in chunk])
          for p in chunk: self.state.setdefault(p, {})["step"] = step
          hc = h
          if self.host_state:   # their new values, as live numbers of the update (a replay advances them again)
            for p in chunk: self.advance_host(group, self.state[p])
            hc = {**h, **{k: live(lambda p=chunk[0], k=k: self.state[p][k], f"the state {k!r}") for k in self.host_state}}
          on_replay(lambda chunk=chunk, group=group: self._count_step(chunk, group))
          count = live(lambda p=chunk[0]: self.state[p]["step"], "the step count")
          new_values, new_state = self.update(group, hc, count, self._vector(key, None, chunk, chunk), grads, state, step == 1)
          pending.append((chunk, new_values, new_state))
      realize_all([t for _, v, s in pending for t in (v, *s.values())])
      self._vectors = {}
      for chunk, new_values, new_state in pending:
        key = tuple(id(p) for p in chunk)
        for name, vector in ((None, new_values), *new_state.items()):
          parts = unflat(vector, chunk)
          for p, part in zip(chunk, parts):
            if name is None: p.copy_(part)
            elif (old := self.state[p].get(name)) is not None: old.copy_(part)
            else: self.state[p][name] = part
          self._vectors[(key, name)] = (vector, tuple(t.node for t in parts))
    return loss

  def structure(self, group: dict) -> dict:
    """What of a group decides the update's code rather than its numbers: its entries that are not numbers (flags:
    nesterov, amsgrad, maximize), each tuple's length, and whether each hyper-parameter of zero_tested is 0."""
    out = {k: len(v) if _numbers(v) else v for k, v in group.items() if k != "params" and not _number(v)}
    return out | {f"{k} != 0": group[k] != 0 for k in self.zero_tested}

  def _count_step(self, chunk: list, group: dict) -> None:
    """What a replayed step does on the host: count the step of each parameter of the chunk (and advance host_state)."""
    for p in chunk:
      self.state[p]["step"] += 1
      if self.host_state: self.advance_host(group, self.state[p])

  def advance_host(self, group: dict, entry: dict) -> None:
    """host_state's numbers in a parameter's state entry, after its step count became entry['step']."""
    raise NotImplementedError

  def state_dict(self) -> dict:
    """torch.optim's layout: {'state': {index: {name: tensor, 'step': int}}, 'param_groups': [{..., 'params': [index]}]},
    parameters numbered in group order."""
    index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
    state = {index[id(p)]: dict(st) for p, st in self.state.items() if id(p) in index}
    groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups]
    return {"state": state, "param_groups": groups}

  def load_state_dict(self, state_dict: dict) -> None:
    """Takes state_dict()'s layout (alloy's or torch.optim's, whose tensors are converted to this optimizer's devices)."""
    groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
    if groups is None or "state" not in state_dict: raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups'")
    if len(groups) != len(self.param_groups) or any(len(g["params"]) != len(h["params"]) for g, h in zip(groups, self.param_groups)):
      raise ValueError("load_state_dict: the saved parameter groups do not match this optimizer's in number or size")
    params = {i: p for g, h in zip(groups, self.param_groups) for i, p in zip(g["params"], h["params"])}
    self.state = {}
    for i, st in state_dict["state"].items():
      p = params[i]
      entry = {}
      for k, v in st.items():
        if k == "step": entry[k] = int(v.item() if hasattr(v, "item") else v)
        elif k in self.host_state: entry[k] = float(v.item() if hasattr(v, "item") else v)
        else:
          t = v if isinstance(v, Tensor) else Tensor(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
          if tuple(t.shape) != tuple(p.shape):
            raise ValueError(f"load_state_dict: state {k!r} of parameter {i} has shape {tuple(t.shape)}, the parameter {tuple(p.shape)}")
          entry[k] = t.to(p.device).cast(p.dtype)
      self.state[p] = entry
    realize_all([t for entry in self.state.values() for t in entry.values() if isinstance(t, Tensor)])   # computed now, as PyTorch copies
    for g, h in zip(groups, self.param_groups): h.update({k: v for k, v in g.items() if k != "params"})
    self._vectors = {}
    self.generation += 1

  def _chunks(self, group: dict) -> list[list[Tensor]]:
    by_key: dict = {}
    alone = []
    for p in group["params"]:
      if p.grad is None: continue
      if p.numel() >= ALONE_FROM: alone.append([p])
      else: by_key.setdefault((p.device, p.dtype, self.state.get(p, {}).get("step", 0)), []).append(p)
    return alone + [ps[i:i + PARAMS_PER_KERNEL] for ps in by_key.values() for i in range(0, len(ps), PARAMS_PER_KERNEL)]

  def _vector(self, key: tuple, name: str | None, tensors: list, like: list[Tensor]) -> Tensor:
    """The chunk's values (name None) or state `name` as one vector: last step's vector itself while every tensor is
    still its slice (no concatenation to read), else their concatenation."""
    hit = self._vectors.get((key, name))
    if hit is not None and all(t is not None and t.node is n for t, n in zip(tensors, hit[1])): return hit[0]
    return flat(tensors, like)

  def _state_tensor(self, p: Tensor, name: str) -> Tensor | None:
    return self.state.get(p, {}).get(name)

  def update(self, group: dict, h: dict, step: int, values: Tensor, grads: Tensor, state: dict, first: bool):
    raise NotImplementedError(f"{type(self).__name__} defines no update()")

  def __repr__(self):
    lines = [f"{type(self).__name__} ("]
    for i, g in enumerate(self.param_groups):
      lines.append(f"Parameter Group {i}")
      lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
    return "\n".join(lines + [")"])
