"""Data-parallel training: one replica of a module per device, kept identical; each batch is split across them.

    dp = DataParallel(model, ["CPU:0", "CPU:1"])          # or ["CUDA:0", "CUDA:1"]; model's values copied to each
    opts = [optim.AdamW(r.parameters(), lr=3e-3) for r in dp.replicas]
    xb, yb = dp.scatter(x, y)                            # ShardedTensors split on the batch axis
    loss = dp.loss(F.cross_entropy, dp(xb), yb)          # the whole batch's mean loss, a part per device
    for o in opts: o.zero_grad()
    loss.backward(); dp.reduce_gradients()               # every replica gets the sum of the replicas' gradients
    for o in opts: o.step()                              # the same update on the same values: replicas stay equal

`dp(x)` runs the module's tree with x a ShardedTensor (alloy/multi.py): containers run as written, every leaf module
runs replica k on shard k, so the forward code needs nothing but leaf modules, containers and the views a
ShardedTensor has (flatten, reshape). BatchNorm leaves are synchronized: their batch statistics are the whole
batch's (all-reduced means and variances; PyTorch's SyncBatchNorm), so a step computes what one device computes on the
whole batch, up to float rounding, and the running statistics stay equal across replicas. `dp.loss(fn, out, *targets)`
weights each shard's mean loss fn(out_k, *targets_k) by its share of the batch; its backward starts from every part
at once (reaching the other replicas' graphs through the batch norms' all-reduces), its value is the parts'
all-reduce, and reduce_gradients all-reduces the replicas' partial gradients (the adjoint of the replication).
Every cross-device move of a step is a collective (the loss's seed reaches the parts by a broadcast), so a whole step
(forward, backward, reduce_gradients, the optimizers' steps) can be one @jit function, the collectives replayed
between its kernels.
"""
from __future__ import annotations
import copy
from collections import OrderedDict
import numpy as np
from alloy import autograd, collectives
from alloy.multi import ShardedTensor, devices_of
from alloy.nn.module import Module
from alloy.nn.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from alloy.realize_tensors import realize
from alloy.tensor import Tensor, cat

class PerShard(Module):
  """A leaf module's replicas: called with a ShardedTensor split on the batch axis (or replicated), replica k runs on
  shard k and the outputs stay split the same way."""
  def __init__(self, replicas: list[Module]):
    super().__init__()
    object.__setattr__(self, "replicas", replicas)   # not registered as children: the replicas own their parameters
  def forward(self, x, *rest):
    if not isinstance(x, ShardedTensor):
      raise TypeError(f"DataParallel: {type(self.replicas[0]).__name__} got a {type(x).__name__}, expected a ShardedTensor")
    return ShardedTensor([r(s, *rest) for r, s in zip(self.replicas, x.shards)], x.axis)
  def train(self, mode: bool = True):
    for r in self.replicas: r.train(mode)
    return super().train(mode)

class SyncBatchNorm(PerShard):
  """BatchNorm replicas whose training-mode statistics are the whole batch's: the per-shard sums are all-reduced."""
  def forward(self, x, *rest):
    first = self.replicas[0]
    if not (first.training or not first.track_running_stats) or not isinstance(x, ShardedTensor) or x.axis != 0:
      return super().forward(x)
    if x.ndim not in first.dims:
      raise ValueError(f"{type(first).__name__}: expected a {' or '.join(f'{d}D' for d in first.dims)} input, got shape {x.shape}")
    factor = 0.0 if first.momentum is None else first.momentum
    if first.track_running_stats:
      for r in self.replicas:
        r.num_batches_tracked.copy_(r.num_batches_tracked + 1)
      if first.momentum is None: factor = 1.0 / float(first.num_batches_tracked.item())
    c, axes = x.shape[1], (0,) + tuple(range(2, x.ndim))
    count = int(np.prod([x.shape[a] for a in axes]))
    if count <= 1: raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input size {x.shape}")
    t = x.float() if x.dtype.itemsize < 4 else x
    mean = t.mean(axes, keepdim=True)   # all-reduced over the batch axis: replicated
    d = t - mean
    var = (d * d).mean(axes, keepdim=True)
    y = d * (var + first.eps).rsqrt()
    view = (1, c) + (1,) * (x.ndim - 2)
    if first.affine:
      y = y * ShardedTensor([r.weight for r in self.replicas], None).reshape(view)
      y = y + ShardedTensor([r.bias for r in self.replicas], None).reshape(view)
    if first.track_running_stats:
      with autograd.no_grad():
        for k, r in enumerate(self.replicas):
          r.running_mean.copy_(r.running_mean * (1 - factor) + mean.shards[k].reshape(c) * factor)
          r.running_var.copy_(r.running_var * (1 - factor) + var.shards[k].reshape(c) * (factor * count / (count - 1)))
    return y.cast(x.dtype)

def _lift(replicas: list[Module]) -> Module:
  """The module tree of replicas[0] with every leaf (and every BatchNorm) replaced by its replicas' PerShard."""
  first = replicas[0]
  if isinstance(first, (BatchNorm1d, BatchNorm2d, BatchNorm3d)): return SyncBatchNorm(replicas)
  if not first._modules: return PerShard(replicas)
  if any(p is not None for p in first._parameters.values()):
    raise NotImplementedError(f"DataParallel: {type(first).__name__} has parameters of its own beside its child modules; only leaf "
                              f"modules may hold parameters")
  lifted = copy.copy(first)   # the container's forward, run on ShardedTensors
  object.__setattr__(lifted, "_modules", OrderedDict((name, _lift([r._modules[name] for r in replicas])) for name in first._modules))
  return lifted

