"""The CUDA device. Compile tests need only NVRTC (no GPU); the rest skip when no CUDA device is present.
Run as a script (python test/runtime/test_cuda.py) for a launch-overhead and bandwidth benchmark."""
import threading, time
import numpy as np
import pytest

pytest.importorskip("cuda.bindings")
import alloy.runtime.cuda as cuda_device
from alloy.runtime.cuda import CUDADevice, is_available, driver as cuda_driver, launch_list
from alloy.runtime.cuda.compiler import CUDACompiler, nvrtc_version
from alloy.runtime.cuda.driver import RING_MASK, SUCCESS, CUDAError, check
from alloy.runtime.cuda.graph import CUDAGraph
from alloy.runtime.cuda.launch_list import CUDALaunchList, native_launch_loop
from alloy.runtime.cuda.program import CUDAProgram, ParamBlock
from alloy.runtime.cuda.tools import cuda_include_dir, disassemble
from alloy.runtime.device import CompileError, DeviceOutOfMemory

FMA4_SRC = r"""
extern "C" __global__ void __launch_bounds__(256) fma4(float4* __restrict__ out, const float4* __restrict__ a,
    const float4* __restrict__ b, const float4* __restrict__ c, int n4) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    float4 x = a[i], y = b[i], z = c[i];
    out[i] = make_float4(x.x * y.x + z.x, x.y * y.y + z.y, x.z * y.z + z.z, x.w * y.w + z.w);
  }
}
"""
SCALE_SRC = r"""
extern "C" __global__ void scale(float* out, const float* a, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * (float)k;
}
"""
SPIN_SRC = r"""
extern "C" __global__ void spin(float* out, int ms) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ms * 1000000ull);
  out[0] = 42.0f;
}
"""
CHAIN_SRC = r"""
extern "C" __global__ void add(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a[i] + b[i]; }
extern "C" __global__ void mul(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a[i] * b[i]; }
extern "C" __global__ void sub(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a[i] - b[i]; }
"""

# --- compile: no GPU needed ------------------------------------------------------------------------

@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  monkeypatch.setenv("ALLOY_CACHE", "1")
  return tmp_path

def test_compile_cubin():
  comp = CUDACompiler("sm_90")
  cubin = comp.compile(FMA4_SRC)
  assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"

def test_compile_writes_only_its_own_buffers():
  # NVRTC writes the log and the binary into the buffers it is given: an empty log is one NUL byte, and b" " * 1
  # is Python's shared b" ", which once came out as b"\x00" everywhere in the process after such a compile
  CUDACompiler("sm_90").compile(FMA4_SRC)
  assert b" "[0] == (b" " * 1)[0] == " ".encode()[0] == ord(" ") == 32

@pytest.mark.skipif(cuda_include_dir() is None, reason="no cuda_fp16.h found: install nvidia-cuda-runtime==13.0.*")
def test_compile_fp16_bf16_headers():
  src = '#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nextern "C" __global__ void k(half* a, __nv_bfloat16* b) {\n' \
        '  a[threadIdx.x] = __hadd(a[threadIdx.x], a[0]); b[threadIdx.x] = __float2bfloat16(__bfloat162float(b[0]) * 2.0f); }\n'
  assert CUDACompiler("sm_90").compile(src)[:4] == b"\x7fELF"

def test_identity():
  comp = CUDACompiler("sm_90")
  major, minor = nvrtc_version()
  assert f"nvrtc-{major}.{minor}" in comp.identity and "sm_90" in comp.identity and "-std=c++17" in comp.identity
  assert CUDACompiler("sm_80").identity != comp.identity
  with pytest.raises(ValueError): CUDACompiler("90")

def test_compile_error():
  bad = 'extern "C" __global__ void broken(float* a) {\n  a[0] = 1.0f +;\n}\n'
  with pytest.raises(CompileError) as exc:
    CUDACompiler("sm_90").compile(bad)
  assert "error" in exc.value.message and "kernel.cu(2)" in exc.value.message   # NVRTC's log, with the line
  assert exc.value.source == bad and "a[0] = 1.0f +;" in str(exc.value)

