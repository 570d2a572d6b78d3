"""Reductions, softmax family, cumsum and matmul against NumPy."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.codegen.program import Kind
from conftest import rand_np, assert_close, supported

AXES = [None, 0, 1, -1, (0, 2), (0, 1, 2)]

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
def test_sum_prod_mean(device, rng, dtype):
  x = rand_np(rng, (3, 4, 5), dtype, low=0.5, high=1.5) if dtype.startswith("float") else rand_np(rng, (3, 4, 5), dtype)
  t = Tensor(x, device=device)
  for ax in AXES:
    for keep in (False, True):
      np_ax = ax if not isinstance(ax, list) else tuple(ax)
      got, want = t.sum(ax, keepdim=keep).numpy(), x.sum(axis=np_ax, keepdims=keep, dtype=np.int64 if dtype == "int32" else None)
      assert_close(got, want, dtype, rtol=1e-2 if dtype == "float16" else 1e-5)
      if dtype.startswith("float"):
        assert_close(t.mean(ax, keepdim=keep).numpy(), x.mean(axis=np_ax, keepdims=keep), dtype, rtol=1e-2 if dtype == "float16" else 1e-5)
        assert_close(t.prod(ax, keepdim=keep).numpy(), x.prod(axis=np_ax, keepdims=keep), dtype, rtol=2e-2 if dtype == "float16" else 1e-5)

def test_max_min_arg(device, rng):
  x = rand_np(rng, (4, 6, 3))
  t = Tensor(x, device=device)
  for ax in (0, 1, 2, -1):
    v, i = t.max(ax)
    np.testing.assert_array_equal(v.numpy(), x.max(axis=ax))
    np.testing.assert_array_equal(i.numpy(), x.argmax(axis=ax))
    v, i = t.min(ax, keepdim=True)
    np.testing.assert_array_equal(v.numpy(), x.min(axis=ax, keepdims=True))
    np.testing.assert_array_equal(i.numpy(), np.expand_dims(x.argmin(axis=ax), ax))
  np.testing.assert_array_equal(t.max().numpy(), x.max())
  np.testing.assert_array_equal(t.amin((0, 2)).numpy(), x.min(axis=(0, 2)))
  assert t.argmax().item() == x.argmax()
  ties = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]], device=device)
  np.testing.assert_array_equal(ties.argmax(1).numpy(), [1, 0])
  assert t.argmax(1).dtype == alloy.int64

def test_any_all(device, rng):
  x = rand_np(rng, (5, 7)) > 0.5
  t = Tensor(x, device=device)
  for ax in (None, 0, 1):
    np.testing.assert_array_equal(t.any(ax).numpy(), x.any(axis=ax))
    np.testing.assert_array_equal(t.all(ax).numpy(), x.all(axis=ax))

def test_var_std_logsumexp(device, rng):
  x = rand_np(rng, (6, 9))
  t = Tensor(x, device=device)
  for ax in (None, 0, 1):
    assert_close(t.var(ax).numpy(), x.var(axis=ax, ddof=1), rtol=1e-5)
    assert_close(t.std(ax, correction=0).numpy(), x.std(axis=ax), rtol=1e-5)
    m = x.max(axis=ax, keepdims=True)
    want = np.log(np.exp(x - m).sum(axis=ax, keepdims=True)) + m
    assert_close(t.logsumexp(ax).numpy(), want.squeeze() if ax is None else want.squeeze(ax), rtol=1e-5)

def test_softmax(device, rng):
  x = rand_np(rng, (5, 33)) * 4
  t = Tensor(x, device=device)
  for ax in (0, 1, -1):
    e = np.exp(x - x.max(axis=ax, keepdims=True))
    assert_close(t.softmax(ax).numpy(), e / e.sum(axis=ax, keepdims=True), rtol=1e-5, atol=1e-7)
    assert_close(t.log_softmax(ax).numpy(), np.log(e / e.sum(axis=ax, keepdims=True)), rtol=1e-5, atol=1e-6)

def test_cumsum(device, rng):
  x = rand_np(rng, (4, 7))
  t = Tensor(x, device=device)
  for ax in (0, 1, -1):
    assert_close(t.cumsum(ax).numpy(), np.cumsum(x, axis=ax), rtol=1e-5, atol=1e-6)
  xi = rand_np(rng, (9,), "int32")
  np.testing.assert_array_equal(Tensor(xi, device=device).cumsum().numpy(), np.cumsum(xi))

def test_reduce_views(device, rng):
  x = rand_np(rng, (6, 8))
  t = Tensor(x, device=device)
  assert_close(t.T[::2].sum(1).numpy(), x.T[::2].sum(1), rtol=1e-5)
  assert_close(t.pad(((1, 1), (2, 0))).sum(0).numpy(), np.pad(x, ((1, 1), (2, 0))).sum(0), rtol=1e-5)
  assert_close(t[:, :1].expand(6, 5).sum(1).numpy(), np.broadcast_to(x[:, :1], (6, 5)).sum(1), rtol=1e-5)

def test_empty_reductions(device):
  z = Tensor(np.zeros((0, 3), np.float32), device=device)
  np.testing.assert_array_equal(z.sum(0).numpy(), np.zeros(3, np.float32))
  np.testing.assert_array_equal(z.prod(0).numpy(), np.ones(3, np.float32))
  with pytest.raises(IndexError, match="size 0"): z.amax(0)

def test_empty_results_launch_nothing(device):
  # a result with no elements needs no kernel (GPU codegen divided by its zero sizes); its shape and dtype still right
  from alloy.engine import realize as engine
  for shape in [(0, 5), (0, 300), (3, 0), (2, 0, 4)]:
    x = Tensor(np.zeros(shape, np.float32), device=device)
    before = engine.kernels_launched
    for got, want in [(x.softmax(-1), np.zeros(shape)), ((x * 2).exp(), np.zeros(shape)), (x.sum(0), np.zeros(shape).sum(0)),
                      (x.log_softmax(-1), np.zeros(shape)), (x.max(-1)[0] if shape[-1] else x.sum(-1), np.zeros(shape).sum(-1))]:
      out = got.numpy()
      assert out.shape == want.shape and out.dtype == np.float32
      if want.size: np.testing.assert_array_equal(out, want)
    kernels = engine.kernels_launched - before
    assert kernels <= sum(1 for s in [np.zeros(shape).sum(0), np.zeros(shape).sum(-1)] if s.size), (shape, kernels)

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                                    ((2, 1, 3, 4), (5, 4, 2)), ((1, 7), (7, 1)), ((17, 33), (33, 9))])
def test_matmul(device, rng, sa, sb):
  a, b = rand_np(rng, sa), rand_np(rng, sb)
  got = (Tensor(a, device=device) @ Tensor(b, device=device)).numpy()
  assert_close(got, a @ b, rtol=1e-5, atol=1e-5)

def test_matmul_dtypes(device, rng):
  for dtype in supported(device, ("float16", "float64", "int32")):
    a, b = rand_np(rng, (5, 6), dtype), rand_np(rng, (6, 3), dtype)
    got = alloy.matmul(Tensor(a, device=device), Tensor(b, device=device)).numpy()
    half = dtype == "float16"
    assert_close(got, (a.astype(np.float64) @ b).astype(dtype), dtype, atol=5e-2 if half else None, rtol=1e-2 if half else None)
  v = rand_np(rng, (8,))
  assert_close(Tensor(v, device=device).dot(Tensor(v, device=device)).numpy(), v @ v, rtol=1e-5)

# sizes that take the CPU's register tile (rows x 16 or 8 columns, vector arithmetic), with epilogues fused
@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_matmul_tiles(device, rng, dtype):
  # sizes the tile does not divide (its last tile overlaps the one before): 25 rows, 19 and 40 columns
  # and shapes whose right operand the CPU copies into panels per column tile (also batched, and with overlap)
  for sa, sb in [((64, 48), (48, 32)), ((3, 16, 20), (20, 24)), ((8, 40), (40, 8)), ((12, 9), (9, 16)), ((25, 40), (40, 19)),
                 ((2, 17, 5), (5, 40)), ((64, 40), (40, 128)), ((70, 50), (50, 130)), ((2, 48, 24), (24, 72))]:
    a, b = rand_np(rng, sa, dtype), rand_np(rng, sb, dtype)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    want = a @ b
    assert_close((ta @ tb).numpy(), want, dtype, rtol=1e-5)
    assert_close(((ta @ tb) * 2 + 1).numpy(), want * 2 + 1, dtype, rtol=1e-5)
  # a transposed operand, and a reduction whose lanes are max, not sum (no vector op for it)
  a, b = rand_np(rng, (32, 24)), rand_np(rng, (16, 24))
  assert_close((Tensor(a, device=device) @ Tensor(b, device=device).T).numpy(), a @ b.T, rtol=1e-5, atol=1e-5)
  x = rand_np(rng, (8, 16, 20))
  np.testing.assert_array_equal(Tensor(x, device=device).amax(2).numpy(), x.max(2))

# big enough for a GPU's 4x4 register tile per thread (opts.GPU_TILE), and not divisible by it (overlapping tiles)
@pytest.mark.parametrize("sa,sb", [((256, 96), (96, 320)), ((250, 97), (97, 330))])
def test_matmul_gpu_tile_sizes(device, rng, sa, sb):
  x, y = rand_np(rng, sa, low=-1, high=1), rand_np(rng, sb, low=-1, high=1)
  got = ((Tensor(x, device=device) @ Tensor(y, device=device)) * 0.5 + 1).numpy()
  assert_close(got, (x.astype(np.float64) @ y) * 0.5 + 1, "float32", rtol=1e-5, atol=1e-4)

def _cpu_program(node, caps=None):
  """The linear program of the kernel computing node (its schedule's last) as the CPU device lowers it (under `caps`:
  default, this CPU's)."""
  from alloy.codegen.lower import lower
  from alloy.schedule.fusion import schedule
  _, ast, _, _ = schedule([node])[-1]
  return lower(ast, caps or alloy.get_device("CPU").caps)

# the register tile of each vector extension (codegen only, so both run on any CPU): AVX2's and NEON's 8 x 8 of
# 8-wide vectors, AVX-512's 8 x 32 of 16-wide ones
@pytest.mark.parametrize("isa", ["8-wide", "avx512"])
def test_cpu_matmul_is_vector_code(isa):
  from alloy.runtime.cpu import CAPS_8_WIDE, CAPS_AVX512
  caps, cols, width = (CAPS_8_WIDE, 8, 8) if isa == "8-wide" else (CAPS_AVX512, 32, 16)
  a = Tensor(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), device="CPU")
  prog = _cpu_program((a @ a).node, caps)
  from alloy.codegen.opts import TILE_ROWS
  assert [o for o in prog.meta.opts if o[0] == "UPCAST"] == [("UPCAST", 0, TILE_ROWS), ("UPCAST", 1, cols)]
  ops = [i.op for i in prog.instrs]
  assert ops.count(Kind.VACC) == ops.count(Kind.VUPDATE) == TILE_ROWS * cols // width and Kind.UPDATE not in ops
  assert prog.meta.vector_widths == (width,)
  b = Tensor(np.ones((256, 256), np.float32), device="CPU")   # packed panels of the tile's columns
  prog = _cpu_program((b @ b).node, caps)
  assert ("STAGE", 1, 1) in prog.meta.opts and ("UPCAST", 1, cols) in prog.meta.opts
  # 16-bit floats have no vector loads: copied into float32 panels they take the wide tile, read in place (too few
  # column tiles to pack) they keep 8 columns, not a wide scalar tile's spills
  h = b.cast("float16").realize()
  assert ("UPCAST", 1, cols) in _cpu_program((h @ h).node, caps).meta.opts
  assert ("UPCAST", 1, 8) in _cpu_program((h[:, :64] @ h[:64, :64]).node, caps).meta.opts

