"""The containers: Sequential, ModuleList and ModuleDict, whose children are named by position or key."""
from __future__ import annotations
from collections import OrderedDict
from alloy.nn.module import Module

def _index(i: int, n: int, what: str) -> int:
  if not isinstance(i, int): raise TypeError(f"{what} indices must be integers or slices, not {type(i).__name__}")
  if not -n <= i < n: raise IndexError(f"index {i} is out of range for a {what} of length {n}")
  return i % n

class Sequential(Module):
  """Calls its modules in order, each on the previous one's output. Sequential(a, b) or Sequential(OrderedDict(...))."""
  def __init__(self, *args):
    super().__init__()
    if len(args) == 1 and isinstance(args[0], OrderedDict):
      for name, m in args[0].items(): self.add_module(name, m)
    else:
      for i, m in enumerate(args): self.add_module(str(i), m)
  def forward(self, x):
    for m in self._modules.values(): x = m(x)
    return x
  def __len__(self): return len(self._modules)
  def __iter__(self): return iter(self._modules.values())
  def __getitem__(self, i):
    if isinstance(i, slice): return Sequential(OrderedDict(list(self._modules.items())[i]))
    return list(self._modules.values())[_index(i, len(self), "Sequential")]
  def __setitem__(self, i, m): setattr(self, list(self._modules)[_index(i, len(self), "Sequential")], m)
  def __delitem__(self, i):
    keys = list(self._modules)
    for k in (keys[i] if isinstance(i, slice) else [keys[_index(i, len(keys), "Sequential")]]): del self._modules[k]
  def append(self, m: Module):
    self.add_module(str(len(self)), m)
    return self

class ModuleList(Module):
  """A list of modules, registered by position ("0", "1", ...); it has no forward."""
  def __init__(self, modules=None):
    super().__init__()
    if modules is not None: self.extend(modules)
  def __len__(self): return len(self._modules)
  def __iter__(self): return iter(self._modules.values())
  def __getitem__(self, i):
    if isinstance(i, slice): return ModuleList(list(self._modules.values())[i])
    return self._modules[str(_index(i, len(self), "ModuleList"))]
  def __setitem__(self, i, m): self.add_module(str(_index(i, len(self), "ModuleList")), m)
  def __delitem__(self, i):
    mods = list(self._modules.values())
    del mods[i if isinstance(i, slice) else _index(i, len(mods), "ModuleList")]
    self._modules.clear()
    self.extend(mods)
  def append(self, m: Module):
    self.add_module(str(len(self)), m)
    return self
  def extend(self, modules):
    for m in modules: self.append(m)
    return self
  def insert(self, index: int, m: Module) -> None:
    mods = list(self._modules.values())
    mods.insert(index, m)
    self._modules.clear()
    self.extend(mods)
  def __iadd__(self, modules): return self.extend(modules)

class ModuleDict(Module):
  """A dict of modules, registered under their keys; it has no forward."""
  def __init__(self, modules=None):
    super().__init__()
    if modules is not None: self.update(modules)
  def __len__(self): return len(self._modules)
  def __iter__(self): return iter(self._modules)
  def __contains__(self, key): return key in self._modules
  def __getitem__(self, key): return self._modules[key]
  def __setitem__(self, key, m): self.add_module(key, m)
  def __delitem__(self, key): del self._modules[key]
  def keys(self): return self._modules.keys()
  def values(self): return self._modules.values()
  def items(self): return self._modules.items()
  def pop(self, key):
    m = self._modules[key]
    del self._modules[key]
    return m
  def update(self, modules):
    for k, m in (modules.items() if hasattr(modules, "items") else modules): self[k] = m

class ParameterList(Module):
  """A list of parameters, registered by position ("0", "1", ...); a Tensor appended becomes a Parameter."""
  def __init__(self, values=None):
    super().__init__()
    if values is not None: self.extend(values)
  def __len__(self): return len(self._parameters)
  def __iter__(self): return iter(self._parameters.values())
  def __getitem__(self, i):
    if isinstance(i, slice): return ParameterList(list(self._parameters.values())[i])
    return self._parameters[str(_index(i, len(self), "ParameterList"))]
  def __setitem__(self, i, p): self.register_parameter(str(_index(i, len(self), "ParameterList")), _parameter(p))
  def append(self, p):
    self.register_parameter(str(len(self)), _parameter(p))
    return self
  def extend(self, values):
    for p in values: self.append(p)
    return self

class ParameterDict(Module):
  """A dict of parameters under string keys, in insertion order; a Tensor stored becomes a Parameter."""
  def __init__(self, parameters=None):
    super().__init__()
    if parameters is not None: self.update(parameters)
  def __len__(self): return len(self._parameters)
  def __iter__(self): return iter(self._parameters)
  def __contains__(self, key): return key in self._parameters
  def __getitem__(self, key): return self._parameters[key]
  def __setitem__(self, key, p): self.register_parameter(key, _parameter(p))
  def __delitem__(self, key): del self._parameters[key]
  def keys(self): return self._parameters.keys()
  def values(self): return self._parameters.values()
  def items(self): return self._parameters.items()
  def update(self, parameters):
    for k, p in (parameters.items() if hasattr(parameters, "items") else parameters): self[k] = p

def _parameter(p):
  from alloy.nn.parameter import Parameter
  return p if isinstance(p, Parameter) or p is None else Parameter(p)
