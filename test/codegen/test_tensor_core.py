"""TENSOR_CORE (codegen/tensor_core.py): the validator's refusals, the rendered CUDA C (compiled by NVRTC where
cuda-bindings is installed, no GPU needed), the heuristics' choice, and on a CUDA GPU the results against NumPy in
float64 for sizes the tiles do not divide, transposed and batched operands, and fused epilogues."""
import math
import numpy as np
import pytest
import alloy
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.ir import symbolic as sym
from alloy.schedule.fusion import schedule
from alloy.codegen.lower import lower
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import check
from alloy.codegen.transforms import OptKind, tensor_core, stage, upcast
from alloy.codegen import tensor_core as tc
from alloy.renderer.cuda import CUDARenderer
from alloy.runtime.registry import device_available

TC_CAPS = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=(tc.MMA_SYNC,), dynamic_shared_bytes=227 << 10)   # an H200's
cuda = pytest.mark.skipif(not device_available("CUDA"), reason="no CUDA device")

def _ast(t: Tensor):
  return [item[1] for item in schedule([t.node])][-1]

def _half(rng, *shape, dtype=np.float16):
  return Tensor(rng.uniform(-1, 1, shape).astype(dtype))

def test_validator(rng):
  a, b = _half(rng, 64, 48), _half(rng, 48, 40)
  ast = _ast(a @ b)
  assert check(ast, TC_CAPS, [tensor_core(1, 0)]) is None
  assert "shared memory" in check(ast, TC_CAPS, [tensor_core(1, 0), stage(1, 15)])   # 15 stages of 128x128x32: 240 KiB
  assert check(ast, TC_CAPS, [tensor_core(1, 2), stage(1, 5)]) is None        # 5 of 64x64x32: 40 KiB
  assert "shared memory" in check(ast, DeviceCaps(threads=True, tensor_cores=(tc.MMA_SYNC,)), [tensor_core(1, 0)])  # 64 KiB, 48 allowed
  assert "no other transform" in check(ast, TC_CAPS, [tensor_core(1, 0), upcast(0, 4)])
  assert "not the matmul's N axis" in check(ast, TC_CAPS, [tensor_core(0, 0)])
  assert "no tile" in check(ast, TC_CAPS, [tensor_core(1, len(tc.TILES))])
  assert "no mma.sync" in check(ast, DeviceCaps(threads=True), [tensor_core(1, 0)])
  assert "GPU only" in check(ast, DeviceCaps(threads=False), [tensor_core(1, 0)])
  f32 = _ast(a.float().contiguous().realize() @ b.float().contiguous().realize())
  assert "set_float32_matmul_precision('high')" in check(f32, TC_CAPS, [tensor_core(1, 0)])
  mixed = _ast(a @ b.float().contiguous().realize())
  assert "two float16 or two bfloat16" in check(mixed, TC_CAPS, [tensor_core(1, 0)])
  assert "not a matmul" in check(_ast(a.float().sum(1)), TC_CAPS, [tensor_core(0, 0)])

def test_tile_table():
  for t in tc.TILES:
    if t.instruction == tc.SIMT_F32: assert t.wm % 4 == 0 and t.wn % 4 == 0 and t.bk % 4 == 0 and t.threads % 32 == 0
    else: assert t.wm % 16 == 0 and t.wn % 16 == 0 and t.bk % 16 == 0
    assert t.bm % t.wm == 0 and t.bn % t.wn == 0
    assert t.threads <= 1024 and t.shared_bytes() <= 227 << 10 and len(tc.accumulator_index(t, sym.Var("l", 0, t.threads - 1))) == t.accumulators

def test_accumulators_cover_the_tile():
  # every (row, column) of a threadgroup's tile belongs to exactly one thread's accumulator (of the epilogue's threads:
  # a WGMMA tile's producer warpgroup holds none)
  for t in tc.TILES:
    seen, held = set(), 0
    for lane in range(t.threads - t.epilogue_threads, t.threads):
      for r, c in tc.accumulator_index(t, sym.Const(lane)):
        seen.add((r.v, c.v))
        held += 1
    assert held == len(seen) == t.bm * t.bn and seen == {(r, c) for r in range(t.bm) for c in range(t.bn)}

