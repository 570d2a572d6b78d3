"""The software device's stand-in for PyObjC's `Metal` module: `from alloy.runtime.metal.software import binding as Metal`.

It gives the subset of the PyObjC Metal surface a compute runtime uses (device, queue, buffers, libraries, pipelines,
command buffers, compute encoders, indirect command buffers), with the same selector spellings and the same
``(result, error)`` tuples for out-parameters, plus the software device's own controls (options, target, worker).

Underneath: a library is a C++ shared object compiled from the MSL source through the shim (compiler.py); command
buffers execute, in commit order, in a persistent worker subprocess (host.py, worker.py) so that a crashing kernel
becomes a ``MetalKernelCrash`` error on its command buffer instead of killing the caller; buffers are memfd shared
memory mapped in both processes, so ``contents().as_buffer(n)`` is a zero-copy view (resources.py). The objects
live in base.py (constants, value types), resources.py, commands.py and device.py.

Software options (thread order, threadgroup-memory poisoning, strict mode, timeout) are set with ``set_options`` /
the ``options`` context manager or ALLOY_METAL_SW_* environment variables (options.py), and are captured when a
dispatch is encoded.
"""
from alloy.runtime.metal.software.base import (MTLResourceCPUCacheModeDefaultCache, MTLResourceCPUCacheModeWriteCombined,
                                               MTLResourceStorageModeShared, MTLResourceStorageModeManaged, MTLResourceStorageModePrivate,
                                               MTLResourceStorageModeMemoryless, MTLResourceHazardTrackingModeDefault,
                                               MTLResourceHazardTrackingModeUntracked, MTLResourceHazardTrackingModeTracked,
                                               MTLCommandBufferStatusNotEnqueued, MTLCommandBufferStatusEnqueued, MTLCommandBufferStatusCommitted,
                                               MTLCommandBufferStatusScheduled, MTLCommandBufferStatusCompleted, MTLCommandBufferStatusError,
                                               MTLIndirectCommandTypeDraw, MTLIndirectCommandTypeDrawIndexed, MTLIndirectCommandTypeDrawPatches,
                                               MTLIndirectCommandTypeDrawIndexedPatches, MTLIndirectCommandTypeConcurrentDispatch,
                                               MTLIndirectCommandTypeConcurrentDispatchThreads, MTLResourceUsageRead, MTLResourceUsageWrite,
                                               MTLResourceUsageSample, MTLBarrierScopeBuffers, MTLBarrierScopeTextures, MTLBarrierScopeRenderTargets,
                                               MTLDispatchTypeSerial, MTLDispatchTypeConcurrent, MTLGPUFamilyApple1, MTLGPUFamilyApple2,
                                               MTLGPUFamilyApple3, MTLGPUFamilyApple4, MTLGPUFamilyApple5, MTLGPUFamilyApple6, MTLGPUFamilyApple7,
                                               MTLGPUFamilyApple8, MTLGPUFamilyApple9, MTLGPUFamilyMac1, MTLGPUFamilyMac2, MTLGPUFamilyCommon1,
                                               MTLGPUFamilyCommon2, MTLGPUFamilyCommon3, MTLGPUFamilyMetal3, MTLLanguageVersion2_4,
                                               MTLLanguageVersion3_0, MTLLanguageVersion3_1, MTLLanguageVersion3_2, MTLMathModeSafe,
                                               MTLMathModeRelaxed, MTLMathModeFast, MTLMathFloatingPointFunctionsFast,
                                               MTLMathFloatingPointFunctionsPrecise, MAX_THREADS_PER_THREADGROUP, MAX_THREADGROUP_MEMORY,
                                               MAX_SET_BYTES, MAX_BUFFER_BINDINGS, SIMD_WIDTH, MTLIndirectCommandBufferExecutionRangeMake,
                                               MTLResourceOptions, MTLPipelineOption, MTLSize, MTLSizeMake, NSRange, NSMakeRange)
