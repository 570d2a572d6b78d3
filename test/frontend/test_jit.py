"""@jit: capture on the second call, replay after; replay equals eager on every present device."""
import gc, importlib, weakref
import numpy as np, pytest
import alloy
from alloy import Tensor, jit, JitError
from alloy.engine import realize as engine
from alloy.engine.watch import OnLaunch, watchers
from alloy.codegen.program import scalar_words
from conftest import assert_close

def _words(ck, consts) -> tuple:
  """A recorded launch's scalar arguments (the values of its lifted constants) as Program takes them."""
  return scalar_words(ck.meta.scalar_dtypes, [c.arg for c in consts])

jit_module = importlib.import_module("alloy.jit")   # the module: `alloy.jit` itself names the decorator

def _mlp(device):
  rng = np.random.default_rng(3)
  w1, b1 = rng.uniform(-1, 1, (8, 16)).astype(np.float32), rng.uniform(-1, 1, 16).astype(np.float32)
  w2, b2 = rng.uniform(-1, 1, (16, 4)).astype(np.float32), rng.uniform(-1, 1, 4).astype(np.float32)
  tw1, tb1, tw2, tb2 = (Tensor(a, device=device) for a in (w1, b1, w2, b2))
  def forward(x):
    return ((x @ tw1 + tb1).relu() @ tw2 + tb2).softmax(-1)
  def reference(x):
    h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
  return forward, reference

@pytest.mark.parametrize("graph", [True, False])
def test_mlp_replay_equals_eager(device, graph):
  forward, reference = _mlp(device)
  f = jit(forward, graph=graph)
  rng = np.random.default_rng(0)
  for _ in range(5):
    x = rng.uniform(-1, 1, (3, 8)).astype(np.float32)
    assert_close(f(Tensor(x, device=device)).numpy(), reference(x), atol=1e-5, rtol=1e-4)
  assert f.replay is not None and f.replay.launches

def test_seed_example_replay(device):
  @jit
  def seed(a): return a.T.pad(((1, 1), (1, 1))).sum(1)
  rng = np.random.default_rng(0)
  for _ in range(4):
    a = rng.uniform(0.5, 2.0, size=(4, 3)).astype(np.float32)
    assert_close(seed(Tensor(a, device=device)).numpy(), np.pad(a.T, ((1, 1), (1, 1))).sum(axis=1))

def test_many_kernels_in_growing_batches(monkeypatch):
  monkeypatch.setattr(jit_module, "JIT", 1)   # graph batches are what this test counts, whatever JIT the run has
  @jit
  def chain(x):
    for _ in range(20): x = (x * 1.5 + 1).realize()
    return x
  x = np.ones(16, np.float32)
  want = x.copy()
  for _ in range(20): want = want * np.float32(1.5) + np.float32(1)
  for _ in range(3): assert_close(chain(Tensor(x)).numpy(), want, rtol=1e-6)
  batches = [j - i for g, i, j, _ in chain.replay.graphs]
  assert batches == [2, 4, 8, 6] and all(g is not None for g, *_ in chain.replay.graphs)

def test_held_results_survive_later_calls(device):
  f = jit(lambda x: x * 2 + 1)
  results = [(f(Tensor(np.full(4, i, np.float32), device=device)), i) for i in range(5)]
  for r, i in results: assert_close(r.numpy(), np.full(4, 2 * i + 1, np.float32))
  assert len({id(r.node.src[0].arg) for r, _ in results}) == 5

def test_random_differs_per_call_and_matches_eager(device):
  def noisy(x): return x + Tensor.rand(6, device=device)
  f = jit(noisy)
  zero = Tensor(np.zeros(6, np.float32), device=device)
  alloy.manual_seed(7)
  eager = [noisy(zero).numpy() for _ in range(4)]
  alloy.manual_seed(7)
  jitted = [f(zero).numpy() for _ in range(4)]
  assert len({r.tobytes() for r in jitted}) == 4
  for a, b in zip(eager, jitted): np.testing.assert_array_equal(a, b)

def test_input_mismatch_raises():
  f = jit(lambda x, y: x + y)
  a, b = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((2, 3), np.float32))
  f(a, b); f(a, b)
  with pytest.raises(JitError, match=r"argument y has shape \(3, 2\), captured with \(2, 3\)"): f(a, Tensor(np.ones((3, 2), np.float32)))
  with pytest.raises(JitError, match="argument x has dtype int32, captured with float32"): f(Tensor(np.ones((2, 3), np.int32)), b)
  bt = Tensor(np.ones((3, 2), np.float32)).realize().T
  with pytest.raises(JitError, match="argument y has memory layout"): f(a, bt)
  with pytest.raises(JitError, match="was a Tensor at capture"): f(a, 1.0)

