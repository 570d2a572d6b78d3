"""Random chains of ops (elementwise, broadcasting binaries, reductions, views, pads, scans, softmax, matmul) against
the same chain in NumPy float64, on every present device: where fusion, views and codegen meet in ways no hand-written
test names. A chain that fails prints its ops; the seeds are fixed, so a failure repeats. (This found a GCC 12
miscompile of a padded copy: renderer/c.py's short_nests.)"""
import math, random
import numpy as np
import pytest
import alloy
import alloy.nn.functional as F
from alloy import Tensor
from conftest import present_devices

CASES = {"CPU": 300, "METAL": 100, "CUDA": 300}   # chains per device (the software Metal device compiles C++ per kernel)
erf = np.vectorize(math.erf)

def _softmax(x, ax):
  e = np.exp(x - x.max(ax, keepdims=True))
  return e / e.sum(ax, keepdims=True)

def _step(r: random.Random, a: Tensor, x: np.ndarray, b: Tensor, y: np.ndarray, device: str):
  """One random op on the chain's value (a in alloy, x in NumPy) and the second input (b, y): (name, a, x)."""
  nd, k = x.ndim, r.randrange(16)
  if nd == 0: k = r.choice([0, 1, 2, 3, 4, 12])   # a scalar: elementwise ops only
  if k == 0: return "exp", a.clamp(-5, 5).exp(), np.exp(np.clip(x, -5, 5))
  if k == 1: return "log", (a.abs() + 0.5).log(), np.log(np.abs(x) + 0.5)
  if k == 2:
    f = r.choice(["tanh", "sigmoid", "relu", "sin", "erf"])
    ref = {"tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0), "sin": np.sin, "erf": erf}[f]
    return f, getattr(a, f)(), ref(x)
  if k == 3:
    op = r.choice(["add", "sub", "mul", "maximum", "minimum"])
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}[op]
    try: np.broadcast_shapes(x.shape, y.shape)
    except ValueError: return f"{op} 1.5", getattr(a, op)(Tensor.full(a.shape, 1.5, device=device)), ref(x, 1.5)
    return f"{op} {y.shape}", getattr(a, op)(b), ref(x, y)
  if k == 4: return "x/(|x|+1/2)", a / (a.abs() + 0.5), x / (np.abs(x) + 0.5)
  if k == 5:
    ax, keep, f = r.randrange(nd), r.random() < 0.5, r.choice(["sum", "amax", "amin", "mean"])
    return f"{f}({ax}, {keep})", getattr(a, f)(ax, keepdim=keep), getattr(np, {"amax": "max", "amin": "min"}.get(f, f))(x, ax, keepdims=keep)
  if k == 6 and nd > 1:
    p = list(range(nd)); r.shuffle(p)
    return f"permute{p}", a.permute(*p), x.transpose(p)
  if k == 7:
    n = x.size
    s = r.choice([(n,), (1, n)] + ([(n // 2, 2)] if n % 2 == 0 else []) + ([(2, n // 4, 2)] if n % 4 == 0 else []))
    return f"reshape{s}", a.reshape(*s), x.reshape(s)
  if k == 8:
    ax = r.randrange(nd)
    return f"flip({ax})", a.flip(ax), np.flip(x, ax)
  if k == 9 and x.shape[ax := r.randrange(nd)] > 1:
    lo = r.randrange(x.shape[ax] - 1); hi = r.randrange(lo + 1, x.shape[ax] + 1)
    idx = tuple(slice(lo, hi) if i == ax else slice(None) for i in range(nd))
    return f"[{lo}:{hi} on {ax}]", a[idx], x[idx]
  if k == 10:
    pads = [r.randrange(3) for _ in range(2 * min(nd, 2))]
    widths = [(0, 0)] * nd
    for j in range(len(pads) // 2): widths[nd - 1 - j] = (pads[2 * j], pads[2 * j + 1])
    return f"pad{pads}", F.pad(a, pads, value=0.5), np.pad(x, widths, constant_values=0.5)
  if k == 11:
    ax = r.randrange(nd)
    f = r.choice(["softmax", "log_softmax", "cumsum"])
    ref = {"softmax": _softmax, "log_softmax": lambda v, i: np.log(_softmax(v, i)), "cumsum": np.cumsum}[f]
    return f"{f}({ax})", getattr(a, f)(ax), ref(x, ax)
  if k == 12: return "where(x>0, x, x/4)", a.where(a > 0, a * 0.25), np.where(x > 0, x, x * 0.25)
  if k == 13:
    ax = r.randrange(nd)
    return f"cat({ax})", alloy.cat([a, a * 2], dim=ax), np.concatenate([x, x * 2], ax)
  if k == 14:
    ax = r.randrange(nd + 1)
    shape = x.shape[:ax] + (3,) + x.shape[ax:]
    return f"expand at {ax}", a.unsqueeze(ax).expand(*shape), np.broadcast_to(np.expand_dims(x, ax), shape)
  if k == 15 and nd == 2:
    w = np.random.default_rng(r.randrange(1 << 30)).uniform(-1, 1, (x.shape[1], r.randrange(1, 9)))
    return f"@ {w.shape}", a @ Tensor(w.astype(np.float32), device=device), x @ w
  return "identity", a, x

@pytest.mark.parametrize("device", present_devices())
def test_random_chains_match_numpy(device):
  r = random.Random(2026)
  rng = np.random.default_rng(2026)
  for case in range(CASES.get(device, 20)):
    shape = tuple(r.choice([1, 2, 3, 5, 8, 17]) for _ in range(r.randint(1, 4)))
    other = shape if r.random() < 0.5 else tuple(d if r.random() < 0.5 else 1 for d in shape)
    x, y = rng.uniform(-2, 2, shape), rng.uniform(-2, 2, other)
    a, b = Tensor(x.astype(np.float32), device=device), Tensor(y.astype(np.float32), device=device)
    ops = []
    for _ in range(r.randint(1, 5)):
      name, a, x = _step(r, a, x, b, y, device)
      ops.append(name)
      assert a.shape == x.shape, (case, ops, a.shape, x.shape)
    np.testing.assert_allclose(a.numpy(), x, rtol=2e-4, atol=2e-4, err_msg=f"case {case}: {shape} then {ops}")
