"""The METAL command encoder: launches batched into one command buffer, a barrier only on a hazard (RAW, WAR, WAW),
commits on a full batch or a host read; and on the software device, barriers that are real and a missing one
detected (MetalHazardError naming both kernels)."""
import numpy as np, pytest
from alloy import Tensor
from alloy.runtime.registry import device_available, get_device

pytestmark = pytest.mark.skipif(not device_available("METAL"), reason="no Metal device (real or software) here")

HEAD = "#include <metal_stdlib>\nusing namespace metal;\n"
SPECIALS = "uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]"
SOURCE = HEAD + f"""
kernel void axpb(device float* out [[buffer(0)]], device const float* x [[buffer(1)]], constant int& a [[buffer(2)]],
                 constant int& b [[buffer(3)]], {SPECIALS}) {{ int i = gid.x*32+lid.x; out[i] = x[i]*a + b; }}
kernel void negate(device float* out [[buffer(0)]], device const float* x [[buffer(1)]], {SPECIALS}) {{
  int i = gid.x*32+lid.x; out[i] = -x[i]; }}
"""

@pytest.fixture(scope="module")
def dev(): return get_device("METAL")

@pytest.fixture
def software(dev):
  if not dev.software: pytest.skip("checks the software Metal device's barriers")
  return dev

def programs(dev):
  binary = dev.compiler.compile_cached(SOURCE)
  return dev.load("axpb", binary), dev.load("negate", binary)

def buffer(dev, data):
  h = dev.allocator.alloc(data.nbytes)
  dev.allocator.copyin(h, memoryview(np.ascontiguousarray(data)).cast("B"))
  return h

def read(dev, h, n):
  out = np.empty(n, np.float32)
  dev.allocator.copyout(memoryview(out).cast("B"), h)
  return out

def counts(dev): return dev.encoder.committed, dev.encoder.dispatched, dev.encoder.barriers

def test_dependent_eager_launches_go_out_in_two_command_buffers(dev):
  dev.synchronize()
  x = Tensor(np.arange(64, dtype=np.float32), device="METAL")
  y = (x + 0).realize()
  dev.synchronize()
  committed, dispatched, barriers = counts(dev)
  for _ in range(100): y = (y * 1.5 - 2).realize()   # each reads the one before: a barrier between them
  expected = np.arange(64, dtype=np.float32)
  for _ in range(100): expected = expected * np.float32(1.5) - np.float32(2)
  np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5)
  c, d, b = counts(dev)
  assert d - dispatched == 100 and c - committed <= 2, (c - committed, d - dispatched)
  assert b - barriers >= 100 - (c - committed), "a dependent launch went without a barrier"

def test_independent_launches_carry_no_barriers(dev, monkeypatch):
  monkeypatch.setattr(dev.encoder, "max_dispatches", 128)
  x = Tensor(np.arange(64, dtype=np.float32), device="METAL").realize()
  dev.synchronize()
  committed, dispatched, barriers = counts(dev)
  ys = [(x * float(k)).realize() for k in range(100)]   # all read x, each writes its own buffer
  dev.synchronize()
  c, d, b = counts(dev)
  assert (c - committed, d - dispatched, b - barriers) == (1, 100, 0)
  for k in (0, 1, 57, 99): np.testing.assert_array_equal(ys[k].numpy(), np.arange(64, dtype=np.float32) * k)

def test_write_after_read_and_after_write_get_a_barrier(dev):
  axpb, negate = programs(dev)
  x, y, z = buffer(dev, np.arange(32, dtype=np.float32)), dev.allocator.alloc(128), dev.allocator.alloc(128)
  dev.synchronize()
  committed, dispatched, barriers = counts(dev)
  axpb([y, x], (2, 1), (1, 1, 1), (32, 1, 1))   # reads x
  negate([z, y], (), (1, 1, 1), (32, 1, 1))     # reads y, written just before: RAW
  negate([x, y], (), (1, 1, 1), (32, 1, 1))     # writes x, which the first read; no write since the barrier: no RAW
  negate([x, z], (), (1, 1, 1), (32, 1, 1))     # writes x again: WAW
  np.testing.assert_array_equal(read(dev, x, 32), np.arange(32) * 2 + 1)
  assert counts(dev)[1:] == (dispatched + 4, barriers + 2) and counts(dev)[0] == committed + 1

def test_copyout_commits_only_what_it_needs_and_waits_for_its_writer(dev):
  axpb, _ = programs(dev)
  x, y = buffer(dev, np.ones(32, np.float32)), dev.allocator.alloc(128)
  dev.synchronize()
  axpb([y, x], (3, 1), (1, 1, 1), (32, 1, 1))
  cb = dev.writers[y]
  assert cb is dev.encoder.cb and cb not in dev.inflight   # still open: nothing has gone to the device
  np.testing.assert_array_equal(read(dev, y, 32), np.full(32, 4.0))
  assert dev.encoder.cb is None and cb not in dev.inflight   # committed by the read, waited for, retired