def test_heuristics_pick_it(rng):
  big = _ast(_half(rng, 2048, 128) @ _half(rng, 128, 2048))
  assert choose_opts(big, TC_CAPS) == [tensor_core(1, 0)]
  short_k = _ast(_half(rng, 2048, 64) @ _half(rng, 64, 2048))
  assert choose_opts(short_k, TC_CAPS) == [tensor_core(1, 19)]   # all of K in one slice
  small = _ast(_half(rng, 64, 256) @ _half(rng, 256, 64))
  assert choose_opts(small, TC_CAPS) == [tensor_core(1, 2)]
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(big, DeviceCaps(threads=True)))
  vec = _ast(_half(rng, 1, 256) @ _half(rng, 256, 512))
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(vec, TC_CAPS))

CASES = {   # name: (make the inputs, the kernel's function of them)
  "plain": (lambda r: [_half(r, 96, 80), _half(r, 80, 72)], lambda a, b: a @ b),
  "bias_gelu": (lambda r: [_half(r, 100, 64), _half(r, 64, 136), _half(r, 136)], lambda a, b, c: (a @ b + c).gelu()),
  "batched_t": (lambda r: [_half(r, 3, 40, 24), _half(r, 3, 56, 24)], lambda a, b: a @ b.transpose(1, 2)),
}

def _gelu(x):
  from math import erf
  return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))

CUDA_TILES = [k for k, t in enumerate(tc.TILES) if t.instruction == tc.MMA_SYNC]   # (the rest are Metal's)

@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("arg", CUDA_TILES)
def test_source_compiles(rng, name, arg):
  pytest.importorskip("cuda.bindings")
  from alloy.runtime.cuda.compiler import CUDACompiler
  make, fn = CASES[name]
  ast = _ast(fn(*make(rng)))
  n_axis = len(ast.shape) - 1
  prog = lower(ast, TC_CAPS, [tensor_core(n_axis, arg)])
  src = CUDARenderer().render(prog)
  assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix" in src and "cp.async" in src
  try: CUDACompiler("sm_90").compile(src)
  except Exception as e:
    if "cannot open source file \"cuda_fp16.h\"" in str(e): pytest.skip("no CUDA headers")   # (the error quotes the source)
    raise

SIMT_CAPS = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=(tc.SIMT_F32,), dynamic_shared_bytes=227 << 10)

def test_simt_heuristics_and_validator(rng):
  f = lambda *s: Tensor(rng.uniform(-1, 1, s).astype(np.float32))
  big, small = _ast(f(2048, 256) @ f(256, 2048)), _ast(f(200, 96) @ f(96, 136))
  assert choose_opts(big, SIMT_CAPS) == [tensor_core(1, tc.SIMT_TILES[1])]   # 16 x 16 threadgroups: not three waves of 256 x 128
  assert choose_opts(_ast(f(4096, 64) @ f(64, 4096)), SIMT_CAPS) == [tensor_core(1, tc.SIMT_TILES[0])]
  assert choose_opts(small, SIMT_CAPS) == [tensor_core(1, tc.SIMT_TILES[3])]
  decode = _ast(f(32, 768) @ f(768, 3072))   # a decode step's few rows: not the tile (SIMT_MIN_ROWS)
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(decode, SIMT_CAPS))
  assert "takes two float32" in check(_ast(_half(rng, 64, 48) @ _half(rng, 48, 40)), SIMT_CAPS, [tensor_core(1, tc.SIMT_TILES[0])])
  assert "double-buffers" in check(big, SIMT_CAPS, [tensor_core(1, tc.SIMT_TILES[0]), stage(1, 3)])
  # with mma.sync too, a float32 matmul takes the float32 tile while matmuls stay exact, tf32 where allowed
  both = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=(tc.SIMT_F32, tc.MMA_SYNC), dynamic_shared_bytes=227 << 10)
  assert choose_opts(big, both) == [tensor_core(1, tc.SIMT_TILES[1])]
  alloy.set_float32_matmul_precision("high")
  try: assert choose_opts(big, both) == [tensor_core(1, 0)]
  finally: alloy.set_float32_matmul_precision("highest")

