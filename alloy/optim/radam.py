"""RAdam with torch.optim.RAdam's update: Adam's moments, and while the variance of the adaptive step is not yet
tractable (rho_t <= 5) the bias-corrected momentum alone; after, the adaptive step times the rectification. The
choice is made on the device from the step count (a kernel argument), so a jitted step replays across the switch."""
from __future__ import annotations
from alloy.tensor import Tensor, where
from alloy.optim.optimizer import Optimizer

class RAdam(Optimizer):
  state_names = ("exp_avg", "exp_avg_sq")
  zero_tested = ("weight_decay",)

  def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
               decoupled_weight_decay: bool = False, maximize: bool = False):
    super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                  decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

  def update(self, group, h, step, values, grads, state, first):
    lr, (beta1, beta2), eps, wd = h["lr"], h["betas"], h["eps"], h["weight_decay"]
    g = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0:
      if group["decoupled_weight_decay"]: values = values * (1 - lr * wd)
      else: g = g + values * wd
    m = state["exp_avg"] + (g - state["exp_avg"]) * (1 - beta1)
    v = state["exp_avg_sq"] * beta2 + g * g * (1 - beta2)
    bias2 = 1 - beta2 ** step
    rho_inf = 2 / (1 - beta2) - 1
    rho = Tensor.full((), rho_inf - 2 * step * beta2 ** step / bias2, dtype=values.dtype, device=values.device)
    safe = where(rho > 5.0, rho, 6.0)   # the rectification's root is taken only where it is used
    rect = ((safe - 4) * (safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe)).sqrt()
    m_hat = m / (1 - beta1 ** step)
    adaptive = bias2 ** 0.5 / (v.sqrt() + eps)
    return values - where(rho > 5.0, m_hat * lr * adaptive * rect, m_hat * lr), {"exp_avg": m, "exp_avg_sq": v}
