"""Shared timing and table printing for the benchmarks."""
from __future__ import annotations
import math, os, statistics, time

def median_time(fn, rounds: int = 3, min_seconds: float = 0.2) -> float:
  """Median over rounds of the mean time per call, each round running at least min_seconds."""
  fn()  # warm up (compiles, allocates)
  per_round = []
  for _ in range(rounds):
    n, start = 0, time.perf_counter()
    while True:
      fn(); n += 1
      elapsed = time.perf_counter() - start
      if elapsed >= min_seconds: break
    per_round.append(elapsed / n)
  return statistics.median(per_round)

def device_seconds(fn, device) -> float:
  """Device time of the kernels that realizing fn() launches (each launch waits while a watcher asks for device time,
  so the device's own clock times it: CUDA events), median of 3, after one warm-up realize."""
  from alloy.engine.watch import OnLaunch, watchers
  times = []
  fn().realize(); device.synchronize()
  best = []
  with watchers.watching(OnLaunch(lambda ck, bufs, elapsed, t_submit, consts: times.append(elapsed), device_time=True)):
    for _ in range(3):
      times.clear()
      fn().realize()
      best.append(sum(times))
  return sorted(best)[1]

def new_kernel_seconds(small, device) -> float:
  """First realize of a never-seen kernel, compile included: a fresh length makes fresh source (a fresh constant no
  longer does: constants are kernel arguments), compiled for real with the disk cache off. The kernel is the same
  elementwise exp of a scaled slice as before that change. Median of 3 such kernels; small is a realized float
  tensor on device, of 1024 elements or more."""
  os.environ["ALLOY_CACHE"] = "0"
  times = []
  try:
    for k in range(3):
      n = 1 + (time.time_ns() // 1000 + 337 * k) % (small.shape[0] - 1)
      t0 = time.perf_counter()
      (small[:n] * 1.5 - 2.5).exp().realize(); device.synchronize()
      times.append(time.perf_counter() - t0)
  finally: os.environ["ALLOY_CACHE"] = "1"
  return statistics.median(times)

def tinygrad_for(device: str):
  """(tinygrad's Tensor, a function that realizes what a thunk returns and waits) where tinygrad is installed and its
  `device` starts here; else (None, why not), for a line under the table."""
  try: import tinygrad
  except ImportError: return None, "tinygrad: not installed, no column"
  try:
    from tinygrad import Device
    tg_device = Device[device]
  except Exception as e:   # its CPU device needs clang; CUDA needs libcuda and NVRTC where it looks for them
    return None, f"tinygrad: installed, but its {device} device does not start here ({type(e).__name__}: {e}), no column"
  def realized(thunk) -> None:
    thunk().realize(); tg_device.synchronize()
  return (tinygrad.Tensor, realized), None

# ---- back to back behind a spacer: the kernels' own device time, the same way for both sides
# Each side's timed launches are queued while a spacer (8192^3 fp16 matmuls, ~1.6 ms each on an H200) runs before
# them on the same stream, and CUDA events bracket them: neither the host's time to queue them nor a launch's latency
# falls inside the events, and the kernels run back to back, at the clocks of a busy GPU, as a model's do. Timing each
# launch alone with events (device_seconds) counts the launch latency after its start event: at fp16 4096^3 on the
# H200, 208 us a kernel against 192 back to back.
_spacers: dict = {}
SPACER_SECONDS = 1.6e-3   # an estimate, for the first count of spacers; a round whose host fell behind runs again

def _back_to_back(call, spacer, sync, marks, seconds, reps: int) -> float:
  """Median of 3 rounds of reps calls queued behind spacers. marks: three of the side's events, each a function that
  records it on the stream and returns it; seconds(e0, e1): the time between two, waiting for e1. A round in which
  queueing the spacers and calls took the host longer than the spacers took the device runs again with twice the
  spacers: a gap between the calls would count."""
  spacer(); call(); sync()   # warm: compiled, allocated
  t = time.perf_counter(); call(); host = time.perf_counter() - t   # queued, not waited for
  sync()
  spacers, times = max(1, math.ceil(2 * reps * host / SPACER_SECONDS)), []
  while len(times) < 3:
    t = time.perf_counter()
    ahead = marks[0]()
    for _ in range(spacers): spacer()
    start = marks[1]()
    for _ in range(reps): call()
    host = time.perf_counter() - t
    end = marks[2]()
    elapsed, ahead = seconds(start, end), seconds(ahead, start)
    if host > 0.9 * ahead and spacers < 64: spacers *= 2   # past 64 (~0.1 s) the calls wait for the device themselves
    else: times.append(elapsed / reps)
  return sorted(times)[1]

def back_to_back_seconds(fn, device, reps: int = 10) -> float:
  """Device seconds of one realize of fn() on a CUDA device, back to back behind a spacer (above)."""
  import alloy
  from cuda.bindings import driver as cu
  if (s := _spacers.get(device.name)) is None:
    s = _spacers[device.name] = alloy.Tensor.ones(8192, 8192, device=device.name, dtype=alloy.float16).realize()
  events = [cu.cuEventCreate(0)[1] for _ in range(3)]
  def mark(e):
    device.fence()   # commits the open run of launches, so the event follows them
    cu.cuEventRecord(e, device.stream)
    return e
  def seconds(e0, e1):
    cu.cuEventSynchronize(e1)
    return cu.cuEventElapsedTime(e0, e1)[1] / 1e3
  try: return _back_to_back(lambda: fn().realize(), lambda: (s @ s).realize(), device.synchronize,
                            [lambda e=e: mark(e) for e in events], seconds, reps)
  finally:
    for e in events: cu.cuEventDestroy(e)

def torch_back_to_back_seconds(fn, reps: int = 10) -> float:
  """back_to_back_seconds for PyTorch's fn() on its current CUDA stream."""
  import torch
  if (s := _spacers.get("torch")) is None: s = _spacers["torch"] = torch.ones(8192, 8192, device="cuda", dtype=torch.float16)
  events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
  def mark(e):
    e.record()
    return e
  def seconds(e0, e1):
    e1.synchronize()
    return e0.elapsed_time(e1) / 1e3
  return _back_to_back(fn, lambda: torch.mm(s, s), torch.cuda.synchronize, [lambda e=e: mark(e) for e in events], seconds, reps)

def torch_compiled(fn, *example):
  """torch.compile's form of fn, the peer's best fused form of the same work, compiled on the example inputs now (so
  no figure counts its compile); (None, why not) where it does not run here, for a line under the table."""
  try:
    import torch
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    compiled = torch.compile(fn)
    compiled(*example)
    return compiled, None
  except Exception as e:   # no working compiler or triton for its backend on this machine
    return None, f"torch.compile: does not run here ({type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''})"

def print_table(rows: list[dict], columns: list[str], unit_of: dict, ours: str = "alloy") -> None:
  """rows: {'workload', 'unit', impl: figure}; prints each impl's figure and ours/theirs ratio."""
  others = [c for c in columns if c != ours]
  head = f"{'workload':34s} {'unit':7s} {ours:>10s} " + " ".join(f"{c:>10s} {'ratio':>7s}" for c in others)
  print(head); print("-" * len(head))
  for r in rows:
    higher_better = r["unit"] in ("GB/s", "GFLOP/s", "TFLOP/s", "tok/s")
    line = f"{r['workload']:34s} {r['unit']:7s} {_fmt(r.get(ours)):>10s} "
    for c in others:
      mine, theirs = r.get(ours), r.get(c)
      ratio = "" if not mine or not theirs else f"{(mine / theirs if higher_better else theirs / mine):.2f}x"
      line += f"{_fmt(theirs):>10s} {ratio:>7s} "
    print(line)
  print("ratio = alloy's speed relative to the other (above 1: alloy is faster)")

def _fmt(v) -> str: return "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"

def torch_time(fn) -> float:
  """Device time of one call of fn on PyTorch's CUDA stream: median of 3 timings of 10 calls (CUDA events)."""
  import torch
  fn(); torch.cuda.synchronize()
  s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
  ts = []
  for _ in range(3):
    s.record()
    for _ in range(10): fn()
    e.record(); e.synchronize()
    ts.append(s.elapsed_time(e) / 10 / 1e3)
  return sorted(ts)[1]

def forced_seconds(ast, inputs: list, lists: list, device: str, rounds: int = 3) -> list:
  """Device seconds of `ast`'s kernel under each transform list (each one valid), compiled side by side (NVRTC and
  the C compiler run outside the GIL), on the buffers of `inputs` (its schedule's input nodes)."""
  import math
  from concurrent.futures import ThreadPoolExecutor
  import alloy
  from alloy.codegen.lower import lower
  from alloy.engine.search_worker import time_kernel
  dev = alloy.get_device(device)
  progs = [lower(ast, dev.caps, opts) for opts in lists]
  with ThreadPoolExecutor(16) as pool:
    binaries = list(pool.map(lambda p: dev.compiler.compile_cached(dev.renderer.render(p)), progs))
  buffers, out = [n.arg for n in inputs], (ast.root.dtype.name, math.prod(ast.shape))
  return [time_kernel(device, buffers, out, (p.meta.name, b, p.meta.global_size, p.meta.local_size), (), rounds, 1.0)[0]
          for p, b in zip(progs, binaries)]
