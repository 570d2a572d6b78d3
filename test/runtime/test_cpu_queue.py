"""The CPU device's native queue and its thread team: order, waits, device time, buffer lifetimes, batches, scalars,
parallel kernels, fork.

Hand-written C kernels give exact control over what runs where: a launch of global size (2, 1, 1) is queued, one of
(1, 1, 1) on an idle device runs on the caller's thread; `nap` sleeps inside a kernel so a launch is still queued or
running (without using a core) while the test looks. Each kernel is a body and the entry point every kernel exports
(renderer/c.py's convention: pointers and int32 words as two arrays). A kernel that exports `<name>_parallel_range` is parallel: the
team calls it once per slice [start, end) of that range; `coverR` counts each index of its range it is called for."""
import os, signal, subprocess, sys, time
from types import SimpleNamespace
import numpy as np
import pytest
import alloy
from alloy.runtime.cpu.graph import CPUGraph, CPULaunchList
from alloy.runtime.cpu.queue import MAX_ARGS, MAX_SCALARS, RING, team_size

N = 1000
def _entry(name: str, pointers: int, words: int) -> str:
  """The entry point the queue calls (renderer/c.py's convention): pointers from a, int32 words from c, to name_body."""
  args = [f"a[{i}]" for i in range(pointers)] + [f"c[{j}]" for j in range(words)]
  return f"void {name}(void *const *a, const int32_t *c) {{ (void)a; (void)c; {name}_body({', '.join(args)}); }}\n"

SOURCE = r"""#include <stdint.h>
#include <pthread.h>
#include <time.h>
#define N 1000
static void step_body(float *out, const float *in) { for (int i = 0; i < N; i++) out[i] = in[i] * 0.5f + (float)i; }
static void nap_body(int32_t *count, const int32_t *ms) {   /* sleeps ms[0] milliseconds, then counts itself */
  struct timespec t = {ms[0] / 1000, (long)(ms[0] % 1000) * 1000000L};
  nanosleep(&t, 0);
  count[0] += 1;
}
static void nap_copy_body(float *out, const float *in, const int32_t *ms) {   /* reads in only after sleeping */
  struct timespec t = {ms[0] / 1000, (long)(ms[0] % 1000) * 1000000L};
  nanosleep(&t, 0);
  for (int i = 0; i < N; i++) out[i] = in[i];
}
static void inc_body(int32_t *count) { count[0] += 1; }
static void affine_body(float *out, const float *in, int32_t a, int32_t b) { for (int i = 0; i < N; i++) out[i] = in[i] * a + b; }
/* full: as many scalars as the native queue takes; beyond: one more (called through ctypes on the caller's thread) */
static void full_body(int32_t *out""" + "".join(f", int32_t s{i}" for i in range(MAX_SCALARS)) + ") {" + \
  "".join(f" out[{i}] = s{i};" for i in range(MAX_SCALARS)) + r""" }
static void beyond_body(int32_t *out""" + "".join(f", int32_t s{i}" for i in range(MAX_SCALARS + 1)) + ") {" + \
  "".join(f" out[{i}] = s{i};" for i in range(MAX_SCALARS + 1)) + r""" }
static void sum40_body(float *out""" + "".join(f", const float *a{i}" for i in range(40)) + r""") {
  for (int i = 0; i < N; i++) out[i] = 0""" + "".join(f" + a{i}[i]" for i in range(40)) + r""";
}
/* parallel kernels pause 100 µs per slice, so a slice is still running when the other threads wake */
static void pause100(void) { struct timespec t = {0, 100000L}; nanosleep(&t, 0); }
#define COVER(R) const int32_t cover##R##_parallel_range = R; \
  static void cover##R##_body(int32_t *hits, int32_t start, int32_t end) { pause100(); for (int32_t i = start; i < end; i++) hits[i] += 1; } \
  void cover##R(void *const *a, const int32_t *c) { cover##R##_body(a[0], c[0], c[1]); }
COVER(1) COVER(2) COVER(7) COVER(1001)
const int32_t flip_parallel_range = N;   /* reads what the slices at the other end wrote, pauses, then writes */
static void flip_body(float *out, const float *in, int32_t start, int32_t end) {
  float v[N];
  for (int i = start; i < end; i++) v[i - start] = in[N - 1 - i] * 0.5f + (float)i;
  /* a launch that began before the last one's slices all ended reads their old values: the slice at the end, which
     the next launch's first slice reads, pauses longest */
  if (end == N) { struct timespec t = {0, 2000000L}; nanosleep(&t, 0); } else pause100();
  for (int i = start; i < end; i++) out[i] = v[i - start];
}
const int32_t who_parallel_range = 64;    /* which thread ran each index */
static void who_body(int64_t *thread, int32_t start, int32_t end) {
  struct timespec t = {0, 1000000L};
  nanosleep(&t, 0);
  for (int i = start; i < end; i++) thread[i] = (int64_t)pthread_self();
}
const int32_t scale_parallel_range = N;   /* the slice comes after the kernel's own scalars */
static void scale_body(float *out, const float *in, int32_t a, int32_t b, int32_t start, int32_t end) {
  for (int i = start; i < end; i++) out[i] = in[i] * a + b;
}
const int32_t beyond_sum_parallel_range = 9;   /* beyond the native scalar limit: called here, over its whole range */
static void beyond_sum_body(int32_t *out""" + "".join(f", int32_t s{i}" for i in range(MAX_SCALARS + 1)) + r""", int32_t start, int32_t end) {
  for (int i = start; i < end; i++) out[i] = i""" + "".join(f" + s{i}" for i in range(MAX_SCALARS + 1)) + r""";
}
""" + "".join(_entry(*e) for e in [("step", 2, 0), ("nap", 2, 0), ("nap_copy", 3, 0), ("inc", 1, 0), ("affine", 2, 2), ("full", 1, MAX_SCALARS),
                                     ("beyond", 1, MAX_SCALARS + 1), ("sum40", 41, 0), ("flip", 2, 2), ("who", 1, 2), ("scale", 2, 4),
                                     ("beyond_sum", 1, MAX_SCALARS + 3)])