def test_cpu_row_reduction_reads_rows_side_by_side():
  from alloy.codegen.opts import ROW_STREAMS
  m = Tensor(np.ones((512, 256), np.float32), device="CPU")
  prog = _cpu_program((m.sum(1) * 2).node)   # the (512,) output, not only the keepdim one realize makes
  assert ("UPCAST", 0, ROW_STREAMS) in prog.meta.opts
  ops = [i.op for i in prog.instrs]
  assert ops.count(Kind.VACC) == ROW_STREAMS and ops.count(Kind.VLOAD) == ROW_STREAMS and Kind.UPDATE not in ops
  assert prog.meta.global_size[0] == 512 // ROW_STREAMS   # the loop the threads split: one iteration per row group

def test_cpu_column_reduction_reads_along_rows():
  from alloy.codegen.opts import COLUMN_LANES
  m = Tensor(np.ones((256, 512), np.float32), device="CPU")
  v = Tensor(np.ones((1, 256), np.float32), device="CPU")
  for t in (m.sum(0), m.T.sum(1), v @ m):   # the columns of m, the rows of its transposed view, a vector times m
    prog = _cpu_program(t.node)
    assert [o[2] for o in prog.meta.opts if o[0] == "UPCAST"] == [COLUMN_LANES]
    ops = [i.op for i in prog.instrs]
    assert ops.count(Kind.VACC) == COLUMN_LANES // max(prog.meta.vector_widths) and Kind.UPDATE not in ops

