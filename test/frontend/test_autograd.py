"""Autograd: gradients against central finite differences (float64, CPU) and PyTorch, on every present device;
.grad accumulation, no_grad, detach, the errors, alloy.grad/value_and_grad, and that the backward pass fuses."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.engine import realize

try: import torch
except ImportError: torch = None

def _rand(rng, shape): return np.where(np.abs(x := rng.uniform(-2, 2, shape)) < 0.1, 0.5, x)

def W(a, *shape):
  """Fixed weights of shape, a constant of a's library (alloy or torch) and dtype."""
  w = np.arange(float(np.prod(shape))).reshape(shape) / 4
  if torch is not None and isinstance(a, torch.Tensor): return torch.tensor(w, dtype=a.dtype)
  return Tensor(w, dtype=a.dtype, device=a.device)

def where(c, x, y): return torch.where(c, x, y) if torch is not None and isinstance(c, torch.Tensor) else alloy.where(c, x, y)

def numeric_grad(f, xs: list, k: int, eps=1e-6) -> np.ndarray:
  """Central differences of f (numpy arrays -> float) in argument k."""
  x = xs[k].copy()
  out = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    old = x[i]
    x[i] = old + eps; hi = f(*[x if j == k else v for j, v in enumerate(xs)])
    x[i] = old - eps; lo = f(*[x if j == k else v for j, v in enumerate(xs)])
    x[i] = old
    out[i] = (hi - lo) / (2 * eps)
  return out

def alloy_grads(f, xs: list, device="CPU"):
  ts = [Tensor(x, device=device, requires_grad=True) for x in xs]
  f(*ts).backward()
  return [t.grad.numpy() if t.grad is not None else np.zeros_like(x) for t, x in zip(ts, xs)]

def check_fd(f, *shapes, rng):
  xs = [_rand(rng, s) for s in shapes]
  got = alloy_grads(f, xs)
  def fn(*arrs): return f(*[Tensor(a) for a in arrs]).item()
  for k in range(len(xs)): np.testing.assert_allclose(got[k], numeric_grad(fn, xs, k), atol=1e-6, rtol=1e-6)

CASES = {
  "chain": (lambda a, b: ((a * b + a / b).exp() * 0.1 - (a - b).tanh() + a.sin() * b.cos()).sum(), [(3, 4), (3, 4)]),
  "unary": (lambda a: (a.abs().sqrt() + a.abs().log() + a.abs().log2() + a.exp2() + a.abs().rsqrt() + a.reciprocal() + a.erf()
                       + (a * 0.3).tan() + a.sigmoid() + a.relu() + (-a)).sum(), [(5,)]),
  "pow": (lambda a, b: (a.abs() ** b).sum() + (a ** 3).sum(), [(4,), (4,)]),
  "maximum": (lambda a, b: a.maximum(b).sum() + a.minimum(b * 2).sum(), [(6,), (6,)]),
  "sum_mean": (lambda a: a.sum(0).exp().sum() + (a.mean(1) ** 2).sum() + a.sum() * a.mean(), [(3, 4)]),
  "max_dim": (lambda a: (a.max(1).values * W(a, 3)).sum() + a.amin(0).sum(), [(3, 4)]),
  "movement": (lambda a: (a.reshape(4, 3).permute(1, 0) * W(a, 3, 4)).sin().sum(), [(3, 4)]),
  "broadcast": (lambda a, b: (a * b).exp().sum(), [(3, 1), (1, 4)]),
  "pad_shrink": (lambda a: (a.pad(((1, 2), (0, 1))) * W(a, 6, 5)).sum() + a[1:, :3].exp().sum(), [(3, 4)]),
  "flip_step": (lambda a: (a.flip(0) * W(a, 3, 4)).sum() + (a[::-2, 1::2] ** 2).sum(), [(3, 4)]),
  "matmul": (lambda a, b: (a @ b).tanh().sum(), [(3, 4), (4, 5)]),
  "bmm": (lambda a, b: (a @ b).sin().sum(), [(2, 3, 4), (4, 2)]),
  "where": (lambda a, b: where(a > 0, a * b, b.exp()).sum(), [(3, 4), (3, 4)]),
  "softmax": (lambda a: (a.softmax(-1) * W(a, 3, 4)).sum(), [(3, 4)]),
  "log_softmax": (lambda a: (a.log_softmax(0) * W(a, 3, 4)).sum(), [(3, 4)]),
  "var_std": (lambda a: a.var(1).sum() + a.std(0).sum() + a.logsumexp(1).sum(), [(3, 4)]),
  "gather": (lambda a: (a[[0, 2, 2, -1]] * W(a, 4, 4)).sum() + a[:, [1, 1]].exp().sum(), [(3, 4)]),
  "remainder": (lambda a, b: (a.remainder(b.abs() + 0.5) * W(a, 3, 4)).sum() + (a * 3).remainder(-1.5).sin().sum(), [(3, 4), (3, 4)]),
  "cumsum_cat": (lambda a, b: (a.cumsum(1) * alloy.cat([a, b], 0)[1:4]).sum() + alloy.stack([a, a], 0).exp().sum(), [(3, 4), (2, 4)]),
}