COVERS = (1, 2, 7, 1001)
QUEUED, HERE = (2, 1, 1), (1, 1, 1)

@pytest.fixture(scope="module")
def dev(): return alloy.get_device("CPU")

@pytest.fixture(scope="module")
def k(dev):
  binary = dev.compiler.compile_cached(SOURCE)
  names = ("step", "nap", "nap_copy", "inc", "affine", "full", "beyond", "sum40", "flip", "scale", "beyond_sum", "who")
  names += tuple(f"cover{r}" for r in COVERS)
  return SimpleNamespace(**{name: dev.load(name, binary) for name in names})

def buf(dev, values):
  values = np.ascontiguousarray(values)
  h = dev.allocator.alloc(values.nbytes)
  dev.allocator.copyin(h, memoryview(values).cast("B"))
  return h

def read(dev, h, dtype=np.float32):
  out = np.empty(h.nbytes // np.dtype(dtype).itemsize, dtype)
  dev.allocator.copyout(memoryview(out).cast("B"), h)
  return out

_pauses: dict = {}

def ms(dev, n):
  """A buffer holding n, for nap: kept for the module's life (a queued kernel reads it after the caller moved on)."""
  if n not in _pauses: _pauses[n] = buf(dev, np.array([n], np.int32))
  return _pauses[n]

def busy_until(pred, seconds):
  """Pure Python for up to `seconds`: no blocking call, nothing that releases the GIL on purpose."""
  end = time.perf_counter() + seconds
  while time.perf_counter() < end:
    if pred(): return True
  return pred()

def test_dependent_launches_run_in_order(dev, k, rng):
  x0 = rng.uniform(-1, 1, N).astype(np.float32)
  a, b = buf(dev, x0), buf(dev, np.zeros(N, np.float32))
  want = x0
  for i in range(301):   # each launch reads what the one before wrote
    k.step([b, a] if i % 2 == 0 else [a, b], global_size=QUEUED)
    want = want * np.float32(0.5) + np.arange(N, dtype=np.float32)
  np.testing.assert_array_equal(read(dev, b), want)

def test_dependent_tensor_ops(dev, rng):
  x = rng.uniform(-1, 1, (512, 256)).astype(np.float32)
  t, want = alloy.Tensor(x, device="CPU"), x.astype(np.float64)
  for _ in range(20):
    t = (t - t.mean(1, keepdim=True) * 0.5).realize()
    want = want - want.mean(1, keepdims=True) * 0.5
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-5)

