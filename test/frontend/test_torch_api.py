"""PyTorch's names for ops alloy composes (alloy/rearrange.py, matrices.py, mathfuncs.py, torch_functions.py): each
case runs the same call on alloy and torch tensors of the same random data, on each device, and must agree in shape,
dtype and values; method and function forms both."""
import numpy as np, pytest
import alloy
from alloy import Tensor
import alloy.nn.functional as AF
from conftest import rand_np

torch = pytest.importorskip("torch")

def _lib(x): return alloy if isinstance(x, Tensor) else torch

ONE = {   # x: (3, 4, 5) float32
  "swapaxes": lambda x: x.swapaxes(0, 2), "swapdims_fn": lambda x: _lib(x).swapdims(x, 1, 2), "t": lambda x: x[0].t(),
  "select": lambda x: x.select(1, -1), "unbind": lambda x: x.unbind(1), "unflatten": lambda x: x.unflatten(2, (5, 1)),
  "broadcast_to": lambda x: x[:, :1].broadcast_to((2, 3, 4, 5)), "tile": lambda x: x.tile((2,)), "tile_more": lambda x: x[0].tile((2, 1, 2)),
  "tensor_split": lambda x: x.tensor_split(4, 2), "tensor_split_idx": lambda x: x.tensor_split([1, -1, 9], 2),
  "repeat_interleave": lambda x: x.repeat_interleave(2, 1), "repeat_interleave_flat": lambda x: x.repeat_interleave(3),
  "diff": lambda x: x.diff(2, 1), "diff_prepend": lambda x: x.diff(dim=-1, prepend=x[..., :1]), "fliplr": lambda x: x.fliplr(),
  "flipud": lambda x: x.flipud(), **{f"rot90_{k}": (lambda k: lambda x: x.rot90(k, (2, 0)))(k) for k in (-1, 1, 2, 3)},
  "mm": lambda x: x[0].mm(x[1].T), "bmm": lambda x: x.bmm(x.mT), "mv": lambda x: x[0].mv(x[1, 0]), "outer": lambda x: x[0, 0].outer(x[1, 1]),
  "inner": lambda x: x.inner(x[0]), "addmm": lambda x: x[0, 0, :4].addmm(x[0], x[1].T, beta=0.5, alpha=2),
  "baddbmm_beta0": lambda x: x[:, :, :4].baddbmm(x, x.mT, beta=0), "addmv": lambda x: x[0, :, 0].addmv(x[1], x[2, 0]),
  "tensordot": lambda x: _lib(x).tensordot(x, x[0].T, 1), "tensordot_lists": lambda x: _lib(x).tensordot(x, x, ([0, 2], [0, 2])),
  "kron": lambda x: x[0].kron(x[1, :2]), **{f"diagonal_{o}": (lambda o: lambda x: x.diagonal(o, 1, 2))(o) for o in (0, 2, -1, 9)},
  "diagonal_dims": lambda x: x.diagonal(1, 2, 0), "trace": lambda x: x[0].trace(), "diag_vec": lambda x: x[0, 0].diag(2),
  "diag_mat": lambda x: x[0].diag(-1), "diag_embed": lambda x: x.diag_embed(1, 0, 2),
  "log10": lambda x: x.abs().log10(), "logit": lambda x: x.sigmoid().logit(), "logit_eps": lambda x: x.logit(0.1),
  "xlogy": lambda x: x.xlogy(x.abs()), "frac": lambda x: (x * 3).frac(), "signbit": lambda x: x.signbit(),
  "nan_to_num": lambda x: (x.log() / x).nan_to_num(), "nan_to_num_args": lambda x: (x.log() / x).nan_to_num(1.0, 2.0, -3.0),
  "logical": lambda x: (x.logical_and(x > 0), x.logical_or(x > 1), x.logical_xor(x < 0)),
  "isclose": lambda x: x.isclose(x + 1e-6), "count_nonzero": lambda x: (x > 0.5).count_nonzero(1),
  "nansum": lambda x: (x.log()).nansum(1), "nanmean": lambda x: x.log().nanmean(0), "aminmax": lambda x: tuple(x.aminmax(dim=1)),
  "true_divide": lambda x: x.true_divide(3), "negative": lambda x: x.negative(), "absolute": lambda x: x.absolute(),
  "new_zeros": lambda x: x.new_zeros(2, 3), "new_full": lambda x: x.new_full((2,), 3), "type_as": lambda x: x.type_as(x.int()),
  "fn_max_pair": lambda x: _lib(x).max(x, x * -1), "fn_max_dim": lambda x: tuple(_lib(x).max(x, 1)), "fn_min_all": lambda x: _lib(x).min(x),
  "fn_unary": lambda x: (_lib(x).exp(x), _lib(x).sigmoid(x), _lib(x).abs(x), _lib(x).sqrt(x.abs())),
  "fn_reduce": lambda x: (_lib(x).sum(x, 1), _lib(x).mean(x, (0, 2)), _lib(x).argmax(x, 2), _lib(x).logsumexp(x, 0)),
  "fn_shape": lambda x: (_lib(x).flatten(x, 1), _lib(x).transpose(x, 0, 1), _lib(x).squeeze(x[:1], 0), _lib(x).permute(x, (2, 0, 1))),
  "fn_softmax": lambda x: _lib(x).softmax(x, 1), "fn_clamp": lambda x: _lib(x).clamp(x, -0.5, 0.5),
  "kthvalue": lambda x: tuple(x.kthvalue(2, 1)), "kthvalue_keepdim": lambda x: tuple(x.kthvalue(5, -1, True)),
  "median_dim": lambda x: tuple(x.median(1)), "median_all": lambda x: x.median(),
  "median_nan": lambda x: tuple(x.log().median(2)),
  "nanmedian": lambda x: tuple(x.masked_fill(x < -1, float("nan")).nanmedian(2)),   # no row all NaN (its index is PyTorch's choice)
  "searchsorted": lambda x: _lib(x).searchsorted(x[0, 0].sort().values, x[1]),
  "searchsorted_right_nd": lambda x: _lib(x).searchsorted(x[0].sort(-1).values, x[1] * 2, side="right"),
  "bucketize": lambda x: _lib(x).bucketize(x.log(), x[0, 0].sort().values, right=True),
  "meshgrid": lambda x: _lib(x).meshgrid(x[0, 0], x[0, :, 0], indexing="ij"),
  "meshgrid_xy": lambda x: _lib(x).meshgrid(x[0, 0], x[0, :, 0], x[1, 1, :2], indexing="xy"),
  "stacks": lambda x: tuple(getattr(_lib(x), f)([x[0], x[1]]) for f in ("hstack", "vstack", "dstack", "column_stack")),
  "stacks_1d": lambda x: tuple(getattr(_lib(x), f)([x[0, 0], x[1, 0]]) for f in ("hstack", "vstack", "dstack", "column_stack")),
  "atleast": lambda x: tuple(getattr(_lib(x), f)(x[0, 0, 0]) for f in ("atleast_1d", "atleast_2d", "atleast_3d")),
  **{f"cdist_{p}": (lambda p: lambda x: _lib(x).cdist(x[:2], x[1:], p))(p) for p in (0, 1, 2, 3.5, float("inf"))},
  "mode": lambda x: tuple((x * 2).round().mode(1)), "mode_keepdim": lambda x: tuple((x * 2).round().int().mode(-1, True)),
  "histc": lambda x: _lib(x).histc(x, bins=7), "histc_range": lambda x: _lib(x).histc(x, bins=5, min=-1, max=1.5),
  "small_elementwise": lambda x: (x.sgn(), x.positive(), x.deg2rad(), x.rad2deg(), x.sinc(), (x / 0).isposinf(), (x / 0).isneginf(), x.isreal()),
  "hypot_copysign_heaviside": lambda x: (x.hypot(x[0] * 1e20), x.copysign(-x[1]), x.heaviside(x[2].round())),
  "shrink": lambda x: (x.hardshrink(0.3), (AF if isinstance(x, Tensor) else torch.nn.functional).softshrink(x, 0.4)),
  "cross": lambda x: _lib(x).cross(x[:, :3], x[:, 1:4], dim=1), "cross_last": lambda x: x[..., :3].cross(x[..., 2:], dim=-1),
  "int_casts": lambda x: ((x * 9).byte(), (x * 9).short(), (x * 9).char()),
  "masked_scatter": lambda x: x.masked_scatter(x > 0.3, x.flip(0) * 10), "masked_scatter_bcast": lambda x: x.masked_scatter(x[0, 0] > 0, x * 2),
  "renorm": lambda x: (x.renorm(2, 0, 3.0), x.renorm(1, 2, 2.0), x.renorm(float("inf"), 1, 1.0)),
  "logcumsumexp": lambda x: (x * 30).logcumsumexp(2), "logcumsumexp_long": lambda x: (x * 30).reshape(60).repeat(2).logcumsumexp(0),
}

