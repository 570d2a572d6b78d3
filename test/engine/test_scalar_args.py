"""Python scalars reach kernels as arguments: a loop over values compiles a handful of kernels, keeps its memory flat
and computes every value right, on every device; @jit replays take new number arguments without capturing again;
loaded programs are bounded, and unloaded when they go."""
import gc, os
import numpy as np, pytest
from alloy import Tensor, jit, JitError
from alloy.engine import compiled
from alloy.runtime import device as device_module
from alloy.runtime.registry import get_device
from alloy.schedule import fusion
from conftest import assert_close

def _rss_mib() -> float:
  with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def _kernels() -> int: return compiled.compiles   # kernels through the stages so far

def test_scalar_loop_compiles_a_handful_of_kernels(device):
  x = Tensor(np.ones(16, np.float32), device=device)
  start = _kernels()
  for i in range(2500):
    assert ((x + i) * 2).sum().item() == (1 + i) * 2 * 16
    if i == 50: assert _kernels() - start <= 6, "a kernel per value"
    if i == 500: rss = _rss_mib()
  assert _kernels() - start <= 6
  assert _rss_mib() - rss < 8, "memory grows with the number of values"

def test_constant_tensors_and_full(device):
  x = Tensor(np.arange(8, dtype=np.float32), device=device)
  start = _kernels()
  for k in range(40):
    v = 0.25 + k / 8
    assert_close((x * Tensor(v, device=device)).numpy(), np.arange(8, dtype=np.float32) * np.float32(v))
    assert_close(Tensor.full((4,), v, device=device).numpy(), np.full(4, v, np.float32))
    assert_close(Tensor.full((3,), k + 2, dtype="int32", device=device).numpy(), np.full(3, k + 2, np.int32))
    lr = 1e-3 * (k + 2)
    assert_close((x - x * lr).numpy(), np.arange(8, dtype=np.float32) * (1 - np.float32(lr)))
  assert _kernels() - start <= 16

def test_64_bit_scalars(device):
  dtypes = ["int64", "float64"] if device == "CPU" else ["int64"]   # Metal has no float64
  start = _kernels()
  for name in dtypes:
    base = np.arange(6).astype(name)
    x = Tensor(base, device=device)
    for v in (3, 2**40 + 7, -(2**33) - 5, 2**62) if name == "int64" else (2.5, 1e300, -1e-300, 1 / 3):
      assert_close((x + v).numpy(), base + np.asarray(v).astype(name), dtype=name)
      assert_close((x * v).numpy(), base * np.asarray(v).astype(name), dtype=name)
  assert _kernels() - start <= 2 * len(dtypes)   # one kernel per op and dtype, whatever the values

def test_small_ints_and_half_floats(device):
  start = _kernels()
  for name, values in (("int8", (-7, 3, 100)), ("uint8", (3, 200, 17)), ("int16", (-300, 1234, 7)), ("float16", (0.1, 3.5, 1e4))):
    base = np.arange(4).astype(name)
    x = Tensor(base, device=device)
    for v in values:
      want = (base + np.asarray(v).astype(name)).astype(name)
      assert_close((x + v).numpy(), want, dtype=name)
  assert _kernels() - start <= 4

