"""Compiles Metal Shading Language source to a software-Metal library (a C++ shared object).

The MSL file is compiled unmodified as C++20: its ``#include <metal_stdlib>`` resolves to the shim
directory on the include path, and a generated wrapper adds one ``MTL_EXPORT`` per kernel.
Results are cached on disk by hash of (source, shim, compiler identity, flags). Every cached file is checked before
use: libraries are cache entries (helpers.read_entry: length and checksum), shared objects are named by their
content's hash, and the runtime and the precompiled header keep a checksum file beside them (<file>.sum). A file that
does not check out is reported at DEBUG=1 and rebuilt, never loaded. With ALLOY_CACHE=0, or where the cache folder
cannot be written (warned once), everything is built in a temporary folder of the process, removed at exit.
"""
from __future__ import annotations
import atexit, hashlib, os, re, shutil, struct, subprocess, tempfile, threading, time
from pathlib import Path
from alloy.helpers import (ENTRY_VERSION, atomic_write, cache_unusable, discard_bad, disk_cache_enabled, folder_usable, pack_entry,
                           read_entry, remove_stale_temps, report_bad, temp_prefix, write_entry)
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

def configured_cache_dir() -> Path:
  if d := os.environ.get("ALLOY_METAL_SW_CACHE"): return Path(d)
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return Path(base) / "alloy" / "metal_software"

_probed: dict[str, bool] = {}   # configured folder -> whether this process can write it
_scratch: list[Path] = []        # this process's temporary folder, once made
_scratch_lock = threading.Lock()

def scratch_dir() -> Path:
  """The temporary folder that stands in for the cache (ALLOY_CACHE=0, an unusable folder): removed at exit."""
  with _scratch_lock:
    if not _scratch:
      _scratch.append(Path(tempfile.mkdtemp(prefix="alloy-metal-sw-")))
      atexit.register(_remove_scratch, _scratch[0], os.getpid())
    return _scratch[0]

def _remove_scratch(path: Path, owner: int) -> None:
  if os.getpid() == owner: shutil.rmtree(path, ignore_errors=True)   # a forked child leaves it to its parent

def cache_dir() -> Path:
  """ALLOY_METAL_SW_CACHE, else $XDG_CACHE_HOME/alloy/metal_software; the scratch folder with ALLOY_CACHE=0 or where
  that one cannot be written (warned once, with the reason)."""
  if not disk_cache_enabled(): return scratch_dir()
  d = configured_cache_dir()
  if (ok := _probed.get(str(d))) is None:
    try:
      d.mkdir(parents=True, exist_ok=True)
      fd, probe = tempfile.mkstemp(dir=d, prefix=temp_prefix())
      os.close(fd)
      os.unlink(probe)
      ok = True
    except OSError as e:
      cache_unusable(str(d), e)
      ok = False
    _probed[str(d)] = ok
  return d if ok and folder_usable(str(d)) else scratch_dir()

def _in_cache(build):
  """build(folder) in the cache folder; where that folder fails it (an OSError), warn once and build in the scratch folder."""
  d = cache_dir()
  try: return build(d)
  except OSError as e:
    if _scratch and d == _scratch[0]: raise
    cache_unusable(str(d), e)
    return build(scratch_dir())

def _holds(path: Path, data: bytes) -> bool:
  """Whether the file at path is exactly data; one that differs is reported (it is then replaced, never deleted first)."""
  try: same = path.read_bytes() == data
  except OSError: return False
  if not same: report_bad(str(path), "not the expected contents")
  return same

def _verified(path: Path) -> bool:
  """Whether path holds the bytes its checksum file (<path>.sum, a cache entry) names. A file that does not is reported,
  never dlopened or given to the C++ compiler, and rebuilt over (not deleted first: another process may be loading it)."""
  if not path.exists(): return False
  digest = read_entry(f"{path}.sum")
  try: ok = digest is not None and hashlib.sha256(path.read_bytes()).digest() == digest
  except OSError: return False
  if not ok: report_bad(str(path), "no valid checksum file" if digest is None else "checksum mismatch")
  return ok