def test_many_launches_then_one_synchronize(dev, k):
  count = buf(dev, np.zeros(1, np.int32))
  before = dev.submitted
  n = RING * 3 + 5   # more than the ring holds: submits wait for room
  for _ in range(n): k.inc([count], global_size=QUEUED)
  assert dev.submitted == before + n
  dev.synchronize()
  assert dev.completed == dev.submitted
  assert read(dev, count, np.int32)[0] == n

def test_wait_returns_device_time(dev, k):
  count = buf(dev, np.zeros(1, np.int32))
  dev.synchronize()
  t0 = time.perf_counter()
  elapsed = k.nap([count, ms(dev, 120)], global_size=QUEUED, wait=True)   # longer than one wait slice
  host = time.perf_counter() - t0
  assert 0.119 <= elapsed <= host
  assert host - elapsed < 0.1
  assert read(dev, count, np.int32)[0] == 1
  assert k.inc([count], global_size=QUEUED, wait=True) < 0.01

def test_copyout_waits_for_the_writer_only(dev, k, rng):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  done = buf(dev, x)
  k.step([done, done], global_size=QUEUED)
  slow, src = buf(dev, np.zeros(N, np.float32)), buf(dev, x)
  k.nap_copy([slow, src, ms(dev, 300)], global_size=QUEUED)
  writer = dev.submitted
  np.testing.assert_array_equal(read(dev, done), x * np.float32(0.5) + np.arange(N, dtype=np.float32))
  assert dev.completed < writer, "reading a buffer waited for a launch that does not write it"
  np.testing.assert_array_equal(read(dev, slow), x)
  assert dev.completed >= writer

def test_freed_buffer_is_rewritten_only_after_its_readers(dev, k, rng):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  src, out = buf(dev, x), buf(dev, np.zeros(N, np.float32))
  dev.synchronize()
  k.nap_copy([out, src, ms(dev, 150)], global_size=QUEUED)   # reads src after 150 ms
  dev.allocator.free(src, x.nbytes)
  again = dev.allocator.alloc(x.nbytes)
  assert again is src, "the LRU cache hands the freed buffer out again"
  dev.allocator.copyin(again, memoryview(np.full(N, 7, np.float32)).cast("B"))   # waits for the queued reader
  np.testing.assert_array_equal(read(dev, out), x)
  np.testing.assert_array_equal(read(dev, again), np.full(N, 7, np.float32))

def test_buffer_dropped_by_the_allocator_lives_until_its_readers_ran(dev, k, rng, monkeypatch):
  monkeypatch.setattr(dev.allocator, "keep", False)   # freed buffers go back to numpy, not to the cache
  x = rng.uniform(-1, 1, N).astype(np.float32)
  src, out = buf(dev, x), buf(dev, np.zeros(N, np.float32))
  dev.synchronize()
  k.nap_copy([out, src, ms(dev, 100)], global_size=QUEUED)
  dev.allocator.free(src, x.nbytes)
  assert any(obj is src for _, obj in dev.kept)
  del src
  junk = [np.full(N, 9, np.float32) for _ in range(100)]   # would likely take the memory, were it released
  np.testing.assert_array_equal(read(dev, out), x)
  dev.synchronize()
  assert not dev.kept and junk

