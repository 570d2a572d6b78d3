"""MetalCompiler: MSL -> library bytes (a metallib, the source itself, or a software library); the MSL version to target."""
from __future__ import annotations
import platform, shutil, subprocess
from alloy.helpers import DEBUG
from alloy.runtime.device import CompileError, Compiler

# the newest Metal Shading Language each macOS release compiles, oldest first: (macOS major, (MSL major, minor))
MSL_FOR_MACOS = ((11, (2, 3)), (12, (2, 4)), (13, (3, 0)), (14, (3, 1)), (15, (3, 2)))

def msl_version(macos: str | None = None) -> tuple[int, int]:
  """The MSL version to compile for: the newest this macOS has (2.3 before macOS 11 is not supported by alloy)."""
  release = macos if macos is not None else platform.mac_ver()[0]
  major = int(release.split(".")[0]) if release and release.split(".")[0].isdigit() else 0
  return next((v for m, v in reversed(MSL_FOR_MACOS) if major >= m), MSL_FOR_MACOS[0][1])

def msl_std_flag(version: tuple[int, int]) -> str:
  """xcrun metal's -std= spelling: metal3.1, or macos-metal2.4 before 3.0."""
  return f"-std=metal{version[0]}.{version[1]}" if version >= (3, 0) else f"-std=macos-metal{version[0]}.{version[1]}"

class MetalCompiler(Compiler):
  """MSL -> library bytes: a metallib (`xcrun metal` + `metallib`, magic MTLB) where Xcode is installed,
  otherwise the source itself, compiled by the driver when loaded; a software library on the software device."""
  def __init__(self, software: bool):
    self.software = software
    if software: self.mode = "software"
    else:
      offline = shutil.which("xcrun") and subprocess.run(["xcrun", "-sdk", "macosx", "--find", "metal"], capture_output=True).returncode == 0
      self.mode = "metallib" if offline else "source"
    self.version = msl_version()
    self.identity = f"metal-{self.mode} msl{self.version[0]}.{self.version[1]}" + (" -fno-fast-math" if self.mode == "metallib" else "")
    if software:
      from alloy.runtime.metal.software import compiler as sw
      self.identity += f" format {sw.FORMAT_VERSION} shim {sw.shim_hash()[:16]} {sw.compiler()} {' '.join(sw.KERNEL_FLAGS)}"
    if self.mode == "metallib":
      self.identity += " " + subprocess.run(["xcrun", "-sdk", "macosx", "metal", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    if DEBUG >= 1:
      print({"software": "METAL: software Metal device (MSL compiled as C++ and run on the CPU)",
             "metallib": "METAL: compiling offline with xcrun metal/metallib",
             "source": "METAL: no offline Metal compiler (xcrun metal); the driver compiles the source at load time"}[self.mode])

  def compile(self, source: str) -> bytes:
    if self.mode == "software":
      from alloy.runtime.metal.software import MetalCompileError, compile_library
      try: return compile_library(source)
      except MetalCompileError as e: raise CompileError(str(e), source) from None
    if self.mode == "source": return source.encode()
    # -fno-fast-math: the offline compiler defaults to fast math, which may ignore NaN/Inf (as the runtime's safe math mode)
    air = subprocess.run(["xcrun", "-sdk", "macosx", "metal", msl_std_flag(self.version), "-fno-fast-math", "-x", "metal", "-c", "-", "-o", "-"],
                         input=source.encode(), capture_output=True)
    if air.returncode != 0: raise CompileError(f"xcrun metal failed:\n{air.stderr.decode()}", source)
    lib = subprocess.run(["xcrun", "-sdk", "macosx", "metallib", "-", "-o", "-"], input=air.stdout, capture_output=True)
    if lib.returncode != 0 or lib.stdout[:4] != b"MTLB": raise CompileError(f"xcrun metallib failed:\n{lib.stderr.decode()}", source)
    return lib.stdout
