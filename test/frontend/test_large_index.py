"""Tensors of more than 2^31 elements: index arithmetic goes 64-bit where a value on the way may pass 2^31, and stays
32-bit (faster on GPUs) everywhere else.

The tests marked `large` share one 2 GiB uint8 tensor per device (one device at a time: the fixture is module-scoped,
so pytest runs each device's tests together); `-m "not large"` leaves them out. On the software METAL device a kernel
with one thread per element of such a tensor takes ~20 s (about 10 ns a thread), so there only reductions and
small-output kernels run in full."""
import gc, re
import numpy as np, pytest
import alloy
from alloy import Tensor, dtype as dt
from alloy.caps import DeviceCaps
from alloy.codegen.lower import lower
from alloy.engine.realize import buffer_view
from alloy.ir import symbolic as sym
from alloy.renderer.c import CRenderer, parallel_range
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer.metal import MetalRenderer
from alloy.renderer.ptx import PTXRenderer
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import device_available, get_device
from alloy.schedule.fusion import schedule
from conftest import _nvrtc_compiler, present_devices

N = 2**31 + 64
MARKS = {5: 3, 2**31: 9, N - 1: 250}   # uint8 values; as int8, 250 is -6

@pytest.fixture(scope="module", params=present_devices())
def big(request):
  """(device, the large uint8 tensor): module-scoped, so pytest runs one device's tests together, one tensor alive."""
  x = np.zeros(N, np.uint8)   # calloc'd: only the marked pages are ever written
  for k, v in MARKS.items(): x[k] = v
  t = Tensor(x, device=request.param)
  del x
  yield request.param, t
  del t
  gc.collect()

def software_metal(device: str) -> bool: return device == "METAL" and getattr(get_device("METAL"), "software", False)

@pytest.mark.large
def test_max_min(big):
  _, t = big
  assert t.max().item() == 250 and t.bitcast(dt.int8).min().item() == -6

@pytest.mark.large
def test_sum_is_int64(big):
  _, t = big
  total = t.sum()
  assert total.dtype == alloy.int64 and total.item() == sum(MARKS.values())   # as torch: integers sum to int64
  assert t.bitcast(dt.int8).sum().item() == 3 + 9 - 6

@pytest.mark.large
def test_argmax(big):
  _, t = big
  assert t.argmax().item() == N - 1   # its index tensor is int64: N itself (the no-hit sentinel) passes int32

@pytest.mark.large
def test_elementwise_ends(big):
  device, t = big
  assert (t + 1)[-1].item() == 251 and (t + 1)[2**31].item() == 10   # fused: one element read at a large offset
  np.testing.assert_array_equal((t[2**31 - 2:] + 1).numpy()[[0, 2, -1]], [1, 10, 251])
  if software_metal(device): return   # one thread per element: ~20 s here
  u = (t + 1).realize()   # every element: the CPU's parallel loop and the GPU's grid pass 2^31
  picks = Tensor(np.array([0, 5, 2**31 - 1, 2**31, N - 2, N - 1]), device=device)
  assert u[picks].numpy().tolist() == [1, 4, 1, 10, 1, 251]

