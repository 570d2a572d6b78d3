"""CUDACompiler: CUDA C through NVRTC, PTX through nvJitLink (ptxas alone), either to a cubin for one architecture;
needs no GPU. nvrtc_version and nvjitlink_version name the libraries (part of the compiler's identity, the cache key)."""
from __future__ import annotations
import functools, re, sys
from cuda.bindings import nvrtc
from alloy.helpers import DEBUG
from alloy.renderer.cuda_wgmma import ARCH_SPECIFIC
from alloy.renderer.ptx import is_ptx
from alloy.runtime.device import CompileError, Compiler
from alloy.runtime.cuda.driver import NVRTC_SUCCESS, nvrtc_check
from alloy.runtime.cuda.tools import cuda_include_dir

@functools.lru_cache(None)
def nvrtc_version() -> tuple[int, int]:
  return tuple(nvrtc_check(nvrtc.nvrtcVersion(), "nvrtcVersion"))

@functools.lru_cache(None)
def nvjitlink_version() -> tuple[int, int] | None:
  """nvJitLink's version where its library loads (pip nvidia-nvjitlink, or a CUDA toolkit's), else None."""
  try:
    from cuda.bindings import nvjitlink
    return tuple(nvjitlink.version())
  except Exception: return None

class CUDACompiler(Compiler):
  """CUDA C or PTX source -> cubin for one architecture. Needs no GPU: CUDACompiler("sm_90").
  CUDA C goes through NVRTC; PTX (text starting with .version) through nvJitLink, which runs ptxas alone."""
  def __init__(self, arch: str = "sm_90", extra_flags: tuple[str, ...] = ()):
    if not re.fullmatch(r"sm_\d+[af]?", arch): raise ValueError(f"arch must look like sm_90, got {arch!r}")
    self.arch = arch
    # IEEE-ish: no --use_fast_math (precise division/sqrt, denormals kept); FMA contraction stays on, as in nvcc.
    # -minimal: no texture, surface or device-runtime declarations to parse (kernels use none): faster compiles
    self.flags = ("-default-device", "-std=c++17", "-minimal", *extra_flags)
    self.include_dir = cuda_include_dir()
    major, minor = nvrtc_version()
    self.assembles_ptx = (linker := nvjitlink_version()) is not None
    self.identity = f"nvrtc-{major}.{minor} nvjitlink-{linker} {arch} {' '.join(self.flags)}"

  def _options(self, arch: str) -> list[bytes]:
    opts = [f"--gpu-architecture={arch}", *self.flags]
    if self.include_dir: opts.append(f"-I{self.include_dir}")
    return [o.encode() for o in opts]

  def _compile(self, source: str, arch: str, ptx: bool) -> bytes:
    prog = nvrtc_check(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []), "nvrtcCreateProgram")
    try:
      opts = self._options(arch)
      err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
      log = self._log(prog)
      if err != NVRTC_SUCCESS: raise CompileError(log or str(err), source)
      if DEBUG >= 3 and log.strip(): print(log, file=sys.stderr)
      get_size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx else (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
      out = bytearray(nvrtc_check(get_size(prog), "nvrtcGet size"))   # writable: NVRTC writes into it
      nvrtc_check(get(prog, out), "nvrtcGet binary")
      return bytes(out)
    finally: nvrtc.nvrtcDestroyProgram(prog)

  @staticmethod
  def _log(prog) -> str:
    # a bytearray, not b" " * size: NVRTC writes into the buffer, and for an empty log (size 1) b" " * 1 is
    # Python's shared one-byte object, whose NUL then turned up in unrelated strings (a C kernel's source read
    # "floatpanel0" after an earlier CUDA compile in the same process)
    log = bytearray(nvrtc_check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize"))
    nvrtc_check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
    return log.rstrip(b"\0").decode(errors="replace")

  def _assemble(self, source: str) -> bytes:
    from cuda.bindings import nvjitlink
    handle = nvjitlink.create(1, [f"-arch={self.arch}"])
    try:
      try:
        data = source.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
      except nvjitlink.nvJitLinkError as e:
        log = bytearray(nvjitlink.get_error_log_size(handle))
        nvjitlink.get_error_log(handle, log)
        raise CompileError(f"ptxas (nvJitLink) failed: {e}\n{log.rstrip(bytes(1)).decode(errors='replace')}", source) from None
      out = bytearray(nvjitlink.get_linked_cubin_size(handle))
      nvjitlink.get_linked_cubin(handle, out)
      return bytes(out)
    finally: nvjitlink.destroy(handle)

  def compile(self, source: str) -> bytes:
    if is_ptx(source):
      if not self.assembles_ptx: raise CompileError("PTX needs nvJitLink to assemble: pip install nvidia-nvjitlink", source)
      return self._assemble(source)
    return self._compile(source, self._arch_for(source), ptx=False)

  def _arch_for(self, source: str) -> str:
    """The architecture-specific target (sm_90 -> sm_90a: wgmma, setmaxnreg) where the source asks for it."""
    return self.arch + "a" if source.startswith(ARCH_SPECIFIC) and self.arch[-1].isdigit() else self.arch

  def ptx(self, source: str) -> str:
    """PTX for the same architecture (compute_XY), for DEBUG output."""
    if is_ptx(source): return source
    return self._compile(source, self._arch_for(source).replace("sm_", "compute_"), ptx=True).rstrip(b"\0").decode()
