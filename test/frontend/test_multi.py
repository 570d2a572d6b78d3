"""Sharded tensors (alloy/multi.py) and the Tensor-level collectives (alloy/collectives.py) over CPU:0..2, each CPU:k a
device of its own (its own queue and buffers): values against NumPy, gradients against the same computation on one
device, the collectives inserted where a rule needs them, and the errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor, ShardedTensor, collectives

DEVS = ["CPU:0", "CPU:1", "CPU:2"]
rng = np.random.default_rng(0)

def _r(*shape): return rng.uniform(-2, 2, shape).astype(np.float32)

def _close(a, b, tol=1e-5): np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)

@pytest.fixture
def counted(monkeypatch):
  """Which collectives ran: a list of names, filled as collectives.all_reduce / all_gather are called."""
  calls = []
  for name in ("all_reduce", "all_gather"):
    real = getattr(collectives, name)
    monkeypatch.setattr(collectives, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
  return calls

def test_shard_and_gather():
  x = _r(6, 3)
  for axis in (None, 0, 1, -1):
    s = Tensor(x).shard(DEVS, axis)
    assert s.shape == (6, 3) and s.devices == ("CPU", "CPU:1", "CPU:2")
    assert s.axis == (None if axis is None else axis % 2)
    for k, shard in enumerate(s.shards):
      assert shard.device == ("CPU" if k == 0 else f"CPU:{k}")
      want = x if axis is None else np.split(x, 3, axis=axis)[k]
      np.testing.assert_array_equal(shard.numpy(), want)
    np.testing.assert_array_equal(s.numpy(), x)
    whole = s.to("CPU:1")
    assert isinstance(whole, Tensor) and whole.device == "CPU:1"
    np.testing.assert_array_equal(whole.numpy(), x)
    g = s.gather()
    assert g.axis is None and all(np.array_equal(t.numpy(), x) for t in g.shards)
  s = Tensor(x, device="CPU").shard(3, 0)   # a count: the first devices of the tensor's kind
  assert s.devices == ("CPU", "CPU:1", "CPU:2")

def test_elementwise_and_broadcasting(counted):
  x, b, c = _r(6, 4), _r(4), _r(6, 4)
  xs = Tensor(x).shard(DEVS, 0)
  _close(((xs * 2 + 1).exp() - 3).numpy(), np.exp(x * 2 + 1) - 3)
  _close(xs.relu().numpy(), np.maximum(x, 0))
  _close((1 / (xs.abs() + 1)).numpy(), 1 / (np.abs(x) + 1))
  _close((xs + Tensor(b).shard(DEVS)).numpy(), x + b)          # replicated bias broadcast along the split axis
  _close((xs * Tensor(c).shard(DEVS)).numpy(), x * c)          # replicated, spanning the split axis: sliced locally
  _close((xs - Tensor(c).shard(DEVS, 0)).numpy(), x - c)       # split alike
  assert counted == []
  r6, y6 = _r(6, 6), _r(6, 6)
  ys = Tensor(y6).shard(DEVS, 1)
  out = Tensor(x[:, :1]).shard(DEVS) * 0 + xs                  # (6, 1) replicated meets split rows
  assert out.axis == 0
  zs = Tensor(r6).shard(DEVS, 0) + ys                    # split two ways: one side is gathered
  assert counted == ["all_gather"] and zs.axis == 0
  _close(zs.numpy(), r6 + y6)
  assert (xs > 0).numpy().tolist() == (x > 0).tolist()

@pytest.mark.parametrize("axis", [0, 1])
def test_reductions(axis, counted):
  x = _r(6, 9)
  xs = Tensor(x).shard(DEVS, axis)
  for dim in (None, 0, 1, (0, 1)):
    for keepdim in (False, True):
      counted.clear()
      s = xs.sum(dim, keepdim)
      _close(s.numpy(), x.sum(axis=dim if not isinstance(dim, tuple) else dim, keepdims=keepdim))
      reduced = dim is None or dim == axis or (isinstance(dim, tuple) and axis in dim)
      assert counted == (["all_reduce"] if reduced else []) and (s.axis is None) == reduced
      _close(xs.mean(dim, keepdim).numpy(), x.mean(axis=dim, keepdims=keepdim))
      _close(xs.amax(dim, keepdim).numpy(), x.max(axis=dim, keepdims=keepdim))
      _close(xs.amin(dim, keepdim).numpy(), x.min(axis=dim, keepdims=keepdim))
  _close(xs.var(1).numpy(), x.var(1, ddof=1))
  e = np.exp(x - x.max(1, keepdims=True))
  _close(xs.softmax(1).numpy(), e / e.sum(1, keepdims=True))
  _close(xs.log_softmax(1).numpy(), np.log(e / e.sum(1, keepdims=True)))

def test_matmul_rules(counted):
  a, w = _r(6, 9), _r(9, 3)
  cases = [  # (a's axis, w's axis, the result's axis, the collectives)
    (0, None, 0, []), (None, 1, None, []), (1, 0, None, ["all_reduce"]), (1, None, None, ["all_reduce"]),
    (None, 0, None, ["all_reduce"]), (None, None, None, []), (0, 1, 0, ["all_gather"])]
  for ax_a, ax_w, ax_out, calls in cases:
    if ax_w == 1: w = _r(9, 6)
    else: w = _r(9, 3)
    counted.clear()
    out = Tensor(a).shard(DEVS, ax_a) @ Tensor(w).shard(DEVS, ax_w)
    _close(out.numpy(), a @ w, 1e-4)
    assert (out.axis, counted) == ((1 if ax_w == 1 and ax_a is None else ax_out), calls), (ax_a, ax_w)
  x3 = _r(3, 4, 9)
  _close((Tensor(x3).shard(DEVS, 0) @ Tensor(w).shard(DEVS)).numpy(), x3 @ w, 1e-4)

def test_views():
  x = _r(6, 2, 3)
  xs = Tensor(x).shard(DEVS, 0)
  assert xs.flatten(1).axis == 0 and xs.flatten(1).shape == (6, 6)
  np.testing.assert_array_equal(xs.flatten(1).numpy(), x.reshape(6, 6))
  np.testing.assert_array_equal(xs.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
  assert xs.permute(2, 0, 1).axis == 1 and xs.T.axis == 2
  np.testing.assert_array_equal(xs.reshape(6, 3, 2).numpy(), x.reshape(6, 3, 2))
  with pytest.raises(NotImplementedError, match="cut the split axis"): xs.reshape(36)

def test_gradients_match_one_device():
  x, w1, w2 = _r(6, 9), _r(9, 6), _r(6, 3)
  def loss_of(x, w1, w2): return (((x @ w1).tanh() @ w2) ** 2).mean()
  p1, p2 = Tensor(w1).requires_grad_(), Tensor(w2).requires_grad_()
  ref = loss_of(Tensor(x), p1, p2)
  ref.backward()
  for ax_x, ax_w1, ax_w2 in [(0, None, None), (1, 0, None), (None, 1, 0), (0, 1, 0)]:
    s1 = Tensor(w1).shard(DEVS, ax_w1).requires_grad_()
    s2 = Tensor(w2).shard(DEVS, ax_w2).requires_grad_()
    loss = loss_of(Tensor(x).shard(DEVS, ax_x), s1, s2)
    assert loss.axis is None
    _close(loss.item(), ref.item())
    loss.backward()
    assert s1.grad.axis == ax_w1 and s2.grad.axis == ax_w2
    _close(s1.grad.numpy(), p1.grad.numpy(), 1e-5)
    _close(s2.grad.numpy(), p2.grad.numpy(), 1e-5)

def test_gradient_back_to_the_sharded_tensor():
  # shard() of a tensor that requires grad: the gradient reaches it through the copies (replication's adjoint: a sum)
  w0 = Tensor(_r(9, 3)).requires_grad_()
  x = _r(6, 9)
  (Tensor(x).shard(DEVS, 0) @ w0.shard(DEVS)).sum().backward()
  _close(w0.grad.numpy(), np.repeat(x.sum(0)[:, None], 3, 1), 1e-5)

def test_collective_gradients():
  xs = [_r(2, 3) for _ in DEVS]
  ts = [Tensor(x, device=d).requires_grad_() for x, d in zip(xs, DEVS)]
  outs = collectives.all_gather(ts, axis=1)
  assert outs[1].shape == (2, 9) and outs[2].device == "CPU:2"
  _close(outs[2].numpy(), np.concatenate(xs, 1))
  weights = [_r(2, 9) for _ in DEVS]
  sum((o * Tensor(wt, device=o.device)).sum().to("CPU") for o, wt in zip(outs, weights)).backward()
  total = sum(weights)   # every output is a function of every input: the gradients add (a reduce-scatter)
  for k, t in enumerate(ts): _close(t.grad.numpy(), total[:, 3 * k:3 * (k + 1)])
  ts = [Tensor(np.tile(x, (3, 1)), device=d).requires_grad_() for x, d in zip(xs, DEVS)]
  rs = collectives.reduce_scatter(ts, axis=0)
  _close(rs[1].numpy(), sum(xs))
  (rs[1] * 2).sum().backward()
  for t in ts: _close(t.grad.numpy(), np.concatenate([np.zeros((2, 3)), np.full((2, 3), 2), np.zeros((2, 3))]))
  ts = [Tensor(x, device=d).requires_grad_() for x, d in zip(xs, DEVS)]
  m = collectives.all_reduce(ts, "max")
  _close(m[0].numpy(), np.maximum.reduce(xs))
  m[0].sum().backward()
  for x, t in zip(xs, ts): _close(t.grad.numpy(), (x == np.maximum.reduce(xs)).astype(np.float32))
  root = Tensor(xs[0], device="CPU:1").requires_grad_()
  b = collectives.broadcast(root, DEVS)
  assert [t.device for t in b] == ["CPU", "CPU:1", "CPU:2"]
  sum(t.sum().to("CPU:1") for t in b).backward()
  _close(root.grad.numpy(), np.full((2, 3), 3.0))

def test_errors():
  x = Tensor(_r(6, 4), device="CPU")
  with pytest.raises(ValueError, match="does not split evenly"): x.shard(DEVS, 1)
  with pytest.raises(ValueError, match="appears twice"): x.shard(["CPU:0", "CPU"])
  xs = x.shard(DEVS, 0)
  with pytest.raises(ValueError, match="shard the Tensor first"): xs + x
  with pytest.raises(ValueError, match="same devices"): xs + x.shard(DEVS[:2], 0)
  with pytest.raises(ValueError, match="same shape and dtype"): collectives.all_reduce([Tensor(_r(2), device="CPU"), Tensor(_r(3), device="CPU:1")])
  with pytest.raises(AttributeError, match="ShardedTensor has no attribute 'conv2d'"): xs.conv2d(None)
  assert isinstance(xs, ShardedTensor) and "split on axis 0" in repr(xs)

# ---- collectives under @jit: captured once, replayed as steps between the kernels on the buffers of each call

JIT_DEVS = ["CPU:0", "CPU:1"]

def _gpus() -> int:
  from alloy.runtime.registry import device_available
  if not device_available("CUDA"): return 0   # (alloy.runtime.cuda needs cuda-bindings to import)
  from alloy.runtime.cuda import device_count
  return device_count()

def _need(devices: list[str], with_nccl: bool = True) -> None:
  """Skip unless the devices are there (and NCCL where it is asked for, with CUDA ones)."""
  gpus = [d for d in devices if d.startswith("CUDA")]
  if not gpus: return
  if _gpus() < len(gpus): pytest.skip(f"needs {len(gpus)} CUDA GPU{'s' if len(gpus) > 1 else ''}, {_gpus()} present")
  if not with_nccl: return
  from alloy.runtime.cuda import nccl
  try: nccl.library()
  except RuntimeError as e: pytest.skip(str(e))

def _jit_cases(devices):
  """name -> (the function of two tensors, one per device, its NumPy reference): each with kernels before and after."""
  def reduce_fn(a, b):
    s = collectives.all_reduce([a * 2, b + 1], "sum")
    m = collectives.all_reduce([a, b], "max")
    return s[0] * 3, s[1] - m[1]
  def gather_fn(a, b):
    g = collectives.all_gather([a.exp(), b * b], axis=1)
    return g[0] + 1, g[1].sum(1)
  def scatter_fn(a, b):
    r = collectives.reduce_scatter([a - 1, b * 0.5], axis=0)
    return r[0] * 2, r[1].relu()
  def broadcast_fn(a, b):
    c = collectives.broadcast((b * 4).tanh(), devices)
    return c[0] + a, c[1] * 1
  reduce_np = lambda a, b: ((2 * a + b + 1) * 3, 2 * a + b + 1 - np.maximum(a, b))
  gather_np = lambda a, b: (np.concatenate([np.exp(a), b * b], 1) + 1, np.concatenate([np.exp(a), b * b], 1).sum(1))
  scatter_np = lambda a, b: ((a - 1 + b * 0.5)[:2] * 2, np.maximum((a - 1 + b * 0.5)[2:], 0))
  broadcast_np = lambda a, b: (np.tanh(b * 4) + a, np.tanh(b * 4))
  return {"all_reduce": (reduce_fn, reduce_np), "all_gather": (gather_fn, gather_np), "reduce_scatter": (scatter_fn, scatter_np),
          "broadcast": (broadcast_fn, broadcast_np)}

@pytest.mark.parametrize("devices", [JIT_DEVS, ["CUDA:0", "CUDA:1"]], ids=["cpu", "cuda"])
@pytest.mark.parametrize("graph", [True, False], ids=["graphs", "launch_list"])
@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_jit_replays_collectives(name, graph, devices):
  _need(devices)
  fn, ref = _jit_cases(devices)[name]
  f = alloy.jit(fn, graph=graph)
  gen = np.random.default_rng(1)
  held = []   # results of earlier calls stay as they were: each replay writes its outputs into buffers of its own
  for call in range(5):
    a, b = gen.uniform(-1, 1, (4, 3)).astype(np.float32), gen.uniform(-1, 1, (4, 3)).astype(np.float32)
    outs = f(Tensor(a, device=devices[0]), Tensor(b, device=devices[1]))
    if call >= 2:
      assert f.replay is not None and f.replay.splits, "the collective is a step of the replay"
    assert [o.device for o in outs] == [alloy.get_device(d).name for d in devices]
    held.append((outs, ref(a, b)))
  for outs, want in held:
    for o, w in zip(outs, want): _close(o.numpy(), w)

def test_jit_replays_collective_gradients():
  # all-reduce's adjoint is a broadcast (a collective again): the backward's collectives are captured with the forward's
  @alloy.jit
  def f(a, b):
    total = collectives.all_reduce([(a * a).sum(), (b * 3).sum()])
    total[1].backward()
    return total[0], a.grad * 1, b.grad * 1
  gen = np.random.default_rng(2)
  for _ in range(4):
    x, y = gen.uniform(-1, 1, 5).astype(np.float32), gen.uniform(-1, 1, 5).astype(np.float32)
    a, b = Tensor(x, device="CPU:0", requires_grad=True), Tensor(y, device="CPU:1", requires_grad=True)
    total, ga, gb = f(a, b)
    _close(total.numpy(), (x * x).sum() + 3 * y.sum())
    _close(ga.numpy(), 2 * x)
    _close(gb.numpy(), np.full(5, 3.0))
  assert [s.split(" on ")[0] for s in f.replay.splits] == ["all_reduce(sum)", "broadcast"]

@pytest.mark.parametrize("device", ["CPU", "CUDA"])
def test_jit_one_rank_between_graphs(device):
  # one rank (NCCL's communicator of one GPU on CUDA): the kernels on either side of the all-reduce replay as device
  # graphs, the collective between them on the stream, and the results follow each call's inputs
  _need([device])
  @alloy.jit
  def f(a):
    u = (a * 2).exp().realize()
    v = (u @ a).realize()
    s = collectives.all_reduce([v + u])[0]
    w = (s.sum(0) + 1).realize()
    return w * s.amax(), s
  gen = np.random.default_rng(5)
  for call in range(5):
    x = gen.uniform(-1, 1, (8, 8)).astype(np.float32)
    w, s = f(Tensor(x, device=device))
    u = np.exp(2 * x)
    want_s = u @ x + u
    _close(s.numpy(), want_s, 1e-4)
    _close(w.numpy(), (want_s.sum(0) + 1) * want_s.max(), 1e-4)
    if call >= 2: assert f.replay.splits == [f"all_reduce(sum) on {alloy.get_device(device).name}"]
  assert sum(1 for g, *_ in f.replay.graphs if g is not None) >= 2, f.replay.describe()   # graphs before and after it

def _dp_data(steps=5):
  gen = np.random.default_rng(3)
  w1, w2 = gen.uniform(-0.5, 0.5, (6, 8)).astype(np.float32), gen.uniform(-0.5, 0.5, (8, 2)).astype(np.float32)
  xs = [gen.uniform(-1, 1, (8, 6)).astype(np.float32) for _ in range(steps)]
  ys = [gen.uniform(-1, 1, (8, 2)).astype(np.float32) for _ in range(steps)]
  return (w1, w2), xs, ys

def _mlp_loss(x, y, w1, w2): return (((x @ w1).tanh() @ w2 - y) ** 2).mean()

def _sgd(p: Tensor, g: Tensor, lr: float) -> None:
  with alloy.no_grad(): p -= lr * g
  p.grad = None

def _one_device(weights, xs, ys, lr: float):
  """The reference run on one device: each step's loss, and the parameters after the steps."""
  one = [Tensor(w, device="CPU", requires_grad=True) for w in weights]
  want = []
  for x, y in zip(xs, ys):
    loss = _mlp_loss(Tensor(x, device="CPU"), Tensor(y, device="CPU"), *one)
    loss.backward()
    for p in one: _sgd(p, p.grad, lr)
    want.append(loss.item())
  return want, one

