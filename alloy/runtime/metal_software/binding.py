"""A stand-in for PyObjC's ``Metal`` module that runs Metal compute kernels on the CPU.

``from alloy.runtime.metal_software import binding as Metal`` gives the subset of the PyObjC Metal
surface a compute runtime uses (device, queue, buffers, libraries, pipelines, command buffers,
compute encoders, indirect command buffers), with the same selector spellings and the same
``(result, error)`` tuples for out-parameters.

Underneath: a library is a C++ shared object compiled from the MSL source through the shim
(compiler.py); command buffers execute, in commit order, in a persistent worker subprocess
(_worker.py) so that a crashing kernel becomes a ``MetalKernelCrash`` error on its command buffer
instead of killing the caller; buffers are memfd shared memory mapped in both processes, so
``contents().as_buffer(n)`` is a zero-copy view.

Software options (thread order, threadgroup-memory poisoning, strict mode, timeout) are set with
``set_options`` / the ``options`` context manager or ALLOY_METAL_SW_* environment variables, and
are captured when a dispatch is encoded.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import itertools
import mmap
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import compiler
from .compiler import LIB_MAGIC, MetalCompileError, MetalError, compile_library

__all__ = ["MTLCreateSystemDefaultDevice", "MTLSizeMake", "NSMakeRange", "compile_library", "LIB_MAGIC", "set_options",
           "get_options", "options", "set_target", "MetalError", "MetalCompileError", "MetalLimitError",
           "MetalValidationError", "MetalExecutionError", "MetalKernelCrash", "MetalKernelTimeout"]

# ------------------------------------------------------------------------------------------------
# errors


class MetalLimitError(MetalError):
    """A launch or encoding exceeds a limit of Apple GPUs (threads, threadgroup memory, setBytes, bindings)."""


class MetalValidationError(MetalError):
    """Misuse that Metal's validation layer would report (unbound argument, missing pipeline, ...)."""


class MetalExecutionError(MetalError):
    """A command buffer failed while executing (strict-mode violation, runtime error)."""


class MetalKernelCrash(MetalExecutionError):
    """The kernel killed the worker process (SIGFPE, SIGSEGV, ...). A fresh worker runs later work."""

    def __init__(self, message: str, kernel: str | None = None, signal_name: str | None = None,
                 returncode: int | None = None):
        super().__init__(message)
        self.kernel, self.signal, self.returncode = kernel, signal_name, returncode


class MetalKernelTimeout(MetalKernelCrash):
    """A command buffer ran past the configured timeout; its worker was killed."""


# ------------------------------------------------------------------------------------------------
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

MAX_THREADS_PER_THREADGROUP = 1024
MAX_THREADGROUP_MEMORY = 32 * 1024
MAX_SET_BYTES = 4096  # setBytes accepts data smaller than this
MAX_BUFFER_BINDINGS = 31
SIMD_WIDTH = 32
MAX_INFLIGHT = 64


def MTLResourceOptions(x: int = 0) -> int:
    return int(x)


def MTLPipelineOption(x: int = 0) -> int:
    return int(x)


class MTLSize:
    __slots__ = ("width", "height", "depth")

    def __init__(self, width: int = 0, height: int = 0, depth: int = 0):
        self.width, self.height, self.depth = int(width), int(height), int(depth)

    def __iter__(self):
        return iter((self.width, self.height, self.depth))

    def __getitem__(self, i):
        return (self.width, self.height, self.depth)[i]

    def __eq__(self, other):
        return tuple(self) == tuple(other)

    def __repr__(self):
        return f"<MTLSize width={self.width} height={self.height} depth={self.depth}>"


def MTLSizeMake(width: int, height: int, depth: int) -> MTLSize:
    return MTLSize(width, height, depth)


class NSRange:
    __slots__ = ("location", "length")

    def __init__(self, location: int = 0, length: int = 0):
        self.location, self.length = int(location), int(length)

    def __iter__(self):
        return iter((self.location, self.length))

    def __repr__(self):
        return f"<NSRange location={self.location} length={self.length}>"


def NSMakeRange(location: int, length: int) -> NSRange:
    return NSRange(location, length)


MTLIndirectCommandBufferExecutionRangeMake = NSMakeRange

# ------------------------------------------------------------------------------------------------
# software options

_ORDERS = {"forward": 0, "reverse": 1, "shuffled": 2}