def _f32(*shapes): return lambda r: [r.uniform(-1, 1, s).astype(np.float32) for s in shapes]

SIMT_CASES = {   # name: (make the inputs, the kernel's function of them, NumPy's)
  "nn_bias_relu": (_f32((100, 64), (64, 136), (136,)), lambda a, b, c: (a @ b + c).relu(), lambda a, b, c: np.maximum(a @ b + c, 0)),
  "tn_unaligned": (_f32((37, 130), (37, 50)), lambda a, b: a.T @ b, lambda a, b: a.T @ b),
  "batched_nt": (_f32((3, 80, 24), (3, 56, 24)), lambda a, b: a @ b.transpose(1, 2), lambda a, b: a @ b.transpose(0, 2, 1)),
}

@pytest.mark.parametrize("name", list(SIMT_CASES))
@pytest.mark.parametrize("arg", tc.SIMT_TILES)
def test_simt_source_compiles(rng, name, arg):
  pytest.importorskip("cuda.bindings")
  from alloy.runtime.cuda.compiler import CUDACompiler
  make, fn, _ = SIMT_CASES[name]
  ast = _ast(fn(*[Tensor(x) for x in make(rng)]))
  src = CUDARenderer().render(lower(ast, SIMT_CAPS, [tensor_core(len(ast.shape) - 1, arg)]))
  assert "alloy_simt::simt_tile<" in src and "mma" not in src
  CUDACompiler("sm_90").compile(src)

# ---- on the GPU: against NumPy in float64

def _opts_of_last_matmul():
  from alloy.engine import compiled
  for ck in reversed(list(compiled._compiled.values())):
    if any(o.kind is OptKind.TENSOR_CORE for o in ck.meta.opts if hasattr(o, "kind")): return ck
  return None

SIZES = [(1, 7, 1000), (7, 1000, 1), (1000, 1, 7), (1000, 4097, 64), (4097, 64, 1000), (64, 1000, 4097), (16, 16, 16),
         (129, 257, 33)]

def _laid_out_matmul(M: int, N: int, K: int, layout: str, dtype) -> tuple:
  """(the lazy CUDA matmul, NumPy's float64 result) of an M x K and a K x N operand, each stored as itself ("n") or
  transposed ("t": read through a .T view)."""
  rng = np.random.default_rng(M * 7 + N * 3 + K)
  a = rng.uniform(-1, 1, (M, K) if layout[0] == "n" else (K, M)).astype(dtype)
  b = rng.uniform(-1, 1, (K, N) if layout[1] == "n" else (N, K)).astype(dtype)
  A, B = Tensor(a, device="CUDA").realize(), Tensor(b, device="CUDA").realize()
  a64, b64 = a.astype(np.float64), b.astype(np.float64)
  want = (a64 if layout[0] == "n" else a64.T) @ (b64 if layout[1] == "n" else b64.T)
  return (A if layout[0] == "n" else A.T) @ (B if layout[1] == "n" else B.T), want

@cuda
@pytest.mark.parametrize("M, N, K", SIZES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
def test_gpu_sizes(M, N, K, layout):
  from alloy.runtime.registry import get_device
  out, want = _laid_out_matmul(M, N, K, layout, np.float16)
  tol = dict(atol=2e-3 * math.sqrt(K) + 1e-3, rtol=1e-2)
  ((_, ast, inputs, _),) = schedule([out.node])
  caps, n_axis = get_device("CUDA").caps, len(ast.shape) - 1
  for arg in CUDA_TILES if layout == "nn" else (0,):   # every CUDA tile, forced
    if (why := check(ast, caps, [tensor_core(n_axis, arg)])) is not None:
      assert min(M, N) == 1, why   # a vector: no N axis to name
      continue
    got = _run(ast, [n.arg for n in inputs[1:]], [tensor_core(n_axis, arg)])
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)
  np.testing.assert_allclose(out.numpy().astype(np.float64), want, **tol)   # the heuristics' kernel

