"""Adam and AdamW (amsgrad optional) with torch.optim's update: the moments as it computes them (a lerp for the
first, multiply-add for the second), bias corrections folded into the step size and the denominator."""
from __future__ import annotations
from alloy.optim.optimizer import Optimizer

class Adam(Optimizer):
  decoupled = False   # AdamW decays the weights directly instead of adding weight_decay * p to the gradient

  def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
               amsgrad: bool = False, maximize: bool = False):
    super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize))
  @property
  def state_names(self):
    return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if any(g["amsgrad"] for g in self.param_groups) else ())

  zero_tested = ("weight_decay",)

  def update(self, group, h, step, values, grads, state, first):
    lr, (beta1, beta2), eps, wd = h["lr"], h["betas"], h["eps"], h["weight_decay"]
    g = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0:
      if self.decoupled: values = values * (1 - lr * wd)
      else: g = g + values * wd
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m = m + (g - m) * (1 - beta1)
    v = v * beta2 + g * g * (1 - beta2)
    new_state = {"exp_avg": m, "exp_avg_sq": v}
    if group["amsgrad"]:
      v = new_state["max_exp_avg_sq"] = state["max_exp_avg_sq"].maximum(v)
    elif "max_exp_avg_sq" in state: new_state["max_exp_avg_sq"] = state["max_exp_avg_sq"]
    step_size = lr / (1 - beta1 ** step)
    denom = v.sqrt() / (1 - beta2 ** step) ** 0.5 + eps   # ** 0.5, not math.sqrt: under @jit step is a traced number
    return values - m / denom * step_size, new_state

class AdamW(Adam):
  decoupled = True
  def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
               amsgrad: bool = False, maximize: bool = False):
    super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