def test_compile_cached(cache_dir, monkeypatch):
  comp = CUDACompiler("sm_90")
  src = SCALE_SRC + "// cache test\n"
  first = comp.compile_cached(src)
  assert list((cache_dir / "alloy" / "compile").iterdir())
  def no_compile(_): raise AssertionError("compiled again: the disk cache missed")
  monkeypatch.setattr(comp, "compile", no_compile)
  assert comp.compile_cached(src) == first

def test_ptx_and_disassemble():
  comp = CUDACompiler("sm_90")
  ptx = comp.ptx(SCALE_SRC)
  assert ".target sm_90" in ptx and ".entry scale" in ptx
  sass = disassemble(comp.compile(SCALE_SRC))
  assert sass is None or "scale" in sass

def test_is_available_does_not_raise():
  assert is_available() in (True, False)

@pytest.mark.parametrize("native", [True, False])
def test_launch_list_encodes_once(monkeypatch, request, native):
  """CUDALaunchList against a stand-in for the driver (no GPU), with its C loop and from Python: parameters packed
  once per launch, repacked only where rebound, one writer event per call after the last launch."""
  import ctypes, types
  launched, recorded, fail = [], [], []
  def launch(func, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    ptrs = (ctypes.c_void_p * 3).from_address(params)
    values = [ctypes.c_uint64.from_address(ptrs[0]).value, ctypes.c_uint64.from_address(ptrs[1]).value, ctypes.c_int32.from_address(ptrs[2]).value]
    launched.append((func, (gx, gy, gz), (bx, by, bz), shared or 0, stream, *values))
    return 700 if func in fail else 0
  stub = types.SimpleNamespace(cuLaunchKernel=lambda *args: (launch(*args) or SUCCESS,), CUresult=int,
                               cuCtxSetCurrent=lambda ctx: (SUCCESS,), cuCtxGetCurrent=lambda: (SUCCESS, 0),
                               cuEventRecord=lambda ev, stream: recorded.append(ev) or (SUCCESS,))
  # the stand-in wherever these stages call the driver: the launch list, the device (as `cu`) and its context handling
  for module, name in ((launch_list, "driver"), (cuda_device, "cu"), (cuda_driver, "driver")): monkeypatch.setattr(module, name, stub)
  monkeypatch.setattr(cuda_driver.tls, "ctx", None, raising=False)   # the stand-in's context does not stay current
  monkeypatch.setattr(launch_list, "NATIVE_LOOP", int(native))
  if native:   # the C loop calls the stand-in through a ctypes callback in place of libcuda's cuLaunchKernel
    c_launch = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3)(launch)
    monkeypatch.setattr(launch_list, "cu_launch_kernel_address", lambda: ctypes.cast(c_launch, ctypes.c_void_p).value)
    native_launch_loop.cache_clear()
    request.addfinalizer(native_launch_loop.cache_clear)
    if native_launch_loop()[0] is None: pytest.skip(f"no native launch loop: {native_launch_loop()[1]}")
  dev = object.__new__(CUDADevice)
  dev.name, dev.ctx, dev._ctx_id, dev.stream = "CUDA", object(), 1, 99
  dev.limits = {"block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535), "shared_optin": 227 << 10}
  dev.ring, dev.ring_i, dev.writers, dev.recorded, dev.submitting = [f"event{i}" for i in range(RING_MASK + 1)], 0, {}, 0, threading.RLock()
  def program(name, func):   # what CUDAProgram.__init__ leaves, for a kernel (float* out, const float* a, int n)
    p = object.__new__(CUDAProgram)
    p.device, p.name, p.func, p.max_threads, p.static_shared, p.max_dynamic_shared, p.num_regs = dev, name, func, 1024, 0, 48 << 10, 16
    p.param_layout, p._blocks, p._gs, p._ls, p.g3, p.l3, p._shared = ((0, 8), (8, 8), (16, 4)), {}, None, None, (1, 1, 1), (1, 1, 1), 0
    p.launch_dims, p._blk, p.dynamic_shared = (func, 1, 1, 1, 1, 1, 1, 0), ParamBlock(0, 0), 0
    return p
  add, mul = program("add", 11), program("mul", 22)
  ll = CUDALaunchList([(add, [100, 200], (7,), (4,), (32,)), (mul, [300, 100], (7,), (2, 2), (16, 2))], dev)
  assert (ll.loop is not None) == native and launched == [] and recorded == []
  ll()
  assert launched == [(11, (4, 1, 1), (32, 1, 1), 0, 99, 100, 200, 7), (22, (2, 2, 1), (16, 2, 1), 0, 99, 300, 100, 7)]
  assert recorded == ["event0"] and dev.writers == {100: "event0", 300: "event0"}
  launched.clear()
  ll([None, [400, 500]])
  assert [l[5:] for l in launched] == [(100, 200, 7), (400, 500, 7)] and recorded == ["event0", "event1"]
  assert dev.writers[400] == dev.writers[100] == "event1"
  launched.clear()
  ll()   # bound as last time
  assert [l[5:] for l in launched] == [(100, 200, 7), (400, 500, 7)]
  fail.append(22)
  with pytest.raises(CUDAError, match=r"cuLaunchKernel\(mul"): ll()
  assert dev.writers[100] == "event3" and dev.writers[400] == "event2"   # the launch before the failure still counts
  with pytest.raises(ValueError, match="takes 2 buffers"): ll([[1, 2, 3], None])
  with pytest.raises(ValueError, match="threads per block"): CUDALaunchList([(add, [1, 2], (7,), (1,), (2048,))], dev)
  with pytest.raises(ValueError, match="parameters at"): CUDALaunchList([(add, [1, 2], (), (1,), (32,))], dev)

# --- GPU ----------------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not is_available(), reason="no CUDA device")

@pytest.fixture(scope="module")
def dev():
  from alloy.runtime.registry import get_device
  return get_device("CUDA")

def _load(dev, src, name):
  return dev.load(name, dev.compiler.compile_cached(src))

def _upload(dev, arr):
  h = dev.allocator.alloc(arr.nbytes)
  dev.allocator.copyin(h, memoryview(np.ascontiguousarray(arr)))
  return h

def _download(dev, h, shape, dtype=np.float32):
  out = np.empty(shape, dtype)
  dev.allocator.copyout(memoryview(out), h)
  return out

def _poisoned(dev, n):
  return _upload(dev, np.full(n, np.nan, np.float32))

@gpu
@pytest.mark.parametrize("sa,sb", [((256, 96), (96, 320)), ((3, 128, 64), (64, 256)), ((512, 1000), (1000, 132)),
                                   ((1024, 1024), (1024, 1024)), ((250, 97), (97, 330)), ((1000, 999), (999, 1001))])
def test_register_tiled_matmul(sa, sb):
  # 4x4 outputs per thread (opts.GPU_TILE), batched too, with an epilogue, sizes the tile does not divide (the last
  # tile overlaps the one before); float64 accumulates in NumPy
  from alloy import Tensor
  rng = np.random.default_rng(1)
  x, y = rng.uniform(-1, 1, sa).astype(np.float32), rng.uniform(-1, 1, sb).astype(np.float32)
  got = ((Tensor(x, device="CUDA") @ Tensor(y, device="CUDA")) * 0.5 + 1).numpy()
  np.testing.assert_allclose(got, (x.astype(np.float64) @ y) * 0.5 + 1, rtol=1e-4, atol=1e-4 * sa[-1] ** 0.5)

@gpu
def test_device_basics(dev):
  assert dev.name == "CUDA" and dev.target.startswith("sm_") and dev.graph is CUDAGraph
  assert dev.compiler.arch == dev.target and dev.program_class is CUDAProgram

@gpu
def test_elementwise_float4(dev):
  rng = np.random.default_rng()
  n = (1 << 20) + 4 * 37
  a, b, c = (rng.uniform(0.5, 2.0, n).astype(np.float32) * rng.choice([-1, 1], n).astype(np.float32) for _ in range(3))
  ha, hb, hc, ho = _upload(dev, a), _upload(dev, b), _upload(dev, c), _poisoned(dev, n)
  prog = _load(dev, FMA4_SRC, "fma4")
  assert prog.max_threads >= 256
  prog([ho, ha, hb, hc], (n // 4,), global_size=(128, 1, 1), local_size=(256, 1, 1))
  out = _download(dev, ho, n)
  ref = a.astype(np.float64) * b + c
  assert not np.isnan(out).any()
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)

@gpu
def test_scalar_args_and_timing(dev):
  rng = np.random.default_rng()
  n, m, k = 5000, 4321, 7
  a = rng.standard_normal(n).astype(np.float32)
  ha, ho = _upload(dev, a), _poisoned(dev, n)
  prog = _load(dev, SCALE_SRC, "scale")
  secs = prog([ho, ha], (m, k), global_size=((m + 127) // 128,), local_size=(128,), wait=True)
  assert isinstance(secs, float) and 0 < secs < 1
  out = _download(dev, ho, n)
  np.testing.assert_array_equal(out[:m], a[:m] * k)
  assert np.isnan(out[m:]).all()   # untouched past n
  with pytest.raises(ValueError, match="parameters"): prog([ho, ha], (m,))

@gpu
@pytest.mark.parametrize("nbytes", [1, 13, 4096, (80 << 20) + 12])
def test_copy_roundtrip(dev, nbytes):
  data = np.random.default_rng().integers(1, 255, nbytes, dtype=np.uint8)
  h = _upload(dev, data)
  back = _download(dev, h, nbytes, np.uint8)
  np.testing.assert_array_equal(back, data)
  h2 = dev.allocator.alloc(nbytes)
  dev.allocator.transfer(h2, h, nbytes)
  np.testing.assert_array_equal(_download(dev, h2, nbytes, np.uint8), data)
  dev.allocator.free(h, nbytes); dev.allocator.free(h2, nbytes)

@gpu
def test_lru_reuse(dev):
  alloc = dev.allocator
  h = alloc.alloc(12345)
  alloc.free(h, 12345)
  assert alloc.alloc(12345) == h
  alloc.free(h, 12345)

@gpu
def test_launch_limit(dev):
  prog = _load(dev, SCALE_SRC, "scale")
  h = dev.allocator.alloc(4 * 2048)
  with pytest.raises(ValueError, match="2048.*MAX_THREADS_PER_BLOCK"):
    prog([h, h], (2048, 1), global_size=(1, 1, 1), local_size=(2048, 1, 1))
  with pytest.raises(ValueError, match="grid"):
    prog([h, h], (1, 1), global_size=(1, 1 << 20, 1), local_size=(32, 1, 1))

@gpu
def test_out_of_memory(dev):
  ask = 10 << 40
  with pytest.raises(DeviceOutOfMemory) as exc:
    dev.allocator.alloc(ask)
  assert str(ask) in str(exc.value) and "free" in str(exc.value)

@gpu
def test_freed_buffers_are_kept_up_to_half_the_memory(dev, monkeypatch):
  """A freed buffer past the old 4 GiB bound comes back from the cache (GPT-2's prefill freed and allocated its
  attention scores again each call); the bound is half the GPU's memory unless ALLOY_CUDA_LRU_BYTES says otherwise."""
  from cuda.bindings import driver
  from alloy.runtime.cuda.allocator import CUDAAllocator
  total = driver.cuDeviceTotalMem(dev.cu_device)[1]
  monkeypatch.delenv("ALLOY_CUDA_LRU_BYTES", raising=False)
  assert CUDAAllocator(dev).max_cached_bytes == total // 2
  monkeypatch.setenv("ALLOY_CUDA_LRU_BYTES", str(1 << 20))
  assert CUDAAllocator(dev).max_cached_bytes == 1 << 20
  n = 5 << 30
  if total // 2 < 2 * n: pytest.skip("a GPU with less than 20 GiB")
  h = dev.allocator.alloc(n)
  dev.allocator.free(h, n)
  again = dev.allocator.alloc(n)
  dev.allocator.free(again, n)
  assert again == h

@gpu
def test_device_selection():
  from alloy.runtime.registry import get_device, canonical_device
  assert canonical_device("cuda:0") == "CUDA"
  assert get_device("CUDA:0").name == "CUDA"
  assert CUDADevice("CUDA:0").index == 0
  with pytest.raises(ValueError, match="no such CUDA device"): CUDADevice("CUDA:99")

@gpu
def test_async_launch(dev):
  spin = _load(dev, SPIN_SRC, "spin")
  other = _upload(dev, np.arange(1024, dtype=np.float32))
  target = _poisoned(dev, 1)
  spin([target], (0,))                           # first launch (lazy module loading) out of the timing
  dev.synchronize()
  t0 = time.perf_counter()
  spin([target], (500,))                         # ~0.5 s on the device
  launch = time.perf_counter() - t0
  assert launch < 0.05, f"launch blocked for {launch:.3f} s"
  t1 = time.perf_counter()
  np.testing.assert_array_equal(_download(dev, other, 1024), np.arange(1024, dtype=np.float32))   # not written by spin
  unrelated = time.perf_counter() - t1
  assert unrelated < 0.25, f"copyout of an unrelated buffer waited {unrelated:.3f} s"
  assert _download(dev, target, 1)[0] == 42.0   # waits for spin
  assert time.perf_counter() - t0 >= 0.45

@gpu
@pytest.mark.parametrize("kind", ["graph", "launch_list"])
def test_replay_batches(dev, kind):
  """A CUDAGraph and a CUDALaunchList replay the same captured launches and rebind their buffers alike."""
  rng = np.random.default_rng()
  n = 10000
  add, mul, sub = (_load(dev, CHAIN_SRC, k) for k in ("add", "mul", "sub"))
  grid, block = ((n + 255) // 256,), (256,)
  def inputs():
    a, b, c = (rng.uniform(1, 2, n).astype(np.float32) for _ in range(3))
    return (a, b, c), [_upload(dev, x) for x in (a, b, c)], [_poisoned(dev, n) for _ in range(3)]
  (a, b, c), (ha, hb, hc), (t1, t2, ho) = inputs()
  launches = [(add, [t1, ha, hb], (n,), grid, block), (mul, [t2, t1, hc], (n,), grid, block), (sub, [ho, t2, ha], (n,), grid, block)]
  g = dev.graph(launches) if kind == "graph" else dev.launch_list(launches, dev)
  assert isinstance(g, CUDAGraph if kind == "graph" else CUDALaunchList)
  ref = lambda a, b, c: (a + b) * c - a
  secs = g(wait=True)
  assert isinstance(secs, float) and secs > 0
  np.testing.assert_allclose(_download(dev, ho, n), ref(a, b, c), rtol=1e-6)
  (a2, b2, c2), (ha2, hb2, hc2), (t12, t22, ho2) = inputs()
  g([[t12, ha2, hb2], [t22, t12, hc2], [ho2, t22, ha2]])
  np.testing.assert_allclose(_download(dev, ho2, n), ref(a2, b2, c2), rtol=1e-6)
  g([None, None, [ho, t22, ha2]])               # only the last launch changes: writes the old output buffer
  np.testing.assert_allclose(_download(dev, ho, n), ref(a2, b2, c2), rtol=1e-6)
  if kind == "graph":
    m = n // 2                                    # changed scalars: only the first half of the last node runs
    ho3 = _poisoned(dev, n)
    g([None, None, [ho3, t22, ha2]], scalars_per_launch=[None, None, (m,)])
    out = _download(dev, ho3, n)
    np.testing.assert_allclose(out[:m], ref(a2, b2, c2)[:m], rtol=1e-6)
    assert np.isnan(out[m:]).all()
  else:
    spin = _load(dev, SPIN_SRC, "spin")          # copyout waits for the list's one event, not for later work
    slow = dev.launch_list([(spin, [_poisoned(dev, 1)], (300,), (1,), (1,))], dev)
    slow()                                        # ~0.3 s on the device
    t0 = time.perf_counter()
    np.testing.assert_allclose(_download(dev, ho, n), ref(a2, b2, c2), rtol=1e-6)
    assert time.perf_counter() - t0 < 0.15, "copyout of a buffer written before the spin waited for it"
    dev.synchronize()

# --- benchmark: python test/runtime/test_cuda.py ---------------------------------------------------------

def _median_time(fn, reps):
  ts = sorted(fn() for _ in range(reps))
  return ts[len(ts) // 2]

def bench():
  from cuda.bindings import driver
  from alloy.runtime.registry import get_device
  dev = get_device("CUDA")
  print(dev, dev.device_name, "sms", dev.limits["sm_count"])
  # launch overhead: host time of one asynchronous launch of an empty-ish kernel
  binary = dev.compiler.compile_cached(SCALE_SRC)
  h = dev.allocator.alloc(4 * 64)
  bufs, scal, g, l = [h, h], (0, 1), (1, 1, 1), (32, 1, 1)
  def per_launch(fn, n=10000, reps=5):
    for _ in range(1000): fn()
    dev.synchronize()
    per = []
    for _ in range(reps):
      t0 = time.perf_counter()
      for _ in range(n): fn()
      per.append((time.perf_counter() - t0) / n)
      dev.synchronize()
    return sorted(per)[reps // 2] * 1e6
  empty = dev.load("scale", binary)
  empty(bufs, scal, g, l)
  blk = empty._blocks[(2, 2)]
  call = per_launch(lambda: empty(bufs, scal, g, l))
  bare = per_launch(lambda: driver.cuLaunchKernel(empty.func, 1, 1, 1, 32, 1, 1, 0, dev.stream, blk.addr, 0))
  print(f"launch overhead: Program.__call__ {call:.2f} us, bare cuLaunchKernel {bare:.2f} us (median of 5x10000, host)")
  ev = dev.ring[0]
  print(f"bare cuEventRecord: {per_launch(lambda: driver.cuEventRecord(ev, dev.stream)):.2f} us")
  ll = dev.launch_list([(empty, bufs, scal, g, l)] * 100, dev)
  print(f"launch list of 100 launches: {per_launch(ll, 100) / 100:.2f} us per launch (host)")
  one, h1 = np.ones(1, np.float32), dev.allocator.alloc(4)
  print(f"copyin 4 bytes: {per_launch(lambda: dev.allocator.copyin(h1, memoryview(one)), 1000):.2f} us, "
        f"copyout 4 bytes: {per_launch(lambda: dev.allocator.copyout(memoryview(one), h1), 1000):.2f} us")
  # graph of 100 launches: replay host cost and device time
  gr = dev.graph([(empty, bufs, scal, g, l)] * 100)
  gr(); dev.synchronize()
  t0 = time.perf_counter()
  for _ in range(100): gr()
  dev.synchronize()
  print(f"graph of 100 tiny launches: {(time.perf_counter() - t0) / 100 * 1e6:.1f} us per replay (host+device), "
        f"device {_median_time(lambda: gr(wait=True), 20)*1e6:.1f} us")
  # bandwidth: a*b+c over 2^28 floats with float4 loads at 1024x256, vs a device-to-device copy
  n = 1 << 28
  nbytes = 4 * n
  rng = np.random.default_rng(0)
  chunk = rng.uniform(0.5, 2.0, 1 << 24).astype(np.float32)
  hs = [dev.allocator.alloc(nbytes) for _ in range(4)]
  for hh in hs[1:]:
    for off in range(0, nbytes, chunk.nbytes): dev.allocator.copyin(hh + off, memoryview(chunk))
  fma = dev.load("fma4", dev.compiler.compile_cached(FMA4_SRC))
  sass = disassemble(fma.binary)
  print("fma4 SASS:", "none (no cuobjdump/nvdisasm)" if sass is None else
        f"{sass.count('LDG.E.128')} LDG.E.128, {sass.count('STG.E.128')} STG.E.128, {fma.num_regs} registers")
  run = lambda: fma(hs, (n // 4,), (1024, 1, 1), (256, 1, 1), wait=True)
  for _ in range(3): run()
  t = _median_time(run, 20)
  print(f"fma4 2^28 floats, 1024x256 blocks: {t*1e3:.3f} ms, {4 * nbytes / t / 1e9:.0f} GB/s (3 reads + 1 write)")
  for grid in (132 * 8, 132 * 16, 8192):
    tt = _median_time(lambda: fma(hs, (n // 4,), (grid, 1, 1), (256, 1, 1), wait=True), 10)
    print(f"  fma4 at {grid}x256 blocks: {tt*1e3:.3f} ms, {4 * nbytes / tt / 1e9:.0f} GB/s")
  out = np.empty(1 << 24, np.float32)
  dev.allocator.copyout(memoryview(out), hs[0])
  np.testing.assert_allclose(out, chunk * chunk + chunk, rtol=1e-6)
  def copy():
    driver.cuEventRecord(dev.t0, dev.stream)
    driver.cuMemcpyDtoDAsync(hs[0], hs[1], nbytes, dev.stream)
    return dev.elapsed_since_t0()
  for _ in range(3): copy()
  tc = _median_time(copy, 20)
  print(f"cuMemcpyDtoD 1 GiB: {tc*1e3:.3f} ms, {2 * nbytes / tc / 1e9:.0f} GB/s (read + write)")
  print(f"kernel / copy bandwidth: {(4 * nbytes / t) / (2 * nbytes / tc):.2f}")
  # copyin / copyout host bandwidth (warm staging buffers, destination already touched)
  host = rng.uniform(0, 1, n // 4).astype(np.float32)
  back = np.ones_like(host)
  t0 = time.perf_counter(); np.copyto(back, host); tm = time.perf_counter() - t0
  for _ in range(2):
    t0 = time.perf_counter(); dev.allocator.copyin(hs[0], memoryview(host)); dev.synchronize(); ti = time.perf_counter() - t0
    t0 = time.perf_counter(); dev.allocator.copyout(memoryview(back), hs[0]); to = time.perf_counter() - t0
  assert np.array_equal(back, host)
  print(f"256 MiB: copyin {host.nbytes / ti / 1e9:.1f} GB/s, copyout {host.nbytes / to / 1e9:.1f} GB/s, "
        f"host memcpy {host.nbytes / tm / 1e9:.1f} GB/s")
  for hh in hs: dev.allocator.free(hh, nbytes)

if __name__ == "__main__":
  bench()

@gpu
def test_another_context_made_current(dev):
  # another library (tinygrad does this) creates a context of its own and makes it current on our thread:
  # uploads, launches, graphs, copyouts and synchronize must make ours current again, not fail or misuse handles
  from alloy import Tensor
  rng = np.random.default_rng()
  a = rng.uniform(0.5, 2.0, 3000).astype(np.float32)
  ta = Tensor(a, device="CUDA").realize()
  (ta * 2 + 1).numpy()   # compiled and loaded while our context is current
  from cuda.bindings import driver
  other = check(driver.cuCtxCreate(None, 0, dev.cu_device), "cuCtxCreate")
  try:
    for step in ("upload", "launch", "download", "synchronize"):
      check(driver.cuCtxSetCurrent(other), "cuCtxSetCurrent")
      if step == "upload": tb = Tensor(a * 3, device="CUDA").realize()
      elif step == "launch": tc = (ta * 2 + 1).realize()
      elif step == "download": np.testing.assert_allclose(tb.numpy(), a * 3, rtol=1e-6)
      else: dev.synchronize()
    np.testing.assert_allclose(tc.numpy(), a * 2 + 1, rtol=1e-6)
  finally:
    check(driver.cuCtxSetCurrent(dev.ctx), "cuCtxSetCurrent")
    driver.cuCtxDestroy(other)

@gpu
def test_encoder_records_one_event_per_run_and_a_read_commits_its_run(dev):
  # 100 dependent launches record at most two events (the runs of ALLOY_CUDA_COMMIT_LAUNCHES, 64), not one each;
  # reading an early output commits the open run and waits for its event only
  from alloy.runtime.cuda.encoder import COMMIT_LAUNCHES
  n = 4096
  a = np.arange(n, dtype=np.float32)
  prog = _load(dev, SCALE_SRC, "scale")
  bufs = [_upload(dev, a)] + [dev.allocator.alloc(n * 4) for _ in range(100)]
  dev.synchronize()
  recorded, committed = dev.recorded, dev.encoder.committed
  for i in range(100): prog([bufs[i + 1], bufs[i]], (n, 1), global_size=(n // 128,), local_size=(128,))
  assert dev.recorded - recorded == 100 // COMMIT_LAUNCHES and bufs[100] in dev.encoder.unrecorded
  np.testing.assert_array_equal(_download(dev, bufs[100], n), a)
  assert dev.encoder.committed - committed == -(-100 // COMMIT_LAUNCHES) and not dev.encoder.unrecorded
  assert dev.writers[bufs[100]] is not dev.writers[bufs[1]]
