"""@jit: run a function of Tensors once, capture the launches it makes on the second call, replay them after.
Longer than the house's 400 lines: capture, its checks and replay share the Jit's state (argument binding and the
in-place state are already split out: jit_args.py, jit_state.py).

A replay binds the new inputs' buffers (and output buffers, and fresh random keys) into the captured launches
and submits them, in batches of growing size as device graphs where the device has a Graph class, else through
the device's LaunchList (launch by launch, arguments encoded at capture); it schedules, lowers and compiles
nothing. An output buffer is made anew unless the result a recent call returned in it has been dropped by
everyone: then the call writes into it again (see engine/results.py). What a replay may not change is checked: every Tensor argument
must have the shape, dtype, device and memory layout it had at capture, every other argument must be equal, but for
Python numbers.

An int, float or bool argument is a replay argument: the capture traces it (alloy/scalar.py's Scalar) into the
kernels' scalar arguments, through Tensor ops and Python arithmetic on it (`x * lr`, `1 - beta ** step`,
`Tensor.full(shape, v)`), so a call with another value replays with that value, graphs and all. It keeps its
Python type. Where the function used the number otherwise (a size, an index, a condition, float() or math on it),
its value is baked into the capture, and a call with another value raises JitError saying how it was used.

Buffers a captured launch reads that are neither arguments nor made by the function (weights reached through
a closure or `self`, constants built inside) are bound as they were at capture: pass tensors that change
between calls as arguments. Tensors the function changes in place (arguments, or reached through a closure or
`self`: a module's weights, an optimizer's state), and the .grad of leaves, are state a replay carries over
(jit_state.py): a training step `opt.zero_grad(); loss.backward(); opt.step()` is captured whole. Host-side numbers
the function reads from such state (an optimizer's hyper-parameters and step count) come in through `live`, the
host bookkeeping that goes with them through `on_replay`, and host state that decides which kernels it makes (an
optimizer's flags) through `guard`: a replay that finds it changed runs the function normally and captures again,
as it does where state reached through a closure or `self` moved to another layout (a module's load_state_dict);
the RECAPTURES_WARNED-th time it warns.

A collective (alloy/collectives.py) the function calls, its gradient's too, is captured as a Step in launch order:
a replay runs it again on the buffers bound to its slots that call (inputs, outputs made anew, fixed ones), between
the batches of the kernels around it: NCCL enqueued on each device's stream (the graphs are split around it; see
_build_batches), the host implementation between CPU:k devices. A cross-device Tensor.to is a Step too
(realize_tensors.copy_to): runtime/transfer.py's copy_buffer again, into the same destination buffer, after its
source's writer of that call (a peer or host-to-device copy on the destination's stream; a copy into a CPU:k
buffer once everything queued there has run, since the last call's kernels may still read it). So are the
copies in the adjoints of all_gather, reduce_scatter and broadcast, and a model-parallel step's.

A check the eager path reads on the host (the bounds of an index: alloy/bounds.py; at once on the CPU device, at the
next host read on a GPU) moves to the device inside a capture (Watcher.device_check): its values are computed by captured launches and read after
the capture call and after every replay, which raises the eager path's error before the changed state is rebound.

JIT=0 turns capture off, JIT=2 captures but replays launch by launch (no graphs).
"""
from __future__ import annotations
import functools, inspect, time, warnings
from alloy.helpers import DEBUG, getenv
from alloy.ir.node import Node, views_a_buffer
from alloy.ir.ops import Op
from alloy.runtime.buffer import Borrowed, Buffer
from alloy.runtime.registry import get_device
from alloy import realize_tensors
from alloy.bounds import run_deferred
from alloy.engine.results import Results
from alloy.engine.backpressure import throttle
from alloy.engine import search
from alloy.engine.values import values
from alloy.engine.watch import Watcher, watchers
from alloy.codegen.program import scalar_words
from alloy.scalar import TRACED, Scalar, cast_number
from alloy.tensor import Tensor
from alloy import jit_args, jit_state

JIT = getenv("JIT", 1)
FIRST_BATCH, MAX_BATCH = 2, 1024   # graph batch sizes double from FIRST_BATCH up to MAX_BATCH launches
RECAPTURES_WARNED = 8   # captures again after a Recapture before a warning says the replays are mostly lost

class JitError(RuntimeError):
  """A jitted function was called in a way its capture cannot replay."""

_capturing: "_Capture | None" = None   # the capture in progress (a jitted call inside it runs its function)

def capturing() -> bool:
  """Whether a @jit capture is running (code that cannot be replayed yet raises instead of recording stale work)."""
  return _capturing is not None

