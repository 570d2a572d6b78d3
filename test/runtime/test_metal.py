"""The METAL device's runtime: errors, limits, host-access ordering, graphs (indirect command buffers), target.
On machines without Apple GPUs this runs on the software Metal device."""
import os, subprocess, sys, textwrap
from pathlib import Path
import numpy as np, pytest
from alloy import Tensor
from alloy.runtime.device import CompileError
from alloy.runtime.registry import default_device, device_available, get_device

pytestmark = pytest.mark.skipif(not device_available("METAL"), reason="no Metal device (real or software) here")

HEAD = "#include <metal_stdlib>\nusing namespace metal;\n"
SPECIALS = "uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]"
KERNELS = {
  "crash_div": f"kernel void crash_div(device int* out [[buffer(0)]], device const int* a [[buffer(1)]], {SPECIALS}) {{ out[0] = 7 / a[0]; }}",
  "axpb": f"""kernel void axpb(device float* out [[buffer(0)]], device const float* x [[buffer(1)]], constant int& a [[buffer(2)]],
                 constant int& b [[buffer(3)]], {SPECIALS}) {{ int i = gid.x*32+lid.x; out[i] = x[i]*a + b; }}""",
  "slow_fill": f"""kernel void slow_fill(device float* out [[buffer(0)]], constant int& n [[buffer(1)]], {SPECIALS}) {{
    int i = gid.x*32+lid.x; float v = 0.0f;
    for (int k = 0; k < n; k++) v = v * 0.5f + 1.0f;
    out[i] = v + i; }}""",
}

@pytest.fixture(scope="module")
def dev(): return get_device("METAL")

def program(dev, name):
  return dev.load(name, dev.compiler.compile_cached(HEAD + KERNELS[name]))

def buffer(dev, data: np.ndarray):
  h = dev.allocator.alloc(data.nbytes)
  dev.allocator.copyin(h, memoryview(np.ascontiguousarray(data)).cast("B"))
  return h

def read(dev, h, n, dtype=np.float32):
  out = np.empty(n, dtype)
  dev.allocator.copyout(memoryview(out).cast("B"), h)
  return out

ROOT = Path(__file__).resolve().parents[2]

def run_script(script: str, timeout: float = 120) -> subprocess.CompletedProcess:
  """script in a fresh Python process on this checkout (a fresh process: no device exists yet), killed after timeout seconds."""
  return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                        capture_output=True, text=True, timeout=timeout)

def test_target_and_default(dev, monkeypatch):
  from alloy.runtime import metal
  assert dev.target.startswith("Apple") or dev.target.startswith("Mac")
  if dev.software:
    assert dev.target == "Apple7 (software)" and dev.device_name == "Apple7 (software)"
    monkeypatch.delenv("DEV", raising=False)
    assert default_device.__wrapped__() != "METAL", "the software Metal device must never be the default"
  assert dev.graph is metal.MetalGraph and not dev.graph_unavailable
  assert metal.MetalDevice.graph is metal.MetalGraph

def test_crashing_kernel_raises_naming_it(dev):
  prog = program(dev, "crash_div")
  out, zero = buffer(dev, np.zeros(1, np.int32)), buffer(dev, np.zeros(1, np.int32))
  with pytest.raises(RuntimeError, match="crash_div"): prog([out, zero], (), (1, 1, 1), (1, 1, 1), wait=True)
  prog([out, zero], (), (1, 1, 1), (1, 1, 1))            # asynchronous: the error surfaces at synchronize
  with pytest.raises(RuntimeError, match="crash_div"): dev.synchronize()
  two = buffer(dev, np.array([2], np.int32))             # the device keeps working afterwards
  prog([out, two], (), (1, 1, 1), (1, 1, 1))
  assert read(dev, out, 1, np.int32)[0] == 3

def test_threadgroup_size_limit(dev):
  prog = program(dev, "axpb")
  x = buffer(dev, np.zeros(4096, np.float32))
  with pytest.raises(ValueError, match=r"axpb: threadgroup of 2048 threads .* maxTotalThreadsPerThreadgroup=\d+"):
    prog([x, x], (1, 1), (1, 1, 1), (2048, 1, 1))

