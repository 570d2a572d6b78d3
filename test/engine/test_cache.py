"""Caching at stage boundaries: a warm process compiles nothing."""
import os, subprocess, sys, textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

def _run_example(cache_home: str) -> str:
  env = dict(os.environ, XDG_CACHE_HOME=cache_home, DEBUG="0", PYTHONPATH=str(ROOT))
  code = textwrap.dedent("""
    import runpy, io, contextlib
    from alloy.runtime.device import default_device, get_device
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
