"""Kernel-count tests: the fusion rules of the schedule."""
import numpy as np
import alloy
from alloy import Tensor
from alloy.engine import realize as engine
from conftest import rand_np, assert_close, conv2d_3x3_np

def kernels_for(fn) -> int:
  before = engine.kernels_launched
  fn()
  return engine.kernels_launched - before

def test_movement_launches_nothing(rng):
  t = Tensor(rand_np(rng, (4, 6))).realize()
  assert kernels_for(lambda: (t.T.reshape(3, 8).permute(1, 0)[::2].pad(((1, 1), (0, 0))).flip(0), t[1:, None])) == 0

def test_elementwise_chain_is_one_kernel(rng):
  a, b, c = (Tensor(rand_np(rng, (64, 32))).realize() for _ in range(3))
  assert kernels_for(lambda: ((a * b + c).exp() / 3 - a.sqrt().abs()).realize()) == 1

def test_elementwise_into_reduce_is_one_kernel(rng):
  x = [rand_np(rng, (16, 24)) for _ in range(3)]
  a, b, c = (Tensor(v).realize() for v in x)
  out = None
  def run():
    nonlocal out
    out = ((a * b + c).exp()).sum(axis=1).realize()
  assert kernels_for(run) == 1
  assert_close(out.numpy(), np.exp(x[0] * x[1] + x[2]).sum(1), rtol=1e-5)

def test_softmax_is_one_kernel(rng):
  t = Tensor(rand_np(rng, (8, 40))).realize()
  assert kernels_for(lambda: t.softmax(-1).realize()) == 1

def test_broadcast_reduce_on_inner_axis_is_cut(rng):
  # mean over axis 0 broadcast back along axis 0 would be recomputed per row: it becomes its own kernel
  t = Tensor(rand_np(rng, (8, 40))).realize()
  assert kernels_for(lambda: (t - t.mean(0, keepdim=True)).realize()) == 2

def test_matmul_is_one_kernel(rng):
  a, b = Tensor(rand_np(rng, (8, 5))).realize(), Tensor(rand_np(rng, (5, 3))).realize()
  assert kernels_for(lambda: (a @ b).relu().realize()) == 1

def test_realized_intermediate_is_reused(rng):
  a = Tensor(rand_np(rng, (10, 10))).realize()
  b = (a * 2).exp()
  c = b + 1
  b.realize()
  assert kernels_for(lambda: c.realize()) == 1
  assert_close(c.numpy(), np.exp(a.numpy() * 2) + 1, rtol=1e-6)

def test_seed_example_is_one_kernel(rng):
  a = Tensor(rand_np(rng, (4, 3))).realize()
  assert kernels_for(lambda: a.T.pad(((1, 1), (1, 1))).sum(1).realize()) == 1

def _cached(fusion) -> int:
  """Graphs whose schedule is cached: in the general cache or the eager path's (one kernel computing one tensor), both
  keyed by the graph's structure, one table per value of schedule's (`threads`, `whole`)."""
  return len(set().union(*fusion._schedules.values(), *fusion._one_kernel.values()))

def test_schedule_reused_for_same_structure(rng):
  from alloy.schedule import fusion
  x, y = rng.uniform(1, 2, (8, 9)).astype(np.float32), rng.uniform(1, 2, (8, 9)).astype(np.float32)
  np.testing.assert_allclose((Tensor(x) * 3 + 1).sum(1).numpy(), (x * 3 + 1).sum(1), rtol=1e-6)
  cached = _cached(fusion)
  np.testing.assert_allclose((Tensor(y) * 3 + 1).sum(1).numpy(), (y * 3 + 1).sum(1), rtol=1e-6)   # other buffers: a hit
  assert _cached(fusion) == cached
  np.testing.assert_allclose((Tensor(y) * 4 + 1).sum(1).numpy(), (y * 4 + 1).sum(1), rtol=1e-6)   # other constant: a hit
  assert _cached(fusion) == cached                                                              # (a kernel argument)
  np.testing.assert_allclose((Tensor(y) * 4 + 0).sum(1).numpy(), (y * 4 + 0).sum(1), rtol=1e-6)   # 0 stays literal: new
  assert _cached(fusion) == cached + 1

def test_schedule_cache_tells_aliasing_apart(rng):
  # a*a and a*b have one shape of graph but one and two inputs; each must schedule (and compute) on its own
  x, y = rng.uniform(1, 2, 16).astype(np.float32), rng.uniform(1, 2, 16).astype(np.float32)
  a, b = Tensor(x).realize(), Tensor(y).realize()
  np.testing.assert_allclose((a * a).numpy(), x * x, rtol=1e-6)
  np.testing.assert_allclose((a * b).numpy(), x * y, rtol=1e-6)
  np.testing.assert_allclose((b * a).numpy(), y * x, rtol=1e-6)
  np.testing.assert_allclose((b * b).numpy(), y * y, rtol=1e-6)
  # the same subexpression used twice, against two equal-looking ones
  e = (a + 1).exp()
  np.testing.assert_allclose((e * e).numpy(), np.exp(x + 1) ** 2, rtol=1e-5)
  np.testing.assert_allclose(((a + 1).exp() * (b + 1).exp()).numpy(), np.exp(x + 1) * np.exp(y + 1), rtol=1e-5)

