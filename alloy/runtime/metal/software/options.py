"""The software device's run options (ALLOY_METAL_SW_ORDER/POISON/STRICT/SEED/TIMEOUT) and the GPU family it claims
(ALLOY_METAL_SW_TARGET). set_options / the options() context manager change them; a dispatch captures them when it is
encoded (commands.Dispatch), a wait reads the timeout."""
from __future__ import annotations
import contextlib, os
from alloy.helpers import getenv

ORDERS = {"forward": 0, "reverse": 1, "shuffled": 2}   # thread order inside a threadgroup, as the runtime numbers it

def _env_bool(name: str, default: bool) -> bool:
  v = os.environ.get(name)
  return default if v is None else v.strip().lower() not in ("", "0", "false", "no", "off")

def _env_order() -> str:
  order = os.environ.get("ALLOY_METAL_SW_ORDER", "forward")
  if order not in ORDERS: raise ValueError(f"environment variable ALLOY_METAL_SW_ORDER={order!r}: expected one of {', '.join(ORDERS)}")
  return order

OPTIONS = {   # the current options; change them through set_options
  "order": _env_order(),
  "poison": _env_bool("ALLOY_METAL_SW_POISON", True),
  "strict": _env_bool("ALLOY_METAL_SW_STRICT", False),
  "seed": getenv("ALLOY_METAL_SW_SEED", 0),
  "timeout": getenv("ALLOY_METAL_SW_TIMEOUT", 0.0) or None,
}
_target = os.environ.get("ALLOY_METAL_SW_TARGET", "Apple7")

def set_options(**kw) -> None:
  """order: 'forward' | 'reverse' | 'shuffled' (thread order inside a threadgroup); poison: fill
  threadgroup memory with 0xFF at every group start; strict: fail on divergent barriers and
  partial-simdgroup simd functions; seed: shuffle seed; timeout: seconds a wait may take before
  the worker is killed (None: no limit). Captured when a dispatch is encoded."""
  for k, v in kw.items():
    if k not in OPTIONS: raise TypeError(f"unknown software Metal option {k!r}; known: {sorted(OPTIONS)}")
    if k == "order" and v not in ORDERS: raise ValueError(f"order must be one of {sorted(ORDERS)}, not {v!r}")
    OPTIONS[k] = v

def get_options() -> dict: return dict(OPTIONS)

@contextlib.contextmanager
def options(**kw):
  old = get_options()
  set_options(**kw)
  try: yield
  finally:
    OPTIONS.clear()
    OPTIONS.update(old)

def set_target(family: str) -> None:
  """The Apple GPU family the device claims to be, e.g. 'Apple7' (name: 'Apple7 (software)')."""
  if not family.startswith("Apple") or not family[5:].isdigit(): raise ValueError(f"target must look like 'Apple7', not {family!r}")
  global _target
  _target = family

def get_target() -> str: return _target
