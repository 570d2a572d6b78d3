"""What the software binding's objects share: Apple's numeric constants, Apple-GPU limits, the value types (MTLSize,
NSRange), the NSObject construction protocol, and argument checks."""
from __future__ import annotations
from alloy.runtime.metal.software.errors import MetalLimitError, MetalValidationError

# constants (Apple's numeric values)
MTLResourceCPUCacheModeDefaultCache = 0
MTLResourceCPUCacheModeWriteCombined = 1
MTLResourceStorageModeShared = 0
MTLResourceStorageModeManaged = 1 << 4
MTLResourceStorageModePrivate = 2 << 4
MTLResourceStorageModeMemoryless = 3 << 4
MTLResourceHazardTrackingModeDefault = 0
MTLResourceHazardTrackingModeUntracked = 1 << 8
MTLResourceHazardTrackingModeTracked = 2 << 8

MTLCommandBufferStatusNotEnqueued = 0
MTLCommandBufferStatusEnqueued = 1
MTLCommandBufferStatusCommitted = 2
MTLCommandBufferStatusScheduled = 3
MTLCommandBufferStatusCompleted = 4
MTLCommandBufferStatusError = 5

MTLIndirectCommandTypeDraw = 1 << 0
MTLIndirectCommandTypeDrawIndexed = 1 << 1
MTLIndirectCommandTypeDrawPatches = 1 << 2
MTLIndirectCommandTypeDrawIndexedPatches = 1 << 3
MTLIndirectCommandTypeConcurrentDispatch = 1 << 5
MTLIndirectCommandTypeConcurrentDispatchThreads = 1 << 6

MTLResourceUsageRead = 1 << 0
MTLResourceUsageWrite = 1 << 1
MTLResourceUsageSample = 1 << 2

MTLBarrierScopeBuffers = 1 << 0
MTLBarrierScopeTextures = 1 << 1
MTLBarrierScopeRenderTargets = 1 << 2

MTLDispatchTypeSerial = 0
MTLDispatchTypeConcurrent = 1

MTLGPUFamilyApple1, MTLGPUFamilyApple2, MTLGPUFamilyApple3 = 1001, 1002, 1003
MTLGPUFamilyApple4, MTLGPUFamilyApple5, MTLGPUFamilyApple6 = 1004, 1005, 1006
MTLGPUFamilyApple7, MTLGPUFamilyApple8, MTLGPUFamilyApple9 = 1007, 1008, 1009
MTLGPUFamilyMac1, MTLGPUFamilyMac2 = 2001, 2002
MTLGPUFamilyCommon1, MTLGPUFamilyCommon2, MTLGPUFamilyCommon3 = 3001, 3002, 3003
MTLGPUFamilyMetal3 = 5001

MTLLanguageVersion2_4 = (2 << 16) + 4
MTLLanguageVersion3_0 = 3 << 16
MTLLanguageVersion3_1 = (3 << 16) + 1
MTLLanguageVersion3_2 = (3 << 16) + 2
MTLMathModeSafe, MTLMathModeRelaxed, MTLMathModeFast = 0, 1, 2
MTLMathFloatingPointFunctionsFast, MTLMathFloatingPointFunctionsPrecise = 0, 1

# limits of Apple GPUs that the software device enforces
MAX_THREADS_PER_THREADGROUP = 1024
MAX_THREADGROUP_MEMORY = 32 * 1024
MAX_SET_BYTES = 4096  # setBytes accepts data smaller than this
MAX_BUFFER_BINDINGS = 31
SIMD_WIDTH = 32

def MTLResourceOptions(x: int = 0) -> int: return int(x)
def MTLPipelineOption(x: int = 0) -> int: return int(x)

class MTLSize:
  __slots__ = ("width", "height", "depth")
  def __init__(self, width: int = 0, height: int = 0, depth: int = 0): self.width, self.height, self.depth = int(width), int(height), int(depth)
  def __iter__(self): return iter((self.width, self.height, self.depth))
  def __getitem__(self, i): return (self.width, self.height, self.depth)[i]
  def __eq__(self, other): return tuple(self) == tuple(other)
  def __repr__(self): return f"<MTLSize width={self.width} height={self.height} depth={self.depth}>"

def MTLSizeMake(width: int, height: int, depth: int) -> MTLSize: return MTLSize(width, height, depth)

class NSRange:
  __slots__ = ("location", "length")
  def __init__(self, location: int = 0, length: int = 0): self.location, self.length = int(location), int(length)
  def __iter__(self): return iter((self.location, self.length))
  def __repr__(self): return f"<NSRange location={self.location} length={self.length}>"

def NSMakeRange(location: int, length: int) -> NSRange: return NSRange(location, length)

MTLIndirectCommandBufferExecutionRangeMake = NSMakeRange

class NSObject:
  """alloc().init() / new() construction and labels, as on Objective-C objects. The stand-ins keep their state in
  underscore attributes, so that it never shadows a selector (length(), device(), status(), ...)."""
  _label = None
  @classmethod
  def alloc(cls): return cls.__new__(cls)
  def init(self):
    self.__init__()
    return self
  @classmethod
  def new(cls): return cls()
  def label(self): return self._label
  def setLabel_(self, label): self._label = label

def size3(s) -> tuple[int, int, int]:
  t = tuple(int(v) for v in s)
  if len(t) != 3: raise MetalValidationError(f"expected an MTLSize (width, height, depth), got {s!r}")
  return t

def as_bytes(data, length: int) -> bytes:
  """setBytes' data as bytes: bytes, a buffer object (NumPy scalar, ctypes value) or anything with tobytes()."""
  if isinstance(data, (bytes, bytearray)): b = bytes(data)
  elif isinstance(data, str): raise MetalValidationError("setBytes needs bytes or a buffer object, not str")
  else:
    try: b = memoryview(data).cast("B").tobytes()
    except (TypeError, ValueError): b = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
  if len(b) < length: raise MetalValidationError(f"setBytes: length {length} but only {len(b)} bytes given")
  return b[:length]

def check_index(index: int, what: str) -> int:
  index = int(index)
  if not 0 <= index < MAX_BUFFER_BINDINGS:
    raise MetalLimitError(f"{what}: index {index} out of range; a kernel has at most {MAX_BUFFER_BINDINGS} "
                          f"buffer bindings (indices 0-{MAX_BUFFER_BINDINGS - 1})")
  return index
