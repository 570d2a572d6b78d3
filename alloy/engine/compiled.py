"""A kernel through its stages: AST -> linear program -> source -> binary -> loaded Program.

Each stage is timed and cached on its input: the same AST lowers once per device kind,
the same source compiles once per machine (on disk), the same binary loads once per device.
"""
from __future__ import annotations
import time
from dataclasses import dataclass, field
from alloy.helpers import DEBUG
from alloy.codegen.lower import lower
from alloy.codegen.program import KernelMeta, LinearProgram
from alloy.runtime.device import Device, Program
from alloy.ir.kernel import KernelAST

@dataclass
class CompiledKernel:
  ast: KernelAST
  program: LinearProgram
  source: str
  binary: bytes
  runner: Program
  meta: KernelMeta
  stage_seconds: dict = field(default_factory=dict)   # lower, render, compile, load

_compiled: dict = {}

# host-stage hooks (the trace recorder listens): listener(stage, start, seconds, detail), perf_counter seconds
stage_listeners: list = []

def emit_stage(stage: str, start: float, seconds: float, detail: str = "") -> None:
  for listener in stage_listeners: listener(stage, start, seconds, detail)

def compile_kernel(ast: KernelAST, device: Device) -> CompiledKernel:
  key = (device.name, ast.root, ast.n_buffers)
  if (hit := _compiled.get(key)) is not None: return hit
  times = {}
  t0 = time.perf_counter()
  prog = lower(ast, device.caps)
  t1 = time.perf_counter()
  source = device.renderer.render(prog)
  t2 = time.perf_counter()
  binary = device.compiler.compile_cached(source)
  t3 = time.perf_counter()
  runner = device.load(prog.meta.name, binary)
  t4 = time.perf_counter()
  times.update(lower=t1 - t0, render=t2 - t1, compile=t3 - t2, load=t4 - t3)
  if stage_listeners:
    for stage, start in (("lower", t0), ("render", t1), ("compile", t2), ("load", t3)): emit_stage(stage, start, times[stage], prog.meta.name)
  prog.meta.target = device.target
  ck = CompiledKernel(ast, prog, source, binary, runner, prog.meta, times)
  if DEBUG >= 3: print(f"--- kernel {prog.meta.name} AST\n{ast.describe()}\nopts: {prog.meta.opts}")
  if DEBUG >= 5: print(f"--- kernel {prog.meta.name} linear program\n{prog.describe()}")
  if DEBUG >= 4: print(f"--- kernel {prog.meta.name} source ({device.name}, {device.target})\n{source}")
  if DEBUG >= 6 and hasattr(device, "disassemble"):
    if (asm := device.disassemble(binary)): print(asm)
  _compiled[key] = ck
  return ck