def test_jit_data_parallel_step():
  # a data-parallel step: each device's half of the batch forward and backward, the gradients all-reduced, SGD on every
  # replica; replayed, the replicas stay identical and follow the single-device run on the whole batch
  weights, xs, ys = _dp_data()
  lr = 0.2
  want, one = _one_device(weights, xs, ys, lr)
  replicas = [[Tensor(w, device=d, requires_grad=True) for w in weights] for d in JIT_DEVS]

  @alloy.jit
  def step(x0, y0, x1, y1):
    parts = [_mlp_loss(x, y, *params) * 0.5 for (x, y), params in zip([(x0, y0), (x1, y1)], replicas)]   # the halves' mean
    for part in parts: part.backward()
    for group in zip(*replicas):   # one all-reduce per parameter: its replicas' gradients summed on every device
      for p, g in zip(group, collectives.all_reduce([p.grad for p in group])): _sgd(p, g, lr)
    return collectives.all_reduce([p.detach() for p in parts])[0]

  for k, (x, y) in enumerate(zip(xs, ys)):
    halves = [(Tensor(x[i * 4:(i + 1) * 4], device=d), Tensor(y[i * 4:(i + 1) * 4], device=d)) for i, d in enumerate(JIT_DEVS)]
    loss = step(*halves[0], *halves[1])
    if k >= 2: assert step.replay is not None and len(step.replay.splits) == 3
    _close(loss.numpy(), want[k], 1e-5)
    for a, b in zip(*replicas): np.testing.assert_array_equal(a.numpy(), b.numpy())   # the same bits on both devices
  for p, q in zip(replicas[0], one): _close(p.numpy(), q.numpy(), 1e-5)

