"""NAdam with torch.optim.NAdam's update: Adam's moments with Nesterov momentum, whose coefficient mu_t =
beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)) warms up over the steps. The running product of the mu_t is a number
each parameter keeps on the host (`host_state`, as torch keeps a tensor), advanced once a step, a replayed one too."""
from __future__ import annotations
import numpy as np
from alloy.optim.optimizer import Optimizer

def _mu(beta1, momentum_decay, step):
  return beta1 * (1 - 0.5 * 0.96 ** (step * momentum_decay))

class NAdam(Optimizer):
  state_names = ("exp_avg", "exp_avg_sq")
  zero_tested = ("weight_decay",)
  host_state = ("mu_product",)

  def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
               decoupled_weight_decay: bool = False, maximize: bool = False):
    super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                                  decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

  def advance_host(self, group, entry):
    # in float32 as torch keeps it (a tensor of the default dtype, multiplied by mu rounded to it), so trajectories
    # match torch's to the last bit in float64
    mu = np.float32(_mu(group["betas"][0], group["momentum_decay"], entry["step"]))
    entry["mu_product"] = float(np.float32(entry.get("mu_product", 1.0)) * mu)

  def update(self, group, h, step, values, grads, state, first):
    lr, (beta1, beta2), eps, wd, mu_product = h["lr"], h["betas"], h["eps"], h["weight_decay"], h["mu_product"]
    g = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0:
      if group["decoupled_weight_decay"]: values = values * (1 - lr * wd)
      else: g = g + values * wd
    mu, mu_next = _mu(beta1, h["momentum_decay"], step), _mu(beta1, h["momentum_decay"], step + 1)
    m = state["exp_avg"] + (g - state["exp_avg"]) * (1 - beta1)
    v = state["exp_avg_sq"] * beta2 + g * g * (1 - beta2)
    denom = (v / (1 - beta2 ** step)).sqrt() + eps
    step_g, step_m = lr * (1 - mu) / (1 - mu_product), lr * mu_next / (1 - mu_product * mu_next)
    return values - g / denom * step_g - m / denom * step_m, {"exp_avg": m, "exp_avg_sq": v}
