"""BEAM search: for each new kernel, the list of transforms that runs fastest on this device, found by timing.

`BEAM=N` (or `@alloy.jit(beam=N)`, or `with alloy.beam(N):`) turns it on. For a kernel not searched before, starting
from the heuristics' list (codegen/opts.py): each round takes the N fastest lists so far, makes every list one
transform away from them (codegen/candidates.py; only lists the validator accepts), compiles those side by side (the
C compilers are processes of their own, NVRTC and nvJitLink run outside the GIL), and times each on the device on
scratch copies of the kernel's real inputs (the user's buffers are never written), in a child process for CPU
kernels (engine/search_worker.py). A candidate counts only if its output matches the heuristic kernel's; one that
fails to lower or compile, crashes, times out or computes something else is skipped (reported at DEBUG=2). The search
stops when a round finds nothing faster or after BEAM_BUDGET_S seconds (default 30).

The winner is kept in the disk cache (helpers.disk_cache_*) under the kernel's AST, the device's kind and target and
N, so a later process with the same BEAM reuses it without searching. DEBUG=2 prints each search's result.
"""
from __future__ import annotations
import contextlib, json, os, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from alloy import dtype as dt
from alloy.helpers import DEBUG, disk_cache_get, disk_cache_put, float32_matmul_precision, getenv, prod
from alloy.ir.kernel import KernelAST
from alloy.codegen.lower import lower
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import check
from alloy.codegen.candidates import neighbours
from alloy.codegen.transforms import Opt, OptKind, describe
from alloy.runtime.device import Device
from alloy.engine.search_worker import CandidateFailed, ChildTimer, InProcessTimer

BEAM = getenv("BEAM", 0)
BEAM_BUDGET_S = getenv("BEAM_BUDGET_S", 30.0)
REPEATS = 3                 # timed runs per candidate after the first; the best counts
CANDIDATE_TIMEOUT_S = 20.0  # a CPU candidate still running after this (beside 20x the heuristic's time) is stopped
CACHE_TABLE = "beam"
CHECK_MAX = 1 << 22         # outputs compared with the heuristic kernel's (a fixed sample of a bigger output)
MIN_GAIN = 0.05             # a winner must beat the heuristics by this much when both are timed again, or they stand

class _Widths(threading.local):
  stack: list | tuple = ()   # this thread's beam(N) widths, innermost last; the class's empty one until beam() makes its own
_width = _Widths()          # (a missing thread-local attribute cost every realize a raised and cleared AttributeError)
searches = 0                # searches run in this process (what the cache tests count)
_found: dict = {}           # (device name, AST root, buffers, N) -> the winning list, for this process
# test hooks: filter(opts, source) -> source, applied to each candidate's source before it compiles (a test makes one
# fail for real with it: a kernel that crashes, loops or writes wrong values)
source_filters: list = []

def beam_width() -> int:
  """N of the innermost `beam(N)` context on this thread, else BEAM."""
  stack = _width.stack
  return stack[-1] if stack else BEAM

@contextlib.contextmanager
def beam(width: int):
  """Search the kernels compiled inside the block with BEAM=width (0: none)."""
  if not isinstance(width, int) or width < 0: raise ValueError(f"beam width must be an int >= 0, got {width!r}")
  stack = _width.__dict__.setdefault("stack", [])
  stack.append(width)
  try: yield
  finally: stack.pop()

def _cache_key(ast: KernelAST, device: Device, width: int) -> str:
  return f"{type(device).__name__}\0{device.target}\0beam {width}\0{ast.n_buffers}\0{ast.describe()}"

def _decode(raw: bytes) -> dict | None:
  try:
    entry = json.loads(raw)
    entry["opts"] = tuple(Opt(OptKind(k), a, n) for k, a, n in entry["opts"])
    return entry
  except (ValueError, KeyError, TypeError): return None

