"""The Lowerer's WGMMA tile (codegen/tensor_core.py, Hopper's wgmma fed by the copy engine) and its persistent form
(the epilogue overlapped, for matmuls the graph rounds to 16 bits): the heuristics' choice, the validator's refusals,
the rendered CUDA C compiled by NVRTC for sm_90a (no GPU needed), and on an sm_90 GPU the results of matmuls with
epilogues (bias, activation, residual, float32 output, a batch over a shared weight, edges the tile does not divide,
an output row of whole 16-byte chunks or not) against NumPy in float64, through either form."""
import re
import numpy as np
import pytest
import alloy
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.schedule.fusion import schedule
from alloy.codegen.matmul import match_matmul
from alloy.codegen.lower import lower
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import check
from alloy.codegen.transforms import OptKind, stage, tensor_core
from conftest import tensor_core_instructions
from alloy.codegen import tensor_core as tc
from alloy.renderer.cuda import CUDARenderer
from alloy.runtime.registry import device_available

H200 = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=(tc.SIMT_F32, tc.MMA_SYNC, tc.WGMMA), dynamic_shared_bytes=227 << 10)
WIDE, MID, NARROW = tc.WGMMA_TILES
P = tc.PERSISTENT   # each tile's persistent form

def _ast(t: Tensor):
  return schedule([t.node])[-1][1]

def _t(rng, *shape, dtype=np.float16):
  return Tensor(rng.uniform(-1, 1, shape).astype(dtype))

def _epilogues(rng, M, N, K, dtype=np.float16):
  a, b, bias, res = _t(rng, M, K, dtype=dtype), _t(rng, K, N, dtype=dtype), _t(rng, N, dtype=dtype), _t(rng, M, N, dtype=dtype)
  return {"bias_gelu": (a @ b + bias).gelu(approximate="tanh"), "residual": a @ b + res, "relu_f32": (a @ b).relu().float()}

def test_heuristics_choose_wgmma_with_an_epilogue(rng):
  for t in _epilogues(rng, 2048, 2048, 256).values():   # 128 threadgroups of the widest tile: about one wave
    assert choose_opts(_ast(t), H200) == [tensor_core(1, P[WIDE])]   # each rounds the matmul to float16 first
  x, w = _t(rng, 4, 256, 768), _t(rng, 768, 2304)
  assert choose_opts(_ast(x @ w + 1), H200) == [tensor_core(2, P[WIDE])]   # a batch over one weight
  a, b = _t(rng, 2048, 256), _t(rng, 256, 2048)   # float32 products of float16 operands: no rounding to stage
  assert choose_opts(_ast(a.float() @ b.float()), H200) == [tensor_core(1, WIDE)]
  short_k = choose_opts(_ast(_t(rng, 512, 64) @ _t(rng, 64, 512) + 1), H200)   # K 64: mma.sync's small tile
  assert short_k[0].kind is OptKind.TENSOR_CORE and tc.TILES[short_k[0].arg].instruction == tc.MMA_SYNC
  few_rows = choose_opts(_ast(_t(rng, 32, 256) @ _t(rng, 256, 512) + 1), H200)
  assert tc.WGMMA not in tensor_core_instructions(few_rows)

@pytest.mark.parametrize("M, N, want", [
  (512, 4096, MID),      # 64 threadgroups of the widest tile would idle half the SMs; 128 of 128 x 128 fill them
  (1000, 1000, NARROW),  # 32 of the widest, 64 of 128 x 128: 128 x 64's 128 fill the SMs
  (16384, 128, MID),     # N of 128: never the widest; 128 x 128's 128 threadgroups are a wave
  (8192, 128, NARROW),   # ...where 64 of them would be half of one
  (4096, 4096, WIDE)])   # 512 threadgroups: four waves, the last nearly full
def test_heuristics_fill_the_waves(rng, M, N, want):
  assert choose_opts(_ast(_t(rng, M, 256) @ _t(rng, 256, N)), H200) == [tensor_core(1, P[want])]

