"""The CPU device's compiler: C source -> a shared library, by the system C compiler (CC, else cc/gcc/clang).

CFLAGS are every kernel's flags, and the native queue's: queue.py builds its C files through shared_library.
cpu_target names the CPU the binaries are built for.
"""
from __future__ import annotations
import functools, os, platform, shutil, subprocess, tempfile
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

@functools.lru_cache(None)
def cpu_target() -> str:
  arch = platform.machine().lower().replace("amd64", "x86_64").replace("x86_64", "x86-64")
  flags = ""
  try:
    with open("/proc/cpuinfo") as f: flags = f.read()
  except OSError: pass
  ext = next((e for e in ("avx512f", "avx2", "avx", "sse4_2") if f" {e} " in flags or f" {e}\n" in flags), "")
  return f"{arch}+{ext}" if ext else arch

class CPUCompiler(Compiler):
  def __init__(self):
    self.cc = find_c_compiler()
    version = subprocess.run([self.cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    self.identity = f"{version} {' '.join(CFLAGS)} {cpu_target()}"
  def compile(self, source: str) -> bytes: return self.shared_library(["-x", "c", "-"], source)
  def shared_library(self, args: list[str], source: str = "") -> bytes:
    """The library the C compiler builds with CFLAGS, then args (flags and files; "-x c -" reads source from stdin)."""
    with tempfile.TemporaryDirectory() as tmp:
      out = os.path.join(tmp, "kernel.so")
      proc = subprocess.run([self.cc, *CFLAGS, *args, "-o", out, "-lm"], input=source, capture_output=True, text=True)
      if proc.returncode != 0: raise CompileError(f"C compile failed ({self.cc}):\n{proc.stderr}", source)
      with open(out, "rb") as f: return f.read()