TRIG = ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh")
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 1e-20, 1e-7, 0.3, -0.41, 0.999, 1.0, -1.0, 1.0000001, 2.42, -10.0, 88.0,
                    89.0, 1e19, 3.4e38], np.float32)

@pytest.mark.parametrize("name", TRIG)
def test_inverse_trig_and_hyperbolic_match_torch(device, rng, name):
  # the special values (signed zeros, infinities, the ends of each branch and of the float range) and random ones
  x = np.concatenate([SPECIAL, rng.uniform(-5, 5, 200).astype(np.float32), rng.uniform(-1, 1, 200).astype(np.float32)])
  # the reference is torch's float64 result rounded to float32: torch's own float32 sinh and cosh overflow below
  # float32's largest sinh in some builds' vector paths (the H200 host's torch: sinh(89) = inf, the true value 2.2e38)
  ours, theirs = getattr(Tensor(x, device=device), name)(), getattr(torch.from_numpy(x.astype(np.float64)), name)().float()
  assert ours.dtype.name == "float32"
  np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=3e-6, atol=1e-30, equal_nan=True, err_msg=name)
  if device == "CPU":   # float64 through Cephes' rational atan and the same compositions: to 1e-14
    ours64, theirs64 = getattr(Tensor(x.astype(np.float64)), name)(), getattr(torch.from_numpy(x.astype(np.float64)), name)()
    np.testing.assert_allclose(ours64.numpy(), theirs64.numpy(), rtol=1e-14, atol=1e-300, equal_nan=True, err_msg=name)

