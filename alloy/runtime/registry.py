"""Which devices exist, their canonical names, the default one, and the one Device object per name."""
from __future__ import annotations
import functools, importlib, os, threading
from alloy.runtime.device import Device

DEVICE_MODULES = {"CPU": "cpu", "CUDA": "cuda", "METAL": "metal"}

# dtypes a device cannot compute in, and why; checked when a tensor is made, so the error points at the user's line
UNSUPPORTED_DTYPES = {"METAL": {"float64": "Metal has no 64-bit floating point; use float32"}}

def unsupported_dtype(device: str, dtype_name: str) -> str | None:
  """Why `device` cannot hold `dtype_name`, or None when it can."""
  return why.get(dtype_name) if (why := UNSUPPORTED_DTYPES.get(device.partition(":")[0])) else None

def canonical_device(name: str) -> str:
  base, _, idx = name.upper().partition(":")
  if base not in DEVICE_MODULES: raise ValueError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_MODULES)}")
  return base if idx in ("", "0") else f"{base}:{int(idx)}"

_by_name: dict = {}   # any spelling already seen -> its device (canonicalizing costs more than the lookup)

_making = threading.Lock()   # two threads asking for a new device at once must get one object, not two

def get_device(name: str) -> Device:
  if (dev := _by_name.get(name)) is None:
    with _making: dev = _by_name[name] = _get_device(canonical_device(name))
  return dev

# what a device needs beyond alloy itself, for the error that says it is missing
NEEDS = {"CPU": "a C compiler (cc, gcc or clang; or CC)",
         "CUDA": "an NVIDIA GPU with its driver, and `pip install 'alloy[cuda]'` (cuda-bindings, NVRTC, nvJitLink)",
         "METAL": "an Apple GPU with `pip install 'alloy[metal]'` (PyObjC's Metal), or g++ for the software Metal device"}

@functools.lru_cache(None)
def _get_device(name: str) -> Device:
  base = name.partition(":")[0]
  module_name = f"alloy.runtime.{DEVICE_MODULES[base]}"
  try: module = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    if e.name == module_name: raise RuntimeError(f"the {name} device is not built in this version of alloy ({module_name})") from None
    raise RuntimeError(f"the {name} device needs the Python module {e.name!r}, which is not installed; it needs {NEEDS[base]}") from None
  if not module.is_available():
    why = module.unavailable_reason() if hasattr(module, "unavailable_reason") else ""
    raise RuntimeError(f"the {name} device is not available here{': ' + why if why else ''}; it needs {NEEDS[base]}")
  return module.DEVICE_CLASS(name)

def device_available(base: str, hardware: bool = False) -> bool:
  """Whether the device can run here; hardware=True excludes software stand-ins (the software Metal device)."""
  try:
    module = importlib.import_module(f"alloy.runtime.{DEVICE_MODULES[base]}")
    return module.is_hardware() if hardware and hasattr(module, "is_hardware") else module.is_available()
  except ImportError: return False

@functools.lru_cache(None)
def default_device() -> str:
  if (dev := os.environ.get("DEV")): return canonical_device(dev)
  return next((d for d in ("CUDA", "METAL") if device_available(d, hardware=True)), "CPU")
