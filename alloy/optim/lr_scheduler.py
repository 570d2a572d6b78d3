"""Learning-rate schedules (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
LinearLR, ConstantLR, PolynomialLR, LambdaLR, MultiplicativeLR, OneCycleLR, SequentialLR, ReduceLROnPlateau) with torch.optim.lr_scheduler's
recursive formulas (each step scales the group's current lr, as PyTorch's get_lr does, so the values match its to
the last bit). The lr is a Python number the update's
kernels take as an argument: a schedule compiles nothing."""
from __future__ import annotations
import bisect, collections, math
from alloy.optim.optimizer import Optimizer

class LRScheduler:
  def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
    if not isinstance(optimizer, Optimizer): raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
    self.optimizer = optimizer
    for g in optimizer.param_groups:
      if last_epoch == -1: g.setdefault("initial_lr", g["lr"])
      elif "initial_lr" not in g: raise KeyError("param 'initial_lr' is not specified in param_groups when resuming an optimizer (last_epoch != -1)")
    self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
    self.last_epoch = last_epoch
    self.step()

  def get_lr(self) -> list: raise NotImplementedError
  def get_last_lr(self) -> list: return list(self._last_lr)
  def closed_form(self) -> list | None:
    """The lrs at last_epoch computed from the base lrs rather than step to step (torch's _get_closed_form_lr), or
    None where a schedule has none; step(epoch) uses it."""
    return None
  def step(self, epoch: int | None = None) -> None:
    """One step on; step(epoch) (deprecated in PyTorch, used by SequentialLR) jumps to epoch."""
    if epoch is None:
      self.last_epoch += 1
      lrs = self.get_lr()
    else:
      self.last_epoch = epoch
      lrs = self.closed_form() or self.get_lr()
    self._set_lrs(lrs)
  def _set_lrs(self, lrs: list) -> None:
    for g, lr in zip(self.optimizer.param_groups, lrs): g["lr"] = lr
    self._last_lr = self._lrs()
  def state_dict(self) -> dict: return {k: v for k, v in self.__dict__.items() if k != "optimizer"}
  def load_state_dict(self, state: dict) -> None: self.__dict__.update(state)
  def _lrs(self): return [g["lr"] for g in self.optimizer.param_groups]

class StepLR(LRScheduler):
  """lr * gamma every step_size epochs."""
  def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
    if not isinstance(step_size, int) or step_size <= 0: raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
    self.step_size, self.gamma = step_size, gamma
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    if self.last_epoch == 0 or self.last_epoch % self.step_size != 0: return self._lrs()
    return [lr * self.gamma for lr in self._lrs()]
  def closed_form(self): return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]

class CosineAnnealingLR(LRScheduler):
  """eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed step to step."""
  def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
    if T_max <= 0: raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max!r}")
    self.T_max, self.eta_min = T_max, eta_min
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    e, T, lo = self.last_epoch, self.T_max, self.eta_min
    if e == 0: return self._lrs()
    if (e - 1 - T) % (2 * T) == 0:
      return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2 for lr, base in zip(self._lrs(), self.base_lrs)]
    return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lr - lo) + lo for lr in self._lrs()]
  def closed_form(self):
    return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2 for base in self.base_lrs]

class LinearLR(LRScheduler):
  """Scales the lr linearly from start_factor to end_factor over total_iters steps, then keeps it."""
  def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1):
    if not 0 < start_factor <= 1: raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
    if not 0 <= end_factor <= 1: raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
    self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    e, a, b, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    if e == 0: return [lr * a for lr in self._lrs()]
    if e > n: return self._lrs()
    return [lr * (1.0 + (b - a) / (n * a + (e - 1) * (b - a))) for lr in self._lrs()]
  def closed_form(self):
    a, b, n = self.start_factor, self.end_factor, self.total_iters
    return [base * (a + (b - a) * min(n, self.last_epoch) / n) for base in self.base_lrs]

class MultiStepLR(LRScheduler):
  """lr * gamma at each milestone (a milestone given twice: gamma squared)."""
  def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
    self.milestones, self.gamma = collections.Counter(milestones), gamma
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    if self.last_epoch not in self.milestones: return self._lrs()
    return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]
  def closed_form(self):
    passed = sum(c for m, c in self.milestones.items() if m <= self.last_epoch)
    return [base * self.gamma ** passed for base in self.base_lrs]

class ExponentialLR(LRScheduler):
  """lr * gamma every step."""
  def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
    self.gamma = gamma
    super().__init__(optimizer, last_epoch)
  def get_lr(self): return self._lrs() if self.last_epoch == 0 else [lr * self.gamma for lr in self._lrs()]
  def closed_form(self): return [base * self.gamma ** self.last_epoch for base in self.base_lrs]

