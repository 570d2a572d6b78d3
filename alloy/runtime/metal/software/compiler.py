"""Compiles Metal Shading Language source to a software-Metal library (a C++ shared object).

The MSL file is compiled unmodified as C++20: its ``#include <metal_stdlib>`` resolves to the shim
directory on the include path, and a generated wrapper adds one ``MTL_EXPORT`` per kernel.
Results are cached on disk by hash of (source, shim, compiler identity, flags).
"""
from __future__ import annotations
import hashlib, os, re, shutil, struct, subprocess, tempfile, threading, time
from pathlib import Path
from alloy.helpers import atomic_write
from alloy.runtime.metal.software import elf
from alloy.runtime.metal.software.errors import MetalCompileError, MetalError

HERE = Path(__file__).resolve().parent
SHIM_DIR = HERE / "shim"
RUNTIME_SRC = HERE / "runtime.cpp"

FORMAT_VERSION = 1
LIB_MAGIC = b"MSWL"  # software Metal library; the real metallib magic is b"MTLB"
_HEADER = struct.Struct("<4sIQ")  # magic, format version, payload length
HEADER_SIZE = _HEADER.size

KERNEL_FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared", "-fwrapv", "-fno-strict-aliasing", "-fno-math-errno", "-fvisibility=hidden",
                "-fno-exceptions", "-fno-rtti")
RUNTIME_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra")

# Counts how often the C++ compiler actually ran; tests use it to check the disk cache.
compile_stats = {"compiles": 0, "cache_hits": 0, "compile_seconds": 0.0}

def cache_dir() -> Path:
  if d := os.environ.get("ALLOY_METAL_SW_CACHE"): return Path(d)
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return Path(base) / "alloy" / "metal_software"

def compiler() -> str: return os.environ.get("ALLOY_METAL_SW_CXX", "g++")

_ident_cache: dict[str, str] = {}

def _compiler_identity(cxx: str) -> str:
  """Path, size and mtime of the compiler binary: changes when the compiler is upgraded."""
  if cxx not in _ident_cache:
    path = shutil.which(cxx)
    if path is None: raise MetalCompileError(f"C++ compiler {cxx!r} not found (set ALLOY_METAL_SW_CXX)")
    real = os.path.realpath(path)
    st = os.stat(real)
    _ident_cache[cxx] = f"{real}:{st.st_size}:{int(st.st_mtime)}"
  return _ident_cache[cxx]

_shim_hash: str | None = None

def shim_hash() -> str:
  global _shim_hash
  if _shim_hash is None:
    h = hashlib.sha256()
    for p in sorted(SHIM_DIR.iterdir()): h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    _shim_hash = h.hexdigest()
  return _shim_hash

def _atomic_write(path: Path, data: bytes) -> None: atomic_write(str(path), data)

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(r"(?<![\w\]])kernel\s+void\s+([A-Za-z_]\w*)\s*\(")

def kernel_names(source: str) -> list[str]:
  """Names of the non-template ``kernel void`` functions in MSL source, in order."""
  src = _COMMENT.sub(" ", source)
  names: list[str] = []
  for m in _KERNEL.finditer(src):
    if src[:m.start()].rstrip().endswith(">"): continue  # a template kernel: needs instantiation
    if m.group(1) not in names: names.append(m.group(1))
  return names

def _wrap(data: bytes) -> bytes: return _HEADER.pack(LIB_MAGIC, FORMAT_VERSION, len(data)) + data

def unwrap_library(data: bytes) -> bytes:
  """Shared-object bytes of software-Metal library data; ValueError when the header is wrong."""
  data = bytes(data)
  if len(data) < HEADER_SIZE: raise ValueError("library data too short")
  magic, version, n = _HEADER.unpack_from(data)
  if magic != LIB_MAGIC: raise ValueError(f"not a software Metal library (magic {magic!r}, expected {LIB_MAGIC!r})")
  if version != FORMAT_VERSION: raise ValueError(f"software Metal library format {version}, expected {FORMAT_VERSION}")
  if len(data) != HEADER_SIZE + n: raise ValueError("truncated software Metal library data")
  return data[HEADER_SIZE:]

_pch_dirs: dict[str, str | None] = {}
_build_lock = threading.Lock()

def _tmp_name(path: Path) -> str: return f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"

def _pch_dir(cxx: str) -> str | None:
  """A directory holding mtl_pch.h and its g++ precompiled form (saves ~60 ms per kernel compile).
  If the .gch does not match the compile, g++ silently reads the plain header instead."""
  with _build_lock:
    if cxx not in _pch_dirs: _pch_dirs[cxx] = _build_pch(cxx)
    return _pch_dirs[cxx]

