"""The C renderer's vector math helpers (exp, NaN-propagating max, clamp) compiled on their own: the x86 builtins
path against NumPy, and the portable path (what ARM and x86 without AVX compile) bit for bit against it."""
import ctypes, platform, subprocess
import numpy as np
import pytest
from alloy.renderer.c import C_PRELUDE
from alloy.runtime.cpu.compiler import CFLAGS, find_c_compiler

HARNESS = r"""
void apply(const float *x, const float *y, float *exp_out, float *max_out, float *clamp_out, int n) {
  alloy_float32x8 lo = {0}, hi = {0};
  lo -= 3.5f; hi += 2.25f;
  for (int i = 0; i + 8 <= n; i += 8) {
    alloy_float32x8 a = *(const alloy_float32x8 *)(x + i), b = *(const alloy_float32x8 *)(y + i);
    *(alloy_float32x8 *)(exp_out + i) = alloy_exp_float32x8(a);
    *(alloy_float32x8 *)(max_out + i) = alloy_max_float32x8(a, b);
    *(alloy_float32x8 *)(clamp_out + i) = alloy_clamp_float32x8(a, lo, hi);
  }
}
void apply16(const float *x, const float *y, float *exp_out, float *max_out, float *clamp_out, float *fma_out, int n) {
  alloy_float32x16 lo = {0}, hi = {0};
  lo -= 3.5f; hi += 2.25f;
  for (int i = 0; i + 16 <= n; i += 16) {
    alloy_float32x16 a = *(const alloy_float32x16 *)(x + i), b = *(const alloy_float32x16 *)(y + i);
    *(alloy_float32x16 *)(exp_out + i) = alloy_exp_float32x16(a);
    *(alloy_float32x16 *)(max_out + i) = alloy_max_float32x16(a, b);
    *(alloy_float32x16 *)(clamp_out + i) = alloy_clamp_float32x16(a, lo, hi);
    *(alloy_float32x16 *)(fma_out + i) = alloy_fma_float32x16(a, b, a);
  }
}
"""

def _build(tmp_path, name: str, extra: list) -> ctypes.CDLL:
  out = str(tmp_path / f"{name}.so")
  proc = subprocess.run([find_c_compiler(), *CFLAGS, *extra, "-x", "c", "-", "-o", out, "-lm"], input=C_PRELUDE + HARNESS,
                        capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  return ctypes.CDLL(out)

def _inputs() -> tuple:
  rng = np.random.default_rng(5)
  specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, -87.5, -103.0, -104.0, -149.9, -150.5, 127.9,
                       128.5, 1e-30, -1e-30, 3.5, -3.5, 2.25, -2.26], np.float32)
  x = np.concatenate([specials, np.linspace(-160, 100, 4000, dtype=np.float32), rng.uniform(-20, 20, 4076).astype(np.float32)])
  y = np.roll(x, 7)
  y[::5] = np.nan
  return x, y

def _run(lib, x, y) -> tuple:
  outs = [np.empty_like(x) for _ in range(3)]
  ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
  lib.apply(ptr(x), ptr(y), *map(ptr, outs), ctypes.c_int(len(x)))
  return outs

def test_vector_math_against_numpy(tmp_path):
  x, y = _inputs()
  exp, mx, clamp = _run(_build(tmp_path, "native", []), x, y)
  with np.errstate(over="ignore", invalid="ignore"): want = np.exp(x.astype(np.float64)).astype(np.float32)
  normal = np.isfinite(want) & (want > 1e-37)
  np.testing.assert_allclose(exp[normal], want[normal], rtol=4e-7)
  np.testing.assert_allclose(exp[~normal & np.isfinite(want)], want[~normal & np.isfinite(want)], atol=2e-45)
  np.testing.assert_array_equal(exp[~np.isfinite(want)], want[~np.isfinite(want)])
  np.testing.assert_array_equal(mx, np.where(np.isnan(x) | (x > y), x, y))   # NaN from either side wins
  np.testing.assert_array_equal(clamp, np.where(np.isnan(x), np.float32(-3.5), np.clip(x, -3.5, 2.25)))

@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the portable path is the only one here")
def test_portable_vector_math_matches_the_x86_path(tmp_path):
  x, y = _inputs()
  native = _run(_build(tmp_path, "native", []), x, y)
  portable = _run(_build(tmp_path, "portable", ["-mno-avx"]), x, y)
  for a, b in zip(native, portable):
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))

def test_16_wide_vector_math_matches_the_8_wide(tmp_path):
  # AVX-512's 16 lanes (the CPU device's matmul tile and column sums where the target has it; lane by lane elsewhere)
  x, y = _inputs()
  lib = _build(tmp_path, "native", [])
  outs = [np.empty_like(x) for _ in range(4)]
  ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
  lib.apply16(ptr(x), ptr(y), *map(ptr, outs), ctypes.c_int(len(x)))
  for a, b in zip(outs[:3], _run(lib, x, y)):
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
  with np.errstate(invalid="ignore", over="ignore"):   # a*b+a with one rounding: float64 products of float32s are exact
    want = (x.astype(np.float64) * y + x).astype(np.float32)
  np.testing.assert_array_equal(outs[3], want)
