"""cumprod, cummax and cummin: against NumPy (and PyTorch) with ties, NaN, zeros, every dim and the edge shapes;
gradients (cumprod's at zeros, cummax's to the latest tie) against finite differences and PyTorch."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.scans import TRIANGLE_MAX_LENGTH
from conftest import rand_np, assert_close
from op_grads import check_grads, weights

try: import torch
except ImportError: torch = None

def np_cum_extreme(x, axis, largest):
  """Running max/min and the latest index of it (NaN propagates with its own index), by a loop."""
  x = np.moveaxis(x, axis, -1)
  vals, idx = np.empty_like(x), np.zeros(x.shape, np.int64)
  for r in np.ndindex(x.shape[:-1]):
    best, at = None, 0
    for j, v in enumerate(x[r]):
      if best is None or (np.isnan(v) or (not np.isnan(best) and (v >= best if largest else v <= best))): best, at = v, j
      vals[r + (j,)], idx[r + (j,)] = best, at
  return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(device, rng, dim):
  x = rand_np(rng, (3, 5, 4), low=0.5, high=1.5)
  x[1, 2, :] = 0
  assert_close(Tensor(x, device=device).cumprod(dim).numpy(), np.cumprod(x, dim))
  assert_close(alloy.cumprod(Tensor(x, device=device), dim).numpy(), np.cumprod(x, dim))

@pytest.mark.parametrize("n", [TRIANGLE_MAX_LENGTH + 1, 300, 4096])
def test_long_rows(device, rng, n):
  """The log-step scan: cumprod and the running extremes of long rows."""
  x = rand_np(rng, (2, n), low=0.9, high=1.1)
  x[1, n // 3] = 0
  assert_close(Tensor(x, device=device).cumprod(1).numpy(), np.cumprod(x, 1), rtol=1e-4, atol=1e-30)
  t = rng.integers(-50, 50, (2, n)).astype(np.float32)
  t[0, n // 2] = np.nan
  for largest in (True, False):
    v, i = (alloy.cummax if largest else alloy.cummin)(Tensor(t, device=device), -1)
    want_v, want_i = np_cum_extreme(t, 1, largest)
    np.testing.assert_array_equal(v.numpy(), want_v)
    np.testing.assert_array_equal(i.numpy(), want_i)

@pytest.mark.parametrize("dtype", ["int32", "bool", "float16"])
def test_cumprod_dtypes(device, rng, dtype):
  x = rand_np(rng, (2, 6), dtype, low=0.5, high=1.5) if dtype == "float16" else rand_np(rng, (2, 6), dtype)
  got = Tensor(x, device=device).cumprod(1)
  want = np.cumprod(x.astype(np.int64) if dtype != "float16" else x, 1)
  assert got.dtype.name == ("int64" if dtype != "float16" else "float16")
  assert_close(got.numpy(), want, dtype, rtol=1e-2 if dtype == "float16" else None)
  assert Tensor(x, device=device).cumprod(1, dtype="float32").dtype == alloy.float32

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin(device, rng, largest, dim):
  x = rng.integers(-2, 3, (4, 6, 3)).astype(np.float32)   # ties
  x[1, 2, 1] = np.nan
  v, i = (alloy.cummax if largest else alloy.cummin)(Tensor(x, device=device), dim)
  want_v, want_i = np_cum_extreme(x, dim, largest)
  np.testing.assert_array_equal(v.numpy(), want_v)
  np.testing.assert_array_equal(i.numpy(), want_i)
  if torch is not None:
    tv, ti = (torch.cummax if largest else torch.cummin)(torch.tensor(x), dim)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())

@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "uint8", "float64"])
@pytest.mark.parametrize("n", [7, 100])
def test_cummax_dtypes(device, rng, dtype, n):
  x = rand_np(rng, (3, n), dtype)
  if dtype == "int32": x[0, 3] = np.iinfo(np.int32).max   # the largest key is not NaN's for integers
  for largest in (True, False):
    v, i = (Tensor.cummax if largest else Tensor.cummin)(Tensor(x, device=device), 1)
    want_v, want_i = np_cum_extreme(x, 1, largest)
    assert v.dtype.name == dtype
    np.testing.assert_array_equal(v.numpy(), want_v)
    np.testing.assert_array_equal(i.numpy(), want_i)

def test_edges(device):
  e = Tensor(np.zeros((2, 0), np.float32), device=device)
  assert e.cumprod(1).shape == (2, 0) and e.cummax(1).values.shape == (2, 0) and e.cummin(-1).indices.shape == (2, 0)
  s = Tensor(np.array(3.0, np.float32), device=device)
  assert s.cumprod(0).item() == 3.0 and s.cummax(0).values.item() == 3.0 and s.cummax(-1).indices.item() == 0
  with pytest.raises(IndexError, match="dimension"): Tensor(np.ones((2, 3), np.float32), device=device).cummax(2)

GRAD_CASES = {
  "cumprod": (lambda a: (a.cumprod(1) * weights(a, 3, 5)).sum(), [(3, 5)], None),
  "cumprod_zeros": (lambda a: (a.cumprod(-1) * weights(a, 3, 5)).sum(), [(3, 5)], [(0, 2), (1, 0), (1, 3), (2, 4)]),
  "cumprod_two_zeros": (lambda a: (a.cumprod(0) * weights(a, 4, 2)).sum(), [(4, 2)], [(1, 0), (2, 0), (0, 1), (3, 1)]),
  "cummax": (lambda a: (a.cummax(1).values * weights(a, 3, 5)).sum(), [(3, 5)], None),
  "cummin_dim0": (lambda a: (a.cummin(0)[0].exp()).sum(), [(4, 3)], None),
  "cumprod_long": (lambda a: (a.cumprod(1) * weights(a, 2, 70)).sum(), [(2, 70)], [(0, 5), (1, 40), (1, 60)]),
  "cummax_long": (lambda a: (a.cummax(1).values * weights(a, 2, 70)).sum(), [(2, 70)], None),
}

@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grads(case, device, rng):
  f, shapes, zeros = GRAD_CASES[case]
  xs = [rand_np(rng, s, "float64", low=0.5, high=1.5) * rng.choice([-1, 1], s) for s in shapes]
  for z in zeros or (): xs[0][z] = 0
  check_grads(f, xs, device)

def test_cummax_grad_ties(device):
  x = np.array([1.0, 3.0, 3.0, 2.0, 3.0], np.float32)
  a = Tensor(x, device=device, requires_grad=True)
  a.cummax(0).values.sum().backward()
  np.testing.assert_array_equal(a.grad.numpy(), [1, 1, 2, 0, 1])   # each running max's latest index
  if torch is not None:
    b = torch.tensor(x, requires_grad=True)
    torch.cummax(b, 0).values.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