def test_validator_names_what_the_copy_engine_refuses(rng):
  assert "16 bytes" in check(_ast(_t(rng, 128, 1001) @ _t(rng, 1001, 128) + 1), H200, [tensor_core(1, WIDE)])   # rows of 2002 bytes
  assert "float16 or two bfloat16" in check(_ast(_t(rng, 128, 128, dtype=np.float32) @ _t(rng, 128, 128, dtype=np.float32)), H200,
                                            [tensor_core(1, WIDE)])
  assert "at least 2" in check(_ast(_t(rng, 128, 128) @ _t(rng, 128, 128) + 1), H200, [tensor_core(1, WIDE), stage(1, 1)])
  assert check(_ast(_t(rng, 128, 128) @ _t(rng, 128, 128) + 1), H200, [tensor_core(1, WIDE), stage(1, 3)]) is None
  assert "shared memory" in check(_ast(_t(rng, 128, 128) @ _t(rng, 128, 128) + 1), H200, [tensor_core(1, WIDE), stage(1, 5)])
  a, b = _t(rng, 128, 128), _t(rng, 128, 128)
  assert "float32 accumulator" in check(_ast(a.float() @ b.float()), H200, [tensor_core(1, P[WIDE])])
  assert check(_ast(a @ b + 1), H200, [tensor_core(1, P[WIDE])]) is None
  assert "no wgmma" in check(_ast(_t(rng, 128, 128) @ _t(rng, 128, 128) + 1), DeviceCaps(threads=True, tensor_cores=(tc.MMA_SYNC,)),
                             [tensor_core(1, WIDE)])

@pytest.mark.parametrize("name", ["bias_gelu", "residual", "relu_f32"])
@pytest.mark.parametrize("arg", tc.WGMMA_TILES + tuple(P.values()))
def test_source_compiles_for_sm90a(rng, name, arg):
  pytest.importorskip("cuda.bindings")
  from alloy.runtime.cuda.compiler import CUDACompiler
  ast = _ast(_epilogues(rng, 200, 136, 96)[name])
  src = CUDARenderer().render(lower(ast, H200, [tensor_core(1, arg)]))
  assert "wgmma.mma_async" in src and "cp.async.bulk.tensor" in src and "alloy_tensor_maps" in src
  try: CUDACompiler("sm_90").compile(src)
  except Exception as e:
    if "cannot open source file \"cuda_fp16.h\"" in str(e): pytest.skip("no CUDA headers")   # (the error quotes the source)
    raise

def test_module_describes_its_tensor_maps(rng):
  """The words a tile's module declares (renderer/cuda.py) read back (runtime/cuda/program.py) as the maps and operands
  codegen/wgmma.py gives: a sliced A (a byte offset), B shared by the batch elements (a batch of one)."""
  pytest.importorskip("cuda.bindings")
  from alloy.renderer.cuda_wgmma import tensor_maps
  from alloy.runtime.cuda.program import tensor_maps_of
  x, w = _t(rng, 3, 200, 520), _t(rng, 512, 256)
  ast = _ast(x[:, :, 8:] @ w + 1)
  (spec_tile,) = [o for o in choose_opts(ast, H200) if o.kind is OptKind.TENSOR_CORE]
  src = CUDARenderer().render(lower(ast, H200, [spec_tile]))
  words = [int(v) for v in re.search(r"alloy_tensor_maps\[\d+\] = \{([^}]*)\}", src).group(1).split(",")]
  gemm, operands = tc.wgmma_gemm(match_matmul(ast), tc.TILES[spec_tile.arg])
  assert tensor_maps_of(words) == (tensor_maps(gemm), operands)
  assert operands[0] == (1, 16) and tensor_maps(gemm)[1].dims[2] == 1 and tensor_maps(gemm)[0].dims == (512, 200, 3)

# ---- on an sm_90 GPU

def _hopper():
  if not device_available("CUDA"): pytest.skip("no CUDA device")
  if alloy.get_device("CUDA").compute_capability != (9, 0): pytest.skip("wgmma needs an sm_90 GPU")

def _realized_on_wgmma(t: Tensor, persistent: bool | None = None) -> np.ndarray:
  """t's values, after checking that its kernels included a WGMMA tile (persistent or not, where asked; the kernels
  launched, as the watchers see them: not the compiled cache's order, which another test's kernels in the same
  process can reorder)."""
  from alloy.engine.watch import OnLaunch, watchers
  tiles = []
  def seen(ck, bufs, elapsed, t_submit, consts):
    tiles.extend(tc.TILES[o.arg] for o in ck.meta.opts if getattr(o, "kind", None) is OptKind.TENSOR_CORE)
  with watchers.watching(OnLaunch(seen)): t = t.realize()
  wgmma = [u for u in tiles if u.instruction == tc.WGMMA and (persistent is None or u.persistent == persistent)]
  assert wgmma, f"no {'' if persistent is None else 'persistent ' if persistent else 'plain '}WGMMA tile among the launches' tiles {tiles}"
  return t.numpy()