class ConstantLR(LRScheduler):
  """lr * factor for the first total_iters steps, then lr."""
  def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
    if not 0 <= factor <= 1: raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
    self.factor, self.total_iters = factor, total_iters
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    if self.last_epoch == 0: return [lr * self.factor for lr in self._lrs()]
    if self.last_epoch != self.total_iters: return self._lrs()
    return [lr * (1.0 / self.factor) for lr in self._lrs()]
  def closed_form(self):
    return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)) for base in self.base_lrs]

class PolynomialLR(LRScheduler):
  """lr decayed by (1 - epoch / total_iters) ** power over total_iters steps, step to step."""
  def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
    self.total_iters, self.power = total_iters, power
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    e, n = self.last_epoch, self.total_iters
    if e == 0 or e > n: return self._lrs()
    factor = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
    return [lr * factor for lr in self._lrs()]
  def closed_form(self):
    return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power for base in self.base_lrs]

class LambdaLR(LRScheduler):
  """base_lr * lr_lambda(epoch): one function, or one per parameter group."""
  def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
    n = len(optimizer.param_groups)
    self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
    if len(self.lr_lambdas) != n: raise ValueError(f"LambdaLR: expected {n} lr_lambdas, got {len(self.lr_lambdas)}")
    super().__init__(optimizer, last_epoch)
  def get_lr(self): return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]
  def state_dict(self) -> dict: return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}   # functions are not state

class MultiplicativeLR(LambdaLR):
  """lr * lr_lambda(epoch) every step after the first."""
  def get_lr(self):
    if self.last_epoch == 0: return self._lrs()
    return [lr * f(self.last_epoch) for f, lr in zip(self.lr_lambdas, self._lrs())]

class CosineAnnealingWarmRestarts(LRScheduler):
  """Cosine annealing from base_lr to eta_min over T_i steps, restarting with T_i = T_0, T_0 * T_mult, ..."""
  def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):
    if not isinstance(T_0, int) or T_0 <= 0: raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int, got {T_0!r}")
    if not isinstance(T_mult, int) or T_mult < 1: raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got {T_mult!r}")
    self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, last_epoch
    super().__init__(optimizer, last_epoch)
  def get_lr(self):
    return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]
  def step(self, epoch=None) -> None:
    if epoch is None and self.last_epoch < 0: epoch = 0
    if epoch is None:
      epoch = self.last_epoch + 1
      self.T_cur += 1
      if self.T_cur >= self.T_i: self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult
    elif epoch >= self.T_0:
      if self.T_mult == 1: self.T_cur = epoch % self.T_0
      else:
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
        self.T_i = self.T_0 * self.T_mult ** n
    else: self.T_i, self.T_cur = self.T_0, epoch
    self.last_epoch = math.floor(epoch)
    self._set_lrs(self.get_lr())