@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv"])
def test_special_functions_match_torch(device, rng, name):
  # poles and their neighbourhoods (lgamma, digamma), the ends of erfinv's domain, large and tiny arguments
  if name == "erfinv": x = np.concatenate([rng.uniform(-1, 1, 300), [0.0, 1.0, -1.0, 1.5, 0.999999, -0.9999, 1e-8, np.nan]])
  else: x = np.concatenate([rng.uniform(-10, 10, 300), rng.uniform(0, 1e4, 50), [0.0, -1.0, -2.5, -4.0001, 1.0, 2.0, 0.5, 1e-8, np.inf, np.nan]])
  x = x.astype(np.float32)
  got, want = getattr(Tensor(x, device=device), name)().numpy(), getattr(torch.from_numpy(x), name)().numpy()
  np.testing.assert_allclose(got, want, rtol=5e-6, atol=5e-6, equal_nan=True, err_msg=name)
  if device == "CPU":   # float64: the series and Newton steps to 1e-13
    got64, want64 = getattr(Tensor(x.astype(np.float64)), name)().numpy(), getattr(torch.from_numpy(x.astype(np.float64)), name)().numpy()
    np.testing.assert_allclose(got64, want64, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=name)

@pytest.mark.parametrize("n", [1, 2, 4])
def test_polygamma_and_mvlgamma_match_torch(device, rng, n):
  # both sides of the reflection at 1/2, half-integers (where cot is 0), near the poles, large arguments; the poles
  # themselves are inf (-inf for even n) as torch's zeta gives (its trigamma gives a huge finite value there)
  x = np.concatenate([rng.uniform(-10, 10, 200), rng.uniform(0, 1e4, 30), [-2.5, -0.5, -4.0001, 1.0, 0.5, 1e-3, 30.0]]).astype(np.float32)
  got, want = Tensor(x, device=device).polygamma(n).numpy(), torch.polygamma(n, torch.from_numpy(x.astype(np.float64))).numpy()
  np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-30)
  poles = alloy.polygamma(n, Tensor(np.array([0.0, -3.0], np.float32), device=device)).numpy()
  np.testing.assert_array_equal(poles, [np.inf if n % 2 else -np.inf] * 2)
  if device == "CPU":   # float64: 1e-13 of torch's zeta; its trigamma (n = 1) is itself off by up to 5e-10
    got64 = alloy.polygamma(n, Tensor(x.astype(np.float64))).numpy()
    np.testing.assert_allclose(got64, want, rtol=1e-9 if n == 1 else 1e-12)
  y = rng.uniform(1.6, 6, (3, 4)).astype(np.float32)
  np.testing.assert_allclose(Tensor(y, device=device).mvlgamma(4).numpy(), torch.mvlgamma(torch.from_numpy(y), 4).numpy(), rtol=2e-6)
  with pytest.raises(ValueError, match="greater than"): alloy.mvlgamma(Tensor(y, device=device), 5)
  with pytest.raises(ValueError, match="non-negative int"): alloy.polygamma(-1, Tensor(y, device=device))

