"""Several Python threads computing eagerly at once get right values on every device (reliability issue, item 3).

Each run is a fresh process, so the threads also race to make the device itself: two device objects with separate
books of which launch writes which buffer made reads wait for nothing (zeros or stale values on METAL)."""
import os, subprocess, sys, textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
  import sys, threading, numpy as np, alloy
  from alloy import Tensor
  DEVICE, THREADS, OPS = sys.argv[1], 3, 150
  start, stop, wrong, errors = threading.Barrier(THREADS + 1), threading.Event(), [], []
  def work(k):
    rng = np.random.default_rng(k)
    start.wait()
    try:
      for i in range(OPS):
        a, b = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
        x = Tensor(a, device=DEVICE)
        if i % 3 == 0: got, want = (x + 1).numpy(), a + 1
        elif i % 3 == 1: got, want = (x @ Tensor(b, device=DEVICE)).numpy(), a @ b
        else: got, want = x.sum(1).numpy(), a.sum(1)
        if not np.allclose(got, want, atol=1e-4): wrong.append((k, i, ('add', 'matmul', 'sum')[i % 3], float(np.abs(got - want).max())))
    except Exception as e: errors.append(repr(e))
  def sync():   # a thread that keeps synchronizing, as another part of a program might
    start.wait()
    while not stop.is_set(): alloy.synchronize(DEVICE)
  workers = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
  syncer = threading.Thread(target=sync)
  for t in [*workers, syncer]: t.start()
  for t in workers: t.join()
  stop.set(); syncer.join()
  print("wrong", len(wrong), "of", THREADS * OPS, "errors", errors[:3], "first wrong", wrong[:3])
""")

def test_threads_get_right_values(device):
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  proc = subprocess.run([sys.executable, "-c", SCRIPT, device], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split()[:2] == ["wrong", "0"] and "errors []" in proc.stdout, proc.stdout
