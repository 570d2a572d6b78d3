"""engine/wgmma.py: which recognised matmuls the Hopper kernel can compute and which it takes (checked on ASTs, no GPU
needed), and on an sm_90 GPU, Tensor matmuls through it or the Lowerer's WGMMA tile (eager, batched, x @ W, @jit
replays through CUDA graphs) against NumPy."""
import numpy as np
import pytest
import alloy
from alloy import Tensor
from alloy.codegen.matmul import match_matmul
from alloy.engine.wgmma import SHORT_M, gemm_fit, wgmma_gemm
from alloy.schedule.fusion import schedule
from conftest import tensor_core_instructions

def fit(t: Tensor, taken=gemm_fit):
  (_, ast, _, _), = schedule([t.node])
  spec = match_matmul(ast)
  return spec and taken(spec)

def h(*shape, dtype=np.float16): return Tensor(np.ones(shape, dtype))

def test_plain_and_transposed_operands():
  g, operands = fit(h(256, 128) @ h(128, 512))
  assert (g.batch, g.M, g.N, g.K, g.dtype) == (1, 256, 512, 128, "float16") and operands == ((1, 0), (2, 0))
  assert g.a.k_major and g.a.row_stride == 128 and not g.b.k_major and g.b.row_stride == 512
  g, _ = fit(h(256, 128) @ h(512, 128).T)   # nn.Linear's weight: B contiguous along K
  assert g.b.k_major and g.b.row_stride == 128
  g, _ = fit(h(128, 256).T @ h(128, 512))   # A stored K x M
  assert not g.a.k_major and g.a.row_stride == 256

def test_batches():
  g, _ = fit(h(8, 4, 256, 128) @ h(8, 4, 256, 128).transpose(2, 3))   # heads: two batch axes as one
  assert (g.batch, g.M, g.N, g.K) == (32, 256, 256, 128) and g.a.batch_stride == g.b.batch_stride == 256 * 128
  assert fit(h(8, 4, 256, 64) @ h(8, 4, 256, 64).transpose(2, 3)) is None   # K = 64: mma.sync's small tile is faster
  g, _ = fit(h(8, 256, 96) @ h(96, 128))   # x @ W: the batch folds into M
  assert (g.batch, g.M, g.N) == (1, 8 * 256, 128)

def test_views_and_broadcasts():
  x = h(64, 128)
  g, operands = fit(x[16:] @ h(128, 256))   # a view starting 16 rows in: A's first element 16 * 128 halves along
  assert g.M == 48 and operands[0] == (1, 16 * 128 * 2)
  assert fit(h(64, 128)[:, 4:] @ h(124, 256)) is None          # 4 columns in: A starts 8 bytes past 16-byte alignment
  assert fit(h(64, 128)[:, 8:] @ h(120, 256))[1][0] == (1, 16)
  g, _ = fit(h(128, 256) @ h(4, 256, 64))   # A shared by the batches, B not: no fold, A's map has a batch of one
  assert (g.batch, g.M, g.N) == (4, 128, 64) and g.a.batch_stride == 0 and g.b.batch_stride == 256 * 64
  g, _ = fit(h(4, 128, 64).transpose(1, 2) @ h(4, 128, 96))    # A stored K x M per batch (K = 128)
  assert not g.a.k_major and g.a.row_stride == 64 and g.a.batch_stride == 128 * 64 and (g.batch, g.M, g.K) == (4, 64, 128)

def test_schedule_of_several_kernels_compiles_wgmma(monkeypatch):
  """compile_kernels (a schedule's new kernels side by side) offers each kernel to the kernels rendered whole (the wgmma
  kernel, the fused attention) too, not only to the Lowerer."""
  from alloy.engine import compiled
  seen = []
  monkeypatch.setattr(compiled, "SPECIAL_KERNELS", (lambda ast, device: seen.append(ast) and None,))
  x = h(64, 64)
  compiled.compile_kernels([ast for _, ast, _, _ in schedule([((x + 1) @ h(64, 64)).node])], alloy.get_device("CPU"))
  assert len(seen) >= 2   # every fresh kernel was offered to it (the CPU device takes none)

def test_short_m_takes_one_consumer():
  """A matmul of at most 64 rows takes 64-row blocks (one consumer warpgroup): a GPU convolution's weight times each
  image's window matrix."""
  g, _ = fit(h(64, 576) @ h(4, 576, 3136))
  assert (g.M, g.block_m, g.consumers) == (64, 64, 1)
  assert fit(h(65, 576) @ h(576, 256))[0].block_m == 128

def test_blocks_narrow_to_fill_the_sms():
  """Few blocks of the widest tile would idle most SMs (a decode step's x @ W): the block narrows until they fill them."""
  assert fit(h(64, 256) @ h(256, 4096))[0].block_n == 64                    # 64 blocks of 64 x 64, not 16 of 64 x 256
  assert fit(h(32, 256) @ h(256, 50304))[0].block_n == 128                 # 393 blocks: three waves, the last nearly full
  assert fit(h(64, 576) @ h(64, 576, 3136))[0].block_n == 256              # 64 images of 13 blocks each: 6.3 waves

