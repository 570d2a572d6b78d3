"""A kernel through its stages: AST -> linear program -> source -> binary -> loaded Program.

Each stage is timed and cached on its input: the same AST lowers once per device kind,
the same source compiles once per machine (on disk), the same binary loads once per device.
The kernels kept here are bounded as the devices' loaded programs are (PROGRAM_CACHE_SIZE): one pushed out goes
through the stages again when it is needed, its binary then read from the disk cache.
"""
from __future__ import annotations
import collections, os, time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from alloy.helpers import DEBUG, float32_matmul_precision
from alloy.codegen.lower import lower
from alloy.codegen.program import KernelMeta, LinearProgram, scalar_words
from alloy.codegen.transforms import describe
from alloy.runtime.device import PROGRAM_CACHE_SIZE, Device, Program
from alloy.ir.kernel import KernelAST
from alloy.engine import search
from alloy.engine.watch import watchers
from alloy.engine import attention, cpu_bf16, wgmma

@dataclass
class CompiledKernel:
  ast: KernelAST
  program: LinearProgram
  source: str
  binary: bytes
  runner: Program
  meta: KernelMeta
  stage_seconds: dict = field(default_factory=dict)   # lower, render, compile, load

_compiled: collections.OrderedDict = collections.OrderedDict()   # least recently used first
COMPILED_CACHE_SIZE = PROGRAM_CACHE_SIZE
compiles = 0                   # kernels through the stages so far (what a test of the caches counts)

def kernel_key(device_name: str, ast: KernelAST) -> tuple:
  """A compiled kernel's key: its device and AST, and the float32 matmul precision (which may choose its transforms;
  read at each lookup, so a change of it takes effect at the next launch)."""
  return (device_name, ast.root, ast.n_buffers, float32_matmul_precision())

def compile_kernel(ast: KernelAST, device: Device, buffers: list | None = None, consts: list = ()) -> CompiledKernel:
  """The kernel compiled for device. Under BEAM (search.beam_width()), a kernel given the Buffers of its launch
  (output first) and the CONST nodes of its scalar arguments is searched first (engine/search.py), on copies of
  them; without them it gets the heuristics."""
  width = search.beam_width() if buffers is not None else 0
  key = kernel_key(device.name, ast) + ((width,) if width else ())
  if (hit := cached(key)) is not None: return hit
  if (ck := _special(key, ast, device)) is not None: return ck
  opts = None
  if width:
    scalars = scalar_words(ast.scalar_dtypes, [c.arg for c in consts]) if consts else ()
    opts = search.searched_opts(ast, device, buffers[1:], scalars, width)
  prog, source, times = _lower_and_render(ast, device, opts)
  return _load(key, ast, device, prog, source, _compile(device, source, times, prog.meta.name), times)

def cached(key: tuple) -> CompiledKernel | None:
  """The kernel compiled under key (kernel_key's, as compile_kernel makes it), now the most
  recently used, or None where it is not (or no longer) kept."""
  if (hit := _compiled.get(key)) is not None:
    try: _compiled.move_to_end(key)
    except KeyError: pass   # pushed out by another thread meanwhile
  return hit

def compile_kernels(asts: list[KernelAST], device: Device) -> None:
  """Compile the ASTs not compiled yet, their compiler runs side by side (NVRTC and the C compiler's processes
  run outside the GIL): a schedule's first realize waits for its slowest kernel, not for the sum of them."""
  fresh: dict = {}   # key -> AST, each new kernel once
  for ast in asts:
    if (key := kernel_key(device.name, ast)) not in _compiled and key not in fresh and _special(key, ast, device) is None: fresh[key] = ast
  if len(fresh) < 2:
    for ast in fresh.values(): compile_kernel(ast, device)
    return
  staged = [(key, ast, *_lower_and_render(ast, device)) for key, ast in fresh.items()]
  with ThreadPoolExecutor(min(len(staged), os.cpu_count() or 1)) as pool:
    binaries = list(pool.map(lambda st: _compile(device, st[3], st[4], st[2].meta.name), staged))
  for (key, ast, prog, source, times), binary in zip(staged, binaries): _load(key, ast, device, prog, source, binary, times)

# kernels rendered whole, not lowered (engine/whole_kernel.py): each returns None where it does not apply
SPECIAL_KERNELS = (attention.whole_kernel, wgmma.whole_kernel, cpu_bf16.whole_kernel)

def _special(key: tuple, ast: KernelAST, device: Device) -> CompiledKernel | None:
  """The fused attention kernel (engine/attention.py), the Hopper matmul (engine/wgmma.py) or the CPU's AVX512-BF16
  matmul (engine/cpu_bf16.py) for a kernel one of them takes, compiled, loaded and kept: no Lowerer, no search."""
  if (whole := next((w for w in (f(ast, device) for f in SPECIAL_KERNELS) if w is not None), None)) is None: return None
  t1 = time.perf_counter()
  binary = whole.compile(whole.source)
  t2 = time.perf_counter()
  runner = whole.load(binary)
  times = {"lower": whole.render_seconds, "render": 0.0, "compile": t2 - t1, "load": time.perf_counter() - t2}
  return _store(key, CompiledKernel(ast, LinearProgram([], whole.meta), whole.source, binary, runner, whole.meta, times), device)

def _lower_and_render(ast: KernelAST, device: Device, opts=None) -> tuple:
  t0 = time.perf_counter()
  prog = lower(ast, device.caps, opts)
  t1 = time.perf_counter()
  source = device.renderer.render(prog)
  t2 = time.perf_counter()
  times = {"lower": t1 - t0, "render": t2 - t1}
  if watchers.on_stage:
    watchers.staged("lower", t0, times["lower"], prog.meta.name)
    watchers.staged("render", t1, times["render"], prog.meta.name)
  return prog, source, times

def _compile(device: Device, source: str, times: dict, name: str) -> bytes:
  t0 = time.perf_counter()
  binary = device.compiler.compile_cached(source)
  times["compile"] = time.perf_counter() - t0
  if watchers.on_stage: watchers.staged("compile", t0, times["compile"], name)
  return binary

def _load(key: tuple, ast: KernelAST, device: Device, prog: LinearProgram, source: str, binary: bytes, times: dict) -> CompiledKernel:
  t0 = time.perf_counter()
  runner = device.load(prog.meta.name, binary)
  times["load"] = time.perf_counter() - t0
  if watchers.on_stage: watchers.staged("load", t0, times["load"], prog.meta.name)
  prog.meta.target = device.target
  return _store(key, CompiledKernel(ast, prog, source, binary, runner, prog.meta, times), device)

def _store(key: tuple, ck: CompiledKernel, device: Device) -> CompiledKernel:
  prog, ast, source, binary = ck.program, ck.ast, ck.source, ck.binary
  if DEBUG >= 3: print(f"--- kernel {prog.meta.name} AST\n{ast.describe()}\nopts: {describe(prog.meta.opts)}")
  if DEBUG >= 5: print(f"--- kernel {prog.meta.name} linear program\n{prog.describe()}")
  if DEBUG >= 4: print(f"--- kernel {prog.meta.name} source ({device.name}, {device.target})\n{source}")
  if DEBUG >= 6 and hasattr(device, "disassemble"):
    if (asm := device.disassemble(binary)): print(asm)
  global compiles
  compiles += 1
  _compiled[key] = ck
  while len(_compiled) > COMPILED_CACHE_SIZE: _compiled.popitem(last=False)
  if watchers.on_compiled: watchers.compiled(ck)
  return ck
