"""A kernel rendered whole instead of lowered (engine/attention.py, wgmma.py, cpu_bf16.py): its source and launch
metadata, and how its device compiles and loads it. engine/compiled.py's `_special` runs those two stages, timed as
every kernel's are."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable
from alloy.codegen.program import KernelMeta

@dataclass(frozen=True)
class WholeKernel:
  source: str
  meta: KernelMeta
  compile: Callable[[str], bytes]   # source -> binary (disk-cached)
  load: Callable[[bytes], Any]      # binary -> the device's Program
  render_seconds: float             # recognising the kernel and rendering its source (the "lower" stage's time)
