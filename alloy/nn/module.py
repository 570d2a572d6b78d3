"""nn.Module: the tree of layers that holds parameters and buffers, with PyTorch's interface.

Attributes are sorted as they are set: a Parameter goes to `_parameters`, a Module to `_modules`, a Tensor assigned to
a registered buffer's name (or through register_buffer) to `_buffers`. state_dict names are the dotted paths
("layers.0.weight"), so a PyTorch model's state dict loads into the same tree. Values change through
parameter.rebind (see there), so the optimizer and the caller keep their handles on the same tensors.
"""
from __future__ import annotations
import itertools
from collections import OrderedDict, namedtuple
from alloy.tensor import Tensor
from alloy.realize_tensors import realize
from alloy.nn.parameter import Parameter, rebind, retype
from alloy.nn.backward_hooks import BackwardHookCall
from alloy.runtime.registry import canonical_device
from alloy import dtype as dt

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

_hook_ids = itertools.count()

class RemovableHandle:
  """What register_forward_hook returns: remove() takes the hook out (also on leaving a with block)."""
  def __init__(self, table: OrderedDict, key: int): self.table, self.id = table, key
  def remove(self) -> None: self.table.pop(self.id, None)
  def __enter__(self): return self
  def __exit__(self, *exc) -> None: self.remove()

def _register(table: OrderedDict, hook, prepend: bool, with_kwargs: bool) -> RemovableHandle:
  key = next(_hook_ids)
  table[key] = (hook, with_kwargs)
  if prepend: table.move_to_end(key, last=False)
  return RemovableHandle(table, key)

