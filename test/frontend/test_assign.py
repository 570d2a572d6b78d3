"""t[idx] = v for every index form __getitem__ takes, the in-place operators and `_` methods, views writing through
to their base, and lazy values keeping what they read: against NumPy and PyTorch on every present device."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from conftest import rand_np

try: import torch
except ImportError: torch = None

A = np.array   # an index given as a host array
T = "tensor"   # marks an index given as a device tensor: built by _key on the test's device

# (shape, key, shape of the value or None for a scalar); keys NumPy and PyTorch read alike
CASES = [
  ((4, 5), 1, None), ((4, 5), -1, (5,)), ((4, 5), (1, 2), None), ((4, 5), slice(1, 3), (1, 5)),
  ((4, 5), (slice(None), slice(None, None, 2)), (3,)), ((4, 5), slice(None, None, -1), (4, 5)),
  ((4, 5), (slice(3, 0, -2), slice(4, None, -3)), (2, 2)), ((2, 3, 4), (Ellipsis, 1), (2, 3)), ((4, 5), (None, 1), (1, 5)),
  ((4, 5), (1, None, slice(0, 2)), (2,)), ((2, 3, 4), (slice(None), None, 0), None), ((4, 5), Ellipsis, (5,)),
  ((4, 5), [0, 2], (2, 5)), ((4, 5), A([[0], [3]]), (2, 1, 5)), ((4, 5), ([0, 1, 3], [2, 3, 4]), (3,)),
  ((4, 5), (slice(1, 3), [0, 2]), None), ((2, 3, 4), ([0, 1], slice(None), [1, 0]), (2, 3)), ((2, 3, 4), (Ellipsis, [1, 3]), (2, 3, 2)),
  ((4, 5), (T, [0, 2, 1]), None), ((4, 5), (1, [0, 2]), (2,)), ((3, 4, 5), (slice(None), [[0], [2]], [1, 3]), (3, 2, 2)),
  ((4, 5), "mask", None), ((4, 5), "mask_rows", (5,)), ((4, 5), ("mask_rows", slice(1, 4)), (1, 3)), ((4, 5), "mask", "count"),
  ((4, 5), (Ellipsis, "mask_cols"), None), ((2, 3, 4), (1, "mask_2d"), None),
]

def _key(key, shape, device, rng, host=False):
  """The key with its placeholders made: masks from rng, T as a device tensor (as a NumPy array for the reference)."""
  def one(k, pos):
    if not isinstance(k, str): return k
    if k == "mask": return rng.random(shape) > 0.5
    if k == "mask_rows": return np.array([True, False, True, True])
    if k == "mask_cols": return np.array([True, False, False, True, True])
    if k == "mask_2d": return rng.random(shape[pos:pos + 2]) > 0.4
    return np.array([2, 0, 3]) if host else Tensor([2, 0, 3], device=device)
  if isinstance(key, tuple): return tuple(one(k, i) for i, k in enumerate(key))
  return one(key, 0)

def _value(vshape, ref, rng, dtype):
  if vshape is None: return 3, 3
  if vshape == "count": vshape = (int(ref.sum()),) if isinstance(ref, np.ndarray) else ref
  v = rand_np(rng, vshape, dtype)
  return v, v

@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_setitem_matches_numpy_and_torch(case, dtype, device, rng):
  shape, key, vshape = CASES[case]
  x = rand_np(rng, shape, dtype)
  k_dev, k_host = _key(key, shape, device, np.random.default_rng(7)), _key(key, shape, device, np.random.default_rng(7), host=True)
  mask = k_host if isinstance(k_host, np.ndarray) and k_host.dtype == bool else None
  v_np, _ = _value(vshape, mask if mask is not None else x[k_host], rng, dtype)
  want = x.copy()
  want[k_host] = v_np
  t = Tensor(x, device=device)
  t[k_dev] = Tensor(v_np, device=device) if isinstance(v_np, np.ndarray) else v_np
  np.testing.assert_array_equal(t.numpy(), want)
  steps = [k.step for k in (key if isinstance(key, tuple) else (key,)) if isinstance(k, slice) and k.step]
  if torch is not None and all(s > 0 for s in steps):   # PyTorch has no negative steps
    tt = torch.tensor(x)
    tk = tuple(torch.tensor(k) if isinstance(k, np.ndarray) else k for k in k_host) if isinstance(k_host, tuple) else \
      torch.tensor(k_host) if isinstance(k_host, np.ndarray) else k_host
    tt[tk] = torch.tensor(v_np) if isinstance(v_np, np.ndarray) else v_np
    np.testing.assert_array_equal(t.numpy(), tt.numpy())

def test_setitem_mixed_int_and_array_follows_torch(device):
  """x[0, :, [1, 2]]: NumPy counts the int as an advanced index and moves the dims; PyTorch (and alloy's getitem) do not."""
  x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  v = np.arange(6, dtype=np.float32).reshape(3, 2) + 100
  t, tt = Tensor(x, device=device), torch.tensor(x) if torch else None
  t[0, :, [1, 2]] = Tensor(v, device=device)
  if tt is not None:
    tt[0, :, [1, 2]] = torch.tensor(v)
    np.testing.assert_array_equal(t.numpy(), tt.numpy())
  want = x.copy()
  want[0][:, [1, 2]] = v
  np.testing.assert_array_equal(t.numpy(), want)

def test_setitem_casts_and_broadcasts(device):
  t = Tensor(np.zeros((3, 4), np.int32), device=device)
  t[1] = 2.7                                              # cast as PyTorch: truncated
  t[:, 0] = Tensor([1.9, -1.9, 5.0], device=device)
  t[2:] = Tensor([[[7, 8, 9, 10]]], device=device)        # leading size-1 dims dropped
  np.testing.assert_array_equal(t.numpy(), [[1, 0, 0, 0], [-1, 2, 2, 2], [7, 8, 9, 10]])
  f = Tensor(np.ones((2, 3), np.float32), device=device)
  f[Tensor([True, True], device=device)] = Tensor([1.0, 2.0, 3.0], device=device)     # a row for every True
  f[f > 2] = Tensor([5.0, 6.0], device=device)    # one value per True
  np.testing.assert_array_equal(f.numpy(), [[1, 2, 5], [1, 2, 6]])
  with pytest.raises(ValueError, match="cannot be broadcast"): f[0] = Tensor([1.0, 2.0], device=device)
  with pytest.raises(IndexError, match="out of bounds"): f[[0, 5]] = 1
  with pytest.raises(IndexError, match="out of bounds"): f[Tensor([0, 2], device=device)] = 1
  with pytest.raises(IndexError, match="mask"): f[Tensor([True, False, True], device=device)] = 1

def test_lazy_values_keep_what_they_read(device):
  a = Tensor(np.arange(6, dtype=np.float32), device=device)
  doubled, first = a * 2, a + 0
  a[0] = 100
  a += 1
  np.testing.assert_array_equal(doubled.numpy(), np.arange(6) * 2)
  np.testing.assert_array_equal(first.numpy(), np.arange(6))
  np.testing.assert_array_equal(a.numpy(), [101, 2, 3, 4, 5, 6])
  b = a.realize()   # a buffer that is realized, then assigned: the earlier reader keeps its values
  c = b * 1
  b[1:3] = 0
  np.testing.assert_array_equal(c.numpy(), [101, 2, 3, 4, 5, 6])
  np.testing.assert_array_equal(b.numpy(), [101, 0, 0, 4, 5, 6])

OPS = ["__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
       "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"]

# PyTorch's meaning of each in-place operator, in NumPy (its % and // floor, as Python's do)
NUMPY_OPS = {"__iadd__": np.add, "__isub__": np.subtract, "__imul__": np.multiply, "__itruediv__": np.true_divide,
             "__ifloordiv__": np.floor_divide, "__imod__": np.mod, "__ipow__": np.power, "__iand__": np.bitwise_and,
             "__ior__": np.bitwise_or, "__ixor__": np.bitwise_xor, "__ilshift__": np.left_shift, "__irshift__": np.right_shift}

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_inplace_operators(op, dtype, device, rng):
  bitwise = op in ("__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__")
  if dtype == "float32" and bitwise: pytest.skip("bitwise ops need integers (their error is checked below)")
  x = rand_np(rng, (3, 4), dtype, 0.5, 2.0)
  y = rand_np(rng, (4,), dtype, 0.5, 2.0)
  if dtype == "int32": x, y = np.abs(x) + 1, np.abs(y) % 3 + 1
  t = Tensor(x, device=device)
  same = t
  if op == "__itruediv__" and dtype == "int32":
    with pytest.raises(RuntimeError, match="can't be cast"): t /= Tensor(y, device=device)
    return
  t = getattr(t, op)(Tensor(y, device=device))
  assert t is same
  want = NUMPY_OPS[op](x, y).astype(x.dtype)
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)
  if torch is not None: np.testing.assert_allclose(t.numpy(), getattr(torch.tensor(x), op)(torch.tensor(y)).numpy(), rtol=1e-5)
  t = getattr(t, op)(2)
  np.testing.assert_allclose(t.numpy(), NUMPY_OPS[op](want, x.dtype.type(2)).astype(x.dtype), rtol=1e-5)