def test_copyout_waits_for_the_writer_only(dev):
  slow, axpb = program(dev, "slow_fill"), program(dev, "axpb")
  a, b = dev.allocator.alloc(64 * 4), dev.allocator.alloc(64 * 4)
  x = buffer(dev, np.arange(64, dtype=np.float32))
  axpb([a, x], (2, 1), (2, 1, 1), (32, 1, 1))                        # writes a
  dev.encoder.commit()                                               # its command buffer goes alone
  slow([b], (200000,), (2, 1, 1), (32, 1, 1))                        # a later, slower kernel writing b, in the next one
  dev.encoder.commit()
  later = dev.writers[b]
  np.testing.assert_array_equal(read(dev, a, 64), np.arange(64) * 2 + 1)
  assert later in dev.inflight, "copyout of a waited for an unrelated later kernel"
  np.testing.assert_allclose(read(dev, b, 64), 2.0 + np.arange(64), rtol=1e-6)   # waits for b's writer
  dev.synchronize()
  assert not dev.inflight

def test_copyin_waits_for_readers(dev):
  slow, axpb = program(dev, "slow_fill"), program(dev, "axpb")
  x, out = buffer(dev, np.ones(32, np.float32)), dev.allocator.alloc(32 * 4)
  tmp = dev.allocator.alloc(32 * 4)
  slow([tmp], (100000,), (1, 1, 1), (32, 1, 1))
  axpb([out, x], (3, 0), (1, 1, 1), (32, 1, 1))                      # reads x, queued behind the slow kernel
  dev.allocator.copyin(x, memoryview(np.full(32, 5, np.float32)).cast("B"))   # must not change what axpb reads
  np.testing.assert_array_equal(read(dev, out, 32), np.full(32, 3.0))

def test_graph_replay_matches_eager(dev):
  from alloy.runtime.metal.graph import MetalGraph
  axpb = program(dev, "axpb")
  n = 64
  xs = [np.arange(n, dtype=np.float32) * s for s in (1, -2)]
  x, x2 = buffer(dev, xs[0]), buffer(dev, xs[1])
  y, z, z2 = (dev.allocator.alloc(n * 4) for _ in range(3))
  g = MetalGraph([(axpb, [y, x], (3, 1), (2, 1, 1), (32, 1, 1)), (axpb, [z, y], (5, -2), (2, 1, 1), (32, 1, 1))], dev)
  assert g(wait=True) >= 0
  np.testing.assert_array_equal(read(dev, z, n), (xs[0] * 3 + 1) * 5 - 2)
  g(buffers_per_launch=[[y, x2], [z2, y]], scalars_per_launch=[None, (-1, 7)])   # new input, new output, new scalars
  np.testing.assert_array_equal(read(dev, z2, n), (xs[1] * 3 + 1) * -1 + 7)
  # eager launches of the same programs agree
  e1, e2 = dev.allocator.alloc(n * 4), dev.allocator.alloc(n * 4)
  axpb([e1, x2], (3, 1), (2, 1, 1), (32, 1, 1))
  axpb([e2, e1], (-1, 7), (2, 1, 1), (32, 1, 1))
  np.testing.assert_array_equal(read(dev, e2, n), read(dev, z2, n))
  g(scalars_per_launch=[(2, 0), None])
  dev.synchronize()
  np.testing.assert_array_equal(read(dev, z2, n), (xs[1] * 2) * -1 + 7)
  with pytest.raises(ValueError, match="takes 2 scalars"): g(scalars_per_launch=[(1,), None])

def test_compile_error_carries_source(dev):
  with pytest.raises(CompileError) as e: dev.compiler.compile(HEAD + "kernel void bad(device float* a [[buffer(0)]]) { a[0] = nope; }")
  assert "nope" in str(e.value) and "kernel void bad" in e.value.source

def test_float64_is_a_clear_error_at_the_users_line():
  t = Tensor([1.0, 2.0], device="METAL")
  with pytest.raises(TypeError, match="float64 is not supported on METAL: Metal has no 64-bit floating point"): t.double()
  with pytest.raises(TypeError, match="float64 is not supported on METAL"): t.cast("float64")
  with pytest.raises(TypeError, match="float64 is not supported on METAL"): Tensor(np.zeros(3), device="METAL")
  with pytest.raises(TypeError, match="float64 is not supported on METAL"): Tensor(1.0, dtype="float64", device="METAL")
  from alloy.renderer.metal import MetalRenderer
  from alloy import dtype as dt
  with pytest.raises(TypeError, match="Metal has no float64"): MetalRenderer().tname(dt.float64)