@pytest.mark.parametrize("case", sorted(CASES))
def test_finite_differences(case, rng):
  f, shapes = CASES[case]
  check_fd(f, *shapes, rng=rng)

TORCH_CASES = {k: v for k, v in CASES.items() if k not in ("flip_step", "pad_shrink", "cumsum_cat")}   # numpy-style pad, negative steps, alloy.cat

@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_against_torch(case, device, rng):
  f, shapes = CASES[case]
  xs = [_rand(rng, s).astype(np.float32) for s in shapes]
  got = alloy_grads(f, xs, device)
  ts = [torch.tensor(x, requires_grad=True) for x in xs]
  f(*ts).backward()
  for g, t in zip(got, ts): np.testing.assert_allclose(g, t.grad.numpy(), atol=1e-4, rtol=1e-4)

def test_amax_ties_split_evenly(device):
  a = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], device=device, requires_grad=True)
  a.amax().backward()
  np.testing.assert_allclose(a.grad.numpy(), [[0, 0.5, 0.5], [0, 0, 0]])
  b = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], device=device, requires_grad=True)
  b.amax(1).sum().backward()
  np.testing.assert_allclose(b.grad.numpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)
  c = Tensor([1.0, 2.0], device=device, requires_grad=True)
  c.maximum(Tensor([1.0, 0.0], device=device)).sum().backward()
  np.testing.assert_allclose(c.grad.numpy(), [0.5, 1.0])

def test_grad_accumulates_until_reset(device):
  a = Tensor([1.0, 2.0], device=device, requires_grad=True)
  (a * 3).sum().backward()
  (a * a).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [5.0, 7.0])
  a.grad = None
  (a * 2).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [2.0, 2.0])
  a.grad = a.grad.zeros_like()
  a.sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [1.0, 1.0])

def test_requires_grad_flags():
  a = Tensor([1.0, 2.0])
  assert not a.requires_grad and a.grad is None and a.is_leaf
  assert a.requires_grad_() is a and a.requires_grad
  b = a * 2
  assert b.requires_grad and not b.is_leaf and b.grad is None
  assert not (a > 1).requires_grad   # comparisons give no gradient
  assert not (a * 2).detach().requires_grad
  assert Tensor([1.0], requires_grad=True).requires_grad

def test_no_grad_builds_no_graph():
  a = Tensor([1.0, 2.0], requires_grad=True)
  with alloy.no_grad():
    b = (a * 2).exp().sum()
    assert not alloy.is_grad_enabled()
    with alloy.enable_grad(): c = (a * 2).sum()
  assert not b.requires_grad and b._ag is None and c.requires_grad and alloy.is_grad_enabled()
  @alloy.no_grad()
  def f(x): return x * 2
  assert not f(a).requires_grad

