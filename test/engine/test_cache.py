"""Caching at stage boundaries: a warm process compiles nothing."""
import os, subprocess, sys, textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

def _run_example(cache_home: str) -> str:
  env = dict(os.environ, XDG_CACHE_HOME=cache_home, DEBUG="0", PYTHONPATH=str(ROOT))
  code = textwrap.dedent("""
    import runpy, io, contextlib
    from alloy.runtime.registry import default_device, get_device
    dev = get_device(default_device())
    calls = []
    orig = type(dev.compiler).compile
    type(dev.compiler).compile = lambda self, src: calls.append(1) or orig(self, src)
    with contextlib.redirect_stdout(io.StringIO()): runpy.run_path("example.py")
    print("compiles", len(calls))
  """)
  return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout

def test_second_run_compiles_nothing(tmp_path):
  first = _run_example(str(tmp_path))
  second = _run_example(str(tmp_path))
  assert "compiles 0" not in first
  assert second.strip().endswith("compiles 0")

def test_cache_off(tmp_path, monkeypatch):
  from alloy.helpers import disk_cache_put, disk_cache_get
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  monkeypatch.setenv("ALLOY_CACHE", "0")
  disk_cache_put("t", "k", b"v")
  assert disk_cache_get("t", "k") is None
  monkeypatch.setenv("ALLOY_CACHE", "1")
  disk_cache_put("t", "k", b"v")
  assert disk_cache_get("t", "k") == b"v"
  assert not [p for p in (tmp_path / "alloy" / "t").iterdir() if p.name.startswith(".tmp")]

def test_same_graph_compiles_once(rng):
  import numpy as np
  from alloy import Tensor
  from alloy.engine import compiled
  x = Tensor(rng.uniform(1, 2, (33, 7)).astype(np.float32))
  (x * 3.25 + 1).realize()
  n = len(compiled._compiled)
  for _ in range(3): (Tensor(rng.uniform(1, 2, (33, 7)).astype(np.float32)) * 3.25 + 1).realize()
  assert len(compiled._compiled) == n

def test_new_kernels_of_one_schedule_compile_side_by_side(rng, monkeypatch):
  # one realize with several never-seen kernels: their compiles overlap, each result is right, a failure surfaces
  import threading, time
  import numpy as np
  import pytest
  from alloy import Tensor
  from alloy.realize_tensors import realize
  from alloy.runtime.device import CompileError
  from alloy.runtime.registry import get_device, default_device
  dev = get_device(default_device())
  real, running, most = type(dev.compiler).compile, [0], [0]
  lock = threading.Lock()
  def slow_compile(self, source):
    with lock: running[0] += 1; most[0] = max(most[0], running[0])
    try:
      time.sleep(0.05)   # long enough that overlapping compiles meet
      return real(self, source)
    finally:
      with lock: running[0] -= 1
  monkeypatch.setattr(type(dev.compiler), "compile", slow_compile)
  monkeypatch.setenv("ALLOY_CACHE", "0")
  x = rng.uniform(0.5, 1.5, (16, 24)).astype(np.float32)
  t = Tensor(x).realize()
  c = float(rng.uniform(2, 3))   # fresh constants: fresh sources
  outs = [(t * (c + i)).sum(1) if i % 2 else (t - c * i).exp() for i in range(4)]
  realize(outs)
  for i, o in enumerate(outs):
    want = (x * np.float32(c + i)).sum(1) if i % 2 else np.exp(x - np.float32(c * i))
    np.testing.assert_allclose(o.numpy(), want, rtol=1e-5)
  assert most[0] >= min(2, os.cpu_count() or 1)
  def broken(self, source): raise CompileError("no compiler today", source)
  monkeypatch.setattr(type(dev.compiler), "compile", broken)
  with pytest.raises(CompileError, match="no compiler today"):
    realize([(t * (c + 9)).exp(), (t + c).sum(0)])

def test_processes_share_a_cold_cache(tmp_path):
  # several processes compiling the same kernels into one empty cache at once: each gets right values, none a torn entry
  env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), DEBUG="0", PYTHONPATH=str(ROOT))
  env.pop("DEV", None)
  code = "import runpy; runpy.run_path('example.py')"
  procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for _ in range(4)]
  for p in procs:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "max abs difference from NumPy:" in out and float(out.split("max abs difference from NumPy:")[1]) < 1e-4

def test_gather_kernels_render_the_same_source_in_every_process():
  # the order of an index's terms used to follow reprs holding id(): each process printed gather kernels anew, and
  # missed the disk cache entries of the last
  code = textwrap.dedent("""
    import numpy as np
    from alloy import Tensor
    from alloy.engine import compiled
    x = Tensor(np.arange(60, dtype=np.float32).reshape(6, 10), device="CPU")
    i, j = Tensor(np.array([3, 1, 4, 1, 5], np.int32), device="CPU"), Tensor(np.array([2, 7, 1, 8, 2], np.int32), device="CPU")
    (x[i, j] * 2 + x[i][:, 1:4].sum(1)).numpy()
    print("".join(ck.source for ck in compiled._compiled.values()))
  """)
  env = dict(os.environ, PYTHONPATH=str(ROOT), DEBUG="0")
  sources = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout for _ in range(4)}
  assert len(sources) == 1 and "void" in next(iter(sources))
