"""scatter, scatter_add, scatter_reduce (every reduction, include_self both ways) and their in-place forms: against
PyTorch (and a NumPy loop) on every present device; gradients against finite differences (float64) and PyTorch."""
import numpy as np, pytest
from alloy import Tensor
from conftest import rand_np
from test_autograd import numeric_grad

try: import torch
except ImportError: torch = None

def np_scatter_reduce(x, dim, index, src, reduce, include_self=True):
  """The reference: a loop over the index, as PyTorch documents scatter_reduce."""
  out, seen = x.copy(), np.zeros(x.shape, bool)
  acc: dict = {}
  for c in np.ndindex(index.shape):
    t = list(c)
    t[dim] = index[c]
    acc.setdefault(tuple(t), []).append(src[c])
  for t, vals in acc.items():
    vals = ([x[t]] if include_self else []) + vals
    seen[t] = True
    if reduce == "sum": out[t] = np.sum(vals)
    elif reduce == "prod": out[t] = np.prod(vals)
    elif reduce == "mean": out[t] = np.mean(vals) if x.dtype.kind == "f" else np.sum(vals) // len(vals)
    elif reduce == "amax": out[t] = np.max(vals)
    elif reduce == "amin": out[t] = np.min(vals)
    elif reduce is None: out[t] = vals[-1]
  return out

SHAPES = [((4, 5), 1, (4, 3), (4, 3)), ((4, 5), 0, (6, 5), (6, 5)), ((3, 4, 5), 1, (2, 6, 3), (3, 7, 5)), ((6,), 0, (9,), (9,))]

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_scatter_reduce(reduce, include_self, dtype, device, rng):
  for shape, dim, ishape, sshape in SHAPES:
    x, src = rand_np(rng, shape, dtype), rand_np(rng, sshape, dtype)
    index = rng.integers(0, shape[dim], ishape)
    got = Tensor(x, device=device).scatter_reduce(dim, Tensor(index, device=device), Tensor(src, device=device), reduce, include_self=include_self)
    sub = src[tuple(slice(0, n) for n in ishape)]
    np.testing.assert_allclose(got.numpy(), np_scatter_reduce(x, dim, index, sub, reduce, include_self), rtol=1e-5)
    if torch is not None:
      want = torch.tensor(x).scatter_reduce(dim, torch.tensor(index), torch.tensor(src), reduce, include_self=include_self)
      np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)

def test_scatter_and_scatter_add(device, rng):
  for shape, dim, ishape, sshape in SHAPES:
    x, src = rand_np(rng, shape), rand_np(rng, sshape)
    # a permutation per row along dim: no repeats, so scatter's result does not depend on which repeat wins
    index = np.argsort(rng.random(ishape[:dim] + (shape[dim],) + ishape[dim + 1:]), axis=dim)
    index = index[tuple(slice(0, min(n, shape[dim]) if k == dim else n) for k, n in enumerate(ishape))]
    t, ix, s = Tensor(x, device=device), Tensor(index, device=device), Tensor(src, device=device)
    sub = src[tuple(slice(0, n) for n in index.shape)]
    np.testing.assert_allclose(t.scatter(dim, ix, s).numpy(), np_scatter_reduce(x, dim, index, sub, None))
    np.testing.assert_allclose(t.scatter(dim, ix, 2.5).numpy(), np_scatter_reduce(x, dim, index, np.full(index.shape, 2.5, np.float32), None))
    rep = rng.integers(0, shape[dim], ishape)
    np.testing.assert_allclose(t.scatter_add(dim, Tensor(rep, device=device), s).numpy(),
                               np_scatter_reduce(x, dim, rep, src[tuple(slice(0, n) for n in ishape)], "sum"), rtol=1e-5)
    if torch is not None:
      np.testing.assert_allclose(t.scatter(dim, ix, s, reduce="multiply").numpy(),
                                 torch.tensor(x).scatter(dim, torch.tensor(index), torch.tensor(src), reduce="multiply").numpy(), rtol=1e-5)
  one_hot = Tensor.zeros(4, 6, device=device)
  assert one_hot.scatter_(1, Tensor([[1], [0], [5], [1]], device=device), 1.0) is one_hot
  np.testing.assert_array_equal(one_hot.numpy(), np.eye(6, dtype=np.float32)[[1, 0, 5, 1]])
  acc = Tensor.zeros(3, device=device)
  acc.scatter_add_(0, Tensor([0, 2, 2, 2], device=device), Tensor([1.0, 2.0, 3.0, 4.0], device=device))
  acc.scatter_reduce_(0, Tensor([1], device=device), Tensor([5.0], device=device), "amax")
  np.testing.assert_array_equal(acc.numpy(), [1, 5, 9])

