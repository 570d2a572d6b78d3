"""The eager path (one tensor, one kernel: a Plan), the table of computed values, and the watcher interface."""
import gc
import numpy as np, pytest
from alloy import Tensor
from alloy.engine import realize as engine
from alloy.engine.values import values
from alloy.engine.watch import OnLaunch, Watcher, watchers
from alloy.runtime.device import commit_listeners
from conftest import assert_close

def test_plan_binds_each_call_its_own_buffers_and_numbers(device, rng):
  xs = [rng.uniform(1, 2, 64).astype(np.float32) for _ in range(3)]
  ts = [Tensor(x, device=device).realize() for x in xs]
  for k in range(3):   # the same graph on other buffers and other lifted constants: one plan
    for i, (t, x) in enumerate(zip(ts, xs)):
      got = (t * (1.5 + k) + (i - 3.25)).realize()
      assert_close(got.numpy(), x * np.float32(1.5 + k) + np.float32(i - 3.25), rtol=1e-6)
  a, b = ts[0], ts[1]   # a*a and a*b are one structure of nodes but one and two inputs
  assert_close((a * a).numpy(), xs[0] * xs[0], rtol=1e-6)
  assert_close((a * b).numpy(), xs[0] * xs[1], rtol=1e-6)
  assert_close((b * a + a).numpy(), xs[1] * xs[0] + xs[0], rtol=1e-6)

def test_chain_of_dependent_launches(device):
  x = Tensor(np.ones(256, np.float32), device=device).realize()
  want = np.ones(256, np.float32)
  for _ in range(50):
    x = (x * 1.0001 + 1).realize()
    want = want * np.float32(1.0001) + np.float32(1)
  assert_close(x.numpy(), want, rtol=1e-5)

def test_reshaped_results_get_their_shapes(device):
  x = Tensor(np.arange(12, dtype=np.float32), device=device).realize()
  for shape in [(3, 4), (4, 3), (12,), (3, 4), (2, 2, 3)]:
    y = (x * 2 + 1).reshape(shape).realize()
    assert y.shape == shape and y.node.shape == shape
    assert_close(y.numpy(), (np.arange(12, dtype=np.float32) * 2 + 1).reshape(shape))

def test_a_node_held_twice_is_computed_once(device):
  x = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
  y, z = x * 2, x * 2          # equal expressions: one hash-consed node
  assert y.node is z.node
  gc.collect()
  n, before = len(values), engine.kernels_launched
  y.realize()
  assert len(values) == n + 1   # z still holds the node: its value is remembered
  z.realize()
  assert engine.kernels_launched - before == 1
  # z took the value, so no one holds the node now: its entry went with it (counted from before the realizes: the
  # table holds other tests' values too)
  assert len(values) == n
  assert_close(z.numpy(), np.arange(6, dtype=np.float32) * 2)

def test_a_node_held_once_is_not_remembered(device):
  """The eager path remembers a value only where someone else holds its node: one tensor's node leaves the table as
  it was (the other direction is test_a_node_held_twice_is_computed_once)."""
  x = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
  (x * 3).realize()
  n = len(values)
  (x * 5).realize()
  assert len(values) == n

def test_values_forgetting_makes_every_node_count_as_not_computed(device):
  x = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
  y, z = x + 5, x + 5
  y.realize()
  with values.forgetting(): assert values.get(z.node, device) is z.node
  assert values.get(z.node, device) is not z.node

def test_in_place_changes_are_computed_with_the_next_realize(device):
  a = Tensor(np.ones(8, np.float32), device=device).realize()
  b = Tensor(np.ones(8, np.float32), device=device).realize()
  a += 3
  assert not a.node.op.name == "VIEW"
  (b * 2).realize()
  assert a.node.op.name == "VIEW" and a.node.src[0].op.name == "BUFFER"   # computed along with b * 2
  assert_close(a.numpy(), np.full(8, 4, np.float32))

class _Counts(Watcher):
  def __init__(self): self.launches, self.commits, self.reads = [], [], []
  def launch(self, ck, buffers, elapsed, t_submit, consts): self.launches.append((ck.meta.name, elapsed))
  def commit(self, record): self.commits.append(record)
  def host_read(self, tensor): self.reads.append(tensor.shape)

def test_watchers_hear_what_they_override_and_leave_no_trace(device):
  w = _Counts()
  x = Tensor(np.ones(16, np.float32), device=device).realize()
  with watchers.watching(w):
    assert w in watchers.on_launch and w in watchers.on_commit and w not in watchers.on_stage
    assert not watchers.quiet and not watchers.device_time
    (x * 3 + 2).numpy()
  assert len(w.launches) == 1
  assert w.reads == [(16,)] and w.commits         # the read, and the command buffer holding the launch
  assert w not in watchers.attached and watchers.quiet and not watchers.on_commit and not commit_listeners   # the bridge went too
  (x * 4).numpy()
  assert len(w.launches) == 1                     # detached: hears nothing more