# ---- cross-device copies under @jit: Tensor.to captured as a step, replayed on each call's buffers

PAIRS = [JIT_DEVS, ["CUDA:0", "CUDA:1"]]

def _steps(f) -> list[str]: return [s.split(" on ")[0] for s in f.replay.splits]   # the replay's steps, in launch order

@pytest.mark.parametrize("devices", PAIRS + [["CUDA:0", "CPU:0"]], ids=["cpu", "cuda", "cuda_cpu"])
@pytest.mark.parametrize("graph", [True, False], ids=["graphs", "launch_list"])
def test_jit_replays_copies(graph, devices):
  # computed on one device, copied to the other, computed there and copied back: each copy sees its source's kernel
  # of the same call and the kernels after it see the copy (CUDA -> CPU: the GPU's copy-out into the CPU buffer)
  _need(devices, with_nccl=False)
  d0, d1 = devices
  def fn(a, b):
    u = (a * 2 + 1).exp().realize()
    s = (u + a).realize()   # two kernels before the copy: a graph where the device has them
    v = (s.to(d1) * b).realize()
    w = (v.sum(0) * 3).realize().to(d0) + a.sum(0)
    return w, v, u
  f = alloy.jit(fn, graph=graph)
  gen = np.random.default_rng(7)
  held = []   # earlier calls' results keep their values
  for _ in range(5):
    x, y = gen.uniform(-1, 1, (6, 5)).astype(np.float32), gen.uniform(-1, 1, (6, 5)).astype(np.float32)
    held.append((f(Tensor(x, device=d0), Tensor(y, device=d1)), x, y))
  assert _steps(f) == [f"copy to {alloy.get_device(d1).name}", f"copy to {alloy.get_device(d0).name}"]
  for (w, v, u), x, y in held:
    want_u = np.exp(2 * x + 1)
    want_v = (want_u + x) * y
    _close(u.numpy(), want_u)
    _close(v.numpy(), want_v)
    _close(w.numpy(), want_v.sum(0) * 3 + x.sum(0), 1e-4)
    assert w.device == alloy.get_device(d0).name and v.device == alloy.get_device(d1).name

