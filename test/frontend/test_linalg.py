"""alloy.linalg against NumPy in float64 and torch in float32 (values and gradients), batched, on every device; qr with
torch's signs in every mode; the singular and not positive-definite matrices raise as torch's do, eagerly and under
@jit."""
import numpy as np, pytest
import alloy
from alloy import Tensor, linalg
from op_grads import check_grads

torch = pytest.importorskip("torch")

def _matrices(rng, shape, dtype):
  return rng.standard_normal(shape).astype(dtype)

def _spd(rng, shape, dtype):
  a = rng.standard_normal(shape)
  return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)

DTYPES = ["float32", "float64"]

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 3, 6, 6)])
def test_values_match_numpy(device, rng, dtype, shape):
  if dtype == "float64" and device == "METAL": pytest.skip("Metal has no float64")
  a = _matrices(rng, shape, dtype)
  A = Tensor(a, device=device)
  tol = dict(rtol=1e-10, atol=1e-10) if dtype == "float64" else dict(rtol=2e-4, atol=2e-4)
  a64 = a.astype(np.float64)
  det = np.linalg.det(a64)
  np.testing.assert_allclose(linalg.det(A).numpy(), det, rtol=tol["rtol"], atol=tol["atol"] * np.abs(det).max())
  sign, logabs = linalg.slogdet(A)
  np.testing.assert_array_equal(sign.numpy(), np.sign(det))
  np.testing.assert_allclose(logabs.numpy(), np.linalg.slogdet(a64)[1], **tol)
  np.testing.assert_allclose(A.logdet().numpy(), np.where(det < 0, np.nan, np.log(np.abs(det))), equal_nan=True, **tol)
  inv = np.linalg.inv(a64)
  np.testing.assert_allclose(linalg.inv(A).numpy(), inv, rtol=tol["rtol"], atol=tol["atol"] * np.abs(inv).max())
  np.testing.assert_allclose(A.inverse().numpy(), inv, rtol=tol["rtol"], atol=tol["atol"] * np.abs(inv).max())
  b = rng.standard_normal(shape[:-1] + (3,)).astype(dtype)
  x = np.linalg.solve(a64, b.astype(np.float64))
  np.testing.assert_allclose(linalg.solve(A, Tensor(b, device=device)).numpy(), x, rtol=tol["rtol"], atol=tol["atol"] * np.abs(x).max())
  v = b[..., 0]   # a batch of vectors: B has A's shape without its last dim
  xv = np.linalg.solve(a64, v.astype(np.float64)[..., None])[..., 0]
  np.testing.assert_allclose(linalg.solve(A, Tensor(v, device=device)).numpy(), xv, rtol=tol["rtol"], atol=tol["atol"] * np.abs(xv).max())
  s = _spd(rng, shape, dtype)
  chol = np.linalg.cholesky(s.astype(np.float64))
  np.testing.assert_allclose(linalg.cholesky(Tensor(s, device=device)).numpy(), chol, rtol=tol["rtol"], atol=tol["atol"] * np.abs(chol).max())
  np.testing.assert_allclose(linalg.cholesky(Tensor(s, device=device), upper=True).numpy(), np.swapaxes(chol, -1, -2),
                             rtol=tol["rtol"], atol=tol["atol"] * np.abs(chol).max())

@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 2)])
def test_qr_matches_torch(device, rng, shape):
  # LAPACK's signs (R's diagonal as torch's), every mode; Q orthonormal and Q R = A
  a = rng.standard_normal(shape).astype(np.float32)
  for mode in ("reduced", "complete", "r"):
    q, r = linalg.qr(Tensor(a, device=device), mode)
    tq, tr = torch.linalg.qr(torch.from_numpy(a), mode)
    assert q.shape == tuple(tq.shape) and r.shape == tuple(tr.shape)
    np.testing.assert_allclose(r.numpy(), tr.numpy(), rtol=1e-4, atol=1e-5)
    if mode != "r": np.testing.assert_allclose(q.numpy(), tq.numpy(), rtol=1e-4, atol=1e-5)
  t = np.triu(rng.standard_normal((3, 3))).astype(np.float32)   # already triangular, a negative diagonal: no reflection
  t[1, 1] = -abs(t[1, 1])
  np.testing.assert_array_equal(linalg.qr(Tensor(t, device=device)).R.numpy(), t)
  with pytest.raises(ValueError, match="mode must be"): linalg.qr(Tensor(a, device=device), "full")