SIMT_SIZES = [(1, 7, 1000), (1000, 1, 7), (1000, 4097, 64), (4097, 64, 1000), (64, 1000, 4097), (129, 257, 33), (130, 66, 35)]

@cuda
@pytest.mark.parametrize("M, N, K", SIMT_SIZES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_gpu_simt_sizes(M, N, K, layout):
  """Every float32 tile, forced, and the heuristics' kernel, against float64: exact float32 (no tf32) tolerances."""
  from alloy.runtime.registry import get_device
  out, want = _laid_out_matmul(M, N, K, layout, np.float32)
  tol = dict(atol=1e-5 * math.sqrt(K) + 1e-6, rtol=1e-4)
  ((_, ast, inputs, _),) = schedule([out.node])
  caps, n_axis = get_device("CUDA").caps, len(ast.shape) - 1
  for arg in tc.SIMT_TILES:
    if (why := check(ast, caps, [tensor_core(n_axis, arg)])) is not None:
      assert min(M, N) == 1, why
      continue
    got = _run(ast, [n.arg for n in inputs[1:]], [tensor_core(n_axis, arg)])
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)
  np.testing.assert_allclose(out.numpy().astype(np.float64), want, **tol)

@cuda
def test_gpu_simt_epilogues_and_batches():
  r = np.random.default_rng(5)
  for name, (make, fn, ref) in SIMT_CASES.items():
    arrays = make(r)
    got = fn(*[Tensor(x, device="CUDA").realize() for x in arrays]).numpy().astype(np.float64)
    want = ref(*[x.astype(np.float64) for x in arrays])
    ck = _opts_of_last_matmul()
    assert ck is not None and "alloy_simt" in ck.source, name
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4, err_msg=name)

def _run(ast, buffers, opts):
  from alloy.runtime.registry import get_device
  from alloy.engine.search_worker import time_kernel
  dev = get_device("CUDA")
  prog = lower(ast, dev.caps, opts)
  binary = dev.compiler.compile_cached(dev.renderer.render(prog))
  kernel = (prog.meta.name, binary, prog.meta.global_size, prog.meta.local_size)
  _, out = time_kernel("CUDA", buffers, (ast.root.dtype.name, math.prod(ast.root.shape)), kernel, (), 0, math.inf)
  return np.frombuffer(out, ast.root.dtype.np).reshape(ast.root.shape)

