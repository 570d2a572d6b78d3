"""sort, argsort and topk: against NumPy's stable sort (and PyTorch) with ties, NaN, every dim, short rows (the
rank kernels) and long ones (the bitonic network); gradients against finite differences and PyTorch; errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.ordering import RANK_MAX_LENGTH
from conftest import rand_np, assert_close
from op_grads import check_grads, weights

try: import torch
except ImportError: torch = None

def np_sort(x, axis, descending):
  """NumPy's stable sort, descending keeping equal elements in order, NaN largest (PyTorch's rules)."""
  key = -x if descending and x.dtype.kind == "f" else x
  if descending and x.dtype.kind != "f": key = -x.astype(np.int64)
  if descending and x.dtype.kind == "f": key = np.where(np.isnan(x), -np.inf, key)   # NaN first descending
  idx = np.argsort(key, axis=axis, kind="stable")
  if descending and x.dtype.kind == "f":   # NaN before -inf ties: NaNs, in order, then the rest
    nan_first = np.argsort(~np.isnan(np.take_along_axis(x, idx, axis)), axis=axis, kind="stable")
    idx = np.take_along_axis(idx, nan_first, axis)
  return np.take_along_axis(x, idx, axis), idx

@pytest.mark.parametrize("n", [1, 7, RANK_MAX_LENGTH, RANK_MAX_LENGTH + 1, 300])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_ties(device, rng, n, descending):
  x = rng.integers(-3, 4, (3, n)).astype(np.float32)   # many ties
  v, i = Tensor(x, device=device).sort(-1, descending)
  want_v, want_i = np_sort(x, -1, descending)
  assert i.dtype == alloy.int64
  np.testing.assert_array_equal(v.numpy(), want_v)
  np.testing.assert_array_equal(i.numpy(), want_i)
  if torch is not None:
    tv, ti = torch.sort(torch.tensor(x), dim=-1, descending=descending, stable=True)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())

@pytest.mark.parametrize("dim", [0, 1, -1, -3])
def test_sort_dims(device, rng, dim):
  x = rand_np(rng, (4, 5, 3))
  v, i = alloy.sort(Tensor(x, device=device), dim)
  want_v, want_i = np_sort(x, dim, False)
  assert_close(v.numpy(), want_v)
  np.testing.assert_array_equal(i.numpy(), want_i)
  np.testing.assert_array_equal(Tensor(x, device=device).argsort(dim, descending=True).numpy(), np_sort(x, dim, True)[1])

def test_sort_nan_and_signed_zero(device):
  nan = float("nan")
  x = np.array([3.0, nan, -0.0, 1.0, 0.0, nan, -np.inf, np.inf], np.float32)
  for descending in (False, True):
    v, i = Tensor(x, device=device).sort(descending=descending)
    want_v, want_i = np_sort(x, 0, descending)
    np.testing.assert_array_equal(v.numpy(), want_v)
    np.testing.assert_array_equal(i.numpy(), want_i)
    if torch is not None:
      np.testing.assert_array_equal(i.numpy(), torch.sort(torch.tensor(x), descending=descending, stable=True).indices.numpy())

@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool", "float16"])
def test_sort_dtypes(device, rng, dtype):
  x = rand_np(rng, (2, 80), dtype)
  for descending in (False, True):
    v, i = Tensor(x, device=device).sort(1, descending)
    want_v, want_i = np_sort(x, 1, descending)
    assert v.dtype.name == dtype
    np.testing.assert_array_equal(v.numpy(), want_v)
    np.testing.assert_array_equal(i.numpy(), want_i)

def test_sort_edges(device):
  v, i = Tensor(np.array(2.5, np.float32), device=device).sort()
  assert v.item() == 2.5 and i.item() == 0 and v.shape == i.shape == ()
  v, i = Tensor(np.zeros((3, 0), np.float32), device=device).sort(1)
  assert v.shape == i.shape == (3, 0)
  v, i = Tensor(np.array([[2.0], [1.0]], np.float32), device=device).sort(1)
  assert v.tolist() == [[2.0], [1.0]] and i.tolist() == [[0], [0]]

def test_sort_long_row(device, rng):
  """A row of 4096 float32 through the bitonic network (78 stages, one compiled kernel for most of them)."""
  x = rng.standard_normal((2, 4096)).astype(np.float32)
  x[0, ::3] = 0.5   # ties
  v, i = Tensor(x, device=device).sort(1, descending=True)
  want_v, want_i = np_sort(x, 1, True)
  np.testing.assert_array_equal(v.numpy(), want_v)
  np.testing.assert_array_equal(i.numpy(), want_i)

@pytest.mark.parametrize("largest", [True, False])
def test_topk(device, rng, largest):
  x = rng.integers(-4, 5, (3, 100)).astype(np.float32)
  for k in (1, 5, 100):
    v, i = Tensor(x, device=device).topk(k, largest=largest)
    want_v, want_i = np_sort(x, 1, largest)
    np.testing.assert_array_equal(v.numpy(), want_v[:, :k])
    np.testing.assert_array_equal(i.numpy(), want_i[:, :k])   # ties: the earlier index first
    if torch is not None:
      np.testing.assert_array_equal(v.numpy(), torch.topk(torch.tensor(x), k, largest=largest).values.numpy())
  x = rand_np(rng, (5, 4))
  v, i = alloy.topk(Tensor(x, device=device), 2, dim=0)
  np.testing.assert_array_equal(v.numpy(), -np.sort(-x, 0)[:2])
  np.testing.assert_array_equal(np.take_along_axis(x, i.numpy(), 0), v.numpy())
  assert alloy.topk(Tensor(x, device=device), 0).values.shape == (5, 0)

GRAD_CASES = {
  "sort": (lambda a: (a.sort(1).values * weights(a, 3, 5)).sum(), [(3, 5)]),
  "sort_desc_dim0": (lambda a: (a.sort(0, descending=True)[0] * weights(a, 3, 5)).sum(), [(3, 5)]),
  "sort_long": (lambda a: (a.sort(-1).values * weights(a, 2, 70)).sum(), [(2, 70)]),
  "topk": (lambda a: (a.topk(2, 1).values * weights(a, 3, 2)).sum(), [(3, 5)]),
  "topk_smallest": (lambda a: (a.topk(3, 0, largest=False).values.exp()).sum(), [(4, 3)]),
}

def distinct(rng, shape):
  """Values without ties (finite differences across a tie average the two sides), at least 0.1 apart."""
  n = int(np.prod(shape))
  return (rng.permutation(n).reshape(shape) - n / 2) / 10 + 0.01

@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grads(case, device, rng):
  f, shapes = GRAD_CASES[case]
  check_grads(f, [distinct(rng, s) for s in shapes], device)

def test_grads_with_ties(device):
  """The gradient goes where the stable order put each value: for topk, the earlier index among ties (PyTorch
  leaves topk's tie order unspecified; its stable sort agrees with ours)."""
  x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]], np.float32)
  a = Tensor(x, device=device, requires_grad=True)
  (a.sort(dim=1, descending=True, stable=True).values * weights(a, 1, 5)).sum().backward()
  np.testing.assert_array_equal(a.grad.numpy(), [[1.25, 0.25, 0.5, 1.0, 0.75]])
  if torch is not None:
    b = torch.tensor(x, requires_grad=True)
    (b.sort(dim=1, descending=True, stable=True).values * weights(b, 1, 5)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
  a = Tensor(x, device=device, requires_grad=True)
  (a.topk(2).values * weights(a, 1, 2)).sum().backward()
  np.testing.assert_array_equal(a.grad.numpy(), [[0, 0.25, 0.5, 0, 0]])

def test_errors(device):
  x = Tensor(np.ones((2, 3), np.float32), device=device)
  with pytest.raises(IndexError, match="dimension 2 is out of range"): x.sort(2)
  with pytest.raises(ValueError, match=r"k \(4\) is out of range for dimension 1 of size 3"): x.topk(4)
  with pytest.raises(TypeError, match="k must be an int"): x.topk(1.0)
  with pytest.raises(TypeError, match="expected a Tensor"): alloy.sort([3, 1])

def test_contiguous_twice(device):
  """sort's backward sorts a permutation not yet computed: contiguous() of a contiguous() result stays one node."""
  t = (Tensor(np.arange(6.0, dtype=np.float32), device=device) * 2).contiguous()
  assert t.contiguous().node is t.node
  np.testing.assert_array_equal(t.contiguous().numpy(), np.arange(6.0) * 2)