def test_scatter_errors(device):
  x = Tensor.zeros(3, 4, device=device)
  i = Tensor([[0, 1]], device=device)
  with pytest.raises(IndexError, match="out of bounds"): x.scatter(1, Tensor([[0, 4]], device=device), 1.0).numpy()
  with pytest.raises(RuntimeError, match="dtype"): x.scatter_add(1, i, Tensor([[1, 2]], device=device))
  with pytest.raises(RuntimeError, match="integer"): x.scatter(1, Tensor([[0.0]], device=device), 1.0)
  with pytest.raises(RuntimeError, match="same number of dimensions"): x.scatter(1, Tensor([[[0]]], device=device), 1.0)
  with pytest.raises(RuntimeError, match="larger than src"): x.scatter_add(1, i, Tensor([[1.0]], device=device))
  with pytest.raises(ValueError, match="reduce"): x.scatter_reduce(1, i, Tensor([[1.0, 2.0]], device=device), "max")
  with pytest.raises(IndexError, match="out of range"): x.scatter(2, i, 1.0)

GRAD_CASES = {
  "scatter": lambda x, s, i: (x.scatter(1, i, s) * x.scatter(1, i, s)).sum(),
  "scatter_add": lambda x, s, i: x.scatter_add(1, i, s).exp().sum(),
  "sum_no_self": lambda x, s, i: x.scatter_reduce(1, i, s, "sum", include_self=False).sin().sum(),
  "prod": lambda x, s, i: x.scatter_reduce(1, i, s, "prod").sum(),
  "mean": lambda x, s, i: (x.scatter_reduce(1, i, s, "mean") ** 2).sum(),
  "amax": lambda x, s, i: x.scatter_reduce(1, i, s, "amax").exp().sum(),
  "amin_no_self": lambda x, s, i: x.scatter_reduce(1, i, s, "amin", include_self=False).sum(),
  "index_add": lambda x, s, i: x.index_add(0, i[0, :3] % 3, s.pad(((0, 0), (0, 1)))).exp().sum(),
  "index_put_acc": lambda x, s, i: x.index_put((i[0, :3] % 3,), s.pad(((0, 0), (0, 1))) * 2, accumulate=True).tanh().sum(),
  "setitem": lambda x, s, i: _setitem(x, s),
}

def _setitem(x, s):
  y = x * 1
  y[1, ::2] = s[0, :3]
  y[[0, 2], 1:3] *= s[1:3, :2]
  y[y.detach() > 1.5] = 0.5
  return (y * y).sum()

@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_finite_differences(case, rng):
  f = GRAD_CASES[case]
  x, s = rng.uniform(0.5, 2, (3, 5)), rng.uniform(0.5, 2, (3, 4))
  index = np.array([[0, 4, 4, 1], [2, 2, 3, 0], [1, 0, 0, 4]])
  i = Tensor(index)
  xs = [x, s]
  ts = [Tensor(a, requires_grad=True) for a in xs]
  f(*ts, i).backward()
  def fn(*arrs): return f(*[Tensor(a) for a in arrs], i).item()
  for k in range(2):
    np.testing.assert_allclose(ts[k].grad.numpy(), numeric_grad(fn, xs, k), atol=1e-6, rtol=1e-6)
  # PyTorch's scatter backward hands every repeat of an index the gradient (finite differences: only the winner's)
  if torch is not None and case not in ("scatter", "index_add", "index_put_acc", "setitem"):
    tt = [torch.tensor(a, requires_grad=True) for a in xs]
    f(*tt, torch.tensor(index)).backward()
    for k in range(2): np.testing.assert_allclose(ts[k].grad.numpy(), tt[k].grad.numpy(), rtol=1e-10)
