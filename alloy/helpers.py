"""Small shared utilities: environment knobs, the on-disk cache, timing."""
from __future__ import annotations
import functools, hashlib, math, os, re, shutil, struct, sys, tempfile, threading, time, warnings
from typing import Iterable

def getenv(key: str, default=0):
  """Read an environment knob, typed like its default."""
  val = os.environ.get(key)
  if val is None: return default
  if isinstance(default, str): return val
  try: return type(default)(val)
  except ValueError: raise ValueError(f"environment variable {key}={val!r}: expected {type(default).__name__}, like {key}={default}") from None

DEBUG = getenv("DEBUG", 0)

# PyTorch's torch.set_float32_matmul_precision, with its meaning: "highest" (the default) keeps float32 matmuls exact;
# "high" and "medium" let them run on tensor cores as tf32 (10-bit mantissas, float32 accumulation). Process-wide;
# the compiled-kernel cache keys on it (a kernel compiled under one setting is not reused under another).
FLOAT32_MATMUL_PRECISIONS = ("highest", "high", "medium")
_float32_matmul_precision = ["highest"]

def set_float32_matmul_precision(precision: str) -> None:
  if precision not in FLOAT32_MATMUL_PRECISIONS:
    raise ValueError(f"float32 matmul precision {precision!r}: expected one of {', '.join(FLOAT32_MATMUL_PRECISIONS)}")
  _float32_matmul_precision[0] = precision

def float32_matmul_precision() -> str: return _float32_matmul_precision[0]

def prod(xs: Iterable[int]) -> int:
  return math.prod(xs)

def remember(table: dict, key, value, limit: int = 1 << 14):
  """table[key] = value, and value: a cache of answers already checked (a shape op's arguments, say), dropped whole
  when it holds `limit` entries, so a miss costs only the check again."""
  if len(table) >= limit: table.clear()
  table[key] = value
  return value

class SweepAt:
  """When to sweep a table whose entries die (weak references to gone objects, work that has completed): once it has
  doubled since the last sweep, and holds at least `floor`. A fixed size would rescan a table of live entries at
  every insert once it held that many; doubling keeps the cost per insert constant and the table within twice its
  live entries."""
  def __init__(self, floor: int = 4096): self.floor = self.at = floor
  def swept(self, size: int) -> None: self.at = max(self.floor, 2 * size)

def cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "alloy")

def disk_cache_enabled() -> bool:
  """ALLOY_CACHE=0 turns off every disk cache: this one and the software Metal device's."""
  return getenv("ALLOY_CACHE", 1) != 0

# A cache entry: a header (magic, format version, payload length, blake2b-256 of the payload), then the payload.
# A file that does not check out (truncated, overwritten, from another format) is never returned.
ENTRY_MAGIC, ENTRY_VERSION = b"ALYC", 1
_ENTRY = struct.Struct("<4sIQ32s")

def _digest(payload: bytes) -> bytes: return hashlib.blake2b(payload, digest_size=32).digest()

def pack_entry(payload: bytes) -> bytes:
  return _ENTRY.pack(ENTRY_MAGIC, ENTRY_VERSION, len(payload), _digest(payload)) + payload

def unpack_entry(data: bytes) -> bytes:
  """The payload of a cache entry; ValueError saying what is wrong with it."""
  if len(data) < _ENTRY.size: raise ValueError(f"{len(data)} bytes, shorter than the {_ENTRY.size}-byte header")
  magic, version, n, digest = _ENTRY.unpack_from(data)
  if magic != ENTRY_MAGIC: raise ValueError(f"magic {magic!r}, expected {ENTRY_MAGIC!r}")
  if version != ENTRY_VERSION: raise ValueError(f"format {version}, expected {ENTRY_VERSION}")
  if len(data) != _ENTRY.size + n: raise ValueError(f"{len(data) - _ENTRY.size} payload bytes, expected {n}")
  payload = data[_ENTRY.size:]
  if _digest(payload) != digest: raise ValueError("checksum mismatch")
  return payload

def report_bad(path: str, why: str) -> None:
  """A damaged cache file, at DEBUG=1: it is not used, and is replaced by a rebuilt one."""
  if DEBUG >= 1: print(f"alloy: bad cache file {path} ({why}): rebuilding it", file=sys.stderr)

def discard_bad(path: str, why: str) -> None:
  """A damaged cache file: reported (report_bad) and deleted, so the next lookup rebuilds it."""
  report_bad(path, why)
  try:
    if os.path.isdir(path) and not os.path.islink(path): shutil.rmtree(path)
    else: os.unlink(path)
  except OSError: pass   # a read-only cache: the file stays, but is never used

_unusable: dict[str, str] = {}   # cache folder -> why it cannot be used; each is warned about once, then skipped
_warn_lock = threading.Lock()