def test_small_kernel_on_an_idle_device_runs_inline(dev, k):
  count = buf(dev, np.zeros(1, np.int32))
  dev.synchronize()
  before = dev.submitted
  elapsed = k.inc([count], global_size=HERE)
  assert dev.submitted == before and count.view(np.int32)[0] == 1   # complete on return, no entry queued
  assert elapsed is not None and elapsed >= 0
  k.nap([count, ms(dev, 50)], global_size=QUEUED)
  k.inc([count], global_size=HERE)   # the device is busy: queued behind the nap, in order
  assert dev.submitted == before + 2
  assert read(dev, count, np.int32)[0] == 3

def test_launch_runs_while_python_keeps_the_gil(dev, k):
  count = buf(dev, np.zeros(1, np.int32))
  dev.synchronize()
  interval = sys.getswitchinterval()
  sys.setswitchinterval(1.0)   # a worker that needed the GIL would wait a second for it
  try:
    k.nap([count, ms(dev, 20)], global_size=QUEUED)
    seq = dev.submitted
    assert busy_until(lambda: dev.completed >= seq, 0.5), "the launch did not run while Python was busy"
  finally: sys.setswitchinterval(interval)
  assert read(dev, count, np.int32)[0] == 1

FULL = (-1, 2**31 - 1, -2**31) + tuple(range(4, MAX_SCALARS + 1))   # MAX_SCALARS values
BEYOND = tuple(range(5, MAX_SCALARS + 6))                            # one more

def test_scalars(dev, k, rng):
  assert MAX_SCALARS == 16   # a kernel's scalar words: 8 lifted constants (codegen's MAX_KERNEL_VARS) of up to 64 bits
  x = rng.uniform(-1, 1, N).astype(np.float32)
  src, out = buf(dev, x), buf(dev, np.zeros(N, np.float32))
  for size in (QUEUED, HERE):
    k.affine([out, src], (3, -2), global_size=size)
    np.testing.assert_array_equal(read(dev, out), x * 3 - 2)
  quad = buf(dev, np.zeros(MAX_SCALARS + 1, np.int32))
  k.nap([quad, ms(dev, 30)], global_size=QUEUED)
  k.full([quad], FULL, global_size=QUEUED)
  np.testing.assert_array_equal(read(dev, quad, np.int32), FULL + (0,))
  # beyond the native limits: called on this thread after everything queued before it
  k.nap([quad, ms(dev, 30)], global_size=QUEUED)
  k.beyond([quad], BEYOND, global_size=QUEUED)
  assert dev.completed == dev.submitted
  np.testing.assert_array_equal(read(dev, quad, np.int32), BEYOND)