def _env_bool(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    return default if v is None else v.strip().lower() not in ("", "0", "false", "no", "off")


_options = {
    "order": os.environ.get("ALLOY_METAL_SW_ORDER", "forward"),
    "poison": _env_bool("ALLOY_METAL_SW_POISON", True),
    "strict": _env_bool("ALLOY_METAL_SW_STRICT", False),
    "seed": int(os.environ.get("ALLOY_METAL_SW_SEED", "0")),
    "timeout": float(os.environ["ALLOY_METAL_SW_TIMEOUT"]) if os.environ.get("ALLOY_METAL_SW_TIMEOUT") else None,
}
_target = os.environ.get("ALLOY_METAL_SW_TARGET", "Apple7")


def set_options(**kw) -> None:
    """order: 'forward' | 'reverse' | 'shuffled' (thread order inside a threadgroup); poison: fill
    threadgroup memory with 0xFF at every group start; strict: fail on divergent barriers and
    partial-simdgroup simd functions; seed: shuffle seed; timeout: seconds a wait may take before
    the worker is killed (None: no limit). Captured when a dispatch is encoded."""
    for k, v in kw.items():
        if k not in _options: raise TypeError(f"unknown software Metal option {k!r}; known: {sorted(_options)}")
        if k == "order" and v not in _ORDERS: raise ValueError(f"order must be one of {sorted(_ORDERS)}, not {v!r}")
        _options[k] = v


def get_options() -> dict:
    return dict(_options)


@contextlib.contextmanager
def options(**kw):
    old = get_options()
    set_options(**kw)
    try:
        yield
    finally:
        _options.clear()
        _options.update(old)


def set_target(family: str) -> None:
    """The Apple GPU family the device claims to be, e.g. 'Apple7' (name: 'Apple7 (software)')."""
    if not family.startswith("Apple") or not family[5:].isdigit():
        raise ValueError(f"target must look like 'Apple7', not {family!r}")
    global _target
    _target = family


def get_target() -> str:
    return _target


# ------------------------------------------------------------------------------------------------
# worker process and the host side of the protocol (see _worker.py)

WORKER_PY = Path(__file__).resolve().parent / "_worker.py"


def _send_msg(sock: socket.socket, obj) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("<I", len(body)) + body)


def _recv_exact(sock: socket.socket, n: int):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except ConnectionResetError:
            return None
        if k == 0: return None
        got += k
    return buf


def _recv_msg(sock: socket.socket):
    head = _recv_exact(sock, 4)
    if head is None: return None
    body = _recv_exact(sock, struct.unpack("<I", head)[0])
    return None if body is None else pickle.loads(body)


