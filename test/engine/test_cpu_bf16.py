"""engine/cpu_bf16.py: which matmuls the CPU's AVX512-BF16 kernel takes (checked on ASTs, any CPU), and on a CPU with
avx512_bf16 its results against NumPy in float64 (shapes the tiles do not divide, an odd K, batches, x @ W folded,
transposed and sliced operands, one buffer as both operands), and that without the extension the Lowerer runs.
Every tensor here is made on the CPU device, whatever DEV names (on the H200 host DEV=CUDA)."""
import dataclasses
import numpy as np
import pytest
import alloy
from alloy import Tensor
from alloy.codegen.matmul import match_matmul
from alloy.engine.cpu_bf16 import bf16_gemm, takes_bf16
from alloy.engine.watch import OnLaunch, watchers
from alloy.schedule.fusion import schedule

def gemm(t: Tensor):
  (_, ast, _, _), = schedule([t.node])
  spec = match_matmul(ast)
  return spec and bf16_gemm(spec)

def h(*shape, dtype=alloy.bfloat16): return Tensor(np.ones(shape, np.float32), device="CPU").cast(dtype).realize()

def test_which_matmuls_it_takes():
  g = gemm(h(100, 64) @ h(64, 48))
  assert (g.batch, g.M, g.N, g.K, g.a_row, g.b_k, g.b_n) == (1, 100, 48, 64, 64, 48, 1)
  g = gemm(h(100, 64) @ h(48, 64).T)   # nn.Linear's weight: B runs along K
  assert (g.b_k, g.b_n) == (1, 64)
  g = gemm(h(3, 50, 64) @ h(3, 64, 40))
  assert (g.batch, g.a_batch, g.b_batch) == (3, 50 * 64, 64 * 40)
  g = gemm(h(4, 50, 64) @ h(64, 40))   # x @ W: the batch folds into M
  assert (g.batch, g.M) == (1, 200)
  assert gemm(h(64, 100).T @ h(64, 48)) is None                        # A stored K x M
  assert gemm((h(100, 64) @ h(64, 48)).relu()) is None                 # an epilogue beyond the cast
  assert gemm(h(100, 64, dtype=alloy.float16) @ h(64, 48, dtype=alloy.float16)) is None
  assert gemm((h(100, 64) @ h(64, 48)).float()) is None                # a float32 output

def _needs_bf16():
  if not takes_bf16(alloy.get_device("CPU")): pytest.skip("this CPU has no AVX512-BF16 (or ALLOY_CPU_ISA narrows its kernels)")

def _run(t: Tensor) -> tuple[np.ndarray, list]:
  names = []
  with watchers.watching(OnLaunch(lambda ck, bufs, elapsed, t_submit, consts: names.append(ck.meta.name))):
    t = t.realize()
  return t.float().numpy().astype(np.float64), names

def _bf16(rng, *shape) -> Tensor: return Tensor(rng.uniform(-1, 1, shape).astype(np.float32), device="CPU").cast(alloy.bfloat16).realize()
def _np(t: Tensor) -> np.ndarray: return t.float().numpy().astype(np.float64)

@pytest.mark.parametrize("M, K, N", [(3, 5, 7), (7, 3, 33), (100, 77, 45), (513, 129, 1000), (256, 256, 64)])
def test_matches_numpy(rng, M, K, N):
  _needs_bf16()
  a, b = _bf16(rng, M, K), _bf16(rng, K, N)
  got, names = _run(a @ b)
  assert any(n.startswith("bf16_gemm") for n in names), names
  want = _np(a) @ _np(b)
  np.testing.assert_allclose(got, want, atol=2e-2 * max(1, np.sqrt(K) / 8), rtol=1e-2)   # bf16's 8 bits, float32 sums