@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "float16"])
def test_column_reductions(device, rng, dtype):
  if dtype not in supported(device, (dtype,)): pytest.skip(f"{dtype} not on {device}")
  for shape in [(300, 256), (5, 128), (64, 192), (50, 200)]:
    x = rand_np(rng, shape, dtype, low=-1, high=1) if dtype != "int32" else rng.integers(-1000, 1000, shape).astype(np.int32)
    for t, want in ((Tensor(x, device=device), x), (Tensor(np.ascontiguousarray(x.T), device=device).T, x)):
      got = t.sum(0).numpy()
      if dtype == "int32": np.testing.assert_array_equal(got, want.sum(0))
      else:
        half = dtype == "float16"
        assert_close(got, want.astype(np.float64).sum(0), dtype, rtol=1e-2 if half else 1e-5, atol=0.3 if half else 1e-4)
      np.testing.assert_array_equal(t.amax(0).numpy(), want.max(0))
      np.testing.assert_array_equal(t.argmax(0).numpy(), want.argmax(0))

# row counts around the row groups' size, rows of several dtypes and ops, rows read through strided views
@pytest.mark.parametrize("rows", [2, 4, 7, 8, 12, 13, 64])
def test_row_reductions_in_row_groups(device, rng, rows):
  x = rand_np(rng, (rows, 200), low=-1, high=1)
  t = Tensor(x, device=device)
  assert_close(t.sum(1).numpy(), x.astype(np.float64).sum(1), "float32", rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(t.amax(1).numpy(), x.max(1))
  np.testing.assert_array_equal(t.argmin(1).numpy(), x.argmin(1))
  assert_close((t * t).mean(1, keepdim=True).numpy(), (x.astype(np.float64) ** 2).mean(1, keepdims=True), "float32", rtol=1e-5)
  xi = (x * 1000).astype(np.int32)
  np.testing.assert_array_equal(Tensor(xi, device=device).sum(1).numpy(), xi.sum(1))
  for dtype in supported(device, ("float16", "float64")):
    xd = x.astype(dtype)
    half = dtype == "float16"
    got = Tensor(xd, device=device).sum(1).numpy()
    assert_close(got, xd.astype(np.float64).sum(1), dtype, rtol=1e-2 if half else 1e-12, atol=0.2 if half else 1e-12)
  y = rand_np(rng, (400, rows * 2), low=-1, high=1)[::2, ::2].T   # rows strided in memory, and not contiguous along
  assert_close(Tensor(y, device=device).sum(1).numpy(), y.astype(np.float64).sum(1), "float32", rtol=1e-5, atol=1e-5)

def test_cpu_matmul_packs_its_right_operand(rng):
  x, y, bias = rand_np(rng, (64, 48)), rand_np(rng, (48, 256)), rand_np(rng, (256,))   # 8 column tiles of 32
  a, b = Tensor(x, device="CPU"), Tensor(y, device="CPU")
  cases = [(a @ b, x @ y), (a @ Tensor(np.ascontiguousarray(y.T), device="CPU").T, x @ y),   # read through a transposed view
           ((a @ (b * 0.5).exp()) * 2 + Tensor(bias, device="CPU"), (x @ np.exp(y * 0.5)) * 2 + bias)]   # a computed operand (its own kernel)
  for t, want in cases:
    prog = _cpu_program(t.node)
    assert any(o[0] == "STAGE" for o in prog.meta.opts) and any(i.op is Kind.LOCAL for i in prog.instrs)
    assert_close(t.numpy(), want, rtol=1e-5, atol=1e-5)
  for dtype in ("float16", "bfloat16", "float64", "int32"):   # panels of other types (16-bit floats: as float)
    xd, yd = Tensor(x, device="CPU").cast(dtype), Tensor(y * 4, device="CPU").cast(dtype)
    want = xd.float().numpy().astype(np.float64) @ yd.float().numpy()
    got = (xd @ yd).float().numpy()
    if dtype == "int32": np.testing.assert_array_equal(got, want)
    else: assert_close(got, want, "float32", rtol=3e-2 if "16" in dtype else 1e-6, atol=0.2 if "16" in dtype else 1e-6)
  assert not any(o[0] == "STAGE" for o in _cpu_program((a[:8] @ b).node).meta.opts)   # one row tile: the copy would not pay

# rows whose length the vector width does not divide: vector code for the whole vectors, a remainder loop after
@pytest.mark.parametrize("shape", [(6, 1001), (5, 2047), (13, 37), (3, 33), (2, 3, 41)])
def test_rows_of_odd_lengths(device, rng, shape):
  x = rand_np(rng, shape, low=-3, high=3)
  t = Tensor(x, device=device)
  assert_close(t.sum(-1).numpy(), x.astype(np.float64).sum(-1), "float32", rtol=1e-5, atol=1e-4)
  np.testing.assert_array_equal(t.amax(-1).numpy(), x.max(-1))
  np.testing.assert_array_equal(t.argmax(-1).numpy(), x.argmax(-1))
  e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
  assert_close(t.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), "float32", rtol=2e-6, atol=1e-7)
  assert_close(t.log_softmax(-1).numpy(), np.log(e / e.sum(-1, keepdims=True)), "float32", rtol=1e-5, atol=1e-5)
  assert_close(t.var(-1).numpy(), x.astype(np.float64).var(-1, ddof=1), "float32", rtol=1e-4, atol=1e-5)
  xi = (x * 100).astype(np.int32)
  np.testing.assert_array_equal(Tensor(xi, device=device).sum(-1).numpy(), xi.sum(-1))

