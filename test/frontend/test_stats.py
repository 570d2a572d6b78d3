"""alloy/stats.py and alloy/structured.py against torch, on every device: quantile and nanquantile in every
interpolation mode (scalar and tensor q, NaNs, keepdim), cov and corrcoef with weights, bincount, the trapezoid rule,
var_mean; the pattern-built tensors and the data-sized selections; gradients where torch has them."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from op_grads import check_grads

torch = pytest.importorskip("torch")

def _t(x, device): return Tensor(x, device=device)

@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantiles_match_torch(device, rng, interpolation):
  y = rng.standard_normal((4, 9)).astype(np.float32)
  y[1, 3] = y[2, 0] = np.nan
  y[3, :] = np.nan
  qs = np.array([0.0, 0.25, 0.5, 0.9, 1.0], np.float32)
  for fn in ("quantile", "nanquantile"):
    for q in (0.3, qs):
      for dim, keepdim in ((None, False), (1, False), (0, True), (None, True), (-1, True)):
        got = getattr(alloy, fn)(_t(y, device), _t(q, device) if isinstance(q, np.ndarray) else q, dim, keepdim, interpolation=interpolation)
        want = getattr(torch, fn)(torch.tensor(y), torch.tensor(q) if isinstance(q, np.ndarray) else q, dim, keepdim, interpolation=interpolation)
        assert got.shape == tuple(want.shape), (fn, q, dim, keepdim)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=f"{fn} {q} {dim} {keepdim}")
  with pytest.raises(ValueError, match="interpolation"): alloy.quantile(_t(y, device), 0.5, interpolation="cubic")
  with pytest.raises(ValueError, match=r"\[0, 1\]"): alloy.quantile(_t(y, device), 1.5)
  with pytest.raises(TypeError, match="float"): alloy.quantile(_t(np.arange(4), device), 0.5)

def test_cov_corrcoef_bincount_trapezoid_match_torch(device, rng):
  x = rng.standard_normal((3, 7)).astype(np.float32)
  fw, aw = rng.integers(1, 4, 7), rng.uniform(0.5, 2, 7).astype(np.float32)
  tx = torch.tensor(x)
  for kw in (dict(), dict(correction=0), dict(fweights=fw), dict(aweights=aw), dict(fweights=fw, aweights=aw, correction=1)):
    got = alloy.cov(_t(x, device), **{k: _t(v, device) if isinstance(v, np.ndarray) else v for k, v in kw.items()}).numpy()
    want = torch.cov(tx, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=str(kw))
  assert alloy.cov(_t(x[0], device)).shape == () and Tensor(x, device=device).cov().shape == (3, 3)
  np.testing.assert_allclose(alloy.corrcoef(_t(x, device)).numpy(), torch.corrcoef(tx).numpy(), rtol=2e-5, atol=1e-6)
  with pytest.raises(ValueError, match="two or fewer"): alloy.cov(_t(x[None], device))
  ints, wts = rng.integers(0, 6, 20), rng.uniform(0, 1, 20).astype(np.float32)
  np.testing.assert_array_equal(alloy.bincount(_t(ints, device)).numpy(), torch.bincount(torch.tensor(ints)).numpy())
  np.testing.assert_allclose(_t(ints, device).bincount(_t(wts, device), minlength=9).numpy(),
                             torch.bincount(torch.tensor(ints), torch.tensor(wts), minlength=9).numpy(), rtol=1e-6)
  assert alloy.bincount(_t(np.zeros(0, np.int64), device), minlength=3).numpy().tolist() == [0, 0, 0]
  with pytest.raises(ValueError, match="non-negative"): alloy.bincount(_t(np.array([1, -2]), device))
  xs = np.sort(rng.uniform(0, 3, 7)).astype(np.float32)
  np.testing.assert_allclose(alloy.trapezoid(_t(x, device), _t(xs, device)).numpy(), torch.trapezoid(tx, torch.tensor(xs)).numpy(), rtol=1e-5)
  np.testing.assert_allclose(alloy.trapz(_t(x, device), dx=0.5, dim=0).numpy(), torch.trapz(tx, dx=0.5, dim=0).numpy(), rtol=1e-5)
  np.testing.assert_allclose(alloy.cumulative_trapezoid(_t(x, device), dim=1).numpy(), torch.cumulative_trapezoid(tx, dim=1).numpy(),
                             rtol=1e-5, atol=1e-6)
  for fn in ("var_mean", "std_mean"):
    for got, want in zip(getattr(alloy, fn)(_t(x, device), 1, correction=0, keepdim=True), getattr(torch, fn)(tx, 1, correction=0, keepdim=True)):
      np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-7)

def test_structured_tensors_match_torch(device, rng):
  a, b, c = (rng.standard_normal(k).astype(np.float32) for k in (3, 2, 4))
  np.testing.assert_array_equal(alloy.cartesian_prod(*(_t(v, device) for v in (a, b, c))).numpy(),
                                torch.cartesian_prod(*map(torch.tensor, (a, b, c))).numpy())
  for r, replace in ((2, False), (3, True), (0, False), (5, False)):
    got, want = alloy.combinations(_t(c, device), r, replace).numpy(), torch.combinations(torch.tensor(c), r, replace).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
  m1, m2 = rng.standard_normal((2, 3)).astype(np.float32), np.arange(4).reshape(2, 2)
  got = alloy.block_diag(_t(m1, device), _t(m2, device), _t(np.float32(5), device), _t(a, device)).numpy()
  np.testing.assert_array_equal(got, torch.block_diag(torch.tensor(m1), torch.tensor(m2), torch.tensor(5.0), torch.tensor(a)).numpy())
  np.testing.assert_array_equal(_t(m1, device).diagflat(-1).numpy(), torch.diagflat(torch.tensor(m1), -1).numpy())
  for n, increasing in ((None, False), (5, True)):
    np.testing.assert_allclose(alloy.vander(_t(a, device), n, increasing).numpy(), torch.vander(torch.tensor(a), n, increasing).numpy(), rtol=1e-6)
  for args in ((4, 5, 0), (4, 3, -1), (3, 6, 2), (0, 3, 0)):
    np.testing.assert_array_equal(alloy.tril_indices(*args, device=device).numpy(), torch.tril_indices(*args).numpy())
    np.testing.assert_array_equal(alloy.triu_indices(*args, device=device).numpy(), torch.triu_indices(*args).numpy())

def test_selections_match_torch(device, rng):
  x = rng.standard_normal((3, 4)).astype(np.float32)
  mask = x > 0.2
  want = torch.tensor(x).masked_select(torch.tensor(mask[0])).numpy()
  np.testing.assert_array_equal(_t(x, device).masked_select(_t(mask[0], device)).numpy(), want)
  np.testing.assert_array_equal(_t(mask, device).argwhere().numpy(), torch.tensor(mask).argwhere().numpy())
  e, t = rng.integers(0, 6, (3, 4)), np.array([1, 4, 9])
  np.testing.assert_array_equal(alloy.isin(_t(e, device), _t(t, device)).numpy(), torch.isin(torch.tensor(e), torch.tensor(t)).numpy())
  np.testing.assert_array_equal(alloy.isin(_t(e, device), 4, invert=True).numpy(), torch.isin(torch.tensor(e), 4, invert=True).numpy())
  index = np.array([[0, -1], [5, 11]])
  np.testing.assert_array_equal(_t(x, device).take(_t(index, device)).numpy(), torch.take(torch.tensor(x), torch.tensor(index)).numpy())
  with pytest.raises(IndexError, match="index 12 is out of bounds"): alloy.take(_t(x, device), _t(np.array([12]), device)).numpy()
  with pytest.raises(TypeError, match="bool"): alloy.masked_select(_t(x, device), _t(x, device))

def test_gradients(device, rng):
  x = rng.standard_normal((3, 5))
  lib = lambda t: alloy if isinstance(t, Tensor) else torch
  check_grads(lambda a: (lib(a).quantile(a, 0.3, 1) * 2).sum() + lib(a).nanquantile(a, 0.8), [x], device)
  check_grads(lambda a: (lib(a).cov(a) ** 2).sum() + lib(a).corrcoef(a).sum(), [x], device, rtol=1e-5)
  check_grads(lambda a: lib(a).trapezoid(a ** 2, dim=0).sum() + (lib(a).cumulative_trapezoid(a) * 3).sum(), [x], device)
  index = lambda a: Tensor([[0, 7], [-1, 3]], device=a.device) if isinstance(a, Tensor) else torch.tensor([[0, 7], [-1, 3]])
  check_grads(lambda a: (a.take(index(a)) ** 2).sum(), [x], device)

def test_histogram_and_gradient_match_torch(device, rng):
  x = rng.standard_normal(200).astype(np.float32)
  for kw in (dict(bins=7), dict(bins=5, range=(-1.0, 1.0)), dict(bins=4, density=True)):
    got, want = alloy.histogram(_t(x, device), **kw), torch.histogram(torch.tensor(x), **kw)
    np.testing.assert_allclose(got.hist.numpy(), want.hist.numpy(), rtol=1e-5, atol=1e-7, err_msg=str(kw))
    np.testing.assert_allclose(got.bin_edges.numpy(), want.bin_edges.numpy(), rtol=1e-6, atol=1e-6)
  edges, w = np.array([-2.0, -0.5, 0.0, 1.0, 3.0], np.float32), rng.uniform(0, 1, 200).astype(np.float32)
  got = _t(x, device).histogram(_t(edges, device), weight=_t(w, device), density=True).hist.numpy()
  np.testing.assert_allclose(got, torch.histogram(torch.tensor(x), torch.tensor(edges), weight=torch.tensor(w), density=True).hist.numpy(), rtol=1e-5)
  same = alloy.histogram(_t(np.ones(2, np.float32), device), 3)
  np.testing.assert_allclose(same.bin_edges.numpy(), [0.5, 5 / 6, 7 / 6, 1.5], rtol=1e-6)
  f, coords = rng.standard_normal((5, 6)).astype(np.float32), np.sort(rng.uniform(0, 5, 6)).astype(np.float32)
  for edge_order in (1, 2):
    for kw in (dict(), dict(spacing=0.5), dict(spacing=[2.0, 0.5]), dict(dim=1, spacing=[coords]), dict(dim=0)):
      mine = {k: [_t(v, device) if isinstance(v, np.ndarray) else v for v in val] if isinstance(val, list) else val for k, val in kw.items()}
      theirs = {k: [torch.tensor(v) if isinstance(v, np.ndarray) else v for v in val] if isinstance(val, list) else val for k, val in kw.items()}
      got, want = alloy.gradient(_t(f, device), edge_order=edge_order, **mine), torch.gradient(torch.tensor(f), edge_order=edge_order, **theirs)
      assert len(got) == len(want)
      for g, w in zip(got, want): np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"{edge_order} {kw}")
  with pytest.raises(ValueError, match="at least edge_order"): alloy.gradient(_t(f[:2], device), edge_order=2, dim=0)

def test_bit_level_and_integer_functions_match_torch(device, rng):
  x = np.concatenate([rng.standard_normal(100) * 1e3, [0.0, -0.0, 1.0, 0.5, 4.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 3.4e38, 1e-45]])
  x = x.astype(np.float32)
  mantissa, exponent = _t(x, device).frexp()
  want_m, want_e = torch.frexp(torch.tensor(x))
  np.testing.assert_array_equal(mantissa.numpy(), want_m.numpy())
  np.testing.assert_array_equal(exponent.numpy(), want_e.numpy())
  powers = rng.integers(-10, 10, x.shape)
  np.testing.assert_array_equal(alloy.ldexp(_t(x, device), _t(powers, device)).numpy(), torch.ldexp(torch.tensor(x), torch.tensor(powers)).numpy())
  y = np.concatenate([rng.standard_normal(100), [1.0, -1.0, 0.0, 5.0, np.inf, -np.inf, np.nan, 0.0, 1.0, 1e-45, -1.0, 3.4e38]]).astype(np.float32)
  np.testing.assert_array_equal(_t(x, device).nextafter(_t(y, device)).numpy(), torch.nextafter(torch.tensor(x), torch.tensor(y)).numpy())
  a, b = rng.integers(-1000, 1000, 200), rng.integers(-1000, 1000, 200)
  a[:3], b[1:4] = 0, 0
  for dtype in (np.int32, np.int64, np.int8, np.uint8):
    aa, bb = a.astype(dtype), b.astype(dtype)
    np.testing.assert_array_equal(_t(aa, device).gcd(_t(bb, device)).numpy(), torch.gcd(torch.tensor(aa), torch.tensor(bb)).numpy())
    np.testing.assert_array_equal(alloy.lcm(_t(aa, device), _t(bb, device)).numpy(), torch.lcm(torch.tensor(aa), torch.tensor(bb)).numpy())
  np.testing.assert_array_equal(alloy.gcd(_t(np.array([1836311903]), device), _t(np.array([1134903170]), device)).numpy(), [1])   # the worst case
  with pytest.raises(TypeError, match="integer"): alloy.gcd(_t(x, device), _t(x, device))

def test_in_place_draws(device):
  alloy.manual_seed(0)
  c = Tensor.empty(100000, device=device).cauchy_(1.0, 2.0).numpy()
  assert abs(np.median(c) - 1.0) < 0.05 and abs((np.percentile(c, 75) - np.percentile(c, 25)) / 2 - 2.0) < 0.1
  logs = np.log(Tensor.empty(100000, device=device).log_normal_(0.5, 0.3).numpy())
  assert abs(logs.mean() - 0.5) < 0.01 and abs(logs.std() - 0.3) < 0.01
  p = _t(np.tile([0.0, 1.0, 0.5], 10000).astype(np.float32), device)
  drawn = Tensor.empty(30000, device=device).bernoulli_(p).numpy().reshape(-1, 3)
  assert set(np.unique(drawn)) <= {0.0, 1.0} and drawn[:, 0].sum() == 0 and drawn[:, 1].all() and abs(drawn[:, 2].mean() - 0.5) < 0.02