def test_more_pointers_than_the_native_limit(dev, k, rng):
  assert MAX_ARGS < 41
  xs = [rng.uniform(-1, 1, N).astype(np.float32) for _ in range(40)]
  out, ins, count = buf(dev, np.zeros(N, np.float32)), [buf(dev, x) for x in xs], buf(dev, np.zeros(1, np.int32))
  k.nap([count, ms(dev, 30)], global_size=QUEUED)
  k.sum40([out] + ins, global_size=QUEUED)   # called on this thread after the nap
  assert dev.completed == dev.submitted
  np.testing.assert_allclose(read(dev, out), np.sum(xs, axis=0, dtype=np.float32), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("kind", [CPUGraph, CPULaunchList])
def test_batch_is_one_entry_per_replay(dev, k, rng, kind):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  a, b, c = buf(dev, x), buf(dev, np.zeros(N, np.float32)), buf(dev, np.zeros(N, np.float32))
  batch = kind([(k.step, [b, a], (), QUEUED, HERE), (k.step, [c, b], (), QUEUED, HERE), (k.step, [a, c], (), QUEUED, HERE)], dev)
  want = x
  before = dev.submitted
  for _ in range(5):
    batch()
    for _ in range(3): want = want * np.float32(0.5) + np.arange(N, dtype=np.float32)
  assert dev.submitted == before + 5
  np.testing.assert_array_equal(read(dev, a), want)
  assert isinstance(batch(wait=True), float)

@pytest.mark.parametrize("kind", [CPUGraph, CPULaunchList])
def test_rebinding_a_queued_batch_leaves_the_queued_replay_alone(dev, k, rng, kind):
  x, y = (rng.uniform(-1, 1, N).astype(np.float32) for _ in range(2))
  src1, src2, out1, out2 = buf(dev, x), buf(dev, y), buf(dev, np.zeros(N, np.float32)), buf(dev, np.zeros(N, np.float32))
  pause = ms(dev, 100)
  batch = kind([(k.nap_copy, [out1, src1, pause], (), QUEUED, HERE), (k.step, [out1, out1], (), QUEUED, HERE)], dev)
  batch()                                                  # queued: sleeps, then reads its pointers
  batch([[out2, src2, pause], [out2, out2]])               # rebound while the first replay still waits
  step = lambda v: v * np.float32(0.5) + np.arange(N, dtype=np.float32)
  np.testing.assert_array_equal(read(dev, out1), step(x))
  np.testing.assert_array_equal(read(dev, out2), step(y))

def test_launch_list_of_small_kernels_runs_inline(dev, k):
  count = buf(dev, np.zeros(1, np.int32))
  ll = CPULaunchList([(k.inc, [count], (), HERE, HERE)] * 3, dev)
  dev.synchronize()
  before = dev.submitted
  ll()
  assert dev.submitted == before and count.view(np.int32)[0] == 3

def test_launch_list_with_scalars_and_beyond_the_limits(dev, k, rng):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  src, out = buf(dev, x), buf(dev, np.zeros(N, np.float32))
  quad = buf(dev, np.zeros(MAX_SCALARS + 1, np.int32))
  ll = CPULaunchList([(k.affine, [out, src], (2, 1), QUEUED, HERE), (k.full, [quad], FULL, QUEUED, HERE)], dev)
  assert ll.batch is not None
  ll()
  np.testing.assert_array_equal(read(dev, out), x * 2 + 1)
  np.testing.assert_array_equal(read(dev, quad, np.int32), FULL + (0,))
  ll(scalars_per_launch=[(5, -1), None])   # new scalars for one launch, for this call and the later ones
  np.testing.assert_array_equal(read(dev, out), x * 5 - 1)
  ll = CPULaunchList([(k.affine, [out, src], (3, 0), QUEUED, HERE), (k.beyond, [quad], BEYOND, QUEUED, HERE)], dev)
  assert ll.batch is None   # one launch is beyond the native limits: launched one by one
  ll()
  np.testing.assert_array_equal(read(dev, out), x * 3)
  np.testing.assert_array_equal(read(dev, quad, np.int32), BEYOND)
  ll(scalars_per_launch=[(4, 0), None])
  np.testing.assert_array_equal(read(dev, out), x * 4)
  with pytest.raises(ValueError, match="beyond the native"): CPUGraph([(k.beyond, [quad], BEYOND, QUEUED, HERE)], dev)

@pytest.mark.parametrize("kind", [CPUGraph, CPULaunchList])
def test_batch_scalars_change_per_replay(dev, k, rng, kind):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  src, mid, pause = buf(dev, x), buf(dev, np.zeros(N, np.float32)), ms(dev, 100)
  out1, out2 = buf(dev, np.zeros(N, np.float32)), buf(dev, np.zeros(N, np.float32))
  batch = kind([(k.nap_copy, [mid, src, pause], (), QUEUED, HERE), (k.affine, [out1, mid], (2, 1), QUEUED, HERE)], dev)
  batch()                                                          # queued: sleeps, then reads its scalars
  batch([None, [out2, mid]], scalars_per_launch=[None, (3, 0)])   # changed while the first replay still waits
  np.testing.assert_array_equal(read(dev, out1), x * 2 + 1)       # the first replay kept its scalars
  np.testing.assert_array_equal(read(dev, out2), x * 3)
  batch(scalars_per_launch=[None, (1, 2)])
  np.testing.assert_array_equal(read(dev, out2), x + 2)
  with pytest.raises(ValueError, match="takes 2 scalars"): batch(scalars_per_launch=[None, (1,)])

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_forked_child_gets_its_own_queue(dev, k, rng):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  count = buf(dev, np.zeros(1, np.int32))
  k.nap([count, ms(dev, 50)], global_size=QUEUED)   # in flight at the fork: the parent finishes it first
  pid = os.fork()
  if pid == 0:   # the child: its queue must run launches and wake its waits
    code = 1
    try:
      a, b = buf(dev, x), buf(dev, np.zeros(N, np.float32))
      k.step([b, a], global_size=QUEUED)
      k.step([a, b], global_size=QUEUED)
      want = (x * np.float32(0.5) + np.arange(N, dtype=np.float32)) * np.float32(0.5) + np.arange(N, dtype=np.float32)
      code = 0 if np.array_equal(read(dev, a), want) and read(dev, count, np.int32)[0] == 1 else 2
    finally: os._exit(code)
  _, status = os.waitpid(pid, 0)
  assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child exited with {status}"
  assert read(dev, count, np.int32)[0] == 1

@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timer here")
def test_a_signal_interrupts_a_long_wait(dev, k):
  count = buf(dev, np.zeros(1, np.int32))
  k.nap([count, ms(dev, 600)], global_size=QUEUED)
  class Alarm(Exception): pass
  def ring(signum, frame): raise Alarm()
  old = signal.signal(signal.SIGALRM, ring)
  t0 = time.perf_counter()
  try:
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    with pytest.raises(Alarm): dev.synchronize()   # the wait returns to Python between slices, and the handler runs
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)
  assert time.perf_counter() - t0 < 0.4 and dev.completed < dev.submitted
  dev.synchronize()
  assert read(dev, count, np.int32)[0] == 1