def test_cpu_odd_rows_are_vector_code():
  from alloy.engine.realize import _peel_reshape
  t = Tensor(np.ones((64, 1001), np.float32), device="CPU")
  for out in (t.sum(1), t.softmax(1)):
    prog = _cpu_program(_peel_reshape(out.node))
    ops = [i.op for i in prog.instrs]
    assert Kind.VACC in ops and ops.count(Kind.VLOAD) >= 4 and any(o[0] == "UPCAST" for o in prog.meta.opts)

# long rows: threadgroups share a row on GPUs; a few very long reductions are split into two stages
@pytest.mark.parametrize("shape,axis", [((1 << 17,), None), ((3, 40000), 1), ((2, 1 << 16), None), ((2, 300, 700), (1, 2)),
                                        ((513, 1000), 1), ((700, 33), 0), ((40000, 3), 0)])
def test_long_reductions(device, rng, shape, axis):
  x = rand_np(rng, shape, low=-1, high=1)
  t = Tensor(x, device=device)
  assert_close(t.sum(axis).numpy(), x.astype(np.float64).sum(axis=axis), "float32", rtol=1e-4, atol=1e-3)
  np.testing.assert_array_equal(t.amax(axis).numpy(), x.max(axis=axis))
  np.testing.assert_array_equal(t.amin(axis).numpy(), x.min(axis=axis))
  if not isinstance(axis, tuple):
    np.testing.assert_array_equal(t.argmax(axis).numpy(), x.argmax(axis=axis))
  np.testing.assert_array_equal((t > 0.999).any(axis).numpy(), (x > 0.999).any(axis=axis))
  np.testing.assert_array_equal((t > -0.999).all(axis).numpy(), (x > -0.999).all(axis=axis))
  xi = (x * 100).astype(np.int32)
  np.testing.assert_array_equal(Tensor(xi, device=device).sum(axis).numpy(), xi.sum(axis=axis, dtype=np.int64))
  if len(shape) == 2 and axis == 1:
    assert_close(t.softmax(1).numpy(), np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True), "float32")
    assert_close(t.var(1).numpy(), x.astype(np.float64).var(1, ddof=1), "float32", rtol=1e-4)

