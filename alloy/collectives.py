"""Collectives on Tensors, one Tensor per device (rank = position in the list), with their gradients.

- all_reduce(ts, op): every rank gets op over the ranks (elementwise); op "sum", "max" or "min".
- all_gather(ts, axis): every rank gets the ranks' tensors concatenated along axis.
- reduce_scatter(ts, axis, op): rank k gets chunk k (along axis) of op over the ranks.
- broadcast(t, devices): every device gets t.

They realize their inputs and run runtime/collective.py on the buffers (NCCL on CUDA, enqueued on each device's
stream; a host implementation between CPU:k devices), so they are eager: a collective is a point where the lazy
graph of each device is cut. Each tells the watchers it ran (Watcher.step) with a function repeating it on other
buffers of the same sizes: a @jit capture keeps that as a step of its replay, between the kernels around it (jit.py).

Gradients follow from the outputs being ordinary functions of all the inputs: each output is one autograd node whose
parents are every rank's input, and its rule sends each parent its share of the output's gradient, copied to the
parent's device. So all-reduce's adjoint is a broadcast of the gradient (this collective again: NCCL on CUDA; the
gradients of several outputs add up: the all-reduce of the gradients), all-gather's a slice per rank (several: a
reduce-scatter), reduce-scatter's an all-gather, broadcast's a sum at the root. All but all-reduce's move their
gradients by point-to-point copies (Tensor.to: a peer copy where GPUs reach each other; a @jit capture replays them
as steps too): the walk backward reaches one output at a time, so a collective of the gradients of every output has
nothing to wait for.
"""
from __future__ import annotations
import functools
from alloy import autograd
from alloy.engine.realize import buffer_view
from alloy.engine.watch import watchers
from alloy.realize_tensors import buffer_of, realize
from alloy.runtime import collective as runtime
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import canonical_device
from alloy.tensor import Tensor, norm_axis

def _check(what: str, tensors) -> list[Tensor]:
  tensors = list(tensors)
  if not tensors or not all(isinstance(t, Tensor) for t in tensors): raise TypeError(f"{what}: expected a list of Tensors, one per device")
  devices = [t.device for t in tensors]
  if len(set(devices)) != len(devices): raise ValueError(f"{what}: a device appears twice among {devices}; give one tensor per device")
  for k, t in enumerate(tensors):
    if t.shape != tensors[0].shape or t.dtype is not tensors[0].dtype:
      raise ValueError(f"{what}: rank {k} is a {t.dtype.name} tensor of shape {t.shape}, rank 0 a {tensors[0].dtype.name} one of shape "
                       f"{tensors[0].shape}; every rank needs the same shape and dtype")
  return tensors

def _buffers(tensors: list[Tensor]) -> list[Buffer]:
  realize(tensors)   # every device's pending work at once, then each one's buffer
  return [buffer_of(t, host=False) for t in tensors]   # read by the collective on the devices, not by the host

def _run(name: str, run, ins: list[Buffer], outs: list[Buffer]) -> None:
  """run(ins, outs), then the watchers told (a @jit capture replays run on the buffers bound to the same places)."""
  run(ins, outs)
  if watchers.on_step: watchers.stepped(name, run, ins + outs, len(ins))

def _wrap(buf: Buffer, shape: tuple) -> Tensor: return Tensor(buffer_view(buf, shape), device=buf.device)

def _record(outs: list[Tensor], rule, parents: list[Tensor], *args) -> list[Tensor]:
  if not any(p.requires_grad for p in parents): return outs
  return [autograd.record(o, rule, tuple(parents), k, *args) for k, o in enumerate(outs)]

def _to(g: Tensor, device: str) -> Tensor: return g if g.device == device else g.to(device)

def _leading(t: Tensor, axis: int) -> Tensor:
  """t with `axis` moved first: the layout whose flat buffer NCCL's gather and scatter cut in rank order."""
  return t if axis == 0 else t.permute((axis, *[i for i in range(t.ndim) if i != axis]))

def _back(t: Tensor, axis: int) -> Tensor:
  return t if axis == 0 else t.permute(tuple(list(range(1, axis + 1)) + [0] + list(range(axis + 1, t.ndim))))