@cuda
@pytest.mark.parametrize("name", ["bias_gelu", "relu_residual", "bf16", "batched_attention", "broadcast_weight", "cast_f32"])
def test_gpu_epilogues_and_batches(name):
  r = np.random.default_rng(3)
  h = lambda *s: r.uniform(-1, 1, s).astype(np.float16)
  if name == "bias_gelu":
    a, b, c = h(200, 96), h(96, 136), h(136)
    fn, ref = (lambda a, b, c: (a @ b + c).gelu()), (lambda a, b, c: _gelu((a @ b).astype(np.float16).astype(np.float64) + c))
    arrays = [a, b, c]
  elif name == "relu_residual":
    a, b, c = h(130, 64), h(64, 72), h(130, 72)
    fn, ref = (lambda a, b, c: (a @ b).relu() + c), (lambda a, b, c: np.maximum(a @ b, 0) + c)
    arrays = [a, b, c]
  elif name == "bf16":
    a, b = r.uniform(-1, 1, (96, 200)).astype(np.float32), r.uniform(-1, 1, (200, 80)).astype(np.float32)
    A, B = Tensor(a, device="CUDA").bfloat16().realize(), Tensor(b, device="CUDA").bfloat16().realize()
    got = (A @ B).float().numpy()
    ck = _opts_of_last_matmul()
    a64, b64 = A.float().numpy().astype(np.float64), B.float().numpy().astype(np.float64)
    np.testing.assert_allclose(got, a64 @ b64, atol=0.15, rtol=2e-2)
    assert ck is not None and "mma" in ck.source
    return
  elif name == "batched_attention":
    q, k = h(8, 256, 64), h(8, 256, 64)
    fn, ref = (lambda q, k: q @ k.transpose(1, 2)), (lambda q, k: q @ k.transpose(0, 2, 1))
    arrays = [q, k]
  elif name == "broadcast_weight":
    x, w = h(3, 50, 64), h(64, 40)
    fn, ref = (lambda x, w: x @ w), (lambda x, w: x @ w)
    arrays = [x, w]
  else:
    a, b = h(64, 64), h(64, 64)
    fn, ref = (lambda a, b: (a @ b).float() * 2), (lambda a, b: (a @ b).astype(np.float16).astype(np.float64) * 2)
    arrays = [a, b]
  tensors = [Tensor(x, device="CUDA").realize() for x in arrays]
  got = fn(*tensors).numpy().astype(np.float64)
  ck = _opts_of_last_matmul()
  assert ck is not None and ("mma.sync" in ck.source or "wgmma.mma_async" in ck.source), "the heuristics did not pick the tensor cores"
  want = ref(*[x.astype(np.float64) for x in arrays])
  np.testing.assert_allclose(got, want, atol=2e-2, rtol=1e-2)

def test_tile_origins_cover_the_grid():
  # every tile of every batch element is some threadgroup's, once, in the rastered order too
  for M, N, batch in ((4096, 2048, ()), (1000, 300, (3,)), (2048, 128, (2, 2))):
    spec = type("S", (), {"M": M, "N": N, "batch": batch})()
    t = tc.TILES[0]
    tm, tn, nb = tc.grid(spec, t)
    seen = set()
    for g in range(tm * tn * nb):
      m0, n0, b = tc.tile_origin(spec, t, sym.Const(g))
      seen.add((m0.v, n0.v, b.v))
    assert seen == {(i * t.bm, j * t.bn, b) for i in range(tm) for j in range(tn) for b in range(nb)}

@pytest.fixture
def tf32():
  alloy.set_float32_matmul_precision("high")
  yield
  alloy.set_float32_matmul_precision("highest")

def test_float32_precision_knob(rng, tf32, monkeypatch):
  a, b = _half(rng, 2048, 128, dtype=np.float32), _half(rng, 128, 2048, dtype=np.float32)
  ast = _ast(a @ b)
  # "high" allows the tf32 tile, and the heuristics take it; while tensor_core.TF32_VERIFIED is off it is refused
  monkeypatch.setattr(tc, "TF32_VERIFIED", False)
  assert "gave wrong results" in check(ast, TC_CAPS, [tensor_core(1, 0)])
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(ast, TC_CAPS))
  monkeypatch.setattr(tc, "TF32_VERIFIED", True)
  assert check(ast, TC_CAPS, [tensor_core(1, 0)]) is None and choose_opts(ast, TC_CAPS) == [tensor_core(1, 0)]
  alloy.set_float32_matmul_precision("highest")
  assert check(ast, TC_CAPS, [tensor_core(1, 0)]) is not None
  assert not any(o.kind is OptKind.TENSOR_CORE for o in choose_opts(ast, TC_CAPS))
  with pytest.raises(ValueError, match="expected one of highest, high, medium"): alloy.set_float32_matmul_precision("low")
  assert alloy.get_float32_matmul_precision() == "highest"

