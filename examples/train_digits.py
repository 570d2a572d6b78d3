"""Trains a small CNN (conv -> batchnorm -> relu -> pool, twice, then linear) on scikit-learn's bundled 8x8 digits
with AdamW, holding a fixed 20% out for testing; prints a progress bar, the loss per epoch and the test accuracy.

  python examples/train_digits.py [--epochs N] [--batch-size B] [--lr LR] [--seed S]      (DEV=CPU / CUDA / METAL)
  python examples/train_digits.py --devices CPU:0,CPU:1      (or --devices 2: data parallel over the default kind's first 2)

The training step (zero_grad, forward, backward, AdamW update) runs under @alloy.jit: captured on its second call,
replayed as device graphs after (the scheduler's lr reaches the replays as a kernel argument)."""
from __future__ import annotations
import argparse, time
import numpy as np
import alloy
from alloy import nn, optim
from alloy.data import DataLoader
import alloy.nn.functional as F

def digits(seed: int = 0):
  """(x_train, y_train, x_test, y_test): images as (N, 1, 8, 8) float32 in [0, 1], a fixed 20% held out."""
  from sklearn.datasets import load_digits
  d = load_digits()
  x = (d.images / 16.0).astype(np.float32)[:, None]
  order = np.random.default_rng(seed).permutation(len(x))
  test = order[:len(x) // 5]
  train = order[len(x) // 5:]
  return x[train], d.target[train].astype(np.int64), x[test], d.target[test].astype(np.int64)

class DigitsCNN(nn.Module):
  def __init__(self, width: int = 16):
    super().__init__()
    self.features = nn.Sequential(
      nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),           # 8x8 -> 4x4
      nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2))   # -> 2x2
    self.head = nn.Linear(2 * width * 4, 10)
  def forward(self, x): return self.head(self.features(x).flatten(1))

def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray, device=None) -> float:
  model.eval()
  with alloy.no_grad():
    pred = np.concatenate([model(xb).argmax(-1).numpy() for (xb,) in DataLoader((x,), batch_size=512, device=device)])
  model.train()
  return float((pred == y).mean())

def train(epochs: int = 6, batch_size: int = 64, lr: float = 3e-3, seed: int = 0, device=None, progress: bool = True) -> dict:
  from tqdm import tqdm
  alloy.manual_seed(seed)
  x_train, y_train, x_test, y_test = digits(seed)
  model = DigitsCNN().to(device) if device else DigitsCNN()
  opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
  sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
  losses, start = [], time.perf_counter()

  @alloy.jit
  def train_step(xb, yb):
    opt.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.detach()
  for epoch in range(epochs):
    loader = DataLoader((x_train, y_train), batch_size=batch_size, shuffle=True, drop_last=True, seed=seed + epoch, device=device)
    total = alloy.zeros(1, device=device) if device else alloy.zeros(1)
    for xb, yb in tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}", leave=False, disable=not progress):
      total = (total + train_step(xb, yb)).realize()
    sched.step()
    losses.append(total.item() / len(loader))
    print(f"epoch {epoch + 1:2d}  loss {losses[-1]:.4f}  lr {sched.get_last_lr()[0]:.2e}")
  acc = accuracy(model, x_test, y_test, device)
  seconds = time.perf_counter() - start
  where = alloy.default_device() if device is None else device
  print(f"test accuracy {acc * 100:.2f}% ({len(y_test)} images), trained in {seconds:.1f} s on {where}")
  return {"losses": losses, "accuracy": acc, "seconds": seconds}

def train_data_parallel(devices, epochs: int = 6, batch_size: int = 64, lr: float = 3e-3, seed: int = 0, width: int = 16,
                        progress: bool = True, steps: int | None = None) -> dict:
  """train() split over several devices (alloy/data_parallel.py): each batch sharded on its first axis, one model
  replica per device, batch norm synchronized, gradients all-reduced, one optimizer per replica making the same step.
  The losses match train()'s on one device up to float rounding; steps: stop after that many (tests)."""
  from tqdm import tqdm
  from alloy.data_parallel import DataParallel
  alloy.manual_seed(seed)
  x_train, y_train, x_test, y_test = digits(seed)
  dp = DataParallel(DigitsCNN(width), devices)
  opts = [optim.AdamW(r.parameters(), lr=lr, weight_decay=1e-4) for r in dp.replicas]
  scheds = [optim.lr_scheduler.CosineAnnealingLR(o, T_max=epochs) for o in opts]
  losses, start, done = [], time.perf_counter(), 0
  for epoch in range(epochs):
    loader = DataLoader((x_train, y_train), batch_size=batch_size, shuffle=True, drop_last=True, seed=seed + epoch)
    total = 0.0
    for xb, yb in tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}", leave=False, disable=not progress):
      loss = dp.loss(F.cross_entropy, dp(*dp.scatter(xb.numpy())), *dp.scatter(yb.numpy()))
      for o in opts: o.zero_grad()
      loss.backward()
      dp.reduce_gradients()
      for o in opts: o.step()
      losses.append(loss.item())
      total += losses[-1]
      done += 1
      if steps is not None and done >= steps: return {"losses": losses, "max_difference": dp.max_difference()}
    for s in scheds: s.step()
    print(f"epoch {epoch + 1:2d}  loss {total / len(loader):.4f}  lr {scheds[0].get_last_lr()[0]:.2e}")
  acc = accuracy(dp.replicas[0], x_test, y_test, dp.devices[0])
  seconds = time.perf_counter() - start
  print(f"test accuracy {acc * 100:.2f}% ({len(y_test)} images), trained in {seconds:.1f} s on {', '.join(dp.devices)}; "
        f"replicas differ by {dp.max_difference():g}")
  return {"losses": losses, "accuracy": acc, "seconds": seconds, "max_difference": dp.max_difference()}

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--epochs", type=int, default=6)
  ap.add_argument("--batch-size", type=int, default=64)
  ap.add_argument("--lr", type=float, default=3e-3)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--devices", default=None, help="data parallel: a list (CPU:0,CPU:1 or CUDA:0,CUDA:1) or a count")
  a = ap.parse_args()
  if a.devices: train_data_parallel(int(a.devices) if a.devices.isdigit() else a.devices, a.epochs, a.batch_size, a.lr, a.seed)
  else: train(a.epochs, a.batch_size, a.lr, a.seed)