def live(read, what: str = "a live number"):
  """A number the function reads from host state (an optimizer's lr): read()'s value; inside a capture a traced
  Scalar whose read() is called again on every replay (after the on_replay hooks), so its kernels take the new value."""
  if _capturing is None: return read()
  return _capturing.live(read, what)

def guard(read, what: str) -> None:
  """Inside a capture: host state that decides which kernels the function makes (an optimizer's flags, whether its
  momentum is 0): a replay calls read() first, and where its value is not the capture's the jitted function runs
  normally and captures again. Outside a capture: nothing."""
  if _capturing is not None: _capturing.guards.append((read, read(), what))

class Recapture(Exception):
  """A replay found a guarded value changed (jit.guard): the capture no longer makes the function's kernels."""

def _changes(got, want) -> str:
  """A guarded value now against the capture's (a dict: its entries that differ)."""
  if type(got) is not dict or type(want) is not dict: return f"{want!r} -> {got!r}"
  return ", ".join(f"{k} {want.get(k)!r} -> {got.get(k)!r}" for k in {**want, **got} if got.get(k) != want.get(k))

def on_replay(hook) -> None:
  """Inside a capture: call hook() at the start of every replay, host bookkeeping the function did besides its
  kernels (an optimizer counting its steps). Outside a capture: nothing."""
  if _capturing is not None: _capturing.hooks.append(hook)

# ---- capture

class _Capture(Watcher):
  """Watches the function run the second time: every launch, every random key, any host read."""
  def __init__(self, name: str):
    self.name = name
    self.launches: list = []   # (CompiledKernel, [Buffer], its scalar arguments' values), or (Step, [Buffer], [])
    self.rng_keys: list = []   # the key Buffers, in the order they were made
    self.baked: dict = {}      # number argument -> how the function used its value as a plain number
    self.hooks: list = []      # on_replay hooks, in order
    self.guards: list = []     # (read, its value at capture, what it is): see guard()
    self.live_names: dict = {} # a live number's key (negative) -> what it is
    self.live_scalars: list = []   # the live Scalars, in key order
    self.implicit: list = []   # (Tensor or Leaf, entry node) the function changed that it was not passed (jit_state.py)
    self.view_links: list = [] # per returned Tensor, how it views an argument, the implicit state or another result
    self.checks: list = []     # (values Tensor, check) the function's bounds checks moved to the device (alloy/bounds.py)
  def live(self, read, what: str):
    key = -1 - len(self.live_names)
    self.live_names[key] = what
    self.live_scalars.append(s := Scalar.live(read, key, self.baked))
    return s
  def launch(self, ck, buffers, elapsed, t_submit, consts=()) -> None:
    self.launches.append((ck, list(buffers), [c.arg for c in consts]))
  def rng_key(self, key: Tensor) -> None: self.rng_keys.append(key.node.src[0].arg)
  def device_check(self, values: Tensor, check) -> None: self.checks.append((values, check))
  def step(self, name: str, run, buffers: list, n_in: int) -> None: self.launches.append((Step(name, run, buffers, n_in), list(buffers), []))
  def host_read(self, t: Tensor) -> None:
    raise JitError(f"jit {self.name}: a tensor of shape {t.shape} is read on the host (numpy(), item(), tolist(), bool() "
                   f"or float()) inside the captured function; a replay cannot repeat that. "
                   f"Return the tensor and read it after the call, or call the function without @jit")

  def run(self, fn, args, kwargs, state: jit_state.State, before: dict):
    watch = jit_state.Watch()   # what the function changes in place or gives a .grad: its arguments only
    run_deferred()              # eager index checks from before the call: raised now, not inside the capture
    global _capturing
    _capturing = self
    try:
      # work already done for equal graphs (same input buffers as the first call) must launch again to be captured
      with watchers.watching(self, watch), values.forgetting():
        count = [0]
        ret = fn(*jit_args.trace_numbers(args, self.baked, count), **jit_args.trace_numbers(kwargs, self.baked, count))
        outs: list = []
        template = jit_args.template(ret, outs)
        self.implicit = watch.implicit(self.name, state.tensors, outs, before)
        state.implicit = [obj for obj, _ in self.implicit]
        links = jit_state.view_links(outs, state.tensors + state.implicit)
        self.view_links = links if any(links) else []
        for key, why in self.baked.items():
          if key < 0: raise JitError(f"jit {self.name}: {self.live_names[key]} (read from host state) was used as a plain number ({why}); "
                                     f"a replay could not give it a new value")
        self.changes, changed = state.changes()   # arguments changed in place, .grads set: outputs after the returned ones
        # a changed slice stays one (replays keep its layout); the device-side checks are computed with the rest
        realize_tensors.realize(outs + [t for t in changed if not views_a_buffer(t.node)] + [v for v, _ in self.checks])
    finally: _capturing = None
    return jit_args.rebuild(template, iter(outs)), template, outs + changed

