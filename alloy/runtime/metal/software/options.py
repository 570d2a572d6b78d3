"""The software device's run options (ALLOY_METAL_SW_ORDER/POISON/STRICT/SEED/TIMEOUT/DISPATCH_ORDER/HAZARDS) and the GPU family it claims
(ALLOY_METAL_SW_TARGET). set_options / the options() context manager change them; a dispatch captures them when it is
encoded (commands.Dispatch), a wait reads the timeout."""
from __future__ import annotations
import contextlib, os
from alloy.helpers import getenv

ORDERS = {"forward": 0, "reverse": 1, "shuffled": 2}   # thread order inside a threadgroup, as the runtime numbers it

def _env_bool(name: str, default: bool) -> bool:
  v = os.environ.get(name)
  return default if v is None else v.strip().lower() not in ("", "0", "false", "no", "off")

def _env_order(name: str = "ALLOY_METAL_SW_ORDER", default: str = "forward") -> str:
  order = os.environ.get(name, default)
  if order not in ORDERS: raise ValueError(f"environment variable {name}={order!r}: expected one of {', '.join(ORDERS)}")
  return order

OPTIONS = {   # the current options; change them through set_options
  "order": _env_order(),
  "poison": _env_bool("ALLOY_METAL_SW_POISON", True),
  "strict": _env_bool("ALLOY_METAL_SW_STRICT", False),
  "seed": getenv("ALLOY_METAL_SW_SEED", 0),
  "timeout": getenv("ALLOY_METAL_SW_TIMEOUT", 0.0) or None,
  "dispatch_order": _env_order("ALLOY_METAL_SW_DISPATCH_ORDER", "reverse"),
  "hazards": _env_bool("ALLOY_METAL_SW_HAZARDS", True),
}
_target = os.environ.get("ALLOY_METAL_SW_TARGET", "Apple7")

def set_options(**kw) -> None:
  """order: 'forward' | 'reverse' | 'shuffled' (thread order inside a threadgroup); poison: fill
  threadgroup memory with 0xFF at every group start; strict: fail on divergent barriers and
  partial-simdgroup simd functions; seed: shuffle seed; timeout: seconds a wait may take before
  the worker is killed (None: no limit); dispatch_order: the order the dispatches between two barriers of a
  concurrent compute encoder run in ('reverse' by default: a missing barrier shows); hazards: a dispatch of a
  concurrent encoder that needs a barrier it lacks raises MetalHazardError when encoded. Captured when a dispatch
  is encoded (dispatch_order when its command buffer is committed)."""
  for k, v in kw.items():
    if k not in OPTIONS: raise TypeError(f"unknown software Metal option {k!r}; known: {sorted(OPTIONS)}")
    if k in ("order", "dispatch_order") and v not in ORDERS: raise ValueError(f"{k} must be one of {sorted(ORDERS)}, not {v!r}")
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