from alloy.runtime.metal.software.compiler import LIB_MAGIC, compile_library
from alloy.runtime.metal.software.device import MTLCopyAllDevices, MTLCreateSystemDefaultDevice
from alloy.runtime.metal.software.errors import (MetalCompileError, MetalError, MetalExecutionError, MetalHazardError, MetalKernelCrash,
                                                 MetalKernelTimeout, MetalLimitError, MetalValidationError)
from alloy.runtime.metal.software.host import shutdown, worker_pid
from alloy.runtime.metal.software.options import get_options, get_target, options, set_options, set_target
from alloy.runtime.metal.software.resources import MTLCompileOptions, MTLComputePipelineDescriptor, MTLIndirectCommandBufferDescriptor

__all__ = ["MTLResourceCPUCacheModeDefaultCache", "MTLResourceCPUCacheModeWriteCombined", "MTLResourceStorageModeShared",
           "MTLResourceStorageModeManaged", "MTLResourceStorageModePrivate", "MTLResourceStorageModeMemoryless",
           "MTLResourceHazardTrackingModeDefault", "MTLResourceHazardTrackingModeUntracked", "MTLResourceHazardTrackingModeTracked",
           "MTLCommandBufferStatusNotEnqueued", "MTLCommandBufferStatusEnqueued", "MTLCommandBufferStatusCommitted",
           "MTLCommandBufferStatusScheduled", "MTLCommandBufferStatusCompleted", "MTLCommandBufferStatusError", "MTLIndirectCommandTypeDraw",
           "MTLIndirectCommandTypeDrawIndexed", "MTLIndirectCommandTypeDrawPatches", "MTLIndirectCommandTypeDrawIndexedPatches",
           "MTLIndirectCommandTypeConcurrentDispatch", "MTLIndirectCommandTypeConcurrentDispatchThreads", "MTLResourceUsageRead",
           "MTLResourceUsageWrite", "MTLResourceUsageSample", "MTLBarrierScopeBuffers", "MTLBarrierScopeTextures", "MTLBarrierScopeRenderTargets",
           "MTLDispatchTypeSerial", "MTLDispatchTypeConcurrent", "MTLGPUFamilyApple1", "MTLGPUFamilyApple2", "MTLGPUFamilyApple3",
           "MTLGPUFamilyApple4", "MTLGPUFamilyApple5", "MTLGPUFamilyApple6", "MTLGPUFamilyApple7", "MTLGPUFamilyApple8", "MTLGPUFamilyApple9",
           "MTLGPUFamilyMac1", "MTLGPUFamilyMac2", "MTLGPUFamilyCommon1", "MTLGPUFamilyCommon2", "MTLGPUFamilyCommon3", "MTLGPUFamilyMetal3",
           "MTLLanguageVersion2_4", "MTLLanguageVersion3_0", "MTLLanguageVersion3_1", "MTLLanguageVersion3_2", "MTLMathModeSafe",
           "MTLMathModeRelaxed", "MTLMathModeFast", "MTLMathFloatingPointFunctionsFast", "MTLMathFloatingPointFunctionsPrecise",
           "MAX_THREADS_PER_THREADGROUP", "MAX_THREADGROUP_MEMORY", "MAX_SET_BYTES", "MAX_BUFFER_BINDINGS", "SIMD_WIDTH",
           "MTLIndirectCommandBufferExecutionRangeMake", "MTLResourceOptions", "MTLPipelineOption", "MTLSize", "MTLSizeMake", "NSRange",
           "NSMakeRange", "LIB_MAGIC", "compile_library", "MTLCopyAllDevices", "MTLCreateSystemDefaultDevice", "MetalCompileError", "MetalError",
           "MetalExecutionError", "MetalHazardError",
           "MetalKernelCrash", "MetalKernelTimeout", "MetalLimitError", "MetalValidationError", "shutdown", "worker_pid",
           "get_options", "get_target", "options", "set_options", "set_target", "MTLCompileOptions", "MTLComputePipelineDescriptor",
           "MTLIndirectCommandBufferDescriptor"]