def test_long_half_reduction(device, rng):
  x = rand_np(rng, (4, 3000), "float16", low=0.5, high=1.5)
  t = Tensor(x, device=device)
  assert_close(t.sum(1).numpy(), x.astype(np.float64).sum(1), "float16", rtol=1e-2)
  np.testing.assert_array_equal(t.amax(1).numpy(), x.max(1))

def test_full_sum_is_two_stages():
  from alloy.schedule.fusion import schedule
  t = Tensor(np.ones(1 << 20, np.float32))
  assert len(schedule([t.sum().node])) == 2
  assert len(schedule([Tensor(np.ones((1 << 10, 1 << 10), np.float32)).sum(1).node])) == 1
  assert t.sum().item() == float(1 << 20)

def test_long_reductions_of_views(device, rng):
  # offsets and lengths that break 4-wide alignment must fall back to scalar accesses, not misread
  x = rand_np(rng, (6, 2051), low=-1, high=1)
  t = Tensor(x, device=device)
  for view, ref in [(t[:, 1:2049], x[:, 1:2049]), (t[:, 3:], x[:, 3:]), (t[1:, :1026], x[1:, :1026]), (t.T[:1024].T, x.T[:1024].T)]:
    assert_close(view.sum(1).numpy(), ref.astype(np.float64).sum(1), "float32", rtol=1e-4, atol=1e-3)
    e = np.exp(ref - ref.max(1, keepdims=True))
    assert_close(view.softmax(1).numpy(), e / e.sum(1, keepdims=True), "float32")

