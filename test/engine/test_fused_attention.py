"""The fused attention kernels (ir/attention.py, codegen/attention.py, renderer/cuda_attention.py,
cuda_attention_f32.py and cuda_attention_rows.py, engine/attention.py): how the schedule hands them their operands and
what they refuse (no GPU needed), their source compiled by NVRTC for sm_90, and on a CUDA GPU
scaled_dot_product_attention through them against NumPy in float64: float16, bfloat16 and float32, causal, masked or
neither, head sizes 4..128, lengths the row blocks do not divide, q, k and v as slices of one projection, broadcast
heads, a decode step's mask at a runtime position, eager and under @jit."""
import numpy as np
import pytest
import alloy
from alloy import Tensor
import alloy.nn.functional as F
from alloy.codegen.attention import attention_spec
from alloy.ir.attention import attention_node
from alloy.ir.ops import Op
from alloy.engine.attention import render
from alloy.schedule.fusion import schedule

def fused(q: Tensor, k: Tensor, v: Tensor, scale=0.125, causal=True, heads_inside=False, mask=None) -> Tensor:
  """The ATTENTION node on any tensors (what sdpa makes on a device with the kernel), for the schedule's tests."""
  mask = None if mask is None else mask.expand(q.shape[:-1] + (k.shape[-2],)).node
  return q._new(attention_node(q.node, k.node, v.node, scale, causal, heads_inside, mask))

def attention_kernels(t: Tensor):
  return [(ast, inputs) for _, ast, inputs, _ in schedule([t.node]) if ast.root.op is Op.ATTENTION]

def projection(rng, B=2, L=100, H=3, D=64, dtype=np.float16):
  x = Tensor(rng.uniform(-1, 1, (B, L, 3 * H * D)).astype(dtype))
  w = Tensor(rng.uniform(-1, 1, (3 * H * D, 3 * H * D)).astype(dtype))
  return [t.reshape(B, L, H, D).permute(0, 2, 1, 3) for t in (x @ w).split(H * D, dim=-1)]

def test_operands_are_read_in_place_as_slices_of_one_projection(rng):
  q, k, v = projection(rng)
  (ast, inputs), = attention_kernels(fused(q, k, v).permute(0, 2, 1, 3).reshape(2, 100, 192) + 1)
  spec = attention_spec(ast)
  assert ast.n_buffers == 2 and spec.slots == (1, 1, 1)   # the projection's output, stored once, read three ways
  assert [lay.offset for lay in spec.layouts] == [0, 192, 384] and spec.layouts[0].lead_strides == (100 * 576, 64)
  assert spec.layouts[0].row_stride == 576 and (spec.lead, spec.L, spec.S, spec.D, spec.causal) == ((2, 3), 100, 100, 64, True)
  assert (spec.out.lead_strides, spec.out.row_stride) == ((3 * 100 * 64, 100 * 64), 64)

def test_heads_inside_makes_the_output_projection_read_it_in_place(rng):
  q, k, v = projection(rng)
  out = fused(q, k, v, heads_inside=True)   # stored (B, L, H, D): the next step's reshape to (B, L, H * D) is a view
  assert out.shape == (2, 100, 3, 64)
  kernels = schedule([(out.reshape(2, 100, 192) @ Tensor(np.ones((192, 64), np.float16))).node])
  assert len(kernels) == 3   # projection, attention, the matmul reading attention's buffer as it is
  spec = attention_spec(kernels[1][1])
  assert (spec.out.lead_strides, spec.out.row_stride) == ((100 * 3 * 64, 64), 3 * 64)

def test_operands_the_kernel_cannot_read_are_stored_first(rng):
  q = Tensor(rng.uniform(-1, 1, (2, 40, 64)).astype(np.float16))
  k = Tensor(rng.uniform(-1, 1, (2, 64, 40)).astype(np.float16)).transpose(1, 2)   # D strided: a copy first
  v = Tensor(rng.uniform(-1, 1, (2, 40, 68)).astype(np.float16))[..., 2:66]     # 4 bytes past alignment: a copy
  (ast, _), = attention_kernels(fused(q, k, v))
  spec = attention_spec(ast)
  assert ast.n_buffers == 4 and all(lay.row_stride == 64 for lay in spec.layouts[1:])
  assert len(schedule([fused(q, k, v).node])) == 3   # the two copies, then attention