@pytest.mark.parametrize("devices", PAIRS, ids=["cpu", "cuda"])
def test_jit_copy_waits_for_readers(devices):
  # every replay copies into the same buffer, which the last call's matmul on the other device may still be reading
  # (nothing else waits: the inputs are made up front and b is one tensor); copying without waiting for the readers
  # (CPU:1's queue books writers only) gave wrong results on most calls
  _need(devices, with_nccl=False)
  f = alloy.jit(lambda a, b: (((a + 1).to(devices[1]) @ b).exp2() @ b), graph=False)
  gen = np.random.default_rng(8)
  y = gen.uniform(-0.05, 0.05, (384, 384)).astype(np.float32)
  xs = [gen.uniform(-1, 1, (384, 384)).astype(np.float32) for _ in range(8)]
  b, ins = Tensor(y, device=devices[1]), [Tensor(x, device=devices[0]) for x in xs]
  outs = [f(a, b) for a in ins]
  for o, x in zip(outs, xs): _close(o.numpy(), np.exp2((x + 1) @ y) @ y, 1e-3)

@pytest.mark.parametrize("devices", PAIRS, ids=["cpu", "cuda"])
@pytest.mark.parametrize("name", ["all_gather", "reduce_scatter", "broadcast"])
def test_jit_collective_backward(name, devices):
  # these adjoints move the gradients with Tensor.to: the copies are captured with the collectives (forward and
  # backward), and the replays match the same function run eagerly
  _need(devices)
  d0, d1 = devices
  gen = np.random.default_rng(9)
  shapes = {"all_gather": (4, 6), "reduce_scatter": (2, 3), "broadcast": (4, 3)}
  weights = [Tensor(gen.uniform(-1, 1, shapes[name]).astype(np.float32), device=d) for d in devices]
  def fn(a, b):
    if name == "all_gather": outs = collectives.all_gather([a.exp(), b * b], axis=1)
    elif name == "reduce_scatter": outs = collectives.reduce_scatter([a - 1, b * 0.5], axis=0)
    else: outs = collectives.broadcast((a * b.to(d0)).tanh(), devices)
    total = sum(((o * w).sum() * (k + 1)).to(d0) for k, (o, w) in enumerate(zip(outs, weights)))
    total.backward()
    return total, a.grad * 1, b.grad * 1
  f = alloy.jit(fn)
  for call in range(5):
    x, y = gen.uniform(-1, 1, (4, 3)).astype(np.float32), gen.uniform(-1, 1, (4, 3)).astype(np.float32)
    got = f(Tensor(x, device=d0, requires_grad=True), Tensor(y, device=d1, requires_grad=True))
    want = fn(Tensor(x, device=d0, requires_grad=True), Tensor(y, device=d1, requires_grad=True))
    for g, w in zip(got, want): _close(g.numpy(), w.numpy())
    if call >= 2: assert any(s.startswith("copy to") for s in _steps(f)), f.replay.describe()

