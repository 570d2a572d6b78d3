"""runtime/collective.py: all_reduce, all_gather, reduce_scatter, broadcast between CPU:k devices (the host
implementation) and between CUDA devices through NCCL (one rank on a single GPU; two where two GPUs exist), checked
against NumPy on random non-zero data; their ordering against each device's queued work; the errors."""
import numpy as np, pytest
from alloy import dtype as dt
from alloy import Tensor
from alloy.runtime import collective
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import device_available
from alloy.realize_tensors import buffer_of

CPUS = ["CPU", "CPU:1", "CPU:2"]

def _data(rng, n, d: dt.DType):
  if d.is_float: return rng.uniform(-4, 4, n).astype(np.float32 if d is dt.bfloat16 else d.np)
  return rng.integers(-50, 50, n).astype(d.np)

def _buffers(arrays, devices, d: dt.DType):
  return [Buffer(dev, a.size, d).copyin(dt.to_numpy_array(a, d)) for a, dev in zip(arrays, devices)]

def _values(b: Buffer) -> np.ndarray:
  v = b.numpy()
  return dt.bfloat16_bits_to_float32(v) if b.dtype is dt.bfloat16 else v

def _expected(arrays, d: dt.DType, op: str):
  fold = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
  if d is dt.bfloat16: arrays = [dt.bfloat16_bits_to_float32(dt.float32_to_bfloat16_bits(a)) for a in arrays]
  acc = arrays[0].astype(np.float64 if d.is_float else d.np)
  for a in arrays[1:]: acc = fold(acc, a)
  return acc

TOL = {dt.float32: 1e-6, dt.float16: 3e-3, dt.bfloat16: 2e-2, dt.int32: 0, dt.int64: 0, dt.float64: 1e-12}

def _close(got, want, d):
  np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=TOL[d], atol=TOL[d] * 8)

