"""Backpressure (reliability issue, item 6): a loop of launches cannot queue without bound, and Ctrl-C ends it within
about a second instead of after the whole queue drains."""
import os, signal, subprocess, sys, textwrap, time
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.engine import backpressure

def test_queued_work_stays_within_two_budgets(monkeypatch):
  dev = alloy.get_device("CPU")
  a = Tensor(np.random.default_rng(0).random((256, 256), dtype=np.float32), device="CPU")
  (a @ a).numpy()
  out_bytes = 256 * 256 * 4
  monkeypatch.setattr(backpressure, "QUEUE_BYTES", 4 * out_bytes)
  monkeypatch.setattr(backpressure, "_throttles", {})
  outs, most = [], 0
  for _ in range(60):
    outs.append((a @ a + 1).realize())
    most = max(most, dev.submitted - dev.completed)
  assert most <= 2 * 4 + 1, f"{most} launches queued past a budget of 4"
  np.testing.assert_allclose(outs[-1].numpy(), a.numpy() @ a.numpy() + 1, rtol=1e-4)

LOOP = textwrap.dedent("""
  import sys, time, numpy as np, alloy
  from alloy import Tensor
  a = Tensor(np.random.default_rng(0).random((1024, 1024), dtype=np.float32), device="CPU")
  (a @ a).numpy()
  outs = []
  print("ready", flush=True)
  try:
    while True: outs.append((a @ a).realize())
  except KeyboardInterrupt:
    if sys.argv[1] == "raise": raise
  t = time.perf_counter()
  (Tensor(np.ones(4, np.float32), device="CPU") + 1).numpy()
  print(f"next op after the interrupt: {time.perf_counter() - t:.2f} s", flush=True)
""")

@pytest.mark.parametrize("mode", ["raise", "catch"])
def test_ctrl_c_ends_within_about_a_second(mode):
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  proc = subprocess.Popen([sys.executable, "-c", LOOP, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
  assert proc.stdout.readline().strip() == "ready"
  time.sleep(1.5)   # the loop queues matmuls meanwhile: without a bound, many seconds of them
  start = time.perf_counter()
  proc.send_signal(signal.SIGINT)
  out, err = proc.communicate(timeout=60)
  took = time.perf_counter() - start
  assert took < 6, f"the process took {took:.1f} s to end after Ctrl-C"
  if mode == "raise": assert proc.returncode != 0 and "KeyboardInterrupt" in err
  else: assert proc.returncode == 0 and "next op after the interrupt" in out, err

def test_the_budget_is_the_devices_own_unless_the_environment_sets_one(monkeypatch):
  class Device:   # counts fences; its budget is 3 launches of 100 bytes
    queue_bytes, fences = 300, 0
    def fence(self):
      self.fences += 1
      return self.fences
    def wait_fence(self, fence): pass
  monkeypatch.setattr(backpressure, "QUEUE_BYTES", 0)
  t = backpressure.Throttle(dev := Device())
  for _ in range(9): t.launched(100)
  assert dev.fences == 3
  monkeypatch.setattr(backpressure, "QUEUE_BYTES", 900)
  t = backpressure.Throttle(dev := Device())
  for _ in range(9): t.launched(100)
  assert dev.fences == 1
  from alloy.runtime.cuda import CUDADevice
  assert CUDADevice.queue_bytes == 1 << 30 and alloy.get_device("CPU").queue_bytes == 64 << 20
