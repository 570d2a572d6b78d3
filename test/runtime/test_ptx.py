"""The PTX renderer. Rendering and assembling (nvJitLink) need no GPU; values are checked where a CUDA GPU is present,
against NumPy and against the CUDA C renderer, which the PTX renderer must agree with op for op."""
import collections
import math
import numpy as np
import pytest

pytest.importorskip("cuda.bindings")
from alloy import Tensor
from alloy.codegen.lower import lower
from alloy.engine import compiled
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer.ptx import PTXFirstRenderer, PTXRenderer, Unsupported, is_ptx
from alloy.runtime.cuda import is_available
from alloy.runtime.cuda.compiler import CUDACompiler, nvjitlink_version
from alloy.runtime.device import CompileError
from alloy.caps import DeviceCaps

def _assembler():
  try: c = CUDACompiler("sm_90")
  except Exception as e: pytest.skip(f"no NVRTC: {e}")
  if not c.assembles_ptx: pytest.skip("no nvJitLink to assemble PTX")
  return c

GPU_CAPS = DeviceCaps(threads=True)
LOOPS = DeviceCaps(threads=True, codegen_loops=True)   # the CUDA device's: codegen unrolls and steps pointers

def _programs(build, device="CPU", caps=GPU_CAPS):
  """The linear programs (GPU launch shape) of the kernels that realizing build() compiles on `device`."""
  before = set(compiled._compiled)
  build().realize()
  return [lower(ck.ast, caps) for key, ck in compiled._compiled.items() if key not in before]

def test_renders_and_assembles():
  c = _assembler()
  x = Tensor(np.random.default_rng(0).uniform(-2, 2, (300, 70)).astype(np.float32), device="CPU")
  progs = _programs(lambda: (x * 1.25 + 0.5).exp().softmax(1).log2().sum(0).float())
  compiled._compiled.clear()
  progs += _programs(lambda: (x * 1.25 + 0.5).exp().softmax(1).log2().sum(0).float(), caps=LOOPS)
  assert progs
  for prog in progs:
    source = PTXRenderer("sm_90").render(prog)
    assert is_ptx(source) and f".entry {prog.meta.name}(" in source
    assert len(c.compile(source)) > 0

def test_matmul_register_tile_renders_both_ways():
  # big enough for a 4x4 tile of outputs per GPU thread: 4 loads of one operand and a float4 of the other per step
  from alloy.codegen.opts import GPU_TILE
  c = _assembler()
  rng = np.random.default_rng(0)
  a, b = (Tensor(rng.uniform(-1, 1, s).astype(np.float32), device="CPU") for s in [(256, 96), (96, 320)])
  odd = Tensor(rng.uniform(-1, 1, (250, 96)).astype(np.float32), device="CPU")   # 250 rows: the last tile overlaps
  for build, threads in ((lambda: a @ b, 64 * 80), (lambda: ((a @ b) * 2).relu(), 64 * 80), (lambda: odd @ b[:, :318], 63 * 80)):
    for caps in (GPU_CAPS, LOOPS):
      compiled._compiled.clear()
      prog, = _programs(build, caps=caps)
      assert [o for o in prog.meta.opts if o[0] == "UPCAST"] == [("UPCAST", 0, GPU_TILE[0]), ("UPCAST", 1, GPU_TILE[1])]
      assert prog.meta.global_size[0] * prog.meta.local_size[0] >= threads
      for source in (PTXRenderer("sm_90").render(prog), CUDARenderer().render(prog)):
        assert len(c.compile(source)) > 0

