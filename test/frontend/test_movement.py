"""Movement ops, indexing and creation against NumPy."""
import numpy as np
import alloy
from alloy import Tensor
from conftest import rand_np, assert_close, supported

def test_movement(device, rng):
  x = rand_np(rng, (2, 3, 4))
  t = Tensor(x, device=device)
  cases = [
    (t.reshape(6, 4), x.reshape(6, 4)), (t.view(-1), x.reshape(-1)), (t.reshape(4, -1), x.reshape(4, -1)),
    (t.permute(2, 0, 1), x.transpose(2, 0, 1)), (t.transpose(0, 2), x.swapaxes(0, 2)), (t.T, x.T),
    (t[:, :1].expand(2, 5, 4), np.broadcast_to(x[:, :1], (2, 5, 4))), (t[:1].squeeze(0), x[0]),
    (t.unsqueeze(1), x[:, None]), (t.flatten(1), x.reshape(2, 12)), (t.flip(1), x[:, ::-1]), (t.flip((0, 2)), x[::-1, :, ::-1]),
    (t.pad(((1, 0), (0, 2), (1, 1))), np.pad(x, ((1, 0), (0, 2), (1, 1)))),
    (t.pad(((1, 1), (0, 0), (2, 0)), value=3.5), np.pad(x, ((1, 1), (0, 0), (2, 0)), constant_values=3.5)),
    (t.repeat(2, 1, 3), np.tile(x, (2, 1, 3))), (t.T.reshape(4, 6), x.T.reshape(4, 6)),
    (t.permute(1, 2, 0).reshape(12, 2)[::3], x.transpose(1, 2, 0).reshape(12, 2)[::3]),
  ]
  for got, want in cases: np.testing.assert_array_equal(got.numpy(), want)

def test_split_chunk_cat_stack(device, rng):
  x = rand_np(rng, (5, 4))
  t = Tensor(x, device=device)
  for got, want in zip(t.split(2), np.split(x, [2, 4])): np.testing.assert_array_equal(got.numpy(), want)
  for got, want in zip(t.split([1, 4], dim=0), np.split(x, [1])): np.testing.assert_array_equal(got.numpy(), want)
  for got, want in zip(t.chunk(2, 1), np.split(x, 2, axis=1)): np.testing.assert_array_equal(got.numpy(), want)
  y = rand_np(rng, (2, 4))
  np.testing.assert_array_equal(alloy.cat([t, Tensor(y, device=device)]).numpy(), np.concatenate([x, y]))
  np.testing.assert_array_equal(alloy.cat([t, t], dim=1).numpy(), np.concatenate([x, x], 1))
  np.testing.assert_array_equal(alloy.stack([t, t * 2], dim=1).numpy(), np.stack([x, x * 2], 1))
  b = Tensor(np.array([True, False]), device=device)
  np.testing.assert_array_equal(alloy.cat([b, b]).numpy(), [True, False, True, False])

def test_getitem(device, rng):
  x = rand_np(rng, (4, 5, 6))
  t = Tensor(x, device=device)
  for idx in [1, -1, (1, 2), (slice(None), 2), (slice(1, 3), slice(None, None, 2)), (Ellipsis, 3), (None, 1, Ellipsis, None),
              (slice(None, None, -1),), (slice(3, 0, -2), slice(None), slice(5, None, -3)), (2, None, slice(1, 4)),
              (slice(10, 20),), (slice(-2, None), -3)]:
    np.testing.assert_array_equal(t[idx].numpy(), x[idx])
  assert t[1, 2, 3].item() == x[1, 2, 3]

def test_gather(device, rng):
  x = rand_np(rng, (5, 6))
  t = Tensor(x, device=device)
  i = np.array([4, 0, -1, 2])
  ti = Tensor(i, device=device)
  np.testing.assert_array_equal(t[ti].numpy(), x[i])
  np.testing.assert_array_equal(t[:, ti].numpy(), x[:, i])
  j = np.array([[0, 1], [2, 3]])
  np.testing.assert_array_equal(t[Tensor(j, device=device), Tensor(j + 1, device=device)].numpy(), x[j, j + 1])
  np.testing.assert_array_equal(t[[1, 3]].numpy(), x[[1, 3]])
  np.testing.assert_array_equal((t * 2)[ti, 1:4].numpy(), (x * 2)[i, 1:4])