def test_erfc_i0_and_windows_match_torch(device):
  x = np.concatenate([np.linspace(-6, 12, 300), [0.0, 0.5, 0.99, 1.0, 7.99, 8.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
  np.testing.assert_allclose(Tensor(x, device=device).erfc().numpy(), torch.from_numpy(x.astype(np.float64)).erfc().numpy(), rtol=3e-5,
                             atol=1e-37, equal_nan=True)   # the tail: exp(-x^2) of a rounded x^2
  y = np.concatenate([np.linspace(-40, 40, 161), [0.0, np.nan]]).astype(np.float32)
  np.testing.assert_allclose(alloy.i0(Tensor(y, device=device)).numpy(), torch.special.i0(torch.from_numpy(y.astype(np.float64))).numpy(),
                             rtol=2e-6, equal_nan=True)
  if device == "CPU":   # float64: 1e-13 (erfc's far tail through exp(-x^2)), 1e-14
    x64 = np.linspace(-6, 26, 200)
    np.testing.assert_allclose(alloy.erfc(Tensor(x64)).numpy(), torch.special.erfc(torch.from_numpy(x64)).numpy(), rtol=1e-13)
    y64 = np.linspace(-100, 100, 201)
    np.testing.assert_allclose(alloy.i0(Tensor(y64)).numpy(), torch.special.i0(torch.from_numpy(y64)).numpy(), rtol=1e-14)
  for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
    for length in (0, 1, 2, 7, 16):
      for periodic in (True, False):
        got = getattr(alloy, name)(length, periodic, device=device).numpy()
        np.testing.assert_allclose(got, getattr(torch, name)(length, periodic).numpy(), atol=1e-6, err_msg=f"{name} {length} {periodic}")
  assert alloy.hann_window(4, dtype=alloy.float64, device=device if device != "METAL" else "CPU").dtype is alloy.float64

def test_atan2_and_fmod_match_torch_at_every_sign(device):
  v = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, 3.0, -2.5], np.float32)
  y, x = (a.ravel() for a in np.meshgrid(v, v, indexing="ij"))
  got = Tensor(y, device=device).atan2(Tensor(x, device=device)).numpy()
  want = torch.from_numpy(y).atan2(torch.from_numpy(x)).numpy()
  np.testing.assert_allclose(got, want, rtol=3e-7, equal_nan=True)
  assert np.array_equal(np.signbit(got)[~np.isnan(want)], np.signbit(want)[~np.isnan(want)]), "the signs of zero angles"
  got, want = alloy.fmod(Tensor(y, device=device), Tensor(x, device=device)).numpy(), torch.fmod(torch.from_numpy(y), torch.from_numpy(x)).numpy()
  np.testing.assert_array_equal(got, want)   # exact, nan where torch has nan
  real = ~np.isnan(want)
  assert np.array_equal(np.signbit(got)[real], np.signbit(want)[real]), "fmod keeps the dividend's sign"
  a, b = np.array([7, -7, 7, -7, 0, 13]), np.array([3, 3, -3, -3, 5, -4])
  np.testing.assert_array_equal(Tensor(a, device=device).fmod(Tensor(b, device=device)).numpy(), np.fmod(a, b))

def test_unique_matches_torch(device):
  x = np.array([3.0, np.nan, 1.0, 3.0, np.nan, 2.0, 1.0], np.float32)
  for kw in ({}, {"return_inverse": True, "return_counts": True}):
    _compare("unique", alloy.unique(Tensor(x, device=device), **kw), torch.unique(torch.from_numpy(x), **kw))
  m = np.array([[1, 2], [1, 2], [0, 5], [1, 2]])
  for fn in ("unique", "unique_consecutive"):
    _compare(fn, getattr(alloy, fn)(Tensor(m, device=device), return_inverse=True, return_counts=True, dim=0),
             getattr(torch, fn)(torch.from_numpy(m), return_inverse=True, return_counts=True, dim=0))
  r = np.array([1, 1, 2, 2, 3, 1, 1, 2])
  _compare("unique_consecutive", Tensor(r, device=device).unique_consecutive(return_counts=True),
           torch.from_numpy(r).unique_consecutive(return_counts=True))

def _compare(name, ours, theirs):
  if isinstance(theirs, (tuple, list)):
    assert len(ours) == len(theirs), f"{name}: {len(ours)} results, torch {len(theirs)}"
    for o, t in zip(ours, theirs): _compare(name, o, t)
    return
  assert tuple(ours.shape) == tuple(theirs.shape), f"{name}: shape {tuple(ours.shape)}, torch {tuple(theirs.shape)}"
  assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), f"{name}: dtype {ours.dtype.name}, torch {theirs.dtype}"
  got, want = ours.numpy(), theirs.numpy()
  if want.dtype.kind in "biu": np.testing.assert_array_equal(got, want, err_msg=name)
  else: np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=2e-5, rtol=2e-5, equal_nan=True, err_msg=name)