def test_declines_what_ptx_has_no_instruction_for():
  x = Tensor(np.random.default_rng(0).uniform(-2, 2, 100), device="CPU")
  for build in (lambda: x.float().sin(), lambda: x.exp(), lambda: x.float().tan(), lambda: x.float() // 0.7):
    prog, = _programs(build)
    with pytest.raises(Unsupported): PTXRenderer("sm_90").render(prog)
    source = PTXFirstRenderer("sm_90").render(prog)   # the CUDA device's renderer falls back to CUDA C
    assert not is_ptx(source) and 'extern "C" __global__' in source

def test_bfloat16_before_sm80_is_cuda_c():
  # cvt.rn.bf16.f32 needs sm_80: an older GPU gets such kernels as CUDA C, whose bf16 header rounds in software
  x = Tensor(np.random.default_rng(0).uniform(-2, 2, 64).astype(np.float32), device="CPU")
  prog, = _programs(lambda: x.cast("bfloat16") * 3)
  with pytest.raises(Unsupported, match="sm_80"): PTXRenderer("sm_75").render(prog)
  assert is_ptx(PTXRenderer("sm_80").render(prog))
  assert not is_ptx(PTXFirstRenderer("sm_75").render(prog))

def test_assembler_error_carries_log():
  c = _assembler()
  bad = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tadd.f32 %f0, %f1, 1.0;\n\tret;\n}\n"
  with pytest.raises(CompileError, match="ptxas"): c.compile(bad)

def test_identity_names_both_compilers():
  c = _assembler()
  assert "nvrtc-" in c.identity and f"nvjitlink-{nvjitlink_version()}" in c.identity

# --- on the GPU ----------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not is_available(), reason="no CUDA device")

@pytest.fixture(scope="module")
def dev():
  from alloy.runtime.registry import get_device
  d = get_device("CUDA")
  if not isinstance(d.renderer, PTXFirstRenderer): pytest.skip("the CUDA device renders CUDA C only (ALLOY_PTX=0 or no nvJitLink)")
  return d

def _new_sources(fn):
  before = set(compiled._compiled)
  out = fn()
  return out, [ck.source for key, ck in compiled._compiled.items() if key not in before]

@gpu
def test_device_uses_ptx_and_falls_back(dev):
  x = np.random.default_rng(1).uniform(-3, 3, 5000).astype(np.float32)
  got, sources = _new_sources(lambda: (Tensor(x, device="CUDA") * 1.7).exp().numpy())
  assert sources and all(is_ptx(s) for s in sources)
  np.testing.assert_allclose(got, np.exp(x.astype(np.float64) * np.float32(1.7)), rtol=2e-6)
  got, sources = _new_sources(lambda: (Tensor(x, device="CUDA") * 1.3).sin().numpy())
  assert sources and not any(is_ptx(s) for s in sources)
  np.testing.assert_allclose(got, np.sin(x * np.float32(1.3)), rtol=1e-5, atol=1e-6)