def test_taken_only_up_to_64_rows():
  """The kernel takes matmuls of at most 64 rows (a batch folded into them counts); taller ones go to the Lowerer's
  WGMMA tile, measured faster there."""
  assert fit(h(64, 256) @ h(256, 512), wgmma_gemm)[0].M == SHORT_M
  assert fit(h(2, 16, 256) @ h(256, 512), wgmma_gemm)[0].M == 32       # x @ W: 2 x 16 rows folded into 32
  assert fit(h(65, 256) @ h(256, 512), wgmma_gemm) is None
  assert fit(h(4, 16, 256) @ h(256, 512).reshape(1, 256, 512), wgmma_gemm)[0].M == 64
  assert fit(h(8, 16, 256) @ h(256, 512), wgmma_gemm) is None         # folded into 128 rows
  assert fit(h(4096, 256) @ h(256, 512)) is not None and fit(h(4096, 256) @ h(256, 512), wgmma_gemm) is None

def test_refused():
  assert fit(h(64, 128) @ h(128, 64)) is not None
  assert fit(h(64, 128, dtype=np.float32) @ h(128, 64, dtype=np.float32)) is None    # fp32: not this kernel
  assert fit(h(64, 100) @ h(100, 64)) is None                 # A's rows of 100 halves: not 16-byte multiples
  assert fit((h(64, 128) @ h(128, 64)).relu()) is None        # an epilogue beyond the cast

# --- on an sm_90 GPU -----------------------------------------------------------------------------

def hopper():
  from alloy.runtime.cuda import is_available
  if not is_available(): pytest.skip("no CUDA GPU")
  dev = alloy.get_device("CUDA")
  if "wgmma.m64nNk16" not in dev.caps.tensor_cores: pytest.skip(f"no wgmma on {dev.target}")
  return dev

def launched_names(fn):
  """fn() realized (its kernels' names recorded), then read as float32 in a kernel of its own: a cast in the same
  kernel would be an epilogue the wgmma kernel does not take (fp32 -> fp16 -> fp32)."""
  from alloy.engine.watch import OnLaunch, watchers
  names = []
  with watchers.watching(OnLaunch(lambda ck, bufs, elapsed, t_submit, consts: names.append((ck.meta.name, ck.meta.opts)))):
    out = fn().realize()
  return out.float().numpy(), names

def ran_wgmma(names, rows: int) -> bool:
  """Whether the matmul ran on wgmma: the Hopper kernel where it has at most SHORT_M rows, else the Lowerer's tile."""
  from alloy.codegen.tensor_core import WGMMA
  if rows <= SHORT_M: return any(n.startswith("wgmma_") for n, _ in names)
  return any(WGMMA in tensor_core_instructions(opts) for _, opts in names)

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shapes", [((1000, 520), (520, 1000)), ((4, 300, 72), (4, 72, 200)), ((3, 200, 128), (128, 64)),
                                    # A shared by the batches (a map of batch one); then 64 and 40 rows: one consumer
                                    ((200, 136), (4, 136, 72)), ((64, 136), (3, 136, 520)), ((40, 256), (256, 264))])
def test_tensor_matmul(dtype, shapes):
  hopper()
  rng = np.random.default_rng(1)
  a_np, b_np = (rng.uniform(-1, 1, s).astype(np.float32) for s in shapes)
  a, b = (Tensor(x, device="CUDA").cast(getattr(alloy, dtype)).realize() for x in (a_np, b_np))
  got, names = launched_names(lambda: a @ b)
  ref = np.matmul(a.float().numpy().astype(np.float64), b.float().numpy().astype(np.float64))
  rows = shapes[0][-2] * (shapes[0][0] if len(shapes[0]) == 3 and len(shapes[1]) == 2 else 1)   # x @ W folds its batch
  assert ran_wgmma(names, rows), names
  rtol = 2 ** -10 if dtype == "float16" else 2 ** -7
  assert (np.abs(got - ref) - rtol * np.abs(ref)).max() <= 1e-2

def test_jit_replays_with_new_inputs():
  hopper()
  rng = np.random.default_rng(2)
  @alloy.jit
  def step(x, w): return x @ w
  w = Tensor(rng.uniform(-1, 1, (256, 128)).astype(np.float16), device="CUDA")
  for i in range(4):
    x_np = rng.uniform(-1, 1, (48, 256)).astype(np.float16)   # 48 rows: the Hopper kernel (the tile replays in test_wgmma_tile)
    got = step(Tensor(x_np, device="CUDA"), w).numpy().astype(np.float64)
    ref = x_np.astype(np.float64) @ w.numpy().astype(np.float64)
    assert (np.abs(got - ref) - 2 ** -10 * np.abs(ref)).max() <= 1e-3, f"call {i}"
