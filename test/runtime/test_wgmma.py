"""The Hopper matmul (renderer/cuda_wgmma.py, runtime/cuda/tensor_map.py): its source compiles for sm_90a with
NVRTC wherever NVRTC is installed (CI); on an sm_90 GPU every operand layout, dtype and edge case is checked
against NumPy in float64."""
import numpy as np
import pytest

pytest.importorskip("cuda.bindings")
from alloy.dtype import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from alloy.renderer.cuda_wgmma import Operand, WGMMAGemm, render_wgmma, wgmma_unfit
from alloy.runtime.cuda import is_available
from alloy.runtime.cuda.compiler import CUDACompiler

def gemm(M, N, K, a_k=True, b_k=False, dtype="float16", batch=1, **kw) -> WGMMAGemm:
  """Contiguous operands: A stored M x K (a_k) or K x M, B stored N x K (b_k) or K x N."""
  a = Operand(a_k, K if a_k else M, M * K)
  b = Operand(b_k, K if b_k else N, N * K)
  return WGMMAGemm(batch, M, N, K, dtype, a, b, **kw)

# --- source and compile: no GPU needed ---------------------------------------------------------------

@pytest.mark.parametrize("a_k,b_k", [(True, False), (True, True), (False, False), (False, True)])
def test_compiles_for_sm90a(a_k, b_k):
  k = render_wgmma(gemm(1000, 1000, 1000, a_k, b_k))
  assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in k.source and "cp.async.bulk.tensor.3d" in k.source
  assert CUDACompiler("sm_90a").compile(k.source)[:4] == b"\x7fELF"

def test_bf16_and_narrow_tile_compile():
  k = render_wgmma(gemm(256, 64, 128, dtype="bfloat16", block_n=64, stages=3))
  assert "m64n64k16.f32.bf16.bf16" in k.source and k.grid == (2, 1, 1) and k.block == (384, 1, 1)
  assert CUDACompiler("sm_90a").compile(k.source)[:4] == b"\x7fELF"

def test_float32_output_compiles():
  k = render_wgmma(gemm(256, 333, 128, b_k=True, out_dtype="float32"))
  assert "float* __restrict__ C" in k.source and CUDACompiler("sm_90a").compile(k.source)[:4] == b"\x7fELF"

def test_tensor_maps_describe_the_operands():
  a_map, b_map = render_wgmma(gemm(300, 200, 136, a_k=True, b_k=False, batch=3, block_n=128)).maps
  assert a_map.dims == (136, 300, 3) and a_map.strides == (136 * 2, 300 * 136 * 2) and a_map.box == (64, 128, 1)
  assert b_map.dims == (200, 136, 3) and b_map.strides == (200 * 2, 200 * 136 * 2) and b_map.box == (64, 64, 1)

def test_unfit_names_the_reason():
  assert "16 bytes" in wgmma_unfit(gemm(64, 64, 4097))          # A's rows of 4097 halves: not 16-byte aligned
  assert "dtype" in wgmma_unfit(gemm(64, 64, 64, dtype="float32"))
  assert "shared memory" in wgmma_unfit(gemm(64, 64, 64, stages=8))
  assert wgmma_unfit(gemm(7, 8, 8, b_k=True)) is None
  with pytest.raises(ValueError, match="16 bytes"): render_wgmma(gemm(64, 64, 4097))

def test_param_block_maps_follow_operands():
  """TensorMapParamBlock against stand-ins for the allocator and the encoder (no GPU): buffers, then its map
  buffer's address, then scalars; maps copied in only when the operands change; freed as soon as it is dropped,
  without the cyclic collector (a cycle once left it to gc, whose __del__ ran inside the allocator's lock)."""
  import gc, struct, weakref
  from alloy.runtime.cuda.tensor_map import MAP_BYTES, TensorMapParamBlock
  log = []
  class Allocator:
    def alloc(self, n): log.append(("alloc", n)); return 0x7000
    def copyin(self, handle, data): log.append(("copyin", handle, bytes(data)[:8]))
    def free(self, handle, n): log.append(("free", handle, n))
  class Encoder:
    def key(self, bufs): return (bufs[1], bufs[2])
    def __call__(self, key): return struct.pack("<QQ", *key) + bytes(2 * MAP_BYTES - 16)
  gc.disable()
  try:
    blk = TensorMapParamBlock(Allocator(), Encoder(), 3, 1)
    blk.pack([0x100, 0x200, 0x300], [7])
    assert struct.unpack("<QQQQi", bytes(blk.storage)[:36]) == (0x100, 0x200, 0x300, 0x7000, 7)
    blk.pack_into(blk.storage, 0, 0x110, 0x200, 0x300, 8)    # a new output only: the maps stay
    blk.pack([0x100, 0x200, 0x400], [7])                     # a new B: encoded and copied again
    assert [e[0] for e in log] == ["alloc", "copyin", "copyin"] and log[2][2] == struct.pack("<Q", 0x200)
    assert struct.unpack("<QQQQi", bytes(blk.storage)[:36]) == (0x100, 0x200, 0x400, 0x7000, 7)
    ref = weakref.ref(blk)
    del blk
    assert ref() is None and log[-1] == ("free", 0x7000, 2 * MAP_BYTES)
  finally: gc.enable()

# --- on an sm_90 GPU -----------------------------------------------------------------------------

def hopper():
  if not is_available(): pytest.skip("no CUDA GPU")
  import alloy
  dev = alloy.get_device("CUDA")
  if dev.compute_capability != (9, 0): pytest.skip(f"wgmma needs sm_90, this GPU is {dev.target}")
  return dev