def _build_pch(cxx: str) -> str | None:
  d = None
  if "g++" in os.path.basename(cxx) and os.environ.get("ALLOY_METAL_SW_PCH", "1") != "0":
    key = hashlib.sha256("\0".join([shim_hash(), _compiler_identity(cxx), " ".join(KERNEL_FLAGS)]).encode())
    pdir = cache_dir() / f"pch-{key.hexdigest()[:24]}"
    gch = pdir / "mtl_pch.h.gch"
    if not gch.exists():
      _atomic_write(pdir / "mtl_pch.h", b"#include <mtl_shim.h>\n")
      tmp = _tmp_name(gch)
      flags = [f for f in KERNEL_FLAGS if f != "-shared"]
      r = subprocess.run([cxx, *flags, "-x", "c++-header", "-I", str(SHIM_DIR), str(pdir / "mtl_pch.h"), "-o", tmp], capture_output=True, text=True)
      if r.returncode == 0: os.replace(tmp, gch)
      elif os.path.exists(tmp): os.unlink(tmp)
    d = str(pdir) if gch.exists() else None
  return d

def compile_library(source: str, defines: dict | None = None) -> bytes:
  """MSL source -> library data (magic header + shared object). Raises MetalCompileError."""
  cxx = compiler()
  flags = list(KERNEL_FLAGS) + [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
  key = hashlib.sha256("\0".join([str(FORMAT_VERSION), shim_hash(), _compiler_identity(cxx), " ".join(flags), source]).encode()).hexdigest()
  path = cache_dir() / "lib" / f"{key}.mswl"
  try:
    data = path.read_bytes()
    unwrap_library(data)
    compile_stats["cache_hits"] += 1
    return data
  except (OSError, ValueError): pass   # not cached yet (or damaged): compile
  names = kernel_names(source)
  pch = _pch_dir(cxx)
  wrapper = f"#include <{'mtl_pch.h' if pch else 'mtl_shim.h'}>\n#include \"kernel.metal\"\n" + "".join(f"MTL_EXPORT({n})\n" for n in names)
  cache_dir().mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="build-") as tmp:
    Path(tmp, "kernel.metal").write_text(source)
    Path(tmp, "wrapper.cpp").write_text(wrapper)
    cmd = [cxx, *flags, *(["-I", pch] if pch else []), "-I", str(SHIM_DIR), "-o", "kernel.so", "wrapper.cpp"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    compile_stats["compiles"] += 1
    compile_stats["compile_seconds"] += time.perf_counter() - t0
    if r.returncode != 0:
      log = (r.stderr + r.stdout).replace(tmp + os.sep, "")
      first = next((ln for ln in log.splitlines() if "error" in ln), log.strip().splitlines()[-1] if log.strip() else "")
      raise MetalCompileError(f"Metal compile failed: {first}\n{log}", source=source, log=log)
    so = Path(tmp, "kernel.so").read_bytes()
  data = _wrap(so)
  _atomic_write(path, data)
  return data

def library_info(data: bytes) -> elf.ObjectInfo: return elf.parse(unwrap_library(data))

def shared_object_path(data: bytes) -> str:
  """Writes the library's shared object to the cache (once, by content hash) for dlopen."""
  so = unwrap_library(data)
  path = cache_dir() / "so" / f"{hashlib.sha256(so).hexdigest()}.so"
  if not path.exists(): _atomic_write(path, so)
  return str(path)

_runtime_path: str | None = None

def runtime_path() -> str:
  """The C++ runtime shared object, built once per (runtime source, ABI header, compiler)."""
  global _runtime_path
  with _build_lock:
    if _runtime_path is None: _runtime_path = _build_runtime()
    return _runtime_path

def _build_runtime() -> str:
  cxx = compiler()
  src = RUNTIME_SRC.read_bytes() + (SHIM_DIR / "mtl_abi.h").read_bytes()
  key = hashlib.sha256(src + _compiler_identity(cxx).encode() + " ".join(RUNTIME_FLAGS).encode()).hexdigest()[:24]
  path = cache_dir() / f"runtime-{key}.so"
  if not path.exists():
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    r = subprocess.run([cxx, *RUNTIME_FLAGS, "-o", tmp, str(RUNTIME_SRC), "-ldl"], capture_output=True, text=True)
    if r.returncode != 0: raise MetalError(f"building the software Metal runtime failed:\n{r.stderr}")
    os.replace(tmp, path)
  return str(path)