def test_end_to_end_on_metal():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor(x, device="METAL")
  np.testing.assert_allclose((t.T.pad(((1, 1), (1, 1))) * 2).sum(1).numpy(), (np.pad(x.T, ((1, 1), (1, 1))) * 2).sum(1))
  np.testing.assert_array_equal(Tensor(x.astype(np.int64), device="METAL").cumsum(1).numpy(), np.cumsum(x.astype(np.int64), 1))

def test_many_live_buffers(dev):
  # each software buffer holds a file descriptor; a worker started now gets sockets past fd 1024 (select's limit)
  held = [dev.allocator._alloc(4) for _ in range(1100)]
  if dev.software:
    dev.synchronize()
    dev.mtl.shutdown()
  axpb = program(dev, "axpb")
  x, y = buffer(dev, np.ones(32, np.float32)), dev.allocator.alloc(32 * 4)
  for _ in range(3): axpb([y, x], (2, 3), (1, 1, 1), (32, 1, 1))   # a commit polls for the completions before it
  np.testing.assert_array_equal(read(dev, y, 32), np.full(32, 5.0))
  del held

def test_msl_version_follows_macos():
  from alloy.runtime.metal.compiler import msl_version, msl_std_flag
  assert msl_version("15.1") == (3, 2) and msl_version("14.6.1") == (3, 1) and msl_version("13.0") == (3, 0)
  assert msl_version("12.7") == (2, 4) and msl_version("26.0") == (3, 2) and msl_version("") == (2, 3)
  assert msl_std_flag((3, 1)) == "-std=metal3.1" and msl_std_flag((2, 4)) == "-std=macos-metal2.4"

def test_exit_with_work_in_flight_is_quiet():
  # the process ends with command buffers the software worker is still running or has not read yet: closing the host's
  # sockets under it used to print the worker's ConnectionResetError / BrokenPipeError traceback
  proc = run_script("""
    import numpy as np
    from alloy import Tensor
    x = Tensor(np.arange(4096, dtype=np.float32), device="METAL")
    print((x * 2).sum().numpy())
    for _ in range(20): x = (x + 1).realize()   # launched, never read
  """)
  assert proc.returncode == 0 and float(proc.stdout) == 4096 * 4095, proc.stdout + proc.stderr
  assert proc.stderr == "", proc.stderr

def test_buffer_dying_in_a_reference_cycle_does_not_break_the_device():
  # The cycle collector runs every finaliser of the cycle in one pass: the software buffer's (closing its memory) and
  # Buffer.__del__'s (handing that buffer back to the allocator's cache). The next allocation got the dead buffer, its
  # submission failed in send_fds with a TypeError after the command buffer was counted as sent, and the next wait hung.
  # A finalised buffer must never be handed out again, and a submission that fails must leave the device working.
  proc = run_script("""
    import gc, numpy as np, alloy
    from alloy import Tensor
    def f():
      try: t = Tensor(np.ones(4, np.float32), device="METAL"); t.numpy(); raise ValueError
      except ValueError as e: return e
    e = f(); e.cycle = e; alloy.synchronize("METAL"); del e; gc.collect()
    print((Tensor(np.ones(4, np.float32), device="METAL") * 3).numpy().tolist())
    dev = alloy.get_device("METAL")
    if dev.software:   # a submission that fails (it binds a freed buffer) raises, and later work still runs
      freed = dev.mtl_device.newBufferWithLength_options_(16, 0)
      freed.__del__()
      cb = dev.queue.commandBuffer()
      cb.blitCommandEncoder().copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(freed, 0, dev.allocator.alloc(16), 0, 16)
      try: cb.commit()
      except dev.mtl.MetalValidationError as err: print("refused:", "freed" in str(err))
      cb.waitUntilCompleted()
    print((Tensor(np.arange(4, dtype=np.float32), device="METAL") + 1).numpy().tolist())
  """, timeout=60)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  assert lines[0] == "[3.0, 3.0, 3.0, 3.0]" and lines[-1] == "[1.0, 2.0, 3.0, 4.0]", proc.stdout
  if len(lines) == 3: assert lines[1] == "refused: True", proc.stdout