class _Slots:
  """Numbers every buffer the captured launches touch; fixed ones keep their Buffer, the others are bound per call."""
  def __init__(self):
    self.index: dict[int, int] = {}
    self.buffers: list[Buffer] = []
  def slot(self, buf: Buffer) -> int:
    if (i := self.index.get(id(buf))) is None:
      i = self.index[id(buf)] = len(self.buffers)
      self.buffers.append(buf)
    return i

class Step:
  """Work other than a kernel the function ran (a collective, a copy between devices: Watcher.step), replayed in launch order on the buffers
  bound to its slots: run(ins, outs) over Borrowed buffers of the sizes captured."""
  def __init__(self, name: str, run, buffers: list, n_in: int):
    self.name, self.run, self.n_in = name, run, n_in
    self.layouts = [(b.device, b.size, b.dtype) for b in buffers]
    self.devices = sorted({b.device for b in buffers})
  def writes(self, buffers: list) -> list: return buffers[self.n_in:]
  def __call__(self, handles) -> None:
    bufs = [Borrowed(device, size, dtype, h) for (device, size, dtype), h in zip(self.layouts, handles)]
    self.run(bufs[:self.n_in], bufs[self.n_in:])

class _StepRunner:
  """A Step as a replay batch of one (the batches' call): the handles bound to its slots this call, else its fixed ones."""
  def __init__(self, step: Step, handles: list): self.step, self.handles = step, handles
  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> None:
    self.step(buffers_per_launch[0] if buffers_per_launch and buffers_per_launch[0] is not None else self.handles)

def _written(ck, buffers: list) -> list:
  """The buffers a captured launch or step writes: a kernel its first, a step its outputs."""
  return ck.writes(buffers) if type(ck) is Step else buffers[:1]

def _name(ck) -> str: return ck.name if type(ck) is Step else ck.meta.name

def _tensor(node: Node, device: str) -> Tensor:
  """A Tensor of a node whose device and dtype were checked at capture."""
  t = Tensor.__new__(Tensor)
  t.node, t.device, t._ag = node, device, None
  return t

# ---- replay