def test_exit_with_launches_queued():
  script = f"""
import atexit, numpy as np, alloy
dev = alloy.get_device("CPU")
atexit.register(lambda: print("at exit", dev.completed == dev.submitted))   # runs after the device's own exit hook
binary = dev.compiler.compile_cached({SOURCE!r})
nap, step = dev.load("nap", binary), dev.load("nap_copy", binary)
a, b, pause = np.zeros(4 * {N}, np.uint8), np.ones(4 * {N}, np.uint8), np.array([300], np.int32).view(np.uint8)
for _ in range(3): step([a, b, pause], global_size=(2, 1, 1))   # still queued when the script ends
print("queued", dev.completed < dev.submitted)
"""
  proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.split() == ["queued", "True", "at", "exit", "True"]   # exit ran the queue dry, then ended

def run_threads(fn, n: int) -> dict:
  """fn(i) on n Python threads at once, handing the GIL over as often as Python allows: {i: what fn(i) returned}."""
  import threading
  results, errors = {}, []
  def run(i):
    try: results[i] = fn(i)
    except Exception as e: errors.append(e)
  threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
  interval = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    for t in threads: t.start()
    for t in threads: t.join()
  finally: sys.setswitchinterval(interval)
  assert not errors, errors
  return results

def test_several_submitting_threads(dev, k, rng):
  # threads launch chains of dependent kernels at once, queued and inline: each chain must come out exact
  starts = [rng.uniform(-1, 1, N).astype(np.float32) for _ in range(4)]
  def chain(i):
    a, b = buf(dev, starts[i]), buf(dev, np.zeros(N, np.float32))
    for j in range(200):
      k.step([b, a] if j % 2 == 0 else [a, b], global_size=QUEUED if (i + j) % 3 else HERE)
    dev.synchronize()
    return read(dev, a)
  results = run_threads(chain, 4)
  for i in range(4):
    want = starts[i]
    for _ in range(200): want = want * np.float32(0.5) + np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(results[i], want)

