"""The typed transforms: the validator's verdicts (each reason), the heuristics' lists, and the plan they make."""
import numpy as np, pytest
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.schedule.fusion import schedule
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import check, make_plan, InvalidOpts
from alloy.codegen.transforms import Opt, OptKind, upcast, unroll, local, group, thread, swap, stage, pad, describe
from alloy.codegen.candidates import neighbours
from alloy.runtime.cpu import CPUDevice

CPU, GPU = CPUDevice.caps, DeviceCaps(threads=True)

def _ast(t):
  ((_, ast, _, _),) = schedule([t.node])
  return ast

def _t(*shape): return Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32), device="CPU")

KERNELS = {
  "matmul": lambda: _t(64, 48) @ _t(48, 40), "rowsum": lambda: _t(64, 300).sum(1), "softmax": lambda: _t(32, 200).softmax(-1),
  "elementwise": lambda: _t(50, 70) * 2 + 1, "tiny": lambda: _t(3, 4).sum(1), "colsum": lambda: _t(300, 256).sum(0),
  "mixed": lambda: (_t(16, 24, 32) * _t(16, 1, 32)).sum(2),   # one operand varies along both output axes
}

@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("caps", [CPU, GPU], ids=["cpu", "gpu"])
def test_heuristic_lists_are_valid(name, caps):
  ast = _ast(KERNELS[name]())
  opts = choose_opts(ast, caps)
  assert all(isinstance(o, Opt) for o in opts)
  assert check(ast, caps, opts) is None
  assert make_plan(ast, caps, opts).applied[:len(opts)] == tuple(opts)

# (kernel, caps, list, a phrase of the reason)
BAD = [
  ("matmul", GPU, [Opt(OptKind.TENSOR_CORE, 1, 0)], "the device has no mma.sync.m16n8k16 tensor cores"),
  ("matmul", CPU, [pad(0, 16)], "64 is already a multiple of 16"),
  ("matmul", CPU, [pad(1, 128)], "would more than double the axis' work"),
  ("matmul", CPU, [pad(1, 16), pad(1, 32)], "padded twice"),
  ("matmul", CPU, [pad(1, 16), upcast(1, 32)], "48 is not a multiple of the axis' UPCAST 32"),
  ("matmul", CPU, [upcast(0, 4), pad(1, 16), upcast(1, 16), stage(1)], "the panel copy takes no PAD"),
  ("rowsum", GPU, [group(1, 64), pad(0, 48)], "takes no register tile"),
  ("matmul", CPU, [("UPCAST", 0, 8)], "is not an Opt"),
  ("matmul", CPU, [upcast(5, 4)], "out of range"),
  ("matmul", CPU, [upcast(0, 128)], "lanes must be 2..64"),
  ("matmul", CPU, [upcast(1, 1)], "lanes must be 2..40"),
  ("matmul", CPU, [upcast(1, 32)], "too short for an overlapping last tile"),
  ("matmul", CPU, [upcast(0, 4), upcast(0, 8)], "already upcast"),
  ("matmul", CPU, [unroll(4), unroll(8)], "a kernel takes one"),
  ("matmul", CPU, [upcast(0, 16), upcast(1, 8)], "accumulators per thread: over half the device's 128 registers"),
  ("matmul", GPU, [upcast(0, 16), upcast(1, 16)], "over half the device's 255 registers"),
  ("elementwise", CPU, [unroll(4)], "no reduction"),
  ("matmul", CPU, [unroll(8, 0)], "axis 0 is not upcast"),
  ("tiny", CPU, [unroll(0)], "needs every axis upcast by its whole length"),
  ("tiny", CPU, [upcast(0, 3), unroll(0), thread(0)], "takes no other transforms"),
  ("matmul", CPU, [local(64)], "GPU only"),
  ("rowsum", CPU, [group(1, 64)], "GPU only"),
  ("matmul", GPU, [thread(0)], "CPU only"),
  ("matmul", GPU, [swap(0, 1)], "CPU only"),
  ("matmul", GPU, [upcast(0, 4), upcast(1, 4), stage(1)], "GPU shared-memory staging is not built yet"),
  ("matmul", GPU, [local(2048)], "threads per group must be 1..1024"),
  ("matmul", GPU, [upcast(1, 5)], "aligned stores"),
  ("rowsum", GPU, [group(1, 48)], "power of two"),
  ("rowsum", GPU, [group(1, 64), upcast(0, 4)], "takes no register tile"),
  ("elementwise", GPU, [group(1, 64)], "no reduction to split"),
  ("matmul", CPU, [thread(1)], "is not the outermost loop"),
  ("matmul", CPU, [Opt(OptKind.THREAD, 0, 4)], "THREAD takes 0"),
  ("matmul", CPU, [upcast(0, 8), upcast(1, 8), stage(1, 2)], "pipelined staging (depth > 1) is not built yet"),
  ("matmul", CPU, [upcast(1, 8), stage(1)], "needs a register tile of two UPCASTs"),
  ("mixed", CPU, [upcast(0, 8), upcast(1, 8), stage(1)], "no operand of the reduction is the same along axis 0"),
  ("softmax", CPU, [upcast(0, 3), upcast(1, 8)], "with the stash, a tile that does not divide its axis"),
]

