"""The trace: Chrome trace-event JSON with one slice per launch holding the kernel's source; the CLI table."""
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import alloy
from alloy import Tensor
from alloy.engine.watch import OnLaunch, watchers

ROOT = Path(__file__).resolve().parents[2]

def _kernel_slices(path):
  events = json.loads(Path(path).read_text())["traceEvents"]
  return events, [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]

def test_trace_has_one_slice_per_launch(tmp_path, device):
  launches = []
  count = lambda ck, bufs, e, t, *_: launches.append(ck.meta.name)
  path = tmp_path / "t.json"
  x = Tensor(np.ones((8, 8), np.float32), device=device)
  f = alloy.jit(lambda a: (a * 2).sum(0))
  with watchers.watching(OnLaunch(count)), alloy.trace(str(path)):
    (x @ x).relu().softmax(-1).numpy()
    for _ in range(3): f(x)
  events, kernels = _kernel_slices(path)
  assert [k["name"] for k in kernels] == launches and len(launches) >= 4
  for k in kernels:
    args = k["args"]
    assert k["dur"] >= 0 and args["device_time_measured"]
    assert f"void {k['name']}(" in args["source"] or f" {k['name']}(" in args["source"]
    for field in ("target", "global_size", "local_size", "vector_widths", "opts", "flops", "bytes"): assert field in args
  stages = {e["name"] for e in events if e.get("cat") == "host"}
  assert {"schedule", "submit"} <= stages
  assert not watchers.device_time and not watchers.on_launch and not watchers.on_stage

def test_trace_env_and_cli(tmp_path):
  path = tmp_path / "env.json"
  script = "import numpy as np, alloy; (alloy.Tensor(np.ones(5, np.float32)) * 3).exp().numpy()"
  env = dict(os.environ, TRACE=str(path), PYTHONPATH=str(ROOT), DEV="CPU")
  subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True)
  _, kernels = _kernel_slices(path)
  assert len(kernels) == 1 and "exp" in kernels[0]["args"]["source"]
  out = subprocess.run([sys.executable, "-m", "alloy.trace", str(path)], cwd=ROOT, env=dict(env, TRACE=""),
                       capture_output=True, text=True, check=True).stdout
  assert "GB/s" in out and "GFLOP/s" in out and kernels[0]["name"] in out and "1 launches" in out

def test_trace_has_one_slice_per_command_buffer_around_its_kernels(tmp_path, device):
  from alloy.runtime.registry import get_device
  path = tmp_path / "cb.json"
  x = Tensor(np.arange(16, dtype=np.float32), device=device)
  get_device(device).synchronize()
  with alloy.trace(str(path), kernel_times=False):   # launches batch as they do unrecorded
    y = x
    for _ in range(100): y = (y + 1).realize()
    np.testing.assert_array_equal(y.numpy(), np.arange(16) + 100)
  events, kernels = _kernel_slices(path)
  cbs = [e for e in events if e.get("cat") == "command_buffer"]
  assert len(kernels) == 100 and sum(cb["args"]["dispatches"] for cb in cbs) == 100
  assert [k for cb in cbs for k in cb["args"]["kernels"]] == [k["name"] for k in kernels]
  i = 0
  for cb in cbs:   # each holds its kernels' slices, on the same track
    for k in kernels[i:i + cb["args"]["dispatches"]]:
      assert k["tid"] == cb["tid"] and cb["ts"] <= k["ts"] and k["ts"] + k["dur"] <= cb["ts"] + cb["dur"] + 1e-3
    i += cb["args"]["dispatches"]
  if device == "METAL":   # dependent launches: at most two command buffers, a barrier before each but the first of each
    assert len(cbs) <= 2 and sum(cb["args"]["barriers"] for cb in cbs) == 100 - len(cbs)
  if device == "CPU": assert len(cbs) == 100   # a queue entry per launch