def seed_rule(out, g) -> tuple:
  """The sum of the parts: each part's gradient is the sum's, on the part's device (a broadcast from the root's, a
  collective, so a @jit capture replays it)."""
  parents = out._ag.parents
  return tuple(collectives.broadcast(g, [p.device for p in parents])) if len(parents) > 1 else (g,)

class Loss:
  """A loss that is the sum of one part per device, left lazy: backward() starts from every part at once (one walk
  back through every device's graph, so nothing is computed before the gradients are realized together), and the
  value (`value`, `item()`, `numpy()`) is the all-reduce of the parts, made when first read."""
  def __init__(self, parts: list[Tensor]):
    self.parts, self._value = parts, None
  def backward(self) -> None:
    live = [p for p in self.parts if p.requires_grad]
    if not live: raise RuntimeError("backward: no part of this loss requires grad")
    root = autograd.record(Tensor.zeros((), dtype=live[0].dtype, device=live[0].device), seed_rule, tuple(live))
    root.backward()
  @property
  def value(self) -> ShardedTensor:
    if self._value is None: self._value = ShardedTensor(collectives.all_reduce([p.detach() for p in self.parts]), None)
    return self._value
  def item(self) -> float: return self.value.item()
  def numpy(self) -> np.ndarray: return self.value.numpy()
  def __repr__(self): return f"<data-parallel loss of {len(self.parts)} parts on {', '.join(p.device for p in self.parts)}>"

class DataParallel:
  def __init__(self, module: Module, devices):
    self.devices = devices_of(devices)
    self.replicas = [module.to(self.devices[0])] + [copy.deepcopy(module).to(d) for d in self.devices[1:]]
    self.model = _lift(self.replicas)
    self.params = [list(r.parameters()) for r in self.replicas]
    self.last_loss: Loss | None = None   # the last loss made, whose parts reduce_gradients realizes with the gradients

  def __call__(self, *args, **kwargs): return self.model(*args, **kwargs)
  def train(self, mode: bool = True) -> "DataParallel":
    for r in self.replicas: r.train(mode)
    self.model.train(mode)
    return self
  def eval(self) -> "DataParallel": return self.train(False)

  def scatter(self, *batch) -> tuple[ShardedTensor, ...]:
    """Each array (NumPy or a Tensor) split along its first axis, part k on device k."""
    n = len(self.devices)
    out = []
    for x in batch:
      if len(x) % n: raise ValueError(f"DataParallel.scatter: a batch of {len(x)} does not split evenly over {n} devices")
      if isinstance(x, Tensor): out.append(x.shard(self.devices, 0))
      else: out.append(ShardedTensor([Tensor(part, device=d) for part, d in zip(np.split(np.asarray(x), n), self.devices)], 0))
    return tuple(out)

  def loss(self, fn, output: ShardedTensor, *targets: ShardedTensor) -> "Loss":
    """The batch's mean of fn (a mean over its inputs' first axis, like F.cross_entropy): each shard's fn weighted
    by its share of the batch, kept as parts (see Loss)."""
    total = output.shape[0]
    self.last_loss = Loss([fn(o, *[t.shards[k] for t in targets]) * (o.shape[0] / total) for k, o in enumerate(output.shards)])
    return self.last_loss

  def reduce_gradients(self) -> None:
    """Every replica's parameters get the sum of the replicas' gradients (missing ones count as zeros). One
    all-reduce of one flat vector per replica (DDP's bucket, here one for the whole model): every gradient of every
    device, and the last loss's parts, are computed in one realize first, so the work they share is done once."""
    present = [i for i, group in enumerate(zip(*self.params)) if any(p.grad is not None for p in group)]
    if not present: return
    parts = self.last_loss.parts if self.last_loss is not None else []   # computed with the gradients, which share its work
    self.last_loss = None
    if len(self.replicas) == 1:   # nothing to sum
      realize([p.grad for p in self.params[0] if p.grad is not None] + parts)
      return
    flats = []
    for params in self.params:
      grads = [params[i].grad if params[i].grad is not None else params[i].detach().zeros_like() for i in present]
      flats.append(cat([g.reshape(-1) for g in grads]) if len(grads) > 1 else grads[0].reshape(-1))
    realize(flats + parts)
    summed = collectives.all_reduce(flats, "sum") if len(flats) > 1 else flats
    for params, flat in zip(self.params, summed):
      offset = 0
      for i in present:
        p = params[i]
        p.grad = flat[offset:offset + p.numel()].reshape(p.shape)
        offset += p.numel()

  def max_difference(self) -> float:
    """The largest difference between any replica's parameters or buffers and replica 0's (0.0: identical)."""
    first = [t.numpy() for t in [*self.replicas[0].parameters(), *self.replicas[0].buffers()]]
    worst = 0.0
    for r in self.replicas[1:]:
      for a, t in zip(first, [*r.parameters(), *r.buffers()]):
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - t.numpy().astype(np.float64)), initial=0.0)))
    return worst
