"""Runs a schedule: allocate outputs, compile, load, launch; keeps per-kernel stage timings.

The eager path: a realize of one tensor whose graph is one kernel (most eager ops) looks its graph up by the structure
number its nodes carry (schedule.fusion.structure_of: a new node's made from its sources', no walk of the graph) and
runs a Plan made the first time that graph was seen on the device: the compiled kernel, its launch shape, its output
buffers; where its inputs and scalar arguments sit among the graph's leaves is the schedule's (eager_kernel). What
watchers, DEBUG or BEAM ask for goes through run_schedule, the general path.
"""
from __future__ import annotations
import collections, functools, math, sys, threading, time
from alloy.helpers import DEBUG, prod
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.ir.view import ShapeTracker
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device
from alloy.schedule.fusion import schedule, is_buffer_view, eager_kernel
from alloy.codegen.program import scalar_words
from alloy.engine.compiled import cached, compile_kernel, compile_kernels, kernel_key
from alloy.engine.search import beam_width
from alloy.engine.results import Results
from alloy.engine.backpressure import throttle
from alloy.engine.values import values
from alloy.engine.watch import watchers

kernels_launched = 0

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
  results = _results(device_name, node)
  with _reuse_lock: out, _, view = results.next()   # held here before another thread can see the entry unheld
  return out, view

def _results(device_name: str, node: Node, reshaped: tuple | None = None) -> Results:
  """The reused results of node's dtype and shape (and views of them in shape `reshaped` beside, where given)."""
  key = (device_name, node.dtype, node.shape) if reshaped is None else (device_name, node.dtype, node.shape, reshaped)
  if (results := _eager_results.get(key)) is None:
    size = math.prod(node.shape)
    layouts = [(_contiguous_tracker(size, s), node.dtype, s) for s in ((node.shape,) if reshaped is None else (node.shape, reshaped))]
    results = _eager_results[key] = Results(size, node.dtype, device_name, layouts)
    if len(_eager_results) > EAGER_REUSE_SHAPES: _eager_results.popitem(last=False)
  return results

def run_schedule(targets: list[Node], device_name: str, walked: tuple | None = None) -> dict[int, Buffer]:
  """Compute the targets on the device (walked: their schedule.fusion structure where the eager path made it)."""
  global kernels_launched
  t0 = time.perf_counter()
  device = get_device(device_name)
  items = schedule([values.get(t, device_name) for t in targets], walked, device.caps.threads, device.caps.whole_matmuls)
  t_sched = time.perf_counter() - t0
  if watchers.on_stage: watchers.staged("schedule", t0, t_sched, f"{len(items)} kernels")
  if DEBUG >= 1:
    print(f"realize on {device.name} ({device.target}): scheduled {len(items)} kernel{'s' if len(items) != 1 else ''} in {t_sched*1e3:.2f} ms")
  if len(items) > 1 and not beam_width(): compile_kernels([ast for node, ast, *_ in items if 0 not in node.shape], device)   # new ones side by side
  made: dict[int, Buffer] = {}
  pressure = throttle(device)
  timed = bool(watchers.on_stage or watchers.on_launch)   # the host clock is read only for someone who watches
  wait = DEBUG >= 2 or watchers.device_time
  for node, ast, inputs, consts in items:
    out, view = _output(device.name, node)
    made[id(node)] = out
    if 0 in node.shape:   # an empty result: nothing to compute, no kernel (codegen divides by the output's sizes)
      values.set(node, view)
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
      if watchers.on_stage: watchers.staged("submit", t_launch, t_submit, ck.meta.name)
      watchers.launched(ck, bufs, elapsed, t_submit, consts)
    if DEBUG >= 2:
      m = ck.meta
      gbs = m.bytes / elapsed / 1e9 if elapsed else 0
      gflops = m.flops / elapsed / 1e9 if elapsed else 0
      print(f"  {m.name:28s} global={m.global_size} local={m.local_size} {elapsed*1e6:9.1f} us "
            f"{gbs:7.2f} GB/s {gflops:7.2f} GFLOP/s  (compile {ck.stage_seconds['compile']*1e3:.1f} ms)")
    values.set(node, view)
  return made

# ---- the eager path

class Plan:
  """One kernel's graph on one device, ready to launch again. results: the key of the output's reused buffers in
  _eager_results (None for a big output: a new buffer each time; found there each time, so they stay bounded by
  EAGER_REUSE_SHAPES), with the view the realized tensor takes where it reshapes the kernel's output (`reshaped`)."""
  __slots__ = ("dtypes", "results", "reshaped", "size", "dtype", "shape", "nbytes", "pressure", "dims")
  def __init__(self, device, node: Node, shape: tuple, ast):
    self.size, self.dtype, self.shape = math.prod(node.shape), node.dtype, node.shape
    self.nbytes = self.size * self.dtype.itemsize
    self.reshaped = None if shape == node.shape else shape
    self.results = None
    if self.nbytes <= EAGER_REUSE_MAX_BYTES:
      self.results = (device.name, node.dtype, node.shape) if self.reshaped is None else (device.name, node.dtype, node.shape, shape)
    # the compiled kernel is looked up by key at each launch, not held: kernels stay bounded by compiled.py's cache
    ck = compile_kernel(ast, device)
    self.dims, self.dtypes = (ck.meta.global_size, ck.meta.local_size), ck.meta.scalar_dtypes
    self.pressure = throttle(device)

