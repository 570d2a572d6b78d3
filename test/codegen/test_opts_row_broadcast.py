"""The GPU heuristics for a kernel that reads a reduction broadcast along its rows (a layer norm's mean and variance, a
softmax's max and sum): a threadgroup per row, which computes the row's reductions once, never a register tile, which
would recompute them for every tile of the row."""
import numpy as np
import alloy
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.codegen import tensor_core as tc
from alloy.codegen.opts import choose_opts
from alloy.codegen.transforms import OptKind
from alloy.schedule.fusion import schedule
from alloy import nn
from conftest import assert_close

GPU = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=(tc.SIMT_F32, tc.MMA_SYNC), dynamic_shared_bytes=227 << 10)

def _kinds(t: Tensor) -> list:
  return [o.kind for o in choose_opts(schedule([t.node])[-1][1], GPU)]

def test_layer_norm_of_a_residual_is_a_group_per_row(rng):
  x, y = (Tensor(rng.standard_normal((8, 1024, 768)).astype(np.float16)) for _ in range(2))
  ln = nn.LayerNorm(768).to(dtype=alloy.float16)   # in float16 (GPT-2 prefill's) the register tile's pattern matched
  # the residual sum is its own buffer (GPT-2's blocks make it contiguous); the norm's kernel reads it twice
  assert _kinds(ln((x + y).contiguous())) == [OptKind.GROUP]
  assert _kinds(ln(x)) == [OptKind.GROUP]
  assert _kinds(x.softmax(-1)) == [OptKind.GROUP]

def test_matmul_keeps_its_register_tile(rng):
  a, b = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((512, 256), (256, 1024)))
  kinds = _kinds(a @ b)
  assert OptKind.GROUP not in kinds

def test_layer_norm_of_a_residual_values(device, rng):
  x, y = rng.standard_normal((2, 300, 768)).astype(np.float32), rng.standard_normal((2, 300, 768)).astype(np.float32)
  ln = nn.LayerNorm(768).to(device)
  got = ln((Tensor(x, device=device) + Tensor(y, device=device)).contiguous()).numpy()
  s = (x + y).astype(np.float64)
  want = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5)
  assert_close(got, want, "float32", rtol=1e-4, atol=1e-4)
