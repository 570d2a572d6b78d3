"""Runs a schedule: allocate outputs, compile, load, launch; keeps per-kernel stage timings."""
from __future__ import annotations
import collections, functools, math, threading, time
from alloy.helpers import DEBUG, prod
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.ir.view import ShapeTracker
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device
from alloy.schedule.fusion import schedule, realized, set_realized, is_buffer_view
from alloy.codegen.program import scalar_words
from alloy.engine.compiled import compile_kernel, compile_kernels, emit_stage, stage_listeners
from alloy.engine.search import beam_width
from alloy.engine.results import Results
from alloy.engine.backpressure import throttle

# launch hooks (the jit's capture and the trace recorder listen here): listener(ck, buffers, elapsed, t_submit, consts),
# consts: the CONST nodes whose values the launch passed as its scalar arguments
launch_listeners: list = []
kernels_launched = 0
# while above zero every launch waits and reports device time (the trace recorder asks for it)
device_time_requests = 0
# called with the tensor before any read of its value on the host (the jit's capture refuses them)
host_read_guards: list = []

def buffer_view(buf: Buffer, shape) -> Node:
  """The node reading a whole buffer as a tensor of `shape`."""
  shape = tuple(shape)
  base = Node(Op.BUFFER, (), buf, buf.dtype, (buf.size,))
  return Node(Op.VIEW, (base,), _contiguous_tracker(buf.size, shape), buf.dtype, shape)

@functools.lru_cache(maxsize=4096)
def _contiguous_tracker(size: int, shape: tuple) -> ShapeTracker: return ShapeTracker.contiguous((size,)).reshape(shape)

# Small results of eager realizes by (device, dtype, shape): a dropped one's buffer and nodes are written again
# (see results.py). Only small ones, where making a buffer and its nodes costs more than the kernel, and only so
# many shapes: at most 2 x EAGER_REUSE_SHAPES x EAGER_REUSE_MAX_BYTES stay allocated for reuse.
_eager_results: collections.OrderedDict = collections.OrderedDict()
EAGER_REUSE_MAX_BYTES, EAGER_REUSE_SHAPES = 1 << 16, 256
_reuse_lock = threading.Lock()

def _output(device_name: str, node: Node) -> tuple[Buffer, Node]:
  """A buffer for node's value and the view of it that becomes node's value."""
  size = math.prod(node.shape)
  if size * node.dtype.itemsize > EAGER_REUSE_MAX_BYTES:
    out = Buffer(device_name, size, node.dtype)
    return out, buffer_view(out, node.shape)
  key = (device_name, node.dtype, node.shape)
  if (results := _eager_results.get(key)) is None:
    layout = (_contiguous_tracker(size, node.shape), node.dtype, node.shape)
    results = _eager_results[key] = Results(size, node.dtype, device_name, [layout])
    if len(_eager_results) > EAGER_REUSE_SHAPES: _eager_results.popitem(last=False)
  with _reuse_lock: out, _, view = results.next()   # held here before another thread can see the entry unheld
  return out, view

def run_schedule(targets: list[Node], device_name: str) -> dict[int, Buffer]:
  global kernels_launched
  t0 = time.perf_counter()
  items = schedule(targets, device_name)
  t_sched = time.perf_counter() - t0
  if stage_listeners: emit_stage("schedule", t0, t_sched, f"{len(items)} kernels")
  device = get_device(device_name)
  if DEBUG >= 1:
    print(f"realize on {device.name} ({device.target}): scheduled {len(items)} kernel{'s' if len(items) != 1 else ''} in {t_sched*1e3:.2f} ms")
  if len(items) > 1 and not beam_width(): compile_kernels([ast for node, ast, *_ in items if 0 not in node.shape], device)   # new ones side by side
  made: dict[int, Buffer] = {}
  pressure = throttle(device)
  timed = bool(stage_listeners or launch_listeners)   # the host clock is read only for someone who listens
  wait = DEBUG >= 2 or device_time_requests > 0
  for node, ast, inputs, consts in items:
    out, view = _output(device.name, node)
    made[id(node)] = out
    if 0 in node.shape:   # an empty result: nothing to compute, no kernel (codegen divides by the output's sizes)
      set_realized(node, view)
      continue
    bufs = [out]
    for inp in inputs[1:]:
      b = inp.arg if inp.op is Op.BUFFER else made[id(inp)]
      if b.device != device.name: raise ValueError(f"kernel {ast} mixes devices {b.device} and {device.name}")
      bufs.append(b)
    ck = compile_kernel(ast, device, bufs, consts)   # under BEAM, searched on copies of these (engine/search.py)
    scalars = scalar_words(ck.meta.scalar_dtypes, [c.arg for c in consts]) if consts else ()
    t_launch = time.perf_counter() if timed else 0.0
    elapsed = ck.runner([b.handle for b in bufs], scalars, ck.meta.global_size, ck.meta.local_size, wait=wait)
    kernels_launched += 1
    pressure.launched(out.nbytes)
    if timed:
      t_submit = time.perf_counter() - t_launch
      if stage_listeners: emit_stage("submit", t_launch, t_submit, ck.meta.name)
      for listener in launch_listeners: listener(ck, bufs, elapsed, t_submit, consts)
    if DEBUG >= 2:
      m = ck.meta
      gbs = m.bytes / elapsed / 1e9 if elapsed else 0
      gflops = m.flops / elapsed / 1e9 if elapsed else 0
      print(f"  {m.name:28s} global={m.global_size} local={m.local_size} {elapsed*1e6:9.1f} us "
            f"{gbs:7.2f} GB/s {gflops:7.2f} GFLOP/s  (compile {ck.stage_seconds['compile']*1e3:.1f} ms)")
    set_realized(node, view)
  return made

def _peel_reshape(n: Node) -> Node:
  """A contiguous reshape of a computed node needs no copy: realize the node, view its buffer."""
  while n.op is Op.VIEW and n.src[0].op not in (Op.BUFFER,) and n.arg.is_contiguous and prod(n.src[0].shape) == prod(n.shape):
    n = n.src[0]
  return n

def realize(tensors) -> None:
  by_device: dict[str, list] = {}
  for t in tensors:
    n = realized(t.node, t.device)
    t.node = n
    if is_buffer_view(n): continue
    by_device.setdefault(t.device, []).append(t)
  for device_name, ts in by_device.items():
    bases = [_peel_reshape(t.node) for t in ts]
    run_schedule([realized(b, device_name) for b in bases], device_name)
    for t, b in zip(ts, bases):
      buf_node = realized(b, device_name)
      t.node = buf_node if b is t.node else buffer_view(buf_node.src[0].arg, t.shape)

def buffer_of(t) -> Buffer:
  """The contiguous buffer holding exactly t's elements, realizing (and copying) as needed. Used to read on the host."""
  for guard in host_read_guards: guard(t)
  realize([t])
  n = t.node
  if not is_buffer_view(n):   # a view of part of a buffer, or strided: copy it into a buffer of its own
    copy = Node(Op.CONTIGUOUS, (n,), None, n.dtype, n.shape)
    run_schedule([copy], t.device)
    t.node = n = realized(copy, t.device)
  return n.src[0].arg
