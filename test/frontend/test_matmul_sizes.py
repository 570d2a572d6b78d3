"""Matmul at the sizes a register tile does not divide, through transposed and batched operands, and in 16-bit floats
(which accumulate in float32), against NumPy in float64 on every device; and the CPU's AVX2 build on an AVX-512 CPU."""
import os, subprocess, sys
import numpy as np, pytest
from alloy import Tensor
from conftest import rand_np, assert_close, supported

def _operand(device, rng, shape, dtype, transpose):
  """A random operand of `shape` in `dtype` (16-bit floats: float32 data rounded by alloy's cast), as a Tensor (a
  transposed view of a contiguous array where `transpose`) and as the float64 values it holds."""
  x = rand_np(rng, shape[:-2] + shape[-2:][::-1] if transpose else shape, low=-1, high=1)
  t = Tensor(x, device=device)
  if dtype != "float32": t = t.cast(dtype).realize()
  if transpose: t = t.transpose(-1, -2)
  return t, t.float().numpy().astype(np.float64)

def _check(device, rng, sa, sb, dtype="float32", transpose_b=False):
  (ta, a), (tb, b) = _operand(device, rng, sa, dtype, False), _operand(device, rng, sb, dtype, transpose_b)
  out = ta @ tb
  assert out.dtype == ta.dtype
  k = sa[-1]
  # float32: the rounding of k products and sums; 16-bit floats: their products and sums in float32, then one
  # rounding of the result to the 16-bit type
  rtol, atol = {"float32": (1e-5, 1e-6 * k), "float16": (2e-3, 1e-3), "bfloat16": (1e-2, 8e-3)}[dtype]
  assert_close(out.float().numpy().astype(np.float64), a @ b, "float64", rtol=rtol, atol=atol)

SIZES = [((1, 1), (1, 1)), ((7, 7), (7, 7)), ((1, 300), (300, 1)), ((7, 1000), (1000, 7)), ((4097, 16), (16, 5)),
         ((5, 16), (16, 4097)), ((33, 250), (250, 65)), ((70, 130), (130, 200)), ((250, 97), (97, 330))]

@pytest.mark.parametrize("sa,sb", SIZES)
def test_matmul_odd_sizes(device, rng, sa, sb):
  _check(device, rng, sa, sb)

@pytest.mark.parametrize("sa,sb", [((3, 40, 50), (3, 50, 70)), ((2, 1, 33, 64), (5, 64, 96)), ((4, 9, 300), (300, 40))])
def test_matmul_batched_and_transposed(device, rng, sa, sb):
  _check(device, rng, sa, sb)
  _check(device, rng, sa, sb, transpose_b=True)

def test_matmul_large_cpu(rng):
  # 1000 is not a multiple of any tile; 1024 and 1040 take the wide tiles with packed panels
  for n in (1000, 1040):
    _check("CPU", rng, (n, n), (n, n))
  _check("CPU", rng, (1024, 512), (512, 1024), transpose_b=True)

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_matmul_accumulates_in_float32(device, dtype):
  if not supported(device, (dtype,)): pytest.skip(f"{dtype} not on {device}")
  # 4096 ones: a 16-bit accumulator stops at 2048 (float16) or 256 (bfloat16), float32 counts them all; 4096 is exact
  ones = Tensor(np.ones((2, 4096), np.float32), device=device).cast(dtype)
  got = (ones @ ones.T).float().numpy()
  np.testing.assert_array_equal(got, np.full((2, 2), 4096.0, np.float32))
  rng = np.random.default_rng(3)
  for sa, sb in [((7, 1000), (1000, 9)), ((64, 256), (256, 96)), ((2, 17, 40), (40, 33))]:
    _check(device, rng, sa, sb, dtype)

@pytest.mark.skipif(" avx512f" not in (open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""),
                    reason="the AVX2 build is the default on this CPU, which every other test runs")
def test_cpu_avx2_build_on_an_avx512_cpu():
  # ALLOY_CPU_ISA=avx2 builds kernels without AVX-512 and lowers with AVX2's caps: the path of CI machines without it
  code = """
import numpy as np, alloy
from alloy import Tensor
dev = alloy.get_device("CPU")
assert dev.target.endswith("+avx2") and max(dev.caps.vector_widths) == 8, (dev.target, dev.caps)
rng = np.random.default_rng(0)
for sa, sb in [((256, 256), (256, 256)), ((70, 130), (130, 200)), ((7, 1000), (1000, 7))]:
  a, b = rng.uniform(-1, 1, sa).astype(np.float32), rng.uniform(-1, 1, sb).astype(np.float32)
  got = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6 * sa[-1])
print("ok")
"""
  env = dict(os.environ, ALLOY_CPU_ISA="avx2", DEV="CPU")
  proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_result_is_rounded(device, rng, dtype):
  """A 16-bit matmul's result holds 16-bit values when read back as float32 (GCC 12 with AVX512-FP16 once kept the
  float32 accumulator's bits), and one with a fused epilogue builds and runs (it once emitted an unassemblable vmovsh)."""
  if not supported(device, [dtype]): pytest.skip(f"no {dtype} on {device}")
  (ta, a), (tb, b) = _operand(device, rng, (9, 64), dtype, False), _operand(device, rng, (64, 24), dtype, False)
  (tc, c), _ = _operand(device, rng, (9, 24), dtype, False), None
  for out, want in (((ta @ tb).float().numpy(), a @ b), (((ta @ tb + tc).relu()).float().numpy(), np.maximum(a @ b + c, 0))):
    rounded = Tensor(out, device=device).cast(dtype).float().numpy()
    np.testing.assert_array_equal(out, rounded)
    assert_close(out.astype(np.float64), want, "float64", rtol=2e-2, atol=2e-2)

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                                   ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((1, 1), (1, 1))])
def test_matmul_without_grad_builds_the_graph_the_ops_build(sa, sb):
  # the no-grad path makes its nodes directly (tensor._matmul_node): they must be the very nodes the tensor ops make, so
  # the schedule's caches and the kernels are shared with the recorded path
  rng = np.random.default_rng(0)
  a, b = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in (sa, sb))
  plain = a @ b
  recorded = a.detach().requires_grad_() @ b
  assert recorded.requires_grad and plain.node is recorded.node
  np.testing.assert_allclose(plain.numpy(), np.matmul(a.numpy(), b.numpy()), rtol=1e-5, atol=1e-5)
