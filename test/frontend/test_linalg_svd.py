"""alloy.linalg's singular values and what is built on them (svd, svdvals, pinv, matrix_rank, lstsq, cond, the spectral
and nuclear norms) and inv_ex, against NumPy in float64 and torch in float32, on every device: wide, tall, square,
batched and rank-deficient matrices; U and Vh orthonormal and equal to NumPy's up to each vector's sign; gradients
against torch's."""
import numpy as np, pytest
from alloy import Tensor, linalg
from op_grads import check_grads

torch = pytest.importorskip("torch")

def _tol(dtype: str) -> float: return 1e-10 if dtype == "float64" else 2e-5

def _rank_deficient(rng, m: int, n: int, rank: int) -> np.ndarray:
  return rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))

def _same_up_to_sign(got: np.ndarray, want: np.ndarray, axis: int, atol: float) -> None:
  """got's vectors along axis (columns: axis -2 holds their entries) equal want's, each up to its sign."""
  dot = (got * want).sum(axis, keepdims=True)
  np.testing.assert_allclose(got * np.where(dot < 0, -1.0, 1.0), want, atol=atol)

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 6), (2, 4, 4)])
def test_svd_matches_numpy(device, rng, dtype, shape):
  if dtype == "float64" and device == "METAL": pytest.skip("Metal has no float64")
  a = rng.standard_normal(shape).astype(dtype)
  tol, k = _tol(dtype), min(shape[-2:])
  un, sn, vhn = np.linalg.svd(a.astype(np.float64), full_matrices=False)
  for full in (True, False):
    U, S, Vh = (t.numpy().astype(np.float64) for t in linalg.svd(Tensor(a, device=device), full_matrices=full))
    m, n = shape[-2:]
    assert U.shape == shape[:-2] + ((m, m) if full else (m, k)) and Vh.shape == shape[:-2] + ((n, n) if full else (k, n))
    np.testing.assert_allclose(S, sn, atol=tol * 10)
    for M in (U, np.swapaxes(Vh, -1, -2)):   # orthonormal columns, the completion past k included
      np.testing.assert_allclose(np.swapaxes(M, -1, -2) @ M, np.broadcast_to(np.eye(M.shape[-1]), M.shape[:-2] + (M.shape[-1],) * 2), atol=tol * 10)
    np.testing.assert_allclose((U[..., :, :k] * S[..., None, :]) @ Vh[..., :k, :], a, atol=tol * 10)
    _same_up_to_sign(U[..., :, :k], un, -2, tol * 100)
    _same_up_to_sign(Vh[..., :k, :], vhn, -1, tol * 100)
  np.testing.assert_allclose(linalg.svdvals(Tensor(a, device=device)).numpy(), sn, atol=tol * 10)

def test_rank_deficient_and_empty(device, rng):
  a = _rank_deficient(rng, 6, 4, 2).astype(np.float32)
  U, S, Vh = (t.numpy().astype(np.float64) for t in linalg.svd(Tensor(a, device=device)))
  np.testing.assert_allclose(S, np.linalg.svd(a.astype(np.float64))[1], atol=1e-5)
  np.testing.assert_allclose(U.T @ U, np.eye(6), atol=1e-5)   # the null space's columns still orthonormal
  np.testing.assert_allclose((U[:, :4] * S) @ Vh, a, atol=1e-4)
  U, S, Vh = linalg.svd(Tensor(np.zeros((3, 0), np.float32), device=device))
  assert U.shape == (3, 3) and S.shape == (0,) and Vh.shape == (0, 0)
  zero = linalg.svd(Tensor(np.zeros((3, 2), np.float32), device=device))
  np.testing.assert_allclose(zero.U.numpy().T @ zero.U.numpy(), np.eye(3), atol=1e-6)
  np.testing.assert_array_equal(zero.S.numpy(), [0, 0])
  with pytest.raises(TypeError, match="float32 or float64"): linalg.svd(Tensor(np.ones((2, 2), np.int32), device=device))
  with pytest.raises(ValueError, match="at least 2 dimensions"): linalg.svdvals(Tensor(np.ones(2, np.float32), device=device))