def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
  if dtype == "float32": return x.astype(np.float32)
  return x.astype(np.float16) if dtype == "float16" else float32_to_bfloat16_bits(x.astype(np.float32))
def from_storage(x: np.ndarray, dtype: str) -> np.ndarray:
  return x.astype(np.float64) if dtype in ("float16", "float32") else bfloat16_bits_to_float32(x).astype(np.float64)

def operands(g: WGMMAGemm, seed=0):
  """Random non-zero A and B laid out as g says, as device Buffers, and NumPy's float64 C of the same rounded values."""
  from alloy.dtype import DTYPES
  from alloy.runtime.buffer import Buffer
  rng = np.random.default_rng(seed)
  a = to_storage(rng.uniform(-1, 1, (g.batch, g.M, g.K)), g.dtype)
  b = to_storage(rng.uniform(-1, 1, (g.batch, g.K, g.N)), g.dtype)
  a_stored = a if g.a.k_major else a.transpose(0, 2, 1)
  b_stored = b.transpose(0, 2, 1) if g.b.k_major else b
  dt = DTYPES[g.dtype]
  bufs = [Buffer("CUDA", x.size, dt).copyin(np.ascontiguousarray(x).reshape(-1)) for x in (a_stored, b_stored)]
  return Buffer("CUDA", g.batch * g.M * g.N, dt), *bufs, np.matmul(from_storage(a, g.dtype), from_storage(b, g.dtype))

def run_gemm(dev, g: WGMMAGemm, seed=0):
  """Returns (alloy's C, NumPy's float64 C of the same rounded inputs)."""
  from alloy.dtype import float32
  from alloy.runtime.buffer import Buffer
  from alloy.runtime.cuda.tensor_map import build_wgmma
  out, a, b, ref = operands(g, seed)
  if g.out == "float32": out = Buffer("CUDA", out.size, float32)
  build_wgmma(dev, g).launch([out.handle, a.handle, b.handle])
  return from_storage(out.numpy(), g.out).reshape(ref.shape), ref

def check_close(got, ref, dtype):
  # fp32 accumulation, one rounding to the output type: its half-ulp relative error, plus a little absolute
  # slack for outputs near zero
  rtol, atol = (2 ** -10, 1e-3) if dtype == "float16" else (2 ** -7, 1e-2)
  err = np.abs(got - ref) - rtol * np.abs(ref)
  assert err.max() <= atol, f"worst excess error {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"

@pytest.mark.parametrize("a_k,b_k", [(True, False), (True, True), (False, False), (False, True)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_layouts(a_k, b_k, dtype):
  dev = hopper()
  g = gemm(384, 512, 320, a_k, b_k, dtype)
  check_close(*run_gemm(dev, g), dtype)

@pytest.mark.parametrize("M,N,K,b_k", [(1000, 1000, 1000, False), (1000, 999, 1000, True), (7, 8, 8, True), (1, 8, 8, True),
                                       (4097, 4096, 4096, False), (4096, 4097, 1024, True), (129, 72, 4104, False)])
def test_edges(M, N, K, b_k):
  """Sizes the 128 x 256 x 64 tile does not divide: TMA zero-fills the loads, the store is masked."""
  check_close(*run_gemm(hopper(), gemm(M, N, K, b_k=b_k)), "float16")

def test_4096_cubed():
  check_close(*run_gemm(hopper(), gemm(4096, 4096, 4096)), "float16")

@pytest.mark.parametrize("block_n,stages", [(128, 6), (64, 4)])
def test_other_tiles(block_n, stages):
  check_close(*run_gemm(hopper(), gemm(640, 384, 512, block_n=block_n, stages=stages)), "float16")

@pytest.mark.parametrize("N", [512, 333])
def test_float32_output(N):
  """fp32 accumulators stored unrounded (float2 pairs, single floats where N is odd); not yet taken by the engine."""
  g = gemm(256, N, 128, b_k=True, out_dtype="float32")
  got, ref = run_gemm(hopper(), g)
  assert np.abs(got - ref).max() <= 1e-3

def test_batched_attention_shape():
  """Q @ K^T per head: both operands K-major (K^T is K's storage read as N x K)."""
  check_close(*run_gemm(hopper(), gemm(1024, 1024, 64, a_k=True, b_k=True, batch=6)), "float16")

def test_graph_replay_rebinds_operands():
  """A CUDA graph of two launches of one wgmma program, replayed with other operands: each launch's parameter block
  re-encodes its own tensor maps, so every replay multiplies the tensors it is bound to."""
  from alloy.runtime.cuda.graph import CUDAGraph
  from alloy.runtime.cuda.launch_list import CUDALaunchList
  dev = hopper()
  from alloy.runtime.cuda.tensor_map import build_wgmma
  g = gemm(256, 256, 192)
  prog = build_wgmma(dev, g)
  sets = [operands(g, seed) for seed in range(4)]
  launch = lambda s: (prog, [s[0].handle, s[1].handle, s[2].handle], (), prog.kernel.grid, prog.kernel.block)
  for replay in (CUDAGraph, CUDALaunchList):
    runner = replay([launch(sets[0]), launch(sets[1])], dev)
    runner()
    runner([[s.handle for s in sets[2][:3]], [s.handle for s in sets[3][:3]]])
    for out, _, _, ref in sets:
      check_close(from_storage(out.numpy(), g.dtype).reshape(ref.shape), ref, g.dtype)
      out.copyin(np.zeros(out.size, np.float16))