def test_jit_sharded_backward():
  # a ShardedTensor's forward and backward (shard()'s copies, the all-reduces, the adjoints' broadcasts and copies
  # back) jitted whole, against the same function run eagerly
  def fn(x, p1, p2):
    loss = (((x.shard(DEVS, 1) @ p1.shard(DEVS, 0)).tanh() @ p2.shard(DEVS, 1)) ** 2).mean()
    loss.backward()
    return loss.to("CPU"), p1.grad * 1, p2.grad * 1
  f = alloy.jit(fn)
  gen = np.random.default_rng(10)
  for _ in range(5):
    x, w1, w2 = [gen.uniform(-1, 1, s).astype(np.float32) for s in [(6, 9), (9, 6), (6, 3)]]
    got = f(Tensor(x), Tensor(w1, requires_grad=True), Tensor(w2, requires_grad=True))
    want = fn(Tensor(x), Tensor(w1, requires_grad=True), Tensor(w2, requires_grad=True))
    for g, w in zip(got, want): _close(g.numpy(), w.numpy())
  assert set(_steps(f)) >= {"copy to CPU:1", "copy to CPU", "all_reduce(sum)", "broadcast"}

@pytest.mark.parametrize("devices", PAIRS, ids=["cpu", "cuda"])
def test_jit_model_parallel_step(devices):
  # a two-stage MLP: the first layer on one device, its activations copied to the other for the second layer and the
  # loss; backward copies the gradient back; SGD on both. Replayed, it follows the same steps run on one device
  _need(devices, with_nccl=False)
  d0, d1 = devices
  weights, xs, ys = _dp_data()
  lr = 0.2
  want, one = _one_device(weights, xs, ys, lr)
  w1, w2 = Tensor(weights[0], device=d0, requires_grad=True), Tensor(weights[1], device=d1, requires_grad=True)

  @alloy.jit
  def step(x, y):
    loss = (((x @ w1).tanh().to(d1) @ w2 - y) ** 2).mean()
    loss.backward()
    for p in (w1, w2): _sgd(p, p.grad, lr)
    return loss

  for k, (x, y) in enumerate(zip(xs, ys)):
    _close(step(Tensor(x, device=d0), Tensor(y, device=d1)).numpy(), want[k], 1e-5)
    if k >= 2: assert _steps(step) == [f"copy to {alloy.get_device(d1).name}", f"copy to {alloy.get_device(d0).name}"]   # forward, backward
  for p, q in zip((w1, w2), one): _close(p.numpy(), q.numpy(), 1e-5)

