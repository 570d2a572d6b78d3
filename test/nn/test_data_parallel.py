"""alloy/data_parallel.py over CPU:0 and CPU:1: the loss curve of data-parallel training matches one device's on the
whole batch (batch norm synchronized, gradients all-reduced), and the replicas' parameters and buffers stay
identical; examples/train_digits.py's data-parallel function the same on scikit-learn's digits."""
import importlib.util, pathlib, sys
import numpy as np, pytest
import alloy
from alloy import nn, optim
import alloy.nn.functional as F
from alloy.data import DataLoader
from alloy.data_parallel import DataParallel
from alloy.multi import ShardedTensor

DEVS = ["CPU:0", "CPU:1"]

def _net(seed=0):
  alloy.manual_seed(seed)
  return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                       nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))

def _one_device(x, y, steps, device="CPU"):
  model = _net().to(device)
  opt = optim.AdamW(model.parameters(), lr=1e-2)
  losses = []
  for i in range(steps):
    loss = F.cross_entropy(model(alloy.Tensor(x[i], device=device)), alloy.Tensor(y[i], device=device))
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(loss.item())
  return losses, model

def _gpus() -> int:
  from alloy.runtime.registry import device_available
  if not device_available("CUDA"): return 0   # (alloy.runtime.cuda needs cuda-bindings to import)
  from alloy.runtime.cuda import device_count
  return device_count()

@pytest.mark.parametrize("devices", [DEVS, ["CUDA:0", "CUDA:1"]], ids=["cpu", "cuda"])
def test_loss_curve_matches_and_replicas_stay_identical(devices):
  if devices[0].startswith("CUDA") and _gpus() < 2: pytest.skip(f"needs 2 CUDA GPUs, {_gpus()} present: data parallel over GPUs has not run here")
  rng = np.random.default_rng(0)
  steps = 4
  x = rng.standard_normal((steps, 16, 1, 8, 8)).astype(np.float32)
  y = rng.integers(0, 10, (steps, 16))
  ref, model = _one_device(x, y, steps, devices[0])
  dp = DataParallel(_net(), devices)
  assert [next(r.parameters()).device for r in dp.replicas] == [alloy.get_device(d).name for d in devices]
  opts = [optim.AdamW(r.parameters(), lr=1e-2) for r in dp.replicas]
  got = []
  for i in range(steps):
    xb, yb = dp.scatter(x[i], y[i])
    loss = dp.loss(F.cross_entropy, dp(xb), yb)
    for o in opts: o.zero_grad()
    loss.backward()
    dp.reduce_gradients()
    for o in opts: o.step()
    got.append(loss.item())
  np.testing.assert_allclose(got, ref, rtol=1e-5)
  assert dp.max_difference() == 0.0   # the same update of the same values on every replica
  bn = [r[1] for r in dp.replicas]
  assert int(bn[1].num_batches_tracked.item()) == steps
  np.testing.assert_allclose(bn[0].running_var.numpy(), model[1].running_var.numpy(), rtol=1e-4)
  # the last layer's weight follows one device's closely (earlier ones too, but for the bias before the batch norm,
  # whose gradient is rounding noise that AdamW scales up)
  np.testing.assert_allclose(dp.replicas[1][7].weight.numpy(), model[7].weight.numpy(), rtol=1e-3, atol=1e-4)

def _dp_steps(devices, x, y, jitted: bool):
  """Data-parallel AdamW steps, the whole step under @jit or not: (losses, the DataParallel)."""
  dp = DataParallel(_net(), devices)
  opts = [optim.AdamW(r.parameters(), lr=1e-2) for r in dp.replicas]
  def step(*halves):
    n = len(devices)
    loss = dp.loss(F.cross_entropy, dp(ShardedTensor(list(halves[:n]), 0)), ShardedTensor(list(halves[n:]), 0))
    for o in opts: o.zero_grad()
    loss.backward()   # the seed's broadcast, the batch norms' all-reduces and their adjoints: collectives a capture replays
    dp.reduce_gradients()
    for o in opts: o.step()
    return loss.value.shards[0]
  f = alloy.jit(step) if jitted else step
  losses = []
  for i in range(len(x)):
    xb, yb = dp.scatter(x[i], y[i])
    losses.append(f(*xb.shards, *yb.shards).item())
    if jitted and i >= 2: assert f.replay is not None and f.replay.splits   # replayed, the collectives among its steps
  return losses, dp

@pytest.mark.parametrize("devices", [DEVS, ["CUDA:0", "CUDA:1"]], ids=["cpu", "cuda"])
def test_jitted_step_matches_eager(devices):
  if devices[0].startswith("CUDA") and _gpus() < 2: pytest.skip(f"needs 2 CUDA GPUs, {_gpus()} present: data parallel over GPUs has not run here")
  rng = np.random.default_rng(4)
  x = rng.standard_normal((5, 8, 1, 8, 8)).astype(np.float32)
  y = rng.integers(0, 10, (5, 8))
  want, eager = _dp_steps(devices, x, y, False)
  got, dp = _dp_steps(devices, x, y, True)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  assert dp.max_difference() == 0.0
  for a, b in zip(eager.replicas[1].parameters(), dp.replicas[1].parameters()): np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)

def test_gradients_are_the_whole_batch_gradients():
  rng = np.random.default_rng(1)
  x, y = rng.standard_normal((8, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 8)
  model = _net()
  F.cross_entropy(model(alloy.Tensor(x)), alloy.Tensor(y)).backward()
  dp = DataParallel(_net(), DEVS)
  xb, yb = dp.scatter(x, y)
  dp.loss(F.cross_entropy, dp(xb), yb).backward()
  dp.reduce_gradients()
  for name, p in model.named_parameters():
    if name == "0.bias": continue   # cancelled by the batch norm: its gradient is rounding noise on both sides
    for r in dp.replicas:
      np.testing.assert_allclose(dict(r.named_parameters())[name].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)

def test_eval_and_errors():
  dp = DataParallel(_net(), DEVS).eval()
  x = np.random.default_rng(2).standard_normal((4, 1, 8, 8)).astype(np.float32)
  (xb,) = dp.scatter(x)
  np.testing.assert_allclose(dp(xb).numpy(), dp.replicas[0](alloy.Tensor(x, device=DEVS[0])).numpy(), rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="does not split evenly"): dp.scatter(x[:3])
  with pytest.raises(TypeError, match="expected a ShardedTensor"): dp(alloy.Tensor(x))

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"

def test_train_digits_data_parallel_matches_one_device():
  pytest.importorskip("sklearn")
  pytest.importorskip("tqdm")
  spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
  ex = importlib.util.module_from_spec(spec)
  sys.modules.setdefault("train_digits", ex)
  spec.loader.exec_module(ex)
  steps, width = 4, 8
  out = ex.train_data_parallel(DEVS, batch_size=64, lr=3e-3, width=width, progress=False, steps=steps)
  alloy.manual_seed(0)
  x, y, _, _ = ex.digits(0)
  model = ex.DigitsCNN(width)
  opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
  ref = []
  for xb, yb in DataLoader((x, y), batch_size=64, shuffle=True, drop_last=True, seed=0):
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad(); loss.backward(); opt.step()
    ref.append(loss.item())
    if len(ref) == steps: break
  np.testing.assert_allclose(out["losses"], ref, rtol=1e-5)
  assert out["max_difference"] == 0.0