METHODS = {
  "add_": lambda t, o: t.add_(o, alpha=2), "sub_": lambda t, o: t.sub_(o), "mul_": lambda t, o: t.mul_(o),
  "div_": lambda t, o: t.div_(o), "div_floor": lambda t, o: t.div_(o, rounding_mode="floor"),
  "clamp_": lambda t, o: t.clamp_(-0.5, 0.5), "clamp_min": lambda t, o: t.clamp_(min=o), "zero_": lambda t, o: t.zero_(),
  "fill_": lambda t, o: t.fill_(1.5), "copy_": lambda t, o: t.copy_(o), "exp_": lambda t, o: t.exp_(),
  "sqrt_abs": lambda t, o: t.abs_().sqrt_(), "neg_": lambda t, o: t.neg_(), "sigmoid_": lambda t, o: t.sigmoid_(),
  "tanh_": lambda t, o: t.tanh_(), "relu_": lambda t, o: t.relu_(), "pow_": lambda t, o: t.abs_().pow_(1.5),
  "lerp_": lambda t, o: t.lerp_(o, 0.25), "masked_fill_": lambda t, o: t.masked_fill_(o > 0, -3.0),
  "addcmul_": lambda t, o: t.addcmul_(o, o, value=0.5), "addcdiv_": lambda t, o: t.addcdiv_(o, o + 3, value=2),
  "floor_": lambda t, o: t.floor_(), "remainder_": lambda t, o: t.remainder_(1.5), "gt_": lambda t, o: t.gt_(o),
  "sign_": lambda t, o: t.sign_(), "square_": lambda t, o: t.square_(), "reciprocal_": lambda t, o: t.reciprocal_(),
}