def test_non_tensor_argument_change_raises():
  f = jit(lambda x, mode: x * 2 if mode == "double" else x)
  x = Tensor(np.ones(3, np.float32))
  f(x, "double"); f(x, "double")
  with pytest.raises(JitError, match="argument mode is 'same', captured with 'double'"): f(x, "same")
  f = jit(lambda x, k: x * float(k))   # a number used as a plain number (float()) is baked
  f(x, 2.0); f(x, 2.0)
  assert_close(f(x, 2.0).numpy(), np.full(3, 2, np.float32))
  with pytest.raises(JitError, match=r"argument k is 3.0, captured with 2.0; the function used its value as a plain number \(float\(\)\)"):
    f(x, 3.0)
  with pytest.raises(JitError, match="argument k is 2 of type int, captured as float"): f(x, 2)

def test_host_read_inside_capture_raises():
  def reads(x): return x * float((x.sum()).item())
  f = jit(reads)
  x = Tensor(np.ones(3, np.float32))
  f(x)   # the first call runs normally
  with pytest.raises(JitError, match="read on the host"): f(x)

def test_replay_compiles_and_schedules_nothing(monkeypatch):
  f = jit(lambda x: (x * 3).exp().sum())
  x = Tensor(np.ones(8, np.float32))
  f(x); f(x)
  def boom(*a, **k): raise AssertionError("replay scheduled or compiled")
  monkeypatch.setattr(engine, "run_schedule", boom)
  monkeypatch.setattr(engine, "compile_kernel", boom)
  assert_close(f(x).numpy(), np.float32(np.exp(3.0) * 8), rtol=1e-5)

def test_same_input_twice_still_captures():
  f = jit(lambda x: x + 1)
  x = Tensor(np.ones(3, np.float32))
  f(x); f(x)
  assert len(f.replay.launches) == 1
  assert_close(f(Tensor(np.zeros(3, np.float32))).numpy(), np.ones(3, np.float32))

def test_method_and_structures():
  class Model:
    def __init__(self, k): self.k = Tensor(np.full(2, k, np.float32))
    @jit
    def __call__(self, inputs): return {"sum": inputs["a"] + self.k, "pair": (inputs["a"] * self.k, 5)}
  m1, m2 = Model(2), Model(3)
  for _ in range(3):
    out1, out2 = m1({"a": Tensor(np.ones(2, np.float32))}), m2({"a": Tensor(np.ones(2, np.float32))})
  assert_close(out1["sum"].numpy(), np.full(2, 3, np.float32)) and out1["pair"][1] == 5
  assert_close(out2["pair"][0].numpy(), np.full(2, 3, np.float32))

def test_jit_off_and_no_graph(monkeypatch, capsys):
  monkeypatch.setattr(jit_module, "JIT", 0)
  f = jit(lambda x: x + 1)
  for _ in range(3): f(Tensor(np.ones(2, np.float32)))
  assert f.replay is None
  monkeypatch.setattr(jit_module, "JIT", 2)
  monkeypatch.setattr(jit_module, "DEBUG", 2)
  g = jit(lambda x: x + 1)
  for _ in range(3): g(Tensor(np.ones(2, np.float32)))
  assert g.replay.graphs == [] and "JIT=2" in g.replay.graph_off
  assert "replayed 1 kernels in 0 graphs; one by one: JIT=2" in capsys.readouterr().out

def test_debug_describes_capture(monkeypatch, capsys):
  monkeypatch.setattr(jit_module, "DEBUG", 1)
  f = jit(lambda x: (x * 2).sum())
  x = Tensor(np.ones(4, np.float32))
  f(x); f(x)
  out = capsys.readouterr().out
  assert "captured 1 kernel" in out and "inputs x: (4,) float32" in out and "replays 1 launch one by one" in out