@pytest.mark.parametrize("name", sorted(ONE))
def test_matches_torch(device, rng, name):
  x = rand_np(rng, (3, 4, 5), "float32")
  _compare(name, ONE[name](Tensor(x, device=device)), ONE[name](torch.from_numpy(x)))

def test_host_results_and_errors(device, rng):
  x = Tensor(rand_np(rng, (2, 3), "float32"), device=device)
  assert x.allclose(x + 1e-9) and not x.allclose(x + 1) and x.equal(x * 1) and not x.equal(x[:1]) and alloy.equal(x, x)
  with pytest.raises(ValueError, match=r"mm: mat2 must be 2-D, got shape \(3,\)"): x.mm(x[0])
  with pytest.raises(ValueError, match="bmm: input must be 3-D"): x.bmm(x)
  with pytest.raises(ValueError, match="t: expects a tensor of at most 2 dimensions"): x.reshape(1, 2, 3).t()
  with pytest.raises(ValueError, match="diagonal: dim1 and dim2 must differ"): x.diagonal(0, 1, 1)
  with pytest.raises(ValueError, match="tensordot: the contracted dims"): alloy.tensordot(x, x, 1)
  with pytest.raises(NotImplementedError, match="repeat_interleave: per-entry repeats"): x.repeat_interleave(Tensor([1, 2]))
  with pytest.raises(TypeError, match="exp: expected a Tensor, got list"): alloy.exp([1.0])

def test_gradients_flow(device, rng):
  from op_grads import check_grads, weights
  x = rand_np(rng, (4, 4), "float64")
  check_grads(lambda a: (a.diagonal(1) * weights(a, 3)).sum() + a.trace(), [x], device)
  check_grads(lambda a: (a.diag_embed() * weights(a, 4, 4, 4)).sum(), [x], device)
  check_grads(lambda a: (a.repeat_interleave(2, 0) * weights(a, 8, 4)).sum() + (a.rot90() * weights(a, 4, 4)).sum(), [x], device)
  check_grads(lambda a: (a.kron(a[:2, :2]) * weights(a, 8, 8)).sum(), [x], device)
  check_grads(lambda a: (a.median(1).values * weights(a, 4)).sum() + a.kthvalue(2, 0).values.sum(), [x], device)
  check_grads(lambda a: (a.atan2(a.T + 0.5) * weights(a, 4, 4)).sum() + (a * 0.3).asin().sum() + (a * 0.3).acos().sum(), [x], device)
  check_grads(lambda a: (a.abs() + 0.5).lgamma().sum() + ((a.abs() + 0.5).digamma() * weights(a, 4, 4)).sum() + (a * 0.2).erfinv().sum(),
              [x], device)
  check_grads(lambda a: ((a.abs() + 0.5).polygamma(2) * weights(a, 4, 4)).sum() + (a * 0.3 - 0.6).polygamma(1).sum(), [x], device, rtol=1e-5)
  check_grads(lambda a: (a.erfc() * weights(a, 4, 4)).sum() + (a * 3).i0().sum(), [x], device, rtol=1e-5)
  check_grads(lambda a: (a.masked_scatter(a > 0, a.T * 3) * weights(a, 4, 4)).sum() + (a.renorm(2, 0, 1.0) * weights(a, 4, 4)).sum(),
              [x], device)
  check_grads(lambda a: (a.logcumsumexp(1) * weights(a, 4, 4)).sum() + (a.reshape(16).repeat(5).logcumsumexp(0) * weights(a, 80)).sum(),
              [x], device)   # the triangle and, past 64, the log-step scan
  check_grads(lambda a: (a.sinh() * weights(a, 4, 4)).sum() + a.cosh().sum() + a.asinh().sum() + (a.abs() + 1.5).acosh().sum()
              + (a * 0.3).atanh().sum() + a.atan().sum(), [x], device)
  check_grads(lambda a: (alloy.cdist(a[None], a[None, :2]) * weights(a, 1, 4, 2)).sum() if isinstance(a, Tensor) else
              (torch.cdist(a[None], a[None, :2]) * weights(a, 1, 4, 2)).sum(), [x], device)   # equal rows: gradient 0, not nan
