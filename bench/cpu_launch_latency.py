"""Where the time of one asynchronous CPU launch goes: submit -> kernel start, the kernel, kernel end -> synchronize.

The row-sum kernel of m.sum(1) (4096x4096 float32) is launched through a probe: a parallel C function with the
kernel's signature that forwards each slice of the outer loop, stamping CLOCK_MONOTONIC (the clock of
time.perf_counter on Linux) as the first slice (claimed first) starts and as the last one to finish ends.
Two patterns, medians over the iterations:
  sync:  submit, then synchronize at once (what bench/cpu.py's rows do)
  busy:  submit, then 2 ms of pure Python (no blocking call), then synchronize: does the kernel start while Python runs?
Then the thread team's start: a two-slice kernel whose slices each spin 2 ms, launched and waited for after a gap of
pure Python; how long after the first slice the second starts (about 0: both threads at once; 2000: one thread ran
both), median and 90th percentile.

python bench/cpu_launch_latency.py [iterations]
"""
from __future__ import annotations
import ctypes, os, statistics, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import alloy
from alloy import Tensor
from alloy.engine.watch import OnLaunch, watchers

PROBE = r"""#include <stdint.h>
#include <time.h>
const int32_t probe_parallel_range = RANGE;
static void (*kernel)(void *, void *, int32_t, int32_t);
static int32_t done;   /* iterations of this call finished */
double probe_start, probe_end;
void probe_set(void *fn) { kernel = (void (*)(void *, void *, int32_t, int32_t))fn; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
void probe(void *out, void *in, int32_t start, int32_t end) {
  if (start == 0) probe_start = now();
  kernel(out, in, start, end);
  if (__atomic_add_fetch(&done, end - start, __ATOMIC_ACQ_REL) == RANGE) { probe_end = now(); done = 0; }
}
"""

STAMP = r"""#include <stdint.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
const int32_t stamp_parallel_range = 2;
void stamp(double *started, int32_t start, int32_t end) {   /* one slice per index: stamps its start, spins 2 ms */
  double t0 = now();
  started[start] = t0;
  while (now() < t0 + 0.002) ;
}
"""

def busy(seconds: float) -> None:
  end = time.perf_counter() + seconds
  while time.perf_counter() < end: pass

def run(iterations: int = 60) -> None:
  dev = alloy.get_device("CPU")
  m = Tensor(np.random.default_rng(0).uniform(0.5, 1.5, (4096, 4096)).astype(np.float32), device="CPU").realize()
  seen = []
  with watchers.watching(OnLaunch(lambda ck, bufs, elapsed, t, consts: seen.append((ck, bufs)))):
    m.sum(1).realize(); dev.synchronize()
  (ck, bufs), = seen
  assert len(bufs) == 2, "the probe forwards two pointers"
  assert (n := ck.runner.parallel.value), "the probe forwards a parallel kernel's slices"
  probe = dev.load("probe", dev.compiler.compile_cached(PROBE.replace("RANGE", str(n))))
  probe.lib.probe_set(ctypes.c_void_p(ctypes.cast(ck.runner.fn, ctypes.c_void_p).value))
  start, end = ctypes.c_double.in_dll(probe.lib, "probe_start"), ctypes.c_double.in_dll(probe.lib, "probe_end")
  handles = [b.handle for b in bufs]
  print(f"CPU launch latency, m.sum(1) 4096x4096 f32, {iterations} iterations, medians in µs ({os.cpu_count()} cores)")
  for pattern, gap in (("sync", 0.0), ("busy", 0.002)):
    rows = []
    for _ in range(iterations + 3):
      t0 = time.perf_counter()
      probe(handles, (), ck.meta.global_size, ck.meta.local_size)
      if gap: busy(gap)
      dev.synchronize()
      t1 = time.perf_counter()
      rows.append((start.value - t0, end.value - start.value, t1 - end.value))
    rows = rows[3:]
    med = [statistics.median(r[i] for r in rows) * 1e6 for i in range(3)]
    print(f"  {pattern}: submit->start {med[0]:8.1f}   kernel {med[1]:8.1f}   end->synchronize {med[2]:8.1f}")
  stamp, started = dev.load("stamp", dev.compiler.compile_cached(STAMP)), np.zeros(2)
  print("thread team start: the second slice's start after the first's, µs")
  for gap in (0.0001, 0.0005, 0.002):
    skew = []
    for _ in range(iterations * 2):
      busy(gap)
      stamp([started.view(np.uint8)], global_size=(2, 1, 1), wait=True)
      skew.append(abs(started[1] - started[0]) * 1e6)
    skew.sort()
    print(f"  after {gap * 1e3:.1f} ms of Python: median {statistics.median(skew):8.1f}   p90 {skew[len(skew) * 9 // 10]:8.1f}")

if __name__ == "__main__":
  run(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
