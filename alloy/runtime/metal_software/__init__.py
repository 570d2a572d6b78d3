"""Software Metal device: runs Metal Shading Language compute kernels on the CPU.

``binding`` mirrors the PyObjC ``Metal`` module surface; ``compiler`` turns MSL source into
library data (a C++ shared object behind a small magic header). See
/work/shared/notes/metal-software-device.md for the design.
"""
from .compiler import LIB_MAGIC, MetalCompileError, MetalError, compile_library, kernel_names

__all__ = ["LIB_MAGIC", "MetalCompileError", "MetalError", "compile_library", "kernel_names"]
