"""Small shared utilities: environment knobs, the on-disk cache, timing."""
from __future__ import annotations
import functools, hashlib, math, os, tempfile, time
from typing import Iterable

def getenv(key: str, default=0):
  """Read an environment knob, typed like its default."""
  val = os.environ.get(key)
  if val is None: return default
  if isinstance(default, str): return val
  try: return type(default)(val)
  except ValueError: raise ValueError(f"environment variable {key}={val!r}: expected {type(default).__name__}, like {key}={default}") from None

DEBUG = getenv("DEBUG", 0)

def prod(xs: Iterable[int]) -> int:
  return math.prod(xs)

def cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "alloy")

def disk_cache_enabled() -> bool:
  return getenv("ALLOY_CACHE", 1) != 0

def _cache_path(table: str, key: str) -> str:
  return os.path.join(cache_dir(), table, hashlib.sha256(key.encode()).hexdigest())

def disk_cache_get(table: str, key: str) -> bytes | None:
  if not disk_cache_enabled(): return None
  try:
    with open(_cache_path(table, key), "rb") as f: return f.read()
  except OSError: return None

def atomic_write(path: str, data: bytes) -> None:
  """Write via a temp file and rename: readers see the whole file or none, even across processes."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
  try:
    with os.fdopen(fd, "wb") as f: f.write(data)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp): os.unlink(tmp)
    raise

def disk_cache_put(table: str, key: str, value: bytes) -> None:
  if disk_cache_enabled(): atomic_write(_cache_path(table, key), value)

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