def _gelu_tanh(x):
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (4096, 4096, 4096), (129, 72, 4104), (7 * 64, 24, 64 + 8), (256, 4096 + 8, 200)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_bias_gelu(M, N, K, dtype):
  _hopper()
  r = np.random.default_rng(M + N + K)
  a, b, bias = (r.uniform(-1, 1, s).astype(np.float32) for s in ((M, K), (K, N), (N,)))
  ta, tb, tbias = (Tensor(x, device="CUDA").cast(getattr(alloy, dtype)) for x in (a, b, bias))
  got = _realized_on_wgmma((ta @ tb + tbias).gelu(approximate="tanh").float())
  rounded = lambda x: Tensor(x).cast(getattr(alloy, dtype)).float().numpy().astype(np.float64)
  want = _gelu_tanh(rounded(a) @ rounded(b) + rounded(bias))
  tol = 2 ** -8 if dtype == "float16" else 2 ** -5   # a few roundings to the 16-bit dtype inside the epilogue
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(K) / 8)

@pytest.mark.parametrize("kind", ["residual", "relu_f32", "batch_shared_weight", "weight_transposed", "rows_of_odd_chunks",
                                  "batched_operands", "float32_products"])
def test_epilogues_and_layouts(kind):
  """Each through the persistent tile but the last, whose epilogue reads the float32 accumulator: the plain tile."""
  _hopper()
  r = np.random.default_rng(7)
  h = lambda *s: r.uniform(-1, 1, s).astype(np.float16)
  T = lambda x: Tensor(x, device="CUDA")
  if kind == "residual":
    a, b, res = h(384, 320), h(320, 512), h(384, 512)
    got, want = T(a) @ T(b) + T(res), a.astype(np.float64) @ b + res
  elif kind == "relu_f32":   # B stored N x K: N odd (333) stays 16-byte aligned
    a, b = h(300, 256), h(333, 256)
    got, want = (T(a) @ T(b).T).relu().float(), np.maximum(a.astype(np.float64) @ b.T, 0)
  elif kind == "batch_shared_weight":   # GPT-2's linear layers: (B, L, C) @ (C, N) + bias
    x, w, bias = h(4, 200, 768), h(768, 2304), h(2304)
    got, want = T(x) @ T(w) + T(bias), x.astype(np.float64) @ w + bias
  elif kind == "rows_of_odd_chunks":   # N 36: an output row is not whole 16-byte chunks; 3 x 200 rows over two tiles of M
    x, w = h(3, 200, 96), h(36, 96)
    got, want = (T(x) @ T(w).T).relu(), np.maximum(x.astype(np.float64) @ w.T, 0)
  elif kind == "batched_operands":   # a batch of both operands: the tiles' batch coordinate
    a, b = h(5, 136, 256), h(5, 256, 264)
    got, want = T(a) @ T(b) * 0.5, (a.astype(np.float64) @ b) * 0.5
  elif kind == "float32_products":   # float16 operands multiplied and summed in float32, never rounded to 16 bits
    a, b, bias = h(384, 320), h(320, 512), h(512)
    got, want = (T(a).float() @ T(b).float() + T(bias).float()).relu(), np.maximum(a.astype(np.float64) @ b + bias, 0)
  else:   # nn.Linear: x @ W.T, W stored N x K
    x, w, bias = h(512, 384), h(640, 384), h(640)
    got, want = T(x) @ T(w).T + T(bias), x.astype(np.float64) @ w.T + bias
  np.testing.assert_allclose(_realized_on_wgmma(got, kind != "float32_products").astype(np.float64), want, rtol=2 ** -9, atol=2e-2)

def test_jit_replays_through_graphs():
  _hopper()
  r = np.random.default_rng(3)
  w, bias = Tensor(r.uniform(-1, 1, (256, 512)).astype(np.float16), device="CUDA"), Tensor(r.uniform(-1, 1, 512).astype(np.float16), device="CUDA")
  step = alloy.jit(lambda x: (x @ w + bias).relu())
  for _ in range(4):
    x = r.uniform(-1, 1, (384, 256)).astype(np.float16)
    got = step(Tensor(x, device="CUDA")).numpy()
    np.testing.assert_allclose(got.astype(np.float64), np.maximum(x.astype(np.float64) @ w.numpy() + bias.numpy(), 0), rtol=2 ** -9, atol=2e-2)