class Module:
  training: bool

  def __init__(self):
    object.__setattr__(self, "training", True)
    object.__setattr__(self, "_parameters", OrderedDict())
    object.__setattr__(self, "_buffers", OrderedDict())
    object.__setattr__(self, "_non_persistent", set())
    object.__setattr__(self, "_modules", OrderedDict())
    object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
    object.__setattr__(self, "_forward_hooks", OrderedDict())
    object.__setattr__(self, "_backward_pre_hooks", OrderedDict())
    object.__setattr__(self, "_backward_hooks", OrderedDict())

  def forward(self, *args, **kwargs):
    raise NotImplementedError(f"{type(self).__name__} has no forward(): define one in the subclass")
  def __call__(self, *args, **kwargs):
    if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks):
      return self.forward(*args, **kwargs)
    for hook, with_kwargs in list(self._forward_pre_hooks.values()):
      if with_kwargs:
        if (got := hook(self, args, kwargs)) is not None: args, kwargs = got
      elif (got := hook(self, args)) is not None: args = got if isinstance(got, tuple) else (got,)
    backward = BackwardHookCall(self) if self._backward_hooks or self._backward_pre_hooks else None
    if backward is not None: args = backward.wrap_arguments(args)
    out = self.forward(*args, **kwargs)
    for hook, with_kwargs in list(self._forward_hooks.values()):
      got = hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)
      if got is not None: out = got
    return backward.wrap_outputs(out) if backward is not None else out

  # ---- hooks (PyTorch's: a pre-hook may replace the arguments, a hook the output; prepend runs one first)
  def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False) -> RemovableHandle:
    return _register(self._forward_pre_hooks, hook, prepend, with_kwargs)
  def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False) -> RemovableHandle:
    if always_call: raise NotImplementedError("register_forward_hook: always_call=True (a hook run when forward raises) is not supported yet")
    return _register(self._forward_hooks, hook, prepend, with_kwargs)
  # backward hooks (nn/backward_hooks.py): a pre-hook may replace grad_output, a hook grad_input
  def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
    return _register(self._backward_pre_hooks, hook, prepend, False)
  def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
    return _register(self._backward_hooks, hook, prepend, False)

  # ---- attributes
  def _check_init(self, name):
    if "_parameters" not in self.__dict__:
      raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called (call super().__init__() first)")
  def __setattr__(self, name, value):
    if isinstance(value, Parameter):
      self._check_init(name)
      self._forget(name)
      self._parameters[name] = value
    elif isinstance(value, Module):
      self._check_init(name)
      self._forget(name)
      self._modules[name] = value
    elif "_parameters" in self.__dict__ and name in self._parameters:
      if value is not None: raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} (a Parameter or None is expected)")
      self._parameters[name] = None
    elif "_buffers" in self.__dict__ and name in self._buffers:
      if value is not None and not isinstance(value, Tensor):
        raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (a Tensor or None is expected)")
      self._buffers[name] = value
    elif "_modules" in self.__dict__ and name in self._modules:
      if value is not None: raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r} (a Module or None is expected)")
      self._modules[name] = None
    else: object.__setattr__(self, name, value)
  def _forget(self, name):
    for d in (self._parameters, self._buffers, self._modules): d.pop(name, None)
    self._non_persistent.discard(name)
    self.__dict__.pop(name, None)
  def __getattr__(self, name):
    d = self.__dict__
    for table in ("_parameters", "_buffers", "_modules"):
      if table in d and name in d[table]: return d[table][name]
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
  def __delattr__(self, name):
    if any(name in getattr(self, t) for t in ("_parameters", "_buffers", "_modules")): self._forget(name)
    else: object.__delattr__(self, name)

  def register_parameter(self, name: str, param: Parameter | None) -> None:
    self._check_name(name)
    if param is not None and not isinstance(param, Parameter):
      raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got {type(param).__name__}")
    self._forget(name)
    self._parameters[name] = param
  def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
    self._check_name(name)
    if tensor is not None and not isinstance(tensor, Tensor):
      raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}")
    self._forget(name)
    self._buffers[name] = tensor
    if not persistent: self._non_persistent.add(name)
  def add_module(self, name: str, module: Module | None) -> None:
    self._check_name(name)
    if module is not None and not isinstance(module, Module): raise TypeError(f"add_module: {name!r} must be a Module, got {type(module).__name__}")
    self._forget(name)
    self._modules[name] = module
  register_module = add_module
  def _check_name(self, name):
    self._check_init(name)
    if not isinstance(name, str) or not name or "." in name:
      raise KeyError(f"a module attribute name must be a non-empty string without '.', got {name!r}")

  # ---- the tree
  def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
    memo = set() if memo is None else memo
    if remove_duplicate and id(self) in memo: return
    memo.add(id(self))
    yield prefix, self
    for name, m in self._modules.items():
      if m is not None: yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)
  def modules(self):
    for _, m in self.named_modules(): yield m
  def named_children(self):
    seen = set()
    for name, m in self._modules.items():
      if m is not None and id(m) not in seen:
        seen.add(id(m))
        yield name, m
  def children(self):
    for _, m in self.named_children(): yield m
  def _named_members(self, table: str, prefix: str, recurse: bool):
    seen = set()
    mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
    for mod_prefix, m in mods:
      for name, t in getattr(m, table).items():
        if t is None or id(t) in seen: continue
        seen.add(id(t))
        yield (f"{mod_prefix}.{name}" if mod_prefix else name), t
  def named_parameters(self, prefix: str = "", recurse: bool = True): return self._named_members("_parameters", prefix, recurse)
  def parameters(self, recurse: bool = True):
    for _, p in self.named_parameters(recurse=recurse): yield p
  def named_buffers(self, prefix: str = "", recurse: bool = True): return self._named_members("_buffers", prefix, recurse)
  def buffers(self, recurse: bool = True):
    for _, b in self.named_buffers(recurse=recurse): yield b
  def get_submodule(self, target: str) -> Module:
    m = self
    for part in target.split(".") if target else []:
      if part not in m._modules or m._modules[part] is None:
        raise AttributeError(f"{type(m).__name__} has no submodule {part!r} (looking up {target!r})")
      m = m._modules[part]
    return m
  def apply(self, fn):
    for m in self.children(): m.apply(fn)
    fn(self)
    return self

  # ---- modes and gradients
  def train(self, mode: bool = True):
    if not isinstance(mode, bool): raise ValueError(f"train(mode): mode must be a bool, got {type(mode).__name__}")
    for m in self.modules(): object.__setattr__(m, "training", mode)
    return self
  def eval(self): return self.train(False)
  def requires_grad_(self, requires_grad: bool = True):
    for p in self.parameters(): p.requires_grad_(requires_grad)
    return self
  def zero_grad(self, set_to_none: bool = True) -> None:
    for p in self.parameters():
      if p.grad is not None: p.grad = None if set_to_none else p.grad.zeros_like()

  # ---- devices and dtypes
  def to(self, device=None, dtype=None):
    """Moves every parameter and buffer to `device` and casts the floating ones to `dtype`, keeping each tensor object."""
    if isinstance(device, (dt.DType, type)) or (isinstance(device, str) and device in dt.DTYPES): device, dtype = None, device
    if device is not None: device = canonical_device(device)
    if dtype is not None:
      dtype = dt.to_dtype(dtype)
      if not dtype.is_float: raise TypeError(f"Module.to: only floating point dtypes are accepted, got {dtype.name}")
    changed = []
    for t in [*self.parameters(), *self.buffers()]:
      value = t.to(device) if device is not None else t
      if dtype is not None and t.dtype.is_float: value = value.cast(dtype)
      if value is not t: changed.append(retype(t, value))
    # computed now, together, as PyTorch's: a lazy cast would be recomputed by every forward that reads the weight
    if changed: realize(changed)
    return self
  def cpu(self): return self.to("CPU")
  def cuda(self, device=None): return self.to("CUDA" if device is None else f"CUDA:{device}")
  def float(self): return self.to(dtype=dt.float32)
  def double(self): return self.to(dtype=dt.float64)
  def half(self): return self.to(dtype=dt.float16)
  def bfloat16(self): return self.to(dtype=dt.bfloat16)

  # ---- state
  def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
    """Dotted name -> tensor for every parameter and persistent buffer (detached unless keep_vars)."""
    out = OrderedDict() if destination is None else destination
    for name, p in self._parameters.items():
      if p is not None: out[prefix + name] = p if keep_vars else p.detach()
    for name, b in self._buffers.items():
      if b is not None and name not in self._non_persistent: out[prefix + name] = b if keep_vars else b.detach()
    for name, m in self._modules.items():
      if m is not None: m.state_dict(out, prefix + name + ".", keep_vars)
    return out
  def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
    """Gives each parameter and persistent buffer the value of its dotted name (cast to its dtype, moved to its device).
    A shape mismatch always raises; with strict, so do missing and unexpected keys. Every error is named."""
    if not hasattr(state_dict, "keys"): raise TypeError(f"load_state_dict: expected a mapping of names to tensors, got {type(state_dict).__name__}")
    own = self.state_dict(keep_vars=True)
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    errors = []
    for k, t in own.items():
      if k not in state_dict: continue
      v = state_dict[k]
      shape = tuple(getattr(v, "shape", ()))
      if shape != tuple(t.shape):
        errors.append(f"size mismatch for {k}: copying a value of shape {shape}, the shape in this module is {tuple(t.shape)}")
    if strict:
      if unexpected: errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(repr(k) for k in unexpected))
      if missing: errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(repr(k) for k in missing))
    if errors: raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
    loaded = []
    for k, t in own.items():
      if k not in state_dict: continue
      v = state_dict[k]
      v = v.to(t.device) if isinstance(v, Tensor) else Tensor(v, device=t.device)
      loaded.append(rebind(t, v.cast(t.dtype).contiguous() if v.dtype is not t.dtype else v))
    if loaded: realize(loaded)   # computed now, as PyTorch copies (casts once; a @jit capture binds computed state)
    return IncompatibleKeys(missing, unexpected)

  # ---- printing
  def extra_repr(self) -> str: return ""
  def __repr__(self):
    lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
    head = f"{type(self).__name__}({self.extra_repr()}"
    return head + ")" if not lines else head + "\n  " + "\n  ".join(lines) + "\n)"
  def __dir__(self): return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))
