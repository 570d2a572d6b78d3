"""The scatter-adds behind every read at indices (alloy/scatter_sum.py): gradients of gather, index_select, embedding,
getitem with integer tensors, topk and scatter_add against PyTorch on random data with repeated indices, through
both the dense and the sorted lowering; and that the sorted one's kernels are proportional to the work."""
import numpy as np, pytest
import alloy
from alloy import Tensor, scatter_sum
from alloy.gathering import embedding
from alloy.schedule.fusion import schedule
from conftest import rand_np, assert_close

try: import torch
except ImportError: torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

@pytest.fixture(params=["dense", "sorted"])
def lowering(request, monkeypatch):
  if request.param == "sorted":   # every size takes the sorted path
    monkeypatch.setattr(scatter_sum, "DENSE_MAX_SIDE", 0)
    monkeypatch.setattr(scatter_sum, "DENSE_MAX_WORK", 0)
  return request.param

def _grads(f, xs, device, torch_f=None):
  """alloy's and torch's gradients of sum(f(*xs) * w) for a fixed random weighting w of the output."""
  ts = [Tensor(x, device=device, requires_grad=True) for x in xs]
  out = f(*ts)
  w = np.random.default_rng(7).uniform(0.5, 1.5, out.shape).astype(np.float32)
  (out * Tensor(w, device=device)).sum().backward()
  tt = [torch.tensor(x, requires_grad=True) for x in xs]
  ((torch_f or f)(*tt) * torch.tensor(w)).sum().backward()
  for a, b in zip(ts, tt): assert_close(a.grad.numpy(), b.grad.numpy(), atol=1e-4, rtol=1e-4)

@needs_torch
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_grad(device, rng, lowering, dim):
  x = rand_np(rng, (4, 70, 5))
  shape = tuple(90 if a == dim else s - 1 for a, s in enumerate(x.shape))   # longer than x along dim: repeats
  idx = rng.integers(0, x.shape[dim], shape)
  _grads(lambda t: t.gather(dim, Tensor(idx, device=device)), [x], device, lambda t: t.gather(dim, torch.tensor(idx)))

@needs_torch
def test_gather_grad_one_repeated_index(device, rng, lowering):
  x = rand_np(rng, (3, 50))
  idx = np.full((3, 80), 7)
  idx[1, ::3] = 49
  _grads(lambda t: t.gather(1, Tensor(idx, device=device)), [x], device, lambda t: t.gather(1, torch.tensor(idx)))

@needs_torch
@pytest.mark.parametrize("dim", [0, 1])
def test_index_select_grad(device, rng, lowering, dim):
  x = rand_np(rng, (60, 40))
  idx = rng.integers(0, x.shape[dim], 100)
  _grads(lambda t: t.index_select(dim, Tensor(idx, device=device)), [x], device, lambda t: t.index_select(dim, torch.tensor(idx)))

@needs_torch
def test_embedding_grad(device, rng, lowering):
  w = rand_np(rng, (50, 8))
  idx = rng.integers(0, 50, (6, 20))
  idx[0, :] = 3   # padding_idx rows get no gradient
  _grads(lambda t: embedding(Tensor(idx, device=device), t, padding_idx=3), [w], device,
         lambda t: torch.nn.functional.embedding(torch.tensor(idx), t, padding_idx=3))

@needs_torch
@pytest.mark.parametrize("key", ["one", "two", "two apart"])
def test_getitem_grad(device, rng, lowering, key):
  x = rand_np(rng, (40, 3, 35))
  i, j = rng.integers(0, 40, (5, 12)), rng.integers(0, 35, (5, 12))
  def f(t, lib):
    I, J = (Tensor(i, device=device), Tensor(j, device=device)) if lib is alloy else (torch.tensor(i), torch.tensor(j))
    if key == "one": return t[I]
    if key == "two": return t[I, 1:, J[:, :1]]
    return t[I, :, J]
  _grads(lambda t: f(t, alloy), [x], device, lambda t: f(t, torch))

@needs_torch
def test_topk_grad(device, rng, lowering):
  x = (rng.permutation(600).reshape(3, 200) / 100 - 3).astype(np.float32)   # no ties: one order of the top k
  _grads(lambda t: t.topk(120, 1).values, [x], device)

@needs_torch
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add(device, rng, lowering, dim):
  x = rand_np(rng, (40, 45))
  shape = (50, 44) if dim == 0 else (39, 60)   # longer than x along dim, shorter elsewhere
  src = rand_np(rng, shape)   # torch's backward wants src of index's shape
  idx = rng.integers(0, x.shape[dim], shape)
  got = Tensor(x, device=device).scatter_add(dim, Tensor(idx, device=device), Tensor(src, device=device)).numpy()
  assert_close(got, torch.tensor(x).scatter_add(dim, torch.tensor(idx), torch.tensor(src)).numpy(), atol=1e-5, rtol=1e-5)
  _grads(lambda a, b: a.scatter_add(dim, Tensor(idx, device=device), b), [x, src], device,
         lambda a, b: a.scatter_add(dim, torch.tensor(idx), b))