def test_spec_names_what_the_kernel_refuses(rng):
  def t(*shape, dtype=np.float16): return Tensor(rng.uniform(-1, 1, shape).astype(dtype))
  refuse = lambda q, k, v: attention_spec(attention_kernels(fused(q, k, v))[0][0])
  assert "float16, bfloat16 or float32" in refuse(*(t(2, 8, 64, dtype=np.float64) for _ in range(3)))
  assert "head size 40: the fused kernel for float16 takes multiples of 16" in refuse(t(2, 16, 40), t(2, 16, 40), t(2, 16, 40))
  assert "head size 48: the fused kernel for float32 takes multiples of 32" in refuse(*(t(2, 16, 48, dtype=np.float32) for _ in range(3)))
  assert "head size 36: the fused kernel for float16 takes multiples of 8" in refuse(t(2, 1, 36), t(2, 8, 36), t(2, 8, 36))   # the row kernel
  assert "(*lead, S, D)" in refuse(t(2, 8, 64), t(2, 8, 64), t(2, 9, 64))
  q, mask = t(2, 16, 64), Tensor.ones(16, 16).cast(alloy.bool)
  assert "an attn_mask over 16 query rows" in attention_spec(attention_kernels(fused(q, q, q, causal=False, mask=mask))[0][0])

def test_sdpa_stays_composed_where_the_kernel_does_not_serve(rng):
  q = Tensor(rng.uniform(-1, 1, (2, 8, 64)).astype(np.float16), device="CPU")
  assert not attention_kernels(F.scaled_dot_product_attention(q, q, q, is_causal=True))   # a CPU: no mma.sync