@pytest.mark.parametrize("name, caps, opts, reason", BAD, ids=[f"{b[0]}-{b[3][:30]}" for b in BAD])
def test_validator_refuses_with_reason(name, caps, opts, reason):
  ast = _ast(KERNELS[name]())
  why = check(ast, caps, opts)
  assert why is not None and reason in why, why
  with pytest.raises(InvalidOpts, match="kernel"): make_plan(ast, caps, opts)

def test_shared_memory_limit_comes_from_the_caps():
  ast = _ast(KERNELS["rowsum"]())
  assert check(ast, GPU, [group(1, 256)]) is None
  small = DeviceCaps(threads=True, shared_bytes=512)
  assert "over the device's 512" in check(ast, small, [group(1, 256)])

def test_good_lists_make_plans():
  mm = _ast(KERNELS["matmul"]())
  p = make_plan(mm, CPU, [swap(0, 1), upcast(1, 8), upcast(0, 8), stage(1), thread(1)])
  assert p.upcast == ((0, 8), (1, 8)) and p.pack is not None and p.loop_order == (1, 0) and p.parallel and p.global_size == (5, 1, 1)
  p = make_plan(mm, GPU, [local(64), upcast(0, 4), upcast(1, 4)])
  assert p.local_size == (64, 1, 1) and p.global_size == (-(-16 * 10 // 64), 1, 1)
  rs = _ast(KERNELS["rowsum"]())
  p = make_plan(rs, GPU, [group(1, 128)])
  assert (p.group, p.block_axes, p.global_size) == (128, 1, (64, 1, 1))
  p = make_plan(rs, CPU, [upcast(0, 4), unroll(8, 0)])
  assert p.unroll_lanes and p.reduce_unroll == 8
  sm = _ast(KERNELS["softmax"]())
  assert make_plan(sm, CPU, [upcast(1, 8)]).stash is not None   # the stash pass is on...
  assert make_plan(sm, CPU, [upcast(1, 8)]).applied[-1] == ("STASH", "EXP")
  assert make_plan(sm, CPU, [upcast(1, 8), swap(0, 1), thread(1)]).stash is None   # ...but not where threads split the row
  assert make_plan(sm, CPU, [pad(1, 16), upcast(1, 16)]).stash is None               # ...or a padded lane would stash
  p = make_plan(mm, GPU, [pad(1, 16), upcast(1, 16)])   # 40 columns tiled as 48: 3 tiles per row, none overlapping
  assert p.pad == ((1, 48),) and p.global_size == (64 * 3, 1, 1)

def test_opt_reads_and_compares_as_a_tuple():
  assert upcast(0, 8) == ("UPCAST", 0, 8) and upcast(0, 8)[0] == "UPCAST"
  assert describe([upcast(0, 8), unroll(32), ("STASH", "EXP")]) == "UPCAST(0, 8) UNROLL(-, 32) STASH(EXP)"

@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("caps", [CPU, GPU], ids=["cpu", "gpu"])
def test_neighbours_are_valid_and_new(name, caps):
  ast = _ast(KERNELS[name]())
  base = tuple(choose_opts(ast, caps))
  found = neighbours(ast, caps, base)
  assert len(found) == len(set(found)) and base not in found
  assert all(check(ast, caps, c) is None for c in found)
  if name != "tiny": assert found   # a tiny kernel's one-thread form has no valid neighbour but itself