@needs_torch
def test_scatter_add_integers(device, rng, lowering):
  x, src = rng.integers(-5, 5, (3, 40)).astype(np.int32), rng.integers(-5, 5, (3, 70)).astype(np.int32)
  idx = rng.integers(0, 40, (3, 70))
  got = Tensor(x, device=device).scatter_add(1, Tensor(idx, device=device), Tensor(src, device=device)).numpy()
  np.testing.assert_array_equal(got, torch.tensor(x).scatter_add(1, torch.tensor(idx), torch.tensor(src)).numpy())

def test_gather_grad_under_create_graph(rng, lowering):
  """The scatter-add records its own rule: the gradient of a gather's gradient is a gather again."""
  x = rand_np(rng, (2, 40), "float64")
  idx = rng.integers(0, 40, (2, 70))
  t = Tensor(x, device="CPU", requires_grad=True)
  w = Tensor(rng.uniform(0.5, 1.5, (2, 70)), device="CPU", requires_grad=True)
  (g,) = alloy.autograd.grad_of((t.gather(1, Tensor(idx, device="CPU")) * w).sum(), [t], create_graph=True)
  (gw,) = alloy.autograd.grad_of((g * g).sum(), [w])   # d/dw sum_t (sum_{j: idx=t} w_j)^2 = 2 * g[idx_j]
  np.testing.assert_allclose(gw.numpy(), 2 * np.take_along_axis(g.numpy(), idx, 1), rtol=1e-12)

def _largest_node(nodes) -> int:
  """The most elements any node of any kernel of the schedule covers: a kernel's work, up to a constant."""
  most = 0
  for _, ast, _, _ in schedule(nodes):
    most = max(most, max(int(np.prod(n.shape)) for n in ast.root.toposort()))
  return most

def test_large_scatter_is_proportional_to_the_work(rng):
  """n = 4096 values into 4096 targets: no kernel of the gradient covers more than a few times n + size (the
  dense compare would cover n * size = 16M)."""
  n = size = 4096
  x = Tensor(rand_np(rng, (size,)), device="CPU", requires_grad=True)
  idx = Tensor(rng.integers(0, size, n), device="CPU")
  x.gather(0, idx).sum().backward()
  assert _largest_node([x.grad.node]) <= 4 * (n + size)
  counts = np.bincount(idx.numpy(), minlength=size).astype(np.float32)
  np.testing.assert_array_equal(x.grad.numpy(), counts)

@needs_torch
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_grads(device, rng, lowering, reduce, include_self):
  """Values and gradients against PyTorch; the extremes on values with many ties (small integers as floats), where
  the gradient splits evenly among the values equal to the result, self's included where include_self; the product
  with zeros (one and two in a target, and in self)."""
  x = rng.integers(-3, 4, (6, 40)).astype(np.float32) if reduce in ("amax", "amin") else rand_np(rng, (6, 40))
  # PyTorch counts self's ties in the split even when self is left out (its src gradient then sums to less than the
  # output's); alloy splits among the values combined. Without self's ties the two agree.
  if not include_self and reduce in ("amax", "amin"): x += 10 if reduce == "amin" else -10
  src = rng.integers(-3, 4, (5, 70)).astype(np.float32) if reduce in ("amax", "amin") else rand_np(rng, (5, 70))
  idx = rng.integers(0, 40, (5, 70))
  if reduce == "prod":   # zeros: one in some targets' products, two in others, and in self
    x, src = rng.uniform(0.7, 1.3, (6, 40)).astype(np.float32), rng.uniform(0.7, 1.3, (5, 70)).astype(np.float32)
    x[0, :5], src[0, :3], src[1, 10:12] = 0, 0, 0
    idx[1, 10:12] = idx[1, 10]
  def f(a, b, lib):
    return a.scatter_reduce(1, Tensor(idx, device=device) if lib is alloy else torch.tensor(idx), b, reduce, include_self=include_self)
  got = f(Tensor(x, device=device), Tensor(src, device=device), alloy).numpy()
  assert_close(got, f(torch.tensor(x), torch.tensor(src), torch).numpy(), atol=1e-5, rtol=1e-5)
  _grads(lambda a, b: f(a, b, alloy), [x, src], device, lambda a, b: f(a, b, torch))

def test_scatter_value_and_gradient_go_to_the_last_repeat(device, rng, lowering):
  x, src = rand_np(rng, (3, 40)), rand_np(rng, (3, 90))
  idx = rng.integers(0, 40, (3, 90))
  a, b = Tensor(x, device=device, requires_grad=True), Tensor(src, device=device, requires_grad=True)
  w = rng.uniform(0.5, 1.5, (3, 40)).astype(np.float32)
  out = a.scatter(1, Tensor(idx, device=device), b)
  (out * Tensor(w, device=device)).sum().backward()
  want, landed = x.copy(), np.zeros((3, 90), bool)
  for r in range(3):
    last = {t: j for j, t in enumerate(idx[r])}   # the last repeat wins, as PyTorch's CPU scatter and NumPy do
    for t, j in last.items(): want[r, t], landed[r, j] = src[r, j], True
  assert_close(out.numpy(), want)
  written = np.zeros((3, 40), bool)
  for r in range(3): written[r, idx[r]] = True
  assert_close(a.grad.numpy(), np.where(written, 0, w))
  assert_close(b.grad.numpy(), np.where(landed, np.take_along_axis(w, idx, 1), 0))

