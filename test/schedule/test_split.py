"""The schedule's split of long reductions (schedule/split.py): Tensor reductions build one plain REDUCE, and the
schedule runs a long one as partial results, then their reduction."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.ir.ops import Op
from alloy.engine import realize as engine
from alloy.schedule import fusion, split
from alloy.schedule.fusion import schedule, one_kernel
from conftest import rand_np, assert_close

def _ops(node) -> list: return [n.op for n in node.toposort()]

def _kernels(t: Tensor) -> list:
  """(node, AST root) per kernel of t's graph, as the engine asks (a reshape of the result peeled)."""
  return [(n, ast.root) for n, ast, *_ in schedule([engine._peel_reshape(t.node)])]

@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_node_is_one_plain_reduce(keepdim):
  t = Tensor(np.ones(1 << 20, np.float32))
  ops = _ops(t.sum(keepdim=keepdim).node)
  assert ops.count(Op.REDUCE) == 1 and Op.CONTIGUOUS not in ops   # the front end no longer splits
  red = t.sum(keepdim=True).node
  assert red.op is Op.REDUCE and red.arg == (Op.ADD, (0,)) and red.src[0] is t.node and red.shape == (1,)

def test_long_sum_is_partials_then_final():
  t = Tensor(np.ones(1 << 24, np.float32))
  s = t.sum(keepdim=True)
  (p, p_root), (f, f_root) = _kernels(s)
  assert p.op is Op.CONTIGUOUS and p.shape == (4096, 1) and p_root.op is Op.REDUCE and p_root.arg == (Op.ADD, (1,))
  assert p_root.src[0].shape == (4096, 4096)   # 4096 slices of 4096
  assert f is s.node and f_root.op is Op.REDUCE and f_root.shape == (1, 1)   # the final one computes the sum's own node
  assert [n for n, _ in _kernels(t.sum())] == [p, f]
  assert s.item() == float(1 << 24)

@pytest.mark.parametrize("shape,axis", [((1000,), None), (((1 << 15) - 1,), None), ((65, 1 << 15), 1), ((1 << 15, 2), 0),
                                        ((2, 1 << 15, 3), 1), ((1 << 10, 1 << 10), 1)])
def test_short_or_many_reductions_are_not_split(shape, axis):
  # shorter than SPLIT_MIN_LENGTH, more rows than SPLIT_PARTIALS // 64, or not the trailing axes: one kernel
  t = Tensor(np.ones(shape, np.float32))
  assert [n.op for n, _ in _kernels(t.sum(axis))] == [Op.REDUCE]

def test_long_reduction_of_no_rows(device):
  # (0, 2^16) summed over its long axis: no rows to split (the front end's rule divided by their count)
  assert Tensor(np.zeros((0, 1 << 16), np.float32), device=device).sum(1).numpy().shape == (0,)
  assert split.split_count((0, 1 << 16), (1,)) == 1

@pytest.mark.parametrize("shape,axis,parts", [((1 << 15,), None, 128), ((64, 1 << 15), 1, 64), ((3, 40000), 1, 125),
                                              ((2, 300, 700), (1, 2), 750), ((2, 1 << 16), None, 512)])
def test_split_counts(shape, axis, parts):
  t = Tensor(np.ones(shape, np.float32))
  assert split.split_count(shape, t._axes(axis)) == parts
  (p, _), (f, _) = _kernels(t.sum(axis))
  assert p.op is Op.CONTIGUOUS and p.shape[-2] == parts and f.op is Op.REDUCE

@pytest.mark.parametrize("build,count", [(lambda t: t - t.sum(), 2), (lambda t: t - t.mean(keepdim=True), 3),
                                         (lambda t: t.reshape(4, -1).softmax(1), 5), (lambda t: t.sum().cast("float16"), 2)])
def test_split_fuses_as_the_front_ends_split_did(build, count):
  # the final reduction is fused into a consumer that reads it through one view (x - x.sum()), and is a kernel of its
  # own where an elementwise op lies between its reshape and a broadcast (a mean, a softmax's reciprocal), as when
  # the front end wrote the split into the graph
  t = Tensor(np.ones(1 << 20, np.float32))
  kernels = _kernels(build(t))
  assert len(kernels) == count and kernels[0][0].op is Op.CONTIGUOUS

def test_gather_of_a_split_result(device, rng):
  # a split sum realized beside a gather of it: where a kernel cannot be named for the graph, it is scheduled unsplit
  from alloy.realize_tensors import realize
  x = rand_np(rng, (3, 40000), low=-1, high=1)
  want = x.astype(np.float64).sum(1, keepdims=True)
  for keepdim in (True, False):   # the gather reads the reduction itself (the unsplit case), or a view of it
    s = Tensor(x, device=device).sum(1, keepdim=keepdim)
    g = s[Tensor(np.array([2, 0, 2]), device=device)]
    realize([s, g])
    assert_close(s.numpy(), want if keepdim else want[:, 0], rtol=1e-5, atol=1e-4)
    assert_close(g.numpy(), want[[2, 0, 2]] if keepdim else want[[2, 0, 2], 0], rtol=1e-5, atol=1e-4)