def cache_unusable(folder: str, err: BaseException) -> None:
  """Give up on a cache folder for this process, with one warning naming it and the reason."""
  with _warn_lock:
    if folder in _unusable: return
    _unusable[folder] = why = f"{type(err).__name__}: {getattr(err, 'strerror', None) or err}"
  msg = f"alloy: cache folder {folder} is unusable ({why}); running without it"
  warnings.warn(msg, RuntimeWarning, stacklevel=3)

def folder_usable(folder: str) -> bool: return folder not in _unusable

def read_entry(path: str) -> bytes | None:
  """The payload cached at path, or None when there is none, it is damaged (then deleted) or the folder is unusable."""
  folder = os.path.dirname(path)
  if folder in _unusable: return None
  try:
    with open(path, "rb") as f: data = f.read()
  except FileNotFoundError: return None
  except IsADirectoryError: return discard_bad(path, "a folder in its place")
  except OSError as e: return cache_unusable(folder, e)
  try: return unpack_entry(data)
  except ValueError as e: return discard_bad(path, str(e))

def write_entry(path: str, payload: bytes) -> bool:
  """Cache payload at path (atomically); False, after one warning per folder, where the folder cannot take it."""
  folder = os.path.dirname(path)
  if folder in _unusable: return False
  try:
    remove_stale_temps(folder)
    atomic_write(path, pack_entry(payload))
    return True
  except OSError as e:
    cache_unusable(folder, e)
    return False

def _cache_path(table: str, key: str) -> str:
  # the entry format is part of the name: versions of alloy sharing a cache never read each other's files
  return os.path.join(cache_dir(), table, hashlib.sha256(f"entry {ENTRY_VERSION}\0{key}".encode()).hexdigest())

def disk_cache_get(table: str, key: str) -> bytes | None:
  return read_entry(_cache_path(table, key)) if disk_cache_enabled() else None

def disk_cache_put(table: str, key: str, value: bytes) -> None:
  if disk_cache_enabled(): write_entry(_cache_path(table, key), value)

# Temporary files and folders in a cache are named .tmp-<pid>-...: a writer killed before its rename leaves one behind,
# which is never read (no lookup names it) and is removed once its process is gone. The age limit spares the files
# of a live process this one cannot see (another host or PID namespace sharing the folder).
STALE_SECONDS = 300
_swept: set[str] = set()

def temp_prefix() -> str: return f".tmp-{os.getpid()}-{threading.get_ident()}-"

def _alive(pid: int) -> bool:
  if pid == os.getpid(): return True
  try: os.kill(pid, 0)
  except ProcessLookupError: return False
  except OSError: pass   # EPERM: someone else's process
  return True

_OLD_TEMP = re.compile(r"\.(\d+)\.\d+\.tmp$")   # the software Metal device's earlier name: <file>.<pid>.<thread>.tmp

def remove_stale_temps(folder: str) -> None:
  """Remove the leftover temporary files of dead processes in folder, once per folder and process."""
  if folder in _swept: return
  _swept.add(folder)
  try: names = [n for n in os.listdir(folder) if n.startswith(".tmp-") or _OLD_TEMP.search(n)]
  except OSError: return
  for name in names:
    pid = name[5:].split("-", 1)[0] if name.startswith(".tmp-") else _OLD_TEMP.search(name).group(1)
    path = os.path.join(folder, name)
    try:
      if (pid.isdigit() and _alive(int(pid))) or time.time() - os.lstat(path).st_mtime < STALE_SECONDS: continue
      if os.path.isdir(path) and not os.path.islink(path): shutil.rmtree(path)
      else: os.unlink(path)
    except OSError: pass   # gone already, or not ours to remove

def atomic_write(path: str, data: bytes) -> None:
  """Write via a temp file and rename: readers see the whole file or none, even across processes."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=temp_prefix())
  try:
    with os.fdopen(fd, "wb") as f: f.write(data)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp): os.unlink(tmp)
    raise

class Timer:
  """Context manager measuring host wall time in seconds."""
  def __enter__(self):
    self.start = time.perf_counter()
    return self
  def __exit__(self, *exc):
    self.elapsed = time.perf_counter() - self.start

def round_up(x: int, m: int) -> int: return (x + m - 1) // m * m

def all_same(xs) -> bool:
  xs = list(xs)
  return all(x == xs[0] for x in xs)

@functools.lru_cache(None)
def strides_for_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
  strides, acc = [], 1
  for s in reversed(shape):
    strides.append(acc if s != 1 else 0)
    acc *= s
  return tuple(reversed(strides))

def toposort(root, children) -> list:
  """Every node reachable from root through children(node), each after all of its children (iterative: graphs can
  be deeper than Python's stack)."""
  seen, order, stack = set(), [], [(root, False)]
  while stack:
    n, done = stack.pop()
    if done: order.append(n); continue
    if id(n) in seen: continue
    seen.add(id(n))
    stack.append((n, True))
    stack.extend((c, False) for c in children(n) if id(c) not in seen)
  return order