def searched_opts(ast: KernelAST, device: Device, inputs: list, scalars: tuple, width: int) -> tuple | None:
  """The kernel's list of transforms for BEAM=width: from this process's results, the disk cache, or a search run now
  on scratch copies of `inputs` (the kernel's input Buffers) with `scalars` (its int32 scalar words). None: use the
  heuristics (the search found nothing that runs)."""
  key = (device.name, ast.root, ast.n_buffers, width, float32_matmul_precision())   # which lists are valid depends on it
  if key in _found: return _found[key]
  disk_key = _cache_key(ast, device, width)
  entry = _decode(raw) if (raw := disk_cache_get(CACHE_TABLE, disk_key)) is not None else None
  if entry is not None and check(ast, device.caps, entry["opts"]) is None:
    if DEBUG >= 2: _report(ast, entry, "cached")
    _found[key] = entry["opts"]
    return entry["opts"]
  try: entry = Search(ast, device, inputs, scalars, width).run()
  except Exception as e:   # the search itself failed (its timing process would not start, say): the heuristics stand
    print(f"BEAM: search of {ast.root.shape} failed ({type(e).__name__}: {e}); using the heuristics", file=sys.stderr)
    entry = None
  opts = entry["opts"] if entry is not None else None
  if entry is not None:
    disk_cache_put(CACHE_TABLE, disk_key, json.dumps(dict(entry, opts=[[o.kind.value, o.axis, o.arg] for o in opts])).encode())
    if DEBUG >= 2: _report(ast, entry, f"searched in {entry['search_s']:.1f} s, {entry['tried']} candidates, {entry['skipped']} skipped")
  _found[key] = opts
  return opts

def _report(ast: KernelAST, entry: dict, how: str) -> None:
  base, best = entry["base_s"], entry["best_s"]
  print(f"BEAM {ast.root.shape}: {describe(entry['opts'])}: {base * 1e6:.1f} us -> {best * 1e6:.1f} us "
        f"({base / best if best else 0:.2f}x the heuristics) ({how})")