def test_device_time_watchers_get_measured_launches(device):
  times = []
  x = Tensor(np.ones(16, np.float32), device=device).realize()
  with watchers.watching(OnLaunch(lambda ck, b, elapsed, t, c: times.append(elapsed), device_time=True)):
    assert watchers.device_time
    (x * 5 - 1).realize()
  assert len(times) == 1 and times[0] is not None and times[0] >= 0
  assert not watchers.device_time

def test_a_watcher_refusing_host_reads_raises(device):
  class Refuse(Watcher):
    def host_read(self, tensor): raise RuntimeError("no reads here")
  x = Tensor(np.ones(4, np.float32), device=device)
  with watchers.watching(Refuse()), pytest.raises(RuntimeError, match="no reads here"): (x + 1).numpy()
  assert_close((x + 1).numpy(), np.full(4, 2, np.float32))

def test_a_graph_of_several_kernels_is_scheduled_once(device, rng, monkeypatch):
  from alloy.schedule import fusion
  calls = []
  real = fusion._schedule
  monkeypatch.setattr(fusion, "_schedule", lambda targets, threads, whole: calls.append(1) or real(targets, threads, whole))
  x = rng.uniform(1, 2, (8, 16)).astype(np.float32)
  t = Tensor(x, device=device).realize()
  s = (t * 1.25).sum()                      # broadcast along an earlier axis: the sum is a kernel of its own
  got = (t - s / 128).realize()
  assert len(calls) <= 1                    # the eager path's look, then the general path's, schedule once (none if cached)
  first = len(calls)
  assert_close(got.numpy(), x - (x * 1.25).sum() / 128, rtol=1e-5)
  (t - (t * 1.25).sum() / 128).realize()
  assert len(calls) == first                # the same graph again: cached

def test_structure_numbers_tell_shared_leaves_apart(device, rng):
  """The eager path names a graph from its new nodes' sources (fusion.structure_of): graphs of one shape of nodes whose
  later sources share other leaves with the earlier ones must each compute their own values."""
  from alloy.schedule import fusion
  x, y = (rng.uniform(1, 2, 32).astype(np.float32) for _ in range(2))
  a, b = Tensor(x, device=device).realize(), Tensor(y, device=device).realize()
  cases = [(lambda p, q: p * q + p, lambda u, v: u * v + u), (lambda p, q: p * q + q, lambda u, v: u * v + v),
           (lambda p, q: p * q + p * q, lambda u, v: u * v + u * v), (lambda p, q: p * p + q * q, lambda u, v: u * u + v * v),
           (lambda p, q: (p + 2.5) * (q + 2.5), lambda u, v: (u + np.float32(2.5)) * (v + np.float32(2.5))),
           (lambda p, q: (p + 2.5) * (q + 3.5), lambda u, v: (u + np.float32(2.5)) * (v + np.float32(3.5)))]
  for _ in range(2):   # the second round from the named structures
    for f, want in cases:
      for p, q, u, v in ((a, b, x, y), (b, a, y, x), (a, a, x, x)): assert_close(f(p, q).numpy(), want(u, v), rtol=1e-6)
  g = a * b + a
  assert fusion.structure_of(g.node)[0] == fusion.structure_of((b * a + b).node)[0]   # the same structure on other buffers
  assert fusion.structure_of(g.node)[0] != fusion.structure_of((a * b + b).node)[0]

def test_deep_graphs_are_named_and_wide_ones_walked(device):
  from alloy.schedule import fusion
  x = Tensor(np.ones(16, np.float32), device=device).realize()
  steps = fusion.MAX_STRUCTURE_DEPTH + 20   # new nodes twice as deep as structure_of recurses (the schedule recurses too)
  deep = x
  for _ in range(steps): deep = deep * 1.0001 + 0.5
  assert fusion.structure_of(deep.node)[0] is not None
  want = np.ones(16, np.float32)
  for _ in range(steps): want = want * np.float32(1.0001) + np.float32(0.5)
  assert_close(deep.numpy(), want, rtol=1e-4)
  parts = [Tensor(np.full(16, i, np.float32), device=device).realize() for i in range(fusion.MAX_STRUCTURE_LEAVES + 1)]
  wide = parts[0]
  for p in parts[1:]: wide = wide + p                  # more leaves than it names: kept as large
  assert fusion.structure_of(wide.node) is fusion._LARGE and wide.node.structure is fusion._LARGE
  assert_close(wide.numpy(), np.full(16, sum(range(len(parts))), np.float32))