# ---- parallel kernels: the queue's worker and its team split the outer loop

def flipped(x):
  return x[::-1] * np.float32(0.5) + np.arange(N, dtype=np.float32)

def test_parallel_range_comes_from_the_binary(k):
  assert [getattr(k, f"cover{r}").parallel.value for r in COVERS] == list(COVERS)
  assert k.flip.parallel.value == N and k.step.parallel.value == 0

def test_parallel_kernel_runs_on_the_whole_team(dev, k):
  thread = buf(dev, np.zeros(64, np.int64))
  k.who([thread], global_size=QUEUED)
  # 8+ slices of 1 ms: more than one thread takes some (on many cores not every one need)
  assert min(team_size(), 2) <= len(set(read(dev, thread, np.int64))) <= team_size()

@pytest.mark.parametrize("r", COVERS)
def test_parallel_kernel_runs_each_index_once(dev, k, r):
  hits = buf(dev, np.zeros(r, np.int32))
  cover = getattr(k, f"cover{r}")
  for _ in range(50): cover([hits], global_size=QUEUED)   # queued back to back, no wait between
  np.testing.assert_array_equal(read(dev, hits, np.int32), np.full(r, 50))
  assert isinstance(cover([hits], global_size=QUEUED, wait=True), float)
  np.testing.assert_array_equal(read(dev, hits, np.int32), np.full(r, 51))

def test_dependent_parallel_launches_run_in_order(dev, k, rng):
  # each launch reads elements that other slices of the launch before wrote
  x0 = rng.uniform(-1, 1, N).astype(np.float32)
  a, b = buf(dev, x0), buf(dev, np.zeros(N, np.float32))
  want = x0
  for i in range(301):
    k.flip([b, a] if i % 2 == 0 else [a, b], global_size=QUEUED)
    want = flipped(want)
  np.testing.assert_array_equal(read(dev, b), want)

def test_parallel_kernel_with_scalars(dev, k, rng):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  src, out, quad = buf(dev, x), buf(dev, np.zeros(N, np.float32)), buf(dev, np.zeros(9, np.int32))
  k.scale([out, src], (3, -2), global_size=QUEUED)
  np.testing.assert_array_equal(read(dev, out), x * 3 - 2)
  k.beyond_sum([quad], BEYOND, global_size=QUEUED)   # beyond the limit: on this thread, the whole range at once
  np.testing.assert_array_equal(read(dev, quad, np.int32), np.arange(9) + sum(BEYOND))

@pytest.mark.parametrize("kind", [CPUGraph, CPULaunchList])
def test_batch_of_parallel_kernels(dev, k, rng, kind):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  a, b, hits = buf(dev, x), buf(dev, np.zeros(N, np.float32)), buf(dev, np.zeros(1001, np.int32))
  batch = kind([(k.flip, [b, a], (), QUEUED, HERE), (k.cover1001, [hits], (), QUEUED, HERE),
                (k.step, [a, b], (), QUEUED, HERE), (k.flip, [b, a], (), QUEUED, HERE)], dev)
  want_a = x
  for _ in range(20):   # replays queued back to back
    batch()
    want_a = flipped(want_a) * np.float32(0.5) + np.arange(N, dtype=np.float32)   # b = flip(a); a = step(b)
  np.testing.assert_array_equal(read(dev, hits, np.int32), np.full(1001, 20))
  np.testing.assert_array_equal(read(dev, a), want_a)
  np.testing.assert_array_equal(read(dev, b), flipped(want_a))