_plans: dict = {}   # device name -> {one_kernel's number -> Plan}
PLANS_PER_DEVICE = 4096

def _eager(node: Node, device: str):
  """node's value through its plan if its graph is one kernel (the node it becomes), else leave it to the general
  path: None, or the structure of the base it walked, for the general path's schedule. The caller holds node once."""
  global kernels_launched
  base = _peel_reshape(node) if node.op is Op.VIEW else node   # a contiguous reshape: its base computed, viewed
  if base is not node and values.table and values.get(base, device) is not base: return None   # computed: a view of it
  caps = get_device(device).caps
  kernel, nodes, walked = eager_kernel(base, caps.threads, caps.whole_matmuls)
  if kernel is None: return walked
  number, ast, inputs, consts = kernel   # inputs, consts: places in nodes
  if (plans := _plans.get(device)) is None: plans = _plans[device] = {}
  if (plan := plans.get(number)) is None:
    if len(plans) >= PLANS_PER_DEVICE: plans.clear()
    plan = plans[number] = Plan(get_device(device), base, node.shape, ast)
  handles = [None]
  for k in inputs:
    b = nodes[k].arg
    if b.device != device: raise ValueError(f"kernel {ast} mixes devices {b.device} and {device}")
    handles.append(b.handle)
  scalars = scalar_words(plan.dtypes, [nodes[k].arg for k in consts]) if consts else ()
  if plan.results is not None:
    if (results := _eager_results.get(plan.results)) is None: results = _results(device, base, plan.reshaped)
    with _reuse_lock: out, _, view, *reshaped = results.next()
  else:
    out, reshaped = Buffer(device, plan.size, plan.dtype), ()
    view = buffer_view(out, base.shape)
  handles[0] = out.handle
  if (ck := cached(kernel_key(device, ast))) is None: ck = compile_kernel(ast, get_device(device))
  ck.runner(handles, scalars, *plan.dims)
  kernels_launched += 1
  plan.pressure.launched(plan.nbytes)
  done = view if base is node else reshaped[0] if reshaped and plan.reshaped == node.shape else buffer_view(out, node.shape)
  del nodes, walked
  # held elsewhere, its value is worth remembering: beyond the caller's (where base is node), realize_one's node, this
  # frame's node and base, and the argument
  if sys.getrefcount(base) > (5 if base is node else 3): values.set(base, view)
  return done

def _peel_reshape(n: Node) -> Node:
  """A contiguous reshape of a computed node needs no copy: realize the node, view its buffer."""
  while n.op is Op.VIEW and n.src[0].op not in (Op.BUFFER,) and n.arg.is_contiguous and prod(n.src[0].shape) == prod(n.shape):
    n = n.src[0]
  return n

def realize_one(node: Node, device: str) -> Node:
  """The node holding node's value (a view of a buffer) on device, through the eager path where it applies. The caller
  holds node once (its tensor), and rebinds it to the answer."""
  walked = None
  if watchers.quiet and not DEBUG:
    if values.table: node = values.get(node, device)
    if is_buffer_view(node): return node
    if not beam_width() and isinstance(walked := _eager(node, device), Node): return walked
  return realize_nodes([(node, device)], walked)[0]

def realize_nodes(items: list, walked: tuple | None = None) -> list[Node]:
  """For each (node, device name): the node holding its value, a view of a buffer. A device's nodes are scheduled
  together; walked is the eager path's walk of the first node's base, reused where it is that base."""
  done: list = [None] * len(items)
  by_device: dict[str, list] = {}
  for i, (node, device) in enumerate(items):
    n = done[i] = values.get(node, device)
    if not is_buffer_view(n): by_device.setdefault(device, []).append(i)
  for device_name, idx in by_device.items():
    bases = [values.get(_peel_reshape(done[i]), device_name) for i in idx]
    run_schedule(bases, device_name, walked if walked is not None and walked[0][-1] is bases[0] else None)
    for i, b in zip(idx, bases):
      buf_node = values.get(b, device_name)
      done[i] = buf_node if b is done[i] else buffer_view(buf_node.src[0].arg, done[i].shape)
  return done

def stored(node: Node, device: str) -> Node:
  """node computed (realize_one) and, where it is a view of part of a buffer or strided, copied into a buffer of its
  own: the node reading exactly its elements from one contiguous buffer."""
  n = realize_one(node, device)
  if not is_buffer_view(n):
    copy = Node(Op.CONTIGUOUS, (n,), None, n.dtype, n.shape)
    run_schedule([copy], device)
    n = values.get(copy, device)
  return n