def test_values_that_shape_the_code_stay_literal(device):
  # shift amounts, integer divisors and integral exponents stay in the code (a kernel per value); 0, 1 and -1 too
  x = Tensor(np.arange(1, 14, dtype=np.int32), device=device)
  a = np.arange(1, 14, dtype=np.int32)
  start = _kernels()
  for k in (5, 6, 7):
    assert_close((x << k).numpy(), a << k)
    assert_close((x // k).numpy(), a // k)
    assert_close((x % k).numpy(), a % k)
  assert _kernels() - start == 9
  f = Tensor(np.linspace(0.5, 2, 13).astype(np.float32), device=device)
  start = _kernels()
  for p in (5, 6, 0.5, 1.5, 2.5):
    assert_close((f ** p).numpy(), np.linspace(0.5, 2, 13).astype(np.float32) ** np.float32(p), rtol=1e-5)
  assert _kernels() - start == 3   # x**5 and x**6, and one for every other exponent

def test_kernel_with_more_constants_than_arguments(device):
  # past MAX_KERNEL_VARS the constants stay literal: the schedule cache tells such graphs apart by their values
  x = Tensor(np.ones(4, np.float32), device=device)
  n = fusion.MAX_KERNEL_VARS + 3
  for base in (2.0, 5.0, 9.0):
    t = x
    for k in range(n): t = t * (base + k)
    assert_close(t.numpy(), np.full(4, np.prod([base + k for k in range(n)]), np.float32), rtol=1e-5)

def test_jit_replays_new_number_arguments(device):
  w = np.linspace(-1, 1, 8).astype(np.float32)
  for graph in (True, False):   # graphs, and launch by launch (JIT=2)
    @jit(graph=graph)
    def step(x, lr, t):
      return x - lr * (1 - 0.9 ** t) * x.exp(), (x * t).sum()
    x = Tensor(w, device=device)
    step(x, 0.1, 1); step(x, 0.1, 1)
    replay, start = step.replay, _kernels()
    for t in range(2, 12):
      lr = 0.01 * t
      a, b = step(x, lr, t)
      assert_close(a.numpy(), w - np.float32(lr * (1 - 0.9 ** t)) * np.exp(w))
      assert_close(b.numpy(), np.float32((w * t).sum()), rtol=1e-5)
    assert step.replay is replay and _kernels() == start   # replayed: no capture, no compile

def test_jit_numbers_through_constants_and_results():
  @jit
  def f(x, v, n):
    return x + Tensor.full(x.shape, v) * Tensor(n, dtype="float32"), v * 2
  x = Tensor(np.zeros(3, np.float32))
  f(x, 1.5, 2); f(x, 1.5, 2)
  out, twice = f(x, 0.5, 7)
  assert_close(out.numpy(), np.full(3, 3.5, np.float32))
  assert twice == 1.0 and type(twice) is float   # a number returned is computed for the call's arguments

def test_jit_baked_numbers_raise():
  @jit
  def f(x, n, flag):
    y = x.reshape(n, -1) * 2   # n is a size: baked
    return y * 3 if flag else y
  x = Tensor(np.ones(6, np.float32))
  f(x, 2, True); f(x, 2, True)
  assert_close(f(x, 2, True).numpy(), np.full((2, 3), 6, np.float32))
  with pytest.raises(JitError, match=r"argument n is 3, captured with 2; .*\(an index or size\)"): f(x, 3, True)
  with pytest.raises(JitError, match=r"argument flag is False, captured with True; .*\(bool\(\) or a condition\)"): f(x, 2, False)

def test_program_cache_is_bounded(device, monkeypatch):
  monkeypatch.setattr(device_module, "PROGRAM_CACHE_SIZE", 6)
  monkeypatch.setattr(compiled, "COMPILED_CACHE_SIZE", 6)
  dev = get_device(device)
  compiled._compiled.clear()
  dev._programs.clear()
  gc.collect()   # earlier tests' garbage (a jitted function in a cycle) may still hold loaded programs
  before, peak = _kernels(), 0
  for size in list(range(3, 30)) + list(range(3, 8)):   # more kernels than the bound, then the first few again
    x = Tensor(np.arange(size, dtype=np.float32), device=device)
    assert_close((x * 3 + 1).exp().numpy(), np.exp(np.arange(size, dtype=np.float32) * 3 + 1), rtol=1e-5)
    peak = max(peak, dev.loaded_programs())
  assert _kernels() - before >= 32   # every kernel compiled, the evicted ones again (from the disk cache)
  assert len(compiled._compiled) <= 6 and len(dev._programs) <= 6
  assert peak <= 14   # both caches' programs (the queue's own on the CPU), not every kernel
  if device == "CPU":
    from alloy.runtime.cpu import program
    dev.synchronize()
    assert program.open_libraries <= 14   # the evicted kernels' libraries were closed

def test_kernel_with_many_buffers_and_scalars(device):
  # 28 inputs and as many scalars: beyond Metal's bindings for one each (they share one) and the CPU queue's limit
  # (called on this thread); under @jit every scalar is a number argument's, past MAX_KERNEL_VARS
  xs = [np.full(4, k + 1, np.float32) for k in range(28)]
  ts = [Tensor(a, device=device) for a in xs]
  def f(ts, c):
    out = ts[0] * c
    for k, t in enumerate(ts[1:]): out = out + t * (c + k + 2)
    return out, (out * c).sum()   # two kernels: a graph of two where there are graphs
  want = lambda c: sum(a * np.float32(c + (k + 1 if k else 0)) for k, a in enumerate(xs))
  def check(out, c):
    assert_close(out[0].numpy(), want(c), rtol=1e-5)
    assert_close(out[1].numpy(), (want(c) * np.float32(c)).sum(), rtol=1e-5)
  for c in (0.5, 2.5): check(f(ts, c), c)
  for graph in (True, False):
    g = jit(f, graph=graph)
    for c in (0.5, 0.5, 1.5, 3.25): check(g(ts, c), c)

def test_jit_numbers_used_as_plain_numbers_still_work():
  # uses the trace cannot follow give the plain value (baked) and run as without @jit
  import math
  @jit
  def f(x, lr, n):
    y = x[n - 1] + Tensor([lr, 2 * lr]).sum() + x.sum(n - 2) * math.sqrt(lr)
    return y * float(lr).is_integer() + y * divmod(n, 2)[1], f"{lr:.1f}"
  x = Tensor(np.ones((2, 2), np.float32))
  plain = f.fn(x, 0.25, 2)[0].numpy()
  for _ in range(3): out, text = f(x, 0.25, 2)
  assert_close(out.numpy(), plain)
  assert text == "0.2" and f.replay.baked.keys() == {0, 1}