def _check_all(devices, d: dt.DType, seed=0):
  rng, n, k = np.random.default_rng(seed), 24, len(devices)
  arrays = [_data(rng, n, d) for _ in devices]
  for op in ("sum", "max", "min"):
    outs = [Buffer(dev, n, d) for dev in devices]
    collective.all_reduce(_buffers(arrays, devices, d), outs, op)
    want = _expected(arrays, d, op)
    got = [_values(o) for o in outs]
    for g in got: _close(g, want, d)
    assert all(np.array_equal(g, got[0]) for g in got), "every rank gets the same bits"
  outs = [Buffer(dev, n * k, d) for dev in devices]
  collective.all_gather(_buffers(arrays, devices, d), outs)
  want = _expected([np.concatenate(arrays)], d, "sum")
  for o in outs: _close(_values(o), want, d)
  outs = [Buffer(dev, n // k, d) for dev in devices]
  collective.reduce_scatter(_buffers(arrays, devices, d), outs, "sum")
  total = _expected(arrays, d, "sum")
  for r, o in enumerate(outs): _close(_values(o), total[r * (n // k):(r + 1) * (n // k)], d)
  root = k - 1
  ins = _buffers(arrays, devices, d)
  outs = [Buffer(dev, n, d) for dev in devices]
  collective.broadcast(ins, outs, root)
  for o in outs: _close(_values(o), _expected([arrays[root]], d, "sum"), d)

@pytest.mark.parametrize("d", [dt.float32, dt.bfloat16, dt.float16, dt.int32, dt.float64], ids=lambda d: d.name)
def test_cpu_collectives(d): _check_all(CPUS, d)

def test_cpu_collectives_wait_for_queued_work():
  # the inputs are still being computed on each device's queue when the collective is called
  rng = np.random.default_rng(1)
  xs = [rng.uniform(-1, 1, (256, 256)).astype(np.float32) for _ in CPUS]
  ts = [(Tensor(x, device=dev) @ Tensor(x, device=dev)).exp().sum(1) for x, dev in zip(xs, CPUS)]
  from alloy.realize_tensors import realize
  realize(ts)   # queued, not waited for
  ins = [buffer_of(t) for t in ts]
  outs = [Buffer(dev, 256, dt.float32) for dev in CPUS]
  collective.all_reduce(ins, outs, "sum")
  want = sum(np.exp(x.astype(np.float64) @ x).sum(1) for x in xs)
  for o in outs: np.testing.assert_allclose(o.numpy(), want, rtol=1e-4)

def test_errors():
  a, b = Buffer("CPU", 4, dt.float32), Buffer("CPU:1", 4, dt.float32)
  with pytest.raises(ValueError, match="appears twice"): collective.all_reduce([a, a], [a, a])
  with pytest.raises(ValueError, match="op 'mean'"): collective.all_reduce([a, b], [a, b], "mean")
  big = [Buffer("CPU", 8, dt.float32), Buffer("CPU:1", 8, dt.float32)]
  with pytest.raises(ValueError, match="input and 8 output"): collective.all_reduce([a, b], big)
  with pytest.raises(ValueError, match="one dtype"): collective.all_reduce([a, Buffer("CPU:1", 4, dt.int32)], [a, b])
  with pytest.raises(ValueError, match="root 2"): collective.broadcast([a, b], [a, b], 2)
  if device_available("METAL"):
    m = Buffer("METAL", 4, dt.float32)
    with pytest.raises(ValueError, match="one kind"): collective.all_reduce([a, m], [a, m])
    with pytest.raises(NotImplementedError, match="no collectives on METAL"): collective.all_reduce([m], [m])

# ---- CUDA through NCCL

def _gpus() -> int:
  if not device_available("CUDA"): return 0   # (alloy.runtime.cuda needs cuda-bindings to import)
  from alloy.runtime.cuda import device_count
  return device_count()

def _nccl():
  if not _gpus(): pytest.skip("no CUDA GPU")
  from alloy.runtime.cuda import nccl
  try: nccl.library()
  except RuntimeError as e: pytest.skip(str(e))
  return nccl

@pytest.mark.parametrize("d", [dt.float32, dt.bfloat16, dt.float16, dt.int32, dt.float64], ids=lambda d: d.name)
def test_nccl_one_rank(d):
  _nccl()
  _check_all(["CUDA"], d)

def test_nccl_orders_after_queued_kernels():
  # the input comes from kernels still queued on the stream (nothing synchronized): the collective runs after them,
  # and the kernel reading its output runs after it, all on the one stream
  _nccl()
  rng = np.random.default_rng(2)
  x = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
  t = (Tensor(x, device="CUDA") @ Tensor(x, device="CUDA")).tanh()
  src = buffer_of(t)
  out = Buffer("CUDA", src.size, dt.float32)
  collective.all_reduce([src], [out], "sum")
  from alloy.engine.realize import buffer_view
  after = (Tensor(buffer_view(out, x.shape), device="CUDA") * 2).numpy()
  np.testing.assert_allclose(after, 2 * np.tanh(x.astype(np.float64) @ x), rtol=1e-3, atol=1e-3)

def test_nccl_in_cuda_graph_capture():
  # NCCL calls are legal inside stream capture: an all-reduce captured into a CUDA graph replays on new input values
  nccl = _nccl()
  from cuda.bindings import driver
  from alloy.runtime.registry import get_device
  from alloy.runtime.cuda.driver import check
  dev = get_device("CUDA")
  src, dst = Buffer("CUDA", 4096, dt.float32), Buffer("CUDA", 4096, dt.float32)
  src.copyin(np.zeros(4096, np.float32))
  collective.all_reduce([src], [dst], "sum")   # the communicator's first call sets up its buffers: not inside a capture
  dev.synchronize()
  lib, comms = nccl.library(), nccl.communicators((dev.index,))
  dev.activate()
  check(driver.cuStreamBeginCapture(dev.stream, driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture")
  nccl.check(lib.ncclGroupStart(), "ncclGroupStart")
  f32, add = nccl.NCCL_DTYPES[dt.float32], nccl.NCCL_OPS["sum"]
  nccl.check(lib.ncclAllReduce(src.handle, dst.handle, 4096, f32, add, comms[0], int(dev.stream)), "ncclAllReduce")
  nccl.check(lib.ncclGroupEnd(), "ncclGroupEnd")
  graph = check(driver.cuStreamEndCapture(dev.stream), "cuStreamEndCapture")
  exe = check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
  for seed in (3, 4):
    x = np.random.default_rng(seed).uniform(-1, 1, 4096).astype(np.float32)
    src.copyin(x)
    check(driver.cuGraphLaunch(exe, dev.stream), "cuGraphLaunch")
    dev.mark_written((dst.handle,))
    np.testing.assert_array_equal(dst.numpy(), x)
  driver.cuGraphExecDestroy(exe)
  driver.cuGraphDestroy(graph)

def test_nccl_two_gpus():
  if _gpus() < 2: pytest.skip(f"needs 2 CUDA GPUs, {_gpus()} present: the multi-rank NCCL path has not run here")
  _nccl()
  for d in (dt.float32, dt.bfloat16): _check_all(["CUDA", "CUDA:1"], d)