def test_cpu_devices_are_separate():
  from alloy.runtime.registry import get_device
  devs = [get_device(d) for d in DEVS]
  assert len({id(d) for d in devs}) == 3 and len({id(d.allocator) for d in devs}) == 3
  assert len({id(d.queue) for d in devs}) == 3 and get_device("CPU:0") is get_device("CPU")
  x = _r(5, 7)
  t = Tensor(x, device="CPU:1")
  moved = (t * 2).to("CPU:2")   # CPU:1's queue computes it, then its memory is copied into CPU:2's buffer
  assert moved.device == "CPU:2" and moved.node.src[0].arg.device == "CPU:2"
  np.testing.assert_array_equal((moved + 1).numpy(), x * 2 + 1)

def test_one_gpu():
  # one CUDA device: the same rules, the all-reduces through NCCL with one rank (its binding and stream order)
  from alloy.runtime.registry import device_available
  if not device_available("CUDA"): pytest.skip("no CUDA GPU")
  x, w = _r(8, 6), _r(6, 3)
  ws = Tensor(w, device="CUDA").shard(["CUDA"]).requires_grad_()
  loss = ((Tensor(x, device="CUDA").shard(["CUDA"], 1) @ Tensor(w, device="CUDA").shard(["CUDA"], 0)).sum()
          + (Tensor(x, device="CUDA").shard(["CUDA"], 0) @ ws).amax(0).sum())
  want = (x @ w).sum() + (x @ w).max(0).sum()
  _close(loss.item(), want, 1e-4)
  loss.backward()
  hit = (x @ w) == (x @ w).max(0, keepdims=True)
  _close(ws.grad.numpy(), x.T @ hit.astype(np.float32), 1e-4)