def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Distance in float32 ulps of the correctly rounded value (want in float64)."""
  w32 = want.astype(np.float32)
  ulp = np.spacing(np.abs(w32)).astype(np.float64)
  return np.abs(got.astype(np.float64) - want) / ulp

@gpu
@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2", "tanh", "erf"])
def test_transcendentals_within_ulps(dev, fn):
  rng = np.random.default_rng(2)
  if fn in ("tanh", "erf"):   # both pieces of each, the switch between them, and where the result rounds to +-1
    x = np.concatenate([rng.uniform(-6, 6, 1 << 20), rng.uniform(-1.1, 1.1, 1 << 16), rng.uniform(-1e-3, 1e-3, 1 << 14)]).astype(np.float32)
  elif fn.startswith("exp"):   # the whole range where the result is a normal float, and around 0
    top = 88.0 if fn == "exp" else 127.0
    x = np.concatenate([rng.uniform(-top * 0.99, top, 1 << 20), rng.uniform(-1e-3, 1e-3, 1 << 14)]).astype(np.float32)
  else:   # every binade of positive floats, subnormals included, and close to 1
    x = np.concatenate([rng.integers(1, 0x7F800000, 1 << 20, dtype=np.uint32).view(np.float32),
                        (1 + rng.uniform(-1e-3, 1e-3, 1 << 14)).astype(np.float32)])
  got = getattr(Tensor(x, device="CUDA"), fn)().numpy()
  want = np.vectorize(math.erf)(x.astype(np.float64)) if fn == "erf" else getattr(np, fn)(x.astype(np.float64))
  normal = np.abs(want) >= np.finfo(np.float32).tiny
  ulps = _ulps(got[normal], want[normal])
  assert ulps.max() <= 3, f"{fn}: {ulps.max():.1f} ulps at x={x[normal][ulps.argmax()]!r}"
  if fn in ("exp", "exp2"): np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=2e-45)

@gpu
def test_transcendental_special_values(dev):
  x = np.array([0.0, -0.0, 1.0, 2.0, 8.0, 0.5, np.inf, -np.inf, np.nan, -1.0, 1e-45, 3.4e38, -100.0, 100.0], np.float32)
  t = Tensor(x, device="CUDA")
  with np.errstate(all="ignore"):
    for fn in ("exp", "exp2", "log", "log2", "tanh", "erf"):
      x64 = x.astype(np.float64)
      want = (np.vectorize(math.erf)(x64) if fn == "erf" else getattr(np, fn)(x64)).astype(np.float32)
      got = getattr(t, fn)().numpy()
      exact = np.isinf(want) | np.isnan(want) | (want == 0) | (np.abs(want) == 1) | (np.isin(x, [1.0, 2.0, 8.0, 0.5]) & fn.endswith('2'))
      np.testing.assert_array_equal(got[exact], want[exact], err_msg=fn)
      np.testing.assert_allclose(got, want, rtol=3e-7, err_msg=fn)

@gpu
def test_agrees_with_cuda_c(dev, monkeypatch):
  """Integer wraparound, floor division, saturating casts, bool logic, 16-bit floats, NaN in max, shifts: the PTX
  renderer and the CUDA C renderer give the same bits."""
  rng = np.random.default_rng(3)
  f = np.concatenate([rng.uniform(-300, 300, 500), [np.nan, np.inf, -np.inf, 3e9, -3e9, 0.5, -0.5, 2.5, -0.0]]).astype(np.float32)
  i = rng.integers(-2**31, 2**31, f.size, dtype=np.int64).astype(np.int32)
  j = np.where((k := rng.integers(-9, 10, f.size).astype(np.int32)) == 0, 0, k)   # zeros too: x // 0 is 0 in both
  def programs():
    tf, ti, tj = (Tensor(v, device="CUDA") for v in (f, i, j))
    i8, u8, i16 = ti.cast("int8"), ti.cast("uint8"), ti.cast("int16")
    return [ti // tj, ti % tj, (i8 * 3 + 100), (u8 - 7) * u8, -i8, ~u8, i8 // tj.cast("int8"), i16 * i16, tf.int(),
            tf.cast("uint8"), tf.cast("int64"), tf.cast("bool"), (tf > 0) ^ (ti < 0), (tf.half() * 3.1).float(),
            (tf.cast("bfloat16") + 1.7).float(), tf.maximum(tf * -1), tf.minimum(0.0), ti << 3, ti >> 5,
            i8.abs(), tf.abs().sqrt(), tf.reciprocal(), tf.rsqrt(), tf.floor(), tf.ceil(), tf.round(), tf.trunc(),
            (tf / 3.3), tf.bitcast("int32"), ti.bitcast("float32") * 1.5, Tensor(f[:490].reshape(70, 7), device="CUDA").max(1)[0],
            (ti.cast("int64") * 1000003) // 7,
            (tf > 0).where(ti, tj), ti.cast("uint32") >> 3, tf.half().sum(), (tj > 0).any(), (tj > -9).all()]
  monkeypatch.setattr(compiled, "_compiled", collections.OrderedDict())
  ptx = [t.numpy() for t in programs()]
  monkeypatch.setattr(compiled, "_compiled", collections.OrderedDict())
  monkeypatch.setattr(dev, "renderer", CUDARenderer())
  cuda = [t.numpy() for t in programs()]
  for k, (a, b) in enumerate(zip(ptx, cuda)):
    assert a.dtype == b.dtype and a.shape == b.shape, k
    if a.dtype.kind != "f": np.testing.assert_array_equal(a, b, err_msg=f"program {k}"); continue
    np.testing.assert_array_equal(a, b, err_msg=f"program {k}")   # NaN where the other has NaN (payloads may differ)
    np.testing.assert_array_equal(np.signbit(a)[~np.isnan(a)], np.signbit(b)[~np.isnan(b)], err_msg=f"program {k}: signed zeros")