def test_batches_views_and_one_buffer(rng):
  _needs_bf16()
  x, w, wt = _bf16(rng, 3, 20, 40), _bf16(rng, 40, 24), _bf16(rng, 24, 40)
  cases = {"batched": (x, _bf16(rng, 3, 40, 24)), "batched q @ k^T": (x, _bf16(rng, 3, 24, 40).transpose(-1, -2)),
           "x @ W": (x, w), "x @ W.T": (x, wt.T), "rows sliced": (x[:, 3:], w),
           "x @ W.T, odd K": (_bf16(rng, 33, 45), _bf16(rng, 37, 45).T),   # few rows: the dot kernel
           "x @ W.T, many rows": (_bf16(rng, 100, 45), _bf16(rng, 37, 45).T),   # packed panels
           "one buffer": (wt, None)}
  for name, (a, b) in cases.items():
    t = a @ a.T if b is None else a @ b
    got, names = _run(t)
    assert any(n.startswith("bf16_gemm") for n in names), (name, names)
    want = _np(a) @ (np.swapaxes(_np(a), -1, -2) if b is None else _np(b))
    np.testing.assert_allclose(got, want, atol=3e-2, rtol=1e-2, err_msg=name)

def test_without_the_extension_the_lowerer_runs(rng, monkeypatch):
  from alloy.runtime.cpu import cpu_caps
  monkeypatch.setenv("ALLOY_CPU_BF16", "0")
  assert cpu_caps().whole_matmuls == ()
  dev = alloy.get_device("CPU")
  monkeypatch.setattr(dev, "caps", dataclasses.replace(dev.caps, whole_matmuls=()))
  assert not takes_bf16(dev)
  a, b, bias = _bf16(rng, 30, 20), _bf16(rng, 20, 10), _bf16(rng, 10)
  got, names = _run(a @ b + bias)
  assert not any(n.startswith("bf16_gemm") for n in names) and len(names) == 1   # the Lowerer's one kernel, epilogue fused
  np.testing.assert_allclose(got, _bf16_round(_bf16_round(_np(a) @ _np(b)) + _np(bias)), atol=2e-2, rtol=1e-2)

def _bf16_round(x: np.ndarray) -> np.ndarray:
  return Tensor(x.astype(np.float32), device="CPU").cast(alloy.bfloat16).float().numpy().astype(np.float64)

def test_an_epilogue_is_a_kernel_of_its_own(rng):
  """nn.Linear's x @ W.T + b: the matmul through the kernel, stored as bf16, then the bias add; the same values as
  one fused kernel (the graph rounds the matmul to bf16 before the add)."""
  _needs_bf16()
  x, w, bias = _bf16(rng, 8, 96), _bf16(rng, 40, 96), _bf16(rng, 40)
  got, names = _run((x @ w.T + bias).gelu())
  assert len(names) == 2 and names[0].startswith("bf16_gemm"), names
  want = _np(x) @ _np(w).T
  want = _bf16_round(_bf16_round(want) + _np(bias))
  want = 0.5 * want * (1 + np.vectorize(__import__("math").erf)(want / np.sqrt(2)))
  np.testing.assert_allclose(got, want, atol=3e-2, rtol=2e-2)

def test_an_operand_cast_to_bf16_is_a_bf16_operand(rng):
  """A float32 array cast to bf16 is stored as bf16 first (a computed operand); the matmul then reads bf16 and its
  epilogue is cut from it, as for a bf16 array."""
  _needs_bf16()
  x32, w, bias = Tensor(rng.uniform(-1, 1, (8, 96)).astype(np.float32), device="CPU"), _bf16(rng, 40, 96), _bf16(rng, 40)
  got, names = _run(x32.cast(alloy.bfloat16) @ w.T + bias)
  assert any(n.startswith("bf16_gemm") for n in names), names
  want = _bf16_round(_bf16_round(_np(x32.cast(alloy.bfloat16)) @ _np(w).T) + _np(bias))
  np.testing.assert_allclose(got, want, atol=3e-2, rtol=2e-2)
