"""The CPU device's compiler: C source -> a shared library, by the system C compiler (CC, else cc/gcc/clang).

CFLAGS are every kernel's flags, and the native queue's: queue.py builds its C files through shared_library;
`vector_isa_flags()` follow them where ALLOY_CPU_ISA holds the binaries below what the CPU has.
cpu_target names the CPU the binaries are built for, and `vector_isa()` its widest vector extension in use, which
the device's caps (its vector widths and registers, so its matmul tile) follow.
"""
from __future__ import annotations
import functools, os, platform, shutil, subprocess, tempfile
from alloy.helpers import getenv
from alloy.runtime.device import Compiler, CompileError

CFLAGS = ["-O2", "-march=native", "-ftree-vectorize", "-fPIC", "-shared", "-fno-math-errno", "-fwrapv", "-ffp-contract=off"]

@functools.lru_cache(None)
def find_c_compiler() -> str:
  if (cc := os.environ.get("CC")):   # a compiler the user named and we cannot run is their mistake: no silent fallback
    if (path := shutil.which(cc)): return path
    raise RuntimeError(f"environment variable CC={cc!r} names no C compiler on PATH: fix CC or unset it to use cc, gcc or clang")
  for cand in ("cc", "gcc", "clang"):
    if (path := shutil.which(cand)): return path
  raise RuntimeError("alloy's CPU device needs a C compiler and none was found: install gcc "
                     "(e.g. `apt-get install gcc` or `xcode-select --install`) or set CC to one")

X86_EXTENSIONS = ("avx512f", "avx2", "avx", "sse4_2")   # widest first
# what ALLOY_CPU_ISA may name, and the compiler flags that keep -march=native's code within it
ISA_LIMITS = {"avx2": ["-mno-avx512f"], "avx": ["-mno-avx512f", "-mno-avx2", "-mno-fma"]}

@functools.lru_cache(None)
def cpu_flags() -> frozenset:
  """The CPU's feature flags as /proc/cpuinfo names them (empty where there is none)."""
  try:
    with open("/proc/cpuinfo") as f: return frozenset(next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), ()))
  except OSError: return frozenset()

def cpu_extension() -> str:
  """The CPU's widest x86 vector extension ("" elsewhere, and on an x86 CPU without them)."""
  return next((e for e in X86_EXTENSIONS if e in cpu_flags()), "")

# With AVX512-FP16 on (-march=native on a CPU that has it), GCC 12's vectorizer drops the float -> _Float16 -> float
# round trip of a value it keeps in a register (a float16 matmul read back as float32 kept float32 bits), and can
# emit a masked vmovsh the assembler refuses. alloy computes float16 in float32 and rounds by conversion, which F16C
# does without that extension, so kernels are built without it.
FP16_ARITHMETIC_OFF = ["-mno-avx512fp16"]

@functools.lru_cache(None)
def fp16_flags(cc: str) -> list[str]:
  """FP16_ARITHMETIC_OFF where the CPU has AVX512-FP16 and the compiler knows the flag (else nothing to turn off)."""
  if "avx512_fp16" not in cpu_flags(): return []
  probe = subprocess.run([cc, *FP16_ARITHMETIC_OFF, "-x", "c", "-fsyntax-only", "-"], input="", capture_output=True, text=True)
  return FP16_ARITHMETIC_OFF if probe.returncode == 0 else []

# GCC 12 takes a Zen 4 for a Zen 3 with AVX-512 on, and there auto-vectorizes with 512-bit vectors; its SLP
# vectorizer then miscompiled a float64 kernel of selects and adds (tril(x) + tril(x, -1).T: one element of sixteen
# wrong, at -O2; right at -O1, without SLP, or with 256-bit vectors). 256 bits is what GCC picks for Intel's AVX-512
# CPUs; alloy's kernels spell their 16-lane vectors out (vector_size), which this does not narrow.
AUTO_VECTORS_256 = ["-mprefer-vector-width=256"]

@functools.lru_cache(None)
def vector_width_flags(cc: str) -> list[str]:
  """AUTO_VECTORS_256 where kernels are built for AVX-512 and the compiler knows the flag."""
  if vector_isa() != "avx512f": return []
  probe = subprocess.run([cc, *AUTO_VECTORS_256, "-x", "c", "-fsyntax-only", "-"], input="", capture_output=True, text=True)
  return AUTO_VECTORS_256 if probe.returncode == 0 else []

@functools.lru_cache(None)
def vector_isa() -> str:
  """The widest vector extension kernels are built for: the CPU's, or ALLOY_CPU_ISA's narrower one (`avx2` tests the
  AVX2 path on an AVX-512 machine, as a CI machine without AVX-512 runs it)."""
  have, want = cpu_extension(), os.environ.get("ALLOY_CPU_ISA", "")
  if not want or want == have: return have
  if want not in ISA_LIMITS:
    raise RuntimeError(f"ALLOY_CPU_ISA={want!r}: it names {', '.join(ISA_LIMITS)} or the CPU's own {have or 'none'}")
  if have not in X86_EXTENSIONS or X86_EXTENSIONS.index(want) < X86_EXTENSIONS.index(have):
    raise RuntimeError(f"ALLOY_CPU_ISA={want!r}: this CPU's widest vector extension is {have or 'none'}, which has no {want}")
  return want

def bf16_dot_products() -> bool:
  """Whether kernels may use AVX512-BF16's pair dot products (engine/cpu_bf16.py): the CPU has them, kernels are built
  for AVX-512, and ALLOY_CPU_BF16 is not 0."""
  return "avx512_bf16" in cpu_flags() and vector_isa() == "avx512f" and bool(getenv("ALLOY_CPU_BF16", 1))

def vector_isa_flags() -> list[str]:
  """The flags after CFLAGS that hold -march=native's code within vector_isa()."""
  return ISA_LIMITS.get(vector_isa(), []) if vector_isa() != cpu_extension() else []

@functools.lru_cache(None)
def cpu_target() -> str:
  arch = platform.machine().lower().replace("amd64", "x86_64").replace("x86_64", "x86-64")
  return f"{arch}+{vector_isa()}" if vector_isa() else arch

class CPUCompiler(Compiler):
  def __init__(self):
    self.cc = find_c_compiler()
    version = subprocess.run([self.cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    self.flags = CFLAGS + vector_isa_flags() + fp16_flags(self.cc) + vector_width_flags(self.cc)
    self.identity = f"{version} {' '.join(self.flags)} {cpu_target()}"
  def compile(self, source: str) -> bytes: return self.shared_library(["-x", "c", "-"], source)
  def shared_library(self, args: list[str], source: str = "") -> bytes:
    """The library the C compiler builds with CFLAGS (and vector_isa_flags), then args (flags and files; "-x c -" reads
    source from stdin)."""
    with tempfile.TemporaryDirectory() as tmp:
      out = os.path.join(tmp, "kernel.so")
      proc = subprocess.run([self.cc, *self.flags, *args, "-o", out, "-lm"], input=source, capture_output=True, text=True)
      if proc.returncode != 0: raise CompileError(f"C compile failed ({self.cc}):\n{proc.stderr}", source)
      with open(out, "rb") as f: return f.read()