class Replay:
  """What a capture left: the launches with their buffer slots, the input checks, how to bind each call."""
  def __init__(self, name: str, arg_names: list[str], args, kwargs, cap: _Capture, template, outs: list[Tensor],
               inputs: list[Node], graph_mode: bool, grad_args: list):
    self.name, self.arg_names = name, arg_names
    labels: list = []
    tensors, self.others = jit_args.flatten_args(arg_names, args, kwargs, labels)
    self.other_labels, self.labels = labels, jit_args.tensor_labels(self.others, labels)
    (self.grad_args, entry_grads), self.changes = grad_args, cap.changes   # see jit_state.py
    self.labels += [f"{self.labels[i]}.grad" for i in self.grad_args]
    self.implicit = [obj for obj, _ in cap.implicit]   # what the function changed that it was not passed, in changes' order
    self.view_links = cap.view_links
    self.implicit_values = [obj for obj, node in cap.implicit if node is not None]   # bound per call as inputs
    self.labels += [f"a tensor of shape {t.shape} reached through a closure or self" for t in self.implicit_values]
    tensors = list(tensors) + entry_grads + self.implicit_values
    inputs = list(inputs) + [node for _, node in cap.implicit if node is not None]
    self.plain = all(o is jit_args.TENSOR for o in self.others)   # Tensors only, by position: checked without flattening
    self.specs = [jit_args.spec(t, n) for t, n in zip(tensors, inputs)]
    slots = _Slots()
    self.launches = [(ck, tuple(slots.slot(b) for b in bufs)) for ck, bufs, _ in cap.launches]
    made = {id(b) for ck, bufs, _ in cap.launches for b in _written(ck, bufs)}
    self._trace_numbers(cap)
    # inputs: the first argument holding a buffer binds it; a later argument holding the same buffer must again
    self.input_slots: list = []
    self.aliases: list = []    # (argument, earlier argument sharing its buffer at capture)
    first_with: dict[int, int] = {}
    for i, n in enumerate(inputs):
      buf = n.src[0].arg
      if id(buf) in made: raise JitError(f"jit {name}: the function writes into its argument {self.labels[i]}, which a replay cannot do")
      if id(buf) in first_with:
        self.aliases.append((i, first_with[id(buf)]))
        self.input_slots.append(None)
        continue
      first_with[id(buf)] = i
      self.input_slots.append(slots.index.get(id(buf)))
    # outputs: a buffer made by a launch is written anew on every call, so results the user holds keep their values
    self.template = template
    self.outputs: list = []   # per returned Tensor: (output buffer, its view, argument, node): see _results
    self.fresh: list = []     # (slot, Results) per output buffer
    fresh_of: dict[int, int] = {}
    layouts_of: dict[int, list] = {}
    for t in outs:
      n = t.node
      buf = n.src[0].arg
      if id(buf) in made:
        if (f := fresh_of.get(id(buf))) is None:
          f = fresh_of[id(buf)] = len(self.fresh)
          layouts_of[f] = []
          self.fresh.append((slots.slot(buf), (buf.size, buf.dtype, buf.device)))
        layouts = layouts_of[f]
        if (layout := (n.arg, n.dtype, n.shape)) not in layouts: layouts.append(layout)
        self.outputs.append((f, layouts.index(layout), None, n))
      elif id(buf) in first_with: self.outputs.append((None, None, first_with[id(buf)], n))
      else: self.outputs.append((None, None, None, n))   # a constant: returned as it was
    self.fresh = [(s, Results(*what, layouts_of[f])) for f, (s, what) in enumerate(self.fresh)]
    out_bytes: dict = {}   # device -> output bytes of one replay, for the host to wait when the device falls behind
    for _, r in self.fresh: out_bytes[r.device] = out_bytes.get(r.device, 0) + r.size * r.dtype.itemsize
    self.pressure = [(throttle(get_device(d)), nbytes) for d, nbytes in out_bytes.items()]
    # the device-side checks: their buffers are made by captured launches and kept, so every replay writes them anew
    self.checks = [(v.node.src[0].arg, check) for v, check in cap.checks]
    # random keys: refreshed in the order they were made, so the numbers match those of the same calls without @jit
    self.rng = [(slots.index.get(id(key)), key.device, key.dtype) for key in cap.rng_keys]
    self.buffers = slots.buffers
    self.handles = [b.handle for b in slots.buffers]
    self.variable = {s for s in self.input_slots if s is not None} | {s for s, _ in self.fresh} | {r[0] for r in self.rng if r[0] is not None}
    self.direct = [(ck, jit_args.picker(idx), None, None) if type(ck) is Step else (ck.runner, jit_args.picker(idx), ck.meta.global_size,
                    ck.meta.local_size) for ck, idx in self.launches]
    self.batches, self.graph_off = self._build_batches(graph_mode)
    self.graphs = [(runner if is_graph else None, i, j, var) for runner, i, j, var, is_graph in self.batches] if graph_mode else []
    for slot in self.variable:   # bound anew on every call: do not keep the capture call's buffers alive
      self.buffers[slot] = self.handles[slot] = None
    if DEBUG >= 1: print(self.describe())

  def _trace_numbers(self, cap: _Capture) -> None:
    """Where the number arguments went: per launch its scalar values and words, and which values are traced numbers."""
    self.number_at = [k for k, o in enumerate(self.others) if type(o) in jit_args.NUMBERS]   # number argument -> place in others
    self.numbers = [self.others[k] for k in self.number_at]
    self.baked = cap.baked
    self.values = [list(values) for _, _, values in cap.launches]
    self.words = [() if type(ck) is Step else scalar_words(ck.meta.scalar_dtypes, values) for ck, _, values in cap.launches]
    traced = [(i, [(j, v.source) for j, v in enumerate(values) if type(v) in TRACED]) for i, (_, _, values) in enumerate(cap.launches)]
    self.traced = [(i, found) for i, found in traced if found]
    self.stale: set = set()   # launches whose batch runner holds older words than self.words
    self.hooks, self.guards = cap.hooks, cap.guards
    # per launch taking live numbers: the keys of those it takes; a replay evaluates it again where one of them moved
    self.live = [(i, found, keys) for i, found in self.traced if (keys := {k for _, src in found for k in src.arguments() if k < 0})]
    self.live_scalars = cap.live_scalars
    self.live_last = [s.value for s in self.live_scalars]

  def _build_batches(self, graph_mode: bool):
    """Consecutive launches on one device, as (runner, first, end, [(launch in batch, picker)] for launches that
    take variable buffers, is_graph). With graphs, batches of 2, 4, 8, ... launches so the device starts early ones
    at once, each a device graph where there is one that takes them (a launch alone goes without: a graph of one
    only adds the cost of updating it); without, one LaunchList per device. A Step (a collective, a copy between
    devices) is a batch of its own, between graphs (self.splits names them)."""
    self.splits: list = []
    if not self.launches: return [], "nothing to replay"
    batches, reasons, i = [], set(), 0
    size = FIRST_BATCH if graph_mode else len(self.launches)
    while i < len(self.launches):
      ck, idx = self.launches[i]
      if type(ck) is Step:
        # Not put into a graph: NCCL can be stream-captured, but its captured node keeps the pointers it was
        # captured with, while a replay binds new input and output buffers per call (a kernel node's are updated in
        # place), and with several GPUs every rank's stream would have to be captured at once. Enqueued on each
        # device's stream between the graphs before and after it, it keeps their order with no host wait (NCCL, a
        # peer or host-to-device copy); a CPU:k host collective, or a copy from a GPU or into a CPU:k buffer, waits
        # on the host for its inputs' writers whatever batching surrounds it.
        var = [(0, jit_args.picker(idx))] if any(s in self.variable for s in idx) else []
        batches.append((_StepRunner(ck, [self.handles[s] for s in idx]), i, i + 1, var, False))
        self.splits.append(f"{ck.name} on {', '.join(ck.devices)}")
        i += 1
        continue
      device = get_device(self.buffers[idx[0]].device)
      j = i
      while (j < len(self.launches) and j - i < size and type(self.launches[j][0]) is not Step
             and self.buffers[self.launches[j][1][0]].device == device.name): j += 1
      batch = self.launches[i:j]
      launches = [(ck.runner, [self.handles[s] for s in idx], self.words[i + k], ck.meta.global_size, ck.meta.local_size)
                  for k, (ck, idx) in enumerate(batch)]
      var = [(k, jit_args.picker(idx)) for k, (ck, idx) in enumerate(batch) if any(s in self.variable for s in idx)]
      runner = None
      numbers = any(i <= t < j for t, _ in self.traced)
      if graph_mode and device.graph is None: reasons.add(f"{device.name}: {device.graph_unavailable or 'no Graph class'}")
      elif graph_mode and numbers and not getattr(device.graph, "updates_scalars", False):
        reasons.add(f"{device.name}: its graphs cannot change a launch's scalars, which number arguments set")
      elif graph_mode and j - i > 1:
        try: runner = device.graph(launches, device)
        except Exception as e: reasons.add(f"{device.name}: {type(e).__name__}: {e}")   # replayed one by one instead
      batches.append((runner or device.launch_list(launches, device), i, j, var, runner is not None))
      i = j
      if graph_mode: size = min(size * 2, MAX_BATCH)
    if not graph_mode: return batches, "JIT=2 (or graph=False) asks for replay without graphs"
    return batches, "; ".join(sorted(reasons))

  def describe(self) -> str:
    names = [_name(ck) for ck, _ in self.launches]
    shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
    ins = ", ".join(f"{label}: {spec[0]} {spec[1].name} {spec[2]}" for label, spec in zip(self.labels, self.specs)) or "none"
    graphs = [j - i for g, i, j, _ in self.graphs if g is not None]
    alone = sum(j - i for _, i, j, _, is_graph in self.batches if not is_graph) - len(self.splits)
    how = f"replays as {len(graphs)} graph{'s' if len(graphs) != 1 else ''} of {graphs} launches" if graphs else "replays"
    if alone: how += f"{' and' if graphs else ''} {alone} launch{'es' if alone != 1 else ''} one by one"
    if self.graph_off: how += f" ({self.graph_off})"
    if self.splits:
      how += (f"; {len(self.splits)} step{'s' if len(self.splits) != 1 else ''} (collectives, copies between devices) between the "
              f"batches (not in a graph: see _build_batches): {', '.join(self.splits)}")
    if self.numbers:
      how += (f"; {len(self.numbers)} number argument{'s' if len(self.numbers) != 1 else ''} "
              f"({len(self.numbers) - len(self.baked)} replayed, into {len(self.traced)} launches; {len(self.baked)} baked)")
    n_fresh = len(self.fresh)
    kernels = len(names) - len(self.splits)
    return (f"jit {self.name}: captured {kernels} kernel{'s' if kernels != 1 else ''} [{shown}]; inputs {ins}; "
            f"{n_fresh} output buffer{'s' if n_fresh != 1 else ''} per call (reused once its results are dropped), "
            f"{len(self.rng)} random key{'s' if len(self.rng) != 1 else ''}, {len(self.buffers) - len(self.variable)} fixed buffers; {how}")

  # ---- one call

  def _check_others(self, others, skip=()) -> None:
    for k, (got, want) in enumerate(zip(others, self.others)):
      if k in skip: continue
      try: same = got is want or bool(got == want)
      except Exception: same = False
      if not same:
        if got is jit_args.TENSOR or want is jit_args.TENSOR:
          raise JitError(f"jit {self.name}: argument {self.other_labels[k]} was {'a Tensor' if want is jit_args.TENSOR else repr(want)} at capture, "
                         f"now {'a Tensor' if got is jit_args.TENSOR else repr(got)}")
        raise JitError(f"jit {self.name}: argument {self.other_labels[k]} is {got!r}, captured with {want!r}; a value that is not a "
                       f"Tensor is baked into the captured kernels: pass it as a Tensor or use one jitted function per value")
    raise JitError(f"jit {self.name}: called with {len(others)} argument items, captured with {len(self.others)}")

  def _input_error(self, i: int, t: Tensor, n: Node) -> JitError:
    shape, dtype, device, st, size = self.specs[i]
    what = (f"shape {n.shape}, captured with {shape}" if n.shape != shape else
            f"dtype {n.dtype.name}, captured with {dtype.name}" if n.dtype != dtype else
            f"device {t.device}, captured on {device}" if t.device != device else
            f"memory layout {jit_args.describe_layout(n.arg, n.src[0].arg.size)}, captured with {jit_args.describe_layout(st, size)}")
    return JitError(f"jit {self.name}: argument {self.labels[i]} has {what}")

  def _tensors(self, args, kwargs) -> list:
    """The Tensor arguments, in capture order, once every other argument is checked equal to the capture's (number
    arguments: of the same type; new values give the launches they reach new scalar words)."""
    if self.plain and not kwargs and len(args) == len(self.others):
      for a in args:
        if type(a) is not Tensor: break
      else: return args
    tensors, others = jit_args.flatten_args(self.arg_names, args, kwargs)
    if not jit_args.same(others, self.others) or any(type(others[k]) is not type(self.others[k]) for k in self.number_at):
      if not self.number_at or len(others) != len(self.others): self._check_others(others)
      self._new_numbers(others)
    return tensors

  def _new_numbers(self, others: list) -> None:
    """Check a call whose number arguments may differ from the last call's; compute the words of the launches they reach."""
    at = set(self.number_at)
    for k, (got, want) in enumerate(zip(others, self.others)):
      if k in at: continue
      try: same = got is want or bool(got == want)
      except Exception: same = False
      if not same: self._check_others(others, at)
    numbers = [others[k] for k in self.number_at]
    for n, (got, want) in enumerate(zip(numbers, self.numbers)):
      label = self.other_labels[self.number_at[n]]
      if type(got) is not type(want):
        raise JitError(f"jit {self.name}: argument {label} is {got!r} of type {type(got).__name__}, captured as {type(want).__name__}; "
                       f"a replay keeps a number argument's type (another type may make other kernels)")
      if n in self.baked and not (got == want or (got != got and want != want)):
        raise JitError(f"jit {self.name}: argument {label} is {got!r}, captured with {want!r}; the function used its value as a "
                       f"plain number ({self.baked[n]}), so that value is baked into the captured kernels. Use it only in Tensor ops "
                       f"and + - * / // % ** on it, pass it as a Tensor, or use one jitted function per value")
    self._evaluate(self.traced, numbers)
    self.numbers, self.others = numbers, others

  def _evaluate_live(self) -> None:
    """The live numbers read again (after the hooks); the launches taking one that moved since the last call are
    evaluated again."""
    memo, moved = {}, set()
    for k, s in enumerate(self.live_scalars):
      memo[id(s)] = v = s.op()
      if v != self.live_last[k] or v != v:
        moved.add(s.index)
        self.live_last[k] = v
    if moved: self._evaluate([(i, found) for i, found, keys in self.live if not keys.isdisjoint(moved)], self.numbers, memo)

  def _evaluate(self, traced: list, numbers: list, memo: dict | None = None) -> None:
    """The scalar words of the launches `traced` ([(launch, [(scalar, its Scalar)])]) for these number arguments and
    the live numbers' values now (memo: Scalar id -> value, those read already); launches whose words changed go stale."""
    if memo is None: memo = {}
    for i, found in traced:
      values, dtypes = self.values[i], self.launches[i][0].meta.scalar_dtypes
      for j, source in found: values[j] = cast_number(source.evaluate(numbers, memo), dtypes[j])
      if (words := scalar_words(dtypes, values)) != self.words[i]:
        self.words[i] = words
        self.stale.add(i)

  def __call__(self, args, kwargs):
    for read, want, what in self.guards:   # before anything changes: a Recapture runs the call normally instead
      if (got := read()) != want: raise Recapture(f"{what} changed since the capture: {_changes(got, want)}")
    tensors = self._tensors(args, kwargs)
    state = self._state() if self.implicit_values else []   # before the hooks: a Recapture has changed nothing
    if self.hooks or self.live:   # host bookkeeping first, then the live numbers it moves (an optimizer's step count)
      for hook in self.hooks: hook()
      self._evaluate_live()
    args_only, tensors = tensors, jit_state.with_grads(tensors, self.grad_args, self.name) if self.grad_args or self.changes else tensors
    h = self.handles[:]
    bound: list = []
    for i, t in enumerate(tensors):
      n = t.node
      if not views_a_buffer(n): n = jit_args.bound_buffer(t)
      if (n.shape, n.dtype, t.device, n.arg, n.src[0].arg.size) != self.specs[i]: raise self._input_error(i, t, n)
      bound.append(n)
      if (s := self.input_slots[i]) is not None: h[s] = n.src[0].arg.handle
    for i, n in enumerate(state, len(bound)):
      bound.append(n)
      if (s := self.input_slots[i]) is not None: h[s] = n.src[0].arg.handle
    for i, j in self.aliases:
      if bound[i].src[0].arg is not bound[j].src[0].arg:
        raise JitError(f"jit {self.name}: arguments {self.labels[j]} and {self.labels[i]} were one buffer at capture and differ now")
    results = []   # per output buffer: (buffer, base node, views) this call writes
    for s, outs in self.fresh:
      results.append(entry := outs.next())
      h[s] = entry[0].handle
    keys = []
    for s, device, dtype in self.rng:
      data = Tensor.next_rng_key()
      if s is not None:
        keys.append(b := Buffer(device, 2, dtype).copyin(data))
        h[s] = b.handle
    if watchers.on_launch: self._launch_observed(h, bound, results, keys)
    else:
      stale = self.stale
      for runner, i, j, var, _ in self.batches:
        scalars = None
        if stale and any(i <= k < j for k in stale):   # new numbers: this batch's launches get their new words
          scalars = [self.words[k] if k in stale else None for k in range(i, j)]
        if var:
          per_launch = [None] * (j - i)
          for k, pick in var: per_launch[k] = pick(h)
          if scalars is None: runner(per_launch)
          else: runner(per_launch, scalars_per_launch=scalars)
        elif scalars is None: runner()
        else: runner(scalars_per_launch=scalars)
      stale.clear()
    for pressure, nbytes in self.pressure: pressure.launched(nbytes)
    self.check()   # before the changed state is rebound: a call that raises leaves the user's tensors as they were
    if DEBUG >= 2:
      n_graphs = sum(1 for g, *_ in self.graphs if g is not None)
      print(f"jit {self.name}: replayed {len(self.launches) - len(self.splits)} kernels in {n_graphs} graph{'s' if n_graphs != 1 else ''}"
            + (f"; one by one: {self.graph_off}" if self.graph_off else "")
            + (f"; split around {len(self.splits)} steps (collectives, copies)" if self.splits else ""))
    n = len(self.outputs) - sum(1 for kind, _ in self.changes if kind != "no grad")   # the returned ones, then the changed state
    if self.changes:
      jit_state.apply(self.changes, list(args_only) + self.implicit, [self._result(k, results, bound) for k in range(n, len(self.outputs))])
    outs = [self._result(k, results, bound) for k in range(n)]
    if self.view_links: jit_state.link_views(self.view_links, outs, list(args_only) + self.implicit)
    if self.template is jit_args.TENSOR: return outs[0]
    return jit_args.rebuild(self.template, iter(outs), self.numbers)

  def check(self) -> None:
    """Read the device-side checks' values this call computed (a sync): raises the error of one that fails."""
    for buf, check in self.checks: check(buf.numpy())

  def _state(self) -> list:
    """The implicit state's nodes, checked before anything changes: where one's layout moved since the capture (a
    module's load_state_dict, a parameter realized into a buffer of its own, a lazy change between calls) or parts of
    one buffer came apart, the function runs normally and captures again."""
    first, nodes = len(self.specs) - len(self.implicit_values), []
    for i, t in enumerate(self.implicit_values, first):
      n = t.node if views_a_buffer(t.node) else jit_args.bound_buffer(t)
      if (n.shape, n.dtype, t.device, n.arg, n.src[0].arg.size) != self.specs[i]: raise Recapture(str(self._input_error(i, t, n)))
      nodes.append(n)
    for i, j in self.aliases:
      if j >= first and nodes[i - first].src[0].arg is not nodes[j - first].src[0].arg:
        raise Recapture(f"{self.labels[j]} and {self.labels[i]} were one buffer at capture and differ now")
    return nodes

  def _launch_observed(self, h, bound, results, keys) -> None:
    """Launch by launch, telling the watchers (the trace) about each, with device time when it is asked for."""
    buffers = self.buffers[:]
    for i, s in enumerate(self.input_slots):
      if s is not None: buffers[s] = bound[i].src[0].arg
    for (s, _), entry in zip(self.fresh, results): buffers[s] = entry[0]
    for s, b in zip([r[0] for r in self.rng if r[0] is not None], keys): buffers[s] = b
    wait = watchers.device_time
    for i, ((ck, idx), (prog, pick, gs, ls)) in enumerate(zip(self.launches, self.direct)):
      if type(ck) is Step:
        ck(pick(h))
        if watchers.on_step: watchers.stepped(ck.name, ck.run, [buffers[s] for s in idx], ck.n_in)
        continue
      t0 = time.perf_counter()
      elapsed = prog(pick(h), self.words[i], gs, ls, wait=wait)   # the batches keep their stale words for a later call
      t_submit = time.perf_counter() - t0
      watchers.launched(ck, [buffers[s] for s in idx], elapsed, t_submit, ())

  def _result(self, k: int, results: list, bound: list) -> Tensor:
    """The k-th returned Tensor: a view of this call's output buffer, of an argument, or a constant as captured."""
    f, v, arg, n = self.outputs[k]
    if f is not None: return _tensor(results[f][2 + v], self.fresh[f][1].device)
    if arg is not None:
      base = bound[arg].src[0]
      return _tensor(Node(Op.VIEW, (base,), n.arg, n.dtype, n.shape), base.arg.device)
    return _tensor(n, n.src[0].arg.device)

