"""TENSOR_CORE on Metal's simdgroup matrices (codegen/tensor_core.py's SIMDGROUP_8X8 tiles, renderer/metal_simdgroup.py):
the caps by GPU family, the validator and the heuristics, the rendered MSL, and on the METAL device (the software one
here) the results against NumPy in float64: sizes the tiles do not divide, batched, transposed, a fused epilogue."""
import numpy as np
import pytest
import alloy
from alloy import Tensor
from alloy.codegen import tensor_core as tc
from alloy.codegen.lower import lower
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import check
from alloy.codegen.transforms import OptKind, tensor_core, stage
from alloy.renderer.metal import MetalRenderer
from alloy.runtime.metal import MetalDevice, metal_caps
from alloy.runtime.registry import device_available
from alloy.schedule.fusion import schedule

SG_CAPS = metal_caps("Apple7")
SMALL, BIG = tc.SIMDGROUP_TILES
metal = pytest.mark.skipif(not device_available("METAL"), reason="no METAL device (software: needs g++)")

def _ast(t: Tensor):
  return [item[1] for item in schedule([t.node])][-1]

def _operands(rng, sa, sb, dtype):
  a, b = (Tensor(rng.uniform(-1, 1, s).astype(np.float32)) for s in (sa, sb))
  return (a, b) if dtype == "float32" else (a.cast(dtype).realize(), b.cast(dtype).realize())

def test_caps_by_family():
  assert tc.SIMDGROUP_8X8 in metal_caps("Apple7").tensor_cores and tc.SIMDGROUP_8X8 in metal_caps("Apple9").tensor_cores
  for family in ("Apple6", "Mac2", "unknown"): assert metal_caps(family).tensor_cores == () and metal_caps(family) == MetalDevice.caps

def test_validator_and_heuristics(rng):
  a, b = _operands(rng, (64, 48), (48, 40), "float16")
  ast = _ast(a @ b)
  assert check(ast, SG_CAPS, [tensor_core(1, SMALL)]) is None and check(ast, SG_CAPS, [tensor_core(1, BIG)]) is None
  assert "no mma.sync" in check(ast, SG_CAPS, [tensor_core(1, 0)])                 # CUDA's tiles are not Metal's
  assert "no simdgroup_matrix" in check(ast, MetalDevice.caps, [tensor_core(1, SMALL)])  # a family without them
  assert "one slice at a time" in check(ast, SG_CAPS, [tensor_core(1, SMALL), stage(1, 2)])
  bf = _ast(a.cast("bfloat16").realize() @ b.cast("bfloat16").realize())
  assert "two float16 or two float32" in check(bf, SG_CAPS, [tensor_core(1, SMALL)])
  assert choose_opts(ast, SG_CAPS) == [tensor_core(1, SMALL)]                           # few tiles: the 32 x 32 one
  big = _ast(Tensor(np.ones((512, 64), np.float32)) @ Tensor(np.ones((64, 512), np.float32)))
  assert choose_opts(big, SG_CAPS) == [tensor_core(1, BIG)]                           # 64 of 64 x 64
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(big, MetalDevice.caps))
  thin = _ast(Tensor(np.ones((7, 64), np.float32)) @ Tensor(np.ones((64, 512), np.float32)))
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(thin, SG_CAPS))   # 7 rows: the plain kernel

@pytest.mark.parametrize("dtype,msl", [("float32", "float"), ("float16", "half")])
def test_rendered_source(rng, dtype, msl):
  a, b = _operands(rng, (70, 50), (50, 40), dtype)
  src = MetalRenderer().render(lower(_ast(a @ b), SG_CAPS))
  for call in (f"simdgroup_matrix<{msl}, 8, 8>", "simdgroup_float8x8", "simdgroup_load(", "simdgroup_multiply_accumulate(",
               "simdgroup_store(", f"threadgroup {msl} "):
    assert call in src, call

def _check(t: Tensor, want: np.ndarray, dtype: str):
  from alloy.engine import realize as engine
  before = engine.kernels_launched
  got = t.float().numpy().astype(np.float64)
  assert engine.kernels_launched > before
  rtol, atol = (1e-5, 1e-4) if dtype == "float32" else (2e-3, 2e-3)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)

@metal
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_results_on_metal(rng, dtype):
  dev = alloy.get_device("METAL")
  if tc.SIMDGROUP_8X8 not in dev.caps.tensor_cores: pytest.skip(f"{dev.target} has no simdgroup matrices")
  f64 = lambda t: t.float().numpy().astype(np.float64)
  for sa, sb in [((16, 16), (16, 16)), ((70, 50), (50, 40)), ((33, 17), (17, 130)), ((100, 300), (300, 65)),
                 ((3, 40, 24), (3, 24, 56)), ((2, 1, 33, 64), (5, 64, 20))]:
    a, b = _operands(rng, sa, sb, dtype)
    a, b = a.to("METAL"), b.to("METAL")
    ast = _ast(a @ b)
    assert any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(ast, dev.caps)), (sa, sb)
    _check(a @ b, f64(a) @ f64(b), dtype)
  # a transposed right operand (nn.Linear's weight), and an epilogue: bias, relu
  a, w = _operands(rng, (48, 80), (24, 80), dtype)
  bias = Tensor(rng.uniform(-1, 1, 24).astype(np.float32)).to("METAL")
  a, w = a.to("METAL"), w.to("METAL")
  _check(a @ w.T, f64(a) @ f64(w).T, dtype)
  _check(((a @ w.T).float() + bias).relu(), np.maximum(f64((a @ w.T).float()) + bias.numpy(), 0), dtype)