@pytest.mark.large
def test_2d_views(big):
  device, t = big
  m = t.reshape(64, N // 64)   # 64 rows of 33554433
  assert m.amax(1).numpy().tolist() == [3] + [0] * 62 + [250]   # 2^31 and N - 1 are both in the last row
  col = m[:, -1].numpy()   # a column: row * 33554433 passes 2^31
  assert col.shape == (64,) and col[-1] == 250 and col[:-1].max() == 0
  assert m[-1, -1].item() == 250 and m.T[-1, -1].item() == 250
  assert t[Tensor(np.array([N - 1, 5, 2**31]), device=device)].numpy().tolist() == [250, 3, 9]   # a gather past 2^31

def test_arange_past_int32(device):
  a = alloy.arange(2**31 + 5, device=device)
  assert a.dtype == alloy.int64 and a[-1].item() == 2**31 + 4
  assert a[2**31 - 1:].numpy().tolist() == [2**31 - 1 + k for k in range(6)]
  assert alloy.arange(2**40, 2**40 + 3, device=device).numpy().tolist() == [2**40, 2**40 + 1, 2**40 + 2]
  assert alloy.arange(0, 3 * 2**30, 2**30, device=device).numpy().tolist() == [0, 2**30, 2**31]

def test_arange_sum_past_int32(device):
  # no memory, 2^31 + 5 values: the reduction's loops and its split partials pass 2^31
  n = 2**31 + 5
  assert alloy.arange(n, device=device).sum().item() == n * (n - 1) // 2

@pytest.mark.skipif(not device_available("CUDA"), reason="no CUDA device here")
@pytest.mark.large
def test_cuda():
  """The large tests above in one, on CUDA by name (they run there too where it is present)."""
  x = np.zeros(N, np.uint8)
  for k, v in MARKS.items(): x[k] = v
  t = Tensor(x, device="CUDA")
  del x
  assert t.max().item() == 250 and t.sum().item() == sum(MARKS.values()) and t.argmax().item() == N - 1
  s = t.bitcast(dt.int8)
  assert s.max().item() == 9 and s.argmin().item() == N - 1
  u = (t + 1).realize()
  assert u[Tensor(np.array([0, 5, 2**31 - 1, 2**31, N - 1]), device="CUDA")].numpy().tolist() == [1, 4, 1, 10, 251]
  assert alloy.arange(2**31 + 5, device="CUDA")[-1].item() == 2**31 + 4

# ---- the rendered sources, for every language: no memory needed (a buffer allocates on first use)

CPU_CAPS, GPU_CAPS = DeviceCaps(threads=False, vector_widths=(8, 4), vector_arithmetic=True), DeviceCaps(threads=True)
METAL_CAPS = DeviceCaps(threads=True, shuffle_bytes=4)   # as the METAL device's: no 64-bit shuffles

def programs(t: Tensor, caps: DeviceCaps) -> list:
  return [lower(ast, caps) for _, ast, *_ in schedule([t.node])]

def body(source: str) -> str:
  """The kernel without the language's prelude."""
  return source[re.search(r"^(const int32_t|(static __attribute__\S+ )?void |extern \"C\"|kernel void|\.visible)", source, re.M).start():]

def lazy_big(n: int = N) -> Tensor: return Tensor(buffer_view(Buffer("CPU", n, dt.uint8), (n,)), device="CPU")

# a 64-bit loop or thread index, or one widened to 64 bits (codegen/index.py casts it: `((int64_t)(i0))`)
_VAR = r"\(?(gidx|lidx|[irjp]\d+)\)?\)"
INDEX64 = {"c": r"\(\(int64_t\)" + _VAR + r"|int64_t i\d", "cuda": r"\(\(int64_t\)" + _VAR + r"|int64_t gidx",
           "metal": r"\(\(long\)" + _VAR + r"|long gidx",
           "ptx": r"(mul|mad)\.lo\.s64|mad\.wide\.u32|setp\.\w+\.s64|(div|rem)\.s64|cvt\.u64\.u32"}

def sources(t: Tensor) -> dict:
  """language -> the bodies of t's kernels."""
  gpu = programs(t, GPU_CAPS)
  return {"c": [CRenderer().render(p) for p in programs(t, CPU_CAPS)], "cuda": [CUDARenderer().render(p) for p in gpu],
          "ptx": [PTXRenderer("sm_90").render(p) for p in gpu], "metal": [MetalRenderer().render(p) for p in programs(t, METAL_CAPS)]}

def test_small_kernels_keep_32bit_indices():
  x = Tensor(np.ones((64, 100), np.float32), device="CPU")
  # (float and int32 values only: int64 arithmetic on values looks like 64-bit index math in PTX)
  for t in (x + 1, x.sum(1), x.T.contiguous(), x.max(), x.argmax(), x[:, ::3] * 2, alloy.arange(1000, dtype="int32", device="CPU") * 3):
    for lang, srcs in sources(t).items():
      for src in srcs: assert not re.search(INDEX64[lang], body(src)), f"{lang} of a small kernel uses 64-bit indices:\n{body(src)}"
  for lang, srcs in sources(lazy_big(2**31 - 256) + 1).items():   # 2^31 - 256 elements (and GPU threads) still fit
    assert not re.search(INDEX64[lang], body(srcs[0])), lang

def test_large_kernels_use_64bit_indices():
  compiler = _nvrtc_compiler()   # NVRTC and nvJitLink take the CUDA C and PTX without a GPU too
  for t in (lazy_big() + 1, lazy_big().max(), lazy_big().argmax(), lazy_big().reshape(64, N // 64)[:, -1] * 2,
            alloy.arange(2**31 + 5, device="CPU").sum()):
    for lang, srcs in sources(t).items():
      assert any(re.search(INDEX64[lang], body(s)) for s in srcs), f"{lang}: no 64-bit index arithmetic in\n" + "\n".join(srcs)
      if compiler is not None and (lang == "cuda" or (lang == "ptx" and compiler.assembles_ptx)):
        for s in srcs: compiler.compile_cached(s)
  src = sources(lazy_big() + 1)
  assert "int64_t gidx = ((int64_t)blockIdx.x*blockDim.x+threadIdx.x);" in src["cuda"][0]   # the grid passes 2^31 threads
  assert "long gidx = ((long)gid.x*lsize.x+lid.x);" in src["metal"][0]
  if device_available("METAL"): get_device("METAL").compiler.compile_cached(src["metal"][0])   # not run here (too slow)
  assert "mad.wide.u32" in src["ptx"][0] and "setp.lt.s64" in src["ptx"][0]

def test_loops_past_int32():
  """A loop of 2^31 iterations counts in 64 bits: the CPU's inner loop of a (2, 2^31) kernel, and the same program
  through the PTX renderer (GPU programs have no such loop short of 2^41 elements; its loop code is the same)."""
  (prog,) = programs(lazy_big(2**32).reshape(2, 2**31) + 1, CPU_CAPS)
  assert "for (int64_t i1 = 0; i1 < 2147483648ll; i1++) {" in CRenderer().render(prog)
  ptx = PTXRenderer("sm_90").render(prog)
  assert re.search(r"mov\.b64 %rd\d+, 0;", ptx) and re.search(r"setp\.lt\.s64 %p\d+, %rd\d+, 2147483648;", ptx)   # the counter
  if (compiler := _nvrtc_compiler()) is not None and compiler.assembles_ptx: compiler.compile_cached(ptx)

def test_cpu_parallel_range_fits_int32():
  """The CPU's thread team splits an int32 range: a longer parallel loop counts it in chunks of iterations."""
  (prog,) = programs(lazy_big() + 1, CPU_CAPS)
  assert parallel_range(prog) == -(-N // 2) <= sym.INT32_MAX
  src = CRenderer().render(prog)
  assert "(int64_t)alloy_start*2" in src and f"const int32_t {prog.meta.name}_parallel_range = {-(-N // 2)};" in src
  (small,) = programs(lazy_big(2**31 - 1) + 1, CPU_CAPS)
  assert parallel_range(small) == 2**31 - 1 and "for (int i0 = alloy_start; i0 < alloy_end; i0++)" in CRenderer().render(small)

def test_fits_int32():
  i, r = sym.Var("i", 0, 1012), sym.Var("r", 0, 66263)
  assert sym.fits_int32(i * 2120448 + r * 8)        # 1012 * 2120448 + 66263 * 8 < 2^31
  assert not sym.fits_int32(i * 2120448 + r * 8 + 1590343)   # the split max of 2^31 + 64 elements: a sum passes 2^31
  g = sym.Var("g", 0, 511)
  # a division's result times its coefficient counts, not its operand's size times it
  assert sym.fits_int32(sym.mod(g * 256, 65536) + sym.div(g * 64, 16384) * 65536)
  assert not sym.fits_int32(sym.Const(2**31)) and sym.fits_int32(sym.Const(2**31 - 1))
  assert not sym.fits_int32(sym.Var("x", 0, 2**31))
  assert sym.fits_int32(sym.Sum((), 5)) and not sym.fits_int32(sym.Sum((), 2**31))   # PTX's stepped pointers make these