def all_reduce(tensors, op: str = "sum") -> list[Tensor]:
  tensors = _check("all_reduce", tensors)
  ins = _buffers(tensors)
  outs = [Buffer(b.device, b.size, b.dtype) for b in ins]
  _run(f"all_reduce({op})", functools.partial(runtime.all_reduce, op=op), ins, outs)
  values = None if op == "sum" else [t.detach() for t in tensors]   # max and min route the gradient by value
  return _record([_wrap(b, tensors[0].shape) for b in outs], all_reduce_rule, tensors, op, [t.device for t in tensors], values)

def all_reduce_rule(out, g, k, op, devices, values):
  parents = out._ag.parents
  if op == "sum":   # every input gets this output's gradient: a broadcast from rank k
    copies = broadcast(g, devices) if len(devices) > 1 else [g]
    return tuple(None if p is None else c for p, c in zip(parents, copies))
  # max/min: the gradient goes to the ranks holding the extreme value, split evenly between ties
  hits = [(_to(v, g.device) == out).cast(g.dtype) for v in values]
  share = g / sum(hits[1:], hits[0])
  return tuple(None if p is None else _to(share * h, p.device) for p, h in zip(parents, hits))

def all_gather(tensors, axis: int = 0) -> list[Tensor]:
  tensors = _check("all_gather", tensors)
  ax, n = norm_axis(axis, tensors[0].ndim), len(tensors)
  moved = [_leading(t, ax) for t in tensors]
  ins = _buffers(moved)
  outs = [Buffer(b.device, b.size * n, b.dtype) for b in ins]
  _run("all_gather", runtime.all_gather, ins, outs)
  shape = (moved[0].shape[0] * n, *moved[0].shape[1:])
  return _record([_back(_wrap(b, shape), ax) for b in outs], all_gather_rule, tensors, ax, tensors[0].shape[ax])

def all_gather_rule(out, g, k, axis, size):
  bounds = lambda j: tuple((j * size, (j + 1) * size) if i == axis else (0, s) for i, s in enumerate(g.shape))
  return tuple(None if p is None else _to(g.shrink(bounds(j)), p.device) for j, p in enumerate(out._ag.parents))

def reduce_scatter(tensors, axis: int = 0, op: str = "sum") -> list[Tensor]:
  tensors = _check("reduce_scatter", tensors)
  ax, n = norm_axis(axis, tensors[0].ndim), len(tensors)
  if tensors[0].shape[ax] % n: raise ValueError(f"reduce_scatter: axis {ax} of size {tensors[0].shape[ax]} does not split evenly over {n} ranks")
  if op != "sum" and any(t.requires_grad for t in tensors): raise NotImplementedError("reduce_scatter: gradients only for op='sum'")
  moved = [_leading(t, ax) for t in tensors]
  ins = _buffers(moved)
  outs = [Buffer(b.device, b.size // n, b.dtype) for b in ins]
  _run(f"reduce_scatter({op})", functools.partial(runtime.reduce_scatter, op=op), ins, outs)
  shape = (moved[0].shape[0] // n, *moved[0].shape[1:])
  return _record([_back(_wrap(b, shape), ax) for b in outs], reduce_scatter_rule, tensors, ax, n)

def reduce_scatter_rule(out, g, k, axis, n):
  size = g.shape[axis]
  pad = tuple((k * size, (n - 1 - k) * size) if i == axis else (0, 0) for i in range(g.ndim))
  full = g.pad(pad)   # chunk k of every input's gradient is g, the rest 0
  return tuple(None if p is None else _to(full, p.device) for p in out._ag.parents)

def broadcast(t: Tensor, devices) -> list[Tensor]:
  """t on every device of `devices`, which must include t's own (the root)."""
  devices = [canonical_device(d) for d in devices]
  if t.device not in devices: raise ValueError(f"broadcast: the tensor is on {t.device}, which is not among {devices}")
  _check("broadcast", [t])
  root = devices.index(t.device)
  src = _buffers([t])[0]
  outs = [Buffer(d, src.size, src.dtype) for d in devices]
  _run("broadcast", functools.partial(runtime.broadcast, root=root), [src if k == root else o for k, o in enumerate(outs)], outs)
  return _record([_wrap(b, t.shape) for b in outs], broadcast_rule, [t])

def broadcast_rule(out, g, k): return (_to(g, out._ag.parents[0].device),)