class OneCycleLR(LRScheduler):
  """The 1cycle policy: the lr rises from max_lr / div_factor to max_lr over pct_start of total_steps, then anneals to
  initial_lr / final_div_factor (three_phase: back to initial_lr first), by cosine or linearly; the momentum (or Adam's
  beta1) cycles the other way between max_momentum and base_momentum. Computed from the step, not step to step."""
  def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start: float = 0.3,
               anneal_strategy: str = "cos", cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
               div_factor: float = 25.0, final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
    if not isinstance(optimizer, Optimizer): raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
    if total_steps is None:
      if epochs is None or steps_per_epoch is None: raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
      total_steps = epochs * steps_per_epoch
    if not isinstance(total_steps, int) or total_steps <= 0: raise ValueError(f"OneCycleLR: total_steps must be a positive int, got {total_steps!r}")
    if not 0 <= pct_start <= 1: raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
    if anneal_strategy not in ("cos", "linear"): raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
    self.total_steps, self.anneal_strategy, self.cycle_momentum = total_steps, anneal_strategy, cycle_momentum
    s = float(pct_start * total_steps)
    ends = [s - 1, 2 * s - 2, total_steps - 1] if three_phase else [s - 1, total_steps - 1]
    keys = ([("initial_lr", "max_lr", "max_momentum", "base_momentum"), ("max_lr", "initial_lr", "base_momentum", "max_momentum"),
             ("initial_lr", "min_lr", "max_momentum", "max_momentum")] if three_phase else
            [("initial_lr", "max_lr", "max_momentum", "base_momentum"), ("max_lr", "min_lr", "base_momentum", "max_momentum")])
    self._phases = list(zip(ends, keys))
    n = len(optimizer.param_groups)
    def per_group(v): return list(v) if isinstance(v, (list, tuple)) else [v] * n
    self.use_beta1 = "betas" in optimizer.defaults
    if cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
      raise ValueError("OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    for g, top, base, peak in zip(optimizer.param_groups, per_group(max_lr), per_group(base_momentum), per_group(max_momentum)):
      if last_epoch == -1:
        g["initial_lr"], g["max_lr"], g["min_lr"] = top / div_factor, top, top / div_factor / final_div_factor
      if cycle_momentum:
        if last_epoch == -1:
          if self.use_beta1: g["betas"] = (peak, *g["betas"][1:])
          else: g["momentum"] = peak
        g["max_momentum"], g["base_momentum"] = peak, base
    super().__init__(optimizer, last_epoch)

  def _anneal(self, start: float, end: float, pct: float) -> float:
    if self.anneal_strategy == "cos": return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
    return (end - start) * pct + start

  def get_lr(self):
    step = self.last_epoch
    if step > self.total_steps: raise ValueError(f"OneCycleLR: tried to step {step} times, more than total_steps ({self.total_steps})")
    lrs = []
    for g in self.optimizer.param_groups:
      start = 0.0
      for i, (end, (lr0, lr1, m0, m1)) in enumerate(self._phases):
        if step <= end or i == len(self._phases) - 1:
          pct = (step - start) / (end - start)
          lr, momentum = self._anneal(g[lr0], g[lr1], pct), self._anneal(g[m0], g[m1], pct) if self.cycle_momentum else None
          break
        start = end
      lrs.append(lr)
      if self.cycle_momentum:
        if self.use_beta1: g["betas"] = (momentum, *g["betas"][1:])
        else: g["momentum"] = momentum
    return lrs

class SequentialLR(LRScheduler):
  """Schedules one after another: schedulers[i] runs from milestones[i - 1] on, each starting at its epoch 0, as
  torch's SequentialLR (which restarts one with step(0), its closed form)."""
  def __init__(self, optimizer, schedulers: list, milestones: list, last_epoch: int = -1):
    if not isinstance(optimizer, Optimizer): raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
    if len(schedulers) < 1 or any(s.optimizer is not optimizer for s in schedulers):
      raise ValueError("SequentialLR: expects at least one scheduler, each of this optimizer")
    if len(milestones) != len(schedulers) - 1:
      raise ValueError(f"SequentialLR: expects {len(schedulers) - 1} milestones for {len(schedulers)} schedulers, got {len(milestones)}")
    self.optimizer, self._schedulers, self._milestones, self.last_epoch = optimizer, list(schedulers), list(milestones), last_epoch + 1
    for g in optimizer.param_groups: g["lr"] = g["initial_lr"]   # undo what constructing the schedulers did
    for s in self._schedulers: s.last_epoch -= 1
    self._schedulers[0].step()
    self._last_lr = self._schedulers[0].get_last_lr()
  def step(self, epoch=None) -> None:
    self.last_epoch += 1
    i = bisect.bisect_right(self._milestones, self.last_epoch)
    if i > 0 and self._milestones[i - 1] == self.last_epoch: self._schedulers[i].step(0)
    else: self._schedulers[i].step()
    self._last_lr = self._schedulers[i].get_last_lr()
  def state_dict(self) -> dict:
    own = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
    return own | {"_schedulers": [s.state_dict() for s in self._schedulers]}
  def load_state_dict(self, state: dict) -> None:
    for s, st in zip(self._schedulers, state["_schedulers"]): s.load_state_dict(st)
    self.__dict__.update({k: v for k, v in state.items() if k != "_schedulers"})

class ReduceLROnPlateau(LRScheduler):
  """lr * factor (at least min_lr) once a metric passed to step() has not improved for more than patience steps, then
  cooldown steps of rest; improvement is relative or absolute to the best by threshold, as PyTorch's. A metric given
  as a Tensor is read on the host. An LRScheduler for its lrs and state dict, but stepped by metric rather than by
  schedule (its own __init__, as PyTorch's)."""
  def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10, threshold: float = 1e-4,
               threshold_mode: str = "rel", cooldown: int = 0, min_lr=0.0, eps: float = 1e-8):
    if not isinstance(optimizer, Optimizer): raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
    if factor >= 1.0: raise ValueError("ReduceLROnPlateau: factor should be < 1.0")
    if mode not in ("min", "max"): raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown")
    if threshold_mode not in ("rel", "abs"): raise ValueError(f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown")
    n = len(optimizer.param_groups)
    self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * n
    if len(self.min_lrs) != n: raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs, got {len(self.min_lrs)}")
    self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
    self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
    self.best = math.inf if mode == "min" else -math.inf
    self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
    self._last_lr = self._lrs()
  def is_better(self, a: float, best: float) -> bool:
    if self.mode == "min": return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
    return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold
  def step(self, metrics) -> None:
    current = float(metrics.item() if hasattr(metrics, "item") else metrics)
    self.last_epoch += 1
    if self.is_better(current, self.best): self.best, self.num_bad_epochs = current, 0
    else: self.num_bad_epochs += 1
    if self.cooldown_counter > 0: self.cooldown_counter, self.num_bad_epochs = self.cooldown_counter - 1, 0
    if self.num_bad_epochs > self.patience:
      for g, low in zip(self.optimizer.param_groups, self.min_lrs):
        old = float(g["lr"])
        new = max(old * self.factor, low)
        if old - new > self.eps: g["lr"] = new
      self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
    self._last_lr = self._lrs()
