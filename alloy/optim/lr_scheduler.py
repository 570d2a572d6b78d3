"""Learning-rate schedules with torch.optim.lr_scheduler's recursive formulas (each step scales the group's current
lr, as PyTorch's get_lr does, so the values match its to the last bit). The lr is a Python number the update's
kernels take as an argument: a schedule compiles nothing."""
from __future__ import annotations
import math
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
  def step(self) -> None:
    self.last_epoch += 1
    for g, lr in zip(self.optimizer.param_groups, self.get_lr()): g["lr"] = lr
    self._last_lr = [g["lr"] for g in self.optimizer.param_groups]
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