def test_sorted_scatter_replays_under_jit_with_new_indices(device, rng, monkeypatch):
  """The sorted lowering reads nothing back: a jitted scatter_add and its gradient, replayed with new indices, give
  the new indices' results."""
  monkeypatch.setattr(scatter_sum, "DENSE_MAX_SIDE", 0)
  monkeypatch.setattr(scatter_sum, "DENSE_MAX_WORK", 0)
  @alloy.jit
  def step(x, idx, src):
    out = x.scatter_add(1, idx, src)
    (out * out).sum().backward()
    return out
  for _ in range(4):   # capture on the 2nd call, replays after
    x, src = rand_np(rng, (2, 40)), rand_np(rng, (2, 70))
    idx = rng.integers(0, 40, (2, 70))
    ts = Tensor(src, device=device, requires_grad=True)
    got = step(Tensor(x, device=device), Tensor(idx, device=device), ts)
    want = x.copy()
    for r in range(2): np.add.at(want[r], idx[r], src[r])
    assert_close(got.numpy(), want, atol=1e-5, rtol=1e-5)
    assert_close(ts.grad.numpy(), 2 * np.take_along_axis(want, idx, 1), atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", None])
def test_large_scatter_reduce_is_proportional_to_the_work(rng, reduce):
  n = size = 4096
  x = Tensor(rng.uniform(0.9, 1.1, size).astype(np.float32), device="CPU", requires_grad=True)
  src = Tensor(rng.uniform(0.9, 1.1, n).astype(np.float32), device="CPU", requires_grad=True)
  idx = Tensor(rng.integers(0, size, n), device="CPU")
  out = x.scatter(0, idx, src) if reduce is None else x.scatter_reduce(0, idx, src, reduce)
  out.sum().backward()
  assert _largest_node([out.node, x.grad.node, src.grad.node]) <= 4 * (n + size)

def _np_combine(keys, vals, size, how):
  rows, n, width = vals.shape
  ident = {"sum": 0, "prod": 1, "amax": -np.inf, "amin": np.inf, "last": 0}[how]
  out, written = np.full((rows, size, width), ident, np.float64), np.zeros((rows, size, 1), bool)
  for r in range(rows):
    for j in range(n):
      t, v = keys[r, j], vals[r, j].astype(np.float64)
      if not written[r, t, 0]: out[r, t] = v if how != "sum" else v
      elif how == "sum": out[r, t] += v
      elif how == "prod": out[r, t] *= v
      elif how == "amax": out[r, t] = np.maximum(out[r, t], v)
      elif how == "amin": out[r, t] = np.minimum(out[r, t], v)
      else: out[r, t] = v
      written[r, t, 0] = True
  return out, written

@pytest.mark.parametrize("how", ["sum", "prod", "amax", "amin", "last"])
def test_combine_at_on_random_shapes(device, rng, lowering, how):
  """The core of both lowerings against a NumPy loop: rows, lengths (1, powers of two and not), targets, widths."""
  for rows, n, size, width in ((1, 1, 1, 1), (3, 5, 2, 1), (2, 64, 64, 3), (1, 100, 7, 1), (4, 33, 200, 2), (1, 129, 130, 1)):
    keys = rng.integers(0, size, (rows, n))
    if n > 4: keys[:, : n // 4] = keys[:, :1]   # a long run of one index
    vals = rng.uniform(0.8, 1.25, (rows, n, width)).astype(np.float32)
    out, written = scatter_sum.combine_at(Tensor(keys, device=device), Tensor(vals, device=device), size, how)
    want, want_written = _np_combine(keys, vals, size, how)
    np.testing.assert_array_equal(written.numpy(), want_written)
    assert_close(out.numpy(), want.astype(np.float32), atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("how", ["sum", "prod", "amax", "amin", "last"])
def test_combine_at_integers(device, rng, lowering, how):
  keys = rng.integers(0, 90, (2, 100))
  vals = rng.integers(-3, 4, (2, 100, 1)).astype(np.int32)
  out, written = scatter_sum.combine_at(Tensor(keys, device=device), Tensor(vals, device=device), 90, how)
  want, _ = _np_combine(keys, vals, 90, how)
  info = np.iinfo(np.int32)
  want = np.where(np.isinf(want), np.where(want > 0, info.max, info.min), want).astype(np.int32)   # the integer identities
  assert out.dtype.name == "int32"
  np.testing.assert_array_equal(out.numpy(), want)