def _seal(tmp: str, path: Path) -> None:
  """Move a freshly built file into place, its checksum file first: a file in place always has one."""
  with open(tmp, "rb") as f: digest = hashlib.sha256(f.read()).digest()
  atomic_write(f"{path}.sum", pack_entry(digest))
  os.replace(tmp, path)

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

_BUFFER_ATTR = re.compile(r"\[\[\s*buffer\s*\(\s*(\d+)\s*\)\s*\]\]")

def buffer_writes(source: str) -> dict[str, int]:
  """Per kernel, the bit mask of the [[buffer(n)]] arguments it may write: `device` ones not declared const (the
  shim cannot see an attribute's slot; positional arguments it finds itself, see mtl_shim.h's writes_mask)."""
  return _buffer_masks(source)[0]

def buffer_uses(source: str) -> dict[str, int]:
  """Per kernel, the bit mask of the [[buffer(n)]] slots it declares (what it may access: a binding left at another
  slot by an earlier dispatch is not the kernel's)."""
  return _buffer_masks(source)[1]

def _buffer_masks(source: str) -> tuple[dict[str, int], dict[str, int]]:
  src = _COMMENT.sub(" ", source)
  masks: dict[str, int] = {}
  uses: dict[str, int] = {}
  for m in _KERNEL.finditer(src):
    depth, i = 1, m.end()
    while i < len(src) and depth:
      depth += {"(": 1, ")": -1}.get(src[i], 0)
      i += 1
    params, depth, start, mask, used = src[m.end():i - 1], 0, 0, 0, 0
    for j, ch in enumerate(params + ","):
      if ch in "(<[": depth += 1
      elif ch in ")>]": depth -= 1
      elif ch == "," and depth == 0:
        param, start = params[start:j], j + 1
        if (attr := _BUFFER_ATTR.search(param)) is not None:
          words = re.findall(r"\w+", param[:attr.start()])
          if "device" in words and "const" not in words: mask |= 1 << int(attr.group(1))
          used |= 1 << int(attr.group(1))
    masks[m.group(1)] = masks.get(m.group(1), 0) | mask
    uses[m.group(1)] = uses.get(m.group(1), 0) | used
  return masks, uses

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

def _tmp_name(path: Path) -> str: return str(path.parent / f"{temp_prefix()}{path.name}")   # swept once its process is gone

def _pch_dir(cxx: str) -> str | None:
  """A directory holding mtl_pch.h and its g++ precompiled form (saves ~60 ms per kernel compile).
  If the .gch does not match the compile, g++ silently reads the plain header instead."""
  with _build_lock:
    d = _pch_dirs.get(cxx)
    if cxx not in _pch_dirs or (d and not all(os.path.exists(os.path.join(d, f)) for f in ("mtl_pch.h", "mtl_pch.h.gch"))):   # or deleted since
      d = _pch_dirs[cxx] = _build_pch(cxx)
    return d

PCH_HEADER = b"#include <mtl_shim.h>\n"

def _build_pch(cxx: str) -> str | None:
  if "g++" not in os.path.basename(cxx) or os.environ.get("ALLOY_METAL_SW_PCH", "1") == "0": return None
  key = hashlib.sha256("\0".join([shim_hash(), _compiler_identity(cxx), " ".join(KERNEL_FLAGS)]).encode()).hexdigest()[:24]
  return _in_cache(lambda d: _pch_in(d / f"pch-{key}", cxx))

def _pch_in(pdir: Path, cxx: str) -> str | None:
  header, gch = pdir / "mtl_pch.h", pdir / "mtl_pch.h.gch"
  # the header is replaced, never deleted: another process's compile may be reading it
  if not _holds(header, PCH_HEADER): atomic_write(str(header), PCH_HEADER)
  if _verified(gch): return str(pdir)
  remove_stale_temps(str(pdir))
  tmp = _tmp_name(gch)
  try:
    flags = [f for f in KERNEL_FLAGS if f != "-shared"]
    r = subprocess.run([cxx, *flags, "-x", "c++-header", "-I", str(SHIM_DIR), str(header), "-o", tmp], capture_output=True, text=True)
    if r.returncode != 0: return None   # compile without it
    _seal(tmp, gch)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
  return str(pdir)