def test_cpu_graph_rebinds_buffers():
  from alloy.runtime.cpu.graph import CPUGraph
  rec = []
  listener = lambda ck, bufs, e, t, consts: rec.append((ck, bufs, _words(ck, consts)))
  x = Tensor(np.arange(4, dtype=np.float32), device="CPU").realize()
  with watchers.watching(OnLaunch(listener)): y = (x * 2 + 1).realize()
  (ck, bufs, words), = rec
  assert len(words) == 1   # the 2 is the kernel's argument (1 stays a literal)
  dev = alloy.get_device("CPU")
  g = CPUGraph([(ck.runner, [b.handle for b in bufs], words, ck.meta.global_size, ck.meta.local_size)], dev)
  other = Tensor(np.full(4, 10, np.float32), device="CPU").realize()
  g([[bufs[0].handle, other.node.src[0].arg.handle]], wait=True)
  assert_close(y.numpy(), np.full(4, 21, np.float32))
  g(scalars_per_launch=[scalar_words(ck.meta.scalar_dtypes, [3.0])], wait=True)   # x * 3 + 1
  assert_close(y.numpy(), np.full(4, 31, np.float32))
  with pytest.raises(ValueError, match="beyond the native queue"):
    CPUGraph([(ck.runner, [b.handle for b in bufs], (3,) * 17, (1, 1, 1), (1, 1, 1))], dev)

def test_dropped_result_buffer_is_written_again(device):
  f = jit(lambda x: x * 2 + 1)
  f(Tensor(np.zeros(4, np.float32), device=device)); f(Tensor(np.zeros(4, np.float32), device=device))
  a = f(Tensor(np.full(4, 1, np.float32), device=device))
  first = weakref.ref(a.node.src[0].arg)
  assert_close(a.numpy(), np.full(4, 3, np.float32))
  del a
  b = f(Tensor(np.full(4, 2, np.float32), device=device))
  assert b.node.src[0].arg is first()   # nothing held a's result: its buffer took b's values
  c = f(Tensor(np.full(4, 3, np.float32), device=device))
  assert c.node.src[0].arg is not b.node.src[0].arg
  assert_close(b.numpy(), np.full(4, 5, np.float32)) and assert_close(c.numpy(), np.full(4, 7, np.float32))

def test_what_is_built_on_a_dropped_result_keeps_its_values(device):
  f = jit(lambda x: x * 2)
  one = Tensor(np.ones(4, np.float32), device=device)
  f(one); f(one)
  y = f(one)
  lazy, view, realized = y + 1, y.reshape(2, 2), (y * 3).realize()
  buf = y.node.src[0].arg
  del y
  gc.collect()
  for i in range(4): assert_close(f(Tensor(np.full(4, 10 + i, np.float32), device=device)).numpy(), np.full(4, 20 + 2 * i, np.float32))
  assert_close(lazy.numpy(), np.full(4, 3, np.float32))
  assert_close(view.numpy(), np.full((2, 2), 2, np.float32))
  assert_close(realized.numpy(), np.full(4, 6, np.float32))
  assert_close(Tensor(buf.numpy(), device=device).numpy(), np.full(4, 2, np.float32))

def test_returned_views_and_arguments(device):
  f = jit(lambda x: ((y := (x + 1).contiguous()), y.reshape(2, 2), y[1:], x))
  for i in range(5):
    x = Tensor(np.arange(4, dtype=np.float32) + i, device=device)
    y, square, tail, same = f(x)
    want = np.arange(4, dtype=np.float32) + i + 1
    assert_close(y.numpy(), want) and assert_close(square.numpy(), want.reshape(2, 2)) and assert_close(tail.numpy(), want[1:])
    assert same.node.src[0].arg is x.node.src[0].arg
  del y, square, tail
  y2, *_ = f(x)
  assert_close(y2.numpy(), np.arange(4, dtype=np.float32) + 5)

@pytest.mark.parametrize("generic", [False, True])
def test_launch_list_rebinds_buffers(generic):
  from alloy.runtime.device import LaunchList
  rec = []
  listener = lambda ck, bufs, e, t, consts: rec.append((ck, bufs, _words(ck, consts)))
  x = Tensor(np.arange(4, dtype=np.float32), device="CPU").realize()
  with watchers.watching(OnLaunch(listener)): y = ((x * 2).realize() + 1).realize()
  dev = alloy.get_device("CPU")
  kind = LaunchList if generic else dev.launch_list
  ll = kind([(ck.runner, [b.handle for b in bufs], words, ck.meta.global_size, ck.meta.local_size) for ck, bufs, words in rec], dev)
  other = Tensor(np.full(4, 10, np.float32), device="CPU").realize()
  ll([[rec[0][1][0].handle, other.node.src[0].arg.handle], None])
  assert_close(y.numpy(), np.full(4, 21, np.float32))
  ll()   # bound as last time
  assert_close(y.numpy(), np.full(4, 21, np.float32))
  assert isinstance(ll(wait=True), float)