@pytest.mark.parametrize("dtype,D", [("float16", 16), ("float16", 64), ("float16", 128), ("bfloat16", 64), ("float32", 32),
                                     ("float32", 64), ("float32", 96), ("float32", 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_source_compiles_for_sm90(rng, dtype, D, causal):
  pytest.importorskip("cuda.bindings")
  from alloy.runtime.cuda.compiler import CUDACompiler
  q, k, v = projection(rng, D=D, dtype=np.float16)
  (ast, _), = attention_kernels(fused(*(t.cast(getattr(alloy, dtype)) for t in (q, k, v)), causal=causal, heads_inside=causal))
  try: compiler = CUDACompiler("sm_90")
  except Exception as e: pytest.skip(f"no NVRTC here: {e}")
  assert compiler.compile(render(attention_spec(ast)).source)

def test_warps_own_two_query_tiles_where_registers_and_rows_allow(rng):
  """Two 16-row tiles a warp (128 query rows a threadgroup) for D <= 64 and 1024 query rows or more."""
  from alloy.renderer.cuda_attention import block_m
  def rows(L, D, causal):
    q = Tensor(rng.uniform(-1, 1, (1, 2, L, D)).astype(np.float16))
    (ast, _), = attention_kernels(fused(q, q, q, causal=causal))
    return block_m(attention_spec(ast))
  assert (rows(1024, 64, False), rows(1024, 128, False), rows(1023, 64, True), rows(1024, 64, True)) == (128, 64, 64, 128)

def test_a_decode_step_reads_the_cache_in_place_and_its_mask_broadcast(rng):
  cache = Tensor(rng.uniform(-1, 1, (2, 3, 41, 64)).astype(np.float32)).realize()
  q = Tensor(rng.uniform(-1, 1, (2, 3, 1, 64)).astype(np.float32))
  allowed = Tensor.arange(41).reshape(1, 41) <= Tensor.arange(1).reshape(1, 1) + 20   # keys <= pos
  (ast, inputs), = attention_kernels(fused(q, cache, cache, causal=False, heads_inside=True, mask=allowed))
  spec = attention_spec(ast)
  assert spec.rows and spec.slots[1] == spec.slots[2] and spec.layouts[1].lead_strides == (3 * 41 * 64, 41 * 64)
  assert spec.attn_mask.lead_strides == (0, 0) and spec.attn_mask.key_stride == 1   # the (1, 41) mask, stored once
  assert render(spec).name.endswith("_rows_mask")

@pytest.mark.parametrize("dtype,D", [("float16", 8), ("float16", 64), ("bfloat16", 128), ("float32", 4), ("float32", 96), ("float32", 128)])
@pytest.mark.parametrize("how", ["mask", "causal", "plain"])
def test_row_kernel_compiles_for_sm90(rng, dtype, D, how):
  pytest.importorskip("cuda.bindings")
  from alloy.runtime.cuda.compiler import CUDACompiler
  lead = (2, 3) if D != 64 else ()   # no lead axes at all: one (L, D) query block
  q = Tensor(rng.uniform(-1, 1, lead + (1 + 3 * (how == "causal"), D)).astype(np.float32)).cast(getattr(alloy, dtype))
  k = Tensor(rng.uniform(-1, 1, lead + (700, D)).astype(np.float32)).cast(getattr(alloy, dtype))
  mask = Tensor(rng.uniform(size=(q.shape[-2], 700)) < 0.5) if how == "mask" else None
  (ast, _), = attention_kernels(fused(q, k, k, causal=how == "causal", heads_inside=bool(lead), mask=mask))
  spec = attention_spec(ast)
  assert spec.rows
  try: compiler = CUDACompiler("sm_90")
  except Exception as e: pytest.skip(f"no NVRTC here: {e}")
  assert compiler.compile(render(spec).source)

# --- on a CUDA GPU with mma.sync -------------------------------------------------------------------

def gpu():
  from alloy.runtime.cuda import is_available
  if not is_available(): pytest.skip("no CUDA GPU")
  dev = alloy.get_device("CUDA")
  if "mma.sync.m16n8k16" not in dev.caps.tensor_cores: pytest.skip(f"no mma.sync on {dev.target}")
  return dev

def reference(q, k, v, scale, causal, allowed=None):
  q, k, v = (x.astype(np.float64) for x in (q, k, v))
  s = q @ np.swapaxes(k, -1, -2) * scale
  if causal: s = np.where(np.arange(s.shape[-1])[None, :] <= np.arange(s.shape[-2])[:, None], s, -np.inf)
  if allowed is not None: s = np.where(allowed, s, -np.inf)
  with np.errstate(invalid="ignore"): p = np.exp(s - s.max(-1, keepdims=True))   # a row of no keys: NaN
  return (p / p.sum(-1, keepdims=True)) @ v

def through_kernel(fn):
  from alloy.engine.watch import OnLaunch, watchers
  names = []
  with watchers.watching(OnLaunch(lambda ck, bufs, elapsed, t_submit, consts: names.append(ck.meta.name))):
    out = fn().realize()
  assert any(n.startswith("attention_") for n in names), f"no fused attention kernel among {names}"
  return out.float().numpy()

TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 2e-5}
SHAPES = [((2, 3), 1, 1, 64), ((2, 3), 100, 100, 64), ((5,), 7, 300, 128), ((1, 2), 1000, 1000, 64), ((2, 2), 130, 70, 32),
          ((1,), 2100, 2100, 64)]   # the last: two query tiles a warp

@pytest.mark.parametrize("dtype,shape", [(d, s) for d in ("float16", "bfloat16") for s in SHAPES + [((), 64, 64, 16)]]
                         + [("float32", s) for s in SHAPES + [((3,), 200, 150, 96), ((2,), 129, 129, 128)]])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy(rng, dtype, shape, causal):
  gpu()
  lead, L, S, D = shape
  host = [rng.uniform(-2, 2, lead + (n, D)).astype(np.float32) for n in (L, S, S)]
  q, k, v = (Tensor(x, device="CUDA").cast(getattr(alloy, dtype)).realize() for x in host)
  with alloy.no_grad(): got = through_kernel(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
  want = reference(*(t.float().numpy() for t in (q, k, v)), 1 / np.sqrt(D), causal)
  np.testing.assert_allclose(got, want, atol=TOL[dtype], rtol=TOL[dtype])

@pytest.mark.parametrize("dtype,tol", [(np.float16, 4e-3), (np.float32, 2e-5)])
def test_projection_slices_broadcast_heads_and_jit(rng, dtype, tol):
  gpu()
  B, L, H, D = 2, 200, 4, 64
  x = Tensor(rng.uniform(-1, 1, (B, L, 3 * H * D)).astype(dtype), device="CUDA")
  w = Tensor((rng.uniform(-1, 1, (3 * H * D, 3 * H * D)) / 16).astype(dtype), device="CUDA")
  def attend(x, w):
    q, k, v = [t.reshape(B, L, H, D).permute(0, 2, 1, 3) for t in (x @ w).split(H * D, dim=-1)]
    return F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], is_causal=True, scale=0.3)   # one key/value head for all
  with alloy.no_grad():
    got = through_kernel(lambda: attend(x, w))
    proj = (x.float().numpy().astype(np.float64) @ w.float().numpy()).astype(dtype).astype(np.float64)
    q, k, v = [t.reshape(B, L, H, D).transpose(0, 2, 1, 3) for t in np.split(proj, 3, axis=-1)]
    want = reference(q, k[:, :1], v[:, :1], 0.3, True)
    np.testing.assert_allclose(got, want, atol=tol, rtol=tol)
    step = alloy.jit(attend)
    for _ in range(3): out = step(x, w)
    np.testing.assert_allclose(out.float().numpy(), want, atol=tol, rtol=tol)

def test_a_gradient_takes_the_composed_path(rng):
  gpu()
  q = Tensor(rng.uniform(-1, 1, (2, 64, 64)).astype(np.float16), device="CUDA").requires_grad_()
  out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
  assert not attention_kernels(out)
  out.float().sum().backward()
  assert q.grad is not None and np.isfinite(q.grad.float().numpy()).all()

def test_a_device_without_the_kernel_says_so(rng):
  q = Tensor(rng.uniform(-1, 1, (2, 8, 64)).astype(np.float16), device="CPU")
  with pytest.raises(ValueError, match="no fused attention kernel for float16"): fused(q, q, q).realize()

ROW_SHAPES = [((2, 3), 1, 1, 64), ((2, 3), 1, 41, 64), ((32, 12), 1, 41, 64), ((1, 12), 1, 1024, 64), ((3,), 8, 3000, 128),
              ((2, 2), 5, 70, 96), ((4,), 2, 33, 32)]

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("how", ["mask", "causal", "plain"])
def test_row_kernel_matches_numpy(rng, dtype, shape, how):
  gpu()
  lead, L, S, D = shape
  if dtype != "float32" and D % 8: pytest.skip("16-bit rows are whole 16-byte loads")
  host = [rng.uniform(-2, 2, lead + (n, D)).astype(np.float32) for n in (L, S, S)]
  q, k, v = (Tensor(x, device="CUDA").cast(getattr(alloy, dtype)).realize() for x in host)
  allowed = rng.uniform(size=(L, S)) < 0.7
  allowed[0, :] = False   # a row that sees no key: NaN, as PyTorch's
  mask = Tensor(allowed, device="CUDA") if how == "mask" else None
  with alloy.no_grad(): got = through_kernel(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=how == "causal"))
  want = reference(*(t.float().numpy() for t in (q, k, v)), 1 / np.sqrt(D), how == "causal", allowed if how == "mask" else None)
  np.testing.assert_allclose(got, want, atol=TOL[dtype], rtol=TOL[dtype])

@pytest.mark.parametrize("dtype,tol", [(np.float16, 4e-3), (np.float32, 2e-5)])
def test_a_jitted_decode_step_sees_the_keys_up_to_its_runtime_position(rng, dtype, tol):
  gpu()
  B, H, T, D = 4, 3, 50, 64
  k, v = (Tensor(rng.uniform(-1, 1, (B, H, T, D)).astype(dtype), device="CUDA").realize() for _ in range(2))
  q = Tensor(rng.uniform(-1, 1, (B, H, 1, D)).astype(dtype), device="CUDA").realize()
  def step(q, pos: int):
    allowed = Tensor.arange(T, device="CUDA").reshape(1, T) <= Tensor.full((1, 1), pos, dtype=alloy.int32, device="CUDA")
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
  jitted = alloy.jit(step)
  with alloy.no_grad():
    through_kernel(lambda: step(q, 3))
    for pos in (0, 7, 8, 30, 49):
      want = reference(*(t.float().numpy() for t in (q, k, v)), 1 / np.sqrt(D), False, np.arange(T)[None, :] <= pos)
      np.testing.assert_allclose(jitted(q, pos).float().numpy(), want, atol=tol, rtol=tol)