def compile_library(source: str, defines: dict | None = None) -> bytes:
  """MSL source -> library data (magic header + shared object). Raises MetalCompileError."""
  cxx = compiler()
  flags = list(KERNEL_FLAGS) + [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
  # the entry format is part of the key, as in helpers: versions sharing the folder never read each other's entries
  parts = [str(FORMAT_VERSION), f"entry {ENTRY_VERSION}", shim_hash(), _compiler_identity(cxx), " ".join(flags), source]
  key = hashlib.sha256("\0".join(parts).encode()).hexdigest()
  path = cache_dir() / "lib" / f"{key}.mswl"
  if (data := read_entry(str(path))) is not None:   # a damaged entry is reported, deleted and compiled again
    try:
      unwrap_library(data)
      compile_stats["cache_hits"] += 1
      return data
    except ValueError as e: discard_bad(str(path), str(e))
  names = kernel_names(source)
  pch = _pch_dir(cxx)
  writes, uses = _buffer_masks(source)
  wrapper = (f"#include <{'mtl_pch.h' if pch else 'mtl_shim.h'}>\n#include \"kernel.metal\"\n" + "".join(f"MTL_EXPORT({n})\n" for n in names) +
             "".join(f"MTL_BUFFER_WRITES({n}, {writes.get(n, 0)})\nMTL_BUFFER_USES({n}, {uses.get(n, 0)})\n" for n in names))
  with _in_cache(_build_dir) as tmp:
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
  write_entry(str(path), data)
  return data

def _build_dir(d: Path) -> tempfile.TemporaryDirectory:
  """One compile's folder, in the cache: a killed compile's is swept there later (helpers.remove_stale_temps)."""
  d.mkdir(parents=True, exist_ok=True)
  remove_stale_temps(str(d))
  return tempfile.TemporaryDirectory(dir=d, prefix=temp_prefix() + "build-")

def library_info(data: bytes) -> elf.ObjectInfo: return elf.parse(unwrap_library(data))

def shared_object_path(data: bytes) -> str:
  """The library's shared object as a file for dlopen, in the cache once per content hash (its name): a file there
  whose bytes differ is reported and replaced before anything loads it."""
  so = unwrap_library(data)
  def place(d: Path) -> str:
    path = d / "so" / f"{hashlib.sha256(so).hexdigest()}.so"
    if not _holds(path, so): atomic_write(str(path), so)
    return str(path)
  return _in_cache(place)

_runtime_path: str | None = None

def runtime_path() -> str:
  """The C++ runtime shared object, built once per (runtime source, ABI header, compiler)."""
  global _runtime_path
  with _build_lock:
    if _runtime_path is None or not os.path.exists(_runtime_path): _runtime_path = _build_runtime()   # or deleted meanwhile
    return _runtime_path

def _build_runtime() -> str:
  cxx = compiler()
  src = RUNTIME_SRC.read_bytes() + (SHIM_DIR / "mtl_abi.h").read_bytes()
  key = hashlib.sha256(src + _compiler_identity(cxx).encode() + " ".join(RUNTIME_FLAGS).encode()).hexdigest()[:24]
  return _in_cache(lambda d: _runtime_in(d / f"runtime-{key}.so", cxx))

def _runtime_in(path: Path, cxx: str) -> str:
  if _verified(path): return str(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  remove_stale_temps(str(path.parent))
  tmp = _tmp_name(path)
  try:
    r = subprocess.run([cxx, *RUNTIME_FLAGS, "-o", tmp, str(RUNTIME_SRC), "-ldl"], capture_output=True, text=True)
    if r.returncode != 0: raise MetalError(f"building the software Metal runtime failed:\n{r.stderr}")
    _seal(tmp, path)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
  return str(path)
