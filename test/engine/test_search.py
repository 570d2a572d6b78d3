"""BEAM search: the result matches NumPy, the disk cache spares a later process the search, and candidates that
crash, loop or compute something else are skipped without harming the search or the process."""
import os, pathlib, shutil, subprocess, sys, uuid, numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.helpers import cache_dir, unpack_entry
from alloy.engine import search, compiled
from conftest import rand_np, assert_close

@pytest.fixture
def fresh_cache(monkeypatch):
  """An empty table of winners in the disk cache, removed after the test (the compile cache stays: a fresh one would
  build the CPU device's native sources again, in every timing process too)."""
  table = f"beam-test-{uuid.uuid4().hex[:12]}"
  monkeypatch.setattr(search, "CACHE_TABLE", table)
  monkeypatch.setattr(search, "BEAM_BUDGET_S", 10.0)
  monkeypatch.setattr(search, "_found", {})
  # kernels compiled earlier in this process under the same beam width would answer without a search
  monkeypatch.setattr(compiled, "_compiled", type(compiled._compiled)())
  path = pathlib.Path(cache_dir()) / table
  yield path
  shutil.rmtree(path, ignore_errors=True)

SECOND_PROCESS = """
import numpy as np, time, alloy
from alloy import Tensor
from alloy.engine import search
search.CACHE_TABLE = "{table}"
rng = np.random.default_rng(7)
a, b = rng.uniform(-1, 1, (96, 64)).astype(np.float32), rng.uniform(-1, 1, (64, 80)).astype(np.float32)
t = time.perf_counter()
got = (Tensor(a, device="{device}") @ Tensor(b, device="{device}")).numpy()
assert np.allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
print("searches", search.searches, "seconds", time.perf_counter() - t)
"""

