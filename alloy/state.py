"""alloy.save and alloy.load: state dicts (dotted names -> tensors) as safetensors files, through the `safetensors`
package, so files written by safetensors.torch.save_file or Hugging Face's save_pretrained load as they are.

safetensors' NumPy API has no bfloat16 (NumPy has none), so both directions go one level lower, through the package's
own serializer and parser rather than its NumPy wrappers: `safetensors.serialize_file` takes each tensor's dtype name
and raw little-endian bytes, and `safetensors.deserialize` returns each tensor's dtype, shape and bytes. A bfloat16
tensor travels as its storage (uint16 bit patterns, which is what alloy's buffers hold), so it loads bit for bit;
every other dtype is the same bytes as NumPy's. The header parsing, validation and layout are the package's.
"""
from __future__ import annotations
import os
from collections.abc import Mapping
import numpy as np
from alloy import dtype as dt
from alloy.tensor import Tensor
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import canonical_device, default_device
from alloy.engine.realize import buffer_view
from alloy.realize_tensors import buffer_of

# alloy dtype -> the safetensors header's dtype code, and back
CODES = {dt.bool_: "BOOL", dt.uint8: "U8", dt.int8: "I8", dt.int16: "I16", dt.uint16: "U16", dt.int32: "I32", dt.uint32: "U32",
         dt.int64: "I64", dt.uint64: "U64", dt.float16: "F16", dt.bfloat16: "BF16", dt.float32: "F32", dt.float64: "F64"}
DTYPES = {code: d for d, code in CODES.items()}

def _storage(name: str, value) -> tuple[str, tuple, np.ndarray]:
  """(dtype name for safetensors, shape, contiguous little-endian storage) of one tensor."""
  if isinstance(value, Tensor):
    arr, d = buffer_of(value).numpy().reshape(value.shape), value.dtype
  elif isinstance(value, np.ndarray):
    if value.dtype == object: raise TypeError(f"alloy.save: {name!r} is an object array, not numbers")
    arr, d = value, dt.to_dtype(value.dtype)
  else: raise TypeError(f"alloy.save: the value of {name!r} is a {type(value).__name__}; expected a Tensor or a NumPy array")
  if d not in CODES: raise TypeError(f"alloy.save: {name!r} has dtype {d.name}, which safetensors cannot hold")
  arr = np.ascontiguousarray(arr, dtype=np.dtype(d.np).newbyteorder("<"))
  return d.name, tuple(arr.shape), arr

def save(obj, path, metadata: dict | None = None) -> None:
  """Writes a state dict (or a Module's) as a safetensors file. Names are strings (dotted paths for nesting)."""
  import safetensors
  from alloy.nn.module import Module
  if isinstance(obj, Module): obj = obj.state_dict()
  if not isinstance(obj, Mapping):
    raise TypeError(f"alloy.save: expected a state dict (a mapping of names to tensors) or a Module, got {type(obj).__name__}")
  if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
    raise TypeError("alloy.save: metadata must map strings to strings")
  keep, specs = [], {}
  for name, value in obj.items():
    if not isinstance(name, str): raise TypeError(f"alloy.save: names must be strings, got {name!r}")
    if isinstance(value, Mapping): raise TypeError(f"alloy.save: {name!r} holds a nested mapping; flatten it to dotted names ('{name}.key')")
    dname, shape, arr = _storage(name, value)
    keep.append(arr)   # serialize_file reads the arrays through their pointers: they must live until it returns
    specs[name] = safetensors.TensorSpec(dtype=dname, shape=list(shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)
  safetensors.serialize_file(specs, os.fspath(path), metadata=metadata)

def _tensor(name: str, code: str, shape: tuple, data: bytes, device: str) -> Tensor:
  d = DTYPES.get(code)
  if d is None: raise ValueError(f"alloy.load: {name!r} has safetensors dtype {code}, which alloy has no dtype for")
  storage = np.frombuffer(data, dtype=np.dtype(d.np).newbyteorder("<"))
  if storage.size != int(np.prod(shape, dtype=np.int64)):
    raise ValueError(f"alloy.load: {name!r} holds {storage.size} elements, its shape {shape} needs another count")
  if d is dt.bool_ and storage.size and storage.view(np.uint8).max() > 1:
    raise ValueError(f"alloy.load: {name!r} is a BOOL tensor with bytes other than 0 and 1")
  if d is dt.bfloat16:   # the bits as they are: Tensor(values) would convert float values, not take bit patterns
    buf = Buffer(device, storage.size, d).copyin(storage.astype(np.uint16).reshape(-1))
    return Tensor(buffer_view(buf, shape), device=device)
  return Tensor(storage.astype(d.np).reshape(shape), dtype=d, device=device)

def load(path, device=None) -> dict:
  """Reads a safetensors file into {name: Tensor} on `device` (the default device if None), dtypes as stored.
  A missing, truncated or corrupt file raises ValueError (OSError for a file that cannot be read) naming it."""
  import safetensors
  device = canonical_device(device) if device is not None else default_device()
  with open(path, "rb") as f: data = f.read()
  try: entries = safetensors.deserialize(data)
  except Exception as e:   # SafetensorError for a bad header or offsets, and others the parser raises on bad JSON
    raise ValueError(f"alloy.load: {os.fspath(path)!r} is not a valid safetensors file ({type(e).__name__}: {e})") from None
  return {name: _tensor(name, info["dtype"].upper(), tuple(info["shape"]), info["data"], device) for name, info in entries}

def load_metadata(path) -> dict:
  """The free-form string metadata stored in a safetensors file's header ({} if none)."""
  import safetensors
  try:
    with safetensors.safe_open(os.fspath(path), framework="np") as f: return dict(f.metadata() or {})
  except Exception as e:
    raise ValueError(f"alloy.load_metadata: {os.fspath(path)!r} is not a valid safetensors file ({type(e).__name__}: {e})") from None