def test_several_threads_launching_parallel_kernels(dev, k, rng):
  starts = [rng.uniform(-1, 1, N).astype(np.float32) for _ in range(4)]
  def chain(i):
    a, b, hits = buf(dev, starts[i]), buf(dev, np.zeros(N, np.float32)), buf(dev, np.zeros(7, np.int32))
    for j in range(100):
      k.flip([b, a] if j % 2 == 0 else [a, b], global_size=QUEUED)
      k.cover7([hits], global_size=QUEUED)
    dev.synchronize()
    return read(dev, a), read(dev, hits, np.int32)
  results = run_threads(chain, 4)
  for i in range(4):
    want = starts[i]
    for _ in range(100): want = flipped(want)
    np.testing.assert_array_equal(results[i][0], want)
    np.testing.assert_array_equal(results[i][1], np.full(7, 100))

def _parallel_launches(fn) -> list:
  """The parallel ranges of the kernels fn() launches."""
  from alloy.engine.watch import OnLaunch, watchers
  seen = []
  with watchers.watching(OnLaunch(lambda ck, bufs, elapsed, t, *_: seen.append(ck.runner.parallel.value))): fn()
  return seen

@pytest.mark.parametrize("rows", [0, 1, 2, 3, 5, 17, 1001])
def test_parallel_row_reductions_against_numpy(dev, rng, rows):
  x = rng.uniform(-1, 1, (rows, 4100)).astype(np.float32)
  t = alloy.Tensor(x, device="CPU")
  outs = {}
  def run():
    outs.update(sums=t.sum(1).numpy(), sq=(t * t + 1).numpy())
    if rows: outs["soft"] = t.softmax(1).numpy()   # 0 rows: the CUDA lowering (NVRTC check) fails on that softmax
  ranges = _parallel_launches(run)
  if rows >= 8: assert any(ranges), ranges   # big enough to be split
  np.testing.assert_allclose(outs["sums"], x.sum(1, dtype=np.float64), rtol=1e-4, atol=1e-3)
  if rows:
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(outs["soft"], e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-7)
  np.testing.assert_array_equal(outs["sq"], x * x + 1)

@pytest.mark.parametrize("n,k_,m", [(1, 4096, 33), (257, 129, 300), (1000, 64, 130)])
def test_parallel_matmul_against_numpy(dev, rng, n, k_, m):
  a, b = rng.uniform(-1, 1, (n, k_)).astype(np.float32), rng.uniform(-1, 1, (k_, m)).astype(np.float32)
  out = (alloy.Tensor(a, device="CPU") @ alloy.Tensor(b, device="CPU")).numpy()
  np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

def test_parallel_kernel_beyond_the_pointer_limit(dev, rng):
  xs = [rng.uniform(-1, 1, (64, 1024)).astype(np.float32) for _ in range(MAX_ARGS + 3)]
  ts = [alloy.Tensor(x, device="CPU") for x in xs]
  total = ts[0]
  for t in ts[1:]: total = total + t
  want = xs[0]
  for x in xs[1:]: want = want + x
  outs = []
  assert any(_parallel_launches(lambda: outs.append(total.numpy())))
  np.testing.assert_array_equal(outs[0], want)

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_forked_child_gets_its_own_team(dev, k, rng):
  x = rng.uniform(-1, 1, N).astype(np.float32)
  hits = buf(dev, np.zeros(1001, np.int32))
  k.cover1001([hits], global_size=QUEUED)   # the parent's team has run before the fork
  pid = os.fork()
  if pid == 0:   # the child: the team threads did not come along, its new queue has its own
    code = 1
    try:
      a, b = buf(dev, x), buf(dev, np.zeros(N, np.float32))
      for _ in range(10): k.cover1001([hits], global_size=QUEUED)
      k.flip([b, a], global_size=QUEUED)
      ok = np.array_equal(read(dev, b), flipped(x)) and np.array_equal(read(dev, hits, np.int32), np.full(1001, 11))
      code = 0 if ok else 2
    finally: os._exit(code)
  _, status = os.waitpid(pid, 0)
  assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child exited with {status}"
  k.cover1001([hits], global_size=QUEUED)
  np.testing.assert_array_equal(read(dev, hits, np.int32), np.full(1001, 2))