def test_beam_cache_round_trip(device, fresh_cache):
  rng = np.random.default_rng(7)
  a, b = rng.uniform(-1, 1, (96, 64)).astype(np.float32), rng.uniform(-1, 1, (64, 80)).astype(np.float32)
  x, y = Tensor(a, device=device), Tensor(b, device=device)
  before = search.searches
  with alloy.beam(2): got = (x @ y).numpy()
  assert search.searches == before + 1
  assert_close(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
  assert os.listdir(fresh_cache)   # the winner, on disk
  x.numpy(), y.numpy()   # the inputs are as they were: the search ran on copies
  np.testing.assert_array_equal(x.numpy(), a)
  env = dict(os.environ, BEAM="2", PYTHONPATH=os.getcwd())
  script = SECOND_PROCESS.format(device=device, table=fresh_cache.name)
  out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr
  assert "searches 0 " in out.stdout, out.stdout   # the later process searched nothing: the winner came from the cache

def test_jit_beam_argument(device, fresh_cache, rng):
  a = rand_np(rng, (64, 300))
  @alloy.jit(beam=1)
  def row_sums(t): return t.sum(1) * 2
  before = search.searches
  for _ in range(3): got = row_sums(Tensor(a, device=device)).numpy()
  assert search.searches == before + 1   # one kernel, searched once; the capture and replays reuse it
  assert_close(got, a.astype(np.float64).sum(1) * 2, rtol=1e-4, atol=1e-4)
  with pytest.raises(ValueError, match="beam must be an int"): alloy.jit(beam=-1)

def _body_start(source: str) -> int:
  """Just after the kernel's opening line (the one naming its output, data0)."""
  line = next(i for i, l in enumerate(source.splitlines(keepends=True)) if "data0" in l and l.rstrip().endswith("{"))
  return sum(len(l) for l in source.splitlines(keepends=True)[:line + 1])

def _breaker(kinds: dict):
  """A source filter that makes candidates with a given UNROLL fail for real: crash, loop forever or write a wrong
  value. (The heuristics' own kernel has UNROLL 8 and is left alone.)"""
  def filt(opts, source):
    u = next((o.arg for o in opts if o[0] == "UNROLL"), None)
    if (how := kinds.get(u)) is None: return source
    if how == "garbage": return source + "\nthis is not a kernel\n"
    if how == "wrong":   # before the kernel's closing brace: the first output is overwritten
      end = source.rindex("\n}")
      return source[:end] + "\n  data0[0] = 12345.0f;" + source[end:]
    at = _body_start(source)
    stmt = {"crash": "  *(volatile int*)0 = 1;\n", "loop": "  for (;;) __asm__ volatile(\"\");\n"}[how]
    return source[:at] + stmt + source[at:]
  return filt

def test_failing_candidates_are_skipped(device, fresh_cache, monkeypatch, capsys):
  # CUDA runs PTX, where C statements cannot go: there the broken candidate fails to compile
  kinds = {4: "wrong", 16: "crash", 1: "loop"} if device == "CPU" else {4: "garbage"} if device == "CUDA" else {4: "wrong"}
  monkeypatch.setattr(search, "source_filters", [_breaker(kinds)])
  monkeypatch.setattr(search, "CANDIDATE_TIMEOUT_S", 3.0)
  monkeypatch.setattr(search, "BEAM_BUDGET_S", 120.0)   # the first round (where the broken ones are) always runs whole
  monkeypatch.setattr(search, "DEBUG", 2)
  a = rand_np(np.random.default_rng(3), (64, 1000))
  with alloy.beam(2): got = Tensor(a, device=device).sum(1).numpy()
  assert_close(got, a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
  err = capsys.readouterr().err
  assert ("failed to compile" if device == "CUDA" else "outputs differ from the heuristic kernel's") in err
  if device == "CPU":
    assert "crashed the timing process (signal 11)" in err and "timed out after" in err
  entry = search._decode(unpack_entry(next(fresh_cache.iterdir()).read_bytes()))
  assert entry is not None and entry["skipped"] >= len(kinds)
  assert not any(o[0] == "UNROLL" and o[2] in kinds for o in entry["opts"])   # no broken candidate won

def _searches(monkeypatch) -> list:
  """The entries (opts, search_s, tried, ...) of the searches run from now on."""
  entries, run = [], search.Search.run
  def recorded(self):
    entries.append(run(self))
    return entries[-1]
  monkeypatch.setattr(search.Search, "run", recorded)
  return entries

@pytest.mark.parametrize("budget", [0.0, 2.5])
def test_budget_bounds_the_search(fresh_cache, monkeypatch, budget):
  """BEAM_BUDGET_S holds on the CPU: past it no further candidate is compiled or timed. The heuristic kernel is always
  compiled and timed (the reference; the timing process starts then), and a chunk of candidates under way finishes
  (one compile per core). The rounds are made long (every list two transforms away) so that only the budget stops."""
  monkeypatch.setattr(search, "BEAM_BUDGET_S", budget)
  entries, offered = _searches(monkeypatch), []
  one_hop = search.neighbours
  def two_hops(ast, caps, opts):
    first = list(one_hop(ast, caps, opts))
    offered.append(len(found := list(dict.fromkeys(first + [c for o in first for c in one_hop(ast, caps, o)]))))
    return found
  monkeypatch.setattr(search, "neighbours", two_hops)
  rng = np.random.default_rng(5)
  a, b = rng.uniform(-1, 1, (96, 64)).astype(np.float32), rng.uniform(-1, 1, (64, 80)).astype(np.float32)
  with alloy.beam(4): got = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy()
  assert_close(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
  (entry,) = entries
  if budget == 0:
    assert entry["tried"] == 0 and entry["best_s"] == entry["base_s"], entry   # the heuristics stand
    return
  assert entry["tried"] < offered[0], (entry, offered)   # stopped inside the first round (none tried: the reference took it all)
  assert entry["search_s"] < budget + 2.0, entry   # 2 s: a chunk's compiles on a loaded 2-core machine

def test_timing_child_is_kept_between_searches(fresh_cache, monkeypatch):
  """A CPU search's timing process outlives it, without its inputs, and the next search sends it new ones: its
  start (a Python importing alloy) is paid once per process, not once per kernel."""
  from alloy.engine import search_worker
  monkeypatch.setattr(search, "BEAM_BUDGET_S", 0.0)   # the reference kernel alone
  monkeypatch.setattr(search_worker, "_idle", [])      # none kept by an earlier test
  entries = _searches(monkeypatch)
  rng = np.random.default_rng(9)
  a = rng.uniform(-1, 1, (64, 300)).astype(np.float32)
  with alloy.beam(2): first = Tensor(a, device="CPU").sum(1).numpy()
  (kept,) = search_worker._idle
  with alloy.beam(2): second = (Tensor(a, device="CPU") * 2).amax(1).numpy()
  assert_close(first, a.sum(1), rtol=1e-4, atol=1e-4)
  assert_close(second, (a * 2).max(1))
  assert len(entries) == 2 and search_worker._idle == [kept] and kept.poll() is None
  assert entries[1]["search_s"] < entries[0]["search_s"], entries
  kept.stdin.close()   # this test's own child: it ends on the closed pipe
  kept.wait(timeout=10)

def test_timing_child_reply_waits_past_descriptor_1023():
  """The timing child's reply is awaited with poll: select refused descriptors past 1023, which a long-running
  process reaches (BEAM then searched nothing)."""
  import os, resource, subprocess
  from alloy.engine.search_worker import _readable
  if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200: pytest.skip("the descriptor limit is below 1200")
  held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
  try:
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.fileno() > 1023
    assert not _readable(proc.stdout, 0.05)
    proc.stdin.write(b"x"); proc.stdin.flush()
    assert _readable(proc.stdout, 5.0)
    proc.kill(); proc.wait()
  finally:
    for fd in held: os.close(fd)
