"""The heuristics for a GPU matmul of a few rows (a decode step's batch: opts._few_rows_opts), and its results on
every device against NumPy in float64."""
import numpy as np
import pytest
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.codegen import tensor_core as tc
from alloy.codegen.opts import choose_opts, SIMT_MIN_ROWS
from alloy.codegen.transforms import OptKind, local, upcast, unroll
from alloy.schedule.fusion import schedule
from conftest import assert_close

GPU = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=(tc.SIMT_F32, tc.MMA_SYNC), dynamic_shared_bytes=227 << 10)

def _ast(t: Tensor):
  return schedule([t.node])[-1][1]

def test_few_rows_heuristics(rng):
  f = lambda *s: Tensor(rng.uniform(-1, 1, s).astype(np.float32))
  assert choose_opts(_ast(f(32, 768) @ f(768, 3072)), GPU) == [local(64), upcast(0, 2), unroll(4)]   # B along N: a thread per 2 outputs
  assert choose_opts(_ast(f(32, 3072) @ f(3072, 768)), GPU) == [local(64), unroll(4)]              # fewer outputs: one each
  assert choose_opts(_ast(f(7, 768) @ f(500, 768).T), GPU) == [local(64), upcast(0, 7)]            # B along K: every row a thread
  assert choose_opts(_ast(f(SIMT_MIN_ROWS, 256) @ f(256, 256)), GPU)[0].kind is OptKind.TENSOR_CORE   # enough rows: the float32 tile
  assert "UPCAST(0, 2)" not in str(choose_opts(_ast(f(1, 768) @ f(768, 3072)), GPU))                # a vector: the usual heuristics
  assert not any(o.kind is OptKind.LOCAL for o in choose_opts(_ast(f(32, 768) @ f(768, 3072)), DeviceCaps(threads=False)))
  # columns enough for the small float32 tile's threadgroups to fill the GPU (a decode step's lm_head): that tile
  small = tc.SIMT_TILES[3]
  for b in (f(768, 50257), f(50257, 768).T):
    (opt,) = choose_opts(_ast(f(32, 768) @ b), GPU)
    assert opt.kind is OptKind.TENSOR_CORE and opt.arg == small, opt
  assert choose_opts(_ast(f(15, 768) @ f(768, 50257)), GPU)[0].kind is OptKind.LOCAL   # under 16 rows: a thread per output

@pytest.mark.parametrize("M, N, K, bt", [(2, 130, 40, False), (7, 33, 300, True), (32, 96, 200, False), (33, 50, 64, True), (63, 17, 129, False),
                                         (32, 6200, 96, True), (17, 6150, 40, False)])
def test_few_rows_matmul(device, M, N, K, bt):
  r = np.random.default_rng(M * N + K)
  a, b, c = (r.uniform(-1, 1, s).astype(np.float32) for s in ((M, K), (N, K) if bt else (K, N), (N,)))
  ta, tb, tc_ = (Tensor(x, device=device) for x in (a, b, c))
  got = ((ta @ (tb.T if bt else tb)) + tc_).relu().numpy()
  want = np.maximum(a.astype(np.float64) @ (b.T if bt else b).astype(np.float64) + c, 0)
  assert_close(got, want, "float32", rtol=1e-5, atol=1e-5 * np.sqrt(K))
