"""tril/triu, log1p/expm1/logaddexp/logaddexp2 and norm against NumPy (and PyTorch): accuracy near 0, infinities,
dtypes, every p and dim; gradients against finite differences and PyTorch; errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.vector_norm import vector_norm
from conftest import rand_np, assert_close
from op_grads import check_grads, weights

try: import torch
except ImportError: torch = None

@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_tril_triu(device, rng, dtype):
  x = rand_np(rng, (2, 3, 4), dtype)
  for k in (-4, -1, 0, 1, 2, 5):
    np.testing.assert_array_equal(Tensor(x, device=device).tril(k).numpy(), np.tril(x, k))
    np.testing.assert_array_equal(alloy.triu(Tensor(x, device=device), k).numpy(), np.triu(x, k))
  assert alloy.tril(Tensor(np.ones((0, 3), np.float32), device=device)).shape == (0, 3)
  with pytest.raises(ValueError, match="at least 2 dims"): Tensor(x[0, 0], device=device).tril()

def test_log1p_expm1(device, rng):
  x = np.concatenate([rand_np(rng, (50,), low=-0.9, high=3.0), [1e-7, -1e-7, 1e-20, 3e-30, 0.0, -0.5, 20.0]]).astype(np.float32)
  assert_close(Tensor(x, device=device).log1p().numpy(), np.log1p(x), rtol=2e-6, atol=0)   # relative: exact near 0
  assert_close(alloy.expm1(Tensor(x, device=device)).numpy(), np.expm1(x), rtol=2e-6, atol=0)
  special = np.array([-1.0, np.inf, -np.inf, np.nan, -2.0], np.float32)
  with np.errstate(divide="ignore", invalid="ignore"):
    assert_close(Tensor(special, device=device).log1p().numpy(), np.log1p(special))
    assert_close(Tensor(special, device=device).expm1().numpy(), np.expm1(special))
  assert Tensor([1, 2], device=device).log1p().dtype == alloy.float32
  h = Tensor(np.array([1e-3, 0.5], np.float16), device=device)
  assert h.log1p().dtype == alloy.float16 and h.expm1().dtype == alloy.float16
  assert_close(h.log1p().numpy(), np.log1p(np.array([1e-3, 0.5], np.float32)), "float16")

def test_logaddexp(device, rng):
  a, b = rand_np(rng, (3, 4), low=-30, high=30), rand_np(rng, (4,), low=-30, high=30)
  assert_close(Tensor(a, device=device).logaddexp(Tensor(b, device=device)).numpy(), np.logaddexp(a, b), rtol=1e-6)
  assert_close(alloy.logaddexp2(Tensor(a, device=device), Tensor(b, device=device)).numpy(), np.logaddexp2(a, b), rtol=1e-6)
  inf = np.inf
  x, y = np.array([-inf, inf, -inf, 1e30, 2.0, np.nan], np.float32), np.array([-inf, inf, 3.0, 1e30, 2.0, 1.0], np.float32)
  with np.errstate(invalid="ignore"):
    assert_close(Tensor(x, device=device).logaddexp(Tensor(y, device=device)).numpy(), np.logaddexp(x, y))
    assert_close(Tensor(x, device=device).logaddexp2(Tensor(y, device=device)).numpy(), np.logaddexp2(x, y))
  with pytest.raises(TypeError, match="two Tensors"): Tensor(a, device=device).logaddexp(1.0)

P_VALUES = ["fro", 1, 2, 3, 0.5, 0, float("inf"), float("-inf")]

def np_norm(x, p, dim, keepdim):
  a = np.abs(x.astype(np.float64))
  ax = dim if dim is None or isinstance(dim, int) else tuple(dim)
  if p == "fro" or p == 2: out = np.sqrt((a * a).sum(axis=ax, keepdims=keepdim))
  elif p == float("inf"): out = a.max(axis=ax, keepdims=keepdim)
  elif p == float("-inf"): out = a.min(axis=ax, keepdims=keepdim)
  elif p == 0: out = (a != 0).sum(axis=ax, keepdims=keepdim).astype(np.float64)
  else: out = (a ** p).sum(axis=ax, keepdims=keepdim) ** (1 / p)
  return out

@pytest.mark.parametrize("p", P_VALUES, ids=str)
def test_norm(device, rng, p):
  x = rand_np(rng, (3, 4, 2))
  x[0, 1, 1] = 0
  for dim, keepdim in ((None, False), (1, True), (-1, False), ((0, 2), False), ((0, 2), True)):
    got = Tensor(x, device=device).norm(p, dim, keepdim)
    assert_close(got.numpy(), np_norm(x, p, dim, keepdim).astype(np.float32), rtol=1e-5)
    if torch is not None: assert_close(got.numpy(), torch.norm(torch.tensor(x), p, dim, keepdim).numpy(), rtol=1e-5)
  assert_close(vector_norm(Tensor(x, device=device), 3).numpy(), np_norm(x, 3, None, False).astype(np.float32), rtol=1e-5)

def test_norm_dtypes(device, rng):
  x = rand_np(rng, (5, 6), "float16")
  got = Tensor(x, device=device).norm(dim=1)
  assert got.dtype == alloy.float16
  assert_close(got.numpy(), np_norm(x, 2, 1, False), "float16", rtol=2e-3)
  assert alloy.norm(Tensor(x, device=device), dtype="float32").dtype == alloy.float32
  with pytest.raises(TypeError, match="floating point"): Tensor([1, 2], device=device).norm()
  with pytest.raises(NotImplementedError, match="nuc"): Tensor(x, device=device).norm("nuc")
  with pytest.raises(ValueError, match="unknown order"): Tensor(x, device=device).norm("max")

def _lib(t): return torch if torch is not None and isinstance(t, torch.Tensor) else alloy

GRAD_CASES = {
  "tril_triu": (lambda a: (a.tril(-1) * weights(a, 3, 4)).sum() + (a.triu(1) ** 2).sum(), [(3, 4)]),
  "log1p_expm1": (lambda a: (a.abs().log1p() * weights(a, 3, 4)).sum() + (a * 0.5).expm1().sum(), [(3, 4)]),
  "logaddexp": (lambda a, b: (a.logaddexp(b) * weights(a, 3, 4)).sum() + _lib(a).logaddexp2(b, a).sum(), [(3, 4), (4,)]),
  "norm2": (lambda a: a.norm() + a.norm(dim=1).sum(), [(3, 4)]),
  "norm_p": (lambda a: a.norm(3, 0).sum() + a.norm(1) + a.norm(0.5, 1).sum(), [(3, 4)]),
  "norm_inf": (lambda a: a.norm(float("inf"), 1).sum() + a.norm(float("-inf")), [(3, 4)]),
}

@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grads(case, device, rng):
  f, shapes = GRAD_CASES[case]
  check_grads(f, [rand_np(rng, s, "float64") for s in shapes], device)

def test_grads_at_zero(device):
  """As PyTorch: 0 where x is 0, also for a zero norm and for p < 1; logaddexp splits a tie in half."""
  for p in (2, 3, 0.5, 1, 0):
    a = Tensor(np.array([0.0, 0.0, 2.0], np.float32), device=device, requires_grad=True)
    (a[:2].norm(p) + a.norm(p)).backward()
    want = np.zeros(3, np.float32) if p == 0 else None
    if torch is not None:
      b = torch.tensor([0.0, 0.0, 2.0], requires_grad=True)
      (torch.norm(b[:2], p) + torch.norm(b, p)).backward()
      want = b.grad.numpy() if b.grad is not None else np.zeros(3, np.float32)   # torch: no gradient for p=0
    if want is not None: assert_close(a.grad.numpy(), want)
    assert np.isfinite(a.grad.numpy()).all()
  a, b = (Tensor([1.5], device=device, requires_grad=True) for _ in range(2))
  a.logaddexp(b).backward()
  assert a.grad.item() == 0.5 and b.grad.item() == 0.5