# ---- the decorator

class Jit:
  """A function of Tensors that runs normally once, is captured on its second call and replayed after."""
  def __init__(self, fn, graph: bool | None = None, beam: int | None = None):
    functools.update_wrapper(self, fn)
    self.fn, self.graph, self.beam = fn, graph, beam
    self.name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    try:
      self.arg_names = [p.name for p in inspect.signature(fn).parameters.values()
                        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError): self.arg_names = []
    self.calls = 0
    self.replay: Replay | None = None
    self.changed_before: dict = {}   # the tensors the first call changed in place, weakly (jit_state.Watch.alive)
    self.recaptures = 0

  def __get__(self, obj, objtype=None):
    """A jitted method: one capture per instance (its weights are its own)."""
    if obj is None: return self
    key = f"_alloy_jit_{self.__name__}"
    try: return obj.__dict__[key]
    except KeyError: pass
    bound = Jit(functools.partial(self.fn, obj), self.graph, self.beam)
    bound.name, bound.arg_names = self.name, self.arg_names[1:]
    try: obj.__dict__[key] = bound
    except AttributeError: pass   # no __dict__: a fresh capture per access
    return bound

  def reset(self) -> None:
    """Forget the capture: the next call runs normally and the one after captures again."""
    self.calls, self.replay = 0, None

  def __call__(self, *args, **kwargs):
    if self.replay is not None and _capturing is None:
      try: return self.replay(args, kwargs)
      except Recapture as e:   # the function now makes other kernels: run it normally, capture on the next call
        if DEBUG >= 1: print(f"jit {self.name}: {e}; capturing again")
        self.recaptures += 1
        if self.recaptures == RECAPTURES_WARNED:
          warnings.warn(f"jit {self.name}: captured again {self.recaptures} times, each change costing two calls without replay (last: {e}); "
                        f"keep what its guards and state layouts read fixed between calls (DEBUG=1 prints each reason)", stacklevel=2)
        self.reset()
    if self.beam is None: return self._run(args, kwargs)
    with search.beam(self.beam): return self._run(args, kwargs)   # the kernels it compiles are searched first

  def _run(self, args, kwargs):
    if JIT == 0 or _capturing is not None: return self.fn(*args, **kwargs)
    self.calls += 1
    tensors, _ = jit_args.flatten_args(self.arg_names, args, kwargs)
    grad_args = jit_state.grad_inputs(tensors)   # leaf arguments' .grad: inputs too
    entry_grads = [tensors[i].grad for i in grad_args]
    inputs = [jit_args.bound_buffer(t) for t in tensors + entry_grads]
    state = jit_state.State(tensors)
    if self.calls == 1:
      watch = jit_state.Watch()   # what it changes in place: changed again by the capture, a returned one is state
      with watchers.watching(watch): ret = self.fn(*args, **kwargs)
      self.changed_before = watch.alive()
      outs: list = []
      jit_args.template(ret, outs)
      realize_tensors.realize(outs + state.changes()[1])
      return ret
    cap = _Capture(self.name)
    ret, template, outs = cap.run(self.fn, args, kwargs, state, self.changed_before)
    graph_mode = self.graph if self.graph is not None else JIT != 2
    replay = Replay(self.name, self.arg_names, args, kwargs, cap, template, outs, inputs, graph_mode, (grad_args, entry_grads))
    replay.check()   # raising, it leaves no replay: the next call captures again
    self.replay = replay
    return ret

def jit(fn=None, *, graph: bool | None = None, beam: int | None = None):
  """@jit, @jit(graph=False) or @jit(beam=2). graph=None follows JIT (JIT=2: no graphs); beam=N searches the kernels
  the function compiles with BEAM=N (engine/search.py; None follows BEAM)."""
  if beam is not None and (not isinstance(beam, int) or beam < 0): raise ValueError(f"jit: beam must be an int >= 0, got {beam!r}")
  if fn is None: return lambda f: Jit(f, graph, beam)
  return Jit(fn, graph, beam)
