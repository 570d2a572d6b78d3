"""The stand-in for MTLDevice (one per process: MTLCreateSystemDefaultDevice) and the objects it makes."""
from __future__ import annotations
import os
from alloy.runtime.metal.software.base import (MAX_THREADGROUP_MEMORY, MTLGPUFamilyCommon1, MTLGPUFamilyCommon2, MTLGPUFamilyCommon3,
                                               MTLGPUFamilyMetal3, MTLSize, NSObject, as_bytes)
from alloy.runtime.metal.software.commands import CommandQueue, IndirectCommandBuffer
from alloy.runtime.metal.software.compiler import compile_library
from alloy.runtime.metal.software.errors import MetalCompileError, MetalError, MetalLimitError, MetalValidationError
from alloy.runtime.metal.software.options import get_target
from alloy.runtime.metal.software.resources import Buffer, ComputePipelineState, Library

def raise_descriptor_limit() -> None:
  """Each software buffer is a memfd the worker maps, so a buffer holds a file descriptor while it lives (and while
  allocators keep it for reuse): the process's soft limit on descriptors is raised to its hard limit, as servers
  holding many sockets do, so that a program with many live buffers does not run out at Linux's usual 1024."""
  import resource
  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  want = 1 << 20 if hard == resource.RLIM_INFINITY else hard
  if soft != resource.RLIM_INFINITY and soft < want:
    try: resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ValueError, OSError): pass   # a limit the kernel will not grant (nr_open): keep the soft one

class SoftwareDevice(NSObject):
  def __init__(self):
    super().__init__()
    raise_descriptor_limit()
  def name(self): return f"{get_target()} (software)"
  def registryID(self): return 0
  def hasUnifiedMemory(self): return True
  def isLowPower(self): return False
  def isHeadless(self): return True
  def maxThreadsPerThreadgroup(self): return MTLSize(1024, 1024, 1024)
  def maxThreadgroupMemoryLength(self): return MAX_THREADGROUP_MEMORY
  def maxBufferLength(self): return 1 << 40
  def recommendedMaxWorkingSetSize(self): return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  def currentAllocatedSize(self): return 0
  def supportsFamily_(self, family):
    family, level = int(family), int(get_target()[5:])
    if 1001 <= family <= 1009: return family - 1000 <= level
    if family in (MTLGPUFamilyCommon1, MTLGPUFamilyCommon2, MTLGPUFamilyCommon3): return True
    if family == MTLGPUFamilyMetal3: return level >= 7
    return False

  def newCommandQueue(self): return CommandQueue(self)
  def newCommandQueueWithMaxCommandBufferCount_(self, n): return CommandQueue(self)
  def newBufferWithLength_options_(self, length, options): return Buffer(self, length, options)
  def newBufferWithBytes_length_options_(self, data, length, options):
    b = Buffer(self, length, options)
    b.contents().as_buffer(int(length))[:] = as_bytes(data, int(length))
    return b
  def newBufferWithBytesNoCopy_length_options_deallocator_(self, *args):
    raise NotImplementedError("software Metal: buffers must live in shared memory the worker maps; "
                              "use newBufferWithLength_options_ and write through contents()")

  def newLibraryWithSource_options_error_(self, source, opts, error):
    try: return Library(self, compile_library(str(source), getattr(opts, "_macros", None) or None)), None
    except MetalCompileError as e: return None, e
  def newLibraryWithData_error_(self, data, error):
    try: return Library(self, bytes(data)), None
    except (ValueError, TypeError) as e: return None, MetalError(f"newLibraryWithData: {e}")

  def newComputePipelineStateWithFunction_error_(self, fn, error):
    if fn is None: return None, MetalValidationError("newComputePipelineStateWithFunction: function is None")
    tg = fn._library._info.threadgroup_memory(fn._name)
    if tg > MAX_THREADGROUP_MEMORY:
      return None, MetalLimitError(f"kernel '{fn._name}' declares {tg} bytes of threadgroup memory; "
                                   f"the limit is {MAX_THREADGROUP_MEMORY} bytes (32 KiB)")
    return ComputePipelineState(self, fn, tg), None
  def newComputePipelineStateWithDescriptor_options_reflection_error_(self, desc, options, reflection, error):
    return self.newComputePipelineStateWithFunction_error_(desc.computeFunction(), error)
  def newIndirectCommandBufferWithDescriptor_maxCommandCount_options_(self, desc, count, options): return IndirectCommandBuffer(self, desc, count)

_DEVICE: SoftwareDevice | None = None

def MTLCreateSystemDefaultDevice() -> SoftwareDevice:
  global _DEVICE
  if _DEVICE is None: _DEVICE = SoftwareDevice()
  return _DEVICE

def MTLCopyAllDevices() -> list: return [MTLCreateSystemDefaultDevice()]