def test_timed_launch_runs_alone(dev):
  axpb, _ = programs(dev)
  x, y, z = buffer(dev, np.ones(32, np.float32)), dev.allocator.alloc(128), dev.allocator.alloc(128)
  dev.synchronize()
  committed = dev.encoder.committed
  axpb([y, x], (3, 1), (1, 1, 1), (32, 1, 1))
  assert axpb([z, x], (2, 0), (1, 1, 1), (32, 1, 1), wait=True) >= 0
  assert dev.encoder.committed == committed + 2 and dev.writers[y] is not dev.writers[z]

def test_missing_barrier_is_detected_naming_both_kernels(software):
  dev = software
  axpb, negate = programs(dev)
  mtl = dev.mtl
  x, y, z = buffer(dev, np.ones(32, np.float32)), dev.allocator.alloc(128), dev.allocator.alloc(128)
  w = buffer(dev, np.ones(32, np.float32))
  cb = dev.queue.commandBuffer()
  enc = cb.computeCommandEncoderWithDispatchType_(mtl.MTLDispatchTypeConcurrent)
  def dispatch(prog, bufs, scalars=()):
    enc.setComputePipelineState_(prog.pso)
    for i, b in enumerate(bufs): enc.setBuffer_offset_atIndex_(b, 0, i)
    for j, s in enumerate(scalars): enc.setBytes_length_atIndex_(np.int32(s).tobytes(), 4, len(bufs) + j)
    enc.dispatchThreadgroups_threadsPerThreadgroup_(mtl.MTLSizeMake(1, 1, 1), mtl.MTLSizeMake(32, 1, 1))
  dispatch(axpb, [y, x], (2, 1))
  dispatch(negate, [z, x])                      # reads only what axpb read: no hazard
  with pytest.raises(mtl.MetalHazardError, match=r"kernel 'negate' reads .* kernel 'axpb' wrote") as e: dispatch(negate, [z, y])
  assert (e.value.kernel, e.value.earlier) == ("negate", "axpb")
  with pytest.raises(mtl.MetalHazardError, match=r"kernel 'axpb' writes .* kernel 'negate' read"): dispatch(axpb, [x, w], (1, 0))
  enc.memoryBarrierWithScope_(mtl.MTLBarrierScopeBuffers)
  dispatch(negate, [z, y])                      # after the barrier: fine
  enc.endEncoding()
  cb.commit()
  cb.waitUntilCompleted()
  assert cb.error() is None
  np.testing.assert_array_equal(read(dev, z, 32), np.full(32, -3.0))

def test_encoder_with_its_barrier_suppressed_is_caught(software, monkeypatch):
  from alloy.runtime.metal.software import commands
  dev = software
  axpb, negate = programs(dev)
  x, y, z = buffer(dev, np.ones(32, np.float32)), dev.allocator.alloc(128), dev.allocator.alloc(128)
  dev.synchronize()
  monkeypatch.setattr(commands.ComputeCommandEncoder, "memoryBarrierWithScope_", lambda self, scope: None)
  axpb([y, x], (2, 1), (1, 1, 1), (32, 1, 1))
  with pytest.raises(dev.mtl.MetalHazardError, match="kernel 'negate' reads .* kernel 'axpb' wrote"): negate([z, y], (), (1, 1, 1), (32, 1, 1))
  monkeypatch.undo()
  dev.encoder.commit()
  dev.synchronize()

def test_barriers_are_real(software):
  """With the hazard check off, a dependent pair without its barrier runs in the other order and reads stale values;
  the barrier the encoder puts in orders it."""
  dev = software
  axpb, negate = programs(dev)
  mtl = dev.mtl
  def run(barrier: bool):
    x, y, z = buffer(dev, np.ones(32, np.float32)), buffer(dev, np.zeros(32, np.float32)), dev.allocator.alloc(128)
    cb = dev.queue.commandBuffer()
    enc = cb.computeCommandEncoderWithDispatchType_(mtl.MTLDispatchTypeConcurrent)
    for prog, bufs, scalars in ((axpb, [y, x], (2, 1)), (negate, [z, y], ())):
      if barrier and prog is negate: enc.memoryBarrierWithScope_(mtl.MTLBarrierScopeBuffers)
      enc.setComputePipelineState_(prog.pso)
      for i, b in enumerate(bufs): enc.setBuffer_offset_atIndex_(b, 0, i)
      for j, s in enumerate(scalars): enc.setBytes_length_atIndex_(np.int32(s).tobytes(), 4, len(bufs) + j)
      enc.dispatchThreadgroups_threadsPerThreadgroup_(mtl.MTLSizeMake(1, 1, 1), mtl.MTLSizeMake(32, 1, 1))
    enc.endEncoding()
    cb.commit()
    cb.waitUntilCompleted()
    return read(dev, z, 32)
  with mtl.options(hazards=False, dispatch_order="reverse"):
    np.testing.assert_array_equal(run(barrier=True), np.full(32, -3.0))
    np.testing.assert_array_equal(run(barrier=False), np.full(32, -0.0))   # negate ran first, on y's old zeros