@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_tf32_source_compiles(rng, tf32, layout, monkeypatch):
  pytest.importorskip("cuda.bindings")
  from alloy.runtime.cuda.compiler import CUDACompiler
  a, b = _half(rng, 100, 40, dtype=np.float32), _half(rng, 40, 72, dtype=np.float32)
  a = a if layout[0] == "n" else a.T.contiguous().realize().T
  b = b if layout[1] == "n" else b.T.contiguous().realize().T
  src = CUDARenderer().render(lower(_ast(a @ b), TC_CAPS, [tensor_core(1, 0)]))
  assert "m16n8k8.row.col.f32.tf32.tf32.f32" in src and "cvt.rna.tf32.f32" in src
  try: CUDACompiler("sm_90").compile(src)
  except Exception as e:
    if "cannot open source file \"cuda_fp16.h\"" in str(e): pytest.skip("no CUDA headers")   # (the error quotes the source)
    raise

def test_source_declares_its_shared_memory(rng):
  ast = _ast(_half(rng, 256, 64) @ _half(rng, 64, 256))
  src = CUDARenderer().render(lower(ast, TC_CAPS, [tensor_core(1, 0), stage(1, 3)]))
  assert 'extern "C" __device__ int alloy_dynamic_shared_bytes = 49152;' in src   # 3 x (128 + 128) x 32 x 2 bytes
  assert "__launch_bounds__(256, 2)" in src

def test_epilogue_stage(rng):
  # a 16-bit output with N a multiple of 8 goes through the pipeline's shared memory and out in 16-byte copies
  staged = lambda src: "alloy_tile_smem" in src and "alloy_half8" in src   # the 16-byte copy out of shared memory
  render = lambda a, b, *opts: CUDARenderer().render(lower(_ast(a @ b), TC_CAPS, [tensor_core(1, 0), *opts]))
  assert staged(render(_half(rng, 200, 64), _half(rng, 64, 136)))
  assert not staged(render(_half(rng, 200, 64), _half(rng, 64, 132)))    # rows not 16-byte multiples: pair stores
  assert not staged(CUDARenderer().render(lower(_ast((_half(rng, 64, 64) @ _half(rng, 64, 64)).float()), TC_CAPS, [tensor_core(1, 0)])))
  assert not staged(CUDARenderer().render(lower(_ast(_half(rng, 256, 64) @ _half(rng, 64, 256)), TC_CAPS, [tensor_core(1, 3), stage(1, 2)])))
  # (two stages of 128 x 256 x 32 hold 48 KiB; the staged tile needs 66)

@cuda
def test_gpu_jit_graph_replay():
  # a captured tensor-core kernel replays as a CUDA graph node, with its dynamic shared memory
  r = np.random.default_rng(5)
  a, b = r.uniform(-1, 1, (256, 128)).astype(np.float16), r.uniform(-1, 1, (128, 192)).astype(np.float16)
  step = alloy.jit(lambda x, y: (x @ y).relu())
  for _ in range(4):
    got = step(Tensor(a, device="CUDA"), Tensor(b, device="CUDA")).numpy().astype(np.float64)
    np.testing.assert_allclose(got, np.maximum(a.astype(np.float64) @ b, 0), atol=2e-2, rtol=1e-2)
  assert _opts_of_last_matmul() is not None

@cuda
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("M, N, K", [(1000, 4097, 64), (129, 257, 1000), (128, 256, 96)])
def test_gpu_tf32(tf32, monkeypatch, layout, M, N, K):
  from alloy.runtime.registry import get_device
  out, want = _laid_out_matmul(M, N, K, layout, np.float32)
  ((_, ast, inputs, _),) = schedule([out.node])
  got = _run(ast, [n.arg for n in inputs[1:]], [tensor_core(len(ast.shape) - 1, 0)])   # forced: the heuristics' may differ
  assert check(ast, get_device("CUDA").caps, [tensor_core(len(ast.shape) - 1, 0)]) is None
  np.testing.assert_allclose(got.astype(np.float64), want, atol=2e-3 * math.sqrt(K), rtol=5e-3)   # tf32: 10-bit mantissas