def test_reduction_over_padding_only(device, rng):
  # a view whose every element is padding reads nothing: the layout analysis of reductions once tripped over it
  x = rand_np(rng, (30, 6, 4), low=-1, high=1)
  t = Tensor(x, device=device).pad(((0, 0), (0, 0), (1, 0)))[2:9, 0:5, 0:1]
  want = np.pad(x, ((0, 0), (0, 0), (1, 0)))[2:9, 0:5, 0:1]
  for axis in (0, 1, 2, (0, 1), None):
    np.testing.assert_array_equal(t.sum(axis).numpy(), want.sum(axis))

def test_exp_in_row_kernels_is_accurate(device):
  # an elementwise epilogue of a row reduction runs as vector code on the CPU, with its own exp
  x = np.concatenate([np.linspace(-110, 95, 8 * 1021, dtype=np.float32),
                      np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72, 88.73, -87.5, -103.0, -104.0, 1e-30, -1e-30], np.float32),
                      np.zeros(4, np.float32)]).reshape(8, -1)
  t = Tensor(x, device=device)
  got = (t.exp() + (t > 1e30).all(1, keepdim=True).float()).numpy()   # + 0.0 from a row reduction
  with np.errstate(over="ignore"): want = np.exp(x.astype(np.float64)).astype(np.float32)
  finite = np.isfinite(want) & (want > 1e-37)
  np.testing.assert_allclose(got[finite], want[finite], rtol=4e-7)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
  np.testing.assert_allclose(got[~finite & ~np.isnan(want) & ~np.isinf(want)], want[~finite & ~np.isnan(want) & ~np.isinf(want)], atol=2e-45)

