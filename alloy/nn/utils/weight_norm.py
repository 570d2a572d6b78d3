"""torch.nn.utils.weight_norm and spectral_norm (the hook-based forms, with PyTorch's parameter and buffer names, so
their state dicts load either way).

weight_norm splits a parameter into a magnitude `<name>_g` (its norm over every dim but `dim`) and a direction
`<name>_v`; a forward pre-hook recomputes the weight g v / ||v|| before each call. spectral_norm divides the weight by
its largest singular value, estimated by power iteration on buffers `<name>_u` and `<name>_v` (one step a training
call, as PyTorch; eval reuses them), from the parameter `<name>_orig`."""
from __future__ import annotations
from alloy.autograd import no_grad
from alloy.nn.parameter import Parameter
from alloy.tensor import Tensor

def _norm_except(v: Tensor, dim) -> Tensor:
  """The 2-norm of v over every dim but dim (None: over all), keeping v's rank."""
  if dim is None: return (v * v).sum().sqrt()
  d = dim % v.ndim
  return (v * v).sum(tuple(a for a in range(v.ndim) if a != d), keepdim=True).sqrt()

class _WeightNormHook:
  def __init__(self, name: str, dim): self.name, self.dim = name, dim
  def weight(self, module) -> Tensor:
    g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
    return v * (g / _norm_except(v, self.dim))
  def __call__(self, module, inputs) -> None: object.__setattr__(module, self.name, self.weight(module))

def weight_norm(module, name: str = "weight", dim=0):
  weight = module._parameters.get(name)
  if weight is None: raise ValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
  hook = _WeightNormHook(name, dim)
  del module._parameters[name]
  with no_grad():
    module.register_parameter(name + "_g", Parameter(_norm_except(weight, dim).detach().realize()))
    module.register_parameter(name + "_v", Parameter(weight.detach().realize()))
  hook(module, ())
  object.__setattr__(module, "_weight_norm_" + name, module.register_forward_pre_hook(hook))
  return module

def _installed(module, name: str, kind: str):
  """(the handle, the hook) that weight_norm or spectral_norm (kind) installed for `name`, taken off the module."""
  handle = module.__dict__.pop(f"_{kind}_{name}", None)
  if handle is None: raise ValueError(f"remove_{kind}: {kind} of {name!r} not found in {type(module).__name__}")
  return handle, module._forward_pre_hooks[handle.id][0]

def _restore(module, name: str, weight: Tensor, handle, removed: tuple) -> None:
  """The plain parameter `name` back in place of the reparametrization's parameters and buffers `removed`."""
  handle.remove()
  for attr in removed:
    module._parameters.pop(attr, None)
    module._buffers.pop(attr, None)
  module.__dict__.pop(name, None)
  module.register_parameter(name, Parameter(weight))

def remove_weight_norm(module, name: str = "weight"):
  handle, hook = _installed(module, name, "weight_norm")
  with no_grad(): weight = hook.weight(module).realize()
  _restore(module, name, weight, handle, (name + "_g", name + "_v"))
  return module

def _normalize(x: Tensor, eps: float) -> Tensor: return x / (x * x).sum().sqrt().maximum(eps)

class _SpectralNormHook:
  def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float):
    self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps
  def matrix(self, weight: Tensor) -> Tensor:
    w = weight.movedim(self.dim, 0) if self.dim != 0 else weight
    return w.reshape(w.shape[0], -1)
  def __call__(self, module, inputs) -> None:
    weight = getattr(module, self.name + "_orig")
    u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
    w = self.matrix(weight)
    if module.training:
      with no_grad():
        for _ in range(self.n_power_iterations):
          v = _normalize(w.detach().T @ u, self.eps)
          u = _normalize(w.detach() @ v, self.eps)
        u, v = u.realize(), v.realize()
      setattr(module, self.name + "_u", u)
      setattr(module, self.name + "_v", v)
    sigma = u @ (w @ v)
    object.__setattr__(module, self.name, weight / sigma)

def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim=None):
  weight = module._parameters.get(name)
  if weight is None: raise ValueError(f"spectral_norm: {type(module).__name__} has no parameter {name!r}")
  if n_power_iterations <= 0: raise ValueError(f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}")
  if dim is None: dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
  hook = _SpectralNormHook(name, n_power_iterations, dim, eps)
  w = hook.matrix(weight)
  del module._parameters[name]
  module.register_parameter(name + "_orig", weight)
  with no_grad():
    module.register_buffer(name + "_u", _normalize(Tensor.randn(w.shape[0], dtype=weight.dtype, device=weight.device), eps).realize())
    module.register_buffer(name + "_v", _normalize(Tensor.randn(w.shape[1], dtype=weight.dtype, device=weight.device), eps).realize())
  object.__setattr__(module, name, weight * 1.0)
  object.__setattr__(module, "_spectral_norm_" + name, module.register_forward_pre_hook(hook))
  return module

def remove_spectral_norm(module, name: str = "weight"):
  handle, hook = _installed(module, name, "spectral_norm")
  w, u, v = (getattr(module, name + suffix) for suffix in ("_orig", "_u", "_v"))
  with no_grad(): weight = (w / (u @ (hook.matrix(w) @ v))).realize()
  _restore(module, name, weight, handle, (name + "_orig", name + "_u", name + "_v"))
  return module