def test_detach_cuts_the_graph():
  a = Tensor([1.0, 2.0], requires_grad=True)
  (a * a.detach()).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [1.0, 2.0])   # d/da of a * c, c held constant

def test_non_scalar_backward(device):
  a = Tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
  y = a * a
  with pytest.raises(RuntimeError, match="only for scalar outputs"): y.backward()
  with pytest.raises(RuntimeError, match="shape"): y.backward(Tensor([1.0, 1.0], device=device))
  y.backward(Tensor([1.0, 0.0, 2.0], device=device))
  np.testing.assert_allclose(a.grad.numpy(), [2.0, 0.0, 12.0])

def test_errors():
  with pytest.raises(RuntimeError, match="floating point"): Tensor([1, 2], requires_grad=True)
  with pytest.raises(RuntimeError, match="floating point"): Tensor([True]).requires_grad_()
  with pytest.raises(RuntimeError, match="does not require grad"): Tensor([1.0]).sum().backward()
  a = Tensor([1.0, 2.0], requires_grad=True)
  loss = (a.exp() * a).sum()
  loss.backward()
  with pytest.raises(RuntimeError, match="second time"): loss.backward()
  loss2 = (a.exp() * a).sum()
  loss2.backward(retain_graph=True)
  loss2.backward()

def test_gather_scatters_back(device):
  x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4) / 8
  a = Tensor(x, device=device, requires_grad=True)
  w = np.arange(30.0, dtype=np.float32).reshape(2, 5, 3)
  (a[:, [0, 2, 2, -1, 1]] * Tensor(w, device=device)[:, :, :1]).sum().backward()
  want = np.zeros_like(x)
  np.add.at(want, (slice(None), [0, 2, 2, 2, 1]), np.broadcast_to(w[:, :, :1], (2, 5, 4)))
  np.testing.assert_allclose(a.grad.numpy(), want)
  b = Tensor(x, device=device, requires_grad=True)
  b[Tensor([1, 0, 1], device=device), :, Tensor([3, 3, 0], device=device)].exp().sum().backward()
  want = np.zeros_like(x)
  np.add.at(want, ([1, 0, 1], slice(None), [3, 3, 0]), np.exp(x[[1, 0, 1], :, [3, 3, 0]]))
  np.testing.assert_allclose(b.grad.numpy(), want, rtol=1e-5)

def test_functional_grad(device):
  def f(x, y): return (x * x * y).sum()
  x, y = Tensor([1.0, 2.0], device=device), Tensor([3.0, 4.0], device=device)
  np.testing.assert_allclose(alloy.grad(f)(x, y).numpy(), [6.0, 16.0])
  gx, gy = alloy.grad(f, argnums=(0, 1))(x, y)
  np.testing.assert_allclose(gy.numpy(), [1.0, 4.0])
  v, g = alloy.value_and_grad(f, argnums=1)(x, y)
  assert v.item() == 19.0 and not v.requires_grad and x.grad is None and not x.requires_grad
  np.testing.assert_allclose(g.numpy(), [1.0, 4.0])
  with pytest.raises(TypeError, match="scalar"): alloy.grad(lambda x: x * 2)(x)

def test_backward_fuses():
  a, b, c = (Tensor(np.random.default_rng(0).standard_normal((64, 64)), requires_grad=True) for _ in range(3))
  for t in (a, b, c): t.realize()
  ((a * b + c).exp()).sum().backward()
  before = realize.kernels_launched
  alloy.Tensor.realize(a.grad); alloy.Tensor.realize(b.grad); alloy.Tensor.realize(c.grad)
  # forward and backward of 5 ops, every grad an elementwise chain: far fewer kernels than ops
  assert realize.kernels_launched - before <= 4
  e = np.exp(a.numpy() * b.numpy() + c.numpy())
  np.testing.assert_allclose(a.grad.numpy(), e * b.numpy(), rtol=1e-10)
  np.testing.assert_allclose(c.grad.numpy(), e, rtol=1e-10)