def test_a_larger_matrix(device, rng):
  # 24 steps of elimination in float32: pivoting keeps the error near NumPy's
  a = rng.standard_normal((24, 24)).astype(np.float32)
  inv, want = linalg.inv(Tensor(a, device=device)).numpy(), np.linalg.inv(a.astype(np.float64))
  np.testing.assert_allclose(inv, want, rtol=1e-3, atol=1e-4 * np.abs(want).max())
  assert abs(linalg.slogdet(Tensor(a, device=device))[1].item() - np.linalg.slogdet(a.astype(np.float64))[1]) < 1e-4

def test_pivoting_and_broadcast(device):
  # a zero leading entry needs a row swap; B's batch dims broadcast against A's; X A = B with left=False
  a = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], np.float32)
  A = Tensor(a, device=device)
  assert abs(A.det().item() - np.linalg.det(a)) < 1e-5
  b = np.random.default_rng(2).standard_normal((4, 3, 2)).astype(np.float32)
  np.testing.assert_allclose(linalg.solve(A, Tensor(b, device=device)).numpy(), np.linalg.solve(a, b), rtol=1e-5, atol=1e-5)
  c = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
  np.testing.assert_allclose(linalg.solve(A, Tensor(c, device=device), left=False).numpy(), c @ np.linalg.inv(a), rtol=1e-5, atol=1e-5)
  z = np.zeros((3, 3), np.float32)
  assert A.det().item() != 0 and Tensor(z, device=device).det().item() == 0
  s, l = linalg.slogdet(Tensor(z, device=device))
  assert s.item() == 0 and l.item() == -np.inf

@pytest.mark.parametrize("name", ["det", "logdet", "slogdet", "inv", "solve", "cholesky", "qr"])
def test_gradients(device, rng, name):
  a = rng.standard_normal((2, 3, 3))
  a = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3) if name in ("logdet", "cholesky") else a   # logdet: det > 0
  b = rng.standard_normal((2, 3, 2))
  lib = lambda t: linalg if isinstance(t, Tensor) else torch.linalg
  fns = {"det": lambda A, B: (lib(A).det(A) * (B.sum((-1, -2)) + 1)).sum(),
         "logdet": lambda A, B: (A.logdet() * B.sum((-1, -2))).sum(),
         "slogdet": lambda A, B: (lib(A).slogdet(A)[1] * B.sum((-1, -2))).sum(),
         "inv": lambda A, B: (lib(A).inv(A) * B[..., :1]).sum(),
         "solve": lambda A, B: (lib(A).solve(A, B) * B).sum(),
         "cholesky": lambda A, B: (lib(A).cholesky(A + A.transpose(-1, -2)) * B[..., :1]).sum(),
         "qr": lambda A, B: sum((t * w).sum() for t, w in zip(lib(A).qr(A), (B[..., :1], B[..., 1:2].transpose(-1, -2))))}
  check_grads(fns[name], [a, b], device, atol=1e-6, rtol=1e-5)

def test_errors_and_singular_matrices(device):
  with pytest.raises(ValueError, match="at least 2 dimensions"): linalg.det(Tensor(np.ones(3, np.float32), device=device))
  with pytest.raises(ValueError, match="square matrices, but they are 2 by 3"): linalg.inv(Tensor(np.ones((2, 3), np.float32), device=device))
  with pytest.raises(TypeError, match="float32 or float64"): linalg.det(Tensor(np.ones((2, 2), np.int32), device=device))
  with pytest.raises(TypeError, match="float32 or float64"): linalg.det(Tensor(np.ones((2, 2), np.float16), device=device))
  A = Tensor(np.eye(3, dtype=np.float32), device=device)
  with pytest.raises(ValueError, match="incompatible shapes"): linalg.solve(A, Tensor(np.ones((4, 2), np.float32), device=device))
  singular = Tensor(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.float32), device=device)
  with pytest.raises(linalg.LinAlgError, match="linalg.inv: the diagonal element 3 is zero"): linalg.inv(singular)
  with pytest.raises(linalg.LinAlgError, match="input matrix is singular"): linalg.solve(singular, Tensor(np.ones(3, np.float32), device=device))
  with pytest.raises(linalg.LinAlgError, match="leading minor of order 2 is not positive-definite"):
    linalg.cholesky(Tensor(np.array([[1.0, 2.0], [2.0, 1.0]], np.float32), device=device))
  assert issubclass(linalg.LinAlgError, RuntimeError)

def test_under_jit(device):
  f = alloy.jit(lambda A, b: linalg.solve(A, b) * 2)
  rng = np.random.default_rng(5)
  for _ in range(3):
    a, b = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(a, device=device), Tensor(b, device=device)).numpy(), 2 * np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
  assert f.replay is not None
  with pytest.raises(linalg.LinAlgError, match="singular"): f(Tensor(np.ones((3, 3), np.float32), device=device), Tensor(b, device=device))

