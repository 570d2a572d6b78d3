import os, numpy as np, pytest
from alloy.runtime.registry import device_available, unsupported_dtype
from alloy.engine.watch import Watcher, watchers

def present_devices() -> list[str]:
  """CPU, CUDA and METAL where present; METAL includes the software device (it needs only a C++ compiler)."""
  if os.environ.get("DEV"): return [os.environ["DEV"].upper()]
  return [d for d in ("CPU", "CUDA", "METAL") if device_available(d)]

def expect_unsupported(device: str, dtype: str) -> bool:
  """True (after checking that making such a tensor raises the clear error) when `device` has no `dtype`."""
  if not unsupported_dtype(device, dtype): return False
  from alloy import Tensor
  with pytest.raises(TypeError, match=f"{dtype} is not supported on {device}"): Tensor([1], dtype=dtype, device=device)
  return True

def supported(device: str, dtypes) -> list:
  """The dtypes of `dtypes` that `device` has, checking the clear error for the others."""
  return [d for d in dtypes if not expect_unsupported(device, d)]

def pytest_configure(config):
  config.addinivalue_line("markers", "large: holds a tensor of more than 2^31 elements (2 GiB); runs by default, "
                                     "-m 'not large' leaves it out")

@pytest.fixture(params=present_devices())
def device(request):
  # a test parametrized over a dtype the device lacks checks the error instead of running its body
  params = request.node.callspec.params if hasattr(request.node, "callspec") else {}
  for key in ("dtype", "src"):
    if isinstance(params.get(key), str) and expect_unsupported(request.param, params[key]):
      pytest.skip(f"{request.param} has no {params[key]}; checked that it raises a clear TypeError")
  return request.param

@pytest.fixture
def rng(): return np.random.default_rng(1234)

def rand_np(rng, shape, dtype="float32", low=-2.0, high=2.0):
  """Random, non-zero data of the given numpy dtype."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_: return rng.random(shape) > 0.5
  if dtype.kind in "iu":
    lo, hi = (1, 10) if dtype.kind == "u" else (-9, 10)
    x = rng.integers(lo, hi, size=shape).astype(dtype)
    return np.where(x == 0, 1, x).astype(dtype)
  x = rng.uniform(low, high, size=shape)
  x = np.where(np.abs(x) < 0.05, 0.5, x)
  return x.astype(dtype)

TOL = {"float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}

def conv2d_3x3_np(x, w):
  """The reference conv2d, 3x3 kernel, padding 1, stride 1, in float64."""
  pad = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:])
  for i in range(x.shape[2]):
    for j in range(x.shape[3]): out[:, :, i, j] = np.einsum("nckl,ockl->no", pad[:, :, i:i + 3, j:j + 3], w)
  return out

def assert_close(got, want, dtype="float32", atol=None, rtol=None):
  a, r = TOL.get(str(dtype), (0, 0))
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
  if got.dtype.kind in "biu" and want.dtype.kind in "biu": np.testing.assert_array_equal(got, want)
  else:
    atol, rtol = atol if atol is not None else a, rtol if rtol is not None else r
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol, equal_nan=True)

# Every kernel the op suite builds is also rendered as CUDA C and compiled by NVRTC, and rendered as PTX and assembled
# by nvJitLink's ptxas, so a syntax or type error in either CUDA renderer fails CI on machines without a GPU. The ASTs
# are collected as they compile (engine/compiled.py keeps only so many kernels).
_nvrtc_checked: set = set()
_compiled_asts: dict = {}

class _Collect(Watcher):
  def compiled(self, ck): _compiled_asts.setdefault((ck.ast.root, ck.ast.n_buffers), ck.ast)
watchers.attach(_Collect())

def tensor_core_instructions(opts) -> list[str]:
  """The instructions of the TENSOR_CORE tiles among a compiled kernel's opts (KernelMeta.opts): what a launch ran on."""
  from alloy.codegen.transforms import OptKind
  from alloy.codegen.tensor_core import TILES
  return [TILES[o.arg].instruction for o in opts if getattr(o, "kind", None) is OptKind.TENSOR_CORE]

def _nvrtc_compiler():
  try:
    from alloy.runtime.cuda.compiler import CUDACompiler
    c = CUDACompiler("sm_90")
    c.compile_cached('extern "C" __global__ void probe(float* a) { a[0] = 1.0f; }')
    return c
  except Exception: return None

@pytest.fixture(autouse=True)
def no_index_error_left():
  """A test that makes a bad index on a GPU reads the result where it expects the IndexError (alloy/bounds.py): an
  unread one fails that test here, not a later test at its first read."""
  yield
  from alloy.bounds import run_deferred
  run_deferred()

@pytest.fixture(scope="module", autouse=True)
def cuda_source_compiles():
  yield
  if os.environ.get("ALLOY_SKIP_NVRTC_CHECK"): return
  fresh = [ast for key, ast in list(_compiled_asts.items()) if key not in _nvrtc_checked]
  _compiled_asts.clear()
  if not fresh: return
  compiler = _nvrtc_compiler()
  if compiler is None: return
  from alloy.codegen.lower import lower
  from alloy.runtime.cuda import CUDADevice
  from alloy.renderer.cuda import CUDARenderer
  from alloy.renderer.ptx import PTXRenderer, Unsupported
  cuda, ptx = CUDARenderer(), PTXRenderer("sm_90")
  for ast in fresh:
    _nvrtc_checked.add((ast.root, ast.n_buffers))
    if ast.root.op.name == "ATTENTION": continue   # rendered whole (renderer/cuda_attention.py), not lowered: its tests compile it
    prog = lower(ast, CUDADevice.caps)   # the CUDA device's own (16-byte vectors), less the tensor cores it adds at start
    compiler.compile_cached(cuda.render(prog))
    if compiler.assembles_ptx:
      try: source = ptx.render(prog)
      except Unsupported: continue
      compiler.compile_cached(source)
