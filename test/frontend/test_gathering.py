"""gather, take_along_dim, index_select, one_hot and embedding: forwards against NumPy (and PyTorch), gradients
against finite differences and PyTorch, and the errors for bad indices."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.gathering import one_hot, embedding
from conftest import rand_np, assert_close
from op_grads import check_grads, weights

try: import torch
except ImportError: torch = None

@pytest.mark.parametrize("dim", [0, 1, -1, -3])
def test_gather(device, rng, dim):
  x = rand_np(rng, (3, 4, 5))
  d = dim % 3
  shape = tuple(6 if a == d else s - 1 for a, s in enumerate(x.shape))   # smaller than x off dim, as torch allows
  idx = rng.integers(0, x.shape[d], shape)   # repeats included
  got = Tensor(x, device=device).gather(dim, Tensor(idx, device=device)).numpy()
  want = np.take_along_axis(x[tuple(slice(0, s) if a != d else slice(None) for a, s in enumerate(shape))], idx, d)
  assert_close(got, want)
  if torch is not None: assert_close(got, torch.gather(torch.tensor(x), dim, torch.tensor(idx)).numpy())

@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "float16", "float64"])
def test_gather_dtypes(device, rng, dtype):
  x = rand_np(rng, (4, 3), dtype)
  idx = np.array([[3, 0, 0], [1, 1, 2]], dtype=np.int32)
  t = alloy.gather(Tensor(x, device=device), 0, Tensor(idx, device=device))
  assert t.dtype.name == dtype
  np.testing.assert_array_equal(t.numpy(), np.take_along_axis(x, idx, 0))

def test_gather_edges(device):
  assert Tensor(np.ones((2, 3), np.float32), device=device).gather(1, Tensor(np.zeros((2, 0), np.int64), device=device)).shape == (2, 0)
  # 0-d buffers (a constant-only graph would hit the engine's device-blind node cache: see the branch's report)
  assert Tensor(np.array(5.0, np.float32), device=device).gather(0, Tensor(np.array(0), device=device)).item() == 5.0
  assert Tensor([7.0], device=device).gather(0, Tensor([0, 0], device=device)).tolist() == [7.0, 7.0]

def test_take_along_dim(device, rng):
  x = rand_np(rng, (3, 4))
  idx = np.argsort(x, 1)[:, :2]
  assert_close(Tensor(x, device=device).take_along_dim(Tensor(idx, device=device), 1).numpy(), np.take_along_axis(x, idx, 1))
  flat = np.array([11, 0, 5])
  assert_close(alloy.take_along_dim(Tensor(x, device=device), Tensor(flat, device=device)).numpy(), x.reshape(-1)[flat])
  col = np.array([[2], [0], [1]])   # broadcasts against the input off dim
  assert_close(Tensor(x, device=device).take_along_dim(Tensor(col, device=device), 1).numpy(), np.take_along_axis(x, col, 1))
  if torch is not None:
    row = np.array([[1], [2]])   # (2, 1) against (3, 4) along dim 0: (2, 4)
    want = torch.take_along_dim(torch.tensor(x), torch.tensor(row), 0).numpy()
    assert_close(Tensor(x, device=device).take_along_dim(Tensor(row, device=device), 0).numpy(), want)

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(device, rng, dim):
  x = rand_np(rng, (4, 5, 3))
  idx = np.array([2, 0, 2, x.shape[dim] - 1])
  assert_close(Tensor(x, device=device).index_select(dim, Tensor(idx, device=device)).numpy(), np.take(x, idx, dim))
  assert alloy.index_select(Tensor(x, device=device), dim, Tensor(np.zeros(0, np.int64), device=device)).shape[dim % 3] == 0
  assert_close(alloy.index_select(Tensor(x, device=device), dim, Tensor(1, device=device)).numpy(), np.take(x, [1], dim))

def test_one_hot(device):
  t = Tensor([[0, 3], [1, 1]], device=device)
  got = one_hot(t)
  assert got.dtype == alloy.int64 and got.shape == (2, 2, 4)
  np.testing.assert_array_equal(got.numpy(), np.eye(4, dtype=np.int64)[[[0, 3], [1, 1]]])
  assert one_hot(Tensor([2], dtype="int32", device=device), 5).tolist() == [[0, 0, 1, 0, 0]]
  with pytest.raises(ValueError, match="non-negative"): one_hot(Tensor([-1, 0], device=device))
  with pytest.raises(ValueError, match="smaller than num_classes"): one_hot(Tensor([3], device=device), 3)
  with pytest.raises(TypeError, match="integer tensor"): one_hot(Tensor([1.0], device=device))

def test_embedding(device, rng):
  w = rand_np(rng, (6, 3))
  idx = np.array([[0, 5, 5], [2, 0, 1]])
  got = embedding(Tensor(idx, device=device), Tensor(w, device=device))
  assert_close(got.numpy(), w[idx])
  a = Tensor(w, device=device, requires_grad=True)
  (embedding(Tensor(idx, device=device), a, padding_idx=-1) * weights(a, 2, 3, 3)).sum().backward()
  want = np.zeros_like(w)
  np.add.at(want, idx, np.asarray(weights(np.zeros(0), 2, 3, 3).numpy()))
  want[5] = 0   # the padding row (-1 is row 5) gets no gradient
  assert_close(a.grad.numpy(), want)
  with pytest.raises(NotImplementedError, match="max_norm"): embedding(Tensor(idx, device=device), a, max_norm=1.0)

GRAD_CASES = {
  "gather": (lambda a: (a.gather(1, _i(a, [[0, 2, 2], [1, 1, 0], [3, 0, 0]])) * weights(a, 3, 3)).sum(), [(3, 4)]),
  "gather_dim0": (lambda a: (a.gather(0, _i(a, [[2, 0, 2, 2]])).exp()).sum(), [(3, 4)]),
  "take_along_dim": (lambda a: (a.take_along_dim(_i(a, [[1], [0], [1]]), 1) * 3).sum(), [(3, 4)]),
  "index_select": (lambda a: (a.index_select(1, _i(a, [3, 0, 3])) * weights(a, 3, 3)).sum(), [(3, 4)]),
  "index_select0": (lambda a: (a.index_select(0, _i(a, [1, 1, 2])).sin()).sum(), [(3, 4)]),
  "embedding": (lambda a: (_embed(_i(a, [[0, 2], [2, 2]]), a) * weights(a, 2, 2, 4)).sum(), [(3, 4)]),
}

def _i(like, values):
  if torch is not None and isinstance(like, torch.Tensor): return torch.tensor(values)
  return Tensor(values, device=like.device)

def _embed(i, w):
  if torch is not None and isinstance(w, torch.Tensor): return torch.nn.functional.embedding(i, w)
  return embedding(i, w)

@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grads(case, device, rng):
  f, shapes = GRAD_CASES[case]
  check_grads(f, [rand_np(rng, s, "float64") for s in shapes], device)

def test_bad_indices(device):
  # read inside each block: on a GPU the check is read with the next host read (alloy/bounds.py)
  x = Tensor(np.ones((3, 4), np.float32), device=device)
  with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"): x.gather(1, Tensor([[4]], device=device)).numpy()
  with pytest.raises(IndexError, match="index -1 is out of bounds"): x.gather(0, Tensor([[-1]], device=device)).numpy()
  with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0"): x.index_select(0, Tensor([0, 3], device=device)).numpy()
  with pytest.raises(TypeError, match="index must be an integer tensor, got float32"): x.gather(0, Tensor([[0.0]], device=device))
  with pytest.raises(TypeError, match="index must be an integer tensor, got bool"): x.index_select(0, Tensor([True], device=device))
  with pytest.raises(ValueError, match="dims"): x.gather(0, Tensor([0], device=device))
  with pytest.raises(ValueError, match="larger than the input"): x.gather(0, Tensor(np.zeros((1, 5), np.int64), device=device))
  with pytest.raises(ValueError, match="0-d or 1-D"): x.index_select(0, Tensor([[0]], device=device))
  with pytest.raises(IndexError, match="dimension"): x.gather(2, Tensor([[0]], device=device))
  table = Tensor(np.ones((6, 2), np.float32), device=device)
  with pytest.raises(IndexError, match="out of bounds"): embedding(Tensor([6], device=device), table).numpy()