def test_softmax_rows_extremes(device, rng):
  x = rand_np(rng, (16, 1024), low=-30, high=30)
  x[3, 5], x[7, :] = 1e4, -1e4
  t = Tensor(x, device=device)
  e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
  assert_close(t.softmax(1).numpy(), e / e.sum(1, keepdims=True), "float32", rtol=2e-6, atol=1e-7)
  np.testing.assert_array_equal(t.amax(1).numpy(), x.max(1))

def test_softmax_every_short_row_length(device, rng):
  # rows as long as one or two vectors become register tiles with no output loop: on the CPU the kept exp was read
  # back before the loop that stores it ran (garbage for rows of 8); every length from 1 to 40 pins the order
  for n in range(1, 41):
    x = rand_np(rng, (3, n), low=-4, high=4)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    assert_close(Tensor(x, device=device).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), "float32", rtol=2e-6, atol=1e-7)

@pytest.mark.parametrize("shape", [(16464,), (1, 40000), (2, 40000)])
def test_softmax_of_rows_split_between_threads(device, rng, shape):
  # one or two long rows: the CPU's threads split the row itself, and must not keep exp values in the output
  # (each thread's sum loop would write the whole row over outputs another thread had finished)
  x = rand_np(rng, shape, low=-4, high=4)
  e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
  for _ in range(3): assert_close(Tensor(x, device=device).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), "float32", rtol=2e-6, atol=1e-7)

@pytest.mark.parametrize("shape", [(3, 5, 37), (4, 1000), (2, 3, 64), (6, 256)])
def test_softmax_epilogues(device, rng, shape):
  # on the CPU the exp of a row is computed once and kept in the output buffer between its two uses
  x = rand_np(rng, shape, low=-4, high=4)
  t = Tensor(x, device=device)
  e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
  sm = e / e.sum(-1, keepdims=True)
  assert_close(t.softmax(-1).numpy(), sm, "float32")
  assert_close((t.softmax(-1) * 2 + 1).numpy(), sm * 2 + 1, "float32")
  sq = Tensor(x[..., :shape[-2], :shape[-2]] if len(shape) > 2 else x[:, :shape[0]], device=device)
  ex = (sq - sq.amax(-1, keepdim=True)).exp()
  ref = np.exp(sq.numpy().astype(np.float64) - sq.numpy().max(-1, keepdims=True))
  both = ex / ex.sum(-1, keepdim=True) + ex.transpose(-1, -2)   # the exp is read transposed too: not kept
  assert_close(both.numpy(), ref / ref.sum(-1, keepdims=True) + np.swapaxes(ref, -1, -2), "float32")