@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("name", sorted(METHODS))
def test_underscore_methods_match_torch(name, device, rng):
  x, o = rand_np(rng, (3, 4)), rand_np(rng, (4,))
  t = Tensor(x, device=device)
  assert METHODS[name](t, Tensor(o, device=device)) is t
  want = METHODS[name](torch.tensor(x), torch.tensor(o))
  np.testing.assert_allclose(t.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)

def test_dtype_rules_of_inplace_ops(device):
  i = Tensor([1, 2, 3], device=device)
  with pytest.raises(RuntimeError, match="can't be cast"): i += 1.5
  with pytest.raises(RuntimeError, match="can't be cast"): i.mul_(Tensor([1.0, 2.0, 3.0], device=device))
  b = Tensor([True, False], device=device)
  with pytest.raises(RuntimeError, match="can't be cast"): b += 1
  with pytest.raises(RuntimeError, match="doesn't match"): Tensor([1.0, 2.0], device=device).add_(Tensor([[1.0], [2.0]], device=device))
  with pytest.raises(TypeError, match="bitwise"): Tensor([1.0], device=device).__iand__(1)
  f = Tensor([1.0, 2.0], device=device)
  f += Tensor([1, 2], device=device)   # an int result into a float tensor is fine
  i.copy_(Tensor([1.9, 2.9, -3.9], device=device))   # copy_ casts anything, as PyTorch's
  np.testing.assert_array_equal(i.numpy(), [1, 2, -3])
  np.testing.assert_array_equal(f.numpy(), [2.0, 4.0])

