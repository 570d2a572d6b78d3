"""The standalone C sources (the CUDA launch list's native loop, launch_loop.c; DLPack's callbacks, dlpack.c) compile
without a warning under -Wall -Wextra -Werror, as the CPU device builds them. Needs only a C compiler: no GPU, no CUDA
toolkit, no Python headers. (The CPU queue's sources are built with their defines by test_cpu_c_sources.py.)"""
import subprocess
from pathlib import Path
import pytest
import alloy
from alloy.runtime.cpu.compiler import CFLAGS, find_c_compiler

PACKAGE = Path(alloy.__file__).parent
SOURCES = sorted((PACKAGE / "runtime" / "cuda").glob("*.c")) + [PACKAGE / "dlpack.c"]

def test_sources_found():
  assert {"launch_loop.c", "dlpack.c"} <= {p.name for p in SOURCES} and all(p.exists() for p in SOURCES)

@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_compiles_without_warnings(source, tmp_path):
  cc = find_c_compiler()
  proc = subprocess.run([cc, *CFLAGS, "-Wall", "-Wextra", "-Werror", "-x", "c", str(source), "-o", str(tmp_path / "out.so")],
                        capture_output=True, text=True)
  assert proc.returncode == 0, f"{cc} -Wall -Wextra -Werror {source.name}:\n{proc.stderr}"
