"""The software Metal device's errors. They mimic the NSError surface PyObjC code reads (localizedDescription, code,
domain) and are RuntimeErrors, so a command buffer's error() can be raised as it is."""
from __future__ import annotations

class MetalError(RuntimeError):
  """Base of the software Metal errors."""
  def localizedDescription(self) -> str: return str(self)
  def description(self) -> str: return str(self)
  def code(self) -> int: return 1
  def domain(self) -> str: return "alloy.metal_software"

class MetalCompileError(MetalError):
  """MSL source failed to compile; carries the source and the compiler's message."""
  def __init__(self, message: str, source: str = "", log: str = ""):
    super().__init__(message)
    self.source, self.log = source, log

class MetalLimitError(MetalError):
  """A launch or encoding exceeds a limit of Apple GPUs (threads, threadgroup memory, setBytes, bindings)."""

class MetalValidationError(MetalError):
  """Misuse that Metal's validation layer would report (unbound argument, missing pipeline, ...)."""

class MetalHazardError(MetalValidationError):
  """A dispatch of a concurrent compute encoder touches a buffer an earlier one wrote (or writes one it read) with
  no memory barrier between them. Names both kernels (kernel: the later one, earlier: the one before)."""
  def __init__(self, message: str, kernel: str = "", earlier: str = ""):
    super().__init__(message)
    self.kernel, self.earlier = kernel, earlier

class MetalExecutionError(MetalError):
  """A command buffer failed while executing (strict-mode violation, runtime error)."""

class MetalKernelCrash(MetalExecutionError):
  """The kernel killed the worker process (SIGFPE, SIGSEGV, ...). A fresh worker runs later work."""
  def __init__(self, message: str, kernel: str | None = None, signal_name: str | None = None, returncode: int | None = None):
    super().__init__(message)
    self.kernel, self.signal, self.returncode = kernel, signal_name, returncode

class MetalKernelTimeout(MetalKernelCrash):
  """A command buffer ran past the configured timeout; its worker was killed."""