def test_several_targets_keep_their_places(rng):
  # one realize of two results, in both orders: the cached schedule must hand each its own buffer
  from alloy.realize_tensors import realize
  x = rng.uniform(1, 2, (4, 5)).astype(np.float32)
  a = Tensor(x).realize()
  for _ in range(2):   # the second round runs from the schedule cache
    p, q = a * 2, a + 3
    realize([p, q])
    r, s = a + 3, a * 2
    realize([r, s])
    for t, want in ((p, x * 2), (q, x + 3), (r, x + 3), (s, x * 2)): np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)

def test_signature_table_reset_only_misses(rng, monkeypatch):
  from alloy.ir import node as node_module
  from alloy.schedule import fusion
  x = rng.uniform(1, 2, 8).astype(np.float32)
  a = Tensor(x).realize()
  np.testing.assert_allclose((a * 5 - 1).numpy(), x * 5 - 1, rtol=1e-6)
  node_module._signatures.clear()   # as when it outgrows its bound: numbers go on from where they were
  cached = _cached(fusion)
  np.testing.assert_allclose((a * 7 + 2).numpy(), x * 7 + 2, rtol=1e-6)
  assert _cached(fusion) == cached + 1

def test_reductions_inside_a_fused_reduction_are_checked_against_it(device, rng):
  """A matmul whose result another matmul reads (through the broadcast of its rows) gets its own kernel also when the
  consumer is itself fused into a further reduction (a loss's sum): it was fused, and recomputed once per output
  element (an MLP's cross-entropy loss ran for minutes). And a matmul read by a reduction is its own kernel
  (schedule.contractions.is_contraction): attention's scores nested in softmax's max and sum were recomputed for each."""
  from alloy.schedule.fusion import schedule
  x, w1, w2 = (Tensor(rand_np(rng, s), device=device).realize() for s in ((8, 16), (16, 32), (32, 4)))
  # (the relu is the second matmul's computed operand: it gets its own kernel, the first matmul fused into it)
  assert [k[1].root.shape for k in schedule([((x @ w1).relu() @ w2).node])] == [(8, 32), (8, 4)]
  for e in (((x @ w1).relu() @ w2).sum(), ((x @ w1).relu() @ w2).log_softmax(-1).mean()):
    shapes = [k[1].root.shape for k in schedule([e.node])]
    assert shapes[0] == (8, 32) and shapes[1][:2] == (8, 4) and len(shapes) >= 3, shapes
  assert [k[1].root.shape for k in schedule([(x @ w1).softmax(-1).node])][0] == (8, 32, 1)
  assert len(schedule([(x * 2).softmax(-1).node])) == 1 and len(schedule([(x * x).sum(-1).node])) == 1   # not matmuls
  assert len(schedule([((x @ w1) * 2 + 1).relu().node])) == 1   # an elementwise epilogue still fuses
  q, k = (Tensor(rand_np(rng, (2, 3, 8, 4)), device=device) for _ in range(2))
  att = ((q @ k.transpose(-1, -2)) * 0.5).softmax(-1)
  assert len(schedule([att.node])) == 2
  sq = q.numpy().astype(np.float64) @ k.numpy().transpose(0, 1, 3, 2) * 0.5
  want_att = np.exp(sq - sq.max(-1, keepdims=True))
  np.testing.assert_allclose(att.numpy(), want_att / want_att.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
  h = np.maximum(x.numpy().astype(np.float64) @ w1.numpy(), 0) @ w2.numpy()
  h = h - h.max(-1, keepdims=True)
  want = (h - np.log(np.exp(h).sum(-1, keepdims=True))).mean()
  np.testing.assert_allclose(((x @ w1).relu() @ w2).log_softmax(-1).mean().numpy(), want, rtol=1e-4)

def test_convolution_broadcast_in_its_consumer_gets_its_own_kernel(device, rng):
  """A convolution's sum of products that its consumer broadcasts over further axes (max-pool's backward over its
  2x2 window) is cut into its own kernel, where it gets a register tile: fused, it was the consumer's scalar loop
  (digits CNN: conv2's input gradient inside max-pool's backward, 1.5 ms of a 4.3 ms step). Softmax's row max, not
  a product of two operands, stays fused."""
  import alloy.nn.functional as F
  from alloy.schedule.fusion import schedule
  x, w, g = rand_np(rng, (4, 3, 8, 8)), rand_np(rng, (8, 3, 3, 3)), rand_np(rng, (4, 8, 8, 8, 2))
  tx, tw, tg = (Tensor(v, device=device).realize() for v in (x, w, g))
  e = F.conv2d(tx, tw, padding=1).reshape(4, 8, 8, 8, 1).expand(4, 8, 8, 8, 2) * tg
  kernels = schedule([e.node])   # the convolution, the product (and on the CPU the padded input first)
  assert kernels[-2][1].root.op.name == "REDUCE" and kernels[-1][1].root.op.name == "MUL", [k[1].root for k in kernels]
  assert len(schedule([tx.softmax(-1).node])) == 1
  assert_close(e.numpy(), conv2d_3x3_np(x, w)[..., None] * g, "float64", rtol=1e-4, atol=1e-4)
  try: import torch
  except ImportError: return
  # max-pool's backward of a convolution, its input's gradient through a second one: against torch's autograd
  x2, w2, g2 = rand_np(rng, (4, 8, 8, 8)), rand_np(rng, (16, 8, 3, 3)), rand_np(rng, (4, 16, 4, 4))
  ax, aw = Tensor(x2, device=device, requires_grad=True), Tensor(w2, device=device, requires_grad=True)
  (F.max_pool2d(F.conv2d(ax, aw, padding=1), 2) * Tensor(g2, device=device)).sum().backward()
  px, pw = torch.tensor(x2, requires_grad=True), torch.tensor(w2, requires_grad=True)
  (torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(px, pw, padding=1), 2) * torch.tensor(g2)).sum().backward()
  assert_close(ax.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-4)
  assert_close(aw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-4)