@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_views_write_through_as_torch(device):
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  progs = [
    lambda t: t[0].__iadd__(1),                                       # v = t[0]; v += 1
    lambda t: t.reshape(-1)[5:7].mul_(10),                            # a view of a view
    lambda t: t.T[1].fill_(-1),                                       # permuted
    lambda t: t[:, 1:3][1].sub_(100),
    lambda t: t.split(2, 1)[1].zero_(),                               # split gives views
    lambda t: t.view(2, 6).unsqueeze(0)[0, 1, ::2].add_(5),
    lambda t: t.detach().mul_(2),                                     # detach() shares the values
    lambda t: t[1].__setitem__(slice(0, 2), 42),                      # setitem on a view
  ]
  for prog in progs:
    t, tt = Tensor(x, device=device), torch.tensor(x)
    prog(t); prog(tt)
    np.testing.assert_array_equal(t.numpy(), tt.numpy())
  # x[i] op= y: the view writes once (no double add), for basic and advanced keys
  t, tt = Tensor(x, device=device), torch.tensor(x)
  for key in (1, (slice(None), 2), [0, 0, 2], (Tensor([1, 2], device=device), 0)):
    tkey = (torch.tensor([1, 2]), 0) if isinstance(key, tuple) and isinstance(key[0], Tensor) else key
    t[key] += 7; tt[tkey] += 7
    np.testing.assert_array_equal(t.numpy(), tt.numpy())
  # a view made before its base changed, changed in place: it starts from the base's current values, as in PyTorch
  t, tt = Tensor(x, device=device), torch.tensor(x)
  v, tv = t[0], tt[0]
  t += 1; tt += 1
  v *= 2; tv *= 2
  np.testing.assert_array_equal(t.numpy(), tt.numpy())
  np.testing.assert_array_equal(v.numpy(), tv.numpy())

def test_copies_are_not_views(device):
  x = np.arange(6, dtype=np.float32)
  t = Tensor(x, device=device)
  for make in (lambda t: t.clone(), lambda t: t[[0, 1]], lambda t: t.flip(0), lambda t: t + 0, lambda t: t.int().floor()):
    c = make(t)
    c += 1
    np.testing.assert_array_equal(t.numpy(), x)

@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_index_put_and_index_ops(device, rng):
  x = rand_np(rng, (5, 3))
  src = rand_np(rng, (4, 3))
  wide = Tensor(rand_np(rng, (5, 4)), device=device)
  idx = np.array([0, 2, 2, 4])
  cases = [
    (lambda t, i, s: t.index_put_((i,), s, accumulate=True)), (lambda t, i, s: t.index_add_(0, i, s, alpha=2)),
    (lambda t, i, s: t.index_copy_(0, i[[0, 1, 3]], s[[0, 1, 3]])), (lambda t, i, s: t.index_fill_(1, i[:2] % 3, -2.0)),
    (lambda t, i, s: t.index_put_((i, i % 3), s[:, 0])),
    (lambda t, i, s: t.index_add(1, i % 3, wide if isinstance(t, Tensor) else torch.tensor(wide.numpy()))),
  ]
  for make in cases:
    t = Tensor(x, device=device)
    got = make(t, Tensor(idx, device=device), Tensor(src, device=device))
    want = make(torch.tensor(x), torch.tensor(idx), torch.tensor(src))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
  many = np.zeros(40, np.int64)   # past MAX_LAYERS repeats: one scatter-add
  t = Tensor(np.zeros((2, 3), np.float32), device=device)
  t.index_put_((Tensor(many % 2, device=device),), Tensor(np.ones((40, 3), np.float32), device=device), accumulate=True)
  np.testing.assert_array_equal(t.numpy(), [[40] * 3, [0] * 3])
  ints = Tensor(src, device=device).int()
  with pytest.raises(RuntimeError, match="dtype"): Tensor(x, device=device).index_add_(0, Tensor(idx, device=device), ints)
  with pytest.raises(IndexError, match="source"): Tensor(x, device=device).index_copy_(0, Tensor(idx, device=device), Tensor(src[:2], device=device))

def test_random_fills(device):
  alloy.manual_seed(3)
  t = Tensor.zeros(1000, device=device).uniform_(-2, 2)
  n = Tensor.zeros(1000, device=device).normal_(1.0, 0.5).numpy()
  assert -2 <= t.numpy().min() < -1.9 and 1.9 < t.numpy().max() <= 2
  assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 0.5) < 0.1
