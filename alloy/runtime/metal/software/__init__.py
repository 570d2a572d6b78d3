"""The software Metal device: Metal Shading Language compute kernels compiled as C++ and run on the CPU.

binding.py is the stand-in for PyObjC's `Metal` module that alloy's METAL device drives (`metal_binding()`); the
objects behind it are in base.py, resources.py, commands.py and device.py; host.py runs command buffers in the
worker subprocess (worker.py, over the C++ runtime runtime.cpp); compiler.py turns MSL source into library data
(a C++ shared object, built against the shim/ headers, behind a small magic header; elf.py reads its symbols);
options.py holds the ALLOY_METAL_SW_* run options; errors.py the error classes.
See /work/shared/notes/metal-software-device.md for the design.
"""
from alloy.runtime.metal.software.compiler import LIB_MAGIC, compile_library, kernel_names
from alloy.runtime.metal.software.errors import MetalCompileError, MetalError

__all__ = ["LIB_MAGIC", "MetalCompileError", "MetalError", "compile_library", "kernel_names"]