def test_boolean_mask(device, rng):
  # a mask picks the elements (or rows, or columns) where it is True, as NumPy and PyTorch do
  x = rand_np(rng, (5, 6))
  t = Tensor(x, device=device)
  for name, f in (("elements", lambda a: a[a > 0.5]), ("rows", lambda a: a[a[:, 0] > 0]), ("columns", lambda a: a[:, a[1] < 0]),
                  ("rows then slice", lambda a: a[a[:, 2] > -1, 1:4]), ("none", lambda a: a[a > 100]),
                  ("after ellipsis", lambda a: a[..., a[0] > 0])):
    np.testing.assert_array_equal(f(t).numpy(), f(x), err_msg=name)
  np.testing.assert_array_equal(t[[True, False, True, False, True]].numpy(), x[[True, False, True, False, True]])
  rows = np.array([False, True] * 3)[None, :].repeat(5, 0)
  np.testing.assert_array_equal((t * 2)[rows].numpy(), (x * 2)[rows])

def test_creation(device):
  np.testing.assert_array_equal(alloy.zeros(2, 3, device=device).numpy(), np.zeros((2, 3), np.float32))
  np.testing.assert_array_equal(alloy.ones((3,), dtype="int32", device=device).numpy(), np.ones(3, np.int32))
  np.testing.assert_array_equal(alloy.full((2, 2), 7, device=device).numpy(), np.full((2, 2), 7))
  assert alloy.full((2,), 7, device=device).dtype == alloy.int64
  np.testing.assert_array_equal(alloy.arange(5, device=device).numpy(), np.arange(5))
  np.testing.assert_array_equal(alloy.arange(2, 11, 3, device=device).numpy(), np.arange(2, 11, 3))
  assert_close(alloy.arange(0, 1, 0.25, device=device).numpy(), np.arange(0, 1, 0.25, dtype=np.float32))
  np.testing.assert_array_equal(alloy.arange(10, 0, -3, device=device).numpy(), np.arange(10, 0, -3))
  assert_close(alloy.linspace(-1, 2, 7, device=device).numpy(), np.linspace(-1, 2, 7, dtype=np.float32))
  np.testing.assert_array_equal(alloy.eye(3, 4, device=device).numpy(), np.eye(3, 4, dtype=np.float32))
  assert alloy.empty(3, 2, device=device).shape == (3, 2)
  x = Tensor([[1, 2], [3, 4]], device=device)
  assert x.dtype == alloy.int64 and x.shape == (2, 2) and x.ndim == 2 and x.numel() == 4
  assert Tensor(2.5, device=device).item() == 2.5
  if supported(device, ["float64"]): assert Tensor([1.5], dtype="float64", device=device).dtype == alloy.float64
  assert x.tolist() == [[1, 2], [3, 4]]
  assert alloy.zeros_like(x).dtype == alloy.int64

def test_random(device):
  alloy.manual_seed(7)
  a = alloy.rand(1000, device=device).numpy()
  alloy.manual_seed(7)
  b = alloy.rand(1000, device=device).numpy()
  c = alloy.rand(1000, device=device).numpy()
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)
  assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
  n = alloy.randn(20000, device=device).numpy()
  assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
  r = alloy.randint(3, 9, (5000,), device=device).numpy()
  assert r.min() == 3 and r.max() == 8 and r.dtype == np.int64

def test_cat_keeps_negative_zero_and_dtypes(device):
  x = np.array([[-0.0, 1.5], [2.0, -0.0]], np.float32)
  got = alloy.cat([Tensor(x, device=device), Tensor(-x, device=device)], dim=1).numpy()
  want = np.concatenate([x, -x], 1)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
  mixed = alloy.cat([Tensor([1, 2], device=device), Tensor([0.5], device=device)])   # int64 + float32 -> float32
  assert mixed.dtype == alloy.float32
  np.testing.assert_array_equal(mixed.numpy(), [1.0, 2.0, 0.5])

def test_pads_of_narrow_rows(device, rng):
  """Rows of 2 padded by whole rows (GCC 12 vectorised the CPU kernel's masked loads wrongly: rows 2-3 of a (7, 2)
  tensor padded by 2 rows on both sides came out 0; renderer/c.py's load), and a middle axis padded past its size."""
  import alloy.nn.functional as F
  for shape, pads in (((7, 2), (0, 0, 2, 2)), ((5, 2), (0, 0, 3, 1)), ((16, 2), (0, 0, 2, 2)), ((2, 2, 2), (0, 0, 2, 2)),
                      ((7, 3), (1, 0, 2, 1))):
    h = rng.standard_normal(shape).astype(np.float32)
    widths = [(0, 0)] * (len(shape) - 2) + [(pads[2], pads[3]), (pads[0], pads[1])]
    np.testing.assert_array_equal(F.pad(Tensor(h, device=device), pads, value=0.5).numpy(), np.pad(h, widths, constant_values=0.5),
                                  err_msg=f"{shape} padded by {pads}")
