"""Data types and PyTorch's type promotion (Python scalars are weak)."""
from __future__ import annotations
from dataclasses import dataclass
import functools
import numpy as np

@dataclass(frozen=True, eq=False)   # one instance per dtype: identity is equality, and hashing stays in C
class DType:
  name: str
  itemsize: int
  kind: str          # 'b' bool, 'i' signed int, 'u' unsigned int, 'f' float
  rank: int          # order within a kind, for promotion
  np: type           # NumPy storage type (bfloat16 is stored as uint16 bits)
  def __repr__(self): return f"alloy.{self.name}"
  def __reduce__(self): return (to_dtype, (self.name,))   # copies and pickles resolve to the one instance
  @property
  def is_float(self) -> bool: return self.kind == "f"
  @property
  def is_int(self) -> bool: return self.kind in "iu"
  @property
  def is_unsigned(self) -> bool: return self.kind == "u"
  @property
  def is_bool(self) -> bool: return self.kind == "b"

bool_ = DType("bool", 1, "b", 0, np.bool_)
int8 = DType("int8", 1, "i", 1, np.int8)
uint8 = DType("uint8", 1, "u", 1, np.uint8)
int16 = DType("int16", 2, "i", 2, np.int16)
int32 = DType("int32", 4, "i", 3, np.int32)
int64 = DType("int64", 8, "i", 4, np.int64)
float16 = DType("float16", 2, "f", 1, np.float16)
bfloat16 = DType("bfloat16", 2, "f", 1, np.uint16)
float32 = DType("float32", 4, "f", 2, np.float32)
float64 = DType("float64", 8, "f", 3, np.float64)
# internal: unsigned types used by bitcast and the random generator
uint16 = DType("uint16", 2, "u", 2, np.uint16)
uint32 = DType("uint32", 4, "u", 3, np.uint32)
uint64 = DType("uint64", 8, "u", 4, np.uint64)

DTYPES = {d.name: d for d in (bool_, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64, uint16, uint32, uint64)}
DTYPES["bool"] = bool_
ALIASES = {"half": float16, "float": float32, "double": float64, "int": int32, "long": int64, "short": int16,
           "bf16": bfloat16, "char": int8, "byte": uint8}
default_float = float32
default_int = int64

def widens(src: DType, dst: DType) -> bool:
  """Whether a cast from src to dst is an exact float widening (float16 or bfloat16 to float32, any to float64): a
  load through it is still a load of the narrower value (a matmul's operand, codegen/matmul.py and the schedule)."""
  return src.is_float and dst.is_float and dst.itemsize > src.itemsize

def to_dtype(x) -> DType:
  """Accept an alloy DType, a name, a NumPy dtype or a Python type."""
  if isinstance(x, DType): return x
  if isinstance(x, str):
    if x in DTYPES: return DTYPES[x]
    if x in ALIASES: return ALIASES[x]
    raise TypeError(f"unknown dtype {x!r}")
  if x is bool: return bool_
  if x is int: return default_int
  if x is float: return default_float
  try: npd = np.dtype(x)
  except TypeError: raise TypeError(f"cannot interpret {x!r} as a dtype") from None
  for d in DTYPES.values():
    if d is not bfloat16 and np.dtype(d.np) == npd: return d
  raise TypeError(f"unsupported dtype {npd}")

def _promote_two(a: DType, b: DType) -> DType:
  if a == b: return a
  if a.kind == "f" or b.kind == "f":
    if a.kind != "f": return b
    if b.kind != "f": return a
    if {a, b} == {float16, bfloat16}: return float32
    return a if a.rank > b.rank else b
  if a.kind == "b": return b
  if b.kind == "b": return a
  if a.kind == b.kind: return a if a.rank > b.rank else b
  s, u = (a, b) if a.kind == "i" else (b, a)
  if s.itemsize > u.itemsize: return s
  # signed with unsigned of equal or larger size: the next larger signed type holds both
  return {1: int16, 2: int32, 4: int64, 8: int64}[u.itemsize]

def promote_types(*dtypes: DType) -> DType:
  out = dtypes[0]
  for d in dtypes[1:]: out = _promote_two(out, d)
  return out

def scalar_category(x) -> str:
  if isinstance(x, (bool, np.bool_)): return "b"
  if isinstance(x, (int, np.integer)): return "i"
  if isinstance(x, (float, np.floating)): return "f"
  if hasattr(x, "scalar_category"): return x.scalar_category()   # a number traced by the jit (alloy/scalar.py)
  raise TypeError(f"unsupported scalar {x!r} of type {type(x).__name__}")

def result_type(tensor_dtypes: list[DType], scalars: list) -> DType:
  """PyTorch's rule: tensors decide; a Python scalar only lifts the category (bool < int < float)."""
  if len(tensor_dtypes) == 1 and len(scalars) == 1:   # tensor (op) Python number: the common case, kept short
    d, s = tensor_dtypes[0], scalars[0]
    if type(s) is float: return d if d.kind == "f" else default_float
    if type(s) is int: return default_int if d.kind == "b" else d
  if not tensor_dtypes:
    cats = {scalar_category(s) for s in scalars}
    return default_float if "f" in cats else default_int if "i" in cats else bool_
  out = promote_types(*tensor_dtypes)
  for s in scalars:
    cat = scalar_category(s)
    if cat == "f" and not out.is_float: out = default_float
    elif cat == "i" and out.is_bool: out = default_int
  return out

@functools.cache   # a per-dtype constant, asked for each integer constant made (np.iinfo costs a microsecond)
def min_value(d: DType):
  if d.is_float: return -float("inf")
  if d.is_bool: return False
  return int(np.iinfo(d.np).min)

@functools.cache
def max_value(d: DType):
  if d.is_float: return float("inf")
  if d.is_bool: return True
  return int(np.iinfo(d.np).max)

def to_numpy_array(x: np.ndarray, d: DType) -> np.ndarray:
  """Values (float for bfloat16) -> storage array for dtype d."""
  if d is bfloat16: return float32_to_bfloat16_bits(np.asarray(x, dtype=np.float32))
  return np.asarray(x, dtype=d.np)

def float32_to_bfloat16_bits(x: np.ndarray) -> np.ndarray:
  """Round to nearest even; NaN stays NaN."""
  bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
  rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
  return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)

def bfloat16_bits_to_float32(x: np.ndarray) -> np.ndarray:
  return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