def test_computed_matmul_operand_gets_its_own_kernel(device, rng):
  """A matmul's operand that is computed (a layer norm, a cast down to float16) is a kernel of its own, so the matmul
  reads loads the matrix engines take (codegen.matmul.match_matmul recognises it) and computes the operand once,
  not once per column of the output (GPT-2's c_attn recomputed its layer norm 2304 times). A widening cast of a
  buffer stays in the load."""
  import alloy.nn.functional as F
  from alloy.schedule.fusion import schedule
  from alloy.codegen.matmul import match_matmul
  x, w, b, g = rand_np(rng, (2, 16, 24)), rand_np(rng, (24, 40)), rand_np(rng, (40,)), rand_np(rng, (24,))
  tx, tw, tb, tg = (Tensor(v, device=device).realize() for v in (x, w, b, g))
  y = F.layer_norm(tx, (24,), weight=tg).half() @ tw.half() + tb.half()
  kernels = schedule([y.node])
  spec = match_matmul(kernels[-1][1])
  assert spec is not None and (spec.M, spec.N, spec.K) == (16, 40, 24) and spec.operand_dtype.name == "float16", [k[1].root for k in kernels]
  assert len(schedule([(Tensor(x.astype(np.float16), device=device).float() @ tw).node])) == 1   # a widening cast of a buffer: a load
  xn = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g
  want = xn.astype(np.float16).astype(np.float64) @ w.astype(np.float16).astype(np.float64) + b.astype(np.float16)
  assert_close(y.numpy(), want, "float16", rtol=2e-2, atol=2e-2)

def test_a_contraction_with_its_own_kernel_is_stored_in_its_output_dtype(device, rng):
  """A 16-bit matmul read by a reduction (attention's scores under softmax) is stored as its cast to float16, not as
  its float32 accumulators: the matmul kernel writes, and the softmax reads, half the bytes (schedule.fusion's
  _stored_as); the values are the same, since the softmax read the cast values either way."""
  from alloy.schedule.fusion import schedule
  q, k = (Tensor(rand_np(rng, (2, 3, 16, 8)).astype(np.float16), device=device) for _ in range(2))
  att = ((q @ k.transpose(-1, -2)) * 0.5).softmax(-1)
  (scores, ast, _, _), _ = schedule([att.node])
  assert scores.dtype.name == "float16" and ast.root.dtype.name == "float16"
  sq = (q.numpy().astype(np.float32) @ k.numpy().astype(np.float32).transpose(0, 1, 3, 2)).astype(np.float16).astype(np.float64) * 0.5
  want = np.exp(sq - sq.max(-1, keepdims=True))
  np.testing.assert_allclose(att.numpy().astype(np.float64), want / want.sum(-1, keepdims=True), rtol=2e-3, atol=2e-3)

def test_an_fp16_convolution_read_through_a_reshape_is_stored_in_fp16(rng):
  """A GPU convolution (im2col rows times the weight) whose output is read through its reshape into the image by a
  further op: the matmul cannot fuse into that reader (a reshape splits its axis), so it is stored, as its cast to
  float16 (half the bytes of its float32 sums), and the values are those of the unfused computation."""
  import alloy.nn.functional as F
  from alloy.schedule.fusion import schedule
  from alloy.codegen.matmul import match_matmul
  x = Tensor(rand_np(rng, (2, 16, 10, 10)).astype(np.float16), device="METAL")
  w = Tensor(rand_np(rng, (16, 16, 3, 3)).astype(np.float16), device="METAL")
  y = F.conv2d(x, w, padding=1).relu() * 2
  matmuls = [ast for _, ast, _, _ in schedule([y.node]) if match_matmul(ast) is not None]
  assert len(matmuls) == 1 and matmuls[0].root.dtype.name == "float16"
  want = F.conv2d(x.cast(alloy.float32), w.cast(alloy.float32), padding=1).numpy()
  np.testing.assert_allclose(y.numpy().astype(np.float64), np.maximum(want.astype(np.float16), 0).astype(np.float64) * 2, rtol=3e-3, atol=3e-3)