def _readable(sock: socket.socket, timeout: float) -> bool:
    """poll, not select: every buffer holds a memfd, so socket numbers can pass select's FD_SETSIZE (1024)."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(max(timeout, 0.0) * 1000))


class _WorkerProcess:
    """One worker subprocess: its sockets, status page and what it has already been sent."""

    def __init__(self):
        rt = compiler.runtime_path()
        self.status_fd = os.memfd_create("alloy-mtl-status")
        os.ftruncate(self.status_fd, 4096)
        self.status = mmap.mmap(self.status_fd, 4096)
        self.data, child_data = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.fds, child_fds = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        nthreads = int(os.environ.get("ALLOY_METAL_SW_THREADS", "0") or 0) or (os.cpu_count() or 1)
        stack_kb = int(os.environ.get("ALLOY_METAL_SW_STACK_KB", "128"))
        passed = (child_data.fileno(), child_fds.fileno(), self.status_fd)
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-E", str(WORKER_PY), rt, *map(str, passed), str(nthreads), str(stack_kb)],
            pass_fds=passed, stdin=subprocess.DEVNULL)
        child_data.close()
        child_fds.close()
        self.known_buffers: set[int] = set()
        self.known_pipelines: set[int] = set()
        self.frees: list[int] = []

    def crash_site(self) -> tuple[int, str]:
        seq, _, n = struct.unpack_from("<QII", self.status, 0)
        return seq, bytes(self.status[16:16 + min(n, 2000)]).decode(errors="replace")

    def close(self, kill: bool = False) -> int | None:
        for s in (self.data, self.fds):
            with contextlib.suppress(OSError): s.close()
        if kill and self.proc.poll() is None: self.proc.kill()
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        with contextlib.suppress(OSError): os.close(self.status_fd)
        return rc


_SIGNAL_HINTS = {"SIGFPE": " (integer division by zero or overflow?)",
                 "SIGSEGV": " (out-of-bounds, misaligned or unbound-buffer access?)",
                 "SIGBUS": " (misaligned or out-of-bounds access?)", "SIGILL": " (undefined behaviour trap?)"}


class _Host:
    """Sends committed command buffers to the worker in order and collects their completions."""

    def __init__(self):
        self.lock = threading.RLock()
        self.worker: _WorkerProcess | None = None
        self.inflight: collections.deque = collections.deque()
        self.seq = itertools.count(1)
        self.pid = os.getpid()
        self.victimless_deaths = 0

    def _worker(self) -> _WorkerProcess:
        if self.pid != os.getpid():  # forked: the worker belongs to the parent process
            self.worker, self.inflight, self.pid = None, collections.deque(), os.getpid()
        if self.worker is None: self.worker = _WorkerProcess()
        return self.worker

    def worker_pid(self) -> int | None:
        return None if self.worker is None else self.worker.proc.pid

    def buffer_freed(self, bid: int) -> None:
        w = self.worker
        if w is not None and bid in w.known_buffers:
            w.known_buffers.discard(bid)
            w.frees.append(bid)

    def submit(self, cb: "_CommandBuffer") -> None:
        with self.lock:
            self._poll()
            while len(self.inflight) >= MAX_INFLIGHT: self._read_one(None)
            cb._seq = next(self.seq)
            self._send(cb)

    def _send(self, cb: "_CommandBuffer") -> None:
        w = self._worker()
        self.inflight.append(cb)
        try:
            buffers, pipelines = cb._resources()
            new = [b for b in buffers if b._id not in w.known_buffers]
            packets = 0
            for i in range(0, len(new), 200):
                chunk = new[i:i + 200]
                socket.send_fds(w.fds, [pickle.dumps([(b._id, b._alloc) for b in chunk])], [b._fd for b in chunk])
                w.known_buffers.update(b._id for b in chunk)
                packets += 1
            new_psos = [(p._id, p._so_path, p._name, int(p._fiber)) for p in pipelines if p._id not in w.known_pipelines]
            w.known_pipelines.update(p[0] for p in new_psos)
            frees, w.frees = w.frees, []
            _send_msg(w.data, ("run", cb._seq, packets, frees, new_psos, cb._wire_items()))
        except OSError:
            self._handle_death()

    def _read_one(self, timeout: float | None) -> bool:
        """Reads one completion (or notices the worker's death). False when timeout passed first."""
        w = self.worker
        if w is None: return True
        if timeout is not None:
            if not _readable(w.data, timeout): return False
        msg = _recv_msg(w.data)
        if msg is None:
            self._handle_death()
            return True
        self._complete(msg)
        return True

    def _complete(self, msg) -> None:
        _, seq, err, t0, t1 = msg
        cb = self.inflight.popleft()
        assert cb._seq == seq, f"software Metal: completion {seq} for command buffer {cb._seq}"
        self.victimless_deaths = 0
        cb._finish(MetalExecutionError(err) if err else None, t0, t1)

    def _poll(self) -> None:
        while self.worker is not None and self.inflight:
            if not _readable(self.worker.data, 0.0): return
            self._read_one(None)

    def poll(self) -> None:
        with self.lock: self._poll()

    def wait(self, cb: "_CommandBuffer") -> None:
        with self.lock:
            timeout = _options["timeout"] if cb._timeout is None else cb._timeout
            deadline = None if timeout is None else time.monotonic() + timeout
            while not cb._done:
                remaining = None if deadline is None else deadline - time.monotonic()
                if not self._read_one(remaining):
                    self._handle_death(timeout=timeout)

    def _handle_death(self, timeout: float | None = None) -> None:
        w, self.worker = self.worker, None
        if w is None: return
        if timeout is not None: w.proc.kill()
        # completions the worker sent before dying are still in the socket
        with contextlib.suppress(OSError):
            w.data.setblocking(True)
            while self.inflight:
                msg = _recv_msg(w.data)
                if msg is None: break
                self._complete(msg)
        seq, name = w.crash_site()
        rc = w.close(kill=True)
        pending = list(self.inflight)
        self.inflight.clear()
        victim = next((cb for cb in pending if cb._seq == seq), None) if seq else None
        if victim is None and pending:
            self.victimless_deaths += 1
            if self.victimless_deaths >= 3: victim = pending[0]
        if victim is not None:
            self.victimless_deaths = 0
            sig = signal.Signals(-rc).name if rc is not None and rc < 0 and -rc in signal.valid_signals() else None
            how = sig or f"exit code {rc}"
            if timeout is not None:
                what = f"kernel '{name}'" if name else "a command buffer"
                err = MetalKernelTimeout(f"{what} did not finish within {timeout} s; the software Metal worker was "
                                         f"killed (infinite loop or a lane spinning without a barrier?)", name, sig, rc)
            elif name:
                err = MetalKernelCrash(f"kernel '{name}' died with {how}{_SIGNAL_HINTS.get(sig, '')}", name, sig, rc)
            else:
                err = MetalKernelCrash(f"the software Metal worker died with {how} while executing a command buffer",
                                       None, sig, rc)
            victim._finish(err, 0.0, 0.0)
        for cb in pending:  # later command buffers run again on a fresh worker
            if cb is not victim: self._send(cb)

    def shutdown(self) -> None:
        with self.lock:
            w, self.worker = self.worker, None
            if w is not None and self.pid == os.getpid(): w.close()


_HOST = _Host()
atexit.register(_HOST.shutdown)


def worker_pid() -> int | None:
    """Process id of the current worker subprocess (None before the first commit)."""
    return _HOST.worker_pid()


def shutdown() -> None:
    """Stops the worker; the next commit starts a new one."""
    _HOST.shutdown()


# ------------------------------------------------------------------------------------------------
# API objects


class _NSObject:
    """alloc().init() / new() construction and labels, as on Objective-C objects."""
    _label = None

    @classmethod
    def alloc(cls):
        return cls.__new__(cls)

    def init(self):
        self.__init__()
        return self

    @classmethod
    def new(cls):
        return cls()

    def label(self):
        return self._label

    def setLabel_(self, label):
        self._label = label


class MTLCompileOptions(_NSObject):
    def __init__(self):
        self._fast_math, self._math_mode, self._lang, self._macros = True, MTLMathModeFast, MTLLanguageVersion3_1, {}

    def setFastMathEnabled_(self, v): self._fast_math = bool(v)
    def fastMathEnabled(self): return self._fast_math
    def setMathMode_(self, v): self._math_mode = int(v)
    def mathMode(self): return self._math_mode
    def setMathFloatingPointFunctions_(self, v): pass
    def setLanguageVersion_(self, v): self._lang = int(v)
    def languageVersion(self): return self._lang
    def setPreprocessorMacros_(self, d): self._macros = dict(d or {})
    def preprocessorMacros(self): return dict(self._macros)


class MTLComputePipelineDescriptor(_NSObject):
    def __init__(self):
        self._function, self._icb = None, False

    def setComputeFunction_(self, fn): self._function = fn
    def computeFunction(self): return self._function
    def setSupportIndirectCommandBuffers_(self, v): self._icb = bool(v)
    def supportIndirectCommandBuffers(self): return self._icb
    def setMaxTotalThreadsPerThreadgroup_(self, v): pass
    def setThreadGroupSizeIsMultipleOfThreadExecutionWidth_(self, v): pass


class MTLIndirectCommandBufferDescriptor(_NSObject):
    def __init__(self):
        self._types, self._inherit_buffers, self._inherit_pso = 0, True, True
        self._max_bind = MAX_BUFFER_BINDINGS

    def setCommandTypes_(self, t): self._types = int(t)
    def commandTypes(self): return self._types
    def setInheritBuffers_(self, v): self._inherit_buffers = bool(v)
    def inheritBuffers(self): return self._inherit_buffers
    def setInheritPipelineState_(self, v): self._inherit_pso = bool(v)
    def inheritPipelineState(self): return self._inherit_pso
    def setMaxKernelBufferBindCount_(self, n):
        if not 0 <= int(n) <= MAX_BUFFER_BINDINGS:
            raise MetalLimitError(f"maxKernelBufferBindCount {n} exceeds the limit of {MAX_BUFFER_BINDINGS}")
        self._max_bind = int(n)
    def maxKernelBufferBindCount(self): return self._max_bind
    def setMaxKernelThreadgroupMemoryBindCount_(self, n): pass


class _Contents:
    """What ``buffer.contents()`` returns: like PyObjC's objc.varlist, ``as_buffer(n)`` gives a
    writable memoryview of the first n bytes."""

    def __init__(self, buf: "_Buffer"):
        self._buf = buf

    def as_buffer(self, n: int) -> memoryview:
        if n > self._buf._alloc: raise IndexError(f"as_buffer({n}) past the end of a {self._buf._length}-byte buffer")
        return memoryview(self._buf._mm)[:n]

    def __getitem__(self, i):
        return self._buf._mm[i]


class _Buffer(_NSObject):
    _ids = itertools.count(1)

    def __init__(self, device: "_Device", length: int, options: int):
        self._device, self._length, self._options = device, int(length), int(options)
        self._id = next(self._ids)
        self._alloc = max(self._length, 1)
        self._fd = os.memfd_create(f"alloy-mtl-buffer-{self._id}")
        try:
            os.ftruncate(self._fd, self._alloc)
            self._mm = mmap.mmap(self._fd, self._alloc)
        except BaseException:
            os.close(self._fd)
            raise

    def contents(self): return _Contents(self)
    def length(self): return self._length
    def allocatedSize(self): return self._alloc
    def device(self): return self._device
    def storageMode(self): return (self._options >> 4) & 0xF
    def resourceOptions(self): return self._options
    def didModifyRange_(self, r): pass

    def gpuAddress(self) -> int:
        """Host address of the mapping (the worker maps the same memory at its own address)."""
        return ctypes.addressof(ctypes.c_char.from_buffer(self._mm))

    def __del__(self):
        fd = getattr(self, "_fd", None)
        if fd is None: return
        self._fd = None
        with contextlib.suppress(Exception):
            os.close(fd)
            _HOST.buffer_freed(self._id)


class _Function(_NSObject):
    def __init__(self, library: "_Library", name: str):
        self._library, self._name = library, name

    def name(self): return self._name
    def device(self): return self._library._device
    def functionType(self): return 3  # MTLFunctionTypeKernel


class _Library(_NSObject):
    def __init__(self, device: "_Device", data: bytes):
        self._device, self._data = device, data
        self._info = compiler.library_info(data)
        self._so_path = compiler.shared_object_path(data)

    def functionNames(self): return list(self._info.entries)
    def device(self): return self._device

    def newFunctionWithName_(self, name: str):
        return _Function(self, str(name)) if str(name) in self._info.entries else None


class _ComputePipelineState(_NSObject):
    _ids = itertools.count(1)

    def __init__(self, device: "_Device", fn: _Function, tg_memory: int):
        self._id = next(self._ids)
        self._device, self._function, self._name = device, fn, fn._name
        lib = fn._library
        self._so_path, self._fiber = lib._so_path, lib._info.uses_sync
        self._nargs, self._tg_memory = lib._info.entries[fn._name], tg_memory

    def maxTotalThreadsPerThreadgroup(self): return MAX_THREADS_PER_THREADGROUP
    def threadExecutionWidth(self): return SIMD_WIDTH
    def staticThreadgroupMemoryLength(self): return self._tg_memory
    def supportIndirectCommandBuffers(self): return True
    def device(self): return self._device
    def gpuResourceID(self): return self._id

    def __repr__(self):
        return f"<software MTLComputePipelineState {self._name!r} mode={'fiber' if self._fiber else 'loop'}>"


def _size3(s) -> tuple[int, int, int]:
    t = tuple(int(v) for v in s)
    if len(t) != 3: raise MetalValidationError(f"expected an MTLSize (width, height, depth), got {s!r}")
    return t


def _as_bytes(data, length: int) -> bytes:
    if isinstance(data, (bytes, bytearray)):
        b = bytes(data)
    elif isinstance(data, str):
        raise MetalValidationError("setBytes needs bytes or a buffer object, not str")
    else:
        try:
            b = memoryview(data).cast("B").tobytes()
        except (TypeError, ValueError):
            b = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
    if len(b) < length: raise MetalValidationError(f"setBytes: length {length} but only {len(b)} bytes given")
    return b[:length]


def _check_index(index: int, what: str) -> int:
    index = int(index)
    if not 0 <= index < MAX_BUFFER_BINDINGS:
        raise MetalLimitError(f"{what}: index {index} out of range; a kernel has at most {MAX_BUFFER_BINDINGS} "
                              f"buffer bindings (indices 0-{MAX_BUFFER_BINDINGS - 1})")
    return index


class _Dispatch:
    """One encoded dispatch: pipeline, sizes, a snapshot of the bindings and the software options."""
    __slots__ = ("pso", "groups", "tg", "grid", "nonuniform", "bindings", "order", "poison", "strict", "seed")

    def __init__(self, pso, groups, tg, grid, nonuniform, bindings):
        self.pso, self.groups, self.tg, self.grid, self.nonuniform = pso, groups, tg, grid, nonuniform
        self.bindings = dict(bindings)
        o = _options
        self.order, self.poison, self.strict, self.seed = _ORDERS[o["order"]], int(bool(o["poison"])), \
            int(bool(o["strict"])), int(o["seed"]) & 0xFFFFFFFFFFFFFFFF

    def wire(self):
        binds = []
        for idx, b in sorted(self.bindings.items()):
            if isinstance(b, bytes): binds.append((idx, 1, b, 0))
            elif b[0] is None: binds.append((idx, 2, None, 0))
            else: binds.append((idx, 0, b[0]._id, b[1]))
        return ("dispatch", self.pso._name, self.pso._id, self.groups, self.tg, self.grid, self.nonuniform, binds,
                self.order, self.poison, self.strict, self.seed)


def _make_dispatch(pso, bindings, groups, tg, grid, nonuniform, where: str):
    if pso is None: raise MetalValidationError(f"{where}: no compute pipeline state set")
    if 0 in groups or (nonuniform and 0 in grid): return None  # an empty grid is a no-op, as on Metal
    n = tg[0] * tg[1] * tg[2]
    limit = pso.maxTotalThreadsPerThreadgroup()
    if n == 0 or n > limit or max(tg) > MAX_THREADS_PER_THREADGROUP:
        raise MetalLimitError(f"{where}: threadgroup size {tg[0]}x{tg[1]}x{tg[2]} = {n} threads is invalid for kernel "
                              f"'{pso._name}' (maxTotalThreadsPerThreadgroup {limit}, threadExecutionWidth "
                              f"{SIMD_WIDTH}, staticThreadgroupMemoryLength {pso._tg_memory})")
    if any(v >= 1 << 32 for v in (*groups, *grid)):
        raise MetalLimitError(f"{where}: grid {groups} x {tg} does not fit 32-bit thread positions")
    for i in range(pso._nargs):
        if i not in bindings:
            raise MetalValidationError(f"{where}: kernel '{pso._name}' takes {pso._nargs} positional buffer/constant "
                                       f"arguments but index {i} is not bound")
    return _Dispatch(pso, groups, tg, grid, nonuniform, bindings)


class _ComputeCommandEncoder(_NSObject):
    def __init__(self, cb: "_CommandBuffer"):
        self._cb, self._pso, self._bindings, self._ended = cb, None, {}, False

    def _add(self, d):
        if self._ended: raise MetalValidationError("encoder used after endEncoding")
        if d is not None: self._cb._items.append(d)

    def setComputePipelineState_(self, pso): self._pso = pso

    def setBuffer_offset_atIndex_(self, buf, offset, index):
        index = _check_index(index, "setBuffer")
        if buf is not None and not 0 <= int(offset) <= buf._length:
            raise MetalValidationError(f"setBuffer: offset {offset} outside a {buf._length}-byte buffer")
        self._bindings[index] = (buf, int(offset))

    def setBufferOffset_atIndex_(self, offset, index):
        index = _check_index(index, "setBufferOffset")
        b = self._bindings.get(index)
        if b is None or isinstance(b, bytes): raise MetalValidationError(f"setBufferOffset: no buffer at index {index}")
        self._bindings[index] = (b[0], int(offset))

    def setBuffers_offsets_withRange_(self, bufs, offsets, rng):
        loc, length = tuple(rng)
        for i in range(length): self.setBuffer_offset_atIndex_(bufs[i], offsets[i], loc + i)

    def setBytes_length_atIndex_(self, data, length, index):
        index = _check_index(index, "setBytes")
        if int(length) >= MAX_SET_BYTES:
            raise MetalLimitError(f"setBytes: {length} bytes is too large; setBytes only takes data smaller than "
                                  f"{MAX_SET_BYTES} bytes (4 KiB); put it in a buffer")
        self._bindings[index] = _as_bytes(data, int(length))

    def setThreadgroupMemoryLength_atIndex_(self, length, index):
        raise NotImplementedError("software Metal: dynamic threadgroup memory ([[threadgroup(n)]]) is not supported")

    def dispatchThreadgroups_threadsPerThreadgroup_(self, groups, tg):
        g, t = _size3(groups), _size3(tg)
        self._add(_make_dispatch(self._pso, self._bindings, g, t, tuple(a * b for a, b in zip(g, t)), 0,
                                 "dispatchThreadgroups"))

    def dispatchThreads_threadsPerThreadgroup_(self, grid, tg):
        n, t = _size3(grid), _size3(tg)
        g = tuple(-(-a // b) if b else 0 for a, b in zip(n, t))
        self._add(_make_dispatch(self._pso, self._bindings, g, t, n, 1, "dispatchThreads"))

    def executeCommandsInBuffer_withRange_(self, icb, rng):
        loc, length = tuple(rng)
        if loc < 0 or loc + length > len(icb._commands):
            raise MetalValidationError(f"executeCommandsInBuffer: range {loc}+{length} outside an indirect command "
                                       f"buffer of {len(icb._commands)} commands")
        for c in icb._commands[loc:loc + length]:
            if c._sizes is None: continue
            pso = self._pso if icb._inherit_pso else c._pso
            bindings = self._bindings if icb._inherit_buffers else c._bindings
            g, t, grid, nonuniform = c._sizes
            self._add(_make_dispatch(pso, bindings, g, t, grid, nonuniform, "indirect compute command"))

    def memoryBarrierWithScope_(self, scope): pass
    def memoryBarrierWithResources_count_(self, resources, count): pass
    def useResource_usage_(self, resource, usage): pass
    def useResources_count_usage_(self, resources, count, usage): pass
    def useHeap_(self, heap): pass
    def dispatchType(self): return MTLDispatchTypeSerial

    def endEncoding(self): self._ended = True


class _BlitCommandEncoder(_NSObject):
    def __init__(self, cb: "_CommandBuffer"):
        self._cb = cb

    def copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(self, src, soff, dst, doff, size):
        soff, doff, size = int(soff), int(doff), int(size)
        if soff + size > src._length or doff + size > dst._length:
            raise MetalValidationError(f"blit copy of {size} bytes runs past the end of a buffer")
        self._cb._items.append(("copy", src, soff, dst, doff, size))

    def fillBuffer_range_value_(self, buf, rng, value):
        loc, length = tuple(rng)
        if loc + length > buf._length: raise MetalValidationError("fillBuffer range runs past the end of the buffer")
        self._cb._items.append(("fill", buf, int(loc), int(length), int(value) & 0xFF))

    def synchronizeResource_(self, resource): pass
    def endEncoding(self): pass


class _CommandBuffer(_NSObject):
    def __init__(self, queue: "_CommandQueue"):
        self._queue, self._items, self._status, self._error = queue, [], MTLCommandBufferStatusNotEnqueued, None
        self._seq, self._done, self._handlers, self._timeout = 0, False, [], None
        self._gpu_start = self._gpu_end = 0.0
        self._commit_time = self._complete_time = 0.0

    def computeCommandEncoder(self): return _ComputeCommandEncoder(self)
    def computeCommandEncoderWithDispatchType_(self, t): return _ComputeCommandEncoder(self)
    def blitCommandEncoder(self): return _BlitCommandEncoder(self)
    def commandQueue(self): return self._queue
    def device(self): return self._queue._device
    def enqueue(self): pass

    def _resources(self):
        buffers, pipelines = {}, {}
        for it in self._items:
            if isinstance(it, _Dispatch):
                pipelines[it.pso._id] = it.pso
                for b in it.bindings.values():
                    if not isinstance(b, bytes) and b[0] is not None: buffers[b[0]._id] = b[0]
            else:
                for b in it[1:]:
                    if isinstance(b, _Buffer): buffers[b._id] = b
        return list(buffers.values()), list(pipelines.values())

    def _wire_items(self):
        out = []
        for it in self._items:
            if isinstance(it, _Dispatch): out.append(it.wire())
            elif it[0] == "copy": out.append(("copy", it[1]._id, it[2], it[3]._id, it[4], it[5]))
            else: out.append(("fill", it[1]._id, it[2], it[3], it[4]))
        return out

    def commit(self):
        if self._status != MTLCommandBufferStatusNotEnqueued:
            raise MetalValidationError("commit: command buffer was already committed")
        self._status = MTLCommandBufferStatusCommitted
        self._commit_time = time.clock_gettime(time.CLOCK_MONOTONIC)
        _HOST.submit(self)

    def _finish(self, error, t0: float, t1: float):
        self._error, self._gpu_start, self._gpu_end = error, t0, t1
        self._status = MTLCommandBufferStatusError if error is not None else MTLCommandBufferStatusCompleted
        self._complete_time = time.clock_gettime(time.CLOCK_MONOTONIC)
        self._done = True
        self._items = []  # drop references to buffers and pipelines
        for h in self._handlers: h(self)

    def waitUntilCompleted(self):
        if self._status == MTLCommandBufferStatusNotEnqueued:
            raise MetalValidationError("waitUntilCompleted on a command buffer that was never committed")
        _HOST.wait(self)

    def waitUntilScheduled(self): pass

    def addCompletedHandler_(self, fn):
        """Handlers run on the calling thread when the host notices completion (wait/status/commit)."""
        if self._done: fn(self)
        else: self._handlers.append(fn)

    def status(self):
        if not self._done and self._status != MTLCommandBufferStatusNotEnqueued: _HOST.poll()
        return self._status

    def error(self):
        if not self._done and self._status != MTLCommandBufferStatusNotEnqueued: _HOST.poll()
        return self._error

    def GPUStartTime(self): return self._gpu_start
    def GPUEndTime(self): return self._gpu_end
    def kernelStartTime(self): return self._commit_time
    def kernelEndTime(self): return self._complete_time


class _CommandQueue(_NSObject):
    def __init__(self, device: "_Device"):
        self._device = device

    def commandBuffer(self): return _CommandBuffer(self)
    def commandBufferWithUnretainedReferences(self): return _CommandBuffer(self)
    def device(self): return self._device


class _IndirectComputeCommand:
    def __init__(self, icb: "_IndirectCommandBuffer"):
        self._icb = icb
        self.reset()

    def reset(self):
        self._pso, self._bindings, self._sizes, self._barrier = None, {}, None, False

    def setComputePipelineState_(self, pso): self._pso = pso

    def setKernelBuffer_offset_atIndex_(self, buf, offset, index):
        index = _check_index(index, "setKernelBuffer")
        if index >= self._icb._max_bind:
            raise MetalLimitError(f"setKernelBuffer: index {index} >= maxKernelBufferBindCount {self._icb._max_bind}")
        self._bindings[index] = (buf, int(offset))

    def concurrentDispatchThreadgroups_threadsPerThreadgroup_(self, groups, tg):
        g, t = _size3(groups), _size3(tg)
        self._sizes = (g, t, tuple(a * b for a, b in zip(g, t)), 0)

    def concurrentDispatchThreads_threadsPerThreadgroup_(self, grid, tg):
        n, t = _size3(grid), _size3(tg)
        self._sizes = (tuple(-(-a // b) if b else 0 for a, b in zip(n, t)), t, n, 1)

    def setThreadgroupMemoryLength_atIndex_(self, length, index):
        raise NotImplementedError("software Metal: dynamic threadgroup memory is not supported")

    def setBarrier(self): self._barrier = True  # commands run one after another anyway
    def clearBarrier(self): self._barrier = False


class _IndirectCommandBuffer(_NSObject):
    def __init__(self, device, desc: MTLIndirectCommandBufferDescriptor, count: int):
        self._device, self._inherit_buffers, self._inherit_pso = device, desc._inherit_buffers, desc._inherit_pso
        self._max_bind = desc._max_bind
        self._commands = [_IndirectComputeCommand(self) for _ in range(int(count))]

    def size(self): return len(self._commands)
    def indirectComputeCommandAtIndex_(self, i): return self._commands[int(i)]

    def resetWithRange_(self, rng):
        loc, length = tuple(rng)
        for c in self._commands[loc:loc + length]: c.reset()


class _Device(_NSObject):
    def name(self): return f"{_target} (software)"
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
        family, level = int(family), int(_target[5:])
        if 1001 <= family <= 1009: return family - 1000 <= level
        if family in (MTLGPUFamilyCommon1, MTLGPUFamilyCommon2, MTLGPUFamilyCommon3): return True
        if family == MTLGPUFamilyMetal3: return level >= 7
        return False

    def newCommandQueue(self): return _CommandQueue(self)
    def newCommandQueueWithMaxCommandBufferCount_(self, n): return _CommandQueue(self)

    def newBufferWithLength_options_(self, length, options):
        return _Buffer(self, length, options)

    def newBufferWithBytes_length_options_(self, data, length, options):
        b = _Buffer(self, length, options)
        b.contents().as_buffer(int(length))[:] = _as_bytes(data, int(length))
        return b

    def newBufferWithBytesNoCopy_length_options_deallocator_(self, *args):
        raise NotImplementedError("software Metal: buffers must live in shared memory the worker maps; "
                                  "use newBufferWithLength_options_ and write through contents()")

    def newLibraryWithSource_options_error_(self, source, opts, error):
        try:
            data = compile_library(str(source), getattr(opts, "_macros", None) or None)
            return _Library(self, data), None
        except MetalCompileError as e:
            return None, e

    def newLibraryWithData_error_(self, data, error):
        try:
            return _Library(self, bytes(data)), None
        except (ValueError, TypeError) as e:
            return None, MetalError(f"newLibraryWithData: {e}")

    def newComputePipelineStateWithFunction_error_(self, fn, error):
        if fn is None: return None, MetalValidationError("newComputePipelineStateWithFunction: function is None")
        tg = fn._library._info.threadgroup_memory(fn._name)
        if tg > MAX_THREADGROUP_MEMORY:
            return None, MetalLimitError(f"kernel '{fn._name}' declares {tg} bytes of threadgroup memory; the limit "
                                         f"is {MAX_THREADGROUP_MEMORY} bytes (32 KiB)")
        return _ComputePipelineState(self, fn, tg), None

    def newComputePipelineStateWithDescriptor_options_reflection_error_(self, desc, options, reflection, error):
        return self.newComputePipelineStateWithFunction_error_(desc.computeFunction(), error)

    def newIndirectCommandBufferWithDescriptor_maxCommandCount_options_(self, desc, count, options):
        return _IndirectCommandBuffer(self, desc, count)


_DEVICE: _Device | None = None


def MTLCreateSystemDefaultDevice() -> _Device:
    global _DEVICE
    if _DEVICE is None: _DEVICE = _Device()
    return _DEVICE


def MTLCopyAllDevices() -> list:
    return [MTLCreateSystemDefaultDevice()]