def test_pinv_rank_and_lstsq_match_torch(device, rng):
  tall, wide = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((2, 3, 5)).astype(np.float32)
  low = _rank_deficient(rng, 5, 5, 3).astype(np.float32)
  sym = low @ low.T
  for a, rtol in ((tall, None), (wide, None), (low, 1e-4)):   # low's float32 rounding leaves singular values near eps
    want = np.linalg.pinv(a.astype(np.float64), rtol=rtol or 1e-15)
    np.testing.assert_allclose(linalg.pinv(Tensor(a, device=device), rtol=rtol).numpy(), want, atol=2e-4, rtol=1e-3)
    assert (linalg.matrix_rank(Tensor(a, device=device), rtol=rtol).numpy() == torch.linalg.matrix_rank(torch.tensor(a), rtol=rtol).numpy()).all()
  np.testing.assert_allclose(linalg.pinv(Tensor(sym, device=device), rtol=1e-4, hermitian=True).numpy(),
                             np.linalg.pinv(sym.astype(np.float64), rtol=1e-4, hermitian=True), atol=2e-4, rtol=1e-3)
  assert int(linalg.matrix_rank(Tensor(sym, device=device), rtol=1e-4, hermitian=True).item()) == 3
  assert int(linalg.matrix_rank(Tensor(low, device=device), atol=1e9).item()) == 0
  b, bv = rng.standard_normal((6, 2)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
  for driver in ("gels", "gelsy", "gelsd", "gelss"):
    for rhs in (b, bv):
      got = linalg.lstsq(Tensor(tall, device=device), Tensor(rhs, device=device), driver=driver)
      want = torch.linalg.lstsq(torch.tensor(tall), torch.tensor(rhs if rhs.ndim == 2 else rhs[:, None]), driver=driver)
      np.testing.assert_allclose(got.solution.numpy(), want.solution.numpy().reshape(got.solution.shape), atol=1e-4, rtol=1e-4, err_msg=driver)
      for name in ("residuals", "rank", "singular_values"):
        g, w = getattr(got, name).numpy(), getattr(want, name).numpy()
        assert g.size == w.size, (driver, name, g.shape, w.shape)
        np.testing.assert_allclose(g.ravel(), w.ravel(), atol=1e-3, rtol=1e-4, err_msg=f"{driver} {name}")
  x = linalg.lstsq(Tensor(low, device=device), Tensor(low[:, :2], device=device), rcond=1e-4).solution.numpy()   # the minimum-norm solution
  np.testing.assert_allclose(x, np.linalg.lstsq(low.astype(np.float64), low[:, :2].astype(np.float64), rcond=1e-4)[0], atol=1e-3)
  with pytest.raises(ValueError, match="driver"): linalg.lstsq(Tensor(tall, device=device), Tensor(b, device=device), driver="gelsx")
  with pytest.raises(ValueError, match="rows"): linalg.lstsq(Tensor(tall, device=device), Tensor(b[:5], device=device))

def test_norms_cond_and_inv_ex_match_torch(device, rng):
  a = rng.standard_normal((2, 4, 3)).astype(np.float32)
  sq = rng.standard_normal((3, 3)).astype(np.float32)
  singular = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
  for ord in (2, -2, "nuc"):
    for dim, keepdim in (((-2, -1), False), ((0, 2), True)):
      got = linalg.matrix_norm(Tensor(a, device=device), ord, dim, keepdim).numpy()
      np.testing.assert_allclose(got, torch.linalg.matrix_norm(torch.tensor(a), ord, dim, keepdim).numpy(), rtol=1e-4, err_msg=str(ord))
  for p in (None, 2, -2, 1, -1, float("inf"), "fro", "nuc"):
    np.testing.assert_allclose(linalg.cond(Tensor(sq, device=device), p).numpy(), torch.linalg.cond(torch.tensor(sq), p).numpy(), rtol=1e-3)
  assert np.isinf(linalg.cond(Tensor(singular, device=device), 1).item())
  inverse, info = linalg.inv_ex(Tensor(np.stack([sq[:2, :2], singular]), device=device))
  np.testing.assert_array_equal(info.numpy(), [0, 2])
  np.testing.assert_allclose(inverse.numpy()[0], np.linalg.inv(sq[:2, :2]), rtol=1e-4)
  with pytest.raises(linalg.LinAlgError, match="singular"): linalg.inv_ex(Tensor(singular, device=device), check_errors=True)

@pytest.mark.parametrize("shape", [(3, 3), (4, 2)])
def test_svd_gradients(device, rng, shape):
  # of the singular values, and of sign-free functions of the vectors (their squares)
  a, w = rng.standard_normal(shape), rng.standard_normal((4, 4))
  lib = lambda t: linalg if isinstance(t, Tensor) else torch.linalg
  m, n = shape
  check_grads(lambda A, W: (lib(A).svdvals(A) * W[0, :min(m, n)]).sum(), [a, w], device, atol=1e-6, rtol=1e-5)
  def vectors(A, W):
    U, S, Vh = lib(A).svd(A, full_matrices=False)
    return (U ** 2 * W[:m, :min(m, n)]).sum() + (Vh ** 2 * W[:min(m, n), :n]).sum()
  check_grads(vectors, [a, w], device, atol=1e-6, rtol=1e-5)
  check_grads(lambda A, W: (lib(A).pinv(A) * W[:n, :m]).sum(), [a, w], device, atol=1e-6, rtol=1e-5)

def test_torch_svd_and_pinverse(device, rng):
  import alloy
  a = rng.standard_normal((5, 3)).astype(np.float32)
  A, ta = Tensor(a, device=device), torch.tensor(a)
  for some in (True, False):
    U, S, V = A.svd(some=some)
    tU, tS, tV = torch.svd(ta, some=some)
    assert U.shape == tuple(tU.shape) and V.shape == tuple(tV.shape)
    np.testing.assert_allclose(S.numpy(), tS.numpy(), rtol=1e-5)
    _same_up_to_sign(V.numpy(), tV.numpy(), -2, 1e-4)
  U, S, V = alloy.svd(A, compute_uv=False)
  assert U.shape == (5, 5) and V.shape == (3, 3) and not U.numpy().any() and not V.numpy().any()
  np.testing.assert_allclose(A.pinverse().numpy(), torch.pinverse(ta).numpy(), atol=1e-5, rtol=1e-4)