def _mismatch(got: bytes, ref: bytes, dtype: dt.DType) -> str | None:
  """Why a candidate's output is not the heuristic kernel's, or None (floats within a reordered sum's rounding)."""
  a, b = np.frombuffer(got, dtype.np), np.frombuffer(ref, dtype.np)
  if a.size > CHECK_MAX:   # an odd stride through a big output: every column of every tile shape is reached
    step = (a.size // CHECK_MAX) | 1
    a, b = a[::step], b[::step]
  if dtype is dt.bfloat16: a, b = dt.bfloat16_bits_to_float32(a), dt.bfloat16_bits_to_float32(b)
  if not dtype.is_float: return None if np.array_equal(a, b) else f"{int((a != b).sum())} of {a.size} outputs differ"
  rtol = {2: 2e-2, 4: 1e-3}.get(dtype.itemsize, 1e-8)
  finite = np.abs(b[np.isfinite(b)])
  atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
  ok = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
  return None if ok.all() else f"{int((~ok).sum())} of {a.size} outputs differ from the heuristic kernel's"

class Search:
  """One kernel's search (the module docstring says how it goes)."""
  def __init__(self, ast: KernelAST, device: Device, inputs: list, scalars: tuple, width: int):
    self.ast, self.device, self.scalars, self.width = ast, device, tuple(scalars), width
    arrays = [(b.dtype.name, b.numpy()) for b in inputs]
    out = (ast.root.dtype.name, prod(ast.root.shape))
    timer = ChildTimer if device.name.split(":")[0] == "CPU" else InProcessTimer
    self.timer = timer(device.name, arrays, out)
    self.tried = self.skipped = 0
    self.sources: set = set()

  def _build(self, opts) -> tuple:
    prog = lower(self.ast, self.device.caps, opts)
    source = self.device.renderer.render(prog)
    for f in source_filters: source = f(opts, source)
    return prog, source

  def _compile_all(self, cands: list) -> list:
    """(opts, (name, binary, global, local) or the reason it failed) for each candidate, compiled side by side."""
    built = []
    for opts in cands:
      try: b = self._build(opts)
      except Exception as e: b = f"failed to lower: {type(e).__name__}: {e}"
      if not isinstance(b, str):
        if b[1] in self.sources: continue   # the same kernel as one tried already (a transform without effect here)
        self.sources.add(b[1])
      built.append((opts, b))
    def compile_one(item):
      opts, b = item
      if isinstance(b, str): return opts, b
      prog, source = b
      try: return opts, (prog.meta.name, self.device.compiler.compile_cached(source), prog.meta.global_size, prog.meta.local_size)
      except Exception as e: return opts, f"failed to compile: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    with ThreadPoolExecutor(max(1, min(len(built), os.cpu_count() or 1))) as pool: return list(pool.map(compile_one, built))

  def _time(self, opts, kernel, best_s: float, base_s: float) -> float | None:
    """The candidate's seconds, None where it is skipped (reported at DEBUG=2)."""
    self.tried += 1
    try:
      if isinstance(kernel, str): raise CandidateFailed(kernel)
      seconds, out = self.timer.time(kernel, self.scalars, REPEATS, 4 * best_s, max(CANDIDATE_TIMEOUT_S, 20 * base_s * (REPEATS + 1)))
      if (why := _mismatch(out, self.ref, self.ast.root.dtype)) is not None: raise CandidateFailed(why)
      return seconds
    except CandidateFailed as e:
      self.skipped += 1
      if DEBUG >= 2: print(f"BEAM {self.ast.root.shape}: skipped {describe(opts)}: {e}", file=sys.stderr)
      return None

  def _retime(self, kernel, seconds: float) -> float:
    if isinstance(kernel, str): return seconds
    try: return min(seconds, self.timer.time(kernel, self.scalars, REPEATS, float("inf"), max(CANDIDATE_TIMEOUT_S, 60.0))[0])
    except CandidateFailed: return seconds

  def run(self) -> dict | None:
    global searches
    searches += 1
    from tqdm import tqdm
    start, caps = time.perf_counter(), self.device.caps
    deadline = start + BEAM_BUDGET_S
    base = tuple(choose_opts(self.ast, caps))
    try:
      ((_, kernel),) = self._compile_all([base])
      if isinstance(kernel, str): raise CandidateFailed(kernel)
      base_s, self.ref = self.timer.time(kernel, self.scalars, REPEATS, float("inf"), max(CANDIDATE_TIMEOUT_S, 60.0))
      beam, seen = [(base_s, base)], {base}
      with tqdm(desc=f"BEAM {self.ast.root.shape}", unit=" kernels", leave=False, file=sys.stderr, disable=None) as bar:
        while time.perf_counter() < deadline:
          cands = [c for _, opts in beam for c in neighbours(self.ast, caps, opts) if c not in seen]
          cands = list(dict.fromkeys(cands))
          if not cands: break
          seen.update(cands)
          bar.total = (bar.total or 1) + len(cands)
          timed, chunk = [], max(2, os.cpu_count() or 1)   # compiled a few at a time, so the budget holds
          for i in range(0, len(cands), chunk):
            if time.perf_counter() >= deadline: break
            for opts, kernel in self._compile_all(cands[i:i + chunk]):
              if time.perf_counter() >= deadline: break
              if (seconds := self._time(opts, kernel, beam[0][0], base_s)) is not None: timed.append((seconds, opts))
              bar.update(1)
              bar.set_postfix_str(f"best {min([beam[0][0]] + [t for t, _ in timed]) * 1e6:.1f} us")
          better = sorted(beam + timed, key=lambda t: t[0])[:self.width]
          if better[0][0] >= beam[0][0]: break   # nothing faster this round
          beam = better
      best_s, best = beam[0]
      if best != base:   # timed again, in turn: the first runs of a search meet a cold machine, and load changes
        self.sources.clear()
        kernels = dict(self._compile_all([base, best]))
        for _ in range(3): base_s, best_s = self._retime(kernels[base], base_s), self._retime(kernels[best], best_s)
        if best_s >= base_s * (1 - MIN_GAIN): best_s, best = base_s, base
    finally: self.timer.close()
    return dict(opts=best, base_s=base_s, best_s=best_s, search_s=time.perf_counter() - start, tried=self.tried, skipped=self.skipped)