def test_norms_and_products_match_torch(device, rng):
  a = rng.standard_normal((2, 3, 4)).astype(np.float32)
  A, ta = Tensor(a, device=device), torch.from_numpy(a)
  for ord in ("fro", 1, -1, float("inf"), float("-inf")):
    for keepdim in (False, True):
      got, want = linalg.matrix_norm(A, ord, keepdim=keepdim), torch.linalg.matrix_norm(ta, ord, keepdim=keepdim)
      assert got.shape == tuple(want.shape)
      np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, err_msg=str(ord))
  np.testing.assert_allclose(linalg.matrix_norm(A, 1, dim=(0, 2)).numpy(), torch.linalg.matrix_norm(ta, 1, dim=(0, 2)).numpy(), rtol=1e-5)
  v = a[0]
  for kw in (dict(), dict(ord=1), dict(ord=float("inf")), dict(ord=3, dim=1), dict(dim=(0, 1)), dict(ord=-1, dim=(1, 0))):
    np.testing.assert_allclose(linalg.norm(Tensor(v, device=device), **kw).numpy(), torch.linalg.norm(torch.from_numpy(v), **kw).numpy(),
                               rtol=1e-5, err_msg=str(kw))
  np.testing.assert_allclose(linalg.vector_norm(A, 3, dim=-1).numpy(), torch.linalg.vector_norm(ta, 3, dim=-1).numpy(), rtol=1e-5)
  m = rng.standard_normal((2, 3, 3)).astype(np.float32)
  for n in (0, 1, 2, 5, -2):
    np.testing.assert_allclose(linalg.matrix_power(Tensor(m, device=device), n).numpy(), np.linalg.matrix_power(m.astype(np.float64), n),
                               rtol=1e-4, atol=1e-4, err_msg=str(n))
  chain = [rng.standard_normal(s).astype(np.float32) for s in ((5,), (5, 3), (3, 7), (7, 2), (2,))]
  for ts in (chain, chain[1:4], chain[:4], chain[1:]):
    np.testing.assert_allclose(linalg.multi_dot([Tensor(x, device=device) for x in ts]).numpy(),
                               np.linalg.multi_dot([x.astype(np.float64) for x in ts]), rtol=1e-4, atol=1e-4)
  with pytest.raises(ValueError, match="at least 2"): linalg.multi_dot([Tensor(m[0], device=device)])
  np.testing.assert_allclose(linalg.vecdot(A, A).numpy(), (a * a).sum(-1), rtol=1e-5)
  np.testing.assert_array_equal(linalg.diagonal(A).numpy(), np.diagonal(a, 0, -2, -1))

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 4, 4)])
def test_eigh_matches_numpy(device, rng, dtype, shape):
  # eigenvalues ascending as NumPy's; eigenvectors orthonormal, each NumPy's up to its sign; only one triangle is read
  if dtype == "float64" and device == "METAL": pytest.skip("Metal has no float64")
  a = rng.standard_normal(shape)
  a = (a + np.swapaxes(a, -1, -2)).astype(dtype)
  tol = 1e-10 if dtype == "float64" else 2e-4
  for uplo, garbage in (("L", np.triu(np.full(shape[-2:], 7.0), 1)), ("U", np.tril(np.full(shape[-2:], 7.0), -1))):
    w, v = linalg.eigh(Tensor((a + garbage).astype(dtype), device=device), UPLO=uplo)
    wn, vn = np.linalg.eigh(a.astype(np.float64))
    np.testing.assert_allclose(w.numpy(), wn, atol=tol * max(1.0, np.abs(wn).max()))
    vv = v.numpy().astype(np.float64)
    np.testing.assert_allclose(np.swapaxes(vv, -1, -2) @ vv, np.broadcast_to(np.eye(shape[-1]), vv.shape), atol=tol * 10)
    np.testing.assert_allclose(np.abs(vv), np.abs(vn), atol=tol * 100)
  np.testing.assert_allclose(linalg.eigvalsh(Tensor(a, device=device)).numpy(), wn, atol=tol * max(1.0, np.abs(wn).max()))
  with pytest.raises(ValueError, match="UPLO"): linalg.eigh(Tensor(a, device=device), UPLO="X")

def test_eigh_gradients(device, rng):
  # of the eigenvalues, and of a sign-free function of the eigenvectors (their squares)
  a, w = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
  lib = lambda t: linalg if isinstance(t, Tensor) else torch.linalg
  check_grads(lambda A, W: (lib(A).eigvalsh(A + A.transpose(-1, -2)) * W[0]).sum(), [a, w], device, atol=1e-6, rtol=1e-5)
  check_grads(lambda A, W: (lib(A).eigh(A + A.transpose(-1, -2))[1] ** 2 * W).sum(), [a, w], device, atol=1e-6, rtol=1e-5)