def test_split_schedule_is_cached(device, rng):
  # the partial results are no node of the graph: a cache hit makes them again, one node for writer and reader
  for i in range(3):   # other buffers each time: the schedules are found by the graphs' structure
    x = rand_np(rng, (3, 40000), low=-1, high=1)
    t = Tensor(x, device=device)
    (p, _, _, _), (f, _, inputs, _) = schedule([t.sum(1, keepdim=True).node])
    assert inputs[1] is p and p.op is Op.CONTIGUOUS and f.op is Op.REDUCE
    assert_close(t.sum(1).numpy(), x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    e = np.exp(x - x.max(1, keepdims=True))
    assert_close(t.softmax(1).numpy(), e / e.sum(1, keepdims=True))
    if i == 0: cached = sum(map(len, fusion._schedules.values()))
  assert sum(map(len, fusion._schedules.values())) == cached

def test_split_of_a_constant_and_of_lifted_constants(device):
  # a constant's reshape is a constant of another shape: the schedule names the graph's own one
  assert Tensor.full((1 << 20,), 2.5, device=device).sum().item() == 2.5 * (1 << 20)
  x = np.linspace(-1, 1, 1 << 16, dtype=np.float32)
  for c in (3.0, 5.0):   # a kernel argument: the second one reuses the schedule
    assert_close((Tensor(x, device=device) * c).sum().numpy(), (x.astype(np.float64) * c).sum(), atol=1e-3)

def test_split_written_out_beside_the_plain_sum(device):
  # the schedule's split of a.sum() is b's own graph: each target must still be a kernel's node (no split then)
  from alloy.realize_tensors import realize
  x = Tensor(np.ones(1 << 24, np.float32), device=device).realize()
  a = x.sum(keepdim=True)
  b = x.reshape(4096, 4096).sum(1, keepdim=True).contiguous().reshape(4096).sum(keepdim=True)
  assert {a.node, b.node} <= {n for n, *_ in schedule([a.node, b.node])}
  realize([a, b])
  assert a.item() == b.item() == float(1 << 24)

def test_eager_path_takes_split_to_the_general_path(device, rng):
  x = rand_np(rng, (1 << 16,), low=-1, high=1)
  t = Tensor(x, device=device).realize()
  walked, kernel = one_kernel(t.sum(keepdim=True).node)
  assert kernel is None   # two kernels: not the one-kernel path
  assert one_kernel(Tensor(x[:1000], device=device).sum(keepdim=True).node)[1] is not None
  before = engine.kernels_launched
  got = t.sum().item()
  assert engine.kernels_launched - before == 2
  assert abs(got - x.astype(np.float64).sum()) < 1e-3

def test_split_sum_accuracy(device, rng):
  # 2^24 float32 values near 1: one accumulator (or a few vector lanes) would lose whole units once past 2^24; the
  # partials keep the sum within its own rounding
  x = rng.uniform(0.5, 1.5, 1 << 24).astype(np.float32)
  got, want = Tensor(x, device=device).sum().item(), x.astype(np.float64).sum()
  assert abs(got - want) <= 2 * np.spacing(np.float32(want))
  y = rng.uniform(-1, 1, 1 << 24).astype(np.float32)
  got, want = Tensor(y, device=device).sum().item(), y.astype(np.float64).sum()
  assert abs(got - want) <= 1e-9 * np.abs(y).astype(np.float64).sum()

def test_gradient_of_a_long_sum(device, rng):
  # autograd differentiates the plain REDUCE; the forward and the gradients' graphs are split by the schedule
  x = rand_np(rng, (2, 1 << 15), low=-1, high=1)
  t = Tensor(x, device=device).requires_grad_()
  loss = (t * t).sum() + t.amax(1).sum()
  loss.backward()
  want = 2 * x.astype(np.float64)
  want[np.arange(2), x.argmax(1)] += 1
  assert_close(t.grad.numpy(), want, rtol=1e-6, atol=1e-6)
  assert_close(loss.numpy(), (x.astype(np.float64) ** 2).sum() + x.max(1).sum(), rtol=1e-5)

def test_split_under_jit(device, rng):
  # captured on the second call, replayed after: the partials' buffers are captured with the launches
  import alloy
  @alloy.jit
  def f(x): return (x * 2).sum() + x.amax()
  for _ in range(4):
    x = rand_np(rng, (1 << 17,), low=-1, high=1)
    assert_close(f(Tensor(x, device=device)).numpy(), (x.astype(np.float64) * 2).sum() + x.max(), rtol=1e-5, atol=1e-4)

# ---- split-K: float32 contractions of few outputs, on a device of threads

def _matmul_kernels(y: Tensor, threads: bool) -> list:
  return [(n, ast.root) for n, ast, *_ in schedule([engine._peel_reshape(y.node)], threads=threads)]

def test_a_decode_matmul_is_split_along_k_on_a_device_of_threads(rng):
  x, w = Tensor(rand_np(rng, (32, 3072))), Tensor(rand_np(rng, (3072, 768)))
  b, r = Tensor(rand_np(rng, (768,))), Tensor(rand_np(rng, (32, 768)))
  y = r + (x @ w + b)
  (p, p_root), (f, f_root) = _matmul_kernels(y, threads=True)
  assert p.op is Op.CONTIGUOUS and p.shape == (32, 32, 768, 1) and p_root.arg == (Op.ADD, (3,))   # 32 slices of 96, leading
  assert p_root.src[0].shape == (32, 32, 768, 96)
  assert f is y.node and Op.REDUCE in _ops(f_root) and f_root.op is Op.ADD   # the slices' sum takes the epilogue
  assert len(_matmul_kernels(y, threads=False)) == 1   # a CPU: its register tile, one kernel

@pytest.mark.parametrize("M,K,N,dtype", [(256, 1024, 1024, np.float32),   # outputs enough for the GPU: one kernel
                                          (32, 64, 768, np.float32),       # K too short to cut
                                          (32, 3072, 768, np.float16)])    # 16-bit partial sums would round
def test_matmuls_split_k_leaves_alone(rng, M, K, N, dtype):
  y = Tensor(rand_np(rng, (M, K)).astype(dtype)) @ Tensor(rand_np(rng, (K, N)).astype(dtype))
  assert len(_matmul_kernels(y, threads=True)) == 1

def test_float32_arrays_cast_to_16_bits_are_16_bit_operands(rng):
  # the tensor cores take them (the casts stored first), where a float32 matmul of these shapes is split along K
  a, b = rand_np(rng, (129, 4104)), rand_np(rng, (4104, 72))
  split_k_partials = (8, 129, 72, 1)   # 8 slices of 513
  assert _matmul_kernels(Tensor(a) @ Tensor(b), threads=True)[0][0].shape == split_k_partials
  kernels = _matmul_kernels((Tensor(a).cast(alloy.float16) @ Tensor(b).cast(alloy.float16)).float(), threads=True)
  assert [n.shape for n, _ in kernels] == [(129, 4104), (4104, 72), (129, 72)]   # the two casts, then the matmul

@pytest.mark.parametrize("a_shape,b_shape", [((32, 3072), (3072, 768)), ((1, 768), (768, 2304)), ((33, 750), (750, 40)),
                                             ((2, 7, 1000), (1000, 9)), ((4, 5, 384), (4, 384, 6)), ((16, 100), (100, 3))])
def test_split_k_matmuls_match_numpy_on_a_device_of_threads(rng, a_shape, b_shape):
  from alloy.runtime.registry import get_device
  try:
    if not get_device("METAL").caps.threads: pytest.skip("METAL launches no threads here")
  except Exception as e: pytest.skip(f"no METAL device: {e}")
  a, b = rand_np(rng, a_shape), rand_np(rng, b_shape)
  bias = rand_np(rng, b_shape[-1:])
  y = Tensor(a, device="METAL") @ Tensor(b, device="METAL") + Tensor(bias, device="METAL")
  assert_close(y.numpy(), a.astype(np.float64) @ b + bias, atol=1e-4, rtol=1e-4)

def test_split_k_replays_under_jit_on_a_device_of_threads(rng):
  # a cached schedule makes the split's kernels again from the reduction's place (split.made_again): every replay
  # and every new call of the same structure must still compute the product
  import alloy
  from alloy.runtime.registry import get_device
  try:
    if not get_device("METAL").caps.threads: pytest.skip("METAL launches no threads here")
  except Exception as e: pytest.skip(f"no METAL device: {e}")
  w = rand_np(rng, (1536, 96))
  wt = Tensor(w, device="METAL").realize()
  step = alloy.jit(lambda x: (x @ wt).relu())
  for _ in range(4):
    x = rand_np(rng, (8, 1536))
    assert_close(step(Tensor(x, device="METAL")).numpy(), np.maximum(x.astype(np.float64) @ w, 0), atol=1e-4, rtol=1e-4)
    assert_close((Tensor(x, device="METAL") @ wt).numpy(), x.astype(np.float64) @ w, atol=1e-4, rtol=1e-4)   # eager, cached
